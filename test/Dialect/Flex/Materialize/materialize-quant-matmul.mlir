// RUN: flex-opt %s -split-input-file -verify-diagnostics -flex-materialize-quant-matmul | FileCheck %s

// flex-materialize-quant-matmul: the frontend's outlined
// `call @__flex_quant_matmul_N(x, w, scales)` -> flex.quant_matmul into a
// tensor.empty of the call's result type (M from x, N from w when
// dynamic); declarations without calls left are erased; flex-materialize's
// attention declarations are not touched.

// CHECK-LABEL: func.func @int8_dynamic
// CHECK-SAME: (%[[X:[^:]+]]: tensor<?x64xf32>, %[[W:[^:]+]]: tensor<32x64xi8>, %[[S:[^:]+]]: tensor<32xf32>)
// CHECK: %[[C0:.+]] = arith.constant 0 : index
// CHECK: %[[M:.+]] = tensor.dim %[[X]], %[[C0]] : tensor<?x64xf32>
// CHECK: %[[E:.+]] = tensor.empty(%[[M]]) : tensor<?x32xf32>
// CHECK: %[[Y:.+]] = flex.quant_matmul {format = "int8", group_size = 0 : i64, layout = 0 : i64} ins(%[[X]], %[[W]], %[[S]] : tensor<?x64xf32>, tensor<32x64xi8>, tensor<32xf32>) outs(%[[E]] : tensor<?x32xf32>) -> tensor<?x32xf32>
// CHECK: %[[Y2:.+]] = flex.quant_matmul {{.*}} ins(%[[X]], %[[W]], %[[S]] :
// CHECK: return %[[Y]], %[[Y2]]
// CHECK-NOT: __flex_quant_matmul
func.func @int8_dynamic(%x: tensor<?x64xf32>, %w: tensor<32x64xi8>, %s: tensor<32xf32>) -> (tensor<?x32xf32>, tensor<?x32xf32>) {
  %y = call @__flex_quant_matmul_0(%x, %w, %s) : (tensor<?x64xf32>, tensor<32x64xi8>, tensor<32xf32>) -> tensor<?x32xf32>
  %y2 = call @__flex_quant_matmul_0(%x, %w, %s) : (tensor<?x64xf32>, tensor<32x64xi8>, tensor<32xf32>) -> tensor<?x32xf32>
  return %y, %y2 : tensor<?x32xf32>, tensor<?x32xf32>
}
func.func private @__flex_quant_matmul_0(tensor<?x64xf32>, tensor<32x64xi8>, tensor<32xf32>) -> tensor<?x32xf32>
    attributes {flex.quant.format = "int8", flex.quant.group_size = 0 : i64, flex.quant.layout = 0 : i64}

// -----

// CHECK-LABEL: func.func @int4_static_bf16
// CHECK: %[[E:.+]] = tensor.empty() : tensor<3x64xbf16>
// CHECK: flex.quant_matmul {format = "int4_cpu", group_size = 32 : i64, layout = 2 : i64} ins(%{{.+}}, %{{.+}}, %{{.+}} : tensor<3x128xbf16>, tensor<64x64xi8>, tensor<4x64x2xbf16>) outs(%[[E]] : tensor<3x64xbf16>) -> tensor<3x64xbf16>
// CHECK-NOT: __flex_quant_matmul
func.func @int4_static_bf16(%x: tensor<3x128xbf16>, %w: tensor<64x64xi8>, %sz: tensor<4x64x2xbf16>) -> tensor<3x64xbf16> {
  %y = call @__flex_quant_matmul_1(%x, %w, %sz) : (tensor<3x128xbf16>, tensor<64x64xi8>, tensor<4x64x2xbf16>) -> tensor<3x64xbf16>
  return %y : tensor<3x64xbf16>
}
func.func private @__flex_quant_matmul_1(tensor<3x128xbf16>, tensor<64x64xi8>, tensor<4x64x2xbf16>) -> tensor<3x64xbf16>
    attributes {flex.quant.format = "int4_cpu", flex.quant.group_size = 32 : i64, flex.quant.layout = 2 : i64}

// -----

// An attention declaration is flex-materialize's: left alone.
// CHECK-LABEL: func.func @other_flex_calls
// CHECK: call @__flex_attention_0(
// CHECK: flex.quant_matmul
// CHECK: func.func private @__flex_attention_0(
func.func @other_flex_calls(%q: tensor<1x1x4x8xf32>, %x: tensor<4x64xf32>, %w: tensor<32x64xi8>, %s: tensor<32xf32>) -> (tensor<1x1x4x8xf32>, tensor<4x32xf32>) {
  %a:3 = call @__flex_attention_0(%q, %q, %q) : (tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>) -> (tensor<1x1x4x8xf32>, tensor<1x1x4xf32>, tensor<1x1x4xf32>)
  %y = call @__flex_quant_matmul_0(%x, %w, %s) : (tensor<4x64xf32>, tensor<32x64xi8>, tensor<32xf32>) -> tensor<4x32xf32>
  return %a#0, %y : tensor<1x1x4x8xf32>, tensor<4x32xf32>
}
func.func private @__flex_attention_0(tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>) -> (tensor<1x1x4x8xf32>, tensor<1x1x4xf32>, tensor<1x1x4xf32>) attributes {flex.num_mask_buffers = 0 : i64, flex.num_score_buffers = 0 : i64, flex.scale = 1.0 : f64}
func.func private @__flex_quant_matmul_0(tensor<4x64xf32>, tensor<32x64xi8>, tensor<32xf32>) -> tensor<4x32xf32>
    attributes {flex.quant.format = "int8", flex.quant.group_size = 0 : i64, flex.quant.layout = 0 : i64}

// -----

func.func @missing_format(%x: tensor<4x64xf32>, %w: tensor<32x64xi8>, %s: tensor<32xf32>) -> tensor<4x32xf32> {
  // expected-error @+1 {{flex-materialize-quant-matmul: @__flex_quant_matmul_0: needs a string attribute 'flex.quant.format' ("int8" or "int4_cpu")}}
  %y = call @__flex_quant_matmul_0(%x, %w, %s) : (tensor<4x64xf32>, tensor<32x64xi8>, tensor<32xf32>) -> tensor<4x32xf32>
  return %y : tensor<4x32xf32>
}
func.func private @__flex_quant_matmul_0(tensor<4x64xf32>, tensor<32x64xi8>, tensor<32xf32>) -> tensor<4x32xf32>
    attributes {flex.quant.group_size = 0 : i64, flex.quant.layout = 0 : i64}

// -----

func.func @group_size_not_i64(%x: tensor<4x64xf32>, %w: tensor<32x64xi8>, %s: tensor<32xf32>) -> tensor<4x32xf32> {
  // expected-error @+1 {{flex-materialize-quant-matmul: @__flex_quant_matmul_0: needs an i64 attribute 'flex.quant.group_size'}}
  %y = call @__flex_quant_matmul_0(%x, %w, %s) : (tensor<4x64xf32>, tensor<32x64xi8>, tensor<32xf32>) -> tensor<4x32xf32>
  return %y : tensor<4x32xf32>
}
func.func private @__flex_quant_matmul_0(tensor<4x64xf32>, tensor<32x64xi8>, tensor<32xf32>) -> tensor<4x32xf32>
    attributes {flex.quant.format = "int8", flex.quant.group_size = "0", flex.quant.layout = 0 : i64}

// -----

func.func @missing_layout(%x: tensor<4x64xf32>, %w: tensor<32x64xi8>, %s: tensor<32xf32>) -> tensor<4x32xf32> {
  // expected-error @+1 {{flex-materialize-quant-matmul: @__flex_quant_matmul_0: needs an i64 attribute 'flex.quant.layout'}}
  %y = call @__flex_quant_matmul_0(%x, %w, %s) : (tensor<4x64xf32>, tensor<32x64xi8>, tensor<32xf32>) -> tensor<4x32xf32>
  return %y : tensor<4x32xf32>
}
func.func private @__flex_quant_matmul_0(tensor<4x64xf32>, tensor<32x64xi8>, tensor<32xf32>) -> tensor<4x32xf32>
    attributes {flex.quant.format = "int8", flex.quant.group_size = 0 : i64}

// -----

func.func @operand_count(%x: tensor<4x64xf32>, %w: tensor<32x64xi8>) -> tensor<4x32xf32> {
  // expected-error @+1 {{flex-materialize-quant-matmul: @__flex_quant_matmul_0: expected 3 operands (x, w, scales) and 1 result, got 2 and 1}}
  %y = call @__flex_quant_matmul_0(%x, %w) : (tensor<4x64xf32>, tensor<32x64xi8>) -> tensor<4x32xf32>
  return %y : tensor<4x32xf32>
}
func.func private @__flex_quant_matmul_0(tensor<4x64xf32>, tensor<32x64xi8>) -> tensor<4x32xf32>
    attributes {flex.quant.format = "int8", flex.quant.group_size = 0 : i64, flex.quant.layout = 0 : i64}

// -----

// The op's verifier decides the rest; its message is reported on the call.
func.func @bad_format(%x: tensor<4x64xf32>, %w: tensor<32x64xi8>, %s: tensor<32xf32>) -> tensor<4x32xf32> {
  // expected-error @+1 {{flex-materialize-quant-matmul: @__flex_quant_matmul_0: 'flex.quant_matmul' op format must be "int8" or "int4_cpu", got "int3"}}
  %y = call @__flex_quant_matmul_0(%x, %w, %s) : (tensor<4x64xf32>, tensor<32x64xi8>, tensor<32xf32>) -> tensor<4x32xf32>
  return %y : tensor<4x32xf32>
}
func.func private @__flex_quant_matmul_0(tensor<4x64xf32>, tensor<32x64xi8>, tensor<32xf32>) -> tensor<4x32xf32>
    attributes {flex.quant.format = "int3", flex.quant.group_size = 0 : i64, flex.quant.layout = 0 : i64}

// -----

func.func @n_not_multiple_of_16(%x: tensor<4x64xf32>, %w: tensor<40x32xi8>, %sz: tensor<2x40x2xf32>) -> tensor<4x40xf32> {
  // expected-error @+1 {{@__flex_quant_matmul_0: 'flex.quant_matmul' op int4_cpu N (40) must be a multiple of 16 (torch's int4 CPU packing needs one)}}
  %y = call @__flex_quant_matmul_0(%x, %w, %sz) : (tensor<4x64xf32>, tensor<40x32xi8>, tensor<2x40x2xf32>) -> tensor<4x40xf32>
  return %y : tensor<4x40xf32>
}
func.func private @__flex_quant_matmul_0(tensor<4x64xf32>, tensor<40x32xi8>, tensor<2x40x2xf32>) -> tensor<4x40xf32>
    attributes {flex.quant.format = "int4_cpu", flex.quant.group_size = 32 : i64, flex.quant.layout = 1 : i64}
