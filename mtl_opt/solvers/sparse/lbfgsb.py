"""L-BFGS-B without scipy.optimize.minimize's per-step overhead: scipy's compiled routine, driven
directly.

bnb bounds a node of a Zbar tree with more than ``bnb.sets.ENUMERATED_TASKS`` tasks (prices >= 0, its
dual evaluated by a numpy recursion) by climbing its dual with L-BFGS-B, hundreds of steps (the
other trees climb in ``bnb.kernels.climb``; these figures were measured when the K = 4 trees climbed
here too: about 0.4 ms a step at p = 250).  ``scipy.optimize.minimize`` adds about 0.25 ms of Python to each step (its
``ScalarFunction`` wrapper, copies and checks of the point, a result object per iteration): 33-43%
of a climb's time.  ``minimize`` here runs the loop scipy's own ``_minimize_lbfgsb`` runs around the same
compiled routine, without the wrapper: the same iterates and the same stops (tested against
scipy's).  The routine's calling convention is private to scipy; it is the one of scipy 1.15 and
later (``DIRECT``, probed at import), and other versions go through ``scipy.optimize.minimize``.
"""

from __future__ import annotations

import numpy as np
import scipy.optimize

try:
    from scipy.optimize import _lbfgsb
except ImportError:   # a scipy that moved it: scipy.optimize.minimize then
    _lbfgsb = None

#: Most function evaluations in one line search, and in one run (scipy's defaults).
MAX_LINE_SEARCH, MAX_EVALUATIONS = 20, 15000
#: The routine's task codes (scipy >= 1.15): evaluate f and g at x, a new iterate, stop.
_FG, _NEW_X, _STOP, _STOP_MAXITER, _STOP_MAXFUN = 3, 1, 5, 504, 502


def minimize(fun, x0: np.ndarray, lower: np.ndarray | None, *, maxiter: int, memory: int,
             ftol: float) -> np.ndarray:
    """The last iterate of L-BFGS-B minimizing ``fun`` (x -> (value, gradient)) from ``x0``,
    with x >= ``lower`` (-inf entries: unbounded; None: no bounds).

    It stops after ``maxiter`` iterations, once a step gains less than ``ftol`` relative to the
    value (no gradient test), or past ``MAX_EVALUATIONS``, as ``scipy.optimize.minimize(..., method=
    "L-BFGS-B", options={"maxiter", "maxcor": memory, "ftol", "gtol": 0})`` does, whose loop
    ``_direct`` is.  ``fun`` gets a copy of the point; exceptions it raises pass through.
    """
    if DIRECT:
        return _direct(fun, x0, lower, maxiter, memory, ftol)
    bounds = None if lower is None else scipy.optimize.Bounds(lower, np.inf)
    return scipy.optimize.minimize(fun, x0, jac=True, method="L-BFGS-B", bounds=bounds,
                                   options={"maxiter": maxiter, "maxcor": memory, "ftol": ftol,
                                            "gtol": 0.0, "maxfun": MAX_EVALUATIONS}).x


def _direct(fun, x0, lower, maxiter, memory, ftol) -> np.ndarray:
    """``minimize`` by the compiled routine: scipy's ``_minimize_lbfgsb`` loop (scipy >= 1.15)."""
    n = len(x0)
    lower = np.full(n, -np.inf) if lower is None else lower
    finite = np.isfinite(lower)
    low, high = np.where(finite, lower, 0.0), np.zeros(n)
    x = np.where(finite, np.maximum(x0, low), x0).astype(np.float64)   # x0 clipped into the box
    kinds = finite.astype(np.int32)   # 1: bounded below only, 0: free
    f, g = 0.0, np.zeros(n)
    work = np.zeros(2 * memory * n + 5 * n + 11 * memory * memory + 8 * memory)
    int_work, task, line_task = np.zeros(3 * n, np.int32), np.zeros(2, np.int32), np.zeros(2, np.int32)
    logical, integers, doubles = np.zeros(4, np.int32), np.zeros(44, np.int32), np.zeros(29)
    factr, iterations, evaluations = ftol / np.finfo(float).eps, 0, 0
    while True:
        _lbfgsb.setulb(memory, x, low, high, kinds, f, g, factr, 0.0, work, int_work, task,
                       logical, integers, doubles, MAX_LINE_SEARCH, line_task)
        if task[0] == _FG:
            f, g = fun(x.copy())
            f, g, evaluations = float(f), np.asarray(g, dtype=np.float64), evaluations + 1
        elif task[0] == _NEW_X:
            iterations += 1
            if iterations >= maxiter:
                task[:] = _STOP, _STOP_MAXITER
            elif evaluations > MAX_EVALUATIONS:
                task[:] = _STOP, _STOP_MAXFUN
        else:
            return x


def _probe() -> bool:
    """Whether the compiled routine takes ``_direct``'s calling convention: a bounded two-variable
    quadratic, min (x0 - 1)^2 + (x1 + 1)^2 with x1 >= 0, solved to (1, 0)."""
    if _lbfgsb is None:
        return False
    try:
        x = _direct(lambda x: ((x[0] - 1) ** 2 + (x[1] + 1) ** 2, np.array([2 * (x[0] - 1), 2 * (x[1] + 1)])),
                    np.array([5.0, 5.0]), np.array([-np.inf, 0.0]), 50, 5, 1e-12)
        return bool(np.allclose(x, [1.0, 0.0], atol=1e-6))
    except Exception:   # another signature (scipy < 1.15, or a later change): TypeError, ValueError...
        return False


#: Whether ``minimize`` drives the compiled routine itself (else through scipy.optimize.minimize).
DIRECT = _probe()
