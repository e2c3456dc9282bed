//===- Math/Passes.td - math expansions for vectorizable code ---*- tablegen -*-===//
//
// Passes of lib/Dialect/Flex/Transforms/Math/ (tests: test/Dialect/Flex/Math/).
//
//===----------------------------------------------------------------------===//
#ifndef TORCH_MLIR_FLEX_DIALECT_FLEX_TRANSFORMS_MATH_PASSES
#define TORCH_MLIR_FLEX_DIALECT_FLEX_TRANSFORMS_MATH_PASSES

include "mlir/Pass/PassBase.td"

def FlexExpandMath : Pass<"flex-expand-math", "ModuleOp"> {
  let summary = "Lower the math ops that LLVM IR translation cannot take";
  let description = [{
    convert-math-to-llvm leaves `math.erf`, `math.erfc`, `math.cbrt`,
    `math.asinh`, `math.acosh` and `math.atanh` untouched, and the JIT
    then fails ("missing LLVMTranslationDialectInterface"). torch-mlir's
    linalg lowering emits erf (exact GELU, `torch.erf`) and the inverse
    hyperbolic functions. This pass rewrites them, on scalars and vectors:

    - f32 `erf`, `erfc`, `cbrt`: MLIR's polynomial approximations
      (`populateMathPolynomialApproximationPatterns`); f16/bf16 operands are
      computed in f32 and truncated;
    - `asinh`, `acosh`, `atanh` (any float type): expansions in terms of
      `log`/`log1p`/`sqrt`, written for accuracy (no cancellation for
      negative or small arguments, no overflow for large ones);
    - f64 `erf`, `erfc`, `cbrt`: calls to the C library (`erf`, `erfc`,
      `cbrt`), which the JIT resolves in the process.

    With `approximate-exp`, `math.exp` gets the same treatment (MLIR's
    polynomial approximation in f32; f16/bf16 computed in f32): LLVM then
    vectorizes the loops of elementwise exp (SiLU, sigmoid, softmax outside
    attention), which otherwise call the C library's `expf` one element at
    a time.

    Any of these ops left afterwards (e.g. on an unsupported type) is an
    error naming the op. Run before convert-math-to-llvm.

    ```mlir
    %y = math.erf %x : f32
    ==>
    (arith/math ops of a rational approximation; no math.erf)
    ```
  }];
  let options = [
    Option<"approximateExp", "approximate-exp", "bool", /*default=*/"false",
           "Also replace math.exp by its polynomial approximation">,
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::vector::VectorDialect"];
}

#endif // TORCH_MLIR_FLEX_DIALECT_FLEX_TRANSFORMS_MATH_PASSES
