//===- BlockTensors.h - BlockMask tensors of flex.attention ------*- C++ -*-===//
//
// Verification of the block-sparsity operands of flex.attention and
// flex.attention_backward (kv_blocks, full_kv_blocks, block_sizes) and the
// IR builder that classifies a (query block, kv block) pair, shared by the
// scalar references and the tiled lowering.
//
//===----------------------------------------------------------------------===//
#ifndef TORCH_MLIR_FLEX_DIALECT_FLEX_IR_BLOCKTENSORS_H
#define TORCH_MLIR_FLEX_DIALECT_FLEX_IR_BLOCKTENSORS_H

#include "torch-mlir-flex/Dialect/Flex/IR/FlexOps.h"

namespace mlir::flex {

/// The block-sparsity view of an op with flex.attention's block operands
/// (flex.attention, flex.attention_backward): implicitly built from either.
class BlockTensorOperands {
public:
  template <typename OpTy>
  BlockTensorOperands(OpTy op)
      : op(op.getOperation()), query(op.getQuery()),
        num(op.getKvNumBlocks()), idx(op.getKvIndices()),
        fullNum(op.getFullKvNumBlocks()), fullIdx(op.getFullKvIndices()),
        sizes(op.getBlockSizes()), offsets(op.getOffsets()),
        tensorSemantics(op.hasTensorSemantics()) {}

  Operation *getOperation() const { return op; }
  Location getLoc() const { return op->getLoc(); }
  InFlightDiagnostic emitOpError(const Twine &msg = {}) const {
    return op->emitOpError(msg);
  }
  Value getQuery() const { return query; }
  ShapedType getQueryType() const { return cast<ShapedType>(query.getType()); }
  Value getKvNumBlocks() const { return num; }
  Value getKvIndices() const { return idx; }
  Value getFullKvNumBlocks() const { return fullNum; }
  Value getFullKvIndices() const { return fullIdx; }
  std::optional<ArrayRef<int64_t>> getBlockSizes() const { return sizes; }
  /// The op's tile offsets (empty for an untiled op).
  ValueRange getOffsets() const { return offsets; }
  bool hasBlockTensors() const { return static_cast<bool>(num); }
  bool hasFullBlockTensors() const { return static_cast<bool>(fullNum); }
  bool hasTensorSemantics() const { return tensorSemantics; }

private:
  Operation *op;
  Value query, num, idx, fullNum, fullIdx;
  std::optional<ArrayRef<int64_t>> sizes;
  ValueRange offsets;
  bool tensorSemantics;
};

/// Classification of one (query block, kv block) pair, as i1 values:
/// `full` when the kv block is listed in full_kv_indices (kept without
/// mask_mod), `partial` when it is listed in kv_indices (mask_mod decides).
/// Neither: masked. Without full_kv_blocks, `full` is constant false.
struct BlockStatus {
  Value partial;
  Value full;
};

/// Emits the status of kv block `kvBlock` for query block `qBlock` of global
/// batch `batch` and global query head `head` (all `index` values; callers
/// add the op's offsets). Loops over the row's listed indices; reads with
/// tensor.extract or memref.load depending on the op's semantics. The op
/// must have block tensors (`op.hasBlockTensors()`). Counts are clamped to
/// [0, NB], and a row outside the tensors (query block >= MB, or a batch or
/// head past a dynamic extent) lists nothing: no read is out of bounds.
BlockStatus emitBlockStatus(OpBuilder &b, Location loc, BlockTensorOperands op,
                            Value batch, Value head, Value qBlock,
                            Value kvBlock);

/// One row of a block list, for lowerings that visit only listed blocks
/// (as torch.compile's kernel does): `count` = clamp(num[row], 0, NB) (0 for
/// a row outside the tensors), `row` = (bb, hb, qBlock) with broadcast
/// dimensions mapped to 0, `indices` the list tensor.
struct BlockRow {
  Value indices;
  SmallVector<Value, 3> row;
  Value count;
};

/// The row of kv_indices (`full` false) or full_kv_indices (`full` true,
/// requires op.hasFullBlockTensors()) for (batch, head, qBlock).
BlockRow emitBlockRow(OpBuilder &b, Location loc, BlockTensorOperands op,
                      Value batch, Value head, Value qBlock, bool full);

/// The j-th listed kv block of `row` (an index; j < row.count). Values are
/// as the tensor holds them: callers must not assume 0 <= value < ceil(N /
/// KVBS) (emitBlockStatus compares, so bad values list nothing).
Value emitListedBlock(OpBuilder &b, Location loc, const BlockRow &row,
                      Value j);

/// emitBlockStatus for the point (batch, head, qIdx, kvIdx) in global
/// indices: qBlock = qIdx / QBS, kvBlock = kvIdx / KVBS.
BlockStatus emitPointBlockStatus(OpBuilder &b, Location loc,
                                 BlockTensorOperands op, Value batch,
                                 Value head, Value qIdx, Value kvIdx);

/// `full || (partial && maskKeep)`; `maskKeep` null means no mask_mod.
Value combineBlockStatus(OpBuilder &b, Location loc, BlockStatus status,
                         Value maskKeep);

/// The keep bit (i1) of the point with global indices `global` = (b, h,
/// q_idx) and `kvIdx`: mask_mod (unless `maskMod` is empty) combined with
/// the block tensors of `op` (if any). Null when nothing masks.
Value emitKeep(OpBuilder &b, Location loc, BlockTensorOperands op,
               Region &maskMod, ValueRange global, Value kvIdx);

/// Emits, in front of `op` (on tensors), flex.check ops that report at run
/// time a count outside [0, NB] in kv_num_blocks / full_kv_num_blocks and,
/// for dynamic extents, the shape rules of the verifier. Used by
/// flex-insert-checks; no-op without block tensors.
void emitBlockTensorChecks(OpBuilder &b, BlockTensorOperands op);

/// Verifies the block-sparsity operands and attribute of `op`.
LogicalResult verifyBlockTensors(BlockTensorOperands op);

} // namespace mlir::flex

#endif
