//===- BufferizableOpInterfaceImpl.h - flex bufferization -------*- C++ -*-===//
#ifndef TORCH_MLIR_FLEX_DIALECT_FLEX_IR_BUFFERIZABLEOPINTERFACEIMPL_H
#define TORCH_MLIR_FLEX_DIALECT_FLEX_IR_BUFFERIZABLEOPINTERFACEIMPL_H

namespace mlir {
class DialectRegistry;
namespace flex {
void registerBufferizableOpInterfaceExternalModels(DialectRegistry &registry);
} // namespace flex
} // namespace mlir

#endif
