"""Complete FX import of torch.ops.higher_order.flex_attention (see docs/importer.md)."""

from .errors import FlexImportError
from .fx_importer import (
    FlexFxImporter,
    FlexGraphNodeImporter,
    export_and_import,
    stateless_fx_import,
)
from .flex_hop import CAPTURE_OP, UPSTREAM_OP
from .pipeline import flex_extra_library_path, lower_to_torch_backend, torch_backend_pipeline
from .verify import verify_flex_calls

__all__ = [
    "CAPTURE_OP",
    "UPSTREAM_OP",
    "FlexFxImporter",
    "FlexGraphNodeImporter",
    "FlexImportError",
    "export_and_import",
    "flex_extra_library_path",
    "lower_to_torch_backend",
    "stateless_fx_import",
    "torch_backend_pipeline",
    "verify_flex_calls",
]
