"""What this machine can hold and how to use its cores: size checks run before work starts (not a
MemoryError after it), and one BLAS thread for code made of many small solves."""

from __future__ import annotations

import contextlib
import functools
import os

from threadpoolctl import ThreadpoolController

from .errors import InvalidParameterError

@functools.cache
def _blas() -> ThreadpoolController:
    """The BLAS libraries this process loaded, found once, at the first limit (a scan costs ~3 ms):
    by then the fit's modules have loaded numpy's and scipy's BLAS, which a scan when this module
    is imported could precede (it then found none, and the limit limited nothing)."""
    return ThreadpoolController()


def one_blas_thread(function=None):
    """BLAS on one thread: ``with one_blas_thread():``, or ``@one_blas_thread`` on a function.
    Each use is a fresh limit, so nested and concurrent uses (fits in threads) put back what
    they found.

    The sparse heuristics and bnb are many small solves (Cholesky of s x s to K s x K s systems,
    X_k^T r), where a multi-threaded BLAS spends more on waking its threads than on the work,
    and its spinning threads collapse under load.  Measured: bcd on issue 18's p=1500, K=4,
    n_k=50 instance (2 cores) 1.00 s with OpenBLAS's 2 threads, 0.25 s with one (10.9 s against
    0.62 s on a busy machine); bnb on a K=2, p=8 soundness case beside 4 CPU burners 34 s
    against 13 s.  Cross-validation fits on one while its workers may start (``cv._run_folds``).
    """
    if function is None:
        return _blas().limit(limits=1, user_api="blas")

    @functools.wraps(function)
    def on_one_thread(*args, **kwargs):
        with _blas().limit(limits=1, user_api="blas"):
            return function(*args, **kwargs)
    return on_one_thread


#: Flops of the largest task's Gram matrix (n_k p^2) below which a whole fit runs BLAS on one
#: thread (``blas_for``).
SMALL_TASKS = 2e9


def blas_for(n_samples, n_features: int) -> contextlib.AbstractContextManager:
    """BLAS on one thread for a fit whose largest task (rows ``max(n_samples)``, ``n_features``
    columns) costs fewer than ``SMALL_TASKS`` flops for its Gram matrix; else as it is.

    numpy and scipy each load their own OpenBLAS, two thread pools: between calls, each one's
    threads spin while the other's wake, and a per-task least-squares fit (numpy's Gram matrix,
    scipy's Cholesky) of 5,000 x 200 took 71 ms on 2 threads, 20 ms on one.  MOLAR, 2 cores:
    30 tasks of 5,000 x 300, 4.97 s on 2 threads, 3.38 s on one; 30 of 500 x 50, 0.29 s
    against 0.033 s; low-rank ARMUL (30 of 200 x 50) 0.25 s against 0.11 s.  Large tasks gain
    from the threads: 5 of 20,000 x 500 (5e9 flops) 4 % and 2 of 8,000 x 2,000 (3.2e10) 38 %."""
    if max(n_samples, default=0) * n_features ** 2 < SMALL_TASKS:
        return one_blas_thread()
    return contextlib.nullcontext()


def physical_memory() -> int | None:
    """Bytes of physical memory (None where the OS does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def available_memory() -> int | None:
    """Bytes available for new allocations (Linux ``MemAvailable``, else free pages); None if unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None


def require_memory(nbytes: int, what: str, remedy: str) -> None:
    """Raise InvalidParameterError when ``what`` needs more than the available memory.

    ``nbytes`` is an up-front estimate of the arrays the run allocates; ``remedy``
    says which parameter to lower.
    """
    available = available_memory()
    if available is not None and nbytes > available:
        raise InvalidParameterError(
            f"{what} needs at least {_size(nbytes)} of memory but {_size(available)} is "
            f"available; {remedy}.")


def _size(nbytes: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if nbytes < 1024:
            return f"{nbytes:.3g} {unit}"
        nbytes /= 1024
    return f"{nbytes:.3g} TiB"
