"""LLVM code generation of one lowered module in a child process.

    python -m torch_mlir_flex.codegen_child TEXT OBJ OPT_LEVEL ENTRY [LIB ...]

Parses the LLVM-dialect module in the file TEXT, compiles it with the
ExecutionEngine (LLVM optimization level OPT_LEVEL, the shared libraries
LIB loaded for its external symbols) through the symbol ENTRY, and writes
the object file OBJ. Exit status 0 when OBJ was written; 2 with a message
on stderr when the module does not parse or has no ENTRY.

`backend/cache.py` runs it for large modules on a compile-cache miss and
links OBJ into the cache's shared library, which the parent then loads:
LLVM's code generators, their heap and the pages of libLLVM they touch
stay out of the process that serves the model, and an LLVM fatal error
ends this process instead of the caller's. Kept outside `backend/`, whose
package imports torch: this process needs our MLIR bindings only.
"""

import sys

from . import _load_order  # noqa: F401  (our LLVM, as in the parent)
from .mlir import execution_engine, ir


def main(argv) -> int:
    if len(argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    text_path, obj_path, opt_level, entry, *libs = argv
    with open(text_path) as f:
        text = f.read()
    with ir.Context():
        try:
            module = ir.Module.parse(text)
        except ir.MLIRError as e:
            print(f"codegen_child: cannot parse {text_path}: {e}", file=sys.stderr)
            return 2
        engine = execution_engine.ExecutionEngine(module, opt_level=int(opt_level), shared_libs=libs)
        # Compiles the module through its entry (see cache._store).
        if not engine.raw_lookup(entry):
            print(f"codegen_child: no symbol {entry!r} in the compiled module", file=sys.stderr)
            return 2
        engine.dump_to_object_file(obj_path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
