"""`python -m torch_mlir_flex.serve` end to end with the `openai` client:
transformers serve (continuous batching) on a tiny random Llama saved with
a word-level tokenizer, its forward compiled through torch_mlir_flex.

One server, started in a subprocess on a free port, for one test:
- 4 concurrent greedy streams give the text of per-request greedy
  `model.generate` (the same words, the same token count);
- malformed requests get a 4xx with a message, and the server goes on;
- a client that leaves mid-stream: the server goes on, and the KV cache
  is all free again;
- the model's process compiled through our backend, nothing in eager
  (GET /flex/stats).
Skips only when the serve packages (requirements-serve.txt) are absent.

    python -m pytest -q -p no:cacheprovider test/python/hf/test_serve_openai.py
"""

import concurrent.futures
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

openai = pytest.importorskip("openai")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parents[3]
VOCAB = 128
STARTUP_S = 300  # this host: ~25 s to a served model; CI's slowest host is ~3x slower
PROMPTS = ["w5 w9 w11", "w100 w7", "w42 w43 w44 w45 w46 w47 w48", "w64"]


def build_model(path: Path):
    """A tiny random Llama and a word-level tokenizer of the same 128 ids
    (<pad> <s> </s> <unk>, then "w4".."w127"), with a chat template that
    joins the messages' contents."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import AutoModelForCausalLM, LlamaConfig, PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "<s>": 1, "</s>": 2, "<unk>": 3}
    vocab.update({f"w{i}": i for i in range(4, VOCAB)})
    words = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    words.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=words, bos_token="<s>", eos_token="</s>",
                                        unk_token="<unk>", pad_token="<pad>")
    tokenizer.chat_template = "{% for m in messages %}{{ m['content'] }} {% endfor %}"
    tokenizer.save_pretrained(path)
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                         pad_token_id=0, bos_token_id=1, eos_token_id=2)
    model = AutoModelForCausalLM.from_config(config).eval()
    model.save_pretrained(path)
    return model, tokenizer


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get_json(url: str):
    with urllib.request.urlopen(url, timeout=30) as r:
        return r.status, json.loads(r.read())


class Server:
    def __init__(self, tmp: Path):
        self.dir = tmp / "model"
        self.model, self.tokenizer = build_model(self.dir)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = tmp / "server.log"
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "python")] + (
            [env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "torch_mlir_flex.serve", "--model", str(self.dir),
             "--host", "127.0.0.1", "--port", str(self.port),
             "--cb-num-blocks", "16", "--cb-max-batch-tokens", "64"],
            stdout=self.log, stderr=subprocess.STDOUT, env=env, cwd=str(tmp))
        try:
            self.startup_s = self._wait_ready()
        except BaseException:
            self.stop()
            raise
        self.client = openai.OpenAI(base_url=f"{self.url}/v1", api_key="unused", max_retries=0, timeout=120)
        self.initial = self.report()

    def _wait_ready(self) -> float:
        start = time.monotonic()
        while time.monotonic() - start < STARTUP_S:
            if self.proc.poll() is not None:
                pytest.fail(f"the server exited ({self.proc.returncode}) while starting:\n{self.log_tail()}")
            try:
                if get_json(f"{self.url}/health")[0] == 200:
                    return time.monotonic() - start
            except OSError:
                pass
            time.sleep(0.5)
        pytest.fail(f"the server was not ready after {STARTUP_S} s:\n{self.log_tail()}")

    def log_tail(self, lines: int = 40) -> str:
        self.log.flush()
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def report(self) -> dict:
        status, body = get_json(f"{self.url}/flex/stats")
        assert status == 200 and len(body) == 1, body
        return next(iter(body.values()))

    def healthy(self) -> bool:
        return self.proc.poll() is None and get_json(f"{self.url}/health") == (200, {"status": "ok"})

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()

    def greedy(self, prompt: str, max_new_tokens: int) -> list:
        """Per-request greedy `model.generate` of what the server generates
        for `prompt` (a user message through the chat template)."""
        import torch

        ids = self.tokenizer.apply_chat_template([{"role": "user", "content": prompt}],
                                                 add_generation_prompt=True, tokenize=True)["input_ids"]
        with torch.no_grad():
            out = self.model.generate(torch.tensor([ids]), max_new_tokens=max_new_tokens, do_sample=False)
        return out[0, len(ids):].tolist()

    def stream(self, prompt: str, max_tokens: int):
        """(text, completion tokens) of a greedy streaming chat completion."""
        chunks = self.client.chat.completions.create(
            model=str(self.dir), messages=[{"role": "user", "content": prompt}], max_tokens=max_tokens,
            temperature=0, stream=True, stream_options={"include_usage": True})
        text, usage = [], None
        for chunk in chunks:
            if chunk.choices and chunk.choices[0].delta.content:
                text.append(chunk.choices[0].delta.content)
            if chunk.usage is not None:
                usage = chunk.usage.completion_tokens
        return "".join(text), usage


def expect_greedy(server, prompt, text, completion_tokens, max_tokens):
    want = server.greedy(prompt, max_tokens)
    assert text == server.tokenizer.decode(want, skip_special_tokens=True), (prompt, text, want)
    assert completion_tokens == len(want), (prompt, completion_tokens, want)


def concurrent_streams_are_greedy_generate(server):
    with concurrent.futures.ThreadPoolExecutor(len(PROMPTS)) as pool:
        results = list(pool.map(lambda p: server.stream(p, 8), PROMPTS))
    for prompt, (text, completion_tokens) in zip(PROMPTS, results):
        expect_greedy(server, prompt, text, completion_tokens, 8)
    assert server.healthy()


MALFORMED = [
    ({"max_tokens": 4}, 422, "no `messages`"),
    ({"messages": [{"content": "w5"}]}, 422, "`role`"),
    ({"messages": [{"role": "user", "content": ""}]}, 400, "prompt is empty"),
    ({"model": "no-such-model", "messages": [{"role": "user", "content": "w5"}]}, 400, "no-such-model"),
    ({"messages": [{"role": "user", "content": "w5"}], "no_such_field": 1}, 422, "no_such_field"),
]


def malformed_request_gets_4xx_and_server_goes_on(server, body, status, message):
    with pytest.raises(openai.APIStatusError) as e:
        server.client.post("/chat/completions", body=body, cast_to=object)
    detail = e.value.response.text  # serve's {"detail": ...}: the openai client reads no message of it
    assert e.value.status_code == status, (body, e.value.status_code, detail)
    assert message in detail, (body, detail)
    text, completion_tokens = server.stream("w5 w6", 4)
    expect_greedy(server, "w5 w6", text, completion_tokens, 4)
    assert server.healthy(), server.log_tail()


def client_leaving_mid_stream(server):
    """A stream closed after its first two tokens, of a 200-token answer
    (~1.6 s here): the request is cancelled in the batch, its KV cache
    blocks are freed, and the next request is served."""
    before = server.report()["requests"]["cancelled"]
    chunks = server.client.chat.completions.create(
        model=str(server.dir), messages=[{"role": "user", "content": "w9 w10 w11"}], max_tokens=200,
        temperature=0, stream=True)
    seen = 0
    for chunk in chunks:
        seen += bool(chunk.choices and chunk.choices[0].delta.content)
        if seen == 2:
            break
    chunks.close()
    deadline = time.monotonic() + 60
    while True:
        report = server.report()
        idle = report["requests"]["active"] == report["requests"]["waiting"] == 0
        if idle or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert idle and report["requests"]["cancelled"] == before + 1, report
    assert report["kv_cache"]["free_bytes"] == server.initial["kv_cache"]["free_bytes"], (report, server.initial)
    text, completion_tokens = server.stream("w20 w21", 8)
    expect_greedy(server, "w20 w21", text, completion_tokens, 8)
    assert server.healthy(), server.log_tail()


def compiled_through_torch_mlir_flex(server):
    report = server.report()
    stats = report["dynamo"]
    assert report["backend"] == "torch_mlir_flex", report
    assert stats.get("compiled", 0) > 0, report
    # Every graph of the warmup and of the requests compiled: none ran eagerly
    assert stats.get("eager", 0) == 0 and stats.get("eager_calls", 0) == 0, report
    assert report["kv_cache"]["free_bytes"] == report["kv_cache"]["total_bytes"], report


def test_server_with_the_openai_client(tmp_path):
    """One test, one server: pytest-xdist would start one per worker for a
    module fixture's tests spread over its workers."""
    server = Server(tmp_path)
    try:
        concurrent_streams_are_greedy_generate(server)
        for body, status, message in MALFORMED:
            malformed_request_gets_4xx_and_server_goes_on(server, body, status, message)
        client_leaving_mid_stream(server)
        compiled_through_torch_mlir_flex(server)
    finally:
        server.stop()


def test_command_line():
    """Our options, and transformers serve's command line built from the rest."""
    from torch_mlir_flex.serve import parse
    from torch_mlir_flex.serve.engine import compile_config

    ours, args = parse(["--model", "m"])
    assert ours.backend == "torch_mlir_flex" and args == ["serve", "m", "--continuous-batching", "--device", "cpu"]
    ours, args = parse(["--model", "m", "--backend", "inductor", "--port", "9", "--attn-implementation", "sdpa",
                        "--device", "cuda"])
    assert ours.backend == "inductor"
    assert args == ["serve", "m", "--continuous-batching", "--attn-implementation", "sdpa", "--port", "9",
                    "--device", "cuda"]
    ours, args = parse(["--model", "m", "--attn-implementation=flex_paged"])
    assert ours.attn == "flex_paged" and "flex_paged" not in args  # the model's process sets it
    for bad in (["--model", "m", "--backend", "tvm"], ["--port", "9"], ["--model", "./no/such/dir"]):
        with pytest.raises(SystemExit) as e:
            parse(bad)
        assert e.value.code == 2
    assert compile_config("none") is None
    config = compile_config("torch_mlir_flex")
    assert (config.backend, config.mode, config.dynamic) == ("torch_mlir_flex", "default", None)
    with pytest.raises(ValueError, match="unknown backend"):
        compile_config("tvm")
