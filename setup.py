"""torch-mlir-flex: builds the C++ (CMake + Ninja) and installs torch_mlir_flex.

Use `pip install --no-build-isolation -e .` inside an environment that has
requirements.txt installed (build_tools/setup_venv.sh does both). The build
directory is ./build (override with FLEX_BUILD_DIR); the MLIR Python package
and flex-opt are written into python/torch_mlir_flex/{mlir,_bin}.
"""

import os
import subprocess
import sys

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

ROOT = os.path.dirname(os.path.abspath(__file__))


def cmake_build():
    build_dir = os.environ.get("FLEX_BUILD_DIR", os.path.join(ROOT, "build"))
    os.makedirs(build_dir, exist_ok=True)
    bindir = os.path.dirname(sys.executable)
    lit = os.path.join(bindir, "lit")
    if not os.path.exists(os.path.join(build_dir, "build.ninja")):
        subprocess.check_call(
            [
                "cmake", "-G", "Ninja", "-S", ROOT, "-B", build_dir,
                "-DCMAKE_BUILD_TYPE=Release",
                f"-DPython3_EXECUTABLE={sys.executable}",
                f"-DLLVM_EXTERNAL_LIT={lit}",
                "-DCMAKE_C_COMPILER=gcc", "-DCMAKE_CXX_COMPILER=g++",
            ]
        )
    subprocess.check_call(["ninja", "-C", build_dir])


class BuildWithCMake(build_py):
    def run(self):
        cmake_build()
        super().run()


setup(
    name="torch-mlir-flex",
    version="0.1.0",
    description="PyTorch flex_attention through torch-mlir, end to end",
    python_requires=">=3.11",
    package_dir={"": "python"},
    packages=find_packages("python", exclude=["mlir_flex_src*"]),
    package_data={"torch_mlir_flex": ["mlir/**/*", "_bin/*"]},
    include_package_data=True,
    cmdclass={"build_py": BuildWithCMake},
    entry_points={
        "console_scripts": [
            "flex-opt=torch_mlir_flex.tools:flex_opt",
            "torch-mlir-flex=torch_mlir_flex.cli:main",
        ]
    },
    zip_safe=False,
)
