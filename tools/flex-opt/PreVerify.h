//===- PreVerify.h - reject inputs MLIR 22.1.8 aborts on ------------------===//
//
// Checks that run before the upstream verifier (flex-opt parses without
// verification, runs these, then verifies): inputs on which an upstream
// parser, verifier or transform asserts instead of reporting an error get a
// diagnostic here. See docs/robustness.md.
//
//===----------------------------------------------------------------------===//
#ifndef TORCH_MLIR_FLEX_TOOLS_FLEX_OPT_PREVERIFY_H
#define TORCH_MLIR_FLEX_TOOLS_FLEX_OPT_PREVERIFY_H

#include "mlir/Pass/Pass.h"
#include "llvm/Support/MemoryBuffer.h"

namespace mlir::flex {
/// Text the MLIR parser itself asserts on (checked before parsing); emits
/// an error on `llvm::errs()` and fails.
LogicalResult checkKnownParserAborts(const llvm::MemoryBuffer &buffer);
/// Pass: the op checks below, then the regular verifier.
std::unique_ptr<Pass> createPreVerifyPass();
} // namespace mlir::flex

#endif
