"""The modeling API: the Pyomo model behind an estimator, edited by the user, solved and certified.

``spec = est.pyomo_model(data)`` returns a ``ModelSpec``: the model (``spec.model``), the backend
that solves it and what each component is.  The user edits ``spec.model`` with plain Pyomo
(adds constraints, fixes or bounds variables, replaces the objective); ``est.fit(data,
model=spec)`` solves it with ``solve_spec`` (the one route back) and reports a usual FitResult.

What is certified is what was solved.  The objective reported: while the model's own objective
(``spec.objective_component``, with the expression and sense it was built with) is the active one,
the estimator's objective recomputed in float64 at the decoded estimate, on the scale the
estimator reports it; if the user replaced it (exactly one other active objective) or edited its
expression or sense in place, the edited objective's ``pyo.value`` at the solution, on the model's
scale, and ``objective_name`` says so.  The rows and variables the model was built with enforce
the estimator's claims (s, the penalties' linearization, the side constraints): one deleted,
deactivated or rewritten, or a binary variable relaxed, is refused before the solve, naming it
(add rows, fix or bound variables instead).  The bound: the backend's dual bound of the
edited model, lowered by the margin its dual-feasibility tolerance allows
(``formulations.sparse_models.dual_bound_margin``, over every row and column of the edited
model), and
with the model's own objective capped by ``bound_cap`` (a Big-M box proven only below that level,
``ModelSpec``), then mapped to the reported scale by the spec's ``reductions.Inverse`` (its
``value_scale``, a power of 2 for every estimator, so exactly).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import numpy as np

from .._lazy import pyo
from ..errors import CapabilityError, InvalidParameterError
from ..formulations.sparse_models import dual_bound_margin
from ..reductions import Inverse
from ..result import Status
from .backends import pick_backend
from .method import NO_BOUND, SolverRun
from .sparse.oa import exact_options, miqp_options
from .progress import Progress

#: How many times ``solve_spec`` widens a Big-M box (``ModelSpec.widen``) and solves again when
#: the edited model's solution lies above the level the box is proven for (once is the rule: the
#: solution found stays feasible in the wider box, so the next one lies below the new level) or
#: has no solution in the box (the user's rows may need larger coefficients).
WIDENINGS = 4
#: How much an infeasible boxed model's level grows per widening (M grows by its square root).
WIDENING_FACTOR = 16.0
#: ``objective_name`` of a run on the model's own, unedited objective.
OWN_OBJECTIVE = "the model's own objective"
#: A continuous problem class -> its class with integer variables.
_MIXED = {"lp": "milp", "qp": "miqp", "qcp": "miqcp", "nlp": "nlp"}


@dataclass
class ModelSpec:
    """An estimator's optimization model for the user to edit, and how to read an estimate back.

    ``model``: the Pyomo ConcreteModel (edit it with plain Pyomo); ``backend``: the backend
    ``fit(data, model=spec)`` solves it on (set it to e.g. "scip" for constraints the default
    cannot take); ``problem_class``: the class of the model as built; ``components``: component
    name -> what it is, read from the Pyomo ``doc`` strings the formulations give their
    components (``describe()`` prints them, with the units of ``inverse``).  The rest is the
    estimator's: ``estimator`` and ``data_key`` tie the spec to the estimator (class and
    parameters) and data it was built for; ``decode(model)`` reads the estimate from a solved
    model; ``objective(estimate)`` is the estimator's objective there in float64, as it reports
    it; ``inverse``: the ``reductions.Inverse`` of the scaling the model is built on, read as
    ``y_scale`` (what the model's y was divided by: coefficients are in units of the fitted
    coefficient / y_scale, so homogeneous constraints such as beta[0, j] <= beta[1, j] need no
    conversion), ``y_offset`` (what was subtracted from the coefficients first: 0 but for MOLAR,
    whose median LP is centred per covariate: its z[k] is (coefficient k - y_offset[k]) /
    y_scale, and ARMUL, whose intercept column carries y's level) and ``objective_scale`` (the model's own objective, ``objective_component``, is in
    units of ``objective(estimate) / objective_scale``); ``bound_cap`` (model units or None): a level
    below which every solution lies in the model's variable bounds (a Big-M box), so the true
    optimum is at least min(bound, bound_cap); ``widen(model, level)`` (with ``bound_cap``)
    rewrites the box for every solution below ``level``; ``finish(run, options)`` builds the
    FitResult.
    """

    model: pyo.ConcreteModel
    backend: str
    problem_class: str
    estimator: tuple
    data_key: tuple
    decode: Callable[[pyo.ConcreteModel], Any] = field(repr=False)
    objective: Callable[[Any], float] = field(repr=False)
    finish: Callable[..., Any] = field(repr=False)
    inverse: Inverse = field(default_factory=Inverse)
    bound_cap: float | None = None
    widen: Callable[[pyo.ConcreteModel, float], None] | None = field(default=None, repr=False)
    unboxed: Callable[[pyo.ConcreteModel], pyo.ConcreteModel] | None = field(default=None, repr=False)
    notes: str = ""
    components: dict = field(init=False, repr=False)

    def __post_init__(self):
        self.components = described(self.model)
        self.objective_component = _active_objective(self.model)
        self.remember_structure()

    @property
    def y_scale(self) -> float:
        return float(np.max(self.inverse.scale))

    @property
    def y_offset(self):
        return self.inverse.offset

    @property
    def objective_scale(self) -> float:
        return self.inverse.value_scale

    def remember_structure(self) -> None:
        """Record the model as it stands as the estimator's own: its objective's expression and
        sense, every constraint row (its expression, active or not) and each variable's domain
        (``check_structure`` compares the edited model with it)."""
        objective = self.objective_component
        self._objective_form = (objective.expr, objective.sense, _nargs(objective.expr))
        self._rows = {component.name: (component, [(row, row.expr, row.active) for row in component.values()])
                      for component in self.model.component_objects(pyo.Constraint, descend_into=True)}
        self._domains = [(var, var.domain) for var in self.model.component_data_objects(pyo.Var)
                         if not var.is_continuous()]

    def objective_is_ours(self, objective) -> bool:
        """Whether ``objective`` (the active one) is the model's own, unedited: the same component
        with the expression and sense it was built with."""
        expr, sense, nargs = self._objective_form
        return (objective is self.objective_component and objective.expr is expr
                and objective.sense == sense and _nargs(objective.expr) == nargs)

    def check_structure(self) -> None:
        """Refuse an edit that removes what enforces the estimator's claims: a built constraint
        deleted, deactivated or rewritten, or an integer variable relaxed (adding rows, fixing or
        bounding variables and replacing the objective are the protocol's edits)."""
        for name, (component, rows) in self._rows.items():
            if self.model.find_component(name) is not component:
                raise InvalidParameterError(
                    f"the edited model lost its constraint {name!r} ({self.components.get(name, 'built by the estimator')}): "
                    f"it enforces part of the estimator's problem, which the result would claim; "
                    f"keep it (add rows, fix or bound variables to restrict the model).")
            for row, expr, active in rows:
                if row.active != active or row.expr is not expr:
                    what = "deactivated" if active and not row.active else "rewritten"
                    raise InvalidParameterError(
                        f"the edited model's row {row.name} was {what}: it enforces part of the "
                        f"estimator's problem ({self.components.get(name, name)}), which the "
                        f"result would claim; keep the estimator's rows as built (add rows of "
                        f"your own instead).")
        for var, domain in self._domains:
            if var.domain is not domain:
                raise InvalidParameterError(
                    f"the edited model's variable {var.name} is no longer {domain} (now "
                    f"{var.domain}): a relaxed model certifies nothing about the estimator's "
                    f"problem; fix or bound it instead.")

    def describe(self) -> str:
        """What the model holds: its components (name, what it is, units), backend and notes."""
        width = max(map(len, self.components), default=0)
        rows = [f"{type(self).__name__} of {self.estimator[0]}: Pyomo model {self.model.name!r} "
                f"({self.problem_class.upper()}) solved on backend={self.backend!r}"]
        rows += [f"  {name:<{width}}  {text}" for name, text in self.components.items()]
        rows.append(f"Units: the model's coefficients are (coefficient - y_offset) / y_scale, "
                    f"y_scale = {self.y_scale:g}; its own objective is the estimator's / "
                    f"objective_scale = {self.objective_scale:g}.")
        if self.notes:
            rows.append(self.notes)
        rows.append("Edit spec.model with plain Pyomo, then est.fit(data, model=spec).")
        return "\n".join(rows)

    __str__ = describe


def described(model: pyo.Block) -> dict:
    """Component name -> its Pyomo ``doc``, for the model's components that have one and are not
    empty (a term the parameters leave out, e.g. Zbar's ``w`` without lambda_zbar)."""
    return {component.local_name: component.doc
            for component in model.component_objects(descend_into=False)
            if component.doc and len(component) > 0}


def solve_spec(spec: ModelSpec, options, deadline) -> SolverRun:
    """Solve the (edited) ``spec.model`` on ``spec.backend``: the run on the fitted scale.

    ``native``: ``objective_name`` (the model's own objective, or the user's by name), the
    backend's status (``backend_status``, and its native ``status``), ``bound`` (the bound's
    source).  No solution: no estimate (None) and stop ``infeasible`` when the backend proved
    it, else the budget that ran out; a model with a Big-M box (``bound_cap``) proven
    infeasible only inside its widest box is solved once more as ``unboxed(model)`` (a
    relaxation without the box and the rows that tie beta to z): infeasible there is proven
    infeasible, else it stops ``iteration_limit`` (beyond the box nothing is proven).  A model
    with a box that offers ``widen`` is widened and solved again when its
    solution lies above the box's level or it has none inside (``WIDENINGS``).  The log
    (``solvers.progress``) has the backend's heartbeat (nodes only) and, solved, a final row.
    """
    progress = Progress(options.verbose)
    objective = _active_objective(spec.model)
    ours = spec.objective_is_ours(objective)
    spec.check_structure()
    problem_class = _problem_class(spec.model)
    try:
        backend = pick_backend(problem_class, spec.backend)
    except CapabilityError as exc:
        raise CapabilityError(f"the edited model is a {problem_class.upper()} (see its rows and "
                              f"objective); backend={spec.backend!r} cannot solve it: {exc} Set "
                              f"spec.backend to one that can.") from exc
    tuned = (miqp_options(backend, options, spec.model if ours else None, spec.bound_cap)
             if backend.name == "scip" else exact_options(backend, options))
    out = backend.solve(spec.model, problem_class, tuned, deadline=deadline,
                        progress=progress.solver_callback())
    boxed = ours and spec.bound_cap is not None
    for _ in range(WIDENINGS):   # no solution below the box's level: widen the box, solve again
        if not boxed or spec.widen is None or out.status not in (Status.OPTIMAL, Status.GAP_LIMIT, Status.INFEASIBLE):
            break
        if out.has_solution:
            level = spec.objective(spec.decode(spec.model)) / spec.objective_scale
            if level <= spec.bound_cap:
                break
        else:   # infeasible in the box: a solution may lie beyond it
            level = WIDENING_FACTOR * spec.bound_cap
        spec.widen(spec.model, level)
        spec.bound_cap = level
        spec.remember_structure()   # the widened box is the estimator's own
        out = backend.solve(spec.model, problem_class, tuned, deadline=deadline,
                            progress=progress.solver_callback())
    native = {"solver": out.solver, "solver_version": out.solver_version,
              "backend_status": out.status, "problem_class": problem_class, **out.native,
              "bound": f"{out.solver}'s dual bound of the edited model, lowered by its "
                       f"dual-tolerance margin" + (", capped at the Big-M box's level" if boxed else ""),
              "objective_name": OWN_OBJECTIVE if ours
              else f"user objective {objective.name!r} (model scale)" if objective is not spec.objective_component
              else f"the model's objective {objective.name!r} as edited (model scale)"}
    if not out.has_solution:
        native["bound"] = f"{NO_BOUND}: {out.solver} found no solution ({out.status})"
        if out.status == Status.INFEASIBLE and boxed:   # proven only inside the box, unless ...
            if _contradictory(spec, backend, tuned, deadline):
                native["infeasible"] = ("proven without the Big-M box: the rows contradict each "
                                        "other whatever the coefficients")
                return SolverRun(None, math.nan, None, Status.INFEASIBLE, progress.rows, native)
            native["infeasible"] = (f"no solution with F / objective_scale <= {spec.bound_cap!r} "
                                    f"(the level the widest box was proven for); beyond it "
                                    f"nothing is proven")
            return SolverRun(None, math.nan, None, Status.ITERATION_LIMIT, progress.rows, native)
        if out.status == Status.INFEASIBLE:
            native["infeasible"] = ("the backend proved the edited model infeasible: its rows "
                                    "contradict each other; remove or relax the rows you added")
            return SolverRun(None, math.nan, None, Status.INFEASIBLE, progress.rows, native)
        # stopped on its own criterion, yet without a solution: a failure
        failed = out.status in (Status.OPTIMAL, Status.GAP_LIMIT)
        return SolverRun(None, math.nan, None, Status.ERROR if failed else out.status, progress.rows, native)
    margin = dual_bound_margin(_bound_mass(spec.model), backend.dual_tolerance(tuned))
    bound = None if out.bound is None else out.bound - margin
    if bound is None:
        native["bound"] = f"{NO_BOUND}: {out.solver} stopped ({out.status}) without a dual bound"
    estimate = spec.decode(spec.model)
    if not ours:
        progress.update(float(pyo.value(objective)), bound, out.native["nodes"], force=True)
        return SolverRun(estimate, float(pyo.value(objective)), bound, out.status, progress.rows, native)
    if bound is not None and spec.bound_cap is not None:
        bound = min(bound, spec.bound_cap)
    bound = spec.inverse.value(bound)
    progress.update(spec.objective(estimate), bound, out.native["nodes"], force=True)
    return SolverRun(estimate, spec.objective(estimate), bound, out.status, progress.rows, native)


def _nargs(expr) -> int:
    """The number of top-level terms of an expression (0 for a leaf): an in-place append to a
    sum changes it."""
    return expr.nargs() if hasattr(expr, "nargs") else 0


def _contradictory(spec: ModelSpec, backend, options, deadline) -> bool:
    """Whether ``spec.unboxed`` of the model (a relaxation: no box, no rows tying beta to z, a
    zero objective) is proven infeasible, which proves the edited model infeasible."""
    if spec.unboxed is None:
        return False
    relaxed = spec.unboxed(spec.model.clone())
    return backend.solve(relaxed, _problem_class(relaxed), options, deadline=deadline).status == Status.INFEASIBLE


def _active_objective(model: pyo.Block):
    objectives = list(model.component_data_objects(pyo.Objective, active=True))
    if len(objectives) != 1:
        raise InvalidParameterError(
            f"the edited model has {len(objectives)} active objectives "
            f"({', '.join(o.name for o in objectives) or 'none'}); exactly one must be active: "
            f"deactivate the others with model.<name>.deactivate().")
    if objectives[0].sense != pyo.minimize:
        raise InvalidParameterError(
            f"the edited model maximizes {objectives[0].name!r}; the result certifies a lower bound "
            f"of a minimization: minimize its negation instead (sense=pyo.minimize).")
    return objectives[0]


def _problem_class(model: pyo.Block) -> str:
    """The narrowest class of the model as it stands (``backends.PROBLEM_CLASSES``)."""
    rows = [c.body.polynomial_degree() for c in model.component_data_objects(pyo.Constraint, active=True)]
    objective = _active_objective(model).expr.polynomial_degree()
    if None in rows or objective is None:
        kind = "nlp"
    elif max(rows, default=0) > 2 or objective > 2:
        kind = "nlp"
    elif max(rows, default=0) == 2:
        kind = "qcp"
    else:
        kind = "qp" if objective == 2 else "lp"
    integer = any(not v.is_continuous() and not v.fixed
                  for v in model.component_data_objects(pyo.Var, active=True))
    return _MIXED[kind] if integer else kind


def _bound_mass(model: pyo.Block) -> SimpleNamespace:
    """The columns and largest finite bound of the edited model (rows, columns and the model's
    own ``largest_bound``, which covers the rows a solver derives from the objective), for
    ``dual_bound_margin``."""
    values = [abs(pyo.value(b)) for c in model.component_data_objects(pyo.Constraint, active=True)
              for b in (c.lower, c.upper) if b is not None]
    values += [abs(b) for v in model.component_data_objects(pyo.Var) for b in v.bounds
               if b is not None]
    finite = [b for b in values if math.isfinite(b)]
    return SimpleNamespace(n_columns=model.nvariables(),
                           largest_bound=max([getattr(model, "largest_bound", 0.0), *finite]))


def indexed_values(model: pyo.Block, name: str, *shape: int) -> np.ndarray:
    """The solved values of the variable ``name`` indexed by ``shape`` ranges, as an array; an
    error naming it when the edited model lost it or the solver did not see it."""
    var = model.component(name)
    if not isinstance(var, pyo.Var):
        raise InvalidParameterError(
            f"the edited model has no variable {name!r}: the estimate is read from it; keep it "
            f"(add constraints on it instead of deleting or renaming it).")
    values = np.full(shape, np.nan)
    for index in np.ndindex(*shape):
        key = index[0] if len(index) == 1 else index
        if key in var and var[key].value is not None:
            values[index] = var[key].value
    if np.isnan(values).any():
        raise InvalidParameterError(
            f"the edited model left {name}[{np.argwhere(np.isnan(values))[0].tolist()}] without a "
            f"value (is it still in an active constraint or the objective?); the estimate is read "
            f"from every {name}.")
    return values
