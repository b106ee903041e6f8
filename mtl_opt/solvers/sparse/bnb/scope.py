"""What bnb can solve, importable without its kernels: ``bnb.search`` compiles numba kernels when
first imported (16-40 s once per Python environment), and ``mtl-opt validate`` or a fit's ``check`` asks only this."""

from __future__ import annotations

from ....formulations.sparse import SparseProblem

#: Per-task supports with a Bbar term are bounded by enumerating each column's 2^K task sets, up to
#: this many tasks (one dual evaluation at p = 250, n_k = 50 took 10.6 ms at K = 8, 133 ms at K = 10).
MAX_BBAR_TASKS = 8


def refusal(problem: SparseProblem) -> str | None:
    """Why bnb cannot solve ``problem`` (its scope: ``bnb.search``'s docstring), or None."""
    if not problem.lambda_ridge > 0:
        return ("algorithm='bnb' needs lambda_ridge > 0 (its node bounds come from the ridge term); "
                "use algorithm='oa_multi_tree', which takes lambda_ridge = 0 where every task has "
                "curvature of its own (n_k > p).")
    if problem.lambda_bbar and not problem.common_support and problem.n_tasks > MAX_BBAR_TASKS:
        return (f"algorithm='bnb' with a Bbar term enumerates the 2^K task sets of each column, "
                f"for K <= {MAX_BBAR_TASKS} tasks (here K = {problem.n_tasks}); use "
                f"algorithm='oa_multi_tree', which models any K (or variant='cs_bbar': a shared "
                f"support has two sets per column, and bnb takes any K).")
    side = problem.side
    if side.bounded and problem.lambda_bbar:
        return ("algorithm='bnb' takes signs and bounds on the coefficients (coef_bound included) "
                "but not with a Bbar term, whose node bounds couple a column's tasks; use "
                "algorithm='miqp', which models them.")
    if side.counts or side.shared:
        return ("algorithm='bnb' enforces include and exclude constraints, signs and bounds, not "
                "at_most, at_least or shared_support; use algorithm='oa_multi_tree' (or 'miqp'), "
                "which models them.")
    return None
