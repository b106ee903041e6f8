"""Methods and solver runs: the one path from an estimator to a certified status.

A family lists its algorithms as ``Method`` records in one table (e.g.
``solvers.sparse.methods.METHODS``); the estimator, ``certify``, instance files
and the bench all look a name up there (``lookup``), ask ``Method.refusal``
(the method's own refusal and its backend's capability, decided from the problem) before any
work, and call ``Method.solve``, which returns a ``SolverRun``.
``final_status`` turns that run into the ``FitResult`` status: it is the one
place in the package that says ``optimal``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .. import interrupts
from ..errors import CapabilityError, InvalidParameterError, MTLOptError
from ..result import STOPS, Status, checked_bound, relative_gap
from .backends import BACKENDS, get_backend

#: Keys of every exact run's ``SolverRun.log`` rows (``solvers.progress``: one row format on every
#: path, a row at least every ``progress.EVERY`` seconds): ``time`` (s since the run began),
#: ``incumbent`` (the objective of the best point the run holds), ``lower_bound`` (proven, on the
#: run's objective; None until there is one), ``gap`` (relative, ``result.relative_gap``) and
#: ``nodes`` (branch-and-bound nodes so far; 0 on a path without a tree).  A method may add keys of
#: its own (e.g. ``iteration``, ``cuts``).  The bench traces (time, lower_bound, incumbent).
LOG_KEYS = ("time", "incumbent", "lower_bound", "gap", "nodes")

#: How ``native["bound"]`` of a run without a lower bound starts (the reason follows).
NO_BOUND = "none"


@dataclass
class SolverRun:
    """What a solve function returns: the estimate, its objective, a proven lower bound
    (or None), why the run stopped (``stop``: one of ``result.STOPS``, a backend's status as it
    is or ``converged``, the method's own criterion met), its log (``LOG_KEYS``), the native
    figures of the solver (``native["solver"]`` and ``["solver_version"]`` name it) and, for
    an estimate with binary indicators (the sparse family's z), the indicators the objective
    was evaluated at (None: the estimate's nonzeros).  A run without a bound says why in
    ``native["bound"]``."""

    estimate: Any
    objective: float
    lower_bound: float | None = None
    stop: Status = Status.CONVERGED
    log: list = field(default_factory=list)
    native: dict = field(default_factory=dict)
    support: Any = None

    def __post_init__(self):
        if self.stop not in STOPS:
            raise ValueError(f"SolverRun.stop must be one of {', '.join(map(str, STOPS))}; "
                             f"got {self.stop!r}.")
        self.stop = Status(self.stop)
        if self.lower_bound is None and not str(self.native.get("bound") or "").startswith(NO_BOUND):
            raise ValueError(f"a SolverRun without a lower bound says why in native['bound'] "
                             f"('{NO_BOUND}: ...'); got {self.native.get('bound')!r}.")


def final_status(run: SolverRun, rel_gap: float) -> Status:
    """The ``FitResult`` status of ``run``: the only place that says ``optimal``.

    ``infeasible`` stands, and ``error`` (also for a backend's ``unbounded``: no objective of
    mtl_opt is); otherwise ``optimal`` when the bound that passes ``checked_bound`` proves a
    relative gap <= ``rel_gap``; else ``interrupted`` when a stop was asked
    (``interrupts.requested``: every deadline ended then); else the budget that ran out
    (``time_limit``, ``iteration_limit``); else the run met its own criterion (``converged``, or a backend's own
    ``optimal`` or ``gap_limit``, whose gap is not ours): ``heuristic`` without such a bound,
    ``gap_limit`` with a wider gap.
    """
    if run.stop in (Status.INFEASIBLE, Status.ERROR, Status.UNBOUNDED):
        return Status.INFEASIBLE if run.stop is Status.INFEASIBLE else Status.ERROR
    gap = relative_gap(run.objective, checked_bound(run.objective, run.lower_bound)[0])
    if gap is not None and gap <= rel_gap:
        return Status.OPTIMAL
    if interrupts.requested():
        return Status.INTERRUPTED
    if run.stop in (Status.TIME_LIMIT, Status.ITERATION_LIMIT):
        return run.stop
    return Status.HEURISTIC if gap is None else Status.GAP_LIMIT


@dataclass(frozen=True)
class Method:
    """One algorithm of a family.

    ``problem_class``: the class of problem it hands a backend (``backends.PROBLEM_CLASSES``), or a
    function of the problem giving it; None: it hands none (a method in numpy, or a structure
    solved without a backend).  Which backends run it follows from their capabilities
    (``runs_on``: a new backend module is accepted with no other edit), unless ``backends``
    limits it to a few names (the first the default): a method written against one backend's own
    API, or one measured unsound elsewhere.
    ``certifies``: whether its runs carry a proven lower bound, and ``bound_source`` says what
    that bound is.  ``refuse(problem, backend)`` says why it cannot run (None when it can),
    cheaply, before any work; ``refusal`` adds the backend's side.  ``solve(problem, incumbent,
    options, deadline, backend, **settings) -> SolverRun``: ``deadline`` is the fit's
    (``mtl_opt.deadline``); an exact method's settings include ``progress``
    (``solvers.progress.Progress``: its live log).
    ``needs_incumbent``: it starts from an incumbent, which the estimator's warm start (the
    family's heuristic) gives it within the fit's budget; otherwise the estimator runs it from
    its own start.
    ``prepare()`` (None: nothing) does the work a method needs once per process, such as compiling
    kernels; estimators call it after ``check`` and before their deadline starts, so no time limit
    pays for it and ``check`` (``mtl-opt validate``) never does.
    """

    name: str
    backends: tuple | None
    certifies: bool
    refuse: Callable[[Any, str | None], str | None]
    solve: Callable[..., SolverRun]
    description: str = ""
    problem_class: str | Callable[[Any], str | None] | None = None
    bound_source: str | None = None
    prepare: Callable[[], Any] | None = None
    needs_incumbent: bool = False

    def refusal(self, problem, backend: str | None) -> MTLOptError | None:
        """Why this method cannot run ``problem`` on ``backend`` (None: the default one), as the
        error ``check`` raises, or None: the one capability decision of every family, made from
        the problem and the backends' capability flags (no solver is imported)."""
        return (self.backend_refusal(self.class_of(problem), backend)
                or _refused(self.refuse(problem, backend)))

    def class_of(self, problem) -> str | None:
        """The class of problem this method hands a backend for ``problem`` (None: none)."""
        return self.problem_class(problem) if callable(self.problem_class) else self.problem_class

    def runs_on(self, problem_class: str | None) -> tuple:
        """The backends that run this method on a ``problem_class`` problem, the default first:
        ``(None,)`` when it hands a backend none; else ``backends`` where the method limits them,
        or every registered backend whose capabilities include the class (``BACKENDS`` order)."""
        if problem_class is None:
            return (None,)
        if self.backends is not None:
            return self.backends
        return tuple(name for name, cls in BACKENDS.items() if problem_class in cls.capabilities)

    def backend_refusal(self, problem_class: str | None, backend: str | None) -> MTLOptError | None:
        """Why ``backend`` (None: the default) cannot run this method on a ``problem_class``
        problem: a CapabilityError naming who can when the backend cannot solve that class, an
        InvalidParameterError when the method does not run on it; None when it can."""
        used = self._used(backend, problem_class)
        if used is not None and problem_class is not None:
            try:
                get_backend(used).check(problem_class)
            except CapabilityError as exc:
                return CapabilityError(f"algorithm={self.name!r} needs {problem_class.upper()} "
                                       f"here: {exc}")
        names = self.runs_on(problem_class)
        if not names:
            return CapabilityError(f"algorithm={self.name!r} needs {problem_class.upper()}, which "
                                   f"no registered backend solves")
        if backend is not None and backend not in names:
            runs_on = ("mtl_opt itself (no backend)" if names == (None,)
                       else " or ".join(repr(b) for b in names))
            return InvalidParameterError(
                f"algorithm={self.name!r} runs on {runs_on}; got backend={backend!r}")
        return None

    def check(self, problem, backend: str | None) -> "Method":
        """This method, once it has not refused ``problem`` on ``backend`` (``refusal``) and that
        backend is installed (else SolverUnavailableError); every estimator asks here, before
        any work."""
        refusal = self.refusal(problem, backend)
        if refusal is not None:
            raise refusal
        return self.installed(problem, backend)

    def installed(self, problem, backend: str | None) -> "Method":
        """This method, once the backend a run of ``problem`` on ``backend`` uses is installed
        (else SolverUnavailableError): ``check``'s second half, for a method whose refusal was
        already asked (``sparse.methods.choose``)."""
        if (used := self.backend_for(backend, problem)) is not None:
            get_backend(used)._require_available()
        return self

    def backend_for(self, backend: str | None, problem) -> str | None:
        """The backend a run of ``problem`` asked for ``backend`` uses: it, or the method's
        default (None: the method hands ``problem`` no backend)."""
        return self._used(backend, self.class_of(problem))

    def _used(self, backend: str | None, problem_class: str | None) -> str | None:
        if problem_class is None:
            return None
        return backend if backend is not None else next(iter(self.runs_on(problem_class)), None)


def _refused(reason: str | None) -> InvalidParameterError | None:
    return None if reason is None else InvalidParameterError(reason)


def lookup(table: Mapping[str, Method], name: str, what: str = "method") -> Method:
    """``table[name]``; an unknown name is an InvalidParameterError listing the valid ones."""
    if name not in table:
        raise InvalidParameterError(
            f"unknown {what} {name!r}; valid: {', '.join(map(repr, table))}.")
    return table[name]
