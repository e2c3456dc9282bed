"""AOTAutograd's cache for our backend: a warm process skips AOTAutograd's
joint trace and partition (docs/training.md, "Warm restarts").

torch's AOTAutogradCache keys a Dynamo graph (its code, its inputs'
metadata, torch's configuration) and stores what AOTAutograd made of it:
the runtime metadata its wrappers need (mutations, aliasing, what the
forward saves) and, in its "bundled" mode, the compiled forward and
backward themselves as `OutputCode` objects. Our compilers return
`FlexOutputCode`: the call of our compiled function, and the forward or
backward graph AOTAutograd gave us, pickled with torch's `GraphPickler`
(node metadata, fake tensors included) with the sizes, strides and
dtypes of the examples we compiled it for. Loaded in another process, it
compiles that graph again through `compile_graph`, whose stages then come
from our own caches (pre_export_cache.py, stage_cache.py, cache.py).

`enabled_for(...)` (around `aot_autograd(...)(gm, example_inputs)` in
training.py) turns the cache on for our compile only:
- the entries live in `<TORCH_MLIR_FLEX_CACHE_DIR>/aotautograd/`, not in
  inductor's directory (a directory of our own, 0700, as the other
  entries: cache_trust.py);
- torch's key gets a tag (`torch.compiler.config.cache_key_tag`) made of
  this package's build id (stage_cache.build_id: our sources, torch,
  torch-mlir, transformers), the host CPU, the lowering pipeline and LLVM
  level, the partitioner (FLEX_PARTITIONER) and the TORCH_MLIR_FLEX_*
  environment: inductor's entries and ours never meet, and a changed
  compiler misses;
- the backward graph is compiled with the forward (AOTAutograd's
  `force_non_lazy_backward_lowering`), so that the entry, which holds
  both, is stored while the settings above apply;
- `sdpa_as_flex.sdpa_flex`, the function our SDPA rewrite calls, is
  marked cacheable for torch's check of the graph's targets (keyed by the
  build id).

Graphs with symbolic sizes, graphs that ran in eager PyTorch, and graphs
torch's check refuses are not stored (torch counts a bypass). Turned off by
`TORCH_MLIR_FLEX_AOT_CACHE=0`, by `TORCH_MLIR_FLEX_STAGE_CACHE=0` or
`TORCH_MLIR_FLEX_CACHE=0` (without our stage entries a hit would compile
everything again), and by torch's own switches
(`torch.compiler.config.force_disable_caches`,
`TORCHINDUCTOR_AUTOGRAD_CACHE=0`, `TORCHINDUCTOR_FX_GRAPH_CACHE=0`).
`cache.stats["aot_stored"]` / `["aot_loaded"]` count the graphs stored /
loaded here.
"""

import contextlib
import os

from ..log import get_logger

log = get_logger("dynamo")

ENABLE_ENV = "TORCH_MLIR_FLEX_AOT_CACHE"
SUBDIR = "aotautograd"
# The node metadata a loaded graph needs: values (shapes, strides, dtypes
# of every node: our pre-export key prints them) and tensor metadata.
_KEPT_META = ("val", "tensor_meta")


def enabled() -> bool:
    from ..backend import cache, stage_cache

    return cache.switched_on(ENABLE_ENV) and stage_cache.enabled()


def directory() -> str:
    from ..backend import cache

    return os.path.join(cache.cache_dir(), SUBDIR)


def _tag(backend, opt_level) -> str:
    from ..backend import module_key, stage_cache

    env = sorted((k, v) for k, v in os.environ.items()
                 if (k.startswith("TORCH_MLIR_FLEX_") and k not in module_key._ENV_IGNORED)
                 or k == "FLEX_PARTITIONER")
    return "torch_mlir_flex-" + stage_cache.key("aot", backend, opt_level, env)


def _sdpa_flex_name() -> str:
    from .sdpa_as_flex import sdpa_flex

    return f"{sdpa_flex.__module__}.{sdpa_flex.__name__}"


@contextlib.contextmanager
def enabled_for(backend, opt_level):
    """AOTAutograd's bundled cache on, for our compile (see above); a no-op
    when off or when our cache directory cannot be used."""
    if not enabled():
        yield False
        return
    from ..backend import cache_trust, stage_cache

    from ..backend import cache

    root, sub = cache.cache_dir(), directory()
    if not (cache_trust.usable_root(root, create=True) and cache_trust.usable_root(sub, create=True)):
        yield False
        return
    import torch
    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config
    from torch._functorch._aot_autograd.autograd_cache import AOTAutogradCache

    marked = dict(inductor_config.unsafe_marked_cacheable_functions)
    marked[_sdpa_flex_name()] = stage_cache.build_id()
    original_dir = AOTAutogradCache.__dict__["_get_tmp_dir"]
    AOTAutogradCache._get_tmp_dir = classmethod(lambda cls: sub)
    try:
        with functorch_config.patch(enable_autograd_cache=True, bundled_autograd_cache=True,
                                    force_non_lazy_backward_lowering=True), \
                inductor_config.patch(unsafe_marked_cacheable_functions=marked), \
                torch.compiler.config.patch(cache_key_tag=_tag(backend, opt_level)):
            yield True
    finally:
        AOTAutogradCache._get_tmp_dir = original_dir


def static_examples(fakes):
    """[(size, stride, dtype) or int] of AOTAutograd's examples, or None
    when one has a symbolic size (not stored: a loaded graph would need
    the symbols of this process's shape environment)."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensor

    out = []
    for x in fakes:
        if isinstance(x, FakeTensor):
            if any(isinstance(s, torch.SymInt) for s in (*x.shape, *x.stride(), x.storage_offset())):
                return None
            if x.storage_offset() or x.device.type != "cpu":
                return None
            out.append((tuple(x.shape), tuple(x.stride()), x.dtype))
        elif type(x) is int:
            out.append(x)
        else:
            return None
    return out


def dump_graph(graph):
    """GraphPickler's bytes of `graph`, or None when it cannot pickle it."""
    from torch.fx._graph_pickler import GraphPickler, Options

    try:
        return GraphPickler.dumps(graph, Options(ops_filter=None, node_metadata_key_filter=lambda k: k in _KEPT_META))
    except Exception as e:  # an object in the graph GraphPickler does not know
        log.info("torch_mlir_flex: AOTAutograd cache: graph not stored (%s: %s)", type(e).__name__, e)
        return None


def load_graph(data, examples=(), fake_mode=None):
    """The GraphModule `dump_graph` pickled, its fake tensors in
    `fake_mode` (default: that of `examples`, or a new one)."""
    from torch._guards import detect_fake_mode
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx._graph_pickler import GraphPickler

    fake_mode = fake_mode or detect_fake_mode(examples) or FakeTensorMode()
    graph = GraphPickler.loads(data, fake_mode)
    graph.recompile()
    return graph


def _output_code_base():
    from torch._inductor.output_code import OutputCode

    return OutputCode


class FlexOutputCode(_output_code_base()):
    """Our compiled forward or backward as AOTAutograd's cache holds it.
    `recipe`: (graph bytes, examples, kind, func_name, backend, opt_level,
    grad mode)
    or None (not stored); `compile_fn(recipe, fake_mode)`: the boxed
    compiled function of a loaded recipe (training.py)."""

    def __init__(self, fn, recipe, compile_fn):
        super().__init__()
        self._fn = fn
        self._recipe = recipe
        self._compile_fn = compile_fn
        self._boxed_call = True

    def __call__(self, inputs):
        return self._fn(inputs)

    def set_triton_bundle(self, triton_bundle) -> None:
        pass

    def prepare_for_serialization(self) -> None:
        from torch._functorch._aot_autograd.autograd_cache import BypassAOTAutogradCache

        if self._recipe is None:
            raise BypassAOTAutogradCache("torch_mlir_flex: a graph with symbolic sizes, that ran in eager "
                                         "PyTorch or that could not be pickled")
        from ..backend import cache

        cache.stats["aot_stored"] += 1
        self._fn = None  # (a copy: the live object keeps its function)

    def post_compile(self, example_inputs, constants, graph_kwargs) -> None:
        if self._fn is not None:
            return
        from torch._guards import detect_fake_mode
        from torch._subclasses.fake_tensor import FakeTensorMode

        from ..backend import cache

        fake_mode = detect_fake_mode(example_inputs) or FakeTensorMode()
        self._fn = self._compile_fn(self._recipe, fake_mode)
        cache.stats["aot_loaded"] += 1
