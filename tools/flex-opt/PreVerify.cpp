//===- PreVerify.cpp - reject inputs MLIR 22.1.8 aborts on ----------------===//
#include "PreVerify.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Verifier.h"
#include "llvm/Support/Regex.h"
#include "llvm/Support/SourceMgr.h"

using namespace mlir;

/// Static shapes (tensor<AxBx...>, memref<...>, vector<...>) with more than
/// 2^56 elements: the parser and passes assert computing their element count
/// or strides ("integer overflow in ..."). The cap keeps the size in bits of
/// any element type in range.
static constexpr uint64_t kMaxElements = uint64_t(1) << 56;

/// Position of the first shaped type in `line` with too many elements.
static size_t findHugeShape(StringRef line) {
  for (StringRef kind : {"tensor<", "memref<", "vector<"}) {
    for (size_t at = line.find(kind); at != StringRef::npos;
         at = line.find(kind, at + 1)) {
      StringRef rest = line.drop_front(at + kind.size());
      uint64_t elements = 1;
      while (true) {
        rest = rest.ltrim().ltrim('[');
        uint64_t dim;
        if (!rest.consumeInteger(10, dim)) {
          if (dim != 0 && elements > kMaxElements / dim)
            return at;
          elements *= std::max<uint64_t>(dim, 1);
        } else if (!rest.consume_front("?")) {
          break;
        }
        rest = rest.ltrim().ltrim(']').ltrim();
        if (!rest.consume_front("x"))
          break;
      }
    }
  }
  return StringRef::npos;
}

/// The entries of each `key = [...]` list on `line`, with the position of
/// its key; `skip(before)` (the line up to the key) passes over a list.
/// Returns the position of the first list with an entry `bad` accepts, or
/// npos.
static size_t findBadListEntry(StringRef line, StringRef key,
                               function_ref<bool(StringRef)> bad,
                               function_ref<bool(StringRef)> skip = nullptr) {
  for (size_t at = line.find(key); at != StringRef::npos;
       at = line.find(key, at + 1)) {
    if (skip && skip(line.take_front(at)))
      continue;
    StringRef rest = line.drop_front(at + key.size()).ltrim();
    if (!rest.consume_front("="))
      continue;
    rest = rest.ltrim();
    if (!rest.consume_front("["))
      continue;
    StringRef list = rest.take_until([](char c) { return c == ']'; });
    SmallVector<StringRef> entries;
    list.split(entries, ',');
    for (StringRef entry : entries)
      if (!entry.trim().empty() && bad(entry.trim()))
        return at;
  }
  return StringRef::npos;
}

/// Position of a `permutation = [...]` / `dimensions = [...]` list (the
/// custom forms of linalg.transpose, broadcast, reduce) with an entry that
/// is not an integer: their parsers set a null attribute after the failed
/// integer parse, and NamedAttrList::set asserts.
static size_t findNonIntegerPermutation(StringRef line) {
  auto notInteger = [](StringRef entry) {
    int64_t value;
    return entry.getAsInteger(10, value);
  };
  for (StringRef key : {"permutation", "dimensions"})
    if (size_t at = findBadListEntry(line, key, notInteger);
        at != StringRef::npos)
      return at;
  return StringRef::npos;
}

/// Position of an `iterator_types = [...]` list with an entry that is not
/// a string, in a custom op form (linalg.generic, vector.contract): their
/// parsers cast each entry to a string attribute, which asserts. A line in
/// the generic op form (`"op"(` or `<{`) holds #linalg.iterator_type
/// attributes there and is skipped.
static size_t findNonStringIteratorType(StringRef line) {
  auto notString = [](StringRef entry) {
    return entry.size() < 2 || !entry.starts_with("\"") ||
           !entry.ends_with("\"") ||
           entry.drop_front().drop_back().contains('"');
  };
  auto genericForm = [](StringRef before) {
    return before.contains("<{") || before.contains("\"(");
  };
  return findBadListEntry(line, "iterator_types", notString, genericForm);
}

static void printError(const llvm::MemoryBuffer &buffer, const char *at,
                       const Twine &message) {
  llvm::SourceMgr mgr;
  mgr.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBuffer(
                             buffer.getBuffer(), buffer.getBufferIdentifier()),
                         llvm::SMLoc());
  mgr.PrintMessage(llvm::SMLoc::getFromPointer(at), llvm::SourceMgr::DK_Error,
                   message);
}

LogicalResult
mlir::flex::checkKnownParserAborts(const llvm::MemoryBuffer &buffer) {
  // parseDenseArrayAttr asserts "only integers and floats have a bitwidth".
  llvm::Regex arrayOfIndex(
      "array[[:space:]]*<[[:space:]]*index([^_[:alnum:]]|$)");
  StringRef text = buffer.getBuffer();
  for (size_t pos = 0; pos < text.size();) {
    size_t eol = text.find('\n', pos);
    StringRef line = text.slice(pos, eol).split("//").first;
    SmallVector<StringRef, 1> match;
    if (arrayOfIndex.match(line, &match)) {
      printError(buffer, match[0].data(),
                 "a dense array attribute of index elements (array<index: "
                 "...>) is not supported (it crashes the MLIR 22.1.8 "
                 "parser); use array<i32: ...> or array<i64: ...>");
      return failure();
    }
    if (size_t at = findNonIntegerPermutation(line); at != StringRef::npos) {
      printError(buffer, line.data() + at,
                 "a non-integer entry in a `permutation = [...]` or "
                 "`dimensions = [...]` list is not supported (it crashes the "
                 "MLIR 22.1.8 parser of linalg.transpose / broadcast / "
                 "reduce); write integers");
      return failure();
    }
    if (size_t at = findNonStringIteratorType(line); at != StringRef::npos) {
      printError(buffer, line.data() + at,
                 "an `iterator_types = [...]` entry that is not a string is "
                 "not supported (it crashes the MLIR 22.1.8 parser of "
                 "linalg.generic / vector.contract); write \"parallel\" or "
                 "\"reduction\"");
      return failure();
    }
    if (size_t at = findHugeShape(line); at != StringRef::npos) {
      printError(
          buffer, line.data() + at,
          "a shaped type with a dimension or element count above 2^56 is "
          "not supported "
          "(MLIR 22.1.8 crashes computing its size)");
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
        return op->emitOpError() << "'" << attr.getName().getValue()
                                 << "' holds " << v << ": sizes must be >= 0";
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
struct PreVerifyPass : public PassWrapper<PreVerifyPass, OperationPass<>> {
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
