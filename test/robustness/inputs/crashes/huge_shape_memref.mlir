// Crash reproducer (guarded): a memref type whose size overflows int64;
// computing its strides asserts ("integer overflow in size computation") in
// the lowering pipelines. Single-token fuzz mutant of
// test/Dialect/Flex/widen-i1-memrefs.mlir.
func.func @alloc_views(%n: index) -> index {
  %a = memref.alloc(%n) : memref<?x8xi1>
  %s = memref.alloca() : memref<2x8xi1>
  %c0 = arith.constant 0 : index
  %sv = memref.subview %a[0, 2] [2, 4] [1, 1] : memref<?x8xi1> to memref<2x4xi1, strided<[8, 1], offset: 2>>
  %c = memref.cast %a : memref<?x8xi1> to memref<?x?xi1>
  %rc = memref.reinterpret_cast %s to offset: [0], sizes: [16], strides: [1] : memref<2x8xi1> to memref<16xi1>
  %col = memref.collapse_shape %s [[0, 1]] : memref<2x8xi1> into memref<16xi1>
  %ex = memref.expand_shape %col [[0, 1]] output_shape [4, 4] : memref<16xi1> into memref<4x9223372036854775807xi1>
  %d = memref.dim %c, %c0 : memref<?x?xi1>
  memref.copy %rc, %col : memref<16xi1> to memref<16xi1>
  memref.dealloc %a : memref<?x8xi1>
  return %d : index
}
