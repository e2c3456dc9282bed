"""The keyword arguments `torch.compile` hands our Dynamo backend: `mode`
and `options`, read into the settings of our pipeline (`BackendArgs`).

`torch.compile(fn, backend="torch_mlir_flex", mode=..., options=...)` calls
a registered backend as `backend(gm, example_inputs, **kwargs)` where
kwargs holds `mode` unless it is None or "default", and `options` unless
it is empty (torch/__init__.py, `_TorchCompileWrapper`); torch itself
refuses both at once and takes `guard_filter_fn` and `use_aoti` out of the
options before. Nothing else reaches a backend.

- `mode`: "default", "reduce-overhead", "max-autotune",
  "max-autotune-no-cudagraphs" (Inductor's modes, which transformers'
  `CompileConfig` always passes). They choose CUDA graphs and autotuning,
  neither of which exists in our CPU pipeline: accepted and ignored (a
  DEBUG record says so). Another string is refused, as torch refuses it
  for Inductor.
- `options`: ours are `backend` (the lowering pipeline, a name of
  `backend.pipelines.PIPELINES`; default "tiled") and `opt_level` (LLVM's
  optimization level of the JIT, 0-3; default 2). Inductor's options
  (`torch._inductor.list_options()`, e.g. "epilogue_fusion",
  "triton.cudagraphs") mean nothing here: ignored with a DEBUG record. A
  key that is neither is refused, as torch refuses it for Inductor (a
  misspelt `backend` must not pass silently).
"""

from dataclasses import dataclass
from typing import Optional

from ..log import get_logger

log = get_logger("dynamo")

MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
OUR_OPTIONS = {
    "backend": "the lowering pipeline (backend.pipelines.PIPELINES; default 'tiled')",
    "opt_level": "LLVM's optimization level of the JIT, 0-3 (default 2)",
}
DEFAULT_OPT_LEVEL = 2


@dataclass(frozen=True)
class BackendArgs:
    """What `mode` and `options` set for our pipeline: `pipeline` (None: the
    default one) and the JIT's `opt_level`."""

    pipeline: Optional[str] = None
    opt_level: int = DEFAULT_OPT_LEVEL


def parse(mode: Optional[str] = None, options: Optional[dict] = None,
          pipeline: Optional[str] = None) -> BackendArgs:
    """`BackendArgs` from torch.compile's `mode` and `options`; `pipeline`
    is the default of the "backend" option. Raises ValueError for a mode or
    option torch would refuse for Inductor, or a value of ours that is
    wrong (an unknown pipeline, an opt_level outside 0-3)."""
    if mode is not None:
        if mode not in MODES:
            raise ValueError(f"torch_mlir_flex: unrecognized mode={mode!r}, should be one of: "
                             f"{', '.join(MODES)}")
        if mode != "default":
            log.debug("torch_mlir_flex: mode=%r ignored: it chooses CUDA graphs and autotuning, "
                      "which the CPU pipeline does not have", mode)
    if options is not None and not isinstance(options, dict):
        raise TypeError(f"torch_mlir_flex: options must be a dict, got {type(options).__name__}")
    options = dict(options or {})
    opt_level = options.pop("opt_level", DEFAULT_OPT_LEVEL)
    if isinstance(opt_level, bool) or not isinstance(opt_level, int) or not 0 <= opt_level <= 3:
        raise ValueError(f"torch_mlir_flex: options['opt_level'] must be an int from 0 to 3, "
                         f"got {opt_level!r}")
    pipeline = options.pop("backend", pipeline)
    if pipeline is not None:
        from ..backend.pipelines import PIPELINES

        if pipeline not in PIPELINES:
            raise ValueError(f"torch_mlir_flex: options['backend'] is {pipeline!r}; known pipelines: "
                             f"{sorted(PIPELINES)}")
    for key in sorted(options):
        if not _inductor_option(key):
            raise ValueError(f"torch_mlir_flex: unexpected option {key!r}; ours: "
                             + "; ".join(f"{k!r}: {v}" for k, v in OUR_OPTIONS.items())
                             + " (Inductor's options are accepted and ignored)")
        log.debug("torch_mlir_flex: option %r=%r ignored: an Inductor option", key, options[key])
    return BackendArgs(pipeline=pipeline, opt_level=opt_level)


def _inductor_option(key) -> bool:
    """Whether Inductor knows `key` (torch.compile's check for Inductor)."""
    if not isinstance(key, str):
        return False
    from torch._inductor import config

    return key.replace("-", "_") in config.get_config_copy()
