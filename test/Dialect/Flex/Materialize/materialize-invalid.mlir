// RUN: flex-opt %s -flex-materialize -split-input-file -verify-diagnostics

// A matmul accumulates into its init: a tensor.empty init is rejected.
func.func private @sdpa_score0(%arg0: tensor<f32>, %arg1: tensor<i32>, %arg2: tensor<i32>, %arg3: tensor<i32>, %arg4: tensor<i32>, %w: tensor<4x4xf32>) -> tensor<f32> {
  %e = tensor.empty() : tensor<4x4xf32>
  // expected-note@+1 {{reads the contents of an uninitialized tensor.empty}}
  %m = linalg.matmul ins(%w, %w : tensor<4x4xf32>, tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) -> tensor<4x4xf32>
  %c0 = arith.constant 0 : index
  %x = tensor.extract %m[%c0, %c0] : tensor<4x4xf32>
  %r = tensor.from_elements %x : tensor<f32>
  return %r : tensor<f32>
}
func.func @matmul(%q: tensor<1x4x16x8xf32>, %k: tensor<1x4x16x8xf32>, %v: tensor<1x4x16x8xf32>, %w: tensor<4x4xf32>) -> tensor<1x4x16x8xf32> {
  // expected-error@+1 {{flex-materialize: cannot scalarize 'linalg.matmul' in score_mod @sdpa_score0}}
  %0:3 = call @__flex_attention_0(%q, %k, %v, %w) : (tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<4x4xf32>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>)
  return %0#0 : tensor<1x4x16x8xf32>
}
func.func private @__flex_attention_0(tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<4x4xf32>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) attributes {flex.num_mask_buffers = 0 : i64, flex.num_score_buffers = 1 : i64, flex.scale = 1.0 : f64, flex.score_mod = @sdpa_score0}

// -----

// A reduction into an uninitialized init reads garbage: rejected.
#map = affine_map<(d0) -> (d0)>
#map0 = affine_map<(d0) -> ()>
func.func private @sdpa_mask0(%arg0: tensor<i32>, %arg1: tensor<i32>, %arg2: tensor<i32>, %arg3: tensor<i32>, %doc: tensor<16xi1>) -> tensor<i1> {
  %e = tensor.empty() : tensor<i1>
  // expected-note@+1 {{reads the contents of an uninitialized tensor.empty}}
  %r = linalg.generic {indexing_maps = [#map, #map0], iterator_types = ["reduction"]} ins(%doc : tensor<16xi1>) outs(%e : tensor<i1>) {
  ^bb0(%in: i1, %out: i1):
    %o = arith.ori %in, %out : i1
    linalg.yield %o : i1
  } -> tensor<i1>
  return %r : tensor<i1>
}
func.func @reduction(%q: tensor<1x4x16x8xf32>, %k: tensor<1x4x16x8xf32>, %v: tensor<1x4x16x8xf32>, %doc: tensor<16xi1>) -> tensor<1x4x16x8xf32> {
  // expected-error@+1 {{flex-materialize: cannot scalarize 'linalg.generic' in mask_mod @sdpa_mask0}}
  %0:3 = call @__flex_attention_0(%q, %k, %v, %doc) : (tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<16xi1>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>)
  return %0#0 : tensor<1x4x16x8xf32>
}
func.func private @__flex_attention_0(tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<16xi1>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) attributes {flex.mask_mod = @sdpa_mask0, flex.num_mask_buffers = 1 : i64, flex.num_score_buffers = 0 : i64, flex.scale = 1.0 : f64}

// -----

func.func private @helper(%x: tensor<f32>) -> tensor<f32>
func.func private @sdpa_score0(%arg0: tensor<f32>, %arg1: tensor<i32>, %arg2: tensor<i32>, %arg3: tensor<i32>, %arg4: tensor<i32>) -> tensor<f32> {
  // expected-note@+1 {{operates on tensors; only 0-d linalg/tensor ops and scalar arith/math ops are supported}}
  %0 = func.call @helper(%arg0) : (tensor<f32>) -> tensor<f32>
  return %0 : tensor<f32>
}
func.func @nested_call(%q: tensor<1x4x16x8xf32>, %k: tensor<1x4x16x8xf32>, %v: tensor<1x4x16x8xf32>) -> tensor<1x4x16x8xf32> {
  // expected-error@+1 {{flex-materialize: cannot scalarize 'func.call' in score_mod @sdpa_score0}}
  %0:3 = call @__flex_attention_0(%q, %k, %v) : (tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>)
  return %0#0 : tensor<1x4x16x8xf32>
}
func.func private @__flex_attention_0(tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) attributes {flex.num_mask_buffers = 0 : i64, flex.num_score_buffers = 0 : i64, flex.scale = 1.0 : f64, flex.score_mod = @sdpa_score0}

// -----

#map = affine_map<() -> ()>
func.func private @sdpa_score0(%arg0: tensor<f32>, %arg1: tensor<i32>, %arg2: tensor<i32>, %arg3: tensor<i32>, %arg4: tensor<i32>) -> tensor<f32> {
  %e = tensor.empty() : tensor<f32>
  // expected-note@+1 {{reads the contents of an uninitialized tensor.empty}}
  %0 = linalg.generic {indexing_maps = [#map, #map], iterator_types = []} ins(%arg0 : tensor<f32>) outs(%e : tensor<f32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.addf %in, %out : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  return %0 : tensor<f32>
}
func.func @uninit(%q: tensor<1x4x16x8xf32>, %k: tensor<1x4x16x8xf32>, %v: tensor<1x4x16x8xf32>) -> tensor<1x4x16x8xf32> {
  // expected-error@+1 {{flex-materialize: cannot scalarize 'linalg.generic' in score_mod @sdpa_score0}}
  %0:3 = call @__flex_attention_0(%q, %k, %v) : (tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>)
  return %0#0 : tensor<1x4x16x8xf32>
}
func.func private @__flex_attention_0(tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) attributes {flex.num_mask_buffers = 0 : i64, flex.num_score_buffers = 0 : i64, flex.scale = 1.0 : f64, flex.score_mod = @sdpa_score0}

// -----

func.func @missing_scale(%q: tensor<1x4x16x8xf32>, %k: tensor<1x4x16x8xf32>, %v: tensor<1x4x16x8xf32>) -> tensor<1x4x16x8xf32> {
  // expected-error@+1 {{flex-materialize: @__flex_attention_0: missing or non-float 'flex.scale' attribute}}
  %0:3 = call @__flex_attention_0(%q, %k, %v) : (tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>)
  return %0#0 : tensor<1x4x16x8xf32>
}
func.func private @__flex_attention_0(tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) attributes {flex.num_mask_buffers = 0 : i64, flex.num_score_buffers = 0 : i64}

// -----

func.func @wrong_operand_count(%q: tensor<1x4x16x8xf32>, %k: tensor<1x4x16x8xf32>, %v: tensor<1x4x16x8xf32>) -> tensor<1x4x16x8xf32> {
  // expected-error@+1 {{flex-materialize: @__flex_attention_0: expected 5 operands (q, k, v, 1 score buffer(s), 1 mask buffer(s)), got 3}}
  %0:3 = call @__flex_attention_0(%q, %k, %v) : (tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>)
  return %0#0 : tensor<1x4x16x8xf32>
}
func.func private @__flex_attention_0(tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) attributes {flex.num_mask_buffers = 1 : i64, flex.num_score_buffers = 1 : i64, flex.scale = 1.0 : f64}

// -----

func.func @missing_modifier(%q: tensor<1x4x16x8xf32>, %k: tensor<1x4x16x8xf32>, %v: tensor<1x4x16x8xf32>) -> tensor<1x4x16x8xf32> {
  // expected-error@+1 {{flex-materialize: @__flex_attention_0: 'flex.mask_mod' refers to @nope, which is not a func.func in this module}}
  %0:3 = call @__flex_attention_0(%q, %k, %v) : (tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>)
  return %0#0 : tensor<1x4x16x8xf32>
}
func.func private @__flex_attention_0(tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) attributes {flex.mask_mod = @nope, flex.num_mask_buffers = 0 : i64, flex.num_score_buffers = 0 : i64, flex.scale = 1.0 : f64}

// -----

// The frontend's buffer count says 0 but the mask_mod takes a captured tensor.
func.func private @sdpa_mask0(%arg0: tensor<i32>, %arg1: tensor<i32>, %arg2: tensor<i32>, %arg3: tensor<i32>, %doc: tensor<16xi64>) -> tensor<i1> {
  %cst = arith.constant dense<true> : tensor<i1>
  return %cst : tensor<i1>
}
func.func @wrong_arity(%q: tensor<1x4x16x8xf32>, %k: tensor<1x4x16x8xf32>, %v: tensor<1x4x16x8xf32>) -> tensor<1x4x16x8xf32> {
  // expected-error@+1 {{flex-materialize: mask_mod @sdpa_mask0 has 5 arguments, expected 4 + 0 captured buffer(s) = 4}}
  %0:3 = call @__flex_attention_0(%q, %k, %v) : (tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>)
  return %0#0 : tensor<1x4x16x8xf32>
}
func.func private @__flex_attention_0(tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) attributes {flex.mask_mod = @sdpa_mask0, flex.num_mask_buffers = 0 : i64, flex.num_score_buffers = 0 : i64, flex.scale = 1.0 : f64}

// -----

func.func private @sdpa_score0(%arg0: tensor<f32>, %arg1: tensor<i32>, %arg2: tensor<i32>, %arg3: tensor<i32>, %arg4: tensor<i32>, %b: tensor<8xf32>) -> tensor<f32> {
  return %arg0 : tensor<f32>
}
func.func @capture_type_mismatch(%q: tensor<1x4x16x8xf32>, %k: tensor<1x4x16x8xf32>, %v: tensor<1x4x16x8xf32>, %b: tensor<4xf32>) -> tensor<1x4x16x8xf32> {
  // expected-error@+1 {{flex-materialize: score_mod @sdpa_score0 argument #5 has type 'tensor<8xf32>' but the call passes a buffer of type 'tensor<4xf32>'}}
  %0:3 = call @__flex_attention_0(%q, %k, %v, %b) : (tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<4xf32>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>)
  return %0#0 : tensor<1x4x16x8xf32>
}
func.func private @__flex_attention_0(tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<4xf32>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) attributes {flex.num_mask_buffers = 0 : i64, flex.num_score_buffers = 1 : i64, flex.scale = 1.0 : f64, flex.score_mod = @sdpa_score0}

// -----

func.func private @sdpa_mask0(%arg0: tensor<i32>, %arg1: tensor<i32>, %arg2: tensor<i32>, %arg3: tensor<i32>) -> tensor<f32> {
  %cst = arith.constant dense<1.0> : tensor<f32>
  return %cst : tensor<f32>
}
func.func @mask_returns_f32(%q: tensor<1x4x16x8xf32>, %k: tensor<1x4x16x8xf32>, %v: tensor<1x4x16x8xf32>) -> tensor<1x4x16x8xf32> {
  // expected-error@+1 {{flex-materialize: mask_mod @sdpa_mask0 must return one tensor<i1> (or i1)}}
  %0:3 = call @__flex_attention_0(%q, %k, %v) : (tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>)
  return %0#0 : tensor<1x4x16x8xf32>
}
func.func private @__flex_attention_0(tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) attributes {flex.mask_mod = @sdpa_mask0, flex.scale = 1.0 : f64}

// -----

func.func @bad_flag(%q: tensor<1x4x16x8xf32>, %k: tensor<1x4x16x8xf32>, %v: tensor<1x4x16x8xf32>) -> tensor<1x4x16x8xf32> {
  // expected-error@+1 {{flex-materialize: @__flex_attention_0: 'flex.return_lse' must be a bool}}
  %0:3 = call @__flex_attention_0(%q, %k, %v) : (tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>)
  return %0#0 : tensor<1x4x16x8xf32>
}
func.func private @__flex_attention_0(tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) attributes {flex.return_lse = 1 : i64, flex.scale = 1.0 : f64}

// -----

func.func @gqa_without_flag(%q: tensor<1x4x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>) -> tensor<1x4x16x8xf32> {
  // expected-error@+1 {{flex-materialize: @__flex_attention_0: query heads (4) differ from key/value heads (2) but 'flex.enable_gqa' is not set}}
  %0:3 = call @__flex_attention_0(%q, %k, %v) : (tensor<1x4x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>)
  return %0#0 : tensor<1x4x16x8xf32>
}
func.func private @__flex_attention_0(tensor<1x4x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) attributes {flex.scale = 1.0 : f64}

// -----

func.func @two_results(%q: tensor<1x4x16x8xf32>, %k: tensor<1x4x16x8xf32>, %v: tensor<1x4x16x8xf32>) -> tensor<1x4x16x8xf32> {
  // expected-error@+1 {{flex-materialize: @__flex_attention_0: expected 3 results (output, logsumexp, max_scores), got 2}}
  %0:2 = call @__flex_attention_0(%q, %k, %v) : (tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16xf32>)
  return %0#0 : tensor<1x4x16x8xf32>
}
func.func private @__flex_attention_0(tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16xf32>) attributes {flex.scale = 1.0 : f64}

// -----

// Element types flex.attention does not support are rejected on the call.
func.func @f64_inputs(%q: tensor<1x4x16x8xf64>, %k: tensor<1x4x16x8xf64>, %v: tensor<1x4x16x8xf64>) -> tensor<1x4x16x8xf64> {
  // expected-error@+1 {{flex-materialize: @__flex_attention_0: unsupported query element type 'f64'; flex.attention supports f32, f16 and bf16 inputs}}
  %0:3 = call @__flex_attention_0(%q, %k, %v) : (tensor<1x4x16x8xf64>, tensor<1x4x16x8xf64>, tensor<1x4x16x8xf64>) -> (tensor<1x4x16x8xf64>, tensor<1x4x16xf32>, tensor<1x4x16xf32>)
  return %0#0 : tensor<1x4x16x8xf64>
}
func.func private @__flex_attention_0(tensor<1x4x16x8xf64>, tensor<1x4x16x8xf64>, tensor<1x4x16x8xf64>) -> (tensor<1x4x16x8xf64>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) attributes {flex.scale = 1.0 : f64}

// -----

// Anything else the flex.attention verifier rejects (here: mixed element
// types) is reported on the call site after the op verifier's own error.
func.func @op_does_not_verify(%q: tensor<1x4x16x8xf32>, %k: tensor<1x4x16x8xf16>, %v: tensor<1x4x16x8xf16>) -> tensor<1x4x16x8xf32> {
  // expected-error@+2 {{'flex.attention' op expected key and value element types ('f16', 'f16') to match the query element type 'f32'}}
  // expected-error@+1 {{flex-materialize: @__flex_attention_0: the materialized flex.attention does not verify}}
  %0:3 = call @__flex_attention_0(%q, %k, %v) : (tensor<1x4x16x8xf32>, tensor<1x4x16x8xf16>, tensor<1x4x16x8xf16>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>)
  return %0#0 : tensor<1x4x16x8xf32>
}
func.func private @__flex_attention_0(tensor<1x4x16x8xf32>, tensor<1x4x16x8xf16>, tensor<1x4x16x8xf16>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) attributes {flex.scale = 1.0 : f64}

// -----

// A reduction over a captured tensor of dynamic size has no static loop.
#map = affine_map<(d0) -> (d0)>
#map0 = affine_map<(d0) -> ()>
func.func private @sdpa_score0(%arg0: tensor<f32>, %arg1: tensor<i32>, %arg2: tensor<i32>, %arg3: tensor<i32>, %arg4: tensor<i32>, %w: tensor<?xf32>) -> tensor<f32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<f32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<f32>) -> tensor<f32>
  // expected-note@+1 {{loop #0 has a dynamic extent; only tensors of static shape can be computed in a modifier}}
  %r = linalg.generic {indexing_maps = [#map, #map0], iterator_types = ["reduction"]} ins(%w : tensor<?xf32>) outs(%init : tensor<f32>) {
  ^bb0(%in: f32, %out: f32):
    %a = arith.addf %in, %out : f32
    linalg.yield %a : f32
  } -> tensor<f32>
  return %r : tensor<f32>
}
func.func @dynamic_reduction(%q: tensor<1x4x16x8xf32>, %k: tensor<1x4x16x8xf32>, %v: tensor<1x4x16x8xf32>, %w: tensor<?xf32>) -> tensor<1x4x16x8xf32> {
  // expected-error@+1 {{flex-materialize: cannot scalarize 'linalg.generic' in score_mod @sdpa_score0}}
  %0:3 = call @__flex_attention_0(%q, %k, %v, %w) : (tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<?xf32>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>)
  return %0#0 : tensor<1x4x16x8xf32>
}
func.func private @__flex_attention_0(tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<?xf32>) -> (tensor<1x4x16x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) attributes {flex.num_mask_buffers = 0 : i64, flex.num_score_buffers = 1 : i64, flex.scale = 1.0 : f64, flex.score_mod = @sdpa_score0}

// -----

func.func @block_count(%q: tensor<1x4x64x8xf32>, %k: tensor<1x4x64x8xf32>, %v: tensor<1x4x64x8xf32>, %n: tensor<1x1x2xi32>) -> tensor<1x4x64x8xf32> {
  // expected-error@+1 {{flex-materialize: @__flex_attention_0: 'flex.num_block_tensors' must be 0, 2 or 4}}
  %0:3 = call @__flex_attention_0(%q, %k, %v, %n) : (tensor<1x4x64x8xf32>, tensor<1x4x64x8xf32>, tensor<1x4x64x8xf32>, tensor<1x1x2xi32>) -> (tensor<1x4x64x8xf32>, tensor<1x4x64xf32>, tensor<1x4x64xf32>)
  return %0#0 : tensor<1x4x64x8xf32>
}
func.func private @__flex_attention_0(tensor<1x4x64x8xf32>, tensor<1x4x64x8xf32>, tensor<1x4x64x8xf32>, tensor<1x1x2xi32>) -> (tensor<1x4x64x8xf32>, tensor<1x4x64xf32>, tensor<1x4x64xf32>) attributes {flex.block_sizes = array<i64: 32, 32>, flex.num_block_tensors = 1 : i64, flex.scale = 1.0 : f64}

// -----

func.func @block_sizes_missing(%q: tensor<1x4x64x8xf32>, %k: tensor<1x4x64x8xf32>, %v: tensor<1x4x64x8xf32>, %n: tensor<1x1x2xi32>, %i: tensor<1x1x2x2xi32>) -> tensor<1x4x64x8xf32> {
  // expected-error@+1 {{flex-materialize: @__flex_attention_0: 'flex.block_sizes' (array<i64: QBS, KVBS>) must be given exactly when 'flex.num_block_tensors' is nonzero}}
  %0:3 = call @__flex_attention_0(%q, %k, %v, %n, %i) : (tensor<1x4x64x8xf32>, tensor<1x4x64x8xf32>, tensor<1x4x64x8xf32>, tensor<1x1x2xi32>, tensor<1x1x2x2xi32>) -> (tensor<1x4x64x8xf32>, tensor<1x4x64xf32>, tensor<1x4x64xf32>)
  return %0#0 : tensor<1x4x64x8xf32>
}
func.func private @__flex_attention_0(tensor<1x4x64x8xf32>, tensor<1x4x64x8xf32>, tensor<1x4x64x8xf32>, tensor<1x1x2xi32>, tensor<1x1x2x2xi32>) -> (tensor<1x4x64x8xf32>, tensor<1x4x64xf32>, tensor<1x4x64xf32>) attributes {flex.num_block_tensors = 2 : i64, flex.scale = 1.0 : f64}

// -----

// The op verifier checks the block tensors (here: too few query blocks).
func.func @block_cover(%q: tensor<1x4x64x8xf32>, %k: tensor<1x4x64x8xf32>, %v: tensor<1x4x64x8xf32>, %n: tensor<1x1x1xi32>, %i: tensor<1x1x1x2xi32>) -> tensor<1x4x64x8xf32> {
  // expected-error@+2 {{'flex.attention' op block tensors cover 1 query blocks of 32 rows, fewer than M = 64}}
  // expected-error@+1 {{flex-materialize: @__flex_attention_0: the materialized flex.attention does not verify}}
  %0:3 = call @__flex_attention_0(%q, %k, %v, %n, %i) : (tensor<1x4x64x8xf32>, tensor<1x4x64x8xf32>, tensor<1x4x64x8xf32>, tensor<1x1x1xi32>, tensor<1x1x1x2xi32>) -> (tensor<1x4x64x8xf32>, tensor<1x4x64xf32>, tensor<1x4x64xf32>)
  return %0#0 : tensor<1x4x64x8xf32>
}
func.func private @__flex_attention_0(tensor<1x4x64x8xf32>, tensor<1x4x64x8xf32>, tensor<1x4x64x8xf32>, tensor<1x1x1xi32>, tensor<1x1x1x2xi32>) -> (tensor<1x4x64x8xf32>, tensor<1x4x64xf32>, tensor<1x4x64xf32>) attributes {flex.block_sizes = array<i64: 32, 32>, flex.num_block_tensors = 2 : i64, flex.scale = 1.0 : f64}
