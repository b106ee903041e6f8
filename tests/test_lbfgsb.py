"""``lbfgsb.minimize``: scipy's L-BFGS-B iterates, stops and box, on either path (the compiled routine
driven directly, or scipy.optimize.minimize where this scipy's routine has another signature)."""

import numpy as np
import pytest
import scipy.optimize

from mtl_opt.solvers.sparse import lbfgsb

#: Same compiled routine, same inputs: the iterates agree to the last bits; the tolerance only
#: keeps the comparison a float one.
TOLERANCE = 1e-12


def smooth_convex(seed: int, n: int = 30):
    """A least-squares term plus a log-sum-exp: curved, not quadratic, minimum away from 0."""
    rng = np.random.default_rng(seed)
    A, b = rng.normal(size=(n + 10, n)), rng.normal(size=n + 10)

    def fun(x):
        r, e = A @ x - b, np.exp(x - x.max())
        return 0.5 * r @ r + np.log(e.sum()) + x.max(), A.T @ r + e / e.sum()
    return fun, n


def scipys(fun, x0, lower, maxiter, ftol, maxfun):
    bounds = None if lower is None else scipy.optimize.Bounds(lower, np.inf)
    return scipy.optimize.minimize(fun, x0, jac=True, method="L-BFGS-B", bounds=bounds,
                                   options={"maxiter": maxiter, "maxcor": 10, "ftol": ftol, "gtol": 0.0,
                                            "maxfun": maxfun}).x


#: The paths this scipy has: the direct one only where the probe found the routine's signature
#: (``test_the_direct_path_runs_on_the_scipy_versions_checked`` says where that must be).
PATHS = ["direct", "scipy"] if lbfgsb.DIRECT else ["scipy"]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("maxiter, maxfun", [(3, 15000), (400, 15000), (400, 6)])  # stopped by maxiter, ftol, maxfun
@pytest.mark.parametrize("bounded", [False, True])
def test_the_iterates_are_scipys(monkeypatch, path, maxiter, maxfun, bounded):
    monkeypatch.setattr(lbfgsb, "DIRECT", path == "direct")
    monkeypatch.setattr(lbfgsb, "MAX_EVALUATIONS", maxfun)
    fun, n = smooth_convex(maxiter + bounded)
    lower = np.where(np.arange(n) < 8, 0.25, -np.inf) if bounded else None
    x0 = np.linspace(-1.0, 1.0, n)                     # starts outside the box: clipped into it
    ours = lbfgsb.minimize(fun, x0, lower, maxiter=maxiter, memory=10, ftol=1e-9)
    np.testing.assert_allclose(ours, scipys(fun, x0, lower, maxiter, 1e-9, maxfun), rtol=TOLERANCE, atol=TOLERANCE)
    if bounded:
        assert np.all(ours[:8] >= 0.25)
        assert np.isclose(ours[:8], 0.25).any()        # the box binds: the test sees it


def test_the_function_sees_copies_and_its_exceptions_pass_through():
    """bnb keeps the points it is handed, and stops a climb by raising inside the function."""
    fun, n = smooth_convex(7)
    seen = []

    class Enough(Exception):
        pass

    def recording(x):
        seen.append((x, x.copy()))
        if len(seen) == 25:
            raise Enough
        return fun(x)
    with pytest.raises(Enough):
        lbfgsb.minimize(recording, np.zeros(n), None, maxiter=100, memory=10, ftol=0.0)
    assert all(np.array_equal(kept, snapshot) for kept, snapshot in seen)
    assert len({snapshot.tobytes() for _, snapshot in seen}) > 20   # it moved: the check had something to see


def test_the_direct_path_runs_on_the_scipy_versions_checked():
    """scipy 1.15-1.17 (checked: the same iterates as scipy's) must not fall back silently; before
    1.15 the routine had another signature."""
    version = tuple(int(part) for part in scipy.__version__.split(".")[:2])
    if version < (1, 15):
        assert not lbfgsb.DIRECT
    elif version < (1, 18):
        assert lbfgsb.DIRECT
