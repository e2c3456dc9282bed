"""On-disk cache of the compiler's stages before LLVM (docs/runtime.md).

cache.py keeps LLVM's object code, keyed on the lowered module; finding
that key used to cost the whole compile but LLVM: export, import, the
frontend, materialize and our pass pipeline (12.6 s of a 24-layer model's
cached compile). Two more entries skip those:

- `imported`: what import, the frontend and materialize make of an
  exported program (Torch IR, linalg and flex IR text, the state arguments
  and the mutations), keyed on the program's fingerprint (its graph as
  torch prints it with every node's shape, dtype and strides, its
  signature and ranges, and the values of the tensors the module keeps as
  literals: lifted constants and what modifiers capture);
- `lowered`: the lowering pipeline's result (LLVM dialect text), keyed on
  the flex IR, the pipeline, the entry and its in-place results.

Every key includes `build_id()`: this package's Python sources and native
libraries and the torch / torch-mlir versions, so a changed compiler never
reads an older entry; and the host's CPU and torch's CPU capability (the
packing of int4 weights depends on it). Entries are pickles beside
cache.py's, in the same directory, under the same switch and size bound;
`TORCH_MLIR_FLEX_STAGE_CACHE=0` turns off only these (e.g. to compile again
with a patched importer in the same process: the build id sees files, not
monkeypatches). Each entry is verified before it is unpickled and made
private, as cache.py's are (cache_trust.py).
"""

import functools
import hashlib
import os
import pickle
import tempfile

from ..log import get_logger
from . import cache, cache_trust

FORMAT = "flex-stage-1"
SUFFIX = ".stage"
ENABLE_ENV = "TORCH_MLIR_FLEX_STAGE_CACHE"

log = get_logger("cache")


@functools.lru_cache(maxsize=1)
def build_id() -> str:
    """A hash of what the compiler is made of in this process."""
    import torch

    from importlib import metadata

    h = hashlib.sha256(FORMAT.encode())
    for dist in ("torch", "torch-mlir", "transformers"):
        try:
            h.update(f"{dist}={metadata.version(dist)};".encode())
        except metadata.PackageNotFoundError:
            h.update(f"{dist}=none;".encode())
    h.update(torch.__version__.encode())
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for directory, dirs, files in sorted(os.walk(root)):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            path = os.path.join(directory, name)
            if name.endswith(".py"):
                with open(path, "rb") as f:
                    h.update(name.encode() + hashlib.sha256(f.read()).digest())
            elif ".so" in name or name == "flex-opt":
                st = os.stat(path)
                h.update(f"{name}:{st.st_size}:{st.st_mtime_ns};".encode())
    return h.hexdigest()


def enabled() -> bool:
    """On, and the cache directory not refused (cache_trust.py)."""
    return (cache.enabled() and cache.switched_on(ENABLE_ENV)
            and not cache_trust.refused(cache.cache_dir()))


def key(kind: str, *parts) -> str:
    """A key of `kind` on `parts`, this build, the host's CPU and the
    kernels torch dispatches to (`ATEN_CPU_CAPABILITY`: the importer writes
    the int4 packing of torch's CPU kernels into the IR, quant_op.py)."""
    import torch

    h = hashlib.sha256(f"{kind}\0{build_id()}\0{cache.host_cpu_signature()}\0"
                       f"{torch.backends.cpu.get_cpu_capability()}".encode())
    for p in parts:
        h.update(b"\0")
        h.update(p if isinstance(p, bytes) else str(p).encode())
    return h.hexdigest()[:40]


def _path(k: str) -> str:
    return os.path.join(cache.cache_dir(), k + SUFFIX)


def load(k: str):
    """The entry stored under `k`, or None."""
    if not enabled() or not cache_trust.usable_root(cache.cache_dir(), create=False):
        return None
    path = _path(k)
    try:
        data = cache_trust.read_verified(path)
    except (cache_trust.Corrupt, cache_trust.Foreign) as e:
        cache_trust.reject(path, e, "stage cache")
        return None
    if data is None:
        return None
    try:
        value = pickle.loads(data)
    except Exception as e:  # stored by a compiler whose classes have changed
        log.warning("stage cache: dropping unreadable entry %s: %s", path, e)
        cache_trust.remove_entry(path)
        return None
    cache_trust.touch(path)
    cache.stats["stage_hits"] += 1
    return value


def store(k: str, value) -> None:
    directory = cache.cache_dir()
    if not enabled() or not cache_trust.usable_root(directory, create=True):
        return
    path, tmp = _path(k), None
    if cache_trust.foreign(path):  # warned when loading: not replaced
        return
    try:
        data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        fd, tmp = tempfile.mkstemp(dir=directory, suffix=".tmp")  # 0600
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        cache_trust.publish(tmp, path, data)
        tmp = None
        cache.stats["stage_stored"] += 1
        cache.prune(directory, cache._limit_bytes())
    except OSError as e:
        log.warning("stage cache: could not store %s: %s", k, e)
    finally:
        if tmp is not None:  # not renamed into place: not left behind
            cache_trust.remove(tmp)


def program_fingerprint(ep):
    """A hash of everything about the exported program `ep` that import and
    lowering read, or None when some of it cannot be hashed (then nothing is
    cached)."""
    import torch

    from ..importer.state_arguments import modifier_captures
    from .module_key import tensor_hash
    from .subclass_state import SubclassError

    h = hashlib.sha256()
    try:
        text = ep.graph_module.print_readable(print_output=False, include_stride=True, include_device=True)
    except Exception:  # a graph torch cannot print
        return None
    # Without comments: they name source lines and counters of torch's
    # tracing (`<eval_with_key>.37`), which differ between exports.
    code = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    h.update("\n".join(code).encode())
    h.update(str(ep.graph_signature).encode())
    h.update(str(sorted((str(k), str(v)) for k, v in ep.range_constraints.items())).encode())
    captured = modifier_captures(ep.graph)
    by_name = {s.arg.name: s.target for s in ep.graph_signature.input_specs if hasattr(s.arg, "name")}
    literal = [(n, ep.constants[n]) for n in sorted(ep.constants)]
    for name in sorted(captured):
        target = by_name.get(name)
        if target is not None and target in ep.state_dict:
            literal.append((target, ep.state_dict[target]))
    for name, value in literal:
        if not isinstance(value, torch.Tensor) or value.is_meta or value.layout != torch.strided:
            return None
        try:
            h.update(f"\0{name}\0{tensor_hash(value)}".encode())  # a subclass: by its inner tensors
        except SubclassError:  # a subclass with an opaque part
            return None
    return h.hexdigest()
