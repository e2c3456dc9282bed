//===- LowerChecks.cpp - flex.check to status-buffer stores ---------------===//
//
// flex-lower-checks: numbers the check messages (module attribute
// `flex.check_messages`), gives every function with a body a last
// `memref<4xi64>` status argument (passed along by calls) and lowers each
// flex.check to a guarded store of its code and details. See Passes.td.
//
//===----------------------------------------------------------------------===//
#include "torch-mlir-flex/Dialect/Flex/IR/FlexOps.h"
#include "torch-mlir-flex/Dialect/Flex/Transforms/Passes.h"

#include "llvm/ADT/MapVector.h"

namespace mlir::flex {
#define GEN_PASS_DEF_FLEXLOWERCHECKS
#include "torch-mlir-flex/Dialect/Flex/Transforms/Passes.h.inc"
} // namespace mlir::flex

using namespace mlir;
using namespace mlir::flex;

namespace {

constexpr int64_t kStatusSlots = 4;

/// Appends the status argument to every function with a body; returns
/// function -> status value.
DenseMap<Operation *, Value> addStatusArguments(ModuleOp module) {
  auto statusType = MemRefType::get({kStatusSlots},
                                    IntegerType::get(module.getContext(), 64));
  DenseMap<Operation *, Value> status;
  for (auto func : module.getOps<func::FuncOp>()) {
    if (func.isExternal())
      continue;
    unsigned n = func.getNumArguments();
    if (failed(func.insertArgument(n, statusType, {}, func.getLoc())))
      continue;
    status[func] = func.getArgument(n);
  }
  return status;
}

/// Calls to functions that got a status argument pass the caller's.
LogicalResult forwardStatusToCalls(ModuleOp module,
                                   DenseMap<Operation *, Value> &status) {
  SymbolTable symbols(module);
  WalkResult r = module.walk([&](func::CallOp call) {
    auto callee = symbols.lookup<func::FuncOp>(call.getCallee());
    if (!callee || !status.count(callee))
      return WalkResult::advance();
    auto caller = call->getParentOfType<func::FuncOp>();
    if (!caller || !status.count(caller)) {
      call.emitOpError("calls a function with runtime checks from a "
                       "function without a status argument");
      return WalkResult::interrupt();
    }
    call.getOperandsMutable().append(status[caller]);
    return WalkResult::advance();
  });
  return failure(r.wasInterrupted());
}

/// if (!ok && status[0] == 0) { status = {code, details...} }
void lowerCheck(CheckOp check, int64_t code, Value status) {
  OpBuilder b(check);
  Location loc = check.getLoc();
  Value t = arith::ConstantIntOp::create(b, loc, 1, 1);
  Value bad = arith::XOrIOp::create(b, loc, check.getCondition(), t);
  auto outer = scf::IfOp::create(b, loc, bad, /*withElse=*/false);
  b.setInsertionPointToStart(outer.thenBlock());
  Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
  Value zero = arith::ConstantIntOp::create(b, loc, 0, 64);
  Value cur = memref::LoadOp::create(b, loc, status, c0);
  Value free =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, cur, zero);
  auto inner = scf::IfOp::create(b, loc, free, /*withElse=*/false);
  b.setInsertionPointToStart(inner.thenBlock());
  SmallVector<Value> slots{arith::ConstantIntOp::create(b, loc, code, 64)};
  for (int64_t i = 1; i < kStatusSlots; ++i)
    slots.push_back(size_t(i) <= check.getDetails().size()
                        ? check.getDetails()[i - 1]
                        : zero);
  for (auto [i, v] : llvm::enumerate(slots)) {
    Value slot = arith::ConstantIndexOp::create(b, loc, i);
    memref::StoreOp::create(b, loc, v, status, slot);
  }
  check.erase();
}

struct FlexLowerChecksPass
    : public flex::impl::FlexLowerChecksBase<FlexLowerChecksPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<CheckOp> checks;
    module.walk([&](CheckOp c) { checks.push_back(c); });
    if (checks.empty())
      return;
    for (CheckOp c : checks)
      if (!c->getParentOfType<func::FuncOp>()) {
        c.emitOpError("must be inside a func.func to be lowered");
        return signalPassFailure();
      }
    // Message table: code k <-> messages[k - 1].
    llvm::MapVector<StringRef, int64_t> codes;
    for (CheckOp c : checks)
      codes.insert({c.getMessage(), int64_t(codes.size()) + 1});
    Builder b(module.getContext());
    SmallVector<Attribute> messages;
    for (auto &[msg, code] : codes)
      messages.push_back(b.getStringAttr(msg));
    module->setAttr("flex.check_messages", b.getArrayAttr(messages));

    DenseMap<Operation *, Value> status = addStatusArguments(module);
    if (failed(forwardStatusToCalls(module, status)))
      return signalPassFailure();
    for (CheckOp c : checks) {
      auto func = c->getParentOfType<func::FuncOp>();
      lowerCheck(c, codes.lookup(c.getMessage()), status.lookup(func));
    }
  }
};

} // namespace
