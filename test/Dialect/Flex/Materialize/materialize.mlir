// RUN: flex-opt %s -flex-materialize -split-input-file | FileCheck %s

// Inputs are torch_mlir_flex.frontend output (trimmed). Identity modifiers
// (upstream's importer always emits them) leave the regions empty, and the
// declaration and modifier funcs are erased.

// CHECK-LABEL: func.func @no_mods(
// CHECK-SAME:    %[[Q:.+]]: tensor<1x4x16x8xf32>, %[[K:.+]]: tensor<1x4x16x8xf32>, %[[V:.+]]: tensor<1x4x16x8xf32>)
// CHECK:         %[[INIT:.+]] = tensor.empty() : tensor<1x4x16x8xf32>
// CHECK:         %[[R:.+]] = flex.attention ins(%[[Q]], %[[K]], %[[V]] : tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>)
// CHECK-SAME:      outs(%[[INIT]] : tensor<1x4x16x8xf32>) scale(0.353553385) -> tensor<1x4x16x8xf32>
// CHECK:         return %[[R]]
// CHECK-NOT:   func.func private
#map = affine_map<() -> ()>
module {
  func.func private @sdpa_score0(%arg0: tensor<f32>, %arg1: tensor<i32>, %arg2: tensor<i32>, %arg3: tensor<i32>, %arg4: tensor<i32>) -> tensor<f32> {
    return %arg0 : tensor<f32>
  }
  func.func private @sdpa_mask0(%arg0: tensor<i32>, %arg1: tensor<i32>, %arg2: tensor<i32>, %arg3: tensor<i32>) -> tensor<i1> {
    %cst = arith.constant dense<true> : tensor<i1>
    return %cst : tensor<i1>
  }
  func.func @no_mods(%arg0: tensor<1x4x16x8xf32>, %arg1: tensor<1x4x16x8xf32>, %arg2: tensor<1x4x16x8xf32>) -> tensor<1x4x16x8xf32> {
    %0:3 = call @__flex_attention_0(%arg0, %arg1, %arg2) : (tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>)
    return %0#0 : tensor<1x4x16x8xf32>
  }
  func.func private @__flex_attention_0(tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) attributes {flex.mask_mod = @sdpa_mask0, flex.num_mask_buffers = 0 : i64, flex.num_score_buffers = 0 : i64, flex.return_lse = false, flex.return_max_scores = false, flex.scale = 0.35355339059327373 : f64, flex.score_mod = @sdpa_score0}
}

// -----

// CHECK-LABEL: func.func @causal(
// CHECK:         flex.attention
// CHECK-NOT:       score_mod
// CHECK:           mask_mod {
// CHECK-NEXT:      ^bb0(%[[B:.+]]: index, %[[H:.+]]: index, %[[M:.+]]: index, %[[N:.+]]: index):
// CHECK-DAG:         %[[MI:.+]] = arith.index_cast %[[M]] : index to i32
// CHECK-DAG:         %[[NI:.+]] = arith.index_cast %[[N]] : index to i32
// CHECK:             %[[C:.+]] = arith.cmpi sge, %[[MI]], %[[NI]] : i32
// CHECK:             flex.yield %[[C]] : i1
// CHECK:         } -> tensor<1x4x16x8xf32>
// CHECK-NOT:   func.func private
#map = affine_map<() -> ()>
module {
  func.func private @sdpa_score0(%arg0: tensor<f32>, %arg1: tensor<i32>, %arg2: tensor<i32>, %arg3: tensor<i32>, %arg4: tensor<i32>) -> tensor<f32> {
    return %arg0 : tensor<f32>
  }
  func.func private @sdpa_mask0(%arg0: tensor<i32>, %arg1: tensor<i32>, %arg2: tensor<i32>, %arg3: tensor<i32>) -> tensor<i1> {
    %0 = tensor.empty() : tensor<i1>
    %1 = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = []} ins(%arg2, %arg3 : tensor<i32>, tensor<i32>) outs(%0 : tensor<i1>) {
    ^bb0(%in: i32, %in_0: i32, %out: i1):
      %2 = arith.cmpi sge, %in, %in_0 : i32
      linalg.yield %2 : i1
    } -> tensor<i1>
    return %1 : tensor<i1>
  }
  func.func @causal(%arg0: tensor<1x4x16x8xf32>, %arg1: tensor<1x4x16x8xf32>, %arg2: tensor<1x4x16x8xf32>) -> tensor<1x4x16x8xf32> {
    %0:3 = call @__flex_attention_0(%arg0, %arg1, %arg2) : (tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>)
    return %0#0 : tensor<1x4x16x8xf32>
  }
  func.func private @__flex_attention_0(tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) attributes {flex.mask_mod = @sdpa_mask0, flex.num_mask_buffers = 0 : i64, flex.num_score_buffers = 0 : i64, flex.return_lse = false, flex.return_max_scores = false, flex.scale = 0.35355339059327373 : f64, flex.score_mod = @sdpa_score0}
}

// -----

// CHECK-LABEL: func.func @softcap(
// CHECK:         flex.attention
// CHECK-SAME:      scale(0.353553385) score_mod {
// CHECK-NEXT:      ^bb0(%[[S:.+]]: f32, %{{.+}}: index, %{{.+}}: index, %{{.+}}: index, %{{.+}}: index):
// CHECK-DAG:         %[[CAP:.+]] = arith.constant 3.000000e+01 : f32
// CHECK:             %[[D:.+]] = arith.divf %[[S]], %[[CAP]] : f32
// CHECK:             %[[T:.+]] = math.tanh %[[D]] : f32
// CHECK:             %[[R:.+]] = arith.mulf %[[T]], %[[CAP]] : f32
// CHECK:             flex.yield %[[R]] : f32
// CHECK-NOT:       mask_mod
// CHECK:         } -> tensor<1x4x16x8xf32>
#map = affine_map<() -> ()>
module {
  func.func private @sdpa_score0(%arg0: tensor<f32>, %arg1: tensor<i32>, %arg2: tensor<i32>, %arg3: tensor<i32>, %arg4: tensor<i32>) -> tensor<f32> {
    %cst = arith.constant 3.000000e+01 : f32
    %0 = tensor.empty() : tensor<f32>
    %1 = linalg.generic {indexing_maps = [#map, #map], iterator_types = []} ins(%arg0 : tensor<f32>) outs(%0 : tensor<f32>) {
    ^bb0(%in: f32, %out: f32):
      %4 = arith.divf %in, %cst : f32
      linalg.yield %4 : f32
    } -> tensor<f32>
    %2 = linalg.generic {indexing_maps = [#map, #map], iterator_types = []} ins(%1 : tensor<f32>) outs(%0 : tensor<f32>) {
    ^bb0(%in: f32, %out: f32):
      %4 = math.tanh %in : f32
      linalg.yield %4 : f32
    } -> tensor<f32>
    %3 = linalg.generic {indexing_maps = [#map, #map], iterator_types = []} ins(%2 : tensor<f32>) outs(%0 : tensor<f32>) {
    ^bb0(%in: f32, %out: f32):
      %4 = arith.mulf %in, %cst : f32
      linalg.yield %4 : f32
    } -> tensor<f32>
    return %3 : tensor<f32>
  }
  func.func private @sdpa_mask0(%arg0: tensor<i32>, %arg1: tensor<i32>, %arg2: tensor<i32>, %arg3: tensor<i32>) -> tensor<i1> {
    %cst = arith.constant dense<true> : tensor<i1>
    return %cst : tensor<i1>
  }
  func.func @softcap(%arg0: tensor<1x4x16x8xf32>, %arg1: tensor<1x4x16x8xf32>, %arg2: tensor<1x4x16x8xf32>) -> tensor<1x4x16x8xf32> {
    %0:3 = call @__flex_attention_0(%arg0, %arg1, %arg2) : (tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>)
    return %0#0 : tensor<1x4x16x8xf32>
  }
  func.func private @__flex_attention_0(tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) attributes {flex.mask_mod = @sdpa_mask0, flex.num_mask_buffers = 0 : i64, flex.num_score_buffers = 0 : i64, flex.return_lse = false, flex.return_max_scores = false, flex.scale = 0.35355339059327373 : f64, flex.score_mod = @sdpa_score0}
}

// -----

// Relative bias: score + (q_idx - kv_idx).
// CHECK-LABEL: func.func @relative_bias(
// CHECK:         score_mod {
// CHECK-NEXT:      ^bb0(%[[S:.+]]: f32, %{{.+}}: index, %{{.+}}: index, %[[M:.+]]: index, %[[N:.+]]: index):
// CHECK-DAG:         %[[MI:.+]] = arith.index_cast %[[M]] : index to i32
// CHECK-DAG:         %[[NI:.+]] = arith.index_cast %[[N]] : index to i32
// CHECK:             %[[D:.+]] = arith.subi %[[MI]], %[[NI]] : i32
// CHECK:             %[[DF:.+]] = arith.sitofp %[[D]] : i32 to f32
// CHECK:             %[[R:.+]] = arith.addf %[[S]], %[[DF]] : f32
// CHECK:             flex.yield %[[R]] : f32
#map = affine_map<() -> ()>
module {
  func.func private @sdpa_score0(%arg0: tensor<f32>, %arg1: tensor<i32>, %arg2: tensor<i32>, %arg3: tensor<i32>, %arg4: tensor<i32>) -> tensor<f32> {
    %0 = tensor.empty() : tensor<i32>
    %1 = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = []} ins(%arg3, %arg4 : tensor<i32>, tensor<i32>) outs(%0 : tensor<i32>) {
    ^bb0(%in: i32, %in_0: i32, %out: i32):
      %4 = arith.subi %in, %in_0 : i32
      linalg.yield %4 : i32
    } -> tensor<i32>
    %2 = tensor.empty() : tensor<f32>
    %3 = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = []} ins(%arg0, %1 : tensor<f32>, tensor<i32>) outs(%2 : tensor<f32>) {
    ^bb0(%in: f32, %in_0: i32, %out: f32):
      %4 = arith.sitofp %in_0 : i32 to f32
      %5 = arith.addf %in, %4 : f32
      linalg.yield %5 : f32
    } -> tensor<f32>
    return %3 : tensor<f32>
  }
  func.func @relative_bias(%arg0: tensor<1x4x16x8xf32>, %arg1: tensor<1x4x16x8xf32>, %arg2: tensor<1x4x16x8xf32>) -> tensor<1x4x16x8xf32> {
    %0:3 = call @__flex_attention_0(%arg0, %arg1, %arg2) : (tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>)
    return %0#0 : tensor<1x4x16x8xf32>
  }
  func.func private @__flex_attention_0(tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) attributes {flex.num_mask_buffers = 0 : i64, flex.num_score_buffers = 0 : i64, flex.return_lse = false, flex.return_max_scores = false, flex.scale = 0.35355339059327373 : f64, flex.score_mod = @sdpa_score0}
}

// -----

// Document mask over a captured runtime tensor: doc_ids[q_idx] == doc_ids[kv_idx].
// The region reads the capture operand (the function argument) directly, at
// the index arguments themselves: their int32 casts and negative-index wraps
// are folded (indices lie in [0, 2^31)).
// CHECK-LABEL: func.func @document_mask(
// CHECK-SAME:    %[[DOC:[^:]+]]: tensor<16xi64>)
// CHECK:         flex.attention
// CHECK-SAME:      captures(%[[DOC]] : tensor<16xi64>)
// CHECK-SAME:      mask_mod {
// CHECK-NEXT:      ^bb0(%{{.+}}: index, %{{.+}}: index, %[[M:.+]]: index, %[[N:.+]]: index):
// CHECK-NEXT:        %[[DM:.+]] = tensor.extract %[[DOC]][%[[M]]] : tensor<16xi64>
// CHECK-NEXT:        %[[DN:.+]] = tensor.extract %[[DOC]][%[[N]]] : tensor<16xi64>
// CHECK-NEXT:        %[[EQ:.+]] = arith.cmpi eq, %[[DM]], %[[DN]] : i64
// CHECK-NEXT:        flex.yield %[[EQ]] : i1
#map = affine_map<() -> ()>
module {
  func.func @document_mask(%arg0: tensor<1x4x16x8xf32>, %arg1: tensor<1x4x16x8xf32>, %arg2: tensor<1x4x16x8xf32>, %arg3: tensor<16xi64>) -> tensor<1x4x16x8xf32> {
    %0:3 = call @__flex_attention_0(%arg0, %arg1, %arg2, %arg3) : (tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<16xi64>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>)
    return %0#0 : tensor<1x4x16x8xf32>
  }
  func.func private @sdpa_mask0(%arg0: tensor<i32>, %arg1: tensor<i32>, %arg2: tensor<i32>, %arg3: tensor<i32>, %arg4: tensor<16xi64>) -> tensor<i1> {
    %c0_i64 = arith.constant 0 : i64
    %c16_i64 = arith.constant 16 : i64
    %0 = tensor.empty() : tensor<i64>
    %1 = linalg.generic {indexing_maps = [#map, #map], iterator_types = []} ins(%arg2 : tensor<i32>) outs(%0 : tensor<i64>) {
    ^bb0(%in: i32, %out: i64):
      %7 = arith.extsi %in : i32 to i64
      linalg.yield %7 : i64
    } -> tensor<i64>
    %2 = linalg.generic {indexing_maps = [#map, #map], iterator_types = []} ins(%1 : tensor<i64>) outs(%0 : tensor<i64>) {
    ^bb0(%in: i64, %out: i64):
      %7 = arith.cmpi slt, %in, %c0_i64 : i64
      %8 = arith.addi %in, %c16_i64 : i64
      %9 = arith.select %7, %8, %in : i64
      %10 = arith.index_cast %9 : i64 to index
      %extracted = tensor.extract %arg4[%10] : tensor<16xi64>
      linalg.yield %extracted : i64
    } -> tensor<i64>
    %3 = linalg.generic {indexing_maps = [#map, #map], iterator_types = []} ins(%arg3 : tensor<i32>) outs(%0 : tensor<i64>) {
    ^bb0(%in: i32, %out: i64):
      %7 = arith.extsi %in : i32 to i64
      linalg.yield %7 : i64
    } -> tensor<i64>
    %4 = linalg.generic {indexing_maps = [#map, #map], iterator_types = []} ins(%3 : tensor<i64>) outs(%0 : tensor<i64>) {
    ^bb0(%in: i64, %out: i64):
      %7 = arith.cmpi slt, %in, %c0_i64 : i64
      %8 = arith.addi %in, %c16_i64 : i64
      %9 = arith.select %7, %8, %in : i64
      %10 = arith.index_cast %9 : i64 to index
      %extracted = tensor.extract %arg4[%10] : tensor<16xi64>
      linalg.yield %extracted : i64
    } -> tensor<i64>
    %5 = tensor.empty() : tensor<i1>
    %6 = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = []} ins(%2, %4 : tensor<i64>, tensor<i64>) outs(%5 : tensor<i1>) {
    ^bb0(%in: i64, %in_0: i64, %out: i1):
      %7 = arith.cmpi eq, %in, %in_0 : i64
      linalg.yield %7 : i1
    } -> tensor<i1>
    return %6 : tensor<i1>
  }
  func.func private @__flex_attention_0(tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<16xi64>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) attributes {flex.mask_mod = @sdpa_mask0, flex.num_mask_buffers = 1 : i64, flex.num_score_buffers = 0 : i64, flex.return_lse = false, flex.return_max_scores = false, flex.scale = 0.35355339059327373 : f64, flex.score_mod = @sdpa_score0}
  func.func private @sdpa_score0(%arg0: tensor<f32>, %arg1: tensor<i32>, %arg2: tensor<i32>, %arg3: tensor<i32>, %arg4: tensor<i32>) -> tensor<f32> {
    return %arg0 : tensor<f32>
  }
}

// -----

// Per-head bias captured by score_mod: score + bias[h].
// CHECK-LABEL: func.func @head_bias(
// CHECK-SAME:    %[[BIAS:[^:]+]]: tensor<4xf32>)
// CHECK:         flex.attention
// CHECK-SAME:      captures(%[[BIAS]] : tensor<4xf32>)
// CHECK-SAME:      score_mod {
// CHECK-NEXT:      ^bb0(%[[S:.+]]: f32, %{{.+}}: index, %[[H:.+]]: index, %{{.+}}: index, %{{.+}}: index):
// CHECK-NEXT:        %[[BH:.+]] = tensor.extract %[[BIAS]][%[[H]]] : tensor<4xf32>
// CHECK-NEXT:        %[[R:.+]] = arith.addf %[[S]], %[[BH]] : f32
// CHECK-NEXT:        flex.yield %[[R]] : f32
#map = affine_map<() -> ()>
module {
  func.func @head_bias(%arg0: tensor<1x4x16x8xf32>, %arg1: tensor<1x4x16x8xf32>, %arg2: tensor<1x4x16x8xf32>, %arg3: tensor<4xf32>) -> tensor<1x4x16x8xf32> {
    %0:3 = call @__flex_attention_0(%arg0, %arg1, %arg2, %arg3) : (tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<4xf32>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>)
    return %0#0 : tensor<1x4x16x8xf32>
  }
  func.func private @sdpa_score0(%arg0: tensor<f32>, %arg1: tensor<i32>, %arg2: tensor<i32>, %arg3: tensor<i32>, %arg4: tensor<i32>, %arg5: tensor<4xf32>) -> tensor<f32> {
    %c0_i64 = arith.constant 0 : i64
    %c4_i64 = arith.constant 4 : i64
    %0 = tensor.empty() : tensor<i64>
    %1 = linalg.generic {indexing_maps = [#map, #map], iterator_types = []} ins(%arg2 : tensor<i32>) outs(%0 : tensor<i64>) {
    ^bb0(%in: i32, %out: i64):
      %5 = arith.extsi %in : i32 to i64
      linalg.yield %5 : i64
    } -> tensor<i64>
    %2 = tensor.empty() : tensor<f32>
    %3 = linalg.generic {indexing_maps = [#map, #map], iterator_types = []} ins(%1 : tensor<i64>) outs(%2 : tensor<f32>) {
    ^bb0(%in: i64, %out: f32):
      %5 = arith.cmpi slt, %in, %c0_i64 : i64
      %6 = arith.addi %in, %c4_i64 : i64
      %7 = arith.select %5, %6, %in : i64
      %8 = arith.index_cast %7 : i64 to index
      %extracted = tensor.extract %arg5[%8] : tensor<4xf32>
      linalg.yield %extracted : f32
    } -> tensor<f32>
    %4 = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = []} ins(%arg0, %3 : tensor<f32>, tensor<f32>) outs(%2 : tensor<f32>) {
    ^bb0(%in: f32, %in_0: f32, %out: f32):
      %5 = arith.addf %in, %in_0 : f32
      linalg.yield %5 : f32
    } -> tensor<f32>
    return %4 : tensor<f32>
  }
  func.func private @__flex_attention_0(tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<4xf32>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) attributes {flex.num_mask_buffers = 0 : i64, flex.num_score_buffers = 1 : i64, flex.return_lse = false, flex.return_max_scores = false, flex.scale = 0.35355339059327373 : f64, flex.score_mod = @sdpa_score0}
}

// -----

// ALiBi with a constant slope table inside the modifier (the frontend emits a
// dense_resource; a dense literal here): the table is materialized before the
// op and captured, since a tensor constant inside the region would be hoisted
// out of it by any folder.
// CHECK-LABEL: func.func @alibi_const_table(
// CHECK:         %[[TBL:.+]] = arith.constant dense<[5.000000e-01, 2.500000e-01, 1.250000e-01, 6.250000e-02]> : tensor<4xf32>
// CHECK:         flex.attention
// CHECK-SAME:      captures(%[[TBL]] : tensor<4xf32>)
// CHECK-SAME:      score_mod {
// CHECK-NEXT:      ^bb0(%[[S:.+]]: f32, %{{.+}}: index, %[[H:.+]]: index, %[[M:.+]]: index, %[[N:.+]]: index):
// CHECK-DAG:         %[[MI:.+]] = arith.index_cast %[[M]] : index to i32
// CHECK-DAG:         %[[NI:.+]] = arith.index_cast %[[N]] : index to i32
// CHECK:             %[[SL:.+]] = tensor.extract %[[TBL]][%[[H]]] : tensor<4xf32>
// CHECK:             %[[D:.+]] = arith.subi %[[NI]], %[[MI]] : i32
// CHECK:             %[[DF:.+]] = arith.sitofp %[[D]] : i32 to f32
// CHECK:             %[[B:.+]] = arith.mulf %[[SL]], %[[DF]] : f32
// CHECK:             %[[R:.+]] = arith.addf %[[S]], %[[B]] : f32
// CHECK:             flex.yield %[[R]] : f32
#map = affine_map<() -> ()>
module {
  func.func @alibi_const_table(%arg0: tensor<1x4x16x8xf32>, %arg1: tensor<1x4x16x8xf32>, %arg2: tensor<1x4x16x8xf32>) -> tensor<1x4x16x8xf32> {
    %0:3 = call @__flex_attention_0(%arg0, %arg1, %arg2) : (tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>)
    return %0#0 : tensor<1x4x16x8xf32>
  }
  func.func private @sdpa_score0(%arg0: tensor<f32>, %arg1: tensor<i32>, %arg2: tensor<i32>, %arg3: tensor<i32>, %arg4: tensor<i32>) -> tensor<f32> {
    %c0_i64 = arith.constant 0 : i64
    %c4_i64 = arith.constant 4 : i64
    %cst = arith.constant dense<[5.000000e-01, 2.500000e-01, 1.250000e-01, 6.250000e-02]> : tensor<4xf32>
    %0 = tensor.empty() : tensor<i64>
    %1 = linalg.generic {indexing_maps = [#map, #map], iterator_types = []} ins(%arg2 : tensor<i32>) outs(%0 : tensor<i64>) {
    ^bb0(%in: i32, %out: i64):
      %8 = arith.extsi %in : i32 to i64
      linalg.yield %8 : i64
    } -> tensor<i64>
    %2 = tensor.empty() : tensor<f32>
    %3 = linalg.generic {indexing_maps = [#map, #map], iterator_types = []} ins(%1 : tensor<i64>) outs(%2 : tensor<f32>) {
    ^bb0(%in: i64, %out: f32):
      %8 = arith.cmpi slt, %in, %c0_i64 : i64
      %9 = arith.addi %in, %c4_i64 : i64
      %10 = arith.select %8, %9, %in : i64
      %11 = arith.index_cast %10 : i64 to index
      %extracted = tensor.extract %cst[%11] : tensor<4xf32>
      linalg.yield %extracted : f32
    } -> tensor<f32>
    %4 = tensor.empty() : tensor<i32>
    %5 = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = []} ins(%arg4, %arg3 : tensor<i32>, tensor<i32>) outs(%4 : tensor<i32>) {
    ^bb0(%in: i32, %in_0: i32, %out: i32):
      %8 = arith.subi %in, %in_0 : i32
      linalg.yield %8 : i32
    } -> tensor<i32>
    %6 = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = []} ins(%3, %5 : tensor<f32>, tensor<i32>) outs(%2 : tensor<f32>) {
    ^bb0(%in: f32, %in_0: i32, %out: f32):
      %8 = arith.sitofp %in_0 : i32 to f32
      %9 = arith.mulf %in, %8 : f32
      linalg.yield %9 : f32
    } -> tensor<f32>
    %7 = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = []} ins(%arg0, %6 : tensor<f32>, tensor<f32>) outs(%2 : tensor<f32>) {
    ^bb0(%in: f32, %in_0: f32, %out: f32):
      %8 = arith.addf %in, %in_0 : f32
      linalg.yield %8 : f32
    } -> tensor<f32>
    return %7 : tensor<f32>
  }
  func.func private @__flex_attention_0(tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) attributes {flex.num_mask_buffers = 0 : i64, flex.num_score_buffers = 0 : i64, flex.return_lse = false, flex.return_max_scores = false, flex.scale = 0.35355339059327373 : f64, flex.score_mod = @sdpa_score0}
}

// -----

// GQA: Hq = 4, Hkv = 2; the op derives the group size from the shapes.
// CHECK-LABEL: func.func @gqa(
// CHECK:         %[[R:.+]] = flex.attention ins(%{{.+}}, %{{.+}}, %{{.+}} : tensor<1x4x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>)
// CHECK-SAME:      outs(%{{.+}} : tensor<1x4x16x8xf32>) scale(0.353553385) -> tensor<1x4x16x8xf32>
// CHECK-NOT:       kv_group_size
#map = affine_map<() -> ()>
module {
  func.func private @sdpa_score0(%arg0: tensor<f32>, %arg1: tensor<i32>, %arg2: tensor<i32>, %arg3: tensor<i32>, %arg4: tensor<i32>) -> tensor<f32> {
    return %arg0 : tensor<f32>
  }
  func.func private @sdpa_mask0(%arg0: tensor<i32>, %arg1: tensor<i32>, %arg2: tensor<i32>, %arg3: tensor<i32>) -> tensor<i1> {
    %cst = arith.constant dense<true> : tensor<i1>
    return %cst : tensor<i1>
  }
  func.func @gqa(%arg0: tensor<1x4x16x8xf32>, %arg1: tensor<1x2x16x8xf32>, %arg2: tensor<1x2x16x8xf32>) -> tensor<1x4x16x8xf32> {
    %0:3 = call @__flex_attention_0(%arg0, %arg1, %arg2) : (tensor<1x4x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>)
    return %0#0 : tensor<1x4x16x8xf32>
  }
  func.func private @__flex_attention_0(tensor<1x4x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) attributes {flex.enable_gqa, flex.mask_mod = @sdpa_mask0, flex.num_mask_buffers = 0 : i64, flex.num_score_buffers = 0 : i64, flex.return_lse = false, flex.return_max_scores = false, flex.scale = 0.35355339059327373 : f64, flex.score_mod = @sdpa_score0}
}

// -----

// return_lse: the logsumexp result replaces call result #1 (log2 units on
// both sides); max_scores is neither used nor requested, so it is dropped.
// CHECK-LABEL: func.func @lse_used(
// CHECK-DAG:     %[[OI:.+]] = tensor.empty() : tensor<1x4x16x8xf32>
// CHECK-DAG:     %[[LI:.+]] = tensor.empty() : tensor<1x4x16xf32>
// CHECK:         %[[R:.+]]:2 = flex.attention
// CHECK-SAME:      outs(%[[OI]] : tensor<1x4x16x8xf32>) logsumexp(%[[LI]] : tensor<1x4x16xf32>) scale(0.353553385)
// CHECK-NOT:       max_scores
// CHECK:         } -> tensor<1x4x16x8xf32>, tensor<1x4x16xf32>
// CHECK:         linalg.generic {{.*}} ins(%[[R]]#1 : tensor<1x4x16xf32>)
// CHECK:         return %[[R]]#0,
#map = affine_map<() -> ()>
#map1 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
module {
  func.func private @sdpa_score0(%arg0: tensor<f32>, %arg1: tensor<i32>, %arg2: tensor<i32>, %arg3: tensor<i32>, %arg4: tensor<i32>) -> tensor<f32> {
    %cst = arith.constant 3.000000e+01 : f32
    %0 = tensor.empty() : tensor<f32>
    %1 = linalg.generic {indexing_maps = [#map, #map], iterator_types = []} ins(%arg0 : tensor<f32>) outs(%0 : tensor<f32>) {
    ^bb0(%in: f32, %out: f32):
      %2 = math.tanh %in : f32
      %3 = arith.mulf %2, %cst : f32
      linalg.yield %3 : f32
    } -> tensor<f32>
    return %1 : tensor<f32>
  }
  func.func @lse_used(%arg0: tensor<1x4x16x8xf32>, %arg1: tensor<1x4x16x8xf32>, %arg2: tensor<1x4x16x8xf32>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16xf32>) {
    %cst = arith.constant 0.69314718055994529 : f64
    %0:3 = call @__flex_attention_0(%arg0, %arg1, %arg2) : (tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>)
    %1 = tensor.empty() : tensor<1x4x16xf32>
    %2 = linalg.generic {indexing_maps = [#map1, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%0#1 : tensor<1x4x16xf32>) outs(%1 : tensor<1x4x16xf32>) {
    ^bb0(%in: f32, %out: f32):
      %3 = arith.truncf %cst : f64 to f32
      %4 = arith.mulf %in, %3 : f32
      linalg.yield %4 : f32
    } -> tensor<1x4x16xf32>
    return %0#0, %2 : tensor<1x4x16x8xf32>, tensor<1x4x16xf32>
  }
  func.func private @__flex_attention_0(tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) attributes {flex.num_mask_buffers = 0 : i64, flex.num_score_buffers = 0 : i64, flex.return_lse = true, flex.return_max_scores = false, flex.scale = 0.35355339059327373 : f64, flex.score_mod = @sdpa_score0}
}

// -----

// return_max_scores set but unused: the max_scores init is still created.
// CHECK-LABEL: func.func @max_scores_flag(
// CHECK:         %[[R:.+]]:2 = flex.attention
// CHECK-SAME:      outs(%{{.+}} : tensor<1x4x16x8xf32>) max_scores(%{{.+}} : tensor<1x4x16xf32>) scale(1.250000e-01)
// CHECK-NOT:       logsumexp
// CHECK:         return %[[R]]#0
module {
  func.func @max_scores_flag(%arg0: tensor<1x4x16x8xf32>, %arg1: tensor<1x4x16x8xf32>, %arg2: tensor<1x4x16x8xf32>) -> tensor<1x4x16x8xf32> {
    %0:3 = call @__flex_attention_0(%arg0, %arg1, %arg2) : (tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>)
    return %0#0 : tensor<1x4x16x8xf32>
  }
  func.func private @__flex_attention_0(tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) attributes {flex.num_mask_buffers = 0 : i64, flex.num_score_buffers = 0 : i64, flex.return_lse = false, flex.return_max_scores = true, flex.scale = 1.250000e-01 : f64}
}

// -----

// Dynamic sequence length: init dims come from tensor.dim of the query.
// CHECK-LABEL: func.func @dynamic_seq(
// CHECK-SAME:    %[[Q:[^:]+]]: tensor<1x4x?x8xf32>
// CHECK-DAG:     %[[C2:.+]] = arith.constant 2 : index
// CHECK:         %[[M:.+]] = tensor.dim %[[Q]], %[[C2]] : tensor<1x4x?x8xf32>
// CHECK:         %[[OI:.+]] = tensor.empty(%[[M]]) : tensor<1x4x?x8xf32>
// CHECK:         %[[R:.+]] = flex.attention ins(%[[Q]], %{{.+}}, %{{.+}} : tensor<1x4x?x8xf32>, tensor<1x4x?x8xf32>, tensor<1x4x?x8xf32>)
// CHECK-SAME:      outs(%[[OI]] : tensor<1x4x?x8xf32>)
// CHECK:         } -> tensor<1x4x?x8xf32>
// CHECK:         return %[[R]]
#map = affine_map<() -> ()>
module {
  func.func private @sdpa_score0(%arg0: tensor<f32>, %arg1: tensor<i32>, %arg2: tensor<i32>, %arg3: tensor<i32>, %arg4: tensor<i32>) -> tensor<f32> {
    %cst = arith.constant 3.000000e+01 : f32
    %0 = tensor.empty() : tensor<f32>
    %1 = linalg.generic {indexing_maps = [#map, #map], iterator_types = []} ins(%arg0 : tensor<f32>) outs(%0 : tensor<f32>) {
    ^bb0(%in: f32, %out: f32):
      %2 = math.tanh %in : f32
      linalg.yield %2 : f32
    } -> tensor<f32>
    return %1 : tensor<f32>
  }
  func.func @dynamic_seq(%arg0: tensor<1x4x?x8xf32>, %arg1: tensor<1x4x?x8xf32>, %arg2: tensor<1x4x?x8xf32>) -> tensor<1x4x?x8xf32> {
    %0:3 = call @__flex_attention_0(%arg0, %arg1, %arg2) : (tensor<1x4x?x8xf32>, tensor<1x4x?x8xf32>, tensor<1x4x?x8xf32>) -> (tensor<1x4x?x8xf32>, tensor<1x4x?xf32>, tensor<1x4x?xf32>)
    return %0#0 : tensor<1x4x?x8xf32>
  }
  func.func private @__flex_attention_0(tensor<1x4x?x8xf32>, tensor<1x4x?x8xf32>, tensor<1x4x?x8xf32>) -> (tensor<1x4x?x8xf32>, tensor<1x4x?xf32>, tensor<1x4x?xf32>) attributes {flex.num_mask_buffers = 0 : i64, flex.num_score_buffers = 0 : i64, flex.return_lse = false, flex.return_max_scores = false, flex.scale = 0.35355339059327373 : f64, flex.score_mod = @sdpa_score0}
}

// -----

// Two calls sharing one score_mod: each op gets its own copy of the scalar
// body; the shared modifier is erased once both calls are rewritten.
// CHECK-LABEL: func.func @two_calls_shared(
// CHECK:         %[[A:.+]] = flex.attention
// CHECK-SAME:      score_mod {
// CHECK:             math.tanh
// CHECK:         %[[B:.+]] = flex.attention ins(%[[A]],
// CHECK-SAME:      score_mod {
// CHECK:             math.tanh
// CHECK:         return %[[B]]
// CHECK-NOT:   func.func private
#map = affine_map<() -> ()>
module {
  func.func private @sdpa_score0(%arg0: tensor<f32>, %arg1: tensor<i32>, %arg2: tensor<i32>, %arg3: tensor<i32>, %arg4: tensor<i32>) -> tensor<f32> {
    %0 = tensor.empty() : tensor<f32>
    %1 = linalg.generic {indexing_maps = [#map, #map], iterator_types = []} ins(%arg0 : tensor<f32>) outs(%0 : tensor<f32>) {
    ^bb0(%in: f32, %out: f32):
      %2 = math.tanh %in : f32
      linalg.yield %2 : f32
    } -> tensor<f32>
    return %1 : tensor<f32>
  }
  func.func @two_calls_shared(%arg0: tensor<1x4x16x8xf32>, %arg1: tensor<1x4x16x8xf32>, %arg2: tensor<1x4x16x8xf32>) -> tensor<1x4x16x8xf32> {
    %0:3 = call @__flex_attention_0(%arg0, %arg1, %arg2) : (tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>)
    %1:3 = call @__flex_attention_1(%0#0, %arg1, %arg2) : (tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>)
    return %1#0 : tensor<1x4x16x8xf32>
  }
  func.func private @__flex_attention_0(tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) attributes {flex.num_mask_buffers = 0 : i64, flex.num_score_buffers = 0 : i64, flex.return_lse = false, flex.return_max_scores = false, flex.scale = 0.35355339059327373 : f64, flex.score_mod = @sdpa_score0}
  func.func private @__flex_attention_1(tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) attributes {flex.num_mask_buffers = 0 : i64, flex.num_score_buffers = 0 : i64, flex.return_lse = false, flex.return_max_scores = false, flex.scale = 0.35355339059327373 : f64, flex.score_mod = @sdpa_score0}
}

// -----

// Index arguments as tensor<i64> (accepted besides today's tensor<i32>).
// CHECK-LABEL: func.func @i64_indices(
// CHECK:           mask_mod {
// CHECK-NEXT:      ^bb0(%{{.+}}: index, %{{.+}}: index, %[[M:.+]]: index, %[[N:.+]]: index):
// CHECK-DAG:         %[[MI:.+]] = arith.index_cast %[[M]] : index to i64
// CHECK-DAG:         %[[NI:.+]] = arith.index_cast %[[N]] : index to i64
// CHECK:             %[[C:.+]] = arith.cmpi sge, %[[MI]], %[[NI]] : i64
// CHECK:             flex.yield %[[C]] : i1
#map = affine_map<() -> ()>
module {
  func.func private @sdpa_mask0(%arg0: tensor<i64>, %arg1: tensor<i64>, %arg2: tensor<i64>, %arg3: tensor<i64>) -> tensor<i1> {
    %0 = tensor.empty() : tensor<i1>
    %1 = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = []} ins(%arg2, %arg3 : tensor<i64>, tensor<i64>) outs(%0 : tensor<i1>) {
    ^bb0(%in: i64, %in_0: i64, %out: i1):
      %2 = arith.cmpi sge, %in, %in_0 : i64
      linalg.yield %2 : i1
    } -> tensor<i1>
    return %1 : tensor<i1>
  }
  func.func @i64_indices(%arg0: tensor<1x4x16x8xf32>, %arg1: tensor<1x4x16x8xf32>, %arg2: tensor<1x4x16x8xf32>) -> tensor<1x4x16x8xf32> {
    %0:3 = call @__flex_attention_0(%arg0, %arg1, %arg2) : (tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>)
    return %0#0 : tensor<1x4x16x8xf32>
  }
  func.func private @__flex_attention_0(tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) attributes {flex.mask_mod = @sdpa_mask0, flex.num_mask_buffers = 0 : i64, flex.num_score_buffers = 0 : i64, flex.return_lse = false, flex.return_max_scores = false, flex.scale = 0.35355339059327373 : f64}
}

// -----

// Constructs torch-mlir does not emit today but the pass accepts: linalg.map,
// a named elementwise op, linalg.fill, tensor.from_elements / expand_shape /
// collapse_shape / extract of 0-d tensors, and a payload that reads its init.
// CHECK-LABEL: func.func @other_0d_forms(
// CHECK:           score_mod {
// CHECK-NEXT:      ^bb0(%[[S:.+]]: f32, %{{.+}}: index, %{{.+}}: index, %{{.+}}: index, %{{.+}}: index):
// CHECK-DAG:         %[[TWO:.+]] = arith.constant 2.000000e+00 : f32
// CHECK-DAG:         %[[ONE:.+]] = arith.constant 1.000000e+00 : f32
// CHECK:             %[[A:.+]] = arith.mulf %[[S]], %[[TWO]] : f32
// CHECK:             %[[E:.+]] = math.exp %[[A]] : f32
// CHECK:             %[[B:.+]] = arith.addf %[[E]], %[[ONE]] : f32
// CHECK:             %[[C:.+]] = arith.addf %[[B]], %[[B]] : f32
// CHECK:             flex.yield %[[C]] : f32
#map = affine_map<() -> ()>
module {
  func.func private @score(%arg0: tensor<f32>, %arg1: tensor<i32>, %arg2: tensor<i32>, %arg3: tensor<i32>, %arg4: tensor<i32>) -> tensor<f32> {
    %two = arith.constant dense<2.0> : tensor<f32>
    %c1 = arith.constant 1.0 : f32
    %e = tensor.empty() : tensor<f32>
    %0 = linalg.map ins(%arg0, %two : tensor<f32>, tensor<f32>) outs(%e : tensor<f32>)
      (%a: f32, %b: f32, %o: f32) {
        %m = arith.mulf %a, %b : f32
        linalg.yield %m : f32
      }
    %1 = linalg.exp ins(%0 : tensor<f32>) outs(%e : tensor<f32>) -> tensor<f32>
    %ones = linalg.fill ins(%c1 : f32) outs(%e : tensor<f32>) -> tensor<f32>
    %x = tensor.extract %1[] : tensor<f32>
    %2 = tensor.from_elements %x : tensor<f32>
    %3 = tensor.expand_shape %2 [] output_shape [1] : tensor<f32> into tensor<1xf32>
    %4 = tensor.collapse_shape %3 [] : tensor<1xf32> into tensor<f32>
    %5 = linalg.generic {indexing_maps = [#map, #map], iterator_types = []} ins(%4 : tensor<f32>) outs(%ones : tensor<f32>) {
    ^bb0(%in: f32, %out: f32):
      %s = arith.addf %in, %out : f32
      linalg.yield %s : f32
    } -> tensor<f32>
    %6 = arith.addf %5, %5 : tensor<f32>
    return %6 : tensor<f32>
  }
  func.func @other_0d_forms(%arg0: tensor<1x4x16x8xf32>, %arg1: tensor<1x4x16x8xf32>, %arg2: tensor<1x4x16x8xf32>) -> tensor<1x4x16x8xf32> {
    %0:3 = call @__flex_attention_0(%arg0, %arg1, %arg2) : (tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>)
    return %0#0 : tensor<1x4x16x8xf32>
  }
  func.func private @__flex_attention_0(tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) attributes {flex.num_mask_buffers = 0 : i64, flex.num_score_buffers = 0 : i64, flex.scale = 0.35355339059327373 : f64, flex.score_mod = @score}
}

// -----

// A boolean constant table is captured zero-extended to i8 (a load from a
// memref of i1 does not lower to LLVM) and narrowed back after the read.
// CHECK-LABEL: func.func @bool_table(
// CHECK:         %[[TBL:.+]] = arith.constant dense<[1, 0, 1, 1]> : tensor<4xi8>
// CHECK:         flex.attention
// CHECK-SAME:      captures(%[[TBL]] : tensor<4xi8>)
// CHECK-SAME:      mask_mod {
// CHECK:             %[[E:.+]] = tensor.extract %[[TBL]][%{{.+}}] : tensor<4xi8>
// CHECK:             %[[B:.+]] = arith.trunci %[[E]] : i8 to i1
// CHECK:             flex.yield %[[B]] : i1
module {
  func.func private @mask(%arg0: tensor<i32>, %arg1: tensor<i32>, %arg2: tensor<i32>, %arg3: tensor<i32>) -> tensor<i1> {
    %t = arith.constant dense<[true, false, true, true]> : tensor<4xi1>
    %x = tensor.extract %arg3[] : tensor<i32>
    %i = arith.index_cast %x : i32 to index
    %c4 = arith.constant 4 : index
    %j = arith.remui %i, %c4 : index
    %b = tensor.extract %t[%j] : tensor<4xi1>
    %r = tensor.from_elements %b : tensor<i1>
    return %r : tensor<i1>
  }
  func.func @bool_table(%q: tensor<1x4x16x8xf32>, %k: tensor<1x4x16x8xf32>, %v: tensor<1x4x16x8xf32>) -> tensor<1x4x16x8xf32> {
    %0:3 = call @__flex_attention_0(%q, %k, %v) : (tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>)
    return %0#0 : tensor<1x4x16x8xf32>
  }
  func.func private @__flex_attention_0(tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) attributes {flex.mask_mod = @mask, flex.scale = 1.0 : f64}
}

// -----

// A score_mod traced on bf16 scores runs in f32, as eager flex_attention
// calls it: bf16 constants and ops are retyped, no truncf/extf remain.
#map_bf16 = affine_map<() -> ()>
// CHECK-LABEL: func.func @bf16_softcap
// CHECK:         flex.attention
// CHECK:         score_mod {
// CHECK-NEXT:    ^bb0(%[[S:.+]]: f32, %{{.+}}: index, %{{.+}}: index, %{{.+}}: index, %{{.+}}: index):
// CHECK-DAG:       %[[C:.+]] = arith.constant 4.000000e+00 : f32
// CHECK:           %[[D:.+]] = arith.divf %[[S]], %[[C]] : f32
// CHECK:           %[[T:.+]] = math.tanh %[[D]] : f32
// CHECK:           %[[M:.+]] = arith.mulf %[[T]], %[[C]] : f32
// CHECK:           flex.yield %[[M]] : f32
// CHECK-NOT:     bf16 to f32
// CHECK-NOT:     @sdpa_score_bf16
func.func private @sdpa_score_bf16(%arg0: tensor<bf16>, %arg1: tensor<i32>, %arg2: tensor<i32>, %arg3: tensor<i32>, %arg4: tensor<i32>) -> tensor<bf16> {
  %cst = arith.constant 4.000000e+00 : bf16
  %0 = tensor.empty() : tensor<bf16>
  %1 = linalg.generic {indexing_maps = [#map_bf16, #map_bf16], iterator_types = []} ins(%arg0 : tensor<bf16>) outs(%0 : tensor<bf16>) {
  ^bb0(%in: bf16, %out: bf16):
    %4 = arith.divf %in, %cst : bf16
    linalg.yield %4 : bf16
  } -> tensor<bf16>
  %2 = linalg.generic {indexing_maps = [#map_bf16, #map_bf16], iterator_types = []} ins(%1 : tensor<bf16>) outs(%0 : tensor<bf16>) {
  ^bb0(%in: bf16, %out: bf16):
    %4 = math.tanh %in : bf16
    linalg.yield %4 : bf16
  } -> tensor<bf16>
  %3 = linalg.generic {indexing_maps = [#map_bf16, #map_bf16], iterator_types = []} ins(%2 : tensor<bf16>) outs(%0 : tensor<bf16>) {
  ^bb0(%in: bf16, %out: bf16):
    %4 = arith.mulf %in, %cst : bf16
    linalg.yield %4 : bf16
  } -> tensor<bf16>
  return %3 : tensor<bf16>
}
func.func private @__flex_attention_0(tensor<1x2x16x8xbf16>, tensor<1x2x16x8xbf16>, tensor<1x2x16x8xbf16>) -> (tensor<1x2x16x8xbf16>, tensor<1x2x16xf32>, tensor<1x2x16xf32>) attributes {flex.num_mask_buffers = 0 : i64, flex.num_score_buffers = 0 : i64, flex.return_lse = false, flex.return_max_scores = false, flex.scale = 0.35355339059327373 : f64, flex.score_mod = @sdpa_score_bf16}
func.func @bf16_softcap(%q: tensor<1x2x16x8xbf16>, %k: tensor<1x2x16x8xbf16>, %v: tensor<1x2x16x8xbf16>) -> tensor<1x2x16x8xbf16> {
  %0:3 = call @__flex_attention_0(%q, %k, %v) : (tensor<1x2x16x8xbf16>, tensor<1x2x16x8xbf16>, tensor<1x2x16x8xbf16>) -> (tensor<1x2x16x8xbf16>, tensor<1x2x16xf32>, tensor<1x2x16xf32>)
  return %0#0 : tensor<1x2x16x8xbf16>
}

// -----

// A row of a captured table reduced with .sum(-1): the row is never
// materialized; the 4-element reduction is unrolled into the region.
// CHECK-LABEL: func.func @row_sum(
// CHECK-SAME:    %{{.+}}: tensor<1x2x16x8xf32>, %{{.+}}: tensor<1x2x16x8xf32>, %{{.+}}: tensor<1x2x16x8xf32>, %[[EMB:.+]]: tensor<16x4xf32>)
// CHECK:         flex.attention
// CHECK-SAME:      captures(%[[EMB]] : tensor<16x4xf32>)
// CHECK:           score_mod {
// CHECK-NEXT:      ^bb0(%[[S:.+]]: f32, %{{.+}}: index, %{{.+}}: index, %[[M:.+]]: index, %{{.+}}: index):
// CHECK-NOT:         linalg.generic
// CHECK-NOT:         scf.for
// CHECK:             %[[E0:.+]] = tensor.extract %[[EMB]][%{{.+}}, %c0] : tensor<16x4xf32>
// CHECK:             %[[A0:.+]] = arith.addf %[[E0]], %{{.+}} : f32
// CHECK:             %[[E3:.+]] = tensor.extract %[[EMB]][%{{.+}}, %c3] : tensor<16x4xf32>
// CHECK:             %[[A3:.+]] = arith.addf %[[E3]], %{{.+}} : f32
// CHECK:             %[[R:.+]] = arith.addf %[[S]], %[[A3]] : f32
// CHECK:             flex.yield %[[R]] : f32
#id0 = affine_map<() -> ()>
#bc1 = affine_map<(d0) -> ()>
#id1 = affine_map<(d0) -> (d0)>
func.func private @sdpa_score0(%arg0: tensor<f32>, %arg1: tensor<i32>, %arg2: tensor<i32>, %arg3: tensor<i32>, %arg4: tensor<i32>, %emb: tensor<16x4xf32>) -> tensor<f32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e4 = tensor.empty() : tensor<4xf32>
  %row = linalg.generic {indexing_maps = [#bc1, #id1], iterator_types = ["parallel"]} ins(%arg3 : tensor<i32>) outs(%e4 : tensor<4xf32>) {
  ^bb0(%in: i32, %out: f32):
    %i = arith.index_cast %in : i32 to index
    %j = linalg.index 0 : index
    %x = tensor.extract %emb[%i, %j] : tensor<16x4xf32>
    linalg.yield %x : f32
  } -> tensor<4xf32>
  %e0 = tensor.empty() : tensor<f32>
  %init = linalg.fill ins(%zero : f32) outs(%e0 : tensor<f32>) -> tensor<f32>
  %sum = linalg.generic {indexing_maps = [#id1, #bc1], iterator_types = ["reduction"]} ins(%row : tensor<4xf32>) outs(%init : tensor<f32>) {
  ^bb0(%in: f32, %out: f32):
    %a = arith.addf %in, %out : f32
    linalg.yield %a : f32
  } -> tensor<f32>
  %r = linalg.generic {indexing_maps = [#id0, #id0, #id0], iterator_types = []} ins(%arg0, %sum : tensor<f32>, tensor<f32>) outs(%e0 : tensor<f32>) {
  ^bb0(%in: f32, %in_0: f32, %out: f32):
    %a = arith.addf %in, %in_0 : f32
    linalg.yield %a : f32
  } -> tensor<f32>
  return %r : tensor<f32>
}
func.func private @__flex_attention_0(tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<16x4xf32>) -> (tensor<1x2x16x8xf32>, tensor<1x2x16xf32>, tensor<1x2x16xf32>) attributes {flex.num_mask_buffers = 0 : i64, flex.num_score_buffers = 1 : i64, flex.scale = 1.0 : f64, flex.score_mod = @sdpa_score0}
func.func @row_sum(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %emb: tensor<16x4xf32>) -> tensor<1x2x16x8xf32> {
  %0:3 = call @__flex_attention_0(%q, %k, %v, %emb) : (tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<16x4xf32>) -> (tensor<1x2x16x8xf32>, tensor<1x2x16xf32>, tensor<1x2x16xf32>)
  return %0#0 : tensor<1x2x16x8xf32>
}

// -----

// torch.dot(emb[q], emb[kv]) over rows of 16 (> 8): the product is computed
// per element inside an scf.for carrying the f32 accumulator.
// CHECK-LABEL: func.func @row_dot_loop(
// CHECK-SAME:    %[[EMB:[a-z0-9]+]]: tensor<16x16xf32>)
// CHECK:           score_mod {
// CHECK-NEXT:      ^bb0(%[[S:.+]]: f32, %{{.+}}: index, %{{.+}}: index, %[[M:.+]]: index, %[[N:.+]]: index):
// CHECK-DAG:         %[[C0:.+]] = arith.constant 0 : index
// CHECK-DAG:         %[[C16:.+]] = arith.constant 16 : index
// CHECK-DAG:         %[[C1:.+]] = arith.constant 1 : index
// CHECK-DAG:         %[[Z:.+]] = arith.constant 0.000000e+00 : f32
// CHECK:             %[[D:.+]] = scf.for %[[J:.+]] = %[[C0]] to %[[C16]] step %[[C1]] iter_args(%[[ACC:.+]] = %[[Z]]) -> (f32) {
// CHECK-DAG:           %[[A:.+]] = tensor.extract %[[EMB]][%{{.+}}, %[[J]]] : tensor<16x16xf32>
// CHECK-DAG:           %[[B:.+]] = tensor.extract %[[EMB]][%{{.+}}, %[[J]]] : tensor<16x16xf32>
// CHECK:               %[[P:.+]] = arith.mulf %[[A]], %[[B]] : f32
// CHECK:               %[[NEXT:.+]] = arith.addf %[[P]], %[[ACC]] : f32
// CHECK:               scf.yield %[[NEXT]] : f32
// CHECK:             }
// CHECK:             %[[R:.+]] = arith.addf %[[S]], %[[D]] : f32
// CHECK:             flex.yield %[[R]] : f32
#id0 = affine_map<() -> ()>
#bc1 = affine_map<(d0) -> ()>
#id1 = affine_map<(d0) -> (d0)>
func.func private @sdpa_score0(%arg0: tensor<f32>, %arg1: tensor<i32>, %arg2: tensor<i32>, %arg3: tensor<i32>, %arg4: tensor<i32>, %emb: tensor<16x16xf32>) -> tensor<f32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e16 = tensor.empty() : tensor<16xf32>
  %a = linalg.generic {indexing_maps = [#bc1, #id1], iterator_types = ["parallel"]} ins(%arg3 : tensor<i32>) outs(%e16 : tensor<16xf32>) {
  ^bb0(%in: i32, %out: f32):
    %i = arith.index_cast %in : i32 to index
    %j = linalg.index 0 : index
    %x = tensor.extract %emb[%i, %j] : tensor<16x16xf32>
    linalg.yield %x : f32
  } -> tensor<16xf32>
  %b = linalg.generic {indexing_maps = [#bc1, #id1], iterator_types = ["parallel"]} ins(%arg4 : tensor<i32>) outs(%e16 : tensor<16xf32>) {
  ^bb0(%in: i32, %out: f32):
    %i = arith.index_cast %in : i32 to index
    %j = linalg.index 0 : index
    %x = tensor.extract %emb[%i, %j] : tensor<16x16xf32>
    linalg.yield %x : f32
  } -> tensor<16xf32>
  %prod = linalg.generic {indexing_maps = [#id1, #id1, #id1], iterator_types = ["parallel"]} ins(%a, %b : tensor<16xf32>, tensor<16xf32>) outs(%e16 : tensor<16xf32>) {
  ^bb0(%in: f32, %in_0: f32, %out: f32):
    %m = arith.mulf %in, %in_0 : f32
    linalg.yield %m : f32
  } -> tensor<16xf32>
  %e0 = tensor.empty() : tensor<f32>
  %init = linalg.fill ins(%zero : f32) outs(%e0 : tensor<f32>) -> tensor<f32>
  %dot = linalg.generic {indexing_maps = [#id1, #bc1], iterator_types = ["reduction"]} ins(%prod : tensor<16xf32>) outs(%init : tensor<f32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.addf %in, %out : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  %r = linalg.generic {indexing_maps = [#id0, #id0, #id0], iterator_types = []} ins(%arg0, %dot : tensor<f32>, tensor<f32>) outs(%e0 : tensor<f32>) {
  ^bb0(%in: f32, %in_0: f32, %out: f32):
    %s = arith.addf %in, %in_0 : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  return %r : tensor<f32>
}
func.func private @__flex_attention_0(tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<16x16xf32>) -> (tensor<1x2x16x8xf32>, tensor<1x2x16xf32>, tensor<1x2x16xf32>) attributes {flex.num_mask_buffers = 0 : i64, flex.num_score_buffers = 1 : i64, flex.scale = 1.0 : f64, flex.score_mod = @sdpa_score0}
func.func @row_dot_loop(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %emb: tensor<16x16xf32>) -> tensor<1x2x16x8xf32> {
  %0:3 = call @__flex_attention_0(%q, %k, %v, %emb) : (tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<16x16xf32>) -> (tensor<1x2x16x8xf32>, tensor<1x2x16xf32>, tensor<1x2x16xf32>)
  return %0#0 : tensor<1x2x16x8xf32>
}

// -----

// Chained indexing bias[b][q][kv]: the gathered plane and row are lazy, so
// the region reads one element of the captured table.
// CHECK-LABEL: func.func @chained_indexing(
// CHECK-SAME:    %[[BIAS:[a-z0-9]+]]: tensor<2x16x16xf32>)
// CHECK:           score_mod {
// CHECK-NEXT:      ^bb0(%[[S:.+]]: f32, %[[B:.+]]: index, %{{.+}}: index, %[[M:.+]]: index, %[[N:.+]]: index):
// CHECK-NOT:         linalg
// CHECK:             %[[X:.+]] = tensor.extract %[[BIAS]][%{{.+}}, %{{.+}}, %{{.+}}] : tensor<2x16x16xf32>
// CHECK-NOT:         tensor.extract
// CHECK:             %[[R:.+]] = arith.addf %[[S]], %[[X]] : f32
// CHECK:             flex.yield %[[R]] : f32
#id0 = affine_map<() -> ()>
#bc1 = affine_map<(d0) -> ()>
#id1 = affine_map<(d0) -> (d0)>
#bc2 = affine_map<(d0, d1) -> ()>
#id2 = affine_map<(d0, d1) -> (d0, d1)>
func.func private @sdpa_score0(%arg0: tensor<f32>, %arg1: tensor<i32>, %arg2: tensor<i32>, %arg3: tensor<i32>, %arg4: tensor<i32>, %bias: tensor<2x16x16xf32>) -> tensor<f32> {
  %e2 = tensor.empty() : tensor<16x16xf32>
  %plane = linalg.generic {indexing_maps = [#bc2, #id2], iterator_types = ["parallel", "parallel"]} ins(%arg1 : tensor<i32>) outs(%e2 : tensor<16x16xf32>) {
  ^bb0(%in: i32, %out: f32):
    %i = arith.index_cast %in : i32 to index
    %j = linalg.index 0 : index
    %k = linalg.index 1 : index
    %x = tensor.extract %bias[%i, %j, %k] : tensor<2x16x16xf32>
    linalg.yield %x : f32
  } -> tensor<16x16xf32>
  %e1 = tensor.empty() : tensor<16xf32>
  %row = linalg.generic {indexing_maps = [#bc1, #id1], iterator_types = ["parallel"]} ins(%arg3 : tensor<i32>) outs(%e1 : tensor<16xf32>) {
  ^bb0(%in: i32, %out: f32):
    %i = arith.index_cast %in : i32 to index
    %j = linalg.index 0 : index
    %x = tensor.extract %plane[%i, %j] : tensor<16x16xf32>
    linalg.yield %x : f32
  } -> tensor<16xf32>
  %e0 = tensor.empty() : tensor<f32>
  %elt = linalg.generic {indexing_maps = [#id0, #id0], iterator_types = []} ins(%arg4 : tensor<i32>) outs(%e0 : tensor<f32>) {
  ^bb0(%in: i32, %out: f32):
    %i = arith.index_cast %in : i32 to index
    %x = tensor.extract %row[%i] : tensor<16xf32>
    linalg.yield %x : f32
  } -> tensor<f32>
  %r = linalg.generic {indexing_maps = [#id0, #id0, #id0], iterator_types = []} ins(%arg0, %elt : tensor<f32>, tensor<f32>) outs(%e0 : tensor<f32>) {
  ^bb0(%in: f32, %in_0: f32, %out: f32):
    %s = arith.addf %in, %in_0 : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  return %r : tensor<f32>
}
func.func private @__flex_attention_0(tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<2x16x16xf32>) -> (tensor<1x2x16x8xf32>, tensor<1x2x16xf32>, tensor<1x2x16xf32>) attributes {flex.num_mask_buffers = 0 : i64, flex.num_score_buffers = 1 : i64, flex.scale = 1.0 : f64, flex.score_mod = @sdpa_score0}
func.func @chained_indexing(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %bias: tensor<2x16x16xf32>) -> tensor<1x2x16x8xf32> {
  %0:3 = call @__flex_attention_0(%q, %k, %v, %bias) : (tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<2x16x16xf32>) -> (tensor<1x2x16x8xf32>, tensor<1x2x16xf32>, tensor<1x2x16xf32>)
  return %0#0 : tensor<1x2x16x8xf32>
}

// -----

// A bool buffer imported as a uint8 table plus a whole-tensor conversion to
// i1, then .any() over a row: the region reads bytes of the captured table
// and compares each with 0; no i1 tensor and no conversion of the table.
// CHECK-LABEL: func.func @bool_table_any(
// CHECK:           %[[TBL:.+]] = arith.constant dense<{{.+}}> : tensor<16x3xi8>
// CHECK:           flex.attention
// CHECK-SAME:        captures(%[[TBL]] : tensor<16x3xi8>)
// CHECK:           mask_mod {
// CHECK-NOT:         tensor<16x3xi1>
// CHECK:             %[[X0:.+]] = tensor.extract %[[TBL]][%{{.+}}, %c0] : tensor<16x3xi8>
// CHECK:             %[[B0:.+]] = arith.cmpi ne, %[[X0]], %{{.+}} : i8
// CHECK:             %[[O0:.+]] = arith.ori %[[B0]], %false : i1
// CHECK:             %[[X2:.+]] = tensor.extract %[[TBL]][%{{.+}}, %c2] : tensor<16x3xi8>
// CHECK:             %[[B2:.+]] = arith.cmpi ne, %[[X2]], %{{.+}} : i8
// CHECK:             %[[O2:.+]] = arith.ori %[[B2]], %{{.+}} : i1
// CHECK:             flex.yield %[[O2]] : i1
#id0 = affine_map<() -> ()>
#bc1 = affine_map<(d0) -> ()>
#id1 = affine_map<(d0) -> (d0)>
#id2 = affine_map<(d0, d1) -> (d0, d1)>
func.func private @sdpa_mask0(%arg0: tensor<i32>, %arg1: tensor<i32>, %arg2: tensor<i32>, %arg3: tensor<i32>) -> tensor<i1> {
  %c0_i8 = arith.constant 0 : i8
  %false = arith.constant false
  %cst = arith.constant dense<[[0, 1, 0], [0, 0, 0], [1, 1, 1], [0, 0, 1], [0, 1, 0], [0, 0, 0], [1, 1, 1], [0, 0, 1], [0, 1, 0], [0, 0, 0], [1, 1, 1], [0, 0, 1], [0, 1, 0], [0, 0, 0], [1, 1, 1], [0, 0, 1]]> : tensor<16x3xi8>
  %e = tensor.empty() : tensor<16x3xi1>
  %bool = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]} ins(%cst : tensor<16x3xi8>) outs(%e : tensor<16x3xi1>) {
  ^bb0(%in: i8, %out: i1):
    %c = arith.cmpi ne, %in, %c0_i8 : i8
    linalg.yield %c : i1
  } -> tensor<16x3xi1>
  %e1 = tensor.empty() : tensor<3xi1>
  %row = linalg.generic {indexing_maps = [#bc1, #id1], iterator_types = ["parallel"]} ins(%arg2 : tensor<i32>) outs(%e1 : tensor<3xi1>) {
  ^bb0(%in: i32, %out: i1):
    %i = arith.index_cast %in : i32 to index
    %j = linalg.index 0 : index
    %x = tensor.extract %bool[%i, %j] : tensor<16x3xi1>
    linalg.yield %x : i1
  } -> tensor<3xi1>
  %e0 = tensor.empty() : tensor<i1>
  %init = linalg.fill ins(%false : i1) outs(%e0 : tensor<i1>) -> tensor<i1>
  %any = linalg.generic {indexing_maps = [#id1, #bc1], iterator_types = ["reduction"]} ins(%row : tensor<3xi1>) outs(%init : tensor<i1>) {
  ^bb0(%in: i1, %out: i1):
    %o = arith.ori %in, %out : i1
    linalg.yield %o : i1
  } -> tensor<i1>
  return %any : tensor<i1>
}
func.func private @__flex_attention_0(tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) -> (tensor<1x2x16x8xf32>, tensor<1x2x16xf32>, tensor<1x2x16xf32>) attributes {flex.mask_mod = @sdpa_mask0, flex.num_mask_buffers = 0 : i64, flex.num_score_buffers = 0 : i64, flex.scale = 1.0 : f64}
func.func @bool_table_any(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>) -> tensor<1x2x16x8xf32> {
  %0:3 = call @__flex_attention_0(%q, %k, %v) : (tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) -> (tensor<1x2x16x8xf32>, tensor<1x2x16xf32>, tensor<1x2x16xf32>)
  return %0#0 : tensor<1x2x16x8xf32>
}

// -----

// BlockMask tensors come last (after the mask buffers): the first pair is
// kv_blocks, the second full_kv_blocks; flex.block_sizes -> block_sizes.
// CHECK-LABEL: func.func @block_tensors(
// CHECK-SAME:    %[[Q:[^:]+]]: tensor<1x4x64x8xf32>, %[[K:[^:]+]]: tensor<1x4x64x8xf32>, %[[V:[^:]+]]: tensor<1x4x64x8xf32>, %[[W:[^:]+]]: tensor<64xi64>, %[[N:[^:]+]]: tensor<1x1x2xi32>, %[[I:[^:]+]]: tensor<1x1x2x2xi32>, %[[FN:[^:]+]]: tensor<1x1x2xi32>, %[[FI:[^:]+]]: tensor<1x1x2x2xi32>)
// CHECK:         flex.attention ins(%[[Q]], %[[K]], %[[V]] : {{.+}}) captures(%[[W]] : tensor<64xi64>) kv_blocks(%[[N]], %[[I]] : tensor<1x1x2xi32>, tensor<1x1x2x2xi32>) full_kv_blocks(%[[FN]], %[[FI]] : tensor<1x1x2xi32>, tensor<1x1x2x2xi32>) block_sizes [32, 32] outs(
// CHECK:           mask_mod {
// CHECK:           tensor.extract %[[W]]
// CHECK-NOT:   func.func private
#map = affine_map<() -> ()>
module {
  func.func private @sdpa_mask0(%arg0: tensor<i32>, %arg1: tensor<i32>, %arg2: tensor<i32>, %arg3: tensor<i32>, %doc: tensor<64xi64>) -> tensor<i1> {
    %i = tensor.extract %arg2[] : tensor<i32>
    %j = tensor.extract %arg3[] : tensor<i32>
    %ii = arith.index_cast %i : i32 to index
    %jj = arith.index_cast %j : i32 to index
    %a = tensor.extract %doc[%ii] : tensor<64xi64>
    %b = tensor.extract %doc[%jj] : tensor<64xi64>
    %c = arith.cmpi eq, %a, %b : i64
    %t = tensor.from_elements %c : tensor<i1>
    return %t : tensor<i1>
  }
  func.func @block_tensors(%q: tensor<1x4x64x8xf32>, %k: tensor<1x4x64x8xf32>, %v: tensor<1x4x64x8xf32>, %doc: tensor<64xi64>, %n: tensor<1x1x2xi32>, %i: tensor<1x1x2x2xi32>, %fn: tensor<1x1x2xi32>, %fi: tensor<1x1x2x2xi32>) -> tensor<1x4x64x8xf32> {
    %0:3 = call @__flex_attention_0(%q, %k, %v, %doc, %n, %i, %fn, %fi) : (tensor<1x4x64x8xf32>, tensor<1x4x64x8xf32>, tensor<1x4x64x8xf32>, tensor<64xi64>, tensor<1x1x2xi32>, tensor<1x1x2x2xi32>, tensor<1x1x2xi32>, tensor<1x1x2x2xi32>) -> (tensor<1x4x64x8xf32>, tensor<1x4x64xf32>, tensor<1x4x64xf32>)
    return %0#0 : tensor<1x4x64x8xf32>
  }
  func.func private @__flex_attention_0(tensor<1x4x64x8xf32>, tensor<1x4x64x8xf32>, tensor<1x4x64x8xf32>, tensor<64xi64>, tensor<1x1x2xi32>, tensor<1x1x2x2xi32>, tensor<1x1x2xi32>, tensor<1x1x2x2xi32>) -> (tensor<1x4x64x8xf32>, tensor<1x4x64xf32>, tensor<1x4x64xf32>) attributes {flex.block_sizes = array<i64: 32, 32>, flex.mask_mod = @sdpa_mask0, flex.num_block_tensors = 4 : i64, flex.num_mask_buffers = 1 : i64, flex.num_score_buffers = 0 : i64, flex.return_lse = false, flex.return_max_scores = false, flex.scale = 0.35355339059327373 : f64}
}

// -----

// A padding mask of dynamic length, read with torch's negative-index wrap
// (its size from tensor.dim on the capture): kv_idx is never negative, so
// the read is pad[b, kv_idx] and the wrap and the dim are gone.
// CHECK-LABEL: func.func @padding_dynamic(
// CHECK-SAME:    %[[PAD:[^:]+]]: tensor<2x?xi1>)
// CHECK:         flex.attention
// CHECK-SAME:      captures(%[[PAD]] : tensor<2x?xi1>)
// CHECK-SAME:      mask_mod {
// CHECK-NEXT:      ^bb0(%[[B:.+]]: index, %{{.+}}: index, %{{.+}}: index, %[[N:.+]]: index):
// CHECK-NEXT:        %[[E:.+]] = tensor.extract %[[PAD]][%[[B]], %[[N]]] : tensor<2x?xi1>
// CHECK-NEXT:        flex.yield %[[E]] : i1
#map = affine_map<() -> ()>
module {
  func.func @padding_dynamic(%arg0: tensor<2x4x1x8xf32>, %arg1: tensor<2x4x?x8xf32>, %arg2: tensor<2x4x?x8xf32>, %arg3: tensor<2x?xi1>) -> tensor<2x4x1x8xf32> {
    %0:3 = call @__flex_attention_0(%arg0, %arg1, %arg2, %arg3) : (tensor<2x4x1x8xf32>, tensor<2x4x?x8xf32>, tensor<2x4x?x8xf32>, tensor<2x?xi1>) -> (tensor<2x4x1x8xf32>, tensor<2x4x1xf32>, tensor<2x4x1xf32>)
    return %0#0 : tensor<2x4x1x8xf32>
  }
  func.func private @sdpa_mask0(%arg0: tensor<i32>, %arg1: tensor<i32>, %arg2: tensor<i32>, %arg3: tensor<i32>, %arg4: tensor<2x?xi1>) -> tensor<i1> {
    %c0_i64 = arith.constant 0 : i64
    %c2_i64 = arith.constant 2 : i64
    %c1 = arith.constant 1 : index
    %0 = tensor.empty() : tensor<i64>
    %1 = linalg.generic {indexing_maps = [#map, #map], iterator_types = []} ins(%arg0 : tensor<i32>) outs(%0 : tensor<i64>) {
    ^bb0(%in: i32, %out: i64):
      %5 = arith.extsi %in : i32 to i64
      linalg.yield %5 : i64
    } -> tensor<i64>
    %2 = linalg.generic {indexing_maps = [#map, #map], iterator_types = []} ins(%arg3 : tensor<i32>) outs(%0 : tensor<i64>) {
    ^bb0(%in: i32, %out: i64):
      %5 = arith.extsi %in : i32 to i64
      linalg.yield %5 : i64
    } -> tensor<i64>
    %3 = tensor.empty() : tensor<i1>
    %4 = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = []} ins(%1, %2 : tensor<i64>, tensor<i64>) outs(%3 : tensor<i1>) {
    ^bb0(%in: i64, %in_0: i64, %out: i1):
      %5 = arith.cmpi slt, %in, %c0_i64 : i64
      %6 = arith.addi %in, %c2_i64 : i64
      %7 = arith.select %5, %6, %in : i64
      %8 = arith.index_cast %7 : i64 to index
      %9 = arith.cmpi slt, %in_0, %c0_i64 : i64
      %dim = tensor.dim %arg4, %c1 : tensor<2x?xi1>
      %10 = arith.index_cast %dim : index to i64
      %11 = arith.addi %in_0, %10 : i64
      %12 = arith.select %9, %11, %in_0 : i64
      %13 = arith.index_cast %12 : i64 to index
      %extracted = tensor.extract %arg4[%8, %13] : tensor<2x?xi1>
      linalg.yield %extracted : i1
    } -> tensor<i1>
    return %4 : tensor<i1>
  }
  func.func private @__flex_attention_0(tensor<2x4x1x8xf32>, tensor<2x4x?x8xf32>, tensor<2x4x?x8xf32>, tensor<2x?xi1>) -> (tensor<2x4x1x8xf32>, tensor<2x4x1xf32>, tensor<2x4x1xf32>) attributes {flex.mask_mod = @sdpa_mask0, flex.num_mask_buffers = 1 : i64, flex.num_score_buffers = 0 : i64, flex.return_lse = false, flex.return_max_scores = false, flex.scale = 0.35355339059327373 : f64, flex.score_mod = @sdpa_score0}
  func.func private @sdpa_score0(%arg0: tensor<f32>, %arg1: tensor<i32>, %arg2: tensor<i32>, %arg3: tensor<i32>, %arg4: tensor<i32>) -> tensor<f32> {
    return %arg0 : tensor<f32>
  }
}

// -----

// An index that may be negative keeps torch's wrap: bias[kv_idx - 1] reads
// bias[15] at kv_idx 0. The cast of kv_idx itself is not folded away.
// CHECK-LABEL: func.func @shifted_index_keeps_wrap(
// CHECK-SAME:    %[[BIAS:[^:]+]]: tensor<16xf32>)
// CHECK:         flex.attention
// CHECK-SAME:      score_mod {
// CHECK-NEXT:      ^bb0(%[[S:.+]]: f32, %{{.+}}: index, %{{.+}}: index, %{{.+}}: index, %[[N:.+]]: index):
// CHECK:             %[[NI:.+]] = arith.index_cast %[[N]] : index to i32
// CHECK:             %[[NE:.+]] = arith.extsi %[[NI]] : i32 to i64
// CHECK:             %[[D:.+]] = arith.subi %[[NE]], %{{.+}} : i64
// CHECK:             %[[NEG:.+]] = arith.cmpi slt, %[[D]], %{{.+}} : i64
// CHECK:             %[[W:.+]] = arith.addi %[[D]], %{{.+}} : i64
// CHECK:             %[[SEL:.+]] = arith.select %[[NEG]], %[[W]], %[[D]] : i64
// CHECK:             %[[X:.+]] = arith.index_cast %[[SEL]] : i64 to index
// CHECK:             %[[B:.+]] = tensor.extract %[[BIAS]][%[[X]]] : tensor<16xf32>
// CHECK:             arith.addf %[[S]], %[[B]] : f32
#map = affine_map<() -> ()>
module {
  func.func @shifted_index_keeps_wrap(%arg0: tensor<1x4x16x8xf32>, %arg1: tensor<1x4x16x8xf32>, %arg2: tensor<1x4x16x8xf32>, %arg3: tensor<16xf32>) -> tensor<1x4x16x8xf32> {
    %0:3 = call @__flex_attention_0(%arg0, %arg1, %arg2, %arg3) : (tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<16xf32>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>)
    return %0#0 : tensor<1x4x16x8xf32>
  }
  func.func private @sdpa_score0(%arg0: tensor<f32>, %arg1: tensor<i32>, %arg2: tensor<i32>, %arg3: tensor<i32>, %arg4: tensor<i32>, %arg5: tensor<16xf32>) -> tensor<f32> {
    %c0_i64 = arith.constant 0 : i64
    %c1_i64 = arith.constant 1 : i64
    %c16_i64 = arith.constant 16 : i64
    %0 = tensor.empty() : tensor<i64>
    %1 = linalg.generic {indexing_maps = [#map, #map], iterator_types = []} ins(%arg4 : tensor<i32>) outs(%0 : tensor<i64>) {
    ^bb0(%in: i32, %out: i64):
      %5 = arith.extsi %in : i32 to i64
      %6 = arith.subi %5, %c1_i64 : i64
      linalg.yield %6 : i64
    } -> tensor<i64>
    %2 = tensor.empty() : tensor<f32>
    %3 = linalg.generic {indexing_maps = [#map, #map], iterator_types = []} ins(%1 : tensor<i64>) outs(%2 : tensor<f32>) {
    ^bb0(%in: i64, %out: f32):
      %5 = arith.cmpi slt, %in, %c0_i64 : i64
      %6 = arith.addi %in, %c16_i64 : i64
      %7 = arith.select %5, %6, %in : i64
      %8 = arith.index_cast %7 : i64 to index
      %extracted = tensor.extract %arg5[%8] : tensor<16xf32>
      linalg.yield %extracted : f32
    } -> tensor<f32>
    %4 = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = []} ins(%arg0, %3 : tensor<f32>, tensor<f32>) outs(%2 : tensor<f32>) {
    ^bb0(%in: f32, %in_0: f32, %out: f32):
      %5 = arith.addf %in, %in_0 : f32
      linalg.yield %5 : f32
    } -> tensor<f32>
    return %4 : tensor<f32>
  }
  func.func private @__flex_attention_0(tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<16xf32>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) attributes {flex.num_mask_buffers = 0 : i64, flex.num_score_buffers = 1 : i64, flex.return_lse = false, flex.return_max_scores = false, flex.scale = 0.35355339059327373 : f64, flex.score_mod = @sdpa_score0}
}
