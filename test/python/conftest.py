# Our MLIR/LLVM must load before torch-mlir's (see torch_mlir_flex._load_order).
import torch_mlir_flex  # noqa: F401
