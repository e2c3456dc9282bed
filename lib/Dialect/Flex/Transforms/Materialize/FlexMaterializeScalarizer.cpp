//===- FlexMaterializeScalarizer.cpp - modifier function -> region body ---===//
//
// The scalar part of flex-materialize's ModifierScalarizer: unit tensors
// as scalars, constants (tables are captured),
// elementwise and scalar arith/math ops, and running a half-precision
// score_mod in f32. Linalg ops and larger tensors are in
// FlexMaterializeLinalg.cpp, the region signature and yield in
// FlexMaterializeSignature.cpp.
//
//===----------------------------------------------------------------------===//
#include "FlexMaterializeScalarizer.h"

#include "torch-mlir-flex/Dialect/Flex/IR/FlexOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

using namespace mlir;
using namespace mlir::flex;
using namespace mlir::flex::materialize;

//===----------------------------------------------------------------------===//
// Type helpers
//===----------------------------------------------------------------------===//

/// A ranked tensor with a static shape of all ones (including rank 0): holds
/// exactly one element and is scalarized to it.
bool materialize::isUnitTensor(Type t) {
  auto rt = dyn_cast<RankedTensorType>(t);
  return rt && rt.hasStaticShape() &&
         llvm::all_of(rt.getShape(), [](int64_t d) { return d == 1; });
}

/// The scalar a modifier value of type `t` stands for: the element type of a
/// unit tensor, `t` itself if not shaped, null otherwise.
Type materialize::scalarTypeOf(Type t) {
  if (isUnitTensor(t))
    return cast<RankedTensorType>(t).getElementType();
  if (isa<ShapedType>(t))
    return {};
  return t;
}


/// With f16/bf16 inputs torch.export traces the score_mod on scores of the
/// query dtype, while eager flex_attention calls it on f32 scores. Retypes
/// the scalarized region so the modifier runs in f32: results of type
/// `half` become f32 (constants converted, extf/truncf between them folded);
/// reads of captured `half` tensors are extended right after the read.
/// Nested ops (reduction loops over captured rows) are retyped too, with
/// the block arguments of their regions.
void materialize::retypeHalfToF32(Block *block, Type half) {
  OpBuilder b(half.getContext());
  Type f32 = b.getF32Type();
  SmallVector<Operation *> ops;
  block->walk<WalkOrder::PreOrder>([&](Operation *op) { ops.push_back(op); });
  for (Operation *op : ops) {
    for (Region &r : op->getRegions())
      for (Block &blk : r)
        for (BlockArgument arg : blk.getArguments())
          if (arg.getType() == half)
            arg.setType(f32);
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

std::string materialize::typeStr(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << t;
  return s;
}

//===----------------------------------------------------------------------===//
// ModifierScalarizer
//===----------------------------------------------------------------------===//

InFlightDiagnostic ModifierScalarizer::error() {
  return callSite->emitError() << kPassName << ": ";
}

LogicalResult ModifierScalarizer::fail(Operation *op, const Twine &reason) {
  InFlightDiagnostic d = error();
  d << "cannot scalarize '" << op->getName() << "' in " << kind << " @"
    << fn.getSymName();
  d.attachNote(op->getLoc()) << reason;
  return failure();
}

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
      if (loopDepth == 0)
        scalars.map(v, s);
      return s;
    }
    return fail(user, "operand #" +
                          Twine(llvm::find(user->getOperands(), v) -
                                user->getOperands().begin()) +
                          " is a tensor of type " + typeStr(v.getType()) +
                          " with more than one element");
  }
  if (isUnitTensor(v.getType()) && lazy.count(v)) {
    // A unit tensor computed from larger ones (a reduction's result).
    auto rt = cast<RankedTensorType>(v.getType());
    Value zero = arith::ConstantIndexOp::create(builder, v.getLoc(), 0);
    FailureOr<Value> s =
        readElement(user, v, SmallVector<Value>(rt.getRank(), zero));
    if (succeeded(s) && loopDepth == 0)
      scalars.map(v, *s);
    return s;
  }
  if (lazy.count(v))
    return fail(user, "operand #" +
                          Twine(llvm::find(user->getOperands(), v) -
                                user->getOperands().begin()) +
                          " is a tensor of type " + typeStr(v.getType()) +
                          " with more than one element where a scalar is "
                          "expected");
  if (uninitialized.contains(v))
    return fail(user, "reads the contents of an uninitialized tensor.empty");
  return fail(user, "operand of type " + typeStr(v.getType()) +
                        " is not a scalar or 0-d tensor computed in the "
                        "modifier");
}

LogicalResult ModifierScalarizer::run(Region &region, ValueRange captures,
                                      ValueRange mapped) {
  Location loc = fn.getLoc();
  unsigned first = numLeading(), nFixed = numFixed();

  if (failed(checkSignature(captures)))
    return failure();

  // Region block with the flex signature.
  Type idxTy = builder.getIndexType(), f32 = builder.getF32Type();
  SmallVector<Type> argTypes;
  if (first)
    argTypes.push_back(f32);
  argTypes.append(4, idxTy);
  if (isJoint())
    argTypes.push_back(f32);
  Block *block = new Block();
  region.push_back(block);
  block->addArguments(argTypes, SmallVector<Location>(argTypes.size(), loc));
  builder.setInsertionPointToEnd(block);

  Block &body = fn.getBody().front();
  if (first)
    scalars.map(body.getArgument(0), block->getArgument(0));
  if (isJoint())
    scalars.map(body.getArgument(5), block->getArgument(5));
  for (unsigned i = first; i < first + 4; ++i) {
    Value arg = body.getArgument(i);
    Type st = scalarTypeOf(arg.getType());
    Value s = block->getArgument(i);
    if (!st.isIndex())
      s = arith::IndexCastOp::create(builder, arg.getLoc(), st, s);
    scalars.map(arg, s);
  }
  for (auto [i, cap] : llvm::enumerate(mapped))
    tensors.map(body.getArgument(nFixed + i), cap);

  for (Operation &op : body) {
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      if (failed(emitYield(ret)))
        return failure();
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
  if (isJoint())
    fixJointYieldTypes(block);

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
  // Unused side-effect-free leftovers need no scalar form.
  if (isOpTriviallyDead(op))
    return success();

  if (auto cst = dyn_cast<arith::ConstantOp>(op))
    return processConstant(cst);

  if (auto empty = dyn_cast<tensor::EmptyOp>(op)) {
    // Its users report an error if they read it (a linalg init whose
    // payload argument is unused is never read).
    uninitialized.insert(empty.getResult());
    return success();
  }

  if (auto extract = dyn_cast<tensor::ExtractOp>(op))
    return processExtract(extract);

  if (auto dim = dyn_cast<tensor::DimOp>(op))
    return processDim(dim);

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

  if (isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp, tensor::CastOp,
          tensor::ReshapeOp, tensor::ExtractSliceOp>(op))
    return processView(op);

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

/// Constants: unit tensors become scalars, tables stay whole tensors.
LogicalResult ModifierScalarizer::processConstant(arith::ConstantOp cst) {
  Operation *op = cst.getOperation();
  Location loc = op->getLoc();
  Type t = cst.getType();
  if (!isa<ShapedType>(t))
    return processScalarOp(op);
  if (!isa<RankedTensorType>(t))
    return fail(op, "constant of type " + typeStr(t) +
                        " is not a ranked tensor");
  // A splat: every element is one scalar constant (a lazy tensor if larger).
  auto dense = dyn_cast<DenseElementsAttr>(cst.getValue());
  if (dense && dense.isSplat()) {
    auto elt = dyn_cast<TypedAttr>(dense.getSplatValue<Attribute>());
    if (elt && arith::ConstantOp::isBuildableWith(elt, elt.getType())) {
      if (isUnitTensor(t)) {
        scalars.map(cst.getResult(),
                    arith::ConstantOp::create(builder, loc, elt));
        return success();
      }
      lazy[cst.getResult()] = [this, elt, loc](Operation *,
                                              ValueRange) -> FailureOr<Value> {
        return arith::ConstantOp::create(builder, loc, elt).getResult();
      };
      return success();
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

