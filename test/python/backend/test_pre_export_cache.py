"""compile() from the stage cache without torch.export
(backend/pre_export_cache.py, module_key.py): a model compiled before, in
this or a new process, is not exported again; whatever the export would
read differently is a miss and gives eager's results: a changed attribute,
a method or module-level helper replaced, a captured parameter changed in
place, an edited source file; a model holding an attribute of unknown kind
is exported as before; damaged entries and a directory others can write
are not used. Dynamo's graphs (FX GraphModules: training's forward and
backward) are keyed on their code and constants.

    PYTHONPATH=python pytest -q test/python/backend/test_pre_export_cache.py
"""

import importlib.util
import json
import logging
import os
import subprocess
import sys
import textwrap
import threading
import warnings

import torch_mlir_flex  # noqa: F401  (before torch_mlir)
import torch
from torch.nn.attention.flex_attention import flex_attention

from torch_mlir_flex import log
from torch_mlir_flex.backend import cache, stage_cache
from torch_mlir_flex.backend.module_key import module_key

warnings.filterwarnings("ignore")


def shift(m, n):
    """A module-level helper the score_mod calls (a global of this module)."""
    return 0.1 * (m - n)


class Attn(torch.nn.Module):
    def __init__(self, scale=1.0):
        super().__init__()
        self.scale = scale
        self.proj = torch.nn.Linear(16, 16)
        self.head_bias = torch.nn.Parameter(torch.tensor([0.5, -0.5]))  # captured: a literal

    def forward(self, q, k, v):
        scale, bias = self.scale, self.head_bias

        def score_mod(s, b, h, m, n):
            return s * scale + shift(m, n) + bias[h]

        return flex_attention(self.proj(q), k, v, score_mod=score_mod)


def _inputs(seq=32):
    g = torch.Generator().manual_seed(0)
    return tuple(torch.randn(1, 2, seq, 16, generator=g) for _ in range(3))


def _check(model, args=None):
    args = args or _inputs()
    fn = torch_mlir_flex.compile(model, args)
    with torch.no_grad():
        torch.testing.assert_close(fn(*args), model(*args), rtol=1e-4, atol=1e-4)
    return fn


def _model(seed=0, **kw):
    torch.manual_seed(seed)
    return Attn(**kw)


def test_second_compile_is_not_exported(cache_dir):
    _check(_model())
    assert cache.stats["export_skipped"] == 0
    fn = _check(_model(1))  # other projection weights: runtime arguments
    assert cache.stats["export_skipped"] == 1 and fn.exported_program is None


def test_a_changed_attribute_is_a_miss(cache_dir):
    _check(_model())
    _check(_model(scale=0.5))  # a wrong hit would fail the check against eager
    assert cache.stats["export_skipped"] == 0


def test_a_replaced_method_is_a_miss(cache_dir, monkeypatch):
    _check(_model())
    original = Attn.forward
    monkeypatch.setattr(Attn, "forward", lambda self, q, k, v: original(self, q, k, v) * 2)
    _check(_model())
    assert cache.stats["export_skipped"] == 0


def test_a_replaced_helper_is_a_miss(cache_dir, monkeypatch):
    _check(_model())
    monkeypatch.setattr(sys.modules[__name__], "shift", lambda m, n: 0.3 * (n - m))
    _check(_model())
    assert cache.stats["export_skipped"] == 0


def test_a_captured_parameter_changed_in_place_is_a_miss(cache_dir):
    model = _model()
    _check(model)
    with torch.no_grad():
        model.head_bias.mul_(3)  # a literal of the compiled module
    _check(model)
    assert cache.stats["export_skipped"] == 0


def test_an_edited_source_file_is_a_miss(cache_dir, tmp_path):
    path = tmp_path / "edited_model.py"
    src = textwrap.dedent("""
        import torch
        from torch.nn.attention.flex_attention import flex_attention

        class M(torch.nn.Module):
            def forward(self, q, k, v):
                return flex_attention(q, k, v, score_mod=lambda s, b, h, m, n: s + 0.1 * (m - n))
    """)
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("edited_model", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    args = _inputs()
    key = module_key(mod.M(), args, None)[0]
    _check(mod.M(), args)
    path.write_text(src + "\n# edited\n")
    assert module_key(mod.M(), args, None)[0] != key


def test_key_sees_the_call():
    from torch.export import Dim

    model, args = _model(), _inputs()

    def key(a=args, dyn=None):
        return module_key(model, a, dyn)[0]

    base = key()
    assert key(_inputs(48)) != base
    assert len({key(dyn={"q": {2: d}}) for d in (Dim("S", max=64), Dim("S", max=128), Dim.AUTO,
                                                 Dim.DYNAMIC)} | {base}) == 5
    with torch.no_grad():
        assert key() != base
    model.eval()
    assert key() != base


class WithConstant(torch.nn.Module):
    """Traced by torch.fx: `self.c` (not a parameter or buffer) is a get_attr constant."""

    def __init__(self, c, offset=1.0):
        super().__init__()
        self.c = torch.full((4,), c)
        self.offset = offset

    def forward(self, x):
        return x * self.c + self.offset


def test_key_of_a_graph_module():
    """Dynamo's and AOTAutograd's graphs (FX GraphModules) are keyed on
    their code, shapes and constants (module_key.py)."""
    x = torch.randn(2, 4)

    def key(model, check=None):
        gm = torch.fx.symbolic_trace(model)
        return module_key(gm, (x,), None, "graph0", True, check)[0]

    base = key(WithConstant(2.0))
    assert base is not None and key(WithConstant(2.0)) == base  # traced again: the same
    assert key(WithConstant(3.0)) != base  # a constant's value
    assert key(WithConstant(2.0, offset=2.0)) != base  # the code
    assert module_key(torch.fx.symbolic_trace(WithConstant(2.0)), (x.t(),), None, "graph0", True, None)[0] != base


def test_a_fake_tensor_buffer_makes_no_key():
    """A graph holding a fake tensor (torch's flex backward can leave one in
    its joint graph) has no values to key on: no key, not an error."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    gm = torch.fx.symbolic_trace(WithConstant(2.0))
    with FakeTensorMode():
        gm.register_buffer("_tensor_constant0", torch.zeros(3))
    assert module_key(gm, (torch.randn(2, 4),), None) == (None, "the model holds buffer _tensor_constant0, "
                                                                 "a fake tensor")


def test_dynamo_training_graphs_skip_the_export(cache_dir, fresh, monkeypatch):
    """Forward and backward graphs compiled again (a new Dynamo cache, as in
    a new process) skip torch.export; the gradients are unchanged. The
    Dynamo backend's output check is part of the key (compile()'s
    exported_check). The graphs' names (`graph0_forward`: part of the key)
    count from 0 each time, as in a new process."""
    from torch_mlir_flex import dynamo
    from torch_mlir_flex.backend.pre_export_cache import check_identity

    dynamo.register()
    args = _inputs()

    def grads():
        torch._dynamo.reset()
        monkeypatch.setitem(dynamo.stats, "graphs", 0)
        model = _model()
        out = torch.compile(model, backend=dynamo.NAME)(*(a.clone().requires_grad_(True) for a in args))
        out.sum().backward()
        return [p.grad for p in model.parameters()]

    first = grads()
    assert cache.stats["export_skipped"] == 0
    again = grads()
    assert cache.stats["export_skipped"] == 2  # forward and backward
    for a, b in zip(first, again):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert check_identity(dynamo._check_outputs) != check_identity(lambda ep: None)


def test_unknown_attribute_is_exported(cache_dir):
    model = _model()
    model.lock = threading.Lock()  # no fields, not a known kind
    assert module_key(model, _inputs(), None) == (None, "the model holds a lock")
    _check(model)
    _check(model)
    assert cache.stats["export_skipped"] == 0 and cache.stats["stage_hits"] == 2  # imported, lowered


def test_disabled_with_the_stage_cache(cache_dir, monkeypatch):
    monkeypatch.setenv(stage_cache.ENABLE_ENV, "0")
    _check(_model())
    _check(_model())
    assert cache.stats["export_skipped"] == 0


def test_damaged_entries_are_compiled_again(cache_dir):
    """Every entry (exported, imported, lowered, the shared object) with a
    byte flipped: each is found by its record (cache_trust.py), removed,
    and the model is exported and compiled again with eager's results."""
    _check(_model())
    damaged = [p for p in cache_dir.iterdir() if p.suffix in (".so", stage_cache.SUFFIX)]
    assert len(damaged) == 4
    for p in damaged:
        data = bytearray(p.read_bytes())
        data[len(data) // 2] ^= 1
        p.write_bytes(bytes(data))
    with log.capture(logging.WARNING) as warned:
        fn = _check(_model())
    assert fn.exported_program is not None
    assert cache.stats["export_skipped"] == 0 and cache.stats["stage_hits"] == 0 and cache.stats["hits"] == 0
    assert sum("removing a damaged entry" in w for w in warned) == 4, warned
    _check(_model())  # stored again
    assert cache.stats["export_skipped"] == 1


def test_a_directory_others_can_write_is_not_used(tmp_path, monkeypatch):
    root = tmp_path / "shared"
    root.mkdir(mode=0o700)
    os.chmod(root, 0o777)
    monkeypatch.setenv(cache.DIR_ENV, str(root))
    monkeypatch.delenv(cache.ENABLE_ENV, raising=False)
    monkeypatch.delenv(stage_cache.ENABLE_ENV, raising=False)
    before = dict(cache.stats)
    with log.capture(logging.WARNING) as warned:
        _check(_model())
        _check(_model())
    assert os.listdir(root) == []
    assert all(cache.stats[k] == before.get(k, 0) for k in ("export_skipped", "stage_hits", "hits"))
    assert sum("not using the cache directory" in w for w in warned) == 1


GENERATE = textwrap.dedent("""
    import json, warnings
    warnings.filterwarnings("ignore")
    import torch_mlir_flex, torch, transformers
    import torch_mlir_flex.hf as flex_hf
    from torch_mlir_flex.backend import cache

    torch.manual_seed(0)
    conf = transformers.LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128,
                                    num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2)
    model = transformers.AutoModelForCausalLM.from_config(conf, attn_implementation="flex_attention").eval()
    ids = torch.randint(3, 256, (1, 12), generator=torch.Generator().manual_seed(1))
    gen = flex_hf.generator(model, max_cache_len=32)
    out = gen.generate(ids, max_new_tokens=4)
    print(json.dumps(dict(tokens=out.tolist(), skipped=cache.stats["export_skipped"])))
""")


def test_new_process_generates_without_export(cache_dir):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    runs = []
    for _ in range(2):
        p = subprocess.run([sys.executable, "-c", GENERATE], env=env, capture_output=True, text=True,
                           timeout=600)
        assert p.returncode == 0, p.stderr[-2000:]
        runs.append(json.loads(p.stdout.strip().splitlines()[-1]))
    assert runs[0]["skipped"] == 0
    assert runs[1]["skipped"] == 2  # prefill and decode
    assert runs[1]["tokens"] == runs[0]["tokens"]
