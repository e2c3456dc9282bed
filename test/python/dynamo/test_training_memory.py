"""Training memory through `torch.compile(model, backend="torch_mlir_flex")`
(docs/training.md "Memory"): what the compiled forward keeps for the
backward is no more than eager PyTorch keeps (AOTAutograd's min-cut
partitioner recomputes cheap elementwise ops in the backward instead of
saving them; its default partitioner saved every value the backward reads,
1.25x eager's bytes on a 4-layer Llama), the loss and gradients still
eager's; and the examples a graph is compiled with are zeros that take no
resident memory (a backward graph's examples are a copy of every saved
activation).

    PYTHONPATH=python pytest -q test/python/dynamo/test_training_memory.py
"""

import torch_mlir_flex  # noqa: F401  (before torch-mlir)

import copy

import torch

from torch_mlir_flex import dynamo
from torch_mlir_flex.dynamo import training

dynamo.register()

SEQ, BATCH, VOCAB = 32, 2, 128


def _llama():
    import transformers

    torch.manual_seed(0)
    conf = transformers.LlamaConfig(hidden_size=64, intermediate_size=176, num_hidden_layers=1,
                                    num_attention_heads=4, num_key_value_heads=2, vocab_size=VOCAB,
                                    max_position_embeddings=64, use_cache=False)
    conf._attn_implementation = "sdpa"
    return transformers.LlamaForCausalLM(conf).train()


def _nbytes(t):
    return t.numel() * t.element_size()


def _eager_saved_bytes(model, ids):
    """Bytes of the distinct non-parameter storages autograd saves in eager
    for the backward, and the bytes of the outputs (loss, logits)."""
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen = {}

    def pack(x):
        s = x.untyped_storage()
        if s.data_ptr() not in params:
            seen[s.data_ptr()] = s.nbytes()
        return x

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda x: x):
        out = model(input_ids=ids, labels=ids)
    return sum(seen.values()), _nbytes(out.loss) + _nbytes(out.logits), out


def test_forward_saves_no_more_than_eager(fresh, monkeypatch):
    delta, warned = fresh
    model = _llama()
    ref = copy.deepcopy(model)
    ids = torch.randint(0, VOCAB, (BATCH, SEQ), generator=torch.Generator().manual_seed(1))
    forward_outputs = []
    compile_graph = dynamo.compile_graph

    def recording(gm, examples, *args, kind="compiled", **kw):
        if kind == "forward":
            outs = gm.graph.output_node().args[0]
            # Inputs it saves (weights, the ids) take no memory of their own.
            forward_outputs.append([o.meta["val"] for o in outs if o.op != "placeholder"
                                    and isinstance(o.meta.get("val"), torch.Tensor)])
        return compile_graph(gm, examples, *args, kind=kind, **kw)

    monkeypatch.setattr(dynamo, "compile_graph", recording)
    compiled = torch.compile(model, backend="torch_mlir_flex", options={"opt_level": 0})
    loss = compiled(input_ids=ids, labels=ids).loss
    loss.backward()
    saved, returned, want = _eager_saved_bytes(ref, ids)
    want.loss.backward()

    assert (delta("forward"), delta("backward"), delta("eager")) == (1, 1, 0), dict(dynamo.stats)
    assert not warned
    assert len(forward_outputs) == 1
    ours = sum(_nbytes(v) for v in forward_outputs[0])
    # The forward's outputs: the model's (loss, logits), then what it saves.
    # AOTAutograd's default partitioner saved 751 KB here, eager 417 KB.
    assert ours - returned <= saved, (ours - returned, saved)
    torch.testing.assert_close(loss, want.loss, rtol=1e-5, atol=1e-6)
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        err = (p.grad - q.grad).abs().max().item() / (q.grad.abs().max().item() + 1e-12)
        assert err <= 1e-4, (name, err)


def test_partitioner_is_min_cut():
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    assert training.partition_fn() is min_cut_rematerialization_partition


def _rss_mib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_large_examples_take_no_resident_memory():
    """64 MiB of examples (one transposed): zeros, of the fakes' sizes and
    strides, not resident until touched; free_examples gives back what was
    touched."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        fakes = [torch.empty(2048, 4096).t(), torch.empty(16, 32, dtype=torch.bfloat16),
                 torch.empty(4096, 2048, dtype=torch.int64)[:, :1024]]
    before = _rss_mib()
    examples = training.real_examples(fakes)
    grown = _rss_mib() - before
    assert grown < 4, grown  # 2 x 32 MiB of zeros, none of it resident
    for x, f in zip(examples, fakes):
        assert (x.shape, x.stride(), x.dtype) == (f.shape, f.stride(), f.dtype)
    assert examples[2].untyped_storage().nbytes() >= 4096 * 1024 * 8 - 1024 * 8
    assert not examples[0].any() and not examples[1].any() and not examples[2].any()
    examples[0].fill_(1.0)  # touched: 32 MiB resident
    touched = _rss_mib()
    assert touched - before > 24
    training.free_examples(examples, fakes)
    # Measured against the touched peak: what else the process allocates in
    # between (pytest, torch's caches) does not count.
    assert touched - _rss_mib() > 24
    assert not examples[0].any()  # the mapping stays, its pages are the kernel's zeros again
