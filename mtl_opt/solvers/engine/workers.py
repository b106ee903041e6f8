"""Where a step's node work runs: here, on this machine's cores, or on a Dask cluster.

Every ``Workers`` has ``map(bounder, jobs, upper)``: ``[bounder.work(job, upper, deadline) for
job in jobs]``, in order, whatever ran them (``engine.search``).  Bounding nodes is nearly all of a
tree's time, and a job's result depends only on the job, the incumbent ``upper`` it was sent with
and the bounder, so one core, two or a cluster make the same tree; only the time differs.  A
job that fails remotely (a worker killed, restarted or late) is bounded here: workers can slow a
step, never change it, and a node is open until its result is in.

- ``Serial``: one job after another, here (``threads=1``, or inside a worker process).
- ``LocalWorkers``: this process takes the jobs from the front, ``threads - 1`` loky worker
  processes (joblib's process executor: start-up, crashes, shutdown) from the back, each taking
  the next as soon as it is done (a feeder thread per worker, while the compiled bound code here
  runs without the GIL): a job pruned early takes a fraction of one that is not.  They start
  once a fit has run ``POOL_AFTER`` seconds (small trees never pay for them), in the background,
  and hold each bounder: its first job sends it, later jobs only the job.
- ``DaskWorkers``: the active ``distributed.Client`` of ``joblib.parallel_config(backend="dask")``
  (scikit-learn's way of choosing a cluster): each bounder is scattered to the workers once
  (no shared filesystem), jobs travel as small descriptors with the time left (clocks are per
  machine), a step's in one ``client.map``, and this process bounds its share meanwhile (for a
  bounder that releases the GIL).  A stop (Ctrl-C, SIGTERM) or the deadline cancels what is
  still queued on the cluster and leaves the cluster as it was.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import concurrent.futures
import importlib
import multiprocessing
import os
import signal
import threading
import time
from typing import Protocol

from joblib.externals.loky import ProcessPoolExecutor

from ... import interrupts
from ..._lazy import unlink_pyomo_lock
from ...deadline import Deadline

#: Seconds a fit runs on one core before its local workers start (a start costs about a second).
POOL_AFTER = 1.0
#: Seconds of time budget a fit must have left for its local workers to start.
MIN_REMAINING = 5.0
#: Whether a fit waits for its local workers to start (it goes on bounding here when False);
#: tests set True to use them from the first step of a small tree.
WAIT_FOR_WORKER = False
#: Seconds past the deadline a remote job may take before it is bounded here instead.
LATE = 10.0
#: The local workers' environment: one BLAS thread, as ``one_blas_thread`` gives the parent.
_ENV = {name: "1" for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}

#: In a local worker: the bounders it holds, by their key in the parent.
_held: dict = {}


class Workers(Protocol):
    """Runs a step's jobs (module docstring); ``size`` is how many run at once, ``jobs`` counts
    those sent elsewhere."""

    size: int
    jobs: int

    def map(self, bounder, jobs: list, upper: float) -> list: ...

    def close(self) -> None: ...


class Serial:
    """Every job here, one after another."""

    size, jobs = 1, 0

    def __init__(self, deadline: Deadline):
        self.deadline = deadline

    def map(self, bounder, jobs: list, upper: float) -> list:
        return [bounder.work(job, upper, self.deadline) for job in jobs]

    def close(self) -> None:
        pass


def workers_for(threads: int | None, deadline: Deadline) -> Workers:
    """The workers a fit's trees share: the Dask cluster when ``joblib.parallel_config(backend=
    "dask")`` is active, else this machine's cores (``threads``: None for all), else one."""
    if multiprocessing.parent_process() is None and threads != 1:
        client = _dask_client()
        if client is not None:
            return DaskWorkers(client, deadline)
    return LocalWorkers(threads, deadline)


def _dask_client():
    """The ``distributed.Client`` of the active joblib backend, or None (joblib's dask backend is
    imported only where someone chose it)."""
    from joblib.parallel import get_active_backend

    backend = get_active_backend()[0]
    return getattr(backend, "client", None) if type(backend).__name__ == "DaskDistributedBackend" else None


def _waiting(deadline: Deadline):
    """Whether to go on waiting for remote jobs: no stop asked (``interrupts``) and not later than
    ``LATE`` seconds past ``deadline`` (a function of no argument, for a polling loop)."""
    give_up = time.perf_counter() + max(deadline.remaining(), 0.0) + LATE
    return lambda: not interrupts.requested() and time.perf_counter() <= give_up


def _work(bounder, job, upper: float, deadline: Deadline):
    """On a worker: bound ``job`` against ``upper`` (``deadline`` arrives as the time left when
    the job was sent: ``Deadline.__reduce__``)."""
    return bounder.work(job, upper, deadline)


class LocalWorkers(Serial):
    """This process and ``threads - 1`` local worker processes (module docstring)."""

    def __init__(self, threads: int | None, deadline: Deadline):
        super().__init__(deadline)
        cores = threads or os.cpu_count() or 1
        self.wanted = cores - 1 if cores >= 2 and multiprocessing.parent_process() is None else 0
        self.size = 1 + self.wanted
        self.started = time.perf_counter()
        self.executors, self.warming = [], []
        self.sent: set = set()
        self.jobs = 0

    def map(self, bounder, jobs: list, upper: float) -> list:
        """This process takes the jobs from the front, each worker (when they run) from the back,
        each taking the next when it is done; a job a worker fails on is bounded here.  A bounder
        whose work holds the GIL (``releases_gil`` False: numpy on small arrays) would starve the
        threads that feed the workers, so its last jobs are sent to them before this process
        starts on the first ones (``_sent_ahead``)."""
        self._start_if_due()
        if self.executors and len(jobs) >= 2 and not getattr(bounder, "releases_gil", False):
            return self._sent_ahead(bounder, jobs, upper)
        results, waiting, lock = [None] * len(jobs), collections.deque(range(len(jobs))), threading.Lock()

        def take(from_back: bool):
            """The next waiting job's index (None when none is left), from the back or the front."""
            with lock:
                if not waiting:
                    return None
                return waiting.pop() if from_back else waiting.popleft()
        feeders = [threading.Thread(target=self._feed, args=(executor, bounder, jobs, upper, results, take),
                                    daemon=True) for executor in self.executors[:len(jobs) - 1]]
        for feeder in feeders:
            feeder.start()
        while (i := take(False)) is not None:
            results[i] = bounder.work(jobs[i], upper, self.deadline)
        for feeder in feeders:
            feeder.join()
        return [result if result is not None else bounder.work(job, upper, self.deadline)
                for result, job in zip(results, jobs)]

    def _sent_ahead(self, bounder, jobs: list, upper: float) -> list:
        """The jobs past this process's share (the first ceil(n / (workers + 1))) sent to the
        workers in turn, then this process's share bounded here, then the workers' results; a
        job a worker fails on (or that cannot be sent) is bounded here."""
        here = -(-len(jobs) // (len(self.executors) + 1))
        futures = {}
        try:
            for i in range(here, len(jobs)):
                futures[i] = self._submit(self.executors[(i - here) % len(self.executors)], bounder, jobs[i], upper)
        except Exception:
            self._here_only()
        results = [bounder.work(job, upper, self.deadline) for job in jobs[:here]]
        for i in range(here, len(jobs)):
            result = self._waited(futures[i]) if i in futures else None
            results.append(result if result is not None else bounder.work(jobs[i], upper, self.deadline))
        return results

    def _waited(self, future):
        """The result of a worker's ``future``; None (and this process alone from now on) if it
        fails, is late, or a stop is asked (``interrupts``)."""
        try:
            waiting = _waiting(self.deadline)
            while not concurrent.futures.wait([future], timeout=0.05).done:
                if not waiting():
                    raise TimeoutError   # late, or a stop asked: the worker's job is dropped
            return future.result()
        except Exception:
            self._here_only()
            return None

    def close(self) -> None:
        """Kill the workers (the fit is over, or interrupted: the jobs they hold are not needed)
        and wait for their executors to release what they hold."""
        for executor, _ in self.warming:
            executor.shutdown(wait=True, kill_workers=True)
        self.warming = []
        self._here_only()

    def _here_only(self) -> None:
        """Bound every later job here: a worker failed, cannot start, or the fit is over."""
        self.executors, self.wanted = [], 0

    def _start_if_due(self) -> None:
        """Start the workers once due, and use them once every one has started."""
        if (self.wanted and not self.warming and time.perf_counter() - self.started >= POOL_AFTER
                and self.deadline.remaining() >= MIN_REMAINING):
            try:
                for _ in range(self.wanted):
                    executor = ProcessPoolExecutor(max_workers=1, env=_ENV, initializer=_started)
                    self.warming.append((executor, executor.submit(_ready)))
                if WAIT_FOR_WORKER:
                    concurrent.futures.wait([ready for _, ready in self.warming])
            except Exception:   # no worker processes here (e.g. no semaphores)
                self._here_only()
        if self.wanted and not self.executors and self.warming and all(ready.done() for _, ready in self.warming):
            if all(ready.exception() is None for _, ready in self.warming):
                self.executors = [executor for executor, _ in self.warming]
            else:
                self._here_only()

    def _feed(self, executor, bounder, jobs, upper, results, take) -> None:
        """In a thread: ``executor``'s worker bounds the last waiting job, then the next, until none
        is left.  On a failed, killed or late worker, or a stop asked (``interrupts``), every job
        turns to this process (the result stays None, and ``map`` bounds it here)."""
        while self.executors and (i := take(True)) is not None:
            try:
                future = self._submit(executor, bounder, jobs[i], upper)
            except Exception:
                self._here_only()
                return
            results[i] = self._waited(future)

    def _submit(self, executor, bounder, job, upper: float):
        """``job`` sent to ``executor``'s worker, with ``bounder`` the first time."""
        key = id(bounder)
        held = None if (key, executor) in self.sent else bounder
        self.sent.add((key, executor))
        self.jobs += 1
        return executor.submit(_work_held, key, held, job, upper, self.deadline)


def _work_held(key, bounder, job, upper: float, deadline: Deadline):
    """In a local worker: ``_work`` on the held bounder ``key`` (``bounder`` replaces it when sent;
    a KeyError, a restarted worker, makes the parent bound the job itself)."""
    if bounder is not None:
        _held[key] = bounder
    return _work(_held[key], job, upper, deadline)


def _started() -> None:
    """A local worker's initializer: ignore SIGINT, exit with the parent (``interrupts.watch_parent``),
    and make and unlink Pyomo's semaphore before anything else (``unlink_pyomo_lock``).

    A terminal's Ctrl-C reaches the whole process group: a worker's job raised KeyboardInterrupt,
    which its future handed to the parent, and ``mtl-opt solve`` of the clustered tree ended with
    no result (3 runs in 4).  The parent stops its workers itself (``close``)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    interrupts.watch_parent()
    unlink_pyomo_lock()


def _ready() -> None:
    """In a local worker: import what bounding needs, so the first job is not late."""
    importlib.import_module("mtl_opt.solvers.sparse.bnb.search")
    importlib.import_module("mtl_opt.solvers.armul.tree")


class DaskWorkers(Serial):
    """The jobs on a Dask cluster's workers (module docstring)."""

    def __init__(self, client, deadline: Deadline):
        super().__init__(deadline)
        self.client, self.scattered, self.jobs, self.size = client, {}, 0, 1
        try:
            self.size = max(sum(client.nthreads().values()), 1)
        except Exception:   # no scheduler behind the client: the fit runs here
            self.client = None

    def map(self, bounder, jobs: list, upper: float) -> list:
        """The jobs past this process's share (the first of n / (cluster threads + 1), for a
        bounder that releases the GIL: the client's thread talks to the cluster meanwhile) on the
        cluster, that share here; a job that fails there (a worker died) or is not back by the
        deadline (plus ``LATE``) is bounded here, and a stop cancels what is queued."""
        if self.client is None:   # the cluster failed this fit: here from now on
            return super().map(bounder, jobs, upper)
        here = len(jobs) // (self.size + 1) if getattr(bounder, "releases_gil", False) else 0
        try:
            futures = self._sent(bounder, jobs[here:], upper)
        except Exception:   # the scheduler is gone or refuses the work: no cluster for this fit
            self.client, futures = None, []
        results = [bounder.work(job, upper, self.deadline) for job in jobs[:here]]
        returned = self._returned(futures)
        return results + [returned[i] if i in returned else bounder.work(job, upper, self.deadline)
                          for i, job in enumerate(jobs[here:])]

    def _sent(self, bounder, jobs: list, upper: float) -> list:
        """The cluster's futures of ``jobs``, the bounder scattered first if it is new."""
        futures = self.client.map(_work, [self._held(bounder)] * len(jobs), jobs, upper=upper,
                                  deadline=self.deadline, pure=False)
        self.jobs += len(futures)
        return futures

    def _returned(self, futures: list) -> dict:
        """{index: result} of the futures back by the deadline (plus ``LATE``) and before a stop;
        the others are cancelled on the cluster (a failed or lost one never comes back)."""
        from distributed import wait

        waiting, pending = _waiting(self.deadline), futures
        try:
            while pending and waiting():
                with contextlib.suppress(TimeoutError, asyncio.TimeoutError):   # one poll's time
                    wait(pending, timeout=0.05)
                pending = [future for future in pending if not future.done()]
            if pending:
                self.client.cancel(pending)
            back = [i for i, future in enumerate(futures) if future.status == "finished"]
            return dict(zip(back, self.client.gather([futures[i] for i in back]))) if back else {}
        except Exception:   # the cluster went away mid-step: every job of it is bounded here
            self.client = None
            return {}

    def _held(self, bounder):
        """``bounder`` on every worker (scattered once per fit), as a future its jobs refer to (the
        bounder is kept beside it, so its id stays its own for the fit)."""
        key = id(bounder)
        if key not in self.scattered:
            self.scattered[key] = (bounder, self.client.scatter(bounder, broadcast=True, hash=False))
        return self.scattered[key][1]

    def close(self) -> None:
        """Release the scattered bounders (the cluster stays up for the next fit)."""
        futures = [future for _, future in self.scattered.values()]
        self.scattered = {}
        if futures and self.client is not None:
            with contextlib.suppress(Exception):   # a cluster already gone holds nothing
                self.client.cancel(futures)
