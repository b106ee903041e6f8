"""Collaborative-learning systems: exact moments and solutions against Monte Carlo and direct sums.

Monte Carlo checks use z-scores: |sample mean - exact| / (sample sd / sqrt(M)) < 5
for every entry (a false alarm has probability < 1e-4 over all entries here).
"""

import numpy as np
import pytest
from scipy.stats import multivariate_normal

from mtl_opt.collab import FiniteStateSystem, digits_system, gaussian_system, random_finite_system
from montecarlo import zscores
from mtl_opt.errors import InvalidDataError, InvalidParameterError

M = 100_000



@pytest.fixture(scope="module")
def gaussian():
    system = gaussian_system(4, 3, delta_env=0.5, delta_obj=0.5, seed=1)
    return system, system.draw(np.random.default_rng(2), size=M)


def test_gaussian_expectations_match_monte_carlo(gaussian):
    system, sample = gaussian
    assert zscores(sample.A, system.A_bar).max() < 5
    assert zscores(sample.b, system.b_bar).max() < 5
    # power: dropping the m m^T term of E s s^T is detected
    d = system.dim
    wrong = (np.eye(d) + system.eps_A * np.eye(d)) @ system.A_base
    assert zscores(sample.A, np.broadcast_to(wrong, system.A_bar.shape)).max() > 20


def test_exact_solutions_solve_the_expected_systems(gaussian):
    system, sample = gaussian
    x = system.solutions()
    assert np.allclose(np.einsum("iab,ib->ia", system.A_bar, x), system.b_bar, atol=1e-10)
    # Monte Carlo residual of the stochastic system at x_*^i has mean zero
    resid = np.einsum("miab,ib->mia", sample.A, x) - sample.b
    assert zscores(resid, 0.0).max() < 5
    # and the Monte Carlo solve agrees with the exact one to within 5% of ||x_*^i||
    x_mc = np.linalg.solve(sample.A.mean(axis=0), sample.b.mean(axis=0)[..., None])[..., 0]
    assert np.all(np.linalg.norm(x_mc - x, axis=1) < 0.05 * np.linalg.norm(x, axis=1))
    xc = system.central_solution()
    assert np.allclose(system.A_bar.mean(axis=0) @ xc, system.b_bar.mean(axis=0))


def test_gaussian_density_ratio_matches_scipy_densities():
    system = gaussian_system(3, 2, delta_env=0.7, seed=0)
    states = system.sample_states(np.random.default_rng(0), 1)[0]
    dens = np.array([[multivariate_normal(m, np.eye(2)).pdf(s) for s in states] for m in system.means])
    assert np.allclose(system.density_ratio(states), dens / dens.mean(axis=0), rtol=1e-10)


def test_paper_reference_agent_and_heterogeneity_scales():
    system = gaussian_system(20, 5, delta_env=0.3, delta_obj=0.2, seed=3)
    assert np.allclose(system.means[0], 0) and system.center_agent() >= 0
    assert np.allclose(np.linalg.norm(system.means[1:], axis=1), 4 * 0.3)
    assert np.allclose(np.linalg.norm(system.theta[1:] - system.theta[0], axis=1), 0.2)


def test_finite_system_sampling_and_expectations_by_direct_sums():
    system = random_finite_system(3, 2, 6, delta_env=0.8, delta_obj=0.3, seed=4)
    for i in range(3):
        A_i = sum(system.mu[i, s] * system.A_table[s] for s in range(6))
        assert np.allclose(system.A_bar[i], A_i)
    states = system.sample_states(np.random.default_rng(5), M)
    onehot = (states[..., None] == np.arange(6)).astype(float)  # (M, n, S)
    assert zscores(onehot, system.mu).max() < 5
    rho = system.density_ratio(states[0])
    assert np.allclose(rho, system.mu[:, states[0]] / system.mu[:, states[0]].mean(axis=0))


def test_digits_solution_is_the_least_squares_fit_of_the_mixed_labels():
    from sklearn.datasets import load_digits
    from sklearn.decomposition import PCA

    system = digits_system(n_agents=3, dim=6, delta_obj=1.0)
    images, digits = load_digits(return_X_y=True)
    phi = np.column_stack([np.ones(len(images)), PCA(5, whiten=True, svd_solver="full").fit_transform(images)])
    for i, lam in enumerate([0.0, 0.5, 1.0]):
        y = lam * np.isin(digits, [0, 1, 2, 3, 4]) + (1 - lam) * np.isin(digits, [0, 6, 8, 9])
        assert np.allclose(system.solutions()[i], np.linalg.lstsq(phi, y, rcond=None)[0], atol=1e-10)
    assert system.density_ratio(np.array([0, 5, 9])) == pytest.approx(np.ones((3, 3)))


def test_bad_systems_are_clear_errors():
    with pytest.raises(InvalidDataError, match="theta must have shape"):
        FiniteStateSystem(np.ones((2, 3, 3)), np.ones((2, 3, 3)), np.ones((4, 2)), np.full((4, 2), 0.5))
    with pytest.raises(InvalidDataError, match="probability distribution"):
        FiniteStateSystem(np.ones((2, 3, 3)), np.ones((2, 3, 3)), np.ones((1, 3)), [[0.7, 0.7]])
    with pytest.raises(InvalidDataError, match="mu must have shape"):
        FiniteStateSystem(np.ones((2, 3, 3)), np.ones((2, 3, 3)), np.ones((1, 3)), [[1.0]])
    with pytest.raises(InvalidParameterError, match="delta_env"):
        gaussian_system(4, 3, delta_env=1.5)
    with pytest.raises(InvalidParameterError, match="n_agents"):
        gaussian_system(0, 3)
    with pytest.raises(InvalidParameterError, match="seed"):
        random_finite_system(3, 2, 4, seed=-1)
    with pytest.raises(InvalidParameterError, match="eps_A"):
        gaussian_system(3, 2, eps_A=float("inf"))
