"""The branch-and-bound engine (``mtl_opt/solvers/engine``) on one core, two, a Dask cluster, and
N virtual workers (issue 59).

    OPENBLAS_NUM_THREADS=1 python benchmarks/engine.py [--limit 60] [--quick]

Five hard instances: the sparse paper's setting (``sparse_exact.smtl_problem``: K = 4, n_k = 50,
p = 250) at lambda_ridge = 1, zbar_l2 and cs_l2 (seed 1, the hardest of seeds 0-4 at ridge 1);
K = 1, n = 500, p = 1000, s = 10, lambda_ridge = 0.1, SNR 100 (``sparse_exact.demo_data``, seed 0);
clustered ARMUL m = 100 (``armul_simulation("clustered", m=100, n=50, d=5, delta=0.5, seed=0)``)
with K = 3 and K = 2.

1. speedup: each instance for ``--limit`` seconds (bnb from the bcd answer; ARMUL exact from its
   prox answer) with ``threads=1`` (this process only), ``threads=2`` (this process and one local
   worker process) and inside ``joblib.parallel_config(backend="dask")`` on a ``LocalCluster`` of
   2 worker processes x 1 thread.  A worker count makes one tree (the sparse trees are the same
   tree at 1 and 2 workers, node for node), so nodes split per second is the wall-time ratio for
   the same work; a run that certifies reports its time instead.
2. overhead: a Dask job that does nothing (``_noop``), in steps of 1 and 2 jobs: the round trip
   per job (serialize, ship, run, return, on this machine's 2 cores shared by the scheduler, the
   workers and this process), and the pickled sizes of a sparse node job and its result.
3. replay: each instance's tree recorded serially for ``--limit`` seconds as N workers would grow
   it (the batch the engine takes for N workers: sparse best-first splits max(2, N/2) nodes a
   step; the clustered tree splits one node a step with its lookahead), every job timed.  The
   model: a step's jobs are list-scheduled longest first on N workers, each job taking its
   recorded time plus the per-job overhead of section 2; what this process does between jobs
   (splits, screening, children) stays serial; a step waits for its last job.  The speedup is
   the serial time of the one-worker tree to reach the lower bound both trees reach, over the
   modelled time of the N-worker tree to reach it (clustered: to split as many nodes, one a step).
"""

from __future__ import annotations

import argparse
import heapq
import pickle
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sparse_exact import SMTL_PARAMS, demo_data, smtl_problem  # noqa: E402

from mtl_opt.deadline import Deadline  # noqa: E402
from mtl_opt.estimators import ARMUL  # noqa: E402
from mtl_opt.formulations.sparse import SparseProblem  # noqa: E402
from mtl_opt.solvers.armul import tree as armul_tree  # noqa: E402
from mtl_opt.solvers.sparse.bcd import fit_bcd  # noqa: E402
from mtl_opt.solvers.sparse.bnb import search as bnb_search  # noqa: E402
from mtl_opt.solvers.sparse.bnb import solve_bnb  # noqa: E402
from mtl_opt.solvers.engine import Engine  # noqa: E402
from mtl_opt.solvers.engine.workers import Serial  # noqa: E402
from mtl_opt.solvers.options import SolveOptions  # noqa: E402
from mtl_opt.synthetic import armul_simulation  # noqa: E402

VIRTUAL = (1, 2, 8, 32, 128)


def sparse_instances():
    """name -> SparseProblem of the three sparse rows (module docstring)."""
    out = {f"sMTL {v} ridge 1": smtl_problem(v, 1, {**SMTL_PARAMS[v], "lambda_ridge": 1.0})
           for v in ("zbar_l2", "cs_l2")}
    out["K=1 p=1000 s=10 ridge 0.1"] = SparseProblem.from_data(demo_data(1000, 1, 500, snr=100.0, seed=0),
                                                               variant="l0l2", s=10, lambda_ridge=0.1)
    return out


CLUSTERED = {"clustered m=100 K=3": 3, "clustered m=100 K=2": 2}


def clustered_data():
    return armul_simulation("clustered", m=100, n=50, d=5, delta=0.5, seed=0).data


def run(name, problem_or_k, limit, threads):
    """(nodes, seconds, relative gap, certified) of one fit of the instance ``name``."""
    start = time.perf_counter()
    if name in CLUSTERED:
        result = ARMUL("clustered", n_components=problem_or_k, seed=0, algorithm="exact",
                       solve_options=SolveOptions(time_limit=limit, threads=threads)).fit(clustered_data()).result_
        return result.native["nodes"], time.perf_counter() - start, result.rel_gap, result.status == "optimal"
    B = fit_bcd(problem_or_k, deadline=Deadline()).coef
    start = time.perf_counter()
    tree = solve_bnb(problem_or_k, SolveOptions(time_limit=limit, threads=threads), B, deadline=Deadline(limit))
    gap = (tree.objective - tree.lower_bound) / tree.objective
    return tree.native["nodes"], time.perf_counter() - start, gap, tree.stop == "converged"


def cell(nodes, seconds, gap, certified):
    return f"{seconds:.1f} s (certified)" if certified else f"{nodes} nodes, gap {100 * gap:.3g}%"


def ratio(one, other):
    """Wall-time speedup of ``other`` over ``one``: time to certify, else nodes per second."""
    if one[3] and other[3]:
        return one[1] / other[1]
    return (other[0] / other[1]) / (one[0] / one[1])


def speedup(instances, limit):
    import joblib

    print(f"\n## 1. Speedup of 2 workers over 1 ({limit:g} s each)\n")
    print("| instance | 1 worker | 2 local workers | speedup | Dask, 2 workers | speedup |")
    print("|---|---|---|---|---|---|")
    for name, problem in instances.items():
        one = run(name, problem, limit, 1)
        two = run(name, problem, limit, 2)
        with joblib.parallel_config(backend="dask"):
            dask = run(name, problem, limit, None)
        print(f"| {name} | {cell(*one)} | {cell(*two)} | {ratio(one, two):.2f}x | {cell(*dask)} | "
              f"{ratio(one, dask):.2f}x |", flush=True)


def _noop(held, job, upper, remaining):
    return job


def overhead(client, instances):
    from distributed import wait

    print("\n## 2. Dask's cost per job (LocalCluster, 2 worker processes x 1 thread, this machine)\n")
    held = client.scatter(np.zeros(1000), broadcast=True, hash=False)
    print("| jobs per step | steps | ms per job (median step) |")
    print("|---|---|---|")
    for per_step in (1, 2):
        times = []
        for _ in range(200):
            start = time.perf_counter()
            futures = client.map(_noop, [held] * per_step, list(range(per_step)), upper=0.0, remaining=1.0, pure=False)
            wait(futures)
            client.gather(futures)
            times.append((time.perf_counter() - start) / per_step)
        print(f"| {per_step} | 200 | {1000 * np.median(times):.2f} |")
    problem = instances["sMTL zbar_l2 ridge 1"]
    bounder = bnb_search.family(problem)(problem, 1000, Deadline(10))
    fixed = np.zeros((problem.n_tasks, problem.n_features), dtype=np.int8)
    job = (fixed, bounder.start(), 0)
    result = bounder.work(job, np.inf, Deadline(10))
    print(f"\nA sMTL zbar_l2 node job pickles to {len(pickle.dumps(job)) / 1024:.1f} KiB and its result to "
          f"{len(pickle.dumps(result)) / 1024:.1f} KiB; the bounder, scattered once per fit, to "
          f"{len(pickle.dumps(bounder)) / 1024:.0f} KiB.")
    return float(np.median(times))


class Recorder(Serial):
    """Serial workers that grow the tree N workers would (``size``) and time every job."""

    def __init__(self, size: int, deadline):
        super().__init__(deadline)
        self.size, self.steps, self.last = size, [], time.perf_counter()

    def map(self, bounder, jobs, upper):
        results, durations = [], []
        here = time.perf_counter() - self.last   # this process's own work since the last step
        for job in jobs:
            start = time.perf_counter()
            results.append(bounder.work(job, upper, self.deadline))
            durations.append(time.perf_counter() - start)
        self.steps.append([here, durations, None])
        self.last = time.perf_counter()
        return results


def record(name, problem, limit, size):
    """The steps of the tree ``size`` workers grow, over ``limit`` seconds serially: (this
    process's seconds, job seconds, the lower bound after the step) each."""
    recorders = []

    def recording(threads, deadline):
        recorders.append(Recorder(size, deadline))
        return recorders[-1]
    original_step = Engine.step

    def step(engine):
        taken = original_step(engine)
        if recorders and recorders[-1].steps and name not in CLUSTERED:   # a stage's bound is not the tree's
            recorders[-1].steps[-1][2] = engine.lower()
        return taken
    module = armul_tree if name in CLUSTERED else bnb_search
    saved = module.workers_for
    module.workers_for, Engine.step = recording, step
    try:
        run(name, problem, limit, None)
    finally:
        module.workers_for, Engine.step = saved, original_step
    return recorders[-1].steps


def makespan(durations, workers, cost):
    """List scheduling, longest first, of jobs of ``durations`` (+ ``cost`` each) on ``workers``."""
    loads = [0.0] * min(workers, max(len(durations), 1))
    for d in sorted(durations, reverse=True):
        heapq.heapreplace(loads, loads[0] + d + cost)
    return max(loads, default=0.0)


def time_to(steps, reached, workers, cost):
    """Modelled seconds until ``reached(index, step)`` (None if never)."""
    clock = 0.0
    for index, (here, durations, lower) in enumerate(steps):
        clock += here + (sum(durations) if workers == 1 else makespan(durations, workers, cost))
        if reached(index, lower):
            return clock
    return None


def replay(instances, limit, cost):
    print(f"\n## 3. Replay on N virtual workers (trees recorded for {limit:g} s each; per-job cost "
          f"{1000 * cost:.2f} ms)\n")
    print("| instance | " + " | ".join(f"N = {n}" for n in VIRTUAL[1:]) + " |")
    print("|---" * len(VIRTUAL) + "|")
    for name, problem in instances.items():
        trees = {n: record(name, problem, limit, n) for n in VIRTUAL}
        cells = []
        for n in VIRTUAL[1:]:
            if name in CLUSTERED:   # one node a step: the same nodes (the lookahead changes no bound)
                steps = min(len(trees[1]), len(trees[n])) - 1
                reached = lambda index, lower: index >= steps   # noqa: E731
            else:                   # best first: the bound both trees reach (no bound: the roots)
                target = min(trees[1][-1][2], trees[n][-1][2])
                reached = lambda index, lower: lower is not None and lower >= target   # noqa: E731
            serial, parallel = time_to(trees[1], reached, 1, 0.0), time_to(trees[n], reached, n, cost)
            cells.append(f"{serial / parallel:.2f}x" if serial and parallel else "-")
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=float, default=60.0, help="seconds per run")
    parser.add_argument("--quick", action="store_true", help="10 s per run")
    parser.add_argument("--sections", nargs="+", default=["speedup", "overhead", "replay"])
    args = parser.parse_args(argv)
    limit = 10.0 if args.quick else args.limit
    import distributed

    print(f"Machine: {platform.processor() or platform.machine()}, {platform.python_version()}, "
          f"2 cores shared by everything below")
    instances = {**sparse_instances(), **CLUSTERED}
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None,
                                  silence_logs=50) as cluster, distributed.Client(cluster) as client:
        if "speedup" in args.sections:
            speedup(instances, limit)
        cost = overhead(client, instances) if "overhead" in args.sections else 0.005
    if "replay" in args.sections:
        replay(instances, limit, cost)


if __name__ == "__main__":
    main()
