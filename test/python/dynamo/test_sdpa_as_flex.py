"""`F.scaled_dot_product_attention` under `torch.compile(backend="torch_mlir_flex")`
goes through our flash attention (dynamo/sdpa_as_flex.py): forward
numerics and gradients against eager SDPA, the IR without a score matrix,
dynamic sizes, the calls left as SDPA, and a transformers Llama with
attn_implementation="sdpa" that runs and trains compiled."""

import logging

import pytest

import torch_mlir_flex  # noqa: F401  (before torch_mlir)
import torch
import torch.nn.functional as F

from torch_mlir_flex import dynamo, log
from torch_mlir_flex.dynamo import sdpa_as_flex, sdpa_mask_blocks

dynamo.register()

B, H, L, S, D = 1, 2, 40, 40, 8


HOP = torch.ops.higher_order.flex_attention


def _qkv(b=B, hq=H, hkv=H, l=L, s=S, d=D, dv=None, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, hq, l, d, generator=g)
    k = torch.randn(b, hkv, s, d, generator=g)
    v = torch.randn(b, hkv, s, dv or d, generator=g)
    return [t.to(dtype) for t in (q, k, v)]


def _float_mask(shape, seed=1):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


def _bool_mask(shape, seed=2):
    m = torch.rand(shape, generator=torch.Generator().manual_seed(seed)) > 0.4
    m[..., 0] = True  # no fully masked row (see test_fully_masked_rows)
    return m


def _check_forward(fn, args, fresh, atol=2e-5, rtol=1e-5, compiles=1):
    delta, warned = fresh
    got = torch.compile(fn, backend=dynamo.NAME)(*args)
    want = fn(*args)
    torch.testing.assert_close(got, want, atol=atol, rtol=rtol)
    assert delta("compiled") == compiles and delta("eager") == 0, (dict(dynamo.stats), list(warned))


def test_causal(fresh):
    _check_forward(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), _qkv(), fresh)


@pytest.mark.parametrize("l,s", [(1, 40), (12, 40), (40, 12)])
def test_causal_top_left(l, s, fresh):
    """SDPA's causal mask is tril(ones(L, S)), top-left aligned, also for L != S."""
    _check_forward(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                   _qkv(l=l, s=s), fresh)


@pytest.mark.parametrize("shape", [(2, 1, L, S), (L, S), (2, 1, 1, S), (1, H, 1, S), (2, H, L, 1), (2, H, L, S)])
def test_float_mask(shape, fresh):
    """Size-1 dims broadcast (batch 2)."""
    m = _float_mask(shape)
    _check_forward(lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
                   _qkv(b=2) + [m], fresh)


@pytest.mark.parametrize("shape", [(2, 1, L, S), (L, S)])
def test_bool_mask(shape, fresh):
    m = _bool_mask(shape)
    _check_forward(lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
                   _qkv(b=2) + [m], fresh)


def test_gqa_scale_and_value_head_dim(fresh):
    fn = lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.3, enable_gqa=True)
    _check_forward(fn, _qkv(hq=4, hkv=2, dv=16), fresh)


def test_mask_and_l_ne_s(fresh):
    m = _float_mask((B, 1, 12, S))
    _check_forward(lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m, scale=0.5),
                   _qkv(l=12) + [m], fresh)


def test_bf16(fresh):
    m = _float_mask((B, 1, L, S)).bfloat16()
    fn = lambda q, k, v, m: (F.scaled_dot_product_attention(q, k, v, attn_mask=m),
                             F.scaled_dot_product_attention(q, k, v, is_causal=True))
    _check_forward(fn, _qkv(dtype=torch.bfloat16) + [m], fresh, atol=2e-2, rtol=2e-2)


def test_fully_masked_rows(fresh):
    """A query whose keys are all masked: flex_attention's 0, which is what
    eager SDPA gives in torch 2.13 too (float -inf and bool masks)."""
    fm = torch.zeros(L, S)
    fm[3] = float("-inf")
    bm = fm == 0
    fn = lambda q, k, v, fm, bm: (F.scaled_dot_product_attention(q, k, v, attn_mask=fm),
                                  F.scaled_dot_product_attention(q, k, v, attn_mask=bm))
    args = _qkv() + [fm, bm]
    got = torch.compile(fn, backend=dynamo.NAME)(*args)
    for g, w in zip(got, fn(*args)):
        assert torch.equal(g[:, :, 3], torch.zeros_like(g[:, :, 3]))
        torch.testing.assert_close(g, w, atol=2e-5, rtol=1e-5)
    assert fresh[0]("eager") == 0


def test_fully_masked_rows_training(fresh):
    """Their gradients: 0, not NaN, as eager SDPA's."""
    m = torch.ones(L, S, dtype=torch.bool)
    m[5] = False
    fn = lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m)
    got_out, got = _grads(fn, _qkv() + [m], compiled=True)
    want_out, want = _grads(fn, _qkv() + [m], compiled=False)
    assert torch.equal(got_out[:, :, 5], torch.zeros_like(got_out[:, :, 5]))
    for g, w in zip(got, want):
        assert not g.isnan().any()
        torch.testing.assert_close(g.double(), w, atol=5e-5, rtol=1e-4)
    assert fresh[0]("eager") == 0 and fresh[0]("backward") == 1


def _padding_mask(b, l, s, valid, dtype):
    """Keys [0, valid[i]) of batch i kept: the rest is a cache's padding."""
    keep = torch.arange(s)[None, None, None, :] < torch.tensor(valid)[:, None, None, None]
    keep = keep.expand(b, 1, l, s)
    if dtype == torch.bool:
        return keep.clone()
    return torch.zeros(b, 1, l, s).masked_fill(~keep, float("-inf"))


def test_masked_key_blocks_are_skipped():
    """The BlockMask made from an SDPA mask lists only the key blocks with a
    kept entry (sdpa_mask_blocks.block_mask), float and bool masks; 128-row
    query blocks for 200 rows, one-row blocks for 100."""
    for l, rows in ((200, 128), (100, 1)):
        q, k, _ = _qkv(b=2, l=l, s=700)
        for dtype in (torch.bool, torch.float32):
            m = _padding_mask(2, l, 700, [300, 0], dtype)
            bm, uniform = sdpa_mask_blocks.block_mask(m, q, k)
            assert bm[:2] == (l, 700) and bm[-3:-1] == (rows, 128), bm
            kv_num_blocks, kv_indices = bm[2:4]
            nq = -(-l // rows)
            assert kv_num_blocks.tolist() == [[[3] * nq], [[0] * nq]]  # 128-key blocks: 0-2 hold keys < 300
            assert kv_indices[0, 0, :, :3].tolist() == [[0, 1, 2]] * nq
            # -inf rows are not uniform (SDPA gives them 0)
            assert uniform is None or not uniform.any()


def _hf_mask(l, s, spans, pad_rows, fill=None):
    """transformers' continuous-batching mask: finfo.min where masked, 0
    where kept; request i's rows [q0, q1) see keys [k0, k0 + its causal
    reach); `pad_rows` trailing rows all finfo.min (padding)."""
    lo = torch.finfo(torch.float32).min
    m = torch.full((1, 1, l, s), lo)
    for q0, q1, k0, k1 in spans:
        for r in range(q0, q1):
            m[0, 0, r, k0:k1 - (q1 - 1 - r)] = 0.0
    if fill is not None:
        m[0, 0, l - pad_rows:, :fill] = float("-inf")
    return m


def test_key_padding_mask_for_every_query(fresh):
    """A [B, 1, 1, S] finfo.min padding mask (one row for all queries):
    one query block of all rows, one graph for lengths on both sides of
    128, against eager SDPA."""
    delta, warned = fresh
    fn = lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m)
    cf = torch.compile(fn, backend=dynamo.NAME, dynamic=True)
    for l, s in ((40, 300), (200, 500)):
        m = torch.zeros(1, 1, 1, s)
        m[..., s // 2:] = torch.finfo(torch.float32).min
        args = _qkv(l=l, s=s) + [m]
        torch.testing.assert_close(cf(*args), fn(*args), atol=2e-5, rtol=1e-5)
    bm = sdpa_mask_blocks.block_mask(m, *_qkv(l=200, s=500)[:2])[0]
    assert bm[2].tolist() == [[[2]]] and bm[-3] == 1 << 30, bm  # keys < 250: blocks 0 and 1
    assert delta("compiled") == 1 and delta("eager") == 0, (dict(dynamo.stats), list(warned))


def test_one_block_table_per_mask(fresh, monkeypatch):
    """Layers sharing one mask compute its block table once per trace."""
    monkeypatch.setenv("TORCH_MLIR_FLEX_CACHE", "0")  # trace, not a cached program
    made = []
    real = sdpa_mask_blocks._block_mask
    monkeypatch.setattr(sdpa_mask_blocks, "_block_mask", lambda *a: made.append(1) or real(*a))

    def layers(q, k, v, m):
        for _ in range(3):
            q = F.scaled_dot_product_attention(q, k, v, attn_mask=m)
        return q

    m = _hf_mask(40, 300, [(0, 40, 0, 200)], pad_rows=0)
    _check_forward(layers, _qkv(l=40, s=300) + [m], fresh)
    assert len(made) == 1, made


@pytest.mark.parametrize("l,s", [(64, 700), (200, 1000)])
def test_transformers_min_masks(l, s, fresh):
    """finfo.min masks (transformers' continuous batching): key blocks of
    other requests and of the cache's padding skipped; rows all finfo.min
    (padding rows: SDPA's uniform softmax, the mean of V), rows of
    finfo.min and -inf only, and requests' rows, against eager SDPA."""
    spans = [(0, 1, 0, 90), (1, 2, 90, 400), (2, l - 20, 400, 400 + l - 22)]
    m = _hf_mask(l, s, spans, pad_rows=20)
    m[0, 0, l - 3, :50] = float("-inf")  # a padding row of min and -inf only
    q, k, _ = _qkv(l=l, s=s)
    bm, uniform = sdpa_mask_blocks.block_mask(m, q, k)
    assert uniform[0, 0].tolist() == [False] * (l - 20) + [True] * 17 + [False, True, True]
    if bm[-3] == 1:  # one-row query blocks: row 0 reads key block 0 only
        assert bm[2][0, 0, 0].item() == 1
    fn = lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m, enable_gqa=True)
    _check_forward(fn, _qkv(hq=4, hkv=2, l=l, s=s) + [m], fresh)


@pytest.mark.parametrize("dtype", [torch.bool, torch.float32])
def test_padding_mask_over_many_blocks(dtype, fresh):
    """Key blocks that are all padding (skipped), a partial block, and a
    batch whose keys are all masked (output 0, as eager SDPA's); gradients."""
    m = _padding_mask(2, 130, 600, [270, 0], dtype)
    fn = lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m, enable_gqa=True)
    _check_forward(fn, _qkv(b=2, hq=4, hkv=2, l=130, s=600) + [m], fresh)
    got_out, got = _grads(fn, _qkv(b=2, hq=4, hkv=2, l=130, s=600) + [m], compiled=True)
    want_out, want = _grads(fn, _qkv(b=2, hq=4, hkv=2, l=130, s=600) + [m], compiled=False)
    assert torch.equal(got_out[1], torch.zeros_like(got_out[1]))
    torch.testing.assert_close(got_out, want_out.to(got_out.dtype), atol=2e-5, rtol=1e-5)
    for g, w in zip(got, want):
        torch.testing.assert_close(g.double(), w, atol=5e-5, rtol=1e-4)


def test_dynamic_sizes(fresh):
    """dynamic=True: one graph for every sequence length, causal and masked."""
    delta, warned = fresh
    fn = lambda q, k, v, m: (F.scaled_dot_product_attention(q, k, v, is_causal=True),
                             F.scaled_dot_product_attention(q, k, v, attn_mask=m))
    cf = torch.compile(fn, backend=dynamo.NAME, dynamic=True)
    for n in (24, 40):
        args = _qkv(l=n, s=n) + [_float_mask((B, 1, n, n))]
        for g, w in zip(cf(*args), fn(*args)):
            torch.testing.assert_close(g, w, atol=2e-5, rtol=1e-5)
    assert delta("compiled") == 1 and delta("dynamic") == 1 and delta("eager") == 0, \
        (dict(dynamo.stats), list(warned))


def test_dynamic_sizes_across_key_blocks(fresh):
    """dynamic=True with a mask: the block table computed from it makes
    torch.export narrow the lengths' ranges (whether ceil(L / 128) is 1);
    those ranges become Dynamo guards, so lengths on the other side of
    128 recompile once (one graph per range) instead of failing the call."""
    delta, warned = fresh
    fn = lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m)
    cf = torch.compile(fn, backend=dynamo.NAME, dynamic=True)
    for l, s, compiles in ((24, 300, 1), (40, 700, 1), (200, 900, 2), (150, 600, 2), (60, 100, 3)):
        args = _qkv(l=l, s=s) + [_padding_mask(1, l, s, [s // 2], torch.float32)]
        torch.testing.assert_close(cf(*args), fn(*args), atol=2e-5, rtol=1e-5)
        assert delta("compiled") == compiles, (l, s, dict(dynamo.stats))
    assert delta("narrowed") == 3 and delta("eager") == 0 and delta("eager_calls") == 0, \
        (dict(dynamo.stats), list(warned))


def _lowered(fn, args):
    """Our compiled function (backend.compile's result) for fn's one graph."""
    found = []

    def backend(gm, example_inputs):
        found.append(dynamo.flex_backend(gm, example_inputs))
        return found[-1]

    torch.compile(fn, backend=backend)(*args)
    compiled = found[0]
    while not hasattr(compiled, "torch_ir"):
        compiled = compiled.compiled
    return compiled


def test_no_score_matrix(fresh):
    """The causal SDPA becomes our flex op: no [B, H, L, S] value in the
    imported or linalg IR (the decomposition had one)."""
    compiled = _lowered(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), _qkv())
    assert "hop_flex_attention" in compiled.torch_ir
    assert f"[{B},{H},{L},{S}]" not in compiled.torch_ir
    assert f"{B}x{H}x{L}x{S}x" not in compiled.linalg_ir
    assert "call @__flex_attention_0" in compiled.linalg_ir


def _captured(fn, args):
    """Dynamo's graph of fn after the rewrite."""
    graphs = []

    def backend(gm, example_inputs):
        sdpa_as_flex.rewrite(gm)
        graphs.append(gm)
        return gm.forward

    torch.compile(fn, backend=backend)(*args)
    return graphs[0]


def _targets(gm):
    return {n.target for n in gm.graph.nodes if n.op == "call_function"}


def test_rewritten_graph():
    gm = _captured(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), _qkv())
    assert sdpa_as_flex.sdpa_flex in _targets(gm)
    assert not set(sdpa_as_flex.sdpa_targets()) & _targets(gm)
    ep = torch.export.export(gm, tuple(_qkv()), strict=False)
    assert HOP in {n.target for n in ep.graph.nodes}


def test_eager_run_is_sdpa():
    """The rewritten graph run in eager PyTorch (a graph or a call our
    pipeline refuses) calls torch's SDPA: bit-identical results, no dense
    flex_attention with its score matrix."""
    qkv = _qkv(b=2, hq=4, hkv=2)
    cases = [(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True), qkv),
             (lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m, enable_gqa=True),
              qkv + [_float_mask((2, 1, L, S))])]
    for fn, args in cases:
        gm = _captured(fn, args)
        assert sdpa_as_flex.sdpa_flex in _targets(gm)
        assert torch.equal(gm(*args)[0], fn(*args))


@pytest.mark.parametrize("case", ["dropout", "float64", "mask_and_causal", "rank3", "mask_grad"])
def test_left_as_sdpa(case):
    q, k, v = _qkv()
    args, fn = (q, k, v), None
    if case == "dropout":
        fn = lambda q, k, v: F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    elif case == "float64":
        args = _qkv(dtype=torch.float64)
        fn = lambda q, k, v: F.scaled_dot_product_attention(q, k, v)
    elif case == "mask_and_causal":
        fn = lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=torch.ones(L, S), is_causal=True)
    elif case == "rank3":
        args = (q[0], k[0], v[0])
        fn = lambda q, k, v: F.scaled_dot_product_attention(q, k, v)
    elif case == "mask_grad":
        m = _float_mask((L, S)).requires_grad_()
        args = (q, k, v, m)
        fn = lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m)
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(sdpa_as_flex.rewrite(gm))
        return gm.forward

    with log.capture(logging.DEBUG) as records:
        try:
            torch.compile(fn, backend=backend)(*args)
        except Exception:
            assert case == "mask_and_causal"  # SDPA's own error, raised by the graph we left alone
    assert graphs == [0]
    assert any("left as scaled_dot_product_attention" in r for r in records), records


def test_disabled_by_env(monkeypatch):
    monkeypatch.setenv(sdpa_as_flex.ENV, "decompose")
    gm = _captured(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), _qkv())
    assert sdpa_as_flex.sdpa_flex not in _targets(gm)


def _grads(fn, tensors, compiled: bool):
    """Output and gradients of sum(out * weight) w.r.t. the floating-point
    `tensors` that are not masks (copies; float64 when not compiled)."""
    dtype = torch.float32 if compiled else torch.float64
    args = [t.detach().to(dtype) if t.is_floating_point() else t for t in tensors]
    leaves = args[:3]
    for t in leaves:
        t.requires_grad_(True)
    out = (torch.compile(fn, backend=dynamo.NAME) if compiled else fn)(*args)
    w = torch.linspace(-1, 1, out.numel(), dtype=out.dtype).reshape(out.shape)
    (out * w).sum().backward()
    return out.detach(), [t.grad for t in leaves]


@pytest.mark.parametrize("case", ["causal", "float_mask", "bool_mask", "gqa_causal_l_ne_s"])
def test_training(case, fresh):
    """Forward with the flex HOP, backward with flex_attention_backward, both
    compiled; gradients of q, k, v equal eager SDPA's (float64)."""
    delta, warned = fresh
    args = _qkv()
    if case == "causal":
        fn = lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True)
    elif case == "float_mask":
        args.append(_float_mask((B, 1, L, S)))
        fn = lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m.to(q.dtype))
    elif case == "bool_mask":
        args.append(_bool_mask((L, S)))
        fn = lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m)
    else:
        args = _qkv(hq=4, hkv=2, l=12)
        fn = lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True, scale=0.4)
    got_out, got = _grads(fn, args, compiled=True)
    want_out, want = _grads(fn, args, compiled=False)
    torch.testing.assert_close(got_out.double(), want_out, atol=2e-5, rtol=1e-5)
    for i, (g, w) in enumerate(zip(got, want)):
        torch.testing.assert_close(g.double(), w, atol=5e-5, rtol=1e-4, msg=f"grad {i}")
    assert delta("forward") == 1 and delta("backward") == 1 and delta("eager") == 0, \
        (dict(dynamo.stats), list(warned))


@pytest.mark.parametrize("padded", [False, True])
def test_llama_sdpa_compiled_and_trained(padded, fresh):
    """A tiny transformers Llama with attn_implementation="sdpa" (GQA;
    causal, or with a left-padded batch: transformers' bool mask): logits
    and one training step's gradients equal eager's, nothing in eager."""
    transformers = pytest.importorskip("transformers")
    import copy

    delta, warned = fresh
    torch.manual_seed(0)
    conf = transformers.LlamaConfig(hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                                    num_attention_heads=4, num_key_value_heads=2, vocab_size=128)
    model = transformers.AutoModelForCausalLM.from_config(conf, attn_implementation="sdpa").eval()
    ref = copy.deepcopy(model)
    ids = torch.randint(0, 128, (2, 12), generator=torch.Generator().manual_seed(1))
    kw = {}
    if padded:
        kw["attention_mask"] = torch.ones(2, 12, dtype=torch.long)
        kw["attention_mask"][1, :3] = 0
    compiled = torch.compile(model, backend=dynamo.NAME)
    with torch.no_grad():
        torch.testing.assert_close(compiled(ids, **kw).logits, ref(ids, **kw).logits, atol=1e-4, rtol=1e-4)
    model.train()
    ref.train()
    compiled(ids, labels=ids, **kw).loss.backward()
    ref(ids, labels=ids, **kw).loss.backward()
    for (name, p), r in zip(model.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, r.grad, atol=1e-4, rtol=1e-4, msg=name)
    assert delta("compiled") == 1 and delta("forward") == 1 and delta("backward") == 1, dict(dynamo.stats)
    assert delta("sdpa_as_flex") == 4  # 2 layers, inference and training graphs
    assert delta("eager") == 0 and delta("eager_calls") == 0, list(warned)


def test_dynamic_training(fresh):
    """dynamic=True with grad: one forward and one backward graph for two
    sequence lengths, gradients as eager SDPA's (float64)."""
    delta, warned = fresh
    fn = lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m.to(q.dtype))
    compiled = torch.compile(fn, backend=dynamo.NAME, dynamic=True)
    for n in (24, 40):
        args = _qkv(l=n, s=n) + [_float_mask((B, 1, n, n))]
        got, want = ([t.detach().to(dtype).requires_grad_() for t in args[:3]] for dtype in (torch.float32, torch.float64))
        compiled(*got, args[3]).sum().backward()
        fn(*want, args[3]).sum().backward()
        for g, w in zip(got, want):
            torch.testing.assert_close(g.grad.double(), w.grad, atol=5e-5, rtol=1e-4)
    assert delta("forward") == 1 and delta("backward") == 1 and delta("eager") == 0, \
        (dict(dynamo.stats), list(warned))


def test_inference_under_autocast(fresh):
    """Inference under CPU bf16 autocast with q, k in f32 (after a rotary
    embedding) and v in bf16: the casts autocast applies to SDPA are
    written into the graph (sdpa_regions.py), so the call goes through
    flex_attention here as in training, not through the score matrix."""
    delta, _ = fresh
    g = torch.Generator().manual_seed(3)
    q, k = (torch.randn(B, H, L, D, generator=g) for _ in range(2))
    v = torch.randn(B, H, S, D, generator=g).to(torch.bfloat16)

    def fn(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        got = torch.compile(fn, backend="torch_mlir_flex")(q, k, v)
        want = fn(q, k, v)
    assert got.dtype == want.dtype == torch.bfloat16
    torch.testing.assert_close(got.float(), want.float(), rtol=2e-2, atol=2e-2)
    assert delta("sdpa_as_flex") == 1 and delta("eager") == 0 and delta("compiled") == 1
