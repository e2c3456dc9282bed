"""Identical decoder layers compile once: flex-outline-loops moves every loop
nest into a private function and merges identical ones, so the functions
the JIT compiles for a 6-layer model are those of a 2-layer one (weights
are runtime arguments, so the layers' loop nests are the same). The entry
function keeps only calls, and the logits still match HF eager attention."""

import re

import pytest

import torch_mlir_flex
import torch

pytest.importorskip("transformers")

from .families import DECODER, TOLERANCE  # noqa: E402
from .harness import OPT_LEVEL  # noqa: E402


def _models(layers):
    import transformers

    cfg = dict(DECODER, num_hidden_layers=layers)
    torch.manual_seed(0)
    flex = transformers.LlamaForCausalLM(transformers.LlamaConfig(**cfg, attn_implementation="flex_attention"))
    eager = transformers.LlamaForCausalLM(transformers.LlamaConfig(**cfg, attn_implementation="eager"))
    eager.load_state_dict(flex.state_dict())
    return flex.eval(), eager.eval()


def _outlined(lowered_ir):
    """Names of the outlined functions and the number of calls of each."""
    names = re.findall(r"llvm\.func internal @(main__loops\d+)\(", lowered_ir)
    return {n: len(re.findall(rf"llvm\.call @{n}\(", lowered_ir)) for n in names}


def test_layers_share_their_functions():
    ids = torch.randint(3, 128, (1, 24), generator=torch.Generator().manual_seed(3))
    outlined = {}
    for layers in (2, 6):
        flex, eager = _models(layers)
        fn = torch_mlir_flex.hf.compile(flex, {"input_ids": ids}, opt_level=OPT_LEVEL)
        with torch.no_grad():
            want = eager(input_ids=ids).logits
        err = (fn(input_ids=ids) - want).abs().max().item()
        assert err <= TOLERANCE[torch.float32], f"{layers} layers: max |ours - HF eager| = {err:.3g}"
        outlined[layers] = _outlined(fn.compiled.lowered_ir)
        # No loop left in the entry: its body is straight-line.
        entry = fn.compiled.lowered_ir.split("llvm.func internal @main(", 1)[1].split("\n  }\n", 1)[0]
        assert "omp.parallel" not in entry
    two, six = outlined[2], outlined[6]
    assert len(two) > 10, two  # every elementwise op, norm and attention nest
    assert len(six) == len(two), (sorted(two), sorted(six))
    # The per-layer functions are called three times as often.
    assert sum(six.values()) > 2.5 * sum(two.values()) - 3 * len(two), (two, six)
