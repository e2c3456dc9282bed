//===- PreVerify.cpp - reject inputs MLIR 22.1.8 aborts on ----------------===//
#include "PreVerify.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Verifier.h"
#include "llvm/Support/Regex.h"
#include "llvm/Support/SourceMgr.h"

using namespace mlir;

LogicalResult
mlir::flex::checkKnownParserAborts(const llvm::MemoryBuffer &buffer) {
  // parseDenseArrayAttr asserts "only integers and floats have a bitwidth".
  llvm::Regex arrayOfIndex("array[[:space:]]*<[[:space:]]*index([^_[:alnum:]]|$)");
  StringRef text = buffer.getBuffer();
  for (size_t pos = 0; pos < text.size();) {
    size_t eol = text.find('\n', pos);
    StringRef line = text.slice(pos, eol).split("//").first;
    SmallVector<StringRef, 1> match;
    if (arrayOfIndex.match(line, &match)) {
      llvm::SourceMgr mgr;
      mgr.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBuffer(
                                 buffer.getBuffer(), buffer.getBufferIdentifier()),
                             llvm::SMLoc());
      mgr.PrintMessage(llvm::SMLoc::getFromPointer(match[0].data()),
                       llvm::SourceMgr::DK_Error,
                       "a dense array attribute of index elements "
                       "(array<index: ...>) is not supported (it crashes the "
                       "MLIR 22.1.8 parser); use array<i32: ...> or "
                       "array<i64: ...>");
      return failure();
    }
    if (eol == StringRef::npos)
      break;
    pos = eol + 1;
  }
  return success();
}

/// Transform ops take sizes (tile sizes, thread counts, vector sizes, chunk
/// and packed sizes, ...) as `static_*` i64 arrays where ShapedType::kDynamic
/// (INT64_MIN) stands for the next SSA operand. Upstream asserts when there
/// are more kDynamic entries than operands (the verifier of
/// tile_using_for/forall), and when a negative size reaches tiling
/// (RankedTensorType::get on a negative dim).
static LogicalResult checkTransformSizes(Operation *op) {
  if (op->getName().getDialectNamespace() != "transform")
    return success();
  int64_t dynamic = 0;
  for (NamedAttribute attr : op->getAttrs()) {
    auto values = dyn_cast<DenseI64ArrayAttr>(attr.getValue());
    if (!values || !attr.getName().getValue().starts_with("static_"))
      continue;
    for (int64_t v : values.asArrayRef()) {
      if (ShapedType::isDynamic(v)) {
        ++dynamic;
        continue;
      }
      if (v < 0)
        return op->emitOpError()
               << "'" << attr.getName().getValue() << "' holds " << v
               << ": sizes must be >= 0";
    }
  }
  int64_t operands = static_cast<int64_t>(op->getNumOperands()) - 1;
  if (dynamic > std::max<int64_t>(operands, 0))
    return op->emitOpError()
           << "has " << dynamic
           << " dynamic sizes (INT64_MIN, "
              "-9223372036854775808, stands for an SSA size) but only "
           << std::max<int64_t>(operands, 0) << " size operands";
  return success();
}

namespace {
struct PreVerifyPass
    : public PassWrapper<PreVerifyPass, OperationPass<>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(PreVerifyPass)
  StringRef getArgument() const final { return "flex-pre-verify"; }
  void runOnOperation() override {
    WalkResult r = getOperation()->walk([](Operation *op) {
      return failed(checkTransformSizes(op)) ? WalkResult::interrupt()
                                             : WalkResult::advance();
    });
    if (r.wasInterrupted() || failed(verify(getOperation())))
      return signalPassFailure();
    markAllAnalysesPreserved();
  }
};
} // namespace

std::unique_ptr<Pass> mlir::flex::createPreVerifyPass() {
  return std::make_unique<PreVerifyPass>();
}
