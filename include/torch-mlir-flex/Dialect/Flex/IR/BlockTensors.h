//===- BlockTensors.h - BlockMask tensors of flex.attention ------*- C++ -*-===//
//
// Verification of the block-sparsity operands of flex.attention (kv_blocks,
// full_kv_blocks, block_sizes) and the IR builder that classifies a
// (query block, kv block) pair, shared by the scalar reference and the tiled
// lowering.
//
//===----------------------------------------------------------------------===//
#ifndef TORCH_MLIR_FLEX_DIALECT_FLEX_IR_BLOCKTENSORS_H
#define TORCH_MLIR_FLEX_DIALECT_FLEX_IR_BLOCKTENSORS_H

#include "torch-mlir-flex/Dialect/Flex/IR/FlexOps.h"

namespace mlir::flex {

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
BlockStatus emitBlockStatus(OpBuilder &b, Location loc, AttentionOp op,
                            Value batch, Value head, Value qBlock,
                            Value kvBlock);

/// emitBlockStatus for the point (batch, head, qIdx, kvIdx) in global
/// indices: qBlock = qIdx / QBS, kvBlock = kvIdx / KVBS.
BlockStatus emitPointBlockStatus(OpBuilder &b, Location loc, AttentionOp op,
                                 Value batch, Value head, Value qIdx,
                                 Value kvIdx);

/// `full || (partial && maskKeep)`; `maskKeep` null means no mask_mod.
Value combineBlockStatus(OpBuilder &b, Location loc, BlockStatus status,
                         Value maskKeep);

/// Emits, in front of `op` (on tensors), flex.check ops that report at run
/// time a count outside [0, NB] in kv_num_blocks / full_kv_num_blocks and,
/// for dynamic extents, the shape rules of the verifier. Used by
/// flex-insert-checks; no-op without block tensors.
void emitBlockTensorChecks(OpBuilder &b, AttentionOp op);

/// Verifies the block-sparsity operands and attribute of `op`.
LogicalResult verifyBlockTensors(AttentionOp op);

} // namespace mlir::flex

#endif
