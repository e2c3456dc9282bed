"""A tiny torchao-quantized causal LM (test_torchao_models.py's Qwen2, f32,
hidden 64, 2 layers, PrototypeInt4WeightOnlyConfig group 32) with the
int4 products' int8 activations on (`blas.set_quant_activations("int8")`,
lib/Runtime/Quant/FlexQuantI4Dot.c): a 24-token prompt (24 rows: above the
8-row threshold) runs its linears on the int8 path (counted), and
- the logits stay within TOLERANCE of torchao's eager (weight-only) result:
  max |ours - eager| measured 0.042-0.063 on 6 prompts (logits of magnitude
  <= ~3 on this Zen 5 host): the error of int8 activations per group of 32
  (half a step of max|x| / 127 a value), the size of torchao's own
  Int8DynamicActivationInt8WeightConfig's in test_torchao_models.py (0.042);
- hf.generator's 16 greedy tokens equal eager `generate`'s for a prompt
  whose smallest top-1 / top-2 margin along them is 0.22 (seed 36, the
  largest of 40 seeds; the next is 0.07, near twice the deviation): the
  prefill on the int8 path, the decode steps (1 row) on the f32 kernels.

    PYTHONPATH=python pytest -q test/python/backend/test_quant_int8_activations_model.py
"""

import pytest
import torch

pytest.importorskip("torchao")
pytest.importorskip("transformers")

import torch_mlir_flex  # noqa: E402
import torch_mlir_flex.hf as flex_hf  # noqa: E402
from test_torchao_models import _Logits, _ids, _lm  # noqa: E402
from torch_mlir_flex.backend import blas  # noqa: E402

TOLERANCE = 0.15
PROMPT = 24
GENERATE_SEED = 36
NEW_TOKENS = 16
LINEARS = 2 * 7 + 1  # q, k, v, o, gate, up, down a layer; the LM head


def test_logits_within_tolerance(int8_on):
    model, eager = _lm("int4", torch.float32)
    ids = _ids(length=PROMPT)
    with torch.no_grad():
        want = eager(ids).logits
    fn = torch_mlir_flex.compile(_Logits(model), (ids,))
    before = blas.quant_int8_activation_products()
    got = fn(ids)
    assert blas.quant_int8_activation_products() - before == LINEARS
    err = (got - want).abs().max().item()
    assert err <= TOLERANCE, err
    assert err > 1e-4  # the int8 path ran: weight-only numerics are within 1e-5 here
    blas.set_quant_activations("f32")
    assert (fn(ids) - want).abs().max().item() <= 1e-4  # the same function, switch off


def test_greedy_tokens(int8_on):
    model, eager = _lm("int4", torch.float32)
    ids = _ids(length=PROMPT, seed=GENERATE_SEED)
    with torch.no_grad():
        want = eager.generate(ids, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS, do_sample=False)
    gen = flex_hf.generator(model, max_cache_len=64)
    before = blas.quant_int8_activation_products()
    got = gen.generate(ids, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS)
    # the prefill's linears (its LM head takes the last position only: 1 row)
    assert blas.quant_int8_activation_products() - before >= LINEARS - 1
    assert torch.equal(got, want)
