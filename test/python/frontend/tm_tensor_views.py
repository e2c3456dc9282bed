# RUN: %PYTHON %s | FileCheck %s
#
# Updates of a view of a function argument (a KV cache written through
# `cache.view(...)[rows]`, `cache[:, p]`): the scatter loops start from the
# view itself, a slice or reshape of the argument, with no private copy
# (frontend/tm_tensor/scatter.py), and select_scatter is one row's
# insert_slice (importer/decompositions.py), not a `where` over the whole
# tensor. Bufferization then writes the argument's buffer where it stands
# when the caller lets the function write it (backend/calling.py's in_place);
# test/python/backend/test_in_place_views.py checks the bufferized IR and
# the numerics.

import torch_mlir_flex  # noqa: F401  (before torch_mlir)
import torch

from torch_mlir_flex.frontend import lower_to_linalg_with_flex_outlined
from torch_mlir_flex.importer import export_and_import


def show(name, fn, *args):
    model = torch.nn.Module()
    model.forward = fn
    print(lower_to_linalg_with_flex_outlined(export_and_import(model, *args, func_name=name)))


# A slice of a reshape of the argument: the loops carry the slice.
# CHECK-LABEL: func.func @index_put_slice_of_reshape(
# CHECK-SAME:    %[[ARG:[a-z0-9]+]]: tensor<4x8xf32>
# CHECK:         %[[C:.*]] = tensor.collapse_shape %[[ARG]]
# CHECK:         %[[E:.*]] = tensor.expand_shape %[[C]]
# CHECK:         %[[S:.*]] = tensor.extract_slice %[[E]][2, 0] [4, 4] [1, 1]
# CHECK-NOT:     alloc_tensor
# CHECK:         scf.for {{.*}} iter_args(%{{.*}} = %[[S]]) -> (tensor<4x4xf32>)
# CHECK-NOT:     alloc_tensor
# CHECK:         return
show("index_put_slice_of_reshape",
     lambda buf, v, i: buf.view(8, 4)[2:6].index_put((i,), v),
     torch.zeros(4, 8), torch.randn(2, 4), torch.tensor([1, 3]))

# A reshape of the argument (the last dimension split): the loops carry it.
# CHECK-LABEL: func.func @index_put_reshaped(
# CHECK-SAME:    %[[ARG:[a-z0-9]+]]: tensor<4x8xf32>
# CHECK:         %[[E:.*]] = tensor.expand_shape %[[ARG]] {{\[}}[0], [1, 2]]
# CHECK-NOT:     alloc_tensor
# CHECK:         scf.for {{.*}} iter_args(%{{.*}} = %[[E]]) -> (tensor<4x2x4xf32>)
# CHECK-NOT:     alloc_tensor
# CHECK:         return
show("index_put_reshaped",
     lambda buf, v, i: buf.view(4, 2, 4).index_put((i,), v),
     torch.zeros(4, 8), torch.randn(2, 2, 4), torch.tensor([1, 3]))

# select_scatter at -2 of dimension 1: one column inserted at 6, no
# elementwise pass over the argument.
# CHECK-LABEL: func.func @select_scatter_negative(
# CHECK-SAME:    %[[ARG:[a-z0-9]+]]: tensor<4x8xf32>
# CHECK-NOT:     linalg.generic
# CHECK:         %[[R:.*]] = tensor.insert_slice %{{.*}} into %[[ARG]][0, 6] [4, 1] [1, 1] : tensor<4x1xf32> into tensor<4x8xf32>
# CHECK-NOT:     linalg.generic
# CHECK:         return %[[R]]
show("select_scatter_negative",
     lambda buf, v: torch.select_scatter(buf, v, 1, -2),
     torch.zeros(4, 8), torch.randn(4))

# K then V written through one view (transformers' paged cache update): the
# second scatter starts from the first one's loops, no copy in between.
# CHECK-LABEL: func.func @two_writes_one_view(
# CHECK-SAME:    %[[ARG:[a-z0-9]+]]: tensor<4x2x3xf32>
# CHECK:         %[[V:.*]] = tensor.collapse_shape %[[ARG]]
# CHECK-NOT:     alloc_tensor
# CHECK:         %[[K:.*]] = scf.for {{.*}} iter_args(%{{.*}} = %[[V]]) -> (tensor<8x3xf32>)
# CHECK-NOT:     alloc_tensor
# CHECK:         scf.for {{.*}} iter_args(%{{.*}} = %[[K]]) -> (tensor<8x3xf32>)
# CHECK-NOT:     alloc_tensor
# CHECK:         return
show("two_writes_one_view",
     lambda buf, k, v, i: buf.flatten(0, 1).index_put((i,), k).index_put((i + 4,), v),
     torch.zeros(4, 2, 3), torch.randn(2, 3), torch.randn(2, 3), torch.tensor([0, 2]))
