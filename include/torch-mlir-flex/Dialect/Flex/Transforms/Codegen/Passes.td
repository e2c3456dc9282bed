//===- Codegen/Passes.td - code-generation helpers before LLVM: outlining, AMX tiles ---*- tablegen -*-===//
//
// Passes of lib/Dialect/Flex/Transforms/Codegen/ (tests: test/Dialect/Flex/Codegen/).
//
//===----------------------------------------------------------------------===//
#ifndef TORCH_MLIR_FLEX_DIALECT_FLEX_TRANSFORMS_CODEGEN_PASSES
#define TORCH_MLIR_FLEX_DIALECT_FLEX_TRANSFORMS_CODEGEN_PASSES

include "mlir/Pass/PassBase.td"

def FlexOutlineLoops : Pass<"flex-outline-loops", "ModuleOp"> {
  let summary = "Move each top-level loop nest of a function into a private "
                "function; merge identical ones";
  let description = [{
    Every op with regions at the top level of a function body (scf.for,
    scf.parallel, scf.if, omp.parallel, memref.alloca_scope, ...) moves into
    a new private function marked `flex.outlined`, LLVM's `noinline`
    (`passthrough`, kept by convert-func-to-llvm) and internal linkage
    (`llvm.linkage`: the JIT generates no `_mlir_<name>` wrapper), called
    where the op stood. The values it reads from above become arguments,
    except operand-free side-effect-free ops with one result (arith.constant,
    memref.get_global), which are cloned into the new function so that loop
    bounds stay constants. Outlined functions whose bodies and types print
    identically are merged: every call goes to the first.

    Why: a whole model lowers to one entry function with a loop nest per
    elementwise op, norm and attention tile loop; LLVM's O2 pipeline
    (IndVarSimplify above all) takes time quadratic in the loops of one
    function (Qwen2-0.5B's shape: 3 s of JIT for 4 layers, 80 s for 24).
    Per-function passes over small functions are linear, and the layers of
    a model, whose weights are arguments, repeat the same loop nests: after
    merging, the JIT compiles one layer's loops.

    ```mlir
    func.func @main(%a: memref<8xf32>, %o: memref<8xf32>) {
      %c0 = arith.constant 0 : index
      ...
      scf.for %i = %c0 to %c8 step %c1 { ... %a ... %o ... }
      scf.for %i = %c0 to %c8 step %c1 { ... %o ... %o ... }
      return
    }
    // becomes
    func.func private @main__loops0(%a: memref<8xf32>, %o: memref<8xf32>)
        attributes {flex.outlined, passthrough = ["noinline"]} {
      %c0 = arith.constant 0 : index
      ...
      scf.for %i = %c0 to %c8 step %c1 { ... }
      return
    }
    func.func @main(%a: memref<8xf32>, %o: memref<8xf32>) {
      call @main__loops0(%a, %o) : (memref<8xf32>, memref<8xf32>) -> ()
      call @main__loops1(%o) : (memref<8xf32>) -> ()
      return
    }
    ```
    Functions already marked `flex.outlined` are not outlined again.

    What stays in a function is straight-line glue (allocations, calls,
    descriptor arithmetic): one basic block, whose SelectionDAG instruction
    selection is superlinear too (5.3 s of 5.7 for the 24-layer model's
    entry). A function left with more than `optnone-above` top-level ops
    (0: never) gets LLVM's `optnone` (FastISel, no IR optimization: 0.9 s
    there), as glue gains little from optimization.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
  let options = [
    Option<"optnoneAbove", "optnone-above", "unsigned", /*default=*/"2000",
           "Mark functions left with more top-level ops than this optnone "
           "(0: never)">
  ];
}

def FlexAmxContractions : Pass<"flex-amx-contractions", "func::FuncOp"> {
  let summary = "Bufferized bf16 tile contractions marked flex.amx -> AMX tiles";
  let description = [{
    flex-to-flash's and flex-backward-to-flash's `amx` mark their tile
    contractions (unit attribute `flex.amx` on a linalg.generic over
    (m, k, n) with lhs
    `[M, K]` bf16 at (m, k), rhs the pair-packed `[K/2, 2 N]` bf16 at
    (k floordiv 2, 2 n + k mod 2), dest `[M, N]` f32 at (m, n), body
    dest += f32(lhs) * f32(rhs)). After bufferization each becomes AMX
    tile loops: per 16 x 16 tile of dest, amx.tile_load of it, K / 32
    tile_mulf (tdpbf16ps) of 16 x 32 lhs and rhs tiles, tile_store
    (lowered by convert-vector-to-llvm{enable-amx}; needs a CPU with
    amx_bf16 and, on Linux, the process's permission for AMX tile data,
    which the Python backend requests). M and N must be multiples of 16,
    K of 32, innermost strides 1; a marked op that does not fit is an
    error. Unmarked ops are left alone.
  }];
  let dependentDialects = ["::mlir::amx::AMXDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::arith::ArithDialect"];
}

#endif // TORCH_MLIR_FLEX_DIALECT_FLEX_TRANSFORMS_CODEGEN_PASSES
