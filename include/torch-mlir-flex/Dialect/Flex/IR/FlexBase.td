//===- FlexBase.td - flex dialect definition ---------------*- tablegen -*-===//
//
// The `flex` dialect: tensor-level attention with programmable score and
// mask modifiers, the target of PyTorch's flex_attention.
//
//===----------------------------------------------------------------------===//

#ifndef TORCH_MLIR_FLEX_DIALECT_FLEX_BASE
#define TORCH_MLIR_FLEX_DIALECT_FLEX_BASE

include "mlir/IR/OpBase.td"

def Flex_Dialect : Dialect {
  let name = "flex";
  let cppNamespace = "::mlir::flex";
  let summary = "Attention with programmable score_mod and mask_mod regions";
  let description = [{
    The `flex` dialect holds `flex.attention`, a destination-passing-style
    attention op whose score modifier and mask are regions of scalar code.
    It is the target of PyTorch's `torch.nn.attention.flex_attention` after
    import through torch-mlir, and lowers either to a scalar reference loop
    nest (`flex-to-loops`) or to tiled, flash-style code.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::math::MathDialect",
    "::mlir::tensor::TensorDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect"
  ];
}

class Flex_Op<string mnemonic, list<Trait> traits = []>
    : Op<Flex_Dialect, mnemonic, traits>;

#endif // TORCH_MLIR_FLEX_DIALECT_FLEX_BASE
