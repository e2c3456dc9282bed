"""`python -m torch_mlir_flex ...`: see cli.py."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
