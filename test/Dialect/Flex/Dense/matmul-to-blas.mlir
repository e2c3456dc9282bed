// RUN: flex-opt %s -split-input-file -flex-matmul-to-blas -cse --mlir-print-local-scope | FileCheck %s
// RUN: flex-opt %s -split-input-file -flex-matmul-to-blas -canonicalize --mlir-print-local-scope | FileCheck %s --check-prefix=CANON

// flex-matmul-to-blas: bufferized linalg.matmul / batch_matmul ->
//   call @flex_gemm_{f32,bf16}(batch, M, N, K,
//                              ptrA, offA, A(b), A(m), A(k),
//                              ptrB, offB, B(b), B(k), B(n),
//                              ptrC, offC, C(b), C(m), C(n), flags)
// with flags bit 0 = accumulate into C, bit 1 = C is bf16. A zero fill of C
// right before the product is folded into the call (accumulate 0).
// The CHECK lines follow each stride to the memref dim it is read from (the
// first RUN); the CANON lines show the values for static layouts.

// f32 with a zero fill of C: the fill is erased, flags = 0, no batch (1,
// batch strides 0).

// CHECK-LABEL: func.func @f32_zero_fill
// CHECK-SAME: (%[[A:[a-z0-9_]+]]: memref<8x16xf32>, %[[B:[a-z0-9_]+]]: memref<16x32xf32>, %[[C:[a-z0-9_]+]]: memref<8x32xf32>)
// CHECK-NOT: linalg.fill
// CHECK-DAG: %[[C0:[a-z0-9_]+]] = arith.constant 0 : index
// CHECK-DAG: %[[C1:[a-z0-9_]+]] = arith.constant 1 : index
// CHECK-DAG: %[[M:[a-z0-9_]+]] = memref.dim %[[A]], %[[C0]] :
// CHECK-DAG: %[[N:[a-z0-9_]+]] = memref.dim %[[B]], %[[C1]] :
// CHECK-DAG: %[[K:[a-z0-9_]+]] = memref.dim %[[A]], %[[C1]] :
// CHECK-DAG: %{{[a-z0-9_]+}}, %[[OA:[a-z0-9_]+]], %{{[a-z0-9_]+}}:2, %[[SA:[a-z0-9_]+]]:2 = memref.extract_strided_metadata %[[A]] :
// CHECK-DAG: %[[PA:[a-z0-9_]+]] = memref.extract_aligned_pointer_as_index %[[A]] :
// CHECK-DAG: %{{[a-z0-9_]+}}, %[[OB:[a-z0-9_]+]], %{{[a-z0-9_]+}}:2, %[[SB:[a-z0-9_]+]]:2 = memref.extract_strided_metadata %[[B]] :
// CHECK-DAG: %[[PB:[a-z0-9_]+]] = memref.extract_aligned_pointer_as_index %[[B]] :
// CHECK-DAG: %{{[a-z0-9_]+}}, %[[OC:[a-z0-9_]+]], %{{[a-z0-9_]+}}:2, %[[SC:[a-z0-9_]+]]:2 = memref.extract_strided_metadata %[[C]] :
// CHECK-DAG: %[[PC:[a-z0-9_]+]] = memref.extract_aligned_pointer_as_index %[[C]] :
// CHECK: call @flex_gemm_f32(%[[C1]], %[[M]], %[[N]], %[[K]],
// CHECK-SAME: %[[PA]], %[[OA]], %[[C0]], %[[SA]]#0, %[[SA]]#1,
// CHECK-SAME: %[[PB]], %[[OB]], %[[C0]], %[[SB]]#0, %[[SB]]#1,
// CHECK-SAME: %[[PC]], %[[OC]], %[[C0]], %[[SC]]#0, %[[SC]]#1, %[[C0]])
// CHECK-SAME: : (index, index, index, index, index, index, index, index, index, index, index, index, index, index, index, index, index, index, index, index) -> ()
// CHECK-NOT: linalg.
// CHECK: return
// CHECK: func.func private @flex_gemm_f32(index, index, index, index, index, index, index, index, index, index, index, index, index, index, index, index, index, index, index, index)
// CHECK-NOT: @flex_gemm_bf16

// CANON-LABEL: func.func @f32_zero_fill
// CANON-DAG: %[[C0:.+]] = arith.constant 0 : index
// CANON-DAG: %[[C1:.+]] = arith.constant 1 : index
// CANON-DAG: %[[C8:.+]] = arith.constant 8 : index
// CANON-DAG: %[[C16:.+]] = arith.constant 16 : index
// CANON-DAG: %[[C32:.+]] = arith.constant 32 : index
// CANON-DAG: %[[PA:.+]] = memref.extract_aligned_pointer_as_index %arg0
// CANON-DAG: %[[PB:.+]] = memref.extract_aligned_pointer_as_index %arg1
// CANON-DAG: %[[PC:.+]] = memref.extract_aligned_pointer_as_index %arg2
// CANON: call @flex_gemm_f32(%[[C1]], %[[C8]], %[[C32]], %[[C16]], %[[PA]], %[[C0]], %[[C0]], %[[C16]], %[[C1]], %[[PB]], %[[C0]], %[[C0]], %[[C32]], %[[C1]], %[[PC]], %[[C0]], %[[C0]], %[[C32]], %[[C1]], %[[C0]])
func.func @f32_zero_fill(%a: memref<8x16xf32>, %b: memref<16x32xf32>, %c: memref<8x32xf32>) {
  %cst = arith.constant 0.0 : f32
  linalg.fill ins(%cst : f32) outs(%c : memref<8x32xf32>)
  linalg.matmul ins(%a, %b : memref<8x16xf32>, memref<16x32xf32>) outs(%c : memref<8x32xf32>)
  return
}

// -----

// No fill: C accumulates, flags = 1.

// CHECK-LABEL: func.func @f32_accumulate
// CHECK-SAME: (%[[A:[a-z0-9_]+]]: memref<8x16xf32>, %[[B:[a-z0-9_]+]]: memref<16x32xf32>, %[[C:[a-z0-9_]+]]: memref<8x32xf32>)
// CHECK-DAG: %[[C0:[a-z0-9_]+]] = arith.constant 0 : index
// CHECK-DAG: %[[C1:[a-z0-9_]+]] = arith.constant 1 : index
// CHECK-DAG: %{{[a-z0-9_]+}}, %[[OC:[a-z0-9_]+]], %{{[a-z0-9_]+}}:2, %[[SC:[a-z0-9_]+]]:2 = memref.extract_strided_metadata %[[C]] :
// CHECK-DAG: %[[PC:[a-z0-9_]+]] = memref.extract_aligned_pointer_as_index %[[C]] :
// CHECK: call @flex_gemm_f32(%[[C1]], %{{.+}}, %[[PC]], %[[OC]], %[[C0]], %[[SC]]#0, %[[SC]]#1, %[[C1]])
// CHECK-NOT: linalg.matmul
// CHECK: return
func.func @f32_accumulate(%a: memref<8x16xf32>, %b: memref<16x32xf32>, %c: memref<8x32xf32>) {
  linalg.matmul ins(%a, %b : memref<8x16xf32>, memref<16x32xf32>) outs(%c : memref<8x32xf32>)
  return
}

// -----

// A fill with a non-zero value stays: the call accumulates onto it. A zero
// fill of another buffer is not folded either.

// CHECK-LABEL: func.func @nonzero_fill
// CHECK-SAME: (%[[A:[a-z0-9_]+]]: memref<8x16xf32>, %[[B:[a-z0-9_]+]]: memref<16x32xf32>, %[[C:[a-z0-9_]+]]: memref<8x32xf32>, %[[D:[a-z0-9_]+]]: memref<8x32xf32>)
// CHECK: %[[ONE:[a-z0-9_]+]] = arith.constant 1.000000e+00 : f32
// CHECK: linalg.fill ins(%[[ONE]] : f32) outs(%[[C]] : memref<8x32xf32>)
// CHECK: %[[C1:[a-z0-9_]+]] = arith.constant 1 : index
// CHECK: call @flex_gemm_f32({{.+}}, %[[C1]]) :
// CHECK: %[[ZF:[a-z0-9_]+]] = arith.constant 0.000000e+00 : f32
// CHECK: linalg.fill ins(%[[ZF]] : f32) outs(%[[D]] : memref<8x32xf32>)
// CHECK: call @flex_gemm_f32({{.+}}, %[[C1]]) :
// CHECK-NOT: linalg.matmul
// CHECK: return
func.func @nonzero_fill(%a: memref<8x16xf32>, %b: memref<16x32xf32>, %c: memref<8x32xf32>, %d: memref<8x32xf32>) {
  %one = arith.constant 1.0 : f32
  linalg.fill ins(%one : f32) outs(%c : memref<8x32xf32>)
  linalg.matmul ins(%a, %b : memref<8x16xf32>, memref<16x32xf32>) outs(%c : memref<8x32xf32>)
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%d : memref<8x32xf32>)
  linalg.matmul ins(%a, %b : memref<8x16xf32>, memref<16x32xf32>) outs(%c : memref<8x32xf32>)
  return
}

// -----

// Transposed operands (flex-fold-matmul-operands' maps) on strided views:
// A read as (k, m), B as (n, k). Sizes come from the dims the maps name,
// and A's (m, k) / B's (k, n) strides are the memref strides swapped.

// CHECK-LABEL: func.func @transposed_maps
// CHECK-SAME: (%[[A:[a-z0-9_]+]]: memref<?x?xf32, strided<[?, 1], offset: ?>>, %[[B:[a-z0-9_]+]]: memref<?x?xf32, strided<[?, 1], offset: ?>>, %[[C:[a-z0-9_]+]]: memref<?x?xf32>)
// CHECK-DAG: %[[C0:[a-z0-9_]+]] = arith.constant 0 : index
// CHECK-DAG: %[[C1:[a-z0-9_]+]] = arith.constant 1 : index
// CHECK-DAG: %[[M:[a-z0-9_]+]] = memref.dim %[[A]], %[[C1]] :
// CHECK-DAG: %[[N:[a-z0-9_]+]] = memref.dim %[[B]], %[[C0]] :
// CHECK-DAG: %[[K:[a-z0-9_]+]] = memref.dim %[[A]], %[[C0]] :
// CHECK-DAG: %{{[a-z0-9_]+}}, %[[OA:[a-z0-9_]+]], %{{[a-z0-9_]+}}:2, %[[SA:[a-z0-9_]+]]:2 = memref.extract_strided_metadata %[[A]] :
// CHECK-DAG: %[[PA:[a-z0-9_]+]] = memref.extract_aligned_pointer_as_index %[[A]] :
// CHECK-DAG: %{{[a-z0-9_]+}}, %[[OB:[a-z0-9_]+]], %{{[a-z0-9_]+}}:2, %[[SB:[a-z0-9_]+]]:2 = memref.extract_strided_metadata %[[B]] :
// CHECK-DAG: %[[PB:[a-z0-9_]+]] = memref.extract_aligned_pointer_as_index %[[B]] :
// CHECK-DAG: %{{[a-z0-9_]+}}, %[[OC:[a-z0-9_]+]], %{{[a-z0-9_]+}}:2, %[[SC:[a-z0-9_]+]]:2 = memref.extract_strided_metadata %[[C]] :
// CHECK-DAG: %[[PC:[a-z0-9_]+]] = memref.extract_aligned_pointer_as_index %[[C]] :
// CHECK: call @flex_gemm_f32(%[[C1]], %[[M]], %[[N]], %[[K]],
// CHECK-SAME: %[[PA]], %[[OA]], %[[C0]], %[[SA]]#1, %[[SA]]#0,
// CHECK-SAME: %[[PB]], %[[OB]], %[[C0]], %[[SB]]#1, %[[SB]]#0,
// CHECK-SAME: %[[PC]], %[[OC]], %[[C0]], %[[SC]]#0, %[[SC]]#1, %[[C1]])
// CHECK-NOT: linalg.matmul
// CHECK: return
func.func @transposed_maps(%a: memref<?x?xf32, strided<[?, 1], offset: ?>>, %b: memref<?x?xf32, strided<[?, 1], offset: ?>>, %c: memref<?x?xf32>) {
  linalg.matmul indexing_maps = [affine_map<(d0, d1, d2) -> (d2, d0)>, affine_map<(d0, d1, d2) -> (d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>]
    ins(%a, %b : memref<?x?xf32, strided<[?, 1], offset: ?>>, memref<?x?xf32, strided<[?, 1], offset: ?>>) outs(%c : memref<?x?xf32>)
  return
}

// -----

// The same with static layouts: A 16x8 read as (k, m): A(m) = 1, A(k) = 8;
// B 32x16 with row stride 20 at offset 3 read as (n, k): B(k) = 1,
// B(n) = 20; a column-major C: C(m) = 1, C(n) = 8. M = 8, N = 32, K = 16.

// CHECK-LABEL: func.func @transposed_static
// CHECK-NOT: linalg.fill
// CHECK: call @flex_gemm_f32
// CANON-LABEL: func.func @transposed_static
// CANON-DAG: %[[C0:.+]] = arith.constant 0 : index
// CANON-DAG: %[[C1:.+]] = arith.constant 1 : index
// CANON-DAG: %[[C3:.+]] = arith.constant 3 : index
// CANON-DAG: %[[C8:.+]] = arith.constant 8 : index
// CANON-DAG: %[[C16:.+]] = arith.constant 16 : index
// CANON-DAG: %[[C20:.+]] = arith.constant 20 : index
// CANON-DAG: %[[C32:.+]] = arith.constant 32 : index
// CANON-DAG: %[[PA:.+]] = memref.extract_aligned_pointer_as_index %arg0
// CANON-DAG: %[[PB:.+]] = memref.extract_aligned_pointer_as_index %arg1
// CANON-DAG: %[[PC:.+]] = memref.extract_aligned_pointer_as_index %arg2
// CANON: call @flex_gemm_f32(%[[C1]], %[[C8]], %[[C32]], %[[C16]],
// CANON-SAME: %[[PA]], %[[C0]], %[[C0]], %[[C1]], %[[C8]],
// CANON-SAME: %[[PB]], %[[C3]], %[[C0]], %[[C1]], %[[C20]],
// CANON-SAME: %[[PC]], %[[C0]], %[[C0]], %[[C1]], %[[C8]], %[[C0]])
func.func @transposed_static(%a: memref<16x8xf32>, %b: memref<32x16xf32, strided<[20, 1], offset: 3>>, %c: memref<8x32xf32, strided<[1, 8]>>) {
  %cst = arith.constant 0.0 : f32
  linalg.fill ins(%cst : f32) outs(%c : memref<8x32xf32, strided<[1, 8]>>)
  linalg.matmul indexing_maps = [affine_map<(d0, d1, d2) -> (d2, d0)>, affine_map<(d0, d1, d2) -> (d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>]
    ins(%a, %b : memref<16x8xf32>, memref<32x16xf32, strided<[20, 1], offset: 3>>) outs(%c : memref<8x32xf32, strided<[1, 8]>>)
  return
}

// -----

// batch_matmul: the batch size is the dynamic dim 0 of A; each operand
// passes its (batch, row, col) strides in order.

// CHECK-LABEL: func.func @batch_matmul
// CHECK-SAME: (%[[A:[a-z0-9_]+]]: memref<?x8x16xf32>, %[[B:[a-z0-9_]+]]: memref<?x16x32xf32>, %[[C:[a-z0-9_]+]]: memref<?x8x32xf32>)
// CHECK-DAG: %[[C0:[a-z0-9_]+]] = arith.constant 0 : index
// CHECK-DAG: %[[C1:[a-z0-9_]+]] = arith.constant 1 : index
// CHECK-DAG: %[[C2:[a-z0-9_]+]] = arith.constant 2 : index
// CHECK-DAG: %[[BS:[a-z0-9_]+]] = memref.dim %[[A]], %[[C0]] :
// CHECK-DAG: %[[M:[a-z0-9_]+]] = memref.dim %[[A]], %[[C1]] :
// CHECK-DAG: %[[N:[a-z0-9_]+]] = memref.dim %[[B]], %[[C2]] :
// CHECK-DAG: %[[K:[a-z0-9_]+]] = memref.dim %[[A]], %[[C2]] :
// CHECK-DAG: %{{[a-z0-9_]+}}, %[[OA:[a-z0-9_]+]], %{{[a-z0-9_]+}}:3, %[[SA:[a-z0-9_]+]]:3 = memref.extract_strided_metadata %[[A]] :
// CHECK-DAG: %[[PA:[a-z0-9_]+]] = memref.extract_aligned_pointer_as_index %[[A]] :
// CHECK-DAG: %{{[a-z0-9_]+}}, %[[OB:[a-z0-9_]+]], %{{[a-z0-9_]+}}:3, %[[SB:[a-z0-9_]+]]:3 = memref.extract_strided_metadata %[[B]] :
// CHECK-DAG: %[[PB:[a-z0-9_]+]] = memref.extract_aligned_pointer_as_index %[[B]] :
// CHECK-DAG: %{{[a-z0-9_]+}}, %[[OC:[a-z0-9_]+]], %{{[a-z0-9_]+}}:3, %[[SC:[a-z0-9_]+]]:3 = memref.extract_strided_metadata %[[C]] :
// CHECK-DAG: %[[PC:[a-z0-9_]+]] = memref.extract_aligned_pointer_as_index %[[C]] :
// CHECK: call @flex_gemm_f32(%[[BS]], %[[M]], %[[N]], %[[K]],
// CHECK-SAME: %[[PA]], %[[OA]], %[[SA]]#0, %[[SA]]#1, %[[SA]]#2,
// CHECK-SAME: %[[PB]], %[[OB]], %[[SB]]#0, %[[SB]]#1, %[[SB]]#2,
// CHECK-SAME: %[[PC]], %[[OC]], %[[SC]]#0, %[[SC]]#1, %[[SC]]#2, %[[C1]])
// CHECK-NOT: linalg.batch_matmul
// CHECK: return

// CANON-LABEL: func.func @batch_matmul
// CANON-DAG: %[[C0:.+]] = arith.constant 0 : index
// CANON-DAG: %[[C1:.+]] = arith.constant 1 : index
// CANON-DAG: %[[C8:.+]] = arith.constant 8 : index
// CANON-DAG: %[[C16:.+]] = arith.constant 16 : index
// CANON-DAG: %[[C32:.+]] = arith.constant 32 : index
// CANON-DAG: %[[C128:.+]] = arith.constant 128 : index
// CANON-DAG: %[[C256:.+]] = arith.constant 256 : index
// CANON-DAG: %[[C512:.+]] = arith.constant 512 : index
// CANON-DAG: %[[BS:.+]] = memref.dim %arg0, %[[C0]]
// CANON: call @flex_gemm_f32(%[[BS]], %[[C8]], %[[C32]], %[[C16]],
// CANON-SAME: %{{.+}}, %[[C0]], %[[C128]], %[[C16]], %[[C1]],
// CANON-SAME: %{{.+}}, %[[C0]], %[[C512]], %[[C32]], %[[C1]],
// CANON-SAME: %{{.+}}, %[[C0]], %[[C256]], %[[C32]], %[[C1]], %[[C1]])
func.func @batch_matmul(%a: memref<?x8x16xf32>, %b: memref<?x16x32xf32>, %c: memref<?x8x32xf32>) {
  linalg.batch_matmul ins(%a, %b : memref<?x8x16xf32>, memref<?x16x32xf32>) outs(%c : memref<?x8x32xf32>)
  return
}

// -----

// bf16 inputs into a bf16 C, B broadcast over the batch (map (k, n)): B's
// batch stride is 0, flags = accumulate | bf16 output = 3.

// CHECK-LABEL: func.func @batch_matmul_broadcast_bf16
// CHECK-SAME: (%[[A:[a-z0-9_]+]]: memref<2x8x16xbf16>, %[[B:[a-z0-9_]+]]: memref<16x32xbf16>, %[[C:[a-z0-9_]+]]: memref<2x8x32xbf16>)
// CHECK-DAG: %[[C0:[a-z0-9_]+]] = arith.constant 0 : index
// CHECK-DAG: %[[C1:[a-z0-9_]+]] = arith.constant 1 : index
// CHECK-DAG: %[[C2:[a-z0-9_]+]] = arith.constant 2 : index
// CHECK-DAG: %[[F:[a-z0-9_]+]] = arith.constant 3 : index
// CHECK-DAG: %[[BS:[a-z0-9_]+]] = memref.dim %[[A]], %[[C0]] :
// CHECK-DAG: %[[M:[a-z0-9_]+]] = memref.dim %[[A]], %[[C1]] :
// CHECK-DAG: %[[N:[a-z0-9_]+]] = memref.dim %[[B]], %[[C1]] :
// CHECK-DAG: %[[K:[a-z0-9_]+]] = memref.dim %[[A]], %[[C2]] :
// CHECK-DAG: %{{[a-z0-9_]+}}, %[[OA:[a-z0-9_]+]], %{{[a-z0-9_]+}}:3, %[[SA:[a-z0-9_]+]]:3 = memref.extract_strided_metadata %[[A]] :
// CHECK-DAG: %[[PA:[a-z0-9_]+]] = memref.extract_aligned_pointer_as_index %[[A]] :
// CHECK-DAG: %{{[a-z0-9_]+}}, %[[OB:[a-z0-9_]+]], %{{[a-z0-9_]+}}:2, %[[SB:[a-z0-9_]+]]:2 = memref.extract_strided_metadata %[[B]] :
// CHECK-DAG: %[[PB:[a-z0-9_]+]] = memref.extract_aligned_pointer_as_index %[[B]] :
// CHECK-DAG: %{{[a-z0-9_]+}}, %[[OC:[a-z0-9_]+]], %{{[a-z0-9_]+}}:3, %[[SC:[a-z0-9_]+]]:3 = memref.extract_strided_metadata %[[C]] :
// CHECK-DAG: %[[PC:[a-z0-9_]+]] = memref.extract_aligned_pointer_as_index %[[C]] :
// CHECK: call @flex_gemm_bf16(%[[BS]], %[[M]], %[[N]], %[[K]],
// CHECK-SAME: %[[PA]], %[[OA]], %[[SA]]#0, %[[SA]]#1, %[[SA]]#2,
// CHECK-SAME: %[[PB]], %[[OB]], %[[C0]], %[[SB]]#0, %[[SB]]#1,
// CHECK-SAME: %[[PC]], %[[OC]], %[[SC]]#0, %[[SC]]#1, %[[SC]]#2, %[[F]])
// CHECK-NOT: linalg.batch_matmul
// CHECK: return
// CHECK: func.func private @flex_gemm_bf16(index, index, index, index, index, index, index, index, index, index, index, index, index, index, index, index, index, index, index, index)
// CHECK-NOT: @flex_gemm_f32

// CANON-LABEL: func.func @batch_matmul_broadcast_bf16
// CANON-DAG: %[[C0:.+]] = arith.constant 0 : index
// CANON-DAG: %[[C1:.+]] = arith.constant 1 : index
// CANON-DAG: %[[C2:.+]] = arith.constant 2 : index
// CANON-DAG: %[[C3:.+]] = arith.constant 3 : index
// CANON-DAG: %[[C8:.+]] = arith.constant 8 : index
// CANON-DAG: %[[C16:.+]] = arith.constant 16 : index
// CANON-DAG: %[[C32:.+]] = arith.constant 32 : index
// CANON-DAG: %[[C128:.+]] = arith.constant 128 : index
// CANON-DAG: %[[C256:.+]] = arith.constant 256 : index
// CANON: call @flex_gemm_bf16(%[[C2]], %[[C8]], %[[C32]], %[[C16]],
// CANON-SAME: %{{.+}}, %[[C0]], %[[C128]], %[[C16]], %[[C1]],
// CANON-SAME: %{{.+}}, %[[C0]], %[[C0]], %[[C32]], %[[C1]],
// CANON-SAME: %{{.+}}, %[[C0]], %[[C256]], %[[C32]], %[[C1]], %[[C3]])
func.func @batch_matmul_broadcast_bf16(%a: memref<2x8x16xbf16>, %b: memref<16x32xbf16>, %c: memref<2x8x32xbf16>) {
  linalg.batch_matmul indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>]
    ins(%a, %b : memref<2x8x16xbf16>, memref<16x32xbf16>) outs(%c : memref<2x8x32xbf16>)
  return
}

// -----

// bf16 -> bf16 with a (bf16) zero fill: the fill is erased, flags = 2.

// CHECK-LABEL: func.func @bf16_out_zero_fill
// CHECK-NOT: linalg.fill
// CHECK: %[[F:[a-z0-9_]+]] = arith.constant 2 : index
// CHECK-NEXT: call @flex_gemm_bf16({{.+}}, %[[F]]) :
// CHECK-NOT: linalg.
// CHECK: return
func.func @bf16_out_zero_fill(%a: memref<8x16xbf16>, %b: memref<16x32xbf16>, %c: memref<8x32xbf16>) {
  %cst = arith.constant 0.0 : bf16
  linalg.fill ins(%cst : bf16) outs(%c : memref<8x32xbf16>)
  linalg.matmul ins(%a, %b : memref<8x16xbf16>, memref<16x32xbf16>) outs(%c : memref<8x32xbf16>)
  return
}

// -----

// bf16 x bf16 -> f32 (the folded bf16 linear): flex_gemm_bf16, flags 0 with
// the zero fill, 1 without.

// CHECK-LABEL: func.func @bf16_f32
// CHECK-SAME: (%[[A:[a-z0-9_]+]]: memref<8x16xbf16>, %[[B:[a-z0-9_]+]]: memref<16x32xbf16>, %[[C:[a-z0-9_]+]]: memref<8x32xf32>, %[[D:[a-z0-9_]+]]: memref<8x32xf32>)
// CHECK-DAG: %[[C0:[a-z0-9_]+]] = arith.constant 0 : index
// CHECK-DAG: %[[C1:[a-z0-9_]+]] = arith.constant 1 : index
// CHECK-NOT: linalg.fill
// CHECK: %[[PC:[a-z0-9_]+]] = memref.extract_aligned_pointer_as_index %[[C]] :
// CHECK: call @flex_gemm_bf16(%[[C1]], {{.+}}, %[[PC]], {{.+}}, %[[C0]]) :
// CHECK: %[[PD:[a-z0-9_]+]] = memref.extract_aligned_pointer_as_index %[[D]] :
// CHECK: call @flex_gemm_bf16(%[[C1]], {{.+}}, %[[PD]], {{.+}}, %[[C1]]) :
// CHECK-NOT: linalg.
// CHECK: return
// CHECK: func.func private @flex_gemm_bf16(
// CHECK-NOT: func.func private @flex_gemm
func.func @bf16_f32(%a: memref<8x16xbf16>, %b: memref<16x32xbf16>, %c: memref<8x32xf32>, %d: memref<8x32xf32>) {
  %cst = arith.constant 0.0 : f32
  linalg.fill ins(%cst : f32) outs(%c : memref<8x32xf32>)
  linalg.matmul ins(%a, %b : memref<8x16xbf16>, memref<16x32xbf16>) outs(%c : memref<8x32xf32>)
  linalg.matmul ins(%a, %b : memref<8x16xbf16>, memref<16x32xbf16>) outs(%d : memref<8x32xf32>)
  return
}

// -----

// Types the runtime has no product for stay linalg ops (and so does the
// zero fill in front of them): f16, i32, mixed bf16 x f32; so do products
// still on tensors. No runtime function is declared.

// CHECK-LABEL: func.func @unsupported_f16
// CHECK: linalg.matmul ins(%{{.+}}, %{{.+}} : memref<8x16xf16>, memref<16x32xf16>) outs(%{{.+}} : memref<8x32xf32>)
// CHECK-LABEL: func.func @unsupported_i32
// CHECK: linalg.fill ins(%{{.+}} : i32) outs(%{{.+}} : memref<8x32xi32>)
// CHECK-NEXT: linalg.matmul ins(%{{.+}}, %{{.+}} : memref<8x16xi32>, memref<16x32xi32>) outs(%{{.+}} : memref<8x32xi32>)
// CHECK-LABEL: func.func @unsupported_mixed
// CHECK: linalg.matmul ins(%{{.+}}, %{{.+}} : memref<8x16xbf16>, memref<16x32xf32>) outs(%{{.+}} : memref<8x32xf32>)
// CHECK-LABEL: func.func @tensors
// CHECK: linalg.matmul ins(%{{.+}}, %{{.+}} : tensor<8x16xf32>, tensor<16x32xf32>) outs(%{{.+}} : tensor<8x32xf32>)
// CHECK-NOT: call
// CHECK-NOT: @flex_gemm
func.func @unsupported_f16(%a: memref<8x16xf16>, %b: memref<16x32xf16>, %c: memref<8x32xf32>) {
  linalg.matmul ins(%a, %b : memref<8x16xf16>, memref<16x32xf16>) outs(%c : memref<8x32xf32>)
  return
}
func.func @unsupported_i32(%a: memref<8x16xi32>, %b: memref<16x32xi32>, %c: memref<8x32xi32>) {
  %z = arith.constant 0 : i32
  linalg.fill ins(%z : i32) outs(%c : memref<8x32xi32>)
  linalg.matmul ins(%a, %b : memref<8x16xi32>, memref<16x32xi32>) outs(%c : memref<8x32xi32>)
  return
}
func.func @unsupported_mixed(%a: memref<8x16xbf16>, %b: memref<16x32xf32>, %c: memref<8x32xf32>) {
  linalg.matmul ins(%a, %b : memref<8x16xbf16>, memref<16x32xf32>) outs(%c : memref<8x32xf32>)
  return
}
func.func @tensors(%a: tensor<8x16xf32>, %b: tensor<16x32xf32>, %c: tensor<8x32xf32>) -> tensor<8x32xf32> {
  %r = linalg.matmul ins(%a, %b : tensor<8x16xf32>, tensor<16x32xf32>) outs(%c : tensor<8x32xf32>) -> tensor<8x32xf32>
  return %r : tensor<8x32xf32>
}
