//===- BufferizableOpInterfaceImpl.cpp - bufferization of flex.attention --===//
//
// Destination-passing bufferization: each init (output, logsumexp,
// max_scores) aliases its result; query, key, value, captures and the block
// tensors are read.
// Inits are written before they are read, so they need no copy of their
// initial contents. Region bodies are moved unchanged: their tensor.extract
// of captures are bufferized by One-Shot Bufferize like any other op.
//
//===----------------------------------------------------------------------===//
#include "torch-mlir-flex/Dialect/Flex/IR/BufferizableOpInterfaceImpl.h"

#include "mlir/Dialect/Bufferization/IR/BufferizableOpInterface.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "torch-mlir-flex/Dialect/Flex/IR/FlexOps.h"

using namespace mlir;
using namespace mlir::bufferization;
using namespace mlir::flex;

namespace {
struct AttentionOpBufferization
    : public BufferizableOpInterface::ExternalModel<AttentionOpBufferization,
                                                    AttentionOp> {
  bool bufferizesToMemoryRead(Operation *op, OpOperand &operand,
                              const AnalysisState &) const {
    return !cast<AttentionOp>(op).isDpsInit(&operand);
  }

  bool bufferizesToMemoryWrite(Operation *op, OpOperand &operand,
                               const AnalysisState &) const {
    return cast<AttentionOp>(op).isDpsInit(&operand);
  }

  AliasingValueList getAliasingValues(Operation *op, OpOperand &operand,
                                      const AnalysisState &) const {
    auto attn = cast<AttentionOp>(op);
    if (!attn.isDpsInit(&operand))
      return {};
    return {{attn.getTiedOpResult(&operand), BufferRelation::Equivalent}};
  }

  LogicalResult bufferize(Operation *op, RewriterBase &rewriter,
                          const BufferizationOptions &options,
                          BufferizationState &state) const {
    auto attn = cast<AttentionOp>(op);
    OpBuilder::InsertionGuard g(rewriter);
    rewriter.setInsertionPoint(op);
    auto buf = [&](Value v) -> FailureOr<Value> {
      if (!v || !isa<TensorType>(v.getType()))
        return v;
      return getBuffer(rewriter, v, options, state);
    };
    SmallVector<Value> captures;
    for (Value c : attn.getCaptures()) {
      FailureOr<Value> b = buf(c);
      if (failed(b))
        return failure();
      captures.push_back(*b);
    }
    FailureOr<Value> q = buf(attn.getQuery()), k = buf(attn.getKey()),
                     v = buf(attn.getValue()), o = buf(attn.getOutput()),
                     l = buf(attn.getLogsumexp()),
                     m = buf(attn.getMaxScores());
    FailureOr<Value> kvn = buf(attn.getKvNumBlocks()),
                     kvi = buf(attn.getKvIndices()),
                     fkvn = buf(attn.getFullKvNumBlocks()),
                     fkvi = buf(attn.getFullKvIndices());
    if (failed(q) || failed(k) || failed(v) || failed(o) || failed(l) ||
        failed(m) || failed(kvn) || failed(kvi) || failed(fkvn) ||
        failed(fkvi))
      return failure();
    auto newOp = AttentionOp::create(
        rewriter, op->getLoc(), TypeRange{}, *q, *k, *v, captures,
        attn.getOffsets(), *kvn, *kvi, *fkvn, *fkvi, *o, *l, *m,
        attn.getScaleAttr(), attn.getKvGroupSizeAttr(),
        attn.getBlockSizesAttr());
    rewriter.inlineRegionBefore(attn.getScoreMod(), newOp.getScoreMod(),
                                newOp.getScoreMod().end());
    rewriter.inlineRegionBefore(attn.getMaskMod(), newOp.getMaskMod(),
                                newOp.getMaskMod().end());
    SmallVector<Value> replacements;
    for (Value init : {*o, *l, *m})
      if (init)
        replacements.push_back(init);
    replaceOpWithBufferizedValues(rewriter, op, replacements);
    return success();
  }
};
} // namespace

void mlir::flex::registerBufferizableOpInterfaceExternalModels(
    DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, FlexDialect *) {
    AttentionOp::attachInterface<AttentionOpBufferization>(*ctx);
  });
}
