"""Text generation with compiled prefill and decode functions.

    import torch_mlir_flex.hf as flex_hf
    gen = flex_hf.generator(model, max_cache_len=512, batch_size=2)
    out = gen.generate(ids, attention_mask=mask, max_new_tokens=64)   # = model.generate(...) (greedy)

`generator` compiles the model's forward over a static KV cache
(`static_step.StaticStep`) into one decode function, for every position up
to `max_cache_len` (at the first decode step), and, at the first prompt of
each length bucket, one prefill function (the prompt is left-padded to a multiple of
`prefill_bucket`: pad tokens are masked out, as transformers does for left
padding). Both take the model's parameters as runtime arguments bound to
the model's own tensors (one copy of the weights; no constants), and the
cache tensors as arguments that the compiled code updates in place.

`generate` follows `model.generate`: greedy by default; ``do_sample=True``
with temperature / top_k / top_p (transformers' own warpers, the same
order); ``min_new_tokens``; stopping at ``eos_token_id`` per sequence
(finished sequences continue with ``pad_token_id``) or after
``max_new_tokens``. It returns the prompt followed by the new tokens.
"""

import contextlib
import gc

import torch

from ..backend.pipelines import DEFAULT_BACKEND
from .model import FlexHFError
from .static_step import StaticStep, cache_shapes


def generator(model, max_cache_len: int, batch_size: int = 1, backend: str = DEFAULT_BACKEND,
              opt_level: int = 2, prefill_bucket: int = 32, kv_cache_dtype=None) -> "CompiledGenerator":
    """A `CompiledGenerator` for `model` (a transformers causal LM, best
    built with ``attn_implementation="flex_attention"``) with a static cache
    of `max_cache_len` positions for `batch_size` sequences. Functions are
    compiled at first use (`compile_all` compiles the decode step and the
    prefill for `prompt_lengths` ahead). `kv_cache_dtype`: None or the
    model's dtype (a cache in the model's dtype), or torch.int8 (a
    quantized cache, see the module docstring)."""
    if not isinstance(model, torch.nn.Module) or not hasattr(model, "config"):
        raise FlexHFError(f"expected a transformers causal LM, got {type(model).__name__}")
    if max_cache_len < 2 or batch_size < 1 or prefill_bucket < 1:
        raise FlexHFError(f"max_cache_len {max_cache_len}, batch_size {batch_size} and prefill_bucket "
                          f"{prefill_bucket} must be positive (max_cache_len >= 2)")
    dtype = next(model.parameters()).dtype
    if kv_cache_dtype not in (None, dtype, torch.int8):
        raise FlexHFError(f"kv_cache_dtype must be None, the model's dtype ({dtype}) or torch.int8, "
                          f"got {kv_cache_dtype}")
    return CompiledGenerator(model, max_cache_len, batch_size, backend, opt_level, prefill_bucket,
                             kv_cache_dtype == torch.int8)


class CompiledGenerator:
    """Compiled prefill/decode functions of one model, cache size and batch
    size, and the cache tensors they update (`.cache`: per layer K, V, or
    with an int8 cache K, V, K scales, V scales)."""

    def __init__(self, model, max_cache_len, batch_size, backend, opt_level, prefill_bucket, kv_int8=False):
        self.model = model
        self.max_cache_len = max_cache_len
        self.batch_size = batch_size
        self.backend = backend
        self.opt_level = opt_level
        self.prefill_bucket = prefill_bucket
        self.kv_int8 = kv_int8
        dtype = torch.int8 if kv_int8 else next(model.parameters()).dtype
        self.cache = []
        for k_shape, v_shape in cache_shapes(model, batch_size, max_cache_len):
            self.cache += [torch.zeros(k_shape, dtype=dtype), torch.zeros(v_shape, dtype=dtype)]
            if kv_int8:
                self.cache += [torch.zeros(k_shape[:-1]), torch.zeros(v_shape[:-1])]
        self._step = StaticStep(model, kv_int8)  # eval mode only while compiling (_compile)
        self._prefill = {}  # padded prompt length -> CompiledModule
        self._decode = None

    def _compile(self, length: int):
        from .. import compile as flex_compile

        B, C = self.batch_size, self.max_cache_len
        ids = torch.zeros(B, length, dtype=torch.long)
        mask = torch.ones(B, C, dtype=torch.long)
        pos = torch.arange(length).expand(B, length).contiguous()
        slots = torch.arange(length)
        was_training = self.model.training
        self._step.eval()  # the model too
        try:
            # compile() applies hf.compile's export fixes itself (patches_for).
            with torch.no_grad():
                return flex_compile(self._step, (ids, mask, pos, slots, *self.cache), backend=self.backend,
                                    opt_level=self.opt_level)
        finally:
            self.model.train(was_training)

    @property
    def decode_fn(self):
        """The compiled decode step (one token per sequence, any position);
        compiled at the first use, after the first prefill, so that the
        first token does not wait for it."""
        if self._decode is None:
            self._decode = self._compile(1)
        return self._decode

    def prefill_fn(self, length: int):
        """The compiled prefill for a prompt padded to `length` tokens."""
        fn = self._prefill.get(length)
        if fn is None:
            fn = self._prefill[length] = self._compile(length)
        return fn

    def compile_all(self, prompt_lengths=()):
        """Compiles the decode step and the prefills of these prompt lengths
        now (a server does this before taking requests)."""
        self.decode_fn
        for n in prompt_lengths:
            self.prefill_fn(self._bucket(n, 1))
        return self

    def _bucket(self, length, max_new_tokens):
        padded = -(-length // self.prefill_bucket) * self.prefill_bucket
        return length if padded + max_new_tokens > self.max_cache_len else padded

    def generate(self, input_ids, attention_mask=None, max_new_tokens: int = 20, min_new_tokens: int = 0,
                 do_sample: bool = False, temperature: float = 1.0, top_k=None, top_p=None,
                 eos_token_id=None, pad_token_id=None, generator=None, logits_processor=None):
        """`model.generate` on the compiled functions (see the module
        docstring). `logits_processor`: callables ``(ids, scores) -> scores``
        applied after the built-in ones, as `model.generate` does with its
        argument of that name; `generator`: the torch.Generator sampling
        draws from (default: the global one, as model.generate)."""
        ids, mask = self._check_prompt(input_ids, attention_mask, max_new_tokens)
        eos, pad = self._special_tokens(eos_token_id, pad_token_id)
        processors = _processors(min_new_tokens, eos, do_sample, temperature, top_k, top_p)
        if logits_processor:
            processors = list(processors or []) + list(logits_processor)
        B, T0 = ids.shape
        P = self._bucket(T0, max_new_tokens)  # the prompt unpadded when a bucket would not fit
        padded = torch.full((B, P), pad if pad is not None else 0, dtype=torch.long)
        padded[:, P - T0:] = ids
        cache_mask = torch.zeros(B, self.max_cache_len, dtype=torch.long)
        cache_mask[:, P - T0:P] = mask
        positions = (cache_mask[:, :P].cumsum(-1) - 1).masked_fill_(cache_mask[:, :P] == 0, 1)
        logits = self.prefill_fn(P)(padded, cache_mask, positions, torch.arange(P), *self.cache)
        decode = self.decode_fn if max_new_tokens > 1 else None  # compiled (if not yet) with the GC on
        with _gc_paused():
            return self._decode_loop(decode, logits, ids, cache_mask, P, positions[:, -1:] + 1, max_new_tokens,
                                processors, do_sample, generator, eos, pad)

    def _decode_loop(self, decode, logits, out, cache_mask, P, next_pos, max_new_tokens, processors, do_sample,
                generator, eos, pad):
        B = out.shape[0]
        unfinished = torch.ones(B, dtype=torch.bool)
        for step in range(max_new_tokens):
            scores = logits.float()  # as model.generate
            for proc in processors or ():
                scores = proc(out, scores)
            if do_sample:
                token = torch.multinomial(torch.softmax(scores, dim=-1), 1, generator=generator).squeeze(1)
            else:
                token = scores.argmax(-1)
            if eos is not None:
                if pad is not None:
                    token = torch.where(unfinished, token, torch.tensor(pad))
                unfinished &= ~torch.isin(token, eos)
            out = torch.cat([out, token[:, None]], dim=1)
            if step + 1 == max_new_tokens or not unfinished.any():
                break
            slot = P + step
            cache_mask[:, slot] = 1
            logits = decode(token[:, None], cache_mask, next_pos, torch.tensor([slot]), *self.cache)
            next_pos = next_pos + 1
        return out

    def _check_prompt(self, input_ids, attention_mask, max_new_tokens):
        if not isinstance(input_ids, torch.Tensor) or input_ids.dim() != 2:
            raise FlexHFError("input_ids must be a [batch, length] tensor of token ids")
        if input_ids.shape[0] != self.batch_size:
            raise FlexHFError(f"compiled for batch size {self.batch_size}, got input_ids of batch "
                              f"{input_ids.shape[0]}")
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        if attention_mask.shape != input_ids.shape:
            raise FlexHFError(f"attention_mask {list(attention_mask.shape)} and input_ids "
                              f"{list(input_ids.shape)} differ in shape")
        if attention_mask.shape[1] > 1 and bool((attention_mask[:, :-1] > attention_mask[:, 1:]).any()):
            raise FlexHFError("attention_mask pads on the right; generation needs left padding "
                              "(tokenizer.padding_side = 'left')")
        if max_new_tokens < 1 or input_ids.shape[1] + max_new_tokens > self.max_cache_len:
            raise FlexHFError(f"prompt of {input_ids.shape[1]} tokens + max_new_tokens {max_new_tokens} does "
                              f"not fit the cache of {self.max_cache_len} positions")
        return input_ids.long(), attention_mask.long()

    def _special_tokens(self, eos_token_id, pad_token_id):
        cfg = getattr(self.model, "generation_config", None)
        if eos_token_id is None and cfg is not None:
            eos_token_id = cfg.eos_token_id
        if pad_token_id is None and cfg is not None:
            pad_token_id = cfg.pad_token_id
        eos = None
        if eos_token_id is not None:
            eos = torch.tensor(eos_token_id if isinstance(eos_token_id, (list, tuple)) else [eos_token_id])
            if pad_token_id is None:  # transformers pads with the first EOS then
                pad_token_id = int(eos[0])
        return eos, pad_token_id

    def __repr__(self):
        return (f"<CompiledGenerator batch={self.batch_size} max_cache_len={self.max_cache_len} "
                f"prefill lengths={sorted(self._prefill)} backend={self.backend!r}"
                f"{' kv_cache=int8' if self.kv_int8 else ''}>")


@contextlib.contextmanager
def _gc_paused():
    """Python's cyclic GC off through the decode loop (restored after): its
    full collections walk every object of the model and the compile caches,
    6 % of a 0.5B int8 decode step on the Zen 5 host (perf); the loop
    makes no reference cycles to collect."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _processors(min_new_tokens, eos, do_sample, temperature, top_k, top_p):
    """transformers' logits processors for these options, in the order
    `model.generate` applies them, or None (greedy, nothing to do)."""
    from transformers.generation import logits_process as lp

    procs = []
    if min_new_tokens and eos is not None:
        procs.append(_MinNewTokens(min_new_tokens, eos))
    if do_sample:
        if temperature is not None and temperature != 1.0:
            procs.append(lp.TemperatureLogitsWarper(temperature))
        if top_k:
            procs.append(lp.TopKLogitsWarper(top_k))
        if top_p is not None and top_p < 1.0:
            procs.append(lp.TopPLogitsWarper(top_p))
    return procs or None


class _MinNewTokens:
    """EOS is not chosen before `n` new tokens (transformers'
    MinNewTokensLengthLogitsProcessor counts from the prompt length)."""

    def __init__(self, n, eos):
        self.n, self.eos, self.prompt = n, eos, None

    def __call__(self, ids, scores):
        if self.prompt is None:
            self.prompt = ids.shape[1]
        if ids.shape[1] - self.prompt < self.n:
            scores = scores.clone()
            scores[:, self.eos] = -float("inf")
        return scores
