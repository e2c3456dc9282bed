"""The performance targets of issue #11, evaluated on benchmark rows.

`evaluate(rows)` -> list of `Target` (name, comparison, limit, measured,
where, passed); measured is None ("not run") when no row covers it. Ratios
are time(ours) / time(peer) (< 1: ours faster). Rows marked
purpose="memory" only feed the memory target.
"""

import dataclasses
import operator
from typing import Optional

MEMORY_S = 8192
OPS = {"<=": operator.le, "<": operator.lt, ">=": operator.ge}


@dataclasses.dataclass
class Target:
    name: str
    op: str
    limit: float
    measured: Optional[float]
    where: str = ""

    @property
    def passed(self) -> Optional[bool]:
        return None if self.measured is None else OPS[self.op](self.measured, self.limit)


def label(row):
    return f"{row['case']} {row['dtype']} S={row['S']} D={row['D']}"


def ratio(row, impl="ours", peer="torch.compile"):
    t = row.get("time", {})
    return t[impl] / t[peer] if impl in t and peer in t else None


def gflops(row, impl="ours"):
    t = row.get("time", {}).get(impl)
    return row["flops"] / t / 1e9 if t else None


def _worst(rows, value, pred=lambda r: True, largest=True):
    """(value, where) of the largest (or smallest) value(row) over rows
    matching pred; (None, "") when none has a value."""
    got = [(v, label(r)) for r in rows if pred(r) for v in [value(r)] if v is not None]
    if not got:
        return None, ""
    return max(got) if largest else min(got)


def _target(name, op, limit, found):
    value, where = found
    return Target(name, op, limit, value, where)


def _is(case=None, dtype=None, S=None, D=None):
    """Rows of `case` (a name or a tuple of names), dtype, S and D (None: any)."""
    cases = (case,) if isinstance(case, str) else case

    def pred(r):
        return ((case is None or r["case"] in cases) and (dtype is None or r["dtype"] == dtype)
                and (S is None or r["S"] == S) and (D is None or r["D"] == D))
    return pred


def _speed_targets(rows):
    out = [_target("ours / torch.compile, every case", "<=", 0.8, _worst(rows, ratio))]
    for dtype in ("f32", "bf16"):
        out.append(_target(f"document S=4096 D=256 {dtype}: ours / torch.compile", "<=", 0.8,
                           _worst(rows, ratio, _is("document", dtype, 4096, 256))))
    out.append(_target("decode: ours / torch.compile", "<=", 0.8,
                       _worst(rows, ratio, _is(("decode", "decode_gqa")))))
    for case in ("causal", "alibi", "softcap"):
        for dtype in ("f32", "bf16"):
            out.append(_target(f"{case} {dtype} S=1024..4096: ours / torch.compile", "<=", 0.5,
                               _worst(rows, ratio, lambda r, c=case, d=dtype:
                                      _is(c, d)(r) and 1024 <= r["S"] <= 4096)))
    for dtype in ("f32", "bf16"):
        out.append(_target(f"causal {dtype}: ours / SDPA", "<=", 0.9,
                           _worst(rows, lambda r: ratio(r, peer="SDPA"), _is("causal", dtype))))
    return out


def _bf16_speedup(rows):
    def at(dtype):
        return next((gflops(r) for r in rows if _is("causal", dtype, 2048, 128)(r)), None)

    f32, bf16 = at("f32"), at("bf16")
    value = bf16 / f32 if f32 and bf16 else None
    return Target("causal S=2048 D=128: ours bf16 GFLOP/s / ours f32 GFLOP/s", ">=", 1.5, value,
                  "causal S=2048 D=128" if value is not None else "")


def _our_stages_s(row):
    stages = row.get("stages", {}).get("ours")
    return sum(t for s, t in stages.items() if s != "export") if stages else None


def _compile_targets(rows):
    return [_target("compile time per op, s (torch_mlir_flex.compile, cache off)", "<", 1.0,
                    _worst(rows, lambda r: r.get("compile_s", {}).get("ours"))),
            _target("compile time per op without torch.export, s (our stages)", "<", 1.0,
                    _worst(rows, _our_stages_s))]


def _memory_targets(rows, dtypes):
    mib = lambda r: None if r.get("mem", {}).get("ours") is None else r["mem"]["ours"] / 2**20  # noqa: E731
    return [_target(f"causal S={MEMORY_S} {dtype}: ours peak extra memory, MiB", "<", 64.0,
                    _worst(rows, mib, _is("causal", dtype, MEMORY_S)))
            for dtype in dtypes]


def evaluate(rows, memory_dtypes=("f32", "bf16")):
    speed_rows = [r for r in rows if r.get("purpose") != "memory"]
    return (_speed_targets(speed_rows) + [_bf16_speedup(speed_rows)] + _compile_targets(rows)
            + _memory_targets(rows, memory_dtypes))
