//===- FlashDriver.cpp - what the flash driver passes share ---------------===//
//
// The per-op loop of flex-to-flash and flex-backward-to-flash around their
// lowerings (FlashDriver.h).
//
//===----------------------------------------------------------------------===//
#include "torch-mlir-flex/Dialect/Flex/Transforms/FlashDriver.h"
#include "torch-mlir-flex/Dialect/Flex/Transforms/FlashMicroKernel.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

using namespace mlir;
using namespace mlir::flex;

FlashConfig mlir::flex::requestedFlashConfig(int64_t tileM, int64_t tileN,
                                             bool blockSparsity,
                                             bool denseClassify, bool fastExp,
                                             bool vectorize) {
  FlashConfig requested;
  requested.tileM = tileM;
  requested.tileN = tileN;
  requested.blockSparsity = blockSparsity;
  requested.denseClassify = denseClassify;
  requested.fastExp = fastExp;
  requested.vectorize = vectorize;
  return requested;
}

LogicalResult mlir::flex::setKernelOptions(FlashConfig &requested,
                                           Operation *root, StringRef pass,
                                           bool bf16Dot, bool amx,
                                           int64_t vectorBits) {
  if (!isSupportedVectorBits(vectorBits))
    return root->emitError(pass + ": vector-bits must be 256 or 512, got ")
           << vectorBits;
  if (vectorBits == 256 && (bf16Dot || amx))
    return root->emitError(pass + ": vector-bits=256 (AVX2) excludes ")
           << (bf16Dot ? "bf16-dot" : "amx")
           << " (AVX512-BF16 / AMX instructions)";
  requested.bf16Dot = bf16Dot;
  requested.amx = amx;
  requested.vectorBits = vectorBits;
  return success();
}

bool FlashDriver::accepts(Operation *op, bool tensors,
                          const std::optional<std::string> &why) {
  if (!why)
    return true;
  if (tensors)
    op->emitRemark(pass + ": ") << *why << "; left for flex-to-loops";
  return false;
}

LogicalResult
FlashDriver::lower(std::optional<double> micros,
                   function_ref<LogicalResult(scf::ForallOp &)> lower) {
  bool serial = serialBelowUs > 0 && micros && *micros < serialBelowUs;
  DenseSet<Operation *> before;
  if (serial)
    root->walk([&](scf::ForallOp f) { before.insert(f); });
  scf::ForallOp forall;
  if (failed(lower(forall)))
    return failure();
  // Every loop the op became (tiles, K/V layout) runs on one thread.
  if (serial) {
    UnitAttr unit = UnitAttr::get(root->getContext());
    root->walk([&](scf::ForallOp f) {
      if (!before.contains(f))
        f->setAttr("flex.serial", unit);
    });
  }
  if (fastExp)
    forall.walk([&](math::TanhOp t) { tanhOps.push_back(t); });
  return success();
}

LogicalResult FlashDriver::finish() {
  if (tanhOps.empty())
    return success();
  RewritePatternSet patterns(root->getContext());
  populatePolynomialApproximateTanhPattern(patterns);
  return applyOpPatternsGreedily(tanhOps, std::move(patterns));
}
