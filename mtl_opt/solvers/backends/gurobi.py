"""Gurobi through Pyomo's ``gurobi_persistent`` interface (gurobipy, the optional ``gurobi`` extra).

The pip build of gurobipy carries a size-limited license that works offline; a model beyond it
is refused by Gurobi with error code SIZE_LIMIT_EXCEEDED (10010), which becomes
``LicenseLimitError`` carrying Gurobi's own message.  The limit is Gurobi's to state, not ours:
it depends on the model (gurobipy 13.0.3's took an LP of 2000 variables and refused 2001, but
took a QP of 200 and refused 201), so no figure is written here.  Gurobi reports ``OPTIMAL``
when its gap limit is met, like HiGHS: callers recompute the gap from the bound.
"""

from __future__ import annotations

from typing import Any

from mtl_opt.errors import LicenseLimitError
from mtl_opt.solvers.backends.base import LP, MILP, MIQCP, MIQP, QCP, QP, Backend
from mtl_opt.result import Status
from mtl_opt.solvers.options import SolveOptions


class GurobiBackend(Backend):
    """Gurobi via Pyomo's ``gurobi_persistent``: LP, MILP, QP, MIQP and quadratic constraints."""

    name, label, pyomo_name = "gurobi", "Gurobi", "gurobi_persistent"
    module = "gurobipy"
    install_hint = "install it with `pip install mtl-opt[gurobi]` (gurobipy)"
    capabilities = frozenset({LP, MILP, QP, MIQP, QCP, MIQCP})
    DUAL_TOLERANCE = ("OptimalityTol", 1e-6)
    TIGHTEST_DUAL_TOLERANCE = 1e-9
    PRIMAL_TOLERANCE = ("FeasibilityTol", 1e-6)
    STATUS = {  # gurobipy.GRB.Status member names
        "OPTIMAL": Status.OPTIMAL,
        "TIME_LIMIT": Status.TIME_LIMIT,
        **dict.fromkeys(("ITERATION_LIMIT", "NODE_LIMIT", "SOLUTION_LIMIT", "WORK_LIMIT"),
                        Status.ITERATION_LIMIT),
        "MEM_LIMIT": Status.ITERATION_LIMIT,  # a work limit: the dual bound at the stop is still valid
        "INFEASIBLE": Status.INFEASIBLE,
        "UNBOUNDED": Status.UNBOUNDED,
        "INF_OR_UNBD": Status.ERROR,  # ambiguous: claim neither
        "INTERRUPTED": Status.TIME_LIMIT,  # Gurobi caught Ctrl-C itself (``note_interrupt``): its bound stands
        **dict.fromkeys(("LOADED", "INPROGRESS", "CUTOFF", "USER_OBJ_LIMIT", "NUMERIC",
                         "SUBOPTIMAL"), Status.ERROR),
    }
    INTERRUPTED = frozenset({"INTERRUPTED"})
    NATIVE_LOG = {"OutputFlag": 1}
    LP_OPTIONS = {"DualReductions": 0}  # so an infeasible LP is INFEASIBLE, not INF_OR_UNBD

    def dual_tolerance(self, opts: SolveOptions) -> float:
        # Gurobi reads parameter names in any case, the last one set winning: so must the bound margin.
        values = {key.lower(): value for key, value in opts.solver_options.items()}
        name, default = self.DUAL_TOLERANCE
        return float(values.get(name.lower(), default))

    def _translate(self, opts: SolveOptions) -> dict[str, Any]:
        return {"TimeLimit": opts.time_limit, "MIPGap": opts.rel_gap, "MIPGapAbs": opts.abs_gap,
                "Threads": opts.threads, "Seed": opts.seed,
                "OutputFlag": 0}   # verbose shows mtl_opt's table; Gurobi's own log is NATIVE_LOG

    def _set_time_limit(self, native_model: Any, seconds: float) -> None:
        native_model.setParam("TimeLimit", seconds)

    def _native_status(self, native_model: Any) -> tuple[str, float]:
        import gurobipy

        names = {getattr(gurobipy.GRB.Status, name): name for name in self.STATUS}
        gap = native_model.MIPGap if native_model.IsMIP else float("nan")  # no gap outside MIPs
        return names.get(native_model.Status, str(native_model.Status)), gap

    def _node_count(self, native_model: Any) -> int:
        # (no ``_watch``: Pyomo calls Gurobi's optimize() without a callback, so a solve is silent)
        return int(native_model.NodeCount) if native_model.IsMIP else 0

    def _new_native_model(self) -> Any:
        import gurobipy
        from pyomo.contrib.solver.solvers.gurobi.gurobi_direct_base import GurobiDirectBase

        return gurobipy.Model(env=GurobiDirectBase.env())  # Pyomo's shared, quiet environment

    def _accepts(self, probe: Any, key: str, value: Any) -> bool:
        probe.setParam(key, value)  # raises GurobiError on an unknown name or a bad value
        return True

    def _failure(self, exc: Exception, problem_class: str) -> Exception:
        import gurobipy

        if isinstance(exc, gurobipy.GurobiError) and exc.errno == gurobipy.GRB.Error.SIZE_LIMIT_EXCEEDED:
            return LicenseLimitError(
                f"This {problem_class.upper()} model is larger than Gurobi's license allows "
                f"(Gurobi: {str(exc).strip()}): use another backend (`mtl-opt solvers` lists what "
                "each solves), a smaller instance, or a full Gurobi license.")
        return super()._failure(exc, problem_class)
