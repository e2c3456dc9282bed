"""What `python -m torch_mlir_flex.serve` changes in the model's process.

`transformers serve` loads each model in a process of its own (spawned: it
imports this module afresh, and our settings reach it as the pickled
`ModelLoader` and `GenerationState`). There, `FlexModelLoader`:
- makes sure `backend="torch_mlir_flex"` is registered with Dynamo (the
  entry point does it for an installed package, `register()` for a source
  checkout), and registers our paged flex attention when the model loads
  with it (`--attn-implementation flex_paged`, torch_mlir_flex.hf.paged);
- loads on the CPU without a `device_map` (transformers asks for
  `accelerate` for any `device_map`, "cpu" included), and without hub
  kernels when the `kernels` package is absent (`from_pretrained` asks for
  it unless USE_HUB_KERNELS=0; requirements-hf.txt leaves it out);
- keeps the continuous-batching manager the runner creates on the model,
  so that `engine_report` can read its KV cache, and logs the compile
  counts once the manager's warmup has compiled.

`engine_report(model, processor)` runs in that process (the server sends it
through `EngineClient.submit`): the backend, `torch_mlir_flex.dynamo.stats`
and the KV cache's free capacity.
"""

import os

from transformers.cli.serving.model_manager import ModelLoader
from transformers.generation.configuration_utils import CompileConfig
from transformers.utils import logging
from transformers.utils.import_utils import is_kernels_available

from . import BACKENDS

# Under `transformers.cli`, whose level is serve's --log-level (info by default)
log = logging.get_logger("transformers.cli.serving.torch_mlir_flex")


def compile_config(backend: str):
    """The CompileConfig of the continuous-batching forward for `backend`
    (None: not compiled). mode "default": CompileConfig's own default,
    "reduce-overhead", asks inductor for CUDA graphs; dynamic None:
    Dynamo's automatic dynamic shapes (a batch's token count changes at
    every step; dynamic=False would recompile each new count until
    Dynamo's recompile limit, then run eagerly)."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}: expected one of {', '.join(BACKENDS)}")
    if backend == "none":
        return None
    return CompileConfig(backend=backend, mode="default", fullgraph=False, dynamic=None)


class FlexModelLoader(ModelLoader):
    """transformers' ModelLoader (the server's settings) with the changes
    above. `backend` only labels the reports; the compile settings travel in
    the ContinuousBatchingConfig."""

    @classmethod
    def from_loader(cls, loader: ModelLoader, backend: str) -> "FlexModelLoader":
        new = cls.__new__(cls)
        new.__dict__.update(loader.__dict__)
        new.flex_backend = backend
        if new.device == "cpu" or (new.device == "auto" and not _has_accelerator()):
            new.device = None  # from_pretrained's default: the CPU, no accelerate needed
        return new

    def load_model_and_processor(self, model_id, on_progress=None):
        if self.flex_backend == "torch_mlir_flex":
            from .. import dynamo

            dynamo.register()
        if self.attn_implementation == "flex_paged":
            from ..hf.paged import register_paged_flex

            register_paged_flex()
        if not is_kernels_available():
            os.environ.setdefault("USE_HUB_KERNELS", "0")
        model, processor = super().load_model_and_processor(model_id, on_progress=on_progress)
        model._flex_backend = self.flex_backend
        _keep_manager(model)
        return model, processor


def _has_accelerator() -> bool:
    import torch

    return torch.cuda.is_available() or torch.backends.mps.is_available()


def _keep_manager(model) -> None:
    """Wraps the model's `init_continuous_batching` (the runner calls it
    once, then `warmup()`) to keep the manager on the model, log the
    compile counts after its warmup and count the requests cancelled while
    in the batch (the runner calls `cancel_request` only for those)."""
    init = model.init_continuous_batching

    def init_continuous_batching(*args, **kwargs):
        manager = init(*args, **kwargs)
        model._flex_cb_manager = manager
        warmup = manager.warmup

        def warmup_and_log():
            warmup()
            log.info("torch_mlir_flex.serve: warmup done with backend %s: %s",
                        model._flex_backend, _dynamo_stats())

        manager.warmup = warmup_and_log
        cancel_request = manager.cancel_request
        model._flex_cancelled = 0

        def count_and_cancel(request_id):
            model._flex_cancelled += 1  # a request left the batch unfinished (its client left)
            cancel_request(request_id)

        manager.cancel_request = count_and_cancel
        return manager

    model.init_continuous_batching = init_continuous_batching


def _dynamo_stats() -> dict:
    from ..dynamo import stats

    return {key: int(value) for key, value in stats.items()}


def engine_report(model, processor) -> dict:
    """In the model's process: the backend, the torch_mlir_flex Dynamo
    counts (graphs, compiled, eager, eager_calls, ...: zero for another
    backend) and, with continuous batching, the KV cache's free and total
    bytes, the requests in the batch and those cancelled so far."""
    report = {"backend": getattr(model, "_flex_backend", None), "dynamo": _dynamo_stats()}
    manager = getattr(model, "_flex_cb_manager", None)
    processor_ = None if manager is None else manager.batch_processor
    if processor_ is not None:
        cache = processor_.cache
        report["kv_cache"] = {
            "free_bytes": int(cache.compute_free_capacity(relative=False)),
            "total_bytes": int(cache.num_sectors * cache.bytes_per_sector),
            "num_blocks": int(cache.num_blocks),
        }
        scheduler = processor_.scheduler
        report["requests"] = {"active": len(scheduler.active_requests),
                              "waiting": len(scheduler.waiting_requests),
                              "cancelled": getattr(model, "_flex_cancelled", 0)}
    return report
