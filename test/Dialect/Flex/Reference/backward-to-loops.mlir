// RUN: flex-opt %s -split-input-file \
// RUN:   --one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map" \
// RUN:   --flex-to-loops | FileCheck %s
// RUN: not flex-opt %s -split-input-file --flex-to-loops 2>&1 | FileCheck %s --check-prefix=ERR

// The scalar reference of flex.attention_backward: loops over (b, hk), then
// over the G query heads of the kv head, the rows m and the keys n.

// CHECK-LABEL: func.func @gqa_bias_causal
// CHECK-SAME: (%[[Q:[^:]+]]: memref<1x4x16x8xf32>, %[[K:[^:]+]]: memref<1x2x16x8xf32>, %[[V:[^:]+]]: memref<1x2x16x4xf32>, %[[O:[^:]+]]: memref<1x4x16x4xf32>, %[[L:[^:]+]]: memref<1x4x16xf32>, %[[DO:[^:]+]]: memref<1x4x16x4xf32>, %[[GL:[^:]+]]: memref<1x4x16xf32>, %[[BIAS:[^:]+]]: memref<4x16xf32>, %[[DQ:[^:]+]]: memref<1x4x16x8xf32>, %[[DK:[^:]+]]: memref<1x2x16x8xf32>, %[[DV:[^:]+]]: memref<1x2x16x4xf32>, %[[DB:[^:]+]]: memref<4x16xf32>)
// Inits are accumulated into in place.
// CHECK-NOT: memref.copy
// CHECK: scf.for %[[B:[^ ]+]] = %{{.+}} to %{{.+}} step
// CHECK: scf.for %[[HK:[^ ]+]] = %{{.+}} to %{{.+}} step
// CHECK-DAG: %[[C0:.+]] = arith.constant 0 : index
// CHECK-DAG: %[[M:.+]] = arith.constant 16 : index
// CHECK-DAG: %[[E:.+]] = arith.constant 8 : index
// CHECK-DAG: %[[EV:.+]] = arith.constant 4 : index
// CHECK-DAG: %[[G:.+]] = arith.constant 2 : index
// CHECK-DAG: %[[ZERO:.+]] = arith.constant 0.000000e+00 : f32
// CHECK-DAG: %[[NEGINF:.+]] = arith.constant 0xFF800000 : f32
// CHECK-DAG: %[[LN2:.+]] = arith.constant 0.693147182 : f32
// CHECK-DAG: %[[INVLN2:.+]] = arith.constant 1.44269502 : f32
// CHECK-DAG: %[[SCALE:.+]] = arith.constant 1.250000e-01 : f32
// CHECK: %[[DQACC:.+]] = memref.alloc(%[[E]]) : memref<?xf32>
// Query head h = hk * G + g.
// CHECK: scf.for %[[GI:[^ ]+]] = %{{.+}} to %[[G]]
// CHECK:   %[[HG:.+]] = arith.muli %[[HK]], %[[G]] : index
// CHECK:   %[[H:.+]] = arith.addi %[[HG]], %[[GI]] : index
// CHECK:   scf.for %[[MI:[^ ]+]] = %{{.+}} to %[[M]]
// lse in natural log units; grad_logsumexp / ln 2.
// CHECK:     %[[L2:.+]] = memref.load %[[L]][%[[B]], %[[H]], %[[MI]]]
// CHECK:     %[[LSE:.+]] = arith.mulf %[[L2]], %[[LN2]] : f32
// CHECK:     %[[FIN:.+]] = arith.cmpf one, %[[LSE]], %[[NEGINF]] : f32
// CHECK:     %[[GL2:.+]] = memref.load %[[GL]][%[[B]], %[[H]], %[[MI]]]
// CHECK:     %[[GLN:.+]] = arith.mulf %[[GL2]], %[[INVLN2]] : f32
// delta = sum_e grad_out * out.
// CHECK:     %[[DELTA:.+]] = scf.for %[[DE:[^ ]+]] = %{{.+}} to %[[EV]] step %{{.+}} iter_args(%[[DA:.+]] = %[[ZERO]]) -> (f32) {
// CHECK:       %[[DOV:.+]] = memref.load %[[DO]][%[[B]], %[[H]], %[[MI]], %[[DE]]]
// CHECK:       %[[OV:.+]] = memref.load %[[O]][%[[B]], %[[H]], %[[MI]], %[[DE]]]
// CHECK:       %[[PR:.+]] = arith.mulf %[[DOV]], %[[OV]] : f32
// CHECK:       arith.addf %[[DA]], %[[PR]] : f32
// grad_query row accumulator starts from the init.
// CHECK:     scf.for %[[E1:[^ ]+]] = %{{.+}} to %[[E]]
// CHECK:       %[[X:.+]] = memref.load %[[DQ]][%[[B]], %[[H]], %[[MI]], %[[E1]]]
// CHECK:       memref.store %[[X]], %[[DQACC]][%[[E1]]]
// CHECK:     scf.for %[[NI:[^ ]+]] = %{{.+}} to %{{.+}} step
// s = scale * q . k
// CHECK:       %[[DOT:.+]] = scf.for
// CHECK:         memref.load %[[Q]][%[[B]], %[[H]], %[[MI]], %{{.+}}]
// CHECK:         memref.load %[[K]][%[[C0]], %[[HK]], %[[NI]], %{{.+}}]
// CHECK:       %[[S:.+]] = arith.mulf %[[DOT]], %[[SCALE]] : f32
// CHECK:       %[[BV:.+]] = memref.load %[[BIAS]][%[[H]], %[[NI]]]
// CHECK:       %[[S1:.+]] = arith.addf %[[S]], %[[BV]] : f32
// CHECK:       %[[KEEP:.+]] = arith.cmpi sge, %[[MI]], %[[NI]] : index
// CHECK:       scf.if %[[KEEP]] {
// p = exp(s' - lse), 0 on a fully masked row.
// CHECK:         %[[D:.+]] = arith.subf %[[S1]], %[[LSE]] : f32
// CHECK:         %[[PE:.+]] = math.exp %[[D]] : f32
// CHECK:         %[[P:.+]] = arith.select %[[FIN]], %[[PE]], %[[ZERO]] : f32
// grad_value += p * grad_out, dp = grad_out . v in the same loop.
// CHECK:         %[[DP:.+]] = scf.for %[[VE:[^ ]+]] = %{{.+}} to %[[EV]] step %{{.+}} iter_args(%[[DPA:.+]] = %[[ZERO]]) -> (f32) {
// CHECK:           %[[GO:.+]] = memref.load %[[DO]][%[[B]], %[[H]], %[[MI]], %[[VE]]]
// CHECK:           %[[VV:.+]] = memref.load %[[V]][%[[C0]], %[[HK]], %[[NI]], %[[VE]]]
// CHECK:           %[[PG:.+]] = arith.mulf %[[P]], %[[GO]] : f32
// CHECK:           %[[DVO:.+]] = memref.load %[[DV]][%[[C0]], %[[HK]], %[[NI]], %[[VE]]]
// CHECK:           %[[DVN:.+]] = arith.addf %[[DVO]], %[[PG]] : f32
// CHECK:           memref.store %[[DVN]], %[[DV]][%[[C0]], %[[HK]], %[[NI]], %[[VE]]]
// CHECK:           %[[GV:.+]] = arith.mulf %[[GO]], %[[VV]] : f32
// CHECK:           arith.addf %[[DPA]], %[[GV]] : f32
// ds = p * (dp - delta + gl)
// CHECK:         %[[T0:.+]] = arith.subf %[[DP]], %[[DELTA]] : f32
// CHECK:         %[[T1:.+]] = arith.addf %[[T0]], %[[GLN]] : f32
// CHECK:         %[[DS:.+]] = arith.mulf %[[P]], %[[T1]] : f32
// joint inlined: grad_score = 2 * ds, bias gradient ds.
// CHECK:         %[[TWO:.+]] = arith.constant 2.000000e+00 : f32
// CHECK:         %[[GS:.+]] = arith.mulf %[[DS]], %[[TWO]] : f32
// CHECK:         %[[SGS:.+]] = arith.mulf %[[SCALE]], %[[GS]] : f32
// CHECK:         scf.for %[[QE:[^ ]+]] = %{{.+}} to %[[E]]
// CHECK:           %[[KV:.+]] = memref.load %[[K]][%[[C0]], %[[HK]], %[[NI]], %[[QE]]]
// CHECK:           %[[QV:.+]] = memref.load %[[Q]][%[[B]], %[[H]], %[[MI]], %[[QE]]]
// CHECK:           %[[QA:.+]] = memref.load %[[DQACC]][%[[QE]]]
// CHECK:           %[[QK:.+]] = arith.mulf %[[SGS]], %[[KV]] : f32
// CHECK:           %[[QA2:.+]] = arith.addf %[[QA]], %[[QK]] : f32
// CHECK:           memref.store %[[QA2]], %[[DQACC]][%[[QE]]]
// CHECK:           %[[KQ:.+]] = arith.mulf %[[SGS]], %[[QV]] : f32
// CHECK:           %[[DKO:.+]] = memref.load %[[DK]][%[[C0]], %[[HK]], %[[NI]], %[[QE]]]
// CHECK:           %[[DKN:.+]] = arith.addf %[[DKO]], %[[KQ]] : f32
// CHECK:           memref.store %[[DKN]], %[[DK]][%[[C0]], %[[HK]], %[[NI]], %[[QE]]]
// Scatter-add into the capture gradient, skipped out of bounds.
// CHECK:         %[[IN0:.+]] = arith.cmpi ult, %[[H]], %{{.+}} : index
// CHECK:         %[[IN1:.+]] = arith.cmpi ult, %[[NI]], %{{.+}} : index
// CHECK:         %[[IN:.+]] = arith.andi %{{.+}}, %[[IN1]] : i1
// CHECK:         scf.if %[[IN]] {
// CHECK:           %[[BO:.+]] = memref.load %[[DB]][%[[H]], %[[NI]]]
// CHECK:           %[[BN:.+]] = arith.addf %[[BO]], %[[DS]] : f32
// CHECK:           memref.store %[[BN]], %[[DB]][%[[H]], %[[NI]]]
// grad_query row stored once.
// CHECK:     scf.for %[[E2:[^ ]+]] = %{{.+}} to %[[E]]
// CHECK:       %[[Y:.+]] = memref.load %[[DQACC]][%[[E2]]]
// CHECK:       memref.store %[[Y]], %[[DQ]][%[[B]], %[[H]], %[[MI]], %[[E2]]]
// CHECK-NOT: flex.attention_backward
// CHECK: return
func.func @gqa_bias_causal(%q: tensor<1x4x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x4xf32>, %o: tensor<1x4x16x4xf32>, %lse: tensor<1x4x16xf32>, %do: tensor<1x4x16x4xf32>, %glse: tensor<1x4x16xf32>, %bias: tensor<4x16xf32>, %dq0: tensor<1x4x16x8xf32>, %dk0: tensor<1x2x16x8xf32>, %dv0: tensor<1x2x16x4xf32>, %db0: tensor<4x16xf32>) -> (tensor<1x4x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x4xf32>, tensor<4x16xf32>) {
  %r:4 = flex.attention_backward
      ins(%q, %k, %v, %o, %lse, %do : tensor<1x4x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x4xf32>, tensor<1x4x16x4xf32>, tensor<1x4x16xf32>, tensor<1x4x16x4xf32>)
      grad_logsumexp(%glse : tensor<1x4x16xf32>)
      captures(%bias : tensor<4x16xf32>)
      outs(%dq0, %dk0, %dv0 : tensor<1x4x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x4xf32>)
      capture_grads(%db0 : tensor<4x16xf32>) grad_captures [0]
      scale(0.125)
      score_mod {
      ^bb0(%s: f32, %b: index, %h: index, %m: index, %n: index):
        %x = tensor.extract %bias[%h, %n] : tensor<4x16xf32>
        %t = arith.addf %s, %x : f32
        flex.yield %t : f32
      } mask_mod {
      ^bb0(%b: index, %h: index, %m: index, %n: index):
        %c = arith.cmpi sge, %m, %n : index
        flex.yield %c : i1
      } joint {
      ^bb0(%s: f32, %b: index, %h: index, %m: index, %n: index, %g: f32):
        %two = arith.constant 2.0 : f32
        %gs = arith.mulf %g, %two : f32
        flex.yield %gs, %g, %h, %n : f32, f32, index, index
      } -> tensor<1x4x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x4xf32>, tensor<4x16xf32>
  return %r#0, %r#1, %r#2, %r#3 : tensor<1x4x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x4xf32>, tensor<4x16xf32>
}

// -----

// f16: every point kept (no mask, no scatter, identity joint); grad_query
// rows accumulated in f32 and rounded once, each grad_key/grad_value update
// added in f32 and rounded to f16; a broadcast kv batch reads batch 0.
// CHECK-LABEL: func.func @f16_broadcast
// CHECK-SAME: (%[[Q:[^:]+]]: memref<2x2x4x8xf16>, %[[K:[^:]+]]: memref<1x2x4x8xf16>
// CHECK-SAME: %[[DQ:[^:]+]]: memref<2x2x4x8xf16>, %[[DK:[^:]+]]: memref<1x2x4x8xf16>, %[[DV:[^:]+]]: memref<1x2x4x8xf16>)
// CHECK: scf.for %[[B:[^ ]+]] =
// CHECK: scf.for %[[HK:[^ ]+]] =
// CHECK-DAG: %[[C0:.+]] = arith.constant 0 : index
// CHECK: %[[DQACC:.+]] = memref.alloc(%{{.+}}) : memref<?xf32>
// CHECK: memref.load %[[DQ]]
// CHECK-NEXT: arith.extf %{{.+}} : f16 to f32
// CHECK-NOT: scf.if
// CHECK: memref.load %[[K]][%[[C0]], %[[HK]]
// CHECK: math.exp
// CHECK: memref.load %[[DV]][%[[C0]], %[[HK]]
// CHECK-NEXT: arith.extf %{{.+}} : f16 to f32
// CHECK-NEXT: arith.addf %{{.+}}, %{{.+}} : f32
// CHECK-NEXT: arith.truncf %{{.+}} : f32 to f16
// CHECK: memref.load %[[DK]][%[[C0]], %[[HK]]
// CHECK-NEXT: arith.extf %{{.+}} : f16 to f32
// CHECK-NEXT: arith.addf %{{.+}}, %{{.+}} : f32
// CHECK-NEXT: arith.truncf %{{.+}} : f32 to f16
// CHECK: memref.load %[[DQACC]]
// CHECK-NEXT: arith.truncf %{{.+}} : f32 to f16
// CHECK-NEXT: memref.store %{{.+}}, %[[DQ]][%[[B]]
func.func @f16_broadcast(%q: tensor<2x2x4x8xf16>, %k: tensor<1x2x4x8xf16>, %v: tensor<1x2x4x8xf16>, %o: tensor<2x2x4x8xf16>, %lse: tensor<2x2x4xf32>, %do: tensor<2x2x4x8xf16>, %dq0: tensor<2x2x4x8xf16>, %dk0: tensor<1x2x4x8xf16>, %dv0: tensor<1x2x4x8xf16>) -> (tensor<2x2x4x8xf16>, tensor<1x2x4x8xf16>, tensor<1x2x4x8xf16>) {
  %r:3 = flex.attention_backward
      ins(%q, %k, %v, %o, %lse, %do : tensor<2x2x4x8xf16>, tensor<1x2x4x8xf16>, tensor<1x2x4x8xf16>, tensor<2x2x4x8xf16>, tensor<2x2x4xf32>, tensor<2x2x4x8xf16>)
      outs(%dq0, %dk0, %dv0 : tensor<2x2x4x8xf16>, tensor<1x2x4x8xf16>, tensor<1x2x4x8xf16>)
      scale(0.5) -> tensor<2x2x4x8xf16>, tensor<1x2x4x8xf16>, tensor<1x2x4x8xf16>
  return %r#0, %r#1, %r#2 : tensor<2x2x4x8xf16>, tensor<1x2x4x8xf16>, tensor<1x2x4x8xf16>
}

// -----

// ERR: error: 'flex.attention_backward' op flex-to-loops expects memref operands; run one-shot-bufferize first
func.func @on_tensors(%q: tensor<1x1x4x8xf32>, %o: tensor<1x1x4x8xf32>, %l: tensor<1x1x4xf32>) -> tensor<1x1x4x8xf32> {
  %r:3 = flex.attention_backward ins(%q, %q, %q, %o, %l, %o : tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4xf32>, tensor<1x1x4x8xf32>)
      outs(%q, %q, %q : tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>) scale(1.0)
      -> tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>
  return %r#0 : tensor<1x1x4x8xf32>
}
