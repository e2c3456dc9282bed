// Seed input for the robustness fuzzer: the op on memrefs, as a tile
// (offsets + kv_group_size), a captured table read in score_mod.
func.func @main(%q: memref<1x2x4x8xf32>, %k: memref<1x1x9x8xf32>, %v: memref<1x1x9x8xf32>, %tab: memref<17xf32>, %o: memref<1x2x4x8xf32>, %l: memref<1x2x4xf32>) {
  %b0 = arith.constant 0 : index
  %h0 = arith.constant 2 : index
  %m0 = arith.constant 4 : index
  flex.attention ins(%q, %k, %v : memref<1x2x4x8xf32>, memref<1x1x9x8xf32>, memref<1x1x9x8xf32>)
      captures(%tab : memref<17xf32>) offsets(%b0, %h0, %m0)
      outs(%o : memref<1x2x4x8xf32>) logsumexp(%l : memref<1x2x4xf32>) scale(0.5)
      {kv_group_size = 4 : i64}
      score_mod {
      ^bb0(%s: f32, %b: index, %h: index, %m: index, %n: index):
        %c8 = arith.constant 8 : index
        %d = arith.subi %m, %n : index
        %e = arith.addi %d, %c8 : index
        %x = memref.load %tab[%e] : memref<17xf32>
        %t = arith.addf %s, %x : f32
        flex.yield %t : f32
      }
  return
}
