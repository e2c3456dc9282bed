// RUN: flex-opt %s -split-input-file -flex-to-flash="vectorize=false split-keys-tasks=8" -canonicalize -cse | FileCheck %s
// RUN: flex-opt %s -split-input-file -flex-to-flash="vectorize=false" -canonicalize -cse | FileCheck %s --check-prefix=NOSPLIT

// Decode (M = 1) with 2 (b, h) row tiles < 8 tasks: the 5 key blocks of 128
// are split into 2 chunks, [s * 5 / 2, (s + 1) * 5 / 2), merged after the
// forall.
// CHECK-LABEL: func.func @decode_split
// CHECK-DAG: %[[C2:.*]] = arith.constant 2 : index
// CHECK-DAG: %[[C5:.*]] = arith.constant 5 : index
// CHECK: %[[P:.*]]:3 = scf.forall (%[[H:.*]], %[[S:.*]]) in (2, 2) shared_outs({{.*}}) -> (tensor<1x2x2x1xf32>, tensor<1x2x2x1xf32>, tensor<1x2x2x1x16xf32>)
// CHECK: %[[LO:.*]] = arith.muli %[[S]], %[[C5]]
// CHECK: %[[FIRST:.*]] = arith.divui %[[LO]], %[[C2]]
// CHECK: %[[LAST:.*]] = arith.divui %{{.*}}, %[[C2]]
// CHECK: %[[ST:.*]]:3 = scf.for %{{.*}} = %[[FIRST]] to %[[LAST]]
// CHECK: scf.forall.in_parallel
// CHECK-NEXT: tensor.parallel_insert_slice %[[ST]]#0 into %{{.*}}[0, %[[H]], %[[S]], 0] [1, 1, 1, 1]
// CHECK-NEXT: tensor.parallel_insert_slice %[[ST]]#1 into %{{.*}}[0, %[[H]], %[[S]], 0] [1, 1, 1, 1]
// CHECK-NEXT: tensor.parallel_insert_slice %[[ST]]#2 into %{{.*}}[0, %[[H]], %[[S]], 0, 0] [1, 1, 1, 1, 16]
// CHECK: flex.key_chunks = 2
// Merge: row max over chunks, then exp(mx_s - mx) weights (0 for -inf).
// CHECK: %[[MX:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%[[P]]#0 : tensor<1x2x2x1xf32>)
// CHECK: arith.maximumf
// CHECK: %[[L:.*]] = linalg.generic {{.*}} ins(%[[P]]#0, %[[P]]#1, %[[MX]] :
// CHECK: arith.cmpf oeq
// CHECK: math.exp
// CHECK: arith.select
// CHECK: %[[ACC:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%[[P]]#0, %[[P]]#2, %[[MX]] :
// CHECK: %[[OUT:.*]] = linalg.generic {{.*}} ins(%[[ACC]], %[[L]], %[[MX]] :
// CHECK: arith.divf
// CHECK: %[[LSE:.*]] = linalg.generic {{.*}} ins(%[[MX]], %[[L]] :
// CHECK: math.log
// CHECK: return %[[OUT]], %[[LSE]]
// NOSPLIT-LABEL: func.func @decode_split
// NOSPLIT-NOT: flex.key_chunks
// NOSPLIT: return
func.func @decode_split(%q: tensor<1x2x1x16xf32>, %k: tensor<1x1x600x16xf32>, %v: tensor<1x1x600x16xf32>) -> (tensor<1x2x1x16xf32>, tensor<1x2x1xf32>) {
  %o = tensor.empty() : tensor<1x2x1x16xf32>
  %l = tensor.empty() : tensor<1x2x1xf32>
  %r:2 = flex.attention ins(%q, %k, %v : tensor<1x2x1x16xf32>, tensor<1x1x600x16xf32>, tensor<1x1x600x16xf32>)
      outs(%o : tensor<1x2x1x16xf32>) logsumexp(%l : tensor<1x2x1xf32>)
      scale(2.500000000e-01)
      -> tensor<1x2x1x16xf32>, tensor<1x2x1xf32>
  return %r#0, %r#1 : tensor<1x2x1x16xf32>, tensor<1x2x1xf32>
}

// -----

// 8 (b, h) row tiles already fill 8 tasks: no split.
// CHECK-LABEL: func.func @many_heads_no_split
// CHECK: scf.forall (%{{.*}}) in (8)
// CHECK-NOT: flex.key_chunks
// CHECK: return
func.func @many_heads_no_split(%q: tensor<1x8x1x16xf32>, %k: tensor<1x8x600x16xf32>, %v: tensor<1x8x600x16xf32>) -> tensor<1x8x1x16xf32> {
  %o = tensor.empty() : tensor<1x8x1x16xf32>
  %r = flex.attention ins(%q, %k, %v : tensor<1x8x1x16xf32>, tensor<1x8x600x16xf32>, tensor<1x8x600x16xf32>)
      outs(%o : tensor<1x8x1x16xf32>) scale(2.500000000e-01)
      -> tensor<1x8x1x16xf32>
  return %r : tensor<1x8x1x16xf32>
}

// -----

// Prefill-sized M (> 4): no split.
// CHECK-LABEL: func.func @prefill_no_split
// CHECK-NOT: flex.key_chunks
// CHECK: return
func.func @prefill_no_split(%q: tensor<1x1x8x16xf32>, %k: tensor<1x1x600x16xf32>, %v: tensor<1x1x600x16xf32>) -> tensor<1x1x8x16xf32> {
  %o = tensor.empty() : tensor<1x1x8x16xf32>
  %r = flex.attention ins(%q, %k, %v : tensor<1x1x8x16xf32>, tensor<1x1x600x16xf32>, tensor<1x1x600x16xf32>)
      outs(%o : tensor<1x1x8x16xf32>) scale(2.500000000e-01)
      -> tensor<1x1x8x16xf32>
  return %r : tensor<1x1x8x16xf32>
}
