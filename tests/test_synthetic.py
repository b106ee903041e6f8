"""The MOLAR-paper generator: the structure it promises, and reproducibility."""

import numpy as np
import pytest

from mtl_opt.errors import InvalidParameterError
from mtl_opt.synthetic import sparse_heterogeneity


def test_tasks_differ_from_the_global_parameter_in_at_most_s_coordinates():
    problem = sparse_heterogeneity(d=30, M=8, n=50, s=4, seed=3)
    assert np.linalg.norm(problem.global_coef) == pytest.approx(1.0)
    assert np.allclose(np.linalg.norm(problem.coef, axis=1), 1.0)
    assert np.all(np.count_nonzero(problem.coef != problem.global_coef, axis=1) <= 4)
    assert np.any(problem.coef != problem.global_coef)


def test_noise_level_matches_sigma():
    problem = sparse_heterogeneity(d=5, M=2, n=20000, s=1, sigma=0.3, seed=0)
    for coef, X, y in zip(problem.coef, problem.data.Xs, problem.data.ys):
        assert np.std(y - X @ coef) == pytest.approx(0.3, rel=0.03)


def test_same_seed_same_data_and_different_seed_different_data():
    a, b, c = (sparse_heterogeneity(d=4, M=3, n=[5, 6, 7], s=1, seed=s) for s in (1, 1, 2))
    assert all(np.array_equal(x, y) for x, y in zip(a.data.Xs, b.data.Xs))
    assert np.array_equal(a.coef, b.coef) and not np.array_equal(a.coef, c.coef)
    assert list(a.data.n_samples) == [5, 6, 7]


@pytest.mark.parametrize("kwargs", [dict(s=5), dict(M=0), dict(n=0), dict(sigma=-1.0)])
def test_bad_arguments(kwargs):
    with pytest.raises(InvalidParameterError):
        sparse_heterogeneity(**(dict(d=4, M=2, n=10, s=1) | kwargs))
