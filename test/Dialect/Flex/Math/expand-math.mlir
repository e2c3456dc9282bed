// RUN: flex-opt %s -flex-expand-math -split-input-file | FileCheck %s
// RUN: flex-opt %s -flex-expand-math="approximate-exp=1" -split-input-file | FileCheck %s --check-prefix=EXP

// flex-expand-math removes the math ops that convert-math-to-llvm cannot
// lower. Numerics: test/python/backend/test_math_ops.py.

// f32 erf: upstream's polynomial approximation (fma chains, no math.erf).
// CHECK-LABEL: func.func @erf_f32
// CHECK-NOT: math.erf
// CHECK: math.fma
// CHECK-NOT: math.erf
// CHECK: return
func.func @erf_f32(%x: f32) -> f32 {
  %r = math.erf %x : f32
  return %r : f32
}

// -----

// Vectors too (modifiers vectorized by flex-to-flash).
// CHECK-LABEL: func.func @erf_vector
// CHECK-NOT: math.erf
// CHECK: math.fma {{.*}} : vector<8xf32>
// CHECK-NOT: math.erf
// CHECK: return {{.*}} : vector<8xf32>
func.func @erf_vector(%x: vector<8xf32>) -> vector<8xf32> {
  %r = math.erf %x : vector<8xf32>
  return %r : vector<8xf32>
}

// -----

// bf16 / f16 are computed in f32 and truncated.
// CHECK-LABEL: func.func @erf_bf16
// CHECK-SAME: (%[[X:.+]]: bf16)
// CHECK: %[[W:.+]] = arith.extf %[[X]] : bf16 to f32
// CHECK-NOT: math.erf
// CHECK: %[[R:.+]] = arith.truncf %{{.+}} : f32 to bf16
// CHECK: return %[[R]] : bf16
func.func @erf_bf16(%x: bf16) -> bf16 {
  %r = math.erf %x : bf16
  return %r : bf16
}

// -----

// f64 erf/erfc/cbrt: C library calls (no f64 approximation upstream),
// declared in the module.
// CHECK-LABEL: func.func private @cbrt(f64) -> f64
// CHECK: func.func private @erfc(f64) -> f64
// CHECK: func.func private @erf(f64) -> f64
// CHECK-LABEL: func.func @libm_f64
// CHECK-SAME: (%[[X:.+]]: f64)
// CHECK-DAG: %[[A:.+]] = call @erf(%[[X]]) : (f64) -> f64
// CHECK-DAG: %[[B:.+]] = call @erfc(%[[X]]) : (f64) -> f64
// CHECK-DAG: call @cbrt(%[[X]]) : (f64) -> f64
// CHECK-NOT: math.erf
func.func @libm_f64(%x: f64) -> (f64, f64, f64) {
  %a = math.erf %x : f64
  %b = math.erfc %x : f64
  %c = math.cbrt %x : f64
  return %a, %b, %c : f64, f64, f64
}

// -----

// Other math ops are left to convert-math-to-llvm (no libm call for tan).
// With approximate-exp, f32 exp becomes MLIR's polynomial (range reduction
// by ln 2, a polynomial, the exponent put back with an integer shift), a bf16
// one the same in f32; f64 exp stays.
// CHECK-LABEL: func.func @untouched
// CHECK: math.tan %{{.+}} : f64
// CHECK: math.exp %{{.+}} : f32
// CHECK: math.exp %{{.+}} : bf16
// CHECK-NOT: call
// Around each: +inf above ln(FLT_MAX), 0 below ln(smallest denormal)
// (the approximation clamps its argument), compared in f32.
// EXP-LABEL: func.func @untouched
// EXP-DAG:   %[[HI:.*]] = arith.constant 88.7228394 : f32
// EXP-DAG:   %[[LO:.*]] = arith.constant -103.972084 : f32
// EXP-DAG:   %[[INF:.*]] = arith.constant 0x7F800000 : f32
// EXP-DAG:   %[[INF16:.*]] = arith.constant 0x7F80 : bf16
// EXP:       math.tan %{{.+}} : f64
// EXP-NOT:   math.exp %{{.+}} : f32
// EXP:       math.fma
// EXP:       arith.shli
// EXP:       %[[P:.*]] = arith.mulf {{.*}} : f32
// EXP:       %[[BIG:.*]] = arith.cmpf ogt, %arg1, %[[HI]] : f32
// EXP:       %[[TINY:.*]] = arith.cmpf olt, %arg1, %[[LO]] : f32
// EXP:       %[[Z:.*]] = arith.select %[[TINY]], %{{.*}}, %[[P]] : f32
// EXP:       %[[R:.*]] = arith.select %[[BIG]], %[[INF]], %[[Z]] : f32
// EXP-NOT:   math.exp %{{.+}} : f32
// EXP:       arith.extf %arg2 : bf16 to f32
// EXP:       math.fma
// EXP:       arith.truncf %{{.+}} : f32 to bf16
// EXP:       arith.select %{{.*}}, %[[INF16]], %{{.*}} : bf16
// EXP-NOT:   math.exp %{{.+}} : {{f32|bf16}}
// EXP:       math.exp %{{.+}} : f64
// EXP:       return %{{.*}}, %[[R]]
func.func @untouched(%x: f64, %y: f32, %z: bf16) -> (f64, f32, bf16, f64) {
  %a = math.tan %x : f64
  %b = math.exp %y : f32
  %c = math.exp %z : bf16
  %d = math.exp %x : f64
  return %a, %b, %c, %d : f64, f32, bf16, f64
}

// -----

// asinh(x) = sign(x) * log1p(a + a^2 / (1 + sqrt(1 + a^2))), a = |x|,
// log(2a) beyond 2^28; log1p(u) as log(1 + u) * u / ((1 + u) - 1).
// CHECK-LABEL: func.func @asinh
// CHECK-SAME: (%[[X:.+]]: f32)
// CHECK-DAG: %[[ONE:.+]] = arith.constant 1.000000e+00 : f32
// CHECK-DAG: %[[BIG:.+]] = arith.constant 0x4D800000 : f32
// CHECK: %[[A:.+]] = math.absf %[[X]] : f32
// CHECK: %[[A2:.+]] = arith.mulf %[[A]], %[[A]] : f32
// CHECK: %[[S:.+]] = arith.addf %[[A2]], %[[ONE]] : f32
// CHECK: math.sqrt %[[S]] : f32
// CHECK: math.log
// CHECK: %[[GT:.+]] = arith.cmpf ogt, %[[A]], %[[BIG]] : f32
// CHECK: %[[SEL:.+]] = arith.select %[[GT]]
// CHECK: %[[R:.+]] = math.copysign %[[SEL]], %[[X]] : f32
// CHECK: return %[[R]] : f32
func.func @asinh(%x: f32) -> f32 {
  %r = math.asinh %x : f32
  return %r : f32
}

// -----

// acosh(x) = log1p(t + sqrt(2t + t^2)), t = x - 1; atanh via log1p.
// CHECK-LABEL: func.func @acosh_atanh
// CHECK-NOT: math.acosh
// CHECK-NOT: math.atanh
// CHECK: math.sqrt
// CHECK: math.log
// CHECK: math.copysign
// CHECK: return
func.func @acosh_atanh(%x: f64) -> (f64, f64) {
  %a = math.acosh %x : f64
  %b = math.atanh %x : f64
  return %a, %b : f64, f64
}

// -----

// cbrt(+-inf) = +-inf is selected around the approximation (which gives NaN).
// CHECK-LABEL: func.func @cbrt_f32
// CHECK-SAME: (%[[X:.+]]: f32)
// CHECK-DAG: %[[INF:.+]] = arith.constant 0x7F800000 : f32
// CHECK-NOT: math.cbrt
// CHECK: %[[IS:.+]] = arith.cmpf oeq, %{{.+}}, %[[INF]] : f32
// CHECK: %[[R:.+]] = arith.select %[[IS]], %[[X]], %{{.+}} : f32
// CHECK: return %[[R]] : f32
func.func @cbrt_f32(%x: f32) -> f32 {
  %r = math.cbrt %x : f32
  return %r : f32
}
