"""Subprocess worker of the Python-API fuzz test (test_fuzz.py).

    python -m test.robustness.py_fuzz_worker MUTANTS.json [--call]

For each module text: `torch_mlir_flex.mlir.ir.Module.parse` in-process,
then, if it parses, `compile_mlir` (materialize + lowering + JIT, via
JitFunction) for every backend, and with --call one call on random inputs
when all shapes are static. Prints one JSON line per step *before* running it
("start") and after ("done", with the outcome) so that the parent can name
the mutant if this process dies.  Allowed outcomes: ok, MLIRError,
FlexBackendError (FlexCompileError); anything else is "unexpected".
"""

import json
import re
import sys
import traceback

import torch_mlir_flex  # noqa: F401  (first)


def _emit(**kw):
    sys.stdout.write(json.dumps(kw) + "\n")
    sys.stdout.flush()


def _inputs(fn):
    import torch

    from torch_mlir_flex.mlir import ir

    dyn = ir.ShapedType.get_dynamic_size()
    args = []
    g = torch.Generator().manual_seed(0)
    for t in fn.jit_function.arg_types:
        shape = list(t.shape)
        if any(d == dyn for d in shape):
            return None
        n = 1
        for d in shape:
            n *= d
        if n > 1 << 20:
            return None
        e = str(t.element_type)
        if e in ("f32", "f16", "bf16", "f64"):
            dt = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16, "f64": torch.float64}[e]
            args.append(torch.randn(*shape, generator=g).to(dt))
        elif e in ("i32", "i64", "i8"):
            # Small non-negative values: mutants index captured tables with them.
            dt = {"i32": torch.int32, "i64": torch.int64, "i8": torch.int8}[e]
            args.append(torch.zeros(*shape, dtype=dt))
        elif e == "i1":
            args.append(torch.zeros(*shape, dtype=torch.bool))
        else:
            return None
    return args


def _entry(text):
    """The first public function (lit-test seeds have no @main)."""
    m = re.search(r"func\.func @([\w$.]+)", text)
    return m.group(1) if m else "main"


def main(argv):
    from torch_mlir_flex.backend import PIPELINES, FlexBackendError, compile_mlir
    from torch_mlir_flex.backend.prechecks import check_known_parser_aborts
    from torch_mlir_flex.mlir import ir

    path = argv[0]
    call = "--call" in argv
    texts = json.load(open(path))
    backends = [b for b in ("reference", "tiled") if b in PIPELINES]
    for i, text in enumerate(texts):
        _emit(event="start", index=i, step="parse")
        try:
            check_known_parser_aborts(text)  # the raw parser would abort on these
            with ir.Context():
                ir.Module.parse(text)
            parsed = True
            outcome = "ok"
        except ir.MLIRError:
            parsed = False
            outcome = "MLIRError"
        except FlexBackendError:
            parsed = False
            outcome = "FlexBackendError"
        except Exception:
            parsed = False
            outcome = "unexpected:" + traceback.format_exc(limit=3)
        _emit(event="done", index=i, step="parse", outcome=outcome)
        if not parsed and "@__flex_attention_" not in text:
            continue
        for b in backends:
            _emit(event="start", index=i, step=f"compile-{b}")
            fn = None
            try:
                fn = compile_mlir(text, backend=b, func_name=_entry(text))
                outcome = "ok"
            except FlexBackendError:
                outcome = "FlexBackendError"
            except Exception:
                outcome = "unexpected:" + traceback.format_exc(limit=5)
            _emit(event="done", index=i, step=f"compile-{b}", outcome=outcome)
            if fn is None or not call:
                continue
            try:
                args = _inputs(fn)
            except Exception:
                args = None
            if args is None:
                continue
            _emit(event="start", index=i, step=f"call-{b}")
            try:
                fn(*args)
                outcome = "ok"
            except FlexBackendError:
                outcome = "FlexBackendError"
            except Exception:
                outcome = "unexpected:" + traceback.format_exc(limit=5)
            _emit(event="done", index=i, step=f"call-{b}", outcome=outcome)
    _emit(event="finished")


if __name__ == "__main__":
    main(sys.argv[1:])
