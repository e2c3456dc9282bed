// RUN: flex-opt %s -flex-expand-math -split-input-file -verify-diagnostics

// Types with neither an approximation nor a C library function are errors.

func.func @erf_f80(%x: f80) -> f80 {
  // expected-error@+1 {{'math.erf' op on 'f80' has no lowering to LLVM in flex-expand-math}}
  %r = math.erf %x : f80
  return %r : f80
}

// -----

func.func @cbrt_f128(%x: f128) -> f128 {
  // expected-error@+1 {{'math.cbrt' op on 'f128' has no lowering to LLVM in flex-expand-math}}
  %r = math.cbrt %x : f128
  return %r : f128
}
