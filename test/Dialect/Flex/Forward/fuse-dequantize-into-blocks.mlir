// RUN: flex-opt %s -split-input-file -flex-to-flash -canonicalize -cse -flex-fuse-dequantize-into-blocks -canonicalize -cse | FileCheck %s
// RUN: flex-opt %s -split-input-file -flex-to-flash -canonicalize -cse -flex-fuse-dequantize-into-blocks -canonicalize -cse -one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map" | FileCheck %s --check-prefix=BUF

// flex-fuse-dequantize-into-blocks: an int8 K/V cache dequantized as
// sitofp(k) * scale[b, h, n] (two generics, as torch-mlir emits
// `k.to(f32) * scale[..., None]`) reaches flex.attention's key-block loop as
// int8: each block is sliced from the int8 tensor and its scales and
// dequantized there into a [1, 1, Nt, E] tile, one vector row at a time
// (the chain is fused into one generic first); the padded last block (N = 300, Nt = 128) is dequantized
// from its 44 rows before the loop. No f32 tensor of the whole cache is
// left, nor allocated after bufferization.

// CHECK-LABEL: func.func @decode_int8
// CHECK-NOT: tensor<1x2x300x64xf32>
// CHECK: %[[KT:.*]] = tensor.extract_slice %arg1[0, 0, 256, 0] [1, 2, 44, 64] [1, 1, 1, 1] : tensor<1x2x300x64xi8> to tensor<1x2x44x64xi8>
// CHECK: scf.for
// CHECK: tensor.extract_slice %[[KT]]
// CHECK: vector.transfer_read {{.*}} : tensor<1x1x1x64xi8>, vector<64xi8>
// CHECK: arith.sitofp %{{.*}} : vector<64xi8> to vector<64xf32>
// CHECK: tensor.pad
// CHECK: scf.forall
// CHECK: scf.for
// CHECK: %[[KB:.*]] = tensor.extract_slice %arg1[0, %{{.*}}, %{{.*}}, 0] [1, 1, 128, 64] [1, 1, 1, 1] : tensor<1x2x300x64xi8> to tensor<1x1x128x64xi8>
// CHECK: %[[SB:.*]] = tensor.extract_slice %{{.*}}[0, %{{.*}}, %{{.*}}, 0] [1, 1, 128, 1] [1, 1, 1, 1] : tensor<1x2x300x1xf32> to tensor<1x1x128x1xf32>
// CHECK: %[[E:.*]] = tensor.empty() : tensor<1x1x128x64xf32>
// CHECK: %[[D:.*]] = scf.for %[[R:.*]] = %c0 to %c128 step %c1 iter_args(%[[T:.*]] = %[[E]])
// CHECK: %[[KR:.*]] = tensor.extract_slice %[[KB]][0, 0, %[[R]], 0] [1, 1, 1, 64]
// CHECK: %[[SR:.*]] = tensor.extract_slice %[[SB]][0, 0, %[[R]], 0] [1, 1, 1, 1]
// CHECK: %[[KV:.*]] = vector.transfer_read %[[KR]]{{.*}} : tensor<1x1x1x64xi8>, vector<64xi8>
// CHECK: %[[SV:.*]] = vector.transfer_read %[[SR]]{{.*}} : tensor<1x1x1x1xf32>, vector<64xf32>
// CHECK: %[[F:.*]] = arith.sitofp %[[KV]] : vector<64xi8> to vector<64xf32>
// CHECK: %[[M:.*]] = arith.mulf %[[F]], %[[SV]] : vector<64xf32>
// CHECK: vector.transfer_write %[[M]]
// CHECK: tensor.extract_slice %[[D]][0, 0, 0, 0] [1, 1, 128, 64] [1, 1, 1, 1] : tensor<1x1x128x64xf32> to tensor<128x64xf32>
// CHECK: tensor.extract_slice %arg3[0, %{{.*}}, %{{.*}}, 0] [1, 1, 128, 64] [1, 1, 1, 1] : tensor<1x2x300x64xi8> to tensor<1x1x128x64xi8>
// CHECK: arith.sitofp
// CHECK: vector.transfer_read
// CHECK-NOT: tensor<1x2x300x64xf32>
// CHECK: return

// BUF-LABEL: func.func @decode_int8
// BUF-NOT: memref<1x2x300x64xf32>
// BUF: scf.for
// BUF: memref.subview %arg1[0, %{{.*}}, %{{.*}}, 0] [1, 1, 128, 64] [1, 1, 1, 1] : memref<1x2x300x64xi8> to memref<1x1x128x64xi8, {{.*}}>
// BUF: memref.alloc() {{.*}} : memref<1x1x128x64xf32>
// BUF-NOT: memref<1x2x300x64xf32>
// BUF: return
#id = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#bc = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>
func.func @decode_int8(%q: tensor<1x4x1x64xf32>, %k: tensor<1x2x300x64xi8>, %ks: tensor<1x2x300xf32>,
                       %v: tensor<1x2x300x64xi8>, %vs: tensor<1x2x300xf32>) -> tensor<1x4x1x64xf32> {
  %e = tensor.empty() : tensor<1x2x300x64xf32>
  %kc = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%k : tensor<1x2x300x64xi8>) outs(%e : tensor<1x2x300x64xf32>) {
  ^bb0(%a: i8, %o: f32):
    %f = arith.sitofp %a : i8 to f32
    linalg.yield %f : f32
  } -> tensor<1x2x300x64xf32>
  %kse = tensor.expand_shape %ks [[0], [1], [2, 3]] output_shape [1, 2, 300, 1] : tensor<1x2x300xf32> into tensor<1x2x300x1xf32>
  %kf = linalg.generic {indexing_maps = [#id, #bc, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%kc, %kse : tensor<1x2x300x64xf32>, tensor<1x2x300x1xf32>) outs(%e : tensor<1x2x300x64xf32>) {
  ^bb0(%a: f32, %s: f32, %o: f32):
    %m = arith.mulf %a, %s : f32
    linalg.yield %m : f32
  } -> tensor<1x2x300x64xf32>
  %vc = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%v : tensor<1x2x300x64xi8>) outs(%e : tensor<1x2x300x64xf32>) {
  ^bb0(%a: i8, %o: f32):
    %f = arith.sitofp %a : i8 to f32
    linalg.yield %f : f32
  } -> tensor<1x2x300x64xf32>
  %vse = tensor.expand_shape %vs [[0], [1], [2, 3]] output_shape [1, 2, 300, 1] : tensor<1x2x300xf32> into tensor<1x2x300x1xf32>
  %vf = linalg.generic {indexing_maps = [#id, #bc, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%vc, %vse : tensor<1x2x300x64xf32>, tensor<1x2x300x1xf32>) outs(%e : tensor<1x2x300x64xf32>) {
  ^bb0(%a: f32, %s: f32, %o: f32):
    %m = arith.mulf %a, %s : f32
    linalg.yield %m : f32
  } -> tensor<1x2x300x64xf32>
  %o = tensor.empty() : tensor<1x4x1x64xf32>
  %r = flex.attention ins(%q, %kf, %vf : tensor<1x4x1x64xf32>, tensor<1x2x300x64xf32>, tensor<1x2x300x64xf32>)
      outs(%o : tensor<1x4x1x64xf32>) scale(0.125) -> tensor<1x4x1x64xf32>
  return %r : tensor<1x4x1x64xf32>
}

// -----

// A dequantized K also read whole (here: returned; in a prefill, the
// transposed K copy) stays one op over the whole tensor: dequantized once.

// CHECK-LABEL: func.func @read_whole
// CHECK: %[[K:.*]] = linalg.generic {{.*}} ins(%arg1, %{{.*}} : tensor<1x2x256x64xi8>, tensor<1x2x256x1xf32>) outs(%{{.*}} : tensor<1x2x256x64xf32>)
// CHECK: tensor.extract_slice %[[K]][0, %{{.*}}, %{{.*}}, 0] [1, 1, 128, 64]
// CHECK: return {{.*}}, %[[K]]
#id = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#bc = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>
func.func @read_whole(%q: tensor<1x2x1x64xf32>, %k: tensor<1x2x256x64xi8>, %ks: tensor<1x2x256xf32>,
                      %v: tensor<1x2x256x64xf32>) -> (tensor<1x2x1x64xf32>, tensor<1x2x256x64xf32>) {
  %e = tensor.empty() : tensor<1x2x256x64xf32>
  %kse = tensor.expand_shape %ks [[0], [1], [2, 3]] output_shape [1, 2, 256, 1] : tensor<1x2x256xf32> into tensor<1x2x256x1xf32>
  %kf = linalg.generic {indexing_maps = [#id, #bc, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%k, %kse : tensor<1x2x256x64xi8>, tensor<1x2x256x1xf32>) outs(%e : tensor<1x2x256x64xf32>) {
  ^bb0(%a: i8, %s: f32, %o: f32):
    %f = arith.sitofp %a : i8 to f32
    %m = arith.mulf %f, %s : f32
    linalg.yield %m : f32
  } -> tensor<1x2x256x64xf32>
  %o = tensor.empty() : tensor<1x2x1x64xf32>
  %r = flex.attention ins(%q, %kf, %v : tensor<1x2x1x64xf32>, tensor<1x2x256x64xf32>, tensor<1x2x256x64xf32>)
      outs(%o : tensor<1x2x1x64xf32>) scale(0.125) -> tensor<1x2x1x64xf32>
  return %r, %kf : tensor<1x2x1x64xf32>, tensor<1x2x256x64xf32>
}

// -----

// A float K computed elementwise from float inputs is not a dequantize:
// left as it is (only integer-to-float producers are fused).

// CHECK-LABEL: func.func @float_producer
// CHECK: %[[K:.*]] = linalg.generic {{.*}} ins(%arg1 : tensor<1x2x256x64xf32>) outs(%{{.*}} : tensor<1x2x256x64xf32>)
// CHECK: tensor.extract_slice %[[K]][0, %{{.*}}, %{{.*}}, 0] [1, 1, 128, 64]
#id = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
func.func @float_producer(%q: tensor<1x2x1x64xf32>, %k: tensor<1x2x256x64xf32>,
                          %v: tensor<1x2x256x64xf32>) -> tensor<1x2x1x64xf32> {
  %e = tensor.empty() : tensor<1x2x256x64xf32>
  %kf = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%k : tensor<1x2x256x64xf32>) outs(%e : tensor<1x2x256x64xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.mulf %a, %a : f32
    linalg.yield %m : f32
  } -> tensor<1x2x256x64xf32>
  %o = tensor.empty() : tensor<1x2x1x64xf32>
  %r = flex.attention ins(%q, %kf, %v : tensor<1x2x1x64xf32>, tensor<1x2x256x64xf32>, tensor<1x2x256x64xf32>)
      outs(%o : tensor<1x2x1x64xf32>) scale(0.125) -> tensor<1x2x1x64xf32>
  return %r : tensor<1x2x1x64xf32>
}

// -----

// A dequantize of a dynamic shape is left as it is (only static shapes, a
// generation cache, are fused): the sizes of its slices would be
// `tensor.dim`s of the producer's own result (a Qwen2 compiled with
// dynamic sizes aborted in this pass).

// CHECK-LABEL: func.func @dynamic_shape
// CHECK: %[[F:.*]] = linalg.generic {{.*}} ins(%arg0 : tensor<?x64xi8>) outs(%{{.*}} : tensor<?x64xf32>)
// CHECK: tensor.extract_slice %[[F]][%arg1, 0] [4, 64] [1, 1] : tensor<?x64xf32> to tensor<4x64xf32>
#id2 = affine_map<(d0, d1) -> (d0, d1)>
func.func @dynamic_shape(%x: tensor<?x64xi8>, %i: index) -> tensor<4x64xf32> {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %x, %c0 : tensor<?x64xi8>
  %e = tensor.empty(%n) : tensor<?x64xf32>
  %f = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<?x64xi8>) outs(%e : tensor<?x64xf32>) {
  ^bb0(%a: i8, %o: f32):
    %c = arith.sitofp %a : i8 to f32
    linalg.yield %c : f32
  } -> tensor<?x64xf32>
  %s = tensor.extract_slice %f[%i, 0] [4, 64] [1, 1] : tensor<?x64xf32> to tensor<4x64xf32>
  return %s : tensor<4x64xf32>
}

// -----

// A boolean widened to float (an MoE's routing, a mask) is not a
// dequantize: left as it is (only int8 values are fused; i1 vectors are not
// lowered).

// CHECK-LABEL: func.func @bool_to_float
// CHECK: %[[F:.*]] = linalg.generic {{.*}} ins(%arg0 : tensor<8x64xi1>) outs(%{{.*}} : tensor<8x64xf32>)
// CHECK: tensor.extract_slice %[[F]][%arg1, 0] [4, 64] [1, 1] : tensor<8x64xf32> to tensor<4x64xf32>
#id3 = affine_map<(d0, d1) -> (d0, d1)>
func.func @bool_to_float(%x: tensor<8x64xi1>, %i: index) -> tensor<4x64xf32> {
  %e = tensor.empty() : tensor<8x64xf32>
  %f = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<8x64xi1>) outs(%e : tensor<8x64xf32>) {
  ^bb0(%a: i1, %o: f32):
    %c = arith.uitofp %a : i1 to f32
    linalg.yield %c : f32
  } -> tensor<8x64xf32>
  %s = tensor.extract_slice %f[%i, 0] [4, 64] [1, 1] : tensor<8x64xf32> to tensor<4x64xf32>
  return %s : tensor<4x64xf32>
}
