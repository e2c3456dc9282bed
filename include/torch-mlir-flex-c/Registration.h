/*===- Registration.h - torch-mlir-flex C API -------------------*- C -*-===*/
#ifndef TORCH_MLIR_FLEX_C_REGISTRATION_H
#define TORCH_MLIR_FLEX_C_REGISTRATION_H

#include "mlir-c/IR.h"

#ifdef __cplusplus
extern "C" {
#endif

/// Adds the flex dialect, the upstream dialects of our pipeline and their
/// interface models to `registry`.
MLIR_CAPI_EXPORTED void torchMlirFlexRegisterDialects(MlirDialectRegistry registry);

/// Registers the flex passes and the upstream passes of our pipeline with the
/// global pass registry (idempotent).
MLIR_CAPI_EXPORTED void torchMlirFlexRegisterPasses(void);

/// Registers the LLVM IR translations the ExecutionEngine needs.
MLIR_CAPI_EXPORTED void torchMlirFlexRegisterTranslations(MlirContext context);

#ifdef __cplusplus
}
#endif

#endif
