//===- FoldMatmulOperands.cpp - transposes/extensions into matmul maps ----===//
//
// flex-fold-matmul-operands: a linalg.matmul / batch_matmul on tensors reads
// through the producers torch-mlir puts in front of it (Passes.td):
//   linalg.transpose swapping the last two dims -> swapped operand map;
//   elementwise arith.extf bf16/f16 -> f32        -> the narrow source;
// and a bf16 product's f32 result rounded by an elementwise arith.truncf
// becomes the product's own bf16 result.
// The op is rebuilt with the new operands and `indexing_maps`; producers left
// without uses are erased.
//
//===----------------------------------------------------------------------===//
#include "torch-mlir-flex/Dialect/Flex/Transforms/Passes.h"

#include "mlir/IR/AffineMap.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::flex {
#define GEN_PASS_DEF_FLEXFOLDMATMULOPERANDS
#include "torch-mlir-flex/Dialect/Flex/Transforms/Passes.h.inc"
} // namespace mlir::flex

using namespace mlir;

namespace {

/// True for a permutation that swaps the last two dims and keeps the rest.
bool swapsLastTwo(ArrayRef<int64_t> perm) {
  int64_t r = perm.size();
  if (r < 2)
    return false;
  for (int64_t i = 0; i < r - 2; ++i)
    if (perm[i] != i)
      return false;
  return perm[r - 2] == r - 1 && perm[r - 1] == r - 2;
}

/// The cast of an elementwise generic made of one `CastOp` (one input, one
/// init, identity maps, body: the cast of the input + yield), else null.
template <typename CastOp>
CastOp elementwiseCast(linalg::GenericOp g) {
  if (!g || g.getNumDpsInputs() != 1 || g.getNumDpsInits() != 1 ||
      g.getNumReductionLoops() != 0 ||
      !llvm::all_of(g.getIndexingMapsArray(),
                    [](AffineMap m) { return m.isIdentity(); }))
    return {};
  Block &body = g.getRegion().front();
  if (body.getOperations().size() != 2)
    return {};
  auto cast = dyn_cast<CastOp>(body.front());
  if (!cast || cast.getIn() != body.getArgument(0) ||
      body.getTerminator()->getOperand(0) != cast.getResult())
    return {};
  return cast;
}

/// The narrow source of an elementwise `arith.extf` generic, else null.
Value extensionSource(Value v) {
  auto g = v.getDefiningOp<linalg::GenericOp>();
  if (!elementwiseCast<arith::ExtFOp>(g))
    return {};
  Type src = getElementTypeOrSelf(g.getDpsInputs()[0].getType());
  if (!src.isBF16() && !src.isF16())
    return {};
  return g.getDpsInputs()[0];
}

/// A matmul operand: the value read and its indexing map.
struct Operand {
  Value value;
  AffineMap map;
};

/// `o` read through every transpose that swaps its last two dims, when its
/// map spans every loop but one (a broadcast operand of batch_matmul keeps
/// its transpose: upstream verifies only the plain broadcast maps).
Operand throughTransposes(Operand o) {
  if (o.map.getNumResults() + 1 != o.map.getNumDims())
    return o;
  while (auto t = o.value.getDefiningOp<linalg::TransposeOp>()) {
    if (!swapsLastTwo(t.getPermutation()))
      break;
    unsigned r = o.map.getNumResults();
    SmallVector<AffineExpr> exprs(o.map.getResults());
    std::swap(exprs[r - 2], exprs[r - 1]);
    o = {t.getInput(),
         AffineMap::get(o.map.getNumDims(), 0, exprs, o.map.getContext())};
  }
  return o;
}

template <typename OpTy>
LogicalResult foldOperands(OpTy op, RewriterBase &rewriter) {
  if (!op.hasPureTensorSemantics())
    return failure();
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  Value a = op.getDpsInputs()[0], b = op.getDpsInputs()[1];
  Operand wa = throughTransposes({a, maps[0]});
  Operand wb = throughTransposes({b, maps[1]});
  // Extensions: only when both operands widen the same narrow type (the op
  // then extends both itself); a mixed product stays wide.
  Value sa = extensionSource(wa.value), sb = extensionSource(wb.value);
  if (sa && sb &&
      getElementTypeOrSelf(sa.getType()) == getElementTypeOrSelf(sb.getType())) {
    wa = throughTransposes({sa, wa.map});
    wb = throughTransposes({sb, wb.map});
  }
  if (wa.value == a && wb.value == b)
    return failure();
  maps[0] = wa.map;
  maps[1] = wb.map;
  SmallVector<NamedAttribute> attrs;
  for (NamedAttribute attr : op->getAttrs())
    if (attr.getName() != "indexing_maps" &&
        attr.getName() != "operandSegmentSizes")
      attrs.push_back(attr);
  attrs.push_back(rewriter.getNamedAttr(
      "indexing_maps", rewriter.getAffineMapArrayAttr(maps)));
  rewriter.setInsertionPoint(op);
  auto folded =
      OpTy::create(rewriter, op.getLoc(), op->getResultTypes(),
                   ValueRange{wa.value, wb.value}, op.getDpsInits(), attrs);
  rewriter.replaceOp(op, folded->getResults());
  return success();
}

/// The matmul whose f32 result an elementwise `arith.truncf` generic
/// (identity maps, body: truncf + yield) rounds to bf16, when that generic
/// is its only reader and it starts from a zero fill; else null.
linalg::LinalgOp truncatedProduct(linalg::GenericOp g) {
  auto trunc = elementwiseCast<arith::TruncFOp>(g);
  if (!trunc || !g.hasPureTensorSemantics() || !trunc.getType().isBF16() ||
      !trunc.getIn().getType().isF32())
    return {};
  Value product = g.getDpsInputs()[0];
  auto mm = product.getDefiningOp<linalg::LinalgOp>();
  if (!mm || !isa<linalg::MatmulOp, linalg::BatchMatmulOp>(mm) ||
      !product.hasOneUse() ||
      !getElementTypeOrSelf(mm.getDpsInputs()[0].getType()).isBF16() ||
      !getElementTypeOrSelf(mm.getDpsInputs()[1].getType()).isBF16())
    return {};
  auto fill = mm.getDpsInits()[0].getDefiningOp<linalg::FillOp>();
  if (!fill || !matchPattern(fill.getInputs()[0], m_AnyZeroFloat()))
    return {};
  return mm;
}

/// bf16 x bf16 -> f32 matmul + truncf to bf16 -> one matmul with a bf16
/// result (from a bf16 zero fill of the truncation's init). Only for the
/// BLAS lowering, which accumulates in f32 and rounds C once
/// (flex_gemm_bf16's bf16 output): the same numbers without the f32
/// product in memory (Qwen2's logits at S=1024: 622 MB).
template <typename OpTy>
void truncateInProduct(OpTy mm, linalg::GenericOp g, RewriterBase &rewriter) {
  rewriter.setInsertionPoint(g);
  Location loc = mm.getLoc();
  Value zero = arith::ConstantOp::create(rewriter, loc, rewriter.getZeroAttr(
                                                           rewriter.getBF16Type()));
  Value init = linalg::FillOp::create(rewriter, loc, zero, g.getDpsInits()[0])
                   .getResult(0);
  SmallVector<NamedAttribute> attrs;
  for (NamedAttribute attr : mm->getAttrs())
    if (attr.getName() != "operandSegmentSizes")
      attrs.push_back(attr);
  auto folded = OpTy::create(rewriter, loc, g->getResultTypes(),
                             mm.getDpsInputs(), ValueRange{init}, attrs);
  rewriter.replaceOp(g, folded->getResults());
  Operation *oldFill = mm.getDpsInits()[0].getDefiningOp();
  rewriter.eraseOp(mm);
  if (oldFill->use_empty())
    rewriter.eraseOp(oldFill);
}

/// Erases linalg ops with tensor results that nothing reads any more.
void eraseDeadProducers(func::FuncOp func, RewriterBase &rewriter) {
  bool changed = true;
  while (changed) {
    changed = false;
    SmallVector<Operation *> dead;
    func.walk([&](Operation *op) {
      if ((isa<linalg::TransposeOp>(op) || isa<linalg::GenericOp>(op)) &&
          op->getNumResults() > 0 && op->use_empty() &&
          cast<linalg::LinalgOp>(op).hasPureTensorSemantics())
        dead.push_back(op);
    });
    for (Operation *op : dead) {
      rewriter.eraseOp(op);
      changed = true;
    }
  }
}

struct FlexFoldMatmulOperandsPass
    : public flex::impl::FlexFoldMatmulOperandsBase<
          FlexFoldMatmulOperandsPass> {
  void runOnOperation() override {
    IRRewriter rewriter(&getContext());
    SmallVector<Operation *> ops;
    getOperation().walk([&](Operation *op) {
      if (isa<linalg::MatmulOp, linalg::BatchMatmulOp>(op))
        ops.push_back(op);
    });
    bool any = false;
    for (Operation *op : ops) {
      if (auto mm = dyn_cast<linalg::MatmulOp>(op))
        any |= succeeded(foldOperands(mm, rewriter));
      else
        any |= succeeded(
            foldOperands(cast<linalg::BatchMatmulOp>(op), rewriter));
    }
    SmallVector<linalg::GenericOp> truncs;
    getOperation().walk([&](linalg::GenericOp g) { truncs.push_back(g); });
    for (linalg::GenericOp g : truncs) {
      linalg::LinalgOp mm = truncatedProduct(g);
      if (!mm)
        continue;
      if (auto m = dyn_cast<linalg::MatmulOp>(mm.getOperation()))
        truncateInProduct(m, g, rewriter);
      else
        truncateInProduct(cast<linalg::BatchMatmulOp>(mm.getOperation()), g,
                          rewriter);
      any = true;
    }
    if (any)
      eraseDeadProducers(getOperation(), rewriter);
  }
};

} // namespace
