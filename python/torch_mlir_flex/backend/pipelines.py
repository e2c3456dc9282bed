"""Named lowering pipelines of our MLIR (textual pass pipelines).

Each takes a module of linalg-on-tensors + `flex.attention` ops on tensors to
the LLVM dialect. `reference` uses the scalar reference (`flex-to-loops`).
A pipeline is an ordered tuple of named stages (REFERENCE_STAGES,
TILED_STAGES, both ending in TO_LLVM_STAGES), each with why it runs there
and, if it is optional, the options it needs; `assemble` joins the stages
that apply. A new pass is one entry in the stage list, at its place.
"""

import os
from dataclasses import dataclass
from typing import Callable, Tuple, Union

try:
    from .cpu_features import (amx_default, bf16_dot_default, host_has_amx_bf16,
                               host_has_avx512_bf16, spread_workers_default,
                               vector_bits_default)
except ImportError:  # loaded as a plain module (test/robustness/fuzz.py)
    from cpu_features import (amx_default, bf16_dot_default, host_has_amx_bf16,
                              host_has_avx512_bf16, spread_workers_default,
                              vector_bits_default)

# Calling convention (docs/runtime.md, calling.py): the entry function's
# results are out-params filled by bufferization.materialize_in_destination
# (or, for an input the program mutates, that input's own buffer);
# eliminate-empty-tensors lets the ops producing a result write straight
# into the caller's buffer instead of a temporary that is then copied.
# A mutated input is written in place (calling.py's `in_place`): its
# result, marked flex.in_place, is dropped right after (copied into the
# argument first if bufferization could not update it in place), before
# deallocation sees it.
# tensor.concat as inserts into one tensor.empty first (flex-decompose-concat):
# eliminate-empty-tensors then writes a concatenation that is a result (a
# KV cache grown by torch.cat) straight into the caller's buffer.
BUFFERIZE = (
    "func.func(flex-decompose-concat),"
    "eliminate-empty-tensors,"
    "one-shot-bufferize{bufferize-function-boundaries "
    "function-boundary-type-conversion=identity-layout-map},"
    "flex-in-place-results"
)

# Frees every temporary buffer (function arguments are never owned, so no
# input, output or global is freed); bufferization.clone left by it becomes
# memref.alloc + memref.copy. After flex-to-loops: the pass rejects ops with
# regions on memrefs (flex.attention), and flex-to-loops leaves its row
# buffer to it.
DEALLOCATE = ",".join(
    [
        "func.func(ownership-based-buffer-deallocation)",
        "canonicalize",
        "func.func(buffer-deallocation-simplification)",
        # at module level: the generic lowering adds a helper function
        "bufferization-lower-deallocations",
        "convert-bufferization-to-memref",
        # Each temporary freed after its last use, not at the block's end
        # (a whole model's layers would all stay allocated until the return);
        # after canonicalize has folded the frees' `scf.if %true` guards.
        "canonicalize",
        "func.func(flex-free-after-last-use)",
    ]
)

# f32 -> bf16 truncation without AVX512-BF16 is a call of compiler-rt's
# __truncsfbf2, which the JIT does not have (the process aborted on a
# missing symbol), and LLVM computes bf16 arithmetic in f32 with that
# truncation after each op: on such hosts math and arith ops on bf16 are
# computed in f32 (extf before, truncf after, as LLVM would) and arith-expand
# writes the truncations as integer ops (round to nearest even, NaN kept
# quiet, as torch rounds).
BF16_EXPAND = [] if host_has_avx512_bf16() else [
    "func.func(math-extend-to-supported-types{target-type=f32})",
    "func.func(arith-emulate-unsupported-floats{source-types=bf16 target-type=f32})",
    "arith-expand{include-bf16=true}"]


@dataclass(frozen=True)
class Stage:
    """One named step of a pipeline: its passes (text, or text built from
    the options), why it runs there, and when it is left out."""

    name: str
    passes: Union[str, Callable[["LoweringOptions"], str]]
    why: str
    when: Callable[["LoweringOptions"], bool] = lambda o: True

    def text(self, o: "LoweringOptions") -> str:
        return self.passes(o) if callable(self.passes) else self.passes


@dataclass(frozen=True)
class LoweringOptions:
    """The options the stages read; `tiled` False is the reference lowering.
    `tiled_pipeline` documents and resolves the others."""

    tiled: bool = False
    tile_m: int = 0
    tile_n: int = 0
    block_sparsity: bool = True
    openmp: bool = False
    vectorize: bool = True
    num_threads: int = 0
    bf16_dot: bool = False
    bf16_dot_backward: bool = False
    amx: bool = False
    split_keys_tasks: int = 0
    serial_below_us: int = 0
    small_ops_when_awake: bool = False
    spread_workers: bool = False
    blas: bool = False
    parallel_rows: bool = False
    fuse_elementwise: bool = False
    vector_bits: int = 512


def assemble(stages: Tuple[Stage, ...], o: LoweringOptions) -> str:
    """The textual pipeline of `stages` (those whose `when` holds) in order."""
    return "builtin.module(" + ",".join(s.text(o) for s in stages if s.when(o)) + ")"


def _vector_to_llvm(o: LoweringOptions) -> str:
    opts = (["enable-x86vector=1"] if o.bf16_dot or o.amx else []) + (
        ["enable-amx=1"] if o.amx else [])
    return "convert-vector-to-llvm" + ("{" + " ".join(opts) + "}" if opts else "")


# Bufferized loops (memrefs) -> the LLVM dialect; the last stages of every pipeline.
TO_LLVM_STAGES = (
    Stage("linalg-to-loops", "convert-linalg-to-loops",
          "reference only: linalg ops as scf loops (tiled runs it per function earlier)",
          when=lambda o: not o.tiled),
    Stage("widen-i1-memrefs", "flex-widen-i1-memrefs",
          "bool memrefs as i8 (finalize-memref-to-llvm asserts on loads narrower than 8 bits); "
          "before the arith lowering, as it adds trunci/extui"),
    Stage("lower-checks", "flex-lower-checks",
          "runtime checks (flex-insert-checks) as stores into the status argument: after "
          "every loop exists, before scf-to-cf"),
    Stage("expand-strided-metadata", "expand-strided-metadata",
          "subviews' strided metadata as plain index arithmetic, for the memref lowering"),
    Stage("lower-affine", "lower-affine", "affine ops (left by the above) as arith"),
    Stage("expand-math",
          lambda o: "flex-expand-math{approximate-exp=1}" if o.tiled else "flex-expand-math",
          "math.erf/erfc/cbrt/asinh/acosh/atanh have no LLVM lowering: approximations; tiled: "
          "exp as a polynomial too, so LLVM vectorizes elementwise exp (SiLU, sigmoid)"),
    Stage("bf16-expand", ",".join(BF16_EXPAND),
          "hosts without AVX512-BF16: bf16 math computed in f32, truncations as integer ops "
          "(BF16_EXPAND)", when=lambda o: bool(BF16_EXPAND)),
    Stage("outline-loops", "flex-outline-loops",
          "one private function per top-level loop nest, identical ones merged: LLVM's O2 "
          "time is quadratic in a function's loops, and a model's layers repeat them"),
    Stage("scf-to-cf", "convert-scf-to-cf", "scf loops and ifs as cf branches"),
    Stage("vector-to-llvm", _vector_to_llvm,
          "tiled: flex-to-flash's vector micro-kernels (x86vector with bf16_dot or amx, "
          "amx tiles with amx)", when=lambda o: o.tiled),
    Stage("math-to-llvm", "convert-math-to-llvm",
          "the math ops left (after flex-expand-math) as LLVM intrinsics"),
    Stage("arith-to-llvm", "convert-arith-to-llvm", "arith ops as LLVM ops"),
    Stage("index-to-llvm", "convert-index-to-llvm", "index arithmetic as LLVM integer ops"),
    Stage("memref-to-llvm", "finalize-memref-to-llvm{use-generic-functions=1}",
          "heap calls go to the runtime library (lib/Runtime/FlexAlloc.c), which keeps large "
          "blocks between calls instead of mapping them anew"),
    Stage("func-to-llvm", "convert-func-to-llvm", "functions, calls and returns as LLVM ones"),
    Stage("cf-to-llvm", "convert-cf-to-llvm", "cf branches and asserts as LLVM ones"),
    Stage("openmp-to-llvm", "convert-openmp-to-llvm",
          "openmp: the parallel regions as __kmpc_* runtime calls", when=lambda o: o.openmp),
    Stage("reconcile-casts", "reconcile-unrealized-casts",
          "last: the casts the conversions left between them cancel out"),
)

# Scalar reference: bufferize, flex.attention -> loops, linalg -> loops.
REFERENCE_STAGES = (
    Stage("materialize-quant-matmul", "flex-materialize-quant-matmul",
          "first: outlined @__flex_quant_matmul_N calls as flex.quant_matmul (compile.py's "
          "materialize runs it right after flex-materialize; here for IR that skipped it)"),
    Stage("insert-checks", "flex-insert-checks",
          "on tensors: guard data-dependent reads, record cf.assert (runtime checks)"),
    Stage("quant-matmul-to-linalg", "func.func(flex-quant-matmul-to-linalg)",
          "flex.quant_matmul as a dequantizing linalg.generic, before generalize and "
          "bufferization (after insert-checks: its in-bounds byte reads need no guard)"),
    Stage("generalize", "func.func(linalg-generalize-named-ops)",
          "named linalg ops as linalg.generic, the one form the reference lowers"),
    Stage("bufferize", BUFFERIZE,
          "tensors -> buffers; results written into the caller's out-params (BUFFERIZE)"),
    Stage("flex-to-loops", "func.func(flex-to-loops)",
          "flex.attention on memrefs as the scalar reference loops"),
    Stage("deallocate", DEALLOCATE,
          "after flex-to-loops (the deallocation rejects ops with regions on memrefs, and "
          "flex-to-loops leaves its row buffer to it): frees every temporary (DEALLOCATE)"),
    Stage("copies-to-linalg", "func.func(flex-copies-to-linalg)",
          "memref.copy (tensor.insert_slice of a torch.cat) would call the runtime library's "
          "memrefCopy, absent in the JIT"),
    *TO_LLVM_STAGES,
)


def _flash(o: LoweringOptions) -> str:
    return (f"func.func(flex-to-flash{{tile-m={o.tile_m} tile-n={o.tile_n} "
            f"block-sparsity={int(o.block_sparsity)} vectorize={int(o.vectorize)} "
            f"split-keys-tasks={o.split_keys_tasks}"
            f"{f' serial-below-us={o.serial_below_us}' if o.openmp else ''}"
            f"{' bf16-dot=1' if o.bf16_dot else ''}"
            f"{' amx=1' if o.amx else ''}{_vector_bits(o)}}})")


def _vector_bits(o: LoweringOptions) -> str:
    """The passes' `vector-bits`, only when it is not their default (512):
    the pipelines of AVX-512 hosts keep their text (and cache keys)."""
    return f" vector-bits={o.vector_bits}" if o.vector_bits != 512 else ""


def _flash_backward(o: LoweringOptions) -> str:
    return (f"func.func(flex-backward-to-flash{{tile-m={o.tile_m} tile-n={o.tile_n} "
            f"block-sparsity={int(o.block_sparsity)} vectorize={int(o.vectorize)}"
            f"{f' serial-below-us={o.serial_below_us}' if o.openmp else ''}"
            f"{' bf16-dot=1' if o.bf16_dot and o.bf16_dot_backward else ''}"
            f"{' amx=1' if o.amx else ''}{_vector_bits(o)}}})")


def _foralls_to_openmp(o: LoweringOptions) -> str:
    choice = "{runtime-choice=1}" if o.small_ops_when_awake else ""
    return (f"func.func(flex-serialize-foralls{choice},scf-forall-to-parallel),"
            f"convert-scf-to-openmp{{num-threads={o.num_threads}}},"
            f"{'flex-omp-if-awake,' if o.small_ops_when_awake else ''}"
            f"{'flex-omp-spread-workers,' if o.spread_workers else ''}"
            "func.func(flex-inline-alloca-scopes,flex-omp-dynamic-schedule)")


# Flash-style tiled lowering (`tiled_pipeline`, which documents the options).
TILED_STAGES = (
    Stage("materialize-quant-matmul", "flex-materialize-quant-matmul",
          "first: outlined @__flex_quant_matmul_N calls as flex.quant_matmul (compile.py's "
          "materialize runs it right after flex-materialize; here for IR that skipped it)"),
    Stage("insert-checks", "flex-insert-checks",
          "on tensors: guard data-dependent reads, record cf.assert (runtime checks)"),
    Stage("widen-reductions", "func.func(flex-widen-reductions)",
          "bf16/f16 sums (norms) accumulate in f32, as eager's do"),
    Stage("fold-matmul-operands", "func.func(flex-fold-matmul-operands)",
          "blas: matmuls read the weights and narrow inputs in place (docs/dense-ops.md)",
          when=lambda o: o.blas),
    Stage("fold-int-matmul-operands", "func.func(flex-fold-int-matmul-operands)",
          "i8 x i8 -> i32 products (torchao's _int_mm) and the weight's column sum read the "
          "int8 weight through their maps, not a transposed copy of it per call"),
    Stage("flex-to-flash", _flash,
          "flex.attention as scf.forall (B, Hq, M-tiles) + scf.for (N-tiles) of tile ops; "
          "ops it leaves (dynamic E/Ev) go to flex-to-loops after bufferization"),
    Stage("flex-backward-to-flash", _flash_backward,
          "flex.attention_backward as the tiled FA2 backward (Backward/FlexBackwardToFlash.cpp); "
          "ops it leaves keep flex-to-loops' reference"),
    Stage("simplify", "canonicalize,cse", "fold and deduplicate what the flash lowering built"),
    Stage("fuse-dequantize-into-blocks", "func.func(flex-fuse-dequantize-into-blocks)",
          "after simplify: an int8 K/V (sitofp * scale: hf.generator's int8 KV cache) "
          "dequantized per key block inside flex-to-flash's loop, no f32 copy of the cache; "
          "$FLEX_FUSE_DEQUANTIZE=0 turns it off",
          when=lambda o: os.environ.get("FLEX_FUSE_DEQUANTIZE", "1") != "0"),
    Stage("fuse-elementwise", "func.func(flex-fuse-elementwise),canonicalize,cse",
          "fuse_elementwise: elementwise chains fused into their consumers (not into "
          "contractions, nor inside the flash tiles), intermediates never written out",
          when=lambda o: o.fuse_elementwise),
    Stage("reassociate-sums", "func.func(flex-reassociate-sums)",
          "float sums of reduction generics may be reordered, so LLVM vectorizes them (and "
          "an exp or square fused into them); $FLEX_REASSOCIATE_SUMS=0 turns it off",
          when=lambda o: os.environ.get("FLEX_REASSOCIATE_SUMS", "1") != "0"),
    Stage("unshare-inits", "func.func(flex-unshare-inits)",
          "after the last cse: each product and elementwise op gets its own init, allocated "
          "where it is used (not once per shape at the top, alive until the last layer)"),
    Stage("bufferize", BUFFERIZE,
          "tensors -> buffers; results written into the caller's out-params (BUFFERIZE)"),
    Stage("amx-contractions", "func.func(flex-amx-contractions)",
          "amx: the marked contractions (memrefs now) on AMX tiles", when=lambda o: o.amx),
    Stage("flex-to-loops", "func.func(flex-to-loops)",
          "flex ops flex-to-flash left, as the scalar reference loops"),
    Stage("deallocate", DEALLOCATE,
          "after flex-to-loops (see REFERENCE_STAGES): frees every temporary (DEALLOCATE)"),
    Stage("matmul-to-blas", "flex-matmul-to-blas",
          "blas: matmuls as BLAS calls; after deallocation, as the calls take raw pointers",
          when=lambda o: o.blas),
    Stage("quant-matmul-to-calls", "flex-quant-matmul-to-calls",
          "flex.quant_matmul (bufferized as it is) as calls of the runtime's fused quantized "
          "kernels; after deallocation (raw pointers), before copies-to-linalg (its copies)"),
    Stage("int-matmul-to-calls", "flex-int-matmul-to-calls",
          "i8 x i8 -> i32 products as calls of the runtime's int8 GEMM (flex_gemm_u8s8, "
          "VNNI where the CPU has it); after deallocation (raw pointers)"),
    Stage("copies-to-linalg", "func.func(flex-copies-to-linalg)",
          "memref.copy of strided views would call the runtime library's memrefCopy"),
    Stage("simplify-buffers", "cse,canonicalize", "clean up after bufferization"),
    Stage("parallel-rows", "func.func(flex-parallel-rows)",
          "openmp and parallel_rows: the other large ops (elementwise chains, norms, copies) "
          "split across the threads along their outermost parallel loop",
          when=lambda o: o.openmp and o.parallel_rows),
    Stage("remaining-linalg-to-loops", "func.func(convert-linalg-to-loops),canonicalize,cse",
          "the remaining linalg ops as loops, before the foralls become OpenMP or loops"),
    Stage("foralls-to-openmp", _foralls_to_openmp,
          "openmp: small foralls serialized (SERIAL_BELOW_US), the rest OpenMP parallel loops",
          when=lambda o: o.openmp),
    Stage("foralls-to-loops", "func.func(scf-forall-to-for)",
          "without openmp: the foralls as serial loops", when=lambda o: not o.openmp),
    *TO_LLVM_STAGES,
)

PIPELINES = {"reference": assemble(REFERENCE_STAGES, LoweringOptions())}


# Flash-style tiled lowering (flex-to-flash, issue 5). flex.attention on
# tensors becomes scf.forall (B, Hq, M-tiles) + scf.for (N-tiles) of linalg
# tile ops; ops flex-to-flash leaves (dynamic E/Ev) go to flex-to-loops after
# bufferization. Temporaries are freed by ownership-based deallocation.
# `tiled_pipeline(...)` builds variants (tile sizes, OpenMP threads).
# `vectorize`: flex-to-flash's vector micro-kernels (else linalg tile ops
# left to LLVM's auto-vectorizer). `openmp`: the forall becomes an OpenMP
# parallel loop (needs an OpenMP runtime in the JIT's shared_libs, see
# `find_openmp_runtime`); `num_threads` 0 lets the runtime decide
# (OMP_NUM_THREADS, else all cores). `bf16_dot`: bf16 inputs on AVX512-BF16
# dot products (x86vector, lowered by convert-vector-to-llvm's
# enable-x86vector); None: when the host has them (cpu_features.py,
# TORCH_MLIR_FLEX_BF16_DOT=0 turns it off). `bf16_dot_backward` (with
# `bf16_dot`): the backward's five contractions on the same kernel
# (flex-backward-to-flash's bf16-dot). Off by default: on this project's
# host vdpbf16ps issues one per 2 cycles (measured 1.85 G/s against 7.4 G/s
# for vfmadd231ps), half the FMA's f32 FLOP rate, so the dot backward ran
# 5-20% slower than the widening FMA one (causal bf16 S=1024-4096,
# D=64/128, H=8, fwd+bwd; docs/tiled-lowering.md).
# `amx`: bf16 inputs' contractions on AMX tiles, the forward's Q.K^T and P.V
# (flex-to-flash's amx) and the backward's five (flex-backward-to-flash's
# amx) marked, flex-amx-contractions lowering them after bufferization,
# convert-vector-to-llvm's enable-amx; None: when
# the host has amx_bf16 and Linux grants the tile permission
# (cpu_features.py; TORCH_MLIR_FLEX_AMX=0 turns it off).
# `vector_bits`: the register width flex-to-flash's and
# flex-backward-to-flash's micro-kernels block for, 512 (AVX-512: 32 zmm) or
# 256 (AVX2+FMA: 16 ymm; 8-lane pieces, 4 rows x 3 registers); None: from
# the host (cpu_features.vector_bits_default, capped by
# TORCH_MLIR_FLEX_ISA=avx2|avx512). 256 excludes bf16_dot and amx (AVX-512
# and AMX instructions); their defaults are then off.
# `serial_below_us` (with `openmp`): see SERIAL_BELOW_US; 0 keeps every op
# on the threads.
# `parallel_rows` (with `openmp`; default $FLEX_PARALLEL_ROWS, else on):
# flex-parallel-rows splits the other large linalg ops (elementwise chains,
# norms, copies) across the threads (docs/dense-ops.md).
# `fuse_elementwise` (default $FLEX_FUSE_ELEMENTWISE, else on):
# flex-fuse-elementwise fuses chains of elementwise generics (and a norm's
# squaring into its sum) before bufferization, so their intermediates are
# never written out (block S=512 bf16: 23.3 -> 16.7 ms).
# `split_keys_tasks`: decode ops (M <= 4) with fewer (b, h) row tiles than
# this split their key blocks into chunks run in parallel and merged
# (flash-decoding; about 4x the threads is the intended setting). Default
# $FLEX_SPLIT_KEYS_TASKS, else 0 (off): measured with benchmarks/decode.py
# on the shared 2-core machine, decode is memory-bound and the second core
# busy, so the split cost 10-50% with one (b, h) row tile and gained
# nothing (docs in benchmarks/decode.py).
# With OpenMP, ops whose estimated one-thread time is below this (static
# shapes; FlashTiling.cpp's estimateOneThreadMicros) run on one thread:
# starting and joining a parallel region whose workers sleep (the first
# call after 1 ms idle, KMP_BLOCKTIME) took about 100 us here, e.g. decode S=1024 D=64 H=8 ran in 65 us on one thread
# and 127 us on two; causal S=128 D=64 H=8 in 181 us and 245 us; at S=256
# two threads won (481 vs 553 us). With awake workers (back-to-back calls)
# two threads won at those sizes too (decode S=1024 D=64: 50-59 us against
# 69-86 us). `small_ops_when_awake` (default $FLEX_SMALL_OPS_WHEN_AWAKE,
# else off) makes the choice where such a region starts instead:
# flex-omp-if-awake runs it on the threads only within KMP_BLOCKTIME after
# the module's last region (threads.py). Off by default: with torch's own
# threads in the process (after torch ops ran), two-thread small regions
# here were often preempted: decode S=1024 D=64 took 33-44 us in a loop of
# our calls alone but 116-174 us after torch.compile calls (about 2
# involuntary context switches per call), against a steady 50-65 us on one
# thread.
SERIAL_BELOW_US = 250


def tiled_pipeline(tile_m: int = 0, tile_n: int = 0, block_sparsity: bool = True,
                   openmp: bool = False, vectorize: bool = True,
                   num_threads: int = 0, bf16_dot=None, bf16_dot_backward: bool = False,
                   amx=None, split_keys_tasks: int = -1,
                   serial_below_us: int = SERIAL_BELOW_US,
                   small_ops_when_awake=None, spread_workers=None, blas=None,
                   parallel_rows=None, fuse_elementwise=None, vector_bits=None) -> str:
    """TILED_STAGES with the options above (None / -1: the defaults)."""
    if vector_bits is None:
        vector_bits = vector_bits_default()
    elif vector_bits not in (256, 512):
        raise ValueError(f"vector_bits must be 256 or 512, got {vector_bits!r}")
    if vector_bits == 256 and (bf16_dot or amx):
        raise ValueError("vector_bits=256 (AVX2 kernels) excludes bf16_dot and amx "
                         "(AVX512-BF16 / AMX instructions)")
    if bf16_dot is None:
        bf16_dot = bf16_dot_default() and vector_bits == 512
    elif bf16_dot and not host_has_avx512_bf16():
        # The JIT compiles for this CPU: the instructions would be illegal.
        raise ValueError("bf16_dot=True needs a CPU with avx512_bf16; this one has none")
    if amx is None:
        amx = amx_default() and vector_bits == 512
    elif amx and not host_has_amx_bf16():
        raise ValueError("amx=True needs a CPU with amx_bf16 (and Linux's AMX permission)")
    env = os.environ.get
    if split_keys_tasks < 0:
        split_keys_tasks = int(env("FLEX_SPLIT_KEYS_TASKS", "0"))
    if small_ops_when_awake is None:
        small_ops_when_awake = env("FLEX_SMALL_OPS_WHEN_AWAKE", "0") == "1"
    if spread_workers is None:
        spread_workers = spread_workers_default()
    if blas is None:
        blas = env("FLEX_DENSE_BLAS", "1") != "0"
    if parallel_rows is None:
        parallel_rows = env("FLEX_PARALLEL_ROWS", "1") != "0"
    if fuse_elementwise is None:
        fuse_elementwise = env("FLEX_FUSE_ELEMENTWISE", "1") != "0"
    return assemble(TILED_STAGES, LoweringOptions(
        tiled=True, tile_m=tile_m, tile_n=tile_n, block_sparsity=block_sparsity, openmp=openmp,
        vectorize=vectorize, num_threads=num_threads, bf16_dot=bool(bf16_dot) and vectorize,
        bf16_dot_backward=bf16_dot_backward, amx=bool(amx) and vectorize,
        split_keys_tasks=split_keys_tasks, serial_below_us=serial_below_us,
        small_ops_when_awake=small_ops_when_awake, spread_workers=spread_workers, blas=blas,
        parallel_rows=parallel_rows, fuse_elementwise=fuse_elementwise,
        vector_bits=vector_bits))


PIPELINES["tiled-1t"] = tiled_pipeline()


def find_openmp_runtime():
    """Path of an OpenMP runtime with the __kmpc_* ABI that LLVM's OpenMP
    lowering calls, or None: $FLEX_OPENMP_LIB, else our libflex_kmpc.so
    (lib/Runtime/FlexKmpc.c: those calls on the libgomp torch loaded, so
    that the compiled code, torch and the BLAS share one pool of workers),
    else the pip package intel-openmp's libiomp5.so in this Python's
    prefix, else LLVM's libomp.so.5 from the system."""
    import os
    import sys

    env = os.environ.get("FLEX_OPENMP_LIB")
    if env:
        return env if os.path.exists(env) else None
    kmpc = kmpc_library()
    if kmpc is not None:
        return kmpc
    cands = [os.path.join(prefix, "lib", "libiomp5.so")
             for prefix in dict.fromkeys([sys.prefix, sys.base_prefix])]
    cands += ["/usr/lib/x86_64-linux-gnu/libomp.so.5", "/usr/lib/llvm-14/lib/libomp.so.5"]
    for p in cands:
        if os.path.exists(p):
            return p
    return None


_kmpc = []


def kmpc_library():
    """Path of libflex_kmpc.so when it is built and found the process's
    libgomp (torch's), else None; loaded once, global."""
    import ctypes
    import os

    if not _kmpc:
        path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                            "_bin", "libflex_kmpc.so")
        ready = False
        if os.path.exists(path):
            import torch  # noqa: F401  (its libgomp, global, is what the library finds)
            try:
                ready = bool(ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL).flex_kmpc_ready())
            except (OSError, AttributeError):
                ready = False
        _kmpc.append(path if ready else None)
    return _kmpc[0]


def is_openmp_runtime(path: str) -> bool:
    """Whether the shared library `path` is one of the OpenMP runtimes above."""
    import os

    name = os.path.basename(path)
    return "omp" in name or name == "libflex_kmpc.so"


# "tiled" uses both cores through OpenMP when a runtime is installed (the
# pinned intel-openmp wheel); "tiled-1t" is the same lowering on one thread.
PIPELINES["tiled"] = (tiled_pipeline(openmp=True) if find_openmp_runtime()
                      else PIPELINES["tiled-1t"])


def uses_openmp(pipeline_text: str) -> bool:
    return "convert-scf-to-openmp" in pipeline_text


def get_pipeline(name: str) -> str:
    try:
        return PIPELINES[name]
    except KeyError:
        raise ValueError(
            f"unknown lowering pipeline {name!r}; known: {sorted(PIPELINES)}"
        ) from None


# The default backend: the tiled flash-style lowering (the e2e suite passes
# on both; "reference" stays available for checking).
DEFAULT_BACKEND = "tiled"
