# lit configuration for torch-mlir-flex: .mlir files through flex-opt and
# FileCheck; .py files (importer/frontend/bindings) through the venv Python.
import os

import lit.formats
from lit.llvm import llvm_config

config.name = "TORCH_MLIR_FLEX"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.flex_obj_root, "test")
config.excludes = ["lit.cfg.py", "lit.site.cfg.py", "__init__.py", "conftest.py"]
# pytest files (test_*.py, pytest/ folders) live next to lit tests; lit
# runs only files with RUN lines.
config.excludes += ["pytest", "inputs", "robustness"]
# Python helpers without a RUN line (modules pytest files import) are not
# lit tests either.


def _lit_python_test(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return "RUN:" in f.read()


for _dir, _subdirs, _files in os.walk(os.path.dirname(__file__)):
    config.excludes += [f for f in _files if f.endswith(".py") and (
        f.startswith("test_") or not _lit_python_test(os.path.join(_dir, f)))]

config.environment["FILECHECK_OPTS"] = "-enable-var-scope --allow-unused-prefixes=false"
python_path = [os.path.join(config.flex_src_root, "python")]
if os.environ.get("PYTHONPATH"):
    python_path.append(os.environ["PYTHONPATH"])
config.environment["PYTHONPATH"] = os.pathsep.join(python_path)
config.substitutions.append(("%PYTHON", config.python_executable))

llvm_config.with_system_environment(["HOME", "TMPDIR"])
llvm_config.use_default_substitutions()
tool_dirs = [config.flex_tools_dir, config.llvm_tools_dir]
llvm_config.add_tool_substitutions(["flex-opt", "FileCheck", "not"], tool_dirs)

if not config.enable_python:
    config.excludes += ["python"]
