"""Lowering helpers that know about ``torch_mlir_flex.hop_flex_attention``.

``torch-reduce-op-variants`` (part of
``torchdynamo-export-to-torch-backend-pipeline``) rejects a ``torch.operator``
unless the extra library declares that it has value semantics.  The pipeline
therefore must be given ``extra-library=<flex_extra_library_path()>``;
``lower_to_torch_backend`` does that.  ``backend-legal-ops`` is not needed.
"""

import atexit
import hashlib
import os
import shutil
import tempfile
from typing import List, Optional

from torch_mlir.compiler_utils import run_pipeline_with_repro_report

from .flex_backward_hop import BACKWARD_OP
from .flex_hop import CAPTURE_OP

FLEX_EXTRA_LIBRARY_MLIR = f"""module {{
  func.func @"__torch_mlir_has_value_semantics_fn.{CAPTURE_OP}"() {{
    return
  }}
  func.func @"__torch_mlir_has_value_semantics_fn.{BACKWARD_OP}"() {{
    return
  }}
}}
"""


_PRIVATE_DIR: List[str] = []


def _private_dir() -> str:
    """A directory only this process writes (0700, made by mkdtemp, removed
    at exit): the library file must not sit at a predictable shared path,
    where another user could plant one first."""
    if not _PRIVATE_DIR:
        d = tempfile.mkdtemp(prefix="torch_mlir_flex_")
        atexit.register(shutil.rmtree, d, True)
        _PRIVATE_DIR.append(d)
    return _PRIVATE_DIR[0]


def flex_extra_library_path(extra_mlir: str = "") -> str:
    """Path of an MLIR file usable as the pipeline's ``extra-library``.

    ``extra_mlir`` (the body of another library module, without the
    surrounding ``module {}``) is appended if given."""
    text = FLEX_EXTRA_LIBRARY_MLIR
    if extra_mlir:
        text = text.rstrip().rstrip("}") + extra_mlir + "\n}\n"
    digest = hashlib.sha1(text.encode()).hexdigest()[:16]
    path = os.path.join(_private_dir(), f"library_{digest}.mlir")
    if not os.path.exists(path):
        fd, tmp = tempfile.mkstemp(dir=_private_dir(), suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    return path


def torch_backend_pipeline(backend_legal_ops: Optional[List[str]] = None) -> str:
    opts = f"extra-library={flex_extra_library_path()}"
    if backend_legal_ops:
        opts = "backend-legal-ops=" + ",".join(backend_legal_ops) + " " + opts
    return (
        "builtin.module(func.func(torch-match-quantized-custom-ops), "
        f"torchdynamo-export-to-torch-backend-pipeline{{{opts}}})"
    )


def lower_to_torch_backend(
    module,
    *,
    backend_legal_ops: Optional[List[str]] = None,
    enable_ir_printing: bool = False,
):
    """Runs torchdynamo-export-to-torch-backend-pipeline in place."""
    run_pipeline_with_repro_report(
        module,
        torch_backend_pipeline(backend_legal_ops),
        "Lowering TorchFX IR (with flex_attention) -> Torch Backend IR",
        enable_ir_printing=enable_ir_printing,
    )
    return module
