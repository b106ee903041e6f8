"""SCIP through Pyomo's ``scip_direct`` interface (pyscipopt)."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

import pyomo.environ as pyo
from pyomo.common.timing import HierarchicalTimer
from pyomo.contrib.solver.common.factory import SolverFactory
from pyomo.repn import generate_standard_repn

from mtl_opt.deadline import Deadline
from mtl_opt.errors import SolverError
from mtl_opt.resources import physical_memory
from mtl_opt.solvers.backends.base import (
    LAZY_CUTS, LP, MILP, MIQCP, MIQP, NLP, QCP, QP, Backend, _patched, native_streams,
)
from mtl_opt.solvers.options import SolveOptions


def default_memory_limit_mb() -> float | None:
    """Half the machine's physical memory in MB (None where the OS does not say).

    SCIP's default is unlimited: single-tree OA on an instance without
    curvature adds cuts without end (132,000 in 42 s), and a 600 s run was
    killed by the OS at 21 GB.  With this limit SCIP stops with status
    ``memlimit`` and its dual bound; ``solver_options={"limits/memory": ...}``
    overrides it.
    """
    total = physical_memory()
    return None if total is None else total / 2**21


class ScipBackend(Backend):
    """SCIP via Pyomo's ``scip_direct`` (pyscipopt): also MIQP and lazy cuts.

    ``threads`` maps to ``lp/threads``: Pyomo runs SCIP's sequential
    ``optimize()``, where ``parallel/maxnthreads`` (concurrent solving) has no
    effect.  LP duals are read from pyscipopt directly (Pyomo's SCIP loader
    has none).  They are only right with presolve and propagation off, so
    LPs are solved that way (``LP_OPTIONS``; HiGHS is the preferred LP
    backend anyway).
    """

    name, label, pyomo_name = "scip", "SCIP", "scip_direct"
    module = "pyscipopt"
    install_hint = "install it with `pip install pyscipopt`"
    capabilities = frozenset({LP, MILP, QP, MIQP, QCP, MIQCP, NLP, LAZY_CUTS})
    DUAL_TOLERANCE = ("numerics/dualfeastol", 1e-7)
    TIGHTEST_DUAL_TOLERANCE = 1e-12
    PRIMAL_TOLERANCE = ("numerics/feastol", 1e-6)
    STATUS = {  # pyscipopt Model.getStatus() strings
        "optimal": "optimal",
        "gaplimit": "gap_limit",
        "timelimit": "time_limit",
        "nodelimit": "iteration_limit",
        "totalnodelimit": "iteration_limit",
        "stallnodelimit": "iteration_limit",
        "sollimit": "iteration_limit",
        "bestsollimit": "iteration_limit",
        "restartlimit": "iteration_limit",
        "infeasible": "infeasible",
        "unbounded": "unbounded",
        "inforunbd": "error",  # ambiguous: claim neither
        "userinterrupt": "error",  # (raises KeyboardInterrupt first: raise_if_interrupted)
        "memlimit": "iteration_limit",  # a work limit: SCIP's dual bound at the stop is still valid
        "unknown": "error",
    }
    INTERRUPTED = frozenset({"userinterrupt"})
    LP_OPTIONS = {"presolving/maxrounds": 0, "propagating/maxrounds": 0,
                  "propagating/maxroundsroot": 0}

    def _translate(self, opts: SolveOptions) -> dict[str, Any]:
        return {"limits/time": opts.time_limit, "limits/gap": opts.rel_gap,
                "limits/memory": default_memory_limit_mb(),
                "limits/absgap": opts.abs_gap, "lp/threads": opts.threads,
                "randomization/randomseedshift": opts.seed,
                "display/verblevel": 4 if opts.verbose else 0}

    def _set_time_limit(self, native_model: Any, seconds: float) -> None:
        native_model.setParam("limits/time", seconds)

    @contextlib.contextmanager
    def _checked_translation(self, solver: Any, deadline: Deadline):
        # Pyomo builds the SCIP model constraint by constraint in Python (~6 s for a Big-M MIQP
        # with 600,000 nonzeros): check the deadline between constraints (scip_direct builds a
        # fresh model per solve, so one cut short leaves nothing behind).
        add = solver._add_constraint

        def checked(constraint):
            deadline.check()
            add(constraint)

        solver._add_constraint = checked
        try:
            yield
        finally:
            del solver._add_constraint

    def _native_status(self, native_model: Any) -> tuple[str, float]:
        return native_model.getStatus(), native_model.getGap()

    def _new_native_model(self) -> Any:
        import pyscipopt

        return pyscipopt.Model()

    def _accepts(self, probe: Any, key: str, value: Any) -> bool:
        probe.setParam(key, value)  # raises on an unknown name or a bad value
        return True

    def _streams(self, verbose: bool) -> contextlib.AbstractContextManager:
        # Pyomo's scip_direct captures fds 1 and 2 into a pipe that a Python thread drains, but
        # pyscipopt's optimize() holds the GIL, so that thread cannot run while SCIP does: once
        # SoPlex, which writes to std::cerr itself, filled the pipe ("Cannot set feasibility
        # tolerance to small value", with y in units 1e4 too large), the solve hung past its time
        # limit.  So Pyomo's capture is switched off and SCIP writes to native_streams instead.
        from pyomo.contrib.solver.solvers.scip import scip_direct

        return _patched(scip_direct, "capture_output", lambda *args, **kwargs: native_streams(verbose))

    # --- for code that drives SCIP itself (single-tree OA's constraint handler) ------------

    def native_model(self, model: pyo.Block) -> tuple[Any, Mapping[Any, Any]]:
        """``model`` as a pyscipopt Model, translated as ``solve`` translates it (Pyomo's
        ``scip_direct``), and the map from ``model``'s variables to the Model's."""
        self._require_available()
        solver = SolverFactory(self.pyomo_name)
        scip, _, _ = solver._create_solver_model(model, solver.config(value={"timer": HierarchicalTimer()}))
        return scip, solver._pyomo_var_to_solver_var_map

    def set_options(self, scip: Any, opts: SolveOptions) -> None:
        """Set ``opts`` on the pyscipopt Model ``scip`` as ``solve`` would: ``solver_options``
        checked first (InvalidParameterError naming a bad one), then translated; output only
        when ``opts.verbose``."""
        self._reject_bad_options(opts.solver_options)
        scip.setParams(self.native_options(opts))
        scip.hideOutput(not opts.verbose)

    def _duals(self, results: Any, constraints: list) -> dict[Any, float]:
        # Pyomo's ScipSolutionLoader keeps the pyscipopt model and the
        # Pyomo -> SCIP constraint and variable maps.
        loader = results.solution_loader
        scip = loader._solver_model
        if any(scip.getParam(key) != value for key, value in self.LP_OPTIONS.items()):
            raise SolverError("SCIP gives LP duals only with presolve and propagation off; "
                              f"do not override {', '.join(self.LP_OPTIONS)}.")
        rows = {con: loader._con_map[con] for con in constraints}
        return {con: _row_scale(con, scip.getValsLinear(row), loader._var_map)
                * scip.getDualsolLinear(row) for con, row in rows.items()}



def _row_scale(con: Any, scip_coefs: Mapping[str, float], var_map: Mapping) -> float:
    """t such that SCIP's row is t * Pyomo's ``con.body`` (terms moved to one side).

    pyscipopt moves the terms of ``y >= 2 - x`` its own way (``x + y >= 2``)
    while Pyomo keeps ``2 - x - y <= 0``; the dual with respect to Pyomo's
    form is t times SCIP's.
    """
    repn = generate_standard_repn(con.body, compute_values=True)
    for var, coef in zip(repn.linear_vars, repn.linear_coefs):
        if coef:
            return scip_coefs[var_map[var].name] / coef
    return 1.0  # a row without variables has nothing to rescale

