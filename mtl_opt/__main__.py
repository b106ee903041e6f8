"""``python -m mtl_opt``: the ``mtl-opt`` command (``mtl_opt.cli``)."""

from .cli import run

if __name__ == "__main__":   # not when a module walker imports it
    run()
