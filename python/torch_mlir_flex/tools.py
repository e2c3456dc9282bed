"""Console-script shims for the native tools built next to the package."""

import os
import sys

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
