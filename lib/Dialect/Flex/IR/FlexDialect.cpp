//===- FlexDialect.cpp - flex dialect registration ------------------------===//
#include "torch-mlir-flex/Dialect/Flex/IR/FlexDialect.h"
#include "torch-mlir-flex/Dialect/Flex/IR/FlexOps.h"

using namespace mlir;
using namespace mlir::flex;

#include "torch-mlir-flex/Dialect/Flex/IR/FlexOpsDialect.cpp.inc"

void FlexDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "torch-mlir-flex/Dialect/Flex/IR/FlexOps.cpp.inc"
      >();
}
