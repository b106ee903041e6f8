"""The branch-and-bound engine: one for every tree of the package (the sparse supports of
``bnb``, clustered ARMUL's assignments of ``armul.tree``), whatever the problem.

    search.py    ``Engine``: open nodes, incumbent, pruning, the proven bound of a run
    workers.py   where node work runs: here, this machine's cores, or a Dask cluster

A tree problem is one module that gives the engine a bounder and two functions (``search``'s
docstring); node work goes to ``workers.workers_for``'s choice.
"""

from .search import Engine, TreeProblem
from .workers import Serial, Workers, workers_for

__all__ = ["Engine", "Serial", "TreeProblem", "Workers", "workers_for"]
