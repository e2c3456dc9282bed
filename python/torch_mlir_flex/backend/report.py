"""What flex-to-flash chose for each flex.attention (tile sizes, block
classification), read back from the attributes it leaves on its scf.forall;
logged at INFO by `compile` (computed only when that level is on)."""

import logging
import re
from typing import List, Tuple

from ..log import get_logger
from .pipelines import DEFAULT_BACKEND, get_pipeline

log = get_logger("backend")

_FLASH_PASS = re.compile(r"flex-to-flash(\{[^}]*\})?")


def flash_choices(flex_text: str, pipeline_text: str) -> List[Tuple[Tuple[int, ...], str]]:
    """[(tile sizes (Mt, Nt), block-classification mode)] per flex.attention
    that the pipeline's flex-to-flash pass lowers; [] when it has none."""
    from ..mlir import ir, passmanager

    m = _FLASH_PASS.search(pipeline_text)
    if m is None:
        return []
    choices = []
    with ir.Context():
        module = ir.Module.parse(flex_text)
        passmanager.PassManager.parse(f"builtin.module(func.func({m.group(0)}))").run(module.operation)

        def visit(op):
            attrs = op.operation.attributes
            if "flex.tiles" in attrs:
                tiles = tuple(ir.DenseI64ArrayAttr(attrs["flex.tiles"]))
                choices.append((tiles, ir.StringAttr(attrs["flex.block_classification"]).value))
            return ir.WalkResult.ADVANCE

        module.operation.walk(visit)
    return choices


def log_flash_choices(flex_text: str, func_name: str = "main", backend: str = DEFAULT_BACKEND, **_) -> None:
    """Logs what flex-to-flash chooses for `backend` (takes `jit`'s arguments)."""
    if not log.isEnabledFor(logging.INFO):
        return
    try:
        choices = flash_choices(flex_text, get_pipeline(backend))
    except Exception as e:  # logging must never break a compilation
        log.info("flex-to-flash choices unavailable: %s", e)
        return
    for i, (tiles, mode) in enumerate(choices):
        log.info("flex.attention #%d: tiles %s, block classification %s",
                 i, "x".join(map(str, tiles)), mode)
