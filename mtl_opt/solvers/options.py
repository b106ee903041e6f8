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
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from numbers import Integral, Real
from types import MappingProxyType
from typing import Any

from mtl_opt.errors import InvalidParameterError

#: Largest seed both HiGHS (``random_seed``) and SCIP (``randomseedshift``) accept.
MAX_SEED = 2**31 - 1
#: Most solver threads: this machine's CPU count (more only oversubscribe it; HiGHS with
#: threads = 100000 stalls for minutes, then aborts).  None when Python cannot count them.
MAX_THREADS = os.cpu_count()


def _is_number(value: Any) -> bool:
    return isinstance(value, Real) and not isinstance(value, bool) and math.isfinite(value)


def _is_int(value: Any) -> bool:
    return isinstance(value, Integral) and not isinstance(value, bool)


#: Field name -> (what is expected, test).  Kept as data so every error has
#: the same shape and tests can walk the same table.
_CONSTRAINTS = {
    "time_limit": ("a number > 0 (seconds) or None",
                   lambda v: v is None or (_is_number(v) and v > 0)),
    "rel_gap": ("a number >= 0", lambda v: _is_number(v) and v >= 0),
    "abs_gap": ("a number >= 0", lambda v: _is_number(v) and v >= 0),
    "threads": (f"an int in [1, {MAX_THREADS}] (the CPU count of this machine) or None",
                lambda v: v is None or (_is_int(v) and 1 <= v <= (MAX_THREADS or math.inf))),
    "seed": (f"an int in [0, {MAX_SEED}] or None",
             lambda v: v is None or (_is_int(v) and 0 <= v <= MAX_SEED)),
    "verbose": ("a bool", lambda v: isinstance(v, bool)),
    "solver_options": ("a mapping with str keys (native option name -> value)",
                       lambda v: isinstance(v, Mapping) and all(isinstance(k, str) for k in v)),
}


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
        leaves the solver's default.
    seed : int or None, default=None
        Solver random seed in [0, 2**31 - 1]; None leaves the solver's default.
    verbose : bool, default=False
        Show the solver log on the console.
    solver_options : mapping, default={}
        Native options passed to the solver as is, after the common options
        above, so they override them.  Stored read-only.
    """

    time_limit: float | None = None
    rel_gap: float = 1e-6
    abs_gap: float = 0.0
    threads: int | None = None
    seed: int | None = None
    verbose: bool = False
    solver_options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name, (expected, ok) in _CONSTRAINTS.items():
            value = getattr(self, name)
            if not ok(value):
                raise InvalidParameterError(
                    f"SolveOptions '{name}' must be {expected}; got {value!r}."
                )
        for name in ("time_limit", "rel_gap", "abs_gap"):
            if getattr(self, name) is not None:  # native setters want floats, not ints
                object.__setattr__(self, name, float(getattr(self, name)))
        object.__setattr__(self, "solver_options", MappingProxyType(dict(self.solver_options)))

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
