"""A BlockMask as a model input: `compile(model, (q, k, v, block_mask))`.

The BlockMask's tensors and the tensors its mask_mod closes over are runtime
inputs; the callable checks that a BlockMask given at call time has the
compiled seq_lengths, BLOCK_SIZE and mask_mod. Numerics against eager.

    PYTHONPATH=python pytest -q test/python/backend/test_block_mask_input.py
"""

import warnings

import torch_mlir_flex  # noqa: F401  (before torch_mlir)
import pytest
import torch
from torch.export import Dim
from torch.nn.attention.flex_attention import AuxRequest, BlockMask, create_block_mask, flex_attention

from torch_mlir_flex.backend import FlexCompileError

warnings.filterwarnings("ignore")

BACKENDS = ["reference", "tiled"]
S = 128


def causal(b, h, q, kv):
    return q >= kv


def sliding(window):
    def mask(b, h, q, kv):
        return (q >= kv) & (q - kv <= window)
    return mask


def same_doc(doc):
    def mask(b, h, q, kv):
        return doc[q] == doc[kv]
    return mask


def docs(*lengths):
    return torch.cat([torch.full((n,), i) for i, n in enumerate(lengths)])


def block_mask(mask_mod, B=1, H=1, block=64):
    return create_block_mask(mask_mod, B, H, S, S, device="cpu", BLOCK_SIZE=block)


def qkv(B=1, Hq=2, Hkv=2, E=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, Hq, S, E, generator=g)
    return q, torch.randn(B, Hkv, S, E, generator=g), torch.randn(B, Hkv, S, E, generator=g)


class Attention(torch.nn.Module):
    def forward(self, q, k, v, block_mask):
        return flex_attention(q, k, v, block_mask=block_mask)


class GqaWithLse(torch.nn.Module):
    def forward(self, q, k, v, block_mask):
        out, aux = flex_attention(q, k, v, block_mask=block_mask, enable_gqa=True,
                                  return_aux=AuxRequest(lse=True))
        return out, aux.lse


class DocBias(torch.nn.Module):
    """Document ids as a model input: a score_mod reads them, and the
    BlockMask passed next to them masks across documents."""

    def forward(self, q, k, v, doc, block_mask):
        def bias(score, b, h, qi, kv):
            return score + 0.5 * doc[kv].to(score.dtype)
        return flex_attention(q, k, v, score_mod=bias, block_mask=block_mask)


def check(fn, model, *args):
    got, expected = fn(*args), model(*args)
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_causal_block_mask_argument(backend):
    bm = block_mask(causal)
    fn = torch_mlir_flex.compile(Attention(), (*qkv(), bm), backend=backend)
    check(fn, Attention(), *qkv(seed=1), bm)
    # The block tensors are runtime inputs of the exported program.
    assert fn.num_inputs == 3 + 8
    assert "block_mask_kv_indices" in str(fn.exported_program.graph_signature)


@pytest.mark.parametrize("backend", BACKENDS)
def test_sliding_window(backend):
    bm = block_mask(sliding(20), block=32)
    fn = torch_mlir_flex.compile(Attention(), (*qkv(), bm), backend=backend)
    check(fn, Attention(), *qkv(seed=2), bm)
    # The window is a non-tensor closure value: a compile-time constant.
    with pytest.raises(FlexCompileError, match=r"argument 3 \(block_mask\): mask_mod capture 0 is 40, "
                                               r"compiled with 20"):
        fn(*qkv(), block_mask(sliding(40), block=32))
    with pytest.raises(FlexCompileError, match=r"mask_mod capture 0 is a Tensor, compiled with 20"):
        fn(*qkv(), block_mask(sliding(torch.tensor(20)), block=32))


@pytest.mark.parametrize("backend", BACKENDS)
def test_document_ids_captured_by_mask_mod_are_runtime_inputs(backend):
    bm = block_mask(same_doc(docs(40, 50, 38)))
    fn = torch_mlir_flex.compile(Attention(), (*qkv(), bm), backend=backend)
    check(fn, Attention(), *qkv(), bm)
    # Same mask_mod over other documents (other blocks too): read at call time.
    other = block_mask(same_doc(docs(70, 10, 48)))
    check(fn, Attention(), *qkv(seed=3), other)
    assert not torch.allclose(fn(*qkv(), other), fn(*qkv(), bm))


@pytest.mark.parametrize("backend", BACKENDS)
def test_document_ids_as_model_input_next_to_block_mask(backend):
    d = docs(60, 68)
    fn = torch_mlir_flex.compile(DocBias(), (*qkv(), d, block_mask(same_doc(d))), backend=backend)
    d2 = docs(20, 30, 78)
    check(fn, DocBias(), *qkv(seed=4), d2, block_mask(same_doc(d2)))


DOC = docs(64, 64)


def global_doc(b, h, q, kv):
    return DOC[q] == DOC[kv]


def test_tensor_read_through_a_global_is_frozen():
    bm = block_mask(global_doc)
    fn = torch_mlir_flex.compile(Attention(), (*qkv(), bm), backend="tiled")
    args = qkv(seed=5)
    expected = Attention()(*args, bm)
    DOC[:] = docs(100, 28)  # not an input: the compiled mask keeps the old ids
    try:
        assert not torch.allclose(Attention()(*args, bm), expected)
        torch.testing.assert_close(fn(*args, bm), expected, rtol=1e-4, atol=1e-5)
    finally:
        DOC[:] = docs(64, 64)


@pytest.mark.parametrize("backend", BACKENDS)
def test_gqa_with_lse(backend):
    bm = block_mask(sliding(48), B=2, H=4)
    args = qkv(B=2, Hq=4, Hkv=2)
    fn = torch_mlir_flex.compile(GqaWithLse(), (*args, bm), backend=backend)
    out, lse = fn(*qkv(B=2, Hq=4, Hkv=2, seed=6), bm)
    eout, else_ = GqaWithLse()(*qkv(B=2, Hq=4, Hkv=2, seed=6), bm)
    torch.testing.assert_close(out, eout, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(lse, else_, rtol=1e-4, atol=1e-5)


def test_plain_callable_and_dynamic_batch():
    def attend(q, k, v, bm):
        return flex_attention(q, k, v, block_mask=bm)

    bm = block_mask(causal)
    B = Dim("B", min=1, max=8)
    fn = torch_mlir_flex.compile(attend, (*qkv(B=2), bm),
                                 dynamic_shapes={"args": ({0: B}, {0: B}, {0: B}, None)})
    for batch in (1, 3):
        check(fn, attend, *qkv(B=batch, seed=batch), bm)


@pytest.fixture(scope="module")
def causal_fn():
    return torch_mlir_flex.compile(Attention(), (*qkv(), block_mask(causal)), backend="tiled")


@pytest.mark.parametrize("bad,message", [
    (lambda: block_mask(causal, block=32), r"BLOCK_SIZE \(32, 32\) differs from the compiled \(64, 64\)"),
    (lambda: create_block_mask(causal, 1, 1, 64, 64, device="cpu", BLOCK_SIZE=64),
     r"seq_lengths \(64, 64\) differs from the compiled \(128, 128\)"),
    (lambda: block_mask(sliding(8)), r"mask_mod sliding.<locals>.mask is not the compiled mask_mod causal"),
    (lambda: BlockMask.from_kv_blocks(*block_mask(causal).as_tuple()[2:4], BLOCK_SIZE=64, mask_mod=causal),
     r"full_kv_num_blocks is None, but in the compiled BlockMask it was set"),
    (lambda: torch.ones(1), r"expected a BlockMask, got Tensor"),
])
def test_mismatched_block_mask_is_refused(causal_fn, bad, message):
    with pytest.raises(FlexCompileError, match=r"call: argument 3 \(block_mask\): " + message):
        causal_fn(*qkv(), bad())


def test_wrong_argument_count(causal_fn):
    with pytest.raises(FlexCompileError, match=r"takes 4 argument\(s\), got 3"):
        causal_fn(*qkv())


def test_dynamic_sequence_length_with_a_block_mask_is_refused_by_export():
    S_ = Dim("S", min=2, max=256)
    spec = {"q": {2: S_}, "k": {2: S_}, "v": {2: S_}, "block_mask": None}
    with pytest.raises(FlexCompileError, match=r"(?s)export: .*specialized it to be a constant \(128\)"):
        torch_mlir_flex.compile(Attention(), (*qkv(), block_mask(causal)), dynamic_shapes=spec)


def test_dynamic_shapes_on_a_block_mask_is_refused():
    bm = block_mask(causal)
    with pytest.raises(FlexCompileError, match=r"argument 3 \(block_mask\): a BlockMask has static shapes"):
        torch_mlir_flex.compile(Attention(), (*qkv(), bm), dynamic_shapes={"block_mask": {0: Dim("B")}})


def test_torch_compile_backend_takes_block_mask_arguments():
    """Dynamo lifts the BlockMask's tensors (and the mask_mod's captured
    tensors) to graph inputs itself, and guards on its metadata: a new
    BLOCK_SIZE recompiles."""
    from torch_mlir_flex import dynamo

    dynamo.register()
    torch._dynamo.reset()
    compiled = torch.compile(Attention(), backend="torch_mlir_flex", dynamic=False)
    before = dict(dynamo.stats)
    with torch.no_grad():
        for d in (docs(40, 50, 38), docs(70, 10, 48)):
            check(compiled, Attention(), *qkv(), block_mask(same_doc(d)))
        assert dynamo.stats["compiled"] - before.get("compiled", 0) == 1
        check(compiled, Attention(), *qkv(), block_mask(causal, block=32))
    assert dynamo.stats["compiled"] - before.get("compiled", 0) == 2
    assert dynamo.stats["eager"] == before.get("eager", 0)


def test_composed_mask_mod_with_captured_documents():
    """and_masks nests the user's closures: their tensors are inputs too."""
    from torch.nn.attention.flex_attention import and_masks

    def make(d):
        return block_mask(and_masks(causal, same_doc(d)))

    fn = torch_mlir_flex.compile(Attention(), (*qkv(), make(docs(50, 78))), backend="tiled")
    check(fn, Attention(), *qkv(seed=7), make(docs(30, 30, 68)))


def test_block_mask_for_another_batch_is_refused_by_shape(causal_fn):
    with pytest.raises(FlexCompileError, match=r"call: argument 3 \(block_mask_kv_num_blocks\): "
                                               r"expected shape \[1x1x2\], got \[2, 1, 2\]"):
        causal_fn(*qkv(), block_mask(causal, B=2))


CLI_MODEL_FILE = '''
import torch
from torch.nn.attention.flex_attention import create_block_mask, flex_attention
def same_doc(doc):
    def mask(b, h, q, kv):
        return doc[q] == doc[kv]
    return mask
class M(torch.nn.Module):
    def forward(self, q, k, v, block_mask):
        return flex_attention(q, k, v, block_mask=block_mask)
def get_model():
    return M()
def get_inputs():
    doc = torch.sort(torch.randint(0, 3, (64,))).values
    bm = create_block_mask(same_doc(doc), None, None, 64, 64, device="cpu", BLOCK_SIZE=32)
    return (*(torch.randn(1, 2, 64, 8) for _ in range(3)), bm)
'''


def test_cli_runs_a_model_file_with_a_block_mask_input(tmp_path):
    import os
    import subprocess
    import sys

    (tmp_path / "model.py").write_text(CLI_MODEL_FILE)
    env = dict(os.environ)
    py = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "python"))
    env["PYTHONPATH"] = py + os.pathsep + env.get("PYTHONPATH", "")
    r = subprocess.run([sys.executable, "-m", "torch_mlir_flex", "compile", str(tmp_path / "model.py"), "--run"],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.rstrip().endswith("OK")
