// RUN: flex-opt %s -split-input-file -verify-diagnostics | flex-opt -split-input-file | FileCheck %s
// RUN: flex-opt %s -split-input-file -verify-diagnostics \
// RUN:   --one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map" \
// RUN:   | FileCheck %s --check-prefix=BUF

// flex.quant_matmul: round trip, bufferization (the init is written in
// place, its contents never copied), and the verifier's rules (one
// split case per message).

// CHECK-LABEL: func.func @int8_dynamic_m
// CHECK-SAME: (%[[X:[^:]+]]: tensor<?x64xf32>, %[[W:[^:]+]]: tensor<32x64xi8>, %[[S:[^:]+]]: tensor<32xf32>, %[[E:[^:]+]]: tensor<?x32xf32>)
// CHECK: %[[Y:.+]] = flex.quant_matmul {format = "int8", group_size = 0 : i64, layout = 0 : i64} ins(%[[X]], %[[W]], %[[S]] : tensor<?x64xf32>, tensor<32x64xi8>, tensor<32xf32>) outs(%[[E]] : tensor<?x32xf32>) -> tensor<?x32xf32>
// CHECK: return %[[Y]]
// BUF-LABEL: func.func @int8_dynamic_m
// BUF-SAME: (%[[X:[^:]+]]: memref<?x64xf32>, %[[W:[^:]+]]: memref<32x64xi8>, %[[S:[^:]+]]: memref<32xf32>, %[[E:[^:]+]]: memref<?x32xf32>)
// BUF-NOT: memref.copy
// BUF: flex.quant_matmul {format = "int8", group_size = 0 : i64, layout = 0 : i64} ins(%[[X]], %[[W]], %[[S]] : memref<?x64xf32>, memref<32x64xi8>, memref<32xf32>) outs(%[[E]] : memref<?x32xf32>){{$}}
// BUF-NOT: memref.copy
// BUF: return %[[E]]
func.func @int8_dynamic_m(%x: tensor<?x64xf32>, %w: tensor<32x64xi8>, %s: tensor<32xf32>, %e: tensor<?x32xf32>) -> tensor<?x32xf32> {
  %y = flex.quant_matmul {format = "int8", group_size = 0 : i64, layout = 0 : i64}
      ins(%x, %w, %s : tensor<?x64xf32>, tensor<32x64xi8>, tensor<32xf32>)
      outs(%e : tensor<?x32xf32>) -> tensor<?x32xf32>
  return %y : tensor<?x32xf32>
}

// -----

// CHECK-LABEL: func.func @int4_bf16
// CHECK: flex.quant_matmul {format = "int4_cpu", group_size = 32 : i64, layout = 2 : i64} ins(%{{.+}}, %{{.+}}, %{{.+}} : tensor<4x128xbf16>, tensor<64x64xi8>, tensor<4x64x2xbf16>) outs(%{{.+}} : tensor<4x64xbf16>) -> tensor<4x64xbf16>
// BUF-LABEL: func.func @int4_bf16
// BUF: %[[A:.+]] = memref.alloc() {{.*}}: memref<4x64xbf16>
// BUF-NOT: memref.copy
// BUF: flex.quant_matmul {format = "int4_cpu", group_size = 32 : i64, layout = 2 : i64} ins({{.+}}) outs(%[[A]] : memref<4x64xbf16>){{$}}
func.func @int4_bf16(%x: tensor<4x128xbf16>, %w: tensor<64x64xi8>, %sz: tensor<4x64x2xbf16>) -> tensor<4x64xbf16> {
  %e = tensor.empty() : tensor<4x64xbf16>
  %y = flex.quant_matmul {format = "int4_cpu", group_size = 32 : i64, layout = 2 : i64}
      ins(%x, %w, %sz : tensor<4x128xbf16>, tensor<64x64xi8>, tensor<4x64x2xbf16>)
      outs(%e : tensor<4x64xbf16>) -> tensor<4x64xbf16>
  return %y : tensor<4x64xbf16>
}

// -----

// N = 80: one block of 64 (layout 2) and a short block of 16 columns.
// CHECK-LABEL: func.func @int4_short_block
// CHECK: flex.quant_matmul {format = "int4_cpu", group_size = 32 : i64, layout = 2 : i64} ins(%{{.+}}, %{{.+}}, %{{.+}} : tensor<4x64xf32>, tensor<80x32xi8>, tensor<2x80x2xf32>) outs(%{{.+}} : tensor<4x80xf32>) -> tensor<4x80xf32>
func.func @int4_short_block(%x: tensor<4x64xf32>, %w: tensor<80x32xi8>, %sz: tensor<2x80x2xf32>, %e: tensor<4x80xf32>) -> tensor<4x80xf32> {
  %y = flex.quant_matmul {format = "int4_cpu", group_size = 32 : i64, layout = 2 : i64}
      ins(%x, %w, %sz : tensor<4x64xf32>, tensor<80x32xi8>, tensor<2x80x2xf32>) outs(%e : tensor<4x80xf32>) -> tensor<4x80xf32>
  return %y : tensor<4x80xf32>
}

// -----

// On memrefs: no result; bf16 x with f32 scales.
// CHECK-LABEL: func.func @int4_memref
// CHECK: flex.quant_matmul {format = "int4_cpu", group_size = 64 : i64, layout = 0 : i64} ins(%{{.+}}, %{{.+}}, %{{.+}} : memref<?x128xbf16>, memref<32x64xi8>, memref<2x32x2xf32>) outs(%{{.+}} : memref<?x32xbf16>){{$}}
func.func @int4_memref(%x: memref<?x128xbf16>, %w: memref<32x64xi8>, %sz: memref<2x32x2xf32>, %y: memref<?x32xbf16>) {
  flex.quant_matmul {format = "int4_cpu", group_size = 64 : i64, layout = 0 : i64}
      ins(%x, %w, %sz : memref<?x128xbf16>, memref<32x64xi8>, memref<2x32x2xf32>)
      outs(%y : memref<?x32xbf16>)
  return
}

// -----

func.func @bad_format(%x: tensor<4x64xf32>, %w: tensor<32x64xi8>, %s: tensor<32xf32>, %e: tensor<4x32xf32>) -> tensor<4x32xf32> {
  // expected-error @+1 {{'flex.quant_matmul' op format must be "int8" or "int4_cpu", got "int2"}}
  %y = flex.quant_matmul {format = "int2", group_size = 0 : i64, layout = 0 : i64}
      ins(%x, %w, %s : tensor<4x64xf32>, tensor<32x64xi8>, tensor<32xf32>) outs(%e : tensor<4x32xf32>) -> tensor<4x32xf32>
  return %y : tensor<4x32xf32>
}

// -----

func.func @x_f16(%x: tensor<4x64xf16>, %w: tensor<32x64xi8>, %s: tensor<32xf16>, %e: tensor<4x32xf16>) -> tensor<4x32xf16> {
  // expected-error @+1 {{'flex.quant_matmul' op x must have element type f32 or bf16, got 'f16'}}
  %y = flex.quant_matmul {format = "int8", group_size = 0 : i64, layout = 0 : i64}
      ins(%x, %w, %s : tensor<4x64xf16>, tensor<32x64xi8>, tensor<32xf16>) outs(%e : tensor<4x32xf16>) -> tensor<4x32xf16>
  return %y : tensor<4x32xf16>
}

// -----

func.func @x_rank(%x: tensor<1x4x64xf32>, %w: tensor<32x64xi8>, %s: tensor<32xf32>, %e: tensor<4x32xf32>) -> tensor<4x32xf32> {
  // expected-error @+1 {{'flex.quant_matmul' op x must be rank 2 [M, K], got rank 3}}
  %y = flex.quant_matmul {format = "int8", group_size = 0 : i64, layout = 0 : i64}
      ins(%x, %w, %s : tensor<1x4x64xf32>, tensor<32x64xi8>, tensor<32xf32>) outs(%e : tensor<4x32xf32>) -> tensor<4x32xf32>
  return %y : tensor<4x32xf32>
}

// -----

func.func @init_type(%x: tensor<4x64xbf16>, %w: tensor<32x64xi8>, %s: tensor<32xf32>, %e: tensor<4x32xf32>) -> tensor<4x32xf32> {
  // expected-error @+1 {{'flex.quant_matmul' op init element type 'f32' must be x's ('bf16')}}
  %y = flex.quant_matmul {format = "int8", group_size = 0 : i64, layout = 0 : i64}
      ins(%x, %w, %s : tensor<4x64xbf16>, tensor<32x64xi8>, tensor<32xf32>) outs(%e : tensor<4x32xf32>) -> tensor<4x32xf32>
  return %y : tensor<4x32xf32>
}

// -----

func.func @m_mismatch(%x: tensor<4x64xf32>, %w: tensor<32x64xi8>, %s: tensor<32xf32>, %e: tensor<5x32xf32>) -> tensor<5x32xf32> {
  // expected-error @+1 {{'flex.quant_matmul' op init [5, 32] and x [4, 64] disagree on M}}
  %y = flex.quant_matmul {format = "int8", group_size = 0 : i64, layout = 0 : i64}
      ins(%x, %w, %s : tensor<4x64xf32>, tensor<32x64xi8>, tensor<32xf32>) outs(%e : tensor<5x32xf32>) -> tensor<5x32xf32>
  return %y : tensor<5x32xf32>
}

// -----

func.func @w_not_i8(%x: tensor<4x64xf32>, %w: tensor<32x64xi32>, %s: tensor<32xf32>, %e: tensor<4x32xf32>) -> tensor<4x32xf32> {
  // expected-error @+1 {{'flex.quant_matmul' op w must have element type i8, got 'i32'}}
  %y = flex.quant_matmul {format = "int8", group_size = 0 : i64, layout = 0 : i64}
      ins(%x, %w, %s : tensor<4x64xf32>, tensor<32x64xi32>, tensor<32xf32>) outs(%e : tensor<4x32xf32>) -> tensor<4x32xf32>
  return %y : tensor<4x32xf32>
}

// -----

func.func @scales_type(%x: tensor<4x64xf32>, %w: tensor<32x64xi8>, %s: tensor<32xbf16>, %e: tensor<4x32xf32>) -> tensor<4x32xf32> {
  // expected-error @+1 {{'flex.quant_matmul' op scales must have element type f32 or x's ('f32'), got 'bf16'}}
  %y = flex.quant_matmul {format = "int8", group_size = 0 : i64, layout = 0 : i64}
      ins(%x, %w, %s : tensor<4x64xf32>, tensor<32x64xi8>, tensor<32xbf16>) outs(%e : tensor<4x32xf32>) -> tensor<4x32xf32>
  return %y : tensor<4x32xf32>
}

// -----

func.func @int8_group(%x: tensor<4x64xf32>, %w: tensor<32x64xi8>, %s: tensor<32xf32>, %e: tensor<4x32xf32>) -> tensor<4x32xf32> {
  // expected-error @+1 {{'flex.quant_matmul' op int8 takes group_size = 0 and layout = 0, got group_size = 32, layout = 0}}
  %y = flex.quant_matmul {format = "int8", group_size = 32 : i64, layout = 0 : i64}
      ins(%x, %w, %s : tensor<4x64xf32>, tensor<32x64xi8>, tensor<32xf32>) outs(%e : tensor<4x32xf32>) -> tensor<4x32xf32>
  return %y : tensor<4x32xf32>
}

// -----

func.func @int8_k_mismatch(%x: tensor<4x64xf32>, %w: tensor<32x48xi8>, %s: tensor<32xf32>, %e: tensor<4x32xf32>) -> tensor<4x32xf32> {
  // expected-error @+1 {{'flex.quant_matmul' op int8 w [32, 48] must be [N, K] = [32, 64] (from init and x)}}
  %y = flex.quant_matmul {format = "int8", group_size = 0 : i64, layout = 0 : i64}
      ins(%x, %w, %s : tensor<4x64xf32>, tensor<32x48xi8>, tensor<32xf32>) outs(%e : tensor<4x32xf32>) -> tensor<4x32xf32>
  return %y : tensor<4x32xf32>
}

// -----

func.func @int8_scales_shape(%x: tensor<4x64xf32>, %w: tensor<32x64xi8>, %s: tensor<16xf32>, %e: tensor<4x32xf32>) -> tensor<4x32xf32> {
  // expected-error @+1 {{'flex.quant_matmul' op int8 scales [16] must be [N] (N = 32)}}
  %y = flex.quant_matmul {format = "int8", group_size = 0 : i64, layout = 0 : i64}
      ins(%x, %w, %s : tensor<4x64xf32>, tensor<32x64xi8>, tensor<16xf32>) outs(%e : tensor<4x32xf32>) -> tensor<4x32xf32>
  return %y : tensor<4x32xf32>
}

// -----

func.func @int4_group_zero(%x: tensor<4x64xf32>, %w: tensor<32x32xi8>, %s: tensor<2x32x2xf32>, %e: tensor<4x32xf32>) -> tensor<4x32xf32> {
  // expected-error @+1 {{'flex.quant_matmul' op int4_cpu group_size must be positive, got 0}}
  %y = flex.quant_matmul {format = "int4_cpu", group_size = 0 : i64, layout = 1 : i64}
      ins(%x, %w, %s : tensor<4x64xf32>, tensor<32x32xi8>, tensor<2x32x2xf32>) outs(%e : tensor<4x32xf32>) -> tensor<4x32xf32>
  return %y : tensor<4x32xf32>
}

// -----

func.func @int4_layout(%x: tensor<4x64xf32>, %w: tensor<32x32xi8>, %s: tensor<2x32x2xf32>, %e: tensor<4x32xf32>) -> tensor<4x32xf32> {
  // expected-error @+1 {{'flex.quant_matmul' op int4_cpu layout must be 0, 1 or 2, got 3}}
  %y = flex.quant_matmul {format = "int4_cpu", group_size = 32 : i64, layout = 3 : i64}
      ins(%x, %w, %s : tensor<4x64xf32>, tensor<32x32xi8>, tensor<2x32x2xf32>) outs(%e : tensor<4x32xf32>) -> tensor<4x32xf32>
  return %y : tensor<4x32xf32>
}

// -----

func.func @int4_group_divides_k(%x: tensor<4x64xf32>, %w: tensor<32x32xi8>, %s: tensor<2x32x2xf32>, %e: tensor<4x32xf32>) -> tensor<4x32xf32> {
  // expected-error @+1 {{'flex.quant_matmul' op int4_cpu group_size 48 must divide K (64)}}
  %y = flex.quant_matmul {format = "int4_cpu", group_size = 48 : i64, layout = 1 : i64}
      ins(%x, %w, %s : tensor<4x64xf32>, tensor<32x32xi8>, tensor<2x32x2xf32>) outs(%e : tensor<4x32xf32>) -> tensor<4x32xf32>
  return %y : tensor<4x32xf32>
}

// -----

func.func @int4_n_multiple_of_16(%x: tensor<4x64xf32>, %w: tensor<40x32xi8>, %s: tensor<2x40x2xf32>, %e: tensor<4x40xf32>) -> tensor<4x40xf32> {
  // expected-error @+1 {{'flex.quant_matmul' op int4_cpu N (40) must be a multiple of 16 (torch's int4 CPU packing needs one)}}
  %y = flex.quant_matmul {format = "int4_cpu", group_size = 32 : i64, layout = 2 : i64}
      ins(%x, %w, %s : tensor<4x64xf32>, tensor<40x32xi8>, tensor<2x40x2xf32>) outs(%e : tensor<4x40xf32>) -> tensor<4x40xf32>
  return %y : tensor<4x40xf32>
}

// -----

func.func @int4_w_shape(%x: tensor<4x64xf32>, %w: tensor<32x64xi8>, %s: tensor<2x32x2xf32>, %e: tensor<4x32xf32>) -> tensor<4x32xf32> {
  // expected-error @+1 {{'flex.quant_matmul' op int4_cpu w [32, 64] must be [N, K/2] (N = 32, K = 64)}}
  %y = flex.quant_matmul {format = "int4_cpu", group_size = 32 : i64, layout = 1 : i64}
      ins(%x, %w, %s : tensor<4x64xf32>, tensor<32x64xi8>, tensor<2x32x2xf32>) outs(%e : tensor<4x32xf32>) -> tensor<4x32xf32>
  return %y : tensor<4x32xf32>
}

// -----

func.func @int4_scales_shape(%x: tensor<4x64xf32>, %w: tensor<32x32xi8>, %s: tensor<4x32x2xf32>, %e: tensor<4x32xf32>) -> tensor<4x32xf32> {
  // expected-error @+1 {{'flex.quant_matmul' op int4_cpu scales [4, 32, 2] must be [K/group_size, N, 2] (K = 64, N = 32, group_size = 32)}}
  %y = flex.quant_matmul {format = "int4_cpu", group_size = 32 : i64, layout = 1 : i64}
      ins(%x, %w, %s : tensor<4x64xf32>, tensor<32x32xi8>, tensor<4x32x2xf32>) outs(%e : tensor<4x32xf32>) -> tensor<4x32xf32>
  return %y : tensor<4x32xf32>
}

// -----

func.func @mixed(%x: tensor<4x64xf32>, %w: tensor<32x64xi8>, %s: tensor<32xf32>, %e: memref<4x32xf32>) {
  // expected-error @+1 {{'flex.quant_matmul' op operands must be all tensors or all memrefs}}
  flex.quant_matmul {format = "int8", group_size = 0 : i64, layout = 0 : i64}
      ins(%x, %w, %s : tensor<4x64xf32>, tensor<32x64xi8>, tensor<32xf32>) outs(%e : memref<4x32xf32>)
  return
}

// -----

func.func @no_result(%x: tensor<4x64xf32>, %w: tensor<32x64xi8>, %s: tensor<32xf32>, %e: tensor<4x32xf32>) {
  // expected-error @+1 {{'flex.quant_matmul' op expected 1 results (one per init), got 0}}
  flex.quant_matmul {format = "int8", group_size = 0 : i64, layout = 0 : i64}
      ins(%x, %w, %s : tensor<4x64xf32>, tensor<32x64xi8>, tensor<32xf32>) outs(%e : tensor<4x32xf32>)
  return
}
