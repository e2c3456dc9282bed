//===- FlexMaterialize.cpp - frontend flex calls to flex.attention --------===//
//
// Rewrites each `func.call @__flex_attention_N(q, k, v, buffers...,
// block tensors...)` emitted by torch_mlir_flex.frontend into a
// `flex.attention` op on tensors (block tensors -> kv_blocks /
// full_kv_blocks, `flex.block_sizes` -> block_sizes); each
// `@__flex_backward_N` call becomes a flex.attention_backward
// (FlexMaterializeBackward.cpp, sharing FlexMaterialize.h). The
// score_mod / mask_mod functions (linalg-on-tensors) are turned into scalar
// code inside the op's regions by ModifierScalarizer
// (FlexMaterializeScalarizer.cpp, FlexMaterializeLinalg.cpp). Anything that
// cannot be scalarized is reported on the call site; the pass never asserts
// on input.
//
//===----------------------------------------------------------------------===//
#include "FlexMaterialize.h"
#include "FlexMaterializeScalarizer.h"

#include "torch-mlir-flex/Dialect/Flex/IR/FlexDialect.h"
#include "torch-mlir-flex/Dialect/Flex/IR/FlexOps.h"
#include "torch-mlir-flex/Dialect/Flex/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"

#include <memory>

namespace mlir::flex {
#define GEN_PASS_DEF_FLEXMATERIALIZE
#include "torch-mlir-flex/Dialect/Flex/Transforms/Passes.h.inc"
} // namespace mlir::flex

using namespace mlir;
using namespace mlir::flex;
using namespace mlir::flex::materialize;


//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

/// True if `region` is the identity score_mod (yields its score argument) or
/// the no-op mask_mod (yields constant true).
static bool isIdentityModifier(Region &region, bool isScore) {
  Block &block = region.front();
  auto yield = dyn_cast<flex::YieldOp>(block.getTerminator());
  if (!yield || yield.getValues().size() != 1)
    return false;
  Value v = yield.getValues()[0];
  if (isScore)
    return v == block.getArgument(0);
  IntegerAttr attr;
  if (auto cst = v.getDefiningOp<arith::ConstantOp>())
    attr = dyn_cast<IntegerAttr>(cst.getValue());
  return attr && attr.getType().isInteger(1) && attr.getValue().isOne();
}

namespace {
struct FlexMaterializePass
    : public flex::impl::FlexMaterializeBase<FlexMaterializePass> {
  void runOnOperation() override;

  /// Rewrites one call; emits diagnostics and fails on malformed input.
  LogicalResult rewriteCall(func::CallOp call, func::FuncOp decl,
                            SymbolTable &symbols,
                            llvm::SetVector<Operation *> &deadDecls,
                            llvm::SetVector<Operation *> &deadMods);
};
} // namespace

static bool isFlexDeclaration(func::FuncOp fn) {
  // Quantized matmuls: flex-materialize-quant-matmul's.
  if (fn.getSymName().starts_with("__flex_quant_matmul_") ||
      fn->hasAttr("flex.quant.format"))
    return false;
  if (fn.getSymName().starts_with(kForwardPrefix) ||
      fn.getSymName().starts_with(kBackwardPrefix))
    return true;
  return llvm::any_of(fn->getDiscardableAttrs(), [](NamedAttribute a) {
    return a.getName().strref().starts_with("flex.");
  });
}

InFlightDiagnostic materialize::callError(func::CallOp call,
                                          func::FuncOp decl) {
  return call.emitError() << kPassName << ": @" << decl.getSymName() << ": ";
}


FailureOr<FlexDecl> materialize::readFlexDecl(func::CallOp call,
                                              func::FuncOp decl,
                                              SymbolTable &symbols) {
  auto err = [&]() { return callError(call, decl); };
  if (!decl.isExternal())
    return err() << "flex call target must be a declaration", failure();
  FlexDecl d;
  d.scale = decl->getAttrOfType<FloatAttr>("flex.scale");
  if (!d.scale)
    return err() << "missing or non-float 'flex.scale' attribute", failure();
  auto getCount = [&](StringRef name, int64_t &out) -> LogicalResult {
    Attribute a = decl->getAttr(name);
    if (!a)
      return success();
    auto i = dyn_cast<IntegerAttr>(a);
    if (!i || !i.getType().isInteger() || i.getValue().isNegative() ||
        i.getValue().getActiveBits() > 32)
      return err() << "'" << name << "' must be a non-negative integer",
             failure();
    out = i.getInt();
    return success();
  };
  if (failed(getCount("flex.num_score_buffers", d.numScore)) ||
      failed(getCount("flex.num_mask_buffers", d.numMask)) ||
      failed(getCount("flex.num_block_tensors", d.numBlock)))
    return failure();
  d.blockSizes = decl->getAttrOfType<DenseI64ArrayAttr>("flex.block_sizes");
  if (d.numBlock != 0 && d.numBlock != 2 && d.numBlock != 4)
    return err() << "'flex.num_block_tensors' must be 0, 2 or 4", failure();
  if (static_cast<bool>(d.blockSizes) != (d.numBlock != 0))
    return err() << "'flex.block_sizes' (array<i64: QBS, KVBS>) must be given "
                    "exactly when 'flex.num_block_tensors' is nonzero",
           failure();
  auto getFlag = [&](StringRef name, bool &out) -> LogicalResult {
    Attribute a = decl->getAttr(name);
    if (!a)
      return success();
    auto b = dyn_cast<BoolAttr>(a);
    if (!b)
      return err() << "'" << name << "' must be a bool", failure();
    out = b.getValue();
    return success();
  };
  if (failed(getFlag("flex.return_lse", d.returnLse)) ||
      failed(getFlag("flex.return_max_scores", d.returnMax)) ||
      failed(getFlag("flex.has_grad_lse", d.hasGradLse)))
    return failure();
  Attribute gqaAttr = decl->getAttr("flex.enable_gqa");
  if (gqaAttr && !isa<UnitAttr>(gqaAttr))
    return err() << "'flex.enable_gqa' must be a unit attribute", failure();
  d.enableGqa = static_cast<bool>(gqaAttr);
  auto lookupModifier = [&](StringRef attrName,
                            func::FuncOp &out) -> LogicalResult {
    Attribute a = decl->getAttr(attrName);
    if (!a)
      return success();
    auto ref = dyn_cast<FlatSymbolRefAttr>(a);
    if (!ref)
      return err() << "'" << attrName << "' must be a flat symbol reference",
             failure();
    out = symbols.lookup<func::FuncOp>(ref.getValue());
    if (!out)
      return err() << "'" << attrName << "' refers to @" << ref.getValue()
                   << ", which is not a func.func in this module",
             failure();
    return success();
  };
  if (failed(lookupModifier("flex.score_mod", d.scoreFn)) ||
      failed(lookupModifier("flex.mask_mod", d.maskFn)) ||
      failed(lookupModifier("flex.joint", d.jointFn)))
    return failure();
  if (Attribute a = decl->getAttr("flex.grad_captures")) {
    d.gradCaptures = dyn_cast<DenseI64ArrayAttr>(a);
    if (!d.gradCaptures)
      return err() << "'flex.grad_captures' must be an array<i64: ...> of "
                      "score buffer indices",
             failure();
  }
  return d;
}

static RankedTensorType rankedOf(Value v, int64_t rank) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t && t.getRank() == rank ? t : RankedTensorType();
}

/// Checks the call's operands (q, k, v, buffers, block tensors) and results
/// against the declaration.
static LogicalResult checkCallOperands(func::CallOp call, func::FuncOp decl,
                                       const FlexDecl &d) {
  auto err = [&]() { return callError(call, decl); };
  int64_t expectedOperands = 3 + d.numScore + d.numMask + d.numBlock;
  if (static_cast<int64_t>(call.getNumOperands()) != expectedOperands) {
    InFlightDiagnostic diag = err() << "expected " << expectedOperands
                                    << " operands (q, k, v, " << d.numScore
                                    << " score buffer(s), " << d.numMask
                                    << " mask buffer(s)";
    if (d.numBlock)
      diag << ", " << d.numBlock << " block tensor(s)";
    return diag << "), got " << call.getNumOperands(), failure();
  }
  if (call.getNumResults() != 3)
    return err() << "expected 3 results (output, logsumexp, max_scores), got "
                 << call.getNumResults(),
           failure();
  Value q = call.getOperand(0), k = call.getOperand(1), v = call.getOperand(2);
  if (failed(checkQueryKeyValue(call, decl, q, k, v)))
    return failure();
  static constexpr int64_t kResultRanks[] = {4, 3, 3};
  for (auto [i, rank] : llvm::enumerate(kResultRanks))
    if (!rankedOf(call.getResult(i), rank))
      return err() << "result #" << i << " must be a rank-" << rank
                   << " ranked tensor, got " << call.getResult(i).getType(),
             failure();
  return checkBuffers(call, decl, d, q, k, call.getOperands().drop_front(3));
}

LogicalResult materialize::checkQueryKeyValue(func::CallOp call,
                                              func::FuncOp decl, Value q,
                                              Value k, Value v) {
  auto err = [&]() { return callError(call, decl); };
  for (auto [val, name] : {std::pair<Value, StringRef>(q, "query"),
                           {k, "key"}, {v, "value"}})
    if (!rankedOf(val, 4))
      return err() << name << " must be a rank-4 ranked tensor, got "
                   << val.getType(),
             failure();
  // Checked before the modifiers: with f64 inputs the score_mod signature
  // would be the first (and misleading) complaint.
  Type elt = rankedOf(q, 4).getElementType();
  if (!(elt.isF32() || elt.isF16() || elt.isBF16()))
    return err() << "unsupported query element type " << elt
                 << "; flex.attention supports f32, f16 and bf16 inputs",
           failure();
  return success();
}

LogicalResult materialize::checkBuffers(func::CallOp call, func::FuncOp decl,
                                        const FlexDecl &d, Value q, Value k,
                                        ValueRange buffersAndBlocks) {
  auto err = [&]() { return callError(call, decl); };
  for (Value buf : buffersAndBlocks)
    if (!isa<RankedTensorType>(buf.getType()))
      return err() << "captured buffers and block tensors must be ranked "
                      "tensors, got "
                   << buf.getType(),
             failure();
  if (!d.scoreFn && d.numScore != 0)
    return err() << "score buffers given without 'flex.score_mod'",
           failure();
  if (!d.maskFn && d.numMask != 0)
    return err() << "mask buffers given without 'flex.mask_mod'", failure();
  // GQA: the op derives the group size from static head counts.
  int64_t hq = rankedOf(q, 4).getDimSize(1), hkv = rankedOf(k, 4).getDimSize(1);
  bool staticHeads = !ShapedType::isDynamic(hq) && !ShapedType::isDynamic(hkv);
  if (staticHeads && hq != hkv && !d.enableGqa)
    return err() << "query heads (" << hq << ") differ from key/value heads ("
                 << hkv << ") but 'flex.enable_gqa' is not set",
           failure();
  if (d.enableGqa && !staticHeads)
    return err() << "'flex.enable_gqa' needs static head counts to derive "
                    "the group size",
           failure();
  return success();
}

Value materialize::makeEmpty(OpBuilder &b, Location loc, RankedTensorType t,
                             ArrayRef<std::pair<Value, int64_t>> dimSrc) {
  SmallVector<Value> dyn;
  for (auto [d, src] : llvm::enumerate(dimSrc))
    if (t.isDynamicDim(d))
      dyn.push_back(tensor::DimOp::create(b, loc, src.first, src.second));
  return tensor::EmptyOp::create(b, loc, t.getShape(), t.getElementType(),
                                 dyn);
}

void ModifierRegions::discard() {
  score.reset();
  mask.reset();
  SmallVector<Operation *> worklist;
  for (Value c : constCaptures)
    worklist.push_back(c.getDefiningOp());
  constCaptures.clear();
  while (!worklist.empty()) {
    Operation *op = worklist.pop_back_val();
    if (!isOpTriviallyDead(op))
      continue;
    for (Value operand : op->getOperands())
      if (Operation *def = operand.getDefiningOp())
        worklist.push_back(def);
    op->erase();
  }
}

void ModifierRegions::attach(const FlexDecl &d, Region &scoreDst,
                             Region &maskDst) {
  if (d.scoreFn && !isIdentityModifier(*score, /*isScore=*/true)) {
    foldIndexRoundTrips(*score);
    scoreDst.takeBody(*score);
  }
  if (d.maskFn && !isIdentityModifier(*mask, /*isScore=*/false)) {
    foldIndexRoundTrips(*mask);
    maskDst.takeBody(*mask);
  }
}

LogicalResult materialize::buildModifierRegions(func::CallOp call,
                                                const FlexDecl &d,
                                                ValueRange scoreBufs,
                                                ValueRange maskBufs,
                                                ModifierRegions &r) {
  r.captures.assign(scoreBufs.begin(), scoreBufs.end());
  r.captures.append(maskBufs.begin(), maskBufs.end());
  ValueRange scoreCaps = ValueRange(r.captures).take_front(scoreBufs.size());
  ValueRange maskCaps = ValueRange(r.captures).drop_front(scoreBufs.size());
  if ((d.scoreFn &&
       failed(ModifierScalarizer(call, "score_mod", d.scoreFn, r.constCaptures)
                  .run(*r.score, scoreBufs, scoreCaps))) ||
      (d.maskFn &&
       failed(ModifierScalarizer(call, "mask_mod", d.maskFn, r.constCaptures)
                  .run(*r.mask, maskBufs, maskCaps)))) {
    r.discard();
    return failure();
  }
  return success();
}

LogicalResult
FlexMaterializePass::rewriteCall(func::CallOp call, func::FuncOp decl,
                                 SymbolTable &symbols,
                                 llvm::SetVector<Operation *> &deadDecls,
                                 llvm::SetVector<Operation *> &deadMods) {
  FailureOr<FlexDecl> parsed = readFlexDecl(call, decl, symbols);
  if (failed(parsed) || failed(checkCallOperands(call, decl, *parsed)))
    return failure();
  const FlexDecl &d = *parsed;
  Value q = call.getOperand(0), k = call.getOperand(1), v = call.getOperand(2);
  ValueRange blockTensors = call.getOperands().take_back(d.numBlock);
  ValueRange buffers = call.getOperands().drop_front(3).drop_back(d.numBlock);
  ValueRange scoreBufs = buffers.take_front(d.numScore);
  ValueRange maskBufs = buffers.drop_front(d.numScore);
  func::FuncOp scoreFn = d.scoreFn, maskFn = d.maskFn;

  ModifierRegions regions;
  if (failed(buildModifierRegions(call, d, scoreBufs, maskBufs, regions)))
    return failure();
  regions.finalizeCaptures();

  // Inits.
  OpBuilder b(call);
  Location loc = call.getLoc();
  auto makeInit = [&](RankedTensorType t,
                      ArrayRef<std::pair<Value, int64_t>> dimSrc) -> Value {
    return makeEmpty(b, loc, t, dimSrc);
  };
  SmallVector<std::pair<Value, int64_t>> outDims = {
      {q, 0}, {q, 1}, {q, 2}, {v, 3}};
  SmallVector<std::pair<Value, int64_t>> rowDims = {{q, 0}, {q, 1}, {q, 2}};
  bool wantLse = d.returnLse || !call.getResult(1).use_empty();
  bool wantMax = d.returnMax || !call.getResult(2).use_empty();
  Value outInit =
      makeInit(cast<RankedTensorType>(call.getResult(0).getType()), outDims);
  Value lseInit =
      wantLse ? makeInit(cast<RankedTensorType>(call.getResult(1).getType()),
                         rowDims)
              : Value();
  Value maxInit =
      wantMax ? makeInit(cast<RankedTensorType>(call.getResult(2).getType()),
                         rowDims)
              : Value();
  SmallVector<Type> resultTypes = {call.getResult(0).getType()};
  if (wantLse)
    resultTypes.push_back(call.getResult(1).getType());
  if (wantMax)
    resultTypes.push_back(call.getResult(2).getType());

  auto blockAt = [&](int64_t i) {
    return i < d.numBlock ? blockTensors[i] : Value();
  };
  auto op = AttentionOp::create(
      b, loc, resultTypes, q, k, v, regions.captures, ValueRange(), blockAt(0),
      blockAt(1), blockAt(2), blockAt(3), outInit, lseInit, maxInit,
      b.getF32FloatAttr(static_cast<float>(d.scale.getValueAsDouble())),
      IntegerAttr(), d.blockSizes);
  regions.attach(d, op.getScoreMod(), op.getMaskMod());

  if (failed(mlir::verify(op))) {
    op.erase();
    for (Value init : {maxInit, lseInit, outInit})
      if (init && init.use_empty())
        init.getDefiningOp()->erase();
    regions.discard();
    return callError(call, decl)
               << "the materialized flex.attention does not verify",
           failure();
  }

  unsigned next = 1;
  call.getResult(0).replaceAllUsesWith(op.getResult(0));
  if (wantLse)
    call.getResult(1).replaceAllUsesWith(op.getResult(next++));
  if (wantMax)
    call.getResult(2).replaceAllUsesWith(op.getResult(next++));
  call.erase();

  deadDecls.insert(decl);
  if (scoreFn)
    deadMods.insert(scoreFn);
  if (maskFn)
    deadMods.insert(maskFn);
  return success();
}

void FlexMaterializePass::runOnOperation() {
  ModuleOp module = getOperation();
  SymbolTable symbols(module);
  SmallVector<std::pair<func::CallOp, func::FuncOp>> calls;
  module.walk([&](func::CallOp call) {
    auto callee = symbols.lookup<func::FuncOp>(call.getCallee());
    if (callee && isFlexDeclaration(callee))
      calls.emplace_back(call, callee);
  });

  bool failedAny = false;
  llvm::SetVector<Operation *> deadDecls, deadMods;
  for (auto [call, decl] : calls) {
    bool backward = decl.getSymName().starts_with(kBackwardPrefix);
    if (failed(backward ? rewriteBackwardCall(call, decl, symbols, deadDecls,
                                              deadMods)
                        : rewriteCall(call, decl, symbols, deadDecls,
                                      deadMods)))
      failedAny = true;
  }
  if (failedAny)
    return signalPassFailure();

  // Declarations first (they reference the modifiers), then the modifiers.
  for (auto *set : {&deadDecls, &deadMods})
    for (Operation *fn : *set)
      if (SymbolTable::symbolKnownUseEmpty(fn, module))
        symbols.erase(fn);
}
