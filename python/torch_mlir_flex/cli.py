"""Command line: `python -m torch_mlir_flex` / `torch-mlir-flex`.

    torch-mlir-flex compile MODEL.py  [--backend B] [--print-after STAGE ...] [--run]
    torch-mlir-flex compile FILE.mlir [--backend B] [--print-after STAGE ...] [--run]

Model files (`.py`) define two functions:

    def get_model():  -> torch.nn.Module      (or any callable on tensors)
    def get_inputs(): -> tuple of torch.Tensor (example inputs; draw them
                         from torch.randn & co: --run calls it again after
                         seeding torch to get fresh random inputs; a
                         BlockMask may be among them, see docs/runtime.md)

and optionally `get_dynamic_shapes()` (passed to torch.export) and
`TOLERANCE = dict(rtol=..., atol=...)` for --run. `.mlir` files hold either
the frontend's linalg-on-tensors output (outlined `@__flex_attention_N`
calls) or flex IR (`flex.attention` ops); the entry is `@main` (--func).

Stages for --print-after (repeatable, printed to stdout in pipeline order):
`torch` (imported Torch IR), `linalg` (frontend output), `flex` (after
flex-materialize), `loops` (the lowering pipeline up to scf, before
convert-scf-to-cf), `llvm` (the whole pipeline).

--run: model files are run on random inputs and compared with eager
PyTorch (max abs error printed; exit 1 on mismatch); `.mlir` files are run
on random inputs (N(0,1) floats, small non-negative ints, random bools;
`?` dims get --dim-size) and the output shapes are printed.

Errors (missing or malformed file, compile failure) are printed on stderr
as `torch-mlir-flex: error: ...` with exit status 1; no traceback unless
--traceback. The work runs in a child process, so that even a crash inside
MLIR or LLVM (an assertion, a segfault) ends in that message and exit 1.
"""

import argparse
import os
import signal
import subprocess
import sys

STAGES = ("torch", "linalg", "flex", "loops", "llvm")
PROG = "torch-mlir-flex"


class CliError(Exception):
    pass


def _stages():
    # The module torch_mlir_flex.backend.compile (the package attribute of
    # that name is the compile() function).
    import importlib

    return importlib.import_module("torch_mlir_flex.backend.compile")


def _parser():
    from .backend.pipelines import DEFAULT_BACKEND, PIPELINES

    p = argparse.ArgumentParser(prog=PROG, description="Compile PyTorch flex_attention models with torch-mlir-flex.",
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="See `python -m torch_mlir_flex compile --help`.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    c = sub.add_parser("compile", help="compile a model file (.py) or an MLIR file (.mlir)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    c.add_argument("input", metavar="FILE", help="MODEL.py or FILE.mlir")
    c.add_argument("--backend", default=DEFAULT_BACKEND, choices=sorted(PIPELINES), help="lowering pipeline")
    c.add_argument("--print-after", action="append", default=[], choices=STAGES, metavar="STAGE",
                   help=f"print the IR after STAGE ({'|'.join(STAGES)}); repeatable")
    c.add_argument("--run", action="store_true", help="run on random inputs (and compare with eager for .py)")
    c.add_argument("--seed", type=int, default=0, help="torch seed for --run inputs")
    c.add_argument("--func", default="main", help="entry function of an .mlir file")
    c.add_argument("--dim-size", type=int, default=16, help="size of dynamic dims for --run on .mlir")
    c.add_argument("--traceback", action="store_true", help="show Python tracebacks of errors")
    return p


def _print_stage(stage, text):
    print(f"// ----- IR after {stage} -----")
    print(text.rstrip("\n"))
    sys.stdout.flush()


def _load_model_file(path):
    import importlib.util

    name = "torch_mlir_flex_model_" + "".join(ch if ch.isalnum() else "_" for ch in
                                              os.path.splitext(os.path.basename(path))[0])
    spec = importlib.util.spec_from_file_location(name, os.path.abspath(path))
    module = importlib.util.module_from_spec(spec)
    # A real module in sys.modules: torch.export/dynamo look up functions'
    # __module__; the file's directory is importable for its own imports.
    sys.modules[name] = module
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        spec.loader.exec_module(module)
    except SystemExit as e:
        raise CliError(f"{path}: the model file called exit({e.code})") from None
    except BaseException as e:  # SyntaxError, ImportError, anything it raises
        raise CliError(f"{path}: cannot load the model file: {type(e).__name__}: {e}") from e
    ns = vars(module)
    missing = [n for n in ("get_model", "get_inputs") if not callable(ns.get(n))]
    if missing:
        raise CliError(f"{path}: a model file must define functions get_model() and get_inputs(); "
                       f"missing: {', '.join(missing)}")
    return ns


def _call(ns, name, path):
    try:
        return ns[name]()
    except Exception as e:
        raise CliError(f"{path}: {name}() raised {type(e).__name__}: {e}") from e


def _inputs(ns, path, seed=None):
    import torch
    from torch.nn.attention.flex_attention import BlockMask

    if seed is not None:
        torch.manual_seed(seed)
    inputs = _call(ns, "get_inputs", path)
    if isinstance(inputs, torch.Tensor):
        inputs = (inputs,)
    if not isinstance(inputs, (tuple, list)) or not all(isinstance(t, (torch.Tensor, BlockMask)) for t in inputs):
        raise CliError(f"{path}: get_inputs() must return a tuple of torch.Tensor (or BlockMask)")
    return tuple(inputs)


def _compile_model_file(path, args):
    import torch

    from .backend.block_mask_args import flatten_block_masks

    c = _stages()

    ns = _load_model_file(path)
    torch.manual_seed(args.seed)
    model = _call(ns, "get_model", path)
    if isinstance(model, torch.nn.Module):
        model.eval()
    inputs = _inputs(ns, path)
    dyn = _call(ns, "get_dynamic_shapes", path) if callable(ns.get("get_dynamic_shapes")) else None
    want = set(args.print_after)
    flat_model, flat_inputs, dyn, layout = flatten_block_masks(model, inputs, dyn)
    ep = c.export_model(flat_model, flat_inputs, dyn)
    tm = c.import_model(ep)
    if "torch" in want:
        _print_stage("torch", str(tm))
    linalg = c.to_linalg(tm)
    if "linalg" in want:
        _print_stage("linalg", linalg)
    return _finish(linalg, args, model=model, ns=ns, path=path, ep=ep, layout=layout)


def _compile_mlir_file(path, args):
    try:
        with open(path) as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise CliError(f"cannot read {path}: {e}") from None
    c = _stages()

    if "torch" in args.print_after:
        raise CliError("--print-after torch needs a model file (.py), not an .mlir file")
    c._parse(text, _new_context(), "parse")  # syntax/verifier errors before anything else
    if "linalg" in args.print_after:
        if not c.has_outlined_flex_calls(text):
            raise CliError(f"{path} holds no outlined flex calls (not frontend output): no 'linalg' stage")
        _print_stage("linalg", text)
    return _finish(text, args, path=path)


def _new_context():
    from .mlir import ir

    return ir.Context()


def _finish(linalg_or_flex, args, model=None, ns=None, path=None, ep=None, layout=None):
    c = _stages()

    want = set(args.print_after)
    flex = c.materialize(linalg_or_flex)
    if "flex" in want:
        _print_stage("flex", flex)
    if "loops" in want:
        _print_stage("loops", c.lower_to_loops(flex, args.backend))
    if not (args.run or "llvm" in want):
        print(f"{PROG}: compiled {path} (backend {args.backend})", file=sys.stderr)
        return 0
    fn = c.jit(flex, args.func, args.backend)
    if "llvm" in want:
        _print_stage("llvm", str(fn.lowered))
    if not args.run:
        return 0
    return _run(fn, args, model, ns, path, ep, layout)


def _random_like(t, dim_size):
    import torch

    from .backend.compile import _dynamic_size, _mlir_to_torch_dtype

    dt = _mlir_to_torch_dtype(t)
    if dt is None:
        raise CliError(f"cannot make a random input of type {t}")
    shape = [dim_size if d == _dynamic_size() else d for d in t.shape]
    if dt.is_floating_point:
        return torch.randn(shape).to(dt)
    if dt == torch.bool:
        return torch.rand(shape) > 0.5
    return torch.randint(0, 4, shape, dtype=dt)


def _run(fn, args, model, ns, path, ep, layout=None):
    import torch

    from .backend import FlexBackendError
    from .backend.compile import CompiledModule
    from .backend.testing import compare_outputs

    torch.manual_seed(args.seed + 1)
    if model is None:
        inputs = [_random_like(t, args.dim_size) for t in fn.arg_types]
        res = fn(*inputs)
        res = res if isinstance(res, tuple) else (res,)
        for i, r in enumerate(res):
            print(f"result {i}: {r.dtype} {list(r.shape)}  mean={r.double().mean().item():.6g}")
        return 0
    compiled = CompiledModule(jit_function=fn, backend=args.backend, func_name=args.func, torch_ir=None,
                              linalg_ir=None, flex_ir="", exported_program=ep, out_spec=ep.call_spec.out_spec,
                              arg_layout=layout)
    inputs = _inputs(ns, path, seed=args.seed + 1)
    with torch.no_grad():
        try:
            expected = model(*inputs)
        except Exception as e:
            raise CliError(f"{path}: eager model raised {type(e).__name__}: {e}") from e
    try:
        got = compiled(*inputs)
    except FlexBackendError as e:
        raise CliError(str(e)) from e
    tol = dict(rtol=1e-3, atol=1e-5)
    tol.update(ns.get("TOLERANCE") or {})
    ok, err, msg = compare_outputs(got, expected, **tol)
    print(f"max abs error vs eager: {err:.3e} (rtol={tol['rtol']}, atol={tol['atol']})")
    if not ok:
        print(f"MISMATCH: {msg}")
        return 1
    print("OK")
    return 0


# Set in the child process that does the work (see `main`).
_CHILD_ENV = "TORCH_MLIR_FLEX_CLI_CHILD"


def _crash_message(rc: int) -> str:
    sig = -rc if rc < 0 else rc - 128
    try:
        what = f"signal {signal.Signals(sig).name}"
    except ValueError:
        what = f"exit status {rc}"
    return (f"{PROG}: error: the process crashed ({what}) instead of reporting an error; "
            "this is a bug in torch-mlir-flex or MLIR (see the messages above)")


def main(argv=None) -> int:
    """Runs `_main` in a child process and turns a crash of that process
    into `torch-mlir-flex: error: ...` and exit status 1."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if os.environ.get(_CHILD_ENV):
        return _main(argv)
    env = dict(os.environ, **{_CHILD_ENV: "1"})
    try:
        rc = subprocess.call([sys.executable, "-m", "torch_mlir_flex", *argv], env=env)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    if rc < 0 or rc > 130 or rc == 128:
        sys.stdout.flush()
        print(_crash_message(rc), file=sys.stderr)
        return 1
    return rc


def _main(argv) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command != "compile":
        parser.print_help(sys.stderr)
        return 2
    try:
        import warnings

        warnings.filterwarnings("ignore")
        path = args.input
        if not os.path.isfile(path):
            raise CliError(f"no such file: {path}")
        if path.endswith(".py"):
            return _compile_model_file(path, args)
        if path.endswith(".mlir"):
            return _compile_mlir_file(path, args)
        raise CliError(f"{path}: expected a model file (.py) or an MLIR file (.mlir)")
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except Exception as e:
        if args.traceback:
            import traceback

            traceback.print_exc()
        from .backend import FlexBackendError

        msg = str(e) if isinstance(e, (CliError, FlexBackendError)) else f"{type(e).__name__}: {e}"
        print(f"{PROG}: error: {msg}", file=sys.stderr)
        return 1
