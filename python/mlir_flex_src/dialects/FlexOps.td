//===- FlexOps.td - Python bindings entry for the flex dialect -*- tablegen -*-===//
#ifndef PYTHON_BINDINGS_FLEX_OPS
#define PYTHON_BINDINGS_FLEX_OPS

include "torch-mlir-flex/Dialect/Flex/IR/FlexOps.td"

#endif
