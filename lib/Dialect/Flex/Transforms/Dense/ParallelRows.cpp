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

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::flex {
#define GEN_PASS_DEF_FLEXPARALLELROWS
#include "torch-mlir-flex/Dialect/Flex/Transforms/Passes.h.inc"
} // namespace mlir::flex

using namespace mlir;

namespace {

/// The loop to split and its tile size, or nullopt to leave `op` alone.
std::optional<std::pair<unsigned, int64_t>>
splitOf(linalg::LinalgOp op, int64_t minIterations, int64_t chunks) {
  if (!op.hasPureBufferSemantics())
    return std::nullopt;
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  int64_t total = 1;
  for (int64_t r : ranges) {
    if (ShapedType::isDynamic(r))
      return std::nullopt;
    total *= r;
  }
  if (ranges.empty() || total < minIterations)
    return std::nullopt;
  SmallVector<utils::IteratorType> iters = op.getIteratorTypesArray();
  for (auto [i, r] : llvm::enumerate(ranges)) {
    if (iters[i] != utils::IteratorType::parallel || r < 2)
      continue;
    int64_t n = std::min(r, chunks);
    return std::make_pair(static_cast<unsigned>(i), (r + n - 1) / n);
  }
  return std::nullopt;
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
      auto split = splitOf(op, minIterations, chunks);
      if (!split)
        continue;
      SmallVector<int64_t> sizes(split->first + 1, 0);
      sizes[split->first] = split->second;
      rewriter.setInsertionPoint(op);
      linalg::LinalgTilingOptions options;
      options.setTileSizes(sizes).setLoopType(
          linalg::LinalgTilingLoopType::ParallelLoops);
      FailureOr<linalg::TiledLinalgOp> tiled =
          linalg::tileLinalgOp(rewriter, op, options);
      if (failed(tiled))
        continue; // left whole: it still runs, on one thread
      rewriter.eraseOp(op);
    }
  }
};

} // namespace
