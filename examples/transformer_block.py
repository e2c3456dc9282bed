"""Compile a transformer decoder block that uses flex attention (causal block
mask + an ALiBi score_mod reading a captured buffer), run it through our JIT
and compare with eager PyTorch.

    source .venv/bin/activate          # from the repository root
    PYTHONPATH=python python examples/transformer_block.py [--backend reference|tiled] [--print-ir]

Prints the max abs error and "OK" (exit 0), or "MISMATCH" (exit 1).
"""

import argparse
import sys
import warnings

import torch_mlir_flex  # must come before anything that imports torch_mlir

import torch
import torch.nn.functional as F
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

DIM, HEADS, SEQ, HIDDEN = 64, 4, 64, 128


def rms_norm(x, weight, eps=1e-6):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def rotate(x, cos, sin):
    half = x.shape[-1] // 2
    return x * cos + torch.cat([-x[..., half:], x[..., :half]], dim=-1) * sin


def causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


class Block(torch.nn.Module):
    """RMSNorm -> QKV -> rotary -> flex attention (causal + ALiBi) -> out
    projection -> residual -> RMSNorm -> SiLU-gated MLP -> residual."""

    def __init__(self):
        super().__init__()
        hd = DIM // HEADS
        self.wqkv = torch.nn.Linear(DIM, 3 * DIM, bias=False)
        self.wo = torch.nn.Linear(DIM, DIM, bias=False)
        self.w1 = torch.nn.Linear(DIM, HIDDEN, bias=False)
        self.w3 = torch.nn.Linear(DIM, HIDDEN, bias=False)
        self.w2 = torch.nn.Linear(HIDDEN, DIM, bias=False)
        self.norm1 = torch.nn.Parameter(torch.ones(DIM))
        self.norm2 = torch.nn.Parameter(torch.ones(DIM))
        inv = 1.0 / (10000.0 ** (torch.arange(0, hd, 2).float() / hd))
        ang = torch.outer(torch.arange(SEQ).float(), inv)
        self.register_buffer("cos", torch.cat([ang, ang], -1).cos())
        self.register_buffer("sin", torch.cat([ang, ang], -1).sin())
        self.register_buffer("slopes", torch.tensor([2.0 ** (-8.0 * (i + 1) / HEADS) for i in range(HEADS)]))
        self.block_mask = create_block_mask(causal, None, None, SEQ, SEQ, device="cpu")

    def forward(self, x):
        B, S, _ = x.shape
        q, k, v = self.wqkv(rms_norm(x, self.norm1)).view(B, S, 3, HEADS, DIM // HEADS).permute(2, 0, 3, 1, 4)
        q, k = rotate(q, self.cos, self.sin), rotate(k, self.cos, self.sin)

        def alibi(score, b, h, q_idx, kv_idx):
            return score + self.slopes[h] * (kv_idx - q_idx)

        a = flex_attention(q, k, v, score_mod=alibi, block_mask=self.block_mask)
        x = x + self.wo(a.transpose(1, 2).reshape(B, S, DIM))
        y = rms_norm(x, self.norm2)
        return x + self.w2(F.silu(self.w1(y)) * self.w3(y))


def main() -> int:
    from torch_mlir_flex.backend import PIPELINES, FlexBackendError
    from torch_mlir_flex.backend.pipelines import DEFAULT_BACKEND

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", default=DEFAULT_BACKEND, choices=sorted(PIPELINES))
    p.add_argument("--print-ir", action="store_true", help="print the flex IR")
    args = p.parse_args()
    warnings.filterwarnings("ignore")

    torch.manual_seed(0)
    model = Block().eval()
    x = torch.randn(2, SEQ, DIM)
    try:
        compiled = torch_mlir_flex.compile(model, (x,), backend=args.backend)
    except FlexBackendError as e:
        print(f"compilation failed: {e}", file=sys.stderr)
        return 1
    if args.print_ir:
        print(compiled.flex_ir)

    x = torch.randn(2, SEQ, DIM)
    with torch.no_grad():
        expected = model(x)
    got = compiled(x)
    err = (got - expected).abs().max().item()
    print(f"transformer block ({args.backend}): max abs error vs eager = {err:.3e}")
    if torch.allclose(got, expected, rtol=1e-3, atol=1e-5):
        print("OK")
        return 0
    print("MISMATCH")
    return 1


if __name__ == "__main__":
    sys.exit(main())
