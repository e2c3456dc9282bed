"""Build hook of torch-mlir-flex: CMake + Ninja before build_py.

Metadata, dependencies and entry points are in pyproject.toml; this file
only runs the C++ build. It writes the MLIR Python package and flex-opt into
python/torch_mlir_flex/{mlir,_bin}, which build_py then packages.

Build directory: $FLEX_BUILD_DIR, else ./build for editable installs (the
developer's build, reused by `ninja -C build`) and ./build-wheel for
`pip install .` / `pip wheel .`. LLVM/MLIR come from the xtc-* packages of
the Python running the build (pip's isolated build environment, or the venv
with --no-build-isolation); when that changes, the build is reconfigured.
CMAKE_BUILD_PARALLEL_LEVEL=N limits the build to N jobs.
"""

import os
import shutil
import subprocess
import sys

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

ROOT = os.path.dirname(os.path.abspath(__file__))


def pypi_mlir_site() -> str:
    """site-packages directory holding the xtc packages' mlir/ and llvm/."""
    import importlib.util

    spec = importlib.util.find_spec("mlir")
    for loc in (spec.submodule_search_locations or []) if spec else []:
        site = os.path.dirname(loc)
        if os.path.exists(os.path.join(site, "mlir", "lib", "cmake", "mlir", "MLIRConfig.cmake")):
            return site
    sys.exit("torch-mlir-flex: the xtc-mlir-dev package is not installed in the build "
             "environment (pip installs it from pyproject.toml's build requirements)")


def cached_value(build_dir: str, name: str):
    path = os.path.join(build_dir, "CMakeCache.txt")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        for line in f:
            if line.startswith(name + ":"):
                return line.split("=", 1)[1].strip()
    return None


def cmake_build(build_dir: str):
    site = pypi_mlir_site()
    mlir_dir = os.path.join(site, "mlir", "lib", "cmake", "mlir")
    args = [
        "cmake", "-G", "Ninja", "-S", ROOT, "-B", build_dir,
        "-DCMAKE_BUILD_TYPE=Release",
        f"-DPython3_EXECUTABLE={sys.executable}",
        f"-DMLIR_DIR={mlir_dir}",
        f"-DLLVM_DIR={os.path.join(site, 'llvm', 'lib', 'cmake', 'llvm')}",
        f"-DFLEX_PYPI_SITE={site}",
        "-DCMAKE_C_COMPILER=gcc", "-DCMAKE_CXX_COMPILER=g++",
    ]
    lit = shutil.which("lit", path=os.path.dirname(sys.executable))
    if lit:
        args.append(f"-DLLVM_EXTERNAL_LIT={lit}")
    configured = os.path.exists(os.path.join(build_dir, "build.ninja"))
    if configured and (cached_value(build_dir, "MLIR_DIR") != mlir_dir
                       or cached_value(build_dir, "Python3_EXECUTABLE") != sys.executable):
        print(f"torch-mlir-flex: new build environment, reconfiguring {build_dir}", flush=True)
        args.append("--fresh")
        configured = False
    os.makedirs(build_dir, exist_ok=True)
    if not configured:
        subprocess.check_call(args)
    jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL")  # default: ninja's own
    subprocess.check_call(["ninja", "-C", build_dir] + ([f"-j{jobs}"] if jobs else []))


def copy_external_links(package_dir: str):
    """The MLIR Python sources are symlinks into the build environment's
    site-packages; pip deletes an isolated one after the build, so an
    editable install keeps copies instead."""
    for dirpath, _, files in os.walk(package_dir):
        for name in files:
            path = os.path.join(dirpath, name)
            if os.path.islink(path) and not os.path.realpath(path).startswith(ROOT + os.sep):
                target = os.path.realpath(path)
                os.remove(path)
                shutil.copy2(target, path)


class BuildWithCMake(build_py):
    def run(self):
        default = "build" if getattr(self, "editable_mode", False) else "build-wheel"
        cmake_build(os.path.abspath(os.environ.get("FLEX_BUILD_DIR") or os.path.join(ROOT, default)))
        copy_external_links(os.path.join(ROOT, "python", "torch_mlir_flex", "mlir"))
        super().run()


class NativeDistribution(Distribution):
    """Holds native libraries: the wheel gets a CPython/platform tag."""

    def has_ext_modules(self):
        return True


setup(
    cmdclass={"build_py": BuildWithCMake},
    distclass=NativeDistribution,
    # Not ./build: a CMake build there has a lib/ of its own.
    options={"build": {"build_base": "build-setuptools"}},
)
