// RUN: flex-opt %s -split-input-file \
// RUN:   --one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map" \
// RUN:   --flex-to-loops | FileCheck %s
// RUN: not flex-opt %s -split-input-file --flex-to-loops 2>&1 | FileCheck %s --check-prefix=ERR

// The scalar reference: one loop per (b, h, m) row, then one online-softmax
// pass over n with the dot over the whole E, score_mod before the mask.

// CHECK-LABEL: func.func @causal_bias_gqa
// CHECK-SAME: (%[[Q:[^:]+]]: memref<1x4x16x8xf32>, %[[K:[^:]+]]: memref<1x2x32x8xf32>, %[[V:[^:]+]]: memref<1x2x32x4xf32>, %[[BIAS:[^:]+]]: memref<4xf32>)
// CHECK-DAG: %[[O:.+]] = memref.alloc() {{.*}}: memref<1x4x16x4xf32>
// CHECK-DAG: %[[L:.+]] = memref.alloc() {{.*}}: memref<1x4x16xf32>
// CHECK-DAG: %[[X:.+]] = memref.alloc() {{.*}}: memref<1x4x16xf32>
// Inits are written, never copied.
// CHECK-NOT: memref.copy
// CHECK: scf.for %[[B:[^ ]+]] = %{{.+}} to %{{.+}} step
// CHECK: scf.for %[[H:[^ ]+]] = %{{.+}} to %{{.+}} step
// CHECK: scf.for %[[M:[^ ]+]] = %{{.+}} to %{{.+}} step
// CHECK-DAG: %[[C0:.+]] = arith.constant 0 : index
// CHECK-DAG: %[[E:.+]] = arith.constant 8 : index
// CHECK-DAG: %[[N:.+]] = arith.constant 32 : index
// CHECK-DAG: %[[EV:.+]] = arith.constant 4 : index
// GQA: kv head = h / (Hq / Hkv).
// CHECK-DAG: %[[G:.+]] = arith.constant 2 : index
// CHECK-DAG: %[[KH:.+]] = arith.divui %[[H]], %[[G]] : index
// CHECK-DAG: %[[NEGINF:.+]] = arith.constant 0xFF800000 : f32
// CHECK-DAG: %[[ZERO:.+]] = arith.constant 0.000000e+00 : f32
// CHECK-DAG: %[[ONE:.+]] = arith.constant 1.000000e+00 : f32
// CHECK-DAG: %[[SCALE:.+]] = arith.constant 1.250000e-01 : f32
// CHECK: %[[ACC:.+]] = memref.alloc(%[[EV]]) : memref<?xf32>
// CHECK: scf.for %{{.+}} = %{{.+}} to %[[EV]]
// CHECK:   memref.store %[[ZERO]], %[[ACC]]
// CHECK: %[[ROW:.+]]:2 = scf.for %[[NI:[^ ]+]] = %{{.+}} to %[[N]] step %{{.+}} iter_args(%[[MX:.+]] = %[[NEGINF]], %[[SUM:.+]] = %[[ZERO]]) -> (f32, f32) {
// Dot over the whole E.
// CHECK:   %[[DOT:.+]] = scf.for %[[EI:[^ ]+]] = %{{.+}} to %[[E]] step %{{.+}} iter_args(%[[DA:.+]] = %[[ZERO]]) -> (f32) {
// CHECK:     %[[QV:.+]] = memref.load %[[Q]][%[[B]], %[[H]], %[[M]], %[[EI]]]
// CHECK:     %[[KV:.+]] = memref.load %[[K]][%[[C0]], %[[KH]], %[[NI]], %[[EI]]]
// CHECK:     %[[P:.+]] = arith.mulf %[[QV]], %[[KV]] : f32
// CHECK:     %[[DS:.+]] = arith.addf %[[DA]], %[[P]] : f32
// CHECK:     scf.yield %[[DS]] : f32
// CHECK:   %[[S:.+]] = arith.mulf %[[DOT]], %[[SCALE]] : f32
// score_mod inlined first (it sees the scaled score) ...
// CHECK:   %[[BV:.+]] = memref.load %[[BIAS]][%[[H]]] : memref<4xf32>
// CHECK:   %[[S1:.+]] = arith.addf %[[S]], %[[BV]] : f32
// ... then the mask selects -inf.
// CHECK:   %[[KEEP:.+]] = arith.cmpi sge, %[[M]], %[[NI]] : index
// CHECK:   %[[NI2:.+]] = arith.constant 0xFF800000 : f32
// CHECK:   %[[S2:.+]] = arith.select %[[KEEP]], %[[S1]], %[[NI2]] : f32
// Online softmax: running max by compare/select, -inf guard.
// CHECK:   %[[GT:.+]] = arith.cmpf ugt, %[[S2]], %[[MX]] : f32
// CHECK:   %[[MN0:.+]] = arith.select %[[GT]], %[[S2]], %[[MX]] : f32
// A NaN running max is kept (a later -inf must not replace it).
// CHECK:   %[[ISNAN:.+]] = arith.cmpf uno, %[[MX]], %[[MX]] : f32
// CHECK:   %[[MN:.+]] = arith.select %[[ISNAN]], %[[MX]], %[[MN0]] : f32
// CHECK:   %[[ALLM:.+]] = arith.cmpf oeq, %[[MN]], %[[NEGINF]] : f32
// CHECK:   %[[D:.+]] = arith.subf %[[MX]], %[[MN]] : f32
// CHECK:   %[[CE:.+]] = math.exp %[[D]] : f32
// CHECK:   %[[CORR:.+]] = arith.select %[[ALLM]], %[[ONE]], %[[CE]] : f32
// CHECK:   %[[D2:.+]] = arith.subf %[[S2]], %[[MN]] : f32
// CHECK:   %[[PE:.+]] = math.exp %[[D2]] : f32
// CHECK:   %[[PP:.+]] = arith.select %[[ALLM]], %[[ZERO]], %[[PE]] : f32
// CHECK:   %[[SC:.+]] = arith.mulf %[[SUM]], %[[CORR]] : f32
// CHECK:   %[[NS:.+]] = arith.addf %[[SC]], %[[PP]] : f32
// CHECK:   scf.for %[[EJ:[^ ]+]] = %{{.+}} to %[[EV]]
// CHECK:     %[[A:.+]] = memref.load %[[ACC]][%[[EJ]]]
// CHECK:     %[[VV:.+]] = memref.load %[[V]][%[[C0]], %[[KH]], %[[NI]], %[[EJ]]]
// CHECK-DAG: %[[PV:.+]] = arith.mulf %[[PP]], %[[VV]] : f32
// CHECK-DAG: %[[AC:.+]] = arith.mulf %[[A]], %[[CORR]] : f32
// CHECK:     %[[U:.+]] = arith.addf %[[AC]], %[[PV]] : f32
// CHECK:     memref.store %[[U]], %[[ACC]][%[[EJ]]]
// CHECK:   scf.yield %[[MN]], %[[NS]] : f32, f32
// Normalization; a fully masked row gives 0.
// CHECK: %[[RM:.+]] = arith.cmpf oeq, %[[ROW]]#0, %[[NEGINF]] : f32
// CHECK: scf.for %[[EK:[^ ]+]] = %{{.+}} to %[[EV]]
// CHECK:   %[[A2:.+]] = memref.load %[[ACC]][%[[EK]]]
// CHECK:   %[[DV:.+]] = arith.divf %[[A2]], %[[ROW]]#1 : f32
// CHECK:   %[[OV:.+]] = arith.select %[[RM]], %[[ZERO]], %[[DV]] : f32
// CHECK:   memref.store %[[OV]], %[[O]][%[[B]], %[[H]], %[[M]], %[[EK]]]
// logsumexp = (mx + log l) / ln 2, -inf for a masked row; max = mx / ln 2.
// CHECK: %[[INVLN2:.+]] = arith.constant 1.44269502 : f32
// CHECK: %[[LOG:.+]] = math.log %[[ROW]]#1 : f32
// CHECK: %[[LSE:.+]] = arith.addf %[[ROW]]#0, %[[LOG]] : f32
// CHECK: %[[LSE2:.+]] = arith.mulf %[[LSE]], %[[INVLN2]] : f32
// CHECK: %[[LSE3:.+]] = arith.select %[[RM]], %[[NEGINF]], %[[LSE2]] : f32
// CHECK: memref.store %[[LSE3]], %[[L]][%[[B]], %[[H]], %[[M]]]
// CHECK: %[[MXL:.+]] = arith.mulf %[[ROW]]#0, %[[INVLN2]] : f32
// CHECK: memref.store %[[MXL]], %[[X]][%[[B]], %[[H]], %[[M]]]
// CHECK-NOT: memref.dealloc
// CHECK-NOT: flex.attention
// CHECK: return %[[O]], %[[L]], %[[X]]
func.func @causal_bias_gqa(%q: tensor<1x4x16x8xf32>, %k: tensor<1x2x32x8xf32>, %v: tensor<1x2x32x4xf32>, %bias: tensor<4xf32>) -> (tensor<1x4x16x4xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) {
  %o = tensor.empty() : tensor<1x4x16x4xf32>
  %l = tensor.empty() : tensor<1x4x16xf32>
  %x = tensor.empty() : tensor<1x4x16xf32>
  %r:3 = flex.attention ins(%q, %k, %v : tensor<1x4x16x8xf32>, tensor<1x2x32x8xf32>, tensor<1x2x32x4xf32>)
      captures(%bias : tensor<4xf32>)
      outs(%o : tensor<1x4x16x4xf32>) logsumexp(%l : tensor<1x4x16xf32>) max_scores(%x : tensor<1x4x16xf32>) scale(0.125)
      score_mod {
      ^bb0(%s: f32, %b: index, %h: index, %m: index, %n: index):
        %e = tensor.extract %bias[%h] : tensor<4xf32>
        %t = arith.addf %s, %e : f32
        flex.yield %t : f32
      } mask_mod {
      ^bb0(%b: index, %h: index, %m: index, %n: index):
        %c = arith.cmpi sge, %m, %n : index
        flex.yield %c : i1
      } -> tensor<1x4x16x4xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>
  return %r#0, %r#1, %r#2 : tensor<1x4x16x4xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>
}

// -----

// The tiled form on memrefs: offsets are added to the region indices and to
// the head before the GQA division (kv_group_size, not Hq/Hkv of the tile).
// CHECK-LABEL: func.func @tiled_offsets
// CHECK-SAME: (%[[Q:[^:]+]]: memref<1x2x8x8xf32>, %[[K:[^:]+]]: memref<1x4x32x8xf32>, %[[V:[^:]+]]: memref<1x4x32x8xf32>, %[[O:[^:]+]]: memref<1x2x8x8xf32>, %[[B0:[^:]+]]: index, %[[H0:[^:]+]]: index, %[[M0:[^:]+]]: index)
// CHECK: scf.for %[[B:[^ ]+]] =
// CHECK: scf.for %[[H:[^ ]+]] =
// CHECK: scf.for %[[M:[^ ]+]] =
// CHECK: %[[GH:.+]] = arith.addi %[[H]], %[[H0]] : index
// CHECK: %[[G:.+]] = arith.constant 2 : index
// CHECK: %[[KH:.+]] = arith.divui %[[GH]], %[[G]] : index
// CHECK: scf.for %[[N:[^ ]+]] =
// CHECK:   memref.load %[[Q]][%[[B]], %[[H]], %[[M]], %{{.+}}]
// CHECK:   memref.load %[[K]][%{{.+}}, %[[KH]], %[[N]], %{{.+}}]
// CHECK:   %[[GB:.+]] = arith.addi %[[B]], %[[B0]] : index
// CHECK:   %[[GH2:.+]] = arith.addi %[[H]], %[[H0]] : index
// CHECK:   %[[GM:.+]] = arith.addi %[[M]], %[[M0]] : index
// score_mod: s + (q_idx - kv_idx) with the global q_idx.
// CHECK:   %[[DIFF:.+]] = arith.subi %[[GM]], %[[N]] : index
// CHECK:   arith.index_cast %[[DIFF]]
// CHECK:   %[[KEEP:.+]] = arith.cmpi sge, %[[GM]], %[[N]] : index
// CHECK:   arith.select %[[KEEP]]
// CHECK:   memref.load %[[V]][%{{.+}}, %[[KH]], %[[N]], %{{.+}}]
// Stores use the local indices.
// CHECK: memref.store %{{.+}}, %[[O]][%[[B]], %[[H]], %[[M]], %{{.+}}]
func.func @tiled_offsets(%q: memref<1x2x8x8xf32>, %k: memref<1x4x32x8xf32>, %v: memref<1x4x32x8xf32>, %o: memref<1x2x8x8xf32>, %b0: index, %h0: index, %m0: index) {
  flex.attention ins(%q, %k, %v : memref<1x2x8x8xf32>, memref<1x4x32x8xf32>, memref<1x4x32x8xf32>)
      offsets(%b0, %h0, %m0)
      outs(%o : memref<1x2x8x8xf32>) scale(0.125) {kv_group_size = 2 : i64}
      score_mod {
      ^bb0(%s: f32, %b: index, %h: index, %m: index, %n: index):
        %d = arith.subi %m, %n : index
        %di = arith.index_cast %d : index to i64
        %df = arith.sitofp %di : i64 to f32
        %t = arith.addf %s, %df : f32
        flex.yield %t : f32
      } mask_mod {
      ^bb0(%b: index, %h: index, %m: index, %n: index):
        %c = arith.cmpi sge, %m, %n : index
        flex.yield %c : i1
      }
  return
}

// -----

// Half precision: loads are extended to f32, the output is truncated once.
// CHECK-LABEL: func.func @f16
// CHECK: scf.for
// CHECK: %[[QH:.+]] = memref.load %{{.+}} : memref<1x2x16x8xf16>
// CHECK: arith.extf %[[QH]] : f16 to f32
// CHECK: %[[KH:.+]] = memref.load %{{.+}} : memref<1x2x16x8xf16>
// CHECK: arith.extf %[[KH]] : f16 to f32
// CHECK: %[[VH:.+]] = memref.load %{{.+}} : memref<1x2x16x8xf16>
// CHECK: arith.extf %[[VH]] : f16 to f32
// CHECK: %[[OF:.+]] = arith.select
// CHECK: %[[OH:.+]] = arith.truncf %[[OF]] : f32 to f16
// CHECK: memref.store %[[OH]], %{{.+}} : memref<1x2x16x8xf16>
func.func @f16(%q: tensor<1x2x16x8xf16>, %k: tensor<1x2x16x8xf16>, %v: tensor<1x2x16x8xf16>) -> tensor<1x2x16x8xf16> {
  %o = tensor.empty() : tensor<1x2x16x8xf16>
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x16x8xf16>, tensor<1x2x16x8xf16>, tensor<1x2x16x8xf16>)
      outs(%o : tensor<1x2x16x8xf16>) scale(0.125) -> tensor<1x2x16x8xf16>
  return %r : tensor<1x2x16x8xf16>
}

// -----

// Dynamic shapes: bounds from memref.dim; a dynamic key batch is broadcast
// when it is 1 at run time; G = Hq / Hkv at run time.
// CHECK-LABEL: func.func @dynamic
// CHECK-SAME: (%[[Q:[^:]+]]: memref<?x?x?x?xf32>, %[[K:[^:]+]]: memref<?x?x?x?xf32>
// CHECK: scf.for %[[B:[^ ]+]] =
// CHECK: scf.for %[[H:[^ ]+]] =
// CHECK: scf.for %[[M:[^ ]+]] =
// CHECK: %[[ISONE:.+]] = arith.cmpi eq, %{{.+}}, %{{.+}} : index
// CHECK: %[[KB:.+]] = arith.select %[[ISONE]], %{{.+}}, %[[B]] : index
// CHECK: %[[HQ:.+]] = memref.dim %[[Q]], %{{.+}} : memref<?x?x?x?xf32>
// CHECK: %[[HKV:.+]] = memref.dim %[[K]], %{{.+}} : memref<?x?x?x?xf32>
// CHECK: %[[G:.+]] = arith.divui %[[HQ]], %[[HKV]] : index
// CHECK: %[[KH:.+]] = arith.divui %[[H]], %[[G]] : index
// CHECK: memref.load %[[K]][%[[KB]], %[[KH]], %{{.+}}, %{{.+}}]
func.func @dynamic(%q: tensor<?x?x?x?xf32>, %k: tensor<?x?x?x?xf32>, %v: tensor<?x?x?x?xf32>, %o: tensor<?x?x?x?xf32>) -> tensor<?x?x?x?xf32> {
  %r = flex.attention ins(%q, %k, %v : tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32>)
      outs(%o : tensor<?x?x?x?xf32>) scale(0.125) -> tensor<?x?x?x?xf32>
  return %r : tensor<?x?x?x?xf32>
}

// -----

// Key/value batch 1 (static) is broadcast: batch index 0.
// CHECK-LABEL: func.func @kv_batch_broadcast
// CHECK-SAME: (%[[Q:[^:]+]]: memref<4x2x16x8xf32>, %[[K:[^:]+]]: memref<1x2x16x8xf32>
// CHECK: scf.for %[[B:[^ ]+]] =
// CHECK: scf.for
// CHECK: scf.for
// CHECK-NEXT: %[[C0:.+]] = arith.constant 0 : index
// CHECK: memref.load %[[Q]][%[[B]],
// CHECK: memref.load %[[K]][%[[C0]],
func.func @kv_batch_broadcast(%q: tensor<4x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>) -> tensor<4x2x16x8xf32> {
  %o = tensor.empty() : tensor<4x2x16x8xf32>
  %r = flex.attention ins(%q, %k, %v : tensor<4x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>)
      outs(%o : tensor<4x2x16x8xf32>) scale(0.125) -> tensor<4x2x16x8xf32>
  return %r : tensor<4x2x16x8xf32>
}

// -----

// Without bufferization (second RUN line), flex-to-loops refuses tensors.
// ERR: error: 'flex.attention' op flex-to-loops expects memref operands; run one-shot-bufferize first
func.func @tensor_form(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %o: tensor<1x2x16x8xf32>) -> tensor<1x2x16x8xf32> {
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>)
      outs(%o : tensor<1x2x16x8xf32>) scale(0.125) -> tensor<1x2x16x8xf32>
  return %r : tensor<1x2x16x8xf32>
}

// -----

// Block tensors: per point, qb = m / 32 and kb = n / 32; the row
// [0 (broadcast batch), h, qb] of each list is scanned for kb with the
// count clamped to [0, NB]; keep = full || (partial && mask_mod).
// CHECK-LABEL: func.func @block_tensors
// CHECK-SAME: %[[NUM:[^:]+]]: memref<1x4x4xi32>, %[[IDX:[^:]+]]: memref<1x4x4x2xi32>, %[[FNUM:[^:]+]]: memref<1x4x4xi32>, %[[FIDX:[^:]+]]: memref<1x4x4x2xi32>)
// CHECK: scf.for %{{[^ ]+}} = %{{.+}} to %{{.+}} step
// CHECK: scf.for %[[H:[^ ]+]] = %{{.+}} to %{{.+}} step
// CHECK: scf.for %[[M:[^ ]+]] = %{{.+}} to %{{.+}} step
// CHECK: scf.for %[[N:[^ ]+]] = %{{.+}} to %{{.+}} step
// CHECK: scf.yield %{{.+}} : f32
// CHECK-NEXT: }
// CHECK-NEXT: %[[S:.+]] = arith.mulf %{{.+}}, %{{.+}} : f32
// CHECK: %[[CAUSAL:.+]] = arith.cmpi sge, %[[M]], %[[N]] : index
// CHECK: %[[QB:.+]] = arith.divui %[[M]], %[[C32:.+]] : index
// CHECK: %[[KB:.+]] = arith.divui %[[N]], %{{.+}} : index
// CHECK: %[[QBOK:.+]] = arith.cmpi ult, %[[QB]], %{{.+}} : index
// CHECK: %[[ROWOK:.+]] = arith.andi %{{.+}}, %[[QBOK]] : i1
// CHECK: %[[CNT:.+]] = scf.if %[[ROWOK]] -> (index) {
// CHECK:   %[[C:.+]] = memref.load %[[NUM]][%[[B0:.+]], %[[H]], %[[QB]]] : memref<1x4x4xi32>
// CHECK:   arith.index_cast %[[C]] : i32 to index
// CHECK: %[[LO:.+]] = arith.maxsi %[[CNT]], %{{.+}} : index
// CHECK: %[[HI:.+]] = arith.minsi %[[LO]], %[[C2:.+]] : index
// CHECK: %[[PART:.+]] = scf.for %[[J:.+]] = %{{.+}} to %[[HI]] step %{{.+}} iter_args(%[[F:.+]] = %false) -> (i1) {
// CHECK:   %[[L:.+]] = memref.load %[[IDX]][%[[B0]], %[[H]], %[[QB]], %[[J]]] : memref<1x4x4x2xi32>
// CHECK:   %[[LI:.+]] = arith.index_cast %[[L]] : i32 to index
// CHECK:   %[[EQ:.+]] = arith.cmpi eq, %[[LI]], %[[KB]] : index
// CHECK:   %[[OR:.+]] = arith.ori %[[F]], %[[EQ]] : i1
// CHECK:   scf.yield %[[OR]] : i1
// CHECK: memref.load %[[FNUM]][%{{.+}}, %[[H]], %[[QB]]]
// CHECK: %[[FULL:.+]] = scf.for
// CHECK:   memref.load %[[FIDX]][%{{.+}}, %[[H]], %[[QB]], %{{.+}}]
// CHECK: %[[PM:.+]] = arith.andi %[[PART]], %[[CAUSAL]] : i1
// CHECK: %[[KEEP:.+]] = arith.ori %[[FULL]], %[[PM]] : i1
// CHECK: arith.select %[[KEEP]], %[[S]], %{{.+}} : f32
func.func @block_tensors(%q: tensor<2x4x100x8xf32>, %k: tensor<2x4x64x8xf32>, %v: tensor<2x4x64x8xf32>, %n: tensor<1x4x4xi32>, %i: tensor<1x4x4x2xi32>, %fn: tensor<1x4x4xi32>, %fi: tensor<1x4x4x2xi32>) -> tensor<2x4x100x8xf32> {
  %o = tensor.empty() : tensor<2x4x100x8xf32>
  %r = flex.attention ins(%q, %k, %v : tensor<2x4x100x8xf32>, tensor<2x4x64x8xf32>, tensor<2x4x64x8xf32>)
      kv_blocks(%n, %i : tensor<1x4x4xi32>, tensor<1x4x4x2xi32>)
      full_kv_blocks(%fn, %fi : tensor<1x4x4xi32>, tensor<1x4x4x2xi32>)
      block_sizes [32, 32]
      outs(%o : tensor<2x4x100x8xf32>) scale(0.125)
      mask_mod {
      ^bb0(%b: index, %h: index, %m: index, %kv: index):
        %c = arith.cmpi sge, %m, %kv : index
        flex.yield %c : i1
      } -> tensor<2x4x100x8xf32>
  return %r : tensor<2x4x100x8xf32>
}

// -----

// Without mask_mod and full blocks: keep = listed (no mask_mod to combine).
// CHECK-LABEL: func.func @block_tensors_no_mask
// CHECK: %[[PART:.+]] = scf.for %{{.+}} iter_args(%{{.+}} = %false) -> (i1)
// CHECK: %[[KEEP:.+]] = arith.ori %false{{.*}}, %[[PART]] : i1
// CHECK: arith.select %[[KEEP]]
func.func @block_tensors_no_mask(%q: tensor<1x1x64x8xf32>, %k: tensor<1x1x64x8xf32>, %v: tensor<1x1x64x8xf32>, %n: tensor<1x1x2xi32>, %i: tensor<1x1x2x2xi32>) -> tensor<1x1x64x8xf32> {
  %o = tensor.empty() : tensor<1x1x64x8xf32>
  %r = flex.attention ins(%q, %k, %v : tensor<1x1x64x8xf32>, tensor<1x1x64x8xf32>, tensor<1x1x64x8xf32>)
      kv_blocks(%n, %i : tensor<1x1x2xi32>, tensor<1x1x2x2xi32>) block_sizes [32, 32]
      outs(%o : tensor<1x1x64x8xf32>) scale(0.125) -> tensor<1x1x64x8xf32>
  return %r : tensor<1x1x64x8xf32>
}
