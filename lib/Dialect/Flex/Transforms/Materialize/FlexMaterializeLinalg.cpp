//===- FlexMaterializeLinalg.cpp - linalg ops and larger tensors in modifiers //
//
// The tensor part of flex-materialize's ModifierScalarizer. A modifier may
// compute with tensors larger than one element: `bias[b][q]` first gathers a
// row, `emb[q].sum(-1)` reduces one, a uint8 table is converted to bool
// before it is indexed. None of these tensors is materialized: each is a
// lazy tensor whose element at an index is emitted where it is read
// (tensor.extract, or a linalg op reading it through its indexing map):
//
//   - a linalg op: its payload evaluated at the loop point given by the
//     element's index (through the result's indexing map); reduction loops
//     are unrolled for static extents <= kMaxUnrolled, else an scf.for
//     carrying the accumulators;
//   - views (extract_slice, expand/collapse_shape, cast): index arithmetic
//     on the source's index;
//   - captures and constant tables: tensor.extract.
//
// Linalg ops whose results are unit tensors are evaluated at once (their
// reduction loops, if any, are emitted at that point).
//
//===----------------------------------------------------------------------===//
#include "FlexMaterializeScalarizer.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"

using namespace mlir;
using namespace mlir::flex;
using namespace mlir::flex::materialize;

/// Reduction loops up to this static extent are unrolled.
static constexpr int64_t kMaxUnrolled = 8;
/// Bound on payload copies emitted for one modifier (recomputation of lazy
/// tensors can grow exponentially on adversarial IR).
static constexpr unsigned kMaxPayloadCopies = 20000;

//===----------------------------------------------------------------------===//
// Index arithmetic (folds constants so unrolled code stays small)
//===----------------------------------------------------------------------===//

static Value constIndex(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}

/// x `OpTy` y, or the other operand when one is the identity `unit`.
template <typename OpTy>
static Value foldedIndexOp(OpBuilder &b, Location loc, Value x, Value y,
                           int64_t unit) {
  if (isConstantIntValue(x, unit))
    return y;
  if (isConstantIntValue(y, unit))
    return x;
  return OpTy::create(b, loc, x, y);
}

static Value addIndex(OpBuilder &b, Location loc, Value x, Value y) {
  return foldedIndexOp<arith::AddIOp>(b, loc, x, y, 0);
}

static Value mulIndex(OpBuilder &b, Location loc, Value x, Value y) {
  return foldedIndexOp<arith::MulIOp>(b, loc, x, y, 1);
}

static Value toIndex(OpBuilder &b, Location loc, OpFoldResult ofr) {
  if (auto v = dyn_cast<Value>(ofr))
    return v;
  return constIndex(b, loc, *getConstantIntValue(ofr));
}

/// Emits `e` over the loop values `ivs` (index values); null for symbols.
static Value expandExpr(OpBuilder &b, Location loc, AffineExpr e,
                        ArrayRef<Value> ivs) {
  if (auto d = dyn_cast<AffineDimExpr>(e))
    return ivs[d.getPosition()];
  if (auto c = dyn_cast<AffineConstantExpr>(e))
    return constIndex(b, loc, c.getValue());
  auto bin = dyn_cast<AffineBinaryOpExpr>(e);
  if (!bin)
    return {};
  Value l = expandExpr(b, loc, bin.getLHS(), ivs);
  Value r = expandExpr(b, loc, bin.getRHS(), ivs);
  if (!l || !r)
    return {};
  switch (e.getKind()) {
  case AffineExprKind::Add:
    return addIndex(b, loc, l, r);
  case AffineExprKind::Mul:
    return mulIndex(b, loc, l, r);
  case AffineExprKind::Mod:
    return arith::RemSIOp::create(b, loc, l, r);
  case AffineExprKind::FloorDiv:
    return arith::FloorDivSIOp::create(b, loc, l, r);
  case AffineExprKind::CeilDiv:
    return arith::CeilDivSIOp::create(b, loc, l, r);
  default:
    return {};
  }
}

SmallVector<Value> ModifierScalarizer::applyMap(AffineMap map,
                                                ArrayRef<Value> ivs,
                                                Location loc) {
  SmallVector<Value> idx;
  for (AffineExpr e : map.getResults())
    idx.push_back(expandExpr(builder, loc, e, ivs));
  return idx;
}

//===----------------------------------------------------------------------===//
// Element reads
//===----------------------------------------------------------------------===//

FailureOr<Value> ModifierScalarizer::readElement(Operation *user, Value v,
                                                 ValueRange idx) {
  if (Value s = scalars.lookupOrNull(v))
    return s;
  if (Value t = tensors.lookupOrNull(v))
    return extractElement(user->getLoc(), v, t, idx);
  auto it = lazy.find(v);
  if (it != lazy.end()) {
    LazyReader reader = it->second;
    return reader(user, idx);
  }
  if (uninitialized.contains(v))
    return fail(user, "reads the contents of an uninitialized tensor.empty");
  return fail(user, "reads a tensor of type " + typeStr(v.getType()) +
                        " that is neither captured, constant nor computed "
                        "in the modifier");
}

LogicalResult ModifierScalarizer::processExtract(tensor::ExtractOp op) {
  SmallVector<Value> idx;
  for (Value i : op.getIndices()) {
    FailureOr<Value> s = getScalar(op, i);
    if (failed(s))
      return failure();
    idx.push_back(*s);
  }
  FailureOr<Value> e = readElement(op, op.getTensor(), idx);
  if (failed(e))
    return failure();
  scalars.map(op.getResult(), *e);
  return success();
}

/// The size of a captured tensor (a padding mask of dynamic length, read
/// with a negative index): the same tensor.dim on the capture.
LogicalResult ModifierScalarizer::processDim(tensor::DimOp op) {
  Value t = tensors.lookupOrNull(op.getSource());
  if (!t)
    return fail(op, "reads the size of a tensor that is not captured");
  FailureOr<Value> d = getScalar(op, op.getIndex());
  if (failed(d))
    return failure();
  scalars.map(op.getResult(),
              tensor::DimOp::create(builder, op.getLoc(), t, *d).getResult());
  return success();
}

//===----------------------------------------------------------------------===//
// Views: index arithmetic onto the source
//===----------------------------------------------------------------------===//

LogicalResult ModifierScalarizer::processView(Operation *op) {
  if (op->getNumResults() != 1 || op->getNumOperands() < 1)
    return fail(op, "expected one source and one result");
  Value src = op->getOperand(0), res = op->getResult(0);
  if (isUnitTensor(src.getType()) && isUnitTensor(res.getType()))
    return aliasUnit(op, src, res);
  auto srcTy = dyn_cast<RankedTensorType>(src.getType());
  auto resTy = dyn_cast<RankedTensorType>(res.getType());
  if (!srcTy || !resTy)
    return fail(op, "expected ranked tensors");
  Location loc = op->getLoc();

  if (isa<tensor::CastOp>(op)) {
    lazy[res] = [this, src](Operation *user, ValueRange idx) {
      return readElement(user, src, idx);
    };
    return success();
  }

  if (auto slice = dyn_cast<tensor::ExtractSliceOp>(op)) {
    // Offsets and strides are read once, here (they dominate every read).
    SmallVector<Value> offsets, strides;
    for (auto [list, mixed] :
         {std::pair(&offsets, slice.getMixedOffsets()),
          std::pair(&strides, slice.getMixedStrides())}) {
      for (OpFoldResult ofr : mixed) {
        if (auto v = dyn_cast<Value>(ofr)) {
          FailureOr<Value> s = getScalar(op, v);
          if (failed(s))
            return failure();
          ofr = *s;
        }
        list->push_back(toIndex(builder, loc, ofr));
      }
    }
    llvm::SmallBitVector dropped = slice.getDroppedDims();
    lazy[res] = [this, src, offsets, strides, dropped,
                 loc](Operation *user, ValueRange idx) {
      SmallVector<Value> srcIdx;
      unsigned j = 0;
      for (unsigned d = 0; d < offsets.size(); ++d) {
        Value i = dropped.test(d) ? Value() : idx[j++];
        srcIdx.push_back(i ? addIndex(builder, loc, offsets[d],
                                      mulIndex(builder, loc, i, strides[d]))
                           : offsets[d]);
      }
      return readElement(user, src, srcIdx);
    };
    return success();
  }

  if (!srcTy.hasStaticShape() || !resTy.hasStaticShape())
    return fail(op, "reshape of a tensor with a dynamic shape");
  if (auto expand = dyn_cast<tensor::ExpandShapeOp>(op)) {
    // Source dim i = the row-major linearization of its result group.
    SmallVector<ReassociationIndices> groups =
        expand.getReassociationIndices();
    ArrayRef<int64_t> shape = resTy.getShape();
    lazy[res] = [this, src, groups, shape, loc](Operation *user,
                                                ValueRange idx) {
      SmallVector<Value> srcIdx;
      for (const ReassociationIndices &g : groups) {
        Value lin = constIndex(builder, loc, 0);
        for (int64_t r : g)
          lin = addIndex(builder, loc,
                         mulIndex(builder, loc, lin,
                                  constIndex(builder, loc, shape[r])),
                         idx[r]);
        srcIdx.push_back(lin);
      }
      return readElement(user, src, srcIdx);
    };
    return success();
  }
  if (auto collapse = dyn_cast<tensor::CollapseShapeOp>(op)) {
    // Result dim j is delinearized into its source group.
    SmallVector<ReassociationIndices> groups =
        collapse.getReassociationIndices();
    ArrayRef<int64_t> shape = srcTy.getShape();
    unsigned srcRank = srcTy.getRank();
    lazy[res] = [this, src, groups, shape, srcRank,
                 loc](Operation *user, ValueRange idx) {
      SmallVector<Value> srcIdx(srcRank);
      for (auto [j, g] : llvm::enumerate(groups)) {
        Value rest = idx[j];
        for (int64_t s : llvm::reverse(g)) {
          if (shape[s] == 1) {
            srcIdx[s] = constIndex(builder, loc, 0);
            continue;
          }
          Value size = constIndex(builder, loc, shape[s]);
          srcIdx[s] = arith::RemSIOp::create(builder, loc, rest, size);
          rest = arith::DivSIOp::create(builder, loc, rest, size);
        }
      }
      return readElement(user, src, srcIdx);
    };
    return success();
  }
  return fail(op, "only casts, slices and static expand/collapse reshapes "
                  "of larger tensors are supported");
}

//===----------------------------------------------------------------------===//
// Linalg ops
//===----------------------------------------------------------------------===//

/// Does the payload have an argument for each init (linalg.map has none)?
static bool payloadMapsInits(linalg::LinalgOp op) {
  return op.getBlock()->getNumArguments() ==
         op.getNumDpsInputs() + op.getNumDpsInits();
}

LogicalResult ModifierScalarizer::checkLinalg(linalg::LinalgOp op) {
  Operation *raw = op.getOperation();
  if (!op.hasPureTensorSemantics())
    return fail(raw, "expected tensor semantics");
  if (raw->getNumRegions() != 1 || !raw->getRegion(0).hasOneBlock())
    return fail(raw, "expected a single-block payload region");
  unsigned numArgs = op.getBlock()->getNumArguments();
  if (numArgs != op.getNumDpsInputs() && !payloadMapsInits(op))
    return fail(raw, "payload arguments do not match its operands");
  for (auto [i, range] : llvm::enumerate(op.getStaticLoopRanges()))
    if (ShapedType::isDynamic(range))
      return fail(raw, "loop #" + Twine(i) +
                           " has a dynamic extent; only tensors of static "
                           "shape can be computed in a modifier");
  for (AffineMap map : op.getIndexingMapsArray())
    if (map.getNumSymbols() != 0)
      return fail(raw, "indexing map with symbols");
  for (OpResult r : raw->getResults())
    if (!op.getIndexingMapMatchingResult(r).isProjectedPermutation(
            /*allowZeroInResults=*/true))
      return fail(raw, "result #" + Twine(r.getResultNumber()) +
                           " has an indexing map that is not a projected "
                           "permutation");
  return success();
}

LogicalResult ModifierScalarizer::processLinalg(linalg::LinalgOp op) {
  Operation *raw = op.getOperation();
  if (failed(checkLinalg(op)))
    return failure();
  bool unitResults = llvm::all_of(raw->getResultTypes(), isUnitTensor);
  if (!unitResults) {
    for (OpResult r : raw->getResults()) {
      unsigned k = r.getResultNumber();
      lazy[r] = [this, op, k](Operation *, ValueRange idx) -> FailureOr<Value> {
        FailureOr<SmallVector<Value>> all = evalLinalg(op, k, idx);
        if (failed(all))
          return failure();
        return (*all)[k];
      };
    }
    return success();
  }
  auto rt = cast<RankedTensorType>(raw->getResult(0).getType());
  Value zero = constIndex(builder, raw->getLoc(), 0);
  FailureOr<SmallVector<Value>> all =
      evalLinalg(op, 0, SmallVector<Value>(rt.getRank(), zero));
  if (failed(all))
    return failure();
  for (auto [r, s] : llvm::zip_equal(raw->getResults(), *all))
    scalars.map(r, s);
  return success();
}

FailureOr<SmallVector<Value>>
ModifierScalarizer::evalLinalg(linalg::LinalgOp op, unsigned resultNo,
                               ValueRange outIdx) {
  Operation *raw = op.getOperation();
  Location loc = raw->getLoc();
  unsigned numLoops = op.getNumLoops();
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  SmallVector<utils::IteratorType> iters = op.getIteratorTypesArray();

  // Loops fixed by the element's index; the others are reduced here.
  SmallVector<Value> ivs(numLoops);
  AffineMap outMap = op.getIndexingMapMatchingResult(raw->getResult(resultNo));
  for (auto [j, e] : llvm::enumerate(outMap.getResults()))
    if (auto d = dyn_cast<AffineDimExpr>(e))
      ivs[d.getPosition()] = outIdx[j];
  SmallVector<unsigned> redLoops;
  SmallVector<int64_t> extents;
  for (unsigned l = 0; l < numLoops; ++l) {
    if (ivs[l])
      continue;
    if (iters[l] == utils::IteratorType::reduction) {
      redLoops.push_back(l);
      extents.push_back(ranges[l]);
    } else if (ranges[l] == 1) {
      ivs[l] = constIndex(builder, loc, 0);
    } else {
      return fail(raw, "parallel loop #" + Twine(l) +
                           " does not index result #" + Twine(resultNo));
    }
  }

  // Accumulators: the inits the payload reads, at the element's index.
  bool mapsInits = payloadMapsInits(op);
  SmallVector<Value> accs;
  for (OpOperand &init : op.getDpsInitsMutable()) {
    if (!mapsInits || op.getMatchingBlockArgument(&init).use_empty()) {
      if (!redLoops.empty())
        return fail(raw, "reduction whose payload does not read its init");
      accs.push_back(Value());
      continue;
    }
    AffineMap initMap = op.getMatchingIndexingMap(&init);
    for (unsigned l : redLoops)
      if (initMap.isFunctionOfDim(l))
        return fail(raw, "init indexed by a reduction loop");
    FailureOr<Value> acc =
        readElement(raw, init.get(), applyMap(initMap, ivs, loc));
    if (failed(acc))
      return failure();
    accs.push_back(*acc);
  }
  return emitReduction(op, ivs, redLoops, extents, 0, accs);
}

FailureOr<SmallVector<Value>>
ModifierScalarizer::emitReduction(linalg::LinalgOp op,
                                  SmallVectorImpl<Value> &ivs,
                                  ArrayRef<unsigned> loops,
                                  ArrayRef<int64_t> extents, unsigned depth,
                                  SmallVector<Value> accs) {
  if (depth == loops.size())
    return evalPayload(op, ivs, accs);
  Location loc = op->getLoc();
  unsigned l = loops[depth];
  int64_t extent = extents[depth];
  if (extent <= kMaxUnrolled) {
    for (int64_t i = 0; i < extent; ++i) {
      ivs[l] = constIndex(builder, loc, i);
      FailureOr<SmallVector<Value>> next =
          emitReduction(op, ivs, loops, extents, depth + 1, accs);
      if (failed(next))
        return failure();
      accs = *next;
    }
    return accs;
  }
  FailureOr<SmallVector<Value>> inner = failure();
  auto forOp = scf::ForOp::create(
      builder, loc, constIndex(builder, loc, 0),
      constIndex(builder, loc, extent), constIndex(builder, loc, 1), accs,
      [&](OpBuilder &b, Location, Value iv, ValueRange iterArgs) {
        OpBuilder::InsertionGuard guard(builder);
        builder.setInsertionPoint(b.getInsertionBlock(), b.getInsertionPoint());
        ivs[l] = iv;
        ++loopDepth;
        inner = emitReduction(op, ivs, loops, extents, depth + 1,
                              SmallVector<Value>(iterArgs));
        --loopDepth;
        scf::YieldOp::create(builder, loc,
                             succeeded(inner) ? ValueRange(*inner) : iterArgs);
      });
  if (failed(inner))
    return failure();
  return SmallVector<Value>(forOp.getResults());
}

FailureOr<SmallVector<Value>>
ModifierScalarizer::evalPayload(linalg::LinalgOp op, ArrayRef<Value> ivs,
                                ValueRange accs) {
  Operation *raw = op.getOperation();
  if (++payloadCopies > kMaxPayloadCopies)
    return fail(raw, "the modifier needs more than " +
                         Twine(kMaxPayloadCopies) +
                         " copies of linalg payloads; it is too large to "
                         "evaluate per score element");
  Block &payload = *op.getBlock();
  for (OpOperand *input : op.getDpsInputOperands()) {
    BlockArgument arg = op.getMatchingBlockArgument(input);
    if (arg.use_empty())
      continue;
    FailureOr<Value> s = readElement(
        raw, input->get(),
        applyMap(op.getMatchingIndexingMap(input), ivs, raw->getLoc()));
    if (failed(s))
      return failure();
    if (!compatibleScalar(s->getType(), arg.getType()))
      return fail(raw, "payload argument #" + Twine(arg.getArgNumber()) +
                           " type differs from its operand element type");
    scalars.map(arg, *s);
  }
  unsigned numIns = op.getNumDpsInputs();
  for (auto [i, acc] : llvm::enumerate(accs)) {
    if (!acc)
      continue;
    BlockArgument arg = payload.getArgument(numIns + i);
    if (!compatibleScalar(acc.getType(), arg.getType()))
      return fail(raw, "payload argument type differs from its init");
    scalars.map(arg, acc);
  }

  for (Operation &inner : payload) {
    if (auto yield = dyn_cast<linalg::YieldOp>(inner)) {
      if (yield.getNumOperands() != raw->getNumResults())
        return fail(raw, "payload yields a different number of values than "
                         "the op has results");
      SmallVector<Value> results;
      for (Value v : yield.getOperands()) {
        FailureOr<Value> s = getScalar(&inner, v);
        if (failed(s))
          return failure();
        results.push_back(*s);
      }
      return results;
    }
    if (auto index = dyn_cast<linalg::IndexOp>(inner)) {
      scalars.map(index.getResult(), ivs[index.getDim()]);
      continue;
    }
    if (failed(process(&inner)))
      return failure();
  }
  return fail(raw, "payload does not end with linalg.yield");
}
