"""The compiler's resident memory, given back when a compile is over.

A process that trains or serves a compiled model runs the compiled code
and torch; the compiler (our MLIR/LLVM libraries, torch-mlir's) runs again
only for the next graph. Once a whole model is compiled
(`JitFunction`, lowered modules of `MIN_LOWERED_BYTES` or more),
`release()`:

- drops the resident pages of the compiler's libraries that are plain
  file pages (read-only mappings with no page of their own: text and
  read-only data, never written) with madvise(MADV_DONTNEED): they stay in
  the page cache, and a later compile maps them again (minor faults). A
  mapping that is writable, or has private copies of pages (RELRO, text
  relocations), is left alone: dropping those would lose what was written
  there. About 90 MiB of libLLVM's and the two MLIR libraries' pages
  after a 4-layer Llama's training graphs were compiled;
- gives glibc's free memory back to the kernel (malloc_trim: the free
  chunks inside its heaps, which its trim at free time leaves when a live
  block sits above them; the compiler's import, lowering and pass
  managers' threads free most of what they allocate).

Both are sound at any time (nothing live is lost) and cost only page
faults when the memory is touched again. docs/runtime.md ("Memory after a
compile"). `TORCH_MLIR_FLEX_RELEASE_COMPILER=0` turns it off.
"""

import ctypes
import mmap
import os

ENV = "TORCH_MLIR_FLEX_RELEASE_COMPILER"
# Lowered (LLVM dialect) modules at least this large are whole models
# (cache.CHILD_MIN_BYTES): a test's small kernels do not pay for release().
MIN_LOWERED_BYTES = 512 * 1024
# Mapped files of the compiler: our MLIR/LLVM (libLLVM.so, the bindings'
# aggregate library, their support libraries) and torch-mlir's.
COMPILER_LIBS = ("libLLVM", "libTorchMLIRFlexPythonCAPI", "libTorchMLIRAggregateCAPI", "libMLIRPythonSupport",
                 "libnanobind-", "/_mlir.cpython", "/_mlirExecutionEngine", "/_torchMlir", "libmlir_")

# the counts of the last release(): mappings dropped, KiB dropped
last = {}


def enabled() -> bool:
    return os.environ.get(ENV, "1").strip().lower() not in ("0", "false", "off", "no")


def compiler_mappings():
    """[(start, end, resident KiB)] of the compiler's library mappings whose
    resident pages are all file pages: not writable, no private page."""
    out = []
    try:
        with open("/proc/self/smaps") as f:
            lines = f.read().splitlines()
    except OSError:  # not Linux
        return out
    cur = None

    def done(cur):
        if cur is not None and cur["ok"] and cur["anon"] == 0 and cur["rss"] > 0:
            out.append((cur["start"], cur["end"], cur["rss"]))

    for line in lines:
        head = line.split(None, 1)[0] if line else ""
        if "-" in head and not head.endswith(":"):
            done(cur)
            parts = line.split(None, 5)
            path = parts[5].strip() if len(parts) > 5 else ""
            start, end = (int(x, 16) for x in head.split("-"))
            ok = "w" not in parts[1] and parts[1].endswith("p") and any(m in path for m in COMPILER_LIBS)
            cur = dict(start=start, end=end, ok=ok, rss=0, anon=0)
        elif cur is not None and head == "Rss:":
            cur["rss"] = int(line.split()[1])
        elif cur is not None and head == "Anonymous:":
            cur["anon"] = int(line.split()[1])
    done(cur)
    return out


def drop_compiler_pages():
    """MADV_DONTNEED over the compiler's file-page mappings: (mappings
    dropped, KiB that were resident there)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    count = dropped = 0
    for start, end, rss in compiler_mappings():
        if libc.madvise(start, end - start, mmap.MADV_DONTNEED) == 0:
            count, dropped = count + 1, dropped + rss
    return count, dropped


def trim_heap() -> bool:
    """glibc's malloc_trim(0); False without glibc."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except AttributeError:
        return False
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    trim(0)
    return True


def release(lowered_bytes=None) -> None:
    """Gives the compiler's memory back (the banner); nothing when switched
    off or after a small module (`lowered_bytes` below MIN_LOWERED_BYTES)."""
    if not enabled() or (lowered_bytes is not None and lowered_bytes < MIN_LOWERED_BYTES):
        return
    trimmed = trim_heap()
    count, kib = drop_compiler_pages()
    last.update(mappings=count, dropped_kib=kib, trimmed=trimmed)
