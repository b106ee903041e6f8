"""Built-in side constraints of the sparse model: what users know before they fit.

A user states them by name (``Constraint``, or the same keys as a dict or an instance file's
``[[constraints]]`` table); ``compile_constraints`` checks them against the data's task and
feature names and turns them into ``SideConstraints``: arrays on the fitted scale that every
solver reads.  Kinds (``KINDS``), each for the listed tasks (default: every task):

- ``include`` / ``exclude``: the features are in / out of the task's support (z = 1 / beta = 0);
- ``at_most`` / ``at_least``: at most / at least ``count`` of the features are in each task's
  support;
- ``nonnegative`` / ``nonpositive``: the sign of the coefficients;
- ``bounds``: ``lower <= coefficient <= upper`` on the original scale of the features (a box
  without 0 also puts the feature in the support, the box [0, 0] excludes it, as do a
  nonnegative and a nonpositive constraint together);
- ``shared_support``: the tasks (at least 2) select the same features (default: all features).

A pair is "in the support" when its coefficient is non-zero or it is included
(``SideConstraints.support``); an included coefficient may still be 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import scipy.sparse
from scipy.optimize import Bounds, LinearConstraint, milp

from ..errors import InvalidParameterError, SolverError

#: kind -> (required keys, optional keys) besides ``kind``.
KINDS = {
    "include": (("features",), ("tasks",)),
    "exclude": (("features",), ("tasks",)),
    "at_most": (("features", "count"), ("tasks",)),
    "at_least": (("features", "count"), ("tasks",)),
    "nonnegative": (("features",), ("tasks",)),
    "nonpositive": (("features",), ("tasks",)),
    "bounds": (("features",), ("tasks", "lower", "upper")),
    "shared_support": (("tasks",), ("features",)),
}


@dataclass(frozen=True)
class Constraint:
    """One side constraint as the user states it (module docstring); features and tasks by name
    (or 0-based index); ``tasks=None``: every task (``shared_support``: required)."""

    kind: str
    features: tuple | None = None
    tasks: tuple | None = None
    count: int | None = None
    lower: float | None = None
    upper: float | None = None

    def __post_init__(self):
        if self.kind not in KINDS:
            raise InvalidParameterError(
                f"unknown constraint kind {self.kind!r}; valid: {', '.join(map(repr, KINDS))}.")
        required, optional = KINDS[self.kind]
        given = {key for key in ("features", "tasks", "count", "lower", "upper")
                 if getattr(self, key) is not None}
        missing = [key for key in required if key not in given]
        extra = sorted(given - set(required) - set(optional))
        if missing or extra:
            raise InvalidParameterError(
                f"a {self.kind!r} constraint takes {_listing(required, optional)}; "
                + (f"missing {', '.join(missing)}" if missing else f"got also {', '.join(extra)}") + ".")
        for key in ("features", "tasks"):
            names = getattr(self, key)
            if names is not None:
                names = (names,) if isinstance(names, (str, int)) else tuple(names)
                if not names or not all(isinstance(n, (str, int)) and not isinstance(n, bool)
                                        for n in names):
                    raise InvalidParameterError(
                        f"{self.kind!r} constraint: {key} must be a non-empty list of names or "
                        f"0-based indices; got {getattr(self, key)!r}.")
                object.__setattr__(self, key, names)
        if self.count is not None and (isinstance(self.count, bool) or not isinstance(self.count, (int, np.integer))
                                       or self.count < 0):
            raise InvalidParameterError(
                f"{self.kind!r} constraint: count must be an int >= 0; got {self.count!r}.")
        for key in ("lower", "upper"):
            value = getattr(self, key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                      or np.isnan(value)):
                raise InvalidParameterError(
                    f"'bounds' constraint: {key} must be a number (inf allowed); got {value!r}.")
        if self.kind == "bounds":
            lower, upper = self.box()
            if not lower <= upper or lower == np.inf or upper == -np.inf:
                raise InvalidParameterError(
                    f"'bounds' constraint: needs lower <= upper, both finite or on the open side; "
                    f"got lower={self.lower!r}, upper={self.upper!r}.")
        if self.kind == "shared_support" and len(set(self.tasks)) < 2:
            raise InvalidParameterError(
                f"'shared_support' constraint: needs at least 2 tasks; got {self.tasks!r}.")

    @classmethod
    def from_dict(cls, entry: dict) -> "Constraint":
        """A constraint from its dict form (``to_dict``; an instance file's table), strict keys."""
        if not isinstance(entry, dict) or "kind" not in entry:
            raise InvalidParameterError(
                f"a constraint is a table with a 'kind' key ({', '.join(map(repr, KINDS))}); "
                f"got {entry!r}.")
        unknown = sorted(set(entry) - {"kind", "features", "tasks", "count", "lower", "upper"})
        if unknown:
            kind = entry["kind"]
            keys = _listing(*KINDS[kind]) if kind in KINDS else "kind, features, tasks, count, lower, upper"
            raise InvalidParameterError(
                f"constraint {kind!r}: unknown key(s) {', '.join(map(repr, unknown))}; it takes {keys}.")
        return cls(**entry)

    def __repr__(self) -> str:   # only the keys that are set: the CLI prints the parameters
        return f"Constraint({', '.join(f'{k}={v!r}' for k, v in self.to_dict().items())})"

    def to_dict(self) -> dict:
        """The JSON / TOML form: only the keys that are set."""
        return {key: list(value) if isinstance(value, tuple) else value
                for key, value in vars(self).items() if value is not None}

    def box(self) -> tuple[float, float]:
        """(lower, upper) on the original scale this constraint puts on its coefficients."""
        return {"nonnegative": (0.0, np.inf), "nonpositive": (-np.inf, 0.0),
                "bounds": (-np.inf if self.lower is None else float(self.lower),
                           np.inf if self.upper is None else float(self.upper))
                }.get(self.kind, (-np.inf, np.inf))


def as_constraints(constraints) -> tuple[Constraint, ...]:
    """``constraints`` (None, or a list of ``Constraint`` or dicts) as a tuple of Constraint."""
    if constraints is None:
        return ()
    if isinstance(constraints, (Constraint, dict)) or not hasattr(constraints, "__iter__"):
        raise InvalidParameterError(
            f"constraints must be a list of Constraint or dicts; got {type(constraints).__name__}.")
    out = []
    for number, c in enumerate(constraints, 1):
        try:
            out.append(c if isinstance(c, Constraint) else Constraint.from_dict(c))
        except InvalidParameterError as exc:
            raise InvalidParameterError(f"constraint #{number}: {exc}") from None
    return tuple(out)


@dataclass(frozen=True)
class CountRow:
    """at_least <= sum_{j in features} z_kj <= at_most for task k."""

    task: int
    features: tuple
    at_least: int
    at_most: int


@dataclass(frozen=True)
class SideConstraints:
    """The compiled constraints on the fitted scale (K tasks, p features).

    ``include`` (K, p) bool: z_kj = 1.  ``exclude``: beta_kj = 0 (the problem adds these pairs
    to ``SparseProblem.excluded``, which every solver honours).  ``lower``, ``upper`` (K, p):
    bounds on the fitted (standardized, then normalized) coefficients, +-inf where none.
    ``counts``: one ``CountRow`` per task and at_most / at_least constraint.  ``shared``:
    (tasks, features) pairs: z_kj equal over those tasks for those features.
    """

    include: np.ndarray
    exclude: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    counts: tuple = ()
    shared: tuple = ()
    stated: tuple = field(default=(), compare=False)   # the Constraint records, for messages

    @classmethod
    def none(cls, shape) -> "SideConstraints":
        return cls(np.zeros(shape, bool), np.zeros(shape, bool), np.full(shape, -np.inf),
                   np.full(shape, np.inf))

    @property
    def active(self) -> bool:
        """Whether any constraint is stated (an unconstrained problem skips every check)."""
        return bool(self.stated)

    @property
    def bounded(self) -> bool:
        """Whether some coefficient has a finite bound (a sign or a box)."""
        return bool(np.isfinite(self.lower).any() or np.isfinite(self.upper).any())

    def scaled(self, factor: float) -> "SideConstraints":
        """The same constraints on coefficients divided by ``factor`` (``SparseProblem.scaled``)."""
        return replace(self, lower=self.lower / factor, upper=self.upper / factor)

    def restricted(self, columns) -> "SideConstraints":
        """The constraints on the features ``columns`` (a subset, ``SparseProblem.restricted``): a
        count or shared support keeps the features it has among them."""
        columns = np.arange(self.include.shape[1])[columns]   # a mask or indices, as indices
        new = {int(j): i for i, j in enumerate(columns)}

        def kept(features):
            return tuple(new[j] for j in features if j in new)
        return replace(self, include=self.include[:, columns], exclude=self.exclude[:, columns],
                       lower=self.lower[:, columns], upper=self.upper[:, columns],
                       counts=tuple(replace(row, features=kept(row.features),
                                            at_most=min(row.at_most, len(kept(row.features))))
                                    for row in self.counts),
                       shared=tuple((tasks, kept(features)) for tasks, features in self.shared))

    def task(self, k: int) -> "SideConstraints":
        """Task k's constraints alone (``SparseProblem.task``)."""
        rows = slice(k, k + 1)
        return replace(self, include=self.include[rows], exclude=self.exclude[rows],
                       lower=self.lower[rows], upper=self.upper[rows],
                       counts=tuple(replace(row, task=0) for row in self.counts if row.task == k),
                       shared=())

    def support(self, B: np.ndarray) -> np.ndarray:
        """(K, p) bool: the pairs in the support at B, non-zero or included."""
        return (B != 0) | self.include

    def support_ok(self, support: np.ndarray) -> bool:
        """Whether a (K, p) support (the exact models' z) satisfies include, the counts and the
        shared supports (exclude is part of ``SparseProblem.excluded``, checked with it)."""
        if np.any(self.include & ~support):
            return False
        for row in self.counts:
            if not row.at_least <= support[row.task, list(row.features)].sum() <= row.at_most:
                return False
        return all(np.all(support[list(tasks)][:, list(features)] == support[tasks[0], list(features)])
                   for tasks, features in self.shared)

    def best_support(self, scores: np.ndarray, s: int, allowed: np.ndarray, common: bool):
        """The (K, p) support with the largest sum of ``scores`` over its pairs, among those that
        meet the constraints, the ``allowed`` pairs and at most ``s`` features per task, or None
        when none does.  ``common``: one set of at most s columns for every task (a column scores
        the sum over the tasks allowed on it).

        Includes alone: the includes plus the best positive scores, per task (or per column).
        With counts or shared supports, an exact 0-1 program (scipy's HiGHS MILP): greedy picks
        can break a count or a shared support, and the program also proves when no support exists.
        """
        scores = np.where(allowed, scores, 0.0)
        if common:
            scores, allowed, include = scores.sum(axis=0)[None], allowed.any(axis=0)[None], self.include.any(axis=0)[None]
        else:
            include = self.include
        if not self.counts and not self.shared:
            chosen = include.copy()
            for row, score, ok, forced in zip(chosen, scores, allowed, include):
                room = s - int(forced.sum())
                if room < 0:
                    return None
                eligible = np.flatnonzero(ok & ~forced & (score > 0))
                row[eligible[np.argsort(-score[eligible], kind="stable")[:room]]] = True
            return np.broadcast_to(chosen, self.include.shape).copy()
        chosen = _best_program(self, scores, s, allowed | include, include)
        return None if chosen is None else np.broadcast_to(chosen, self.include.shape).copy()

    def admits(self, s: int, allowed: np.ndarray, common: bool) -> bool:
        """Whether some support with at most ``s`` features per task meets the constraints."""
        return not self.active or self.best_support(np.zeros(self.include.shape), s, allowed,
                                                    common) is not None

    def check_admits(self, s: int, allowed: np.ndarray, common: bool, task_names=()) -> None:
        """Raise InvalidParameterError, naming the constraints, when no support with at most ``s``
        features per task (``best_support``) meets them: checked before any solver runs."""
        if not self.active:
            return
        names = list(task_names) or list(range(self.include.shape[0]))
        needed = self.include.any(axis=0)[None] if common else self.include
        for k, row in enumerate(needed):
            if row.sum() > s:
                raise InvalidParameterError(
                    f"the constraints put {int(row.sum())} features in the support of "
                    f"{'every task' if common else f'task {names[k]!r}'} (include, or a bound "
                    f"without 0) but s = {s}: raise s or drop some of "
                    f"{_stated(self, 'include', 'nonnegative', 'nonpositive', 'bounds')}.")
        for c in self.stated:
            if c.kind == "at_least" and c.count > s:
                raise InvalidParameterError(
                    f"constraint {c.to_dict()} asks for {c.count} features of a task's support, "
                    f"more than s = {s}: raise s or lower the count.")
        if not self.admits(s, allowed, common):
            raise InvalidParameterError(
                f"no support of at most s = {s} features per task meets the constraints "
                f"together ({_stated(self)}); the features a task cannot identify (constant "
                "there) never enter its support. Relax a count, a shared support or an include.")

    def without_bounds(self) -> "SideConstraints | None":
        """These constraints less their bounds and signs, when those are all they state (no
        include, count or shared support; a pair a box fixes at 0 stays in ``exclude``), else None."""
        if self.include.any() or self.counts or self.shared:
            return None
        return replace(self, lower=np.full_like(self.lower, -np.inf), upper=np.full_like(self.upper, np.inf),
                       stated=())

    def violation(self, B: np.ndarray) -> float:
        """The largest amount by which B leaves its bounds (0 inside them)."""
        return float(max(np.max(self.lower - B, initial=0.0), np.max(B - self.upper, initial=0.0)))


def compile_constraints(constraints, task_names, feature_names, x_scale=None) -> SideConstraints:
    """``constraints`` (``as_constraints``) as arrays for tasks ``task_names`` and features
    ``feature_names``; ``x_scale`` (K, p): the features' scales in the fitted problem (the
    standardization's, None: 1), which multiply the bounds.  Names are checked here: an
    unknown task or feature is an InvalidParameterError that lists the valid ones."""
    stated = as_constraints(constraints)
    K, p = len(task_names), len(feature_names)
    out = SideConstraints.none((K, p))
    include, exclude, lower, upper = out.include, out.exclude, out.lower, out.upper
    counts, shared = [], []
    task_index, feature_index = ({str(name): i for i, name in enumerate(names)}
                                 for names in (task_names, feature_names))
    for number, c in enumerate(stated, 1):
        label = f"constraint #{number} ({c.kind!r})"
        tasks = _indices(c.tasks, task_index, "task", label)
        features = _indices(c.features, feature_index, "feature", label)
        if c.kind == "include":
            include[np.ix_(tasks, features)] = True
        elif c.kind == "exclude":
            exclude[np.ix_(tasks, features)] = True
        elif c.kind in ("at_most", "at_least"):
            for k in tasks:
                counts.append(CountRow(k, tuple(features), c.count if c.kind == "at_least" else 0,
                                       c.count if c.kind == "at_most" else len(features)))
        elif c.kind == "shared_support":
            shared.append((tuple(tasks), tuple(features)))
        else:
            low, high = c.box()
            box = np.ix_(tasks, features)
            lower[box], upper[box] = np.maximum(lower[box], low), np.minimum(upper[box], high)
    if np.any(lower > upper):
        raise InvalidParameterError(
            "the bounds and signs of some coefficients leave no value (lower > upper for "
            f"{_pairs(lower > upper, task_names, feature_names)}); check the constraints.")
    include |= (lower > 0) | (upper < 0)   # a box without 0 puts the pair in the support
    exclude |= (lower == 0) & (upper == 0)  # and the box [0, 0] takes it out
    if np.any(include & exclude):
        raise InvalidParameterError(
            f"constraints both include {_pairs(include & exclude, task_names, feature_names)} in the "
            f"support (include, or a bound without 0) and fix it at 0 (exclude, or signs and bounds "
            f"that leave only 0, such as nonnegative with nonpositive); drop one of them.")
    if x_scale is not None:
        lower, upper = lower * x_scale, upper * x_scale
    return SideConstraints(include, exclude, lower, upper, tuple(counts), tuple(shared), stated)


def _indices(names, valid: dict, what: str, label: str) -> list:
    """0-based indices of ``names`` (names or indices) among ``valid`` (name -> index; names
    None: all of them); ``label`` names the constraint in messages."""
    if names is None:
        return list(range(len(valid)))
    out = []
    for name in names:
        if isinstance(name, str) and name in valid:
            out.append(valid[name])
        elif isinstance(name, (int, np.integer)) and 0 <= name < len(valid):
            out.append(int(name))
        else:
            raise InvalidParameterError(
                f"{label}: unknown {what} {name!r}; {what}s: {', '.join(valid)}.")
    if len(set(out)) != len(out):
        raise InvalidParameterError(f"{label}: a {what} is listed twice in {list(names)!r}.")
    return out


def _best_program(side: SideConstraints, scores, s, allowed, include):
    """``best_support`` by a 0-1 program over z (rows of ``scores``: the tasks, or one row for a
    common support, on which every count applies); None when it is infeasible.  The rows are
    sparse: a shared support over p features adds (tasks - 1) p of them."""
    rows, p = scores.shape
    index = np.arange(rows * p).reshape(rows, p)
    entries, low, high = [], [], []   # (row, column, value) of the constraint matrix

    def add(columns, values, lo, hi):
        entries.extend((len(low), c, v) for c, v in zip(np.ravel(columns), values))
        low.append(lo), high.append(hi)
    for k in range(rows):
        add(index[k], np.ones(p), 0, s)
    for row in side.counts:
        columns = index[row.task if rows > 1 else 0, list(row.features)]
        add(columns, np.ones(columns.size), row.at_least, row.at_most)
    for tasks, features in (side.shared if rows > 1 else ()):
        for k in tasks[1:]:
            for j in features:
                add((index[k, j], index[tasks[0], j]), (1.0, -1.0), 0, 0)
    r, c, v = zip(*entries)
    A = scipy.sparse.csr_array((v, (r, c)), shape=(len(low), rows * p))
    scale = max(float(np.max(np.abs(scores))), 1e-300)
    result = milp(-(scores / scale).ravel(), integrality=np.ones(rows * p),
                  bounds=Bounds(include.ravel().astype(float), allowed.ravel().astype(float)),
                  constraints=LinearConstraint(A, low, high), options={"mip_rel_gap": 0.0})
    if result.x is None:
        if result.status == 2:
            return None
        raise SolverError(f"support selection: scipy's HiGHS MILP returned {result.message!r}.")
    return result.x.reshape(rows, p) > 0.5


def _stated(side: SideConstraints, *kinds) -> str:
    """The stated constraints (of ``kinds``, default all) as the user wrote them."""
    return "; ".join(str(c.to_dict()) for c in side.stated if not kinds or c.kind in kinds)


def _pairs(mask, task_names, feature_names) -> str:
    return ", ".join(f"({task_names[k]!s}, {feature_names[j]!s})" for k, j in zip(*np.nonzero(mask)))


def _listing(required, optional) -> str:
    return ", ".join(required) + (f" (optional: {', '.join(optional)})" if optional else "")
