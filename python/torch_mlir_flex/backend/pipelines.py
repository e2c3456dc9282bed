"""Named lowering pipelines of our MLIR (textual pass pipelines).

Each takes a module of linalg-on-tensors + `flex.attention` ops on tensors to
the LLVM dialect. `reference` uses the scalar reference (`flex-to-loops`).
"""

BUFFERIZE = (
    "one-shot-bufferize{bufferize-function-boundaries "
    "function-boundary-type-conversion=identity-layout-map}"
)

TO_LLVM = ",".join(
    [
        "convert-linalg-to-loops",
        "expand-strided-metadata",
        "lower-affine",
        "convert-scf-to-cf",
        "convert-math-to-llvm",
        "convert-arith-to-llvm",
        "convert-index-to-llvm",
        "finalize-memref-to-llvm",
        "convert-func-to-llvm",
        "convert-cf-to-llvm",
        "reconcile-unrealized-casts",
    ]
)

PIPELINES = {
    # Scalar reference: bufferize, flex.attention -> loops, linalg -> loops.
    "reference": "builtin.module("
    + ",".join(
        [
            "func.func(linalg-generalize-named-ops)",
            BUFFERIZE,
            "func.func(buffer-deallocation-simplification)",
            "func.func(flex-to-loops)",
            # memref.copy (e.g. from tensor.insert_slice of a torch.cat)
            # would call the runtime library's memrefCopy, absent in the JIT.
            "func.func(flex-copies-to-linalg)",
            TO_LLVM,
        ]
    )
    + ")",
}


# Flash-style tiled lowering (flex-to-flash, issue 5). flex.attention on
# tensors becomes scf.forall (B, Hq, M-tiles) + scf.for (N-tiles) of linalg
# tile ops; ops flex-to-flash leaves (dynamic E/Ev) go to flex-to-loops after
# bufferization. Temporaries are freed by ownership-based deallocation.
# `tiled_pipeline(...)` builds variants (tile sizes, OpenMP threads).
def tiled_pipeline(tile_m: int = 0, tile_n: int = 0, block_sparsity: bool = True,
                   openmp: bool = False) -> str:
    flash = (f"func.func(flex-to-flash{{tile-m={tile_m} tile-n={tile_n} "
             f"block-sparsity={int(block_sparsity)}}})")
    forall = ("func.func(scf-forall-to-parallel),convert-scf-to-openmp,"
              "func.func(flex-inline-alloca-scopes)"
              if openmp else "func.func(scf-forall-to-for)")
    to_llvm = TO_LLVM.replace("convert-linalg-to-loops,", "")
    if openmp:
        to_llvm = to_llvm.replace("convert-cf-to-llvm,",
                                  "convert-cf-to-llvm,convert-openmp-to-llvm,")
    return "builtin.module(" + ",".join(
        [
            flash,
            "canonicalize",
            "cse",
            BUFFERIZE,
            "func.func(ownership-based-buffer-deallocation)",
            "canonicalize",
            "func.func(buffer-deallocation-simplification)",
            "func.func(bufferization-lower-deallocations)",
            "func.func(flex-to-loops)",
            # memref.copy of strided views would call the runtime library.
            "func.func(flex-copies-to-linalg)",
            "cse",
            "canonicalize",
            "func.func(convert-linalg-to-loops)",
            "canonicalize",
            "cse",
            forall,
            to_llvm,
        ]
    ) + ")"


PIPELINES["tiled"] = tiled_pipeline()


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
