//===- WidenI1Memrefs.cpp - store i1 memrefs as i8 -------------------------===//
//
// flex-widen-i1-memrefs: rewrite every memref (and unranked memref) of i1 to
// a memref of i8, module-wide. MLIR 22.1.8's finalize-memref-to-llvm asserts
// on memref.load/store of element types narrower than 8 bits; bool tensors
// (model inputs/outputs, bool buffers captured by a mask_mod) bufferize to
// exactly such memrefs.
//
// A memref's element type is storage only: almost every op on memrefs
// (alloc, views, casts, copies, control flow, calls) is agnostic to it, so
// the pass changes the types of values in place and then fixes the few ops
// whose semantics tie the element type to a scalar:
//   memref.load / affine.load     -> load i8 + arith.trunci to i1
//   memref.store / affine.store   -> arith.extui to i8 + store
//   memref.global                 -> i8 type, initial value converted
//   linalg ops on memrefs         -> payload block args i8 (+ trunci), yielded
//                                    values for widened inits extui'd
//   bufferization.to_tensor       -> tensor<..xi8> + arith.trunci to tensor<..xi1>
//   bufferization.to_buffer       -> arith.extui of the tensor first
// Functions (signatures, declarations), calls, returns, scf/cf/affine region
// ops and the memref view ops follow from the value types.
//
// The whole module is checked first: an op on a memref of i1 the pass does
// not know is an error naming that op, and nothing is rewritten.
//
//===----------------------------------------------------------------------===//
#include "torch-mlir-flex/Dialect/Flex/Transforms/Passes.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"

namespace mlir::flex {
#define GEN_PASS_DEF_FLEXWIDENI1MEMREFS
#include "torch-mlir-flex/Dialect/Flex/Transforms/Passes.h.inc"
} // namespace mlir::flex

using namespace mlir;

namespace {

bool isI1(Type t) { return t.isSignlessInteger(1); }

/// memref<..xi1> -> memref<..xi8> (also unranked, and inside function types);
/// every other type unchanged.
Type widen(Type t) {
  MLIRContext *ctx = t.getContext();
  if (auto m = dyn_cast<MemRefType>(t)) {
    if (!isI1(m.getElementType()))
      return t;
    return MemRefType::Builder(m).setElementType(IntegerType::get(ctx, 8));
  }
  if (auto u = dyn_cast<UnrankedMemRefType>(t)) {
    if (!isI1(u.getElementType()))
      return t;
    return UnrankedMemRefType::get(IntegerType::get(ctx, 8),
                                   u.getMemorySpace());
  }
  if (auto f = dyn_cast<FunctionType>(t)) {
    SmallVector<Type> ins, outs;
    for (Type i : f.getInputs())
      ins.push_back(widen(i));
    for (Type r : f.getResults())
      outs.push_back(widen(r));
    return FunctionType::get(ctx, ins, outs);
  }
  return t;
}

bool needsWidening(Type t) { return widen(t) != t; }

bool anyNeedsWidening(TypeRange types) {
  return llvm::any_of(types, needsWidening);
}

/// True if `op` has an operand, result or region argument to widen (or, for
/// functions and globals, a type attribute to widen).
bool touchesI1Memref(Operation *op) {
  if (anyNeedsWidening(op->getOperandTypes()) ||
      anyNeedsWidening(op->getResultTypes()))
    return true;
  if (auto fn = dyn_cast<FunctionOpInterface>(op))
    if (needsWidening(fn.getFunctionType()))
      return true;
  if (auto g = dyn_cast<memref::GlobalOp>(op))
    if (needsWidening(g.getType()))
      return true;
  for (Region &region : op->getRegions())
    for (Block &block : region)
      if (anyNeedsWidening(block.getArgumentTypes()))
        return true;
  return false;
}

/// Ops whose semantics do not depend on the element type of their memrefs:
/// widening their memref values in place keeps them valid.
bool isElementTypeAgnostic(Operation *op) {
  if (isa<memref::AllocOp, memref::AllocaOp, memref::DeallocOp,
          memref::SubViewOp, memref::CastOp, memref::ReinterpretCastOp,
          memref::ExpandShapeOp, memref::CollapseShapeOp, memref::ReshapeOp,
          memref::DimOp,
          memref::RankOp, memref::CopyOp, memref::TransposeOp,
          memref::ReallocOp, memref::ViewOp, memref::ExtractStridedMetadataOp,
          memref::ExtractAlignedPointerAsIndexOp, memref::AssumeAlignmentOp,
          memref::MemorySpaceCastOp, memref::AllocaScopeOp,
          memref::AllocaScopeReturnOp, memref::GetGlobalOp>(op))
    return true;
  if (isa<func::FuncOp, func::CallOp, func::ReturnOp>(op))
    return true;
  if (isa<bufferization::DeallocOp, bufferization::CloneOp>(op))
    return true;
  if (isa<arith::SelectOp>(op))
    return true;
  if (isa<affine::AffineForOp, affine::AffineIfOp, affine::AffineYieldOp,
          affine::AffineParallelOp>(op))
    return true;
  // Structured control flow only forwards values.
  Dialect *dialect = op->getDialect(); // null for unregistered ops
  if (dialect && (dialect->getNamespace() == "scf" ||
                  dialect->getNamespace() == "cf"))
    return true;
  return false;
}

/// The i8 version of an i1 memref.global initial value; failure (after an
/// error on `g`) if it cannot be converted.
FailureOr<Attribute> widenInitialValue(memref::GlobalOp g) {
  std::optional<Attribute> init = g.getInitialValue();
  if (!init || isa<UnitAttr>(*init))
    return init ? *init : Attribute();
  auto i8 = IntegerType::get(g.getContext(), 8);
  if (auto dense = dyn_cast<DenseIntElementsAttr>(*init)) {
    if (!isI1(dense.getElementType())) {
      g.emitOpError("flex-widen-i1-memrefs: initial value is not of i1");
      return failure();
    }
    return Attribute(
        dense.mapValues(i8, [](const APInt &v) { return v.zext(8); }));
  }
  if (auto res = dyn_cast<DenseBoolResourceElementsAttr>(*init)) {
    auto tensorTy = cast<ShapedType>(res.getType());
    auto newTy = RankedTensorType::get(tensorTy.getShape(), i8);
    std::optional<ArrayRef<bool>> data = res.tryGetAsArrayRef();
    if (!data || !tensorTy.hasStaticShape() ||
        (int64_t)data->size() != tensorTy.getNumElements()) {
      g.emitOpError("flex-widen-i1-memrefs: cannot read the dense_resource "
                    "initial value (missing or of unexpected size)");
      return failure();
    }
    SmallVector<int8_t> bytes;
    bytes.reserve(data->size());
    for (bool b : *data)
      bytes.push_back(b ? 1 : 0);
    return Attribute(DenseElementsAttr::get(newTy, ArrayRef<int8_t>(bytes)));
  }
  g.emitOpError("flex-widen-i1-memrefs: unsupported initial value ")
      << *init << " for a memref of i1";
  return failure();
}

/// Checks that `op` (which touches a memref of i1) can be rewritten.
LogicalResult checkOp(Operation *op) {
  if (isa<memref::LoadOp, affine::AffineLoadOp>(op)) {
    if (op->getNumResults() != 1 || !isI1(op->getResult(0).getType()))
      return op->emitOpError("flex-widen-i1-memrefs: expected an i1 result");
    return success();
  }
  if (isa<memref::StoreOp, affine::AffineStoreOp>(op)) {
    if (op->getNumOperands() < 2 || !isI1(op->getOperand(0).getType()) ||
        !needsWidening(op->getOperand(1).getType()))
      return op->emitOpError(
          "flex-widen-i1-memrefs: expected an i1 value stored to a memref of i1");
    return success();
  }
  if (auto g = dyn_cast<memref::GlobalOp>(op)) {
    if (!isa<MemRefType>(g.getType()))
      return op->emitOpError("flex-widen-i1-memrefs: expected a ranked memref");
    return widenInitialValue(g); // dry run: only the diagnostics matter here
  }
  if (isa<bufferization::ToTensorOp, bufferization::ToBufferOp>(op)) {
    Type tensor = isa<bufferization::ToTensorOp>(op)
                      ? op->getResult(0).getType()
                      : op->getOperand(0).getType();
    auto tt = dyn_cast<RankedTensorType>(tensor);
    if (!tt || !isI1(tt.getElementType()))
      return op->emitOpError(
          "flex-widen-i1-memrefs: expected a ranked tensor of i1");
    return success();
  }
  if (auto linalgOp = dyn_cast<linalg::LinalgOp>(op)) {
    if (!linalgOp.hasPureBufferSemantics())
      return op->emitOpError("flex-widen-i1-memrefs: linalg op on memrefs of "
                             "i1 mixed with tensors");
    if (op->getNumRegions() != 1 || !op->getRegion(0).hasOneBlock())
      return op->emitOpError(
          "flex-widen-i1-memrefs: expected a single-block payload");
    Block &body = op->getRegion(0).front();
    for (OpOperand &operand : op->getOpOperands()) {
      if (!needsWidening(operand.get().getType()))
        continue;
      unsigned i = operand.getOperandNumber();
      if (i < body.getNumArguments() && !isI1(body.getArgument(i).getType()))
        return op->emitOpError("flex-widen-i1-memrefs: payload argument #")
               << i << " of a memref of i1 operand is not i1";
    }
    auto yield = body.empty() ? nullptr : dyn_cast<linalg::YieldOp>(body.back());
    if (!yield || yield->getNumOperands() != linalgOp.getNumDpsInits())
      return op->emitOpError(
          "flex-widen-i1-memrefs: expected one yielded value per init");
    return success();
  }
  if (isElementTypeAgnostic(op))
    return success();
  return op->emitOpError("flex-widen-i1-memrefs: unsupported op on a memref "
                         "of i1 (cannot widen it to i8)");
}

struct FlexWidenI1MemrefsPass
    : public flex::impl::FlexWidenI1MemrefsBase<FlexWidenI1MemrefsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    Type i1 = IntegerType::get(ctx, 1), i8 = IntegerType::get(ctx, 8);

    // 1. Check everything before touching anything.
    bool ok = true;
    SmallVector<Operation *> touched;
    module.walk([&](Operation *op) {
      if (!touchesI1Memref(op))
        return;
      if (failed(checkOp(op)))
        ok = false;
      touched.push_back(op);
    });
    if (!ok)
      return signalPassFailure();
    if (touched.empty())
      return;

    // 2. Types: globals, function signatures, every value.
    for (Operation *op : touched) {
      if (auto g = dyn_cast<memref::GlobalOp>(op)) {
        FailureOr<Attribute> init = widenInitialValue(g);
        if (failed(init)) // checked above
          return signalPassFailure();
        g.setType(cast<MemRefType>(widen(g.getType())));
        if (*init)
          g.setInitialValueAttr(*init);
      } else if (auto fn = dyn_cast<FunctionOpInterface>(op)) {
        fn.setFunctionTypeAttr(TypeAttr::get(widen(fn.getFunctionType())));
      }
      for (OpResult r : op->getResults())
        r.setType(widen(r.getType()));
      for (Region &region : op->getRegions())
        for (Block &block : region)
          for (BlockArgument arg : block.getArguments())
            arg.setType(widen(arg.getType()));
    }

    // 3. Ops that tie the element type to a scalar.
    OpBuilder b(ctx);
    for (Operation *op : touched) {
      Location loc = op->getLoc();
      if (isa<memref::LoadOp, affine::AffineLoadOp>(op)) {
        Value v = op->getResult(0);
        v.setType(i8);
        b.setInsertionPointAfter(op);
        auto t = arith::TruncIOp::create(b, loc, i1, v);
        v.replaceAllUsesExcept(t, t);
      } else if (isa<memref::StoreOp, affine::AffineStoreOp>(op)) {
        b.setInsertionPoint(op);
        op->setOperand(0, arith::ExtUIOp::create(b, loc, i8, op->getOperand(0)));
      } else if (auto tt = dyn_cast<bufferization::ToTensorOp>(op)) {
        Value v = tt.getResult();
        auto ty = cast<RankedTensorType>(v.getType());
        v.setType(ty.clone(i8));
        b.setInsertionPointAfter(op);
        auto t = arith::TruncIOp::create(b, loc, ty, v);
        v.replaceAllUsesExcept(t, t);
      } else if (isa<bufferization::ToBufferOp>(op)) {
        auto ty = cast<RankedTensorType>(op->getOperand(0).getType());
        b.setInsertionPoint(op);
        op->setOperand(0, arith::ExtUIOp::create(b, loc, ty.clone(i8),
                                                 op->getOperand(0)));
      } else if (auto linalgOp = dyn_cast<linalg::LinalgOp>(op)) {
        widenLinalgPayload(linalgOp, b);
      }
    }
  }

  /// i1 block argument -> i8, its uses get an arith.trunci at block start.
  static void widenBlockArg(BlockArgument arg, OpBuilder &b) {
    MLIRContext *ctx = arg.getContext();
    arg.setType(IntegerType::get(ctx, 8));
    if (arg.use_empty())
      return;
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(arg.getOwner());
    auto t = arith::TruncIOp::create(b, arg.getLoc(), IntegerType::get(ctx, 1),
                                     arg);
    arg.replaceAllUsesExcept(t, t);
  }

  /// After the memref operands were widened: payload arguments of widened
  /// operands become i8 (their uses get an arith.trunci), values yielded for
  /// widened inits are extended to i8.
  static void widenLinalgPayload(linalg::LinalgOp op, OpBuilder &b) {
    MLIRContext *ctx = op->getContext();
    Type i1 = IntegerType::get(ctx, 1), i8 = IntegerType::get(ctx, 8);
    Block &body = op->getRegion(0).front();
    // linalg.fill requires its value to be of the output element type.
    auto fill = dyn_cast<linalg::FillOp>(op.getOperation());
    if (fill && fill.getInputs().size() == 1 && fill.getOutputs().size() == 1) {
      Value v = fill.getInputs()[0];
      auto mt = dyn_cast<MemRefType>(fill.getOutputs()[0].getType());
      if (mt && mt.getElementType() == i8 && isI1(v.getType())) {
        b.setInsertionPoint(fill);
        fill->setOperand(0, arith::ExtUIOp::create(b, fill.getLoc(), i8, v));
        if (body.getNumArguments() > 0 && isI1(body.getArgument(0).getType()))
          widenBlockArg(body.getArgument(0), b);
      }
    }
    b.setInsertionPointToStart(&body);
    for (OpOperand &operand : op->getOpOperands()) {
      auto mt = dyn_cast<MemRefType>(operand.get().getType());
      unsigned i = operand.getOperandNumber();
      if (!mt || mt.getElementType() != i8 || i >= body.getNumArguments())
        continue;
      BlockArgument arg = body.getArgument(i);
      if (!isI1(arg.getType()))
        continue; // an i8 memref to begin with
      widenBlockArg(arg, b);
    }
    Operation *yield = body.getTerminator();
    b.setInsertionPoint(yield);
    for (auto [k, init] : llvm::enumerate(op.getDpsInitsMutable())) {
      auto mt = dyn_cast<MemRefType>(init.get().getType());
      Value y = yield->getOperand(k);
      if (mt && mt.getElementType() == i8 && isI1(y.getType()))
        yield->setOperand(k, arith::ExtUIOp::create(b, y.getLoc(), i8, y));
    }
  }
};

} // namespace
