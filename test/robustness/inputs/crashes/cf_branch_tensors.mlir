// Crash reproducer (fixed): a function with cf branches on tensors. The
// bufferization models of cf were not registered, so one-shot-bufferize
// aborted ("BufferizableOpInterface promised by dialect 'cf' but never
// implemented"); lit chunk #6 of test/Dialect/Flex/widen-i1-memrefs.mlir
// showed it on memrefs. @main returns %a if %s[0] > 0, else zeros (%b unused).
func.func @main(%a: tensor<4xf32>, %b: tensor<4xf32>, %s: tensor<1xf32>) -> tensor<4xf32> {
  %c0 = arith.constant 0 : index
  %x = tensor.extract %s[%c0] : tensor<1xf32>
  %z = arith.constant 0.0 : f32
  %c = arith.cmpf ogt, %x, %z : f32
  cf.cond_br %c, ^bb1, ^bb2
^bb1:
  cf.br ^bb3(%a : tensor<4xf32>)
^bb2:
  %e = tensor.empty() : tensor<4xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  cf.br ^bb3(%f : tensor<4xf32>)
^bb3(%r: tensor<4xf32>):
  return %r : tensor<4xf32>
}
