"""On-disk compile cache: LLVM code generation once per lowered module.

`engine_for(module, opt_level, shared_libs)` stands in for
`ExecutionEngine(module, ...)`. The key is a hash of the lowered module
(LLVM dialect text, which reflects the pipeline and its options), the
optimization level, the shared libraries, the LLVM version and the host
CPU (model and feature flags: the JIT compiles for the host, so an entry
made on another CPU, e.g. in a copied cache directory, may hold
instructions this one lacks). On a miss the
ExecutionEngine compiles as usual, its object file is dumped
(`dump_to_object_file`) and linked into a shared library with the system C
compiler (`cc -shared`); on a hit that library is loaded with ctypes and the
engine's functions are looked up there (`SharedObjectEngine`, same
`raw_lookup`/`lookup`/`invoke` as ExecutionEngine: the packed
`_mlir__mlir_ciface_<name>` wrappers that the JIT itself calls).

A miss on a large module (LLVM-dialect text of CHILD_MIN_BYTES or more: a
whole model) is compiled in a child process (`torch_mlir_flex.codegen_child`)
that writes the object file; this process links and loads it as a hit.
LLVM's code generators, their heap and the libLLVM pages they touch then
stay out of this process: after a cold compile of the 24-layer
Qwen2-shaped model, 184 MiB more was resident than before it instead of
233 (a compile from the cache: 143).
An LLVM fatal error there ends the child, and the compile raises.

Environment:
  TORCH_MLIR_FLEX_CACHE_DIR      location (default ~/.cache/torch_mlir_flex)
  TORCH_MLIR_FLEX_CACHE_SIZE_MB  bound; least recently used entries go first
                                 (default 256)
  TORCH_MLIR_FLEX_CACHE=0        off
  TORCH_MLIR_FLEX_CODEGEN_CHILD  "auto" (default: modules of CHILD_MIN_BYTES
                                 or more), "1" every miss, "0" never
Without a C compiler nothing is stored and every compilation uses the JIT.

Who may have written the directory and its entries, and whether an entry
is whole, is checked before an entry is loaded (cache_trust.py): a
damaged entry is removed and compiled again, a directory or entry another
user could have written is not used (docs/runtime.md, "The compile cache's
trust rules").
"""

import collections
import ctypes
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile

from ..log import get_logger
from . import cache_trust
from .cpu_features import host_cpu_signature
from ..mlir import execution_engine

DIR_ENV = "TORCH_MLIR_FLEX_CACHE_DIR"
SIZE_ENV = "TORCH_MLIR_FLEX_CACHE_SIZE_MB"
ENABLE_ENV = "TORCH_MLIR_FLEX_CACHE"
CHILD_ENV = "TORCH_MLIR_FLEX_CODEGEN_CHILD"
CHILD_MIN_BYTES = 512 * 1024
DEFAULT_SIZE_MB = 256
# Bump when the object format or the way entries are linked changes.
FORMAT = "flex-cache-1 llvm-22.1.8"

log = get_logger("cache")
stats = collections.Counter()  # hits, misses, stored, errors; stage_hits, stage_stored, export_skipped


def switched_on(env: str) -> bool:
    """An on/off environment switch, on unless "0", "false", "off" or "no"."""
    return os.environ.get(env, "1").strip().lower() not in ("0", "false", "off", "no")


def enabled() -> bool:
    return switched_on(ENABLE_ENV)


def cache_dir() -> str:
    env = os.environ.get(DIR_ENV)
    if env:
        return env
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "torch_mlir_flex")


def cache_key(module_text: str, opt_level: int, shared_libs) -> str:
    h = hashlib.sha256()
    parts = (FORMAT, host_cpu_signature(), str(opt_level), *map(os.path.abspath, shared_libs),
             module_text)
    for part in parts:
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:40]


class SharedObjectEngine:
    """A cached entry: the ExecutionEngine's lookup API over a shared library."""

    def __init__(self, path: str, shared_libs=()):
        # The runtime libraries first and global, as the ExecutionEngine
        # loads them, so that the entry's undefined symbols resolve.
        self._deps = [ctypes.CDLL(lib, mode=ctypes.RTLD_GLOBAL) for lib in shared_libs]
        self._lib = ctypes.CDLL(path)
        self.path = path

    def raw_lookup(self, name: str) -> int:
        try:
            fn = getattr(self._lib, "_mlir_" + name)  # the packed wrapper
        except AttributeError:
            return 0
        return ctypes.cast(fn, ctypes.c_void_p).value or 0

    lookup = execution_engine.ExecutionEngine.lookup
    invoke = execution_engine.ExecutionEngine.invoke


def engine_for(module, opt_level: int = 2, shared_libs=(), entry=None, text=None):
    """An ExecutionEngine for `module`, or the cached equivalent. `entry`:
    the symbol that calls look up (its packed wrapper `_mlir_<entry>`);
    `text`: `str(module)` when the caller has it already."""
    shared_libs = list(shared_libs)
    if not enabled():
        return execution_engine.ExecutionEngine(module, opt_level=opt_level, shared_libs=shared_libs)
    root = cache_dir()
    if not cache_trust.usable_root(root, create=True):  # warned: the JIT, nothing stored
        return execution_engine.ExecutionEngine(module, opt_level=opt_level, shared_libs=shared_libs)
    text = str(module) if text is None else text
    key = cache_key(text, opt_level, shared_libs)
    path = os.path.join(root, key + ".so")
    engine, store = _load(path, shared_libs)
    if engine is not None:
        return engine
    stats["misses"] += 1
    if store and entry is not None and _in_child(len(text)):
        engine = _codegen_in_child(text, path, opt_level, shared_libs, entry)
        if engine is not None:
            return engine
    engine = execution_engine.ExecutionEngine(module, opt_level=opt_level, shared_libs=shared_libs)
    if store:
        _store(engine, path, shared_libs, entry)
    return engine


def _load(path: str, shared_libs):
    """(the entry `path` loaded, or None; whether a miss may store there).
    The entry is verified first (cache_trust.verify_file): one that is
    damaged is removed, one another user could have written is left alone
    and not replaced."""
    try:
        if not cache_trust.verify_file(path):
            return None, True
    except (cache_trust.Corrupt, cache_trust.Foreign) as e:
        stats["errors"] += 1
        cache_trust.reject(path, e)
        return None, isinstance(e, cache_trust.Corrupt)
    try:
        engine = SharedObjectEngine(path, shared_libs)
    except OSError as e:
        stats["errors"] += 1
        log.warning("compile cache: dropping unloadable entry %s: %s", path, e)
        cache_trust.remove_entry(path)
        return None, True
    cache_trust.touch(path)  # recently used
    stats["hits"] += 1
    log.info("compile cache hit: %s", path)
    return engine, True


def _in_child(text_bytes: int) -> bool:
    mode = os.environ.get(CHILD_ENV, "auto").strip().lower()
    if mode == "auto":
        return text_bytes >= CHILD_MIN_BYTES
    return switched_on(CHILD_ENV)


def _child_command(text_path, obj_path, opt_level, entry, shared_libs):
    return [sys.executable, "-m", "torch_mlir_flex.codegen_child", text_path, obj_path,
            str(opt_level), entry, *shared_libs]


def _codegen_in_child(text, path, opt_level, shared_libs, entry):
    """The cache entry `path` compiled from `text` by a child process and
    loaded; None when it could not be made that way (no C compiler, an
    unwritable directory, the child failed): the caller compiles here then.
    Raises RuntimeError when the child was killed (an LLVM fatal error)."""
    cc = _linker()
    if cc is None:
        return None
    package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)

    def write_object(obj, tmp):
        text_path = os.path.join(tmp, "module.mlir")
        with open(text_path, "w") as f:
            f.write(text)
        done = subprocess.run(_child_command(text_path, obj, opt_level, entry, shared_libs),
                              env=env, capture_output=True, text=True)
        if done.returncode < 0:
            try:
                name = signal.Signals(-done.returncode).name
            except ValueError:
                name = f"signal {-done.returncode}"
            raise RuntimeError(f"LLVM code generation ended by {name} in a child process: "
                               f"{done.stderr.strip()[-2000:]}")
        if done.returncode != 0 or not os.path.exists(obj):
            raise OSError(f"the child exited with status {done.returncode}: {done.stderr.strip()[-2000:]}")

    try:
        _store_entry(cc, path, shared_libs, write_object, " (code generated in a child process)")
        engine = SharedObjectEngine(path, shared_libs)
    except OSError as e:
        log.warning("compile cache: could not compile %s in a child process (%s); compiling here", path, e)
        return None
    stats["child"] += 1
    prune(os.path.dirname(path), _limit_bytes())
    return engine


def _linker():
    return os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")


def _store(engine, path: str, shared_libs, entry=None) -> None:
    cc = _linker()
    if cc is None:
        log.debug("compile cache: no C compiler to link entries with; not storing")
        return

    def write_object(obj, _tmp):
        # Compiles the module now, through the entry: dump_to_object_file
        # on a not yet compiled engine looks up the packed wrapper of
        # every function instead, and LLVM aborts the process on those
        # of internal functions (which have none).
        if entry is None or not engine.raw_lookup(entry):
            raise OSError(f"no entry symbol {entry!r} to compile the module through")
        engine.dump_to_object_file(obj)

    try:
        _store_entry(cc, path, shared_libs, write_object)
        prune(os.path.dirname(path), _limit_bytes())
    except OSError as e:
        stats["errors"] += 1
        log.warning("compile cache: could not store %s: %s", path, e)


def _store_entry(cc, path: str, shared_libs, write_object, how: str = "") -> None:
    """Makes the cache entry `path`: `write_object(obj, tmp)` writes an
    object file `obj` in a temporary directory `tmp` beside the entry (0700),
    which is linked into a shared library that replaces `path` atomically
    (0600), and its record is written (cache_trust.publish). Raises OSError."""
    directory = os.path.dirname(path)
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        obj, lib = os.path.join(tmp, "entry.o"), os.path.join(tmp, "entry.so")
        write_object(obj, tmp)
        # The JIT's objects use the large code model (absolute 64-bit
        # relocations): fine in a shared library, as text relocations.
        # Symbols must resolve now (libc, libm, the runtime libraries).
        cmd = [cc, "-shared", "-Wl,-z,notext", "-Wl,--no-undefined", "-o", lib, obj, *shared_libs, "-lm"]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise OSError(f"{' '.join(cmd)}: {done.stderr.strip()}")
        cache_trust.publish(lib, path)
    stats["stored"] += 1
    log.info("compile cache: stored %s%s", path, how)


def _limit_bytes() -> int:
    try:
        return int(float(os.environ.get(SIZE_ENV, DEFAULT_SIZE_MB)) * 2**20)
    except ValueError:
        return DEFAULT_SIZE_MB * 2**20


def prune(directory: str, limit: int) -> None:
    """Removes least recently used entries (with their records) until the
    total is <= limit, and records whose entry is gone."""
    entries, names = [], set(os.listdir(directory))
    for name in names:
        p = os.path.join(directory, name)
        if name.endswith((".so", ".stage")):  # stage_cache.py's entries too
            try:
                st = os.stat(p)
            except OSError:
                continue
            entries.append((st.st_mtime, st.st_size, p))
        elif name.endswith(cache_trust.RECORD_SUFFIX) and name[:-len(cache_trust.RECORD_SUFFIX)] not in names:
            if not os.path.exists(p[:-len(cache_trust.RECORD_SUFFIX)]):
                cache_trust.remove(p)
    total = sum(size for _, size, _ in entries)
    for _, size, p in sorted(entries):
        if total <= limit:
            break
        cache_trust.remove_entry(p)
        total -= size
