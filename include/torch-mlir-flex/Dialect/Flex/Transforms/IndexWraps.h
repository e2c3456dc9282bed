//===- IndexWraps.h - torch's negative-index wrap, matched ------*- C++ -*-===//
//
// torch-mlir reads `t[i]` as `t[select(i < 0, i + n, i)]` (Python's negative
// indices). flex-insert-checks bounds the wrapped index; flex-materialize
// folds the wrap away where i is never negative (ModifierIndices.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef TORCH_MLIR_FLEX_DIALECT_FLEX_TRANSFORMS_INDEXWRAPS_H
#define TORCH_MLIR_FLEX_DIALECT_FLEX_TRANSFORMS_INDEXWRAPS_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Matchers.h"

#include <optional>

namespace mlir::flex {

/// `select(x < 0, x + n, x)`, also through an index_cast of it: x, else
/// nullopt.
inline std::optional<Value> matchNegativeIndexWrap(Value index) {
  Value w = index;
  if (auto cast = index.getDefiningOp<arith::IndexCastOp>())
    w = cast.getIn();
  auto sel = w.getDefiningOp<arith::SelectOp>();
  if (!sel)
    return std::nullopt;
  auto cmp = sel.getCondition().getDefiningOp<arith::CmpIOp>();
  Value x = sel.getFalseValue();
  auto add = sel.getTrueValue().getDefiningOp<arith::AddIOp>();
  if (!cmp || !add || cmp.getPredicate() != arith::CmpIPredicate::slt ||
      cmp.getLhs() != x || !matchPattern(cmp.getRhs(), m_Zero()) ||
      (add.getLhs() != x && add.getRhs() != x))
    return std::nullopt;
  return x;
}

} // namespace mlir::flex

#endif // TORCH_MLIR_FLEX_DIALECT_FLEX_TRANSFORMS_INDEXWRAPS_H
