//===- AttentionCommon.cpp - helpers shared by the attention ops ----------===//
//
// Verifier pieces, tiling helpers and scalar-reference helpers shared by
// flex.attention and flex.attention_backward (see AttentionCommon.h).
//
//===----------------------------------------------------------------------===//
#include "AttentionCommon.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"

using namespace mlir;
using namespace mlir::flex;
using namespace mlir::flex::attn;

//===----------------------------------------------------------------------===//
// Verification
//===----------------------------------------------------------------------===//

std::string attn::shapeStr(ArrayRef<int64_t> shape) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "[";
  llvm::interleaveComma(shape, os, [&](int64_t d) {
    if (ShapedType::isDynamic(d))
      os << "?";
    else
      os << d;
  });
  os << "]";
  return s;
}

bool attn::compatible(int64_t a, int64_t b) {
  return ShapedType::isDynamic(a) || ShapedType::isDynamic(b) || a == b;
}

bool attn::isSupportedElementType(Type t) {
  return t.isF32() || t.isF16() || t.isBF16();
}

LogicalResult attn::verifyRank(Operation *op, Value v, StringRef name,
                                 int64_t rank) {
  auto t = dyn_cast<ShapedType>(v.getType());
  if (!t || !t.hasRank() || t.getRank() != rank)
    return op->emitOpError() << "expected " << name
                             << " to be ranked with rank " << rank << ", got "
                             << v.getType();
  return success();
}

MutableOperandRange attn::operandsFrom(OpOperand &first) {
  Operation *op = first.getOwner();
  unsigned begin = first.getOperandNumber();
  return MutableOperandRange(op, begin, op->getNumOperands() - begin);
}

bool attn::hasTensorSemantics(Operation *op) {
  return llvm::all_of(op->getOperands(), [](Value v) {
    return !isa<ShapedType>(v.getType()) || isa<RankedTensorType>(v.getType());
  });
}

bool attn::hasBufferSemantics(Operation *op) {
  return op->getNumResults() == 0 &&
         llvm::all_of(op->getOperands(), [](Value v) {
           return !isa<ShapedType>(v.getType()) || isa<MemRefType>(v.getType());
         });
}

int64_t attn::groupSize(std::optional<int64_t> kvGroupSize, ShapedType query,
                        ShapedType key) {
  if (kvGroupSize)
    return *kvGroupSize;
  int64_t hq = query.getDimSize(1);
  int64_t hkv = key.getDimSize(1);
  if (ShapedType::isDynamic(hq) || ShapedType::isDynamic(hkv) || hkv == 0)
    return 1;
  return hq / hkv;
}

LogicalResult attn::verifyShapedKinds(Operation *op) {
  bool allMemrefs = llvm::all_of(op->getOperands(), [](Value v) {
    return !isa<ShapedType>(v.getType()) || isa<MemRefType>(v.getType());
  });
  if (!hasTensorSemantics(op) && !allMemrefs)
    return op->emitOpError("expected all shaped operands to be ranked tensors "
                           "or all to be memrefs");
  return success();
}

LogicalResult attn::verifyQueryKeyValue(Operation *op, Value query,
                                          Value key, Value value) {
  auto q = cast<ShapedType>(query.getType());
  auto k = cast<ShapedType>(key.getType());
  auto v = cast<ShapedType>(value.getType());
  Type elt = q.getElementType();
  if (!isSupportedElementType(elt))
    return op->emitOpError() << "unsupported query element type " << elt
                             << "; expected f32, f16 or bf16";
  if (k.getElementType() != elt || v.getElementType() != elt)
    return op->emitOpError()
           << "expected key and value element types (" << k.getElementType()
           << ", " << v.getElementType()
           << ") to match the query element type " << elt;
  ArrayRef<int64_t> qs = q.getShape(), ks = k.getShape(), vs = v.getShape();
  // Batch: key batch is B or 1 (broadcast).
  if (!compatible(ks[0], qs[0]) && ks[0] != 1)
    return op->emitOpError() << "key batch size " << ks[0]
                             << " must equal the query batch size " << qs[0]
                             << " or be 1";
  if (!compatible(ks[0], vs[0]) || !compatible(ks[1], vs[1]))
    return op->emitOpError() << "key " << shapeStr(ks) << " and value "
                             << shapeStr(vs)
                             << " must agree on batch and head dimensions";
  if (!compatible(ks[2], vs[2]))
    return op->emitOpError() << "key sequence length N = " << ks[2]
                             << " differs from value sequence length "
                             << vs[2];
  if (!compatible(qs[3], ks[3]))
    return op->emitOpError() << "query head dim E = " << qs[3]
                             << " differs from key head dim " << ks[3];
  return success();
}

LogicalResult attn::verifyHeadRatio(Operation *op, int64_t hq, int64_t hkv) {
  if (ShapedType::isDynamic(hq) || ShapedType::isDynamic(hkv))
    return success();
  if (hkv <= 0 || hq % hkv != 0)
    return op->emitOpError() << "query heads Hq = " << hq
                             << " must be a multiple of key/value heads Hkv = "
                             << hkv;
  return success();
}

LogicalResult attn::verifyDpsResults(DestinationStyleOpInterface op,
                                       bool allTensors) {
  if (!allTensors) {
    if (op->getNumResults() != 0)
      return op->emitOpError("expected no results when operating on memrefs");
    return success();
  }
  if (op->getNumResults() != op.getNumDpsInits())
    return op->emitOpError() << "expected " << op.getNumDpsInits()
                             << " results (one per init), got "
                             << op->getNumResults();
  for (auto [res, init] : llvm::zip_equal(op->getResults(), op.getDpsInits()))
    if (res.getType() != init.getType())
      return op->emitOpError() << "result type " << res.getType()
                               << " differs from its init type "
                               << init.getType();
  return success();
}

void attn::getShapedOperandEffects(
    DestinationStyleOpInterface op,
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  for (OpOperand &operand : op->getOpOperands()) {
    if (!isa<MemRefType>(operand.get().getType()))
      continue;
    if (op.isDpsInit(&operand)) {
      effects.emplace_back(MemoryEffects::Write::get(), &operand,
                           SideEffects::DefaultResource::get());
      continue;
    }
    effects.emplace_back(MemoryEffects::Read::get(), &operand,
                         SideEffects::DefaultResource::get());
  }
}

//===----------------------------------------------------------------------===//
// Tiling and scalar code
//===----------------------------------------------------------------------===//

OpFoldResult attn::dimOf(OpBuilder &b, Location loc, Value v, int64_t d) {
  auto t = cast<ShapedType>(v.getType());
  if (!t.isDynamicDim(d))
    return b.getIndexAttr(t.getDimSize(d));
  if (isa<RankedTensorType>(t))
    return tensor::DimOp::create(b, loc, v, d).getResult();
  return memref::DimOp::create(b, loc, v, d).getResult();
}

Value attn::slice(OpBuilder &b, Location loc, Value v,
                    ArrayRef<OpFoldResult> offsets,
                    ArrayRef<OpFoldResult> sizes) {
  SmallVector<OpFoldResult> strides(offsets.size(), b.getIndexAttr(1));
  if (isa<RankedTensorType>(v.getType()))
    return tensor::ExtractSliceOp::create(b, loc, v, offsets, sizes, strides);
  return memref::SubViewOp::create(b, loc, v, offsets, sizes, strides);
}

bool attn::isFullExtent(OpFoldResult size, OpFoldResult full, Value src,
                          int64_t d) {
  if (isEqualConstantIntOrValue(size, full))
    return true;
  auto v = dyn_cast<Value>(size);
  if (!v)
    return false;
  Value dimSrc;
  std::optional<int64_t> idx;
  if (auto op = v.getDefiningOp<tensor::DimOp>()) {
    dimSrc = op.getSource();
    idx = op.getConstantIndex();
  } else if (auto op = v.getDefiningOp<memref::DimOp>()) {
    dimSrc = op.getSource();
    idx = op.getConstantIndex();
  }
  return dimSrc && dimSrc == src && idx == d;
}

Value attn::toValue(OpBuilder &b, Location loc, OpFoldResult ofr) {
  return getValueOrCreateConstantIndexOp(b, loc, ofr);
}

Value mlir::flex::emitDim(OpBuilder &b, Location loc, Value v, int64_t d) {
  return toValue(b, loc, dimOf(b, loc, v, d));
}

Value attn::loadF32(OpBuilder &b, Location loc, Value memref,
                      ValueRange idx) {
  Value x = memref::LoadOp::create(b, loc, memref, idx);
  if (!x.getType().isF32())
    x = arith::ExtFOp::create(b, loc, b.getF32Type(), x);
  return x;
}

Value attn::emitKvBatch(OpBuilder &b, Location loc, Value key, Value bi,
                          Value c0, Value c1) {
  int64_t bkv = cast<ShapedType>(key.getType()).getDimSize(0);
  if (bkv == 1)
    return c0;
  if (!ShapedType::isDynamic(bkv))
    return bi;
  Value bk = memref::DimOp::create(b, loc, key, 0);
  Value isOne = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, bk, c1);
  return arith::SelectOp::create(b, loc, isOne, c0, bi);
}

Value attn::emitGroupSize(OpBuilder &b, Location loc, Value query,
                            Value key, std::optional<int64_t> staticGroup) {
  if (staticGroup && *staticGroup > 0)
    return arith::ConstantIndexOp::create(b, loc, *staticGroup);
  Value hq = memref::DimOp::create(b, loc, query, 1);
  Value hkv = memref::DimOp::create(b, loc, key, 1);
  return arith::DivUIOp::create(b, loc, hq, hkv);
}
