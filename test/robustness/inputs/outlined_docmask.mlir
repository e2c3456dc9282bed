// Seed input for the robustness fuzzer: frontend output (outlined call,
// GQA, a constant bias table in score_mod, a runtime document-id capture in mask_mod).
#map = affine_map<() -> ()>
module {
  func.func @main(%arg0: tensor<1x4x12x8xf32>, %arg1: tensor<1x2x12x8xf32>, %arg2: tensor<1x2x12x8xf32>, %arg3: tensor<12xi64>) -> tensor<1x4x12x8xf32> {
    %0:3 = call @__flex_attention_0(%arg0, %arg2, %arg2, %arg3) : (tensor<1x4x12x8xf32>, tensor<1x2x12x8xf32>, tensor<1x2x12x8xf32>, tensor<12xi64>) -> (tensor<1x4x12x8xf32>, tensor<1x4x12xf32>, tensor<1x4x12xf32>)
    return %0#0 : tensor<1x4x12x8xf32>
  }
  func.func private @sdpa_score0(%arg0: tensor<f32>, %arg1: tensor<i32>, %arg2: tensor<i32>, %arg3: tensor<i32>, %arg4: tensor<i32>) -> tensor<f32> {
    %c0_i64 = arith.constant 0 : i64
    %c4_i64 = arith.constant 4 : i64
    %cst = arith.constant dense_resource<torch_tensor_4_torch.float32> : tensor<4xf32>
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
  func.func private @sdpa_mask0(%arg0: tensor<i32>, %arg1: tensor<i32>, %arg2: tensor<i32>, %arg3: tensor<i32>, %arg4: tensor<12xi64>) -> tensor<i1> {
    %c0_i64 = arith.constant 0 : i64
    %c12_i64 = arith.constant 12 : i64
    %0 = tensor.empty() : tensor<i64>
    %1 = linalg.generic {indexing_maps = [#map, #map], iterator_types = []} ins(%arg2 : tensor<i32>) outs(%0 : tensor<i64>) {
    ^bb0(%in: i32, %out: i64):
      %9 = arith.extsi %in : i32 to i64
      linalg.yield %9 : i64
    } -> tensor<i64>
    %2 = linalg.generic {indexing_maps = [#map, #map], iterator_types = []} ins(%1 : tensor<i64>) outs(%0 : tensor<i64>) {
    ^bb0(%in: i64, %out: i64):
      %9 = arith.cmpi slt, %in, %c0_i64 : i64
      %10 = arith.addi %in, %c12_i64 : i64
      %11 = arith.select %9, %10, %in : i64
      %12 = arith.index_cast %11 : i64 to index
      %extracted = tensor.extract %arg4[%12] : tensor<12xi64>
      linalg.yield %extracted : i64
    } -> tensor<i64>
    %3 = linalg.generic {indexing_maps = [#map, #map], iterator_types = []} ins(%arg3 : tensor<i32>) outs(%0 : tensor<i64>) {
    ^bb0(%in: i32, %out: i64):
      %9 = arith.extsi %in : i32 to i64
      linalg.yield %9 : i64
    } -> tensor<i64>
    %4 = linalg.generic {indexing_maps = [#map, #map], iterator_types = []} ins(%3 : tensor<i64>) outs(%0 : tensor<i64>) {
    ^bb0(%in: i64, %out: i64):
      %9 = arith.cmpi slt, %in, %c0_i64 : i64
      %10 = arith.addi %in, %c12_i64 : i64
      %11 = arith.select %9, %10, %in : i64
      %12 = arith.index_cast %11 : i64 to index
      %extracted = tensor.extract %arg4[%12] : tensor<12xi64>
      linalg.yield %extracted : i64
    } -> tensor<i64>
    %5 = tensor.empty() : tensor<i1>
    %6 = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = []} ins(%2, %4 : tensor<i64>, tensor<i64>) outs(%5 : tensor<i1>) {
    ^bb0(%in: i64, %in_0: i64, %out: i1):
      %9 = arith.cmpi eq, %in, %in_0 : i64
      linalg.yield %9 : i1
    } -> tensor<i1>
    %7 = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = []} ins(%arg2, %arg3 : tensor<i32>, tensor<i32>) outs(%5 : tensor<i1>) {
    ^bb0(%in: i32, %in_0: i32, %out: i1):
      %9 = arith.cmpi sge, %in, %in_0 : i32
      linalg.yield %9 : i1
    } -> tensor<i1>
    %8 = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = []} ins(%6, %7 : tensor<i1>, tensor<i1>) outs(%5 : tensor<i1>) {
    ^bb0(%in: i1, %in_0: i1, %out: i1):
      %9 = arith.andi %in, %in_0 : i1
      linalg.yield %9 : i1
    } -> tensor<i1>
    return %8 : tensor<i1>
  }
  func.func private @__flex_attention_0(tensor<1x4x12x8xf32>, tensor<1x2x12x8xf32>, tensor<1x2x12x8xf32>, tensor<12xi64>) -> (tensor<1x4x12x8xf32>, tensor<1x4x12xf32>, tensor<1x4x12xf32>) attributes {flex.enable_gqa, flex.mask_mod = @sdpa_mask0, flex.num_mask_buffers = 1 : i64, flex.num_score_buffers = 0 : i64, flex.return_lse = false, flex.return_max_scores = false, flex.scale = 0.35355339059327373 : f64, flex.score_mod = @sdpa_score0}
}

{-#
  dialect_resources: {
    builtin: {
      torch_tensor_4_torch.float32: "0x040000000000003F0000803E0000003E0000803D"
    }
  }
#-}

