"""``mtl-opt bench``: compare solver backends over instance files (DESIGN.md, user path 3).

``solvers`` names the estimator settings that can be compared, ``runner``
runs instance x solver x repeat cells (each in its own process, locally or
on a Dask cluster) and records them (``run_bench``, ``ResultStore``),
``plots`` draws a performance profile and gap-versus-time charts, and
``command`` is the CLI.  Nothing is imported here, so ``mtl-opt --help`` stays fast.
"""
