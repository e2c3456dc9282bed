//===- CheckOp.cpp - flex.check verifier ----------------------------------===//
//
// flex.check carries a Python str.format template; the verifier accepts
// only what the caller can format: `{k}` fields with k < #details, `{{`,
// `}}`, and at most three details (the status buffer has three slots).
//
//===----------------------------------------------------------------------===//
#include "torch-mlir-flex/Dialect/Flex/IR/FlexOps.h"

using namespace mlir;
using namespace mlir::flex;

/// Returns an error text for the first malformed field of `tmpl`, or "".
static std::string templateError(StringRef tmpl, unsigned numDetails) {
  for (size_t i = 0; i < tmpl.size(); ++i) {
    char c = tmpl[i];
    if (c == '}') {
      if (i + 1 < tmpl.size() && tmpl[i + 1] == '}') {
        ++i;
        continue;
      }
      return "has a single '}' (write '}}' for a literal brace)";
    }
    if (c != '{')
      continue;
    if (i + 1 < tmpl.size() && tmpl[i + 1] == '{') {
      ++i;
      continue;
    }
    size_t close = tmpl.find('}', i);
    StringRef field = close == StringRef::npos
                          ? StringRef()
                          : tmpl.slice(i + 1, close);
    unsigned k;
    if (field.empty() || field.getAsInteger(10, k))
      return "has a malformed field (expected {0}, {1} or {2}, or '{{')";
    if (k >= numDetails)
      return ("refers to {" + Twine(k) + "} but the check has " +
              Twine(numDetails) + " detail(s)")
          .str();
    i = close;
  }
  return "";
}

LogicalResult CheckOp::verify() {
  if (getDetails().size() > 3)
    return emitOpError() << "takes at most 3 details, got "
                         << getDetails().size();
  std::string err = templateError(getMessage(), getDetails().size());
  if (!err.empty())
    return emitOpError() << "message template " << err;
  return success();
}
