"""bnb: our own branch and bound over supports, with perspective-dual node bounds (the L0BnB /
OKRidge design), laid out as L0BnB lays out its tree, node and relaxations:

    search.py    ``solve_bnb``: the trees of a problem searched best-first to the gap or the deadline
    tree.py      one tree on the engine (``solvers.engine``): screening, branching, children kept
    node.py      bounding one node: the dual climbed, scored safely, its support refitted (a job)
    greedy.py    bound family without Zbar or Bbar terms (greedy worst support)
    zbar.py      bound family with a Zbar term on many tasks (priced budgets, a recursion per column)
    sets.py      bound family with a Bbar term, or Zbar on few tasks (each column's task sets enumerated)
    kernels.py   the compiled (numba) dual evaluations and climbs
    scope.py     what bnb can solve, importable without its kernels

Its rounding-error bounds (``gamma``, ``lowered``, ``rounded_up``) are ``mtl_opt.rounding``'s, the
safe-bound numerics every family shares.

Names load on first use: ``scope`` (``mtl-opt validate``, a fit's ``check``) never imports numba,
while ``solve_bnb`` compiles the kernels on first import (16-40 s once per Python environment).
"""

from ...._lazy import lazy_names

#: Public name -> module of this package.
_HOME = {"solve_bnb": "search", "refusal": "scope", "MAX_BBAR_TASKS": "scope", "BATCH": "tree",
         "FREE": "kernels", "OUT": "kernels", "IN": "kernels"}

__getattr__, __dir__ = lazy_names(__name__, _HOME)

__all__ = sorted(_HOME)
