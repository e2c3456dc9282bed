"""Hugging Face e2e suite: tiny random transformers models built with
attn_implementation="flex_attention", compiled by torch_mlir_flex.hf and
compared with the same weights under HF eager attention."""
