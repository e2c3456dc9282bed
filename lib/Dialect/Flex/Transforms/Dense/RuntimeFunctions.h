//===- RuntimeFunctions.h - declarations of lib/Runtime entry points -----===//
//
// The Dense passes that turn products into runtime calls (MatmulToBlas,
// QuantMatmulToCalls, IntMatmulToCalls) call functions of
// libflex_runtime.so whose arguments are all `index` values (int64_t in
// C) and which return nothing; this declares one in the module, once.
//
//===----------------------------------------------------------------------===//
#ifndef TORCH_MLIR_FLEX_TRANSFORMS_DENSE_RUNTIMEFUNCTIONS_H
#define TORCH_MLIR_FLEX_TRANSFORMS_DENSE_RUNTIMEFUNCTIONS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

namespace mlir::flex {

/// The private declaration `func.func private @name(index x numArgs)` of
/// `module`: the existing one, or a new one at the module's end.
inline func::FuncOp declareRuntimeFunction(ModuleOp module, StringRef name,
                                           unsigned numArgs) {
  if (auto f = module.lookupSymbol<func::FuncOp>(name))
    return f;
  OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
  SmallVector<Type> args(numArgs, b.getIndexType());
  auto f = func::FuncOp::create(b, module.getLoc(), name,
                                b.getFunctionType(args, {}));
  f.setPrivate();
  return f;
}

} // namespace mlir::flex

#endif
