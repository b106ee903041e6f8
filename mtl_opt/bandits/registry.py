"""Names of environments and policies for experiment files, loaded on first use.

Each entry maps a name to "module:attribute" inside ``mtl_opt.bandits``; the
attribute is a class (or factory) called with the file's keyword arguments.
"""

from __future__ import annotations

import importlib
import inspect

from ..errors import InvalidParameterError

ENVIRONMENTS = {
    "model_c": "linear_envs:ModelC",
    "model_p": "linear_envs:ModelP",
    "synthetic_groups": "rec_envs:SyntheticGroups",
    "digits": "rec_envs:DigitsEnv",
    "movielens": "rec_envs:MovieLensEnv",
}

POLICIES = {
    "molarb": "molarb:MOLARB",
    "ols": "linear_policies:OLSBandit",
    "lasso": "linear_policies:LassoBandit",
    "rm": "linear_policies:RMBandit",
    "metaban": "metaban:MetaBan",
    "linucb_one": "linucb:LinUCBOne",
    "linucb_ind": "linucb:LinUCBInd",
    "club": "club:CLUB",
    "sclub": "club:SCLUB",
    "neuucb_one": "neural_ucb:NeuUCBOne",
    "neuucb_ind": "neural_ucb:NeuUCBInd",
}


def resolve(table: dict, kind: str, name: str):
    """The class registered as ``name`` in ``table`` (ENVIRONMENTS or POLICIES)."""
    if name not in table:
        raise InvalidParameterError(f"unknown {kind} {name!r}; choose from {', '.join(sorted(table))}.")
    module, attribute = table[name].split(":")
    return getattr(importlib.import_module(f".{module}", __package__), attribute)


def parameters(factory) -> set[str]:
    """The keyword arguments ``factory`` accepts (for strict experiment files)."""
    return {name for name, p in inspect.signature(factory).parameters.items()
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}


def build(table: dict, kind: str, name: str, params: dict):
    """``resolve(...)(**params)``; the policy instance's ``name`` is set to the registry name."""
    factory = resolve(table, kind, name)
    unknown = sorted(set(params) - parameters(factory))
    if unknown:
        raise InvalidParameterError(f"{kind} {name!r} has no parameter(s) {', '.join(map(repr, unknown))}; "
                                    f"allowed: {', '.join(sorted(parameters(factory)))}.")
    obj = factory(**params)
    if kind == "policy":
        obj.name = name
    return obj
