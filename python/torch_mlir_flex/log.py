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
import functools
import itertools
import logging
import os
import time

LOGGER_NAME = "torch_mlir_flex"
DUMP_ENV = "TORCH_MLIR_FLEX_DUMP_IR"
LEVEL_ENV = "TORCH_MLIR_FLEX_LOG"

logger = logging.getLogger(LOGGER_NAME)
_dump_ids = itertools.count()


def get_logger(name: str = "") -> logging.Logger:
    return logger.getChild(name) if name else logger


def enable(level=logging.INFO) -> logging.Logger:
    """Sends `torch_mlir_flex` records at `level` and above to stderr (and
    not to the root logger's handlers, so they print once)."""
    logger.setLevel(level)
    logger.propagate = False
    if not any(getattr(h, "_torch_mlir_flex", False) for h in logger.handlers):
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("[%(name)s] %(levelname)s: %(message)s"))
        handler._torch_mlir_flex = True
        logger.addHandler(handler)
    return logger


@contextlib.contextmanager
def capture(level=logging.INFO):
    """Collects the messages of `torch_mlir_flex` records at `level` and
    above while the block runs (for tests and tools); yields the list."""
    messages = []

    class Collect(logging.Handler):
        def emit(self, record):
            messages.append(record.getMessage())

    class Forward(logging.Handler):
        """What propagated before the capture lowered the level, still does."""

        def emit(self, record):
            if logger.parent is not None:
                logger.parent.handle(record)

    handler, old_level, old_propagate = Collect(level), logger.level, logger.propagate
    effective = logger.getEffectiveLevel()
    logger.addHandler(handler)
    forward = None
    if effective > level:
        # Records below the old level are for the capture only: they must
        # not reach the root logger's handlers (a tool's output).
        logger.setLevel(level)
        if old_propagate:
            logger.propagate = False
            forward = Forward(effective)
            logger.addHandler(forward)
    try:
        yield messages
    finally:
        logger.removeHandler(handler)
        if forward is not None:
            logger.removeHandler(forward)
        logger.setLevel(old_level)
        logger.propagate = old_propagate


def timed(stage: str, dump: str = "", before=None):
    """Decorates a compiler stage: logs its time at INFO as `stage NAME: T s`,
    writes its result's IR to the dump directory as `<n>.<dump>.mlir` when
    TORCH_MLIR_FLEX_DUMP_IR is set, and first calls `before(*args, **kw)`."""

    def wrap(fn):
        @functools.wraps(fn)
        def staged(*args, **kwargs):
            if before is not None:
                before(*args, **kwargs)
            start = time.perf_counter()
            result = fn(*args, **kwargs)
            logger.info("stage %s: %.3f s", stage, time.perf_counter() - start)
            if dump:
                dump_ir(dump, getattr(result, "lowered", result))
            return result

        return staged

    return wrap


def dump_ir(stage: str, ir) -> None:
    """Writes `ir` to $TORCH_MLIR_FLEX_DUMP_IR/<pid>-<n>.<stage>.mlir (n counts
    the dumps of this process, so files sort in pipeline order) when the
    variable is set, and logs where."""
    directory = os.environ.get(DUMP_ENV)
    if not directory or ir is None:
        return
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"{os.getpid()}-{next(_dump_ids):04d}.{stage}.mlir")
    with open(path, "w") as f:
        f.write(str(ir))
    logger.info("IR after stage %s written to %s", stage, path)


def _level_from_env():
    value = os.environ.get(LEVEL_ENV, "").strip().upper()
    if value:
        enable(int(value) if value.isdigit() else getattr(logging, value, logging.INFO))


_level_from_env()
