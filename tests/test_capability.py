"""Every refusal of the ARMUL, MOLAR and sparse method tables happens in ``check()``, before any
model is built, for every backend (Gurobi included, though gurobipy is not installed here), and
``mtl-opt validate`` exits 2 on it.  What is refused is stated here from DESIGN.md's backend table
and the methods' documented scopes, not read from the tables under test."""

import dataclasses
import itertools

import numpy as np
import pytest

from cli_runner import run_cli
from mtl_opt.data import MultiTaskData
from mtl_opt.errors import CapabilityError, InvalidParameterError, SolverUnavailableError
from mtl_opt.estimators import ARMUL, MOLAR, SparseMTL
from mtl_opt.formulations import armul as armul_formulation
from mtl_opt.formulations import molar as molar_formulation
from mtl_opt.solvers.armul import methods as armul_methods
from mtl_opt.solvers.molar import methods as molar_methods
from mtl_opt.solvers.sparse import oa, methods as sparse_methods
from mtl_opt.solvers.backends import BACKENDS, Backend, GurobiBackend

BACKEND_NAMES = (None, *BACKENDS)

#: DESIGN.md's table: what each backend solves.
SOLVES = {"highs": {"lp", "milp", "qp"},
          "scip": {"lp", "milp", "qp", "miqp", "qcp", "miqcp", "nlp"},
          "gurobi": {"lp", "milp", "qp", "miqp", "qcp", "miqcp"}}


class Built(Exception):
    """A model builder or a method's solve ran: check() let the fit start."""


@pytest.fixture
def no_models(monkeypatch):
    """Every Pyomo model builder of the three families, and every method's solve, raise Built."""
    def built(*args, **kwargs):
        raise Built

    for module, name in [(armul_formulation, "build_vanilla_model"),
                         (armul_formulation, "build_clustered_model"),
                         (molar_formulation, "build_median_lp"),
                         (oa, "build_feasibility"), (oa, "build_master"), (oa, "build_miqp")]:
        monkeypatch.setattr(module, name, built)
    for table in (armul_methods.METHODS, molar_methods.METHODS, sparse_methods.METHODS):
        for name, method in list(table.items()):
            monkeypatch.setitem(table, name, dataclasses.replace(method, solve=built))


def _data(K, n, p, *, logistic=False, constant_in_first=False, seed=0):
    rng = np.random.default_rng(seed)
    Xs = [rng.normal(size=(n, p)) for _ in range(K)]
    if constant_in_first:
        Xs[0][:, 0] = 1.0
    ys = [X @ rng.normal(size=p) + rng.normal(size=n) for X in Xs]
    if logistic:
        ys = [(y > np.median(y)).astype(float) for y in ys]
    return MultiTaskData(Xs, ys)


# --- the refusals, stated from the documentation -------------------------------------------

#: The problem class ARMUL's exact path hands a backend (clustered: the assignment tree, none;
#: low-rank: no exact method).
ARMUL_MODELS = {("vanilla", "squared"): "qcp", ("vanilla", "logistic"): "nlp",
                ("clustered", "squared"): None, ("clustered", "logistic"): None}


def armul_refused(structure, loss, algorithm, backend, case):
    if algorithm == "prox":
        return backend is not None   # runs in numpy
    if (structure, loss) not in ARMUL_MODELS:
        return True
    kind = ARMUL_MODELS[structure, loss]
    if kind is None:   # no model (the clustered tree): any backend named is refused alike
        return backend is not None or case == "rank-deficient task"
    return backend == "highs" or kind not in SOLVES[backend or "scip"]


def sparse_refused(algorithm, backend, case, variant):
    flat = case == "n_k <= p, no ridge"
    if algorithm == "exact":
        return all(sparse_refused(name, backend, case, variant)
                   for name in ("bnb", "oa_single_tree", "oa_multi_tree", "miqp"))
    if algorithm == "bcd":
        return backend is not None
    if algorithm == "bnb":
        return (backend is not None or flat or case == "at_most"
                or (case == "signs" and variant in ("bbar", "zbar_bbar"))
                or (case == "Bbar, K = 9" and variant == "bbar"))
    runs_on = {"oa_multi_tree": ("highs", "scip", "gurobi"), "oa_single_tree": ("scip",),
               "miqp": ("scip",)}[algorithm]
    if backend is not None and backend not in runs_on:
        return True
    return flat or (case == "signs" and algorithm != "miqp")


def molar_refused(algorithm, backend):
    return algorithm == "closed_form" and backend is not None


# --- the grid --------------------------------------------------------------------------------

ARMUL_CASES = {"plain": ({}, {}), "c = 0": ({"c": 0.0}, {}),
               "rank-deficient task": ({}, {"constant_in_first": True})}
ARMUL_GRID = [(structure, loss, algorithm, backend, case)
              for structure, loss, algorithm, backend, case in itertools.product(
                  ("vanilla", "clustered", "lowrank"), ("squared", "logistic"), ("prox", "exact"),
                  BACKEND_NAMES, ARMUL_CASES)
              if case == "plain" or (structure, algorithm) == ("clustered", "exact")]

SPARSE_CASES = {
    "plain": ({"lambda_ridge": 0.1}, {}),
    "n_k <= p, no ridge": ({"lambda_ridge": 0.0}, {"n": 4}),
    "signs": ({"lambda_ridge": 0.1, "constraints": [{"kind": "nonnegative", "features": ["x0"]}]}, {}),
    "at_most": ({"lambda_ridge": 0.1,
                 "constraints": [{"kind": "at_most", "features": ["x0", "x1"], "count": 1}]}, {}),
    "Bbar, K = 9": ({"lambda_ridge": 0.1, "lambda_bbar": 0.5}, {"K": 9}),
}
SPARSE_GRID = [(algorithm, backend, case)
               for algorithm, backend, case in itertools.product(
                   sparse_methods.NAMES, BACKEND_NAMES, SPARSE_CASES)]
MOLAR_GRID = list(itertools.product(molar_methods.METHODS, BACKEND_NAMES))


def armul_setting(structure, loss, algorithm, backend, case):
    params, shape = ARMUL_CASES[case]
    data = _data(4, 30, 3, logistic=loss == "logistic", **shape)
    params = {"structure": structure, "loss": loss, "algorithm": algorithm, "backend": backend,
              "n_components": None if structure == "vanilla" else 2, **params}
    return ARMUL(**params), data


def sparse_setting(algorithm, backend, case):
    params, shape = SPARSE_CASES[case]
    shape = {"K": 3, "n": 30, **shape}
    variant = "bbar" if "lambda_bbar" in params else "l0l2"
    params = {"variant": variant, "s": 2, "algorithm": algorithm, "backend": backend, **params}
    return SparseMTL(**params), _data(shape["K"], shape["n"], 6)


def molar_setting(algorithm, backend):
    return MOLAR(algorithm=algorithm, backend=backend), _data(4, 30, 3)


SETTINGS = ([("armul", key, armul_setting(*key), armul_refused(*key)) for key in ARMUL_GRID]
            + [("sparse_mtl", key, sparse_setting(*key),
                sparse_refused(*key, "bbar" if key[2] == "Bbar, K = 9" else "l0l2"))
               for key in SPARSE_GRID]
            + [("molar", key, molar_setting(*key), molar_refused(*key)) for key in MOLAR_GRID])
REFUSED = [(family, key, setting) for family, key, setting, refused in SETTINGS if refused]
ACCEPTED = [(family, key, setting) for family, key, setting, refused in SETTINGS if not refused]


def _id(entry):
    return f"{entry[0]}-" + "-".join(map(str, entry[1]))


def test_the_grid_covers_every_method_backend_and_the_issue_example():
    assert len(REFUSED) > 100 and len(ACCEPTED) > 30
    refused = {(family, key) for family, key, _ in REFUSED}
    assert ("armul", ("vanilla", "logistic", "exact", "gurobi", "plain")) in refused
    for family, table in (("armul", armul_methods.METHODS), ("molar", molar_methods.METHODS),
                          ("sparse_mtl", sparse_methods.METHODS)):
        for name in table:
            for backend in BACKEND_NAMES:
                assert any(f == family and name in key and backend in key
                           for f, key, _, _ in SETTINGS), (family, name, backend)


@pytest.mark.parametrize("family, key, setting", REFUSED, ids=map(_id, REFUSED))
def test_every_refusal_happens_in_check_before_any_model(no_models, family, key, setting):
    """Refused in check() with the package's refusal errors (exit 2), whether or not the backend
    is installed; no builder ran (a Built would escape ``pytest.raises``)."""
    estimator, data = setting
    with pytest.raises((InvalidParameterError, CapabilityError)):
        estimator.check(data)


@pytest.mark.parametrize("family, key, setting", ACCEPTED, ids=map(_id, ACCEPTED))
def test_an_accepted_setting_passes_check_without_a_model(no_models, monkeypatch, family, key,
                                                          setting):
    """check() accepts it (Gurobi: once it is available), builds nothing; then the fit reaches a
    model or a method's solve (Built) without any later refusal."""
    monkeypatch.setattr(GurobiBackend, "available", lambda self: True)
    estimator, data = setting
    estimator.check(data)
    with pytest.raises(Built):
        estimator.fit(data)


def test_without_gurobi_an_accepted_gurobi_setting_is_unavailable_not_refused(no_models):
    if GurobiBackend().available():
        pytest.skip("gurobipy is installed here")
    estimator, data = armul_setting("vanilla", "squared", "exact", "gurobi", "plain")
    with pytest.raises(SolverUnavailableError, match="Gurobi"):
        estimator.check(data)


@pytest.mark.parametrize("structure, loss, backend, kind", [
    ("vanilla", "squared", "scip", "qcp"), ("vanilla", "logistic", "scip", "nlp"),
    ("vanilla", "squared", "gurobi", "qcp")])
def test_the_exact_model_is_the_class_check_accepted(monkeypatch, structure, loss, backend, kind):
    """The backend receives the exact model as the problem class check() decided on (its own
    capability check passes), and the model is solved as that class."""
    monkeypatch.setattr(GurobiBackend, "available", lambda self: True)
    asked = []

    def solve(self, model, problem_class, *args, **kwargs):
        self.check(problem_class)
        asked.append((self.name, problem_class))
        raise Built

    monkeypatch.setattr(Backend, "solve", solve)
    estimator, data = armul_setting(structure, loss, "exact", backend, "plain")
    with pytest.raises(Built):
        estimator.fit(data)
    assert asked == [(backend, kind)]


@pytest.mark.parametrize("family, key, setting", REFUSED, ids=map(_id, REFUSED))
def test_mtl_opt_validate_exits_2_on_a_refusal(no_models, tmp_path, family, key, setting):
    estimator, data = setting
    data.to_csv(tmp_path / "data.csv")
    params = {k: v for k, v in estimator.get_params(deep=False).items()
              if v is not None and k not in ("solve_options", "constraints")}
    backend = params.pop("backend", None)
    lines = ['[data]', 'path = "data.csv"', 'task = "task"', 'response = "y"', '',
             '[method]', f'name = "{family}"', *(f"{k} = {_toml(v)}" for k, v in params.items())]
    if backend is not None:
        lines += ['', '[solve]', f'backend = "{backend}"']
    for constraint in estimator.get_params().get("constraints") or []:
        lines += ['', '[[constraints]]', *(f"{k} = {_toml(v)}" for k, v in constraint.items())]
    (tmp_path / "x.toml").write_text("\n".join(lines) + "\n")
    run = run_cli("validate", tmp_path / "x.toml")
    assert run.returncode == 2, run.stderr
    assert "Traceback" not in run.stderr


def _toml(value):
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, list):
        return "[" + ", ".join(map(_toml, value)) + "]"
    return repr(value)
