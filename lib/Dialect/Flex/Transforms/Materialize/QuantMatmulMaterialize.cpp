//===- QuantMatmulMaterialize.cpp - outlined quant calls -> flex op -------===//
//
// flex-materialize-quant-matmul (Materialize/Passes.td): each
// `func.call @__flex_quant_matmul_N(x, w, scales)` of the frontend (a
// declaration carrying `flex.quant.format`, `flex.quant.group_size`,
// `flex.quant.layout`) becomes a `flex.quant_matmul` writing into a
// `tensor.empty` of the call's result type; declarations left without
// calls are erased. Missing or ill-typed attributes, a wrong operand count
// and operands the op's verifier rejects are errors on the call.
//
//===----------------------------------------------------------------------===//
#include "torch-mlir-flex/Dialect/Flex/IR/FlexOps.h"
#include "torch-mlir-flex/Dialect/Flex/Transforms/Passes.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::flex {
#define GEN_PASS_DEF_FLEXMATERIALIZEQUANTMATMUL
#include "torch-mlir-flex/Dialect/Flex/Transforms/Passes.h.inc"
} // namespace mlir::flex

using namespace mlir;

namespace {
constexpr StringLiteral kPassName = "flex-materialize-quant-matmul";
constexpr StringLiteral kPrefix = "__flex_quant_matmul_";
constexpr StringLiteral kFormat = "flex.quant.format";
constexpr StringLiteral kGroupSize = "flex.quant.group_size";
constexpr StringLiteral kLayout = "flex.quant.layout";

bool isQuantDeclaration(func::FuncOp fn) {
  return fn.getSymName().starts_with(kPrefix) || fn->hasAttr(kFormat);
}

InFlightDiagnostic callError(func::CallOp call, func::FuncOp decl) {
  return call.emitError() << kPassName << ": @" << decl.getSymName() << ": ";
}

/// The call as a flex.quant_matmul; failure (diagnosed) on bad input.
LogicalResult rewriteCall(func::CallOp call, func::FuncOp decl,
                          RewriterBase &rewriter) {
  if (!decl.isExternal())
    return callError(call, decl) << "the target must be a declaration";
  auto format = decl->getAttrOfType<StringAttr>(kFormat);
  auto groupSize = decl->getAttrOfType<IntegerAttr>(kGroupSize);
  auto layout = decl->getAttrOfType<IntegerAttr>(kLayout);
  if (!format)
    return callError(call, decl) << "needs a string attribute '" << kFormat
                                 << "' (\"int8\" or \"int4_cpu\")";
  if (!groupSize || !groupSize.getType().isInteger(64))
    return callError(call, decl)
           << "needs an i64 attribute '" << kGroupSize << "'";
  if (!layout || !layout.getType().isInteger(64))
    return callError(call, decl)
           << "needs an i64 attribute '" << kLayout << "'";
  if (call.getNumOperands() != 3 || call.getNumResults() != 1)
    return callError(call, decl)
           << "expected 3 operands (x, w, scales) and 1 result, got "
           << call.getNumOperands() << " and " << call.getNumResults();
  for (Value v : call.getOperands())
    if (!isa<RankedTensorType>(v.getType()))
      return callError(call, decl)
             << "operands must be ranked tensors, got " << v.getType();
  auto resultType = dyn_cast<RankedTensorType>(call.getResult(0).getType());
  if (!resultType || resultType.getRank() != 2)
    return callError(call, decl)
           << "the result must be a rank-2 tensor, got "
           << call.getResult(0).getType();
  Value x = call.getOperand(0), w = call.getOperand(1),
        scales = call.getOperand(2);
  auto xType = cast<RankedTensorType>(x.getType());
  auto wType = cast<RankedTensorType>(w.getType());
  if (xType.getRank() != 2 || wType.getRank() != 2)
    return callError(call, decl)
           << "x and w must be rank 2, got " << xType << " and " << wType;

  rewriter.setInsertionPoint(call);
  Location loc = call.getLoc();
  // Dynamic sizes: M from x, N from w's rows.
  SmallVector<Value> dynSizes;
  if (resultType.isDynamicDim(0))
    dynSizes.push_back(tensor::DimOp::create(rewriter, loc, x, 0));
  if (resultType.isDynamicDim(1))
    dynSizes.push_back(tensor::DimOp::create(rewriter, loc, w, 0));
  Value init = tensor::EmptyOp::create(rewriter, loc, resultType.getShape(),
                                       resultType.getElementType(), dynSizes);
  auto op = flex::QuantMatmulOp::create(
      rewriter, loc, resultType, x, w, scales, init, format,
      groupSize, layout);
  // The op's verifier decides; its message is reported on the call, with
  // the declaration's name.
  std::string message;
  LogicalResult verified = success();
  {
    ScopedDiagnosticHandler capture(
        call.getContext(), [&](Diagnostic &diag) {
          if (message.empty())
            message = diag.str();
          return success();
        });
    verified = verify(op);
  }
  if (failed(verified)) {
    rewriter.eraseOp(op);
    rewriter.eraseOp(init.getDefiningOp());
    for (Value v : dynSizes)
      rewriter.eraseOp(v.getDefiningOp());
    return callError(call, decl) << message;
  }
  rewriter.replaceOp(call, op.getResults());
  return success();
}

struct FlexMaterializeQuantMatmulPass
    : public flex::impl::FlexMaterializeQuantMatmulBase<
          FlexMaterializeQuantMatmulPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    SmallVector<std::pair<func::CallOp, func::FuncOp>> calls;
    module.walk([&](func::CallOp call) {
      auto callee = symbols.lookup<func::FuncOp>(call.getCallee());
      if (callee && isQuantDeclaration(callee))
        calls.emplace_back(call, callee);
    });
    IRRewriter rewriter(&getContext());
    bool failedAny = false;
    llvm::SetVector<Operation *> decls;
    for (auto [call, decl] : calls) {
      decls.insert(decl);
      if (failed(rewriteCall(call, decl, rewriter)))
        failedAny = true;
    }
    if (failedAny)
      return signalPassFailure();
    for (Operation *fn : decls)
      if (SymbolTable::symbolKnownUseEmpty(fn, module))
        symbols.erase(fn);
  }
};
} // namespace
