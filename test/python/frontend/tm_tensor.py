# RUN: %PYTHON %s | FileCheck %s
#
# tm_tensor ops (frontend/tm_tensor/) become scf.for loops on tensors before
# the hand-off; histc is decomposed before import (importer/decompositions.py).
# Numerics: test/python/backend/test_tm_tensor_ops.py.

import torch_mlir_flex  # noqa: F401  (before torch_mlir)
import torch

from torch_mlir_flex.frontend import lower_to_linalg_with_flex_outlined
from torch_mlir_flex.importer import export_and_import


def show(name, fn, *args):
    model = torch.nn.Module()
    model.forward = fn
    print(lower_to_linalg_with_flex_outlined(export_and_import(model, *args, func_name=name)))


# cumsum along dim 1: a loop over the other dim carrying the tensors, an
# inner loop over dim 1 carrying the running sum in f64 (torch's CPU
# accumulation type for f32).
# CHECK-LABEL: func.func @cumsum(
# CHECK-SAME:      %[[X:.*]]: tensor<3x5xf32>) -> tensor<3x5xf32>
# CHECK-NOT:     tm_tensor
# CHECK:         scf.for %[[I:.*]] = %{{.*}} iter_args(%[[OUT:.*]] = %{{.*}}, %{{.*}} = %{{.*}}) -> (tensor<3x5xf32>, tensor<3xf32>)
# CHECK:           scf.for %[[J:.*]] = %{{.*}} iter_args(%[[O:.*]] = %[[OUT]], %{{.*}} = %{{.*}}, %[[PREV:.*]] = %{{.*}}) -> (tensor<3x5xf32>, tensor<3xf32>, f64)
# CHECK:             %[[E:.*]] = tensor.extract %[[X]][%[[I]], %[[J]]] : tensor<3x5xf32>
# CHECK:             %[[W:.*]] = arith.extf %[[E]] : f32 to f64
# CHECK:             %[[V:.*]] = scf.if %{{.*}} -> (f64) {
# CHECK:               scf.yield %[[W]] : f64
# CHECK:             } else {
# CHECK:               %[[S:.*]] = arith.addf %[[PREV]], %[[W]] : f64
# CHECK:               scf.yield %[[S]] : f64
# CHECK:             %[[N:.*]] = arith.truncf %[[V]] : f64 to f32
# CHECK:             tensor.insert %[[N]] into %[[O]][%[[I]], %[[J]]] : tensor<3x5xf32>
show("cumsum", lambda x: torch.cumsum(x, 1), torch.randn(3, 5))

# sort: the input is copied (never written in place), merge passes between
# it and a scratch tensor; NaN-aware strict order (descending: ogt, NaN first).
# CHECK-LABEL: func.func @sort_desc(
# CHECK-SAME:      %[[X:.*]]: tensor<4x6xf32>) -> (tensor<4x6xf32>, tensor<4x6xi64>)
# CHECK-NOT:     tm_tensor
# CHECK-DAG:     bufferization.alloc_tensor() copy(%[[X]]) : tensor<4x6xf32>
# CHECK-DAG:     bufferization.alloc_tensor() : tensor<4x6xf32>
# CHECK-DAG:     bufferization.alloc_tensor() : tensor<4x6xi64>
# CHECK:         scf.for
# CHECK:           arith.shli
# CHECK:           scf.for {{.*}} step
# CHECK:             scf.for
# CHECK:               %[[L:.*]] = tensor.extract {{.*}} : tensor<4x6xf32>
# CHECK:               %[[R:.*]] = tensor.extract {{.*}} : tensor<4x6xf32>
# CHECK:               arith.cmpf ogt, %[[R]], %[[L]] : f32
# CHECK:               arith.cmpf uno, %[[R]], %[[R]] : f32
# CHECK:               arith.cmpf ord, %[[L]], %[[L]] : f32
show("sort_desc", lambda x: torch.sort(x, dim=1, descending=True), torch.randn(4, 6))

# index_put with accumulate: the update combines with the current element;
# negative indices wrap, positions are checked, and an update whose check
# fails writes nothing outside (element 0 gets its own value back). The
# destination, a constant here, gets a private copy.
# CHECK-LABEL: func.func @index_put_acc(
# CHECK-NOT:     tm_tensor
# CHECK:         %[[D:.*]] = bufferization.alloc_tensor() copy(%{{.*}}) : tensor<5xf32>
# CHECK:         scf.for {{.*}} iter_args(%{{.*}} = %[[D]])
# CHECK:           %[[IDX:.*]] = arith.index_cast %{{.*}} : i64 to index
# CHECK:           %[[NEG:.*]] = arith.cmpi slt, %[[IDX]], %{{.*}} : index
# CHECK:           %[[W:.*]] = arith.select %[[NEG]]
# CHECK:           %[[OK:.*]] = arith.andi
# CHECK:           cf.assert %[[OK]], "index out of range in aten.index_put{{.*}}"
# CHECK:           %[[P:.*]] = arith.select %[[OK]], %[[W]], %c0 : index
# CHECK:           %[[C:.*]] = tensor.extract %{{.*}}[%[[P]]] : tensor<5xf32>
# CHECK:           %[[U:.*]] = tensor.extract %{{.*}} : tensor<4x1xf32>
# CHECK:           %[[A:.*]] = arith.addf %[[C]], %[[U]] : f32
# CHECK:           %[[V:.*]] = arith.select %[[OK]], %[[A]], %[[C]] : f32
# CHECK:           tensor.insert %[[V]] into %{{.*}}[%[[P]]] : tensor<5xf32>
show("index_put_acc", lambda v, i: torch.zeros(5).index_put((i,), v, accumulate=True),
     torch.randn(4), torch.tensor([0, 1, -1, 3]))

# A function argument as the destination (a KV cache updated in place): the
# loop starts from it; bufferization copies it unless the caller lets the
# function write it (backend/calling.py's in_place).
# CHECK-LABEL: func.func @index_put_argument(
# CHECK-SAME:    %[[ARG:[a-z0-9]+]]: tensor<6xf32>
# CHECK-NOT:     alloc_tensor
# CHECK:         scf.for {{.*}} iter_args(%{{.*}} = %[[ARG]])
show("index_put_argument", lambda buf, v, i: buf.index_put((i,), v), torch.zeros(6), torch.randn(2),
     torch.tensor([1, 4]))

# histc: decomposed (bin = trunc((x - min) * bins / (max - min)), last bin
# for max, out-of-range ignored), counted by an accumulating scatter.
# CHECK-LABEL: func.func @histc(
# CHECK-NOT:     torch.operator
# CHECK-NOT:     tm_tensor
# CHECK:         arith.fptosi
# CHECK:         scf.for
# CHECK:           arith.addf
show("histc", lambda x: torch.histc(x, bins=4, min=0, max=3), torch.randn(10))
