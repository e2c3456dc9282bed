//===- FlexOps.h - flex dialect operations ----------------------*- C++ -*-===//
#ifndef TORCH_MLIR_FLEX_DIALECT_FLEX_IR_FLEXOPS_H
#define TORCH_MLIR_FLEX_DIALECT_FLEX_IR_FLEXOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/DestinationStyleOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/TilingInterface.h"
#include "torch-mlir-flex/Dialect/Flex/IR/FlexDialect.h"

#define GET_OP_CLASSES
#include "torch-mlir-flex/Dialect/Flex/IR/FlexOps.h.inc"

namespace mlir::flex {
/// Clones the body of a score_mod/mask_mod region at `b`'s insertion point
/// with its block arguments bound to `args`; returns the yielded value.
Value inlineModifier(OpBuilder &b, Region &region, ValueRange args);

/// Like inlineModifier, for a region yielding any number of values.
SmallVector<Value> inlineRegion(OpBuilder &b, Region &region, ValueRange args);

/// Extent `d` of the ranked tensor or memref `v` as an index value: an
/// arith.constant when static, else tensor.dim / memref.dim.
Value emitDim(OpBuilder &b, Location loc, Value v, int64_t d);

/// Verifies the score_mod / mask_mod regions shared by flex.attention,
/// flex.online_attention and flex.attention_backward: block arguments, one
/// yielded value, and (when `checkCaptures`) tensors from above only
/// through `captures`.
LogicalResult verifyModifierRegions(Operation *op, Region &scoreMod,
                                    Region &maskMod, ValueRange captures,
                                    bool checkCaptures);

/// Checks that the ops in `regions` use tensors defined above `op` only
/// through `captures`.
LogicalResult verifyCapturedUses(Operation *op, ArrayRef<Region *> regions,
                                 ValueRange captures);
} // namespace mlir::flex

#endif
