//===- FlexMaterializeBackward.cpp - backward flex calls ------------------===//
//
// flex-materialize for the backward: rewrites each
// `func.call @__flex_backward_N(q, k, v, out, lse, grad_out, [grad_lse],
// score buffers..., mask buffers..., block tensors...)` into a
// flex.attention_backward on zero-filled gradient inits. The score_mod /
// mask_mod functions and the captures are handled as for the forward
// (FlexMaterialize.h); the `flex.joint` function (linalg-on-tensors on 0-d
// tensors returning the score gradient, then per capture gradient a value
// and its integer indices) becomes the op's joint region. Malformed input
// is reported on the call; the IR is left untouched then.
//
//===----------------------------------------------------------------------===//
#include "FlexMaterialize.h"
#include "FlexMaterializeScalarizer.h"

#include "torch-mlir-flex/Dialect/Flex/IR/FlexOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Verifier.h"

using namespace mlir;
using namespace mlir::flex;
using namespace mlir::flex::materialize;

namespace {
/// The operands of one backward call.
struct BackwardOperands {
  Value q, k, v, out, lse, gradOut, gradLse;
  ValueRange scoreBufs, maskBufs, blockTensors;
};
} // namespace

static bool isRankedTensorOfRank(Value v, int64_t rank) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t && t.getRank() == rank;
}

/// Checks the call against its declaration and splits its operands.
static FailureOr<BackwardOperands> checkBackwardCall(func::CallOp call,
                                                     func::FuncOp decl,
                                                     const FlexDecl &d) {
  auto err = [&]() { return callError(call, decl); };
  int64_t fixed = 6 + (d.hasGradLse ? 1 : 0);
  int64_t expected = fixed + d.numScore + d.numMask + d.numBlock;
  if (static_cast<int64_t>(call.getNumOperands()) != expected) {
    InFlightDiagnostic diag =
        err() << "expected " << expected
              << " operands (q, k, v, out, logsumexp, grad_out, "
              << (d.hasGradLse ? "grad_logsumexp, " : "") << d.numScore
              << " score buffer(s), " << d.numMask << " mask buffer(s)";
    if (d.numBlock)
      diag << ", " << d.numBlock << " block tensor(s)";
    return diag << "), got " << call.getNumOperands(), failure();
  }
  ArrayRef<int64_t> gradCaptures;
  if (d.gradCaptures)
    gradCaptures = d.gradCaptures.asArrayRef();
  int64_t numResults = 3 + static_cast<int64_t>(gradCaptures.size());
  if (static_cast<int64_t>(call.getNumResults()) != numResults)
    return err() << "expected " << numResults
                 << " results (grad_query, grad_key, grad_value, "
                 << gradCaptures.size()
                 << " capture gradient(s) for 'flex.grad_captures'), got "
                 << call.getNumResults(),
           failure();
  BackwardOperands ops;
  ops.q = call.getOperand(0);
  ops.k = call.getOperand(1);
  ops.v = call.getOperand(2);
  ops.out = call.getOperand(3);
  ops.lse = call.getOperand(4);
  ops.gradOut = call.getOperand(5);
  if (d.hasGradLse)
    ops.gradLse = call.getOperand(6);
  ValueRange rest = call.getOperands().drop_front(fixed);
  ops.scoreBufs = rest.take_front(d.numScore);
  ops.maskBufs = rest.drop_front(d.numScore).take_front(d.numMask);
  ops.blockTensors = rest.take_back(d.numBlock);
  if (failed(checkQueryKeyValue(call, decl, ops.q, ops.k, ops.v)))
    return failure();
  for (auto [val, name, rank] :
       {std::tuple<Value, StringRef, int64_t>{ops.out, "out", 4},
        {ops.lse, "logsumexp", 3},
        {ops.gradOut, "grad_out", 4},
        {ops.gradLse, "grad_logsumexp", 3}})
    if (val && !isRankedTensorOfRank(val, rank))
      return err() << name << " must be a rank-" << rank
                   << " ranked tensor, got " << val.getType(),
             failure();
  for (auto [i, like] : llvm::enumerate(ValueRange{ops.q, ops.k, ops.v}))
    if (call.getResult(i).getType() != like.getType())
      return err() << "result #" << i << " has type "
                   << call.getResult(i).getType() << ", expected "
                   << like.getType() << " (the type of "
                   << (i == 0 ? "query" : i == 1 ? "key" : "value") << ")",
             failure();
  if (failed(checkBuffers(call, decl, d, ops.q, ops.k, rest)))
    return failure();
  if (!gradCaptures.empty() && !d.jointFn)
    return err() << "'flex.grad_captures' given without 'flex.joint'",
           failure();
  for (auto [j, idx] : llvm::enumerate(gradCaptures)) {
    if (idx < 0 || idx >= d.numScore)
      return err() << "'flex.grad_captures' entry " << idx
                   << " is not the index of a score buffer (there are "
                   << d.numScore << ")",
             failure();
    Value buf = ops.scoreBufs[idx];
    Type resTy = call.getResult(3 + j).getType();
    if (resTy != buf.getType())
      return err() << "result #" << 3 + j << " has type " << resTy
                   << ", expected " << buf.getType()
                   << " (the type of score buffer #" << idx << ")",
             failure();
    if (!isa<FloatType>(cast<ShapedType>(resTy).getElementType()))
      return err() << "score buffer #" << idx << " of type " << resTy
                   << " has no float gradient",
             failure();
  }
  return ops;
}

/// The joint region is the identity: yields only its grad argument.
static bool isIdentityJoint(Region &region) {
  Block &block = region.front();
  auto yield = dyn_cast<flex::YieldOp>(block.getTerminator());
  return yield && yield.getValues().size() == 1 &&
         yield.getValues()[0] == block.getArgument(5);
}

LogicalResult materialize::rewriteBackwardCall(
    func::CallOp call, func::FuncOp decl, SymbolTable &symbols,
    llvm::SetVector<Operation *> &deadDecls,
    llvm::SetVector<Operation *> &deadMods) {
  FailureOr<FlexDecl> parsed = readFlexDecl(call, decl, symbols);
  if (failed(parsed))
    return failure();
  const FlexDecl &d = *parsed;
  FailureOr<BackwardOperands> checked = checkBackwardCall(call, decl, d);
  if (failed(checked))
    return failure();
  const BackwardOperands &ops = *checked;

  ModifierRegions regions;
  if (failed(buildModifierRegions(call, d, ops.scoreBufs, ops.maskBufs,
                                  regions)))
    return failure();
  auto jointRegion = std::make_unique<Region>();
  if (d.jointFn) {
    SmallVector<std::pair<Type, int64_t>> grads;
    for (Value r : call.getResults().drop_front(3)) {
      auto t = cast<RankedTensorType>(r.getType());
      grads.emplace_back(t.getElementType(), t.getRank());
    }
    ModifierScalarizer joint(call, "joint", d.jointFn, regions.constCaptures);
    joint.setJointGrads(grads);
    if (failed(joint.run(*jointRegion, ops.scoreBufs,
                         ValueRange(regions.captures)
                             .take_front(ops.scoreBufs.size())))) {
      regions.discard();
      return failure();
    }
  }
  regions.finalizeCaptures();

  // Zero-filled inits (the op accumulates into them).
  OpBuilder b(call);
  Location loc = call.getLoc();
  SmallVector<Operation *> newOps;
  SmallVector<Value> inits;
  llvm::SmallDenseMap<Type, Value> zeros;
  for (auto [i, res] : llvm::enumerate(call.getResults())) {
    auto t = cast<RankedTensorType>(res.getType());
    // Dynamic extents from the tensor the gradient is shaped like.
    Value like = i < 3 ? call.getOperand(i)
                       : ops.scoreBufs[d.gradCaptures.asArrayRef()[i - 3]];
    SmallVector<std::pair<Value, int64_t>> dims;
    for (int64_t dim = 0; dim < t.getRank(); ++dim)
      dims.emplace_back(like, dim);
    Value empty = makeEmpty(b, loc, t, dims);
    Value &zero = zeros[t.getElementType()];
    if (!zero) {
      zero = arith::ConstantOp::create(
          b, loc, b.getFloatAttr(t.getElementType(), 0.0));
      newOps.push_back(zero.getDefiningOp());
    }
    auto fill = linalg::FillOp::create(b, loc, zero, empty);
    newOps.append({empty.getDefiningOp(), fill});
    inits.push_back(fill.getResult(0));
  }

  SmallVector<Type> resultTypes(call.getResultTypes());
  auto blockAt = [&](int64_t i) {
    return i < d.numBlock ? ops.blockTensors[i] : Value();
  };
  auto op = AttentionBackwardOp::create(
      b, loc, resultTypes, ops.q, ops.k, ops.v, ops.out, ops.lse, ops.gradOut,
      ops.gradLse, regions.captures, ValueRange(), blockAt(0), blockAt(1),
      blockAt(2), blockAt(3), inits[0], inits[1], inits[2],
      ValueRange(inits).drop_front(3),
      b.getF32FloatAttr(static_cast<float>(d.scale.getValueAsDouble())),
      d.gradCaptures && !d.gradCaptures.empty() ? d.gradCaptures
                                                : DenseI64ArrayAttr(),
      IntegerAttr(), d.blockSizes);
  regions.attach(d, op.getScoreMod(), op.getMaskMod());
  if (d.jointFn && !isIdentityJoint(*jointRegion))
    op.getJoint().takeBody(*jointRegion);

  if (failed(mlir::verify(op))) {
    op.erase();
    for (Operation *o : llvm::reverse(newOps))
      o->erase();
    regions.discard();
    return callError(call, decl)
               << "the materialized flex.attention_backward does not verify",
           failure();
  }

  call.replaceAllUsesWith(op.getResults());
  call.erase();
  deadDecls.insert(decl);
  for (func::FuncOp fn : {d.scoreFn, d.maskFn, d.jointFn})
    if (fn)
      deadMods.insert(fn);
  return success();
}
