"""`python -m torch_mlir_flex.serve`: transformers' OpenAI-compatible server
(`transformers serve`, continuous batching) with its forward compiled by
torch.compile through our backend. See docs/serving.md.

    python -m torch_mlir_flex.serve --model DIR_OR_HUB_ID [--backend torch_mlir_flex|inductor|none]
        [--host 127.0.0.1 --port 8000] [any other `transformers serve` option]

Our options are `--model` and `--backend`; every other option goes to
transformers' own command line unchanged (`--help` lists both), with
`--continuous-batching` and `--device cpu` added unless given, except
`--attn-implementation flex_paged` (torch_mlir_flex.hf.paged, which
transformers' option refuses): the model's process registers it and loads
the model with it.
server.py holds the Serve subclass, engine.py what runs in the model's
process. Needs requirements-serve.txt (fastapi, uvicorn, openai).
"""

import argparse
import os
import sys

BACKENDS = ("torch_mlir_flex", "inductor", "none")
PROG = "python -m torch_mlir_flex.serve"
PAGED = "flex_paged"  # torch_mlir_flex.hf.paged.NAME (not imported here: it imports torch)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, add_help=False,
        description="transformers serve with continuous batching compiled by torch.compile "
                    "(OpenAI-compatible API at http://HOST:PORT/v1). Other options go to transformers serve.")
    parser.add_argument("--model", help="a local model directory or a Hub id, preloaded and the only one served")
    parser.add_argument("--backend", choices=BACKENDS, default="torch_mlir_flex",
                        help="torch.compile backend of the forward (default: torch_mlir_flex; none: eager)")
    parser.add_argument("--attn-implementation", dest="attn",
                        help=f"{PAGED} (our paged flex attention, docs/serving.md) or one of transformers'")
    parser.add_argument("-h", "--help", action="store_true", help="this help, then transformers serve's")
    return parser


def serve_args(model: str, rest: list) -> list:
    """transformers serve's arguments: the model, then ours added, then the
    user's (which a repeated option of click's takes last)."""
    args = [model]
    if not any(a in ("--continuous-batching", "--no-continuous-batching") for a in rest):
        args.append("--continuous-batching")
    if not any(a == "--device" or a.startswith("--device=") for a in rest):
        args += ["--device", "cpu"]
    return args + list(rest)


def parse(argv: list):
    """(our options, transformers serve's command line) of `argv`."""
    parser = _parser()
    ours, rest = parser.parse_known_args(argv)
    if ours.help:
        parser.print_help()
        print("\ntransformers serve's options (the `serve` of its usage line is implied):\n")
        return ours, ["serve", "--help"]
    if ours.model is None:
        parser.error("--model is required")
    if ours.model.startswith((os.sep, ".", "~")) and not os.path.isdir(os.path.expanduser(ours.model)):
        parser.error(f"--model {ours.model}: no such directory (a path; a Hub id is namespace/name)")
    if ours.attn is not None and ours.attn != PAGED:
        rest = ["--attn-implementation", ours.attn, *rest]
    return ours, ["serve", *serve_args(ours.model, rest)]


def main(argv=None) -> int:
    ours, args = parse(sys.argv[1:] if argv is None else argv)
    from transformers.utils.import_utils import is_serve_available

    if not is_serve_available():
        raise SystemExit(f"{PROG}: transformers serve needs fastapi, uvicorn and openai: "
                         "pip install -r requirements-serve.txt")
    from huggingface_hub import typer_factory

    from .server import FlexServe

    FlexServe.backend = ours.backend
    FlexServe.attn_implementation = PAGED if ours.attn == PAGED else None
    app = typer_factory(help="transformers serve with torch_mlir_flex")
    app.command(name="serve")(FlexServe)
    return app.main(args=args, prog_name=PROG, standalone_mode=True) or 0
