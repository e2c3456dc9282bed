// RUN: flex-opt %s | flex-opt | FileCheck %s

// flex.check round trip (with and without details, escaped braces).

// CHECK-LABEL: func.func @checks
// CHECK-SAME: (%[[OK:.*]]: i1, %[[X:.*]]: i64)
// CHECK: flex.check %[[OK]], "index {0} is out of bounds for dimension {1} with size {2}" details(%[[X]], %[[X]], %[[X]])
// CHECK: flex.check %[[OK]], "literal {{[{][{]}}braces{{[}][}]}}"
func.func @checks(%ok: i1, %x: i64) {
  flex.check %ok, "index {0} is out of bounds for dimension {1} with size {2}" details(%x, %x, %x)
  flex.check %ok, "literal {{braces}}"
  return
}
