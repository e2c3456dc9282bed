//===- ModifierIndices.cpp - the modifiers' index casts folded ------------===//
//
// torch passes a score_mod / mask_mod its b, h, q_idx and kv_idx as int32
// scalars, and an index into a captured tensor goes through torch's
// negative-index wrap. Scalarized, a read `mask[b, 0, q_idx, kv_idx]` is
//
//   %i = arith.index_cast %q : index to i32
//   %e = arith.extsi %i : i32 to i64
//   %neg = arith.cmpi slt, %e, %c0_i64
//   %w = arith.addi %e, %c128_i64
//   %s = arith.select %neg, %w, %e
//   %x = arith.index_cast %s : i64 to index
//   ... tensor.extract %mask[..., %x, ...]
//
// The op's index arguments lie in [0, 2^31) (flex_attention's indices are
// int32 and never negative), so the casts keep their value and the wrap
// never fires: the read is `mask[..., %q, ...]`. Folded, the tiled
// lowering's score tile reads a captured row contiguously in the key index
// (LLVM vectorizes it) and the interval analysis sees the index itself.
//
//===----------------------------------------------------------------------===//
#include "FlexMaterialize.h"

#include "torch-mlir-flex/Dialect/Flex/Transforms/IndexWraps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Iterators.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

using namespace mlir;
using mlir::flex::matchNegativeIndexWrap;

namespace {

/// Values known to lie in [0, 2^31): the region's index arguments, and
/// integers or indices that are one of them through casts of at least 32
/// bits or a negative-index wrap (IndexWraps.h) that cannot fire. `source`
/// maps each to the index argument it equals.
class IndexValues {
public:
  explicit IndexValues(Block &entry) {
    for (BlockArgument a : entry.getArguments())
      if (a.getType().isIndex())
        source[a] = a;
  }

  /// The index argument `v` equals, or null.
  Value sourceOf(Value v) {
    auto it = source.find(v);
    if (it != source.end())
      return it->second;
    Operation *def = v.getDefiningOp();
    if (!def)
      return {};
    Value s;
    if (isa<arith::IndexCastOp, arith::IndexCastUIOp, arith::ExtSIOp,
            arith::ExtUIOp, arith::TruncIOp>(def) &&
        atLeast32Bits(v.getType()))
      s = sourceOf(def->getOperand(0));
    else if (std::optional<Value> x = matchNegativeIndexWrap(v))
      s = sourceOf(*x); // the wrap of a negative index: never taken
    if (s)
      source[v] = s;
    return s;
  }

private:
  static bool atLeast32Bits(Type t) {
    return t.isIndex() || (t.isSignlessInteger() && t.getIntOrFloatBitWidth() >= 32);
  }

  DenseMap<Value, Value> source;
};

} // namespace

void mlir::flex::materialize::foldIndexRoundTrips(Region &region) {
  if (region.empty())
    return;
  IndexValues values(region.front());
  bool folded = false;
  region.walk([&](Operation *op) {
    if (!isa<arith::IndexCastOp, arith::IndexCastUIOp, arith::SelectOp>(op))
      return;
    Value r = op->getResult(0);
    Value s = values.sourceOf(r);
    if (!s)
      return;
    if (r.getType().isIndex()) { // an index read: the argument itself
      r.replaceAllUsesWith(s);
      folded = true;
    } else if (std::optional<Value> x = matchNegativeIndexWrap(r);
               x && isa<arith::SelectOp>(op)) {
      r.replaceAllUsesWith(*x); // the wrap: x itself
      folded = true;
    }
  });
  // The casts and wraps left without uses, and what only they used (the
  // wrap's tensor.dim; users before their operands: a reverse post-order
  // walk).
  while (folded) {
    folded = false;
    region.walk<WalkOrder::PostOrder, ReverseIterator>([&](Operation *op) {
      if (isOpTriviallyDead(op)) {
        op->erase();
        folded = true;
      }
    });
  }
}
