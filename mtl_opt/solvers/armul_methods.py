"""The ARMUL family's method table: every algorithm ``ARMUL`` can run, in one place.

``ARMUL`` looks its ``algorithm=`` up here (``method.lookup``), asks the method to
``refuse`` in ``check`` (so ``mtl-opt validate`` refuses before any work) and runs it
through ``Method.solve``.  A method sees the problem with its structure
(``StructuredProblem``); its run's estimate is a ``prox.ProxRun`` (per-task
coefficients, centers, and the labels or basis of the structure).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import __version__
from ..deadline import Deadline
from ..formulations.armul import ArmulProblem
from . import prox
from .armul_scip import solve_exact
from .armul_tree import solve_tree
from .method import Method, SolverRun
from .options import SolveOptions
from .progress import Progress


@dataclass(frozen=True)
class StructuredProblem:
    """ARMUL's problem with its structure Omega: ``structure`` and ``n_components`` (clusters
    or rank), ``identified`` (m, d), the columns each task's own least squares can estimate
    (None for vanilla, which uses none), and the tasks' names (for messages)."""

    problem: ArmulProblem
    structure: str
    n_components: int | None
    identified: np.ndarray | None
    task_names: tuple


def _anything(problem: StructuredProblem, backend) -> None:
    return None


def _exact_model(problem: StructuredProblem, backend) -> str | None:
    """Why the exact path (vanilla's Pyomo model, clustered's tree) cannot run or be bounded
    here, or None."""
    if problem.structure == "lowrank":
        return ("ARMUL(structure='lowrank') has no exact model: the rank constraint makes it a "
                "nonconvex program SCIP's global search does not finish beyond toy sizes; use "
                "algorithm='prox'.")
    if problem.structure != "clustered":
        return None
    deficient = [str(name) for name, full in zip(problem.task_names, problem.identified.all(axis=1))
                 if not full]
    if deficient:
        return (f"ARMUL(structure='clustered', algorithm='exact') needs every task's design to "
                f"have full column rank (a single task's proven bound needs its Gram matrix "
                f"nonsingular, or the tree cannot prune); {len(deficient)} task(s) have a "
                f"constant or collinear feature or no more rows than coefficients: "
                f"{', '.join(deficient[:5])}{', ...' if len(deficient) > 5 else ''}. Use "
                f"algorithm='prox' (a local search), or drop those tasks or features.")
    return None


def _prox(problem: StructuredProblem, incumbent, options: SolveOptions, deadline: Deadline,
          backend, *, anchors=None, seed=None, n_init=10, max_iter=20000, progress=None) -> SolverRun:
    """FISTA on vanilla ARMUL from ``incumbent`` ((theta, center) or None); the alternating
    searches of clustered / low-rank ARMUL from ``anchors`` (no bound).  Their logs are their
    own iterations' (``progress``, the live log of the exact path, is not used)."""
    armul, k = problem.problem, problem.n_components
    if problem.structure == "vanilla":
        theta0, center0 = incumbent or (None, None)
        run = prox.fista(armul, theta0, center0, rel_gap=options.rel_gap, max_iter=max_iter,
                         deadline=deadline)
    elif problem.structure == "clustered":
        run = prox.clustered_armul(armul, k, anchors, np.random.default_rng(seed), n_init=n_init,
                                   rel_gap=options.rel_gap, deadline=deadline)
    else:
        run = prox.lowrank_armul(armul, k, anchors, rel_gap=options.rel_gap, deadline=deadline)
    return SolverRun(run, run.objective, run.lower_bound, run.status, run.log,
                     {"solver": "prox (mtl_opt)", "solver_version": __version__,
                      "bound": "dual feasible point from the iterate" if run.lower_bound is not None
                      else f"none: {problem.structure} ARMUL by alternating prox is a heuristic"})


def _exact(problem: StructuredProblem, incumbent, options: SolveOptions, deadline: Deadline,
           backend, progress=None, **settings) -> SolverRun:
    """Vanilla, the exact model on the backend; clustered, the branch and bound over assignments
    (``armul_tree``, no backend) from the prox heuristic's answer (over its restarts), which it
    never returns worse than (the heuristic takes about 0.1 s at m = 30: it runs first, on the
    fit's deadline)."""
    if problem.structure == "clustered":
        heuristic = _prox(problem, incumbent, options, deadline, backend, **settings).estimate
        return solve_tree(problem.problem, problem.n_components, heuristic, options.rel_gap,
                          deadline, progress or Progress(options.verbose))
    return solve_exact(problem.problem, options, deadline, backend or "scip", progress)


#: Method name -> Method; ``ARMUL(algorithm=...)`` names one.
METHODS: dict[str, Method] = {m.name: m for m in (
    Method("prox", (None,), True, _anything, _prox,
           "FISTA stopped on a proven duality gap (vanilla); alternating search (clustered, "
           "low-rank; no bound)", None, "dual feasible point from the iterate (vanilla)"),
    Method("exact", ("scip", "gurobi"), True, _exact_model, _exact,
           "the exact Pyomo model (vanilla QCP / NLP); clustered: branch and bound over "
           "task-to-cluster assignments (armul_tree)", None,
           "our dual bound at the backend's point (vanilla); the least safe bound over the "
           "closed nodes of the assignment tree (clustered)"),
)}
