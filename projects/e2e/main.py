"""CLI: python -m projects.e2e.main [-f REGEX] [-v] [--backend reference|tiled|all] [-l] [--grad]

Runs every registered case (or those whose name or theme matches -f),
prints a summary table and exits non-zero if any case fails or errors.
`--grad` runs the cases' backward instead (grad_runner.py: one training
step through torch.compile, gradients against float64 math).
Run from the repository root with PYTHONPATH=python (for torch_mlir_flex).
"""

import argparse
import sys
import warnings

import torch_mlir_flex  # noqa: F401  (before torch_mlir)


def main(argv=None) -> int:
    from torch_mlir_flex.backend import PIPELINES

    from .registry import all_cases
    from .grad_runner import run_grad_case
    from .runner import format_table, run_case

    p = argparse.ArgumentParser(prog="python -m projects.e2e.main", description=__doc__.splitlines()[0])
    p.add_argument("-f", "--filter", default=None, help="regex on case name or theme (file)")
    p.add_argument("-v", "--verbose", action="store_true", help="print each result as it finishes and full details")
    p.add_argument("--backend", default="all", help=f"one of {sorted(PIPELINES)} or 'all'")
    p.add_argument("-l", "--list", action="store_true", help="list the cases and exit")
    p.add_argument("--grad", action="store_true", help="check the backward (gradients) instead")
    args = p.parse_args(argv)

    if args.backend == "all":
        backends = sorted(PIPELINES)
    elif args.backend in PIPELINES:
        backends = [args.backend]
    else:
        print(f"error: unknown backend {args.backend!r}; known: {sorted(PIPELINES)} or 'all'", file=sys.stderr)
        return 2
    cases = all_cases(args.filter)
    if not cases:
        print(f"error: no case matches {args.filter!r}", file=sys.stderr)
        return 2
    if args.list:
        for c in cases:
            print(f"{c.theme:<11} {c.name:<36} {c.description}")
        return 0
    warnings.filterwarnings("ignore")
    results = []
    for b in backends:
        for c in cases:
            r = (run_grad_case if args.grad else run_case)(c, b, verbose=args.verbose)
            results.append(r)
            if args.verbose:
                print(f"[{r.status}] {r.name} ({r.backend}) {r.seconds:.1f}s {r.detail.splitlines()[0] if r.detail else ''}",
                      flush=True)
    print(format_table(results, verbose=args.verbose))
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
