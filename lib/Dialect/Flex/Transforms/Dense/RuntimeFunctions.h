//===- RuntimeFunctions.h - calls of lib/Runtime entry points -------------===//
//
// What the Dense passes that turn products into runtime calls (MatmulToBlas,
// QuantMatmulToCalls, IntMatmulToCalls) share. The functions of
// libflex_runtime.so take only `index` values (int64_t in C) and return
// nothing; a memref operand goes as its aligned pointer, its offset and
// some of its strides (in elements).
//   declareRuntimeFunction: the function's declaration in the module, once;
//   appendPointerAndOffset / appendStridedOperand: an operand's arguments;
//   loopDimSize: the size of a product's loop dim, from an operand;
//   foldZeroFill: a zero fill of C right before the product, dropped (the
//     call then overwrites C instead of adding to it).
//
//===----------------------------------------------------------------------===//
#ifndef TORCH_MLIR_FLEX_TRANSFORMS_DENSE_RUNTIMEFUNCTIONS_H
#define TORCH_MLIR_FLEX_TRANSFORMS_DENSE_RUNTIMEFUNCTIONS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::flex {

/// The private declaration `func.func private @name(index x numArgs)` of
/// `module`: the existing one, or a new one at the module's end.
inline func::FuncOp declareRuntimeFunction(ModuleOp module, StringRef name,
                                           unsigned numArgs) {
  if (auto f = module.lookupSymbol<func::FuncOp>(name))
    return f;
  OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
  SmallVector<Type> args(numArgs, b.getIndexType());
  auto f = func::FuncOp::create(b, module.getLoc(), name,
                                b.getFunctionType(args, {}));
  f.setPrivate();
  return f;
}

/// Appends the aligned pointer and the offset of memref `v` to `args`;
/// returns the metadata op, whose strides the caller may append next.
inline memref::ExtractStridedMetadataOp
appendPointerAndOffset(OpBuilder &b, Location loc, Value v,
                       SmallVectorImpl<Value> &args) {
  auto meta = memref::ExtractStridedMetadataOp::create(b, loc, v);
  args.push_back(memref::ExtractAlignedPointerAsIndexOp::create(b, loc, v));
  args.push_back(meta.getOffset());
  return meta;
}

/// Appends (aligned pointer, offset, stride along each of `loopDims`) of
/// operand `v` of a product, indexed by `map` (results all plain dims):
/// the stride of the memref dim that loop dim indexes, or `zero` when `v`
/// does not index it or the entry is negative (broadcast).
inline void appendStridedOperand(OpBuilder &b, Location loc, Value v,
                                 AffineMap map, ArrayRef<int64_t> loopDims,
                                 Value zero, SmallVectorImpl<Value> &args) {
  auto meta = appendPointerAndOffset(b, loc, v, args);
  for (int64_t dim : loopDims) {
    Value stride = zero;
    for (auto [i, e] : llvm::enumerate(map.getResults()))
      if (dim >= 0 && cast<AffineDimExpr>(e).getPosition() == dim)
        stride = meta.getStrides()[i];
    args.push_back(stride);
  }
}

/// The size of loop dim `dim`: a memref.dim of the first of `operands`
/// whose map in `maps` (results all plain dims) indexes it; null when none
/// does.
inline Value loopDimSize(OpBuilder &b, Location loc, ValueRange operands,
                         ArrayRef<AffineMap> maps, int64_t dim) {
  for (auto [v, m] : llvm::zip(operands, maps))
    for (auto [i, e] : llvm::enumerate(m.getResults()))
      if (cast<AffineDimExpr>(e).getPosition() == dim)
        return memref::DimOp::create(b, loc, v, i);
  return Value();
}

/// When the op right before `op` is a linalg.fill on memrefs of `init` with
/// zero (integer or float, either sign), erases it and returns true: the
/// runtime call then overwrites `init` instead of accumulating into it.
inline bool foldZeroFill(Operation *op, Value init, RewriterBase &rewriter) {
  auto fill = dyn_cast_or_null<linalg::FillOp>(op->getPrevNode());
  if (!fill || !fill.hasPureBufferSemantics() || fill.getDpsInits()[0] != init)
    return false;
  Value value = fill.getInputs()[0];
  if (!matchPattern(value, m_AnyZeroFloat()) && !matchPattern(value, m_Zero()))
    return false;
  rewriter.eraseOp(fill);
  return true;
}

} // namespace mlir::flex

#endif
