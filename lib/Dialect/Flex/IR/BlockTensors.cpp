//===- BlockTensors.cpp - BlockMask tensors of flex.attention -------------===//
//
// Verifier of the kv_blocks / full_kv_blocks operands and block_sizes, the
// builder that classifies a (query block, kv block) pair as full, partial or
// unlisted by scanning the row's block indices, and the runtime checks of
// the block tensors (counts, dynamic extents) for flex-insert-checks.
//
//===----------------------------------------------------------------------===//
#include "torch-mlir-flex/Dialect/Flex/IR/BlockTensors.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
using namespace mlir::flex;

//===----------------------------------------------------------------------===//
// Verifier
//===----------------------------------------------------------------------===//

static bool sameExtent(int64_t a, int64_t b) {
  return ShapedType::isDynamic(a) || ShapedType::isDynamic(b) || a == b;
}

/// Checks one (num_blocks, indices) pair: ranks 3 / 4, integer elements,
/// matching [Bb, Hb, MB].
static LogicalResult verifyPair(BlockTensorOperands op, Value num, Value idx,
                                StringRef numName, StringRef idxName) {
  auto numTy = dyn_cast<ShapedType>(num.getType());
  auto idxTy = dyn_cast<ShapedType>(idx.getType());
  if (!numTy || !numTy.hasRank() || numTy.getRank() != 3)
    return op.emitOpError() << "expected " << numName
                            << " to be ranked with rank 3 [B, H, MB], got "
                            << num.getType();
  if (!idxTy || !idxTy.hasRank() || idxTy.getRank() != 4)
    return op.emitOpError() << "expected " << idxName
                            << " to be ranked with rank 4 [B, H, MB, NB], got "
                            << idx.getType();
  for (auto [t, name] : {std::pair<ShapedType, StringRef>(numTy, numName),
                         {idxTy, idxName}}) {
    Type e = t.getElementType();
    if (!e.isSignlessInteger(32) && !e.isSignlessInteger(64))
      return op.emitOpError() << "expected " << name
                              << " element type i32 or i64, got " << e;
  }
  for (int d = 0; d < 3; ++d)
    if (!sameExtent(numTy.getDimSize(d), idxTy.getDimSize(d)))
      return op.emitOpError()
             << numName << " and " << idxName << " differ in dimension " << d
             << " (" << numTy.getDimSize(d) << " vs " << idxTy.getDimSize(d)
             << ")";
  return success();
}

/// Checks [Bb, Hb, MB] of the kv_num_blocks type `t` against the query
/// (untiled ops only: a tile reads the whole block tensors).
static LogicalResult verifyAgainstQuery(BlockTensorOperands op, ShapedType t,
                                        ArrayRef<int64_t> sizes) {
  ArrayRef<int64_t> qs = op.getQueryType().getShape();
  for (auto [d, name] : {std::pair<int, StringRef>(0, "batch"), {1, "head"}})
    if (t.getDimSize(d) != 1 && !sameExtent(t.getDimSize(d), qs[d]))
      return op.emitOpError()
             << "block tensors have " << name << " extent "
             << t.getDimSize(d) << "; expected 1 or the query's " << qs[d];
  int64_t mb = t.getDimSize(2);
  if (!ShapedType::isDynamic(mb) && !ShapedType::isDynamic(qs[2]) &&
      mb * sizes[0] < qs[2])
    return op.emitOpError() << "block tensors cover " << mb << " query blocks of "
                            << sizes[0] << " rows, fewer than M = " << qs[2];
  return success();
}

LogicalResult mlir::flex::verifyBlockTensors(BlockTensorOperands op) {
  Value num = op.getKvNumBlocks(), idx = op.getKvIndices();
  Value fullNum = op.getFullKvNumBlocks(), fullIdx = op.getFullKvIndices();
  std::optional<ArrayRef<int64_t>> sizes = op.getBlockSizes();
  if (!num && !idx && !fullNum && !fullIdx) {
    if (sizes)
      return op.emitOpError("block_sizes given without kv_blocks");
    return success();
  }
  if (!num || !idx)
    return op.emitOpError("expected both kv_num_blocks and kv_indices");
  if (static_cast<bool>(fullNum) != static_cast<bool>(fullIdx))
    return op.emitOpError("expected both full_kv_num_blocks and "
                          "full_kv_indices, or neither");
  if (!sizes)
    return op.emitOpError("kv_blocks require block_sizes [QBS, KVBS]");
  if (sizes->size() != 2 || (*sizes)[0] <= 0 || (*sizes)[1] <= 0)
    return op.emitOpError("block_sizes must be two positive integers "
                          "[QBS, KVBS]");
  if (failed(verifyPair(op, num, idx, "kv_num_blocks", "kv_indices")))
    return failure();
  auto numTy = cast<ShapedType>(num.getType());
  if (fullNum) {
    if (failed(verifyPair(op, fullNum, fullIdx, "full_kv_num_blocks",
                          "full_kv_indices")))
      return failure();
    auto fullTy = cast<ShapedType>(fullNum.getType());
    for (int d = 0; d < 3; ++d)
      if (!sameExtent(numTy.getDimSize(d), fullTy.getDimSize(d)))
        return op.emitOpError()
               << "kv_num_blocks and full_kv_num_blocks differ in dimension "
               << d << " (" << numTy.getDimSize(d) << " vs "
               << fullTy.getDimSize(d) << ")";
  }
  if (!op.getOffsets().empty())
    return success();
  return verifyAgainstQuery(op, numTy, *sizes);
}

//===----------------------------------------------------------------------===//
// Builders
//===----------------------------------------------------------------------===//

static Value cIndex(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}

/// src[idx] as an index (tensor.extract or memref.load).
static Value loadIndex(OpBuilder &b, Location loc, Value src, ValueRange idx) {
  Value x;
  if (isa<RankedTensorType>(src.getType()))
    x = tensor::ExtractOp::create(b, loc, src, idx);
  else
    x = memref::LoadOp::create(b, loc, src, idx);
  return arith::IndexCastOp::create(b, loc, b.getIndexType(), x);
}

/// `i`, or 0 where dimension `d` of `src` is 1 (broadcast).
static Value broadcastIndex(OpBuilder &b, Location loc, Value src, int64_t d,
                            Value i) {
  auto t = cast<ShapedType>(src.getType());
  if (t.getDimSize(d) == 1)
    return cIndex(b, loc, 0);
  if (!t.isDynamicDim(d))
    return i;
  Value isOne = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                      emitDim(b, loc, src, d),
                                      cIndex(b, loc, 1));
  return arith::SelectOp::create(b, loc, isOne, cIndex(b, loc, 0), i);
}

BlockRow mlir::flex::emitBlockRow(OpBuilder &b, Location loc,
                                  BlockTensorOperands op, Value batch,
                                  Value head, Value qBlock, bool full) {
  BlockRow r;
  Value num = full ? op.getFullKvNumBlocks() : op.getKvNumBlocks();
  r.indices = full ? op.getFullKvIndices() : op.getKvIndices();
  Value bb = broadcastIndex(b, loc, num, 0, batch);
  Value hb = broadcastIndex(b, loc, num, 1, head);
  r.row = {bb, hb, qBlock};
  // The row exists in the tensors (always, for verified static shapes);
  // else it lists nothing and nothing is read.
  Value rowOk = arith::ConstantIntOp::create(b, loc, 1, 1);
  for (auto [d, i] : llvm::enumerate(r.row)) {
    Value lt = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, i,
                                     emitDim(b, loc, num, d));
    rowOk = arith::AndIOp::create(b, loc, rowOk, lt);
  }
  auto ifOp = scf::IfOp::create(b, loc, TypeRange{b.getIndexType()}, rowOk,
                                /*addThenBlock=*/true, /*addElseBlock=*/true);
  OpBuilder tb = ifOp.getThenBodyBuilder();
  scf::YieldOp::create(tb, loc, loadIndex(tb, loc, num, r.row));
  OpBuilder eb = ifOp.getElseBodyBuilder();
  scf::YieldOp::create(eb, loc, cIndex(eb, loc, 0));
  Value count = arith::MaxSIOp::create(b, loc, ifOp.getResult(0),
                                       cIndex(b, loc, 0));
  r.count =
      arith::MinSIOp::create(b, loc, count, emitDim(b, loc, r.indices, 3));
  return r;
}

Value mlir::flex::emitListedBlock(OpBuilder &b, Location loc,
                                  const BlockRow &row, Value j) {
  SmallVector<Value> at(row.row.begin(), row.row.end());
  at.push_back(j);
  return loadIndex(b, loc, row.indices, at);
}

/// True (i1) when `kvBlock` is among the first `row.count` entries.
static Value listContains(OpBuilder &b, Location loc, const BlockRow &row,
                          Value kvBlock) {
  Value falseV = arith::ConstantIntOp::create(b, loc, 0, 1);
  auto loop = scf::ForOp::create(
      b, loc, cIndex(b, loc, 0), row.count, cIndex(b, loc, 1),
      ValueRange{falseV},
      [&](OpBuilder &lb, Location l, Value j, ValueRange found) {
        Value eq = arith::CmpIOp::create(lb, l, arith::CmpIPredicate::eq,
                                         emitListedBlock(lb, l, row, j),
                                         kvBlock);
        scf::YieldOp::create(lb, l,
                             ValueRange{arith::OrIOp::create(lb, l, found[0],
                                                             eq)});
      });
  return loop.getResult(0);
}

BlockStatus mlir::flex::emitBlockStatus(OpBuilder &b, Location loc,
                                        BlockTensorOperands op, Value batch,
                                        Value head, Value qBlock,
                                        Value kvBlock) {
  BlockStatus status;
  status.partial = listContains(
      b, loc, emitBlockRow(b, loc, op, batch, head, qBlock, /*full=*/false),
      kvBlock);
  if (op.hasFullBlockTensors())
    status.full = listContains(
        b, loc, emitBlockRow(b, loc, op, batch, head, qBlock, /*full=*/true),
        kvBlock);
  else
    status.full = arith::ConstantIntOp::create(b, loc, 0, 1);
  return status;
}

BlockStatus mlir::flex::emitPointBlockStatus(OpBuilder &b, Location loc,
                                             BlockTensorOperands op,
                                             Value batch, Value head,
                                             Value qIdx, Value kvIdx) {
  ArrayRef<int64_t> sizes = *op.getBlockSizes();
  Value qBlock =
      arith::DivUIOp::create(b, loc, qIdx, cIndex(b, loc, sizes[0]));
  Value kvBlock =
      arith::DivUIOp::create(b, loc, kvIdx, cIndex(b, loc, sizes[1]));
  return emitBlockStatus(b, loc, op, batch, head, qBlock, kvBlock);
}

Value mlir::flex::combineBlockStatus(OpBuilder &b, Location loc,
                                     BlockStatus status, Value maskKeep) {
  Value keep = status.partial;
  if (maskKeep)
    keep = arith::AndIOp::create(b, loc, keep, maskKeep);
  return arith::OrIOp::create(b, loc, status.full, keep);
}

Value mlir::flex::emitKeep(OpBuilder &b, Location loc, BlockTensorOperands op,
                          Region &maskMod, ValueRange global, Value kvIdx) {
  Value keep;
  if (!maskMod.empty())
    keep = inlineModifier(b, maskMod, {global[0], global[1], global[2], kvIdx});
  if (op.hasBlockTensors())
    keep = combineBlockStatus(
        b, loc,
        emitPointBlockStatus(b, loc, op, global[0], global[1], global[2],
                             kvIdx),
        keep);
  return keep;
}

//===----------------------------------------------------------------------===//
// Runtime checks
//===----------------------------------------------------------------------===//

static Value asI64(OpBuilder &b, Location loc, Value index) {
  return arith::IndexCastOp::create(b, loc, b.getI64Type(), index);
}

/// flex.check that every count of `num` lies in [0, NB of `idx`].
static void checkCounts(OpBuilder &b, Location loc, Value num, Value idx,
                        StringRef name) {
  Value c0 = cIndex(b, loc, 0), c1 = cIndex(b, loc, 1);
  Value nb = emitDim(b, loc, idx, 3);
  SmallVector<Value> ubs = {emitDim(b, loc, num, 0), emitDim(b, loc, num, 1),
                            emitDim(b, loc, num, 2)};
  std::string msg = (name + " value {0} at query block {1} is out of range "
                            "[0, {2}] (the number of blocks in the indices)")
                        .str();
  scf::buildLoopNest(
      b, loc, {c0, c0, c0}, ubs, {c1, c1, c1},
      [&](OpBuilder &lb, Location l, ValueRange ivs) {
        Value count = loadIndex(lb, l, num, ivs);
        Value ge = arith::CmpIOp::create(lb, l, arith::CmpIPredicate::sge,
                                         count, cIndex(lb, l, 0));
        Value le = arith::CmpIOp::create(lb, l, arith::CmpIPredicate::sle,
                                         count, nb);
        Value ok = arith::AndIOp::create(lb, l, ge, le);
        CheckOp::create(lb, l, ok, msg,
                        ValueRange{asI64(lb, l, count), asI64(lb, l, ivs[2]),
                                   asI64(lb, l, nb)});
      });
}

/// flex.check of the shape rules the verifier could not decide statically
/// (dynamic extents): batch/head extents 1 or equal, MB * QBS >= M.
static void checkDynamicExtents(OpBuilder &b, Location loc,
                                BlockTensorOperands op) {
  Value num = op.getKvNumBlocks(), q = op.getQuery();
  auto numTy = cast<ShapedType>(num.getType());
  auto qTy = op.getQueryType();
  auto eq = [&](Value x, Value y) {
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, x, y);
  };
  for (auto [d, name] : {std::pair<int, StringRef>(0, "batch"), {1, "head"}}) {
    if (!numTy.isDynamicDim(d) && !qTy.isDynamicDim(d))
      continue;
    Value ext = emitDim(b, loc, num, d), want = emitDim(b, loc, q, d);
    Value ok = arith::OrIOp::create(b, loc, eq(ext, cIndex(b, loc, 1)),
                                    eq(ext, want));
    CheckOp::create(b, loc, ok,
                    ("block tensors have " + name +
                     " extent {0}; expected 1 or the query's {1}")
                        .str(),
                    ValueRange{asI64(b, loc, ext), asI64(b, loc, want)});
  }
  if (!numTy.isDynamicDim(2) && !qTy.isDynamicDim(2))
    return;
  Value mb = emitDim(b, loc, num, 2), m = emitDim(b, loc, q, 2);
  Value qbs = cIndex(b, loc, (*op.getBlockSizes())[0]);
  Value rows = arith::MulIOp::create(b, loc, mb, qbs);
  Value ok =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, rows, m);
  CheckOp::create(b, loc, ok,
                  "block tensors cover {0} query blocks of {1} rows, fewer "
                  "than M = {2}",
                  ValueRange{asI64(b, loc, mb), asI64(b, loc, qbs),
                             asI64(b, loc, m)});
}

void mlir::flex::emitBlockTensorChecks(OpBuilder &b, BlockTensorOperands op) {
  if (!op.hasBlockTensors() || !op.hasTensorSemantics())
    return;
  Location loc = op.getLoc();
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(op.getOperation());
  if (op.getOffsets().empty())
    checkDynamicExtents(b, loc, op);
  checkCounts(b, loc, op.getKvNumBlocks(), op.getKvIndices(),
              "kv_num_blocks");
  if (op.hasFullBlockTensors())
    checkCounts(b, loc, op.getFullKvNumBlocks(), op.getFullKvIndices(),
                "full_kv_num_blocks");
}
