//===- FlexDialect.h - flex dialect -----------------------------*- C++ -*-===//
#ifndef TORCH_MLIR_FLEX_DIALECT_FLEX_IR_FLEXDIALECT_H
#define TORCH_MLIR_FLEX_DIALECT_FLEX_IR_FLEXDIALECT_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Dialect.h"

#include "torch-mlir-flex/Dialect/Flex/IR/FlexOpsDialect.h.inc"

#endif
