"""pytest: the importer's FX clean-ups are one ordered list
(importer/cleanups.py): its names in order, a reason for each, and
export_and_import running exactly that list, in that order."""

import torch
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

from torch_mlir_flex.importer import cleanups, export_and_import
from torch_mlir_flex.importer.cleanups import CLEANUPS, Cleanup, run_cleanups
from torch_mlir_flex.importer.decompositions import flex_decomposition_table
from test_dead_code import DocumentMask, _inputs as _document_inputs  # create_block_mask in forward

B, H, S, D = 1, 2, 32, 16

EXPECTED = (
    "forget_capture_constant_values",
    "inline_scalar_constants",
    "strip_block_mask_tensors",
    "erase_dead_code",
    "recompile",
    "retarget_operator_aliases",
    "inline_flat_apply_calls",
    "expand_new_ones_calls",
    "run_decompositions",
    "print_graph",
    "rewrite_quantized_linears",
    "scalar_captures_to_tensors",
    "retarget_symbolic_ops",
    "widen_mixed_indices",
)

CAUSAL = create_block_mask(lambda b, h, q, k: q >= k, 1, 1, S, S, device="cpu", BLOCK_SIZE=16)


class Linear(torch.nn.Module):
    """nn.Linear's aten.linear is CompositeImplicitAutograd: takes the re-trace."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(D, D)

    def forward(self, q, k, v):
        return flex_attention(self.proj(q), k, v, block_mask=CAUSAL)


class Causal(torch.nn.Module):
    def forward(self, q, k, v):
        return flex_attention(q, k, v, block_mask=CAUSAL)


def _qkv():
    g = torch.Generator().manual_seed(0)
    return tuple(torch.randn(B, H, S, D, generator=g) for _ in range(3))


def _exported(module, args):
    with torch.no_grad():
        return torch.export.export(module, args)


def test_names_in_order():
    assert tuple(c.name for c in CLEANUPS) == EXPECTED


def test_each_entry_has_a_reason():
    for c in CLEANUPS:
        assert isinstance(c, Cleanup) and callable(c.run), c.name
        assert isinstance(c.why, str) and len(c.why.strip()) > 20, c.name
        assert "\n" not in c.why, c.name


def _recording(monkeypatch):
    """Wraps every entry so that running it records (name, nodes erased so far)."""
    seen = []

    def wrap(c):
        def run(state):
            c.run(state)
            seen.append((c.name, state.erased))

        return Cleanup(c.name, run, c.why)

    monkeypatch.setattr(cleanups, "CLEANUPS", tuple(wrap(c) for c in CLEANUPS))
    return seen


def test_export_and_import_runs_the_list_in_order(monkeypatch):
    seen = _recording(monkeypatch)
    module = export_and_import(DocumentMask(), *_document_inputs())
    assert tuple(name for name, _ in seen) == EXPECTED
    erased = dict(seen)
    assert erased["strip_block_mask_tensors"] > 0  # the dead mask construction
    assert erased["erase_dead_code"] > erased["strip_block_mask_tensors"]  # vmap bookkeeping too
    text = str(module)
    assert "hop_flex_attention" in text
    assert "aten.__and__" not in text and "aten.bitwise_and" in text


def test_run_cleanups_returns_the_decomposed_program():
    table = flex_decomposition_table()
    prog = _exported(Linear(), _qkv())
    out = run_cleanups(prog, table)
    assert out is not prog  # run_decompositions replaced it
    assert not any(n.target is torch.ops.aten.linear.default for n in out.graph.nodes)
    prog = _exported(Causal(), _qkv())
    assert run_cleanups(prog, table) is prog  # nothing to decompose: the re-trace skipped


def test_print_graph_only_when_asked(capsys):
    export_and_import(Causal(), *_qkv())
    assert "GraphModule" not in capsys.readouterr().out
    export_and_import(Causal(), *_qkv(), enable_graph_printing=True)
    assert "GraphModule" in capsys.readouterr().out
