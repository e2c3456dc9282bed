//===- Passes.h - flex dialect passes ---------------------------*- C++ -*-===//
#ifndef TORCH_MLIR_FLEX_DIALECT_FLEX_TRANSFORMS_PASSES_H
#define TORCH_MLIR_FLEX_DIALECT_FLEX_TRANSFORMS_PASSES_H

#include "mlir/Dialect/AMX/AMXDialect.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Pass/Pass.h"

namespace mlir {
namespace flex {

/// The location name that flex-serialize-foralls (runtime-choice) puts
/// around small ops' parallel loops, for flex-omp-if-awake.
inline constexpr llvm::StringLiteral kSmallParallelLoc = "flex.small_parallel";

#define GEN_PASS_DECL
#include "torch-mlir-flex/Dialect/Flex/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "torch-mlir-flex/Dialect/Flex/Transforms/Passes.h.inc"

} // namespace flex
} // namespace mlir

#endif
