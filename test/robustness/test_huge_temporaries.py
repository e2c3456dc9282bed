"""A compiled call never dies of a temporary too large to allocate (#43).

transformers' continuous batching (`generate_batch` with the default
ContinuousBatchingConfig) warms up its compiled forward with 8192 query
tokens over a 446720-token cache: SDPA with a 1x1x8192x446720 f32 mask,
which torch's CPU flash kernel tiles, but which our pipeline lowers through
torch's math decomposition, materialising the 1x4x8192x446720 f32 scores
(58.5 GB). The compiled code does not test its allocations, so the failed
malloc was a write through NULL: the process died of SIGSEGV. Now such a
temporary is refused with a FlexMemoryError (a MemoryError and a
RuntimeError) naming its shape and bytes: when compiling when it is static,
before the call (nothing allocated) when its size comes from the call's
sizes. Under torch.compile, a refused graph or call runs in eager PyTorch
(which tiles SDPA), so `generate_batch` runs. The first two tests derive
their sizes from this host's limit, so they mean the same on any host (the
huge inputs are `torch.empty`, never touched); the others set a limit of
4 MiB so that eager runs the refused work in seconds.

Each case runs in a subprocess, so that a crash fails the test instead of
killing pytest.
"""

import pytest

from .helpers import died_by_signal, require_compile, run_python

# The SDPA of transformers' attention (GQA by repeat, an additive float
# mask), as Dynamo captured it in the continuous-batching warmup.
_PRELUDE = """
import math, sys
import torch_mlir_flex
import torch
import torch.nn.functional as F
from torch_mlir_flex.backend.errors import FlexMemoryError
from torch_mlir_flex.backend.shapes import memory_limit_bytes

class Attention(torch.nn.Module):
    def forward(self, q, mask, k, v):
        k = k[:, :, None].expand(1, 2, 2, k.shape[2], 16).reshape(1, 4, k.shape[2], 16)
        v = v[:, :, None].expand(1, 2, 2, v.shape[2], 16).reshape(1, 4, v.shape[2], 16)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=0.25)

def inputs(m, n, big=False):
    g = torch.Generator().manual_seed(0)
    if big:  # never touched: no page of it is ever backed
        return (torch.empty(1, 4, m, 16), torch.empty(1, 1, m, n), torch.empty(1, 2, n, 16),
                torch.empty(1, 2, n, 16))
    return (torch.randn(1, 4, m, 16, generator=g), torch.randn(1, 1, m, n, generator=g),
            torch.randn(1, 2, n, 16, generator=g), torch.randn(1, 2, n, 16, generator=g))

# Keys such that the 1x4xMxN f32 scores are 1.25 x what this process can have.
M = 8192
N = math.ceil(1.25 * memory_limit_bytes() / (4 * M * 4))
"""


def _run(body: str):
    r = run_python(_PRELUDE + body, timeout=600)
    assert not died_by_signal(r.returncode), \
        f"the process died of a signal ({r.returncode}):\n{r.stdout}\n{r.stderr[-4000:]}"
    assert r.returncode == 0, f"{r.stdout}\n{r.stderr[-4000:]}"
    return r.stdout


def test_static_temporary_too_large_is_refused_when_compiling():
    require_compile()
    out = _run("""
args = inputs(M, N, big=True)
try:
    torch_mlir_flex.compile(Attention(), args)
except FlexMemoryError as e:
    assert isinstance(e, MemoryError) and isinstance(e, RuntimeError)
    print("REFUSED", e)
else:
    sys.exit("compiled a program whose temporaries cannot be allocated")
""")
    assert "REFUSED" in out
    assert "8192x" in out and "f32" in out and "bytes" in out, out


def test_dynamic_temporary_too_large_is_refused_before_the_call():
    require_compile()
    out = _run("""
from torch.export import Dim
q, mask, k, v = inputs(64, 96)
m, n = Dim("m", min=2), Dim("n", min=2)
fn = torch_mlir_flex.compile(Attention(), (q, mask, k, v), dynamic_shapes=(
    {2: m}, {2: m, 3: n}, {2: n}, {2: n}))
torch.testing.assert_close(fn(q, mask, k, v), Attention()(q, mask, k, v), rtol=1e-4, atol=1e-5)
try:
    fn(*inputs(M, N, big=True))
except FlexMemoryError as e:
    assert isinstance(e, MemoryError) and isinstance(e, RuntimeError)
    print("REFUSED", e)
else:
    sys.exit("called a program whose temporaries cannot be allocated")
# The function still works after the refusal.
torch.testing.assert_close(fn(q, mask, k, v), Attention()(q, mask, k, v), rtol=1e-4, atol=1e-5)
print("OK")
""")
    assert "REFUSED" in out and "OK" in out
    assert "8192x" in out and "bytes" in out and "GB" in out, out


# A host of 4 MiB (the limit the shape checks are made with), so that the
# refusals happen at sizes that run in seconds.
_SMALL_HOST = """
from torch_mlir_flex.backend import shapes
shapes.memory_limit_bytes = lambda: 4 << 20
from torch_mlir_flex import dynamo
dynamo.register()
"""


def test_dynamo_call_too_large_runs_in_eager():
    """SDPA through torch's math decomposition (TORCH_MLIR_FLEX_SDPA=decompose:
    the scores materialise) so that a call is too large for the 4 MiB host."""
    require_compile()
    out = _run("import os; os.environ['TORCH_MLIR_FLEX_SDPA'] = 'decompose'\n" + _SMALL_HOST + """
fn = torch.compile(Attention(), backend="torch_mlir_flex", dynamic=True)
with torch.no_grad():
    for m, n in ((64, 96), (80, 112), (256, 2048), (64, 96)):  # 4x256x2048 f32 scores: 8 MiB
        args = inputs(m, n)
        torch.testing.assert_close(fn(*args), Attention()(*args), rtol=1e-4, atol=1e-5)
print("STATS", dict(dynamo.stats))
assert dynamo.stats["eager"] == 0 and dynamo.stats["eager_calls"] == 1, dict(dynamo.stats)
print("OK")
""")
    assert "OK" in out


def test_generate_batch_with_a_warmup_too_large():
    """transformers' continuous batching compiled through our backend: the
    warmup's SDPA (256 query tokens over the whole cache) made scores too
    large for the 4 MiB host when SDPA went through torch's math
    decomposition (then it ran in eager); through flash attention
    (dynamo/sdpa_as_flex.py) it makes none, so every graph compiles, and
    the tokens are those of the uncompiled model."""
    require_compile()
    pytest.importorskip("transformers")
    out = _run(_SMALL_HOST + """
from transformers import AutoModelForCausalLM, GenerationConfig, LlamaConfig
from transformers.generation.configuration_utils import CompileConfig, ContinuousBatchingConfig

torch.manual_seed(0)
cfg = LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                  pad_token_id=0, bos_token_id=1, eos_token_id=2)
model = AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa").eval()
prompts = [[3 + (i * 7 + j) % 120 for j in range(5 + 3 * i)] for i in range(3)]
gen = GenerationConfig(max_new_tokens=4, do_sample=False, eos_token_id=-1)

def run(compile_config):
    cb = ContinuousBatchingConfig(varlen_compile_config=compile_config, num_blocks=8, max_batch_tokens=256)
    with torch.no_grad():
        out = model.generate_batch(prompts, generation_config=gen, continuous_batching_config=cb)
    return {k: list(v.generated_tokens) for k, v in out.items()}

want = run(None)
got = run(CompileConfig(backend="torch_mlir_flex"))
print("STATS", dict(dynamo.stats))
assert got == want and len(got) == 3, (got, want)
assert dynamo.stats["eager"] == 0 and dynamo.stats["eager_calls"] == 0, dict(dynamo.stats)
# The paged cache's update is traced in place (dynamo/paged_cache_update.py):
# the stream is one graph per phase, none of them split.
assert dynamo.stats["compiled"] >= 2 and dynamo.stats["sdpa_as_flex"] >= 2, dict(dynamo.stats)
print("OK")
""")
    assert "OK" in out


def test_allocation_failing_under_the_limit_raises():
    """A temporary within the limit the shape checks use, which the heap
    still cannot get (the address space is capped right above what the
    process holds): the compiled code's heap abandons the call
    (lib/Runtime/FlexGuard.c) and it raises FlexMemoryError, instead of
    writing through NULL; the function works again once memory is back."""
    require_compile()
    out = _run("""
import resource

class Scores(torch.nn.Module):
    def forward(self, q, k, v):  # a 1x2048x8192 f32 score temporary: 64 MiB
        return torch.softmax(q @ k.transpose(-1, -2), dim=-1) @ v

g = torch.Generator().manual_seed(0)
args = [torch.randn(1, 2048, 16, generator=g), torch.randn(1, 8192, 16, generator=g),
        torch.randn(1, 8192, 16, generator=g)]
fn = torch_mlir_flex.compile(Scores(), tuple(args))
want = Scores()(*args)

def vm_bytes():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmSize:"))

soft, hard = resource.getrlimit(resource.RLIMIT_AS)
resource.setrlimit(resource.RLIMIT_AS, (vm_bytes() + (16 << 20), hard))
try:
    fn(*args)
except FlexMemoryError as e:
    failed = e
else:
    failed = None
resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
assert failed is not None, "the call got its 64 MiB temporary under a 16 MiB margin"
assert isinstance(failed, MemoryError) and "cannot allocate" in str(failed), failed
print("RAISED", failed)
torch.testing.assert_close(fn(*args), want, rtol=1e-4, atol=1e-5)
print("OK")
""")
    assert "RAISED" in out and "OK" in out, out
