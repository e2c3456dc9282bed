"""torch.compile(fn, backend="torch_mlir_flex", mode=..., options=...): the
keyword arguments torch hands a registered backend (dynamo/backend_args.py).
Every mode compiles through our pipeline and matches eager; our options
are honoured, Inductor's ignored, an unknown one refused by name; and
transformers' `generate(..., compile_config=CompileConfig(backend=...))`,
which always passes a mode, runs compiled with the uncompiled tokens.

    PYTHONPATH=python pytest -q test/python/backend/test_dynamo_kwargs.py
"""

import logging
import warnings

import pytest

import torch_mlir_flex  # noqa: F401  (before torch_mlir)
import torch
from torch.nn.attention.flex_attention import flex_attention

from torch_mlir_flex import dynamo, log
from torch_mlir_flex.dynamo import backend_args

warnings.filterwarnings("ignore")
dynamo.register()


def attn_mlp(q, k, v, w):
    o = flex_attention(q, k, v, score_mod=lambda s, b, h, m, n: s - 0.02 * (m - n).abs())
    return torch.tanh(o @ w) + o


def _args(seed=0):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(1, 2, 16, 8, generator=g) for _ in range(3))
    return q, k, v, torch.randn(8, 8, generator=g)


@pytest.mark.parametrize("mode", [None, "default", "reduce-overhead", "max-autotune",
                                  "max-autotune-no-cudagraphs"])
def test_every_mode_compiles_through_our_backend(fresh, mode):
    delta, warned = fresh
    fn = torch.compile(attn_mlp, backend="torch_mlir_flex", mode=mode)
    args = _args()
    with torch.no_grad():
        torch.testing.assert_close(fn(*args), attn_mlp(*args), rtol=1e-5, atol=1e-5)
    assert delta("compiled") == 1 and delta("eager") == 0, warned


def test_mode_is_ignored_with_a_debug_record(fresh):
    delta, _ = fresh
    fn = torch.compile(attn_mlp, backend="torch_mlir_flex", mode="reduce-overhead")
    with log.capture(logging.DEBUG) as records, torch.no_grad():
        fn(*_args())
    assert any("mode='reduce-overhead' ignored" in r for r in records), records
    assert delta("compiled") == 1


@pytest.mark.parametrize("options", [
    {"backend": "reference"},
    {"opt_level": 0},
    {"backend": "tiled", "opt_level": 3},
    {"epilogue_fusion": False, "triton.cudagraphs": False, "max_autotune": True},
])
def test_options_compile_through_our_backend(fresh, options):
    delta, warned = fresh
    fn = torch.compile(attn_mlp, backend="torch_mlir_flex", options=dict(options))
    args = _args(1)
    with log.capture(logging.DEBUG) as records, torch.no_grad():
        torch.testing.assert_close(fn(*args), attn_mlp(*args), rtol=1e-5, atol=1e-5)
    assert delta("compiled") == 1 and delta("eager") == 0, warned
    for key in options:
        if key not in backend_args.OUR_OPTIONS:
            assert any(f"option {key!r}" in r and "ignored" in r for r in records), records


def test_options_reach_the_pipeline(monkeypatch, fresh):
    """`backend` and `opt_level` are what backend.compile receives."""
    import importlib

    compile_module = importlib.import_module("torch_mlir_flex.backend.compile")
    seen = []
    original = compile_module.compile

    def spy(*a, **kw):
        seen.append((kw["backend"], kw["opt_level"]))
        return original(*a, **kw)

    monkeypatch.setattr(compile_module, "compile", spy)
    fn = torch.compile(attn_mlp, backend="torch_mlir_flex", options={"backend": "reference", "opt_level": 1})
    with torch.no_grad():
        fn(*_args())
    assert seen == [("reference", 1)]


@pytest.mark.parametrize("kwargs,message", [
    (dict(mode="fastest"), "unrecognized mode='fastest'"),
    (dict(options={"backnd": "reference"}), "unexpected option 'backnd'"),
    (dict(options={"backend": "nope"}), "options['backend'] is 'nope'"),
    (dict(options={"opt_level": 7}), "options['opt_level'] must be an int from 0 to 3"),
])
def test_what_torch_would_refuse_is_refused_by_name(fresh, kwargs, message):
    fn = torch.compile(attn_mlp, backend="torch_mlir_flex", **kwargs)
    with pytest.raises(Exception, match="torch_mlir_flex") as info, torch.no_grad():
        fn(*_args())
    assert message in str(info.value)


def test_parse_without_torch_compile():
    assert backend_args.parse() == backend_args.BackendArgs(None, 2)
    assert backend_args.parse("max-autotune-no-cudagraphs", None, "reference").pipeline == "reference"
    assert backend_args.parse(None, {"backend": "reference"}, "tiled").pipeline == "reference"
    with pytest.raises(TypeError, match="options must be a dict"):
        backend_args.parse(None, [("backend", "tiled")])


def test_hf_generate_with_compile_config_runs_compiled(fresh):
    """transformers' CompileConfig passes mode="reduce-overhead" (and torch
    hands it to the backend); greedy tokens equal the uncompiled model's and
    no captured graph runs in eager."""
    transformers = pytest.importorskip("transformers")
    delta, warned = fresh
    torch.manual_seed(0)
    conf = transformers.LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128,
                                    num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2)
    model = transformers.AutoModelForCausalLM.from_config(conf, attn_implementation="sdpa").eval()
    ids = torch.randint(3, 256, (1, 9), generator=torch.Generator().manual_seed(1))
    kw = dict(max_new_tokens=6, min_new_tokens=6, do_sample=False, cache_implementation="static")
    with torch.no_grad():
        want = model.generate(ids, **kw)
    config = transformers.CompileConfig(backend="torch_mlir_flex")
    config._compile_all_devices = True  # compile on CPU too
    assert config.mode == "reduce-overhead"
    with torch.no_grad():
        got = model.generate(ids, compile_config=config, **kw)
    assert torch.equal(got, want), (got, want)
    assert delta("compiled") >= 1 and delta("eager") == 0, warned
