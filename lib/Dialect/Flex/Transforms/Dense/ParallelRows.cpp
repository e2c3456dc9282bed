//===- ParallelRows.cpp - large linalg ops split across the threads -------===//
//
// flex-parallel-rows (Passes.td): every linalg op on buffers that sits
// directly in a function body (elementwise chains, norms' reductions,
// copies, fills: whatever flex-to-flash and the BLAS left), has static loop
// ranges and at least `min-iterations` iterations, is tiled along its
// outermost parallel loop of more than one iteration into `chunks` tiles of
// an scf.parallel, which convert-scf-to-openmp turns into a worksharing
// loop. Each tile is the same op on subviews: disjoint outputs, so the
// split is legal for any parallel loop, whatever the other loops are.
//
//===----------------------------------------------------------------------===//
#include "torch-mlir-flex/Dialect/Flex/Transforms/Passes.h"

#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::flex {
#define GEN_PASS_DEF_FLEXPARALLELROWS
#include "torch-mlir-flex/Dialect/Flex/Transforms/Passes.h.inc"
} // namespace mlir::flex

using namespace mlir;

namespace {

/// How to split an op: along `loop`, into tiles of `tile` iterations (0:
/// computed at run time as ceil(size / chunks)); `guarded`: the total is
/// known only at run time, so the split runs when it reaches
/// `min-iterations` and the op as it is otherwise.
struct Split {
  unsigned loop;
  int64_t tile;
  bool guarded;
};

/// The split of `op`, or nullopt to leave it alone.
std::optional<Split> splitOf(linalg::LinalgOp op, int64_t minIterations,
                             int64_t chunks) {
  if (!op.hasPureBufferSemantics())
    return std::nullopt;
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  int64_t total = 1;
  bool dynamic = false;
  for (int64_t r : ranges) {
    if (ShapedType::isDynamic(r))
      dynamic = true;
    else
      total *= r;
  }
  if (ranges.empty() || (!dynamic && total < minIterations))
    return std::nullopt;
  SmallVector<utils::IteratorType> iters = op.getIteratorTypesArray();
  for (auto [i, r] : llvm::enumerate(ranges)) {
    if (iters[i] != utils::IteratorType::parallel || r == 0 || r == 1)
      continue;
    if (ShapedType::isDynamic(r))
      return Split{static_cast<unsigned>(i), 0, dynamic};
    int64_t n = std::min(r, chunks);
    return Split{static_cast<unsigned>(i), (r + n - 1) / n, dynamic};
  }
  return std::nullopt;
}

/// Tiles `op` along the split's loop into an scf.parallel; erases it.
void tileRows(IRRewriter &rewriter, linalg::LinalgOp op, const Split &split,
              Value loopSize, int64_t chunks) {
  linalg::LinalgTilingOptions options;
  options.setTileSizeComputationFunction(
      [&](OpBuilder &b, Operation *) -> SmallVector<Value, 4> {
        Location loc = op.getLoc();
        SmallVector<Value, 4> sizes(split.loop + 1,
                                    arith::ConstantIndexOp::create(b, loc, 0));
        sizes[split.loop] =
            split.tile ? arith::ConstantIndexOp::create(b, loc, split.tile).getResult()
                       : arith::CeilDivUIOp::create(
                             b, loc, loopSize,
                             arith::ConstantIndexOp::create(b, loc, chunks))
                             .getResult();
        return sizes;
      });
  options.setLoopType(linalg::LinalgTilingLoopType::ParallelLoops);
  rewriter.setInsertionPoint(op);
  if (succeeded(linalg::tileLinalgOp(rewriter, op, options)))
    rewriter.eraseOp(op); // else left whole: it still runs, on one thread
}

struct FlexParallelRowsPass
    : public flex::impl::FlexParallelRowsBase<FlexParallelRowsPass> {
  using FlexParallelRowsBase::FlexParallelRowsBase;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    SmallVector<linalg::LinalgOp> ops;
    for (Operation &op : func.getBody().getOps())
      if (auto l = dyn_cast<linalg::LinalgOp>(&op))
        ops.push_back(l);
    IRRewriter rewriter(&getContext());
    for (linalg::LinalgOp op : ops) {
      std::optional<Split> split = splitOf(op, minIterations, chunks);
      if (!split)
        continue;
      if (!split->guarded) {
        tileRows(rewriter, op, *split, Value(), chunks);
        continue;
      }
      // Sizes known at run time: the split when the op is large enough,
      // the op itself otherwise (a decode step's small ops).
      Location loc = op.getLoc();
      rewriter.setInsertionPoint(op);
      SmallVector<Range> loops = op.createLoopRanges(rewriter, loc);
      Value total = arith::ConstantIndexOp::create(rewriter, loc, 1);
      for (const Range &r : loops)
        total = rewriter.createOrFold<arith::MulIOp>(
            loc, total, getValueOrCreateConstantIndexOp(rewriter, loc, r.size));
      Value large = arith::CmpIOp::create(
          rewriter, loc, arith::CmpIPredicate::sge, total,
          arith::ConstantIndexOp::create(rewriter, loc, minIterations));
      Value loopSize =
          getValueOrCreateConstantIndexOp(rewriter, loc, loops[split->loop].size);
      auto ifOp = scf::IfOp::create(rewriter, loc, TypeRange{}, large,
                                    /*withElseRegion=*/true);
      rewriter.setInsertionPoint(ifOp.thenBlock()->getTerminator());
      auto copy = cast<linalg::LinalgOp>(rewriter.clone(*op));
      rewriter.moveOpBefore(op, ifOp.elseBlock()->getTerminator());
      tileRows(rewriter, copy, *split, loopSize, chunks);
    }
  }
};

} // namespace
