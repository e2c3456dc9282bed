//===- FlashDriver.h - what the flash driver passes share -------*- C++ -*-===//
//
// flex-to-flash and flex-backward-to-flash lower their ops one by one the
// same way: leave what they cannot handle to flex-to-loops (with a remark),
// run a small op's loops on one thread, and turn the tanh of the lowered
// code into a rational approximation at the end.
//
//===----------------------------------------------------------------------===//
#ifndef TORCH_MLIR_FLEX_DIALECT_FLEX_TRANSFORMS_FLASHDRIVER_H
#define TORCH_MLIR_FLEX_DIALECT_FLEX_TRANSFORMS_FLASHDRIVER_H

#include "torch-mlir-flex/Dialect/Flex/Transforms/FlashLowering.h"

namespace mlir::flex {

/// The FlashConfig requested by the options both drivers have (tile-m,
/// tile-n, block-sparsity, dense-classify, fast-exp, vectorize).
FlashConfig requestedFlashConfig(int64_t tileM, int64_t tileN,
                                 bool blockSparsity, bool denseClassify,
                                 bool fastExp, bool vectorize);

/// Sets the kernel-selection options both drivers have on `requested`
/// (bf16-dot, amx, vector-bits); emits an error on `root` and fails when
/// vector-bits is not 256 or 512, or is 256 with bf16-dot or amx (those
/// kernels are AVX-512 / AMX instructions).
LogicalResult setKernelOptions(FlashConfig &requested, Operation *root,
                               StringRef pass, bool bf16Dot, bool amx,
                               int64_t vectorBits);

/// The driver loop of one pass run over the ops of `root`.
class FlashDriver {
public:
  /// `pass` names the pass in remarks; ops estimated below `serialBelowUs`
  /// microseconds (> 0) run on one thread; with `fastExp` tanh is
  /// approximated.
  FlashDriver(Operation *root, StringRef pass, int64_t serialBelowUs,
              bool fastExp)
      : root(root), pass(pass), serialBelowUs(serialBelowUs),
        fastExp(fastExp) {}

  /// False when `why` says `op` is left for flex-to-loops (with a remark
  /// when the op is on tensors, `tensors`).
  bool accepts(Operation *op, bool tensors,
               const std::optional<std::string> &why);

  /// Runs `lower` (which returns the forall the op became) on an op
  /// estimated to take `micros` on one thread: below serialBelowUs, every
  /// scf.forall it creates is marked flex.serial; with fastExp the
  /// math.tanh ops of its forall are kept for finish().
  LogicalResult lower(std::optional<double> micros,
                      function_ref<LogicalResult(scf::ForallOp &)> lower);

  /// The kept tanh ops (e.g. soft-capping score_mods) as a rational
  /// approximation in plain arithmetic, which LLVM vectorizes (tanhf is a
  /// scalar libcall).
  LogicalResult finish();

private:
  Operation *root;
  StringRef pass;
  int64_t serialBelowUs;
  bool fastExp;
  SmallVector<Operation *> tanhOps;
};

} // namespace mlir::flex

#endif
