// RUN: flex-opt %s -flex-widen-i1-memrefs -split-input-file -verify-diagnostics

// Ops on memrefs of i1 the pass does not know are errors naming the op, and
// nothing is rewritten.

func.func @vector_load(%m: memref<8xi1>, %i: index) -> vector<4xi1> {
  // expected-error@+1 {{'vector.load' op flex-widen-i1-memrefs: unsupported op on a memref of i1}}
  %v = vector.load %m[%i] : memref<8xi1>, vector<4xi1>
  return %v : vector<4xi1>
}

// -----

func.func @cast_to_other(%m: memref<8xi1>) -> i64 {
  // expected-error@+1 {{'builtin.unrealized_conversion_cast' op flex-widen-i1-memrefs: unsupported op on a memref of i1}}
  %p = builtin.unrealized_conversion_cast %m : memref<8xi1> to i64
  return %p : i64
}

// -----

// expected-error@+1 {{'memref.global' op flex-widen-i1-memrefs: cannot read the dense_resource initial value}}
memref.global "private" constant @elided : memref<4xi1> = dense_resource<__elided__>

// -----

func.func @two_errors(%m: memref<8xi1>, %i: index) {
  // expected-error@+1 {{'vector.load' op flex-widen-i1-memrefs: unsupported op}}
  %v = vector.load %m[%i] : memref<8xi1>, vector<4xi1>
  // expected-error@+1 {{'vector.store' op flex-widen-i1-memrefs: unsupported op}}
  vector.store %v, %m[%i] : memref<8xi1>, vector<4xi1>
  return
}
