"""The ARMUL family's method table: every algorithm ``ARMUL`` can run, in one place.

``ARMUL`` looks its ``algorithm=`` up here (``method.lookup``), asks the method's
``refusal`` in ``check`` (so ``mtl-opt validate`` refuses before any work) and runs it
through ``Method.solve``.  A method sees the problem with its structure
(``StructuredProblem``), and what the structure decides on each path (its prox solver, its
exact path and the problem class that hands a backend, by loss) is the table ``STRUCTURES``; a
run's estimate is a ``prox.ArmulEstimate`` (per-task coefficients, centers, and the labels or
basis of the structure).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

import numpy as np

from ... import __version__
from ...deadline import Deadline
from ...errors import InvalidParameterError, MTLOptError
from ...formulations.armul import ArmulProblem
from ...rounding import lowered_sum
from . import glm, prox
from .scip import solve_exact
from .tree import solve_tree
from ..backends import NLP, QCP
from ..method import NO_BOUND, Method, SolverRun
from ..options import SolveOptions
from ..progress import Progress


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


def _fista(problem: StructuredProblem, incumbent, anchors, options: SolveOptions, deadline: Deadline,
           *, max_iter, **settings) -> prox.ProxRun:
    theta0, center0 = incumbent or (None, None)
    return prox.fista(problem.problem, theta0, center0, rel_gap=options.rel_gap, max_iter=max_iter,
                      deadline=deadline)


def _clusters(problem: StructuredProblem, incumbent, anchors, options: SolveOptions,
              deadline: Deadline, *, seed, n_init, **settings) -> prox.ProxRun:
    return prox.clustered_armul(problem.problem, problem.n_components, anchors,
                                np.random.default_rng(seed), n_init=n_init, rel_gap=options.rel_gap,
                                deadline=deadline)


def _subspace(problem: StructuredProblem, incumbent, anchors, options: SolveOptions,
              deadline: Deadline, **settings) -> prox.ProxRun:
    """The alternating search, with the independent-tasks bound and, for the squared loss, the
    rank floor: without the rank constraint every center can sit on its task, so sum_j min f_j
    (``dual_bound(..., "independent")``, safe in floating point; a task it cannot prove, rank
    deficient or with fewer rows than coefficients, adds 0) is below the low-rank optimum, and
    the centers' rank makes the tasks pay at least ``rank_floor`` more (DESIGN.md, claim 6).
    Proven on every fit: a gap, never ``heuristic``.  The squared loss's dual point is
    projected exactly from any iterate; the logistic one is taken at each task's own fit, where
    it needs almost no projection and stays in the conjugate's domain."""
    sub = problem.problem
    run = prox.lowrank_armul(sub, problem.n_components, anchors, rel_gap=options.rel_gap,
                             deadline=deadline)
    at = run.theta if sub.loss == "squared" else glm.task_fits(sub, sub.active)
    independent = sub.dual_bound(at, "independent") or 0.0   # None: the losses' own floor, 0
    floor = sub.rank_floor(problem.n_components, run.theta, run.centers, deadline)
    return replace(run, lower_bound=lowered_sum(independent + floor, 2))


def _vanilla_exact(problem: StructuredProblem, incumbent, options: SolveOptions, deadline: Deadline,
                   backend, progress=None, **settings) -> SolverRun:
    """The exact Pyomo model on the backend (``armul.scip.solve_exact``)."""
    return solve_exact(problem.problem, options, deadline, backend or "scip", progress)


def _tree(problem: StructuredProblem, incumbent, options: SolveOptions, deadline: Deadline,
          backend, progress=None, **settings) -> SolverRun:
    """The branch and bound over assignments (``armul.tree``, no backend) from the prox
    heuristic's answer (over its restarts), which it never returns worse than (the heuristic
    takes about 0.1 s at m = 30: it runs first, on the fit's deadline)."""
    heuristic = _prox(problem, incumbent, options, deadline, backend, **settings).estimate
    return solve_tree(problem.problem, problem.n_components, heuristic, options.rel_gap,
                      deadline, progress or Progress(options.verbose), options.threads)


def _full_rank_tasks(problem: StructuredProblem) -> str | None:
    """Why the assignment tree cannot bound these tasks (a rank-deficient design), or None."""
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


@dataclass(frozen=True)
class Structure:
    """What ARMUL's structure Omega decides along the method table's paths.

    ``prox``: the solve of the ``prox`` method, ``(problem, incumbent, anchors, options,
    deadline, **settings) -> ProxRun``; ``local_search``: whether that is a search from the
    task-wise fits (``anchors``), which the exact path then starts from; ``prox_bound``: what
    the prox run's bound is (``none: ...`` when it has none); ``exact``:
    the solve of the ``exact`` method (None: there is none, ``no_exact`` says why); ``models``:
    loss -> the problem class the exact path hands a backend (none listed: it uses no backend);
    ``exact_scope(problem)``: why the exact path cannot bound these data, or None.
    """

    name: str
    prox: Callable[..., prox.ProxRun]
    local_search: bool
    exact: Callable[..., SolverRun] | None
    prox_bound: str
    models: Mapping[str, str] = field(default_factory=dict)
    no_exact: str = ""
    exact_scope: Callable[[StructuredProblem], str | None] = lambda problem: None


#: ARMUL's structures (``formulations.armul.STRUCTURES``) -> what each decides.
STRUCTURES: dict[str, Structure] = {s.name: s for s in (
    Structure("vanilla", _fista, False, _vanilla_exact, "dual feasible point from the iterate",
              {"squared": QCP, "logistic": NLP}),
    Structure("clustered", _clusters, True, _tree,
              "none: clustered ARMUL by alternating prox is a heuristic",
              exact_scope=_full_rank_tasks),
    Structure("lowrank", _subspace, True, None,
              "the independent-tasks dual bound at the iterate plus the rank floor (squared loss)",
              no_exact="ARMUL(structure='lowrank') has no exact method: the rank constraint makes "
                       "it a nonconvex program SCIP's global search does not finish beyond toy "
                       "sizes; use algorithm='prox'."),
)}


def _model_class(problem: StructuredProblem) -> str | None:
    """The problem class the exact path hands its backend (None: no backend)."""
    return STRUCTURES[problem.structure].models.get(problem.problem.loss)


def _exact_refusal(problem: StructuredProblem, backend) -> str | None:
    """Why the exact path does not exist or cannot bound these data, or None."""
    structure = STRUCTURES[problem.structure]
    return structure.no_exact if structure.exact is None else structure.exact_scope(problem)


def exact_refusal(structure: str, loss: str, backend: str | None) -> MTLOptError | None:
    """Why the ``exact`` method cannot run ARMUL(structure, loss) on ``backend``, from the names
    alone (the bench asks before it reads data; the data's own refusals come with ``check``)."""
    if STRUCTURES[structure].exact is None:
        return InvalidParameterError(STRUCTURES[structure].no_exact)
    return METHODS["exact"].backend_refusal(STRUCTURES[structure].models.get(loss), backend)


def _prox(problem: StructuredProblem, incumbent, options: SolveOptions, deadline: Deadline,
          backend, *, anchors=None, seed=None, n_init=10, max_iter=20000, progress=None) -> SolverRun:
    """FISTA on vanilla ARMUL from ``incumbent`` ((theta, center) or None); the alternating
    searches of clustered / low-rank ARMUL from ``anchors`` (bounds: ``Structure.prox_bound``).
    Their logs are their own iterations' (``progress``, the live log of the exact path, is not
    used)."""
    run = STRUCTURES[problem.structure].prox(problem, incumbent, anchors, options, deadline,
                                             seed=seed, n_init=n_init, max_iter=max_iter)
    source = STRUCTURES[problem.structure].prox_bound
    if run.lower_bound is None and not source.startswith(NO_BOUND):
        source = f"{NO_BOUND}: {source}, not available at this iterate"
    return run.solver_run({"solver": "prox (mtl_opt)", "solver_version": __version__,
                           "bound": source})


def _exact(problem: StructuredProblem, incumbent, options: SolveOptions, deadline: Deadline,
           backend, progress=None, **settings) -> SolverRun:
    """The structure's exact path (``STRUCTURES``)."""
    return STRUCTURES[problem.structure].exact(problem, incumbent, options, deadline, backend,
                                               progress, **settings)


#: Method name -> Method; ``ARMUL(algorithm=...)`` names one.
METHODS: dict[str, Method] = {m.name: m for m in (
    Method("prox", None, True, _anything, _prox,
           "FISTA stopped on a proven duality gap (vanilla); alternating search (clustered, no "
           "bound; low-rank, with the independent-tasks bound and the rank floor)", None,
           "dual feasible point from the iterate (vanilla); the independent-tasks dual bound "
           "plus the rank floor (low-rank)"),
    Method("exact", None, True, _exact_refusal, _exact,
           "the exact Pyomo model (vanilla QCP / NLP); clustered: branch and bound over "
           "task-to-cluster assignments (armul.tree)", _model_class,
           "our dual bound at the backend's point (vanilla); the least safe bound over the "
           "closed nodes of the assignment tree (clustered)"),
)}
