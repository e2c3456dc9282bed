// RUN: flex-opt %s -split-input-file -verify-diagnostics

// One case per verifier message of flex.attention (FlexOps.cpp), then
// structural and parser-level errors. None may crash (asserts are on).

func.func @query_rank(%q: tensor<2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %o: tensor<1x2x16x8xf32>) {
  // expected-error @+1 {{expected query to be ranked with rank 4, got 'tensor<2x16x8xf32>'}}
  %r = flex.attention ins(%q, %k, %v : tensor<2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) outs(%o : tensor<1x2x16x8xf32>) scale(0.125) -> tensor<1x2x16x8xf32>
  return
}

// -----

func.func @query_unranked(%q: tensor<*xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %o: tensor<1x2x16x8xf32>) {
  // expected-error @+1 {{expected query to be ranked with rank 4, got 'tensor<*xf32>'}}
  %r = flex.attention ins(%q, %k, %v : tensor<*xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) outs(%o : tensor<1x2x16x8xf32>) scale(0.125) -> tensor<1x2x16x8xf32>
  return
}

// -----

func.func @key_rank(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8x1xf32>, %v: tensor<1x2x16x8xf32>, %o: tensor<1x2x16x8xf32>) {
  // expected-error @+1 {{expected key to be ranked with rank 4}}
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x16x8xf32>, tensor<1x2x16x8x1xf32>, tensor<1x2x16x8xf32>) outs(%o : tensor<1x2x16x8xf32>) scale(0.125) -> tensor<1x2x16x8xf32>
  return
}

// -----

func.func @value_rank(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<2x16x8xf32>, %o: tensor<1x2x16x8xf32>) {
  // expected-error @+1 {{expected value to be ranked with rank 4}}
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<2x16x8xf32>) outs(%o : tensor<1x2x16x8xf32>) scale(0.125) -> tensor<1x2x16x8xf32>
  return
}

// -----

func.func @output_rank(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %o: tensor<2x16x8xf32>) {
  // expected-error @+1 {{expected output to be ranked with rank 4}}
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) outs(%o : tensor<2x16x8xf32>) scale(0.125) -> tensor<2x16x8xf32>
  return
}

// -----

func.func @lse_rank(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %o: tensor<1x2x16x8xf32>, %l: tensor<1x2x16x1xf32>) {
  // expected-error @+1 {{expected logsumexp to be ranked with rank 3}}
  %r:2 = flex.attention ins(%q, %k, %v : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) outs(%o : tensor<1x2x16x8xf32>) logsumexp(%l : tensor<1x2x16x1xf32>) scale(0.125) -> tensor<1x2x16x8xf32>, tensor<1x2x16x1xf32>
  return
}

// -----

func.func @max_rank(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %o: tensor<1x2x16x8xf32>, %l: tensor<2x16xf32>) {
  // expected-error @+1 {{expected max_scores to be ranked with rank 3}}
  %r:2 = flex.attention ins(%q, %k, %v : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) outs(%o : tensor<1x2x16x8xf32>) max_scores(%l : tensor<2x16xf32>) scale(0.125) -> tensor<1x2x16x8xf32>, tensor<2x16xf32>
  return
}

// -----

func.func @tensor_memref_mix(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %o: memref<1x2x16x8xf32>) {
  // expected-error @+1 {{expected all shaped operands to be ranked tensors or all to be memrefs}}
  flex.attention ins(%q, %k, %v : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) outs(%o : memref<1x2x16x8xf32>) scale(0.125)
  return
}

// -----

func.func @tensor_capture_in_memref_op(%q: memref<1x2x16x8xf32>, %k: memref<1x2x16x8xf32>, %v: memref<1x2x16x8xf32>, %o: memref<1x2x16x8xf32>, %c: tensor<2xf32>) {
  // expected-error @+1 {{expected all shaped operands to be ranked tensors or all to be memrefs}}
  flex.attention ins(%q, %k, %v : memref<1x2x16x8xf32>, memref<1x2x16x8xf32>, memref<1x2x16x8xf32>) captures(%c : tensor<2xf32>) outs(%o : memref<1x2x16x8xf32>) scale(0.125)
  return
}

// -----

func.func @query_f64(%q: tensor<1x2x16x8xf64>, %k: tensor<1x2x16x8xf64>, %v: tensor<1x2x16x8xf64>, %o: tensor<1x2x16x8xf64>) {
  // expected-error @+1 {{unsupported query element type 'f64'; expected f32, f16 or bf16}}
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x16x8xf64>, tensor<1x2x16x8xf64>, tensor<1x2x16x8xf64>) outs(%o : tensor<1x2x16x8xf64>) scale(0.125) -> tensor<1x2x16x8xf64>
  return
}

// -----

func.func @query_i32(%q: tensor<1x2x16x8xi32>, %k: tensor<1x2x16x8xi32>, %v: tensor<1x2x16x8xi32>, %o: tensor<1x2x16x8xi32>) {
  // expected-error @+1 {{unsupported query element type 'i32'}}
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x16x8xi32>, tensor<1x2x16x8xi32>, tensor<1x2x16x8xi32>) outs(%o : tensor<1x2x16x8xi32>) scale(0.125) -> tensor<1x2x16x8xi32>
  return
}

// -----

func.func @key_elt(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf16>, %v: tensor<1x2x16x8xf32>, %o: tensor<1x2x16x8xf32>) {
  // expected-error @+1 {{expected key and value element types ('f16', 'f32') to match the query element type 'f32'}}
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf16>, tensor<1x2x16x8xf32>) outs(%o : tensor<1x2x16x8xf32>) scale(0.125) -> tensor<1x2x16x8xf32>
  return
}

// -----

func.func @value_elt(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf16>, %o: tensor<1x2x16x8xf32>) {
  // expected-error @+1 {{expected key and value element types ('f32', 'f16') to match the query element type 'f32'}}
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf16>) outs(%o : tensor<1x2x16x8xf32>) scale(0.125) -> tensor<1x2x16x8xf32>
  return
}

// -----

func.func @output_elt(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %o: tensor<1x2x16x8xf16>) {
  // expected-error @+1 {{expected output element type 'f16' to match the query element type 'f32'}}
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) outs(%o : tensor<1x2x16x8xf16>) scale(0.125) -> tensor<1x2x16x8xf16>
  return
}

// -----

func.func @kv_batch(%q: tensor<3x2x16x8xf32>, %k: tensor<2x2x16x8xf32>, %v: tensor<2x2x16x8xf32>, %o: tensor<3x2x16x8xf32>) {
  // expected-error @+1 {{key batch size 2 must equal the query batch size 3 or be 1}}
  %r = flex.attention ins(%q, %k, %v : tensor<3x2x16x8xf32>, tensor<2x2x16x8xf32>, tensor<2x2x16x8xf32>) outs(%o : tensor<3x2x16x8xf32>) scale(0.125) -> tensor<3x2x16x8xf32>
  return
}

// -----

func.func @kv_batch_disagree(%q: tensor<2x2x16x8xf32>, %k: tensor<2x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %o: tensor<2x2x16x8xf32>) {
  // expected-error @+1 {{key [2, 2, 16, 8] and value [1, 2, 16, 8] must agree on batch and head dimensions}}
  %r = flex.attention ins(%q, %k, %v : tensor<2x2x16x8xf32>, tensor<2x2x16x8xf32>, tensor<1x2x16x8xf32>) outs(%o : tensor<2x2x16x8xf32>) scale(0.125) -> tensor<2x2x16x8xf32>
  return
}

// -----

func.func @kv_heads_disagree(%q: tensor<1x4x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x4x16x8xf32>, %o: tensor<1x4x16x8xf32>) {
  // expected-error @+1 {{key [1, 2, 16, 8] and value [1, 4, 16, 8] must agree on batch and head dimensions}}
  %r = flex.attention ins(%q, %k, %v : tensor<1x4x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x4x16x8xf32>) outs(%o : tensor<1x4x16x8xf32>) scale(0.125) -> tensor<1x4x16x8xf32>
  return
}

// -----

func.func @n_mismatch(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x32x8xf32>, %o: tensor<1x2x16x8xf32>) {
  // expected-error @+1 {{key sequence length N = 16 differs from value sequence length 32}}
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x32x8xf32>) outs(%o : tensor<1x2x16x8xf32>) scale(0.125) -> tensor<1x2x16x8xf32>
  return
}

// -----

func.func @e_mismatch(%q: tensor<1x2x16x4xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %o: tensor<1x2x16x8xf32>) {
  // expected-error @+1 {{query head dim E = 4 differs from key head dim 8}}
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x16x4xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) outs(%o : tensor<1x2x16x8xf32>) scale(0.125) -> tensor<1x2x16x8xf32>
  return
}

// -----

func.func @gqa_multiple(%q: tensor<1x3x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %o: tensor<1x3x16x8xf32>) {
  // expected-error @+1 {{query heads Hq = 3 must be a multiple of key/value heads Hkv = 2}}
  %r = flex.attention ins(%q, %k, %v : tensor<1x3x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) outs(%o : tensor<1x3x16x8xf32>) scale(0.125) -> tensor<1x3x16x8xf32>
  return
}

// -----

func.func @gqa_zero_kv_heads(%q: tensor<1x2x16x8xf32>, %k: tensor<1x0x16x8xf32>, %v: tensor<1x0x16x8xf32>, %o: tensor<1x2x16x8xf32>) {
  // expected-error @+1 {{query heads Hq = 2 must be a multiple of key/value heads Hkv = 0}}
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x16x8xf32>, tensor<1x0x16x8xf32>, tensor<1x0x16x8xf32>) outs(%o : tensor<1x2x16x8xf32>) scale(0.125) -> tensor<1x2x16x8xf32>
  return
}

// -----

func.func @kv_group_size(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %o: tensor<1x2x16x8xf32>) {
  // expected-error @+1 {{kv_group_size must be positive, got 0}}
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) outs(%o : tensor<1x2x16x8xf32>) scale(0.125) {kv_group_size = 0 : i64} -> tensor<1x2x16x8xf32>
  return
}

// -----

func.func @output_shape(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x4xf32>, %o: tensor<1x2x16x8xf32>) {
  // expected-error @+1 {{expected output shape [B, Hq, M, Ev] = [1, 2, 16, 4], got [1, 2, 16, 8]}}
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x4xf32>) outs(%o : tensor<1x2x16x8xf32>) scale(0.125) -> tensor<1x2x16x8xf32>
  return
}

// -----

func.func @output_shape_dynamic(%q: tensor<?x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %o: tensor<?x2x8x8xf32>) {
  // expected-error @+1 {{expected output shape [B, Hq, M, Ev] = [?, 2, 16, 8], got [?, 2, 8, 8]}}
  %r = flex.attention ins(%q, %k, %v : tensor<?x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) outs(%o : tensor<?x2x8x8xf32>) scale(0.125) -> tensor<?x2x8x8xf32>
  return
}

// -----

func.func @lse_elt(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %o: tensor<1x2x16x8xf32>, %l: tensor<1x2x16xf16>) {
  // expected-error @+1 {{expected logsumexp element type f32, got 'f16'}}
  %r:2 = flex.attention ins(%q, %k, %v : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) outs(%o : tensor<1x2x16x8xf32>) logsumexp(%l : tensor<1x2x16xf16>) scale(0.125) -> tensor<1x2x16x8xf32>, tensor<1x2x16xf16>
  return
}

// -----

func.func @max_elt(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %o: tensor<1x2x16x8xf32>, %l: tensor<1x2x16xbf16>) {
  // expected-error @+1 {{expected max_scores element type f32, got 'bf16'}}
  %r:2 = flex.attention ins(%q, %k, %v : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) outs(%o : tensor<1x2x16x8xf32>) max_scores(%l : tensor<1x2x16xbf16>) scale(0.125) -> tensor<1x2x16x8xf32>, tensor<1x2x16xbf16>
  return
}

// -----

func.func @lse_shape(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %o: tensor<1x2x16x8xf32>, %l: tensor<1x2x8xf32>) {
  // expected-error @+1 {{expected logsumexp shape [B, Hq, M] = [1, 2, 16], got [1, 2, 8]}}
  %r:2 = flex.attention ins(%q, %k, %v : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) outs(%o : tensor<1x2x16x8xf32>) logsumexp(%l : tensor<1x2x8xf32>) scale(0.125) -> tensor<1x2x16x8xf32>, tensor<1x2x8xf32>
  return
}

// -----

func.func @max_shape(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %o: tensor<1x2x16x8xf32>, %l: tensor<1x1x16xf32>) {
  // expected-error @+1 {{expected max_scores shape [B, Hq, M] = [1, 2, 16], got [1, 1, 16]}}
  %r:2 = flex.attention ins(%q, %k, %v : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) outs(%o : tensor<1x2x16x8xf32>) max_scores(%l : tensor<1x1x16xf32>) scale(0.125) -> tensor<1x2x16x8xf32>, tensor<1x1x16xf32>
  return
}

// -----

func.func @offsets_count(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %o: tensor<1x2x16x8xf32>, %i: index) {
  // expected-error @+1 {{expected 0 or 3 offsets (b, h, q_idx), got 2}}
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) offsets(%i, %i) outs(%o : tensor<1x2x16x8xf32>) scale(0.125) -> tensor<1x2x16x8xf32>
  return
}

// -----

func.func @result_count(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %o: tensor<1x2x16x8xf32>) {
  // expected-error @+1 {{expected 1 results (one per init), got 2}}
  %r:2 = flex.attention ins(%q, %k, %v : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) outs(%o : tensor<1x2x16x8xf32>) scale(0.125) -> tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>
  return
}

// -----

func.func @result_count_zero(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %o: tensor<1x2x16x8xf32>) {
  // expected-error @+1 {{expected 1 results (one per init), got 0}}
  flex.attention ins(%q, %k, %v : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) outs(%o : tensor<1x2x16x8xf32>) scale(0.125)
  return
}

// -----

func.func @result_count_aux(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %o: tensor<1x2x16x8xf32>, %l: tensor<1x2x16xf32>) {
  // expected-error @+1 {{expected 2 results (one per init), got 1}}
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) outs(%o : tensor<1x2x16x8xf32>) logsumexp(%l : tensor<1x2x16xf32>) scale(0.125) -> tensor<1x2x16x8xf32>
  return
}

// -----

func.func @result_type(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %o: tensor<1x2x16x8xf32>) {
  // expected-error @+1 {{result type 'tensor<1x2x16x4xf32>' differs from its init type 'tensor<1x2x16x8xf32>'}}
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) outs(%o : tensor<1x2x16x8xf32>) scale(0.125) -> tensor<1x2x16x4xf32>
  return
}

// -----

func.func @result_type_dynamic(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %o: tensor<1x2x16x8xf32>) {
  // expected-error @+1 {{result type 'tensor<?x2x16x8xf32>' differs from its init type 'tensor<1x2x16x8xf32>'}}
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) outs(%o : tensor<1x2x16x8xf32>) scale(0.125) -> tensor<?x2x16x8xf32>
  return
}

// -----

func.func @memref_results(%q: memref<1x2x16x8xf32>, %k: memref<1x2x16x8xf32>, %v: memref<1x2x16x8xf32>, %o: memref<1x2x16x8xf32>) {
  // expected-error @+1 {{expected no results when operating on memrefs}}
  %r = flex.attention ins(%q, %k, %v : memref<1x2x16x8xf32>, memref<1x2x16x8xf32>, memref<1x2x16x8xf32>) outs(%o : memref<1x2x16x8xf32>) scale(0.125) -> tensor<1x2x16x8xf32>
  return
}

// -----

func.func @score_mod_args(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %o: tensor<1x2x16x8xf32>) {
  // expected-error @+1 {{score_mod region must have arguments (score: f32, b, h, q_idx, kv_idx: index)}}
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) outs(%o : tensor<1x2x16x8xf32>) scale(0.125)
      score_mod {
      ^bb0(%s: f32, %b: index, %h: index, %m: index):
        flex.yield %s : f32
      } -> tensor<1x2x16x8xf32>
  return
}

// -----

func.func @score_mod_arg_type(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %o: tensor<1x2x16x8xf32>) {
  // expected-error @+1 {{score_mod region must have arguments (score: f32, b, h, q_idx, kv_idx: index)}}
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) outs(%o : tensor<1x2x16x8xf32>) scale(0.125)
      score_mod {
      ^bb0(%s: f16, %b: index, %h: index, %m: index, %n: index):
        flex.yield %s : f16
      } -> tensor<1x2x16x8xf32>
  return
}

// -----

func.func @mask_mod_args(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %o: tensor<1x2x16x8xf32>) {
  // expected-error @+1 {{mask_mod region must have arguments (b, h, q_idx, kv_idx: index)}}
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) outs(%o : tensor<1x2x16x8xf32>) scale(0.125)
      mask_mod {
      ^bb0(%b: i32, %h: i32, %m: i32, %n: i32):
        %c = arith.cmpi sge, %m, %n : i32
        flex.yield %c : i1
      } -> tensor<1x2x16x8xf32>
  return
}

// -----

func.func @score_mod_terminator(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %o: tensor<1x2x16x8xf32>) {
  // expected-error @+1 {{score_mod region must end with flex.yield}}
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) outs(%o : tensor<1x2x16x8xf32>) scale(0.125)
      score_mod {
      ^bb0(%s: f32, %b: index, %h: index, %m: index, %n: index):
        llvm.unreachable
      } -> tensor<1x2x16x8xf32>
  return
}

// -----

func.func @mask_mod_terminator(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %o: tensor<1x2x16x8xf32>) {
  // expected-error @+1 {{mask_mod region must end with flex.yield}}
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) outs(%o : tensor<1x2x16x8xf32>) scale(0.125)
      mask_mod {
      ^bb0(%b: index, %h: index, %m: index, %n: index):
        llvm.unreachable
      } -> tensor<1x2x16x8xf32>
  return
}

// -----

func.func @score_mod_yield_type(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %o: tensor<1x2x16x8xf32>) {
  // expected-error @+1 {{score_mod region must yield exactly one 'f32'}}
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) outs(%o : tensor<1x2x16x8xf32>) scale(0.125)
      score_mod {
      ^bb0(%s: f32, %b: index, %h: index, %m: index, %n: index):
        %c = arith.cmpi sge, %m, %n : index
        flex.yield %c : i1
      } -> tensor<1x2x16x8xf32>
  return
}

// -----

func.func @score_mod_yield_count(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %o: tensor<1x2x16x8xf32>) {
  // expected-error @+1 {{score_mod region must yield exactly one 'f32'}}
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) outs(%o : tensor<1x2x16x8xf32>) scale(0.125)
      score_mod {
      ^bb0(%s: f32, %b: index, %h: index, %m: index, %n: index):
        flex.yield %s, %s : f32, f32
      } -> tensor<1x2x16x8xf32>
  return
}

// -----

func.func @mask_mod_yield_type(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %o: tensor<1x2x16x8xf32>) {
  // expected-error @+1 {{mask_mod region must yield exactly one 'i1'}}
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) outs(%o : tensor<1x2x16x8xf32>) scale(0.125)
      mask_mod {
      ^bb0(%b: index, %h: index, %m: index, %n: index):
        %c = arith.constant 1.0 : f32
        flex.yield %c : f32
      } -> tensor<1x2x16x8xf32>
  return
}

// -----

func.func @mask_mod_yield_none(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %o: tensor<1x2x16x8xf32>) {
  // expected-error @+1 {{mask_mod region must yield exactly one 'i1'}}
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) outs(%o : tensor<1x2x16x8xf32>) scale(0.125)
      mask_mod {
      ^bb0(%b: index, %h: index, %m: index, %n: index):
        flex.yield
      } -> tensor<1x2x16x8xf32>
  return
}

// -----

func.func @uncaptured_tensor(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %o: tensor<1x2x16x8xf32>, %bias: tensor<2xf32>) {
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) outs(%o : tensor<1x2x16x8xf32>) scale(0.125)
      score_mod {
      ^bb0(%s: f32, %b: index, %h: index, %m: index, %n: index):
        // expected-error @+1 {{uses a tensor defined outside its flex.attention that is not listed in `captures`}}
        %x = tensor.extract %bias[%h] : tensor<2xf32>
        %t = arith.addf %s, %x : f32
        flex.yield %t : f32
      } -> tensor<1x2x16x8xf32>
  return
}

// -----

func.func @uncaptured_query(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %o: tensor<1x2x16x8xf32>) {
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) outs(%o : tensor<1x2x16x8xf32>) scale(0.125)
      mask_mod {
      ^bb0(%b: index, %h: index, %m: index, %n: index):
        // expected-error @+1 {{uses a tensor defined outside its flex.attention that is not listed in `captures`}}
        %x = tensor.extract %q[%b, %h, %m, %n] : tensor<1x2x16x8xf32>
        %z = arith.constant 0.0 : f32
        %c = arith.cmpf ogt, %x, %z : f32
        flex.yield %c : i1
      } -> tensor<1x2x16x8xf32>
  return
}

// -----

func.func @yield_outside() {
  // expected-error @+1 {{'flex.yield' op expects parent op to be one of 'flex.attention, flex.online_attention, flex.attention_backward'}}
  flex.yield
  return
}

// -----

func.func @empty_block(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %o: tensor<1x2x16x8xf32>) {
  // expected-error @+1 {{expects a non-empty block}}
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) outs(%o : tensor<1x2x16x8xf32>) scale(0.125)
      score_mod {
      ^bb0(%s: f32, %b: index, %h: index, %m: index, %n: index):

      } -> tensor<1x2x16x8xf32>
  return
}

// -----

func.func @no_terminator(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %o: tensor<1x2x16x8xf32>) {
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) outs(%o : tensor<1x2x16x8xf32>) scale(0.125)
      score_mod {
      ^bb0(%s: f32, %b: index, %h: index, %m: index, %n: index):
        // expected-error @+1 {{block with no terminator}}
        %x = arith.addf %s, %s : f32
      } -> tensor<1x2x16x8xf32>
  return
}

// -----

func.func @two_blocks(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %o: tensor<1x2x16x8xf32>) {
  // expected-error @+1 {{expects region #0 to have 0 or 1 blocks}}
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) outs(%o : tensor<1x2x16x8xf32>) scale(0.125)
      score_mod {
      ^bb0(%s: f32, %b: index, %h: index, %m: index, %n: index):
        flex.yield %s : f32
      ^bb1:
        flex.yield %s : f32
      } -> tensor<1x2x16x8xf32>
  return
}

// -----

func.func @missing_scale(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %o: tensor<1x2x16x8xf32>) {
  // expected-error @+1 {{expected 'scale'}}
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) outs(%o : tensor<1x2x16x8xf32>) -> tensor<1x2x16x8xf32>
  return
}

// -----

func.func @integer_scale(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %o: tensor<1x2x16x8xf32>) {
  // expected-error @+2 {{unexpected decimal integer literal for a floating point value}}
  // expected-note @+1 {{add a trailing dot to make the literal a float}}
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) outs(%o : tensor<1x2x16x8xf32>) scale(1) -> tensor<1x2x16x8xf32>
  return
}

// -----

func.func @kv_group_size_type(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %o: tensor<1x2x16x8xf32>) {
  // expected-error @+1 {{attribute 'kv_group_size' failed to satisfy constraint: 64-bit signless integer attribute}}
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) outs(%o : tensor<1x2x16x8xf32>) scale(0.125) {kv_group_size = "x"} -> tensor<1x2x16x8xf32>
  return
}

// -----

func.func @non_index_offsets(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %o: tensor<1x2x16x8xf32>, %i: i32) {
  // expected-error @+1 {{operand #3 must be variadic of index}}
  %r = "flex.attention"(%q, %k, %v, %i, %i, %i, %o) <{operandSegmentSizes = array<i32: 1, 1, 1, 0, 3, 0, 0, 0, 0, 1, 0, 0>, scale = 1.250000e-01 : f32}> ({}, {}) : (tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, i32, i32, i32, tensor<1x2x16x8xf32>) -> tensor<1x2x16x8xf32>
  return
}

// -----

func.func @segment_sizes(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %o: tensor<1x2x16x8xf32>) {
  // expected-error @+1 {{operand count (4) does not match with the total size (5) specified in attribute 'operandSegmentSizes'}}
  %r = "flex.attention"(%q, %k, %v, %o) <{operandSegmentSizes = array<i32: 1, 1, 1, 0, 0, 0, 0, 0, 0, 1, 1, 0>, scale = 1.250000e-01 : f32}> ({}, {}) : (tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) -> tensor<1x2x16x8xf32>
  return
}

// -----

func.func @region_count(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %o: tensor<1x2x16x8xf32>) {
  // expected-error @+1 {{expected 2 regions}}
  %r = "flex.attention"(%q, %k, %v, %o) <{operandSegmentSizes = array<i32: 1, 1, 1, 0, 0, 0, 0, 0, 0, 1, 0, 0>, scale = 1.250000e-01 : f32}> ({}) : (tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) -> tensor<1x2x16x8xf32>
  return
}

// -----

func.func @missing_scale_generic(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %o: tensor<1x2x16x8xf32>) {
  // expected-error @+1 {{requires attribute 'scale'}}
  %r = "flex.attention"(%q, %k, %v, %o) <{operandSegmentSizes = array<i32: 1, 1, 1, 0, 0, 0, 0, 0, 0, 1, 0, 0>}> ({}, {}) : (tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) -> tensor<1x2x16x8xf32>
  return
}

// -----

func.func @non_shaped_query(%q: f32, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %o: tensor<1x2x16x8xf32>) {
  // expected-error @+1 {{operand #0 must be shaped of any type values}}
  %r = "flex.attention"(%q, %k, %v, %o) <{operandSegmentSizes = array<i32: 1, 1, 1, 0, 0, 0, 0, 0, 0, 1, 0, 0>, scale = 1.250000e-01 : f32}> ({}, {}) : (f32, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) -> tensor<1x2x16x8xf32>
  return
}

// -----

func.func @kv_group_size_out_of_range(%q: tensor<1x4x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %o: tensor<1x4x16x8xf32>) {
  // expected-error @+1 {{kv_group_size = 1 maps query head 3 to key/value head 3, but key/value have Hkv = 2 heads}}
  %r = flex.attention ins(%q, %k, %v : tensor<1x4x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) outs(%o : tensor<1x4x16x8xf32>) scale(0.125) {kv_group_size = 1 : i64} -> tensor<1x4x16x8xf32>
  return
}

// -----

func.func @kv_group_size_offset_out_of_range(%q: tensor<1x2x16x8xf32>, %k: tensor<1x1x16x8xf32>, %v: tensor<1x1x16x8xf32>, %o: tensor<1x2x16x8xf32>, %i: index) {
  %h0 = arith.constant 2 : index
  // expected-error @+1 {{kv_group_size = 2 maps query head 3 to key/value head 1, but key/value have Hkv = 1 heads}}
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x16x8xf32>, tensor<1x1x16x8xf32>, tensor<1x1x16x8xf32>) offsets(%i, %h0, %i) outs(%o : tensor<1x2x16x8xf32>) scale(0.125) {kv_group_size = 2 : i64} -> tensor<1x2x16x8xf32>
  return
}

// -----

func.func @online_key_shape(%q: tensor<16x8xf32>, %k: tensor<32x8xf32>, %v: tensor<32x4xf32>,
                            %mx: tensor<16xf32>, %l: tensor<16xf32>, %acc: tensor<16x4xf32>, %i: index) {
  // expected-error @+1 {{expected key of shape [E, Nt] = [8, 32] for query [16, 8] and value [32, 4]}}
  %r:3 = flex.online_attention ins(%q, %k, %v : tensor<16x8xf32>, tensor<32x8xf32>, tensor<32x4xf32>)
      at(%i, %i, %i, %i) bounds(%i, %i)
      outs(%mx, %l, %acc : tensor<16xf32>, tensor<16xf32>, tensor<16x4xf32>) scale(0.125) {transposed_key}
      -> tensor<16xf32>, tensor<16xf32>, tensor<16x4xf32>
  return
}

// -----

func.func @online_mask_when_without_mask(%q: tensor<16x8xf32>, %k: tensor<32x8xf32>, %v: tensor<32x4xf32>,
                                         %mx: tensor<16xf32>, %l: tensor<16xf32>, %acc: tensor<16x4xf32>,
                                         %i: index, %w: i1) {
  // expected-error @+1 {{mask_when without a mask_mod region}}
  %r:3 = flex.online_attention ins(%q, %k, %v : tensor<16x8xf32>, tensor<32x8xf32>, tensor<32x4xf32>)
      at(%i, %i, %i, %i) bounds(%i, %i)
      outs(%mx, %l, %acc : tensor<16xf32>, tensor<16xf32>, tensor<16x4xf32>) scale(0.125) mask_when(%w)
      -> tensor<16xf32>, tensor<16xf32>, tensor<16x4xf32>
  return
}

// -----

func.func @online_dynamic(%q: tensor<?x8xf32>, %k: tensor<32x8xf32>, %v: tensor<32x4xf32>,
                          %mx: tensor<16xf32>, %l: tensor<16xf32>, %acc: tensor<16x4xf32>, %i: index) {
  // expected-error @+1 {{expected query to have a static shape of rank 2, got 'tensor<?x8xf32>'}}
  %r:3 = flex.online_attention ins(%q, %k, %v : tensor<?x8xf32>, tensor<32x8xf32>, tensor<32x4xf32>)
      at(%i, %i, %i, %i) bounds(%i, %i)
      outs(%mx, %l, %acc : tensor<16xf32>, tensor<16xf32>, tensor<16x4xf32>) scale(0.125)
      -> tensor<16xf32>, tensor<16xf32>, tensor<16x4xf32>
  return
}

// -----

func.func @online_state_type(%q: tensor<16x8xbf16>, %k: tensor<32x8xbf16>, %v: tensor<32x4xbf16>,
                             %mx: tensor<16xbf16>, %l: tensor<16xf32>, %acc: tensor<16x4xf32>, %i: index) {
  // expected-error @+1 {{expected the softmax state (max, sum, acc) in f32}}
  %r:3 = flex.online_attention ins(%q, %k, %v : tensor<16x8xbf16>, tensor<32x8xbf16>, tensor<32x4xbf16>)
      at(%i, %i, %i, %i) bounds(%i, %i)
      outs(%mx, %l, %acc : tensor<16xbf16>, tensor<16xf32>, tensor<16x4xf32>) scale(0.125)
      -> tensor<16xbf16>, tensor<16xf32>, tensor<16x4xf32>
  return
}

// -----

func.func @online_mask_yield(%q: tensor<16x8xf32>, %k: tensor<32x8xf32>, %v: tensor<32x4xf32>,
                             %mx: tensor<16xf32>, %l: tensor<16xf32>, %acc: tensor<16x4xf32>, %i: index) {
  // expected-error @+1 {{mask_mod region must yield exactly one 'i1'}}
  %r:3 = flex.online_attention ins(%q, %k, %v : tensor<16x8xf32>, tensor<32x8xf32>, tensor<32x4xf32>)
      at(%i, %i, %i, %i) bounds(%i, %i)
      outs(%mx, %l, %acc : tensor<16xf32>, tensor<16xf32>, tensor<16x4xf32>) scale(0.125)
      mask_mod {
      ^bb0(%b: index, %h: index, %m: index, %n: index):
        %f = arith.constant 0.0 : f32
        flex.yield %f : f32
      } -> tensor<16xf32>, tensor<16xf32>, tensor<16x4xf32>
  return
}

// -----

func.func @blocks_num_rank(%q: tensor<1x2x64x8xf32>, %k: tensor<1x2x64x8xf32>, %v: tensor<1x2x64x8xf32>, %o: tensor<1x2x64x8xf32>, %n: tensor<2x2xi32>, %i: tensor<1x2x2x2xi32>) {
  // expected-error @+1 {{expected kv_num_blocks to be ranked with rank 3 [B, H, MB], got 'tensor<2x2xi32>'}}
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x64x8xf32>, tensor<1x2x64x8xf32>, tensor<1x2x64x8xf32>) kv_blocks(%n, %i : tensor<2x2xi32>, tensor<1x2x2x2xi32>) block_sizes [32, 32] outs(%o : tensor<1x2x64x8xf32>) scale(0.125) -> tensor<1x2x64x8xf32>
  return
}

// -----

func.func @blocks_idx_rank(%q: tensor<1x2x64x8xf32>, %k: tensor<1x2x64x8xf32>, %v: tensor<1x2x64x8xf32>, %o: tensor<1x2x64x8xf32>, %n: tensor<1x2x2xi32>, %i: tensor<1x2x2xi32>) {
  // expected-error @+1 {{expected kv_indices to be ranked with rank 4 [B, H, MB, NB], got 'tensor<1x2x2xi32>'}}
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x64x8xf32>, tensor<1x2x64x8xf32>, tensor<1x2x64x8xf32>) kv_blocks(%n, %i : tensor<1x2x2xi32>, tensor<1x2x2xi32>) block_sizes [32, 32] outs(%o : tensor<1x2x64x8xf32>) scale(0.125) -> tensor<1x2x64x8xf32>
  return
}

// -----

func.func @blocks_elt(%q: tensor<1x2x64x8xf32>, %k: tensor<1x2x64x8xf32>, %v: tensor<1x2x64x8xf32>, %o: tensor<1x2x64x8xf32>, %n: tensor<1x2x2xi32>, %i: tensor<1x2x2x2xf32>) {
  // expected-error @+1 {{expected kv_indices element type i32 or i64, got 'f32'}}
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x64x8xf32>, tensor<1x2x64x8xf32>, tensor<1x2x64x8xf32>) kv_blocks(%n, %i : tensor<1x2x2xi32>, tensor<1x2x2x2xf32>) block_sizes [32, 32] outs(%o : tensor<1x2x64x8xf32>) scale(0.125) -> tensor<1x2x64x8xf32>
  return
}

// -----

func.func @blocks_pair_dims(%q: tensor<1x2x64x8xf32>, %k: tensor<1x2x64x8xf32>, %v: tensor<1x2x64x8xf32>, %o: tensor<1x2x64x8xf32>, %n: tensor<1x2x2xi32>, %i: tensor<1x2x3x2xi32>) {
  // expected-error @+1 {{kv_num_blocks and kv_indices differ in dimension 2 (2 vs 3)}}
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x64x8xf32>, tensor<1x2x64x8xf32>, tensor<1x2x64x8xf32>) kv_blocks(%n, %i : tensor<1x2x2xi32>, tensor<1x2x3x2xi32>) block_sizes [32, 32] outs(%o : tensor<1x2x64x8xf32>) scale(0.125) -> tensor<1x2x64x8xf32>
  return
}

// -----

func.func @blocks_full_dims(%q: tensor<1x2x64x8xf32>, %k: tensor<1x2x64x8xf32>, %v: tensor<1x2x64x8xf32>, %o: tensor<1x2x64x8xf32>, %n: tensor<1x2x2xi32>, %i: tensor<1x2x2x2xi32>, %fn: tensor<1x1x2xi32>, %fi: tensor<1x1x2x2xi32>) {
  // expected-error @+1 {{kv_num_blocks and full_kv_num_blocks differ in dimension 1 (2 vs 1)}}
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x64x8xf32>, tensor<1x2x64x8xf32>, tensor<1x2x64x8xf32>) kv_blocks(%n, %i : tensor<1x2x2xi32>, tensor<1x2x2x2xi32>) full_kv_blocks(%fn, %fi : tensor<1x1x2xi32>, tensor<1x1x2x2xi32>) block_sizes [32, 32] outs(%o : tensor<1x2x64x8xf32>) scale(0.125) -> tensor<1x2x64x8xf32>
  return
}

// -----

func.func @blocks_full_rank(%q: tensor<1x2x64x8xf32>, %k: tensor<1x2x64x8xf32>, %v: tensor<1x2x64x8xf32>, %o: tensor<1x2x64x8xf32>, %n: tensor<1x2x2xi32>, %i: tensor<1x2x2x2xi32>) {
  // expected-error @+1 {{expected full_kv_indices to be ranked with rank 4 [B, H, MB, NB], got 'tensor<1x2x2xi32>'}}
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x64x8xf32>, tensor<1x2x64x8xf32>, tensor<1x2x64x8xf32>) kv_blocks(%n, %i : tensor<1x2x2xi32>, tensor<1x2x2x2xi32>) full_kv_blocks(%n, %n : tensor<1x2x2xi32>, tensor<1x2x2xi32>) block_sizes [32, 32] outs(%o : tensor<1x2x64x8xf32>) scale(0.125) -> tensor<1x2x64x8xf32>
  return
}

// -----

func.func @blocks_batch(%q: tensor<1x2x64x8xf32>, %k: tensor<1x2x64x8xf32>, %v: tensor<1x2x64x8xf32>, %o: tensor<1x2x64x8xf32>, %n: tensor<3x2x2xi32>, %i: tensor<3x2x2x2xi32>) {
  // expected-error @+1 {{block tensors have batch extent 3; expected 1 or the query's 1}}
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x64x8xf32>, tensor<1x2x64x8xf32>, tensor<1x2x64x8xf32>) kv_blocks(%n, %i : tensor<3x2x2xi32>, tensor<3x2x2x2xi32>) block_sizes [32, 32] outs(%o : tensor<1x2x64x8xf32>) scale(0.125) -> tensor<1x2x64x8xf32>
  return
}

// -----

func.func @blocks_heads(%q: tensor<1x2x64x8xf32>, %k: tensor<1x2x64x8xf32>, %v: tensor<1x2x64x8xf32>, %o: tensor<1x2x64x8xf32>, %n: tensor<1x4x2xi32>, %i: tensor<1x4x2x2xi32>) {
  // expected-error @+1 {{block tensors have head extent 4; expected 1 or the query's 2}}
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x64x8xf32>, tensor<1x2x64x8xf32>, tensor<1x2x64x8xf32>) kv_blocks(%n, %i : tensor<1x4x2xi32>, tensor<1x4x2x2xi32>) block_sizes [32, 32] outs(%o : tensor<1x2x64x8xf32>) scale(0.125) -> tensor<1x2x64x8xf32>
  return
}

// -----

func.func @blocks_cover(%q: tensor<1x2x64x8xf32>, %k: tensor<1x2x64x8xf32>, %v: tensor<1x2x64x8xf32>, %o: tensor<1x2x64x8xf32>, %n: tensor<1x2x2xi32>, %i: tensor<1x2x2x2xi32>) {
  // expected-error @+1 {{block tensors cover 2 query blocks of 16 rows, fewer than M = 64}}
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x64x8xf32>, tensor<1x2x64x8xf32>, tensor<1x2x64x8xf32>) kv_blocks(%n, %i : tensor<1x2x2xi32>, tensor<1x2x2x2xi32>) block_sizes [16, 32] outs(%o : tensor<1x2x64x8xf32>) scale(0.125) -> tensor<1x2x64x8xf32>
  return
}

// -----

func.func @blocks_no_sizes(%q: tensor<1x2x64x8xf32>, %k: tensor<1x2x64x8xf32>, %v: tensor<1x2x64x8xf32>, %o: tensor<1x2x64x8xf32>, %n: tensor<1x2x2xi32>, %i: tensor<1x2x2x2xi32>) {
  // expected-error @+1 {{kv_blocks require block_sizes [QBS, KVBS]}}
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x64x8xf32>, tensor<1x2x64x8xf32>, tensor<1x2x64x8xf32>) kv_blocks(%n, %i : tensor<1x2x2xi32>, tensor<1x2x2x2xi32>) outs(%o : tensor<1x2x64x8xf32>) scale(0.125) -> tensor<1x2x64x8xf32>
  return
}

// -----

func.func @blocks_sizes_positive(%q: tensor<1x2x64x8xf32>, %k: tensor<1x2x64x8xf32>, %v: tensor<1x2x64x8xf32>, %o: tensor<1x2x64x8xf32>, %n: tensor<1x2x2xi32>, %i: tensor<1x2x2x2xi32>) {
  // expected-error @+1 {{block_sizes must be two positive integers [QBS, KVBS]}}
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x64x8xf32>, tensor<1x2x64x8xf32>, tensor<1x2x64x8xf32>) kv_blocks(%n, %i : tensor<1x2x2xi32>, tensor<1x2x2x2xi32>) block_sizes [32, 0] outs(%o : tensor<1x2x64x8xf32>) scale(0.125) -> tensor<1x2x64x8xf32>
  return
}

// -----

func.func @blocks_sizes_count(%q: tensor<1x2x64x8xf32>, %k: tensor<1x2x64x8xf32>, %v: tensor<1x2x64x8xf32>, %o: tensor<1x2x64x8xf32>, %n: tensor<1x2x2xi32>, %i: tensor<1x2x2x2xi32>) {
  // expected-error @+1 {{block_sizes must be two positive integers [QBS, KVBS]}}
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x64x8xf32>, tensor<1x2x64x8xf32>, tensor<1x2x64x8xf32>) kv_blocks(%n, %i : tensor<1x2x2xi32>, tensor<1x2x2x2xi32>) block_sizes [32] outs(%o : tensor<1x2x64x8xf32>) scale(0.125) -> tensor<1x2x64x8xf32>
  return
}

// -----

func.func @blocks_sizes_alone(%q: tensor<1x2x64x8xf32>, %k: tensor<1x2x64x8xf32>, %v: tensor<1x2x64x8xf32>, %o: tensor<1x2x64x8xf32>) {
  // expected-error @+1 {{block_sizes given without kv_blocks}}
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x64x8xf32>, tensor<1x2x64x8xf32>, tensor<1x2x64x8xf32>) block_sizes [32, 32] outs(%o : tensor<1x2x64x8xf32>) scale(0.125) -> tensor<1x2x64x8xf32>
  return
}

// -----

func.func @blocks_mixed_kinds(%q: tensor<1x2x64x8xf32>, %k: tensor<1x2x64x8xf32>, %v: tensor<1x2x64x8xf32>, %o: tensor<1x2x64x8xf32>, %n: memref<1x2x2xi32>, %i: tensor<1x2x2x2xi32>) {
  // expected-error @+1 {{expected all shaped operands to be ranked tensors or all to be memrefs}}
  %r = flex.attention ins(%q, %k, %v : tensor<1x2x64x8xf32>, tensor<1x2x64x8xf32>, tensor<1x2x64x8xf32>) kv_blocks(%n, %i : memref<1x2x2xi32>, tensor<1x2x2x2xi32>) block_sizes [32, 32] outs(%o : tensor<1x2x64x8xf32>) scale(0.125) -> tensor<1x2x64x8xf32>
  return
}

// -----

func.func @blocks_full_without_idx(%q: tensor<1x2x64x8xf32>, %k: tensor<1x2x64x8xf32>, %v: tensor<1x2x64x8xf32>, %o: tensor<1x2x64x8xf32>, %n: tensor<1x2x2xi32>, %i: tensor<1x2x2x2xi32>) {
  // expected-error @+1 {{expected both full_kv_num_blocks and full_kv_indices, or neither}}
  %r = "flex.attention"(%q, %k, %v, %n, %i, %n, %o) <{block_sizes = array<i64: 32, 32>, operandSegmentSizes = array<i32: 1, 1, 1, 0, 0, 1, 1, 1, 0, 1, 0, 0>, scale = 1.250000e-01 : f32}> ({}, {}) : (tensor<1x2x64x8xf32>, tensor<1x2x64x8xf32>, tensor<1x2x64x8xf32>, tensor<1x2x2xi32>, tensor<1x2x2x2xi32>, tensor<1x2x2xi32>, tensor<1x2x64x8xf32>) -> tensor<1x2x64x8xf32>
  return
}

// -----

func.func @blocks_num_without_idx(%q: tensor<1x2x64x8xf32>, %k: tensor<1x2x64x8xf32>, %v: tensor<1x2x64x8xf32>, %o: tensor<1x2x64x8xf32>, %n: tensor<1x2x2xi32>) {
  // expected-error @+1 {{expected both kv_num_blocks and kv_indices}}
  %r = "flex.attention"(%q, %k, %v, %n, %o) <{block_sizes = array<i64: 32, 32>, operandSegmentSizes = array<i32: 1, 1, 1, 0, 0, 1, 0, 0, 0, 1, 0, 0>, scale = 1.250000e-01 : f32}> ({}, {}) : (tensor<1x2x64x8xf32>, tensor<1x2x64x8xf32>, tensor<1x2x64x8xf32>, tensor<1x2x2xi32>, tensor<1x2x64x8xf32>) -> tensor<1x2x64x8xf32>
  return
}

// -----

func.func @online_rows_per_head(%q: tensor<6x8xf32>, %k: tensor<32x8xf32>, %v: tensor<32x4xf32>,
                                %mx: tensor<6xf32>, %l: tensor<6xf32>, %acc: tensor<6x4xf32>, %i: index) {
  // expected-error @+1 {{expected rows_per_head > 0 dividing the 6 rows of the tile, got 4}}
  %r:3 = flex.online_attention ins(%q, %k, %v : tensor<6x8xf32>, tensor<32x8xf32>, tensor<32x4xf32>)
      at(%i, %i, %i, %i) bounds(%i, %i)
      outs(%mx, %l, %acc : tensor<6xf32>, tensor<6xf32>, tensor<6x4xf32>) scale(0.125) {rows_per_head = 4 : i64}
      -> tensor<6xf32>, tensor<6xf32>, tensor<6x4xf32>
  return
}

// -----

func.func @online_rows_per_head_zero(%q: tensor<6x8xf32>, %k: tensor<32x8xf32>, %v: tensor<32x4xf32>,
                                     %mx: tensor<6xf32>, %l: tensor<6xf32>, %acc: tensor<6x4xf32>, %i: index) {
  // expected-error @+1 {{expected rows_per_head > 0 dividing the 6 rows of the tile, got 0}}
  %r:3 = flex.online_attention ins(%q, %k, %v : tensor<6x8xf32>, tensor<32x8xf32>, tensor<32x4xf32>)
      at(%i, %i, %i, %i) bounds(%i, %i)
      outs(%mx, %l, %acc : tensor<6xf32>, tensor<6xf32>, tensor<6x4xf32>) scale(0.125) {rows_per_head = 0 : i64}
      -> tensor<6xf32>, tensor<6xf32>, tensor<6x4xf32>
  return
}
