"""Lets flex_attention with gradients on CPU through Dynamo when our backend
compiles the graph.

torch 2.13's `flex_attention` refuses CPU inputs that require grad
(`_validate_device`: "FlexAttention does not support backward on CPU"), in
eager, under inductor and while Dynamo traces for any backend: before a
backend sees a graph. The forward and backward graphs that AOTAutograd
makes from such a call go through our compiler (`training.py`), whose
`flex.attention_backward` computes the gradients, so the check is wrong for
those calls alone.

`install()` wraps the module's `_validate_device`: while Dynamo traces a
frame for `torch_mlir_flex` (the backend function is in the chain of the
frame's compiler), the CPU-gradient check is skipped and the rest of
torch's checks (device kinds) run; everywhere else (eager calls, inductor,
other backends) torch's function runs unchanged and raises as before.
Dynamo evaluates the test once per traced frame (`assume_constant_result`).
"""

_installed = None  # torch's _validate_device once wrapped


# Attributes through which Dynamo's wrappers reach the user's backend:
# WrapBackendDebug.compiler_fn, functools.wraps, DDPOptimizer (a bound
# compile_fn whose object holds backend_compile_fn), the callback's
# _torchdynamo_orig_backend.
_WRAPPER_ATTRS = ("compiler_fn", "__wrapped__", "backend_compile_fn", "_torchdynamo_orig_backend",
                  "func", "__self__")


def _is_ours(fn) -> bool:
    from . import flex_backend

    todo, seen = [fn], set()
    while todo and len(seen) < 64:
        f = todo.pop()
        if f is None or id(f) in seen:
            continue
        seen.add(id(f))
        if f is flex_backend:
            return True
        todo.extend(getattr(f, a, None) for a in _WRAPPER_ATTRS)
    return False


def _tracing_for_us() -> bool:
    """True while Dynamo traces a frame whose backend is ours."""
    try:
        from torch._dynamo.symbolic_convert import InstructionTranslator

        tx = InstructionTranslator.current_tx()
    except Exception:
        return False
    if tx is None:
        return False
    return _is_ours(getattr(tx.output, "compiler_fn", None))


def install() -> None:
    """Wraps torch's `_validate_device` (idempotent)."""
    global _installed
    import torch
    import torch.nn.attention.flex_attention as fa

    if _installed is not None:
        return
    original = fa._validate_device
    ours = torch._dynamo.assume_constant_result(_tracing_for_us)

    def _validate_device(query, key, value):
        if torch.compiler.is_compiling() and ours():
            if query.device.type == "cpu":
                return None
        return original(query, key, value)

    _validate_device.__wrapped__ = original
    fa._validate_device = _validate_device
    _installed = original


class allow_cpu_backward:
    """`with allow_cpu_backward():` eager `flex_attention` calls with CPU
    inputs that require grad run torch's own math (`sdpa_dense_backward`)
    instead of raising: the reference the tests compare our gradients with
    (in float64). Not thread-safe; restores torch's check on exit."""

    def __enter__(self):
        import torch.nn.attention.flex_attention as fa

        install()
        self._saved = fa._validate_device
        fa._validate_device = lambda query, key, value: None
        return self

    def __exit__(self, *exc):
        import torch.nn.attention.flex_attention as fa

        fa._validate_device = self._saved
        return False
