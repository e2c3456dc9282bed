// RUN: flex-opt %s -split-input-file -flex-int-matmul-to-calls -cse --mlir-print-local-scope | FileCheck %s
// RUN: flex-opt %s -split-input-file -flex-fold-int-matmul-operands --mlir-print-local-scope | FileCheck %s --check-prefix=FOLD

// flex-int-matmul-to-calls: bufferized i8 x i8 -> i32 products ->
//   call @flex_gemm_u8s8(M, N, K, ptrA, offA, A(m), A(k), ptrB, offB, B(k),
//                        B(n), ptrC, offC, C(m), C(n), flags)
// flags bit 0 = accumulate into C, bit 1 = A signed (extsi). A zero fill of
// C right before the product is folded into the call.
// flex-fold-int-matmul-operands (FOLD): the transpose of the weight feeding
// such a product (on tensors) is read through the maps of its readers.

// torchao's _int_mm after the fold: extui(A) [M,K] x extsi(w) read as
// (n, k), a zero fill: the fill erased, flags 0, B's k stride is w's
// column stride, its n stride w's row stride.

// CHECK-LABEL: func.func @int_mm_weight_nk
// CHECK-SAME: (%[[A:[a-z0-9_]+]]: memref<?x64xi8>, %[[W:[a-z0-9_]+]]: memref<128x64xi8>, %[[C:[a-z0-9_]+]]: memref<?x128xi32>)
// CHECK-NOT: linalg.
// CHECK-DAG: %[[C0:[a-z0-9_]+]] = arith.constant 0 : index
// CHECK-DAG: %[[C1:[a-z0-9_]+]] = arith.constant 1 : index
// CHECK-DAG: %[[M:[a-z0-9_]+]] = memref.dim %[[A]], %[[C0]] :
// CHECK-DAG: %[[N:[a-z0-9_]+]] = memref.dim %[[W]], %[[C0]] :
// CHECK-DAG: %[[K:[a-z0-9_]+]] = memref.dim %[[A]], %[[C1]] :
// CHECK-DAG: %{{[a-z0-9_]+}}, %[[OA:[a-z0-9_]+]], %{{[a-z0-9_]+}}:2, %[[SA:[a-z0-9_]+]]:2 = memref.extract_strided_metadata %[[A]] :
// CHECK-DAG: %[[PA:[a-z0-9_]+]] = memref.extract_aligned_pointer_as_index %[[A]] :
// CHECK-DAG: %{{[a-z0-9_]+}}, %[[OW:[a-z0-9_]+]], %{{[a-z0-9_]+}}:2, %[[SW:[a-z0-9_]+]]:2 = memref.extract_strided_metadata %[[W]] :
// CHECK-DAG: %[[PW:[a-z0-9_]+]] = memref.extract_aligned_pointer_as_index %[[W]] :
// CHECK-DAG: %{{[a-z0-9_]+}}, %[[OC:[a-z0-9_]+]], %{{[a-z0-9_]+}}:2, %[[SC:[a-z0-9_]+]]:2 = memref.extract_strided_metadata %[[C]] :
// CHECK-DAG: %[[PC:[a-z0-9_]+]] = memref.extract_aligned_pointer_as_index %[[C]] :
// CHECK: call @flex_gemm_u8s8(%[[M]], %[[N]], %[[K]],
// CHECK-SAME: %[[PA]], %[[OA]], %[[SA]]#0, %[[SA]]#1,
// CHECK-SAME: %[[PW]], %[[OW]], %[[SW]]#1, %[[SW]]#0,
// CHECK-SAME: %[[PC]], %[[OC]], %[[SC]]#0, %[[SC]]#1, %[[C0]])
// CHECK-SAME: : (index, index, index, index, index, index, index, index, index, index, index, index, index, index, index, index) -> ()
// CHECK-NOT: linalg.
// CHECK: return
// CHECK: func.func private @flex_gemm_u8s8(index, index, index, index, index, index, index, index, index, index, index, index, index, index, index, index)
func.func @int_mm_weight_nk(%a: memref<?x64xi8>, %w: memref<128x64xi8>, %c: memref<?x128xi32>) {
  %z = arith.constant 0 : i32
  linalg.fill ins(%z : i32) outs(%c : memref<?x128xi32>)
  linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>,
                                   affine_map<(m, n, k) -> (m, n)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %w : memref<?x64xi8>, memref<128x64xi8>) outs(%c : memref<?x128xi32>) {
  ^bb0(%x: i8, %y: i8, %o: i32):
    %0 = arith.extui %x : i8 to i32
    %1 = arith.extsi %y : i8 to i32
    %2 = arith.muli %0, %1 : i32
    %3 = arith.addi %o, %2 : i32
    linalg.yield %3 : i32
  }
  return
}

// -----

// Signed A (extsi), the products' operands swapped in the body, no fill,
// strided views: flags 3 (accumulate, A signed); B read as (k, n).

// CHECK-LABEL: func.func @signed_accumulate_strided
// CHECK-SAME: (%[[A:[a-z0-9_]+]]: memref<4x16xi8, strided<[32, 2], offset: 3>>, %[[B:[a-z0-9_]+]]: memref<16x8xi8>, %[[C:[a-z0-9_]+]]: memref<4x8xi32, strided<[1, 4]>>)
// CHECK-DAG: %[[C3:[a-z0-9_]+]] = arith.constant 3 : index
// CHECK-DAG: %{{[a-z0-9_]+}}, %[[OA:[a-z0-9_]+]], %{{[a-z0-9_]+}}:2, %[[SA:[a-z0-9_]+]]:2 = memref.extract_strided_metadata %[[A]] :
// CHECK-DAG: %{{[a-z0-9_]+}}, %[[OB:[a-z0-9_]+]], %{{[a-z0-9_]+}}:2, %[[SB:[a-z0-9_]+]]:2 = memref.extract_strided_metadata %[[B]] :
// CHECK-DAG: %{{[a-z0-9_]+}}, %[[OC:[a-z0-9_]+]], %{{[a-z0-9_]+}}:2, %[[SC:[a-z0-9_]+]]:2 = memref.extract_strided_metadata %[[C]] :
// CHECK: call @flex_gemm_u8s8(
// CHECK-SAME: %[[OA]], %[[SA]]#0, %[[SA]]#1,
// CHECK-SAME: %[[OB]], %[[SB]]#0, %[[SB]]#1,
// CHECK-SAME: %[[OC]], %[[SC]]#0, %[[SC]]#1, %[[C3]])
func.func @signed_accumulate_strided(%a: memref<4x16xi8, strided<[32, 2], offset: 3>>, %b: memref<16x8xi8>,
                                     %c: memref<4x8xi32, strided<[1, 4]>>) {
  linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (k, n)>,
                                   affine_map<(m, n, k) -> (m, n)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<4x16xi8, strided<[32, 2], offset: 3>>, memref<16x8xi8>)
      outs(%c : memref<4x8xi32, strided<[1, 4]>>) {
  ^bb0(%x: i8, %y: i8, %o: i32):
    %0 = arith.extsi %x : i8 to i32
    %1 = arith.extsi %y : i8 to i32
    %2 = arith.muli %1, %0 : i32
    %3 = arith.addi %2, %o : i32
    linalg.yield %3 : i32
  }
  return
}

// -----

// A signed named linalg.matmul on i8 -> i32: flags 3.

// CHECK-LABEL: func.func @named_matmul
// CHECK-DAG: %[[C3:[a-z0-9_]+]] = arith.constant 3 : index
// CHECK: call @flex_gemm_u8s8({{.*}}, %[[C3]])
// CHECK-NOT: linalg.matmul
func.func @named_matmul(%a: memref<4x16xi8>, %b: memref<16x8xi8>, %c: memref<4x8xi32>) {
  linalg.matmul ins(%a, %b : memref<4x16xi8>, memref<16x8xi8>) outs(%c : memref<4x8xi32>)
  return
}

// -----

// Left alone: an unsigned B (extui), an unsigned named matmul, a body with
// another op, f32, a broadcast operand (no k in A's map), and tensors.

// CHECK-LABEL: func.func @not_matched
// CHECK-NOT: call
// CHECK-COUNT-4: linalg.generic
// CHECK: linalg.matmul
// CHECK-NOT: call
// CHECK: return
func.func @not_matched(%a: memref<4x16xi8>, %b: memref<16x8xi8>, %c: memref<4x8xi32>,
                       %f: memref<4x16xf32>, %g: memref<16x8xf32>, %h: memref<4x8xf32>, %v: memref<4xi8>,
                       %ta: tensor<4x16xi8>, %tb: tensor<16x8xi8>, %tc: tensor<4x8xi32>) -> tensor<4x8xi32> {
  %c1 = arith.constant 1 : i32
  linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (k, n)>,
                                   affine_map<(m, n, k) -> (m, n)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<4x16xi8>, memref<16x8xi8>) outs(%c : memref<4x8xi32>) {
  ^bb0(%x: i8, %y: i8, %o: i32):
    %0 = arith.extui %x : i8 to i32
    %1 = arith.extui %y : i8 to i32
    %2 = arith.muli %0, %1 : i32
    %3 = arith.addi %o, %2 : i32
    linalg.yield %3 : i32
  }
  linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (k, n)>,
                                   affine_map<(m, n, k) -> (m, n)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<4x16xi8>, memref<16x8xi8>) outs(%c : memref<4x8xi32>) {
  ^bb0(%x: i8, %y: i8, %o: i32):
    %0 = arith.extui %x : i8 to i32
    %1 = arith.extsi %y : i8 to i32
    %2 = arith.muli %0, %1 : i32
    %4 = arith.addi %2, %c1 : i32
    %3 = arith.addi %o, %4 : i32
    linalg.yield %3 : i32
  }
  linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (k, n)>,
                                   affine_map<(m, n, k) -> (m, n)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%f, %g : memref<4x16xf32>, memref<16x8xf32>) outs(%h : memref<4x8xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %2 = arith.mulf %x, %y : f32
    %3 = arith.addf %o, %2 : f32
    linalg.yield %3 : f32
  }
  linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m)>, affine_map<(m, n, k) -> (k, n)>,
                                   affine_map<(m, n, k) -> (m, n)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%v, %b : memref<4xi8>, memref<16x8xi8>) outs(%c : memref<4x8xi32>) {
  ^bb0(%x: i8, %y: i8, %o: i32):
    %0 = arith.extui %x : i8 to i32
    %1 = arith.extsi %y : i8 to i32
    %2 = arith.muli %0, %1 : i32
    %3 = arith.addi %o, %2 : i32
    linalg.yield %3 : i32
  }
  linalg.matmul {cast = #linalg.type_fn<cast_unsigned>} ins(%a, %b : memref<4x16xi8>, memref<16x8xi8>) outs(%c : memref<4x8xi32>)
  %r = linalg.matmul ins(%ta, %tb : tensor<4x16xi8>, tensor<16x8xi8>) outs(%tc : tensor<4x8xi32>) -> tensor<4x8xi32>
  return %r : tensor<4x8xi32>
}

// -----

// The fold (FOLD prefix): the weight's transpose feeds the product and its column sum (as
// torch-mlir lowers torchao's _int_mm + sum(t(w), 0)): both read w through
// swapped maps, the transpose is gone; the sum's loops renamed so that it
// reads w in its own order (a row sum, k innermost). A transpose read by something else
// (the return) stays for it.

// FOLD-LABEL: func.func @fold
// FOLD-SAME: (%[[A:[a-z0-9_]+]]: tensor<5x64xi8>, %[[W:[a-z0-9_]+]]: tensor<128x64xi8>
// FOLD-NOT: linalg.transpose
// FOLD: linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>]
// FOLD-SAME: ins(%[[A]], %[[W]] : tensor<5x64xi8>, tensor<128x64xi8>)
// FOLD: linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (0, d0)>], iterator_types = ["parallel", "reduction"]}
// FOLD-SAME: ins(%[[W]] : tensor<128x64xi8>)
// FOLD-LABEL: func.func @fold_kept
// FOLD: %[[T:[a-z0-9_]+]] = linalg.transpose
// FOLD: linalg.generic
// FOLD-SAME: ins(%{{[a-z0-9_]+}}, %{{[a-z0-9_]+}} : tensor<5x64xi8>, tensor<128x64xi8>)
// FOLD: return %{{[a-z0-9_]+}}, %[[T]]
func.func @fold(%a: tensor<5x64xi8>, %w: tensor<128x64xi8>) -> (tensor<5x128xi32>, tensor<1x128xi32>) {
  %c0 = arith.constant 0 : i32
  %e = tensor.empty() : tensor<64x128xi8>
  %t = linalg.transpose ins(%w : tensor<128x64xi8>) outs(%e : tensor<64x128xi8>) permutation = [1, 0]
  %i = tensor.empty() : tensor<5x128xi32>
  %z = linalg.fill ins(%c0 : i32) outs(%i : tensor<5x128xi32>) -> tensor<5x128xi32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d2, d1)>,
                                        affine_map<(d0, d1, d2) -> (d0, d1)>],
                       iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %t : tensor<5x64xi8>, tensor<64x128xi8>) outs(%z : tensor<5x128xi32>) {
  ^bb0(%x: i8, %y: i8, %o: i32):
    %0 = arith.extui %x : i8 to i32
    %1 = arith.extsi %y : i8 to i32
    %2 = arith.muli %0, %1 : i32
    %3 = arith.addi %o, %2 : i32
    linalg.yield %3 : i32
  } -> tensor<5x128xi32>
  %si = tensor.empty() : tensor<1x128xi32>
  %sz = linalg.fill ins(%c0 : i32) outs(%si : tensor<1x128xi32>) -> tensor<1x128xi32>
  %s = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (0, d1)>],
                       iterator_types = ["reduction", "parallel"]}
      ins(%t : tensor<64x128xi8>) outs(%sz : tensor<1x128xi32>) {
  ^bb0(%x: i8, %o: i32):
    %0 = arith.extsi %x : i8 to i32
    %1 = arith.addi %0, %o : i32
    linalg.yield %1 : i32
  } -> tensor<1x128xi32>
  return %r, %s : tensor<5x128xi32>, tensor<1x128xi32>
}

func.func @fold_kept(%a: tensor<5x64xi8>, %w: tensor<128x64xi8>) -> (tensor<5x128xi32>, tensor<64x128xi8>) {
  %c0 = arith.constant 0 : i32
  %e = tensor.empty() : tensor<64x128xi8>
  %t = linalg.transpose ins(%w : tensor<128x64xi8>) outs(%e : tensor<64x128xi8>) permutation = [1, 0]
  %i = tensor.empty() : tensor<5x128xi32>
  %z = linalg.fill ins(%c0 : i32) outs(%i : tensor<5x128xi32>) -> tensor<5x128xi32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d2, d1)>,
                                        affine_map<(d0, d1, d2) -> (d0, d1)>],
                       iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %t : tensor<5x64xi8>, tensor<64x128xi8>) outs(%z : tensor<5x128xi32>) {
  ^bb0(%x: i8, %y: i8, %o: i32):
    %0 = arith.extui %x : i8 to i32
    %1 = arith.extsi %y : i8 to i32
    %2 = arith.muli %0, %1 : i32
    %3 = arith.addi %o, %2 : i32
    linalg.yield %3 : i32
  } -> tensor<5x128xi32>
  return %r, %t : tensor<5x128xi32>, tensor<64x128xi8>
}
