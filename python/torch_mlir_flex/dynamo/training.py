"""Training through `torch.compile(model, backend="torch_mlir_flex")`.

A graph Dynamo captures with grad mode on and an input that requires grad
goes through AOTAutograd, which hands us a functional forward graph (its
outputs: the user's, then the tensors saved for the backward: q, k, v, out,
logsumexp and the modifiers' captured tensors of each flex_attention) and,
at the first `backward()`, the backward graph (flex_attention's
`flex_attention_backward` higher-order op and the joint graph of its
score_mod). Both compile like any other graph (`compile_graph`: export,
import, lower, JIT); a graph that cannot runs in eager PyTorch with a
warning, as in inference. `stats["forward"]` / `stats["backward"]` count
the compiled ones.

AOTAutograd passes fake tensors as examples; the export takes real ones of
the same sizes and strides (sizes that are symbols take their hints, and
stay dynamic): the graphs view tensors whose layout the forward fixed.
Large ones are zeros no page of which is resident (`real_examples`).

The joint graph is split by the min-cut partitioner (`partition_fn`): the
forward saves no more bytes for the backward than eager autograd does.

A graph whose joint trace needs a derivative torch does not have (an
inference-only quantized model called with grad mode on: torchao int4's
`_weight_int4pack_mm_for_cpu`) is compiled for inference, with a warning.
"""

import re
from typing import Callable, List, Optional

from ..log import get_logger

log = get_logger("dynamo")


def aot_backend(gm, example_inputs: List, backend: Optional[str], opt_level: int = 2) -> Callable:
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.aot_autograd import SerializableAOTDispatchCompiler

    from . import aot_cache, needs_autograd, stats, vocab_buffers

    name = f"graph{stats['graphs'] - 1}"

    def compiler(kind: str, cached: bool):
        def compile_(graph, fakes):
            import torch

            prepare_graph(graph)
            layouts = aot_cache.static_examples(fakes) if cached else None
            data = aot_cache.dump_graph(graph) if layouts is not None else None
            if data is not None:
                # The graph a later process loads, compiled here too: our
                # pre-export key (its printed code) is then the same there.
                graph = aot_cache.load_graph(data, fakes)
            fn = compile_examples(graph, real_examples(fakes), fakes, backend, f"{name}_{kind}", kind, opt_level)
            if not cached:
                return make_boxed_func(fn)
            eager = getattr(fn, "__self__", None) is graph  # gm.forward: nothing of ours to store
            recipe = None if data is None or eager else (data, layouts, kind, f"{name}_{kind}", backend, opt_level,
                                                         torch.is_grad_enabled())
            return aot_cache.FlexOutputCode(make_boxed_func(fn), recipe, compile_recipe)

        return SerializableAOTDispatchCompiler(aot_cache.FlexOutputCode, compile_) if cached else compile_

    def aot(cached=False):
        return aot_autograd(fw_compiler=compiler("forward", cached), bw_compiler=compiler("backward", cached),
                            inference_compiler=compiler("compiled", cached), partition_fn=partition_fn(),
                            decompositions=backward_decompositions())(gm, example_inputs)

    aot = vocab_buffers.with_joint_pass(aot)  # log-softmax recomputed in the backward (vocab_buffers.py)

    try:
        if not needs_autograd(example_inputs):
            return aot()
        # Training graphs: AOTAutograd's cache, which a second process
        # loads instead of tracing (aot_cache.py).
        with aot_cache.enabled_for(backend, opt_level) as cached:
            return aot(cached)
    except RuntimeError as e:
        op = missing_derivative(e)
        if op is None:
            raise
    # An inference-only model called with grad mode on (its float parameters
    # require grad): the joint graph needs the derivative of an op torch has
    # none for (torchao int4's aten::_weight_int4pack_mm_for_cpu); eager
    # would fail at backward() too. Compiled for inference.
    import torch

    log.warning("torch_mlir_flex: %s needs the derivative of %s, which torch does not implement: compiled "
                "for inference (its outputs do not require grad; call the model under torch.no_grad())",
                name, op)
    stats["inference_only"] += 1
    with torch.no_grad():
        return aot()


def prepare_graph(graph) -> None:
    """AOTAutograd's graph as we compile it (and store it: aot_cache.py)."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    from ..importer.closure_captures import inline_scalar_constants
    from . import vocab_buffers

    # A constant a modifier makes (`shift[0]`: torch.tensor(0)) is an
    # attribute of the modifier's submodule, which export would make fake.
    with unset_fake_temporarily():
        inline_scalar_constants(graph)
    drop_detaches(graph)
    vocab_buffers.apply(graph)  # fewer vocabulary-sized buffers (vocab_buffers.py)


def compile_examples(graph, examples, made, backend, func_name, kind, opt_level):
    """compile_graph's function for `graph` and `examples` (from
    real_examples: freed once compiled, those `made` marks)."""
    from . import compile_graph

    fn = compile_graph(graph, examples, backend, func_name, kind=kind, keep_strides=True, opt_level=opt_level)
    free_examples(examples, made)
    return fn


def compile_recipe(recipe, fake_mode):
    """The boxed compiled function of a graph AOTAutograd's cache loaded
    (aot_cache.FlexOutputCode): compiled again, its stages from our caches."""
    import torch
    from functorch.compile import make_boxed_func
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    from . import aot_cache

    data, layouts, kind, func_name, backend, opt_level, grad = recipe
    graph = aot_cache.load_graph(data, fake_mode=fake_mode)
    with unset_fake_temporarily():
        examples = [x if isinstance(x, int) else _zeros(*x) for x in layouts]
    made = [not isinstance(x, int) for x in layouts]
    # In the grad mode AOTAutograd compiled it in (part of our pre-export key).
    with torch.set_grad_enabled(grad):
        fn = compile_examples(graph, examples, made, backend, func_name, kind, opt_level)
    return make_boxed_func(fn)


def partition_fn():
    """How AOTAutograd splits the joint graph into forward and backward:
    the min-cut partitioner (inductor's), which saves the fewest bytes for
    the backward and recomputes cheap elementwise ops (casts, adds, a
    norm's scale, an activation) in the backward instead of saving their
    results; AOTAutograd's default would save every forward value the
    backward reads. Its recomputed ops are ordinary aten ops the backward
    graph lowers like the forward's."""
    import os

    from torch._functorch.partitioners import default_partition, min_cut_rematerialization_partition

    return default_partition if os.environ.get("FLEX_PARTITIONER") == "default" else \
        min_cut_rematerialization_partition


def missing_derivative(e: BaseException):
    """The op named by autograd's "derivative for <op> is not implemented", or None."""
    m = re.search(r"derivative for (\S+) is not implemented", str(e))
    return m.group(1) if m else None


def backward_decompositions() -> dict:
    """torch's decompositions of the gradient ops (`silu_backward`,
    `_fused_rms_norm_backward`, `_softmax_backward_data`, ...) and of the
    forward ops whose saved values they read: the backward graph then holds
    core aten ops that torch-mlir lowers."""
    import torch._decomp as decomp

    from .vocab_buffers import decompositions as vocab_buffers_decompositions

    table = decomp.decomposition_table
    return {**{op: fn for op, fn in table.items()
               if "backward" in op.name() or op.name() == "aten::_fused_rms_norm"}, **vocab_buffers_decompositions()}


def drop_detaches(gm) -> None:
    """AOTAutograd's graphs detach what they save; exported without grad,
    `detach` only makes the export re-trace the graph (decomposition_check.py)."""
    import torch

    for n in list(gm.graph.nodes):
        if n.op == "call_function" and n.target is torch.ops.aten.detach.default:
            n.replace_all_uses_with(n.args[0])
            gm.graph.erase_node(n)
    gm.recompile()


def real_examples(fakes: List) -> List:
    """Real tensors for AOTAutograd's fake examples (zeros of the same
    sizes, strides and dtypes; symbolic sizes at their hints); SymInts stay.
    One of `LAZY_BYTES` or more is a view of an anonymous mapping of its
    own: its zeros are the kernel's, mapped in only where something reads
    or writes them, and the export reads none. A backward graph's examples
    are a copy of every activation the forward saved: zero-filled, they
    were resident while it compiled, with the activations themselves
    (about 250 MiB of the first step's peak for a 4-layer Llama)."""
    from torch._subclasses.fake_tensor import FakeTensor, unset_fake_temporarily

    out = []
    with unset_fake_temporarily():
        for x in fakes:
            if isinstance(x, FakeTensor):
                out.append(_zeros([_hint(s) for s in x.shape], [_hint(s) for s in x.stride()], x.dtype))
            else:
                out.append(x)
    return out


def _zeros(size, stride, dtype):
    import torch

    extent = 1 + sum((n - 1) * st for n, st in zip(size, stride)) if all(size) else 0
    if extent * dtype.itemsize >= LAZY_BYTES:
        return _mapped_zeros(size, stride, extent, dtype)
    return torch.empty_strided(size, stride, dtype=dtype).zero_()


# Examples this large are lazily mapped zeros (real_examples).
LAZY_BYTES = 1 << 16


def _mapped_zeros(size, stride, extent, dtype):
    """A tensor of `size` / `stride` over `extent` elements of zeros in an
    anonymous mapping of its own (pages appear when touched)."""
    import mmap

    import torch

    nbytes = extent * dtype.itemsize
    region = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    flat = torch.frombuffer(region, dtype=torch.uint8, count=nbytes)
    return flat.view(dtype).as_strided(size, stride)


def free_examples(examples: List, made: List) -> None:
    """Frees the storage of the tensors `real_examples` made once the graph
    is compiled: its calls read the caller's tensors, but the exported
    program and the graph's inputs keep the examples, which would hold a
    second copy of every weight and saved activation the graph takes (519
    MB per graph for a frozen 151936 x 896 embedding). A mapped example
    (`_mapped_zeros`) gives back whatever pages were touched. `made`: per
    example, whether real_examples made it (AOTAutograd's fake tensors),
    as a list of flags or the fake examples themselves."""
    from torch._subclasses.fake_tensor import FakeTensor

    for x, fake in zip(examples, made):
        if not (fake is True or isinstance(fake, FakeTensor)):
            continue
        storage = x.untyped_storage()
        if storage.resizable():
            storage.resize_(0)
        elif storage.nbytes():
            # The mapping stays (the exported program keeps the tensor);
            # its pages go back to the kernel.
            _drop_pages(storage.data_ptr(), storage.nbytes())


def _drop_pages(address: int, nbytes: int) -> None:
    """madvise(MADV_DONTNEED) over the whole pages of [address, +nbytes)."""
    import ctypes
    import mmap

    libc = ctypes.CDLL(None, use_errno=True)
    start = address & ~(mmap.PAGESIZE - 1)
    length = (address + nbytes - start) & ~(mmap.PAGESIZE - 1)
    if length:
        libc.madvise(ctypes.c_void_p(start), ctypes.c_size_t(length), mmap.MADV_DONTNEED)


def _hint(size) -> int:
    node = getattr(size, "node", None)
    if node is None:
        return int(size)
    hint = getattr(node, "hint", None)
    if hint is None:
        hint = node.shape_env.size_hint(node.expr)
    return int(hint)
