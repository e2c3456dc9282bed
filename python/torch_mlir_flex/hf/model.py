"""`compile`: a transformers PreTrainedModel + example inputs -> a callable
that takes the same named inputs and returns the logits (or, for a model
without an LM head, the last hidden state)."""

import inspect
from typing import Mapping

import torch

from ..backend.compile import FlexCompileError
from ..backend.pipelines import DEFAULT_BACKEND


class FlexHFError(FlexCompileError):
    """Bad arguments to `compile` or to a `CompiledHFModel` (stage ``hf``)."""

    def __init__(self, message: str):
        super().__init__("hf", message)


def _model_output(out):
    if isinstance(out, torch.Tensor):
        return out
    for name in ("logits", "last_hidden_state"):
        value = getattr(out, name, None)
        if value is not None:
            return value
    return out[0]


class _NamedInputs(torch.nn.Module):
    """The model called with keyword inputs from positional tensors (what
    torch.export and our JIT take), without a KV cache, returning one tensor."""

    def __init__(self, model, names):
        super().__init__()
        self.model = model
        self.names = tuple(names)
        params = inspect.signature(model.forward).parameters
        self.extra = {"use_cache": False} if "use_cache" in params else {}

    def forward(self, *args):
        out = self.model(**dict(zip(self.names, args)), **self.extra, return_dict=True)
        return _model_output(out)


def _check_inputs(example_inputs):
    if not isinstance(example_inputs, Mapping) or not example_inputs:
        raise FlexHFError("example_inputs must be a non-empty dict of name -> torch.Tensor, "
                          "e.g. {'input_ids': ids, 'attention_mask': mask}")
    for name, value in example_inputs.items():
        if not isinstance(value, torch.Tensor):
            raise FlexHFError(f"example input {name!r} is a {type(value).__name__}, expected a torch.Tensor")


def compile(model, example_inputs: Mapping[str, torch.Tensor], backend: str = DEFAULT_BACKEND,
            opt_level: int = 2):
    """Compile a transformers model (causal LM, encoder or encoder-decoder,
    best built with ``attn_implementation="flex_attention"``) for the named
    `example_inputs` (input_ids, attention_mask, position_ids,
    decoder_input_ids, ...). The model is exported in eval mode without a KV
    cache; shapes and dtypes are those of the examples. `opt_level` is the
    JIT's LLVM level (0 compiles a whole model several times faster).
    Returns a `CompiledHFModel`; raises `FlexCompileError`."""
    from .. import compile as flex_compile
    from .patches import export_patches

    if not isinstance(model, torch.nn.Module):
        raise FlexHFError(f"expected a transformers PreTrainedModel, got {type(model).__name__}")
    _check_inputs(example_inputs)
    names = list(example_inputs)
    was_training = model.training
    model.eval()
    try:
        with export_patches(caller_gave_position_ids="position_ids" in example_inputs):
            compiled = flex_compile(_NamedInputs(model, names), tuple(example_inputs.values()), backend=backend,
                                    opt_level=opt_level)
    finally:
        model.train(was_training)
    return CompiledHFModel(compiled, names)


class CompiledHFModel:
    """Callable result of `hf.compile`: ``fn(input_ids=..., attention_mask=...)``
    (or the same tensors positionally, in the order of the example inputs)
    -> logits. `.compiled` is the underlying `CompiledModule` (IR of every
    stage)."""

    def __init__(self, compiled, names):
        self.compiled = compiled
        self.input_names = tuple(names)

    def __call__(self, *args, **kwargs):
        if len(args) > len(self.input_names):
            raise FlexHFError(f"takes {len(self.input_names)} inputs {list(self.input_names)}, got {len(args)}")
        given = dict(zip(self.input_names, args))
        for name, value in kwargs.items():
            if name in given:
                raise FlexHFError(f"input {name!r} given twice")
            given[name] = value
        if set(given) != set(self.input_names):
            raise FlexHFError(f"compiled for inputs {list(self.input_names)}, got {sorted(given)}")
        return self.compiled(*(given[n] for n in self.input_names))

    def with_backend(self, backend: str, opt_level: int = 2) -> "CompiledHFModel":
        """The same model JIT-compiled with another lowering pipeline, from
        this one's flex IR (no new export)."""
        from ..backend import compile_mlir

        compiled = compile_mlir(self.compiled.flex_ir, backend=backend, func_name=self.compiled.func_name,
                                opt_level=opt_level, state=self.compiled.state)
        return CompiledHFModel(compiled, self.input_names)

    def __repr__(self):
        return f"<CompiledHFModel inputs={list(self.input_names)} backend={self.compiled.backend!r}>"
