"""`transformers serve` (transformers.cli.serve.Serve) with our settings.

`FlexServe` is transformers' `Serve` command, same options, with three
changes made before the server starts (`run`, and `run_api_servers` with
several API servers):
- continuous batching's varlen forward is compiled with the chosen backend
  (its ContinuousBatchingConfig's `varlen_compile_config`; the CLI's
  `--compile` only sets a static cache for `generate`, and nothing on its
  command line names a torch.compile backend);
- the model loads through `engine.FlexModelLoader` (its process registers
  the backend, and our paged flex attention for `--attn-implementation
  flex_paged`, keeps the batching manager; the CPU without `accelerate`);
- the app gets a `GET /flex/stats` route: for each model whose process
  runs, `engine.engine_report` (compile counts, KV cache) from that process;
  and its handlers refuse with a 4xx the requests that serve would answer
  with a 500 or that would kill its batching worker (validation.py).
"""

import contextlib

from transformers.cli.serve import Serve

from .engine import FlexModelLoader, compile_config, engine_report
from .validation import check_chat_body, check_responses_body, guard

STATS_PATH = "/flex/stats"


class FlexServe(Serve):
    # Serve with `backend`: a class attribute, set by `main` before the CLI
    # builds the command; the instance keeps its own copy (`flex_backend`),
    # as API server processes unpickle the instance, not the class.
    # The docstring is transformers' (the CLI's help), set below.

    backend = "torch_mlir_flex"
    attn_implementation = None  # set by `main` to a name transformers' option refuses (flex_paged)

    def run(self, socket=None, engine_connection=None) -> None:
        self._use_backend()
        with _our_app():
            super().run(socket, engine_connection)

    def run_api_servers(self, count: int) -> None:
        self._use_backend()
        super().run_api_servers(count)

    def _use_backend(self) -> None:
        from transformers import ContinuousBatchingConfig

        if getattr(self, "flex_backend", None) is not None:
            return  # done (an API server process runs this again)
        self.flex_backend = type(self).backend
        state = self.generation_state
        if not state._continuous_batching:
            raise ValueError("python -m torch_mlir_flex.serve serves with continuous batching: "
                             "drop --no-continuous-batching")
        cb_config = state.cb_config if state.cb_config is not None else ContinuousBatchingConfig()
        cb_config.varlen_compile_config = compile_config(self.flex_backend)
        # The decode fast path exists with flash attention on CUDA/XPU only
        cb_config.decode_compile_config = None
        state.cb_config = cb_config
        self.loader = FlexModelLoader.from_loader(self.loader, self.flex_backend)
        if type(self).attn_implementation is not None:
            self.loader.attn_implementation = type(self).attn_implementation


FlexServe.__doc__ = Serve.__doc__


@contextlib.contextmanager
def _our_app():
    """Serve.run builds its app with `serving.server.build_server`, which it
    imports when it runs: for that call, ours, which adds the route and
    guards the handlers."""
    from transformers.cli.serving import server

    original = server.build_server

    def build_server(model_manager, chat_handler, *args, **kwargs):
        guard(chat_handler, check_chat_body)
        if kwargs.get("completion_handler") is not None:
            guard(kwargs["completion_handler"])
        if kwargs.get("response_handler") is not None:
            guard(kwargs["response_handler"], check_responses_body)
        app = original(model_manager, chat_handler, *args, **kwargs)

        @app.get(STATS_PATH)
        async def flex_stats():
            engines = [(model_id, engine) for model_id, engine in model_manager.engines.items()
                       if engine.process_running]
            return {model_id: await engine.submit(engine_report) for model_id, engine in engines}

        return app

    server.build_server = build_server
    try:
        yield
    finally:
        server.build_server = original
