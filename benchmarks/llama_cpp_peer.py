"""llama.cpp as a peer of the quantized serving benchmark (optional: it
needs llama-cpp-python built on this host, build_tools/install_llama_cpp.sh).

The same random weights as every other engine (quant_models.float_model)
are written as a Hugging Face checkpoint with a small SentencePiece
tokenizer trained here (llama.cpp's converter needs a tokenizer it
recognises even though the benchmark feeds token ids: for Qwen2 it takes a
`tokenizer.model` first and pads its vocabulary to the model's), converted
with llama.cpp's own `convert_hf_to_gguf.py` (from the llama-cpp-python
sdist; the install script copies it beside the venv's packages, or
$LLAMA_CPP_CONVERTER) to F32 / BF16 GGUF, and quantized with
`llama_cpp.llama_model_quantize` to Q8_0, Q4_0 (llama.cpp's choice for the
token embedding / tied LM head) and Q4_0 with the embedding at Q4_0 too.

    python -m benchmarks.llama_cpp_peer '<json spec>'   # one format of one configuration: one JSON line

Timing (one sequence: llama-cpp-python's Llama runs batch 1; flash
attention on, as llama.cpp's CLI has it by default): time to first token =
a warm `eval` of the prompt plus the argmax of its last logits;
decode = the median of single-token `eval`s (greedy), 32 new tokens a
round. Bytes per token: the GGUF's tensors (the token embedding: only the
batch's rows unless it is also the output matrix) + the f16 KV cache.
"""

import json
import os
import statistics
import subprocess
import sys
import time

from .quant_models import QuantServeConfig, float_model, hf_config, kv_bytes, prompt

FORMATS = ("F32", "BF16", "Q8_0", "Q4_0", "Q4_0-emb4")
# Formats of the same bits as each torchao quantization (the first: the target's).
PEERS = {"int8": ("Q8_0",), "int4": ("Q4_0", "Q4_0-emb4")}
CONVERTER_ENV = "LLAMA_CPP_CONVERTER"
KV_ELEMENT_BYTES = 2  # llama.cpp's default KV cache type: f16


def available() -> str:
    """"" when llama_cpp imports and its converter is found, else why not."""
    try:
        import llama_cpp  # noqa: F401
    except Exception as e:  # not installed, or built for another CPU
        return f"llama_cpp not importable ({type(e).__name__}: {e}); see build_tools/install_llama_cpp.sh"
    if not os.path.exists(converter()):
        return f"llama.cpp's converter not found at {converter()} (set ${CONVERTER_ENV})"
    return ""


def converter() -> str:
    """convert_hf_to_gguf.py: $LLAMA_CPP_CONVERTER, else where
    build_tools/install_llama_cpp.sh puts it (share/llama.cpp in the venv)."""
    return os.environ.get(CONVERTER_ENV) or os.path.join(sys.prefix, "share", "llama.cpp", "convert_hf_to_gguf.py")


def _tokenizer(directory: str, vocab: int):
    """A SentencePiece model of at most `vocab` pieces trained on made-up
    text, as `directory`/tokenizer.model."""
    import random

    import sentencepiece as spm

    rng = random.Random(0)
    words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 7))) for _ in range(300)]
    text = os.path.join(directory, "corpus.txt")
    with open(text, "w") as f:
        for _ in range(2000):
            f.write(" ".join(rng.choice(words) for _ in range(12)) + "\n")
    spm.SentencePieceTrainer.train(input=text, model_prefix=os.path.join(directory, "tokenizer"),
                                   vocab_size=min(vocab, 200), model_type="bpe", bos_id=1, eos_id=2, unk_id=3,
                                   pad_id=0, minloglevel=2)


def write_checkpoint(cfg: QuantServeConfig, directory: str) -> str:
    """The float model's weights (the same seed as the other engines) and
    a tokenizer in `directory`, in f32 (the converter's input)."""
    import dataclasses

    model = float_model(dataclasses.replace(cfg, dtype="f32"), "sdpa")
    model.save_pretrained(directory, safe_serialization=True)
    _tokenizer(directory, model.config.vocab_size)
    return directory


def _quantize(src: str, dst: str, fmt: str):
    import ctypes

    import llama_cpp

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = {"Q8_0": llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0}.get(fmt, llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_0)
    if fmt == "Q4_0-emb4":
        params.token_embedding_type = llama_cpp.GGML_TYPE_Q4_0
        params.output_tensor_type = llama_cpp.GGML_TYPE_Q4_0
    if llama_cpp.llama_model_quantize(src.encode(), dst.encode(), ctypes.byref(params)) != 0:
        raise RuntimeError(f"llama_model_quantize to {fmt} failed")


def gguf_file(cfg: QuantServeConfig, fmt: str, work: str) -> str:
    """The GGUF of `cfg`'s model in format `fmt` under `work` (made once:
    checkpoint, converter, quantizer)."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown GGUF format {fmt!r}: expected one of {FORMATS}")
    os.makedirs(work, exist_ok=True)
    out = os.path.join(work, f"{cfg.model}-{fmt}.gguf")
    if os.path.exists(out):
        return out
    if fmt in ("F32", "BF16"):
        hf = os.path.join(work, f"{cfg.model}-hf")
        if not os.path.exists(os.path.join(hf, "config.json")):
            write_checkpoint(cfg, hf)
        env = dict(os.environ, NO_LOCAL_GGUF="")
        gguf_py = os.path.join(os.path.dirname(converter()), "gguf-py")
        if os.path.isdir(gguf_py):  # the converter's own gguf package, as in its source tree
            env["PYTHONPATH"] = os.pathsep.join([gguf_py, env.get("PYTHONPATH", "")])
        p = subprocess.run([sys.executable, converter(), hf, "--outtype", fmt.lower(), "--outfile", out],
                           env=env, capture_output=True, text=True)
        if p.returncode:
            raise RuntimeError("convert_hf_to_gguf.py failed: " + " / ".join(p.stderr.strip().splitlines()[-3:]))
        return out
    _quantize(gguf_file(cfg, "F32", work), out, fmt)
    return out


def gguf_bytes_per_token(path: str, cfg: QuantServeConfig) -> dict:
    """{"weights", "kv", "total"} read by one decode step of the GGUF at `path`."""
    import gguf

    reader = gguf.GGUFReader(path)
    tensors = {t.name: int(t.n_bytes) for t in reader.tensors}
    weights = sum(tensors.values())
    if "output.weight" in tensors and "token_embd.weight" in tensors:  # untied: the embedding's rows only
        rows = [t for t in reader.tensors if t.name == "token_embd.weight"][0].shape[-1]
        weights -= tensors["token_embd.weight"] - cfg.batch * tensors["token_embd.weight"] // int(rows)
    kv = kv_bytes(hf_config(cfg), cfg, KV_ELEMENT_BYTES)
    return {"weights": weights, "kv": kv, "total": weights + kv}


def measure(cfg: QuantServeConfig, fmt: str, work: str, reps: int = 3, copy_reps: int = 3) -> dict:
    """One format's row: first_s (loading the GGUF and the first token),
    ttft_ms, ms_per_token, bandwidth_pct, tokens (benchmark batch 1 only)."""
    import llama_cpp
    import numpy as np
    from llama_cpp import Llama

    from .timing import copy_bandwidth_gbs

    if cfg.batch != 1:
        raise ValueError("llama-cpp-python's Llama runs one sequence: batch 1 only")
    path = gguf_file(cfg, fmt, work)
    ids = prompt(cfg, hf_config(cfg).vocab_size)[0][0].tolist()
    t = time.perf_counter()
    llm = _load(Llama, path, cfg)

    def next_token():  # greedy, from the logits of the last evaluated position
        ptr = llama_cpp.llama_get_logits_ith(llm.ctx, -1)
        return int(np.argmax(np.ctypeslib.as_array(ptr, shape=(llm.n_vocab(),))))

    def first_token():
        llm.reset()
        llm.eval(ids)
        return next_token()

    first_token()
    first = time.perf_counter() - t
    nbytes = gguf_bytes_per_token(path, cfg)
    ttft, steps, copy, share = [], [], [], []
    for _ in range(reps):
        t = time.perf_counter()
        tok = first_token()
        ttft.append(time.perf_counter() - t)
        before = copy_bandwidth_gbs(reps=copy_reps)
        tokens, times = [tok], []
        for _ in range(cfg.new_tokens - 1):
            t = time.perf_counter()
            llm.eval([tok])
            tok = next_token()
            times.append(time.perf_counter() - t)
            tokens.append(tok)
        steps += times
        copy.append((before + copy_bandwidth_gbs(reps=copy_reps)) / 2)
        share.append(100 * nbytes["total"] / (copy[-1] * 1e9 * statistics.median(times)))
    return dict(first_s=first, ttft_ms=1e3 * statistics.median(ttft), ms_per_token=1e3 * statistics.median(steps),
                bytes_per_token=nbytes["total"], weight_bytes=nbytes["weights"], kv_bytes=nbytes["kv"],
                copy_gbs=statistics.median(copy), bandwidth_pct=statistics.median(share), tokens=[tokens],
                system_info=_system_info())


def _load(Llama, path, cfg):
    """The model with flash attention on, as llama.cpp's own CLI chooses on
    a CPU by default (llama-cpp-python leaves it off); threads: all cores."""
    kw = dict(model_path=path, n_ctx=cfg.prompt + cfg.new_tokens + 32, n_batch=cfg.prompt,
              n_threads=os.cpu_count(), n_threads_batch=os.cpu_count(), verbose=False)
    try:
        return Llama(**kw, flash_attn=True)
    except TypeError:  # a version without the flag
        return Llama(**kw)


def _system_info() -> str:
    import llama_cpp

    info = llama_cpp.llama_print_system_info()
    return (info.decode() if isinstance(info, bytes) else str(info)).strip()[:300]


def run_for_serve(serve_cfg, reps, cache_dir, timeout, work=None):
    """The F32 / BF16 peer of a row of the (unquantized) serving benchmark
    (benchmarks/serve: a ServeConfig): its result, or {"error": ...} when
    it cannot run (not installed, batch > 1, a layer count of its own)."""
    import tempfile

    from .child_process import run_json_child

    why = available()
    if why:
        return {"error": "not run: " + why}
    if serve_cfg.batch != 1:
        return {"error": "not run: llama-cpp-python's Llama runs one sequence (batch 1)"}
    model = "tiny" if serve_cfg.model == "tiny" else "qwen2-0.5b" if serve_cfg.layers == 24 else None
    if model is None:
        return {"error": f"not run: the llama.cpp peer has the 24-layer 0.5B shape only ({serve_cfg.layers} layers)"}
    cfg = QuantServeConfig(model, "int8", 1, serve_cfg.prompt, serve_cfg.new_tokens, serve_cfg.dtype)
    spec = dict(config=cfg.__dict__, format=serve_cfg.dtype.upper(), reps=reps,
                work=work or os.path.join(tempfile.gettempdir(), "flex-bench-gguf"))
    return run_json_child("benchmarks.llama_cpp_peer", spec, cache_dir, timeout)


def main(spec):
    cfg = QuantServeConfig(**spec["config"])
    why = available()
    if why:
        raise RuntimeError(why)
    print(json.dumps(measure(cfg, spec["format"], spec["work"], spec.get("reps", 3), spec.get("copy_reps", 3))))


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
