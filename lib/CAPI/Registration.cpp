//===- Registration.cpp - torch-mlir-flex C API ---------------------------===//
#include "torch-mlir-flex-c/Registration.h"

#include "mlir/CAPI/IR.h"
#include "mlir/CAPI/Support.h"
#include "torch-mlir-flex/InitAll.h"

void torchMlirFlexRegisterDialects(MlirDialectRegistry registry) {
  mlir::flex::registerAllDialects(*unwrap(registry));
}

void torchMlirFlexRegisterPasses(void) { mlir::flex::registerAllPasses(); }

void torchMlirFlexRegisterTranslations(MlirContext context) {
  mlir::flex::registerAllTranslations(*unwrap(context));
}
