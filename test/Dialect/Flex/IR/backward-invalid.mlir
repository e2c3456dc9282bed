// RUN: flex-opt %s -split-input-file -verify-diagnostics

// Verifier messages of flex.attention_backward (AttentionBackwardOp.cpp).
// None may crash (asserts are on).

func.func @lse_rank(%a0: tensor<1x4x16x8xf32>, %a1: tensor<1x2x16x8xf32>, %a2: tensor<1x2x16x4xf32>, %a3: tensor<1x4x16x4xf32>, %a4: tensor<1x4x16x1xf32>, %a5: tensor<1x4x16x4xf32>, %o0: tensor<1x4x16x8xf32>, %o1: tensor<1x2x16x8xf32>, %o2: tensor<1x2x16x4xf32>) {
  // expected-error @+1 {{expected logsumexp to be ranked with rank 3, got 'tensor<1x4x16x1xf32>'}}
  %r:3 = flex.attention_backward ins(%a0, %a1, %a2, %a3, %a4, %a5 : tensor<1x4x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x4xf32>, tensor<1x4x16x4xf32>, tensor<1x4x16x1xf32>, tensor<1x4x16x4xf32>) outs(%o0, %o1, %o2 : tensor<1x4x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x4xf32>) scale(0.125) -> tensor<1x4x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x4xf32>
  return
}

// -----

func.func @out_shape(%a0: tensor<1x4x16x8xf32>, %a1: tensor<1x2x16x8xf32>, %a2: tensor<1x2x16x4xf32>, %a3: tensor<1x4x16x8xf32>, %a4: tensor<1x4x16xf32>, %a5: tensor<1x4x16x4xf32>, %o0: tensor<1x4x16x8xf32>, %o1: tensor<1x2x16x8xf32>, %o2: tensor<1x2x16x4xf32>) {
  // expected-error @+1 {{expected out shape [B, Hq, M, Ev] = [1, 4, 16, 4], got [1, 4, 16, 8]}}
  %r:3 = flex.attention_backward ins(%a0, %a1, %a2, %a3, %a4, %a5 : tensor<1x4x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x4xf32>, tensor<1x4x16x8xf32>, tensor<1x4x16xf32>, tensor<1x4x16x4xf32>) outs(%o0, %o1, %o2 : tensor<1x4x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x4xf32>) scale(0.125) -> tensor<1x4x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x4xf32>
  return
}

// -----

func.func @grad_out_type(%a0: tensor<1x4x16x8xf32>, %a1: tensor<1x2x16x8xf32>, %a2: tensor<1x2x16x4xf32>, %a3: tensor<1x4x16x4xf32>, %a4: tensor<1x4x16xf32>, %a5: tensor<1x4x16x4xf16>, %o0: tensor<1x4x16x8xf32>, %o1: tensor<1x2x16x8xf32>, %o2: tensor<1x2x16x4xf32>) {
  // expected-error @+1 {{expected grad_out element type 'f32', got 'f16'}}
  %r:3 = flex.attention_backward ins(%a0, %a1, %a2, %a3, %a4, %a5 : tensor<1x4x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x4xf32>, tensor<1x4x16x4xf32>, tensor<1x4x16xf32>, tensor<1x4x16x4xf16>) outs(%o0, %o1, %o2 : tensor<1x4x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x4xf32>) scale(0.125) -> tensor<1x4x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x4xf32>
  return
}

// -----

func.func @lse_type(%a0: tensor<1x4x16x8xf32>, %a1: tensor<1x2x16x8xf32>, %a2: tensor<1x2x16x4xf32>, %a3: tensor<1x4x16x4xf32>, %a4: tensor<1x4x16xf16>, %a5: tensor<1x4x16x4xf32>, %o0: tensor<1x4x16x8xf32>, %o1: tensor<1x2x16x8xf32>, %o2: tensor<1x2x16x4xf32>) {
  // expected-error @+1 {{expected logsumexp element type 'f32', got 'f16'}}
  %r:3 = flex.attention_backward ins(%a0, %a1, %a2, %a3, %a4, %a5 : tensor<1x4x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x4xf32>, tensor<1x4x16x4xf32>, tensor<1x4x16xf16>, tensor<1x4x16x4xf32>) outs(%o0, %o1, %o2 : tensor<1x4x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x4xf32>) scale(0.125) -> tensor<1x4x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x4xf32>
  return
}

// -----

func.func @grad_key_shape(%a0: tensor<1x4x16x8xf32>, %a1: tensor<1x2x16x8xf32>, %a2: tensor<1x2x16x4xf32>, %a3: tensor<1x4x16x4xf32>, %a4: tensor<1x4x16xf32>, %a5: tensor<1x4x16x4xf32>, %o0: tensor<1x4x16x8xf32>, %o1: tensor<1x4x16x8xf32>, %o2: tensor<1x2x16x4xf32>) {
  // expected-error @+1 {{expected grad_key shape [Bkv, Hkv, N, E] = [1, 2, 16, 8], got [1, 4, 16, 8]}}
  %r:3 = flex.attention_backward ins(%a0, %a1, %a2, %a3, %a4, %a5 : tensor<1x4x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x4xf32>, tensor<1x4x16x4xf32>, tensor<1x4x16xf32>, tensor<1x4x16x4xf32>) outs(%o0, %o1, %o2 : tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x2x16x4xf32>) scale(0.125) -> tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>, tensor<1x2x16x4xf32>
  return
}

// -----

func.func @head_ratio(%a0: tensor<1x4x16x8xf32>, %a1: tensor<1x3x16x8xf32>, %a2: tensor<1x3x16x4xf32>, %a3: tensor<1x4x16x4xf32>, %a4: tensor<1x4x16xf32>, %a5: tensor<1x4x16x4xf32>, %o0: tensor<1x4x16x8xf32>, %o1: tensor<1x3x16x8xf32>, %o2: tensor<1x3x16x4xf32>) {
  // expected-error @+1 {{query heads Hq = 4 must be a multiple of key/value heads Hkv = 3}}
  %r:3 = flex.attention_backward ins(%a0, %a1, %a2, %a3, %a4, %a5 : tensor<1x4x16x8xf32>, tensor<1x3x16x8xf32>, tensor<1x3x16x4xf32>, tensor<1x4x16x4xf32>, tensor<1x4x16xf32>, tensor<1x4x16x4xf32>) outs(%o0, %o1, %o2 : tensor<1x4x16x8xf32>, tensor<1x3x16x8xf32>, tensor<1x3x16x4xf32>) scale(0.125) -> tensor<1x4x16x8xf32>, tensor<1x3x16x8xf32>, tensor<1x3x16x4xf32>
  return
}

// -----

func.func @group_size(%a0: tensor<1x4x16x8xf32>, %a1: tensor<1x2x16x8xf32>, %a2: tensor<1x2x16x4xf32>, %a3: tensor<1x4x16x4xf32>, %a4: tensor<1x4x16xf32>, %a5: tensor<1x4x16x4xf32>, %o0: tensor<1x4x16x8xf32>, %o1: tensor<1x2x16x8xf32>, %o2: tensor<1x2x16x4xf32>) {
  // expected-error @+1 {{kv_group_size = 4 times Hkv = 2 must equal Hq = 4}}
  %r:3 = flex.attention_backward ins(%a0, %a1, %a2, %a3, %a4, %a5 : tensor<1x4x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x4xf32>, tensor<1x4x16x4xf32>, tensor<1x4x16xf32>, tensor<1x4x16x4xf32>) outs(%o0, %o1, %o2 : tensor<1x4x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x4xf32>) scale(0.125) {kv_group_size = 4 : i64} -> tensor<1x4x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x4xf32>
  return
}

// -----

func.func @grad_captures_count(%q: tensor<1x4x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x4xf32>, %o: tensor<1x4x16x4xf32>, %l: tensor<1x4x16xf32>, %bias: tensor<4x16xf32>, %db: tensor<4x16xf32>) {
  // expected-error @+1 {{expected one grad_captures index per capture gradient (1), got 0}}
  %r:4 = flex.attention_backward ins(%q, %k, %v, %o, %l, %o : tensor<1x4x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x4xf32>, tensor<1x4x16x4xf32>, tensor<1x4x16xf32>, tensor<1x4x16x4xf32>)
      captures(%bias : tensor<4x16xf32>)
      outs(%q, %k, %v : tensor<1x4x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x4xf32>)
      capture_grads(%db : tensor<4x16xf32>) scale(0.125)
      -> tensor<1x4x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x4xf32>, tensor<4x16xf32>
  return
}

// -----

func.func @grad_captures_range(%q: tensor<1x4x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x4xf32>, %o: tensor<1x4x16x4xf32>, %l: tensor<1x4x16xf32>, %bias: tensor<4x16xf32>, %db: tensor<4x16xf32>) {
  // expected-error @+1 {{grad_captures[0] = 1 is not the index of a capture (there are 1)}}
  %r:4 = flex.attention_backward ins(%q, %k, %v, %o, %l, %o : tensor<1x4x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x4xf32>, tensor<1x4x16x4xf32>, tensor<1x4x16xf32>, tensor<1x4x16x4xf32>)
      captures(%bias : tensor<4x16xf32>)
      outs(%q, %k, %v : tensor<1x4x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x4xf32>)
      capture_grads(%db : tensor<4x16xf32>) grad_captures [1] scale(0.125)
      -> tensor<1x4x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x4xf32>, tensor<4x16xf32>
  return
}

// -----

func.func @grad_capture_shape(%q: tensor<1x4x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x4xf32>, %o: tensor<1x4x16x4xf32>, %l: tensor<1x4x16xf32>, %bias: tensor<4x16xf32>, %db: tensor<4x8xf32>) {
  // expected-error @+1 {{capture gradient #0 of type 'tensor<4x8xf32>' does not match capture #0 of type 'tensor<4x16xf32>'}}
  %r:4 = flex.attention_backward ins(%q, %k, %v, %o, %l, %o : tensor<1x4x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x4xf32>, tensor<1x4x16x4xf32>, tensor<1x4x16xf32>, tensor<1x4x16x4xf32>)
      captures(%bias : tensor<4x16xf32>)
      outs(%q, %k, %v : tensor<1x4x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x4xf32>)
      capture_grads(%db : tensor<4x8xf32>) grad_captures [0] scale(0.125)
      -> tensor<1x4x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x4xf32>, tensor<4x8xf32>
  return
}

// -----

func.func @grad_capture_int(%q: tensor<1x4x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x4xf32>, %o: tensor<1x4x16x4xf32>, %l: tensor<1x4x16xf32>, %doc: tensor<16xi64>) {
  // expected-error @+1 {{capture gradient #0 must have a float element type, got 'i64'}}
  %r:4 = flex.attention_backward ins(%q, %k, %v, %o, %l, %o : tensor<1x4x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x4xf32>, tensor<1x4x16x4xf32>, tensor<1x4x16xf32>, tensor<1x4x16x4xf32>)
      captures(%doc : tensor<16xi64>)
      outs(%q, %k, %v : tensor<1x4x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x4xf32>)
      capture_grads(%doc : tensor<16xi64>) grad_captures [0] scale(0.125)
      -> tensor<1x4x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x4xf32>, tensor<16xi64>
  return
}

// -----

func.func @joint_required(%q: tensor<1x4x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x4xf32>, %o: tensor<1x4x16x4xf32>, %l: tensor<1x4x16xf32>, %bias: tensor<4x16xf32>, %db: tensor<4x16xf32>) {
  // expected-error @+1 {{a non-empty joint region is required with capture gradients}}
  %r:4 = flex.attention_backward ins(%q, %k, %v, %o, %l, %o : tensor<1x4x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x4xf32>, tensor<1x4x16x4xf32>, tensor<1x4x16xf32>, tensor<1x4x16x4xf32>)
      captures(%bias : tensor<4x16xf32>)
      outs(%q, %k, %v : tensor<1x4x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x4xf32>)
      capture_grads(%db : tensor<4x16xf32>) grad_captures [0] scale(0.125)
      -> tensor<1x4x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x4xf32>, tensor<4x16xf32>
  return
}

// -----

func.func @joint_arity(%q: tensor<1x4x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x4xf32>, %o: tensor<1x4x16x4xf32>, %l: tensor<1x4x16xf32>, %bias: tensor<4x16xf32>, %db: tensor<4x16xf32>) {
  // expected-error @+1 {{joint region must yield (f32, f32, index, index) (the score gradient, then per capture gradient a value and one index per dimension), got (f32, f32, index)}}
  %r:4 = flex.attention_backward ins(%q, %k, %v, %o, %l, %o : tensor<1x4x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x4xf32>, tensor<1x4x16x4xf32>, tensor<1x4x16xf32>, tensor<1x4x16x4xf32>)
      captures(%bias : tensor<4x16xf32>)
      outs(%q, %k, %v : tensor<1x4x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x4xf32>)
      capture_grads(%db : tensor<4x16xf32>) grad_captures [0] scale(0.125)
      joint {
      ^bb0(%s: f32, %b: index, %h: index, %m: index, %n: index, %g: f32):
        flex.yield %g, %g, %h : f32, f32, index
      } -> tensor<1x4x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x4xf32>, tensor<4x16xf32>
  return
}

// -----

func.func @joint_value_type(%q: tensor<1x4x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x4xf32>, %o: tensor<1x4x16x4xf32>, %l: tensor<1x4x16xf32>, %bias: tensor<4xf16>, %db: tensor<4xf16>) {
  // expected-error @+1 {{joint region must yield (f32, f16, index)}}
  %r:4 = flex.attention_backward ins(%q, %k, %v, %o, %l, %o : tensor<1x4x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x4xf32>, tensor<1x4x16x4xf32>, tensor<1x4x16xf32>, tensor<1x4x16x4xf32>)
      captures(%bias : tensor<4xf16>)
      outs(%q, %k, %v : tensor<1x4x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x4xf32>)
      capture_grads(%db : tensor<4xf16>) grad_captures [0] scale(0.125)
      joint {
      ^bb0(%s: f32, %b: index, %h: index, %m: index, %n: index, %g: f32):
        flex.yield %g, %g, %h : f32, f32, index
      } -> tensor<1x4x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x4xf32>, tensor<4xf16>
  return
}

// -----

func.func @joint_args(%q: tensor<1x4x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x4xf32>, %o: tensor<1x4x16x4xf32>, %l: tensor<1x4x16xf32>) {
  // expected-error @+1 {{joint region must have arguments (score: f32, b, h, q_idx, kv_idx: index, grad: f32)}}
  %r:3 = flex.attention_backward ins(%q, %k, %v, %o, %l, %o : tensor<1x4x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x4xf32>, tensor<1x4x16x4xf32>, tensor<1x4x16xf32>, tensor<1x4x16x4xf32>)
      outs(%q, %k, %v : tensor<1x4x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x4xf32>) scale(0.125)
      joint {
      ^bb0(%s: f32, %b: index, %h: index, %m: index, %n: index):
        flex.yield %s : f32
      } -> tensor<1x4x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x4xf32>
  return
}

// -----

func.func @joint_uncaptured(%q: tensor<1x4x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x4xf32>, %o: tensor<1x4x16x4xf32>, %l: tensor<1x4x16xf32>, %t: tensor<4xf32>) {
  %r:3 = flex.attention_backward ins(%q, %k, %v, %o, %l, %o : tensor<1x4x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x4xf32>, tensor<1x4x16x4xf32>, tensor<1x4x16xf32>, tensor<1x4x16x4xf32>)
      outs(%q, %k, %v : tensor<1x4x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x4xf32>) scale(0.125)
      joint {
      ^bb0(%s: f32, %b: index, %h: index, %m: index, %n: index, %g: f32):
        // expected-error @+1 {{uses a tensor defined outside its flex.attention_backward that is not listed in `captures`}}
        %x = tensor.extract %t[%h] : tensor<4xf32>
        %y = arith.mulf %x, %g : f32
        flex.yield %y : f32
      } -> tensor<1x4x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x4xf32>
  return
}

// -----

func.func @offsets(%q: tensor<1x4x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x4xf32>, %o: tensor<1x4x16x4xf32>, %l: tensor<1x4x16xf32>, %i: index) {
  // expected-error @+1 {{expected 0 or 2 offsets (b, h), got 3}}
  %r:3 = flex.attention_backward ins(%q, %k, %v, %o, %l, %o : tensor<1x4x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x4xf32>, tensor<1x4x16x4xf32>, tensor<1x4x16xf32>, tensor<1x4x16x4xf32>)
      offsets(%i, %i, %i)
      outs(%q, %k, %v : tensor<1x4x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x4xf32>) scale(0.125)
      -> tensor<1x4x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x4xf32>
  return
}

// -----

func.func @block_sizes(%q: tensor<1x4x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x4xf32>, %o: tensor<1x4x16x4xf32>, %l: tensor<1x4x16xf32>, %kvn: tensor<1x1x2xi32>, %kvi: tensor<1x1x2x2xi32>) {
  // expected-error @+1 {{kv_blocks require block_sizes [QBS, KVBS]}}
  %r:3 = flex.attention_backward ins(%q, %k, %v, %o, %l, %o : tensor<1x4x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x4xf32>, tensor<1x4x16x4xf32>, tensor<1x4x16xf32>, tensor<1x4x16x4xf32>)
      kv_blocks(%kvn, %kvi : tensor<1x1x2xi32>, tensor<1x1x2x2xi32>)
      outs(%q, %k, %v : tensor<1x4x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x4xf32>) scale(0.125)
      -> tensor<1x4x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x4xf32>
  return
}

// -----

func.func @results(%q: tensor<1x4x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x4xf32>, %o: tensor<1x4x16x4xf32>, %l: tensor<1x4x16xf32>) {
  // expected-error @+1 {{expected 3 results (one per init), got 1}}
  %r = flex.attention_backward ins(%q, %k, %v, %o, %l, %o : tensor<1x4x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x4xf32>, tensor<1x4x16x4xf32>, tensor<1x4x16xf32>, tensor<1x4x16x4xf32>)
      outs(%q, %k, %v : tensor<1x4x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x4xf32>) scale(0.125)
      -> tensor<1x4x16x8xf32>
  return
}
