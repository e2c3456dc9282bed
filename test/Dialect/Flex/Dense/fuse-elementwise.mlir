// RUN: flex-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(flex-fuse-elementwise))' | FileCheck %s

// flex-fuse-elementwise: elementwise generics fuse into their consumers in
// the function body; contractions, broadcasts, shared producers and tile
// ops inside loops keep their own.

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>

// A chain (negate, then multiply by y, then add z) becomes one generic
// whose body keeps every op, in order.
// CHECK-LABEL: func.func @chain
// CHECK-SAME:    (%[[X:.*]]: tensor<8x16xf32>, %[[Y:.*]]: tensor<8x16xf32>, %[[Z:.*]]: tensor<8x16xf32>)
// CHECK:         %[[R:.*]] = linalg.generic
// CHECK-SAME:      ins(%[[X]], %[[Y]], %[[Z]] :
// CHECK:           arith.negf
// CHECK-NEXT:      arith.mulf
// CHECK-NEXT:      arith.addf
// CHECK-NOT:     linalg.generic
// CHECK:         return %[[R]]
func.func @chain(%x: tensor<8x16xf32>, %y: tensor<8x16xf32>, %z: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %e = tensor.empty() : tensor<8x16xf32>
  %n = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<8x16xf32>) outs(%e : tensor<8x16xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = arith.negf %a : f32
    linalg.yield %v : f32
  } -> tensor<8x16xf32>
  %m = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%n, %y : tensor<8x16xf32>, tensor<8x16xf32>) outs(%e : tensor<8x16xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %v = arith.mulf %a, %b : f32
    linalg.yield %v : f32
  } -> tensor<8x16xf32>
  %r = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%m, %z : tensor<8x16xf32>, tensor<8x16xf32>) outs(%e : tensor<8x16xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %v = arith.addf %a, %b : f32
    linalg.yield %v : f32
  } -> tensor<8x16xf32>
  return %r : tensor<8x16xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>

// A norm's squaring fuses into its one-input sum; the reciprocal of the
// row sum is read with a broadcast map and stays its own op.
// CHECK-LABEL: func.func @norm
// CHECK-SAME:    (%[[X:.*]]: tensor<8x16xf32>)
// CHECK:         %[[S:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]
// CHECK-SAME:      ins(%[[X]] : tensor<8x16xf32>)
// CHECK:           arith.mulf
// CHECK-NEXT:      arith.addf
// CHECK:         %[[I:.*]] = linalg.generic {{.*}}ins(%[[S]] : tensor<8xf32>)
// CHECK:           math.rsqrt
// CHECK:         linalg.generic {{.*}}ins(%[[X]], %[[I]] : tensor<8x16xf32>, tensor<8xf32>)
func.func @norm(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x16xf32>
  %er = tensor.empty() : tensor<8xf32>
  %sq = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<8x16xf32>) outs(%e : tensor<8x16xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = arith.mulf %a, %a : f32
    linalg.yield %v : f32
  } -> tensor<8x16xf32>
  %z = linalg.fill ins(%zero : f32) outs(%er : tensor<8xf32>) -> tensor<8xf32>
  %s = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%sq : tensor<8x16xf32>) outs(%z : tensor<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = arith.addf %a, %o : f32
    linalg.yield %v : f32
  } -> tensor<8xf32>
  %inv = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>],
                         iterator_types = ["parallel"]}
      ins(%s : tensor<8xf32>) outs(%er : tensor<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = math.rsqrt %a : f32
    linalg.yield %v : f32
  } -> tensor<8xf32>
  %r = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %inv : tensor<8x16xf32>, tensor<8xf32>) outs(%e : tensor<8x16xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %v = arith.mulf %a, %b : f32
    linalg.yield %v : f32
  } -> tensor<8x16xf32>
  return %r : tensor<8x16xf32>
}

// -----

#a = affine_map<(d0, d1, d2) -> (d0, d2)>
#b = affine_map<(d0, d1, d2) -> (d2, d1)>
#c = affine_map<(d0, d1, d2) -> (d0, d1)>
#id = affine_map<(d0, d1) -> (d0, d1)>

// A contraction keeps its operands (the BLAS takes it); a producer with two
// users is not fused into either.
// CHECK-LABEL: func.func @contraction_and_shared
// CHECK:         %[[N:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel"]
// CHECK:           arith.negf
// CHECK:         linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]
// CHECK-SAME:      ins(%[[N]], %{{.*}} :
// CHECK:         linalg.generic {{.*}}ins(%[[N]] : tensor<8x16xf32>)
// CHECK:           arith.addf
func.func @contraction_and_shared(%x: tensor<8x16xf32>, %w: tensor<16x8xf32>) -> (tensor<8x8xf32>, tensor<8x16xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x16xf32>
  %ec = tensor.empty() : tensor<8x8xf32>
  %n = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<8x16xf32>) outs(%e : tensor<8x16xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = arith.negf %a : f32
    linalg.yield %v : f32
  } -> tensor<8x16xf32>
  %z = linalg.fill ins(%zero : f32) outs(%ec : tensor<8x8xf32>) -> tensor<8x8xf32>
  %mm = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%n, %w : tensor<8x16xf32>, tensor<16x8xf32>) outs(%z : tensor<8x8xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %m = arith.mulf %p, %q : f32
    %s = arith.addf %m, %o : f32
    linalg.yield %s : f32
  } -> tensor<8x8xf32>
  %d = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%n, %n : tensor<8x16xf32>, tensor<8x16xf32>) outs(%e : tensor<8x16xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %v = arith.addf %a, %b : f32
    linalg.yield %v : f32
  } -> tensor<8x16xf32>
  return %mm, %d : tensor<8x8xf32>, tensor<8x16xf32>
}

// -----

#id = affine_map<(d0) -> (d0)>

// Tile ops inside a loop (flex-to-flash's) are left as they are.
// CHECK-LABEL: func.func @in_loop
// CHECK:         scf.for
// CHECK:           linalg.generic
// CHECK:             arith.negf
// CHECK:           linalg.generic
// CHECK:             arith.mulf
func.func @in_loop(%x: tensor<16xf32>, %n: index) -> tensor<16xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %e = tensor.empty() : tensor<16xf32>
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %x) -> (tensor<16xf32>) {
    %g = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
        ins(%acc : tensor<16xf32>) outs(%e : tensor<16xf32>) {
    ^bb0(%a: f32, %o: f32):
      %v = arith.negf %a : f32
      linalg.yield %v : f32
    } -> tensor<16xf32>
    %h = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
        ins(%g : tensor<16xf32>) outs(%e : tensor<16xf32>) {
    ^bb0(%a: f32, %o: f32):
      %v = arith.mulf %a, %a : f32
      linalg.yield %v : f32
    } -> tensor<16xf32>
    scf.yield %h : tensor<16xf32>
  }
  return %r : tensor<16xf32>
}
