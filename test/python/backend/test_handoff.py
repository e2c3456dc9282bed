"""Hand-off test: for every e2e model, the torch-mlir wheel's frontend output
(linalg-on-tensors with flex outlined) parses and verifies in OUR MLIR
context (torch_mlir_flex.mlir, a separate MLIR 22.1.8 build).

    PYTHONPATH=python:. pytest -q test/python/backend/test_handoff.py
"""

import os
import sys
import warnings

import torch_mlir_flex  # noqa: F401  (before torch_mlir)
import pytest

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..")))

from projects.e2e.registry import all_cases  # noqa: E402
from projects.e2e.runner import frontend_text  # noqa: E402
from torch_mlir_flex.mlir import ir  # noqa: E402

CASES = all_cases()


def _funcs(module):
    return {ir.StringAttr(op.attributes["sym_name"]).value: op
            for op in module.body.operations if op.operation.name == "func.func"}


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_frontend_output_parses_in_our_context(case):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        text = frontend_text(case)
    ctx = ir.Context()
    module = ir.Module.parse(text, ctx)  # raises MLIRError on failure
    assert module.operation.verify()
    funcs = _funcs(module)
    assert "main" in funcs
    decls = {n: f for n, f in funcs.items() if n.startswith("__flex_attention_")}
    assert decls, "no outlined flex call"
    for name, f in decls.items():
        attrs = {a for a in ("flex.scale", "flex.num_score_buffers", "flex.num_mask_buffers", "flex.score_mod", "flex.mask_mod") if a in f.attributes}
        assert {"flex.scale", "flex.num_score_buffers", "flex.num_mask_buffers"} <= attrs, (name, attrs)
        for mod in ("flex.score_mod", "flex.mask_mod"):
            if mod in attrs:
                sym = ir.FlatSymbolRefAttr(f.attributes[mod]).value
                assert sym in funcs, f"{name}: {mod} @{sym} missing"
    # Round trip through our printer.
    again = ir.Module.parse(str(module), ir.Context())
    assert str(again) == str(module)
