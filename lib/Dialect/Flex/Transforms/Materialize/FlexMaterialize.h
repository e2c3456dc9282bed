//===- FlexMaterialize.h - shared parts of flex-materialize -----*- C++ -*-===//
//
// Private to flex-materialize: the declaration attributes of a frontend
// flex call, the checks of its q/k/v and buffer operands, and the
// score_mod / mask_mod regions with their captures. Shared by the forward
// rewrite (FlexMaterialize.cpp, `@__flex_attention_N` -> flex.attention)
// and the backward one (FlexMaterializeBackward.cpp, `@__flex_backward_N`
// -> flex.attention_backward).
//
//===----------------------------------------------------------------------===//
#ifndef TORCH_MLIR_FLEX_LIB_FLEXMATERIALIZE_H
#define TORCH_MLIR_FLEX_LIB_FLEXMATERIALIZE_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/SetVector.h"

#include <memory>

namespace mlir::flex::materialize {

inline constexpr llvm::StringLiteral kForwardPrefix = "__flex_attention_";
inline constexpr llvm::StringLiteral kBackwardPrefix = "__flex_backward_";

/// The error prefix of every diagnostic about one flex call.
InFlightDiagnostic callError(func::CallOp call, func::FuncOp decl);

/// What a flex declaration's `flex.*` attributes say about its calls.
struct FlexDecl {
  FloatAttr scale;
  int64_t numScore = 0, numMask = 0, numBlock = 0;
  DenseI64ArrayAttr blockSizes;
  bool returnLse = false, returnMax = false, enableGqa = false;
  func::FuncOp scoreFn, maskFn;
  // Backward only.
  func::FuncOp jointFn;
  bool hasGradLse = false;
  DenseI64ArrayAttr gradCaptures;
};

/// Reads and checks the declaration's attributes (python/torch_mlir_flex/
/// frontend/README.md has the contract).
FailureOr<FlexDecl> readFlexDecl(func::CallOp call, func::FuncOp decl,
                                 SymbolTable &symbols);

/// Checks query, key and value: rank-4 ranked tensors of f32/f16/bf16.
LogicalResult checkQueryKeyValue(func::CallOp call, func::FuncOp decl,
                                 Value q, Value k, Value v);

/// Checks the buffers and block tensors (ranked tensors), that buffers come
/// with their modifier, and the GQA rule of `flex.enable_gqa`.
LogicalResult checkBuffers(func::CallOp call, func::FuncOp decl,
                           const FlexDecl &d, Value q, Value k,
                           ValueRange buffersAndBlocks);

/// A tensor.empty of type `t`, dynamic extents taken from `dimSrc[d]`
/// (value, dimension).
Value makeEmpty(OpBuilder &b, Location loc, RankedTensorType t,
                ArrayRef<std::pair<Value, int64_t>> dimSrc);

/// The score_mod / mask_mod regions of one call, built detached so that a
/// failure leaves the IR untouched, and the op's captures.
struct ModifierRegions {
  std::unique_ptr<Region> score = std::make_unique<Region>();
  std::unique_ptr<Region> mask = std::make_unique<Region>();
  /// The call's score and mask buffers, then (after finalizeCaptures) the
  /// constant tables of the modifiers.
  SmallVector<Value> captures;
  /// Constant tables materialized in front of the call (any modifier of the
  /// call, joint included, appends here).
  SmallVector<Value> constCaptures;

  /// Drops the regions and the constant tables (on failure).
  void discard();
  /// Appends the constant tables to `captures`.
  void finalizeCaptures() {
    captures.append(constCaptures.begin(), constCaptures.end());
  }
  /// Moves the regions that are not identities into `scoreDst` /
  /// `maskDst`, their index casts folded (foldIndexRoundTrips).
  void attach(const FlexDecl &d, Region &scoreDst, Region &maskDst);
};

/// Scalarizes the call's score_mod / mask_mod functions into `r` (whose
/// `captures` become the buffers).
LogicalResult buildModifierRegions(func::CallOp call, const FlexDecl &d,
                                   ValueRange scoreBufs, ValueRange maskBufs,
                                   ModifierRegions &r);

/// Folds the int32 casts and negative-index wraps of the op's index
/// arguments inside a scalarized modifier (ModifierIndices.cpp): a read
/// `cap[q_idx]` indexes with the argument itself.
void foldIndexRoundTrips(Region &region);

/// Rewrites one `@__flex_backward_N` call (FlexMaterializeBackward.cpp).
LogicalResult rewriteBackwardCall(func::CallOp call, func::FuncOp decl,
                                  SymbolTable &symbols,
                                  llvm::SetVector<Operation *> &deadDecls,
                                  llvm::SetVector<Operation *> &deadMods);

} // namespace mlir::flex::materialize

#endif // TORCH_MLIR_FLEX_LIB_FLEXMATERIALIZE_H
