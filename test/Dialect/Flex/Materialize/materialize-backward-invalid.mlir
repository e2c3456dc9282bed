// RUN: flex-opt %s -flex-materialize -split-input-file -verify-diagnostics

// Malformed `@__flex_backward_N` calls and joint functions: diagnostics on
// the call, never a crash.

func.func private @sdpa_score0(%s: tensor<f32>, %b: tensor<i32>, %h: tensor<i32>, %m: tensor<i32>, %n: tensor<i32>, %bias: tensor<2x8xf32>) -> tensor<f32> {
  return %s : tensor<f32>
}
func.func private @sdpa_joint0(%s: tensor<f32>, %b: tensor<i32>, %h: tensor<i32>, %m: tensor<i32>, %n: tensor<i32>, %g: tensor<f32>, %bias: tensor<2x8xf32>) -> (tensor<f32>, tensor<f32>, tensor<i32>, tensor<i32>) {
  return %g, %g, %h, %n : tensor<f32>, tensor<f32>, tensor<i32>, tensor<i32>
}
func.func @operand_count(%q: tensor<1x2x8x4xf32>, %k: tensor<1x2x8x4xf32>, %v: tensor<1x2x8x4xf32>, %o: tensor<1x2x8x4xf32>, %l: tensor<1x2x8xf32>, %do: tensor<1x2x8x4xf32>, %bias: tensor<2x8xf32>) {
  // expected-error@+1 {{flex-materialize: @__flex_backward_0: expected 8 operands (q, k, v, out, logsumexp, grad_out, grad_logsumexp, 1 score buffer(s), 0 mask buffer(s)), got 7}}
  %r:4 = call @__flex_backward_0(%q, %k, %v, %o, %l, %do, %bias) : (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8xf32>, tensor<1x2x8x4xf32>, tensor<2x8xf32>) -> (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<2x8xf32>)
  return
}
func.func private @__flex_backward_0(tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8xf32>, tensor<1x2x8x4xf32>, tensor<2x8xf32>) -> (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<2x8xf32>) attributes {flex.score_mod = @sdpa_score0, flex.joint = @sdpa_joint0, flex.scale = 1.0 : f64, flex.num_score_buffers = 1 : i64, flex.has_grad_lse = true, flex.grad_captures = array<i64: 0>}

// -----

func.func private @sdpa_score0(%s: tensor<f32>, %b: tensor<i32>, %h: tensor<i32>, %m: tensor<i32>, %n: tensor<i32>, %bias: tensor<2x8xf32>) -> tensor<f32> {
  return %s : tensor<f32>
}
func.func private @sdpa_joint0(%s: tensor<f32>, %b: tensor<i32>, %h: tensor<i32>, %m: tensor<i32>, %n: tensor<i32>, %g: tensor<f32>, %bias: tensor<2x8xf32>) -> (tensor<f32>, tensor<f32>, tensor<i32>, tensor<i32>) {
  return %g, %g, %h, %n : tensor<f32>, tensor<f32>, tensor<i32>, tensor<i32>
}
func.func @result_count(%q: tensor<1x2x8x4xf32>, %k: tensor<1x2x8x4xf32>, %v: tensor<1x2x8x4xf32>, %o: tensor<1x2x8x4xf32>, %l: tensor<1x2x8xf32>, %do: tensor<1x2x8x4xf32>, %bias: tensor<2x8xf32>) {
  // expected-error@+1 {{expected 4 results (grad_query, grad_key, grad_value, 1 capture gradient(s) for 'flex.grad_captures'), got 3}}
  %r:3 = call @__flex_backward_0(%q, %k, %v, %o, %l, %do, %bias) : (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8xf32>, tensor<1x2x8x4xf32>, tensor<2x8xf32>) -> (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>)
  return
}
func.func private @__flex_backward_0(tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8xf32>, tensor<1x2x8x4xf32>, tensor<2x8xf32>) -> (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>) attributes {flex.score_mod = @sdpa_score0, flex.joint = @sdpa_joint0, flex.scale = 1.0 : f64, flex.num_score_buffers = 1 : i64, flex.grad_captures = array<i64: 0>}

// -----

func.func private @sdpa_score0(%s: tensor<f32>, %b: tensor<i32>, %h: tensor<i32>, %m: tensor<i32>, %n: tensor<i32>, %bias: tensor<2x8xf32>) -> tensor<f32> {
  return %s : tensor<f32>
}
func.func private @sdpa_joint0(%s: tensor<f32>, %b: tensor<i32>, %h: tensor<i32>, %m: tensor<i32>, %n: tensor<i32>, %g: tensor<f32>, %bias: tensor<2x8xf32>) -> (tensor<f32>, tensor<f32>, tensor<i32>, tensor<i32>) {
  return %g, %g, %h, %n : tensor<f32>, tensor<f32>, tensor<i32>, tensor<i32>
}
func.func @grad_captures_range(%q: tensor<1x2x8x4xf32>, %k: tensor<1x2x8x4xf32>, %v: tensor<1x2x8x4xf32>, %o: tensor<1x2x8x4xf32>, %l: tensor<1x2x8xf32>, %do: tensor<1x2x8x4xf32>, %bias: tensor<2x8xf32>) {
  // expected-error@+1 {{'flex.grad_captures' entry 1 is not the index of a score buffer (there are 1)}}
  %r:4 = call @__flex_backward_0(%q, %k, %v, %o, %l, %do, %bias) : (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8xf32>, tensor<1x2x8x4xf32>, tensor<2x8xf32>) -> (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<2x8xf32>)
  return
}
func.func private @__flex_backward_0(tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8xf32>, tensor<1x2x8x4xf32>, tensor<2x8xf32>) -> (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<2x8xf32>) attributes {flex.score_mod = @sdpa_score0, flex.joint = @sdpa_joint0, flex.scale = 1.0 : f64, flex.num_score_buffers = 1 : i64, flex.grad_captures = array<i64: 1>}

// -----

func.func private @sdpa_score0(%s: tensor<f32>, %b: tensor<i32>, %h: tensor<i32>, %m: tensor<i32>, %n: tensor<i32>, %bias: tensor<2x8xf32>) -> tensor<f32> {
  return %s : tensor<f32>
}
func.func private @sdpa_joint0(%s: tensor<f32>, %b: tensor<i32>, %h: tensor<i32>, %m: tensor<i32>, %n: tensor<i32>, %g: tensor<f32>, %bias: tensor<2x8xf32>) -> (tensor<f32>, tensor<f32>, tensor<i32>, tensor<i32>) {
  return %g, %g, %h, %n : tensor<f32>, tensor<f32>, tensor<i32>, tensor<i32>
}
func.func @grad_captures_attr(%q: tensor<1x2x8x4xf32>, %k: tensor<1x2x8x4xf32>, %v: tensor<1x2x8x4xf32>, %o: tensor<1x2x8x4xf32>, %l: tensor<1x2x8xf32>, %do: tensor<1x2x8x4xf32>, %bias: tensor<2x8xf32>) {
  // expected-error@+1 {{'flex.grad_captures' must be an array<i64: ...> of score buffer indices}}
  %r:4 = call @__flex_backward_0(%q, %k, %v, %o, %l, %do, %bias) : (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8xf32>, tensor<1x2x8x4xf32>, tensor<2x8xf32>) -> (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<2x8xf32>)
  return
}
func.func private @__flex_backward_0(tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8xf32>, tensor<1x2x8x4xf32>, tensor<2x8xf32>) -> (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<2x8xf32>) attributes {flex.score_mod = @sdpa_score0, flex.joint = @sdpa_joint0, flex.scale = 1.0 : f64, flex.num_score_buffers = 1 : i64, flex.grad_captures = [0]}

// -----

func.func private @sdpa_score0(%s: tensor<f32>, %b: tensor<i32>, %h: tensor<i32>, %m: tensor<i32>, %n: tensor<i32>, %bias: tensor<2x8xf32>) -> tensor<f32> {
  return %s : tensor<f32>
}
func.func private @sdpa_joint0(%s: tensor<f32>, %b: tensor<i32>, %h: tensor<i32>, %m: tensor<i32>, %n: tensor<i32>, %g: tensor<f32>, %bias: tensor<2x8xf32>) -> (tensor<f32>, tensor<f32>, tensor<i32>, tensor<i32>) {
  return %g, %g, %h, %n : tensor<f32>, tensor<f32>, tensor<i32>, tensor<i32>
}
func.func @capture_grad_type(%q: tensor<1x2x8x4xf32>, %k: tensor<1x2x8x4xf32>, %v: tensor<1x2x8x4xf32>, %o: tensor<1x2x8x4xf32>, %l: tensor<1x2x8xf32>, %do: tensor<1x2x8x4xf32>, %bias: tensor<2x8xf32>) {
  // expected-error@+1 {{result #3 has type 'tensor<2x4xf32>', expected 'tensor<2x8xf32>' (the type of score buffer #0)}}
  %r:4 = call @__flex_backward_0(%q, %k, %v, %o, %l, %do, %bias) : (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8xf32>, tensor<1x2x8x4xf32>, tensor<2x8xf32>) -> (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<2x4xf32>)
  return
}
func.func private @__flex_backward_0(tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8xf32>, tensor<1x2x8x4xf32>, tensor<2x8xf32>) -> (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<2x4xf32>) attributes {flex.score_mod = @sdpa_score0, flex.joint = @sdpa_joint0, flex.scale = 1.0 : f64, flex.num_score_buffers = 1 : i64, flex.grad_captures = array<i64: 0>}

// -----

func.func private @sdpa_score0(%s: tensor<f32>, %b: tensor<i32>, %h: tensor<i32>, %m: tensor<i32>, %n: tensor<i32>, %bias: tensor<2x8xf32>) -> tensor<f32> {
  return %s : tensor<f32>
}
func.func private @sdpa_joint0(%s: tensor<f32>, %b: tensor<i32>, %h: tensor<i32>, %m: tensor<i32>, %n: tensor<i32>, %g: tensor<f32>, %bias: tensor<2x8xf32>) -> (tensor<f32>, tensor<f32>, tensor<i32>, tensor<i32>) {
  return %g, %g, %h, %n : tensor<f32>, tensor<f32>, tensor<i32>, tensor<i32>
}
func.func @dk_type(%q: tensor<1x2x8x4xf32>, %k: tensor<1x2x8x4xf32>, %v: tensor<1x2x8x4xf32>, %o: tensor<1x2x8x4xf32>, %l: tensor<1x2x8xf32>, %do: tensor<1x2x8x4xf32>, %bias: tensor<2x8xf32>) {
  // expected-error@+1 {{result #1 has type 'tensor<1x2x8x8xf32>', expected 'tensor<1x2x8x4xf32>' (the type of key)}}
  %r:3 = call @__flex_backward_0(%q, %k, %v, %o, %l, %do, %bias) : (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8xf32>, tensor<1x2x8x4xf32>, tensor<2x8xf32>) -> (tensor<1x2x8x4xf32>, tensor<1x2x8x8xf32>, tensor<1x2x8x4xf32>)
  return
}
func.func private @__flex_backward_0(tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8xf32>, tensor<1x2x8x4xf32>, tensor<2x8xf32>) -> (tensor<1x2x8x4xf32>, tensor<1x2x8x8xf32>, tensor<1x2x8x4xf32>) attributes {flex.score_mod = @sdpa_score0, flex.joint = @sdpa_joint0, flex.scale = 1.0 : f64, flex.num_score_buffers = 1 : i64}

// -----

func.func private @sdpa_score0(%s: tensor<f32>, %b: tensor<i32>, %h: tensor<i32>, %m: tensor<i32>, %n: tensor<i32>, %bias: tensor<2x8xf32>) -> tensor<f32> {
  return %s : tensor<f32>
}
func.func @no_joint(%q: tensor<1x2x8x4xf32>, %k: tensor<1x2x8x4xf32>, %v: tensor<1x2x8x4xf32>, %o: tensor<1x2x8x4xf32>, %l: tensor<1x2x8xf32>, %do: tensor<1x2x8x4xf32>, %bias: tensor<2x8xf32>) {
  // expected-error@+1 {{'flex.grad_captures' given without 'flex.joint'}}
  %r:4 = call @__flex_backward_0(%q, %k, %v, %o, %l, %do, %bias) : (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8xf32>, tensor<1x2x8x4xf32>, tensor<2x8xf32>) -> (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<2x8xf32>)
  return
}
func.func private @__flex_backward_0(tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8xf32>, tensor<1x2x8x4xf32>, tensor<2x8xf32>) -> (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<2x8xf32>) attributes {flex.score_mod = @sdpa_score0, flex.scale = 1.0 : f64, flex.num_score_buffers = 1 : i64, flex.grad_captures = array<i64: 0>}

// -----

func.func private @sdpa_score0(%s: tensor<f32>, %b: tensor<i32>, %h: tensor<i32>, %m: tensor<i32>, %n: tensor<i32>, %bias: tensor<2x8xf32>) -> tensor<f32> {
  return %s : tensor<f32>
}
func.func private @sdpa_joint0(%s: tensor<f32>, %b: tensor<i32>, %h: tensor<i32>, %m: tensor<i32>, %n: tensor<i32>, %g: tensor<f32>, %bias: tensor<2x8xf32>) -> (tensor<f32>, tensor<f32>, tensor<i32>) {
  return %g, %g, %h : tensor<f32>, tensor<f32>, tensor<i32>
}
func.func @joint_arity(%q: tensor<1x2x8x4xf32>, %k: tensor<1x2x8x4xf32>, %v: tensor<1x2x8x4xf32>, %o: tensor<1x2x8x4xf32>, %l: tensor<1x2x8xf32>, %do: tensor<1x2x8x4xf32>, %bias: tensor<2x8xf32>) {
  // expected-error@+1 {{flex-materialize: joint @sdpa_joint0 returns 3 values, expected 4 (the score gradient, then a value and one index per dimension for each of the 1 capture gradient(s))}}
  %r:4 = call @__flex_backward_0(%q, %k, %v, %o, %l, %do, %bias) : (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8xf32>, tensor<1x2x8x4xf32>, tensor<2x8xf32>) -> (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<2x8xf32>)
  return
}
func.func private @__flex_backward_0(tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8xf32>, tensor<1x2x8x4xf32>, tensor<2x8xf32>) -> (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<2x8xf32>) attributes {flex.score_mod = @sdpa_score0, flex.joint = @sdpa_joint0, flex.scale = 1.0 : f64, flex.num_score_buffers = 1 : i64, flex.grad_captures = array<i64: 0>}

// -----

func.func private @sdpa_score0(%s: tensor<f32>, %b: tensor<i32>, %h: tensor<i32>, %m: tensor<i32>, %n: tensor<i32>, %bias: tensor<2x8xf32>) -> tensor<f32> {
  return %s : tensor<f32>
}
func.func private @sdpa_joint0(%s: tensor<f32>, %b: tensor<i32>, %h: tensor<i32>, %m: tensor<i32>, %n: tensor<i32>, %g: tensor<f32>, %bias: tensor<2x8xf32>) -> (tensor<f32>, tensor<f32>, tensor<i32>, tensor<f32>) {
  return %g, %g, %h, %g : tensor<f32>, tensor<f32>, tensor<i32>, tensor<f32>
}
func.func @joint_index_type(%q: tensor<1x2x8x4xf32>, %k: tensor<1x2x8x4xf32>, %v: tensor<1x2x8x4xf32>, %o: tensor<1x2x8x4xf32>, %l: tensor<1x2x8xf32>, %do: tensor<1x2x8x4xf32>, %bias: tensor<2x8xf32>) {
  // expected-error@+1 {{flex-materialize: joint @sdpa_joint0 result #3 (index 1 of capture gradient #0) must be a 0-d integer tensor, got 'tensor<f32>'}}
  %r:4 = call @__flex_backward_0(%q, %k, %v, %o, %l, %do, %bias) : (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8xf32>, tensor<1x2x8x4xf32>, tensor<2x8xf32>) -> (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<2x8xf32>)
  return
}
func.func private @__flex_backward_0(tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8xf32>, tensor<1x2x8x4xf32>, tensor<2x8xf32>) -> (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<2x8xf32>) attributes {flex.score_mod = @sdpa_score0, flex.joint = @sdpa_joint0, flex.scale = 1.0 : f64, flex.num_score_buffers = 1 : i64, flex.grad_captures = array<i64: 0>}

// -----

func.func private @sdpa_score0(%s: tensor<f32>, %b: tensor<i32>, %h: tensor<i32>, %m: tensor<i32>, %n: tensor<i32>, %bias: tensor<2x8xf32>) -> tensor<f32> {
  return %s : tensor<f32>
}
func.func private @sdpa_joint0(%s: tensor<f32>, %b: tensor<i32>, %h: tensor<i32>, %m: tensor<i32>, %n: tensor<i32>, %g: tensor<f32>) -> tensor<f32> {
  return %g : tensor<f32>
}
func.func @joint_grad_arg(%q: tensor<1x2x8x4xf32>, %k: tensor<1x2x8x4xf32>, %v: tensor<1x2x8x4xf32>, %o: tensor<1x2x8x4xf32>, %l: tensor<1x2x8xf32>, %do: tensor<1x2x8x4xf32>, %bias: tensor<2x8xf32>) {
  // expected-error@+1 {{flex-materialize: joint @sdpa_joint0 has 6 arguments, expected 6 + 1 captured buffer(s) = 7}}
  %r:3 = call @__flex_backward_0(%q, %k, %v, %o, %l, %do, %bias) : (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8xf32>, tensor<1x2x8x4xf32>, tensor<2x8xf32>) -> (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>)
  return
}
func.func private @__flex_backward_0(tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8xf32>, tensor<1x2x8x4xf32>, tensor<2x8xf32>) -> (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>) attributes {flex.score_mod = @sdpa_score0, flex.joint = @sdpa_joint0, flex.scale = 1.0 : f64, flex.num_score_buffers = 1 : i64}
