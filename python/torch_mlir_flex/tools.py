"""Console-script shims for the native tools built next to the package."""

import os
import sys


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
    os.execv(path, [path] + sys.argv[1:])
