"""A fit of small tasks runs BLAS on one thread (``resources.blas_for``), a fit of large ones on
the threads it was given, and the caller's limit is back after either."""

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from mtl_opt.data import MultiTaskData
from mtl_opt.estimators import MOLAR
from mtl_opt.resources import SMALL_TASKS, blas_for


def blas_threads() -> int:
    return max((lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"), default=0)


@pytest.fixture
def two_threads():
    with threadpool_limits(limits=2, user_api="blas"):
        if blas_threads() < 2:
            pytest.skip("this BLAS runs one thread only: no limit to observe")
        yield
        assert blas_threads() == 2   # the caller's limit is back


@pytest.mark.parametrize("rows, columns, threads", [
    ([60, 500], 50, 1),
    ([60, int(SMALL_TASKS // 1000**2) - 1], 1000, 1),   # the largest task just below the line
    ([60, int(SMALL_TASKS // 1000**2) + 1], 1000, 2),   # and just above it
])
def test_blas_runs_on_one_thread_below_the_line_only(two_threads, rows, columns, threads):
    with blas_for(np.array(rows), columns):
        assert blas_threads() == threads


class Probe(MOLAR):
    """MOLAR recording the BLAS threads its fit runs on."""

    seen: list = []

    def _fit(self, data):
        Probe.seen.append(blas_threads())
        return super()._fit(data)


def test_a_fit_of_small_tasks_runs_on_one_blas_thread(two_threads):
    rng = np.random.default_rng(0)
    data = MultiTaskData([rng.standard_normal((60, 5)) for _ in range(3)],
                         [rng.standard_normal(60) for _ in range(3)])
    Probe.seen = []
    Probe().fit(data)
    assert Probe.seen == [1]
