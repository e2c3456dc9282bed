// RUN: flex-opt %s -split-input-file -flex-lower-checks | FileCheck %s

// Status contract: message table on the module, a last memref<4xi64>
// argument on every function with a body, first failure stored.

// CHECK-LABEL: module attributes {flex.check_messages = ["index {0} is out of bounds for dimension {1} with size {2}", "mismatch"]}
// CHECK-LABEL: func.func @main
// CHECK-SAME: (%[[ARG:.*]]: memref<8xf32>, %[[I:.*]]: i64, %[[OK:.*]]: i1, %[[ST:.*]]: memref<4xi64>)
// CHECK: %[[TRUE:.*]] = arith.constant true
// CHECK: %[[BAD:.*]] = arith.xori %[[OK]], %[[TRUE]] : i1
// CHECK: scf.if %[[BAD]] {
// CHECK: %[[S0:.*]] = memref.load %[[ST]][%{{.*}}] : memref<4xi64>
// CHECK: %[[FREE:.*]] = arith.cmpi eq, %[[S0]], %[[Z:.*]] : i64
// CHECK: scf.if %[[FREE]] {
// CHECK-DAG: %[[C1:.*]] = arith.constant 1 : i64
// CHECK-DAG: %[[I0:.*]] = arith.constant 0 : index
// CHECK: memref.store %[[C1]], %[[ST]][%[[I0]]] : memref<4xi64>
// CHECK: %[[I1:.*]] = arith.constant 1 : index
// CHECK: memref.store %[[I]], %[[ST]][%[[I1]]] : memref<4xi64>
// CHECK: %[[I2:.*]] = arith.constant 2 : index
// CHECK: memref.store %{{.*}}, %[[ST]][%[[I2]]] : memref<4xi64>
// CHECK: %[[I3:.*]] = arith.constant 3 : index
// CHECK: memref.store %{{.*}}, %[[ST]][%[[I3]]] : memref<4xi64>
// The second message gets code 2 and zero details; the call passes status.
// CHECK: %[[C2:.*]] = arith.constant 2 : i64
// CHECK: memref.store %[[C2]], %[[ST]]
// CHECK: call @helper(%[[I]], %[[ST]]) : (i64, memref<4xi64>) -> ()
// CHECK-NOT: flex.check
// CHECK-LABEL: func.func private @helper
// CHECK-SAME: (%{{.*}}: i64, %[[HST:.*]]: memref<4xi64>)
// CHECK: memref.store %{{.*}}, %[[HST]]
// External declarations keep their signature.
// CHECK-LABEL: func.func private @external(i64)
module {
  func.func @main(%arg: memref<8xf32>, %i: i64, %ok: i1) {
    %c0 = arith.constant 0 : i64
    %c8 = arith.constant 8 : i64
    flex.check %ok, "index {0} is out of bounds for dimension {1} with size {2}" details(%i, %c0, %c8)
    scf.for %j = %c0 to %c8 step %c8 : i64 {
      flex.check %ok, "mismatch"
    }
    call @helper(%i) : (i64) -> ()
    call @external(%i) : (i64) -> ()
    return
  }
  func.func private @helper(%i: i64) {
    %c1 = arith.constant 1 : i64
    %ok = arith.cmpi slt, %i, %c1 : i64
    flex.check %ok, "index {0} is out of bounds for dimension {1} with size {2}" details(%i, %i, %c1)
    return
  }
  func.func private @external(i64)
}

// -----

// No check: nothing changes (no attribute, no status argument).
// CHECK-LABEL: module {
// CHECK-NOT: flex.check_messages
// CHECK-LABEL: func.func @no_checks
// CHECK-SAME: (%{{.*}}: memref<8xf32>) {
module {
  func.func @no_checks(%arg: memref<8xf32>) {
    return
  }
}

// -----

// A check inside an OpenMP-bound parallel loop stores through the
// function's status, captured by the loop body.
// CHECK-LABEL: func.func @parallel
// CHECK-SAME: %[[ST:[a-z0-9]+]]: memref<4xi64>)
// CHECK: scf.parallel
// CHECK: scf.if
// CHECK: memref.store %{{.*}}, %[[ST]]
module {
  func.func @parallel(%t: memref<16xi64>) {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c16 = arith.constant 16 : index
    %c16_i64 = arith.constant 16 : i64
    scf.parallel (%i) = (%c0) to (%c16) step (%c1) {
      %x = memref.load %t[%i] : memref<16xi64>
      %ok = arith.cmpi slt, %x, %c16_i64 : i64
      flex.check %ok, "index {0} is out of bounds for dimension {1} with size {2}" details(%x, %x, %c16_i64)
      scf.reduce
    }
    return
  }
}
