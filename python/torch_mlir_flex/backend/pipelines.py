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
            TO_LLVM,
        ]
    )
    + ")",
}


def get_pipeline(name: str) -> str:
    try:
        return PIPELINES[name]
    except KeyError:
        raise ValueError(
            f"unknown lowering pipeline {name!r}; known: {sorted(PIPELINES)}"
        ) from None
