"""SCIP through Pyomo's ``scip_direct`` interface (pyscipopt)."""

from __future__ import annotations

import contextlib
import contextvars
import ctypes
import functools
import math
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from mtl_opt._lazy import pyo
from mtl_opt import interrupts
from mtl_opt.deadline import Deadline
from mtl_opt.errors import SolverError
from mtl_opt.resources import physical_memory
from mtl_opt.solvers.backends.base import (
    LAZY_CUTS, LP, MILP, MIQCP, MIQP, NLP, QCP, QP, Backend, _patched, native_streams, pyomo_solver,
)
from mtl_opt.result import Status
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
        "optimal": Status.OPTIMAL,
        "gaplimit": Status.GAP_LIMIT,
        "timelimit": Status.TIME_LIMIT,
        "nodelimit": Status.ITERATION_LIMIT,
        "totalnodelimit": Status.ITERATION_LIMIT,
        "stallnodelimit": Status.ITERATION_LIMIT,
        "sollimit": Status.ITERATION_LIMIT,
        "bestsollimit": Status.ITERATION_LIMIT,
        "restartlimit": Status.ITERATION_LIMIT,
        "infeasible": Status.INFEASIBLE,
        "unbounded": Status.UNBOUNDED,
        "inforunbd": Status.ERROR,  # ambiguous: claim neither
        "userinterrupt": Status.TIME_LIMIT,  # a stop asked (``interrupts``): its dual bound stands
        "memlimit": Status.ITERATION_LIMIT,  # a work limit: SCIP's dual bound at the stop is still valid
        "unknown": Status.ERROR,
    }
    INTERRUPTED = frozenset({"userinterrupt"})
    NATIVE_LOG = {"display/verblevel": 4}
    LP_OPTIONS = {"presolving/maxrounds": 0, "propagating/maxrounds": 0,
                  "propagating/maxroundsroot": 0}

    def _translate(self, opts: SolveOptions) -> dict[str, Any]:
        return {"limits/time": opts.time_limit, "limits/gap": opts.rel_gap,
                "limits/memory": default_memory_limit_mb(),
                "limits/absgap": opts.abs_gap, "lp/threads": opts.threads,
                "randomization/randomseedshift": opts.seed,
                "display/verblevel": 0}   # verbose shows mtl_opt's table; SCIP's own log is NATIVE_LOG

    def _set_time_limit(self, native_model: Any, seconds: float) -> None:
        native_model.setParam("limits/time", seconds)

    @contextlib.contextmanager
    def _checked_translation(self, solver: Any, deadline: Deadline, progress: Callable | None):
        # Pyomo builds the SCIP model constraint by constraint in Python (~6 s for a Big-M MIQP
        # with 600,000 nonzeros): check the deadline between constraints (scip_direct builds a
        # fresh model per solve, so one cut short leaves nothing behind), and beat the heartbeat.
        add = solver._add_constraint

        def checked(constraint):
            deadline.check()
            if progress is not None:
                progress(None, None, None)
            add(constraint)

        solver._add_constraint = checked
        try:
            yield
        finally:
            del solver._add_constraint

    def _native_status(self, native_model: Any) -> tuple[str, float]:
        return native_model.getStatus(), native_model.getGap()

    def version(self) -> str:
        """SCIP's own version and the PySCIPOpt that reaches it, e.g. ``"10.0.0 (PySCIPOpt 6.3.0)"``."""
        self._require_available()
        return _versions()

    def _node_count(self, native_model: Any) -> int:
        return native_model.getNNodes()

    def _watch(self, native_model: Any, progress: Callable | None) -> Callable[[], None]:
        native_model.includeEventhdlr(event_watcher()(progress), "mtl_opt_progress",
                                      "mtl_opt's live log (solvers.progress)")
        return lambda: None   # scip_direct builds a fresh model per solve

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

    def _native_solve(self) -> contextlib.AbstractContextManager:
        # Pyomo's scip_direct calls Model().optimize(), which holds the GIL and cannot be stopped
        # inside an LP: its models are made of a Model whose optimize() is ``optimize_stoppably``.
        import pyscipopt

        return _patched(pyscipopt, "Model", _stoppable_model())

    # --- for code that drives SCIP itself (single-tree OA's constraint handler) ------------

    def native_model(self, model: pyo.Block) -> tuple[Any, Mapping[Any, Any]]:
        """``model`` as a pyscipopt Model, translated as ``solve`` translates it (Pyomo's
        ``scip_direct``), and the map from ``model``'s variables to the Model's."""
        self._require_available()
        from pyomo.common.timing import HierarchicalTimer
        solver = pyomo_solver(self.pyomo_name)
        scip, _, _ = solver._create_solver_model(model, solver.config(value={"timer": HierarchicalTimer()}))
        return scip, solver._pyomo_var_to_solver_var_map

    def set_options(self, scip: Any, opts: SolveOptions) -> None:
        """Set ``opts`` on the pyscipopt Model ``scip`` as ``solve`` would: ``solver_options``
        checked first (InvalidParameterError naming a bad one), then translated; SCIP's own log
        only where ``native_log`` shows it (``verbose`` and ``display/verblevel`` on)."""
        self._reject_bad_options(opts.solver_options)
        scip.setParams(self.native_options(opts))
        scip.hideOutput(not self.native_log(opts))

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



@functools.cache
def _stoppable_model() -> type:
    """pyscipopt's Model, its optimize() ``optimize_stoppably``."""
    import pyscipopt

    class Model(pyscipopt.Model):
        def optimize(self):
            optimize_stoppably(self)
    return Model


#: Seconds between a waiting caller's looks at a stop asked (``optimize_stoppably``).
POLL = 0.05


def optimize_stoppably(scip: Any) -> None:
    """``scip.optimizeNogil()`` (callbacks take the GIL back) in a thread of its own, while the
    calling thread waits and, once a stop is asked (``interrupts.requested()``), stops SCIP and
    the LP it is in.

    SCIP looks at a stop between LPs only, and its own Ctrl-C catch does not reach SoPlex: the
    root LP of an MIQP (sMTL l0l2, K = 5, p = 200, 1,000 rows of data, lambda_ridge 0.001; 8,006
    LP rows, 46,000 simplex iterations) ran on for 37 s after Ctrl-C, and a second Ctrl-C went to
    SCIP's count, not to ``interrupts``.  So SCIP's catch is off (``misc/catchctrlc``): signals
    reach Python's handler in this waiting thread at once, and the LP is stopped by
    ``SCIPinterruptLP`` (not in pyscipopt: through ctypes).  An exception here (a second Ctrl-C
    in Python) stops SCIP too before it goes on."""
    scip.setParam("misc/catchctrlc", False)
    failure: list[BaseException] = []

    def run() -> None:
        try:
            scip.optimizeNogil()
        except BaseException as exc:   # raised again in the caller's thread
            failure.append(exc)
    solve = threading.Thread(target=contextvars.copy_context().run, args=(run,),
                             name="mtl_opt-scip", daemon=True)
    solve.start()
    try:
        while solve.is_alive() and not interrupts.requested():
            solve.join(POLL)
    finally:
        if solve.is_alive():
            scip.interruptSolve()
            _interrupt_lp(scip)
            while solve.is_alive():
                solve.join(POLL)
    if failure:
        raise failure[0]


def _interrupt_lp(scip: Any) -> None:
    """Stop the LP ``scip`` is solving (SCIP's ``SCIPinterruptLP``), where the library has it."""
    interrupt = _lp_interrupter()
    if interrupt is not None:
        interrupt(_pointer(scip.to_ptr(False)), 1)


@functools.cache
def _lp_interrupter() -> Any:
    """SCIP's ``SCIPinterruptLP(scip, interrupt)`` from the library pyscipopt is linked to, or
    None where it has none."""
    import pyscipopt.scip

    try:
        function = ctypes.CDLL(pyscipopt.scip.__file__).SCIPinterruptLP
    except (OSError, AttributeError):
        return None
    function.argtypes, function.restype = [ctypes.c_void_p, ctypes.c_uint], ctypes.c_int
    return function


def _pointer(capsule: Any) -> int:
    """The SCIP* a pyscipopt ``to_ptr`` capsule holds."""
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.argtypes, get.restype = [ctypes.py_object, ctypes.c_char_p], ctypes.c_void_p
    return get(capsule, b"scip")


@functools.cache
def _versions() -> str:
    import pyscipopt

    scip = pyscipopt.Model()
    return (f"{scip.getMajorVersion()}.{scip.getMinorVersion()}.{scip.getTechVersion()} "
            f"(PySCIPOpt {pyscipopt.__version__})")


@functools.cache
def event_watcher() -> type:
    """The SCIP event handler calling ``progress(incumbent, bound, nodes)`` (``Backend._watch``;
    None: no log) at most every ``EVERY`` seconds, on solved nodes and LPs, new incumbents, better
    dual bounds, presolve rounds and the cuts of each separation round (SCIP's root can separate
    for minutes in one node, between LPSOLVED events).  On every event it stops the solve once a
    stop is asked (``interrupts``: SIGTERM, which SCIP does not catch itself).  Made on first use
    (pyscipopt is imported then)."""
    from pyscipopt import SCIP_EVENTTYPE, Eventhdlr

    events = (SCIP_EVENTTYPE.NODESOLVED | SCIP_EVENTTYPE.LPSOLVED | SCIP_EVENTTYPE.BESTSOLFOUND
              | SCIP_EVENTTYPE.DUALBOUNDIMPROVED | SCIP_EVENTTYPE.ROWADDEDSEPA
              | SCIP_EVENTTYPE.PRESOLVEROUND)

    class EventWatcher(Eventhdlr):
        EVERY = 0.05

        def __init__(self, progress: Callable):
            self.progress, self.last = progress, -math.inf

        def eventinit(self):
            self.model.catchEvent(events, self)

        def eventexit(self):
            self.model.dropEvent(events, self)

        def eventexec(self, event):
            if interrupts.requested():
                self.model.interruptSolve()
                return {}
            now = time.perf_counter()
            if self.progress is None or now - self.last < self.EVERY:
                return {}
            self.last, scip = now, self.model
            self.progress(_below_infinity(scip.getPrimalbound()),
                          _below_infinity(scip.getDualbound()), scip.getNNodes())
            return {}
    return EventWatcher


def _below_infinity(value: float) -> float | None:
    """SCIP's figure, or None for its infinity (1e20)."""
    return float(value) if abs(value) < 1e20 else None


def _row_scale(con: Any, scip_coefs: Mapping[str, float], var_map: Mapping) -> float:
    """t such that SCIP's row is t * Pyomo's ``con.body`` (terms moved to one side).

    pyscipopt moves the terms of ``y >= 2 - x`` its own way (``x + y >= 2``)
    while Pyomo keeps ``2 - x - y <= 0``; the dual with respect to Pyomo's
    form is t times SCIP's.
    """
    from pyomo.repn import generate_standard_repn
    repn = generate_standard_repn(con.body, compute_values=True)
    for var, coef in zip(repn.linear_vars, repn.linear_coefs):
        if coef:
            return scip_coefs[var_map[var].name] / coef
    return 1.0  # a row without variables has nothing to rescale

