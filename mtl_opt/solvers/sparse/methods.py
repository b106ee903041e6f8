"""The sparse family's method table: every algorithm ``SparseMTL`` can run, in one place.

``SparseMTL``, its ``certify``, instance files and the bench all resolve an
``algorithm=`` name here (``resolve``), ask the method to ``refuse`` before any
work, and run it through ``run_exact`` (an exact method from an incumbent) or
``METHODS["bcd"].solve`` (the heuristic).
"""

from __future__ import annotations

import functools
import importlib
import logging
import sys
import threading
import time

import numpy as np

from ... import __version__, interrupts
from ...deadline import Deadline
from ...errors import InvalidParameterError
from ...formulations.sparse import SparseProblem
from ...logs import show
from ...reductions import ObjectiveScale, normalizing_root
from ...result import Status
from ..backends import pick_backend
from .bnb import scope as bnb_scope
from .bcd import cut_short, fit_bcd
from ..method import Method, SolverRun, lookup
from .oa import solve_miqp, solve_oa
from .oa_scip import solve_oa_single_tree
from ..options import SolveOptions
from ..progress import Progress


def _exact_curvature(problem: SparseProblem, backend) -> str | None:
    """Why the cuts and the Big-M cannot be proven here (too little curvature), or None."""
    try:
        problem.exact_curvature()
    except ValueError as exc:   # InvalidParameterError, naming the task and lambda_ridge
        return str(exc)
    return None


def _oa_scope(problem: SparseProblem, backend) -> str | None:
    """``_exact_curvature``, and OA's side constraints: its cuts come from the unconstrained
    refit of each support, so signs and bounds on the coefficients are the MIQP's."""
    if problem.side.bounded:
        return ("outer approximation (algorithm='oa_multi_tree' or 'oa_single_tree') cannot "
                "enforce sign or bound constraints on the coefficients, coef_bound included (its "
                "cuts assume free coefficients on each support); use algorithm='miqp', which "
                "models them.")
    return _exact_curvature(problem, backend)


LOGGER = logging.getLogger(__name__)

#: Seconds the first import of ``bnb`` may take before a notice says why: numba loads its
#: kernels from the disk cache in about a second, and compiles them in 16-40 s once per Python
#: environment (its cache is kept beside the installed package, or in NUMBA_CACHE_DIR).
COMPILE_NOTICE_AFTER = 5.0


@functools.cache
def _bnb_module():
    """``solvers.sparse.bnb.search``, imported on first use, since importing it compiles its numba kernels
    (``bnb.kernels``), which no other method needs: bnb's ``Method.prepare``, which every fit runs
    before its deadline starts, so the compile is never inside a time limit (the fit reports it as
    ``compile_time``).  A slow import is announced (it does not say "compiling" for sure: a load
    from the cache can take 5 s on a busy machine).

    The import runs in a thread while this one waits: a Ctrl-C then stops the fit at once
    (``FitInterrupted``), where raised inside the compiler it was swallowed by one of llvmlite's
    ctypes callbacks and the compile went on.  An abandoned compile finishes in the background."""
    done = threading.Event()

    def load():
        try:
            importlib.import_module(f"{__package__}.bnb.search")
        finally:
            done.set()
    threading.Thread(target=load, name="mtl_opt-bnb-compile", daemon=True).start()
    notice: float | None = time.perf_counter() + COMPILE_NOTICE_AFTER
    while not done.wait(0.05):
        if notice is not None and time.perf_counter() >= notice:
            show(LOGGER, logging.INFO, "mtl_opt: loading the bnb kernels (numba compiles them once "
                 "per Python environment, 16-40 s; Ctrl-C stops) ...", sys.stderr)
            notice = None
        if interrupts.requested():
            raise interrupts.FitInterrupted(None, "the fit was interrupted while numba compiled "
                                            "bnb's kernels (nothing was proven yet)")
    return importlib.import_module(f"{__package__}.bnb.search")   # raises what the import raised


def _bnb_scope(problem: SparseProblem, backend) -> str | None:
    return bnb_scope.refusal(problem)


def _bcd(problem, incumbent, options, deadline, backend, *, max_iter=1000, local_search=True):
    run = fit_bcd(problem, incumbent, max_iter=max_iter, local_search=local_search, deadline=deadline)
    B, z = problem.completed_point(run.coef)
    # cut short by the deadline, its best answer so far is not bcd's finished answer
    stop = Status.TIME_LIMIT if cut_short(run.log) else Status.CONVERGED
    return SolverRun(B, problem.objective(B, z), None, stop, run.log,
                     {"solver": "mtl_opt", "solver_version": __version__, "n_iter": run.n_iter, "nodes": 0,
                      "bound": "none: bcd is a heuristic"}, z)


def _oa(problem, incumbent, options, deadline, backend, progress=None):
    return solve_oa(problem, pick_backend("milp", backend), options, incumbent, deadline=deadline,
                    progress=progress)


def _oa_single_tree(problem, incumbent, options, deadline, backend, progress=None):
    return solve_oa_single_tree(problem, options, incumbent, deadline=deadline, progress=progress)


def _miqp(problem, incumbent, options, deadline, backend, progress=None):
    return solve_miqp(problem, pick_backend("miqp", backend), options, incumbent, deadline=deadline,
                      progress=progress)


def _bnb(problem, incumbent, options, deadline, backend, progress=None):
    return _bnb_module().solve_bnb(problem, options, incumbent, deadline=deadline, progress=progress)


def _never(problem, backend) -> None:
    return None


#: Method name -> Method.  ``problem_class`` of each is what its backend must solve; the backends
#: that run it follow from their capabilities, except two methods limited to SCIP: single-tree OA
#: is written against SCIP's own constraint handlers, and the MIQP's dual bound on Gurobi exceeded
#: the enumerated optimum on 1 to 8 of 30 tiny instances (tests/test_gurobi.py).
METHODS: dict[str, Method] = {m.name: m for m in (
    Method("bcd", None, False, _never, _bcd,
           "block IHT + local search (no bound)"),
    Method("oa_multi_tree", None, True, _oa_scope, _oa,
           "outer approximation, multi-tree (MILP master re-solved between cuts)",
           "milp", "outer-approximation master dual bound", needs_incumbent=True),
    Method("oa_single_tree", ("scip",), True, _oa_scope, _oa_single_tree,
           "outer approximation, single-tree (cuts inside one SCIP search)",
           "milp", "outer-approximation master dual bound", needs_incumbent=True),
    Method("miqp", ("scip",), True, _exact_curvature, _miqp,
           "Big-M perspective MIQP", "miqp", "Big-M MIQP dual bound", needs_incumbent=True),
    Method("bnb", None, True, _bnb_scope, _bnb,
           "branch and bound, perspective-dual node bounds",
           None, "smallest open node's perspective dual bound", _bnb_module, needs_incumbent=True),
)}
#: Names ``algorithm=`` accepts: the methods and "exact" (``choose``).
NAMES = (*METHODS, "exact")

#: The order in which ``algorithm="exact"`` tries the certifying methods, by regime
#: (BENCHMARKS.md, "Exact sparse solvers"): when some task lends no curvature (n_k <= its
#: identifiable features, or p too wide to measure it), bnb is the path that certifies or bounds
#: best (the grid's hard rows, OKRidge's p = 1000, the sMTL simulation's five variants);
#: otherwise the cuts borrow the curvature and single-tree OA on SCIP is the fastest and multi-tree
#: OA the path on HiGHS.  Signs and bounds on the coefficients (coef_bound) refuse OA: bnb, which
#: takes them in its node bounds, then comes before the MIQP (K = 2, n_k > p, coef_bound: bnb
#: certified in 0.04-43 s where the MIQP stopped at 1.7e-6-2.9e-6 gaps, or 18-25 % after 60 s at
#: p = 100), which models the constraints bnb does not (counts, shared supports, Bbar with signs).
EXACT_ORDER = {"flat": ("bnb", "oa_single_tree", "oa_multi_tree", "miqp"),
               "curved": ("oa_single_tree", "oa_multi_tree", "bnb", "miqp")}


def choose(problem: SparseProblem, backend: str | None) -> Method:
    """The certifying method ``algorithm="exact"`` runs on ``problem`` (``EXACT_ORDER``): the
    first of its regime's order that accepts the problem on ``backend``; when none does, an
    InvalidParameterError with each one's reason."""
    regime = "flat" if np.any(problem.curvature <= 0) else "curved"
    reasons = []
    for name in EXACT_ORDER[regime]:
        reason = METHODS[name].refusal(problem, backend)
        if reason is None:
            return METHODS[name]
        reasons.append(f"{name}: {reason}")
    raise InvalidParameterError("algorithm='exact' found no exact method for this problem:\n  "
                                + "\n  ".join(reasons))


def resolve(algorithm: str) -> Method:
    """The method ``algorithm`` names; an unknown name lists the valid ones."""
    return lookup(METHODS, algorithm, "sparse algorithm")


def run_exact(method: Method, problem: SparseProblem, incumbent: np.ndarray,
              options: SolveOptions, deadline: Deadline, backend: str | None) -> SolverRun:
    """Run the exact ``method`` from ``incumbent`` until ``deadline``; the run on ``problem``.

    The method sees the normalized twin of ``reductions.ObjectiveScale`` (y over the power of 2
    ``normalizing_root``), whose objective at the incumbent is between 1/2 and 2: its tolerances
    are then relative to the objective, whatever the units of y; its run is mapped back exactly.
    This is also the one place of the fallback bound: every term of F is a square or a
    non-negative penalty, so F >= 0 stands in for a bound the method did not reach (none, or a negative one) before it stopped (``native["bound"]``
    says which bound the run carries).  The run's log is its live log (``solvers.progress``),
    logged with ``options.verbose`` in the units of ``problem``.
    """
    root = normalizing_root(problem.objective(incumbent))
    if root is None and not problem.feasible(incumbent):   # F = 0 there proves nothing
        root = 1.0
    if root is None:   # F >= 0 everywhere, so a feasible incumbent with F = 0 is optimal
        return SolverRun(incumbent, 0.0, 0.0, Status.CONVERGED, [],
                         {"solver": "none: F = 0 at the incumbent", "solver_version": __version__,
                          "bound": "F >= 0, and F = 0 at the incumbent"})
    twin, inverse = ObjectiveScale(root).apply(problem)
    progress = Progress(options.verbose, units=inverse.row)
    run = inverse.run(method.solve(twin, inverse.to_twin(incumbent), options, deadline, backend,
                                   progress=progress))
    run.native["bound"] = method.bound_source
    if run.stop is not Status.INFEASIBLE and (run.lower_bound is None or run.lower_bound <= 0):
        run.lower_bound = 0.0
        run.native["bound"] = (f"trivial bound (F >= 0; stopped before the {method.bound_source} "
                               f"rose above 0)")
    return run
