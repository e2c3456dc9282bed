//===- BufferizableOpInterfaceImpl.cpp - bufferization of flex ops -------===//
//
// Destination-passing bufferization of flex.attention,
// flex.attention_backward and flex.quant_matmul: each init (output,
// logsumexp, max_scores; the gradients) aliases its result; every other
// shaped operand (inputs, captures, block tensors, weights) is read.
// flex.attention and flex.quant_matmul write their inits before reading
// them (if ever), so they need no copy of their initial contents;
// flex.attention_backward accumulates into its inits, which are therefore
// also read.
// Region bodies are moved unchanged: their tensor.extract of captures are
// bufferized by One-Shot Bufferize like any other op.
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
/// `readsInits`: whether the op reads the initial contents of its inits.
template <typename OpTy, bool readsInits>
struct DpsOpBufferization
    : public BufferizableOpInterface::ExternalModel<
          DpsOpBufferization<OpTy, readsInits>, OpTy> {
  bool bufferizesToMemoryRead(Operation *op, OpOperand &operand,
                              const AnalysisState &) const {
    return readsInits || !cast<OpTy>(op).isDpsInit(&operand);
  }

  bool bufferizesToMemoryWrite(Operation *op, OpOperand &operand,
                               const AnalysisState &) const {
    return cast<OpTy>(op).isDpsInit(&operand);
  }

  AliasingValueList getAliasingValues(Operation *op, OpOperand &operand,
                                      const AnalysisState &) const {
    auto dps = cast<OpTy>(op);
    if (!dps.isDpsInit(&operand))
      return {};
    return {{dps.getTiedOpResult(&operand), BufferRelation::Equivalent}};
  }

  /// The same op on the buffers of its tensor operands, without results,
  /// with the regions moved over.
  LogicalResult bufferize(Operation *op, RewriterBase &rewriter,
                          const BufferizationOptions &options,
                          BufferizationState &state) const {
    auto dps = cast<OpTy>(op);
    OpBuilder::InsertionGuard g(rewriter);
    rewriter.setInsertionPoint(op);
    SmallVector<Value> operands;
    for (Value v : op->getOperands()) {
      if (!isa<TensorType>(v.getType())) {
        operands.push_back(v);
        continue;
      }
      FailureOr<Value> buf = getBuffer(rewriter, v, options, state);
      if (failed(buf))
        return failure();
      operands.push_back(*buf);
    }
    OperationState newState(op->getLoc(), op->getName(), operands,
                            TypeRange{},
                            op->getDiscardableAttrDictionary().getValue());
    newState.propertiesAttr = op->getPropertiesAsAttribute();
    for (unsigned i = 0, e = op->getNumRegions(); i < e; ++i)
      newState.addRegion();
    Operation *newOp = rewriter.create(newState);
    for (auto [from, to] :
         llvm::zip_equal(op->getRegions(), newOp->getRegions()))
      rewriter.inlineRegionBefore(from, to, to.end());
    SmallVector<Value> replacements;
    for (OpOperand &init : dps.getDpsInitsMutable())
      replacements.push_back(operands[init.getOperandNumber()]);
    replaceOpWithBufferizedValues(rewriter, op, replacements);
    return success();
  }
};
} // namespace

void mlir::flex::registerBufferizableOpInterfaceExternalModels(
    DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, FlexDialect *) {
    AttentionOp::attachInterface<
        DpsOpBufferization<AttentionOp, /*readsInits=*/false>>(*ctx);
    AttentionBackwardOp::attachInterface<
        DpsOpBufferization<AttentionBackwardOp, /*readsInits=*/true>>(*ctx);
    QuantMatmulOp::attachInterface<
        DpsOpBufferization<QuantMatmulOp, /*readsInits=*/false>>(*ctx);
  });
}
