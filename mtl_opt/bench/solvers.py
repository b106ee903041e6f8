"""Benchmark solver names: each maps to one estimator setting for one method family.

Names follow ``<algorithm>[-<backend>]``; the backend is left out when the
algorithm runs in numpy.  A solver applies to instances of its method that the
estimator, so configured, accepts: ``not_applicable`` asks the estimator's own
``check`` on the instance's data (the sparse family's method table refuses there,
e.g. lambda_ridge = 0 where the data give no curvature), and a ``requires`` test
can rule out more from the parameters alone; such pairs are recorded as
``not_applicable``, not as errors.  The sparse solvers are the methods of
``mtl_opt.solvers.sparse.methods.METHODS`` on each of their backends.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ..errors import InvalidParameterError, MTLOptError
from ..solvers.sparse.methods import METHODS as SPARSE_METHODS


def _anything(params: dict) -> str | None:
    return None


@dataclass(frozen=True)
class BenchSolver:
    """A named estimator setting.

    ``params`` are estimator parameters set on top of the instance file's
    (``backend`` included), so they must be plain JSON values: they travel
    to the worker process that runs the fit.  ``requires(params)`` gets the
    instance's full parameter set and returns why the solver does not apply,
    or None.
    """

    name: str
    method: str
    params: Mapping = field(default_factory=dict)
    description: str = ""
    requires: Callable[[dict], str | None] = _anything

    def not_applicable(self, method: str, params: dict, data=None) -> str | None:
        """Why this solver cannot run an instance of ``method`` with ``params`` (and, when
        given, its ``data``: the estimator's own refusal before any work), or None."""
        from ..estimators import ESTIMATORS
        from ..solvers.backends import get_backend

        if method != self.method:
            return f"{self.name} solves {self.method} instances, not {method}"
        backend = self.params.get("backend") and get_backend(self.params["backend"])
        if backend and not backend.available():
            return f"{backend.label} is not available here ({backend.unavailable_reason()})"
        reason = self.requires(params)
        if reason is None and data is not None:
            try:
                ESTIMATORS[method](**{**params, **self.params}).check(data)
            except InvalidParameterError as exc:   # a refusal: the method does not apply
                return str(exc)
            except MTLOptError:   # a broken setting (e.g. MIQP on HiGHS): the cell records it
                pass
        return reason


def _sparse(name: str, method: str, backend: str | None) -> BenchSolver:
    return BenchSolver(name, "sparse_mtl", {"algorithm": method, "backend": backend},
                       SPARSE_METHODS[method].description)


def _armul_exact(backend: str | None) -> Callable[[dict], str | None]:
    """The ``requires`` of the exact ARMUL model on ``backend``: the method table's own answer
    (``armul.methods.exact_refusal``) from the instance's structure and loss."""
    def requires(params: dict) -> str | None:
        from ..solvers.armul.methods import exact_refusal

        refusal = exact_refusal(params["structure"], params["loss"], backend)
        return None if refusal is None else str(refusal)
    return requires


#: Solver name -> setting, in the order ``--list-solvers`` prints them.
SOLVERS: dict[str, BenchSolver] = {s.name: s for s in (
    _sparse("bcd", "bcd", None),
    _sparse("oa-highs", "oa_multi_tree", "highs"),
    _sparse("oa-scip", "oa_single_tree", "scip"),
    _sparse("oa-multi-scip", "oa_multi_tree", "scip"),
    _sparse("miqp-scip", "miqp", "scip"),
    _sparse("oa-gurobi", "oa_multi_tree", "gurobi"),
    _sparse("bnb", "bnb", None),
    BenchSolver("median-sort", "molar", {"algorithm": "closed_form", "backend": None},
                "weighted median by sorting, dual certificate"),
    BenchSolver("median-lp-highs", "molar", {"algorithm": "lp", "backend": "highs"},
                "weighted-median LP on HiGHS"),
    BenchSolver("median-lp-scip", "molar", {"algorithm": "lp", "backend": "scip"},
                "weighted-median LP on SCIP"),
    BenchSolver("median-lp-gurobi", "molar", {"algorithm": "lp", "backend": "gurobi"},
                "weighted-median LP on Gurobi"),
    BenchSolver("prox", "armul", {"algorithm": "prox", "backend": None},
                "FISTA (vanilla, duality gap) / alternating search (clustered, low-rank)"),
    BenchSolver("armul-scip", "armul", {"algorithm": "exact", "backend": None},
                "ARMUL's exact path: the model on SCIP (vanilla), the assignment tree (clustered)",
                _armul_exact(None)),
    BenchSolver("armul-gurobi", "armul", {"algorithm": "exact", "backend": "gurobi"},
                "ARMUL's exact path: the model on Gurobi (vanilla; squared loss), the assignment "
                "tree (clustered)", _armul_exact("gurobi")),
)}


def resolve(names: list[str] | None) -> list[BenchSolver]:
    """The solvers named (all of them for None); an unknown name is an error listing the known ones."""
    if names is None:
        return list(SOLVERS.values())
    unknown = [n for n in names if n not in SOLVERS]
    if unknown or not names:
        raise InvalidParameterError(
            f"unknown bench solver(s) {', '.join(map(repr, unknown)) or '(none given)'}; "
            f"known: {', '.join(SOLVERS)} (see mtl-opt bench --list-solvers).")
    return [SOLVERS[n] for n in dict.fromkeys(names)]


def full_params(method: str, params: dict) -> dict:
    """The estimator's defaults updated with an instance's [method] parameters."""
    from ..estimators import ESTIMATORS

    return {**ESTIMATORS[method]().get_params(), **params}
