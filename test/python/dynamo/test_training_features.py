"""Training features through `torch.compile(model, backend="torch_mlir_flex")`
(docs/training.md "What trains compiled"): activation checkpointing
(transformers' `gradient_checkpointing_enable()`, both `use_reentrant`, and
`torch.utils.checkpoint.checkpoint` by hand), CPU bfloat16 autocast, tied
embeddings and an embedding `padding_idx`, on a tiny transformers Llama
with SDPA or flex_attention: the loss and every gradient against eager
PyTorch (SDPA attention), nothing run in eager, no graph breaks. Also the
decomposition of the CPU flash SDPA op (importer/decompositions.py) that a
training forward graph saves logsumexp from when SDPA stays SDPA.

Plain training steps are tested in test_sdpa_as_flex.py and
test_graph_breaks.py."""

import torch_mlir_flex  # noqa: F401  (before torch-mlir)

import copy

import pytest
import torch
import torch.nn.functional as F
from torch._dynamo.utils import counters

from torch_mlir_flex import dynamo

dynamo.register()

SEQ, BATCH, VOCAB = 16, 2, 128
# LLVM at -O0: the Llama tests' time is mostly compiling (numerics do not
# depend on the level).
OPTIONS = {"opt_level": 0}


def _llama(attn, **config):
    """One decoder layer (GQA: 4 query, 2 key/value heads) and its eager
    SDPA twin (the training speed of this file: two layers take twice as long
    and test nothing more)."""
    import transformers

    torch.manual_seed(0)
    conf = transformers.LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                                    num_attention_heads=4, num_key_value_heads=2, vocab_size=VOCAB,
                                    max_position_embeddings=64, use_cache=False, **config)
    conf._attn_implementation = attn
    model = transformers.LlamaForCausalLM(conf).train()
    ref = copy.deepcopy(model)
    ref.config._attn_implementation = "sdpa"
    return model, ref


def _ids(seed=1):
    return torch.randint(0, VOCAB, (BATCH, SEQ), generator=torch.Generator().manual_seed(seed))


def _step(model, ids, autocast=False):
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    return loss.detach()


def _assert_grads_close(model, ref, grad_tol):
    """Every parameter's gradient within `grad_tol` of eager `ref`'s,
    relative to the largest entry of eager's."""
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        assert p.grad is not None, name
        err = (p.grad - q.grad).abs().max().item() / (q.grad.abs().max().item() + 1e-12)
        assert err <= grad_tol, (name, err)


def _check(model, ref, ids, fresh, autocast=False, rtol=1e-5, grad_tol=1e-4):
    """One compiled step against eager `ref`: loss, every gradient (relative
    to its largest entry), one forward and one backward graph, none in
    eager, no graph breaks."""
    delta, warned = fresh
    loss = _step(torch.compile(model, backend="torch_mlir_flex", options=OPTIONS), ids, autocast)
    want = _step(ref, ids, autocast)
    assert abs(loss.item() - want.item()) <= rtol * abs(want.item()), (loss, want)
    _assert_grads_close(model, ref, grad_tol)
    assert (delta("forward"), delta("backward"), delta("eager")) == (1, 1, 0), (dict(dynamo.stats), list(warned))
    assert sum(counters["graph_break"].values()) == 0, dict(counters["graph_break"])
    assert not warned


def _compare_step(model, ref, x, loss_tol, grad_tol):
    """`model` compiled and its eager twin `ref`, a step each on `x`: the
    losses within `loss_tol` (rtol, atol), the gradients as
    _assert_grads_close."""
    loss = torch.compile(model, backend="torch_mlir_flex", options=OPTIONS)(x)
    loss.backward()
    want = ref(x)
    want.backward()
    torch.testing.assert_close(loss, want, rtol=loss_tol[0], atol=loss_tol[1])
    _assert_grads_close(model, ref, grad_tol)


@pytest.mark.parametrize("attn,reentrant", [("sdpa", False), ("flex_attention", True)])
def test_gradient_checkpointing(attn, reentrant, fresh):
    """Each decoder layer runs under torch.utils.checkpoint (Dynamo's
    tag_activation_checkpoint body, rewritten to flex_attention for SDPA:
    dynamo/sdpa_regions.py); use_cache=False, as transformers sets it (with
    use_cache=True its warning_once breaks the graph: 2 graphs, still
    compiled)."""
    model, ref = _llama(attn)
    for m in (model, ref):
        m.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": reentrant})
    _check(model, ref, _ids(), fresh)
    if attn == "sdpa":
        assert fresh[0]("sdpa_as_flex") == 1  # inside the checkpoint body


class _Checkpointed(torch.nn.Module):
    """A projection and causal SDPA inside `checkpoint(fn, x, use_reentrant=False)`."""

    def __init__(self, d=16, heads=2):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.out = torch.nn.Linear(d, d)

    def block(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return x + self.out(o.transpose(1, 2).reshape(b, s, d))

    def forward(self, x):
        from torch.utils.checkpoint import checkpoint

        return checkpoint(self.block, x, use_reentrant=False).square().mean()


def test_hand_written_checkpoint(fresh):
    delta, warned = fresh
    torch.manual_seed(0)
    model = _Checkpointed()
    ref = copy.deepcopy(model)
    x = torch.randn(2, 12, 16, requires_grad=True)
    xr = x.detach().clone().requires_grad_()
    loss = torch.compile(model, backend="torch_mlir_flex", options=OPTIONS)(x)
    loss.backward()
    want = ref(xr)
    want.backward()
    torch.testing.assert_close(loss, want, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(x.grad, xr.grad, rtol=1e-4, atol=1e-5)
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5, msg=lambda m: f"{name}: {m}")
    assert (delta("forward"), delta("backward"), delta("eager"), delta("sdpa_as_flex")) == (1, 1, 0, 1), \
        (dict(dynamo.stats), list(warned))
    assert sum(counters["graph_break"].values()) == 0


@pytest.mark.parametrize("attn", ["sdpa", "flex_attention"])
def test_bf16_autocast(attn, fresh):
    """f32 master weights, forward and loss under CPU bf16 autocast: SDPA's
    q/k (f32 after the rotary embedding) and v (bf16) are cast as autocast
    casts them, then rewritten. Gradients within bf16 rounding (2^-8) of
    eager autocast's, relative to each gradient's largest entry."""
    model, ref = _llama(attn)
    _check(model, ref, _ids(), fresh, autocast=True, rtol=1e-3, grad_tol=2e-2)
    if attn == "sdpa":
        assert fresh[0]("sdpa_as_flex") == 1


class _AutocastInside(torch.nn.Module):
    """`torch.autocast` entered in forward (Dynamo records
    `_enter_autocast` / `_exit_autocast`): q in float32, v in bfloat16."""

    def __init__(self, d=16):
        super().__init__()
        self.q = torch.nn.Linear(d, d)
        self.v = torch.nn.Linear(d, d)

    def forward(self, x):
        b, s, d = x.shape
        q = self.q(x).view(b, s, 2, d // 2).transpose(1, 2)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            v = self.v(x).view(b, s, 2, d // 2).transpose(1, 2)
            o = F.scaled_dot_product_attention(q, q, v, is_causal=True)
        with torch.autocast("cpu", enabled=False):
            return o.float().square().mean()


def test_autocast_entered_in_forward(fresh):
    delta, warned = fresh
    torch.manual_seed(0)
    model = _AutocastInside()
    ref = copy.deepcopy(model)
    _compare_step(model, ref, torch.randn(2, 12, 16), loss_tol=(2e-2, 1e-3), grad_tol=2e-2)
    assert (delta("forward"), delta("backward"), delta("eager"), delta("sdpa_as_flex")) == (1, 1, 0, 1), \
        (dict(dynamo.stats), list(warned))


@pytest.mark.parametrize("attn,config", [("sdpa", {"tie_word_embeddings": True}),
                                         ("flex_attention", {"pad_token_id": 0})])
def test_embeddings(attn, config, fresh):
    """Tied input / output embeddings (one parameter, two gradient paths);
    an embedding padding_idx (its row gets no gradient), with padded ids."""
    model, ref = _llama(attn, **config)
    ids = _ids()
    if "pad_token_id" in config:
        assert model.model.embed_tokens.padding_idx == 0
        ids[1, :4] = 0
    else:
        assert model.lm_head.weight is model.model.embed_tokens.weight
    _check(model, ref, ids, fresh)
    if "pad_token_id" in config:
        assert model.model.embed_tokens.weight.grad[0].abs().max() == 0


def _flash(q, k, v, **kw):
    return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default(q, k, v, **kw)


@pytest.mark.parametrize("kw", [{}, {"is_causal": True}, {"scale": 0.3}, {"attn_mask": "float"},
                                {"attn_mask": "masked_row"}, {"gqa": True}, {"dtype": torch.bfloat16}])
def test_flash_cpu_decomposition(kw):
    """Ours returns the op's output (in the query's layout: [B, L, H, E]
    transposed, as transformers makes q) and its logsumexp (not the
    attention weights torch's decomposition returns), laid out as the op's."""
    from torch_mlir_flex.importer.decompositions import FLEX_DECOMPOSITIONS

    decomp = FLEX_DECOMPOSITIONS[torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default]
    kw = dict(kw)
    dtype = kw.pop("dtype", torch.float32)
    hkv = 2 if kw.pop("gqa", False) else 4
    g = torch.Generator().manual_seed(0)
    q = torch.randn(2, 8, 4, 16, generator=g).to(dtype).transpose(1, 2)
    k, v = (torch.randn(2, hkv, 6, 16, generator=g).to(dtype) for _ in range(2))
    if kw.get("attn_mask") == "float":
        kw["attn_mask"] = torch.randn(8, 6, generator=g).to(dtype)
    elif kw.get("attn_mask") == "masked_row":
        kw["attn_mask"] = torch.zeros(2, 1, 8, 6, dtype=dtype)
        kw["attn_mask"][1, 0, 3] = -float("inf")
    rep = 4 // hkv
    out, lse = _flash(q, k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1), **kw)
    got, got_lse = decomp(q, k, v, **kw)
    tol = 1e-2 if dtype == torch.bfloat16 else 1e-5
    torch.testing.assert_close(got, out, rtol=tol, atol=tol)
    torch.testing.assert_close(got_lse, lse, rtol=1e-5, atol=1e-5)
    assert (got.stride(), got_lse.stride(), got.dtype, got_lse.dtype) == \
        (out.stride(), lse.stride(), out.dtype, lse.dtype)


class _Attention(torch.nn.Module):
    """q, k, v laid out as transformers makes them ([B, L, H, E] transposed),
    GQA, the output viewed back to [B, L, H * E]."""

    def __init__(self, d=32, heads=4, kv_heads=2):
        super().__init__()
        self.heads, self.kv_heads, self.e = heads, kv_heads, d // heads
        self.q = torch.nn.Linear(d, d)
        self.kv = torch.nn.Linear(d, 2 * kv_heads * self.e)

    def forward(self, x):
        b, s, d = x.shape
        q = self.q(x).view(b, s, self.heads, self.e).transpose(1, 2)
        k, v = self.kv(x).view(b, s, 2, self.kv_heads, self.e).permute(2, 0, 3, 1, 4)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        return o.transpose(1, 2).reshape(b, s, d).square().mean()


def test_sdpa_left_as_sdpa_trains(monkeypatch, fresh):
    """With the rewrite off (TORCH_MLIR_FLEX_SDPA=decompose) the forward
    graph holds the CPU flash op and compiles; the eager backward of SDPA
    (torch-mlir has no lowering for it) reads the logsumexp it saved. With
    torch's decomposition that was the attention weights (the gradients
    here: wrong), and in a Llama the export failed on the output's layout
    ("Cannot view a tensor with shape [2, 32, 64] and strides (64, 128, 1)")."""
    delta, warned = fresh
    monkeypatch.setenv("TORCH_MLIR_FLEX_SDPA", "decompose")
    torch.manual_seed(0)
    model = _Attention()
    ref = copy.deepcopy(model)
    _compare_step(model, ref, torch.randn(2, 12, 32), loss_tol=(1e-5, 1e-6), grad_tol=1e-5)
    assert (delta("forward"), delta("backward"), delta("eager")) == (1, 0, 1), (dict(dynamo.stats), list(warned))
    assert any("flash_attention_for_cpu_backward" in str(w) for w in warned), list(warned)
