"""What every Pyomo -> solver adapter shares: capabilities, options, status and bound normalization.

One adapter class per backend (one module each in this package), in the style of CVXPY's solver interfaces and
Pyomo's ``contrib.solver`` (see STYLE.md sections 2, 3 and 5):

- what a backend can do is data (``capabilities``, matching DESIGN.md's
  table), and a request it cannot serve is refused with an error naming a
  backend that can;
- common options (``SolveOptions``) become native options in one function
  per adapter, ``solver_options`` last;
- the native status goes through one dict per adapter into mtl_opt's
  vocabulary (``result.Status``, its group ``BACKEND_STATUSES``), never merging
  ``gap_limit`` into ``optimal`` or ``time_limit`` into anything; an unknown
  status becomes ``error`` with a logged warning;
- ``BackendResult.bound`` is the solver's dual bound, never its incumbent,
  and gaps use ``mtl_opt.result.relative_gap``, the one definition in mtl_opt.

All models are minimizations, so the bound is a lower bound.
"""

from __future__ import annotations

import abc
import contextlib
import contextvars
import functools
import importlib
import logging
import math
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from mtl_opt._lazy import import_pyomo, pyo
from mtl_opt.errors import (
    CapabilityError,
    InvalidParameterError,
    SolverError,
    SolverUnavailableError,
)
from mtl_opt.result import BACKEND_STATUSES as STATUSES, Status, absolute_gap, relative_gap
from mtl_opt import interrupts
from mtl_opt.deadline import Deadline, DeadlineReached
from mtl_opt.logs import show
from mtl_opt.solvers.options import SolveOptions

logger = logging.getLogger(__name__)

# Problem classes a backend may solve, and features it may offer.
LP, MILP, QP, MIQP = "lp", "milp", "qp", "miqp"
#: Quadratic (e.g. second-order-cone) constraints, with or without integers, and
#: smooth nonlinear functions (e.g. log, exp): SCIP's global solver handles them.
QCP, MIQCP, NLP = "qcp", "miqcp", "nlp"
LAZY_CUTS = "lazy_cuts"
PROBLEM_CLASSES = (LP, MILP, QP, MIQP, QCP, MIQCP, NLP)
CAPABILITIES = PROBLEM_CLASSES + (LAZY_CUTS,)

#: Other ways out, added to a CapabilityError's message.
_WORKAROUNDS = {MIQP: "algorithm='oa_multi_tree', which needs only a MILP solver"}


def _finite(value: float | None) -> float | None:
    """The value, or None when it is missing or not finite (a solver's 'infinity')."""
    return value if value is not None and math.isfinite(value) else None


def _check_capability_name(capability: str) -> None:
    if capability not in CAPABILITIES:
        raise InvalidParameterError(
            f"Unknown problem class or feature {capability!r}; "
            f"valid values are {', '.join(CAPABILITIES)}."
        )


@dataclass(frozen=True)
class BackendResult:
    """What one backend solve produced, in mtl_opt's vocabulary.

    Attributes
    ----------
    status : Status
        One of ``result.BACKEND_STATUSES`` (``gap_limit``: stopped because the solver's own
        gap reached ``rel_gap``/``abs_gap``; SCIP says so, HiGHS reports ``optimal`` then;
        ``iteration_limit``: any count limit: nodes, iterations, solutions).
    has_solution : bool
        Whether a feasible point was found; if so it is loaded into the model.
    objective : float or None
        The solver's incumbent objective, as reported.  For a nonlinear
        objective SCIP reports its epigraph variable, which may sit within
        feasibility tolerance (~1e-7) below the objective at the loaded
        point: callers recompute objectives (DESIGN.md).
    bound : float or None
        The solver's dual (lower) bound; None when it gives none.
    solver, solver_version : str
        E.g. ``"HiGHS"``, ``"1.16.0"``.
    wall_time : float
        Seconds spent in the Pyomo call (model translation included).
    problem_class : str
        The class the model was solved as (one of ``PROBLEM_CLASSES``).
    native : dict
        Native figures, unmodified: ``status`` (the solver's own status
        string), ``gap`` (the solver's own gap definition), ``nodes`` (its
        branch-and-bound nodes, 0 for an LP) and
        ``termination_condition`` (Pyomo's).
    """

    status: Status
    has_solution: bool
    objective: float | None
    bound: float | None
    solver: str
    solver_version: str
    wall_time: float
    problem_class: str
    native: dict = field(default_factory=dict)
    _results: Any = field(default=None, repr=False, compare=False)  # Pyomo Results, for duals

    @property
    def gap(self) -> float | None:
        """Our relative gap (``relative_gap``), None without objective or bound."""
        return relative_gap(self.objective, self.bound)

    @property
    def abs_gap(self) -> float | None:
        """``objective - bound``, None without objective or bound."""
        return absolute_gap(self.objective, self.bound)


class Backend(abc.ABC):
    """A solver reached through Pyomo's ``contrib.solver`` interface.

    Subclasses declare data (names, capabilities, status map) and implement
    ``_translate`` (common options -> native names), ``_native_status``
    (precise native status and gap) and ``_new_native_model``/``_accepts``
    (native option check); they may override ``_prepare`` and ``_duals``.
    Everything else (checks, the Pyomo call, timing, results) is shared here.
    """

    name: ClassVar[str]  # registry key, e.g. "highs"
    label: ClassVar[str]  # display name, e.g. "HiGHS"
    pyomo_name: ClassVar[str]  # name in Pyomo's contrib SolverFactory
    module: ClassVar[str]  # the Python package of the solver, e.g. "highspy"
    install_hint: ClassVar[str]  # how to install ``module``, said when it is missing
    capabilities: ClassVar[frozenset[str]]
    STATUS: ClassVar[Mapping[str, Status]]  # native status -> one of STATUSES
    #: Native statuses of a solve stopped on a stop asked, maybe by a SIGINT the solver caught
    #: itself, so that Python never saw it (``note_interrupt``).
    INTERRUPTED: ClassVar[frozenset[str]] = frozenset()
    LP_OPTIONS: ClassVar[Mapping[str, Any]] = {}  # native settings for LPs (so duals exist)
    #: The ``solver_options`` that show the solver's own log (with ``verbose``, which alone shows
    #: mtl_opt's table only, ``solvers.progress``).
    NATIVE_LOG: ClassVar[Mapping[str, Any]]
    #: (native name, default) of the dual-feasibility tolerance: how negative a reduced cost the
    #: LP solver accepts as optimal, which bounds the error of its dual bound (``dual_tolerance``).
    DUAL_TOLERANCE: ClassVar[tuple[str, float]]
    #: The tightest dual tolerance asked of the solver where a model is too large for the usual
    #: one (``formulations.sparse_models.fitting_tolerance``): the option's own floor, or for SCIP
    #: (1e-17) 1e-12, as its LPs are solved in doubles.
    TIGHTEST_DUAL_TOLERANCE: ClassVar[float]
    #: (native name, default) of the primal-feasibility tolerance: how far a row may be violated.
    PRIMAL_TOLERANCE: ClassVar[tuple[str, float]]
    _session: tuple | None = None  # (model, Pyomo solver) kept by solve(persistent=True)

    def __init_subclass__(cls, **kwargs):
        """Register the adapter under its ``name``: a new backend is one new module.  Its
        ``STATUS`` values become ``Status`` members (a name outside ``STATUSES`` fails here)."""
        super().__init_subclass__(**kwargs)
        cls.STATUS = {native: Status(status) for native, status in cls.STATUS.items()}
        if not set(cls.STATUS.values()) <= set(STATUSES):
            raise TypeError(f"{cls.__name__}.STATUS maps to statuses outside {STATUSES}.")
        BACKENDS[cls.name] = cls

    # --- what the backend is and can do -------------------------------------

    def available(self) -> bool:
        """Whether the solver can be used here (never raises)."""
        try:
            return bool(self._queried().available())
        except Exception:  # a broken install is "not available", not a crash
            logger.debug("%s availability check failed", self.label, exc_info=True)
            return False

    def unavailable_reason(self) -> str:
        """Why the solver cannot be used here: how to install its package when it is missing,
        else what its import raised (e.g. a dependency of its own that is missing), else what
        Pyomo says of it (a bad license, say)."""
        try:
            importlib.import_module(self.module)
        except Exception as exc:
            if isinstance(exc, ImportError) and exc.name == self.module:
                return self.install_hint
            return f"importing {self.module} failed: {type(exc).__name__}: {exc}"
        try:
            status = self._queried().available()
            return f"{self.module} imports, but Pyomo's {self.pyomo_name!r} reports {status}"
        except Exception as exc:
            return f"Pyomo's {self.pyomo_name!r} failed: {type(exc).__name__}: {exc}"

    def version(self) -> str:
        """The solver's version, e.g. ``"1.16.0"``."""
        self._require_available()
        return ".".join(str(part) for part in self._queried().version())

    @classmethod
    @functools.cache
    def _queried(cls) -> Any:
        """One Pyomo solver per adapter, kept for availability and version queries (Pyomo's Gurobi
        interfaces count their instances and warn when one that never solved is collected)."""
        return pyomo_solver(cls.pyomo_name)

    def check(self, capability: str) -> None:
        """Raise CapabilityError, naming who can, if ``capability`` is not supported."""
        _check_capability_name(capability)
        if capability in self.capabilities:
            return
        ways = [f"backend='{name}'" for name, cls in BACKENDS.items()
                if capability in cls.capabilities]
        ways += [_WORKAROUNDS[capability]] if capability in _WORKAROUNDS else []
        what = ("does not support lazy cuts" if capability == LAZY_CUTS
                else f"cannot solve {capability.upper()} problems")
        raise CapabilityError(f"{self.label} {what}; use {', or '.join(ways)}.")

    def status_of(self, native_status: str) -> Status:
        """Our ``Status`` for the solver's own status (``STATUS``); one it does not list is
        ``error``, with a warning: the one conversion, used by ``solve`` and by code that drives
        the native solver itself (single-tree OA)."""
        status = self.STATUS.get(native_status)
        if status is None:
            show(logger, logging.WARNING, f"{self.label} returned unhandled status "
                 f"{native_status!r}; reporting 'error'.", sys.stderr)
            return Status.ERROR
        return status

    def dual_tolerance(self, opts: SolveOptions) -> float:
        """The dual-feasibility tolerance a solve with ``opts`` runs at (``solver_options`` win)."""
        name, default = self.DUAL_TOLERANCE
        return float(opts.solver_options.get(name, default))

    def native_options(self, opts: SolveOptions) -> dict[str, Any]:
        """Native options for ``opts``: the common ones translated, ``solver_options`` last."""
        common = {key: value for key, value in self._translate(opts).items() if value is not None}
        return {**common, **opts.solver_options}

    # --- solving ---------------------------------------------------------------

    def solve(self, model: pyo.Block, problem_class: str, opts: SolveOptions | None = None, *,
              start: Iterable[tuple[Any, float]] | None = None,
              persistent: bool = False, deadline: Deadline,
              progress: Callable[[float | None, float | None, int | None], None] | None = None,
              ) -> BackendResult:
        """Solve the minimization ``model`` as a ``problem_class`` problem.

        A found solution (optimal or not, e.g. the incumbent of a time-limited
        run) is loaded into the model's variables.  An LP is solved with the
        adapter's ``LP_OPTIONS``, so ``load_duals`` can follow.  Solver
        failures raise SolverError; a stopped or infeasible run is a status,
        not an error.  ``start`` ((VarData, value) pairs, the others 0) is a MIP
        start where the backend takes one (HiGHS; it completes the continuous
        variables itself); with ``persistent`` the solver that last solved this
        same ``model`` is reused, so only what changed (e.g. new cuts) is sent.
        ``deadline`` (the fit's) bounds the whole
        call, translation included: the solver's own limit is set to what is
        left when it starts, and a deadline that passes first ends the call
        with status ``time_limit`` and no solution, the solver not started.
        ``progress(incumbent, bound, nodes)`` is called from the solver's own callbacks while it
        runs (``_watch``; None for a figure it has not got), often: it throttles itself
        (``solvers.progress.Progress``).
        """
        self._check_request(model, problem_class)
        opts = SolveOptions() if opts is None else opts
        self._reject_bad_options(opts.solver_options)
        options = self.native_options(opts)
        if problem_class == LP:
            options = {**self.LP_OPTIONS, **options}  # solver_options still win
        self._prepare(options)

        solver = self._solver_for(model, persistent)
        if start:
            self._set_start(solver, model, start)
        clock = time.perf_counter()
        unwatch = []

        def on_optimize():
            self._limit_time(solver, deadline)
            unwatch.append(self._watch(solver._solver_model, progress))   # also stops it on a stop asked
        try:
            deadline.check()
            with (self._checked_translation(solver, deadline, progress), self._streams(self.native_log(opts)),
                  self._native_solve(), ticking(progress)):
                results = solver.solve(model, tee=opts.verbose, load_solutions=False,
                                       raise_exception_on_nonoptimal_result=False,
                                       solver_options=options, timer=_on_optimize()(on_optimize))
        except DeadlineReached:
            self._session = None  # a translation cut short leaves a persistent solver out of step
            return BackendResult(
                status=Status.TIME_LIMIT, has_solution=False, objective=None, bound=None,
                solver=self.label, solver_version=self.version(),
                wall_time=time.perf_counter() - clock, problem_class=problem_class,
                native={"status": "not started: the deadline passed first", "nodes": 0})
        except Exception as exc:
            raise self._failure(exc, problem_class) from exc
        finally:
            for stop in unwatch:
                stop()
        wall_time = time.perf_counter() - clock

        # Pyomo keeps the native solver object as ``_solver_model`` on both adapters.
        native_status, native_gap = self._native_status(solver._solver_model)
        note_interrupt(native_status)
        status = self.status_of(native_status)
        has_solution = results.solution_status.name in ("feasible", "optimal")
        if has_solution:
            results.solution_loader.load_vars()
        return BackendResult(
            status=status, has_solution=has_solution,
            objective=_finite(results.incumbent_objective),
            bound=_finite(results.objective_bound),
            solver=self.label, solver_version=self.version(), wall_time=wall_time,
            problem_class=problem_class,
            native={"status": native_status, "gap": native_gap,
                    "nodes": 0 if problem_class == LP else self._node_count(solver._solver_model),
                    "termination_condition": results.termination_condition.name},
            _results=results,
        )

    def _solver_for(self, model: pyo.Block, persistent: bool) -> Any:
        """A fresh Pyomo solver, or with ``persistent`` the one that last solved ``model``."""
        if persistent and self._session is not None and self._session[0] is model:
            return self._session[1]
        solver = pyomo_solver(self.pyomo_name)
        if persistent:
            self._session = (model, solver)
        return solver

    def _set_start(self, solver: Any, model: pyo.Block, start: Iterable[tuple[Any, float]]) -> None:
        """Hand ``start`` to the native solver; backends without MIP starts ignore it."""

    def _limit_time(self, solver: Any, deadline: Deadline) -> None:
        """Give the native solver, about to start, the time left (never a limit <= 0)."""
        left = deadline.remaining()
        if left <= 0:
            raise DeadlineReached
        if math.isfinite(left):
            self._set_time_limit(solver._solver_model, left)

    def _checked_translation(self, solver: Any, deadline: Deadline,
                             progress: Callable | None) -> contextlib.AbstractContextManager:
        """Where translating a model to the solver is slow: a context that checks ``deadline``
        during it (and calls ``progress(None, None, None)``, a heartbeat)."""
        return contextlib.nullcontext()

    def load_duals(self, model: pyo.Block, result: BackendResult,
                   constraints: Iterable[Any] | None = None) -> dict[Any, float]:
        """Dual values ``{ConstraintData: float}`` of the LP ``model`` solved into ``result``.

        ``constraints`` selects rows (default: every active constraint of
        ``model``).  Pyomo's sign convention, on every backend: the dual is
        d(objective)/d(bound) of the row in Pyomo's form ``lb <= con.body <=
        ub``.  So ``x + y >= 2`` (body ``x + y``) has a dual >= 0 and
        ``x - y <= 1`` a dual <= 0, but ``y >= 2 - x`` is kept as
        ``2 - x - y <= 0`` and has a dual <= 0: write rows with the variables
        on the left to read duals the natural way.
        Raises SolverError when the solve has no duals
        (not an LP, not optimal, or ``LP_OPTIONS`` overridden on SCIP).
        """
        if result._results is None or result.solver != self.label:
            raise SolverError(f"load_duals needs a result of {self.label}.solve; "
                              f"got one from {result.solver}.")
        if result.problem_class != LP or result.status is not Status.OPTIMAL:
            raise SolverError(
                "Duals exist only for an LP solved to optimality; this "
                f"{result.problem_class.upper()} solve ended '{result.status}'."
            )
        if constraints is None:
            constraints = model.component_data_objects(pyo.Constraint, active=True)
        try:
            return self._duals(result._results, list(constraints))
        except SolverError:
            raise
        except Exception as exc:
            raise SolverError(f"{self.label} gave no duals for this solve: {exc}") from exc

    # --- adapter hooks -----------------------------------------------------------

    @abc.abstractmethod
    def _translate(self, opts: SolveOptions) -> dict[str, Any]:
        """Common options under native names; None values are dropped."""

    @abc.abstractmethod
    def _set_time_limit(self, native_model: Any, seconds: float) -> None:
        """Set the native solver's time limit."""

    @abc.abstractmethod
    def _native_status(self, native_model: Any) -> tuple[str, float]:
        """The native status string (a key of ``STATUS``) and native gap."""

    @abc.abstractmethod
    def _new_native_model(self) -> Any:
        """A fresh native solver object, used to check native option names and values."""

    @abc.abstractmethod
    def _accepts(self, probe: Any, key: str, value: Any) -> bool:
        """Whether the solver takes option ``key=value`` (set on ``probe``)."""

    def _node_count(self, native_model: Any) -> int:
        """The branch-and-bound nodes of the last solve (0 for a continuous model)."""
        return 0

    def _watch(self, native_model: Any, progress: Callable | None) -> Callable[[], None]:
        """From the native solver's callbacks during its next solve: stop it once a stop is asked
        (``interrupts.requested``), and call ``progress(incumbent, bound, nodes)`` (None: no
        log); returns what ends the watch.  Default: no callback (the solve is one silent call)."""
        return lambda: None

    def _failure(self, exc: Exception, problem_class: str) -> Exception:
        """The error to raise for ``exc``, raised by the solver during a solve (default: SolverError)."""
        return SolverError(f"{self.label} failed on this {problem_class.upper()} model: {exc} "
                           "(rerun with verbose=True to see the solver log).")

    def _prepare(self, options: Mapping[str, Any]) -> None:
        """Process-level set-up the native options need before a solve (default: none)."""

    def native_log(self, opts: SolveOptions) -> bool:
        """Whether ``opts`` show the solver's own output: ``verbose`` with a ``NATIVE_LOG`` option
        on.  ``verbose`` alone shows mtl_opt's table only: HiGHS 1.8 printed its banner even with
        its log off, between the table's rows and past ``logging.disable``."""
        return opts.verbose and any(opts.solver_options.get(key) for key in self.NATIVE_LOG)

    def _streams(self, verbose: bool) -> contextlib.AbstractContextManager:
        """Where the solver's output goes during a solve (default: Pyomo's capture)."""
        return contextlib.nullcontext()

    def _native_solve(self) -> contextlib.AbstractContextManager:
        """A context in which the native solve releases the GIL (so the heartbeat thread,
        ``ticking``, runs) and stops at once on a stop asked (default: nothing to do)."""
        return contextlib.nullcontext()

    def _duals(self, results: Any, constraints: list) -> dict[Any, float]:
        """Duals of ``constraints`` through Pyomo's solution loader."""
        return dict(results.solution_loader.get_duals(constraints))

    # --- helpers -----------------------------------------------------------------

    def _check_request(self, model: pyo.Block, problem_class: str) -> None:
        """Refuse, before any work, what this backend cannot or should not solve."""
        if problem_class not in PROBLEM_CLASSES:
            raise InvalidParameterError(f"problem_class must be one of "
                                        f"{', '.join(PROBLEM_CLASSES)}; got {problem_class!r}.")
        self.check(problem_class)
        if any(obj.sense != pyo.minimize
               for obj in model.component_data_objects(pyo.Objective, active=True)):
            raise InvalidParameterError(
                "Backends solve minimization models (the bound is a lower bound); "
                "negate the objective of this maximization model."
            )
        self._require_available()

    def _require_available(self) -> None:
        if not self.available():
            raise SolverUnavailableError(
                f"{self.label} is not available in this Python environment: {self.unavailable_reason()}."
            )

    def _reject_bad_options(self, solver_options: Mapping[str, Any]) -> None:
        """Refuse native options the solver rejects, before solving (HiGHS would only log them).

        The native setters print their complaints: to /dev/null (``native_streams``), never into
        a pipe drained by a thread, as Pyomo's ``capture_output`` does: a process started
        meanwhile by another thread (cross-validation's workers) inherits the pipe, which then
        never ends, and Pyomo waited 100 s for it before raising."""
        if not solver_options:
            return
        bad = []
        with native_streams(False):
            probe = self._new_native_model()
            for key, value in solver_options.items():
                try:
                    accepted = self._accepts(probe, key, value)
                except Exception:  # wrong type or unknown name
                    accepted = False
                if not accepted:
                    bad.append(f"{key}={value!r}")
        if bad:
            raise InvalidParameterError(
                f"{self.label} rejects solver_options {', '.join(bad)}: unknown name or "
                f"value out of range; see the {self.label} option reference."
            )



#: Seconds between the calls of ``ticking``.
TICK = 0.5


@contextlib.contextmanager
def ticking(progress: Callable | None):
    """Call ``progress(None, None, None)`` every ``TICK`` seconds from a thread while the block
    runs: the heartbeat where a solver calls no callback for a while (HiGHS inside its sub-MIP
    heuristics: 9 s in a 60 s OA master; SCIP in strong branching: 10 s in a 60 s MIQP).  The
    solver must release the GIL meanwhile: highspy does, SCIP through ``_native_solve``."""
    if progress is None:
        yield
        return
    stop = threading.Event()

    def beat():
        while not stop.wait(TICK):
            progress(None, None, None)
    thread = threading.Thread(target=beat, name="mtl_opt-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def pyomo_solver(name: str) -> Any:
    """A new Pyomo contrib solver ``name``.  Pyomo is imported here, not when this module is (see
    ``mtl_opt._lazy``), pyomo.environ first: importing it registers the contrib solvers."""
    import_pyomo()
    from pyomo.contrib.solver.common.factory import SolverFactory
    return SolverFactory(name)


@functools.cache
def _on_optimize() -> type:
    """Pyomo's timer with a ``hook`` called when the solve itself starts (a class made at the first
    solve, when Pyomo is imported).

    Both Pyomo adapters start the "optimize" timer after translating the model
    and applying the options, right before the native solve: the hook sets
    the native time limit to what is left then, or raises DeadlineReached.
    """
    from pyomo.common.timing import HierarchicalTimer

    class OnOptimize(HierarchicalTimer):
        def __init__(self, hook):
            super().__init__()
            self.hook = hook

        def start(self, identifier):
            if identifier == "optimize":
                self.hook()
            super().start(identifier)
    return OnOptimize


def note_interrupt(native_status: str) -> None:
    """Record a Ctrl-C that the native solver caught itself (Gurobi's own SIGINT handler, in force
    while it solves, so Python never saw the signal): the rest of the fit stops too
    (``interrupts.request``), and the run's status is ``interrupted``.  A stop already asked
    (a signal, or this fit's own ``Stop``) is what interrupted it: nothing more to record."""
    if not interrupts.requested() and any(native_status in cls.INTERRUPTED
                                           for cls in BACKENDS.values()):
        interrupts.request()


class _Silence:
    """fds 1 and 2 sent to /dev/null while any thread is in a silent region: the first region
    saves and redirects them, the last restores them.  Fits run at once in threads (Dask's
    threaded workers, a user's threads): each region saving and restoring the fds itself let one
    thread restore them under another's solve, or leave them at /dev/null for good."""

    def __init__(self) -> None:
        self.lock, self.regions = threading.Lock(), 0
        self.saved: list[int] = []

    def __enter__(self) -> None:
        with self.lock:
            if self.regions == 0:
                for stream in (sys.stdout, sys.stderr):
                    stream.flush()
                self.saved = [os.dup(fd) for fd in (1, 2)]
                sink = os.open(os.devnull, os.O_WRONLY)
                for fd in (1, 2):
                    os.dup2(sink, fd)
                os.close(sink)
            self.regions += 1

    def __exit__(self, *exc) -> None:
        with self.lock:
            self.regions -= 1
            if self.regions == 0:
                for fd, copy in zip((1, 2), self.saved):
                    os.dup2(copy, fd)
                    os.close(copy)


_SILENCE = _Silence()


@contextlib.contextmanager
def native_streams(verbose: bool):
    """A native solver's output (fds 1 and 2) to the terminal when ``verbose``, else to /dev/null
    (``_Silence``: one redirection, however many threads solve).

    Never into a pipe: a native solver that holds the GIL blocks on a full pipe whose reader is
    a Python thread.
    """
    if verbose:
        yield
        return
    with _SILENCE:
        yield


#: This thread's (context's) values of the attributes ``_patched`` replaces: (id(owner), name) -> value.
_OVERRIDES: contextvars.ContextVar[dict] = contextvars.ContextVar("mtl_opt_overrides", default={})
#: The attributes replaced now: (id(owner), name) -> [owner, original, regions open on it].
_INSTALLED: dict[tuple[int, str], list] = {}
_INSTALL = threading.Lock()


@contextlib.contextmanager
def _patched(owner: Any, name: str, value: Any):
    """``owner.name`` is ``value`` for the calls this thread makes while the block runs; other
    threads get their own region's value, or the original.  A dispatcher stands in for the
    attribute while any region on it is open (the first installs it, the last removes it): a
    plain setattr undone at exit let one thread's exit restore Pyomo's own output capture under
    another thread's solve, which then waited 100 s on a pipe and failed.  The attribute must be
    called, not inspected (Pyomo calls ``capture_output(...)`` and ``pyscipopt.Model()``)."""
    key = (id(owner), name)
    with _INSTALL:
        if key not in _INSTALLED:
            original = getattr(owner, name)

            def dispatch(*args, **kwargs):
                return _OVERRIDES.get().get(key, original)(*args, **kwargs)
            _INSTALLED[key] = [owner, original, 0]
            setattr(owner, name, dispatch)
        _INSTALLED[key][2] += 1
    token = _OVERRIDES.set({**_OVERRIDES.get(), key: value})
    try:
        yield
    finally:
        _OVERRIDES.reset(token)
        with _INSTALL:
            entry = _INSTALLED[key]
            entry[2] -= 1
            if entry[2] == 0:
                setattr(entry[0], name, entry[1])
                del _INSTALLED[key]


#: Backend name -> adapter class, in order of preference: filled by ``Backend.__init_subclass__``
#: as the package imports the backend modules (``mtl_opt.solvers.backends.__init__``).
BACKENDS: dict[str, type[Backend]] = {}


def get_backend(name: str) -> Backend:
    """The backend called ``name`` (case-insensitive)."""
    cls = BACKENDS.get(str(name).lower())
    if cls is None:
        raise InvalidParameterError(
            f"Unknown backend {name!r}; valid names are {', '.join(BACKENDS)}."
        )
    return cls()


def list_backends() -> list[dict[str, Any]]:
    """One row per backend for ``mtl-opt solvers``.

    Keys: ``name``, ``solver``, ``available``, ``version`` (None when not
    available), ``reason`` (why not, ``unavailable_reason``; None when available) and one
    bool per capability (``lp``, ..., ``lazy_cuts``).
    """
    rows = []
    for name, cls in BACKENDS.items():
        backend = cls()
        available = backend.available()
        rows.append({"name": name, "solver": backend.label, "available": available,
                     "version": backend.version() if available else None,
                     "reason": None if available else backend.unavailable_reason(),
                     **{cap: cap in backend.capabilities for cap in CAPABILITIES}})
    return rows


def pick_backend(problem_class: str, preferred: str | None = None) -> Backend:
    """A backend for ``problem_class``: ``preferred`` if named, else the first available that can.

    A named backend is never swapped silently: if it cannot serve, its
    CapabilityError or SolverUnavailableError is raised.  Otherwise the order
    of ``BACKENDS`` decides (HiGHS for LP/MILP/QP, SCIP for MIQP).
    """
    _check_capability_name(problem_class)
    if preferred is not None:
        backend = get_backend(preferred)
        backend.check(problem_class)
        backend._require_available()
        return backend
    capable = [cls() for cls in BACKENDS.values() if problem_class in cls.capabilities]
    for backend in capable:
        if backend.available():
            return backend
    raise SolverUnavailableError(
        f"No installed backend can solve {problem_class.upper()} problems; "
        + "; or ".join(f"{b.label}: {b.unavailable_reason()}" for b in capable) + "."
    )
