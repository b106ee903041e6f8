"""bnb on two cores (``engine.workers.LocalWorkers``): the same tree and answer as on one, and a
failing worker only costs time."""

import concurrent.futures
import multiprocessing
import os
import time

import joblib
import numpy as np
import pytest
from test_sparse import brute_force_optimum, random_problem

from mtl_opt.deadline import Deadline
from mtl_opt.solvers.sparse import bnb
from mtl_opt.solvers.sparse.bnb import kernels
from mtl_opt.solvers.sparse.bnb.greedy import GreedyBound
from mtl_opt.solvers.engine import workers as bnb_pool
from mtl_opt.solvers.sparse.bcd import fit_bcd
from mtl_opt.solvers.sparse.bnb import solve_bnb
from mtl_opt.solvers.method import final_status
from mtl_opt.solvers.options import SolveOptions

#: variant, its extra penalties, K, p, n_k: per-task trees (l0l2), common supports (with and
#: without Bbar) and joint trees with the Zbar and the Bbar term; wide designs and a tiny ridge,
#: so each needs dozens of nodes.
CASES = [("l0l2", {}, 2, 12, 6), ("cs_l2", {}, 2, 12, 6), ("zbar_l2", {"lambda_zbar": 0.3}, 2, 8, 5),
         ("bbar", {"lambda_bbar": 2.0}, 2, 8, 5), ("cs_bbar", {"lambda_bbar": 0.5}, 2, 16, 6)]


@pytest.fixture
def pool_at_once(monkeypatch):
    """The pool starts at the first split and waits for its worker, on any machine (even one
    reporting a single core)."""
    monkeypatch.setattr(bnb_pool, "POOL_AFTER", 0.0)
    monkeypatch.setattr(bnb_pool, "WAIT_FOR_WORKER", True)
    monkeypatch.setattr(bnb_pool, "MIN_REMAINING", 0.0)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)


def solved(variant, penalties, K, p, n, threads):
    problem, _ = random_problem(variant, 4100 + K * p, K=K, p=p, n=n, s=2)
    problem = problem.with_params(lambda_ridge=1e-3, **penalties)
    start = fit_bcd(problem, local_search=False, deadline=Deadline()).coef
    return problem, solve_bnb(problem, SolveOptions(time_limit=120, threads=threads), start, deadline=Deadline(120))


@pytest.mark.parametrize("variant,penalties,K,p,n", CASES)
def test_two_cores_make_the_same_tree_and_prove_the_brute_force_optimum(pool_at_once, variant, penalties, K, p, n):
    problem, serial = solved(variant, penalties, K, p, n, threads=1)
    _, pooled = solved(variant, penalties, K, p, n, threads=None)
    assert serial.native["pool_bounds"] == 0 and pooled.native["pool_bounds"] > 5
    assert_the_serial_tree_certified(problem, serial, pooled)


def assert_the_serial_tree_certified(problem, serial, other):
    """``other`` grew ``serial``'s tree (node for node, floats to 1e-12) and proved the brute-force optimum."""
    assert other.native["nodes"] == serial.native["nodes"] > 5
    scale = abs(serial.objective)
    assert other.objective == pytest.approx(serial.objective, rel=1e-12, abs=1e-12 * scale)
    assert other.lower_bound == pytest.approx(serial.lower_bound, rel=1e-12, abs=1e-12 * scale)
    optimum = brute_force_optimum(problem)
    assert other.lower_bound <= optimum + 1e-9 * scale and other.objective == pytest.approx(optimum, rel=1e-6)
    assert final_status(other, 1e-6) == "optimal"


def test_a_failing_worker_is_replaced_by_bounding_here(pool_at_once, monkeypatch):
    """Every job the worker gets fails: the parent bounds those nodes itself, stops using the
    pool, and the answer is the serial one."""
    def failing(self, executor, bounder, job, upper):
        self.jobs += 1
        future = concurrent.futures.Future()
        future.set_exception(RuntimeError("worker died"))
        return future

    monkeypatch.setattr(bnb_pool.LocalWorkers, "_submit", failing)
    case = CASES[2]
    _, serial = solved(*case, threads=1)
    _, pooled = solved(*case, threads=None)
    assert pooled.native["pool_bounds"] == 1          # one failure, then no pool
    assert pooled.native["nodes"] == serial.native["nodes"]
    assert pooled.lower_bound == pytest.approx(serial.lower_bound, rel=1e-12)
    assert np.allclose(pooled.estimate, serial.estimate, rtol=1e-9, atol=1e-12)


def test_joblib_parallel_still_works_after_a_fit_on_two_cores(pool_at_once):
    """The worker is the fit's own: joblib's shared executor (cross-validation's n_jobs) is left
    as joblib sets it up (it once broke when bnb had configured it first)."""
    _, pooled = solved(*CASES[3], threads=None)
    assert pooled.native["pool_bounds"] > 0
    assert joblib.Parallel(n_jobs=2)(joblib.delayed(abs)(i) for i in range(-2, 2)) == [2, 1, 0, 1]


def test_no_worker_processes_on_this_machine_means_one_core(pool_at_once, monkeypatch):
    def unavailable(**_):
        raise OSError("no semaphores")

    monkeypatch.setattr(bnb_pool, "ProcessPoolExecutor", unavailable)
    _, serial = solved(*CASES[3], threads=1)
    _, pooled = solved(*CASES[3], threads=None)
    assert pooled.native["pool_bounds"] == 0 and pooled.native["nodes"] == serial.native["nodes"]
    assert pooled.lower_bound == pytest.approx(serial.lower_bound, rel=1e-12)


def test_no_pool_with_one_thread_or_inside_a_worker_process(monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    assert bnb_pool.LocalWorkers(None, Deadline()).wanted == 1
    assert not bnb_pool.LocalWorkers(1, Deadline()).wanted
    monkeypatch.setattr(multiprocessing, "parent_process", lambda: object())
    assert not bnb_pool.LocalWorkers(None, Deadline()).wanted
    assert isinstance(bnb_pool.workers_for(None, Deadline()), bnb_pool.LocalWorkers)


def test_the_worker_takes_the_next_nodes_while_this_process_bounds_a_long_one(pool_at_once, monkeypatch):
    """Four nodes, the first slow here (3 s of sleep, in this process only: the worker imports bnb
    afresh): the worker bounds the other three meanwhile, from the back, and every result is the
    one-core result of its own node (floats to 1e-12, as the tests above compare the two)."""
    problem, _ = random_problem("cs_l2", 4100, K=2, p=12, n=6, s=2)
    problem = problem.with_params(lambda_ridge=1e-3)
    search = GreedyBound(problem, 40, Deadline(120))
    upper = problem.objective(fit_bcd(problem, local_search=False, deadline=Deadline()).coef)
    nodes = []
    for j in range(4):
        fixed = np.full((2, 12), bnb.FREE, dtype=np.int8)
        fixed[:, j] = bnb.IN
        nodes.append((fixed, search.start(), 0))
    expected = [search.work(node, upper, Deadline(120)) for node in nodes]
    pool = bnb_pool.LocalWorkers(None, Deadline(120))
    original, calls = GreedyBound.bound, []

    def slow_here(self, fixed, r):
        calls.append(int(np.flatnonzero(fixed[0] == bnb.IN)[0]))
        if len(calls) == 1:
            time.sleep(3.0)
        return original(self, fixed, r)
    monkeypatch.setattr(GreedyBound, "bound", slow_here)
    try:
        results = pool.map(search, nodes, upper)
    finally:
        pool.close()
    assert calls == [0] and pool.jobs == 3
    for (bound, r, greedy), (bound_here, r_here, greedy_here) in zip(results, expected):
        assert bound == pytest.approx(bound_here, rel=1e-12) and np.array_equal(greedy != 0, greedy_here != 0)
        np.testing.assert_allclose(r, r_here, rtol=1e-12)
        np.testing.assert_allclose(greedy, greedy_here, rtol=1e-9, atol=1e-12)


def test_the_climb_lets_the_feeder_thread_run():
    """The compiled climb releases the GIL: while this process climbs, the thread that feeds the
    worker must be able to hand it its next node (holding the GIL left the worker idle until each
    climb here ended: 1217 nodes in 30 s on two cores against 1469, BENCHMARKS.md)."""
    assert kernels.climb.targetoptions.get("nogil") is True
