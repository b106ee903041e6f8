"""Solver options shared by estimators, instance files and the CLI.

``SolveOptions`` is the one record of solver settings in mtl_opt, modelled on
Pyomo's ``SolverConfig``/``BranchAndBoundConfig``.  Its field names are the
public option names: estimator keywords, keys of an instance file's
``[solve]`` table and ``mtl-opt`` flags all use them.  Each backend adapter
translates the record into native solver options in one function
(``Backend.native_options``), with ``solver_options`` applied last.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar

from mtl_opt.errors import InvalidParameterError
from mtl_opt.params import BOOLEAN, NONE, Interval, StrKeyed, validate_attributes

#: Largest seed both HiGHS (``random_seed``) and SCIP (``randomseedshift``) accept.
MAX_SEED = 2**31 - 1
#: Most solver threads: this machine's CPU count (more only oversubscribe it; HiGHS with
#: threads = 100000 stalls for minutes, then aborts).  None when Python cannot count them.
MAX_THREADS = os.cpu_count()


@dataclass(frozen=True)
class SolveOptions:
    """Solver settings common to every backend.

    Parameters
    ----------
    time_limit : float or None, default=None
        Wall-clock limit in seconds; None means no limit.
    rel_gap : float, default=1e-6
        Stop when the solver's relative gap is at most this.  Solvers define
        the gap differently (see DESIGN.md); mtl_opt reports its own gap.
    abs_gap : float, default=0.0
        Stop when incumbent - bound is at most this.
    threads : int or None, default=None
        Threads the solver may use, at most the machine's CPU count; None
        leaves the solver's default (our trees: every core, through threads - 1
        local worker processes; 1 keeps them in the fitting process, also under
        ``joblib.parallel_config(backend="dask")``, which otherwise sends their
        node work to the Dask cluster).
    seed : int or None, default=None
        Solver random seed in [0, 2**31 - 1]; None leaves the solver's default.
    verbose : bool, default=False
        Log the run's progress as it goes, one row (time, incumbent, lower
        bound, gap, nodes) at least every second on every exact path
        (``solvers.progress``): INFO records of the ``mtl_opt.progress``
        logger, printed as a table while logging is not configured for them
        (``mtl_opt.logs``).  The solver's own log is a native option,
        shown with verbose: ``solver_options=`` the backend's ``NATIVE_LOG``
        (HiGHS ``{"output_flag": True}``, SCIP ``{"display/verblevel": 4}``).
    solver_options : mapping, default={}
        Native options passed to the solver as is, after the common options
        above, so they override them.  Stored read-only.

    Examples
    --------
    >>> from mtl_opt import SolveOptions
    >>> options = SolveOptions(time_limit=60, rel_gap=1e-4)
    >>> options.with_updates(threads=1).threads, options.time_limit
    (1, 60.0)
    >>> SolveOptions(time_limit=-1)
    Traceback (most recent call last):
    ...
    mtl_opt.errors.InvalidParameterError: ...
    """

    time_limit: float | None = None
    rel_gap: float = 1e-6
    abs_gap: float = 0.0
    threads: int | None = None
    seed: int | None = None
    verbose: bool = False
    solver_options: Mapping[str, Any] = field(default_factory=dict)

    param_constraints: ClassVar[dict] = {
        "time_limit": [Interval(0, None, open_low=True, note="seconds"), NONE],
        "rel_gap": [Interval(0, None)],
        "abs_gap": [Interval(0, None)],
        "threads": [Interval(1, MAX_THREADS, integer=True, note="the CPU count of this machine"), NONE],
        "seed": [Interval(0, MAX_SEED, integer=True), NONE],
        "verbose": [BOOLEAN],
        "solver_options": [StrKeyed("a mapping with str keys (native option name -> value)")],
    }

    def __post_init__(self) -> None:
        validate_attributes(self)
        for name in ("time_limit", "rel_gap", "abs_gap"):
            if getattr(self, name) is not None:  # native setters want floats, not ints
                object.__setattr__(self, name, float(getattr(self, name)))
        object.__setattr__(self, "solver_options", MappingProxyType(dict(self.solver_options)))

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The fields by name: scikit-learn's ``get_params(deep=True)`` of an estimator lists
        them as ``solve_options__<field>`` (which its ``set_params`` takes)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def __reduce__(self):
        """Pickled as its fields, the read-only ``solver_options`` as a dict (a mapping proxy has
        no pickle): for worker processes, and for the key of a fit's plan (``MTLEstimator``)."""
        return type(self), tuple({**self.get_params(),
                                  "solver_options": dict(self.solver_options)}.values())

    def __sklearn_clone__(self) -> SolveOptions:
        """scikit-learn's ``clone``: an immutable record is its own clone."""
        return self

    def with_updates(self, **updates: Any) -> SolveOptions:
        """Return a validated copy with ``updates`` applied.

        None values are ignored, so optional CLI flags can be passed straight
        in (a consequence: an update cannot reset a field to None).
        ``solver_options`` given here are merged over the existing ones.
        """
        names = [f.name for f in dataclasses.fields(self)]
        unknown = sorted(set(updates) - set(names))
        if unknown:
            raise InvalidParameterError(
                f"Unknown solve option(s) {', '.join(map(repr, unknown))}; "
                f"valid names are {', '.join(names)}."
            )
        changes = {k: v for k, v in updates.items() if v is not None}
        if "solver_options" in changes and isinstance(changes["solver_options"], Mapping):
            changes["solver_options"] = {**self.solver_options, **changes["solver_options"]}
        return dataclasses.replace(self, **changes)
