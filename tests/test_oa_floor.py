"""Multi-tree OA on a tiny instance has a positive proven bound after its first iteration
(issue 50): its master holds ``floor_cut``, c at the full support, below c(z) for every z."""

import itertools

import numpy as np
import pytest

from mtl_opt.data import MultiTaskData
from mtl_opt.deadline import Deadline
from mtl_opt.formulations.sparse import SparseProblem
from mtl_opt.solvers.sparse import oa
from mtl_opt.solvers.backends import get_backend
from mtl_opt.solvers.sparse.bcd import fit_bcd
from mtl_opt.solvers.options import SolveOptions
from test_sparse import brute_force_optimum


def tiny_problem(variant, seed, K=2, p=8, n=6, s=2):
    """Fewer rows than features and a small ridge: lambda_ridge + mu is small, so each cut at a
    support falls below 0 at the others, and cuts at supports alone left the bound at 0."""
    rng = np.random.default_rng(seed)
    truth = np.zeros(p)
    truth[rng.choice(p, s, replace=False)] = rng.uniform(0.5, 1.5, s)
    Xs = [rng.normal(size=(n, p)) for _ in range(K)]
    ys = [X @ truth + rng.normal(size=n) for X in Xs]
    return SparseProblem.from_data(MultiTaskData(Xs, ys), variant=variant, s=s, fit_intercept=False,
                                   lambda_ridge=0.001, lambda_bbar=0.3 if variant == "bbar" else 0.0)


@pytest.mark.parametrize("variant", ["bbar", "l0l2"])
@pytest.mark.parametrize("backend", ["highs", "scip"])
def test_the_first_iteration_has_a_positive_bound_below_the_optimum(variant, backend):
    problem = tiny_problem(variant, 0)
    optimum = brute_force_optimum(problem)
    run = oa.solve_oa(problem, get_backend(backend), SolveOptions(time_limit=120),
                      fit_bcd(problem, deadline=Deadline()).coef, max_iter=1, deadline=Deadline(120))
    assert run.lower_bound is not None and 0 < run.lower_bound <= optimum + 1e-9 * optimum
    assert run.objective >= optimum - 1e-9 * optimum


@pytest.mark.parametrize("variant", ["bbar", "l0l2"])
def test_the_floor_cut_is_below_c_at_every_support(variant):
    """The floor's total is positive and at most F (= c: no Zbar term) at every support of
    size s, enumerated."""
    problem = tiny_problem(variant, 1, K=2, p=6, n=5)
    floor = float(np.sum(oa.floor_cut(problem).constant))
    K, p, s = problem.n_tasks, problem.n_features, problem.s
    rows = [np.isin(np.arange(p), cols) for cols in itertools.combinations(range(p), s)]
    values = [problem.objective(problem.refit(np.array(pair)), np.array(pair))
              for pair in itertools.product(rows, repeat=K)]
    assert 0 < floor <= min(values) * (1 + 1e-12)
