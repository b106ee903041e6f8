"""Every ```python block of README.md runs, in order and in one namespace (a block may use what an
earlier one defined, as a reader would), so a README snippet cannot fail with a NameError.

The blocks run as written from a temporary directory (the shipped ``instances/`` linked in, files
they write land there), except for the sizes in ``SHRINK``: each replacement must match its
block exactly once, so the table follows the README.  ``MTL_OPT_README_FULL=1`` runs the full
sizes.  A block that solves a MIP must set a time limit.
"""

import os
import re
from pathlib import Path

import sklearn

ROOT = Path(__file__).resolve().parents[1]
BLOCKS = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)

#: Size reductions for the suite: (text in the README, text run instead).
SHRINK = [
    ("smtl_simulation(p=250, K=4, n=50", "smtl_simulation(p=30, K=3, n=50"),
    ("train, n_splits=5, seed=0, rule=\"1se\", n_jobs=2)", "train, n_splits=3, seed=0, rule=\"1se\", n_jobs=1)"),
    ("cross_validate_armul(ARMUL(), sim.data, seed=0)",
     "cross_validate_armul(ARMUL(), sim.data, seed=0, c_grid=(0.5, 1.0), n_splits=3)"),
    ("horizon=2000, lam=", "horizon=200, lam="),
    ("horizon=2000, alpha=alpha, runs=10", "horizon=200, alpha=alpha, runs=2"),
    ("horizon=2000, seed=0, trials=5", "horizon=200, seed=0, trials=1"),
    ("SyntheticGroups(n_users=100)", "SyntheticGroups(n_users=20)"),
    ("horizon=3000, seed=0", "horizon=100, seed=0"),
    ("SolveOptions(time_limit=60),           # a MIP", "SolveOptions(time_limit=3),  # a MIP"),
    ("for cv in (GroupKFold(5), LeaveOneGroupOut()):", "for cv in (GroupKFold(5),):"),
    ("solve_options=SolveOptions(time_limit=30))   # the whole fit's budget",
     "solve_options=SolveOptions(time_limit=3))"),
    ("solve_options=SolveOptions(time_limit=10)).fit(data)", "solve_options=SolveOptions(time_limit=3)).fit(data)"),
]

#: What marks a block that solves a mixed-integer program.
MIP = ('algorithm="exact"', 'algorithm="miqp"', 'algorithm="bnb"', "algorithm=\"oa", "model=spec")


def _shrunk(blocks: list[str]) -> list[str]:
    blocks = list(blocks)
    for old, new in SHRINK:
        hits = [i for i, block in enumerate(blocks) if old in block]
        assert len(hits) == 1 and blocks[hits[0]].count(old) == 1, f"README: {old!r} not once"
        blocks[hits[0]] = blocks[hits[0]].replace(old, new)
    return blocks


def test_mip_blocks_set_a_time_limit():
    mips = [block for block in BLOCKS if any(mark in block for mark in MIP)]
    assert mips
    for block in mips:
        assert "time_limit" in block, block


def test_readme_python_blocks_run(tmp_path, monkeypatch):
    assert len(BLOCKS) >= 8
    monkeypatch.chdir(tmp_path)
    (tmp_path / "instances").symlink_to(ROOT / "instances")
    before = sorted(path.name for path in ROOT.iterdir())
    blocks = BLOCKS if os.environ.get("MTL_OPT_README_FULL") == "1" else _shrunk(BLOCKS)
    namespace = {}
    with sklearn.config_context():   # a block switches metadata routing on: undone after
        for i, block in enumerate(blocks):
            exec(compile(block, f"README.md python block {i + 1}", "exec"), namespace)
    for written in ("fit.json", "regret.png", "progress.png"):
        assert (tmp_path / "out" / written).exists(), written
    assert sorted(path.name for path in ROOT.iterdir()) == before   # nothing written in the repo
