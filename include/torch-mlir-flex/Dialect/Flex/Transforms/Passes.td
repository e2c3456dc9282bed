//===- Passes.td - flex dialect passes ---------------------*- tablegen -*-===//
//
// Every pass of the flex dialect, one file per folder of
// lib/Dialect/Flex/Transforms/ (the stage it serves), in pipeline order;
// lib/Dialect/Flex/Transforms/README.md says which pipeline runs which.
//
//===----------------------------------------------------------------------===//
#ifndef TORCH_MLIR_FLEX_DIALECT_FLEX_TRANSFORMS_PASSES
#define TORCH_MLIR_FLEX_DIALECT_FLEX_TRANSFORMS_PASSES

include "torch-mlir-flex/Dialect/Flex/Transforms/Materialize/Passes.td"
include "torch-mlir-flex/Dialect/Flex/Transforms/Reference/Passes.td"
include "torch-mlir-flex/Dialect/Flex/Transforms/Forward/Passes.td"
include "torch-mlir-flex/Dialect/Flex/Transforms/Backward/Passes.td"
include "torch-mlir-flex/Dialect/Flex/Transforms/Math/Passes.td"
include "torch-mlir-flex/Dialect/Flex/Transforms/Dense/Passes.td"
include "torch-mlir-flex/Dialect/Flex/Transforms/Memory/Passes.td"
include "torch-mlir-flex/Dialect/Flex/Transforms/Checks/Passes.td"
include "torch-mlir-flex/Dialect/Flex/Transforms/Parallel/Passes.td"
include "torch-mlir-flex/Dialect/Flex/Transforms/Codegen/Passes.td"
include "torch-mlir-flex/Dialect/Flex/Transforms/Calling/Passes.td"

#endif // TORCH_MLIR_FLEX_DIALECT_FLEX_TRANSFORMS_PASSES
