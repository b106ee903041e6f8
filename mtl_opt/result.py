"""FitResult: an estimate together with its certificate.

Every fit in mtl_opt returns a ``FitResult``.  ``objective`` is the stated
objective recomputed in float64 at the returned estimate; ``lower_bound`` is a
*proven* lower bound on the optimal value (a solver's dual bound, a valid cut
model or a dual feasible point) or ``None`` when the method has none.  The
gaps are always computed here, from those two numbers, by one function.
"""

from __future__ import annotations

import enum
import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .errors import InvalidDataError

class Status(str, enum.Enum):
    """The one status vocabulary of mtl_opt: a backend's solve (``BackendResult.status``), why a
    run stopped (``SolverRun.stop``) and a fit (``FitResult.status``) each use a group of it.

    A ``str``, so ``status == "optimal"`` and JSON results keep working.  ``gap_limit`` is never
    merged into ``optimal`` nor ``time_limit`` into anything else (DESIGN.md).

    Examples
    --------
    >>> from mtl_opt import Status
    >>> Status.OPTIMAL == "optimal", Status("time_limit") is Status.TIME_LIMIT
    (True, True)
    """

    #: A fit: a bound proves a relative gap <= rel_gap (``final_status``).  A backend: its own
    #: criterion met (its gap, on its own tolerances).
    OPTIMAL = "optimal"
    #: A fit: its run converged but the proven gap is wider than asked.  A backend: it stopped on
    #: its own gap limit (SCIP says so; HiGHS reports ``optimal`` then).
    GAP_LIMIT = "gap_limit"
    #: The time budget ran out first.
    TIME_LIMIT = "time_limit"
    #: A count budget ran out first (iterations, nodes, solutions, memory).
    ITERATION_LIMIT = "iteration_limit"
    #: A fit stopped by Ctrl-C (or SIGTERM under ``mtl-opt``, ``mtl_opt.interrupts``): it kept
    #: its incumbent and the bound proven by then, as at a time limit.
    INTERRUPTED = "interrupted"
    #: A fit with an estimate and no proven bound.
    HEURISTIC = "heuristic"
    #: Proven to have no solution.
    INFEASIBLE = "infeasible"
    #: A backend: the model is unbounded (a fit reports ``error``: mtl_opt's objectives are not).
    UNBOUNDED = "unbounded"
    #: The solver failed, or said something that cannot be trusted.
    ERROR = "error"
    #: A run: stopped on the method's own criterion (a gap it was asked for, an exhausted tree,
    #: a fixed point, a master repeating itself); ``final_status`` measures the gap.
    CONVERGED = "converged"

    def __str__(self) -> str:
        return self.value


#: What a fit reports (``FitResult.status``, DESIGN.md): what ``final_status`` returns.
STATUSES = (Status.OPTIMAL, Status.GAP_LIMIT, Status.TIME_LIMIT, Status.ITERATION_LIMIT,
            Status.INTERRUPTED, Status.HEURISTIC, Status.INFEASIBLE, Status.ERROR)
#: What a backend reports (``BackendResult.status``).
BACKEND_STATUSES = (Status.OPTIMAL, Status.GAP_LIMIT, Status.TIME_LIMIT, Status.ITERATION_LIMIT,
                    Status.INFEASIBLE, Status.UNBOUNDED, Status.ERROR)
#: Why a run stopped (``SolverRun.stop``): converged, or a backend's status taken as it is.
STOPS = (Status.CONVERGED, *BACKEND_STATUSES)
#: The estimate is proven to be within the requested tolerance.  ``gap_limit`` is not: the
#: solver stopped on its own gap criterion, but the gap proven here is wider than requested.
WITHIN_TOLERANCE = frozenset({Status.OPTIMAL})
#: An estimate exists (coef is meaningful), proven or not.
HAS_ESTIMATE = frozenset({Status.OPTIMAL, Status.GAP_LIMIT, Status.TIME_LIMIT,
                          Status.ITERATION_LIMIT, Status.INTERRUPTED, Status.HEURISTIC})


def absolute_gap(objective: float | None, bound: float | None) -> float | None:
    """``objective - bound``, or None when either is unknown."""
    if objective is None or bound is None:
        return None
    return float(objective) - float(bound)


def relative_gap(objective: float | None, bound: float | None) -> float | None:
    """``(objective - bound) / |objective|``: the one gap definition used everywhere.

    Purely relative, with no absolute floor: a floor (it was 1e-12) would call a tiny
    objective with a bound of 0 "optimal" although nothing is proven about it relative to
    its size.  0 when the two are equal (also 0/0); inf when the objective is 0 and the
    bound below it."""
    gap = absolute_gap(objective, bound)
    if gap is None or objective is None:
        return None
    if gap == 0.0:
        return 0.0
    size = abs(float(objective))
    return gap / size if size > 0 else math.copysign(math.inf, gap)


#: Relative rounding margin of the bound guard: a lower bound may exceed the float64 objective
#: by at most this (times max(|objective|, tiny)) and is then clipped to the objective; beyond it
#: the bound is a detected numerical failure and is dropped (``checked_bound``).
BOUND_ROUNDING_MARGIN = 1e-9


def checked_bound(objective: float | None, lower_bound: float | None
                  ) -> tuple[float | None, str | None]:
    """The guard against an invalid certificate: ``(bound to report, failure message or None)``.

    The objective is the value of a feasible estimate, so no valid lower bound exceeds it.  A
    bound within the rounding margin above it is clipped to it; a bound further above it, a
    non-finite objective or a NaN / +inf bound is a detected numerical failure: the bound is
    dropped (None) and the message says why.  ``FitResult`` applies this to every result, so no
    path can report ``optimal`` with a bound above its objective.
    """
    if lower_bound is None:
        return None, None
    lower_bound = float(lower_bound)
    if objective is None or not math.isfinite(float(objective)):
        return None, f"bound {lower_bound!r} dropped: the objective is {objective!r}, not a finite number"
    objective = float(objective)
    if math.isnan(lower_bound) or lower_bound == math.inf:
        return None, f"bound {lower_bound!r} dropped: not a number below the objective"
    if lower_bound <= objective:
        return lower_bound, None
    if lower_bound - objective <= BOUND_ROUNDING_MARGIN * max(abs(objective), 1e-300):
        return objective, None
    return None, (f"numerical failure detected: the lower bound {lower_bound!r} is above the "
                  f"objective {objective!r} of a feasible estimate (relative excess "
                  f"{(lower_bound - objective) / max(abs(objective), 1e-300):.3g}); the bound "
                  f"was dropped and no optimality is claimed")


@dataclass
class FitResult:
    """An estimate, its objective value and, when proven, a lower bound.

    Attributes
    ----------
    method : str
        Estimator name, e.g. ``"molar"``.
    coef : ndarray of shape (K, p)
        Coefficients on the original scale of the data.
    intercept : ndarray of shape (K,)
    objective : float
        The stated objective at ``coef``, recomputed in float64.
    lower_bound : float or None
        A proven lower bound on the optimum, or None (no certificate).
    status : Status
        One of ``STATUSES`` (a ``str``).
    objective_name : str
        What ``objective`` measures (e.g. "weighted-median LP").
    bound_source : str or None
        Where ``lower_bound`` comes from (e.g. "dual feasible point").
    algorithm : str
        The method of the estimator's family that produced the estimate (its ``algorithm=``,
        a name in that family's method table, e.g. ``"oa_multi_tree"``); "" when not recorded.
    backend : str or None
        The backend it ran on (``"highs"``, ``"scip"``, ``"gurobi"``), None for a method that
        runs in mtl_opt itself.
    solver, solver_version : str
        What actually solved it, as a human reads it (e.g. "oa_multi_tree (HiGHS)").
    wall_time : float
        Seconds for the whole fit, but ``compile_time``.
    compile_time : float
        Seconds spent compiling (or loading) kernels before the fit's clock and time limit
        started: bnb's numba kernels, compiled once per Python environment (numba caches them);
        0 when nothing was compiled.
    log : list of dict
        Per-iteration or per-stage records.
    native : dict
        Solver-native status and gap, unmodified.
    task_names, feature_names : list of str
    params : dict
        The hyperparameters used.
    extra : dict
        Method-specific arrays or numbers (e.g. MOLAR's global coefficients).
    warnings : list of str
        What went wrong but did not stop the fit, e.g. a bound the guard dropped.
    unidentified : list of [task, feature]
        Coefficients the task's own data cannot determine (``mtl_opt.identifiability``): a
        feature constant in that task or, for least-squares-based methods, collinear with
        earlier ones there.  How each estimator fills them is in its docstring.

    Every result passes ``checked_bound`` when built: a bound above the objective is dropped
    (with a warning) and an ``optimal`` or ``gap_limit`` status then becomes ``heuristic``.

    Examples
    --------
    >>> from mtl_opt import FitResult, PerTaskOLS
    >>> from mtl_opt.synthetic import sparse_heterogeneity
    >>> result = PerTaskOLS().fit(sparse_heterogeneity(d=3, M=2, n=20, s=1, seed=0).data).result_
    >>> print(result.status, result.lower_bound <= result.objective, result.rel_gap <= 1e-6)
    optimal True True
    >>> text = result.to_json("fit.json")                # also returns the JSON text
    >>> FitResult.from_json("fit.json") == result
    True
    """

    method: str
    coef: np.ndarray
    intercept: np.ndarray
    objective: float
    lower_bound: float | None
    status: Status
    objective_name: str = ""
    bound_source: str | None = None
    algorithm: str = ""
    backend: str | None = None
    solver: str = ""
    solver_version: str = ""
    wall_time: float = 0.0
    compile_time: float = 0.0
    log: list = field(default_factory=list)
    native: dict = field(default_factory=dict)
    task_names: list = field(default_factory=list)
    feature_names: list = field(default_factory=list)
    params: dict = field(default_factory=dict)
    extra: dict = field(default_factory=dict)
    warnings: list = field(default_factory=list)
    unidentified: list = field(default_factory=list)

    def __post_init__(self):
        if self.status not in STATUSES:
            raise InvalidDataError(f"FitResult status must be one of "
                                   f"{', '.join(map(str, STATUSES))}; got {self.status!r}.")
        self.status = Status(self.status)
        self.coef = np.asarray(self.coef, dtype=float)
        self.intercept = np.asarray(self.intercept, dtype=float)
        self.lower_bound, failure = checked_bound(self.objective, self.lower_bound)
        if failure is not None:
            self.warnings = [*self.warnings, failure]
            self.bound_source = None
            if self.status in (Status.OPTIMAL, Status.GAP_LIMIT):
                self.status = Status.HEURISTIC

    @property
    def abs_gap(self) -> float | None:
        return absolute_gap(self.objective, self.lower_bound)

    @property
    def rel_gap(self) -> float | None:
        return relative_gap(self.objective, self.lower_bound)

    @property
    def certified(self) -> bool:
        """True when a proven lower bound exists."""
        return self.lower_bound is not None

    def summary(self) -> str:
        """An aligned key/value report, HiGHS style."""
        def num(x):
            return "none" if x is None else f"{x:.9g}"

        gap = self.rel_gap
        gap_text = ("none (no certificate)" if gap is None
                    else f"{100 * gap:.4g}% rel, {self.abs_gap:.3g} abs")
        K, p = self.coef.shape
        rows = [
            ("Method", f"{self.method}  (K={K} tasks, p={p} features)"),
            ("Status", self.status),
            ("Objective", f"{num(self.objective)}  ({self.objective_name}, recomputed in float64)"),
            ("Lower bound", f"{num(self.lower_bound)}"
             + (f"  ({self.bound_source})" if self.bound_source else "")),
            ("Gap", gap_text),
            ("Solver", f"{self.solver} {self.solver_version}".strip() or "none"),
            ("Time", f"{self.wall_time:.3g} s" + (
                f" (and {self.compile_time:.3g} s loading or compiling bnb's kernels, outside "
                f"the time limit)" if self.compile_time >= 0.05 else "")),
        ] + [("Warning", text) for text in self.warnings]
        if self.unidentified:
            shown = ", ".join(f"{t}/{f}" for t, f in self.unidentified[:5])
            more = f", ... ({len(self.unidentified) - 5} more)" if len(self.unidentified) > 5 else ""
            rows.append(("Unidentified", f"{len(self.unidentified)} (task, feature) pair(s) the "
                                         f"task's data cannot determine: {shown}{more}"))
        return "\n".join(f"  {key:<12} {value}" for key, value in rows)

    def __eq__(self, other) -> bool:
        """Equal when the JSON forms are (arrays compared value by value, NaN equal to NaN), so
        ``FitResult.from_json(r.to_json()) == r``."""
        if not isinstance(other, FitResult):
            return NotImplemented
        return _canonical(self) == _canonical(other)

    def to_frame(self):
        """The coefficients as a pandas DataFrame: one row per task (index ``task``), the
        ``intercept`` column, then one column per feature (needs pandas: ``mtl_opt[pandas]``)."""
        pd = _pandas("FitResult.to_frame")
        if "intercept" in self.feature_names:
            raise InvalidDataError(
                "a feature is named 'intercept', the column to_frame gives the intercepts; "
                "rename the feature (MultiTaskData feature_names=) to make a table.")
        K, p = self.coef.shape
        features = self.feature_names or [f"x{j}" for j in range(p)]
        frame = pd.DataFrame(np.column_stack([self.intercept, self.coef]),
                             columns=["intercept", *features],
                             index=pd.Index(self.task_names or [f"task{k}" for k in range(K)], name="task"))
        frame.columns.name = "feature"
        return frame

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; floats keep full precision, gaps are included for readers."""
        out = _jsonable(asdict(self))
        out["abs_gap"], out["rel_gap"] = self.abs_gap, self.rel_gap
        return out

    def to_json(self, path: str | Path | None = None) -> str:
        """Serialize losslessly (``from_json(to_json())`` gives an equal result); a ``path`` is
        written atomically, so a failed write leaves the file there before intact."""
        text = json.dumps(self.to_dict(), indent=2)
        if path is not None:
            from .outputs import write_text

            write_text(path, text + "\n")
        return text

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "FitResult":
        d = {k: _unjson_array(v) for k, v in d.items() if k not in ("abs_gap", "rel_gap")}
        return cls(**d)

    @classmethod
    def from_json(cls, text_or_path: str | Path) -> "FitResult":
        """Read a result written by ``to_json`` (a JSON string or a file path)."""
        text = str(text_or_path)
        if not text.lstrip().startswith("{"):
            text = Path(text_or_path).read_text()
        return cls.from_dict(json.loads(text))


def _canonical(result: FitResult) -> str:
    """One text per JSON form: what ``FitResult.__eq__`` compares."""
    return json.dumps(result.to_dict(), sort_keys=True)


def _pandas(what: str):
    """pandas, imported when a table is asked for (an optional dependency: ``mtl_opt[pandas]``)."""
    try:
        import pandas
    except ImportError:
        raise ImportError(f"{what} needs pandas; install it with pip install 'mtl_opt[pandas]' "
                          f"(or pip install pandas).") from None
    return pandas


def _jsonable(obj):
    """Arrays -> tagged lists, numpy scalars -> Python, recursively."""
    if isinstance(obj, np.ndarray):
        return {"__ndarray__": obj.tolist(), "dtype": str(obj.dtype), "shape": list(obj.shape)}
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return {"__float__": repr(obj)}
    return obj


def _unjson_array(v):
    if isinstance(v, dict) and "__ndarray__" in v:
        return np.array(v["__ndarray__"], dtype=v["dtype"]).reshape(v["shape"])
    if isinstance(v, dict) and "__float__" in v:
        return float(v["__float__"])
    if isinstance(v, dict):
        return {k: _unjson_array(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_unjson_array(x) for x in v]
    return v
