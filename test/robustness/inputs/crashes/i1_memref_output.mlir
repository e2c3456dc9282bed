// Crash reproducer (guarded): finalize-memref-to-llvm in MLIR 22.1.8 asserts
// on memref.load/store of i1; JitFunction now rejects it first.
#map = affine_map<(d0) -> (d0)>
func.func @main(%a: tensor<4xf32>) -> tensor<4xi1> {
  %e = tensor.empty() : tensor<4xi1>
  %z = arith.constant 0.0 : f32
  %r = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]} ins(%a : tensor<4xf32>) outs(%e : tensor<4xi1>) {
  ^bb0(%x: f32, %o: i1):
    %c = arith.cmpf ogt, %x, %z : f32
    linalg.yield %c : i1
  } -> tensor<4xi1>
  return %r : tensor<4xi1>
}
