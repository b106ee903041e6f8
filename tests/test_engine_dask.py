"""The branch-and-bound engine on a Dask cluster (``engine.workers.DaskWorkers``), chosen as
scikit-learn users choose one: ``joblib.parallel_config(backend="dask")`` around ``fit``.

A ``distributed.LocalCluster`` of 2 worker processes (1 thread each) stands for a cluster: bnb and
the clustered tree certify the same optimum as on one core (node for node: the jobs are the
same), checked against enumeration; the cluster's task stream shows the node work ran on its
workers; a worker killed mid-run leaves a valid certificate (its jobs re-run elsewhere or here);
a stop asked mid-run ends the fit and leaves the cluster usable.
"""

import contextlib
import multiprocessing
import os
import signal
import threading

import distributed
import joblib
import numpy as np
import pytest
from test_armul_tree import Reference, solved_tree
from test_bnb_pool import CASES, assert_the_serial_tree_certified, solved
from test_sparse import brute_force_optimum, random_problem

from mtl_opt import interrupts
from mtl_opt.deadline import Deadline
from mtl_opt.solvers.armul.tree import certify_clusters
from mtl_opt.solvers.sparse.bcd import fit_bcd
from mtl_opt.solvers.sparse.bnb import search, solve_bnb
from mtl_opt.solvers.engine import workers_for
from mtl_opt.solvers.engine.workers import DaskWorkers
from mtl_opt.solvers.method import final_status
from mtl_opt.solvers.options import SolveOptions


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  silence_logs=50) as cluster, distributed.Client(cluster) as client:
        client.wait_for_workers(2, timeout=120)
        yield client


def problem_and_start(variant="zbar_l2", K=2, p=8, n=5, **penalties):
    problem, _ = random_problem(variant, 4100 + K * p, K=K, p=p, n=n, s=2)
    problem = problem.with_params(lambda_ridge=1e-3, **(penalties or {"lambda_zbar": 0.3}))
    return problem, fit_bcd(problem, local_search=False, deadline=Deadline()).coef


def bnb(problem, start, threads=None):
    return solve_bnb(problem, SolveOptions(time_limit=120, threads=threads), start, deadline=Deadline(120))


def test_the_dask_backend_picks_the_cluster_and_one_thread_stays_here(client):
    with joblib.parallel_config(backend="dask"):
        assert isinstance(workers_for(None, Deadline()), DaskWorkers)
        assert not isinstance(workers_for(1, Deadline()), DaskWorkers)
    assert not isinstance(workers_for(None, Deadline()), DaskWorkers)


@pytest.mark.parametrize("case", [CASES[0], CASES[1], CASES[2]])
def test_bnb_on_the_cluster_makes_the_serial_tree_and_proves_the_brute_force_optimum(client, case):
    problem, serial = solved(*case, threads=1)
    with distributed.get_task_stream(client) as stream, joblib.parallel_config(backend="dask"):
        _, remote = solved(*case, threads=None)
    ran = [task for task in stream.data if task["key"].startswith("_work")]
    assert remote.native["pool_bounds"] == len(ran) > 5
    assert {task["worker"] for task in ran} <= set(client.scheduler_info()["workers"])
    assert_the_serial_tree_certified(problem, serial, remote)


def test_the_clustered_tree_on_the_cluster_brackets_the_enumerated_optimum(client):
    problem, start, reference = solved_tree(1, 7, 3, 1.0)
    lower, upper = reference.clustered(list(range(7)))
    serial = certify_clusters(problem, 3, start, 1e-6, Deadline())
    deadline = Deadline()
    workers = DaskWorkers(client, deadline)
    with distributed.get_task_stream(client) as stream:
        found = certify_clusters(problem, 3, start, 1e-6, deadline, workers=workers)
    workers.close()
    assert workers.jobs == len([t for t in stream.data if t["key"].startswith("_work")]) >= 7
    assert found.finished and found.nodes == serial.nodes
    objective = problem.objective(found.theta, found.centers[found.labels])
    assert found.bound <= upper * (1 + 1e-12) and lower * (1 - 1e-12) <= objective <= upper * (1 + 1e-6)
    assert found.bound == pytest.approx(serial.bound, rel=1e-12)


def test_a_worker_killed_mid_run_leaves_a_valid_certificate(client, tmp_path, monkeypatch):
    """The first worker to take a job exits in the middle of it (its nanny starts a new one): the
    scheduler re-runs the job elsewhere (or it is bounded here), and the fit proves the serial
    optimum, node for node."""
    problem, start = problem_and_start()
    serial = bnb(problem, start, threads=1)
    marker = tmp_path / "kill-one-worker"
    marker.touch()
    bound_family = search.family(problem)

    class Dying(bound_family):
        def work(self, job, upper, deadline):
            if multiprocessing.parent_process() is not None:   # on a worker, once
                with contextlib.suppress(FileNotFoundError):
                    os.remove(marker)
                    os._exit(1)
            return super().work(job, upper, deadline)
    monkeypatch.setattr(search, "family", lambda problem: Dying)
    with joblib.parallel_config(backend="dask"):
        remote = bnb(problem, start)
    assert not marker.exists()   # a worker died
    assert remote.native["nodes"] == serial.native["nodes"]
    scale = abs(serial.objective)
    assert remote.lower_bound == pytest.approx(serial.lower_bound, rel=1e-12, abs=1e-12 * scale)
    assert final_status(remote, 1e-6) == "optimal" and remote.lower_bound <= brute_force_optimum(problem) + 1e-9 * scale
    client.wait_for_workers(2, timeout=120)


def test_a_stop_ends_the_fit_on_the_cluster_and_leaves_it_usable(client):
    """SIGINT half a second in: the fit stops with its incumbent and a proven bound (as at its
    time limit), the cluster's queued jobs are cancelled, and the cluster takes new work."""
    problem, start = problem_and_start("zbar_l2", K=5, p=8, n=5)
    serial = bnb(problem, start, threads=1)   # 3494 nodes: seconds on the cluster
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))   # a real Ctrl-C
    # Python's own handler, as in a user's script, whatever an earlier test in this worker left
    saved = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with interrupts.stoppable(), joblib.parallel_config(backend="dask"):
            timer.start()
            run = bnb(problem, start)
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, saved)
    assert run.stop == "time_limit" and run.native["nodes"] < serial.native["nodes"]
    assert run.lower_bound <= serial.objective * (1 + 1e-9) and run.objective >= serial.objective * (1 - 1e-9)
    assert client.submit(sum, [1, 2], pure=False).result(timeout=60) == 3


class GoneCluster:
    """A client whose scheduler went away after the fit chose it: every call fails."""

    def __init__(self, fail_at_start=False):
        self.fail_at_start = fail_at_start

    def nthreads(self):
        if self.fail_at_start:
            raise OSError("scheduler unreachable")
        return {"tcp://gone:1": 1, "tcp://gone:2": 1}

    def __getattr__(self, name):
        raise OSError("scheduler unreachable")


@pytest.mark.parametrize("fail_at_start", [False, True])
def test_a_cluster_that_goes_away_leaves_the_fit_here_with_the_serial_answer(fail_at_start, monkeypatch):
    """The scheduler is gone (at the first step, or before): the jobs are bounded in the fitting
    process, and the tree is the serial one."""
    problem, serial = solved(*CASES[2], threads=1)
    monkeypatch.setattr(search, "workers_for", lambda threads, deadline: DaskWorkers(GoneCluster(fail_at_start), deadline))
    _, here = solved(*CASES[2], threads=None)
    assert_the_serial_tree_certified(problem, serial, here)
