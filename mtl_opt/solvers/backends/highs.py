"""HiGHS through Pyomo's ``highs`` interface (highspy)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from mtl_opt._lazy import pyo
from mtl_opt import interrupts

from mtl_opt.solvers.backends.base import LP, MILP, QP, Backend, _finite, _patched, native_streams
from mtl_opt.result import Status
from mtl_opt.solvers.options import SolveOptions


class HighsBackend(Backend):
    """HiGHS via Pyomo's ``highs`` (highspy): LP, MILP and continuous convex QP."""

    name, label, pyomo_name = "highs", "HiGHS", "highs"
    module = "highspy"
    install_hint = "install it with `pip install highspy`"
    capabilities = frozenset({LP, MILP, QP})
    DUAL_TOLERANCE = ("dual_feasibility_tolerance", 1e-7)
    TIGHTEST_DUAL_TOLERANCE = 1e-10
    PRIMAL_TOLERANCE = ("primal_feasibility_tolerance", 1e-7)
    STATUS = {  # highspy.HighsModelStatus member names
        "kOptimal": Status.OPTIMAL,
        "kTimeLimit": Status.TIME_LIMIT,
        "kIterationLimit": Status.ITERATION_LIMIT,
        "kSolutionLimit": Status.ITERATION_LIMIT,  # MIP node / solution / improvement limits
        "kInfeasible": Status.INFEASIBLE,
        "kUnbounded": Status.UNBOUNDED,
        "kUnboundedOrInfeasible": Status.ERROR,  # ambiguous: claim neither
        # stopped by ``_watch``'s callbacks on a stop asked (``interrupts``): its bound stands
        "kInterrupt": Status.TIME_LIMIT, "kHighsInterrupt": Status.TIME_LIMIT,
        **dict.fromkeys(("kNotset", "kLoadError", "kModelError", "kPresolveError",
                         "kSolveError", "kPostsolveError", "kUnknown", "kMemoryLimit"), Status.ERROR),
    }
    INTERRUPTED = frozenset({"kInterrupt", "kHighsInterrupt"})
    NATIVE_LOG = {"output_flag": True}

    def _translate(self, opts: SolveOptions) -> dict[str, Any]:
        return {"time_limit": opts.time_limit, "mip_rel_gap": opts.rel_gap,
                "mip_abs_gap": opts.abs_gap, "threads": opts.threads,
                "random_seed": opts.seed,
                "output_flag": False}   # verbose shows mtl_opt's table; HiGHS's own log is NATIVE_LOG

    def _set_time_limit(self, native_model: Any, seconds: float) -> None:
        native_model.setOptionValue("time_limit", seconds)

    def _native_status(self, native_model: Any) -> tuple[str, float]:
        return native_model.getModelStatus().name, native_model.getInfo().mip_gap

    def _streams(self, verbose: bool):
        # Pyomo's highs captures fds 1 and 2 into a pipe that a Python thread drains, but highspy's
        # run() holds the GIL, so what the progress callback prints would reach the console only
        # when the solve ends (41 s late in a 60 s master solve): HiGHS writes to native_streams.
        from pyomo.contrib.solver.solvers import highs

        highs.logger.addFilter(_our_interrupt)   # once: a logger keeps a filter only once
        return _patched(highs, "capture_output", lambda *args, **kwargs: native_streams(verbose))

    def _node_count(self, native_model: Any) -> int:
        return max(0, native_model.getInfo().mip_node_count)

    def _watch(self, native_model: Any, progress: Callable | None) -> Callable[[], None]:
        # HiGHS calls its interrupt callbacks many times a second: in branch and bound (with its
        # bounds and node count), in the simplex and interior-point loops (a heartbeat only).
        # Each stops the solve once a stop is asked: HiGHS's own way out, where a Python
        # exception raised in its callback could crash it.  Without a log only branch and
        # bound's is watched: a Python call per simplex iteration slowed the OA root's LP
        # rounds by 60%, and an LP ends soon (the loops around it check the deadline).
        def mip(event):
            if interrupts.requested():
                event.data_in.user_interrupt = True
            elif progress is not None:
                out = event.data_out
                progress(_finite(out.mip_primal_bound), _finite(out.mip_dual_bound), out.mip_node_count)

        def heartbeat(event):
            if interrupts.requested():
                event.data_in.user_interrupt = True
            elif progress is not None:
                progress(None, None, None)
        hooks = [(native_model.cbMipInterrupt, mip)]
        if progress is not None:
            hooks += [(native_model.cbSimplexInterrupt, heartbeat), (native_model.cbIpmInterrupt, heartbeat)]
        for hook, callback in hooks:
            hook.subscribe(callback)
        return lambda: [hook.unsubscribe(callback) for hook, callback in hooks]

    def _new_native_model(self) -> Any:
        import highspy

        return highspy.Highs()

    def _accepts(self, probe: Any, key: str, value: Any) -> bool:
        import highspy

        return probe.setOptionValue(key, value) == highspy.HighsStatus.kOk

    def _set_start(self, solver: Any, model: pyo.Block, start: Iterable[tuple[Any, float]]) -> None:
        # Load the model into the native Highs object first (Pyomo's persistent
        # interface then skips it in solve), then set the start by column index.
        import highspy

        if solver._model is model:
            solver.update()
        else:
            solver.set_instance(model)
        columns = solver._pyomo_var_to_solver_var_map
        solution = highspy.HighsSolution()
        values = [0.0] * solver._solver_model.getNumCol()
        for var, value in start:
            values[columns[id(var)]] = float(value)
        solution.col_value, solution.value_valid = values, True
        solver._solver_model.setSolution(solution)

    def _prepare(self, options: Mapping[str, Any]) -> None:
        # HiGHS sizes its task scheduler once per calling thread, at the first
        # run, and refuses a later, different ``threads``.  Shut it down so the
        # next run starts one of the requested size.  This thread only: do not
        # run HiGHS from several threads while changing ``threads``.
        if "threads" in options:
            import highspy

            highspy.Highs.resetGlobalScheduler(True)


def _our_interrupt(record) -> bool:
    """Pyomo's ``highs`` logs a warning on stdout for HiGHS's ``kInterrupt``, the status of a
    solve that ``_watch`` stopped on a stop asked: no news to the user, who asked for it."""
    return "HighsModelStatus.kInterrupt" not in record.getMessage()
