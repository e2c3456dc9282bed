"""Logging of the compiler: standard `logging` under the name `torch_mlir_flex`.

Off by default (Python's usual WARNING threshold). Turn it on with

    import logging; logging.getLogger("torch_mlir_flex").setLevel(logging.INFO)

plus a handler (`logging.basicConfig()`), or `torch_mlir_flex.log.enable()`,
or the environment variable TORCH_MLIR_FLEX_LOG=INFO (or DEBUG). At INFO:
each stage's time, the tile sizes and block-classification mode that
flex-to-flash chose, fallbacks of the torch.compile backend, compile-cache
hits. TORCH_MLIR_FLEX_DUMP_IR=DIR writes the IR of every stage of every
compilation to DIR (one file per stage) and logs each path.
"""

import contextlib
import itertools
import logging
import os
import re
import time

LOGGER_NAME = "torch_mlir_flex"
DUMP_ENV = "TORCH_MLIR_FLEX_DUMP_IR"
LEVEL_ENV = "TORCH_MLIR_FLEX_LOG"

logger = logging.getLogger(LOGGER_NAME)
_dump_ids = itertools.count()


def get_logger(name: str = "") -> logging.Logger:
    return logger.getChild(name) if name else logger


def enable(level=logging.INFO) -> logging.Logger:
    """Sends `torch_mlir_flex` records at `level` and above to stderr."""
    logger.setLevel(level)
    if not any(getattr(h, "_torch_mlir_flex", False) for h in logger.handlers):
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("[%(name)s] %(levelname)s: %(message)s"))
        handler._torch_mlir_flex = True
        logger.addHandler(handler)
    return logger


@contextlib.contextmanager
def stage(name: str):
    """Times the block and logs it at INFO as `stage NAME: T s`."""
    start = time.perf_counter()
    try:
        yield
    finally:
        logger.info("stage %s: %.3f s", name, time.perf_counter() - start)


def new_dump_id(func_name: str) -> str:
    """A prefix naming one compilation's dump files (unique in this process)."""
    return f"{os.getpid()}-{next(_dump_ids):03d}-{re.sub(r'[^A-Za-z0-9_.-]', '_', func_name)}"


def dump_ir(dump_id: str, stage_name: str, text) -> None:
    """Writes `text` to $TORCH_MLIR_FLEX_DUMP_IR/<dump_id>.<stage>.mlir when
    the variable is set, and logs where."""
    directory = os.environ.get(DUMP_ENV)
    if not directory or text is None:
        return
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"{dump_id}.{stage_name}.mlir")
    with open(path, "w") as f:
        f.write(str(text))
    logger.info("IR after stage %s written to %s", stage_name, path)


def _level_from_env():
    value = os.environ.get(LEVEL_ENV, "").strip().upper()
    if value:
        enable(int(value) if value.isdigit() else getattr(logging, value, logging.INFO))


_level_from_env()
