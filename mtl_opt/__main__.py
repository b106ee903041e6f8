"""``python -m mtl_opt``: the ``mtl-opt`` command (``mtl_opt.cli``)."""

import sys

from .cli import main

if __name__ == "__main__":   # not when a module walker imports it
    sys.exit(main())
