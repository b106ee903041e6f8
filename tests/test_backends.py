"""Backend adapters: reference problems written once, run on every backend that can.

As in CVXPY's solver_test_helpers and Pyomo's solver tests: each reference
problem has a hand-computed or brute-forced optimum, and each test is
parametrized over the backends with the needed capability.  Both backends are
required dependencies, so none is skipped: a broken install fails here.
"""

import itertools
import logging

import numpy as np
import pyomo.environ as pyo
import pytest

from mtl_opt.errors import CapabilityError, InvalidParameterError, SolverError
from mtl_opt.solvers.backends import (
    BACKENDS,
    CAPABILITIES,
    STATUSES,
    BackendResult,
    HighsBackend,
    ScipBackend,
    absolute_gap,
    get_backend,
    list_backends,
    pick_backend,
    relative_gap,
)
from mtl_opt.solvers.options import SolveOptions
from mtl_opt.deadline import Deadline


#: The backends of mtl_opt's own dependencies (Gurobi is an optional extra: test_gurobi.py).
REQUIRED = {name: cls for name, cls in BACKENDS.items() if name in ("highs", "scip")}


def backends_with(capability):
    """Required backend names offering ``capability``."""
    return [name for name, cls in REQUIRED.items() if capability in cls.capabilities]


def test_every_backend_is_installed():
    """highspy and pyscipopt are runtime dependencies: both must load."""
    assert len(REQUIRED) == 2 and all(cls().available() for cls in REQUIRED.values())


# --- reference problems ------------------------------------------------------


def lp_0(c1_both_sides=False):
    """min x + 2y  s.t.  x + y >= 2,  x - y <= 1,  x, y >= 0.

    Both rows bind: x = 1.5, y = 0.5, objective 2.5.  Duals (d obj / d rhs):
    u + v = 1 and u - v = 2 give u = 1.5 (c1) and v = -0.5 (c2).  Written as
    ``y >= 2 - x``, Pyomo keeps c1 as ``2 - x - y <= 0``: its dual is -1.5.
    """
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(0, None))
    m.y = pyo.Var(bounds=(0, None))
    m.c1 = pyo.Constraint(expr=m.y >= 2 - m.x if c1_both_sides else m.x + m.y >= 2)
    m.c2 = pyo.Constraint(expr=m.x - m.y <= 1)
    m.obj = pyo.Objective(expr=m.x + 2 * m.y)
    return m


def lp_infeasible():
    m = pyo.ConcreteModel()
    m.x = pyo.Var()
    m.y = pyo.Var()
    m.c1 = pyo.Constraint(expr=m.x + m.y >= 3)
    m.c2 = pyo.Constraint(expr=m.x <= 1)
    m.c3 = pyo.Constraint(expr=m.y <= 1)
    m.obj = pyo.Objective(expr=m.x + m.y)
    return m


KNAP_VALUES = [10, 13, 7, 8, 9, 4, 12, 6]
KNAP_WEIGHTS = [5, 7, 4, 4, 5, 2, 6, 3]
KNAP_CAPACITY = 17


def milp_knapsack():
    """Knapsack as a minimization of minus the packed value."""
    m = pyo.ConcreteModel()
    items = range(len(KNAP_VALUES))
    m.x = pyo.Var(items, within=pyo.Binary)
    m.cap = pyo.Constraint(expr=sum(KNAP_WEIGHTS[j] * m.x[j] for j in items) <= KNAP_CAPACITY)
    m.obj = pyo.Objective(expr=-sum(KNAP_VALUES[j] * m.x[j] for j in items))
    return m


def knapsack_brute_force():
    return min(
        -np.dot(KNAP_VALUES, pick)
        for pick in itertools.product((0, 1), repeat=len(KNAP_VALUES))
        if np.dot(KNAP_WEIGHTS, pick) <= KNAP_CAPACITY
    )


def qp_0():
    """min (x - 1)^2 + (y - 2)^2  s.t.  x + y <= 1.

    Projection of (1, 2) onto the half-plane: (1, 2) - (3 - 1)/2 (1, 1) = (0, 1),
    objective 1 + 1 = 2.
    """
    m = pyo.ConcreteModel()
    m.x = pyo.Var()
    m.y = pyo.Var()
    m.c = pyo.Constraint(expr=m.x + m.y <= 1)
    m.obj = pyo.Objective(expr=(m.x - 1) ** 2 + (m.y - 2) ** 2)
    return m


def miqp_objective(x1, x2):
    return (x1 - 0.6) ** 2 + (x2 + 1.3) ** 2 + 0.5 * (x1 - x2) ** 2


def miqp_0():
    """min miqp_objective(x) over integers x in [-3, 3]^2  (with x1 + x2 >= -1)."""
    m = pyo.ConcreteModel()
    m.x1 = pyo.Var(within=pyo.Integers, bounds=(-3, 3))
    m.x2 = pyo.Var(within=pyo.Integers, bounds=(-3, 3))
    m.c = pyo.Constraint(expr=m.x1 + m.x2 >= -1)
    m.obj = pyo.Objective(expr=miqp_objective(m.x1, m.x2))
    return m


def miqp_brute_force():
    return min(miqp_objective(a, b) for a in range(-3, 4) for b in range(-3, 4) if a + b >= -1)


def milp_market_split(offset=0.0, seed=0, rows=4, cols=30):
    """Market split (Cornuejols-Dawande): tiny, and far too hard for B&B to finish fast.

    min offset + sum_i |s_i|  s.t.  A x + s = floor(A 1 / 2),  x binary.
    """
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 100, size=(rows, cols))
    m = pyo.ConcreteModel()
    m.x = pyo.Var(range(cols), within=pyo.Binary)
    m.s = pyo.Var(range(rows))
    m.t = pyo.Var(range(rows), bounds=(0, None))
    m.split = pyo.Constraint(range(rows), rule=lambda m, i: (
        sum(int(a[i, j]) * m.x[j] for j in range(cols)) + m.s[i] == int(a[i].sum() // 2)))
    m.pos = pyo.Constraint(range(rows), rule=lambda m, i: m.t[i] >= m.s[i])
    m.neg = pyo.Constraint(range(rows), rule=lambda m, i: m.t[i] >= -m.s[i])
    m.obj = pyo.Objective(expr=offset + sum(m.t[i] for i in range(rows)))
    return m


# --- solving reference problems --------------------------------------------------


@pytest.mark.parametrize("name", backends_with("lp"))
def test_lp_optimum_primal_and_bound(name):
    m = lp_0()
    res = get_backend(name).solve(m, "lp", deadline=Deadline())
    assert res.status == "optimal" and res.has_solution
    assert res.objective == pytest.approx(2.5)
    assert (m.x.value, m.y.value) == pytest.approx((1.5, 0.5))
    assert res.bound is not None and res.bound <= 2.5 + 1e-9
    assert res.gap == pytest.approx(0.0, abs=1e-9)
    assert res.solver == get_backend(name).label and res.solver_version
    assert res.wall_time > 0 and res.native["status"] and res.native["termination_condition"]


@pytest.mark.parametrize("name", backends_with("lp"))
@pytest.mark.parametrize("c1_both_sides, c1_dual", [(False, 1.5), (True, -1.5)])
def test_lp_duals_match_hand_computed_values(name, c1_both_sides, c1_dual):
    m = lp_0(c1_both_sides)
    backend = get_backend(name)
    res = backend.solve(m, "lp", deadline=Deadline())
    duals = backend.load_duals(m, res)
    assert duals[m.c1] == pytest.approx(c1_dual) and duals[m.c2] == pytest.approx(-0.5)
    assert backend.load_duals(m, res, [m.c2]) == {m.c2: pytest.approx(-0.5)}


def test_scip_duals_need_presolve_off():
    m = lp_0()
    res = ScipBackend().solve(m, "lp", SolveOptions(solver_options={"presolving/maxrounds": -1}), deadline=Deadline())
    assert res.status == "optimal"
    with pytest.raises(SolverError, match="presolve"):
        ScipBackend().load_duals(m, res)


@pytest.mark.parametrize("name", backends_with("milp"))
def test_milp_duals_are_refused(name):
    backend = get_backend(name)
    m = milp_knapsack()
    res = backend.solve(m, "milp", deadline=Deadline())
    with pytest.raises(SolverError, match="only for an LP"):
        backend.load_duals(m, res)


@pytest.mark.parametrize("name", backends_with("lp"))
def test_infeasible_lp(name):
    res = get_backend(name).solve(lp_infeasible(), "lp", deadline=Deadline())
    assert res.status == "infeasible"
    assert not res.has_solution and res.objective is None and res.gap is None


@pytest.mark.parametrize("name", backends_with("milp"))
def test_milp_knapsack_matches_brute_force(name):
    m = milp_knapsack()
    res = get_backend(name).solve(m, "milp", deadline=Deadline())
    best = knapsack_brute_force()
    assert res.status == "optimal" and res.has_solution
    assert res.objective == pytest.approx(best)
    assert -sum(KNAP_VALUES[j] * round(m.x[j].value) for j in m.x) == pytest.approx(best)
    assert res.bound is not None and res.bound <= best + 1e-9


@pytest.mark.parametrize("name", backends_with("qp"))
def test_convex_qp_closed_form(name):
    m = qp_0()
    res = get_backend(name).solve(m, "qp", deadline=Deadline())
    assert res.status == "optimal"
    assert res.objective == pytest.approx(2.0, abs=1e-6)
    assert (m.x.value, m.y.value) == pytest.approx((0.0, 1.0), abs=1e-4)
    if res.bound is not None:
        assert res.bound <= 2.0 + 1e-6


@pytest.mark.parametrize("name", backends_with("miqp"))
def test_miqp_matches_brute_force(name):
    m = miqp_0()
    res = get_backend(name).solve(m, "miqp", deadline=Deadline())
    best = miqp_brute_force()
    # SCIP reaches its epigraph form's default 1e-6 gap before closing it: gap_limit.
    assert res.status in ("optimal", "gap_limit") and res.gap <= 1e-6
    assert res.objective == pytest.approx(best, abs=1e-5)
    assert miqp_objective(m.x1.value, m.x2.value) == pytest.approx(best, abs=1e-9)
    assert res.bound is not None and res.bound <= best + 1e-9


@pytest.mark.parametrize("name", backends_with("milp"))
def test_persistent_solves_see_added_rows_like_fresh_solves(name):
    """persistent=True reuses one solver for the model; cuts added between solves still count."""
    backend = get_backend(name)
    m = milp_knapsack()
    m.cuts = pyo.ConstraintList()
    values = []
    for extra in (None, 0, 1):
        if extra is not None:  # forbid the current best item set's item ``extra``-th chosen
            m.cuts.add(m.x[sorted(j for j in m.x if m.x[j].value > 0.5)[extra]] == 0)
        persistent = backend.solve(m, "milp", persistent=True, deadline=Deadline())
        fresh = get_backend(name).solve(m, "milp", deadline=Deadline())
        assert persistent.status == fresh.status == "optimal"
        assert persistent.objective == pytest.approx(fresh.objective)
        values.append(persistent.objective)
    assert values[0] <= values[1] <= values[2]
    assert backend._session[0] is m


def test_highs_mip_start_gives_an_incumbent_and_completes_the_continuous_part():
    """With no nodes and no heuristics HiGHS finds nothing alone; from a start on x only it
    has that start's objective, with y filled in by its LP repair."""
    def model():
        m = milp_knapsack()
        m.y = pyo.Var(within=pyo.NonNegativeReals)
        m.link = pyo.Constraint(expr=m.y >= m.x[0] + m.x[1] - 1)
        m.obj.expr = m.obj.expr + m.y
        return m
    opts = SolveOptions(solver_options={"mip_max_nodes": 0, "mip_heuristic_effort": 0.0,
                                        "presolve": "off"})
    alone = HighsBackend().solve(model(), "milp", opts, deadline=Deadline(opts.time_limit))
    m = model()
    started = HighsBackend().solve(m, "milp", opts, start=[(m.x[0], 1.0), (m.x[1], 1.0)], deadline=Deadline(opts.time_limit))
    assert not alone.has_solution
    assert started.has_solution
    assert started.objective == pytest.approx(-KNAP_VALUES[0] - KNAP_VALUES[1] + 1.0)
    assert m.y.value == pytest.approx(1.0)


NODE_LIMIT = {"highs": {"mip_max_nodes": 1}, "scip": {"limits/nodes": 1}, "gurobi": {"NodeLimit": 1}}


@pytest.mark.parametrize("name", backends_with("milp"))
@pytest.mark.parametrize("limit", ["time_limit", "iteration_limit"])
def test_limited_milp_keeps_incumbent_and_valid_bound(name, limit):
    opts = (SolveOptions(time_limit=0.05) if limit == "time_limit"
            else SolveOptions(solver_options=NODE_LIMIT[name]))
    m = milp_market_split()
    res = get_backend(name).solve(m, "milp", opts, deadline=Deadline(opts.time_limit))
    assert res.status == limit
    if res.has_solution:  # the incumbent is loaded
        assert res.objective == pytest.approx(pyo.value(m.obj))
    if res.objective is not None and res.bound is not None:
        assert res.bound <= res.objective + 1e-9


def test_scip_gap_limit_is_not_optimal_and_native_gap_is_kept():
    res = ScipBackend().solve(milp_market_split(offset=100.0), "milp",
                              SolveOptions(rel_gap=0.5, time_limit=5), deadline=Deadline(5))
    assert res.status == "gap_limit" and res.native["status"] == "gaplimit"
    assert 0 < res.gap <= 0.5 and res.gap == relative_gap(res.objective, res.bound)
    assert res.native["gap"] >= res.gap  # SCIP divides by min(|UB|, |LB|), we by |UB|


def test_unknown_native_status_is_error_with_warning(monkeypatch, caplog):
    backend = get_backend("highs")
    monkeypatch.setattr(HighsBackend, "_native_status", lambda self, model: ("kBrandNew", 0.0))
    with caplog.at_level(logging.WARNING, logger="mtl_opt.solvers.backends"):
        res = backend.solve(lp_0(), "lp", deadline=Deadline())
    assert res.status == "error" and res.native["status"] == "kBrandNew"
    assert "kBrandNew" in caplog.text


def test_status_maps_only_use_our_vocabulary():
    for cls in BACKENDS.values():
        assert set(cls.STATUS.values()) <= set(STATUSES)
    assert ScipBackend.STATUS["gaplimit"] == "gap_limit"
    assert ScipBackend.STATUS["timelimit"] == "time_limit"


# --- capabilities and registry ----------------------------------------------------


def test_capabilities_match_design_table():
    assert HighsBackend.capabilities == {"lp", "milp", "qp"}
    assert ScipBackend.capabilities == {"lp", "milp", "qp", "miqp", "qcp", "miqcp", "nlp",
                                        "lazy_cuts"}


def test_highs_refuses_cones_and_names_scip():
    for problem_class in ("qcp", "miqcp", "nlp"):
        with pytest.raises(CapabilityError, match="backend='scip'"):
            HighsBackend().check(problem_class)


def test_scip_solves_a_second_order_cone_program():
    # min t  s.t.  (x - 3)^2 + (y + 4)^2 <= t^2, t >= 0: optimum 0 at (3, -4); then push x <= 0.
    model = pyo.ConcreteModel()
    model.x, model.y, model.t = pyo.Var(bounds=(None, 0)), pyo.Var(), pyo.Var(bounds=(0, None))
    model.cone = pyo.Constraint(expr=(model.x - 3) ** 2 + (model.y + 4) ** 2 <= model.t ** 2)
    model.obj = pyo.Objective(expr=model.t)
    result = ScipBackend().solve(model, "qcp", deadline=Deadline())
    assert result.status == "optimal" and abs(pyo.value(model.t) - 3) < 1e-5
    assert result.bound <= 3 + 1e-6


def test_highs_refuses_miqp_and_names_scip():
    with pytest.raises(CapabilityError, match="backend='scip'"):
        HighsBackend().check("miqp")
    with pytest.raises(CapabilityError, match="scip"):
        HighsBackend().solve(miqp_0(), "miqp", deadline=Deadline())
    with pytest.raises(CapabilityError, match="lazy cuts"):
        HighsBackend().check("lazy_cuts")
    with pytest.raises(InvalidParameterError, match="lp, milp"):
        HighsBackend().check("socp")


def test_get_backend_is_case_insensitive_and_lists_valid_names():
    assert isinstance(get_backend("HiGHS"), HighsBackend)
    with pytest.raises(InvalidParameterError, match="highs, scip, gurobi"):
        get_backend("nope")


def test_list_backends_rows():
    rows = {row["name"]: row for row in list_backends()}
    assert set(rows) == set(BACKENDS)
    for name, row in rows.items():
        assert set(CAPABILITIES) <= set(row) and row["solver"] == BACKENDS[name].label
        assert (row["version"] is not None) == row["available"]
    assert rows["scip"]["miqp"] and not rows["highs"]["miqp"]


def test_pick_backend():
    assert isinstance(pick_backend("milp"), HighsBackend)
    assert isinstance(pick_backend("miqp"), ScipBackend)
    assert isinstance(pick_backend("lp", preferred="scip"), ScipBackend)
    with pytest.raises(CapabilityError, match="scip"):
        pick_backend("miqp", preferred="highs")


def test_bad_native_option_is_named_before_solving():
    for cls, bad in ((HighsBackend, {"mip_rel_gapp": 0.1}), (ScipBackend, {"limits/time": -1.0})):
        if cls().available():
            with pytest.raises(InvalidParameterError, match=next(iter(bad))):
                cls().solve(lp_0(), "lp", SolveOptions(solver_options=bad), deadline=Deadline())


@pytest.mark.parametrize("name", backends_with("lp"))
def test_a_process_started_while_options_are_checked_does_not_hold_the_solve(name, monkeypatch, capfd):
    """Cross-validation starts its workers from a thread while this process checks a fit's native
    options: such a process inherits fds 1 and 2 as they are then.  Pyomo's capture_output made
    them a pipe that a thread drains to its end: it ended only with that process (CI: 100 s, then
    Pyomo's "deadlock" RuntimeError, exit 1 after a Ctrl-C).  Here a process started inside the
    check lives 30 s; the solve must not wait for it."""
    import subprocess
    import sys
    import time

    backend = get_backend(name)
    started = []
    accepts = type(backend)._accepts

    def accepts_and_start(self, probe, key, value):
        if not started:
            started.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"]))
        return accepts(self, probe, key, value)
    monkeypatch.setattr(type(backend), "_accepts", accepts_and_start)
    option = {"highs": {"presolve": "on"}, "scip": {"presolving/maxrounds": -1}}[name]
    clock = time.monotonic()
    try:
        result = backend.solve(lp_0(), "lp", SolveOptions(solver_options=option), deadline=Deadline())
        took = time.monotonic() - clock
    finally:
        started[0].kill()
        started[0].wait()
    assert result.status == "optimal" and took < 15, took   # ~0.1 s; the old capture: >= 30 s
    assert capfd.readouterr().err == ""


def test_solves_in_threads_at_once_keep_each_other_s_output_routing(capfd):
    """Fits run at once in threads (Dask's threaded workers, a user's threads): each solve
    replaced Pyomo's output capture and redirected fds 1 and 2 itself and put them back at its
    end, under another thread's solve, which then ran Pyomo's own capture (a 100 s wait on a
    pipe, then a failure) or left the process's stdout at /dev/null.  Now every solve succeeds,
    and afterwards the capture is Pyomo's and the fds are the terminal again."""
    import os
    from concurrent.futures import ThreadPoolExecutor

    from pyomo.contrib.solver.solvers import highs

    original = highs.capture_output
    before = [(os.fstat(fd).st_dev, os.fstat(fd).st_ino) for fd in (1, 2)]
    options = {"highs": {"presolve": "on"}, "scip": {"presolving/maxrounds": -1}}   # checked too

    def solves(_):
        return [get_backend(name).solve(lp_0(), "lp", SolveOptions(solver_options=options[name]),
                                        deadline=Deadline()).status
                for name in ("highs", "scip") for _ in range(15)]
    with ThreadPoolExecutor(4) as pool:
        statuses = [status for batch in pool.map(solves, range(8)) for status in batch]
    assert statuses == ["optimal"] * len(statuses)
    assert highs.capture_output is original
    assert [(os.fstat(fd).st_dev, os.fstat(fd).st_ino) for fd in (1, 2)] == before
    print("still the terminal")
    assert "still the terminal" in capfd.readouterr().out


@pytest.mark.parametrize("name", backends_with("lp"))
def test_every_common_option_is_a_valid_native_option(name, capfd):
    backend = get_backend(name)
    backend.solve(lp_0(), "lp", deadline=Deadline())  # a first run with default threads (HiGHS fixes them per thread)
    for threads in (1, 2):
        opts = SolveOptions(time_limit=10, rel_gap=1e-4, abs_gap=1e-6, threads=threads, seed=7)
        # Passed back as solver_options, the translation goes through the native check.
        opts = opts.with_updates(solver_options=backend.native_options(opts))
        res = backend.solve(lp_0(), "lp", opts, deadline=Deadline(opts.time_limit))
        assert res.status == "optimal"
    assert capfd.readouterr().out == ""  # quiet unless verbose
    backend.solve(lp_0(), "lp", SolveOptions(verbose=True), deadline=Deadline())   # mtl_opt's table only (none here)
    assert "2.5" not in capfd.readouterr().out
    backend.solve(lp_0(), "lp", SolveOptions(verbose=True, solver_options=backend.NATIVE_LOG), deadline=Deadline())
    assert "2.5" in capfd.readouterr().out


def test_maximization_is_refused():
    m = lp_0()
    m.obj.sense = pyo.maximize
    with pytest.raises(InvalidParameterError, match="minimization"):
        get_backend("highs").solve(m, "lp", deadline=Deadline())


# --- options ------------------------------------------------------------------------


@pytest.mark.parametrize("field, bad", [
    ("time_limit", 0), ("time_limit", -1.0), ("time_limit", float("inf")),
    ("rel_gap", -1e-3), ("abs_gap", float("nan")), ("threads", 0), ("threads", 1.5),
    ("seed", -1), ("seed", 2**31), ("seed", True), ("verbose", "yes"), ("solver_options", [1]),
])
def test_solve_options_errors_name_the_field(field, bad):
    with pytest.raises(InvalidParameterError, match=f"'{field}' parameter of SolveOptions must be .*; got"):
        SolveOptions(**{field: bad})


def test_solve_options_with_updates():
    base = SolveOptions(time_limit=10, solver_options={"a": 1})
    new = base.with_updates(time_limit=None, rel_gap=0.01, solver_options={"b": 2})
    assert new.time_limit == 10.0 and new.rel_gap == 0.01
    assert dict(new.solver_options) == {"a": 1, "b": 2} and dict(base.solver_options) == {"a": 1}
    with pytest.raises(InvalidParameterError, match="threads"):
        base.with_updates(threads=0)
    with pytest.raises(InvalidParameterError, match="valid names"):
        base.with_updates(timelimit=3)


def test_native_options_translate_and_solver_options_come_last():
    opts = SolveOptions(time_limit=5, rel_gap=0.01, seed=3)
    assert HighsBackend().native_options(opts) == {
        "time_limit": 5.0, "mip_rel_gap": 0.01, "mip_abs_gap": 0.0,
        "random_seed": 3, "output_flag": False}
    scip = ScipBackend().native_options(opts.with_updates(solver_options={"limits/gap": 0.2}))
    assert scip["limits/time"] == 5.0 and scip["limits/gap"] == 0.2
    assert scip["randomization/randomseedshift"] == 3 and "lp/threads" not in scip


# --- gaps ------------------------------------------------------------------------------


@pytest.mark.parametrize("objective, bound, rel, abs_", [
    (10.0, 9.0, 0.1, 1.0),
    (-10.0, -11.0, 0.1, 1.0),
    (0.0, 0.0, 0.0, 0.0),
    (0.0, -1.0, float("inf"), 1.0),
    (1e-20, 0.0, 1.0, 1e-20),
    (None, 1.0, None, None),
    (1.0, None, None, None),
])
def test_gap_functions(objective, bound, rel, abs_):
    assert relative_gap(objective, bound) == (rel if rel is None else pytest.approx(rel))
    assert absolute_gap(objective, bound) == (abs_ if abs_ is None else pytest.approx(abs_))
    res = BackendResult(status="optimal", has_solution=True, objective=objective, bound=bound,
                        solver="x", solver_version="0", wall_time=0.0, problem_class="lp")
    assert res.gap == relative_gap(objective, bound)
