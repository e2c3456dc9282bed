"""Destination-passing calling convention of a compiled entry function.

`to_destination_passing` rewrites the tensor-level entry function

    func @main(%a: tensor<..>, ...) -> (tensor<R0>, ...)
into
    func @main(%a: tensor<..> {bufferization.writable = false}, ...,
               %out0: memref<R0>, ...[, %status: memref<4xi64>])

whose returns become ``bufferization.materialize_in_destination %r in
restrict writable %out0``: one-shot-bufferize (after eliminate-empty-tensors)
writes the results straight into the caller's buffers, or copies them there
when a result is an input or a constant. The compiled code never returns
or frees a buffer the caller sees, and writes into no input but those of
`in_place`.

`in_place` ({result: input}) names results that are the new value of an
input (a KV cache the program updates with `index_copy_`): that input is
marked writable and the result stays a result, marked
``{flex.in_place = input}``, so that one-shot-bufferize updates the
caller's buffer where it stands (out of place only when the old value is
still read after the update); flex-in-place-results then drops the result
(after a copy into the input when it was not updated in place). Such a
result has no out-param. See docs/runtime.md.

Scalar arguments (``i64``, ``i1``, ``f64``, ``f32``: a SymInt or float input of an
exported program) are passed as 0-d tensors (`scalars_to_tensors`): the
function reads them with ``tensor.extract``.
"""

from ..mlir import ir
from .errors import FlexBackendError

# Module attribute of the runtime status contract (docs/runtime.md).
STATUS_ATTR = "flex.check_messages"
STATUS_ELEMENTS = 4
# Result attribute read by flex-in-place-results: the argument it is written into.
IN_PLACE_ATTR = "flex.in_place"


def find_func(module, name):
    for op in module.body.operations:
        if op.operation.name == "func.func" and ir.StringAttr(op.attributes["sym_name"]).value == name:
            return op
    raise FlexBackendError(f"no function @{name} in the module")


def function_type(func) -> ir.FunctionType:
    return ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)


def is_status_type(t) -> bool:
    return (isinstance(t, ir.MemRefType) and list(t.shape) == [STATUS_ELEMENTS]
            and str(t.element_type) == "i64")


def has_status_contract(module) -> bool:
    return STATUS_ATTR in module.operation.attributes


def status_messages(module):
    if not has_status_contract(module):
        return []
    return [ir.StringAttr(a).value for a in ir.ArrayAttr(module.operation.attributes[STATUS_ATTR])]


def entry_signature(module, func):
    """(input tensor types, result tensor types, has a status argument already)."""
    ftype = function_type(func)
    inputs = list(ftype.inputs)
    given_status = bool(inputs) and has_status_contract(module) and is_status_type(inputs[-1])
    if given_status:
        inputs = inputs[:-1]
    return ([_ranked(t, "argument") for t in inputs],
            [_ranked(t, "result") for t in ftype.results], given_status)


def is_scalar_type(t) -> bool:
    return isinstance(t, (ir.IntegerType, ir.F64Type, ir.F32Type))


def _ranked(t, what):
    if what == "argument" and is_scalar_type(t):
        return ir.RankedTensorType.get([], t)  # passed as a 0-d tensor
    if not isinstance(t, ir.RankedTensorType):
        raise FlexBackendError(f"unsupported {what} type {t}: expected a ranked tensor")
    return ir.RankedTensorType(t)


def _returns(func):
    return [b.operations[len(b.operations) - 1] for b in func.regions[0].blocks
            if len(b.operations) and b.operations[len(b.operations) - 1].operation.name == "func.return"]


def _arg_attrs(func, n_inputs, n_total, writable=()):
    """Existing argument attributes, inputs marked not writable (but those
    in `writable`)."""
    old = list(ir.ArrayAttr(func.attributes["arg_attrs"])) if "arg_attrs" in func.attributes else []
    attrs = []
    for i in range(n_total):
        entries = {a.name: a.attr for a in ir.DictAttr(old[i])} if i < min(len(old), n_inputs) else {}
        if i < n_inputs:
            entries["bufferization.writable"] = ir.BoolAttr.get(i in writable)
        attrs.append(ir.DictAttr.get(entries))
    return ir.ArrayAttr.get(attrs)


def scalars_to_tensors(module, func_name: str):
    """Rewrites each scalar argument of @func_name to a 0-d tensor read with
    ``tensor.extract``; returns the indices of those arguments."""
    func = find_func(module, func_name)
    if not func.regions[0].blocks:
        return []
    entry = func.regions[0].blocks[0]
    old = list(entry.arguments)
    scalars = [i for i, a in enumerate(old) if is_scalar_type(a.type)]
    if not scalars:
        return []
    loc = func.location
    first = entry.operations[0]
    for i, a in enumerate(old):
        new = entry.add_argument(ir.RankedTensorType.get([], a.type) if i in scalars else a.type, loc)
        if i in scalars:
            with ir.InsertionPoint(first), loc:
                value = ir.Operation.create("tensor.extract", results=[a.type], operands=[new]).results[0]
        else:
            value = new
        a.replace_all_uses_with(value)
    for _ in old:
        entry.erase_argument(0)
    ftype = function_type(func)
    func.attributes["function_type"] = ir.TypeAttr.get(
        ir.FunctionType.get([a.type for a in entry.arguments], list(ftype.results)))
    return scalars


def check_in_place(in_place, inputs, results):
    """FlexBackendError unless `in_place` ({result: input}) pairs results and
    inputs of one type, each input at most once."""
    if len(set(in_place.values())) != len(in_place):
        raise FlexBackendError(f"in_place {in_place}: an input is the destination of two results")
    for r, i in in_place.items():
        if not (0 <= r < len(results) and 0 <= i < len(inputs)):
            raise FlexBackendError(f"in_place {in_place}: no result {r} or input {i}")
        if results[r] != inputs[i]:
            raise FlexBackendError(f"in_place: result {r} ({results[r]}) is not of the type of input {i} "
                                   f"({inputs[i]})")


def _through_expand_shapes(value, out):
    """(value, destination) for a result written into `out`: a result that
    is `tensor.expand_shape %x` is written as %x into `memref.collapse_shape
    %out` (the same bytes), so that eliminate-empty-tensors sees the op
    producing %x (a linear's matmul before HF's reshape of the logits) and
    lets it write into the caller's buffer, instead of into a temporary
    copied after (a pass over 622 MB for Qwen2's logits at S=1024)."""
    while True:
        op = getattr(value.owner, "operation", value.owner)  # an OpView or the Operation
        if not (isinstance(op, ir.Operation) and op.name == "tensor.expand_shape"):
            return value, out
        source = op.operands[0]
        st = ir.RankedTensorType(source.type)
        if not (st.has_static_shape and ir.MemRefType(out.type).has_static_shape):
            return value, out  # (the collapsed type of a dynamic one is not spelled out here)
        if not (_single_use(value) and _single_use(source)):
            # Another result or op reads it: eliminate-empty-tensors would
            # let two destinations share the producer (wrong gradients of a
            # training graph that returns a tensor and its reshape).
            return value, out
        out = ir.Operation.create(
            "memref.collapse_shape", results=[ir.MemRefType.get(list(st.shape), st.element_type)],
            operands=[out], attributes={"reassociation": op.attributes["reassociation"]}).results[0]
        value = source


# The pass before which `unshare_inits` must run (after canonicalize/cse,
# which would merge the copies again).
UNSHARE_BEFORE = "eliminate-empty-tensors"


def unshare_inits(module, func_name: str):
    """Gives every use of a `linalg.fill` or `tensor.empty` result its own
    copy of that op, placed right before the user (fills first, then the
    empties they and others read). CSE merges the zero-filled inits of
    products of one shape; eliminate-empty-tensors then rewrote the shared
    empty into the first result's out-param, and the second product,
    writing the same init, was computed into the first's buffer: `return
    x @ w1, x @ w2` returned a wrong second result. Run right before
    eliminate-empty-tensors (`UNSHARE_BEFORE`), on the entry function."""
    func = find_func(module, func_name)
    for name in ("linalg.fill", "tensor.empty"):
        ops = [op for block in func.regions[0].blocks for op in block.operations
               if op.operation.name == name and len(op.operation.results) == 1]
        for op in ops:
            # linalg users in the same block: not a flex.attention, whose
            # modifier regions read its captures by the very values it lists
            # as operands, nor ops inside such regions.
            parent = op.operation.parent
            uses = [(getattr(u.owner, "operation", u.owner), u.operand_number)
                    for u in op.operation.results[0].uses]
            uses = [(owner, number) for owner, number in uses
                    if owner.parent == parent and owner.name.startswith("linalg.")]
            for owner, number in uses[1:]:
                copy = op.operation.clone(ir.InsertionPoint(owner))
                owner.operands[number] = copy.results[0]


def _single_use(value) -> bool:
    uses = iter(value.uses)
    return next(uses, None) is not None and next(uses, None) is None


def to_destination_passing(module, func_name: str, in_place=None):
    """Rewrites @func_name in place (see the module docstring); returns
    (input types, result types) of the original function."""
    func = find_func(module, func_name)
    inputs, results, given_status = entry_signature(module, func)
    in_place = dict(in_place or {})
    check_in_place(in_place, inputs, results)
    if not func.regions[0].blocks:
        raise FlexBackendError(f"@{func_name} has no body")
    entry = func.regions[0].blocks[0]
    loc = func.location
    outs = [None if i in in_place else entry.add_argument(ir.MemRefType.get(list(t.shape), t.element_type), loc)
            for i, t in enumerate(results)]
    if given_status:  # keep the status argument last
        old = entry.arguments[len(inputs)]
        new = entry.add_argument(old.type, loc)
        old.replace_all_uses_with(new)
        entry.erase_argument(len(inputs))
    kept = sorted(in_place)  # results returned (as their input's buffer)
    # Here for pipelines that generalize fills before bufferizing (reference);
    # again right before eliminate-empty-tensors (jit.run_with_unshared_inits)
    # for those whose cse merges the copies.
    unshare_inits(module, func_name)
    for ret in _returns(func):
        with ir.InsertionPoint(ret), ret.location:
            returned = []
            for i, (value, out) in enumerate(zip(list(ret.operands), outs)):
                if out is None:
                    returned.append(value)
                    continue
                value, dest = _through_expand_shapes(value, out)
                ir.Operation.create("bufferization.materialize_in_destination", operands=[value, dest],
                                    attributes={"restrict": ir.UnitAttr.get(), "writable": ir.UnitAttr.get()})
            ir.Operation.create("func.return", operands=returned)
        ret.erase()
    types = [a.type for a in entry.arguments]
    func.attributes["arg_attrs"] = _arg_attrs(func, len(inputs), len(types), set(in_place.values()))
    func.attributes["function_type"] = ir.TypeAttr.get(
        ir.FunctionType.get(types, [results[i] for i in kept]))
    if "res_attrs" in func.attributes:
        del func.attributes["res_attrs"]
    if kept:
        i64 = ir.IntegerType.get_signless(64)
        func.attributes["res_attrs"] = ir.ArrayAttr.get(
            [ir.DictAttr.get({IN_PLACE_ATTR: ir.IntegerAttr.get(i64, in_place[i])}) for i in kept])
    return inputs, results
