//===- FlexMaterialize.cpp - frontend flex calls to flex.attention --------===//
//
// Rewrites each `func.call @__flex_attention_N(q, k, v, buffers...)` emitted
// by torch_mlir_flex.frontend into a `flex.attention` op on tensors. The
// score_mod / mask_mod functions (linalg-on-tensors over 0-d tensors) are
// turned into scalar code inside the op's regions. Anything that cannot be
// scalarized is reported on the call site; the pass never asserts on input.
//
//===----------------------------------------------------------------------===//
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

static constexpr StringLiteral kPassName = "flex-materialize";
static constexpr StringLiteral kDeclPrefix = "__flex_attention_";

//===----------------------------------------------------------------------===//
// Type helpers
//===----------------------------------------------------------------------===//

/// A ranked tensor with a static shape of all ones (including rank 0): holds
/// exactly one element and is scalarized to it.
static bool isUnitTensor(Type t) {
  auto rt = dyn_cast<RankedTensorType>(t);
  return rt && rt.hasStaticShape() &&
         llvm::all_of(rt.getShape(), [](int64_t d) { return d == 1; });
}

/// The scalar a modifier value of type `t` stands for: the element type of a
/// unit tensor, `t` itself if not shaped, null otherwise.
static Type scalarTypeOf(Type t) {
  if (isUnitTensor(t))
    return cast<RankedTensorType>(t).getElementType();
  if (isa<ShapedType>(t))
    return {};
  return t;
}

static bool isHalfFloat(Type t) { return t && (t.isF16() || t.isBF16()); }

/// With f16/bf16 inputs torch.export traces the score_mod on scores of the
/// query dtype, while eager flex_attention calls it on f32 scores. Retypes
/// the scalarized region so the modifier runs in f32: results of type
/// `half` become f32 (constants converted, extf/truncf between them folded);
/// reads of captured `half` tensors are extended right after the read.
static void retypeHalfToF32(Block *block, Type half) {
  OpBuilder b(half.getContext());
  Type f32 = b.getF32Type();
  SmallVector<Operation *> ops;
  for (Operation &op : *block)
    ops.push_back(&op);
  for (Operation *op : ops) {
    if (auto ext = dyn_cast<tensor::ExtractOp>(op)) {
      if (ext.getType() == half) {
        b.setInsertionPointAfter(ext);
        Value wide = arith::ExtFOp::create(b, ext.getLoc(), f32, ext.getResult());
        ext.getResult().replaceAllUsesExcept(wide, wide.getDefiningOp());
      }
      continue;
    }
    if (auto c = dyn_cast<arith::ConstantOp>(op)) {
      if (auto fa = dyn_cast<FloatAttr>(c.getValue()); fa && fa.getType() == half) {
        b.setInsertionPoint(c);
        Value wide = arith::ConstantOp::create(
            b, c.getLoc(), b.getF32FloatAttr(fa.getValueAsDouble()));
        c.getResult().replaceAllUsesWith(wide);
        c->erase();
      }
      continue;
    }
    if (isa<arith::ExtFOp, arith::TruncFOp>(op) &&
        op->getOperand(0).getType() == f32 &&
        (op->getResult(0).getType() == f32 || op->getResult(0).getType() == half)) {
      op->getResult(0).replaceAllUsesWith(op->getOperand(0));
      op->erase();
      continue;
    }
    for (Value r : op->getResults())
      if (r.getType() == half)
        r.setType(f32);
  }
}

/// A boolean constant table is captured as i8: after bufferization a load
/// from a memref of i1 does not lower to LLVM (sub-byte element type).
/// Returns the zero-extended i8 table, or `attr` unchanged.
static Attribute widenBoolTable(Attribute attr) {
  auto dense = dyn_cast<DenseIntElementsAttr>(attr);
  if (!dense || !dense.getElementType().isInteger(1))
    return attr;
  Type i8 = IntegerType::get(attr.getContext(), 8);
  return dense.mapValues(i8, [](const APInt &v) { return v.zext(8); });
}

static std::string typeStr(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << t;
  return s;
}

//===----------------------------------------------------------------------===//
// Modifier scalarizer
//===----------------------------------------------------------------------===//

namespace {
/// Builds the scalar body of one flex.attention region from one modifier
/// function. Values of the function map either to scalars (`scalars`: unit
/// tensors and plain scalars) or to whole tensors usable inside the region
/// (`tensors`: capture operands and constant tables).
class ModifierScalarizer {
public:
  /// Constant tables of the modifier are materialized before `callSite` and
  /// appended to `extraCaptures` (shared by both modifiers of one call): a
  /// tensor constant inside the region would be hoisted out of it by any
  /// folder, leaving an uncaptured tensor use.
  ModifierScalarizer(Operation *callSite, StringRef kind, func::FuncOp fn,
                     SmallVectorImpl<Value> &extraCaptures)
      : callSite(callSite), kind(kind), fn(fn),
        builder(callSite->getContext()), extraCaptures(extraCaptures) {}

  /// Fills `region` (a fresh, detached region) with one block of the flex
  /// signature. `captures` are the call's buffer operands for this modifier.
  /// Emits a diagnostic and fails if the function cannot be scalarized.
  /// `mapped` are the values the region reads for them.
  LogicalResult run(Region &region, ValueRange captures, ValueRange mapped);

private:
  InFlightDiagnostic error() {
    return callSite->emitError()
           << kPassName << ": ";
  }
  LogicalResult fail(Operation *op, const Twine &reason) {
    InFlightDiagnostic d = error();
    d << "cannot scalarize '" << op->getName() << "' in " << kind << " @"
      << fn.getSymName();
    d.attachNote(op->getLoc()) << reason;
    return failure();
  }

  FailureOr<Value> getScalar(Operation *user, Value v);
  /// Reads `mapped[idx]` where `mapped` stands for the modifier tensor
  /// `orig` (a widened copy for boolean tables: narrowed back to i1).
  Value extractElement(Location loc, Value orig, Value mapped, ValueRange idx);
  LogicalResult process(Operation *op);
  LogicalResult processLinalg(linalg::LinalgOp op);
  LogicalResult processElementwise(Operation *op);
  LogicalResult processScalarOp(Operation *op);
  LogicalResult aliasUnit(Operation *op, Value from, Value to);
  /// Equal types, or f32 standing for the half score type being widened.
  bool compatibleScalar(Type have, Type want) {
    return have == want ||
           (halfScore && have.isF32() && want == halfScore);
  }
  Type halfScore;

  Operation *callSite;
  StringRef kind;
  func::FuncOp fn;
  OpBuilder builder;
  IRMapping scalars;
  IRMapping tensors;
  llvm::DenseSet<Value> uninitialized;
  SmallVectorImpl<Value> &extraCaptures;
  SmallVector<std::pair<arith::ConstantOp, Value>> constTables;
};
} // namespace

Value ModifierScalarizer::extractElement(Location loc, Value orig,
                                         Value mapped, ValueRange idx) {
  Value e = tensor::ExtractOp::create(builder, loc, mapped, idx);
  Type want = cast<ShapedType>(orig.getType()).getElementType();
  if (e.getType() != want)
    e = arith::TruncIOp::create(builder, loc, want, e);
  return e;
}

FailureOr<Value> ModifierScalarizer::getScalar(Operation *user, Value v) {
  if (Value s = scalars.lookupOrNull(v))
    return s;
  if (Value t = tensors.lookupOrNull(v)) {
    if (isUnitTensor(t.getType())) {
      // A whole unit tensor (captured or constant): read its only element.
      auto rt = cast<RankedTensorType>(t.getType());
      Value zero = arith::ConstantIndexOp::create(builder, v.getLoc(), 0);
      SmallVector<Value> idx(rt.getRank(), zero);
      Value s = extractElement(v.getLoc(), v, t, idx);
      scalars.map(v, s);
      return s;
    }
    return fail(user, "operand #" +
                          Twine(llvm::find(user->getOperands(), v) -
                                user->getOperands().begin()) +
                          " is a tensor of type " + typeStr(v.getType()) +
                          " with more than one element");
  }
  if (uninitialized.contains(v))
    return fail(user, "reads the contents of an uninitialized tensor.empty");
  return fail(user, "operand of type " + typeStr(v.getType()) +
                        " is not a scalar or 0-d tensor computed in the "
                        "modifier");
}

LogicalResult ModifierScalarizer::run(Region &region, ValueRange captures,
                                      ValueRange mapped) {
  MLIRContext *ctx = callSite->getContext();
  Location loc = fn.getLoc();
  bool isScore = kind == "score_mod";
  unsigned numIdx = 4, first = isScore ? 1 : 0;
  unsigned numFixed = first + numIdx;
  FunctionType fty = fn.getFunctionType();

  // Signature checks.
  if (fn.isExternal() || fn.getBody().empty())
    return error() << kind << " @" << fn.getSymName()
                   << " is a declaration without a body",
           failure();
  if (fty.getNumInputs() != numFixed + captures.size())
    return error() << kind << " @" << fn.getSymName() << " has "
                   << fty.getNumInputs() << " arguments, expected "
                   << numFixed << " + " << captures.size()
                   << " captured buffer(s) = " << numFixed + captures.size(),
           failure();
  Type yieldTy = isScore ? Type(Float32Type::get(ctx))
                         : Type(IntegerType::get(ctx, 1));
  // A score_mod traced on f16/bf16 scores is run in f32 (retypeHalfToF32).
  if (isScore && fty.getNumInputs() > 0 && fty.getNumResults() == 1 &&
      isHalfFloat(scalarTypeOf(fty.getInput(0))) &&
      (scalarTypeOf(fty.getInput(0)) == scalarTypeOf(fty.getResult(0)) ||
       scalarTypeOf(fty.getResult(0)) == yieldTy))
    halfScore = scalarTypeOf(fty.getInput(0));
  if (fty.getNumResults() != 1 ||
      (!halfScore && scalarTypeOf(fty.getResult(0)) != yieldTy))
    return error() << kind << " @" << fn.getSymName()
                   << " must return one tensor<" << typeStr(yieldTy) << "> (or "
                   << typeStr(yieldTy) << ")",
           failure();
  if (isScore && !halfScore && scalarTypeOf(fty.getInput(0)) != yieldTy)
    return error() << kind << " @" << fn.getSymName()
                   << " argument #0 (score) must be tensor<f32>, got "
                   << fty.getInput(0),
           failure();
  for (unsigned i = first; i < numFixed; ++i) {
    Type st = scalarTypeOf(fty.getInput(i));
    if (!st || !(st.isIndex() || st.isSignlessInteger()))
      return error() << kind << " @" << fn.getSymName() << " argument #" << i
                     << " (index) must be a 0-d integer tensor, got "
                     << fty.getInput(i),
             failure();
  }
  for (auto [i, cap] : llvm::enumerate(captures)) {
    Type argTy = fty.getInput(numFixed + i);
    if (argTy != cap.getType())
      return error() << kind << " @" << fn.getSymName() << " argument #"
                     << numFixed + i << " has type " << argTy
                     << " but the call passes a buffer of type "
                     << cap.getType(),
             failure();
  }
  if (!fn.getBody().hasOneBlock())
    return error() << kind << " @" << fn.getSymName()
                   << " has more than one block",
           failure();

  // Region block with the flex signature.
  Type idxTy = builder.getIndexType();
  SmallVector<Type> argTypes;
  if (isScore)
    argTypes.push_back(yieldTy);
  argTypes.append(numIdx, idxTy);
  Block *block = new Block();
  region.push_back(block);
  block->addArguments(argTypes, SmallVector<Location>(argTypes.size(), loc));
  builder.setInsertionPointToEnd(block);

  Block &body = fn.getBody().front();
  if (isScore)
    scalars.map(body.getArgument(0), block->getArgument(0));
  for (unsigned i = first; i < numFixed; ++i) {
    Value arg = body.getArgument(i);
    Type st = scalarTypeOf(arg.getType());
    Value s = block->getArgument(i);
    if (!st.isIndex())
      s = arith::IndexCastOp::create(builder, arg.getLoc(), st, s);
    scalars.map(arg, s);
  }
  for (auto [i, cap] : llvm::enumerate(mapped))
    tensors.map(body.getArgument(numFixed + i), cap);

  for (Operation &op : body) {
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      if (ret.getNumOperands() != 1)
        return fail(&op, "expected one returned value");
      FailureOr<Value> s = getScalar(&op, ret.getOperand(0));
      if (failed(s))
        return failure();
      flex::YieldOp::create(builder, ret.getLoc(), *s);
      continue;
    }
    if (failed(process(&op)))
      return failure();
  }
  if (block->empty() || !isa<flex::YieldOp>(block->back()))
    return error() << kind << " @" << fn.getSymName()
                   << " does not end with func.return",
           failure();

  if (halfScore)
    retypeHalfToF32(block, halfScore);

  // Drop what the translation left unused (index casts, empty-tensor
  // bookkeeping, folded-away constants).
  SmallVector<Operation *> ops;
  for (Operation &op : block->without_terminator())
    ops.push_back(&op);
  for (Operation *op : llvm::reverse(ops))
    if (isOpTriviallyDead(op))
      op->erase();
  return success();
}

LogicalResult ModifierScalarizer::aliasUnit(Operation *op, Value from,
                                            Value to) {
  if (Value s = scalars.lookupOrNull(from)) {
    scalars.map(to, s);
    return success();
  }
  if (tensors.contains(from)) {
    FailureOr<Value> s = getScalar(op, from);
    if (failed(s))
      return failure();
    scalars.map(to, *s);
    return success();
  }
  if (uninitialized.contains(from)) {
    uninitialized.insert(to);
    return success();
  }
  return fail(op, "source is not a value computed in the modifier");
}

LogicalResult ModifierScalarizer::process(Operation *op) {
  Location loc = op->getLoc();
  // Unused side-effect-free leftovers need no scalar form.
  if (isOpTriviallyDead(op))
    return success();

  // Constants: unit tensors become scalars, tables stay whole tensors.
  if (auto cst = dyn_cast<arith::ConstantOp>(op)) {
    Type t = cst.getType();
    if (!isa<ShapedType>(t))
      return processScalarOp(op);
    if (!isa<RankedTensorType>(t))
      return fail(op, "constant of type " + typeStr(t) +
                          " is not a ranked tensor");
    if (isUnitTensor(t)) {
      if (auto dense = dyn_cast<DenseElementsAttr>(cst.getValue())) {
        auto elt = dyn_cast<TypedAttr>(dense.getSplatValue<Attribute>());
        if (elt && arith::ConstantOp::isBuildableWith(elt, elt.getType())) {
          scalars.map(cst.getResult(),
                      arith::ConstantOp::create(builder, loc, elt));
          return success();
        }
      }
    }
    // A constant table (dense or dense_resource): materialize it before the
    // call and capture it; reads become tensor.extract on the capture.
    for (auto [orig, c] : constTables) {
      if (orig.getValue() == cst.getValue() && orig.getType() == cst.getType()) {
        tensors.map(cst.getResult(), c);
        return success();
      }
    }
    OpBuilder outside(callSite);
    auto table = cast<TypedAttr>(widenBoolTable(cst.getValue()));
    Value captured = arith::ConstantOp::create(outside, loc, table);
    extraCaptures.push_back(captured);
    constTables.emplace_back(cst, captured);
    tensors.map(cst.getResult(), captured);
    return success();
  }

  if (auto empty = dyn_cast<tensor::EmptyOp>(op)) {
    // A larger empty tensor is left unmapped: its users report the error.
    if (isUnitTensor(empty.getType()))
      uninitialized.insert(empty.getResult());
    return success();
  }

  if (auto extract = dyn_cast<tensor::ExtractOp>(op)) {
    Value src = extract.getTensor();
    if (isUnitTensor(src.getType()) &&
        (scalars.contains(src) || uninitialized.contains(src)))
      return aliasUnit(op, src, extract.getResult());
    Value t = tensors.lookupOrNull(src);
    if (!t)
      return fail(op, "extracts from a tensor that is neither captured nor "
                      "a constant");
    SmallVector<Value> idx;
    for (Value i : extract.getIndices()) {
      FailureOr<Value> s = getScalar(op, i);
      if (failed(s))
        return failure();
      idx.push_back(*s);
    }
    scalars.map(extract.getResult(), extractElement(loc, src, t, idx));
    return success();
  }

  if (auto fromElts = dyn_cast<tensor::FromElementsOp>(op)) {
    if (!isUnitTensor(fromElts.getType()) ||
        fromElts.getElements().size() != 1)
      return fail(op, "result is not a 0-d tensor");
    FailureOr<Value> s = getScalar(op, fromElts.getElements()[0]);
    if (failed(s))
      return failure();
    scalars.map(fromElts.getResult(), *s);
    return success();
  }

  if (auto insert = dyn_cast<tensor::InsertOp>(op)) {
    if (!isUnitTensor(insert.getType()))
      return fail(op, "destination is not a 0-d tensor");
    FailureOr<Value> s = getScalar(op, insert.getScalar());
    if (failed(s))
      return failure();
    scalars.map(insert.getResult(), *s);
    return success();
  }

  // Reshapes between unit tensors keep the one element.
  if (isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp, tensor::CastOp,
          tensor::ReshapeOp, tensor::ExtractSliceOp>(op)) {
    if (op->getNumResults() != 1 || op->getNumOperands() < 1 ||
        !isUnitTensor(op->getOperand(0).getType()) ||
        !isUnitTensor(op->getResult(0).getType()))
      return fail(op, "only reshapes of 0-d (single-element) tensors are "
                      "supported");
    return aliasUnit(op, op->getOperand(0), op->getResult(0));
  }

  if (auto linalgOp = dyn_cast<linalg::LinalgOp>(op))
    return processLinalg(linalgOp);

  bool hasTensors =
      llvm::any_of(op->getOperandTypes(), llvm::IsaPred<ShapedType>) ||
      llvm::any_of(op->getResultTypes(), llvm::IsaPred<ShapedType>);
  if (hasTensors && OpTrait::hasElementwiseMappableTraits(op))
    return processElementwise(op);
  if (hasTensors)
    return fail(op, "operates on tensors; only 0-d linalg/tensor ops and "
                    "scalar arith/math ops are supported");
  return processScalarOp(op);
}

LogicalResult ModifierScalarizer::processLinalg(linalg::LinalgOp op) {
  Operation *raw = op.getOperation();
  if (!op.hasPureTensorSemantics())
    return fail(raw, "expected tensor semantics");
  for (OpOperand &operand : raw->getOpOperands()) {
    Type t = operand.get().getType();
    if (isa<ShapedType>(t) && !isUnitTensor(t))
      return fail(raw, "operand #" + Twine(operand.getOperandNumber()) +
                           " of type " + typeStr(t) +
                           " is not a 0-d tensor");
  }
  if (raw->getNumRegions() != 1 || !raw->getRegion(0).hasOneBlock())
    return fail(raw, "expected a single-block payload region");
  Block &payload = raw->getRegion(0).front();
  unsigned numIns = op.getNumDpsInputs(), numInits = op.getNumDpsInits();
  bool mapsInits;
  if (payload.getNumArguments() == numIns + numInits)
    mapsInits = true;
  else if (payload.getNumArguments() == numIns)
    mapsInits = false; // linalg.map
  else
    return fail(raw, "payload arguments do not match its operands");

  // Inputs are always read; an init is read only if the payload uses it.
  for (auto [i, operand] : llvm::enumerate(op.getDpsInputOperands())) {
    FailureOr<Value> s = getScalar(raw, operand->get());
    if (failed(s))
      return failure();
    if (!compatibleScalar(s->getType(), payload.getArgument(i).getType()))
      return fail(raw, "payload argument #" + Twine(i) +
                           " type differs from its operand element type");
    scalars.map(payload.getArgument(i), *s);
  }
  if (mapsInits) {
    for (unsigned i = 0; i < numInits; ++i) {
      BlockArgument arg = payload.getArgument(numIns + i);
      if (arg.use_empty())
        continue;
      FailureOr<Value> s = getScalar(raw, op.getDpsInits()[i]);
      if (failed(s))
        return failure();
      if (!compatibleScalar(s->getType(), arg.getType()))
        return fail(raw, "payload argument type differs from its init");
      scalars.map(arg, *s);
    }
  }

  for (Operation &inner : payload) {
    if (auto yield = dyn_cast<linalg::YieldOp>(inner)) {
      if (yield.getNumOperands() != raw->getNumResults())
        return fail(raw, "payload yields a different number of values than "
                         "the op has results");
      for (auto [res, v] : llvm::zip_equal(raw->getResults(),
                                           yield.getOperands())) {
        FailureOr<Value> s = getScalar(&inner, v);
        if (failed(s))
          return failure();
        scalars.map(res, *s);
      }
      return success();
    }
    if (auto index = dyn_cast<linalg::IndexOp>(inner)) {
      // Every loop of a 0-d op has extent 1.
      scalars.map(index.getResult(),
                  arith::ConstantIndexOp::create(builder, index.getLoc(), 0));
      continue;
    }
    if (failed(process(&inner)))
      return failure();
  }
  return fail(raw, "payload does not end with linalg.yield");
}

LogicalResult ModifierScalarizer::processElementwise(Operation *op) {
  if (op->getNumRegions() != 0)
    return fail(op, "elementwise op with regions");
  SmallVector<Value> operands;
  for (Value v : op->getOperands()) {
    if (isa<ShapedType>(v.getType()) && !isUnitTensor(v.getType()))
      return fail(op, "operand of type " + typeStr(v.getType()) +
                          " is not a 0-d tensor");
    FailureOr<Value> s = getScalar(op, v);
    if (failed(s))
      return failure();
    operands.push_back(*s);
  }
  SmallVector<Type> resultTypes;
  for (Type t : op->getResultTypes()) {
    Type st = scalarTypeOf(t);
    if (!st)
      return fail(op, "result of type " + typeStr(t) +
                          " is not a 0-d tensor");
    resultTypes.push_back(st);
  }
  OperationState state(op->getLoc(), op->getName(), operands, resultTypes,
                       op->getDiscardableAttrDictionary().getValue());
  state.propertiesAttr = op->getPropertiesAsAttribute();
  Operation *scalarOp = builder.create(state);
  for (auto [from, to] : llvm::zip_equal(op->getResults(),
                                         scalarOp->getResults()))
    scalars.map(from, to);
  return success();
}

LogicalResult ModifierScalarizer::processScalarOp(Operation *op) {
  StringRef ns = op->getName().getDialectNamespace();
  if (!llvm::is_contained({StringRef("arith"), StringRef("math"),
                           StringRef("index"), StringRef("ub"),
                           StringRef("scf")},
                          ns))
    return fail(op, "only arith, math, index, ub and scf ops are supported "
                    "on scalars");
  if (!isMemoryEffectFree(op))
    return fail(op, "op has side effects");
  // Every value used from outside `op` (also inside its regions) must have
  // been scalarized; no tensor may appear anywhere.
  WalkResult r = op->walk([&](Operation *inner) {
    for (Type t : inner->getResultTypes())
      if (isa<ShapedType>(t))
        return WalkResult::interrupt();
    for (Region &reg : inner->getRegions())
      for (Block &blk : reg)
        for (Type t : blk.getArgumentTypes())
          if (isa<ShapedType>(t))
            return WalkResult::interrupt();
    for (Value v : inner->getOperands()) {
      if (isa<ShapedType>(v.getType()))
        return WalkResult::interrupt();
      Region *defRegion = v.getParentRegion();
      bool definedInside = op->isAncestor(
          defRegion ? defRegion->getParentOp() : nullptr);
      if (!definedInside && !scalars.contains(v))
        return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  if (r.wasInterrupted())
    return fail(op, "uses a tensor or a value that was not scalarized");
  Operation *clone = builder.clone(*op, scalars);
  for (auto [from, to] : llvm::zip_equal(op->getResults(),
                                         clone->getResults()))
    scalars.map(from, to);
  return success();
}

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
  if (fn.getSymName().starts_with(kDeclPrefix))
    return true;
  return llvm::any_of(fn->getDiscardableAttrs(), [](NamedAttribute a) {
    return a.getName().strref().starts_with("flex.");
  });
}

LogicalResult
FlexMaterializePass::rewriteCall(func::CallOp call, func::FuncOp decl,
                                 SymbolTable &symbols,
                                 llvm::SetVector<Operation *> &deadDecls,
                                 llvm::SetVector<Operation *> &deadMods) {
  auto err = [&]() {
    return call.emitError() << kPassName << ": @" << decl.getSymName()
                            << ": ";
  };
  if (!decl.isExternal())
    return err() << "flex call target must be a declaration", failure();

  // Attributes.
  auto scaleAttr = decl->getAttrOfType<FloatAttr>("flex.scale");
  if (!scaleAttr)
    return err() << "missing or non-float 'flex.scale' attribute", failure();
  auto getCount = [&](StringRef name) -> FailureOr<int64_t> {
    Attribute a = decl->getAttr(name);
    if (!a)
      return 0;
    auto i = dyn_cast<IntegerAttr>(a);
    if (!i || !i.getType().isInteger() || i.getValue().isNegative() ||
        i.getValue().getActiveBits() > 32)
      return err() << "'" << name << "' must be a non-negative integer",
             failure();
    return i.getInt();
  };
  FailureOr<int64_t> numScore = getCount("flex.num_score_buffers");
  FailureOr<int64_t> numMask = getCount("flex.num_mask_buffers");
  if (failed(numScore) || failed(numMask))
    return failure();
  auto getFlag = [&](StringRef name) -> FailureOr<bool> {
    Attribute a = decl->getAttr(name);
    if (!a)
      return false;
    auto b = dyn_cast<BoolAttr>(a);
    if (!b)
      return err() << "'" << name << "' must be a bool", failure();
    return b.getValue();
  };
  FailureOr<bool> returnLse = getFlag("flex.return_lse");
  FailureOr<bool> returnMax = getFlag("flex.return_max_scores");
  if (failed(returnLse) || failed(returnMax))
    return failure();
  Attribute gqaAttr = decl->getAttr("flex.enable_gqa");
  if (gqaAttr && !isa<UnitAttr>(gqaAttr))
    return err() << "'flex.enable_gqa' must be a unit attribute", failure();
  bool enableGqa = static_cast<bool>(gqaAttr);

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
  func::FuncOp scoreFn, maskFn;
  if (failed(lookupModifier("flex.score_mod", scoreFn)) ||
      failed(lookupModifier("flex.mask_mod", maskFn)))
    return failure();

  // Operands and results.
  int64_t expectedOperands = 3 + *numScore + *numMask;
  if (static_cast<int64_t>(call.getNumOperands()) != expectedOperands)
    return err() << "expected " << expectedOperands
                 << " operands (q, k, v, " << *numScore
                 << " score buffer(s), " << *numMask
                 << " mask buffer(s)), got " << call.getNumOperands(),
           failure();
  if (call.getNumResults() != 3)
    return err() << "expected 3 results (output, logsumexp, max_scores), got "
                 << call.getNumResults(),
           failure();
  auto rankedOf = [](Value v, int64_t rank) -> RankedTensorType {
    auto t = dyn_cast<RankedTensorType>(v.getType());
    return t && t.getRank() == rank ? t : RankedTensorType();
  };
  Value q = call.getOperand(0), k = call.getOperand(1),
        v = call.getOperand(2);
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
  static constexpr int64_t kResultRanks[] = {4, 3, 3};
  for (auto [i, rank] : llvm::enumerate(kResultRanks))
    if (!rankedOf(call.getResult(i), rank))
      return err() << "result #" << i << " must be a rank-" << rank
                   << " ranked tensor, got " << call.getResult(i).getType(),
             failure();
  ValueRange buffers = call.getOperands().drop_front(3);
  for (Value buf : buffers)
    if (!isa<RankedTensorType>(buf.getType()))
      return err() << "captured buffers must be ranked tensors, got "
                   << buf.getType(),
             failure();
  ValueRange scoreBufs = buffers.take_front(*numScore);
  ValueRange maskBufs = buffers.drop_front(*numScore);
  if (!scoreFn && *numScore != 0)
    return err() << "score buffers given without 'flex.score_mod'",
           failure();
  if (!maskFn && *numMask != 0)
    return err() << "mask buffers given without 'flex.mask_mod'", failure();

  // GQA: the op derives the group size from static head counts.
  int64_t hq = rankedOf(q, 4).getDimSize(1), hkv = rankedOf(k, 4).getDimSize(1);
  bool staticHeads = !ShapedType::isDynamic(hq) && !ShapedType::isDynamic(hkv);
  if (staticHeads && hq != hkv && !enableGqa)
    return err() << "query heads (" << hq << ") differ from key/value heads ("
                 << hkv << ") but 'flex.enable_gqa' is not set",
           failure();
  if (enableGqa && !staticHeads)
    return err() << "'flex.enable_gqa' needs static head counts to derive "
                    "the group size",
           failure();

  // Regions, built detached first so that failure leaves the IR untouched.
  auto scoreRegion = std::make_unique<Region>();
  auto maskRegion = std::make_unique<Region>();
  SmallVector<Value> captures(buffers.begin(), buffers.end()), constCaptures;
  auto dropNewOps = [&]() {
    scoreRegion.reset();
    maskRegion.reset();
    SmallVector<Operation *> worklist;
    for (Value c : constCaptures)
      worklist.push_back(c.getDefiningOp());
    while (!worklist.empty()) {
      Operation *op = worklist.pop_back_val();
      if (!isOpTriviallyDead(op))
        continue;
      for (Value operand : op->getOperands())
        if (Operation *def = operand.getDefiningOp())
          worklist.push_back(def);
      op->erase();
    }
  };
  ValueRange scoreCaps = ValueRange(captures).take_front(*numScore);
  ValueRange maskCaps = ValueRange(captures).drop_front(*numScore);
  if ((scoreFn &&
       failed(ModifierScalarizer(call, "score_mod", scoreFn, constCaptures)
                  .run(*scoreRegion, scoreBufs, scoreCaps))) ||
      (maskFn &&
       failed(ModifierScalarizer(call, "mask_mod", maskFn, constCaptures)
                  .run(*maskRegion, maskBufs, maskCaps)))) {
    dropNewOps();
    return failure();
  }
  captures.append(constCaptures.begin(), constCaptures.end());

  // Inits.
  OpBuilder b(call);
  Location loc = call.getLoc();
  auto makeInit = [&](RankedTensorType t,
                      ArrayRef<std::pair<Value, int64_t>> dimSrc) -> Value {
    SmallVector<Value> dyn;
    for (auto [d, src] : llvm::enumerate(dimSrc))
      if (t.isDynamicDim(d))
        dyn.push_back(tensor::DimOp::create(b, loc, src.first, src.second));
    return tensor::EmptyOp::create(b, loc, t.getShape(), t.getElementType(),
                                   dyn);
  };
  SmallVector<std::pair<Value, int64_t>> outDims = {
      {q, 0}, {q, 1}, {q, 2}, {v, 3}};
  SmallVector<std::pair<Value, int64_t>> rowDims = {{q, 0}, {q, 1}, {q, 2}};
  bool wantLse = *returnLse || !call.getResult(1).use_empty();
  bool wantMax = *returnMax || !call.getResult(2).use_empty();
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

  auto op = AttentionOp::create(
      b, loc, resultTypes, q, k, v, captures, ValueRange(), outInit, lseInit,
      maxInit,
      b.getF32FloatAttr(static_cast<float>(scaleAttr.getValueAsDouble())),
      IntegerAttr());
  if (scoreFn && !isIdentityModifier(*scoreRegion, /*isScore=*/true))
    op.getScoreMod().takeBody(*scoreRegion);
  if (maskFn && !isIdentityModifier(*maskRegion, /*isScore=*/false))
    op.getMaskMod().takeBody(*maskRegion);

  if (failed(mlir::verify(op))) {
    op.erase();
    for (Value init : {maxInit, lseInit, outInit})
      if (init && init.use_empty())
        init.getDefiningOp()->erase();
    dropNewOps();
    return err() << "the materialized flex.attention does not verify",
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
  for (auto [call, decl] : calls)
    if (failed(rewriteCall(call, decl, symbols, deadDecls, deadMods)))
      failedAny = true;
  if (failedAny)
    return signalPassFailure();

  // Declarations first (they reference the modifiers), then the modifiers.
  for (auto *set : {&deadDecls, &deadMods})
    for (Operation *fn : *set)
      if (SymbolTable::symbolKnownUseEmpty(fn, module))
        symbols.erase(fn);
}
