"""What keeps a vanilla ARMUL fit cheap (issue 50) without weakening its certificate: the gap
checks screened by a Gram-space estimate, the float-safety terms proven only where a check can
close (and at the last check always), the pooled column statistics computed once per fit."""

import numpy as np
import pytest

import mtl_opt.data.scaling as scaling
import mtl_opt.identifiability as identifiability
from mtl_opt.data import MultiTaskData
from mtl_opt.deadline import Deadline
from mtl_opt.errors import InvalidParameterError
from mtl_opt.estimators import ARMUL
from mtl_opt.formulations.armul import ArmulProblem
from mtl_opt.solvers.armul.prox import fista
from mtl_opt.synthetic import armul_simulation


def tasks(seed, m=5, d=4, level=0.0, intercept=False):
    """Tasks of unequal sizes (padding rows in the problem), optionally a column of ones."""
    rng = np.random.default_rng(seed)
    Xs = [rng.standard_normal((int(n), d)) for n in rng.integers(12, 30, size=m)]
    center = rng.standard_normal(d)
    ys = [X @ (center + 0.5 * rng.standard_normal(d)) + level + rng.standard_normal(len(X))
          for X in Xs]
    if intercept:
        Xs = [np.hstack([np.ones((len(X), 1)), X]) for X in Xs]
    return Xs, ys


def counting(monkeypatch, owner, name, when=lambda *args, **kwargs: True):
    """Replace ``owner.name`` by a wrapper counting the calls ``when`` accepts (a list)."""
    calls, original = [], getattr(owner, name)

    def wrapper(*args, **kwargs):
        if when(*args, **kwargs):
            calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, wrapper)
    return calls


def rowwise_gap(problem, Xs, ys, theta, center):
    """F and the (unsafe) dual value of ``dual_bound``'s vanilla point, from the rows in plain
    numpy: beta from the pooled normal equations, s_j = t c_j (X_j (theta_j - beta) - y_j)."""
    w, lam = problem.w, problem.lam
    pooled = sum(wj * X.T @ X / len(X) for wj, X in zip(w, Xs))
    grad = sum(wj * X.T @ (X @ th - y) / len(X) for wj, X, y, th in zip(w, Xs, ys, theta))
    beta = np.linalg.solve(pooled, grad)
    s = [wj / len(X) * (X @ (th - beta) - y) for wj, X, y, th in zip(w, Xs, ys, theta)]
    t = min(1.0, min(wj * lj / np.linalg.norm(X.T @ sj) for wj, lj, X, sj in zip(w, lam, Xs, s)))
    dual = -sum(np.sum(t * sj * y + (t * sj) ** 2 / (2 * wj / len(X)))
                for wj, X, y, sj in zip(w, Xs, ys, s))
    primal = sum(wj * (np.sum((y - X @ th) ** 2) / (2 * len(X)) + lj * np.linalg.norm(th - center))
                 for wj, lj, X, y, th in zip(w, lam, Xs, ys, theta))
    return primal, dual


@pytest.mark.parametrize("seed, level, intercept",
                         [(0, 0.0, False), (1, 0.0, True), (2, 50.0, True)])
def test_gap_estimate_agrees_with_the_rows_within_its_allowance(seed, level, intercept):
    """The Gram-space objective and dual value equal the row-by-row ones to within the
    allowance, at the start, mid-way and at the optimum; the allowance stays below the default
    tolerance (y with a level of 50 included), so the screen does skip checks."""
    Xs, ys = tasks(seed, level=level, intercept=intercept)
    problem = ArmulProblem.from_tasks(Xs, ys, c=0.8)
    for iters in (1, 20, 2000):
        run = fista(problem, rel_gap=1e-13, max_iter=iters, check_every=10**6, deadline=Deadline())
        primal, dual, allowance = problem.gap_estimate(run.theta, run.centers[0])
        rows = rowwise_gap(problem, Xs, ys, run.theta, run.centers[0])
        assert abs(primal - rows[0]) <= allowance and abs(dual - rows[1]) <= allowance
        assert allowance <= 1e-7 * abs(primal)   # a tenth of the default rel_gap


def test_gap_estimate_is_none_without_a_quadratic_form():
    Xs, ys = tasks(0)
    labels = [(y > np.median(y)).astype(float) for y in ys]
    theta, center = np.zeros((len(Xs), Xs[0].shape[1])), np.zeros(Xs[0].shape[1])
    assert ArmulProblem.from_tasks(Xs, labels, loss="logistic").gap_estimate(theta, center) is None
    assert ArmulProblem.from_tasks(Xs, ys, c=0.0).gap_estimate(theta, center) is None


@pytest.mark.parametrize("loss", ["squared", "logistic"])
def test_a_vanilla_fit_proves_its_bound_at_the_checks_that_can_close(monkeypatch, loss):
    """A fit of Section 5.1's shape runs tens of iterations (a check every 10); a check is made
    (squared loss) and its float-safety terms computed (both losses) only where it can close,
    and the certificate is what it was: optimal within 1e-6, every logged bound below its
    objective."""
    sim = armul_simulation("vanilla", m=10, delta=1.0, seed=0)
    data = sim.data if loss == "squared" else MultiTaskData(
        sim.data.Xs, [(y > np.median(y)).astype(float) for y in sim.data.ys])
    bounds = counting(monkeypatch, ArmulProblem, "dual_bound")
    proofs = counting(monkeypatch, ArmulProblem, "_violation")
    result = ARMUL(c=1.0, loss=loss, fit_intercept=False, standardize=False).fit(data).result_
    assert result.status == "optimal" and 0 <= result.rel_gap <= 1e-6
    checks = result.native["n_iter"] // 10
    assert checks >= 4 and 1 <= len(proofs) <= 2, (checks, len(proofs))
    # the squared loss's checks are screened (``gap_estimate``); the logistic loss has no screen
    assert len(bounds) <= 2 if loss == "squared" else len(bounds) == checks
    assert all(row["lower_bound"] is None or row["lower_bound"] <= row["objective"]
               for row in result.log)


@pytest.mark.parametrize("stop", ["iteration_limit", "time_limit"])
def test_a_stopped_fista_still_proves_its_bound(stop):
    """The last check proves its bound whatever the screen says: a run cut by max_iter or the
    deadline reports a proven bound, below the optimum of a converged run."""
    problem = ArmulProblem.from_tasks(*tasks(3), c=0.8)
    optimum = fista(problem, rel_gap=1e-12, max_iter=100000, deadline=Deadline()).objective
    if stop == "iteration_limit":
        run = fista(problem, max_iter=25, deadline=Deadline())
    else:
        run = fista(problem, deadline=Deadline(0.0))
    assert run.status == stop and run.lower_bound is not None
    assert run.lower_bound <= optimum <= run.objective
    assert run.log[-1]["lower_bound"] == run.lower_bound


def test_a_standardized_fit_computes_the_pooled_statistics_once(monkeypatch):
    """One centring of the stacked design per fit, and no constancy test of it apart from the
    scaler's (ARMUL once stacked the tasks again to test them itself)."""
    data = armul_simulation("vanilla", m=6, n=40, d=5, delta=0.5, seed=0).data
    pooled = lambda X, *args, **kwargs: np.ndim(X) == 2 and len(X) == data.n_total
    centrings = counting(monkeypatch, scaling, "centring", pooled)
    constancy = counting(monkeypatch, identifiability, "constant_columns", pooled)
    ARMUL(c=1.0, fit_intercept=True, standardize=True).fit(data)
    assert len(centrings) == 1 and len(constancy) == 0


def test_a_feature_constant_over_all_tasks_is_refused_only_when_standardizing():
    Xs, ys = tasks(4)
    for X in Xs:
        X[:, 1] = 3.0
    data = MultiTaskData(Xs, ys)
    _, scaler = data.standardize(how="pooled")
    assert scaler.constant.tolist() == [[False, True, False, False]] * data.n_tasks
    Xs[0][0, 1] = 4.0                       # no longer constant overall, still in tasks 1..4
    _, scaler = MultiTaskData(Xs, ys).standardize(how="task")
    assert scaler.constant[:, 1].tolist() == [False] + [True] * (data.n_tasks - 1)
    with pytest.raises(InvalidParameterError, match="constant over all tasks"):
        ARMUL(c=1.0, standardize=True).fit(data)
    plain = ARMUL(c=1.0, fit_intercept=False, standardize=False).fit(data).result_
    assert plain.status == "optimal"


def test_from_tasks_writes_the_intercept_column_in_place():
    Xs, ys = tasks(5)
    widened = ArmulProblem.from_tasks([np.hstack([np.ones((len(X), 1)), X]) for X in Xs], ys)
    direct = ArmulProblem.from_tasks(Xs, ys, intercept=True)
    np.testing.assert_array_equal(direct.X, widened.X)
    np.testing.assert_array_equal(direct.lam, widened.lam)
