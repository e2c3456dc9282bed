"""tm_tensor.scan (aten.cumsum, aten.cumprod) -> scf.for loops on tensors.

    %r:2 = tm_tensor.scan dimension(d) inclusive(true)
        ins(%in) outs(%out, %acc) { ^bb0(%prev, %x): ... yield %y }

For every position of the other dimensions, a loop over ``d`` carries the
previous output: ``out[0] = in[0]`` and ``out[i] = region(out[i-1], in[i])``
(inclusive; exclusive: ``out[0] = acc``, ``out[i] = region(out[i-1],
in[i-1])``), the region arguments in TMTensor's order. ``acc`` receives the
last output of each line (its initial value when the line is empty).
Integer cumsum arrives here already widened to i64 by torch-mlir.

Like torch's CPU kernels, a float sum or product (the region is one
``arith.addf``/``arith.mulf``) is carried in a wider type: f64 for f32,
f32 for f16/bf16, each output rounded from the running value.
"""

from torch_mlir import ir
from torch_mlir.dialects import arith

from . import builder as B
from .op import TmOp

_WIDE = {"f32": "f64", "f16": "f32", "bf16": "f32"}
_COMBINERS = {"arith.addf": arith.AddFOp, "arith.mulf": arith.MulFOp}


def _widened_combiner(op: TmOp, elt: ir.Type):
    """(wide type, fn(a, b)) when the region is one addf/mulf of its two
    arguments on a narrow float type; else None."""
    block = op.region.blocks[0]
    ops = [o.operation if hasattr(o, "operation") else o for o in block.operations]
    if str(elt) not in _WIDE or len(ops) != 2 or ops[0].name not in _COMBINERS:
        return None
    comb, yld = ops
    if set(comb.operands) != set(block.arguments) or list(yld.operands) != [comb.results[0]]:
        return None
    wide = ir.F64Type.get() if str(elt) == "f32" else ir.F32Type.get()
    return wide, lambda a, b: _COMBINERS[comb.name](a, b).result


def lower_scan(op: TmOp):
    (inp,) = op.ins
    out0, acc0 = op.outs
    d = op.int_attr("dimension")
    inclusive = op.bool_attr("inclusive")
    rank = ir.RankedTensorType(inp.type).rank
    outer = [i for i in range(rank) if i != d]
    elt = ir.RankedTensorType(out0.type).element_type
    widened = _widened_combiner(op, elt) if inclusive else None
    carry_t = widened[0] if widened else elt
    widen = (lambda v: arith.ExtFOp(carry_t, v).result) if widened else (lambda v: v)
    narrow = (lambda v: arith.TruncFOp(elt, v).result) if widened else (lambda v: v)
    combine = widened[1] if widened else (lambda a, b: B.inline_region(op.region, [a, b])[0])

    def line(ivs, args):
        out, acc = args
        init = B.extract(acc0, ivs)

        def step(i, carried):
            out, acc, prev_out, prev_in = carried
            full = ivs[:d] + [i] + ivs[d:]
            x = B.extract(inp, full)
            first = B.cmpi("eq", i, B.index(0))
            if inclusive:
                xw = widen(x)
                vw = B.if_else(first, [carry_t], lambda: [xw], lambda: [combine(prev_out, xw)])[0]
            else:
                vw = B.if_else(first, [carry_t], lambda: [init], lambda: [combine(prev_out, prev_in)])[0]
            v = narrow(vw)
            return [B.insert(v, out, full), B.insert(v, acc, ivs), vw, x]

        out, acc, _, _ = B.for_loop(B.index(0), B.dim(inp, d), [out, acc, widen(init), init], step)
        return [out, acc]

    dests = [B.private_copy(out0), B.private_copy(acc0)]
    return B.loop_nest([B.dim(inp, i) for i in outer], dests, line)
