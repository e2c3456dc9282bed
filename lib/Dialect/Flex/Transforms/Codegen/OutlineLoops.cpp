//===- OutlineLoops.cpp - one function per top-level loop nest -----------===//
//
// flex-outline-loops: every top-level op with regions (loop nests, OpenMP
// parallel regions, conditionals) of a function body moves into a private
// function of its own, called in its place; structurally identical outlined
// functions are merged into one. See Passes.td for why (LLVM's O2 pipeline
// is superlinear in the loops of one function; a model's layers repeat the
// same loop nests).
//
//===----------------------------------------------------------------------===//
#include "torch-mlir-flex/Dialect/Flex/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::flex {
#define GEN_PASS_DEF_FLEXOUTLINELOOPS
#include "torch-mlir-flex/Dialect/Flex/Transforms/Passes.h.inc"
} // namespace mlir::flex

using namespace mlir;

namespace {

/// Ops without operands, regions or side effects and with one result
/// (constants, memref.get_global, poison): cloned into the outlined
/// function instead of passed, so that loop bounds and splats stay
/// constants there.
constexpr llvm::StringLiteral kOutlinedAttr = "flex.outlined";

bool isRematerializable(Operation *op) {
  return op && op->getNumOperands() == 0 && op->getNumRegions() == 0 &&
         op->getNumResults() == 1 && isMemoryEffectFree(op);
}

bool isOutlineCandidate(Operation &op) {
  return op.getNumRegions() > 0 && !op.hasTrait<OpTrait::SymbolTable>() &&
         !isa<SymbolOpInterface>(op) && !op.hasTrait<OpTrait::IsTerminator>();
}

size_t countTopLevelOps(func::FuncOp func) {
  size_t n = 0;
  for (Block &block : func.getBody())
    n += block.getOperations().size();
  return n;
}

/// Adds LLVM function attributes to `func`'s `passthrough` (kept by
/// convert-func-to-llvm).
void addPassthrough(func::FuncOp func, ArrayRef<StringRef> names) {
  SmallVector<Attribute> attrs;
  if (auto old = func->getAttrOfType<ArrayAttr>("passthrough"))
    attrs.append(old.begin(), old.end());
  Builder b(func.getContext());
  for (StringRef name : names)
    if (!llvm::is_contained(attrs, b.getStringAttr(name)))
      attrs.push_back(b.getStringAttr(name));
  func->setAttr("passthrough", b.getArrayAttr(attrs));
}

/// Moves `op` into a new private function inserted before `parent` and
/// replaces it by a call.
func::FuncOp outline(Operation *op, func::FuncOp parent, StringRef name,
                     SymbolTable &symbols) {
  // Values the op reads from above, in order of first use, once each.
  llvm::SetVector<Value> captured;
  for (Value v : op->getOperands())
    captured.insert(v);
  getUsedValuesDefinedAbove(op->getRegions(), captured);
  SmallVector<Value> args;
  SmallVector<Operation *> remat;
  for (Value v : captured) {
    Operation *def = v.getDefiningOp();
    if (isRematerializable(def))
      remat.push_back(def);
    else
      args.push_back(v);
  }

  OpBuilder b(parent);
  auto type = b.getFunctionType(ValueRange(args).getTypes(),
                                op->getResultTypes());
  auto func = func::FuncOp::create(b, op->getLoc(), name, type);
  func.setPrivate();
  // LLVM would inline a function called once right back.
  func->setAttr(kOutlinedAttr, b.getUnitAttr());
  // Internal: no JIT wrapper (`_mlir_<name>`) is generated for it.
  func->setAttr("llvm.linkage", LLVM::LinkageAttr::get(
                                    b.getContext(), LLVM::Linkage::Internal));
  symbols.insert(func);
  addPassthrough(func, {"noinline"});

  Block *body = func.addEntryBlock();
  IRMapping map;
  for (auto [v, arg] : llvm::zip(args, body->getArguments()))
    map.map(v, arg);
  b.setInsertionPointToStart(body);
  for (Operation *def : remat)
    b.clone(*def, map);
  Operation *moved = b.clone(*op, map);
  func::ReturnOp::create(b, op->getLoc(), moved->getResults());

  b.setInsertionPoint(op);
  auto call = func::CallOp::create(b, op->getLoc(), func, args);
  op->replaceAllUsesWith(call.getResults());
  op->erase();
  return func;
}

/// The printed form of `func` under a fixed name: equal for functions whose
/// bodies and types are identical.
std::string structuralKey(func::FuncOp func) {
  StringAttr name = func.getSymNameAttr();
  func.setSymName("__flex_outlined");
  std::string text;
  llvm::raw_string_ostream os(text);
  func->print(os, OpPrintingFlags().useLocalScope());
  func.setSymNameAttr(name);
  return text;
}

struct OutlineLoops
    : public mlir::flex::impl::FlexOutlineLoopsBase<OutlineLoops> {
  using FlexOutlineLoopsBase::FlexOutlineLoopsBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    SmallVector<func::FuncOp> parents;
    for (auto func : module.getOps<func::FuncOp>())
      if (!func.isExternal() && !func->hasAttr(kOutlinedAttr))
        parents.push_back(func);

    SmallVector<func::FuncOp> outlined;
    for (func::FuncOp parent : parents) {
      SmallVector<Operation *> candidates;
      for (Block &block : parent.getBody())
        for (Operation &op : block)
          if (isOutlineCandidate(op))
            candidates.push_back(&op);
      unsigned n = 0;
      for (Operation *op : candidates) {
        std::string name =
            (parent.getSymName() + "__loops" + Twine(n++)).str();
        outlined.push_back(outline(op, parent, name, symbols));
      }
    }

    for (func::FuncOp parent : parents)
      if (optnoneAbove > 0 && countTopLevelOps(parent) > optnoneAbove)
        addPassthrough(parent, {"noinline", "optnone"});

    // One function per distinct body: calls of a duplicate go to the first.
    llvm::StringMap<func::FuncOp> first;
    DenseMap<StringAttr, func::FuncOp> replacement;
    for (func::FuncOp func : outlined) {
      auto [it, inserted] = first.try_emplace(structuralKey(func), func);
      if (!inserted)
        replacement[func.getSymNameAttr()] = it->second;
    }
    if (replacement.empty())
      return;
    module.walk([&](func::CallOp call) {
      auto it = replacement.find(call.getCalleeAttr().getAttr());
      if (it != replacement.end())
        call.setCalleeAttr(FlatSymbolRefAttr::get(it->second.getSymNameAttr()));
    });
    for (func::FuncOp func : outlined)
      if (replacement.count(func.getSymNameAttr()))
        func.erase();
  }
};

} // namespace
