// Crash reproducer (guarded): a dense constant of a type with more than
// 2^63 elements; the parser asserts ("integer overflow in element count
// computation"). Single-token fuzz mutant of test/Dialect/Flex/widen-i1-memrefs.mlir.
memref.global "private" constant @g : memref<4xi1> = dense<[true, false, true, true]>
memref.global "private" constant @splat : memref<9223372036854775807x2xi1> = dense<true>
memref.global "private" @uninit : memref<3xi1> = uninitialized
func.func @globals() -> (memref<4xi1>, memref<2x2xi1>, memref<3xi1>) {
  %0 = memref.get_global @g : memref<4xi1>
  %1 = memref.get_global @splat : memref<2x2xi1>
  %2 = memref.get_global @uninit : memref<3xi1>
  return %0, %1, %2 : memref<4xi1>, memref<2x2xi1>, memref<3xi1>
}
