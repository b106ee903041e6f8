"""Common parameter checks over every owner of declared constraints (sklearn's common-checks idea).

The owners are found, not listed: every subclass of the estimator, bandit and collab base
classes, ``SolveOptions``, and every function of the package decorated with
``validate_params``.  For every constrained parameter an invalid value is built from the
constraints themselves (NaN, inf, just outside an interval, a non-integer, a wrong type, an
unknown option) and the owner must refuse it with ``InvalidParameterError`` naming it.
"""

import importlib
import inspect
import math
import pkgutil

import pytest

import mtl_opt
from mtl_opt.bandits.base import Environment, Policy
from mtl_opt.collab.algorithms import Method
from mtl_opt.errors import InvalidParameterError
from mtl_opt.estimators.base import MTLEstimator
from mtl_opt.params import InstanceOf, Interval, OneOf, SequenceOf, StrKeyed
from mtl_opt.solvers.options import SolveOptions
from mtl_opt.synthetic import sparse_heterogeneity

DATA = sparse_heterogeneity(d=4, M=2, n=12, s=1, seed=0).data
MODULES = [importlib.import_module(m.name) for m in pkgutil.walk_packages(mtl_opt.__path__, "mtl_opt.")]
ROOTS = (MTLEstimator, Policy, Environment, Method, SolveOptions)


def _subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def owners() -> dict:
    """Name -> class or function: every concrete subclass of ``ROOTS`` in the package and every
    ``validate_params`` function (an abstract class's constraints are checked through its
    subclasses; classes other test modules define are not the package's, whatever ran first)."""
    found = {cls.__qualname__: cls for root in ROOTS for cls in (root, *_subclasses(root))
             if not inspect.isabstract(cls) and cls.__module__.split(".")[0] == "mtl_opt"}
    for module in MODULES:
        for name, obj in vars(module).items():
            if inspect.isfunction(obj) and hasattr(obj, "param_constraints"):
                found[name] = obj
    return found


OWNERS = owners()


def declared_names(owner) -> list[str]:
    """The owner's named parameters (its signature; ``**params`` declares none)."""
    return [name for name, p in inspect.signature(owner).parameters.items()
            if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


def invalid_values(allowed: list) -> list:
    """Values every constraint of ``allowed`` refuses, built from the constraints."""
    candidates = [math.nan, -math.inf, math.inf, object(), "not-an-option", 1 + 1j]
    for c in allowed:
        if isinstance(c, Interval):
            for end, step in ((c.low, -1), (c.high, 1)):
                if end is not None and math.isfinite(end):
                    candidates += [end + step, end]  # outside; the end itself, refused when open
            if c.integer:
                candidates.append((c.low or 0) + 0.5)
        elif isinstance(c, SequenceOf):
            candidates += [[1.0, math.nan], [math.inf], ["x"], 3.0]
        elif isinstance(c, (OneOf, InstanceOf, StrKeyed)):
            candidates += [[1], "yes"]
        else:
            raise AssertionError(f"no invalid values known for constraint {c!r}: add its type here")
    return [v for v in candidates if not any(c.accepts(v) for c in allowed)]


def valid_value(allowed: list):
    """A value one of ``allowed`` accepts (for required parameters other than the one under test)."""
    for value in (None, True, 1, 0.5, *(v for c in allowed if isinstance(c, OneOf) for v in c.values)):
        if any(c.accepts(value) for c in allowed):
            return value
    raise AssertionError(f"no valid value found for {allowed}")


def build(owner, params: dict):
    """Build (call) ``owner`` with ``params``, required parameters filled with valid values or None;
    an estimator then runs ``check``, the refusals ``fit`` makes before fitting."""
    signature = inspect.signature(owner)
    table = owner.param_constraints
    for name, p in signature.parameters.items():
        if name not in params and p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            params[name] = valid_value(table[name]) if name in table else None
    made = owner(**params)
    if isinstance(made, MTLEstimator):
        made.check(DATA)
    return made


CASES = [(key, name) for key, owner in sorted(OWNERS.items()) for name in owner.param_constraints]


def test_discovery_reaches_every_kind_of_owner():
    for key in ("SparseMTL", "ARMUL", "MOLAR", "SolveOptions", "MOLARB", "RMBandit", "MetaBan", "ModelC",
                "SyntheticGroups", "PFedMe", "IFCA", "gaussian_system", "digits_system", "run_methods",
                "run_bandit", "sparse_heterogeneity", "smtl_simulation", "armul_simulation", "multisite"):
        assert OWNERS[key].param_constraints, key
    assert len(CASES) > 200


#: Arguments that are the objects a run works on, not settings: their types are the caller's contract.
SUBJECTS = {"system", "methods", "env", "policies", "Xs", "ys"}   # Xs, ys: MultiTaskData checks them


@pytest.mark.parametrize("key", sorted(OWNERS))
def test_every_parameter_declares_its_constraints(key):
    owner = OWNERS[key]
    names = set(declared_names(owner))
    assert names - set(owner.param_constraints) <= SUBJECTS
    assert set(owner.param_constraints) <= names or not names   # a collab Method takes **params


@pytest.mark.parametrize("key, name", CASES, ids=[f"{k}.{n}" for k, n in CASES])
def test_invalid_values_are_refused_naming_the_parameter(key, name):
    owner = OWNERS[key]
    allowed = owner.param_constraints[name]
    bad = invalid_values(allowed)
    assert any(v != v for v in bad if isinstance(v, float)), "NaN must always be refused"
    if not any(isinstance(c, Interval) and c.high == math.inf for c in allowed):
        assert math.inf in bad, "inf is refused unless an interval names it as its end"
    for value in bad:
        with pytest.raises(InvalidParameterError, match=rf"The '{name}' parameter of {owner.__name__} must be "):
            build(owner, {name: value})


def test_the_error_says_what_is_allowed_and_what_was_given():
    with pytest.raises(InvalidParameterError) as error:
        SolveOptions(threads=0)
    assert str(error.value) == (f"The 'threads' parameter of SolveOptions must be an int in the range "
                                f"[1, {SolveOptions.param_constraints['threads'][0].high}] (the CPU count of "
                                f"this machine) or None; got 0.")
