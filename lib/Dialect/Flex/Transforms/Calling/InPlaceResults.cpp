//===- InPlaceResults.cpp - results written into their argument ----------===//
//
// flex-in-place-results: after bufferization, a result marked
// `flex.in_place = k` is the new value of argument k. It is dropped from the
// function; when the returned buffer is not argument k itself, it is copied
// there before the return. See Passes.td.
//
//===----------------------------------------------------------------------===//
#include "torch-mlir-flex/Dialect/Flex/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/BitVector.h"

namespace mlir::flex {
#define GEN_PASS_DEF_FLEXINPLACERESULTS
#include "torch-mlir-flex/Dialect/Flex/Transforms/Passes.h.inc"
} // namespace mlir::flex

using namespace mlir;

namespace {

constexpr llvm::StringLiteral kInPlaceAttr = "flex.in_place";

/// `v` with the views that keep its buffer looked through: memref.cast and
/// the results of scf.for loops that yield their iteration argument.
Value underlyingBuffer(Value v) {
  while (true) {
    if (auto cast = v.getDefiningOp<memref::CastOp>()) {
      v = cast.getSource();
      continue;
    }
    auto loop = v.getDefiningOp<scf::ForOp>();
    if (!loop)
      return v;
    unsigned i = cast<OpResult>(v).getResultNumber();
    auto yield = cast<scf::YieldOp>(loop.getBody()->getTerminator());
    if (yield.getOperand(i) != loop.getRegionIterArg(i))
      return v;
    v = loop.getInitArgs()[i];
  }
}

/// The argument each marked result is written into (-1: not marked), or
/// failure with a diagnostic.
FailureOr<SmallVector<int64_t>> inPlaceTargets(func::FuncOp func) {
  SmallVector<int64_t> targets(func.getNumResults(), -1);
  for (unsigned i = 0, e = func.getNumResults(); i < e; ++i) {
    auto attr = func.getResultAttrOfType<IntegerAttr>(i, kInPlaceAttr);
    if (!attr)
      continue;
    int64_t k = attr.getInt();
    if (k < 0 || k >= func.getNumArguments())
      return func.emitError() << "result " << i << " is marked " << kInPlaceAttr
                              << " = " << k << ", but the function has "
                              << func.getNumArguments() << " arguments";
    if (func.getArgumentTypes()[k] != func.getResultTypes()[i])
      return func.emitError()
             << "result " << i << " (" << func.getResultTypes()[i]
             << ") is marked " << kInPlaceAttr << " = " << k
             << ", an argument of another type (" << func.getArgumentTypes()[k]
             << ")";
    targets[i] = k;
  }
  return targets;
}

LogicalResult rewrite(func::FuncOp func, ModuleOp module) {
  FailureOr<SmallVector<int64_t>> targets = inPlaceTargets(func);
  if (failed(targets))
    return failure();
  llvm::BitVector drop(func.getNumResults());
  for (auto [i, k] : llvm::enumerate(*targets))
    if (k >= 0)
      drop.set(i);
  if (drop.none())
    return success();
  if (!SymbolTable::symbolKnownUseEmpty(func, module))
    return func.emitError() << "has results marked " << kInPlaceAttr
                            << " but is called in the module";
  if (!isa<BaseMemRefType>(func.getResultTypes()[drop.find_first()]))
    return func.emitError() << "results marked " << kInPlaceAttr
                            << " must be memrefs (run after bufferization)";
  func.walk([&](func::ReturnOp ret) {
    OpBuilder b(ret);
    for (int i : drop.set_bits()) {
      Value arg = func.getArgument((*targets)[i]);
      Value value = ret.getOperand(i);
      if (underlyingBuffer(value) != arg)
        memref::CopyOp::create(b, ret.getLoc(), value, arg);
    }
    ret->eraseOperands(drop);
  });
  return func.eraseResults(drop);
}

struct InPlaceResultsPass
    : flex::impl::FlexInPlaceResultsBase<InPlaceResultsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    for (auto func : module.getOps<func::FuncOp>())
      if (!func.isExternal() && failed(rewrite(func, module)))
        return signalPassFailure();
  }
};

} // namespace
