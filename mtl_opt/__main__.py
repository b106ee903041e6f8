"""``python -m mtl_opt``: the ``mtl-opt`` command (``mtl_opt.cli``)."""

import sys

from .cli import main

sys.exit(main())
