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

Graphs with symbolic sizes, graphs that ran in eager PyTorch, and graphs
torch's check refuses are not stored (torch counts a bypass). Turned off by
`TORCH_MLIR_FLEX_AOT_CACHE=0`, by `TORCH_MLIR_FLEX_STAGE_CACHE=0` or
`TORCH_MLIR_FLEX_CACHE=0` (without our stage entries a hit would compile
everything again), and by torch's own switches
(`torch.compiler.config.force_disable_caches`,
`TORCHINDUCTOR_AUTOGRAD_CACHE=0`, `TORCHINDUCTOR_FX_GRAPH_CACHE=0`).
`cache.stats["aot_loaded"]` counts the graphs loaded here; torch's
`counters["aot_autograd"]` its hits, misses, bypasses and stored entries.

torch's key (`autograd_cache_key`) is replaced, while our compile runs, by
`graph_key`: torch's own checks of the graph, then a hash of what our
compile depends on, without torch's hash of inductor's configuration and
code generators (whose imports cost 0.5-1 s of a warm step).

Graphs with SDPA calls rewritten by `sdpa_as_flex` are stored too: torch's
check allows our `sdpa_flex` while our compile runs (its source is in the
key: module_key.py), and the string annotations of torch's `noop_mask`
(`from __future__ import annotations`), which torch's pickling of the
backward graph's code cannot name, are dropped (`drop_string_types`).
"""

import contextlib
import functools
import os

from ..log import get_logger

log = get_logger("dynamo")

ENABLE_ENV = "TORCH_MLIR_FLEX_AOT_CACHE"
SUBDIR = "aotautograd"
# The node metadata a loaded graph needs: the fake values of its
# placeholders and outputs (dynamo.graph_inputs reads them; dump_graph
# takes the others off: _drop_inner_values). tensor_meta repeats "val".
_KEPT_META = ("val",)


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


@contextlib.contextmanager
def enabled_for(backend, opt_level):
    """AOTAutograd's bundled cache on, for our compile (see above); a no-op
    when off or when our cache directory cannot be used."""
    if not enabled():
        yield False
        return
    from ..backend import cache, cache_trust

    root, sub = cache.cache_dir(), directory()
    if not (cache_trust.usable_root(root, create=True) and cache_trust.usable_root(sub, create=True)):
        yield False
        return
    import torch
    import torch._functorch.config as functorch_config
    from torch._functorch._aot_autograd import autograd_cache
    from torch._functorch._aot_autograd.autograd_cache import AOTAutogradCache

    import torch._inductor.config as inductor_config

    from .sdpa_as_flex import sdpa_flex

    tag = _tag(backend, opt_level)
    original_dir = AOTAutogradCache.__dict__["_get_tmp_dir"]
    original_key = autograd_cache.autograd_cache_key
    AOTAutogradCache._get_tmp_dir = classmethod(lambda cls: sub)
    autograd_cache.autograd_cache_key = functools.partial(graph_key, tag=tag)
    try:
        with functorch_config.patch(enable_autograd_cache=True, bundled_autograd_cache=True,
                                    force_non_lazy_backward_lowering=True,
                                    joint_custom_pass=_dropping_string_types(functorch_config.joint_custom_pass)), \
                torch.compiler.config.patch(cache_key_tag=tag), \
                inductor_config.patch(unsafe_marked_cacheable_functions={
                    **inductor_config.unsafe_marked_cacheable_functions,
                    f"{sdpa_flex.__module__}.{sdpa_flex.__name__}": tag}):
            yield True
    finally:
        AOTAutogradCache._get_tmp_dir = original_dir
        autograd_cache.autograd_cache_key = original_key


def graph_key(mod, example_inputs, config, compiler_config_extra=None, tag=""):
    """(key, []) of AOTAutograd's result for Dynamo's graph `mod`, in place
    of torch's `autograd_cache_key` while our compile runs. torch's checks
    of the graph's targets (`check_cacheable`) and its placeholder names
    normalized as torch does; then, instead of torch's hash of inductor's
    configuration, its code generators (importing them: 0.5-1 s of a warm
    step) and torch's sources: `tag` (our build id, which holds torch's
    version, the pipeline, the environment), the graph's code with every
    node's shape, strides, dtype and device, its nested graphs, constants
    and the Python functions it calls (module_key.py), the inputs'
    metadata, AOTAutograd's configuration and settings and the grad,
    autocast and determinism modes. Symbolic inputs are not keyed
    (torch's bypass: compiled as before)."""
    import hashlib
    import pickle

    import torch
    from torch._functorch import config as functorch_config
    from torch._functorch._aot_autograd.autograd_cache import (BypassAOTAutogradCache, check_cacheable,
                                                               sanitize_gm_for_cache)
    from torch._inductor.codecache import AOTAUTOGRAD_CACHE_PREFIX, extract_tensor_metadata_for_cache_key

    from ..backend.module_key import _Describer, _Undescribable

    gm = mod.gm if isinstance(mod, torch._dynamo.utils.GmWrapper) else mod
    with sanitize_gm_for_cache(gm):
        check_cacheable(gm)
        d = _Describer(list(gm.named_modules(remove_duplicate=False)))
        try:
            d.graph_module(gm)
        except _Undescribable as e:
            raise BypassAOTAutogradCache(f"torch_mlir_flex: the graph holds {e}") from None
    h = hashlib.sha256(tag.encode())
    h.update("\n".join(d.parts).encode())
    for x in example_inputs:
        if isinstance(x, torch.Tensor):
            if any(isinstance(s, torch.SymInt) for s in (*x.shape, *x.stride())):
                raise BypassAOTAutogradCache("torch_mlir_flex: symbolic sizes")
            h.update(repr(extract_tensor_metadata_for_cache_key(x)).encode())
        elif isinstance(x, (int, float, bool)) or x is None:
            h.update(repr((type(x).__name__, x)).encode())
        else:
            raise BypassAOTAutogradCache(f"torch_mlir_flex: an input of type {type(x).__name__}")
    c = config.to_cacheable()
    h.update(repr((c.num_params_buffers, c.keep_inference_input_mutations, c.is_export, c.no_tangents,
                   c.dynamic_shapes, c.aot_autograd_arg_pos_to_source, c.static_input_indices, c.pre_dispatch,
                   torch.is_grad_enabled(), torch.are_deterministic_algorithms_enabled(),
                   [(dev, torch.get_autocast_dtype(dev)) for dev in torch._C._autocast_supported_devices()
                    if torch.is_autocast_enabled(dev)])).encode())
    h.update(pickle.dumps(functorch_config.save_config()))
    return AOTAUTOGRAD_CACHE_PREFIX + h.hexdigest()[:52], []


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
            # A storage offset is not recorded: the examples our compile
            # makes have none either (training.real_examples), so a loaded
            # graph compiles as the stored one did. (With batch 1, the
            # shifted labels `labels[..., 1:].contiguous()` stay a view at
            # offset 1 that the backward reads.)
            if x.device.type != "cpu":
                return None
            out.append((tuple(x.shape), tuple(x.stride()), x.dtype))
        elif type(x) is int:
            out.append(x)
        else:
            return None
    return out


def drop_string_types(graph) -> None:
    """Drops the placeholder types of `graph` and its subgraphs that are
    strings: a modifier written under `from __future__ import annotations`
    (torch's `noop_mask`: `batch: Tensor`) gives its traced graph the type
    "Tensor", which torch's pickling of a graph's code (the backward graph
    AOTAutograd's entry holds) fails to import. Types are not semantics."""
    changed = []
    for sub in graph.modules():
        g = getattr(sub, "graph", None)
        nodes = [n for n in getattr(g, "nodes", ()) if isinstance(n.type, str)]
        for n in nodes:
            n.type = None
        if nodes:
            changed.append(sub)
    for sub in changed:
        sub.recompile()


def _dropping_string_types(before):
    """AOTAutograd's joint pass: `before` (if any), then drop_string_types
    (the backward graph the entry pickles is a copy of the joint's part,
    made before our backward compiler sees it)."""

    def run(joint, joint_inputs):
        if callable(before):
            joint = before(joint, joint_inputs)
        drop_string_types(joint)
        return joint

    return run


def dump_graph(graph):
    """GraphPickler's bytes of `graph`, or None when it cannot pickle it
    or it reads tensor constants (get_attr: a loaded copy held them as
    fake tensors, which our compile cannot read)."""
    import torch
    from torch.fx._graph_pickler import GraphPickler, Options

    for sub in graph.modules():
        for node in getattr(getattr(sub, "graph", None), "nodes", ()):
            if node.op == "get_attr" and isinstance(_attr(sub, node.target), torch.Tensor):
                return None
    dropped = _drop_inner_values(graph)
    try:
        return GraphPickler.dumps(graph, Options(ops_filter=None, node_metadata_key_filter=lambda k: k in _KEPT_META))
    except Exception as e:  # an object in the graph GraphPickler does not know
        log.info("torch_mlir_flex: AOTAutograd cache: graph not stored (%s: %s)", type(e).__name__, e)
        return None
    finally:
        for node, val in dropped:
            node.meta["val"] = val


def _drop_inner_values(graph):
    """Takes the fake values off the nodes whose value a loaded graph's
    compile does not read (all but the placeholders and the outputs:
    dynamo.graph_inputs); returns (node, value) to put back. A warm
    process unpickles each fake value, about two thirds of a graph's
    load time."""
    out = graph.graph.output_node()
    keep = {n for n in out.all_input_nodes} | {n for n in graph.graph.nodes if n.op == "placeholder"}
    dropped = []
    for node in graph.graph.nodes:
        if node not in keep and "val" in node.meta:
            dropped.append((node, node.meta.pop("val")))
    return dropped


def _attr(owner, target: str):
    for part in target.split("."):
        owner = getattr(owner, part, None)
    return owner


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
