"""The backward of an e2e case: the case's model trained one step through
`torch.compile(model, backend="torch_mlir_flex")` (options: the lowering
pipeline), gradients of every floating-point input and parameter against
torch's math in float64 (eager flex_attention with the CPU check lifted:
`sdpa_dense_backward`; `allow_cpu_backward`).

The loss is a fixed weighted sum of the floating-point outputs (logsumexp
included when a case returns it), so that every output element has its
own weight. Tolerance: twice the case's forward tolerance.
"""

import copy
import time
import traceback
import warnings

import torch_mlir_flex  # noqa: F401  (must precede anything importing torch_mlir)

from .registry import E2ECase
from .runner import ERROR, FAIL, PASS, SKIP, XFAIL, XPASS, CaseResult, _seed, compare

GRAD_TOLERANCE_FACTOR = 2.0

_HOP_MAX = ("torch 2.13's Dynamo fails on a direct flex_attention HOP call with OUTPUT_MAX under "
            "autograd (InternalTorchDynamoError 'too many values to unpack', any backend, aot_eager too)")
# Cases whose backward torch itself cannot trace (checked with aot_eager and in eager).
TORCH_LIMITS = {
    "lse_and_max_scores": _HOP_MAX,
    "max_scores_softcap": _HOP_MAX,
    "runtime_row_dot": ("torch 2.13 cannot trace the gradient of a score_mod that reads a captured "
                        "tensor's row (torch.dot(emb[q], emb[kv])): zeros_and_scatter's vmap rule "
                        "asserts, in eager too"),
}


def has_gradient(case: E2ECase) -> bool:
    """A case whose inputs include a floating-point tensor (q, k, v...)."""
    import torch

    return any(isinstance(a, torch.Tensor) and a.is_floating_point() for a in case.input_sets()[0])


def _leaves(args, dtype=None):
    import torch

    out = []
    for a in args:
        if isinstance(a, torch.Tensor) and a.is_floating_point():
            a = a.detach().to(dtype or a.dtype).requires_grad_(True)
        out.append(a)
    return out


def _loss(out):
    import torch

    outs = out if isinstance(out, (tuple, list)) else (out,)
    loss = 0
    for o in outs:
        if isinstance(o, torch.Tensor) and o.is_floating_point():
            w = torch.linspace(-1, 1, o.numel(), dtype=torch.float64).reshape(o.shape).to(o.dtype)
            loss = loss + (o * w).sum()
    return loss


def _grads(model, args):
    import torch

    params = [p for p in model.parameters()] if isinstance(model, torch.nn.Module) else []
    tensors = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad] + params
    _loss(model(*args)).backward()
    return [t.grad for t in tensors]


def run_grad_case(case: E2ECase, backend: str = "reference", verbose: bool = False) -> CaseResult:
    import torch

    from torch_mlir_flex import dynamo
    from torch_mlir_flex.dynamo.device_check import allow_cpu_backward

    t0 = time.time()
    res = CaseResult(case.name, backend, PASS)
    if not case.supports(backend) or not has_gradient(case):
        res.status, res.detail = SKIP, "no gradient" if case.supports(backend) else "backend"
        return res
    try:
        _seed(case)
        model = case.model_factory()
        if isinstance(model, torch.nn.Module):
            model.train()
        args = case.input_sets()[0]
        ref_model = copy.deepcopy(model)
        if isinstance(ref_model, torch.nn.Module):
            ref_model = ref_model.double()
        dynamo.register()
        torch._dynamo.reset()
        before = dict(dynamo.stats)
        compiled = torch.compile(model, backend=dynamo.NAME, options={"backend": backend})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = _grads(compiled, _leaves(args))
        eager = dynamo.stats["eager"] - before.get("eager", 0)
        with allow_cpu_backward():
            want = _grads(ref_model, _leaves(args, torch.float64))
        worst = 0.0
        rtol, atol = case.rtol * GRAD_TOLERANCE_FACTOR, case.atol * GRAD_TOLERANCE_FACTOR
        for i, (g, w) in enumerate(zip(got, want)):
            if (g is None) != (w is None):
                res.status, res.detail = FAIL, f"gradient {i}: {'missing' if g is None else 'unexpected'}"
                break
            if g is None:
                continue
            ok, err, msg = compare(g.double(), w, rtol, atol)
            worst = max(worst, err or 0.0)
            if not ok:
                res.status, res.detail = FAIL, f"gradient {i}: {msg}"
                break
        res.max_abs_err = worst
        if res.status == PASS and eager:
            res.status, res.detail = FAIL, f"{eager} graph(s) ran in eager PyTorch"
    except Exception as e:  # a bug in the case or in the compiler
        res.status, res.stage = ERROR, "case"
        res.detail = f"{type(e).__name__}: {e}"
        if verbose:
            res.detail += "\n" + traceback.format_exc()
    xfail = case.xfail or TORCH_LIMITS.get(case.name)
    if xfail:
        if res.status in (FAIL, ERROR):
            res.status, res.detail = XFAIL, f"expected failure ({xfail}): {res.detail}"
        elif res.status == PASS:
            res.status, res.detail = XPASS, f"unexpected pass; remove xfail ({xfail})"
    res.seconds = time.time() - t0
    return res
