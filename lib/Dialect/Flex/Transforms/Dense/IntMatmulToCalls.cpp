//===- IntMatmulToCalls.cpp - int8 matmuls -> the runtime's int8 GEMM -----===//
//
// Two passes (Dense/Passes.td) for the uint8 x int8 -> int32 products of
// torchao's dynamic-activation int8 linears (aten._int_mm, which torch-mlir
// lowers to a linalg.generic of extui(a) * extsi(b) summed in i32, B the
// linalg.transpose of the int8 weight):
//   flex-fold-int-matmul-operands (tensors): the transpose of such a
//     product's operand becomes a swap in the maps of the generics reading
//     it (the product and the weight's column sum beside it), so no
//     transposed copy of the weight is made per call;
//   flex-int-matmul-to-calls (memrefs): the product becomes a call of
//     flex_gemm_u8s8 (lib/Runtime/Quant/FlexQuantInt8Gemm.c).
//
//===----------------------------------------------------------------------===//
#include "torch-mlir-flex/Dialect/Flex/Transforms/Passes.h"

#include "mlir/IR/PatternMatch.h"

#include "RuntimeFunctions.h"

namespace mlir::flex {
#define GEN_PASS_DEF_FLEXFOLDINTMATMULOPERANDS
#define GEN_PASS_DEF_FLEXINTMATMULTOCALLS
#include "torch-mlir-flex/Dialect/Flex/Transforms/Passes.h.inc"
} // namespace mlir::flex

using namespace mlir;

namespace {

/// Bits of the call's last argument (FlexQuantInt8Gemm.c).
enum IntGemmFlags : int64_t { kAccumulate = 1, kASigned = 2 };
constexpr unsigned kNumIntGemmArgs = 16;

/// A product C[m,n] += ext(A[..]) * extsi(B[..]) over k, i8 x i8 -> i32.
struct IntContraction {
  unsigned m, n, k; // loop dims
  bool aSigned;     // A extended with extsi (else extui)
};

/// The loop dim of each result of `map`, or failure when one is not a plain
/// dim.
FailureOr<SmallVector<unsigned>> plainDims(AffineMap map) {
  SmallVector<unsigned> dims;
  for (AffineExpr e : map.getResults()) {
    auto d = dyn_cast<AffineDimExpr>(e);
    if (!d)
      return failure();
    dims.push_back(d.getPosition());
  }
  return dims;
}

/// Whether `v` is `Ext(arg)`, for block argument `arg`.
template <typename Ext>
bool isExtOf(Value v, BlockArgument arg) {
  auto ext = v.getDefiningOp<Ext>();
  return ext && ext.getIn() == arg;
}

/// For a generic: whether the body is out + ext(a) * extsi(b) (operands in
/// either order); sets `aSigned`.
bool matchBody(linalg::GenericOp g, bool &aSigned) {
  Block &body = g.getRegion().front();
  BlockArgument a = body.getArgument(0), b = body.getArgument(1),
                out = body.getArgument(2);
  auto add =
      body.getTerminator()->getOperand(0).getDefiningOp<arith::AddIOp>();
  if (!add || body.getOperations().size() != 5)
    return false;
  Value prod = add.getLhs() == out ? add.getRhs() : add.getLhs();
  if ((add.getLhs() == out) == (add.getRhs() == out))
    return false;
  auto mul = prod.getDefiningOp<arith::MulIOp>();
  if (!mul)
    return false;
  for (auto [x, y] : {std::pair(mul.getLhs(), mul.getRhs()),
                      std::pair(mul.getRhs(), mul.getLhs())}) {
    if (!isExtOf<arith::ExtSIOp>(y, b))
      continue;
    if (isExtOf<arith::ExtUIOp>(x, a) || isExtOf<arith::ExtSIOp>(x, a)) {
      aSigned = isExtOf<arith::ExtSIOp>(x, a);
      return true;
    }
  }
  return false;
}

/// The product `op` is, or failure: a linalg.generic (body above) or a
/// signed linalg.matmul, i8 inputs, an i32 init, 3 loops (one reduction),
/// plain-dim maps A (m,k|k,m), B (k,n|n,k), C (m,n).
FailureOr<IntContraction> matchIntContraction(linalg::LinalgOp op) {
  if (!isa<linalg::GenericOp, linalg::MatmulOp>(op) ||
      op.getNumDpsInputs() != 2 || op.getNumDpsInits() != 1 ||
      op.getNumLoops() != 3 || op.getNumReductionLoops() != 1)
    return failure();
  auto elem = [](Value v) { return getElementTypeOrSelf(v.getType()); };
  if (!elem(op.getDpsInputs()[0]).isInteger(8) ||
      !elem(op.getDpsInputs()[1]).isInteger(8) ||
      !elem(op.getDpsInits()[0]).isInteger(32))
    return failure();
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  auto a = plainDims(maps[0]), b = plainDims(maps[1]), c = plainDims(maps[2]);
  if (failed(a) || failed(b) || failed(c) || a->size() != 2 ||
      b->size() != 2 || c->size() != 2)
    return failure();
  SmallVector<utils::IteratorType> iters = op.getIteratorTypesArray();
  IntContraction r;
  r.m = (*c)[0];
  r.n = (*c)[1];
  r.k = 3 - r.m - r.n;
  if (r.m == r.n || iters[r.k] != utils::IteratorType::reduction)
    return failure();
  auto spans = [](ArrayRef<unsigned> dims, unsigned x, unsigned y) {
    return llvm::is_contained(dims, x) && llvm::is_contained(dims, y);
  };
  if (!spans(*a, r.m, r.k) || !spans(*b, r.k, r.n))
    return failure();
  if (auto g = dyn_cast<linalg::GenericOp>(op.getOperation())) {
    if (!matchBody(g, r.aSigned))
      return failure();
    return r;
  }
  auto mm = cast<linalg::MatmulOp>(op.getOperation());
  if (mm.getCast() != linalg::TypeFn::cast_signed)
    return failure(); // unsigned B: not the runtime's product
  r.aSigned = true;
  return r;
}

// ---------------------------------------------------------------------------
// flex-fold-int-matmul-operands
// ---------------------------------------------------------------------------

/// `map` read through a linalg.transpose of permutation `perm`: the result
/// at perm[i] of the source's map is the i-th result of `map`.
AffineMap throughTranspose(AffineMap map, ArrayRef<int64_t> perm) {
  SmallVector<AffineExpr> results(map.getNumResults());
  for (auto [i, p] : llvm::enumerate(perm))
    results[p] = map.getResult(i);
  return AffineMap::get(map.getNumDims(), 0, results, map.getContext());
}

/// Renames the loops of an integer generic whose input `idx` is read through
/// a permutation of all its loops so that it is read in its own order (the
/// weight's column sum beside _int_mm, [reduction k, parallel n] over w
/// [N,K] after the fold, becomes a row sum with k innermost: contiguous
/// reads instead of a K-byte stride). Integer sums only: the order of a
/// float sum would change its rounding; no linalg.index in the body.
void loopsInOperandOrder(linalg::GenericOp g, unsigned idx,
                         RewriterBase &rewriter) {
  AffineMap p = g.getIndexingMapsArray()[idx];
  if (!p.isPermutation() || p.isIdentity() || g.hasIndexSemantics() ||
      !llvm::all_of(g->getOperandTypes(), [](Type t) {
        return isa<IntegerType>(getElementTypeOrSelf(t));
      }))
    return;
  AffineMap inv = inversePermutation(p);
  SmallVector<AffineMap> maps;
  for (AffineMap m : g.getIndexingMapsArray())
    maps.push_back(m.compose(inv));
  SmallVector<utils::IteratorType> iters = g.getIteratorTypesArray(), renamed;
  for (unsigned j = 0; j < p.getNumResults(); ++j)
    renamed.push_back(iters[p.getDimPosition(j)]);
  SmallVector<Attribute> iterAttrs;
  for (utils::IteratorType it : renamed)
    iterAttrs.push_back(linalg::IteratorTypeAttr::get(g.getContext(), it));
  rewriter.modifyOpInPlace(g, [&] {
    g.setIndexingMapsAttr(rewriter.getAffineMapArrayAttr(maps));
    g.setIteratorTypesAttr(rewriter.getArrayAttr(iterAttrs));
  });
}

/// Makes every generic reading `t`'s result as an input read its source;
/// erases `t` when nothing else reads it.
void foldTranspose(linalg::TransposeOp t, RewriterBase &rewriter) {
  Value result = t->getResult(0), source = t.getInput();
  for (OpOperand &use : llvm::make_early_inc_range(result.getUses())) {
    auto g = dyn_cast<linalg::GenericOp>(use.getOwner());
    if (!g || !g.isDpsInput(&use))
      continue;
    unsigned idx = use.getOperandNumber();
    SmallVector<AffineMap> maps = g.getIndexingMapsArray();
    maps[idx] = throughTranspose(maps[idx], t.getPermutation());
    rewriter.modifyOpInPlace(g, [&] {
      use.set(source);
      g.setIndexingMapsAttr(rewriter.getAffineMapArrayAttr(maps));
    });
    if (failed(matchIntContraction(g)))
      loopsInOperandOrder(g, idx, rewriter);
  }
  if (result.use_empty())
    rewriter.eraseOp(t);
}

struct FlexFoldIntMatmulOperandsPass
    : public flex::impl::FlexFoldIntMatmulOperandsBase<
          FlexFoldIntMatmulOperandsPass> {
  void runOnOperation() override {
    SmallVector<linalg::TransposeOp> transposes;
    getOperation().walk([&](linalg::GenericOp g) {
      if (!g.hasPureTensorSemantics() || failed(matchIntContraction(g)))
        return;
      for (Value in : g.getDpsInputs())
        if (auto t = in.getDefiningOp<linalg::TransposeOp>())
          if (!llvm::is_contained(transposes, t))
            transposes.push_back(t);
    });
    IRRewriter rewriter(&getContext());
    for (linalg::TransposeOp t : transposes)
      foldTranspose(t, rewriter);
  }
};

// ---------------------------------------------------------------------------
// flex-int-matmul-to-calls
// ---------------------------------------------------------------------------

void rewriteToCall(linalg::LinalgOp op, const IntContraction &ic,
                   func::FuncOp callee, RewriterBase &rewriter) {
  Value c = op.getDpsInits()[0];
  // A zero fill of C right before the product: C is overwritten instead.
  int64_t flags = flex::foldZeroFill(op, c, rewriter) ? 0 : kAccumulate;
  if (ic.aSigned)
    flags |= kASigned;

  Location loc = op.getLoc();
  rewriter.setInsertionPoint(op);
  Value zero = arith::ConstantIndexOp::create(rewriter, loc, 0);
  SmallVector<Value> operands = {op.getDpsInputs()[0], op.getDpsInputs()[1],
                                 c};
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  // Every loop dim is indexed by an operand (matchIntContraction).
  SmallVector<Value> args;
  for (unsigned d : {ic.m, ic.n, ic.k})
    args.push_back(flex::loopDimSize(rewriter, loc, operands, maps, d));
  // (pointer, offset, stride along each of the operand's two loop dims).
  int64_t order[3][2] = {{ic.m, ic.k}, {ic.k, ic.n}, {ic.m, ic.n}};
  for (auto [idx, v, m] : llvm::enumerate(operands, maps))
    flex::appendStridedOperand(rewriter, loc, v, m, order[idx], zero, args);
  args.push_back(arith::ConstantIndexOp::create(rewriter, loc, flags));
  func::CallOp::create(rewriter, loc, callee, args);
  rewriter.eraseOp(op);
}

struct FlexIntMatmulToCallsPass
    : public flex::impl::FlexIntMatmulToCallsBase<FlexIntMatmulToCallsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<std::pair<linalg::LinalgOp, IntContraction>> ops;
    module.walk([&](linalg::LinalgOp op) {
      if (!op.hasPureBufferSemantics() ||
          !llvm::all_of(op->getOperands(), [](Value v) {
            auto t = dyn_cast<MemRefType>(v.getType());
            return t && t.isStrided();
          }))
        return;
      if (auto ic = matchIntContraction(op); succeeded(ic))
        ops.push_back({op, *ic});
    });
    IRRewriter rewriter(&getContext());
    for (auto [op, ic] : ops)
      rewriteToCall(op, ic,
                    flex::declareRuntimeFunction(module, "flex_gemm_u8s8",
                                                 kNumIntGemmArgs),
                    rewriter);
  }
};

} // namespace
