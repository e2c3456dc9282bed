//===- FlexMaterializeScalarizer.h - modifier function -> region body -----===//
//
// Private to flex-materialize. ModifierScalarizer turns one score_mod /
// mask_mod / joint function (linalg-on-tensors as torch-mlir lowers it) into
// the scalar body of a flex.attention or flex.attention_backward region.
//
// Values of the function map to
//   - scalars (`scalars`): unit tensors and plain scalars;
//   - whole tensors the region may read (`tensors`): capture operands and
//     constant tables;
//   - lazy tensors (`lazy`): larger tensors computed in the modifier (a row
//     of a captured tensor, an elementwise op on it, a uint8 -> bool
//     conversion). They are never materialized; reading an element emits
//     the producer's computation for that element where it is read
//     (FlexMaterializeLinalg.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef TORCH_MLIR_FLEX_LIB_FLEXMATERIALIZESCALARIZER_H
#define TORCH_MLIR_FLEX_LIB_FLEXMATERIALIZESCALARIZER_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <functional>
#include <string>

namespace mlir::flex::materialize {

inline constexpr llvm::StringLiteral kPassName = "flex-materialize";

/// A ranked tensor with a static shape of all ones (including rank 0).
bool isUnitTensor(Type t);
/// The element type of a unit tensor, `t` if not shaped, null otherwise.
Type scalarTypeOf(Type t);
/// f16 or bf16.
inline bool isHalfFloat(Type t) { return t && (t.isF16() || t.isBF16()); }
std::string typeStr(Type t);
/// Runs a score_mod traced on f16/bf16 scores in f32 (see the .cpp).
void retypeHalfToF32(Block *block, Type half);

class ModifierScalarizer {
public:
  /// Constant tables of the modifier are materialized before `callSite` and
  /// appended to `extraCaptures` (shared by both modifiers of one call): a
  /// tensor constant inside the region would be hoisted out of it by any
  /// folder, leaving an uncaptured tensor use.
  ModifierScalarizer(Operation *callSite, StringRef kind, func::FuncOp fn,
                     SmallVectorImpl<Value> &extraCaptures)
      : callSite(callSite), kind(kind), fn(fn),
        builder(callSite->getContext()), extraCaptures(extraCaptures) {}

  /// For kind "joint" (flex.attention_backward's joint region): the element
  /// type and rank of each capture gradient, in order. The function returns
  /// the score gradient, then per capture gradient a value and `rank`
  /// integer indices (cast to index in the region).
  void setJointGrads(ArrayRef<std::pair<Type, int64_t>> grads) {
    jointGrads.assign(grads.begin(), grads.end());
  }

  /// Fills `region` (a fresh, detached region) with one block of the flex
  /// signature. `captures` are the call's buffer operands for this modifier,
  /// `mapped` the values the region reads for them. Emits a diagnostic and
  /// fails if the function cannot be scalarized.
  LogicalResult run(Region &region, ValueRange captures, ValueRange mapped);

private:
  /// Reads the element at `idx` (index values) of a lazy tensor.
  using LazyReader = std::function<FailureOr<Value>(Operation *, ValueRange)>;

  InFlightDiagnostic error();
  LogicalResult fail(Operation *op, const Twine &reason);
  LogicalResult checkSignature(ValueRange captures);
  LogicalResult checkJointResults(FunctionType fty);
  /// The flex.yield of the region for the function's func.return.
  LogicalResult emitYield(func::ReturnOp ret);
  /// Casts the joint region's yielded floats to their region types (after
  /// retypeHalfToF32).
  void fixJointYieldTypes(Block *block);

  bool isScore() const { return kind == "score_mod"; }
  bool isJoint() const { return kind == "joint"; }
  /// Arguments before the (b, h, q_idx, kv_idx) indices: the score.
  unsigned numLeading() const { return isScore() || isJoint() ? 1 : 0; }
  /// Arguments before the captured buffers (the joint's grad is last).
  unsigned numFixed() const { return numLeading() + 4 + (isJoint() ? 1 : 0); }

  // FlexMaterializeScalarizer.cpp: scalars, constants, elementwise ops.
  FailureOr<Value> getScalar(Operation *user, Value v);
  /// Reads `mapped[idx]` where `mapped` stands for the modifier tensor
  /// `orig` (a widened copy for boolean tables: narrowed back to i1).
  Value extractElement(Location loc, Value orig, Value mapped, ValueRange idx);
  LogicalResult process(Operation *op);
  LogicalResult processConstant(arith::ConstantOp cst);
  LogicalResult processElementwise(Operation *op);
  LogicalResult processScalarOp(Operation *op);
  LogicalResult aliasUnit(Operation *op, Value from, Value to);
  /// Equal types, or f32 standing for the half score type being widened.
  bool compatibleScalar(Type have, Type want) {
    return have == want || (halfScore && have.isF32() && want == halfScore);
  }

  // FlexMaterializeLinalg.cpp: linalg ops, tensor views, lazy tensors.
  /// The element of tensor `v` at `idx` (scalar, captured, or lazy).
  FailureOr<Value> readElement(Operation *user, Value v, ValueRange idx);
  LogicalResult processExtract(tensor::ExtractOp op);
  LogicalResult processDim(tensor::DimOp op);
  LogicalResult processView(Operation *op);
  LogicalResult processLinalg(linalg::LinalgOp op);
  LogicalResult checkLinalg(linalg::LinalgOp op);
  /// Every result of `op` at the point given by `outIdx`, the index of an
  /// element of result `resultNo`; reduction loops are emitted here.
  FailureOr<SmallVector<Value>> evalLinalg(linalg::LinalgOp op,
                                           unsigned resultNo,
                                           ValueRange outIdx);
  FailureOr<SmallVector<Value>> evalPayload(linalg::LinalgOp op,
                                            ArrayRef<Value> ivs,
                                            ValueRange accs);
  FailureOr<SmallVector<Value>>
  emitReduction(linalg::LinalgOp op, SmallVectorImpl<Value> &ivs,
                ArrayRef<unsigned> loops, ArrayRef<int64_t> extents,
                unsigned depth, SmallVector<Value> accs);
  SmallVector<Value> applyMap(AffineMap map, ArrayRef<Value> ivs,
                              Location loc);

  Type halfScore;
  Operation *callSite;
  StringRef kind;
  func::FuncOp fn;
  OpBuilder builder;
  IRMapping scalars;
  IRMapping tensors;
  llvm::DenseMap<Value, LazyReader> lazy;
  llvm::DenseSet<Value> uninitialized;
  /// scf.for loops currently being built around the insertion point; a
  /// scalar read inside one must not be cached for later top-level uses.
  unsigned loopDepth = 0;
  /// Linalg payloads emitted so far (bounded, see FlexMaterializeLinalg.cpp).
  unsigned payloadCopies = 0;
  SmallVectorImpl<Value> &extraCaptures;
  SmallVector<std::pair<arith::ConstantOp, Value>> constTables;
  SmallVector<std::pair<Type, int64_t>> jointGrads;
};

} // namespace mlir::flex::materialize

#endif // TORCH_MLIR_FLEX_LIB_FLEXMATERIALIZESCALARIZER_H
