"""torch.compile(backend="torch_mlir_flex") on what serving code hands the
backend: symbolic sizes and Python ints (compiled once for the range),
graphs that update a cache in place, modifiers that close over a per-call
offset, the graph that builds a BlockMask, and sizes torch.export refuses
to keep dynamic (compiled specialized, not in eager). Every case:
numerics equal to eager PyTorch and no graph left in eager.

    PYTHONPATH=python pytest -q test/python/backend/test_dynamo_dynamic.py
"""

import logging
import warnings

import pytest

import torch_mlir_flex  # noqa: F401  (before torch_mlir)
import torch
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

from torch_mlir_flex import dynamo, log

warnings.filterwarnings("ignore")
dynamo.register()


def rows_and_count(x, w):
    """A size as an output (Dynamo returns it from the graph) and a size
    derived from another (x.shape[0] * 2)."""
    y = torch.tanh(x @ w)
    return y.repeat(2, 1), x.shape[0] * 2


def test_derived_sizes_and_int_outputs(fresh):
    delta, warned = fresh
    fn = torch.compile(rows_and_count, backend="torch_mlir_flex")
    w = torch.randn(8, 8)
    for rows in (4, 6, 9, 3):
        x = torch.randn(rows, 8)
        out, n = fn(x, w)
        ref, n_ref = rows_and_count(x, w)
        torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
        assert n == n_ref
    assert delta("eager") == 0 and delta("compiled") == 2 and delta("dynamic") == 1, warned


def scaled_shift(x, n: int):
    return x * n + torch.arange(x.shape[-1]) * (n - 1)


def test_python_int_argument_becomes_a_runtime_scalar(fresh):
    """After the second distinct value Dynamo passes the int as a SymInt
    input: one compiled graph serves every later value."""
    delta, warned = fresh
    fn = torch.compile(scaled_shift, backend="torch_mlir_flex")
    x = torch.randn(3, 5)
    for n in (2, 3, 7, -4, 11):
        torch.testing.assert_close(fn(x, n), scaled_shift(x, n))
    assert delta("eager") == 0 and delta("compiled") == 2, warned


class Cache(torch.nn.Module):
    """A static KV cache written in place with index_copy_, then attention
    over the whole cache (causal in absolute positions)."""

    def __init__(self, H=2, L=32, D=16):
        super().__init__()
        self.register_buffer("k", torch.zeros(1, H, L, D))
        self.register_buffer("v", torch.zeros(1, H, L, D))

    def forward(self, q, k, v, pos):
        self.k.index_copy_(2, pos, k)
        self.v.index_copy_(2, pos, v)
        start = pos[0]

        def causal(b, h, m, n):
            return n <= m + start

        return flex_attention(q, self.k, self.v, score_mod=lambda s, b, h, m, n: torch.where(causal(b, h, m, n), s, -float("inf")))


def test_cache_update_writes_the_callers_buffers(fresh):
    delta, warned = fresh
    torch.manual_seed(0)
    model, ref = Cache().eval(), Cache().eval()
    fn = torch.compile(model, backend="torch_mlir_flex")
    with torch.no_grad():
        for pos in (torch.arange(0, 5), torch.arange(5, 6), torch.arange(6, 7)):
            q, k, v = (torch.randn(1, 2, len(pos), 16) for _ in range(3))
            k_before = model.k.clone()
            out = fn(q, k, v, pos)
            torch.testing.assert_close(out, ref(q, k, v, pos), rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(model.k, ref.k, rtol=0, atol=0)
            torch.testing.assert_close(model.v, ref.v, rtol=0, atol=0)
            untouched = torch.ones(32, dtype=torch.bool)
            untouched[pos] = False
            assert torch.equal(model.k[:, :, untouched], k_before[:, :, untouched])
    assert delta("eager") == 0, warned


def test_user_input_mutation(fresh):
    """A tensor argument updated in place (copy_ into a slice)."""
    delta, warned = fresh

    def write(cache, x, i: int):
        cache[:, i] = x * 2
        return cache.sum(-1)

    fn = torch.compile(write, backend="torch_mlir_flex")
    a, b = torch.zeros(3, 6), torch.zeros(3, 6)
    for i in (1, 4, 2):
        x = torch.randn(3)
        torch.testing.assert_close(fn(a, x, i), write(b, x, i))
        assert torch.equal(a, b)
    assert delta("eager") == 0, warned


def decode_step(q, k, v, offset: int):
    """A query at absolute position `offset`, keys 0..L-1: the modifiers
    close over the per-call offset (a SymInt once it varies)."""

    def score(s, b, h, m, n):
        return s - 0.05 * (m + offset - n).abs()

    def mask(b, h, m, n):
        return n <= m + offset

    bm = create_block_mask(mask, None, None, q.shape[2], k.shape[2], device="cpu")
    return flex_attention(q, k, v, score_mod=score, block_mask=bm)


def test_modifiers_close_over_a_dynamic_offset(fresh):
    delta, warned = fresh
    fn = torch.compile(decode_step, backend="torch_mlir_flex")
    g = torch.Generator().manual_seed(0)
    k, v = (torch.randn(1, 2, 48, 16, generator=g) for _ in range(2))
    with torch.no_grad():
        for offset in (3, 17, 30, 47):
            q = torch.randn(1, 2, 1, 16, generator=g)
            torch.testing.assert_close(fn(q, k, v, offset), decode_step(q, k, v, offset), rtol=1e-5, atol=1e-5)
    assert delta("eager") == 0, warned
    assert delta("compiled") <= 3, delta("compiled")


def prefill(q, k, v):
    """The graph builds the BlockMask (vmap'd mask_mod, index_put, sort)."""

    def causal(b, h, m, n):
        return m >= n

    bm = create_block_mask(causal, None, None, q.shape[2], k.shape[2], device="cpu")
    return flex_attention(q, k, v, block_mask=bm)


def test_block_mask_built_in_the_graph_with_dynamic_lengths(fresh):
    """Dynamo itself specializes one block (S <= 128) against several: the
    first length, a dynamic graph for one block, one for many, then no
    more compilations."""
    delta, warned = fresh
    fn = torch.compile(prefill, backend="torch_mlir_flex")
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for S in (40, 70, 129, 300, 257):
            q, k, v = (torch.randn(1, 2, S, 16, generator=g) for _ in range(3))
            torch.testing.assert_close(fn(q, k, v), prefill(q, k, v), rtol=1e-5, atol=1e-5)
    assert delta("eager") == 0 and delta("compiled") == 3 and delta("dynamic") == 2, warned


def test_compiled_create_block_mask_equals_eager(fresh):
    delta, warned = fresh

    def window(b, h, m, n):
        return (m - n).abs() <= 20

    def build(S: int):
        return create_block_mask(window, None, None, S, S, device="cpu", BLOCK_SIZE=16)

    fn = torch.compile(build, backend="torch_mlir_flex")
    for S in (64, 96, 100):
        got, want = fn(S), build(S)
        for a, b in zip(got.as_tuple()[2:6], want.as_tuple()[2:6]):
            assert torch.equal(a, b)
    assert delta("eager") == 0, warned


class Tagged(torch.Tensor):
    """A tensor subclass that forwards every op (as users write them)."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return super().__torch_function__(func, types, args, kwargs or {})


def test_tensor_subclass_input_is_refused_by_name(fresh):
    delta, warned = fresh
    x = torch.randn(4, 8).as_subclass(Tagged)
    w = torch.randn(8, 8)
    out = torch.compile(lambda a, b: torch.tanh(a @ b), backend="torch_mlir_flex")(x, w)
    torch.testing.assert_close(out.as_subclass(torch.Tensor), torch.tanh(x.as_subclass(torch.Tensor) @ w))
    assert delta("eager") == 1 and delta("compiled") == 0
    assert len(warned) == 1 and "tensor subclass (Tagged)" in warned[0], warned


def split_heads_view(x):
    """Every dim dynamic (dynamic=True), but the view pins the last to 16:
    Dynamo's guards fix it, the export keeps it static."""
    return torch.tanh(x.view(x.shape[0], x.shape[1], 2, 8)).sum(-1)


def test_size_pinned_by_dynamo_is_static_for_the_export(fresh):
    delta, warned = fresh
    fn = torch.compile(split_heads_view, backend="torch_mlir_flex", dynamic=True)
    for b, s in ((2, 5), (3, 7), (1, 9)):
        x = torch.randn(b, s, 16)
        torch.testing.assert_close(fn(x), split_heads_view(x), rtol=1e-5, atol=1e-5)
    assert delta("eager") == 0 and delta("specialized") == 0, warned
    assert delta("compiled") <= 2 and delta("dynamic") >= 1


@torch._dynamo.allow_in_graph
def _heads(x):
    """A library function that takes another path under export (as
    transformers' do): there `int()` of a size pins it, where Dynamo's
    trace kept it symbolic."""
    if torch.compiler.is_exporting():
        return x.reshape(x.shape[0], 4, int(x.shape[1]) // 4)
    return x.reshape(x.shape[0], 4, -1)


def heads_then_reduce(x, w):
    return torch.tanh(_heads(x @ w)).sum(-1)


def test_size_export_refuses_compiles_specialized(fresh):
    """torch.export refuses the dynamic width ("Constraints violated"):
    the graph compiles with it fixed to the example's value, the batch dim
    stays dynamic, the log names the constraint, and Dynamo's guards
    recompile for another width instead of running our function on it."""
    delta, warned = fresh
    fn = torch.compile(heads_then_reduce, backend="torch_mlir_flex", dynamic=True)
    g = torch.Generator().manual_seed(2)
    with log.capture(logging.INFO) as records:
        for rows, width in ((3, 24), (5, 24), (7, 24), (3, 32), (6, 32)):
            x, w = torch.randn(rows, 8, generator=g), torch.randn(8, width, generator=g)
            torch.testing.assert_close(fn(x, w), heads_then_reduce(x, w), rtol=1e-5, atol=1e-5)
    assert delta("eager") == 0, warned
    assert delta("compiled") == 2 and delta("specialized") == 2 and delta("dynamic") == 2
    refused = [r for r in records if "torch.export refused dynamic sizes" in r]
    assert len(refused) == 2, records
    assert "L['args'][1].size()[1]" in refused[0] and "specialized it to be a constant (24)" in refused[0]
    assert "=24 fixed to the example's values" in refused[0] and "=32 fixed" in refused[1]


def test_refused_positions_are_read_from_the_message():
    from torch_mlir_flex.dynamo import specialize

    msg = ("Constraints violated (L['args'][0].size()[2], L['args'][3])! For more information...\n"
           "  - You marked L['args'][0].size()[2] as dynamic but your code specialized it to be a "
           "constant (16). Also L['args'][1].size()[0]")
    assert specialize.refused_positions(msg) == [(0, 2), (3, None)]
    assert specialize.constraint_lines(msg).startswith("You marked L['args'][0].size()[2] as dynamic")
    assert specialize.refused_positions("no list; inputs['args'][1].shape[0] pinned") == [(1, 0)]


def test_call_outside_an_unguarded_range_runs_in_eager(fresh):
    """A compiled graph called with a size outside the range torch.export
    narrowed (FlexRangeError), where no Dynamo guard could be added (a
    backward graph): that call runs the graph in eager, with a warning."""
    from torch_mlir_flex.backend.errors import FlexRangeError

    delta, warned = fresh
    gm = torch.fx.symbolic_trace(lambda x: torch.tanh(x) * 2)

    def compiled(x):
        raise FlexRangeError("call", "argument 0 (x) dim 0 is 200, outside the range [2, 128]")

    fn = dynamo._EagerWhenTooLarge(compiled, gm)
    x = torch.randn(200, 3)
    torch.testing.assert_close(fn(x), torch.tanh(x) * 2)
    assert delta("eager_calls") == 1
    assert any("outside the range [2, 128]" in w for w in warned), list(warned)


def sdpa_scaled(q, k, v, scale: float):
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, scale=scale) * 2


def test_dynamic_python_float_is_pinned_not_eager(fresh):
    """A float that changes between calls becomes a 0-d tensor input read
    with `.item()`; sdpa needs a number there, which torch.export cannot
    trace: each value compiles with the float fixed (a Dynamo guard)."""
    delta, warned = fresh
    fn = torch.compile(sdpa_scaled, backend="torch_mlir_flex")
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(1, 2, 8, 16, generator=g) for _ in range(3))
    with log.capture(logging.INFO) as records, torch.no_grad():
        for scale in (0.25, 0.5, 0.125, 0.5):
            torch.testing.assert_close(fn(q, k, v, scale), sdpa_scaled(q, k, v, scale), rtol=1e-5, atol=1e-5)
    assert delta("eager") == 0 and delta("compiled") == 3 and delta("specialized") == 2, warned
    pinned = [r for r in records if "cannot trace a dynamic Python number" in r]
    assert len(pinned) == 2 and "=0.5 fixed" in pinned[0] and "=0.125 fixed" in pinned[1], records


def test_hf_model_after_another_compiles(fresh):
    """Qwen2 (sdpa) compiled after a Llama in the same process: Dynamo
    shares transformers' wrapper frames between them, so the attention's
    `scaling` float arrives dynamic. Every graph compiles; tokens equal
    the uncompiled models'."""
    transformers = pytest.importorskip("transformers")
    delta, warned = fresh
    ids = torch.randint(3, 256, (1, 9), generator=torch.Generator().manual_seed(1))
    common = dict(vocab_size=256, num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2,
                  attn_implementation="sdpa")
    torch.manual_seed(0)
    models = [transformers.LlamaForCausalLM(transformers.LlamaConfig(hidden_size=64, intermediate_size=96,
                                                                     **common)).eval(),
              transformers.Qwen2ForCausalLM(transformers.Qwen2Config(hidden_size=128, intermediate_size=96,
                                                                     **common)).eval()]
    kw = dict(max_new_tokens=3, min_new_tokens=3, do_sample=False)
    for model in models:
        with torch.no_grad():
            want = model.generate(ids, **kw)
            model.forward = torch.compile(model.forward, backend="torch_mlir_flex")
            assert torch.equal(model.generate(ids, **kw), want), type(model).__name__
    assert delta("eager") == 0 and delta("specialized") >= 1, warned
