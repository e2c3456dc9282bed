//===- WidenReductions.cpp - bf16/f16 sums accumulated in f32 -------------===//
//
// flex-widen-reductions (Passes.td): torch-mlir writes the sum of a bf16 or
// f16 tensor (a norm's mean of squares) as a linalg.generic reduction whose
// accumulator is the narrow type itself, so every partial sum is rounded:
// over a row of 1024 the error grows to a few percent, and each addition
// goes through a conversion. Eager PyTorch accumulates such sums in f32.
// Here the accumulator becomes f32 (an f32 copy of the init), the summand
// is extended, and the result is rounded once into the original type.
//
//===----------------------------------------------------------------------===//
#include "torch-mlir-flex/Dialect/Flex/Transforms/Passes.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::flex {
#define GEN_PASS_DEF_FLEXWIDENREDUCTIONS
#include "torch-mlir-flex/Dialect/Flex/Transforms/Passes.h.inc"
} // namespace mlir::flex

using namespace mlir;

namespace {

/// The `arith.addf` that accumulates into the init of `g` (a reduction
/// generic on tensors with one bf16/f16 init, whose block argument is read
/// by that addition only, whose result is yielded), else null.
arith::AddFOp narrowSum(linalg::GenericOp g) {
  if (!g.hasPureTensorSemantics() || g.getNumDpsInits() != 1 ||
      g.getNumReductionLoops() == 0)
    return {};
  auto elt = dyn_cast<FloatType>(getElementTypeOrSelf(g.getResult(0).getType()));
  if (!elt || !(elt.isBF16() || elt.isF16()))
    return {};
  Block &body = g.getRegion().front();
  BlockArgument acc = body.getArguments().back();
  if (!acc.hasOneUse())
    return {};
  auto add = dyn_cast<arith::AddFOp>(*acc.getUsers().begin());
  if (!add || body.getTerminator()->getOperand(0) != add.getResult() ||
      !add.getResult().hasOneUse())
    return {};
  return add;
}

/// An elementwise generic casting `src` (a ranked tensor) to `elt`.
Value castTensor(OpBuilder &b, Location loc, Value src, Type elt, bool widen) {
  auto type = cast<RankedTensorType>(src.getType());
  SmallVector<OpFoldResult> sizes = tensor::getMixedSizes(b, loc, src);
  Value empty = tensor::EmptyOp::create(b, loc, sizes, elt);
  unsigned rank = type.getRank();
  SmallVector<AffineMap> maps(2, b.getMultiDimIdentityMap(rank));
  SmallVector<utils::IteratorType> iters(rank, utils::IteratorType::parallel);
  auto g = linalg::GenericOp::create(
      b, loc, empty.getType(), ValueRange{src}, ValueRange{empty}, maps, iters,
      [&](OpBuilder &nb, Location l, ValueRange args) {
        Value v = widen ? Value(arith::ExtFOp::create(nb, l, elt, args[0]))
                        : Value(arith::TruncFOp::create(nb, l, elt, args[0]));
        linalg::YieldOp::create(nb, l, v);
      });
  return g.getResult(0);
}

/// The f32 init: a fill of the same value when the init is a fill, else
/// an extension of it.
Value wideInit(OpBuilder &b, Location loc, Value init, Type f32) {
  if (auto fill = init.getDefiningOp<linalg::FillOp>()) {
    SmallVector<OpFoldResult> sizes = tensor::getMixedSizes(b, loc, init);
    Value empty = tensor::EmptyOp::create(b, loc, sizes, f32);
    Value v = arith::ExtFOp::create(b, loc, f32, fill.getInputs()[0]);
    return linalg::FillOp::create(b, loc, v, empty).getResult(0);
  }
  return castTensor(b, loc, init, f32, /*widen=*/true);
}

void widen(linalg::GenericOp g, arith::AddFOp add, IRRewriter &rewriter) {
  Location loc = g.getLoc();
  Type narrow = getElementTypeOrSelf(g.getResult(0).getType());
  Type f32 = rewriter.getF32Type();
  rewriter.setInsertionPoint(g);
  Value init = wideInit(rewriter, loc, g.getDpsInits()[0], f32);
  Block &old = g.getRegion().front();
  BlockArgument acc = old.getArguments().back();
  Value summand = add.getLhs() == acc ? add.getRhs() : add.getLhs();
  auto wide = linalg::GenericOp::create(
      rewriter, loc, init.getType(), g.getDpsInputs(), ValueRange{init},
      g.getIndexingMapsArray(), g.getIteratorTypesArray(),
      [&](OpBuilder &b, Location l, ValueRange args) {
        IRMapping map;
        for (unsigned i = 0; i + 1 < old.getNumArguments(); ++i)
          map.map(old.getArgument(i), args[i]);
        for (Operation &op : old.without_terminator()) {
          if (&op == add.getOperation())
            break;
          b.clone(op, map);
        }
        Value x = arith::ExtFOp::create(b, l, f32, map.lookupOrDefault(summand));
        Value sum = arith::AddFOp::create(b, l, x, args.back());
        linalg::YieldOp::create(b, l, sum);
      });
  Value rounded = castTensor(rewriter, loc, wide.getResult(0), narrow, /*widen=*/false);
  rewriter.replaceOp(g, rounded);
}

struct FlexWidenReductionsPass
    : public flex::impl::FlexWidenReductionsBase<FlexWidenReductionsPass> {
  void runOnOperation() override {
    SmallVector<std::pair<linalg::GenericOp, arith::AddFOp>> todo;
    getOperation().walk([&](linalg::GenericOp g) {
      if (arith::AddFOp add = narrowSum(g)) {
        // The summand must be computed before the addition (ops after it
        // in the body would be dropped).
        Block &body = g.getRegion().front();
        if (std::next(add->getIterator()) == body.getTerminator()->getIterator())
          todo.push_back({g, add});
      }
    });
    IRRewriter rewriter(&getContext());
    for (auto [g, add] : todo)
      widen(g, add, rewriter);
  }
};

} // namespace
