"""A fit's plan is made once: ``mtl-opt solve`` checks the instance before any output and then
fits it, and the fit takes the check's plan (the problem built from the data, the method resolved,
each candidate's refusal asked once) instead of making it again (issue 62)."""

import collections
import shutil
from pathlib import Path

import pytest

import mtl_opt.estimators.sparse as sparse_estimator
from mtl_opt.cli import main
from mtl_opt.data import MultiTaskData
from mtl_opt.estimators import SparseMTL
from mtl_opt.formulations.sparse import SparseProblem
from mtl_opt.solvers.sparse import methods as sparse_methods
from mtl_opt.solvers.method import Method

LIB = Path(__file__).resolve().parents[1] / "instances" / "library"


@pytest.fixture
def traced(monkeypatch):
    """Counts of problems built from data, resolutions of algorithm='exact', and refusals asked
    (by method)."""
    counts = collections.Counter()
    from_data, choose, refusal = SparseProblem.from_data.__func__, sparse_methods.choose, Method.refusal

    def counted_from_data(cls, *args, **kwargs):
        counts["problem"] += 1
        return from_data(cls, *args, **kwargs)

    def counted_choose(*args):
        counts["choose"] += 1
        return choose(*args)

    def counted_refusal(self, *args):
        counts[f"refusal {self.name}"] += 1
        return refusal(self, *args)

    monkeypatch.setattr(SparseProblem, "from_data", classmethod(counted_from_data))
    monkeypatch.setattr(sparse_estimator, "choose", counted_choose)
    monkeypatch.setattr(Method, "refusal", counted_refusal)
    return counts


@pytest.mark.parametrize("extra, candidates", [
    ("", ["oa_single_tree"]),                # n_k > p: the curved regime's first candidate takes it
    ("coef_bound = 5.0\n", ["oa_single_tree", "oa_multi_tree", "bnb"]),   # OA refuses a box
])
def test_a_cli_solve_builds_resolves_and_refuses_once(tmp_path, traced, extra, candidates):
    path = tmp_path / "tiny.toml"
    path.write_text((LIB / "tiny_sparse_l0l2.toml").read_text().replace(
        "lambda_ridge = 0.05\n", "lambda_ridge = 0.05\n" + extra))
    shutil.copy(LIB / "tiny_sparse_a.csv", tmp_path)
    assert main(["solve", str(path), "--algorithm", "exact", "--out", str(tmp_path / "r.json"),
                 "--quiet"]) == 0
    assert dict(traced) == {"problem": 1, "choose": 1, **{f"refusal {name}": 1 for name in candidates}}


def test_check_then_fit_in_python_builds_once_and_a_changed_parameter_plans_again(traced):
    import numpy as np

    rng = np.random.default_rng(0)
    data = MultiTaskData([rng.normal(size=(30, 5)) for _ in range(2)],
                         [rng.normal(size=30) for _ in range(2)])
    model = SparseMTL(s=2, lambda_ridge=0.1, algorithm="bnb")
    model.check(data)
    model.fit(data)
    assert (traced["problem"], traced["refusal bnb"]) == (1, 1)
    model.check(data)
    model.set_params(s=3)            # the check's plan was for s = 2: the fit makes its own
    model.fit(data)
    assert (traced["problem"], traced["refusal bnb"]) == (3, 3)
    assert model.result_.coef.astype(bool).sum(axis=1).max() <= 3
    model.fit(data)                  # no check before it: the fit checks, and builds once
    assert (traced["problem"], traced["refusal bnb"]) == (4, 4)


def test_solve_options_pickle_with_their_read_only_solver_options():
    """A plan's key pickles the parameters; a mapping proxy has no pickle of its own."""
    import pickle
    from types import MappingProxyType

    from mtl_opt import SolveOptions

    options = SolveOptions(time_limit=3, threads=1, solver_options={"limits/gap": 0.5})
    back = pickle.loads(pickle.dumps(options))
    assert back == options and isinstance(back.solver_options, MappingProxyType)


def test_the_exact_choice_still_requires_its_backend_installed(monkeypatch, traced):
    """choose asks each refusal once; the backend the chosen method runs on must still be
    installed, before any work."""
    import numpy as np

    from mtl_opt.errors import SolverUnavailableError
    from mtl_opt.solvers.backends import HighsBackend

    monkeypatch.setattr(HighsBackend, "available", lambda self: False)
    monkeypatch.setattr(HighsBackend, "unavailable_reason", lambda self: "removed for this test")
    rng = np.random.default_rng(1)
    data = MultiTaskData([rng.normal(size=(40, 4)) for _ in range(2)],
                         [rng.normal(size=40) for _ in range(2)])
    with pytest.raises(SolverUnavailableError, match="removed for this test"):
        SparseMTL(s=2, lambda_ridge=0.1, algorithm="exact", backend="highs").check(data)
    assert traced["refusal oa_single_tree"] == 1 and traced["refusal oa_multi_tree"] == 1
