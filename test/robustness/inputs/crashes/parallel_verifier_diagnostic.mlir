// Crash reproducer (fixed): a verifier diagnostic emitted on an MLIR worker
// thread made the Python bindings' error capture abort (nanobind: refcount
// change without the GIL). Racy: parse it many times. Fuzz mutant of
// test/Dialect/Flex/materialize.mlir (swapped lines).
// Two calls sharing one score_mod: each op gets its own copy of the scalar
// body; the shared modifier is erased once both calls are rewritten.
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
}
  func.func private @__flex_attention_1(tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) attributes {flex.num_mask_buffers = 0 : i64, flex.num_score_buffers = 0 : i64, flex.return_lse = false, flex.return_max_scores = false, flex.scale = 0.35355339059327373 : f64, flex.score_mod = @sdpa_score0}

