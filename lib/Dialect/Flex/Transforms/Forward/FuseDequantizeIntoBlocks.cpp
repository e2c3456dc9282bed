//===- FuseDequantizeIntoBlocks.cpp - dequantize K/V per key block --------===//
//
// flex-fuse-dequantize-into-blocks, run after flex-to-flash: an int8 KV
// cache reaches flex.attention as `sitofp(k_i8) * scale[b, h, n]`, one
// elementwise linalg.generic (or a chain of them) over the whole cache.
// flex-to-flash reads K and V only through tensor.extract_slice (a key
// block inside the key-block loop, the padded last block before it), so
// each such slice can be computed from the same slice of the int8 tensor
// and of the scales instead: upstream's
// tensor::replaceExtractSliceWithTiledProducer tiles the generic to the
// slice, the init (a slice of the whole tensor.empty) becomes a
// tensor.empty of the block's size, and the whole-cache generic, left
// without users, is erased. The block's dequantize runs as vector rows
// (vectorizeRows). Decode then reads int8 bytes in its loop and
// dequantizes one [Nt, E] block at a time into a small f32 tile; no f32
// copy of the cache is built.
//
// Only producers of a static shape that widen an integer tensor to float
// (directly or through other such elementwise generics) and whose every
// user is a unit-stride extract_slice are fused: a producer that is also
// read whole (the transposed K copy of a prefill, a BLAS operand) stays,
// dequantized once.
//
//===----------------------------------------------------------------------===//
#include "torch-mlir-flex/Dialect/Flex/Transforms/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/SCF/Transforms/TileUsingInterface.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/Vector/Transforms/VectorRewritePatterns.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tensor/Transforms/Transforms.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/TilingInterface.h"

namespace mlir::flex {
#define GEN_PASS_DEF_FLEXFUSEDEQUANTIZEINTOBLOCKS
#include "torch-mlir-flex/Dialect/Flex/Transforms/Passes.h.inc"
} // namespace mlir::flex

using namespace mlir;

/// An elementwise generic on tensors with one float result: parallel
/// loops only, the result indexed by a permutation, inputs by any map (the
/// scales broadcast along head_dim read as `(d0, d1, d2, 0)`).
static bool isElementwiseToFloat(linalg::GenericOp op) {
  if (!op.hasPureTensorSemantics() || op->getNumResults() != 1 ||
      op.getNumLoops() != op.getNumParallelLoops() ||
      !op.getMatchingIndexingMap(op.getDpsInitOperand(0)).isPermutation())
    return false;
  auto type = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  return type && isa<FloatType>(type.getElementType());
}

/// `op` reads an int8 tensor, directly or through elementwise generics
/// (`depth` levels at most): it dequantizes.
static bool widensInteger(linalg::GenericOp op, int depth) {
  for (Value in : op.getDpsInputs()) {
    auto type = dyn_cast<RankedTensorType>(in.getType());
    if (!type)
      continue;
    // int8 values (a quantized cache); not booleans (an MoE's routing or a
    // mask widened to float: i1 vectors are not lowered) nor indices.
    if (type.getElementType().isInteger(8))
      return true;
    auto producer = in.getDefiningOp<linalg::GenericOp>();
    if (depth > 0 && producer && isElementwiseToFloat(producer) &&
        widensInteger(producer, depth - 1))
      return true;
  }
  return false;
}

/// `slice` takes all of its source (e.g. the rank-reducing slice a tiled
/// op's block is read through).
static bool isWhole(tensor::ExtractSliceOp slice) {
  ArrayRef<int64_t> shape = slice.getSourceType().getShape();
  for (auto [d, size] : llvm::enumerate(slice.getMixedSizes())) {
    std::optional<int64_t> s = getConstantIntValue(size);
    if (ShapedType::isDynamic(shape[d]) || !s || *s != shape[d])
      return false;
  }
  return true;
}

/// The unit-stride extract_slice users of `op`'s result, each a part of it,
/// or none when any user is something else. Slices without users (left
/// by flex-to-flash before canonicalization) are in the list too.
static SmallVector<tensor::ExtractSliceOp> sliceUsers(linalg::GenericOp op) {
  SmallVector<tensor::ExtractSliceOp> slices;
  for (Operation *user : op->getResult(0).getUsers()) {
    auto slice = dyn_cast<tensor::ExtractSliceOp>(user);
    if (slice && slice->use_empty()) {
      slices.push_back(slice);
      continue;
    }
    if (!slice || !llvm::all_of(slice.getMixedStrides(), isOneInteger) ||
        isWhole(slice))
      return {};
    slices.push_back(slice);
  }
  if (llvm::all_of(slices, [](auto s) { return s->use_empty(); }))
    return {};
  return slices;
}

/// Inits of the tiled op that are slices of a tensor.empty become a
/// tensor.empty of the slice's size (else bufferization would allocate the
/// whole tensor and write the block into it).
static void shrinkEmptyInits(RewriterBase &rewriter, Operation *tiled) {
  auto dps = dyn_cast<DestinationStyleOpInterface>(tiled);
  if (!dps)
    return;
  for (OpOperand &init : dps.getDpsInitsMutable()) {
    auto slice = init.get().getDefiningOp<tensor::ExtractSliceOp>();
    if (!slice || !slice.getSource().getDefiningOp<tensor::EmptyOp>())
      continue;
    rewriter.setInsertionPoint(slice);
    auto type = slice.getType();
    SmallVector<OpFoldResult> sizes;
    for (auto [i, size] : llvm::enumerate(slice.getMixedSizes()))
      if (!slice.getDroppedDims().test(i))
        sizes.push_back(size);
    Value empty = tensor::EmptyOp::create(rewriter, slice.getLoc(), sizes,
                                          type.getElementType());
    rewriter.modifyOpInPlace(tiled, [&] { init.set(empty); });
    if (slice->use_empty())
      rewriter.eraseOp(slice);
  }
}

/// `op` with the elementwise producers of its chain that only it reads
/// fused into it (upstream elementwise fusion), so that a block is
/// dequantized by one loop (sitofp and the scale together) into one tile.
static linalg::GenericOp fuseChain(RewriterBase &rewriter,
                                   linalg::GenericOp op) {
  for (bool fused = true; fused;) {
    fused = false;
    for (OpOperand *in : op.getDpsInputOperands()) {
      auto producer = in->get().getDefiningOp<linalg::GenericOp>();
      if (!producer || !producer->hasOneUse() ||
          !isElementwiseToFloat(producer) ||
          !linalg::areElementwiseOpsFusable(in))
        continue;
      FailureOr<linalg::ElementwiseOpFusionResult> result =
          linalg::fuseElementwiseOps(rewriter, in);
      auto fusedOp = failed(result)
                         ? nullptr
                         : dyn_cast<linalg::GenericOp>(result->fusedOp);
      if (!fusedOp || fusedOp->getNumResults() != 1)
        continue;
      rewriter.replaceOp(op, result->replacements.lookup(op->getResult(0)));
      rewriter.eraseOp(producer);
      op = fusedOp;
      fused = true;
      break;
    }
  }
  return op;
}

/// The block's dequantize as vector code: an scf.for over its rows (all
/// dims but the last tiled by 1), each row one vector read of the int8
/// values, the body on vectors, one vector write (upstream
/// linalg::vectorize). Left as it is (scalar loops later) when the shape
/// is not static or a row is wider than `kMaxRowLanes`.
static constexpr int64_t kMaxRowLanes = 256;
static void vectorizeRows(RewriterBase &rewriter, linalg::GenericOp op) {
  auto type = cast<RankedTensorType>(op->getResult(0).getType());
  if (!type.hasStaticShape() || type.getRank() < 1 ||
      type.getShape().back() > kMaxRowLanes ||
      !op.getMatchingIndexingMap(op.getDpsInitOperand(0)).isIdentity())
    return;
  SmallVector<OpFoldResult> sizes(type.getRank(), rewriter.getIndexAttr(1));
  sizes.back() = rewriter.getIndexAttr(0);
  scf::SCFTilingOptions options;
  options.setTileSizes(sizes);
  rewriter.setInsertionPoint(op);
  FailureOr<scf::SCFTilingResult> tiled =
      scf::tileUsingSCF(rewriter, cast<TilingInterface>(op.getOperation()),
                        options);
  if (failed(tiled) || tiled->tiledOps.size() != 1)
    return;
  rewriter.replaceOp(op, tiled->replacements);
  Operation *row = tiled->tiledOps.front();
  rewriter.setInsertionPoint(row);
  FailureOr<linalg::VectorizationResult> vec = linalg::vectorize(rewriter, row);
  if (failed(vec))
    return;
  rewriter.replaceOp(row, vec->replacements);
  // One-dimensional vectors (the row's leading unit dims cast away), as
  // the rest of the pipeline lowers.
  SmallVector<Operation *> ops;
  for (LoopLikeOpInterface loop : tiled->loops)
    loop->walk([&](Operation *o) {
      if (isa<vector::VectorDialect>(o->getDialect()))
        ops.push_back(o);
    });
  RewritePatternSet patterns(op->getContext());
  vector::populateCastAwayVectorLeadingOneDimPatterns(patterns);
  (void)applyOpPatternsGreedily(ops, std::move(patterns));
}

/// Replaces every slice of `op` by `op` tiled to it, then erases `op`.
static LogicalResult fuseIntoSlices(RewriterBase &rewriter,
                                    linalg::GenericOp op,
                                    ArrayRef<tensor::ExtractSliceOp> slices) {
  for (tensor::ExtractSliceOp slice : slices) {
    if (slice->use_empty()) {
      rewriter.eraseOp(slice);
      continue;
    }
    rewriter.setInsertionPoint(slice);
    FailureOr<TilingResult> tiled = tensor::replaceExtractSliceWithTiledProducer(
        rewriter, slice, cast<OpResult>(op->getResult(0)));
    if (failed(tiled) || tiled->tiledValues.size() != 1)
      return op.emitOpError("flex-fuse-dequantize-into-blocks: cannot tile "
                            "the producer to a slice of it");
    for (Operation *t : tiled->tiledOps)
      shrinkEmptyInits(rewriter, t);
    rewriter.replaceOp(slice, tiled->tiledValues[0]);
    for (Operation *t : tiled->tiledOps)
      if (auto generic = dyn_cast<linalg::GenericOp>(t))
        vectorizeRows(rewriter, generic);
  }
  if (op->use_empty()) // else still read (e.g. by a size): kept
    rewriter.eraseOp(op);
  return success();
}

namespace {
struct FuseDequantizeIntoBlocksPass
    : public flex::impl::FlexFuseDequantizeIntoBlocksBase<
          FuseDequantizeIntoBlocksPass> {
  void runOnOperation() override {
    IRRewriter rewriter(&getContext());
    // Static shapes only (a generation cache): with a dynamic size the
    // slices' sizes are `tensor.dim`s of the producer's own result, which
    // would outlive it.
    auto isCandidate = [](linalg::GenericOp op) {
      return isElementwiseToFloat(op) &&
             cast<RankedTensorType>(op->getResult(0).getType())
                 .hasStaticShape() &&
             widensInteger(op, /*depth=*/4) && !sliceUsers(op).empty();
    };
    SmallVector<linalg::GenericOp> worklist;
    getOperation().walk([&](linalg::GenericOp op) {
      if (isCandidate(op))
        worklist.push_back(op);
    });
    // A chain (sitofp, then the multiply by the scales) is fused from its
    // end: once the last op is fused, the one before it is read only
    // through slices. The tiled ops themselves never enter the list.
    while (!worklist.empty()) {
      linalg::GenericOp op = worklist.pop_back_val();
      if (!isCandidate(op))
        continue;
      op = fuseChain(rewriter, op);
      SmallVector<linalg::GenericOp> producers;
      for (Value in : op.getDpsInputs())
        if (auto p = in.getDefiningOp<linalg::GenericOp>())
          producers.push_back(p);
      if (failed(fuseIntoSlices(rewriter, op, sliceUsers(op))))
        return signalPassFailure();
      for (linalg::GenericOp p : producers)
        if (!llvm::is_contained(worklist, p) && isCandidate(p))
          worklist.push_back(p);
    }
  }
};
} // namespace
