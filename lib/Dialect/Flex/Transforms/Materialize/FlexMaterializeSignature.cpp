//===- FlexMaterializeSignature.cpp - a modifier's signature and yield ---===//
//
// The edges of flex-materialize's ModifierScalarizer: checking a modifier
// function's arguments (score, b, h, q_idx, kv_idx, captured buffers) and,
// for the backward's joint function, its results against the flex region
// signature; and the region's flex.yield for the function's return.
// The body in between is FlexMaterializeScalarizer.cpp's.
//
//===----------------------------------------------------------------------===//
#include "FlexMaterializeScalarizer.h"

#include "torch-mlir-flex/Dialect/Flex/IR/FlexOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;
using namespace mlir::flex;
using namespace mlir::flex::materialize;

LogicalResult ModifierScalarizer::checkSignature(ValueRange captures) {
  MLIRContext *ctx = callSite->getContext();
  unsigned first = numLeading(), nFixed = numFixed();
  FunctionType fty = fn.getFunctionType();
  if (fn.isExternal() || fn.getBody().empty())
    return error() << kind << " @" << fn.getSymName()
                   << " is a declaration without a body",
           failure();
  if (fty.getNumInputs() != nFixed + captures.size())
    return error() << kind << " @" << fn.getSymName() << " has "
                   << fty.getNumInputs() << " arguments, expected " << nFixed
                   << " + " << captures.size()
                   << " captured buffer(s) = " << nFixed + captures.size(),
           failure();
  Type f32 = Float32Type::get(ctx);
  Type yieldTy = first ? f32 : Type(IntegerType::get(ctx, 1));
  // A score_mod (or joint) traced on f16/bf16 scores is run in f32
  // (retypeHalfToF32).
  if (first && fty.getNumInputs() > 0 && fty.getNumResults() >= 1 &&
      isHalfFloat(scalarTypeOf(fty.getInput(0))) &&
      (scalarTypeOf(fty.getInput(0)) == scalarTypeOf(fty.getResult(0)) ||
       scalarTypeOf(fty.getResult(0)) == yieldTy))
    halfScore = scalarTypeOf(fty.getInput(0));
  if (isJoint()) {
    if (failed(checkJointResults(fty)))
      return failure();
  } else if (fty.getNumResults() != 1 ||
             (!halfScore && scalarTypeOf(fty.getResult(0)) != yieldTy)) {
    return error() << kind << " @" << fn.getSymName()
                   << " must return one tensor<" << typeStr(yieldTy) << "> (or "
                   << typeStr(yieldTy) << ")",
           failure();
  }
  if (first && !halfScore && scalarTypeOf(fty.getInput(0)) != yieldTy)
    return error() << kind << " @" << fn.getSymName()
                   << " argument #0 (score) must be tensor<f32>, got "
                   << fty.getInput(0),
           failure();
  if (isJoint()) {
    Type grad = scalarTypeOf(fty.getInput(5));
    if (grad != f32 && (!halfScore || grad != halfScore))
      return error() << kind << " @" << fn.getSymName()
                     << " argument #5 (grad) must be tensor<f32>, got "
                     << fty.getInput(5),
             failure();
  }
  for (unsigned i = first; i < first + 4; ++i) {
    Type st = scalarTypeOf(fty.getInput(i));
    if (!st || !(st.isIndex() || st.isSignlessInteger()))
      return error() << kind << " @" << fn.getSymName() << " argument #" << i
                     << " (index) must be a 0-d integer tensor, got "
                     << fty.getInput(i),
             failure();
  }
  for (auto [i, cap] : llvm::enumerate(captures)) {
    Type argTy = fty.getInput(nFixed + i);
    if (argTy != cap.getType())
      return error() << kind << " @" << fn.getSymName() << " argument #"
                     << nFixed + i << " has type " << argTy
                     << " but the call passes a buffer of type "
                     << cap.getType(),
             failure();
  }
  if (!fn.getBody().hasOneBlock())
    return error() << kind << " @" << fn.getSymName()
                   << " has more than one block",
           failure();

  return success();
}

/// Results of a joint function: the score gradient (f32), then per capture
/// gradient a float value and `rank` integer indices.
LogicalResult ModifierScalarizer::checkJointResults(FunctionType fty) {
  unsigned expected = 1;
  for (auto [elt, rank] : jointGrads)
    expected += 1 + rank;
  auto err = [&]() -> InFlightDiagnostic {
    return error() << kind << " @" << fn.getSymName() << " ";
  };
  if (fty.getNumResults() != expected) {
    InFlightDiagnostic d = err() << "returns " << fty.getNumResults()
                                 << " values, expected " << expected
                                 << " (the score gradient";
    if (!jointGrads.empty())
      d << ", then a value and one index per dimension for each of the "
        << jointGrads.size() << " capture gradient(s)";
    return d << ")", failure();
  }
  Type g = scalarTypeOf(fty.getResult(0));
  if (!g || !(g.isF32() || (halfScore && g == halfScore)))
    return err() << "result #0 (score gradient) must be tensor<f32>, got "
                 << fty.getResult(0),
           failure();
  unsigned pos = 1;
  for (auto [j, grad] : llvm::enumerate(jointGrads)) {
    Type v = scalarTypeOf(fty.getResult(pos));
    if (!v || !(v == grad.first ||
                (halfScore && isa<FloatType>(v) && isa<FloatType>(grad.first))))
      return err() << "result #" << pos << " (value of capture gradient #" << j
                   << ") must be a 0-d tensor of " << typeStr(grad.first)
                   << ", got " << fty.getResult(pos),
             failure();
    ++pos;
    for (int64_t d = 0; d < grad.second; ++d, ++pos) {
      Type t = scalarTypeOf(fty.getResult(pos));
      if (!t || !(t.isIndex() || t.isSignlessInteger()))
        return err() << "result #" << pos << " (index " << d
                     << " of capture gradient #" << j
                     << ") must be a 0-d integer tensor, got "
                     << fty.getResult(pos),
               failure();
    }
  }
  return success();
}

LogicalResult ModifierScalarizer::emitYield(func::ReturnOp ret) {
  if (!isJoint() && ret.getNumOperands() != 1)
    return fail(ret, "expected one returned value");
  SmallVector<Value> values;
  // Joint results after #0: per capture gradient a value, then indices.
  SmallVector<bool> isIndex(ret.getNumOperands(), false);
  unsigned pos = 1;
  for (auto [elt, rank] : jointGrads) {
    for (int64_t d = 0; d < rank; ++d)
      if (pos + 1 + d < isIndex.size())
        isIndex[pos + 1 + d] = true;
    pos += 1 + rank;
  }
  for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
    FailureOr<Value> s = getScalar(ret, v);
    if (failed(s))
      return failure();
    Value x = *s;
    if (isJoint() && isIndex[i] && !x.getType().isIndex())
      x = arith::IndexCastOp::create(builder, ret.getLoc(),
                                     builder.getIndexType(), x);
    values.push_back(x);
  }
  flex::YieldOp::create(builder, ret.getLoc(), values);
  return success();
}

void ModifierScalarizer::fixJointYieldTypes(Block *block) {
  auto yield = cast<flex::YieldOp>(block->getTerminator());
  SmallVector<Type> want = {builder.getF32Type()};
  for (auto [elt, rank] : jointGrads) {
    want.push_back(elt);
    want.append(rank, builder.getIndexType());
  }
  builder.setInsertionPoint(yield);
  for (auto [operand, t] : llvm::zip_equal(yield->getOpOperands(), want)) {
    Type have = operand.get().getType();
    if (have == t || !isa<FloatType>(have) || !isa<FloatType>(t))
      continue;
    Location loc = yield.getLoc();
    Value x = operand.get();
    if (cast<FloatType>(have).getWidth() < cast<FloatType>(t).getWidth())
      x = arith::ExtFOp::create(builder, loc, t, x);
    else
      x = arith::TruncFOp::create(builder, loc, t, x);
    operand.set(x);
  }
}
