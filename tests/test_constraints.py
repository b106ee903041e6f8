"""Built-in side constraints (#21): refusals, bcd's feasibility and value against an enumeration,
instance files with [[constraints]] tables."""

import json

import numpy as np
import pytest
from cli_runner import run_cli
from constrained_reference import constrained_optimum

from mtl_opt.cli import ExitCode
from mtl_opt.data import MultiTaskData
from mtl_opt.errors import InvalidParameterError
from mtl_opt.estimators import SparseMTL
from mtl_opt.formulations.sparse import SparseProblem
from mtl_opt.identifiability import unidentified_mask
from mtl_opt.result import FitResult

PENALTIES = {"l0l2": {}, "zbar_l2": {"lambda_zbar": 0.05}, "bbar": {"lambda_bbar": 0.5},
             "cs_l2": {}, "cs_bbar": {"lambda_bbar": 0.5}}
#: Each kind, chosen to bind on ``tiny_data`` (its unconstrained fits break every one).
KINDS = {
    "include": [{"kind": "include", "features": ["x3"]}],
    "exclude": [{"kind": "exclude", "features": ["x0"], "tasks": ["t0"]}],
    "at_most": [{"kind": "at_most", "features": ["x0", "x1", "x2"], "count": 1}],
    "at_least": [{"kind": "at_least", "features": ["x3", "x4", "x5"], "count": 2}],
    "nonnegative": [{"kind": "nonnegative", "features": ["x1", "x0"]}],
    "nonpositive": [{"kind": "nonpositive", "features": ["x0", "x2"]}],
    "bounds": [{"kind": "bounds", "features": ["x0"], "lower": -0.2, "upper": 0.3},
               {"kind": "bounds", "features": ["x4"], "lower": 0.6}],
    "shared_support": [{"kind": "shared_support", "tasks": ["t0", "t1"]}],
    "mix": [{"kind": "include", "features": ["x5"], "tasks": ["t1"]},
            {"kind": "at_most", "features": ["x0", "x1"], "count": 1},
            {"kind": "nonnegative", "features": ["x2"]},
            {"kind": "shared_support", "tasks": ["t0", "t1"], "features": ["x1", "x2", "x3"]}],
}


def tiny_data(K=2, p=6, rows=(12, 4, 9), seed=1):
    """K tasks on p features, n_k above and below p; features x0.., tasks t0.."""
    rng = np.random.default_rng(seed)
    beta = np.array([1.5, -1.0, 0.8, 0.0, 0.5, -0.3, 0.2][:p])
    Xs = [rng.normal(size=(n, p)) * rng.uniform(0.5, 3.0, size=p) for n in rows[:K]]
    ys = [X @ (beta + 0.3 * rng.normal(size=p)) + rng.normal(size=len(X)) for X in Xs]
    return MultiTaskData(Xs, ys, task_names=[f"t{k}" for k in range(K)],
                         feature_names=[f"x{j}" for j in range(p)])


def violations(coef, constraints, s, common):
    """What ``coef`` (original scale) breaks, read from the constraint dicts directly: names are
    x<j> and t<k>; a pair is in task k's support when non-zero or included there."""
    K, p = coef.shape
    idx = lambda names, n: list(range(n)) if names is None else [int(a[1:]) for a in names]  # noqa: E731
    support = coef != 0
    for c in constraints:
        if c["kind"] == "include":
            support[np.ix_(idx(c.get("tasks"), K), idx(c["features"], p))] = True
    if common:
        support[:] = support.any(axis=0)
    broken = [f"task {k} holds {n} > s" for k, n in enumerate(support.sum(axis=1)) if n > s]
    for c in constraints:
        tasks, features = idx(c.get("tasks"), K), idx(c.get("features"), p)
        block = coef[np.ix_(tasks, features)]
        held = support[np.ix_(tasks, features)].sum(axis=1)
        low = {"nonnegative": 0.0}.get(c["kind"], c.get("lower", -np.inf))
        high = {"nonpositive": 0.0}.get(c["kind"], c.get("upper", np.inf))
        tol = 1e-9 * np.maximum(1.0, np.abs(block))
        broken += [f"{c}" for bad in (
            c["kind"] == "exclude" and np.any(block != 0),
            c["kind"] == "at_most" and np.any(held > c["count"]),
            c["kind"] == "at_least" and np.any(held < c["count"]),
            c["kind"] == "shared_support" and np.any(support[tasks][:, features] != support[tasks[0], features]),
            np.any(block < low - tol) or np.any(block > high + tol)) if bad]
    return broken


def reference(data, variant, s, constraints, lambda_ridge=0.05):
    """The enumerated constrained optimum on the standardized data SparseMTL fits."""
    std, scaler = data.standardize(how="task", center=True, scale=True)
    plain = SparseProblem.from_data(std, variant=variant, s=s, lambda_ridge=lambda_ridge,
                                    excluded=unidentified_mask(data.Xs, True, collinear=False),
                                    **PENALTIES[variant])
    return constrained_optimum(plain, constraints, scaler.x_scale, std.feature_names)[0]


@pytest.mark.parametrize("variant", list(PENALTIES))
@pytest.mark.parametrize("kind", list(KINDS))
def test_bcd_is_feasible_and_no_better_than_the_enumerated_optimum(variant, kind):
    data, constraints, s = tiny_data(), KINDS[kind], 2
    unconstrained = SparseMTL(variant=variant, s=s, lambda_ridge=0.05, **PENALTIES[variant]).fit(data)
    trivial = kind == "shared_support" and variant not in ("l0l2", "zbar_l2")   # shared anyway
    assert trivial or violations(unconstrained.coef_, constraints, s, variant.startswith("cs_")), \
        "the constraint must bind"
    est = SparseMTL(variant=variant, s=s, lambda_ridge=0.05, constraints=constraints,
                    **PENALTIES[variant]).fit(data)
    assert violations(est.coef_, constraints, s, variant.startswith("cs_")) == []
    assert est._problem(data)[0].feasible(est.result_.extra["coef_fitted"])   # what OA starts from
    assert est.result_.objective >= reference(data, variant, s, constraints) * (1 - 1e-9)


@pytest.mark.parametrize("variant, kind", [("l0l2", "mix"), ("cs_bbar", "bounds"), ("zbar_l2", "at_least")])
def test_a_warm_start_that_breaks_the_constraints_is_projected_onto_them(variant, kind):
    data, constraints, s = tiny_data(), KINDS[kind], 2
    unconstrained = SparseMTL(variant=variant, s=s, lambda_ridge=0.05, **PENALTIES[variant]).fit(data)
    warm = SparseMTL(variant=variant, s=s, lambda_ridge=0.05, constraints=constraints, local_search=False,
                     max_iter=1, **PENALTIES[variant]).fit(data, init=unconstrained.result_)
    assert violations(warm.coef_, constraints, s, variant.startswith("cs_")) == []
    assert warm.result_.objective >= reference(data, variant, s, constraints) * (1 - 1e-9)


@pytest.mark.parametrize("variant", ["l0l2", "zbar_l2"])
def test_three_tasks_two_sharing_a_support(variant):
    data, s = tiny_data(K=3, p=5), 2
    constraints = [{"kind": "shared_support", "tasks": ["t0", "t2"]},
                   {"kind": "at_least", "features": ["x3", "x4"], "count": 1, "tasks": ["t1"]},
                   {"kind": "nonnegative", "features": ["x1"]}]
    est = SparseMTL(variant=variant, s=s, lambda_ridge=0.05, constraints=constraints,
                    **PENALTIES[variant]).fit(data)
    assert violations(est.coef_, constraints, s, False) == []
    assert est.result_.objective >= reference(data, variant, s, constraints) * (1 - 1e-9)


@pytest.mark.parametrize("constraints, s, phrase", [
    ([{"kind": "inclde", "features": ["x0"]}], 2, "unknown constraint kind 'inclde'"),
    ([{"kind": "include", "feature": ["x0"]}], 2, "unknown key.*'feature'"),
    ([{"kind": "include", "features": ["x9"]}], 2, "constraint #1.*unknown feature 'x9'"),
    ([{"kind": "exclude", "features": ["x0"]}, {"kind": "include", "features": ["x1"], "tasks": ["t7"]}],
     2, "constraint #2.*unknown task 't7'"),
    ([{"kind": "bounds", "features": ["x0"], "lower": 1.0, "upper": 0.0}], 2, "lower <= upper"),
    ([{"kind": "nonnegative", "features": ["x0"]}, {"kind": "bounds", "features": ["x0"], "upper": -1.0}],
     2, "leave no value"),
    ([{"kind": "include", "features": ["x0"]}, {"kind": "exclude", "features": ["x0"], "tasks": ["t1"]}],
     2, r"both include \(t1, x0\) in the support .* and fix it at 0 \(exclude"),
    ([{"kind": "include", "features": ["x0"], "tasks": ["t0"]}, {"kind": "nonnegative", "features": ["x0"]},
      {"kind": "nonpositive", "features": ["x0"]}], 2, "only 0, such as nonnegative with nonpositive"),
    ([{"kind": "shared_support", "tasks": ["t0"]}], 2, "at least 2 tasks"),
    ([{"kind": "at_least", "features": ["x0", "x1", "x2"], "count": 3}], 2, "more than s = 2"),
    ([{"kind": "include", "features": ["x0", "x1"]}, {"kind": "bounds", "features": ["x2"], "lower": 1.0}],
     2, "3 features in the support of task 't0'.*but s = 2"),
    ([{"kind": "include", "features": ["x0"], "tasks": ["t0"]}, {"kind": "exclude", "features": ["x0"], "tasks": ["t1"]},
      {"kind": "shared_support", "tasks": ["t0", "t1"]}], 2, "no support of at most s = 2"),
])
def test_refusals_name_the_constraint_before_any_fit(constraints, s, phrase):
    with pytest.raises(InvalidParameterError, match=phrase):
        SparseMTL(variant="l0l2", s=s, lambda_ridge=0.05, constraints=constraints).check(tiny_data())


INSTANCE = """
[data]
path = "data.csv"
task = "task"
response = "y"

[method]
name = "{method}"
{params}

[[constraints]]
kind = "include"
features = ["x3"]

[[constraints]]
kind = "{kind}"
features = ["x0", "{feature}"]
"""


def write_instance(tmp_path, method="sparse_mtl", params='variant = "zbar_l2"\ns = 2\nlambda_ridge = 0.05\n'
                   'lambda_zbar = 0.05', kind="nonpositive", feature="x2"):
    tiny_data().to_csv(tmp_path / "data.csv")
    path = tmp_path / "inst.toml"
    path.write_text(INSTANCE.format(method=method, params=params, kind=kind, feature=feature))
    return path


def test_instance_with_constraints_validates_solves_and_round_trips(tmp_path):
    path, out = write_instance(tmp_path), tmp_path / "r.json"
    assert run_cli("validate", path).returncode == ExitCode.OK
    proc = run_cli("solve", path, "--out", out, "--quiet")
    assert proc.returncode == ExitCode.OK, proc.stderr
    result = FitResult.from_json(out)
    stated = [{"kind": "include", "features": ["x3"]}, {"kind": "nonpositive", "features": ["x0", "x2"]}]
    assert result.params["constraints"] == stated
    assert violations(result.coef, stated, 2, False) == []
    again = FitResult.from_json(result.to_json())
    assert json.loads(again.to_json()) == json.loads(result.to_json())
    refit = SparseMTL(**{k: v for k, v in result.params.items()}).fit(tiny_data())   # re-usable as given
    assert np.array_equal(refit.coef_, result.coef)


@pytest.mark.parametrize("edit, phrase", [
    ({"feature": "x22"}, "constraint #2 ('nonpositive'): unknown feature 'x22'"),
    ({"kind": "nonpositve"}, "constraint #2: unknown constraint kind 'nonpositve'"),
    ({"method": "molar", "params": ""}, "[[constraints]] tables apply to method 'sparse_mtl'"),
])
def test_instance_constraint_typos_exit_2_with_one_line(tmp_path, edit, phrase):
    path = write_instance(tmp_path, **edit)
    for command in ("validate", "solve"):
        proc = run_cli(command, path, *(("--out", tmp_path / "r.json") if command == "solve" else ()))
        assert proc.returncode == ExitCode.INVALID_INPUT, proc.stderr
        assert proc.stderr.count("\n") == 1 and phrase in proc.stderr and str(path) in proc.stderr


@pytest.mark.parametrize("algorithm", ["bcd", "miqp"])
def test_opposite_signs_on_one_feature_exclude_it(algorithm):
    """nonnegative and nonpositive together leave the box [0, 0]: the feature is out of the
    support (an exclude), on bcd and on the exact path, which certify the optimum without it; an
    at_least group that holds it must then be met by the others."""
    data = tiny_data()
    both = [{"kind": "nonnegative", "features": ["x0"]}, {"kind": "nonpositive", "features": ["x0"]},
            {"kind": "at_least", "features": ["x0", "x5"], "count": 1}]
    est = SparseMTL(variant="zbar_l2", s=2, lambda_ridge=0.05, algorithm=algorithm, constraints=both,
                    **PENALTIES["zbar_l2"]).fit(data)
    assert np.all(est.coef_[:, 0] == 0)
    assert np.all(est.coef_[:, 5] != 0)
    excluded = [{"kind": "exclude", "features": ["x0"]}, {"kind": "include", "features": ["x5"]}]
    optimum = reference(data, "zbar_l2", 2, excluded)
    assert optimum == pytest.approx(reference(data, "zbar_l2", 2, both), rel=1e-12)
    assert est.result_.objective >= optimum * (1 - 1e-9)
    if algorithm == "miqp":
        assert est.result_.status == "optimal" and est.result_.lower_bound <= optimum * (1 + 1e-9)
