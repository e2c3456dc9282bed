//===- FreeAfterLastUse.cpp - free temporaries after their last use -------===//
//
// flex-free-after-last-use (Passes.td): ownership-based deallocation puts a
// block's memref.dealloc ops before its terminator; here each dealloc of a
// memref.alloc of the same block moves up to just after the last operation
// of the block that uses the buffer or a value derived from it.
//
//===----------------------------------------------------------------------===//
#include "torch-mlir-flex/Dialect/Flex/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::flex {
#define GEN_PASS_DEF_FLEXFREEAFTERLASTUSE
#include "torch-mlir-flex/Dialect/Flex/Transforms/Passes.h.inc"
} // namespace mlir::flex

using namespace mlir;

namespace {

/// True when `user` writes `v` itself (not to `v`) into memory: the
/// buffer's address would then be read back from there.
bool storesValue(Operation *user, Value v) {
  if (auto st = dyn_cast<memref::StoreOp>(user))
    return st.getValueToStore() == v;
  if (auto st = dyn_cast<LLVM::StoreOp>(user))
    return st.getValue() == v;
  return false;
}

/// The last operation of `block` that uses `buffer` or a value derived from
/// it (other than `dealloc`), null when nothing uses it; failure when a
/// derived value escapes (returned, yielded out of the block, stored to
/// memory).
FailureOr<Operation *> lastUse(Block &block, Value buffer, Operation *dealloc) {
  llvm::SetVector<Value> derived;
  derived.insert(buffer);
  Operation *last = nullptr;
  for (unsigned i = 0; i < derived.size(); ++i) {
    Value v = derived[i];
    for (OpOperand &use : v.getUses()) {
      Operation *user = use.getOwner();
      if (user == dealloc)
        continue;
      if (storesValue(user, v))
        return failure();
      Operation *anc = block.findAncestorOpInBlock(*user);
      if (!anc || anc == block.getTerminator())
        return failure();
      // Results of the user and of every op between it and the block.
      for (Operation *op = user; op; op = op->getParentOp()) {
        for (Value r : op->getResults())
          derived.insert(r);
        if (op == anc)
          break;
      }
      if (!last || last->isBeforeInBlock(anc))
        last = anc;
    }
  }
  return last;
}

struct FreeAfterLastUse
    : public flex::impl::FlexFreeAfterLastUseBase<FreeAfterLastUse> {
  void runOnOperation() override {
    SmallVector<memref::DeallocOp> deallocs;
    getOperation().walk([&](memref::DeallocOp d) { deallocs.push_back(d); });
    for (memref::DeallocOp d : deallocs) {
      auto alloc = d.getMemref().getDefiningOp<memref::AllocOp>();
      Block *block = d->getBlock();
      if (!alloc || alloc->getBlock() != block)
        continue;
      FailureOr<Operation *> last = lastUse(*block, alloc.getResult(), d);
      if (failed(last))
        continue;
      // Never used: freed right after its allocation.
      Operation *after = *last ? *last : alloc.getOperation();
      if (after->isBeforeInBlock(d))
        d->moveAfter(after);
    }
  }
};

} // namespace
