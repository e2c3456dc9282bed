"""Shared helpers of the robustness suite: feature probes (skip only when a
piece is absent, never on failure), subprocess runners, small models."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
PYTHON_DIR = ROOT / "python"


def flex_opt() -> str:
    from .fuzz import flex_opt_path

    return flex_opt_path()


def run_flex_opt(text: str, *args, timeout: float = 60.0) -> subprocess.CompletedProcess:
    """flex-opt ARGS on `text` (stdin)."""
    return subprocess.run([flex_opt(), *args, "-"], input=text, capture_output=True, text=True,
                          timeout=timeout)


def subprocess_env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(PYTHON_DIR), str(ROOT)] + (
        [env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return env


def run_python(code: str, *args, timeout: float = 300.0) -> subprocess.CompletedProcess:
    """Runs `code` in a fresh interpreter (so that an abort cannot kill pytest)."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True,
                          text=True, timeout=timeout, env=subprocess_env(), cwd=str(ROOT))


def died_by_signal(rc: int) -> bool:
    return rc < 0 or rc >= 128


# --------------------------------------------------------------------------
# Feature probes
# --------------------------------------------------------------------------


def backends():
    """Names of the backends to test: reference and tiled, those that exist."""
    from torch_mlir_flex.backend import PIPELINES

    return [b for b in ("reference", "tiled") if b in PIPELINES]


def require_compile():
    """Skips when `torch_mlir_flex.compile` or the flex-materialize pass it
    needs is not in this checkout/build (absent, not failing)."""
    backend = pytest.importorskip("torch_mlir_flex.backend")
    if not hasattr(backend, "compile"):
        pytest.skip("torch_mlir_flex.backend.compile is not there yet")
    from torch_mlir_flex.backend import compile as _c  # noqa: F401
    import importlib

    cm = importlib.import_module("torch_mlir_flex.backend.compile")
    if hasattr(cm, "materialize_available") and not cm.materialize_available():
        pytest.skip("the flex-materialize pass is not registered in this build")
    return backend.compile


def cli_path() -> Path:
    return PYTHON_DIR / "torch_mlir_flex" / "__main__.py"


def require_cli():
    if not cli_path().exists():
        pytest.skip("the CLI (python/torch_mlir_flex/__main__.py) does not exist yet")


def has_pass(name: str) -> bool:
    r = subprocess.run([flex_opt(), "--help"], capture_output=True, text=True)
    return f"--{name} " in r.stdout


def require_pass(name: str):
    if not has_pass(name):
        pytest.skip(f"flex-opt has no --{name} pass yet")
