"""Shapes at call time: output shapes and the checks run before each call.

Both come from a *shape probe*: a copy of the tensor-level entry function
that returns ``tensor.dim`` of every dynamic result dim and of every
`flex.attention` operand dim; resolve-ranked-shaped-type-result-dims,
canonicalize and lower-affine fold these to arithmetic on the input dims,
which becomes a small Python expression over the input shapes ``s`` (e.g.
``s[0][2]``; a scalar argument's entry is its value: ``s[1]``), compiled once per JitFunction. A dim that does not fold
(data-dependent) is an error for results and no check for operands.

`DimChecks` collects the checks: from the probe (the rules of the
flex.attention verifier: equal batch/heads/lengths, GQA divisibility, output
shapes) and, for `compile()`, from the ExportedProgram (dims sharing a
symbol are equal, symbol ranges). Each failure raises
FlexCompileError('call', ...) naming the argument, the dim and both sizes.

The same probe sizes the function's temporaries (every `tensor.empty` /
`bufferization.alloc_tensor`): one larger than this host's memory cannot
be allocated, and the compiled code does not check its allocations (a
failed malloc is a write through NULL, a segfault). Such a temporary is a
FlexMemoryError naming its shape and size: when compiling, if its shape is
static; before the call, from the call's sizes, if not. (SDPA decomposed
to a matmul over transformers' continuous-batching warmup materialised
1x4x8192x446720 f32 scores, 58.5 GB, where torch's CPU flash kernel
tiles.)
"""

import os
import re
from ..mlir import ir, passmanager
from .calling import find_func, function_type
from .errors import FlexBackendError, FlexCompileError, FlexMemoryError, FlexRangeError

# scf-for-loop-canonicalization: tensor.dim of an scf.for result (or iter
# arg) -> tensor.dim of its init when the loop keeps the shape (the loops of
# frontend/tm_tensor: sort, scan, scatter).
PROBE_PIPELINE = ("builtin.module(func.func(resolve-ranked-shaped-type-result-dims,"
                  "scf-for-loop-canonicalization),canonicalize,cse,"
                  "func.func(resolve-ranked-shaped-type-result-dims,scf-for-loop-canonicalization),"
                  "lower-affine,canonicalize,cse)")

_BINARY = {"arith.addi": "({} + {})", "arith.subi": "({} - {})", "arith.muli": "({} * {})",
           "arith.divui": "({} // {})", "arith.floordivsi": "({} // {})", "arith.remui": "({} % {})",
           "arith.divsi": "_divsi({}, {})", "arith.ceildivsi": "(-(-{} // {}))",
           "arith.remsi": "_remsi({}, {})", "arith.maxsi": "max({}, {})", "arith.minsi": "min({}, {})",
           "arith.maxui": "max({}, {})", "arith.minui": "min({}, {})"}
_CASTS = {"arith.index_cast", "arith.index_castui", "arith.extsi", "arith.extui"}
# arith.cmpi predicates (ArithBase.td order) on non-negative sizes
_CMPI = ["==", "!=", "<", "<=", ">", ">=", "<", "<=", ">", ">="]


def _divsi(a, b):
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _remsi(a, b):
    return a - b * _divsi(a, b)


def _human(n: int) -> str:
    return f"{n / 1e9:.1f} GB" if n >= 1e9 else f"{n / 1e6:.1f} MB"


_NAMESPACE = {"_divsi": _divsi, "_remsi": _remsi, "FlexCompileError": FlexCompileError,
              "FlexMemoryError": FlexMemoryError, "FlexRangeError": FlexRangeError, "_human": _human}
# Ops that allocate a tensor the compiled code holds (a temporary).
_ALLOCATING = ("tensor.empty", "bufferization.alloc_tensor")


def memory_limit_bytes() -> int:
    """The largest block this process could ever back: the host's RAM plus
    swap (/proc/meminfo; else its physical pages), or less when a cgroup
    (a container) or RLIMIT_AS caps the process."""
    total = 0
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                key, _, rest = line.partition(":")
                if key in ("MemTotal", "SwapTotal"):
                    total += int(rest.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        total = 0
    if total <= 0:
        try:
            total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            total = 1 << 62
    caps = [total]
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path) as f:
                caps.append(int(f.read().split()[0]))  # "max" (no cap): ValueError
        except (OSError, ValueError, IndexError):
            pass
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
        if soft != resource.RLIM_INFINITY and soft > 0:
            caps.append(soft)
    except (ImportError, OSError, ValueError):
        pass
    return min(caps)


def _element_bytes(t):
    """Bytes of one element of the tensor type `t` in memory, or None."""
    e = t.element_type
    if isinstance(e, ir.IndexType):
        return 8
    width = getattr(e, "width", None)
    return max(1, (width + 7) // 8) if isinstance(width, int) else None


def _too_large_message(shape_text: str, dtype: str, nbytes_text: str, gb_text: str, limit: int) -> str:
    return (f"a temporary tensor of shape [{shape_text}] {dtype} ({nbytes_text} bytes, {gb_text}) is larger "
            f"than the memory this process can have ({limit} bytes, {_human(limit)}: RAM and swap, "
            "or a cgroup / RLIMIT_AS cap): it cannot be allocated")


def uses_of(src: str):
    """The arguments (`s[i]`) that generated shape code reads."""
    return frozenset(int(i) for i in re.findall(r"\bs\[(\d+)\]", src))


class _Unresolved(Exception):
    pass


def _expr(value, entry) -> str:
    """Python code of an index value of the probe in terms of `s`."""
    if isinstance(value, ir.BlockArgument):
        if value.owner == entry and isinstance(value.type, ir.IntegerType):
            return f"s[{value.arg_number}]"  # a scalar argument: its value is in s
        raise _Unresolved("a block argument")
    op = value.owner
    name = op.operation.name
    if name == "arith.constant":
        return str(ir.IntegerAttr(op.attributes["value"]).value)
    if name == "tensor.dim":
        src, idx = _shape_source(op.operands[0]), op.operands[1]
        size = _dynamic_size_operand(src, idx)
        if size is not None:
            return _expr(size, entry)
        if not (isinstance(src, ir.BlockArgument) and src.owner == entry):
            raise _Unresolved(f"tensor.dim of {src.owner.name if not isinstance(src, ir.BlockArgument) else 'a block argument'}")
        return f"s[{src.arg_number}][{_expr(idx, entry)}]"
    if name in _CASTS:
        return _expr(op.operands[0], entry)
    if name in _BINARY:
        return _BINARY[name].format(*(_expr(v, entry) for v in op.operands))
    if name == "arith.cmpi":
        pred = ir.IntegerAttr(op.attributes["predicate"]).value
        a, b = (_expr(v, entry) for v in op.operands)
        return f"({a} {_CMPI[pred]} {b})"
    if name == "arith.select":
        c, a, b = (_expr(v, entry) for v in op.operands)
        return f"({a} if {c} else {b})"
    raise _Unresolved(f"'{name}'")


# Ops whose tensor result has the shape of one of their operands.
_SAME_SHAPE_AS_OPERAND = {"tensor.insert": 1, "tensor.insert_slice": 1}


def _shape_source(v, depth: int = 0, stop_at_block_args: bool = False):
    """A value with the same shape as `v`, looking through destination-style
    ops and through scf.for results and iter args whose loop keeps that
    shape (the loops of frontend/tm_tensor)."""
    while depth < 64:
        depth += 1
        if isinstance(v, ir.BlockArgument):
            loop = v.owner.owner
            if stop_at_block_args or loop.name != "scf.for" or v.arg_number == 0:
                return v
            k = v.arg_number - 1
        else:
            op = v.owner
            name = op.name
            copied = _alloc_tensor_copy(op) if name == "bufferization.alloc_tensor" else None
            if copied is not None:
                v = copied
                continue
            if name in _SAME_SHAPE_AS_OPERAND:
                v = op.operands[_SAME_SHAPE_AS_OPERAND[name]]
                continue
            if name.startswith("linalg.") and "operandSegmentSizes" in op.attributes:
                n_in = ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"])[0]
                v = op.operands[n_in + v.result_number]
                continue
            if name != "scf.for":
                return v
            loop, k = op, v.result_number
        if not _loop_keeps_shape(loop, k, depth):
            return v
        v = loop.operands[3 + k]  # lb, ub, step, then the inits
    return v


def _alloc_tensor_copy(op):
    """The `copy(%t)` operand of a bufferization.alloc_tensor, else None
    (operand segments: dynamic sizes, copy, size_hint)."""
    sizes, copy, _ = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))
    return op.operands[sizes] if copy else None


def _dynamic_size_operand(src, idx):
    """For dim `idx` (a constant) of a tensor.empty / alloc_tensor result,
    the operand giving its size (None when not such a dim)."""
    if isinstance(src, ir.BlockArgument) or src.owner.name not in (
            "tensor.empty", "bufferization.alloc_tensor"):
        return None
    if isinstance(idx, ir.BlockArgument) or idx.owner.name != "arith.constant":
        return None
    op, j = src.owner, ir.IntegerAttr(idx.owner.attributes["value"]).value
    shape = ir.RankedTensorType(src.type).shape
    dyn = ir.ShapedType.get_dynamic_size()
    if not 0 <= j < len(shape) or shape[j] != dyn:
        return None
    if op.name == "bufferization.alloc_tensor" and _alloc_tensor_copy(op) is not None:
        return None  # copy(%t): the shape of %t
    return op.operands[sum(1 for d in shape[:j] if d == dyn)]


def _loop_keeps_shape(loop, k: int, depth: int) -> bool:
    """Whether iteration k of `loop` yields a value shaped like its iter arg."""
    body = loop.regions[0].blocks[0]
    yielded = body.operations[len(body.operations) - 1].operands[k]
    src = _shape_source(yielded, depth, stop_at_block_args=True)
    return isinstance(src, ir.BlockArgument) and src.owner == body and src.arg_number == k + 1


class Dim:
    """One dim as Python code over the input shapes `s`, with a label."""

    def __init__(self, code: str, label: str):
        self.code, self.label = code, label

    @property
    def is_const(self) -> bool:
        return self.code.lstrip("-").isdigit()


def input_dim(i: int, j: int, arg_labels) -> Dim:
    return Dim(f"s[{i}][{j}]", f"{arg_labels[i]} dim {j}")


class DimChecks:
    """Checks on the input shapes, compiled into one Python function."""

    def __init__(self, num_inputs=None):
        self.num_inputs = num_inputs  # of the function the checks were made for
        self._lines, self._conds, self._seen = [], [], set()
        # [(input, dim, lo, hi)]: the exported program's ranges of its
        # dynamic dims (hi None: unbounded), also checked by `add` lines.
        self.ranges = []

    def __len__(self):
        return len(self._lines)

    def add(self, cond: str, message: str, error: str = "FlexCompileError"):
        """`cond`: code over `s` true when fine; `message`: f-string body;
        `error`: the exception class raised (a name of _NAMESPACE)."""
        if cond not in self._seen:
            self._seen.add(cond)
            self._conds.append(cond)
            self._lines.append(f"    if not ({cond}):\n        raise {error}('call', f{message!r})")

    def equal(self, a: Dim, b: Dim, why: str, or_one: bool = False):
        if a.code == b.code or (a.is_const and b.is_const):
            return
        alt = f" or {a.code} == 1" if or_one else ""
        self.add(f"{a.code} == {b.code}{alt}",
                 f"{a.label} is {{{a.code}}}, but {b.label} is {{{b.code}}}: {why}")

    def merged_with(self, other: "DimChecks") -> "DimChecks":
        both = DimChecks()
        both.ranges = self.ranges + other.ranges
        for c in (self, other):
            for cond, line in zip(c._conds, c._lines):
                if cond not in both._seen:
                    both._seen.add(cond)
                    both._conds.append(cond)
                    both._lines.append(line)
        return both

    def compile(self):
        if not self._lines:
            return None
        src = "def check(s):\n" + "\n".join(self._lines) + "\n"
        ns = dict(_NAMESPACE)
        exec(compile(src, "<flex shape checks>", "exec"), ns)
        ns["check"].uses = uses_of(src)
        return ns["check"]


def _walk(op):
    """The operations nested in `op`, in order."""
    for region in op.regions:
        for block in region.blocks:
            for child in block.operations:
                yield child.operation
                yield from _walk(child.operation)


def _temporaries(func):
    """The ranked tensors `func` allocates ("tensor.empty", an alloc_tensor
    that is not a copy), as [(result value, type)] in walk order."""
    temps = []
    for op in _walk(func.operation):
        if op.name not in _ALLOCATING or len(op.results) != 1:
            continue
        if op.name == "bufferization.alloc_tensor" and _alloc_tensor_copy(op) is not None:
            continue
        t = op.results[0].type
        if isinstance(t, ir.RankedTensorType):
            temps.append((op.results[0], ir.RankedTensorType(t)))
    return temps


def _probe_requests(func, results):
    """[(key, tensor value, dim)] whose sizes the probe returns."""
    blocks = func.regions[0].blocks
    entry = blocks[0]
    ret = entry.operations[len(entry.operations) - 1]
    reqs = []
    for i, t in enumerate(results):
        for j, d in enumerate(t.shape):
            if d == ir.ShapedType.get_dynamic_size():
                reqs.append((("result", i, j), ret.operands[i], j))
    for n, (v, t) in enumerate(_temporaries(func)):
        # (only those of the entry block dominate the return the probe adds)
        in_entry = v.owner.operation.parent.operation == func.operation
        if in_entry and not t.has_static_shape and _element_bytes(t) is not None:
            for j, d in enumerate(t.shape):
                if d == ir.ShapedType.get_dynamic_size():
                    reqs.append((("temp", n, j), v, j))
    n = 0
    for op in entry.operations:
        if op.operation.name != "flex.attention":
            continue
        names = ["query", "key", "value"] + [f"init{i}" for i in range(len(op.results))]
        values = list(op.operands[:3]) + list(op.results)
        for name, v in zip(names, values):
            for j in range(ir.ShapedType(v.type).rank):
                reqs.append((("flex", n, name, j), v, j))
        reqs.append((("flex", n, "attrs"), op, None))
        n += 1
    return reqs, ret


def _run_probe(module, func_name, results):
    """{key: code string or None (unresolved)} and the flex op attributes."""
    probe = ir.Module.parse(str(module), module.context)
    func = find_func(probe, func_name)
    if len(func.regions[0].blocks) != 1:
        return {}, {}
    reqs, ret = _probe_requests(func, results)
    attrs, keys, values = {}, [], []
    with ir.InsertionPoint(ret), ret.location:
        for key, v, j in reqs:
            if j is None:
                attrs[key[1]] = {"names": {str(a) for a in v.attributes}, "results": len(v.results)}
                continue
            c = ir.Operation.create("arith.constant", results=[ir.IndexType.get()],
                                    attributes={"value": ir.IntegerAttr.get(ir.IndexType.get(), j)})
            dim = ir.Operation.create("tensor.dim", results=[ir.IndexType.get()],
                                      operands=[v, c.results[0]])
            keys.append(key)
            values.append(dim.results[0])
        ir.Operation.create("func.return", operands=values)
    ret.erase()
    ftype = function_type(func)
    func.attributes["function_type"] = ir.TypeAttr.get(
        ir.FunctionType.get(list(ftype.inputs), [v.type for v in values]))
    if "res_attrs" in func.attributes:
        del func.attributes["res_attrs"]
    try:
        passmanager.PassManager.parse(PROBE_PIPELINE, probe.context).run(probe.operation)
    except ir.MLIRError:
        return {}, attrs
    entry = func.regions[0].blocks[0]
    ret = entry.operations[len(entry.operations) - 1]
    codes = {}
    for key, v in zip(keys, ret.operands):
        try:
            codes[key] = _expr(v, entry)
        except _Unresolved as e:
            codes[key] = None
            codes[("why",) + key] = str(e)
    return codes, attrs


class ShapeProgram:
    """Output shapes and verifier-rule checks of one entry function."""

    def __init__(self, module, func_name, inputs, results, arg_labels):
        self.results = results
        needs_probe = not all(t.has_static_shape for t in list(inputs) + list(results))
        codes, attrs = _run_probe(module, func_name, results) if needs_probe else ({}, {})
        self.out_shapes = self._out_shape_function(codes, func_name)
        self.checks = DimChecks()
        for n, a in attrs.items():
            self._flex_rules(n, codes, a, arg_labels)
        self._temporary_sizes(find_func(module, func_name), codes, func_name)

    def _temporary_sizes(self, func, codes, func_name):
        """FlexMemoryError now for a static temporary larger than the host's
        memory; a check before each call for a dynamic one."""
        limit = memory_limit_bytes()
        dyn = ir.ShapedType.get_dynamic_size()
        for n, (_, t) in enumerate(_temporaries(func)):
            elt = _element_bytes(t)
            if elt is None:
                continue
            if t.has_static_shape:
                nbytes = elt
                for d in t.shape:
                    nbytes *= d
                if nbytes > limit:
                    shape = "x".join(str(d) for d in t.shape)
                    raise FlexMemoryError("lower", f"@{func_name}: " + _too_large_message(
                        shape, str(t.element_type), str(nbytes), _human(nbytes), limit))
                continue
            dims = [str(d) if d != dyn else codes.get(("temp", n, j)) for j, d in enumerate(t.shape)]
            if any(d is None for d in dims):
                continue  # a size the probe cannot tie to the inputs (data, a loop)
            nbytes = "(" + " * ".join(dims + [str(elt)]) + ")"
            shape = "x".join(d if d.lstrip("-").isdigit() else "{" + d + "}" for d in dims)
            self.checks.add(f"{nbytes} <= {limit}", f"@{func_name}: " + _too_large_message(
                shape, str(t.element_type), "{" + nbytes + "}", "{_human(" + nbytes + ")}", limit),
                error="FlexMemoryError")

    def _out_shape_function(self, codes, func_name):
        parts = []
        for i, t in enumerate(self.results):
            dims = []
            for j, d in enumerate(t.shape):
                if d != ir.ShapedType.get_dynamic_size():
                    dims.append(str(d))
                    continue
                code = codes.get(("result", i, j))
                if code is None:
                    why = codes.get(("why", "result", i, j), "the shape probe failed")
                    raise FlexBackendError(
                        f"@{func_name}: dim {j} of result {i} ({t}) cannot be computed from the input "
                        f"shapes (it depends on {why}); results need sizes derived from input sizes")
                dims.append(code)
            parts.append("(" + "".join(d + ", " for d in dims) + ")")
        ns = dict(_NAMESPACE)
        src = "lambda s: (" + "".join(p + ", " for p in parts) + ")"
        fn = eval(compile(src, "<flex out shapes>", "eval"), ns)
        fn.uses = uses_of(src)
        return fn

    def _flex_rules(self, n, codes, attrs, arg_labels):
        """The runtime half of flex.attention's verifier (FlexOps.cpp)."""

        def dim(name, j):
            code = codes.get(("flex", n, name, j))
            if code is None:
                return None
            if code.startswith("s[") and code.count("[") == 2:
                i, jj = code[2:-1].split("][")
                return input_dim(int(i), int(jj), arg_labels)
            return Dim(code, f"the {name} dim {j} of flex.attention #{n}")

        def eq(a, b, why, or_one=False):
            if a is not None and b is not None:
                self.checks.equal(a, b, f"flex.attention #{n} needs {why}", or_one)

        q = [dim("query", j) for j in range(4)]
        k = [dim("key", j) for j in range(4)]
        v = [dim("value", j) for j in range(4)]
        eq(k[0], q[0], "the key batch size to equal the query batch size or be 1", or_one=True)
        eq(v[0], k[0], "equal key and value batch sizes")
        eq(v[1], k[1], "equal key and value head counts")
        eq(v[2], k[2], "equal key and value sequence lengths")
        eq(k[3], q[3], "equal query and key head dims")
        if "kv_group_size" not in attrs["names"] and q[1] is not None and k[1] is not None \
                and not (q[1].is_const and k[1].is_const):
            self.checks.add(f"{k[1].code} > 0 and {q[1].code} % {k[1].code} == 0",
                            f"{q[1].label} is {{{q[1].code}}}, which is not a multiple of {k[1].label} = "
                            f"{{{k[1].code}}}: flex.attention #{n} needs query heads to be a multiple of "
                            "key/value heads")
        want = [q[0], q[1], q[2], v[3]]
        for i in range(attrs["results"]):
            what = "output" if i == 0 else "logsumexp/max_scores"
            for j in range(4 if i == 0 else 3):
                eq(dim(f"init{i}", j), want[j], f"its {what} dim {j} to be {'BHME'[j]} of [B, Hq, M, Ev]")


def _bound(x):
    try:
        return int(x)
    except (TypeError, ValueError, OverflowError, AttributeError):
        return None  # infinite (sympy's oo, or torch's int_oo: int() of it raises AttributeError)


def export_checks(ep, names, offset: int = 0) -> DimChecks:
    """Checks from an ExportedProgram: user-input dims with the same symbol
    are equal and lie in the symbol's range (static dims are in the IR).
    `offset`: the function's arguments before the user inputs (the model's
    state, when it is passed as arguments)."""
    import sympy
    from torch.export.graph_signature import InputKind

    user = [s.arg.name for s in ep.graph_signature.input_specs if s.kind == InputKind.USER_INPUT]
    nodes = {n.name: n for n in ep.graph.nodes if n.op == "placeholder"}
    labels = [f"argument {i} ({n})" for i, n in enumerate(names)]
    labels = [f"state {i}" for i in range(offset)] + labels
    checks, first = DimChecks(num_inputs=offset + len(user)), {}
    for i, name in enumerate(user, start=offset):
        val = nodes[name].meta.get("val") if name in nodes else None
        for j, d in enumerate(getattr(val, "shape", ())):
            expr = getattr(getattr(d, "node", None), "expr", None)
            if not isinstance(expr, sympy.Symbol):
                continue  # static (the IR type has it) or a derived dim
            here = input_dim(i, j, labels)
            if expr in first:
                checks.equal(here, first[expr], f"both are the dynamic dim {expr} of the exported program")
                continue
            first[expr] = here
            rng = ep.range_constraints.get(expr)
            lo, hi = (_bound(rng.lower), _bound(rng.upper)) if rng is not None else (None, None)
            conds = ([f"{here.code} >= {lo}"] if lo is not None else []) + \
                    ([f"{here.code} <= {hi}"] if hi is not None else [])
            if conds:
                checks.ranges.append((i, j, lo, hi))
                checks.add(" and ".join(conds), f"{here.label} is {{{here.code}}}, outside the range "
                           f"[{lo}, {'inf' if hi is None else hi}] of the dynamic dim {expr} of the "
                           "exported program", error="FlexRangeError")
    return checks
