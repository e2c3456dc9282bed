"""`python -m torch_mlir_flex.serve`: see __init__.py."""

import sys

from . import main

if __name__ == "__main__":
    sys.exit(main())
