"""Compile a tiny random Hugging Face Llama (GQA, rotary) built with
attn_implementation="flex_attention" through torch_mlir_flex.hf and compare
its logits with the same weights under HF eager attention, on a batch of two
sequences with left padding.

    source .venv/bin/activate          # from the repository root
    PYTHONPATH=python python examples/hf_tiny_llama.py [--backend reference|tiled]

Prints the max abs error on non-padding positions and "OK" (exit 0), or
"MISMATCH" (exit 1). Needs transformers (requirements-hf.txt); no weights
are downloaded.
"""

import argparse
import sys
import warnings

import torch_mlir_flex  # must come before anything that imports torch_mlir

import torch

TOLERANCE = 1e-5


def tiny_llama(attn_implementation):
    from transformers import AutoModelForCausalLM, LlamaConfig

    cfg = LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                      initializer_range=0.1, pad_token_id=0)
    return AutoModelForCausalLM.from_config(cfg, attn_implementation=attn_implementation).eval()


def main() -> int:
    import torch_mlir_flex.hf as flex_hf
    from torch_mlir_flex.backend import PIPELINES, FlexBackendError
    from torch_mlir_flex.backend.pipelines import DEFAULT_BACKEND

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", default=DEFAULT_BACKEND, choices=sorted(PIPELINES))
    args = p.parse_args()
    warnings.filterwarnings("ignore")

    torch.manual_seed(0)
    model = tiny_llama("flex_attention")
    eager = tiny_llama("eager")
    eager.load_state_dict(model.state_dict())
    ids = torch.randint(3, 128, (2, 45))
    mask = torch.ones(2, 45, dtype=torch.long)
    mask[1, :6] = 0
    inputs = {"input_ids": ids, "attention_mask": mask}
    try:
        fn = flex_hf.compile(model, inputs, backend=args.backend)
    except FlexBackendError as e:
        print(f"compilation failed: {e}", file=sys.stderr)
        return 1
    got = fn(**inputs)
    with torch.no_grad():
        expected = eager(**inputs).logits
    err = (got - expected)[mask.bool()].abs().max().item()
    print(f"HF tiny Llama ({args.backend}): max abs logit error vs HF eager = {err:.3e}")
    ok = err <= TOLERANCE
    print("OK" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
