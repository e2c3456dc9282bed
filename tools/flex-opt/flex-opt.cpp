//===- flex-opt.cpp - torch-mlir-flex optimizer driver --------------------===//
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "torch-mlir-flex/InitAll.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  mlir::flex::registerAllDialects(registry);
  mlir::flex::registerAllPasses();
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "torch-mlir-flex optimizer driver\n", registry));
}
