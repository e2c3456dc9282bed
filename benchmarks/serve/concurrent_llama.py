"""llama.cpp as the peer of the concurrent-serving benchmark: parallel
slots over one context, as llama.cpp's server runs them (`llama-server
--parallel N`), driven by the same request stream and driver
(concurrent_child.drive) as transformers' continuous batching.

    python -m benchmarks.serve.concurrent_llama '<json spec>'   # one JSON line

llama-cpp-python (the optional dev-venv peer, build_tools/
install_llama_cpp.sh) ships the library, not the server executable, and
its own Python server takes one request at a time. `SlotServer` is the
server's slot loop on the library's batch API: one context with as many
sequences as slots (a unified KV cache of slots x the longest request;
flash attention on, KV cache f16), and a thread that, each step, puts
every decoding slot's last token and then chunks of waiting prompts (up to
`n_batch` tokens in all) into one `llama_decode`, picks each finished row's
token greedily (argmax of its logits), stamps it (perf_counter), and frees
a slot's sequence when its request has its tokens. It takes requests
through `add_request` and hands finished ones out through `get_result`,
the calls `drive` makes on transformers' manager. The model: the same
random weights converted to an F32 / BF16 GGUF by llama.cpp's converter
(benchmarks/llama_cpp_peer.py; its tokens are not compared: llama.cpp's
numerics differ).
"""

import json
import math
import os
import queue
import sys
import threading
import time
import types


class SlotServer:
    """Parallel slots over one llama.cpp context; `drive`'s manager calls."""

    def __init__(self, path: str, slots: int, max_len: int, n_batch: int = 512):
        import llama_cpp
        from llama_cpp._logger import set_verbose

        set_verbose(False)  # llama.cpp's own log: errors only
        self.ll, self.slots, self.n_batch = llama_cpp, slots, n_batch
        self.model = llama_cpp.llama_model_load_from_file(path.encode(), llama_cpp.llama_model_default_params())
        if not self.model:
            raise RuntimeError(f"llama.cpp could not load {path}")
        p = llama_cpp.llama_context_default_params()
        p.n_ctx, p.n_batch, p.n_ubatch, p.n_seq_max = slots * max_len, n_batch, n_batch, slots
        p.n_threads = p.n_threads_batch = os.cpu_count()
        p.kv_unified = True
        p.flash_attn_type = llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED
        self.ctx = llama_cpp.llama_init_from_model(self.model, p)
        if not self.ctx:
            raise RuntimeError("llama.cpp could not create the context")
        self.n_vocab = llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(self.model))
        self.batch = llama_cpp.llama_batch_init(n_batch, 0, 1)
        self.inbox, self.outbox = queue.Queue(), queue.Queue()
        self.thread, self.stopping, self.error, self.count = None, False, None, 0

    # -- the calls concurrent_child.drive makes --
    def add_request(self, prompt, max_new_tokens, record_timestamps=True):
        self.count += 1
        rid = f"req_{self.count}"
        self.inbox.put(dict(id=rid, prompt=list(prompt), n=max_new_tokens, tokens=[], times=[], done=0))
        return rid

    def get_result(self, timeout=None):
        try:
            return self.outbox.get(timeout=timeout)
        except queue.Empty:
            return None

    def is_running(self):
        return self.thread is not None and self.thread.is_alive()

    def start(self):
        self.stopping = False
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def stop(self):
        self.stopping = True
        if self.thread:
            self.thread.join()
        if self.error:
            raise self.error

    def close(self):
        self.ll.llama_batch_free(self.batch)
        self.ll.llama_free(self.ctx)
        self.ll.llama_model_free(self.model)

    # -- the slot loop --
    def _loop(self):
        try:
            active = {}  # seq id -> request
            while not self.stopping or active:
                while len(active) < self.slots and not self.inbox.empty():
                    seq = min(set(range(self.slots)) - set(active))
                    active[seq] = self.inbox.get()
                if not active:
                    time.sleep(0.0005)
                    continue
                self._step(active)
        except Exception as e:  # surfaces in stop(); the driver sees the loop stopped
            self.error = e

    def _add(self, token, pos, seq, logits):
        b, i = self.batch, self.batch.n_tokens
        b.token[i], b.pos[i], b.n_seq_id[i], b.logits[i] = token, pos, 1, logits
        b.seq_id[i][0] = seq
        b.n_tokens = i + 1
        return i

    def _step(self, active):
        import numpy as np

        ll, self.batch.n_tokens = self.ll, 0
        rows = {}
        for seq, r in active.items():  # decoding slots first, one token each
            if r["done"] == len(r["prompt"]):
                rows[seq] = self._add(r["tokens"][-1], len(r["prompt"]) + len(r["tokens"]) - 1, seq, 1)
        for seq, r in active.items():  # then prompt chunks, in the batch's remaining room
            room = self.n_batch - self.batch.n_tokens
            todo = len(r["prompt"]) - r["done"]
            if todo and room > 0:
                n = min(todo, room)
                for k in range(r["done"], r["done"] + n):
                    last = k == len(r["prompt"]) - 1
                    i = self._add(r["prompt"][k], k, seq, 1 if last else 0)
                    if last:
                        rows[seq] = i
                r["done"] += n
        if ll.llama_decode(self.ctx, self.batch) != 0:
            raise RuntimeError("llama_decode failed (KV cache full?)")
        now = time.perf_counter()
        mem = ll.llama_get_memory(self.ctx)
        for seq, i in rows.items():
            r = active[seq]
            logits = np.ctypeslib.as_array(ll.llama_get_logits_ith(self.ctx, i), shape=(self.n_vocab,))
            r["tokens"].append(int(np.argmax(logits)))
            r["times"].append(now)
            if len(r["tokens"]) == r["n"]:
                ll.llama_memory_seq_rm(mem, seq, -1, -1)
                del active[seq]
                self.outbox.put(types.SimpleNamespace(
                    request_id=r["id"], generated_tokens=r["tokens"], timestamps=r["times"], error=None,
                    is_finished=lambda: True))


def main(spec):
    import tempfile

    from ..llama_cpp_peer import available, gguf_file
    from ..quant_models import QuantServeConfig, hf_config
    from .concurrent_child import StreamSpec, drive, make_stream, metrics

    why = available()
    if why:
        raise RuntimeError(why)
    model = "tiny" if spec["model"] == "tiny" else "qwen2-0.5b"
    cfg = QuantServeConfig(model, "int8", 1, dtype=spec["dtype"])
    work = spec.get("work") or os.path.join(tempfile.gettempdir(), "flex-bench-gguf")
    path = gguf_file(cfg, spec["dtype"].upper(), work)
    stream_spec = StreamSpec(**spec["stream"])
    stream = make_stream(stream_spec, hf_config(cfg).vocab_size)
    max_len = max(len(r["prompt"]) + r["max_new_tokens"] for r in stream)
    timeout = spec.get("timeout", 3600.0)
    res = dict(points=[], gguf=os.path.basename(path))
    t = time.perf_counter()
    server = SlotServer(path, max(spec["concurrency"]), max_len, spec.get("max_batch_tokens", 512))
    server.start()
    try:
        by_len = sorted(stream, key=lambda r: len(r["prompt"]))
        drive(server, [dict(by_len[0], max_new_tokens=4), dict(by_len[-1], max_new_tokens=4)], math.inf, 2, timeout)
        res["warmup_s"] = time.perf_counter() - t
        for c in spec["concurrency"]:
            for rate in (float(r) for r in spec["rates"]):
                records = drive(server, stream[:stream_spec.requests_at(c)], rate, c, timeout)
                point = dict(concurrency=c, rate=rate if math.isfinite(rate) else "inf", **metrics(records))
                res["points"].append(point)
                print(json.dumps(dict(impl="llama.cpp", **point)), file=sys.stderr, flush=True)
    finally:
        server.stop()
        server.close()
    print(json.dumps(res))


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
