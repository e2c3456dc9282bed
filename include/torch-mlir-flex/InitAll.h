//===- InitAll.h - what torch-mlir-flex registers ---------------*- C++ -*-===//
#ifndef TORCH_MLIR_FLEX_INITALL_H
#define TORCH_MLIR_FLEX_INITALL_H

namespace mlir {
class DialectRegistry;
class MLIRContext;
namespace flex {
/// The flex dialect plus the upstream dialects (and their interface models)
/// used between torch-mlir's linalg-on-tensors output and LLVM.
void registerAllDialects(DialectRegistry &registry);
/// flex passes plus the upstream passes of our pipelines.
void registerAllPasses();
/// Builtin/LLVM/OpenMP to LLVM IR translations.
void registerAllTranslations(MLIRContext &context);
} // namespace flex
} // namespace mlir

#endif
