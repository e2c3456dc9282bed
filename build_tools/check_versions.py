"""Fails when the installed LLVM/MLIR or torch differ from the pins."""

import re
import sys
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    pins = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.-]+)==([^\s#]+)", line)
        if m:
            pins[m.group(1).lower()] = m.group(2)
    bad = []
    for name, want in pins.items():
        try:
            have = metadata.version(name)
        except metadata.PackageNotFoundError:
            bad.append(f"{name}: not installed (want {want})")
            continue
        if have.split("+")[0] != want:
            bad.append(f"{name}: {have} installed, {want} pinned")
    cmake = (ROOT / "CMakeLists.txt").read_text()
    if "find_package(MLIR 22.1.8" not in cmake:
        bad.append("CMakeLists.txt does not pin MLIR 22.1.8")
    if not pins.get("xtc-mlir-dev", "").startswith("22.1.8"):
        bad.append("requirements.txt does not pin xtc-mlir-dev 22.1.8.x")
    for b in bad:
        print("version check:", b, file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
