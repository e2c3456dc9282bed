"""A small Llama-shaped model trained 20 AdamW steps through
`torch.compile(model, backend="torch_mlir_flex")`: the per-step loss equals
the same model trained with eager math attention (materialized scores,
softmax, autograd), and the learnable relative-position bias moves as it
does there."""

import copy

import torch_mlir_flex  # noqa: F401  (before torch_mlir)
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

from torch_mlir_flex import dynamo

dynamo.register()

VOCAB, DIM, HEADS, KV_HEADS, LAYERS, SEQ, WINDOW = 64, 32, 4, 2, 2, 32, 12


def _mask(b, h, q, kv):
    return (q >= kv) & (q - kv < WINDOW)


class Attention(nn.Module):
    def __init__(self, use_flex: bool):
        super().__init__()
        self.hd = DIM // HEADS
        self.q = nn.Linear(DIM, HEADS * self.hd, bias=False)
        self.kv = nn.Linear(DIM, 2 * KV_HEADS * self.hd, bias=False)
        self.o = nn.Linear(HEADS * self.hd, DIM, bias=False)
        self.rel = nn.Parameter(torch.zeros(HEADS, 2 * SEQ - 1))
        self.use_flex = use_flex

    def forward(self, x, block_mask):
        b, s, _ = x.shape
        q = self.q(x).view(b, s, HEADS, self.hd).transpose(1, 2)
        k, v = self.kv(x).view(b, s, 2, KV_HEADS, self.hd).permute(2, 0, 3, 1, 4)
        if self.use_flex:
            rel = self.rel

            def score(sc, bi, h, qi, ki):
                return sc + rel[h, qi - ki + SEQ - 1]

            y = flex_attention(q, k, v, score_mod=score, block_mask=block_mask, enable_gqa=True)
        else:
            k = k.repeat_interleave(HEADS // KV_HEADS, dim=1)
            v = v.repeat_interleave(HEADS // KV_HEADS, dim=1)
            pos = torch.arange(s)
            scores = q @ k.transpose(-1, -2) / self.hd ** 0.5
            scores = scores + self.rel[:, pos[:, None] - pos[None, :] + SEQ - 1]
            keep = _mask(None, None, pos[:, None], pos[None, :])
            y = torch.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1) @ v
        return self.o(y.transpose(1, 2).reshape(b, s, DIM))


class Block(nn.Module):
    def __init__(self, use_flex):
        super().__init__()
        self.n1 = nn.RMSNorm(DIM)
        self.attn = Attention(use_flex)
        self.n2 = nn.RMSNorm(DIM)
        self.up = nn.Linear(DIM, 2 * 2 * DIM, bias=False)
        self.down = nn.Linear(2 * DIM, DIM, bias=False)

    def forward(self, x, block_mask):
        x = x + self.attn(self.n1(x), block_mask)
        g, u = self.up(self.n2(x)).chunk(2, dim=-1)
        return x + self.down(F.silu(g) * u)


class TinyLM(nn.Module):
    def __init__(self, use_flex):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, DIM)
        self.blocks = nn.ModuleList(Block(use_flex) for _ in range(LAYERS))
        self.norm = nn.RMSNorm(DIM)
        self.head = nn.Linear(DIM, VOCAB, bias=False)

    def forward(self, ids, targets, block_mask=None):
        x = self.emb(ids)
        for blk in self.blocks:
            x = blk(x, block_mask)
        logits = self.head(self.norm(x))
        return F.cross_entropy(logits.view(-1, VOCAB), targets.view(-1))


def _train(model, steps, data, block_mask=None):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for ids, targets in data[:steps]:
        loss = model(ids, targets, block_mask) if block_mask is not None else model(ids, targets)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def test_training_matches_eager_math(fresh):
    delta, warned = fresh
    torch.manual_seed(0)
    ref = TinyLM(use_flex=False)
    with torch.no_grad():
        for blk in ref.blocks:
            blk.attn.rel.normal_(0, 0.1)
    ours = TinyLM(use_flex=True)
    ours.load_state_dict(copy.deepcopy(ref.state_dict()))
    g = torch.Generator().manual_seed(1)
    data = [(torch.randint(0, VOCAB, (2, SEQ), generator=g), torch.randint(0, VOCAB, (2, SEQ), generator=g))
            for _ in range(20)]
    bm = create_block_mask(_mask, None, None, SEQ, SEQ, device="cpu", BLOCK_SIZE=8)

    want = _train(ref, 20, data)
    compiled = torch.compile(ours, backend=dynamo.NAME)
    got = _train(compiled, 20, data, block_mask=bm)

    for step, (a, b) in enumerate(zip(got, want)):
        assert abs(a - b) <= 1e-4 * abs(b), f"step {step}: loss {a} vs eager math {b}"
    assert want[-1] < want[0]  # it learns
    rel_ours = ours.blocks[0].attn.rel.detach()
    rel_ref = ref.blocks[0].attn.rel.detach()
    torch.testing.assert_close(rel_ours, rel_ref, rtol=1e-3, atol=1e-4)
    assert delta("eager") == 0, list(warned)
    assert delta("forward") >= 1 and delta("backward") >= 1
