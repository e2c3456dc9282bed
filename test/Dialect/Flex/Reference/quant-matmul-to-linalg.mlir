// RUN: flex-opt %s -split-input-file -flex-quant-matmul-to-linalg -canonicalize -cse --mlir-print-local-scope | FileCheck %s

// flex-quant-matmul-to-linalg: flex.quant_matmul on tensors -> one
// linalg.generic over (m, n, k) summing f32(x) * dequantized w into an f32
// zero fill, then (int8, or a non-f32 result) an elementwise generic for
// the per-channel scale and the rounding to the result type.

// int8, bf16: the sum of x * sitofp(w) in f32, then * scales[n], truncf.
// CHECK-LABEL: func.func @int8_bf16
// CHECK-SAME: (%[[X:[^:]+]]: tensor<?x64xbf16>, %[[W:[^:]+]]: tensor<32x64xi8>, %[[S:[^:]+]]: tensor<32xbf16>, %[[E:[^:]+]]: tensor<?x32xbf16>)
// CHECK: %[[M:.+]] = tensor.dim %[[E]], %{{.+}} : tensor<?x32xbf16>
// CHECK: %[[ACC0:.+]] = tensor.empty(%[[M]]) : tensor<?x32xf32>
// CHECK: %[[ZERO:.+]] = linalg.fill ins(%{{.+}} : f32) outs(%[[ACC0]] : tensor<?x32xf32>)
// CHECK: %[[SUM:.+]] = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[X]], %[[W]] : tensor<?x64xbf16>, tensor<32x64xi8>) outs(%[[ZERO]] : tensor<?x32xf32>)
// CHECK-NEXT: ^bb0(%[[XV:.+]]: bf16, %[[WV:.+]]: i8, %[[OUT:.+]]: f32):
// CHECK-NEXT:   %[[XF:.+]] = arith.extf %[[XV]] : bf16 to f32
// CHECK-NEXT:   %[[WF:.+]] = arith.sitofp %[[WV]] : i8 to f32
// CHECK-NEXT:   %[[P:.+]] = arith.mulf %[[XF]], %[[WF]] : f32
// CHECK-NEXT:   %[[A:.+]] = arith.addf %[[OUT]], %[[P]] : f32
// CHECK-NEXT:   linalg.yield %[[A]] : f32
// CHECK: %[[Y:.+]] = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%[[SUM]], %[[S]] : tensor<?x32xf32>, tensor<32xbf16>) outs(%[[E]] : tensor<?x32xbf16>)
// CHECK-NEXT: ^bb0(%[[AV:.+]]: f32, %[[SV:.+]]: bf16, %{{.+}}: bf16):
// CHECK-NEXT:   %[[SF:.+]] = arith.extf %[[SV]] : bf16 to f32
// CHECK-NEXT:   %[[R:.+]] = arith.mulf %[[AV]], %[[SF]] : f32
// CHECK-NEXT:   %[[T:.+]] = arith.truncf %[[R]] : f32 to bf16
// CHECK-NEXT:   linalg.yield %[[T]] : bf16
// CHECK: return %[[Y]]
// CHECK-NOT: flex.quant_matmul
func.func @int8_bf16(%x: tensor<?x64xbf16>, %w: tensor<32x64xi8>, %s: tensor<32xbf16>, %e: tensor<?x32xbf16>) -> tensor<?x32xbf16> {
  %y = flex.quant_matmul {format = "int8", group_size = 0 : i64, layout = 0 : i64}
      ins(%x, %w, %s : tensor<?x64xbf16>, tensor<32x64xi8>, tensor<32xbf16>) outs(%e : tensor<?x32xbf16>) -> tensor<?x32xbf16>
  return %y : tensor<?x32xbf16>
}

// -----

// int4 layout 2 (BN = 64), f32, K = 256: summed straight into the op's
// init; the byte of (n, k) is nb * K * 32 + k * 32 + n % 32 with
// nb = n / 64, read as w[byte / (K/2), byte % (K/2)]; the high nibble when
// n % 64 >= 32; the group's scale and zero at [k / 32, n, 0 | 1].
// CHECK-LABEL: func.func @int4_layout2_f32
// CHECK-SAME: (%[[X:[^:]+]]: tensor<4x256xf32>, %[[W:[^:]+]]: tensor<64x128xi8>, %[[SZ:[^:]+]]: tensor<8x64x2xf32>, %[[E:[^:]+]]: tensor<4x64xf32>)
// CHECK-DAG: %[[K:.+]] = arith.constant 256 : index
// CHECK-DAG: %[[ROWB:.+]] = arith.constant 128 : index
// CHECK-DAG: %[[C64:.+]] = arith.constant 64 : index
// CHECK-DAG: %[[C32:.+]] = arith.constant 32 : index
// CHECK-DAG: %[[C0:.+]] = arith.constant 0 : index
// CHECK-DAG: %[[C1:.+]] = arith.constant 1 : index
// CHECK-DAG: %[[EIGHT:.+]] = arith.constant 8.000000e+00 : f32
// CHECK-DAG: %[[FOUR:.+]] = arith.constant 4 : i32
// CHECK-DAG: %[[NONE:.+]] = arith.constant 0 : i32
// CHECK-DAG: %[[MASK:.+]] = arith.constant 15 : i32
// CHECK-NOT: tensor.empty
// CHECK: %[[ZERO:.+]] = linalg.fill ins(%{{.+}} : f32) outs(%[[E]] : tensor<4x64xf32>)
// CHECK: %[[Y:.+]] = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[X]] : tensor<4x256xf32>) outs(%[[ZERO]] : tensor<4x64xf32>)
// CHECK-NEXT: ^bb0(%[[XV:.+]]: f32, %[[OUT:.+]]: f32):
// CHECK-NEXT: %[[N:.+]] = linalg.index 1 : index
// CHECK-NEXT: %[[KI:.+]] = linalg.index 2 : index
// CHECK-NEXT: %[[NB:.+]] = arith.divui %[[N]], %[[C64]] : index
// CHECK-NEXT: %[[COL:.+]] = arith.remui %[[N]], %[[C64]] : index
// CHECK-NEXT: %[[I:.+]] = arith.remui %[[COL]], %[[C32]] : index
// CHECK-NEXT: %[[HIGH:.+]] = arith.cmpi uge, %[[COL]], %[[C32]] : index
// CHECK-NEXT: %[[B0:.+]] = arith.muli %[[NB]], %[[K]] : index
// CHECK-NEXT: %[[B1:.+]] = arith.addi %[[B0]], %[[KI]] : index
// CHECK-NEXT: %[[B2:.+]] = arith.muli %[[B1]], %[[C32]] : index
// CHECK-NEXT: %[[BYTE:.+]] = arith.addi %[[B2]], %[[I]] : index
// CHECK-NEXT: %[[ROW:.+]] = arith.divui %[[BYTE]], %[[ROWB]] : index
// CHECK-NEXT: %[[AT:.+]] = arith.remui %[[BYTE]], %[[ROWB]] : index
// CHECK-NEXT: %[[PACKED:.+]] = tensor.extract %[[W]][%[[ROW]], %[[AT]]] : tensor<64x128xi8>
// CHECK-NEXT: %[[WORD:.+]] = arith.extui %[[PACKED]] : i8 to i32
// CHECK-NEXT: %[[SHIFT:.+]] = arith.select %[[HIGH]], %[[FOUR]], %[[NONE]] : i32
// CHECK-NEXT: %[[SH:.+]] = arith.shrui %[[WORD]], %[[SHIFT]] : i32
// CHECK-NEXT: %[[Q:.+]] = arith.andi %[[SH]], %[[MASK]] : i32
// CHECK-NEXT: %[[QF:.+]] = arith.uitofp %[[Q]] : i32 to f32
// CHECK-NEXT: %[[G:.+]] = arith.divui %[[KI]], %[[C32]] : index
// CHECK-NEXT: %[[SC:.+]] = tensor.extract %[[SZ]][%[[G]], %[[N]], %[[C0]]] : tensor<8x64x2xf32>
// CHECK-NEXT: %[[ZP:.+]] = tensor.extract %[[SZ]][%[[G]], %[[N]], %[[C1]]] : tensor<8x64x2xf32>
// CHECK-NEXT: %[[CEN:.+]] = arith.subf %[[QF]], %[[EIGHT]] : f32
// CHECK-NEXT: %[[DQ0:.+]] = arith.mulf %[[CEN]], %[[SC]] : f32
// CHECK-NEXT: %[[DQ:.+]] = arith.addf %[[DQ0]], %[[ZP]] : f32
// CHECK-NEXT: %[[P:.+]] = arith.mulf %[[XV]], %[[DQ]] : f32
// CHECK-NEXT: %[[A:.+]] = arith.addf %[[OUT]], %[[P]] : f32
// CHECK-NEXT: linalg.yield %[[A]] : f32
// CHECK-NOT: linalg.generic
// CHECK: return %[[Y]]
func.func @int4_layout2_f32(%x: tensor<4x256xf32>, %w: tensor<64x128xi8>, %sz: tensor<8x64x2xf32>, %e: tensor<4x64xf32>) -> tensor<4x64xf32> {
  %y = flex.quant_matmul {format = "int4_cpu", group_size = 32 : i64, layout = 2 : i64}
      ins(%x, %w, %sz : tensor<4x256xf32>, tensor<64x128xi8>, tensor<8x64x2xf32>) outs(%e : tensor<4x64xf32>) -> tensor<4x64xf32>
  return %y : tensor<4x64xf32>
}

// -----

// Layout 0 (BN = 32): byte i = (n % 32) / 2, the high nibble for odd columns;
// A bf16 result: the f32 sum, then truncf into the init.
// CHECK-LABEL: func.func @int4_layout0_bf16
// CHECK-DAG:  %[[C32:.+]] = arith.constant 32 : index
// CHECK-DAG:  %[[C2:.+]] = arith.constant 2 : index
// CHECK-DAG:  %[[C1:.+]] = arith.constant 1 : index
// CHECK-DAG:  %[[HALF:.+]] = arith.constant 16 : index
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]
// CHECK:      %[[N:.+]] = linalg.index 1 : index
// CHECK:      %[[COL:.+]] = arith.remui %[[N]], %[[C32]] : index
// CHECK-NEXT: %[[I:.+]] = arith.divui %[[COL]], %[[C2]] : index
// CHECK-NEXT: %[[ODD:.+]] = arith.remui %[[COL]], %[[C2]] : index
// CHECK-NEXT: %[[HIGH:.+]] = arith.cmpi eq, %[[ODD]], %[[C1]] : index
// CHECK:      %[[B2:.+]] = arith.muli %{{.+}}, %[[HALF]] : index
// CHECK-NEXT: arith.addi %[[B2]], %[[I]] : index
// CHECK:      arith.select %[[HIGH]]
// CHECK:      arith.extf %{{.+}} : bf16 to f32
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel"]
// CHECK:      arith.truncf %{{.+}} : f32 to bf16
func.func @int4_layout0_bf16(%x: tensor<2x64xbf16>, %w: tensor<32x32xi8>, %sz: tensor<1x32x2xbf16>, %e: tensor<2x32xbf16>) -> tensor<2x32xbf16> {
  %y = flex.quant_matmul {format = "int4_cpu", group_size = 64 : i64, layout = 0 : i64}
      ins(%x, %w, %sz : tensor<2x64xbf16>, tensor<32x32xi8>, tensor<1x32x2xbf16>) outs(%e : tensor<2x32xbf16>) -> tensor<2x32xbf16>
  return %y : tensor<2x32xbf16>
}

// -----

// Layout 1 (BN = 32): byte i = (n % 32) % 16, high when n % 32 >= 16.
// CHECK-LABEL: func.func @int4_layout1_f32
// CHECK-DAG:  %[[C32:.+]] = arith.constant 32 : index
// CHECK-DAG:  %[[C16:.+]] = arith.constant 16 : index
// CHECK:      %[[N:.+]] = linalg.index 1 : index
// CHECK:      %[[COL:.+]] = arith.remui %[[N]], %[[C32]] : index
// CHECK-NEXT: %[[I:.+]] = arith.remui %[[COL]], %[[C16]] : index
// CHECK-NEXT: %[[HIGH:.+]] = arith.cmpi uge, %[[COL]], %[[C16]] : index
func.func @int4_layout1_f32(%x: tensor<2x64xf32>, %w: tensor<32x32xi8>, %sz: tensor<1x32x2xf32>, %e: tensor<2x32xf32>) -> tensor<2x32xf32> {
  %y = flex.quant_matmul {format = "int4_cpu", group_size = 64 : i64, layout = 1 : i64}
      ins(%x, %w, %sz : tensor<2x64xf32>, tensor<32x32xi8>, tensor<1x32x2xf32>) outs(%e : tensor<2x32xf32>) -> tensor<2x32xf32>
  return %y : tensor<2x32xf32>
}

// -----

// On memrefs: left alone.
// CHECK-LABEL: func.func @memref_left_alone
// CHECK: flex.quant_matmul
// CHECK-NOT: linalg.generic
func.func @memref_left_alone(%x: memref<2x64xf32>, %w: memref<32x64xi8>, %s: memref<32xf32>, %y: memref<2x32xf32>) {
  flex.quant_matmul {format = "int8", group_size = 0 : i64, layout = 0 : i64}
      ins(%x, %w, %s : memref<2x64xf32>, memref<32x64xi8>, memref<32xf32>) outs(%y : memref<2x32xf32>)
  return
}

// -----

// int4 layout 2 with N = 80: block 0 as above, then a short block of the
// last 16 columns (n >= 64): its byte of (n, k) is 64 * 32 (the whole
// block) + k * 8 + (n % 64) / 2, the high nibble for an odd n.
// CHECK-LABEL: func.func @int4_short_last_block
// CHECK-DAG: %[[WHOLE:.+]] = arith.constant 2048 : index
// CHECK-DAG: %[[C8:.+]] = arith.constant 8 : index
// CHECK-DAG: %[[C2:.+]] = arith.constant 2 : index
// CHECK-DAG: %[[C32:.+]] = arith.constant 32 : index
// CHECK-DAG: %[[C64:.+]] = arith.constant 64 : index
// CHECK-DAG: %[[C1:.+]] = arith.constant 1 : index
// CHECK: ^bb0(%{{.+}}: f32, %{{.+}}: f32):
// CHECK-NEXT: %[[N:.+]] = linalg.index 1 : index
// CHECK-NEXT: %[[KI:.+]] = linalg.index 2 : index
// CHECK-NEXT: %[[NB:.+]] = arith.divui %[[N]], %[[C64]] : index
// CHECK-NEXT: %[[COL:.+]] = arith.remui %[[N]], %[[C64]] : index
// CHECK-NEXT: %[[I:.+]] = arith.remui %[[COL]], %[[C32]] : index
// CHECK-NEXT: %[[HIGH:.+]] = arith.cmpi uge, %[[COL]], %[[C32]] : index
// CHECK-NEXT: %[[TAIL:.+]] = arith.cmpi uge, %[[N]], %[[C64]] : index
// CHECK-NEXT: %[[PAIR:.+]] = arith.divui %[[COL]], %[[C2]] : index
// CHECK-NEXT: %[[PAR:.+]] = arith.remui %[[COL]], %[[C2]] : index
// CHECK-NEXT: %[[ODD:.+]] = arith.cmpi eq, %[[PAR]], %[[C1]] : index
// CHECK-NEXT: %[[IB:.+]] = arith.select %[[TAIL]], %[[PAIR]], %[[I]] : index
// CHECK-NEXT: %[[HI:.+]] = arith.select %[[TAIL]], %[[ODD]], %[[HIGH]] : i1
// CHECK-NEXT: %[[KB:.+]] = arith.select %[[TAIL]], %[[C8]], %[[C32]] : index
// CHECK-NEXT: %[[B0:.+]] = arith.muli %[[NB]], %[[WHOLE]] : index
// CHECK-NEXT: %[[B1:.+]] = arith.muli %[[KI]], %[[KB]] : index
// CHECK-NEXT: %[[B2:.+]] = arith.addi %[[B0]], %[[B1]] : index
// CHECK-NEXT: %[[BYTE:.+]] = arith.addi %[[B2]], %[[IB]] : index
// CHECK-NEXT: %[[ROW:.+]] = arith.divui %[[BYTE]], %[[C32]] : index
// CHECK-NEXT: %[[AT:.+]] = arith.remui %[[BYTE]], %[[C32]] : index
// CHECK-NEXT: tensor.extract %{{.+}}[%[[ROW]], %[[AT]]] : tensor<80x32xi8>
// CHECK: arith.select %[[HI]]
func.func @int4_short_last_block(%x: tensor<2x64xf32>, %w: tensor<80x32xi8>, %sz: tensor<2x80x2xf32>, %e: tensor<2x80xf32>) -> tensor<2x80xf32> {
  %y = flex.quant_matmul {format = "int4_cpu", group_size = 32 : i64, layout = 2 : i64}
      ins(%x, %w, %sz : tensor<2x64xf32>, tensor<80x32xi8>, tensor<2x80x2xf32>) outs(%e : tensor<2x80xf32>) -> tensor<2x80xf32>
  return %y : tensor<2x80xf32>
}
