"""Deprecated spellings in one place: what each old name means now, and the warning it draws.

As in Pyomo (``pyomo.common.deprecation``), one module maps old to new and warns; estimators and
method tables see only the new names.  An estimator's ``check`` warns for every deprecated
parameter set (``warn_deprecated``) and reads a renamed one through ``value``; the sparse
``algorithm="oa"`` (``sparse_algorithm``), ``SparseMTL.certify(solver=...)``
(``certify_algorithm``) and the retired ``SparseMTL.exact_model`` (``exact_model``) are
translated here too.  When an entry's release comes, delete it here and its parameter from the
class's signature.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field

from .errors import InvalidParameterError


@dataclass(frozen=True)
class Deprecated:
    """A deprecated parameter: ``new``, the parameter it is the old name of (None: it has no
    effect), with ``values`` mapping an old value to the new one (empty: the same value);
    ``instead`` says what to write (``{value}``: the value given)."""

    new: str | None
    instead: str
    values: Mapping = field(default_factory=dict)


#: Estimator class name -> its deprecated parameters (each a ``None``-default of ``__init__``).
PARAMS: dict[str, dict[str, Deprecated]] = {
    "ARMUL": {"solver": Deprecated(
        "algorithm", "write algorithm='exact' for solver='scip', algorithm='prox' for "
                     "solver='prox' (you gave solver={value!r}).", {"prox": "prox", "scip": "exact"})},
    "SparseMTL": {
        "seed": Deprecated(None, "it has no effect (bcd and bnb are deterministic); the MILP "
                                 "solver's seed is solve_options=SolveOptions(seed=...)."),
        "solver": Deprecated("algorithm", "write algorithm={value!r}.")},
    "MOLAR": {"median": Deprecated("algorithm", "write algorithm={value!r}.")},
}

#: The sparse ``algorithm=`` names kept for old code: "oa" is multi-tree OA, except on SCIP.
SPARSE_ALGORITHMS = ("oa",)


def warn_deprecated(estimator) -> None:
    """A DeprecationWarning for each deprecated parameter of ``estimator`` that is set (not None)."""
    cls = type(estimator).__name__
    for name, old in PARAMS.get(cls, {}).items():
        given = getattr(estimator, name)
        if given is not None:
            warnings.warn(f"The {name!r} parameter of {cls} is deprecated and will be removed in "
                          f"the next release: {old.instead.format(value=given)}",
                          DeprecationWarning, stacklevel=3)


def value(estimator, new: str):
    """The value of ``estimator``'s parameter ``new``, or what its deprecated name means when
    that one is set; setting both is an InvalidParameterError."""
    cls = type(estimator)
    for name, old in PARAMS.get(cls.__name__, {}).items():
        given = getattr(estimator, name)
        if old.new != new or given is None:
            continue
        if getattr(estimator, new) != inspect.signature(cls.__init__).parameters[new].default:
            raise InvalidParameterError(
                f"{cls.__name__}: {name}={given!r} is the deprecated name of {new}=; "
                f"set only {new}={getattr(estimator, new)!r}.")
        return old.values.get(given, given)
    return getattr(estimator, new)


def sparse_algorithm(algorithm: str, backend: str | None, *, warn: bool = True) -> str:
    """The sparse method ``algorithm`` names on ``backend``: "oa" is "oa_multi_tree", except with
    backend="scip", where it meant single-tree OA and still does (with a DeprecationWarning
    unless ``warn`` is False: ``check`` has given it)."""
    if algorithm != "oa":
        return algorithm
    if backend != "scip":
        return "oa_multi_tree"
    if warn:
        warnings.warn("algorithm='oa' with backend='scip' means single-tree outer approximation; "
                      "write algorithm='oa_single_tree' (or algorithm='oa_multi_tree' for the "
                      "multi-tree loop on SCIP): after this release 'oa' will mean multi-tree on "
                      "every backend.", DeprecationWarning, stacklevel=4)
    return "oa_single_tree"


def certify_algorithm(algorithm: str, solver: str | None) -> str:
    """``SparseMTL.certify``'s algorithm, given its deprecated keyword ``solver`` (a warning)."""
    if solver is None:
        return algorithm
    if algorithm != "exact":
        raise InvalidParameterError(
            f"certify: solver={solver!r} is the deprecated name of algorithm=; "
            f"set only algorithm={algorithm!r}.")
    warnings.warn(f"certify's solver= is deprecated and will be removed in the next "
                  f"release: write algorithm={solver!r}.", DeprecationWarning, stacklevel=3)
    return solver


def exact_model(estimator, data, kind: str):
    """``SparseMTL.exact_model``, retired: ``pyomo_model(data, kind=kind, normalized=False).model``,
    the same model (a warning)."""
    warnings.warn("SparseMTL.exact_model is deprecated and will be removed in the next release: "
                  "write pyomo_model(data, kind=...).model (normalized=False for the model on "
                  "the problem's own scale).", DeprecationWarning, stacklevel=3)
    return estimator.pyomo_model(data, kind=kind, normalized=False).model
