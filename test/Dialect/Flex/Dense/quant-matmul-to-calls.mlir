// RUN: flex-opt %s -split-input-file -flex-quant-matmul-to-calls -cse --mlir-print-local-scope | FileCheck %s
// RUN: flex-opt %s -split-input-file -flex-quant-matmul-to-calls -canonicalize --mlir-print-local-scope | FileCheck %s --check-prefix=CANON

// flex-quant-matmul-to-calls: bufferized flex.quant_matmul ->
//   call @flex_quant_matmul_i8(M, N, K, x_ptr, x_off, x_rs, w_ptr, w_off, w_rs,
//                              s_ptr, s_off, y_ptr, y_off, y_rs, flags)
//   call @flex_quant_matmul_i4(M, N, K, x_ptr, x_off, x_rs, w_ptr, w_off,
//                              sz_ptr, sz_off, y_ptr, y_off, y_rs,
//                              group_size, layout, flags)
// flags: 1 = x bf16, 2 = y bf16, 4 = scales bf16. Operands the kernels
// cannot read in place go through a contiguous copy, freed after the call.

// int8, bf16 x and y, f32 scales: flags = 3; M and K from x, N from y,
// row strides from the strided metadata (w read in place with its row
// stride of 128).
// CHECK-LABEL: func.func @int8_bf16
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: memref<?x64xbf16>, %[[W:[a-z0-9_]+]]: memref<32x64xi8, strided<[128, 1], offset: 8>>, %[[S:[a-z0-9_]+]]: memref<32xf32>, %[[Y:[a-z0-9_]+]]: memref<?x32xbf16>)
// CHECK-NOT: memref.copy
// CHECK-DAG: %[[C0:.+]] = arith.constant 0 : index
// CHECK-DAG: %[[C1:.+]] = arith.constant 1 : index
// CHECK-DAG: %[[M:.+]] = memref.dim %[[X]], %[[C0]] :
// CHECK-DAG: %[[N:.+]] = memref.dim %[[Y]], %[[C1]] :
// CHECK-DAG: %[[K:.+]] = memref.dim %[[X]], %[[C1]] :
// CHECK-DAG: %{{.+}}, %[[OX:.+]], %{{.+}}:2, %[[SX:.+]]:2 = memref.extract_strided_metadata %[[X]] :
// CHECK-DAG: %[[PX:.+]] = memref.extract_aligned_pointer_as_index %[[X]] :
// CHECK-DAG: %{{.+}}, %[[OW:.+]], %{{.+}}:2, %[[SW:.+]]:2 = memref.extract_strided_metadata %[[W]] :
// CHECK-DAG: %[[PW:.+]] = memref.extract_aligned_pointer_as_index %[[W]] :
// CHECK-DAG: %{{.+}}, %[[OS:.+]], %{{.+}}, %{{.+}} = memref.extract_strided_metadata %[[S]] :
// CHECK-DAG: %[[PS:.+]] = memref.extract_aligned_pointer_as_index %[[S]] :
// CHECK-DAG: %{{.+}}, %[[OY:.+]], %{{.+}}:2, %[[SY:.+]]:2 = memref.extract_strided_metadata %[[Y]] :
// CHECK-DAG: %[[PY:.+]] = memref.extract_aligned_pointer_as_index %[[Y]] :
// CHECK-DAG: %[[FLAGS:.+]] = arith.constant 3 : index
// CHECK: call @flex_quant_matmul_i8(%[[M]], %[[N]], %[[K]], %[[PX]], %[[OX]], %[[SX]]#0, %[[PW]], %[[OW]], %[[SW]]#0, %[[PS]], %[[OS]], %[[PY]], %[[OY]], %[[SY]]#0, %[[FLAGS]])
// CHECK-SAME: : (index, index, index, index, index, index, index, index, index, index, index, index, index, index, index) -> ()
// CHECK-NOT: flex.quant_matmul
// CHECK-NOT: memref.dealloc
// CHECK: return
// CHECK: func.func private @flex_quant_matmul_i8(index, index, index, index, index, index, index, index, index, index, index, index, index, index, index)
// CHECK-NOT: @flex_quant_matmul_i4
// CHECK: // -----
// CANON-LABEL: func.func @int8_bf16
// CANON-DAG: %[[C0:.+]] = arith.constant 0 : index
// CANON-DAG: %[[C3:.+]] = arith.constant 3 : index
// CANON-DAG: %[[C8:.+]] = arith.constant 8 : index
// CANON-DAG: %[[C32:.+]] = arith.constant 32 : index
// CANON-DAG: %[[C64:.+]] = arith.constant 64 : index
// CANON-DAG: %[[C128:.+]] = arith.constant 128 : index
// CANON-DAG: %[[M:.+]] = memref.dim %arg0, %[[C0]]
// CANON: call @flex_quant_matmul_i8(%[[M]], %[[C32]], %[[C64]], %{{.+}}, %[[C0]], %[[C64]], %{{.+}}, %[[C8]], %[[C128]], %{{.+}}, %[[C0]], %{{.+}}, %[[C0]], %[[C32]], %[[C3]])
func.func @int8_bf16(%x: memref<?x64xbf16>, %w: memref<32x64xi8, strided<[128, 1], offset: 8>>, %s: memref<32xf32>, %y: memref<?x32xbf16>) {
  flex.quant_matmul {format = "int8", group_size = 0 : i64, layout = 0 : i64}
      ins(%x, %w, %s : memref<?x64xbf16>, memref<32x64xi8, strided<[128, 1], offset: 8>>, memref<32xf32>) outs(%y : memref<?x32xbf16>)
  return
}

// -----

// All bf16: flags = 1 | 2 | 4; f32 everywhere: flags = 0.
// CANON-LABEL: func.func @flags
// CANON-DAG: %[[C0:.+]] = arith.constant 0 : index
// CANON-DAG: %[[C7:.+]] = arith.constant 7 : index
// CANON: call @flex_quant_matmul_i8({{(%[a-z0-9_]+, )+}}%[[C7]])
// CANON: call @flex_quant_matmul_i8({{(%[a-z0-9_]+, )+}}%[[C0]])
func.func @flags(%xb: memref<2x64xbf16>, %w: memref<32x64xi8>, %sb: memref<32xbf16>, %yb: memref<2x32xbf16>,
                 %x: memref<2x64xf32>, %s: memref<32xf32>, %y: memref<2x32xf32>) {
  flex.quant_matmul {format = "int8", group_size = 0 : i64, layout = 0 : i64}
      ins(%xb, %w, %sb : memref<2x64xbf16>, memref<32x64xi8>, memref<32xbf16>) outs(%yb : memref<2x32xbf16>)
  flex.quant_matmul {format = "int8", group_size = 0 : i64, layout = 0 : i64}
      ins(%x, %w, %s : memref<2x64xf32>, memref<32x64xi8>, memref<32xf32>) outs(%y : memref<2x32xf32>)
  return
}

// -----

// int4, bf16 x, y and scale_and_zero: flags = 7, group_size and layout
// passed; no row stride for the packed bytes (contiguous).
// CANON-LABEL: func.func @int4_bf16
// CANON-DAG: %[[C0:.+]] = arith.constant 0 : index
// CANON-DAG: %[[C2:.+]] = arith.constant 2 : index
// CANON-DAG: %[[C7:.+]] = arith.constant 7 : index
// CANON-DAG: %[[C32:.+]] = arith.constant 32 : index
// CANON-DAG: %[[C64:.+]] = arith.constant 64 : index
// CANON-DAG: %[[C128:.+]] = arith.constant 128 : index
// CANON-DAG: %[[M:.+]] = memref.dim %arg0, %[[C0]]
// CANON-DAG: %[[PX:.+]] = memref.extract_aligned_pointer_as_index %arg0
// CANON-DAG: %[[PW:.+]] = memref.extract_aligned_pointer_as_index %arg1
// CANON-DAG: %[[PS:.+]] = memref.extract_aligned_pointer_as_index %arg2
// CANON-DAG: %[[PY:.+]] = memref.extract_aligned_pointer_as_index %arg3
// CANON: call @flex_quant_matmul_i4(%[[M]], %[[C64]], %[[C128]], %[[PX]], %[[C0]], %[[C128]], %[[PW]], %[[C0]], %[[PS]], %[[C0]], %[[PY]], %[[C0]], %[[C64]], %[[C32]], %[[C2]], %[[C7]])
// CANON-SAME: : (index, index, index, index, index, index, index, index, index, index, index, index, index, index, index, index) -> ()
// CANON-NOT: memref.copy
// CANON: func.func private @flex_quant_matmul_i4(index, index, index, index, index, index, index, index, index, index, index, index, index, index, index, index)
func.func @int4_bf16(%x: memref<?x128xbf16>, %w: memref<64x64xi8>, %sz: memref<4x64x2xbf16>, %y: memref<?x64xbf16>) {
  flex.quant_matmul {format = "int4_cpu", group_size = 32 : i64, layout = 2 : i64}
      ins(%x, %w, %sz : memref<?x128xbf16>, memref<64x64xi8>, memref<4x64x2xbf16>) outs(%y : memref<?x64xbf16>)
  return
}

// -----

// Strided operands: x with column stride 2 and scale_and_zero that is a
// slice of a wider buffer are copied into contiguous buffers before the
// call; y with column stride 4 is computed into a buffer copied back
// after; every copy is freed after the call.
// CHECK-LABEL: func.func @int4_strided
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: memref<4x128xf32, strided<[256, 2]>>, %[[W:[a-z0-9_]+]]: memref<64x64xi8>, %[[SZ:[a-z0-9_]+]]: memref<4x64x2xf32, strided<[256, 2, 1]>>, %[[Y:[a-z0-9_]+]]: memref<4x64xf32, strided<[1, 4]>>)
// CHECK: %[[XC:.+]] = memref.alloc() : memref<4x128xf32>
// CHECK: memref.copy %[[X]], %[[XC]] : memref<4x128xf32, strided<[256, 2]>> to memref<4x128xf32>
// CHECK: %[[SC:.+]] = memref.alloc() : memref<4x64x2xf32>
// CHECK: memref.copy %[[SZ]], %[[SC]] :
// CHECK: %[[YC:.+]] = memref.alloc() : memref<4x64xf32>
// CHECK-DAG: %[[PX:.+]] = memref.extract_aligned_pointer_as_index %[[XC]] :
// CHECK-DAG: %[[PW:.+]] = memref.extract_aligned_pointer_as_index %[[W]] :
// CHECK-DAG: %[[PS:.+]] = memref.extract_aligned_pointer_as_index %[[SC]] :
// CHECK-DAG: %[[PY:.+]] = memref.extract_aligned_pointer_as_index %[[YC]] :
// CHECK: call @flex_quant_matmul_i4(%{{.+}}, %{{.+}}, %{{.+}}, %[[PX]], %{{.+}}, %{{.+}}, %[[PW]], %{{.+}}, %[[PS]], %{{.+}}, %[[PY]],
// CHECK-NEXT: memref.copy %[[YC]], %[[Y]] : memref<4x64xf32> to memref<4x64xf32, strided<[1, 4]>>
// CHECK-DAG: memref.dealloc %[[XC]]
// CHECK-DAG: memref.dealloc %[[SC]]
// CHECK-DAG: memref.dealloc %[[YC]]
// CHECK: return
func.func @int4_strided(%x: memref<4x128xf32, strided<[256, 2]>>, %w: memref<64x64xi8>, %sz: memref<4x64x2xf32, strided<[256, 2, 1]>>, %y: memref<4x64xf32, strided<[1, 4]>>) {
  flex.quant_matmul {format = "int4_cpu", group_size = 32 : i64, layout = 2 : i64}
      ins(%x, %w, %sz : memref<4x128xf32, strided<[256, 2]>>, memref<64x64xi8>, memref<4x64x2xf32, strided<[256, 2, 1]>>) outs(%y : memref<4x64xf32, strided<[1, 4]>>)
  return
}

// -----

// A dynamic layout: the inner stride is not known to be 1, so x is copied
// (its dynamic M taken from x for the buffer).
// CHECK-LABEL: func.func @dynamic_layout
// CHECK-SAME: (%[[X:[a-z0-9_]+]]: memref<?x64xf32, strided<[?, ?], offset: ?>>
// CHECK: %[[M:.+]] = memref.dim %[[X]], %{{.+}} : memref<?x64xf32, strided<[?, ?], offset: ?>>
// CHECK: %[[XC:.+]] = memref.alloc(%[[M]]) : memref<?x64xf32>
// CHECK: memref.copy %[[X]], %[[XC]]
// CHECK: call @flex_quant_matmul_i8(
// CHECK: memref.dealloc %[[XC]]
func.func @dynamic_layout(%x: memref<?x64xf32, strided<[?, ?], offset: ?>>, %w: memref<32x64xi8>, %s: memref<32xf32>, %y: memref<?x32xf32>) {
  flex.quant_matmul {format = "int8", group_size = 0 : i64, layout = 0 : i64}
      ins(%x, %w, %s : memref<?x64xf32, strided<[?, ?], offset: ?>>, memref<32x64xi8>, memref<32xf32>) outs(%y : memref<?x32xf32>)
  return
}

// -----

// On tensors: left alone.
// CHECK-LABEL: func.func @tensors_left_alone
// CHECK: flex.quant_matmul
// CHECK-NOT: call
func.func @tensors_left_alone(%x: tensor<2x64xf32>, %w: tensor<32x64xi8>, %s: tensor<32xf32>, %e: tensor<2x32xf32>) -> tensor<2x32xf32> {
  %y = flex.quant_matmul {format = "int8", group_size = 0 : i64, layout = 0 : i64}
      ins(%x, %w, %s : tensor<2x64xf32>, tensor<32x64xi8>, tensor<32xf32>) outs(%e : tensor<2x32xf32>) -> tensor<2x32xf32>
  return %y : tensor<2x32xf32>
}
