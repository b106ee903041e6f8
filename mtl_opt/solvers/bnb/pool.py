"""Both cores on one branch-and-bound tree: the children of a step's splits are bounded at once,
shared between this process and a worker process.

Bounding a node (an L-BFGS climb of its dual) is nearly all of bnb's time, and a step splits up to
``tree.BATCH`` nodes into two children each.  This process bounds them from the front of the list, a
joblib (loky) worker from the back, each taking the next as soon as it is done (a thread here hands
the worker its nodes, while ``kernels.climb`` runs here without the GIL), so that neither waits
while the other has work: a climb pruned early takes a fraction of one that is not.  All are bounded
against the same incumbent, and their supports are offered only afterwards (``Tree.push``), so
the tree, its bounds and its answer are the same on one core or two; only the time differs.

The worker is a loky process (joblib's process executor, which handles start-up, crashes and
shutdown), one per fit and shut down with it (it exits by itself once its parent is gone:
``interrupts.watch_parent``): not joblib's shared reusable executor, whose ``Parallel`` calls
(cross-validation's ``n_jobs``) expect it to be set up their way.  It holds a
copy of the search: the first job of a search sends it, later jobs only the node.  The pool starts
once a search has run ``POOL_AFTER`` seconds (small trees never pay for it), in the background (its
imports take about a second, which the search spends bounding here), not inside a worker process
(no nested pools), and not with ``threads=1``.  A worker that fails or is late is replaced by
bounding the node here: the pool can slow a step, never change it.
"""

from __future__ import annotations

import collections
import concurrent.futures
import importlib
import multiprocessing
import os
import threading
import time

import numpy as np
from joblib.externals.loky import ProcessPoolExecutor

from ... import interrupts

#: Seconds a search runs on one core before the worker starts (a start costs about a second).
POOL_AFTER = 1.0
#: Seconds of time budget a search must have left for the worker to start.
MIN_REMAINING = 5.0
#: Whether a search waits for the worker to start (it goes on bounding here when False); tests
#: set True to use the worker from the first split of a small tree.
WAIT_FOR_WORKER = False
#: The worker's environment: one BLAS thread, as ``one_blas_thread`` gives the parent.
_ENV = {name: "1" for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}

#: In the worker: copies of the fit's searches, by the id of the search in the parent.
_held: dict = {}


class NodePool:
    """Bounds lists of nodes, shared with a worker once the pool has started."""

    def __init__(self, threads: int | None, deadline):
        cores = threads or os.cpu_count() or 1
        self.wanted = cores >= 2 and multiprocessing.parent_process() is None
        self.deadline, self.started = deadline, time.perf_counter()
        self.executor, self.warming = None, None
        self.sent, self.jobs = set(), 0

    def bounds(self, search, nodes: list[tuple[np.ndarray, np.ndarray]]) -> list:
        """[search.bound(fixed, r) for fixed, r in nodes]: this process takes them from the front,
        the worker (when it runs) from the back, each taking the next when it is done.  A node the
        worker fails on is bounded here."""
        self._start_if_due()
        results, waiting, lock = [None] * len(nodes), collections.deque(range(len(nodes))), threading.Lock()

        def take(from_back: bool):
            """The next waiting node's index (None when none is left), from the back or the front."""
            with lock:
                if not waiting:
                    return None
                return waiting.pop() if from_back else waiting.popleft()
        feeder = None
        if self.executor is not None and len(nodes) >= 2:
            feeder = threading.Thread(target=self._feed, args=(search, nodes, results, take), daemon=True)
            feeder.start()
        while (i := take(False)) is not None:
            results[i] = search.bound(*nodes[i])
        if feeder is not None:
            feeder.join()
        return [result if result is not None else search.bound(*node) for result, node in zip(results, nodes)]

    def close(self) -> None:
        """Kill the worker (the fit is over, or interrupted: the node it bounds is not needed) and
        wait for its executor to release what it holds."""
        if self.warming is not None:
            self.warming[0].shutdown(wait=True, kill_workers=True)
        self.warming = None
        self._one_core()

    def _one_core(self) -> None:
        """Bound every later node here: the worker failed, cannot start, or the fit is over."""
        self.executor, self.wanted = None, False

    def _start_if_due(self) -> None:
        """Start the worker once due, and use it once it has started."""
        if (self.wanted and self.warming is None and time.perf_counter() - self.started >= POOL_AFTER
                and self.deadline.remaining() >= MIN_REMAINING):
            try:
                executor = ProcessPoolExecutor(max_workers=1, env=_ENV,
                                               initializer=_started)
                self.warming = executor, executor.submit(_ready)
                if WAIT_FOR_WORKER:
                    concurrent.futures.wait([self.warming[1]])
            except Exception:   # no worker processes here (e.g. no semaphores)
                self._one_core()
        if self.wanted and self.executor is None and self.warming is not None and self.warming[1].done():
            executor, ready = self.warming
            if ready.exception() is None:
                self.executor = executor
            else:
                self._one_core()

    def _feed(self, search, nodes, results, take) -> None:
        """In a thread: the worker bounds the last waiting node, then the next, until none is left.
        On a failed, killed or late worker, or a stop asked (``interrupts``), the pool turns to one
        core and ``bounds`` bounds the node here (its result stays None)."""
        while self.executor is not None and (i := take(True)) is not None:
            try:
                future = self._submit(search, *nodes[i])
                late = time.perf_counter() + max(self.deadline.remaining(), 0.0) + 10.0
                while not concurrent.futures.wait([future], timeout=0.05).done:
                    if interrupts.requested() or time.perf_counter() > late:
                        raise TimeoutError   # a stop asked: the worker's node is dropped
                results[i] = future.result()
            except Exception:
                self._one_core()

    def _submit(self, search, fixed, r):
        key = id(search)
        twin = None if key in self.sent else search.detached()
        self.sent.add(key)
        self.jobs += 1
        return self.executor.submit(_bound, key, twin, fixed, r, search.upper)


def _started() -> None:
    """The worker's initializer: exit with the parent (``interrupts.watch_parent``), and make and
    unlink Pyomo's semaphore before anything else, so no kill can leave it behind (``_unlink``)."""
    interrupts.watch_parent()
    dependencies = importlib.import_module("pyomo.common.dependencies")
    dependencies.multiprocessing.Lock   # resolves the deferred import: Pyomo makes its lock now
    _unlink(dependencies.capture_output_lock)


def _ready() -> None:
    """In the worker: import what bounding needs, so the first node is not late."""
    importlib.import_module("mtl_opt.solvers.bnb.search")


def _unlink(lock) -> None:
    """Unlink the named semaphore of ``lock`` now (it still works) and drop it from the resource
    tracker: Pyomo makes one on import, and a worker killed mid-import or mid-node (``close``)
    would otherwise leave it for the tracker, which says so on the terminal."""
    name = getattr(getattr(lock, "_semlock", None), "name", None)
    if name is None:
        return
    from multiprocessing import resource_tracker, synchronize

    synchronize.sem_unlink(name)
    resource_tracker.unregister(name, "semaphore")


#: Bounds one node after another (the searches' default, and what ``threads=1`` amounts to).
SERIAL = NodePool(1, None)


def _bound(key, twin, fixed, r, upper):
    """In the worker: bound ``fixed`` from ``r`` on the held copy of the search ``key`` (``twin``
    replaces it when sent), pruning against ``upper``."""
    if twin is not None:
        _held[key] = twin
    search = _held[key]   # a KeyError (a restarted worker) makes the parent bound the node itself
    search.upper = upper
    return search.bound(fixed, r)
