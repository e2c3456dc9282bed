// RUN: flex-opt %s -split-input-file -flex-parallel-rows -cse --mlir-print-local-scope | FileCheck %s
// RUN: flex-opt %s -split-input-file -flex-parallel-rows="min-iterations=1000000000" --mlir-print-local-scope | FileCheck %s --check-prefix=NONE

// flex-parallel-rows: large linalg ops on buffers directly in a function
// body become an scf.parallel of `chunks` tiles along their outermost
// parallel loop of more than one iteration; the rest is left alone.

// A row reduction (RMSNorm's sum of squares): 8 tiles of 256 rows, each
// with its rows' whole reduction.
// CHECK-LABEL: func.func @row_reduction
// CHECK-DAG:     %[[C0:.*]] = arith.constant 0 : index
// CHECK-DAG:     %[[C2048:.*]] = arith.constant 2048 : index
// CHECK-DAG:     %[[C256:.*]] = arith.constant 256 : index
// CHECK:         scf.parallel (%[[I:.*]]) = (%[[C0]]) to (%[[C2048]]) step (%[[C256]])
// CHECK:           memref.subview %{{.*}}[%[[I]], 0] [256, 1024] [1, 1]
// CHECK:           memref.subview %{{.*}}[%[[I]]] [256] [1]
// CHECK:           linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]
// CHECK-SAME:        ins(%{{.*}} : memref<256x1024xf32, strided<[1024, 1], offset: ?>>)
// CHECK-SAME:        outs(%{{.*}} : memref<256xf32, strided<[1], offset: ?>>)
// CHECK:             arith.addf
// CHECK-NOT:     linalg.generic
// CHECK:         return
// NONE-LABEL: func.func @row_reduction
// NONE-NOT:     scf.parallel
func.func @row_reduction(%x: memref<2048x1024xf32>, %s: memref<2048xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<2048x1024xf32>) outs(%s : memref<2048xf32>) {
  ^bb0(%a: f32, %b: f32):
    %r = arith.addf %a, %b : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// A leading unit dim (batch 1) is skipped: the split is along the tokens.
// CHECK-LABEL: func.func @unit_batch
// CHECK:         scf.parallel (%[[I:.*]]) = (%{{.*}}) to (%{{.*}}) step (%{{.*}})
// CHECK:           memref.subview %{{.*}}[0, %[[I]], 0] [1, 64, 1024] [1, 1, 1]
// CHECK:           linalg.generic
// CHECK-SAME:        outs(%{{.*}} : memref<1x64x1024xbf16, strided<[524288, 1024, 1], offset: ?>>)
func.func @unit_batch(%x: memref<1x512x1024xbf16>, %y: memref<1x512x1024xbf16>) {
  linalg.generic {indexing_maps = [affine_map<(b, i, j) -> (b, i, j)>, affine_map<(b, i, j) -> (b, i, j)>],
                  iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x : memref<1x512x1024xbf16>) outs(%y : memref<1x512x1024xbf16>) {
  ^bb0(%a: bf16, %b: bf16):
    %r = arith.mulf %a, %a : bf16
    linalg.yield %r : bf16
  }
  return
}

// -----

// An outer reduction (a column sum): the split is along the parallel loop
// inside it; each tile sums its columns over every row.
// CHECK-LABEL: func.func @column_sum
// CHECK:         scf.parallel (%[[J:.*]]) =
// CHECK:           memref.subview %{{.*}}[0, %[[J]]] [1024, 128] [1, 1]
// CHECK:           linalg.generic {{.*}}iterator_types = ["reduction", "parallel"]
func.func @column_sum(%x: memref<1024x1024xf32>, %s: memref<1024xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>],
                  iterator_types = ["reduction", "parallel"]}
      ins(%x : memref<1024x1024xf32>) outs(%s : memref<1024xf32>) {
  ^bb0(%a: f32, %b: f32):
    %r = arith.addf %a, %b : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// A loop shorter than `chunks` gets one tile per iteration; linalg.index
// inside the body is offset by the tile's start.
// CHECK-LABEL: func.func @short_loop_with_index
// CHECK-DAG:     %[[C3:.*]] = arith.constant 3 : index
// CHECK-DAG:     %[[C1:.*]] = arith.constant 1 : index
// CHECK:         scf.parallel (%[[I:.*]]) = (%{{.*}}) to (%[[C3]]) step (%[[C1]])
// CHECK:           linalg.generic
// CHECK:             %[[IDX:.*]] = linalg.index 0 : index
// CHECK:             %[[G:.*]] = affine.apply affine_map<(d0)[s0] -> (d0 + s0)>(%[[I]])[%[[IDX]]]
// CHECK:             arith.index_cast %[[G]]
func.func @short_loop_with_index(%y: memref<3x65536xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
      outs(%y : memref<3x65536xf32>) {
  ^bb0(%b: f32):
    %i = linalg.index 0 : index
    %ii = arith.index_cast %i : index to i64
    %f = arith.sitofp %ii : i64 to f32
    linalg.yield %f : f32
  }
  return
}

// -----

// Left alone: too few iterations (a decode step), tensors, ops nested in
// loops (flex-to-flash's tiles).
// CHECK-LABEL: func.func @left_alone
// CHECK-NOT:     scf.parallel
// CHECK:         linalg.generic {{.*}}outs(%{{.*}} : memref<1x896xf32>)
// CHECK:         linalg.generic {{.*}}outs(%{{.*}} : tensor<512x1024xf32>)
// CHECK:         scf.for
// CHECK:           linalg.generic {{.*}}outs(%{{.*}} : memref<512x1024xf32>)
// CHECK-NOT:     scf.parallel
func.func @left_alone(%a: memref<1x896xf32>, %t: tensor<512x1024xf32>,
                      %m: memref<512x1024xf32>) -> tensor<512x1024xf32> {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
      outs(%a : memref<1x896xf32>) {
  ^bb0(%b: f32):
    %r = arith.addf %b, %b : f32
    linalg.yield %r : f32
  }
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
      outs(%t : tensor<512x1024xf32>) {
  ^bb0(%b: f32):
    %s = arith.addf %b, %b : f32
    linalg.yield %s : f32
  } -> tensor<512x1024xf32>
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %c2 step %c1 {
    linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
        outs(%m : memref<512x1024xf32>) {
    ^bb0(%b: f32):
      %s = arith.addf %b, %b : f32
      linalg.yield %s : f32
    }
  }
  return %r : tensor<512x1024xf32>
}

// -----

// Dynamic sizes (a graph Dynamo made dynamic): the total is known only at
// run time, so the split runs under scf.if when it reaches min-iterations
// and the op as it is otherwise. A dynamic outer loop is cut into tiles of
// ceil(size / 8) rows; a static one (the 64 rows of a [1, 1, 64, ?] mask)
// as in the static case.
// CHECK-LABEL: func.func @dynamic_rows
// CHECK-SAME:    (%[[D:[^:]+]]: memref<?x1024xf32>, %[[M:[^:]+]]: memref<1x1x64x?xf32>)
// CHECK:         %[[C0:.*]] = arith.constant 0 : index
// CHECK:         %[[ROWS:.*]] = memref.dim %[[D]], %[[C0]]
// CHECK:         %[[C1024:.*]] = arith.constant 1024 : index
// CHECK:         %[[TOTAL:.*]] = arith.muli %[[ROWS]], %[[C1024]] : index
// CHECK:         %[[MIN:.*]] = arith.constant 65536 : index
// CHECK:         %[[LARGE:.*]] = arith.cmpi sge, %[[TOTAL]], %[[MIN]] : index
// CHECK:         scf.if %[[LARGE]] {
// CHECK:           %[[C8:.*]] = arith.constant 8 : index
// CHECK:           %[[TILE:.*]] = arith.ceildivui %[[ROWS]], %[[C8]] : index
// CHECK:           scf.parallel (%[[I:.*]]) = (%[[C0]]) to (%[[ROWS]]) step (%[[TILE]])
// CHECK:             linalg.generic
// CHECK-SAME:          outs(%{{.*}} : memref<?x1024xf32, strided<[1024, 1], offset: ?>>)
// CHECK:         } else {
// CHECK-NOT:       scf.parallel
// CHECK:           linalg.generic {{.*}}outs(%[[D]] : memref<?x1024xf32>)
// CHECK:         }
// CHECK:         scf.if
// CHECK:           scf.parallel (%{{.*}}) = (%{{.*}}) to (%{{.*}}) step (%{{.*}})
// CHECK:             memref.subview %[[M]][0, 0, %{{.*}}, 0] [1, 1, 8, %{{.*}}] [1, 1, 1, 1]
// CHECK:         } else {
// CHECK:           linalg.generic {{.*}}outs(%[[M]] : memref<1x1x64x?xf32>)
// CHECK:         }
// CHECK:         return
// The bound is the option's (the split is there, taken at run time only
// above it):
// NONE-LABEL: func.func @dynamic_rows
// NONE:         %[[MIN:.*]] = arith.constant 1000000000 : index
// NONE:         %[[LARGE:.*]] = arith.cmpi sge, %{{.*}}, %[[MIN]] : index
// NONE:         scf.if %[[LARGE]]
func.func @dynamic_rows(%d: memref<?x1024xf32>, %m: memref<1x1x64x?xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
      outs(%d : memref<?x1024xf32>) {
  ^bb0(%b: f32):
    %r = arith.addf %b, %b : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [affine_map<(a, b, i, j) -> (a, b, i, j)>],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      outs(%m : memref<1x1x64x?xf32>) {
  ^bb0(%b: f32):
    %r = arith.mulf %b, %b : f32
    linalg.yield %r : f32
  }
  return
}
