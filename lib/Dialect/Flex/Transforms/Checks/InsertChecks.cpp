//===- InsertChecks.cpp - guard data-dependent reads, record asserts ------===//
//
// flex-insert-checks: every tensor.extract in a flex.attention region or a
// linalg.generic body whose index is not provably in range gets a
// flex.check and an in-range read; cf.assert becomes flex.check; the block
// tensors of flex.attention get their checks (BlockTensors.h). See
// Passes.td for the contract.
//
//===----------------------------------------------------------------------===//
#include "torch-mlir-flex/Dialect/Flex/IR/BlockTensors.h"
#include "torch-mlir-flex/Dialect/Flex/IR/FlexOps.h"
#include "torch-mlir-flex/Dialect/Flex/Transforms/IndexWraps.h"
#include "torch-mlir-flex/Dialect/Flex/Transforms/Passes.h"

#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/IR/Matchers.h"

#include <optional>

namespace mlir::flex {
#define GEN_PASS_DEF_FLEXINSERTCHECKS
#include "torch-mlir-flex/Dialect/Flex/Transforms/Passes.h.inc"
} // namespace mlir::flex

using namespace mlir;
using namespace mlir::flex;

namespace {

/// Inclusive integer interval.
struct Range {
  int64_t lo, hi;
};

constexpr int64_t kRangeLimit = int64_t(1) << 40;

std::optional<Range> clampRange(__int128 lo, __int128 hi) {
  if (lo < -kRangeLimit || hi > kRangeLimit)
    return std::nullopt;
  return Range{int64_t(lo), int64_t(hi)};
}

/// Static extent of the (b, h, q_idx, kv_idx) block argument `arg` of a
/// flex.attention or flex.attention_backward region, or nullopt.
template <typename OpTy>
std::optional<int64_t> regionArgExtent(OpTy op, BlockArgument arg) {
  if (!op.getOffsets().empty())
    return std::nullopt; // tiled: the indices are global
  // score_mod and joint start with the score.
  bool hasScoreArg = arg.getOwner()->getParent() != &op.getMaskMod();
  int64_t pos = int64_t(arg.getArgNumber()) - (hasScoreArg ? 1 : 0);
  if (pos < 0 || pos > 3)
    return std::nullopt; // the score (or the joint's grad)
  int64_t ext = pos == 3 ? op.getKeyType().getShape()[2]
                         : op.getQueryType().getShape()[pos];
  if (ShapedType::isDynamic(ext))
    return std::nullopt;
  return ext;
}

std::optional<Range> rangeOf(Value v, int depth);

/// Remainder / quotient by a positive constant (torch-mlir's roll, modular
/// positions): [0, c-1] (or symmetric for a possibly negative signed
/// dividend), quotient of a range.
std::optional<Range> remOrDivRange(Operation *op, int depth) {
  if (!isa<arith::RemSIOp, arith::RemUIOp, arith::DivSIOp, arith::DivUIOp,
           arith::FloorDivSIOp>(op))
    return std::nullopt;
  APInt c;
  if (!matchPattern(op->getOperand(1), m_ConstantInt(&c)) ||
      c.getSExtValue() <= 0)
    return std::nullopt;
  int64_t d = c.getSExtValue();
  auto a = rangeOf(op->getOperand(0), depth + 1);
  bool nonNeg = a && a->lo >= 0;
  if (isa<arith::RemUIOp>(op) || (isa<arith::RemSIOp>(op) && nonNeg))
    return Range{0, d - 1};
  if (isa<arith::RemSIOp>(op))
    return Range{-(d - 1), d - 1};
  if (!a || (isa<arith::DivUIOp>(op) && !nonNeg))
    return std::nullopt;
  auto floorDiv = [d](int64_t x) {
    return x >= 0 ? x / d : -((-x + d - 1) / d);
  };
  if (isa<arith::FloorDivSIOp>(op))
    return Range{floorDiv(a->lo), floorDiv(a->hi)};
  return Range{a->lo / d, a->hi / d}; // truncating division is monotonic
}

/// Interval of the integer/index value `v` by interval arithmetic over
/// constants, region indices and linalg.index, or nullopt.
std::optional<Range> rangeOf(Value v, int depth) {
  if (depth > 12)
    return std::nullopt;
  APInt c;
  if (matchPattern(v, m_ConstantInt(&c)))
    return Range{c.getSExtValue(), c.getSExtValue()};
  if (auto arg = dyn_cast<BlockArgument>(v)) {
    Operation *owner = arg.getOwner()->getParentOp();
    std::optional<int64_t> ext;
    if (auto attn = dyn_cast_or_null<AttentionOp>(owner))
      ext = regionArgExtent(attn, arg);
    else if (auto bw = dyn_cast_or_null<AttentionBackwardOp>(owner))
      ext = regionArgExtent(bw, arg);
    if (!ext || *ext <= 0)
      return std::nullopt;
    return Range{0, *ext - 1};
  }
  Operation *op = v.getDefiningOp();
  if (auto idx = dyn_cast<linalg::IndexOp>(op)) {
    auto generic = dyn_cast<linalg::LinalgOp>(idx->getParentOp());
    if (!generic)
      return std::nullopt;
    int64_t ext = generic.getStaticLoopRanges()[idx.getDim()];
    if (ShapedType::isDynamic(ext) || ext <= 0)
      return std::nullopt;
    return Range{0, ext - 1};
  }
  if (isa<arith::IndexCastOp, arith::ExtSIOp>(op))
    return rangeOf(op->getOperand(0), depth + 1);
  if (isa<arith::ExtUIOp, arith::IndexCastUIOp>(op)) {
    auto r = rangeOf(op->getOperand(0), depth + 1);
    return r && r->lo >= 0 ? r : std::nullopt;
  }
  if (auto r = remOrDivRange(op, depth))
    return r;
  if (isa<arith::AddIOp, arith::SubIOp, arith::MulIOp, arith::MinSIOp,
          arith::MaxSIOp, arith::SelectOp>(op)) {
    unsigned first = isa<arith::SelectOp>(op) ? 1 : 0;
    auto a = rangeOf(op->getOperand(first), depth + 1);
    auto b = rangeOf(op->getOperand(first + 1), depth + 1);
    if (!a || !b)
      return std::nullopt;
    using I = __int128;
    if (isa<arith::AddIOp>(op))
      return clampRange(I(a->lo) + b->lo, I(a->hi) + b->hi);
    if (isa<arith::SubIOp>(op))
      return clampRange(I(a->lo) - b->hi, I(a->hi) - b->lo);
    if (isa<arith::MinSIOp>(op))
      return Range{std::min(a->lo, b->lo), std::min(a->hi, b->hi)};
    if (isa<arith::MaxSIOp>(op))
      return Range{std::max(a->lo, b->lo), std::max(a->hi, b->hi)};
    if (isa<arith::SelectOp>(op))
      return Range{std::min(a->lo, b->lo), std::max(a->hi, b->hi)};
    I p[] = {I(a->lo) * b->lo, I(a->lo) * b->hi, I(a->hi) * b->lo,
             I(a->hi) * b->hi};
    return clampRange(*std::min_element(p, p + 4), *std::max_element(p, p + 4));
  }
  return std::nullopt;
}

/// `v` (index or integer) as i64.
Value toI64(OpBuilder &b, Location loc, Value v) {
  Type i64 = b.getI64Type();
  if (v.getType().isIndex())
    return arith::IndexCastOp::create(b, loc, i64, v);
  if (v.getType().getIntOrFloatBitWidth() < 64)
    return arith::ExtSIOp::create(b, loc, i64, v);
  return v;
}

Value i64Const(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIntOp::create(b, loc, v, 64);
}

Value zeroOf(OpBuilder &b, Location loc, Type elt) {
  return arith::ConstantOp::create(b, loc, cast<TypedAttr>(b.getZeroAttr(elt)));
}

const std::string kIndexMessage =
    "index {0} is out of bounds for dimension {1} with size {2}";

/// Where a guarded read happens, for the message.
std::string describeSource(tensor::ExtractOp read) {
  std::string s;
  llvm::raw_string_ostream os(s);
  Value src = read.getTensor();
  auto func = read->getParentOfType<func::FuncOp>();
  auto inputOf = [&]() {
    if (auto arg = dyn_cast<BlockArgument>(src))
      if (func && arg.getOwner() == &func.getBody().front())
        os << ", input #" << arg.getArgNumber() << " of @" << func.getName();
  };
  // The enclosing flex op and its captures (regions: score_mod, mask_mod,
  // and flex.attention_backward's joint).
  Operation *owner = nullptr;
  ValueRange caps;
  for (Operation *p = read->getParentOp(); p && !owner; p = p->getParentOp()) {
    if (auto attn = dyn_cast<AttentionOp>(p)) {
      owner = p;
      caps = attn.getCaptures();
    } else if (auto bw = dyn_cast<AttentionBackwardOp>(p)) {
      owner = p;
      caps = bw.getCaptures();
    }
  }
  if (owner) {
    Region *region = read->getParentRegion();
    while (region->getParentOp() != owner)
      region = region->getParentOp()->getParentRegion();
    static constexpr StringLiteral kRegionNames[] = {"score_mod", "mask_mod",
                                                     "joint"};
    os << " in " << kRegionNames[region->getRegionNumber()];
    auto it = llvm::find(caps, src);
    if (it != caps.end())
      os << ", reading captured tensor #" << (it - caps.begin());
    else
      os << ", reading a tensor";
    os << " (" << src.getType();
    inputOf();
    os << ")";
    return s;
  }
  os << " in a gather from " << src.getType();
  inputOf();
  if (func)
    os << " in @" << func.getName();
  return s;
}

/// Escapes `{` and `}` for a str.format template.
std::string escapeBraces(StringRef msg) {
  std::string out;
  for (char c : msg) {
    out += c;
    if (c == '{' || c == '}')
      out += c;
  }
  return out;
}

/// The op whose body holds `read` and in front of which per-op values
/// (dynamic sizes) go: the enclosing flex.attention or linalg.generic.
Operation *guardScope(tensor::ExtractOp read) {
  for (Operation *p = read->getParentOp(); p; p = p->getParentOp()) {
    if (isa<AttentionOp, AttentionBackwardOp, linalg::GenericOp>(p))
      return p;
    if (isa<func::FuncOp>(p))
      return nullptr;
  }
  return nullptr;
}

/// Guards one read; see the pass description.
void guardRead(tensor::ExtractOp read, Operation *scope) {
  auto type = read.getTensor().getType();
  Location loc = read.getLoc();
  std::string where = describeSource(read);
  SmallVector<Value> indices(read.getIndices());
  SmallVector<Value> oks;
  bool anyDynamic = false, anyZero = false;
  OpBuilder b(read);
  for (auto [d, index] : llvm::enumerate(indices)) {
    int64_t size = type.getDimSize(d);
    anyDynamic |= ShapedType::isDynamic(size);
    anyZero |= size == 0;
    std::optional<Value> wrapped = matchNegativeIndexWrap(index);
    Value orig = wrapped ? *wrapped : index;
    int64_t lowFactor = wrapped ? -1 : 0; // low bound = lowFactor * size
    if (!ShapedType::isDynamic(size) && size > 0) {
      std::optional<Range> r = rangeOf(orig, 0);
      if (r && r->lo >= lowFactor * size && r->hi < size)
        continue; // provably in range
    }
    // Insert right after the index is computed when that is in this block.
    Operation *def = index.getDefiningOp();
    if (def && def->getBlock() == read->getBlock())
      b.setInsertionPointAfter(def);
    else
      b.setInsertionPoint(read);
    Value sizeI64;
    if (ShapedType::isDynamic(size)) {
      // Sizes of tensors from outside the body are computed once, in front.
      Operation *srcDef = read.getTensor().getParentRegion()->getParentOp();
      OpBuilder outer(scope->isAncestor(srcDef) ? read.getOperation() : scope);
      Value dimV = tensor::DimOp::create(outer, loc, read.getTensor(), d);
      sizeI64 = toI64(outer, loc, dimV);
    } else {
      sizeI64 = i64Const(b, loc, size);
    }
    Value x = toI64(b, loc, orig);
    Value zero64 = i64Const(b, loc, 0);
    Value low = wrapped ? arith::SubIOp::create(b, loc, zero64, sizeI64)
                        : zero64;
    Value ge = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, x, low);
    Value lt =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, x, sizeI64);
    Value ok = arith::AndIOp::create(b, loc, ge, lt);
    Value dimC = i64Const(b, loc, d);
    CheckOp::create(b, loc, ok, kIndexMessage + where,
                    ValueRange{x, dimC, sizeI64});
    Value zero = arith::ConstantIndexOp::create(b, loc, 0);
    indices[d] = arith::SelectOp::create(b, loc, ok, index, zero);
    oks.push_back(ok);
  }
  if (oks.empty())
    return;
  b.setInsertionPoint(read);
  Type elt = type.getElementType();
  if (anyZero) { // nothing can be read: the check has failed anyway
    read.replaceAllUsesWith(zeroOf(b, loc, elt));
    read.erase();
    return;
  }
  if (!anyDynamic) {
    read.getIndicesMutable().assign(indices);
    return;
  }
  // A dynamic dim may be 0: read only when every index is in range.
  Value all = oks.front();
  for (Value ok : ArrayRef<Value>(oks).drop_front())
    all = arith::AndIOp::create(b, loc, all, ok);
  auto ifOp = scf::IfOp::create(b, loc, TypeRange{elt}, all, true, true);
  OpBuilder tb = ifOp.getThenBodyBuilder();
  Value inRange = tensor::ExtractOp::create(tb, loc, read.getTensor(), indices);
  scf::YieldOp::create(tb, loc, inRange);
  OpBuilder eb = ifOp.getElseBodyBuilder();
  scf::YieldOp::create(eb, loc, zeroOf(eb, loc, elt));
  read.replaceAllUsesWith(ifOp.getResult(0));
  read.erase();
}

struct FlexInsertChecksPass
    : public flex::impl::FlexInsertChecksBase<FlexInsertChecksPass> {
  void runOnOperation() override {
    SmallVector<std::pair<tensor::ExtractOp, Operation *>> reads;
    SmallVector<cf::AssertOp> asserts;
    SmallVector<BlockTensorOperands> withBlocks;
    getOperation()->walk([&](Operation *op) {
      if (auto attn = dyn_cast<AttentionOp>(op)) {
        if (attn.hasBlockTensors())
          withBlocks.push_back(attn);
      } else if (auto bw = dyn_cast<AttentionBackwardOp>(op)) {
        if (bw.hasBlockTensors())
          withBlocks.push_back(bw);
      } else if (auto read = dyn_cast<tensor::ExtractOp>(op)) {
        if (Operation *scope = guardScope(read))
          if (!read.getIndices().empty())
            reads.push_back({read, scope});
      } else if (auto a = dyn_cast<cf::AssertOp>(op)) {
        asserts.push_back(a);
      }
    });
    for (auto [read, scope] : reads)
      guardRead(read, scope);
    OpBuilder b(&getContext());
    for (const BlockTensorOperands &ops : withBlocks)
      emitBlockTensorChecks(b, ops);
    for (cf::AssertOp a : asserts) {
      OpBuilder b(a);
      std::string msg = escapeBraces(a.getMsg());
      if (auto func = a->getParentOfType<func::FuncOp>())
        msg += (" (runtime assert in @" + func.getName() + ")").str();
      CheckOp::create(b, a.getLoc(), a.getArg(), msg, ValueRange{});
      a.erase();
    }
  }
};

} // namespace
