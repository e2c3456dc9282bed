"""End-to-end suite: PyTorch models with flex_attention, compiled by
torch_mlir_flex and compared with eager PyTorch. See README.md."""
