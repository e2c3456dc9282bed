"""Matmul micro-benchmark over the models' linear layers: ours (a compiled
`F.linear` with the weight as a runtime argument, i.e. flex-matmul-to-blas)
beside `torch.nn.functional.linear`, interleaved in one process."""

import torch

from ..timing import interleaved_medians

# (M, N, K): tokens x out features x in features.
SHAPES = [
    (512, 3072, 1024), (512, 1024, 1024), (512, 4096, 1024), (512, 1024, 4096),
    (128, 1152, 896), (128, 896, 896), (128, 4864, 896), (128, 896, 4864), (128, 151936, 896),
    (1024, 4864, 896), (1024, 896, 4864),
]


class _Linear(torch.nn.Module):
    def __init__(self, w):
        super().__init__()
        self.w = torch.nn.Parameter(w, requires_grad=False)

    def forward(self, x):
        return torch.nn.functional.linear(x, self.w)


def run(dtypes=("f32", "bf16"), shapes=SHAPES, reps=15, log=print):
    import torch_mlir_flex

    rows = []
    for dt_name in dtypes:
        dt = {"f32": torch.float32, "bf16": torch.bfloat16}[dt_name]
        for m, n, k in shapes:
            g = torch.Generator().manual_seed(0)
            x = torch.randn(m, k, generator=g).to(dt)
            mod = _Linear(torch.randn(n, k, generator=g).to(dt))
            ours = torch_mlir_flex.compile(mod, (x,))
            with torch.no_grad():
                t = interleaved_medians({"torch": lambda: mod(x), "ours": lambda: ours(x)}, reps)
            gf = 2.0 * m * n * k / 1e9
            row = {"shape": f"{m}x{n}x{k}", "dtype": dt_name, "torch": gf / t["torch"], "ours": gf / t["ours"]}
            row["ratio"] = row["ours"] / row["torch"]
            log(f"  gemm {row['shape']:18s} {dt_name}: torch {row['torch']:.0f} ours {row['ours']:.0f} GFLOP/s")
            rows.append(row)
    return rows


def gemm_table(rows):
    lines = ["| linear M x N x K | dtype | torch GFLOP/s | ours GFLOP/s | ours/torch |", "|---|---|---|---|---|"]
    lines += [f"| {r['shape']} | {r['dtype']} | {r['torch']:.0f} | {r['ours']:.0f} | {r['ratio']:.2f} |"
              for r in rows]
    return "\n".join(lines)
