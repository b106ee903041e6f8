"""Collaborative learners: unbiasedness by Monte Carlo, fixed points on noiseless systems,
vectorization against per-agent loops, reproducibility and parameter errors.

Monte Carlo checks use z-scores (|mean - exact| / standard error < 5 for every entry).
"""

import math

import numpy as np
import pytest

from mtl_opt.collab import (AffPCL, Ditto, FedAvg, FineTuning, IFCA, Independent, PFedMe,
                            affpcl_direction, gaussian_system, make_method, random_finite_system,
                            run_methods, step_size)
from mtl_opt.collab.algorithms import coe_residual
from mtl_opt.collab.systems import ratio_from_distributions
from montecarlo import zscores
from mtl_opt.errors import InvalidParameterError

M = 100_000



@pytest.fixture(scope="module")
def setting():
    """A heterogeneous Gaussian system, arbitrary (x^i, x^c, theta^c) and M joint samples."""
    system = gaussian_system(4, 3, delta_env=0.4, delta_obj=0.5, seed=7)
    rng = np.random.default_rng(8)
    x, x_c, theta_c = rng.normal(size=(4, 3)), rng.normal(size=3), rng.normal(size=3)
    return system, x, x_c, theta_c, system.draw(rng, size=M)


def test_affpcl_direction_is_unbiased_for_the_agents_own_residual(setting):
    """E g~^i = E g^i(x^i) = A_bar^i x^i - b_bar^i, with importance correction."""
    system, x, x_c, theta_c, sample = setting
    own = np.einsum("iab,ib->ia", system.A_bar, x) - system.b_bar
    assert zscores(affpcl_direction(sample, x, x_c, theta_c, sample.rho), own).max() < 5
    # power: without importance correction the direction is biased under environment heterogeneity
    assert zscores(affpcl_direction(sample, x, x_c, theta_c, None), own).max() > 20


def test_importance_corrected_central_direction_is_unbiased(setting):
    """E 1/n sum_j rho^i(s^j) (A(s^j) x - Phi(s^j) theta) = A_bar^i x - Phi_bar^i theta."""
    system, _, x_c, theta_c, sample = setting
    to_agent = np.einsum("mjab,b->mja", sample.A, x_c) - np.einsum("mjab,b->mja", sample.Phi, theta_c)
    central = np.einsum("mij,mja->mia", sample.rho, to_agent) / system.n_agents
    exact = system.A_bar @ x_c - system.Phi_bar @ theta_c
    assert zscores(central, exact).max() < 5
    # power: the plain average (no rho) estimates the mixture's system, not agent i's
    plain = np.broadcast_to(to_agent.mean(axis=1, keepdims=True), central.shape)
    assert zscores(plain, exact).max() > 20


def test_importance_correction_on_a_finite_state_space():
    system = random_finite_system(3, 2, 5, delta_env=0.9, seed=1)
    rng = np.random.default_rng(2)
    x_c, theta_c = rng.normal(size=2), rng.normal(size=2)
    sample = system.draw(rng, size=M)
    to_agent = np.einsum("mjab,b->mja", sample.A, x_c) - np.einsum("mjab,b->mja", sample.Phi, theta_c)
    central = np.einsum("mij,mja->mia", sample.rho, to_agent) / 3
    assert zscores(central, system.A_bar @ x_c - system.Phi_bar @ theta_c).max() < 5


def naive_affpcl(system, samples, alpha):
    """Algorithm 1 written agent by agent, with explicit loops."""
    n, d = system.n_agents, system.dim
    x, x_c, theta_c = np.zeros((n, d)), np.zeros(d), np.zeros(d)
    for s in samples:
        bc = [s.Phi[j] @ theta_c for j in range(n)]
        to = [s.A[j] @ x_c - bc[j] for j in range(n)]
        new_x = np.empty_like(x)
        for i in range(n):
            corrected = sum(s.rho[i, j] * to[j] for j in range(n)) / n
            new_x[i] = x[i] - alpha * (s.A[i] @ x[i] - s.b[i] + corrected - to[i])
        x_c = x_c - alpha * sum(s.A[j] @ x_c - s.b[j] for j in range(n)) / n
        theta_c = theta_c - alpha * sum(s.Phi[j] @ theta_c - s.b[j] for j in range(n)) / n
        x = new_x
    return x, x_c, theta_c


def test_vectorized_affpcl_follows_algorithm_1_agent_by_agent():
    system = gaussian_system(5, 3, delta_env=0.3, delta_obj=0.3, seed=2)
    rng = np.random.default_rng(3)
    samples = [system.draw(rng) for _ in range(15)]
    method = AffPCL()
    state = method.start(system, 15, rng)
    for t, s in enumerate(samples):
        method.step(state, s, 0.02, t)
    x, x_c, theta_c = naive_affpcl(system, samples, 0.02)
    assert np.allclose(state["x"], x, atol=1e-12) and np.allclose(state["x_c"], x_c, atol=1e-12)
    assert np.allclose(state["theta_c"], theta_c, atol=1e-12)


def run_noiseless(method, system, steps=3000, alpha=0.05):
    state = method.start(system, steps, np.random.default_rng(0))
    rng = np.random.default_rng(1)
    for t in range(steps):
        method.step(state, system.draw(rng), alpha, t)
    return method.estimate(state), state


def test_fixed_points_on_a_noiseless_system():
    """eps_A = eps_b = 0 and shared environments: A(s), b^i(s) constant, each method reaches its
    fixed point, computed here by a direct linear solve (tolerance 1e-8)."""
    system = gaussian_system(4, 3, delta_obj=0.8, eps_A=0.0, eps_b=0.0, seed=5)
    A, b = system.A_base, system.b_bar
    x_star, x_c = system.solutions(), system.central_solution()
    for method in (Independent(), AffPCL(), FineTuning(switch=100)):
        assert np.allclose(run_noiseless(method, system)[0], x_star, atol=1e-8)
    assert np.allclose(run_noiseless(FedAvg(), system)[0], x_c, atol=1e-8)
    assert np.allclose(run_noiseless(IFCA(n_clusters=1), system)[0], x_c, atol=1e-8)
    lam, eye = 3.0, np.eye(3)
    # Ditto: w = x_*^c, x^i = (A + lam I)^-1 (b^i + lam w)
    ditto = np.linalg.solve(A + lam * eye, (b + lam * x_c).T).T
    assert np.allclose(run_noiseless(Ditto(lam=lam), system)[0], ditto, atol=1e-8)
    # pFedMe: x^i = (A + lam I)^-1 (b^i + lam w), w = mean_i x^i  =>  A w = mean_i b^i
    pfedme = np.linalg.solve(A + lam * eye, (b + lam * x_c).T).T
    x, state = run_noiseless(PFedMe(lam=lam), system)
    assert np.allclose(state["w"], x_c, atol=1e-8) and np.allclose(x, pfedme, atol=1e-8)


def test_clustering_and_finetuning_limits_reproduce_other_methods():
    system = gaussian_system(6, 3, delta_env=0.2, delta_obj=0.2, seed=9)
    common = dict(horizon=40, alpha=0.01, runs=2, seed=4, progress=False)
    res = run_methods(system, {"fedavg": FedAvg(), "ifca1": IFCA(n_clusters=1, init_scale=0.0),
                               "independent": Independent(), "ft0": FineTuning(switch=0),
                               "ft_all": FineTuning(switch=40)}, **common)
    assert np.allclose(res.mse[0], res.mse[1]) and np.allclose(res.mse[0], res.mse[4])
    assert np.allclose(res.mse[2], res.mse[3])


def test_same_seed_same_curves_and_seed_matters():
    system = gaussian_system(5, 3, delta_env=0.2, delta_obj=0.2, seed=0)
    methods = {name: make_method(name) for name in ("affpcl", "ifca", "pfedme")}
    a = run_methods(system, methods, horizon=30, alpha=0.01, runs=3, seed=1, progress=False)
    b = run_methods(system, methods, horizon=30, alpha=0.01, runs=3, seed=1, n_jobs=2, progress=False)
    c = run_methods(system, methods, horizon=30, alpha=0.01, runs=3, seed=2, progress=False)
    # the same draws in another process: equal up to last-bit differences (e.g. BLAS paths)
    np.testing.assert_allclose(b.mse, a.mse, rtol=1e-9, atol=1e-12)
    assert not np.allclose(a.mse, c.mse, rtol=1e-3)
    assert a.mse.shape == (3, 3, 31, 5) and a.mean_mse().shape == (3, 31)


def test_estimated_density_ratios_use_visit_counts():
    system = random_finite_system(3, 2, 4, delta_env=0.5, seed=0)
    method = AffPCL(ratios="estimated")
    state = method.start(system, 10, np.random.default_rng(0))
    rng = np.random.default_rng(1)
    visits = np.zeros((3, 4))
    for t in range(10):
        sample = system.draw(rng)
        visits[np.arange(3), sample.states] += 1
        method.step(state, sample, 0.01, t)
    assert np.array_equal(state["counts"], visits)
    # the naive Monte Carlo ratio at a state is mean-normalized frequencies, by hand:
    freq = visits / visits.sum(axis=1, keepdims=True)
    s = sample.states
    assert np.allclose(ratio_from_distributions(visits, s), freq[:, s] / freq[:, s].mean(axis=0))
    with pytest.raises(InvalidParameterError, match="finite state space"):
        AffPCL(ratios="estimated").start(gaussian_system(3, 2), 5, rng)


def test_coe_residual_uses_normal_equations_for_tall_phi():
    rng = np.random.default_rng(0)
    Phi, b, theta = rng.normal(size=(4, 2)), rng.normal(size=4), rng.normal(size=2)
    assert np.allclose(coe_residual(Phi, b, theta), Phi.T @ (Phi @ theta - b))
    Phi = rng.normal(size=(4, 4))
    assert np.allclose(coe_residual(Phi, b, np.ones(4)), Phi @ np.ones(4) - b)


def test_step_sizes_and_parameter_errors():
    assert step_size("log", horizon=2000, lam=0.5) == pytest.approx(math.log(2000) / 1000)
    assert step_size("constant", alpha=0.01) == 0.01
    for bad in (-0.1, 0.0, math.inf, "0.1"):
        with pytest.raises(InvalidParameterError, match="alpha > 0"):
            step_size("constant", alpha=bad)
    with pytest.raises(InvalidParameterError, match="lam > 0"):
        step_size("log", horizon=100, lam=-1.0)
    with pytest.raises(InvalidParameterError, match="'constant' or 'log'"):
        step_size("cosine", alpha=0.1)
    with pytest.raises(InvalidParameterError, match="'lam' parameter of PFedMe"):
        PFedMe(lam=-1.0)
    with pytest.raises(InvalidParameterError, match="no parameter"):
        Ditto(mu=1.0)
    with pytest.raises(InvalidParameterError, match="unknown method"):
        make_method("scaffold")
    system = gaussian_system(3, 2)
    with pytest.raises(InvalidParameterError, match=r"'alpha' parameter of run_methods must be a float in the range \(0, inf\)"):
        run_methods(system, {"affpcl": AffPCL()}, horizon=5, alpha=-0.01, progress=False)
    with pytest.raises(InvalidParameterError, match="horizon"):
        run_methods(system, {"affpcl": AffPCL()}, horizon=0, alpha=0.01, progress=False)


def test_runner_mse_curves_by_hand():
    """MSE^i_t = ||x_t^i - x_*^i||^2 with run r's samples drawn from default_rng([seed, r])."""
    system = gaussian_system(3, 2, delta_env=0.3, delta_obj=0.3, seed=6)
    res = run_methods(system, {"independent": Independent()}, horizon=4, alpha=0.05, runs=2, seed=3,
                      progress=False)
    for r in range(2):
        rng, x = np.random.default_rng([3, r]), np.zeros((3, 2))
        for t in range(5):
            assert np.allclose(res.mse[0, r, t], ((x - system.solutions()) ** 2).sum(axis=1), rtol=1e-12)
            s = system.draw(rng)
            x = x - 0.05 * (np.einsum("iab,ib->ia", s.A, x) - s.b)
    assert res.center_agent == system.center_agent()
    assert np.allclose(res.mean_mse()[0], res.mse[0].mean(axis=(0, 2)))
