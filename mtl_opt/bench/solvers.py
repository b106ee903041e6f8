"""Benchmark solver names: each maps to one estimator setting for one method family.

Names follow ``<algorithm>[-<backend>]``; the backend is left out when the
algorithm runs in numpy.  A solver applies to instances of its method, and a
``requires`` test can rule out instances its algorithm cannot take (e.g. the
exact sparse solvers need lambda_ridge > 0); such pairs are recorded as
``not_applicable``, not as errors.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ..errors import InvalidParameterError


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

    def not_applicable(self, method: str, params: dict) -> str | None:
        """Why this solver cannot run an instance of ``method`` with ``params``, or None."""
        from ..solvers.backends import get_backend

        if method != self.method:
            return f"{self.name} solves {self.method} instances, not {method}"
        backend = self.params.get("backend") and get_backend(self.params["backend"])
        if backend and not backend.available():
            return f"{backend.label} is not installed here ({backend.install_hint})"
        return self.requires(params)


def _ridge(params: dict) -> str | None:
    return None if params["lambda_ridge"] > 0 else "needs lambda_ridge > 0 (exact sparse solvers)"


def _bnb_scope(params: dict) -> str | None:
    if params.get("lambda_zbar") or params.get("lambda_bbar"):
        return "bnb models no Zbar or Bbar term"
    return _ridge(params)


def _armul_model(params: dict) -> str | None:
    if params["structure"] == "lowrank":
        return "low-rank ARMUL has no SCIP model"
    if params["structure"] == "clustered" and params["loss"] != "squared":
        return "clustered ARMUL on SCIP needs the squared loss"
    return None


def _armul_quadratic_model(params: dict) -> str | None:
    """The exact ARMUL model where the backend has no NLP (logistic loss)."""
    if params["loss"] != "squared":
        return "the logistic ARMUL model needs an NLP backend (SCIP)"
    return _armul_model(params)


#: Solver name -> setting, in the order ``--list-solvers`` prints them.
SOLVERS: dict[str, BenchSolver] = {s.name: s for s in (
    BenchSolver("bcd", "sparse_mtl", {"solver": "bcd", "backend": None},
                "block IHT + local search (no bound)"),
    BenchSolver("oa-highs", "sparse_mtl", {"solver": "oa", "backend": "highs"},
                "outer approximation, multi-tree (MILP master re-solved on HiGHS)", _ridge),
    BenchSolver("oa-scip", "sparse_mtl", {"solver": "oa", "backend": "scip"},
                "outer approximation, single-tree (cuts inside one SCIP search)", _ridge),
    BenchSolver("miqp-scip", "sparse_mtl", {"solver": "miqp", "backend": "scip"},
                "Big-M perspective MIQP on SCIP", _ridge),
    BenchSolver("oa-gurobi", "sparse_mtl", {"solver": "oa", "backend": "gurobi"},
                "outer approximation, multi-tree (MILP master re-solved on Gurobi)", _ridge),
    BenchSolver("miqp-gurobi", "sparse_mtl", {"solver": "miqp", "backend": "gurobi"},
                "Big-M perspective MIQP on Gurobi", _ridge),
    BenchSolver("bnb", "sparse_mtl", {"solver": "bnb", "backend": None},
                "branch and bound, perspective-dual node bounds (no Zbar/Bbar)", _bnb_scope),
    BenchSolver("median-sort", "molar", {"median": "closed_form", "backend": None},
                "weighted median by sorting, dual certificate"),
    BenchSolver("median-lp-highs", "molar", {"median": "lp", "backend": "highs"},
                "weighted-median LP on HiGHS"),
    BenchSolver("median-lp-scip", "molar", {"median": "lp", "backend": "scip"},
                "weighted-median LP on SCIP"),
    BenchSolver("median-lp-gurobi", "molar", {"median": "lp", "backend": "gurobi"},
                "weighted-median LP on Gurobi"),
    BenchSolver("prox", "armul", {"solver": "prox", "backend": None},
                "FISTA (vanilla, duality gap) / alternating search (clustered, low-rank)"),
    BenchSolver("armul-scip", "armul", {"solver": "scip", "backend": None},
                "the exact ARMUL model on SCIP (vanilla, clustered)", _armul_model),
    BenchSolver("armul-gurobi", "armul", {"solver": "scip", "backend": "gurobi"},
                "the exact ARMUL model on Gurobi (vanilla, clustered; squared loss)",
                _armul_quadratic_model),
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
