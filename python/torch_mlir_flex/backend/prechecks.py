"""Checks for inputs on which MLIR 22.1.8 aborts (an assertion kills the
process) instead of reporting an error; each raises `FlexBackendError`.

`check_known_parser_aborts(text)` runs on module text before parsing (the
parser and the verifier assert on these; flex-opt has the same checks in C++,
tools/flex-opt/PreVerify.cpp); `_check_memref_element_types(module)` runs on
lowered IR before `finalize-memref-to-llvm`. See docs/robustness.md.
"""

import re

from ..mlir import ir

# Inputs that abort (not diagnose) this MLIR's parser or verifier; rejected
# before parsing: (pattern, what, advice).
_PARSER_ABORTS = [
    # parseDenseArrayAttr asserts "only integers and floats have a bitwidth".
    (re.compile(r"array\s*<\s*index\b"), "a dense array attribute of index elements (array<index: ...>)",
     "use array<i32: ...> or array<i64: ...>"),
]

# A transform op's size list ([...] in the custom form, `static_*` arrays in
# the generic one) with a negative entry: INT64_MIN (the dynamic-size
# sentinel without its SSA operand) makes the verifiers of
# tile_using_for / tile_using_forall index past their operands; other
# negative sizes assert in tiling (a tensor type with a negative dim).
_TRANSFORM_OP = re.compile(r"\"?transform\.[\w.]+")
_NEGATIVE_IN_LIST = re.compile(r"(?:\[|array\s*<\s*i64\s*:)[^\]>]*?(-\s*\d+)")


# Static shapes with a dimension or element count above 2^56: the parser
# (dense constants) and passes (strides) assert on the int64 overflow.
_SHAPED = re.compile(r"\b(?:tensor|memref|vector)\s*<((?:\s*\[?(?:\d+|\?)\]?\s*x)+)")
_MAX_ELEMENTS = 1 << 56


def _flex_backend_error(message: str):
    from .errors import FlexBackendError

    return FlexBackendError(message)


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def _check_transform_sizes(text: str):
    for lineno, line in enumerate(text.splitlines(), 1):
        code = line.split("//")[0]
        op = _TRANSFORM_OP.search(code)
        m = op and _NEGATIVE_IN_LIST.search(code, op.end())
        if m:
            value = m.group(1).replace(" ", "")
            raise _flex_backend_error(
                f"cannot parse module: line {lineno}: '{op.group(0).strip(chr(34))}' has a negative size "
                f"{value}; transform sizes must be >= 0 (INT64_MIN stands for an SSA size operand), "
                "and MLIR 22.1.8 crashes on them instead of reporting an error")


def _check_shapes(text: str):
    for m in _SHAPED.finditer(text):
        elements = 1
        for d in re.findall(r"\d+", m.group(1)):
            elements *= max(int(d), 1)
            if int(d) > 0 and elements > _MAX_ELEMENTS:
                raise _flex_backend_error(
                    f"cannot parse module: line {_line_of(text, m.start())}: a shaped type with a dimension or "
                    "element count above 2^56 is not supported (MLIR 22.1.8 crashes computing its size)")


# linalg.transpose / broadcast / reduce: a failed integer in their
# `permutation = [...]` / `dimensions = [...]` leaves a null attribute that
# NamedAttrList::set asserts on.
_INT_LIST = re.compile(r"\b(?:permutation|dimensions)\s*=\s*\[([^\]\n]*)\]")


def _bad_list(m, entry_pattern: str) -> bool:
    """Whether the `[...]` list matched by `m` (its entries in group 1) has
    a non-empty entry that `entry_pattern` does not match whole."""
    return any(e.strip() and not re.fullmatch(entry_pattern, e.strip()) for e in m.group(1).split(","))


def _check_int_lists(text: str):
    for m in _INT_LIST.finditer(text):
        if _bad_list(m, r"-?\d+"):
            raise _flex_backend_error(
                f"cannot parse module: line {_line_of(text, m.start())}: a non-integer entry in a "
                "`permutation = [...]` or `dimensions = [...]` list is not supported (it crashes the "
                "MLIR 22.1.8 parser of linalg.transpose / broadcast / reduce); write integers")


# The custom forms of linalg.generic and vector.contract: an
# `iterator_types = [...]` entry that is not a string ("parallel",
# "reduction") makes their parsers cast it to a string attribute, which
# asserts. (The generic op form, `"linalg.generic"(...) <{...}>`, holds
# #linalg.iterator_type attributes there, and is left alone.)
_ITERATOR_TYPES = re.compile(r"\biterator_types\s*=\s*\[([^\]\n]*)\]")
_GENERIC_FORM = re.compile(r"\"[\w.]+\"\s*\(|<\{")


def _check_iterator_types(text: str):
    for m in _ITERATOR_TYPES.finditer(text):
        line_start = text.rfind("\n", 0, m.start()) + 1
        if _GENERIC_FORM.search(text, line_start, m.start()):
            continue
        if _bad_list(m, r'"[^"]*"'):
            raise _flex_backend_error(
                f"cannot parse module: line {_line_of(text, m.start())}: an `iterator_types = [...]` entry "
                "that is not a string is not supported (it crashes the MLIR 22.1.8 parser of "
                "linalg.generic / vector.contract); write \"parallel\" or \"reduction\"")


def check_known_parser_aborts(text: str):
    """Raises FlexBackendError if `text` holds a construct on which the MLIR
    22.1.8 parser or verifier asserts and kills the process instead of
    reporting an error."""
    for pattern, what, advice in _PARSER_ABORTS:
        m = pattern.search(text)
        if m:
            raise _flex_backend_error(
                f"cannot parse module: line {_line_of(text, m.start())}: {what} is not supported "
                f"(it crashes the MLIR 22.1.8 parser); {advice}")
    _check_shapes(text)
    _check_int_lists(text)
    _check_iterator_types(text)
    _check_transform_sizes(text)


def _check_memref_element_types(module):
    """MLIR 22.1.8's finalize-memref-to-llvm asserts (and kills the process)
    on memref.load/store of integers narrower than 8 bits, e.g. i1 from a
    bool tensor; reject such IR with an error instead. The named pipelines
    run flex-widen-i1-memrefs (i1 -> i8) first, so this is a safety net for
    custom pipelines and other sub-byte types."""
    bad = []

    def visit(op):
        op = op.operation
        idx = {"memref.load": 0, "memref.store": 1}.get(op.name)
        if idx is not None and len(op.operands) > idx:
            t = op.operands[idx].type
            if isinstance(t, ir.MemRefType):
                elt = t.element_type
                if isinstance(elt, ir.IntegerType) and elt.width < 8:
                    bad.append((op, t))
                    return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    if bad:
        op, t = bad[0]
        raise _flex_backend_error(
            f"cannot lower '{op.name}' on {t} ({op.location}): element types narrower "
            "than 8 bits are not supported by this MLIR's finalize-memref-to-llvm; "
            "for i1 (bool tensors) run flex-widen-i1-memrefs before it (the named "
            "pipelines do), otherwise use an integer dtype of at least 8 bits")
