//===- AttentionCommon.h - helpers shared by the attention ops --*- C++ -*-===//
//
// Private to the flex dialect library: verifier pieces, tiling helpers and
// scalar-reference helpers shared by flex.attention (FlexOps.cpp,
// TilingInterfaceImpl.cpp) and flex.attention_backward
// (AttentionBackwardOp.cpp, AttentionBackwardTiling.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef TORCH_MLIR_FLEX_LIB_DIALECT_FLEX_IR_ATTENTIONCOMMON_H
#define TORCH_MLIR_FLEX_LIB_DIALECT_FLEX_IR_ATTENTIONCOMMON_H

#include "torch-mlir-flex/Dialect/Flex/IR/FlexOps.h"

#include "mlir/Dialect/Utils/StaticValueUtils.h"

#include <string>

namespace mlir::flex::attn {

//===----------------------------------------------------------------------===//
// Verification
//===----------------------------------------------------------------------===//

/// "[2, ?, 8]".
std::string shapeStr(ArrayRef<int64_t> shape);
/// True when two extents may be equal (either is dynamic or both match).
bool compatible(int64_t a, int64_t b);
bool isSupportedElementType(Type t);

/// `v` is a ranked shaped value of rank `rank`.
LogicalResult verifyRank(Operation *op, Value v, StringRef name, int64_t rank);
/// All shaped operands are ranked tensors, or all are memrefs.
LogicalResult verifyShapedKinds(Operation *op);
/// Element types (f32/f16/bf16, all equal) and the shape rules between
/// query [B, Hq, M, E], key [Bkv, Hkv, N, E] and value [Bkv, Hkv, N, Ev]
/// (ranks already checked). Not the GQA ratio (verifyHeadRatio).
LogicalResult verifyQueryKeyValue(Operation *op, Value query, Value key,
                                  Value value);
/// Hq is a multiple of Hkv (when both are static).
LogicalResult verifyHeadRatio(Operation *op, int64_t hq, int64_t hkv);
/// On tensors one result per init, of the init's type; none on memrefs.
LogicalResult verifyDpsResults(DestinationStyleOpInterface op,
                               bool allTensors);

/// The operands from `first` to the end: the inits of an op whose inits
/// are its last operands (getDpsInitsMutable).
MutableOperandRange operandsFrom(OpOperand &first);
bool hasTensorSemantics(Operation *op);
bool hasBufferSemantics(Operation *op);
/// The GQA ratio G: `kvGroupSize` when set, else Hq / Hkv (1 when either
/// is dynamic or Hkv is 0).
int64_t groupSize(std::optional<int64_t> kvGroupSize, ShapedType query,
                  ShapedType key);
/// Memref operands: inits written, every other one read.
void getShapedOperandEffects(
    DestinationStyleOpInterface op,
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects);

//===----------------------------------------------------------------------===//
// Tiling and scalar code
//===----------------------------------------------------------------------===//

/// Extent `d` of `v` (constant, tensor.dim or memref.dim).
OpFoldResult dimOf(OpBuilder &b, Location loc, Value v, int64_t d);
/// tensor.extract_slice or memref.subview with unit strides.
Value slice(OpBuilder &b, Location loc, Value v, ArrayRef<OpFoldResult> offsets,
            ArrayRef<OpFoldResult> sizes);
/// True when `size` is the whole extent `full` of dimension `d` of `src`:
/// equal constants/values, or a `dim` op of `src` at `d` (getIterationDomain
/// and getTiledImplementation each create their own dim op).
bool isFullExtent(OpFoldResult size, OpFoldResult full, Value src, int64_t d);
Value toValue(OpBuilder &b, Location loc, OpFoldResult ofr);
/// memref.load extended to f32.
Value loadF32(OpBuilder &b, Location loc, Value memref, ValueRange idx);
/// The key/value batch index of query batch `bi` on buffers: `bi`, or 0
/// when the key batch is 1 (broadcast; tested at run time when dynamic).
/// `c0`, `c1` are index constants 0 and 1.
Value emitKvBatch(OpBuilder &b, Location loc, Value key, Value bi, Value c0,
                  Value c1);
/// The GQA ratio G as an index value: `staticGroup` when known (> 0), else
/// Hq / Hkv read from the buffers.
Value emitGroupSize(OpBuilder &b, Location loc, Value query, Value key,
                    std::optional<int64_t> staticGroup);

} // namespace mlir::flex::attn

#endif
