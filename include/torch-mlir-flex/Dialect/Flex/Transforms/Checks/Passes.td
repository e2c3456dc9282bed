//===- Checks/Passes.td - run-time checks of shapes and indices ---*- tablegen -*-===//
//
// Passes of lib/Dialect/Flex/Transforms/Checks/ (tests: test/Dialect/Flex/Checks/).
//
//===----------------------------------------------------------------------===//
#ifndef TORCH_MLIR_FLEX_DIALECT_FLEX_TRANSFORMS_CHECKS_PASSES
#define TORCH_MLIR_FLEX_DIALECT_FLEX_TRANSFORMS_CHECKS_PASSES

include "mlir/Pass/PassBase.td"

def FlexInsertChecks : Pass<"flex-insert-checks", "ModuleOp"> {
  let summary = "Guard data-dependent tensor reads and turn cf.assert into flex.check";
  let description = [{
    Runs on tensors, before any lowering. Every `tensor.extract` inside a
    flex.attention or flex.attention_backward region (reads of captured
    tensors by score_mod / mask_mod / joint) or a linalg.generic body (torch-mlir's gathers: index,
    index_select, embedding) whose index is not provably in range gets,
    per such index:

    - a `flex.check` of `0 <= i < size` with the message
      "index {0} is out of bounds for dimension {1} with size {2}" followed
      by where: the modifier and the captured tensor (`captured tensor #k`,
      plus `input #j of @f` when it is a function argument), or the gather's
      source tensor type and function;
    - an in-range read: the index is replaced by `ok ? i : 0`; when a dim of
      the tensor is 0 the read is replaced by a zero, and when a dim is
      dynamic the read is done under `scf.if` (never from an empty buffer).

    torch-mlir already wraps negative indices of aten.index.Tensor
    (`x < 0 ? x + size : x`); for that pattern the check is
    `-size <= x < size` and the message reports `x` (as eager does), and
    nothing is wrapped twice. Other reads (embedding) are not wrapped, as
    in eager. An index is provably in range when interval arithmetic over
    constants, the region's (b, h, q_idx, kv_idx) and linalg.index bounds
    it by the static size.

    Each `cf.assert %c, "msg"` becomes `flex.check %c, "msg (runtime
    assert in @f)"` (braces escaped). The checks are placed right after their index is computed,
    so a guard precedes torch-mlir's own asserts on the same index.

    A flex.attention (or flex.attention_backward) with block tensors gets,
    in front of it, a loop over
    `kv_num_blocks` (and `full_kv_num_blocks`) checking every count is in
    `[0, NB]` ("kv_num_blocks value {0} at query block {1} is out of
    range ..."; the lowering clamps such counts), and for dynamic
    extents the verifier's shape rules (batch/head extent 1 or equal,
    `MB * QBS >= M`).

    ```mlir
    %e = tensor.extract %tab[%i] : tensor<8xf32>      // in score_mod
    ==>
    %ok = ... 0 <= %i < 8 ...
    flex.check %ok, "index {0} is out of bounds for dimension {1} with size {2} in score_mod, reading captured tensor #0" details(%i64, %c0_i64, %c8_i64)
    %j = arith.select %ok, %i, %c0 : index
    %e = tensor.extract %tab[%j] : tensor<8xf32>
    ```
  }];
  let dependentDialects = ["::mlir::flex::FlexDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::tensor::TensorDialect"];
}

def FlexLowerChecks : Pass<"flex-lower-checks", "ModuleOp"> {
  let summary = "Lower flex.check to stores into a status buffer argument";
  let description = [{
    Runs on memrefs, after everything is loops (before convert-scf-to-cf).
    Status contract with the caller (the JIT), only when the module has at
    least one flex.check (otherwise nothing changes):

    - the module gets `flex.check_messages`, an ArrayAttr of StringAttr
      (deduplicated templates); code k > 0 means messages[k - 1];
    - every func.func with a body gets one extra last argument
      `memref<4xi64>` (the status; zero-initialized by the caller); calls
      to such functions pass the caller's status along;
    - a failed check stores, if status[0] is still 0 (first failure wins,
      races between threads pick any), status[0] = k and status[1..3] = its
      details (0 for missing ones). Execution goes on.

    ```mlir
    flex.check %ok, "index {0} ..." details(%i, %d, %n)
    ==>
    %bad = arith.xori %ok, %true : i1
    scf.if %bad {
      %s = memref.load %status[%c0] : memref<4xi64>
      %free = arith.cmpi eq, %s, %c0_i64 : i64
      scf.if %free {
        memref.store %ck, %status[%c0] ...; memref.store %i, %status[%c1] ...
      }
    }
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::scf::SCFDialect"];
}

#endif // TORCH_MLIR_FLEX_DIALECT_FLEX_TRANSFORMS_CHECKS_PASSES
