"""Every ```python block of the README and of the documentation's pages runs as a user would run
it: from a wheel of this checkout (installed into a scratch directory, no checkout on the path),
in an empty directory, each page's blocks in order and in one namespace (a block may use what an
earlier one on its page defined, as a reader would).  Data come through ``mtl_opt.datasets``.

The blocks run as written, except for the sizes in ``SHRINK``: each replacement must match one
block exactly once, so the table follows the pages.  ``MTL_OPT_README_FULL=1`` runs the full
sizes.  A block that solves a MIP must set a time limit.  The README stays a first visit's page
(at most ``README_LINES`` lines) whose links reach every page the long sections moved to.
"""

import fcntl
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", ROOT / "docs" / "getting_started.md",
         *sorted((ROOT / "docs" / "guide").glob("*.md"))]
BLOCKS = {page: re.findall(r"```python\n(.*?)```", page.read_text(), re.S) for page in PAGES}
README_LINES = 250

#: Size reductions for the suite: (text in a page, text run instead).
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

#: An editable install of the checkout (this environment's) finds mtl_opt before any path entry:
#: without its finder, as where only the wheel is installed, the wheel's copy is imported.
WHEEL_ONLY = ('import sys; sys.meta_path = [finder for finder in sys.meta_path '
              'if "__editable__" not in repr(finder)]')

#: Files the blocks write (relative to the directory they run in).
WRITTEN = ("out/fit.json", "out/regret.png", "out/progress.png")


def _shrunk(blocks: dict) -> dict:
    blocks = {page: list(found) for page, found in blocks.items()}
    for old, new in SHRINK:
        hits = [(page, i) for page, found in blocks.items() for i, block in enumerate(found) if old in block]
        assert len(hits) == 1, f"{old!r} is in {len(hits)} blocks, not one"
        page, i = hits[0]
        assert blocks[page][i].count(old) == 1, f"{page.name}: {old!r} not once"
        blocks[page][i] = blocks[page][i].replace(old, new)
    return blocks


@pytest.fixture(scope="session")
def wheel_site(tmp_path_factory):
    """This checkout built as a wheel and installed, without its dependencies (this environment
    has them), into a directory of its own: what the blocks import.  Made once per test session,
    shared by pytest-xdist's workers (a lock), with bnb's numba kernels compiled there once (their
    cache sits beside the installed sources), so pages that run bnb, and Dask's worker processes,
    load them instead of compiling them again (16-40 s each)."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    site = shared / "wheel-site"
    with open(shared / "wheel-site.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (site / ".ready").exists():
            scratch = Path(tempfile.mkdtemp(dir=shared))
            source = scratch / "source"   # a copy: a build writes build/ and *.egg-info beside the sources
            shutil.copytree(ROOT, source, symlinks=True, ignore=shutil.ignore_patterns(
                ".git", ".venv", "_build", "build", "*.egg-info", "__pycache__", "out", "auto_examples",
                "generated"))
            subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w",
                            scratch / "dist", source], check=True, capture_output=True)
            wheel = next((scratch / "dist").glob("mtl_opt-*.whl"))
            subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target",
                            site, wheel], check=True, capture_output=True)
            subprocess.run([sys.executable, "-c", f"{WHEEL_ONLY}\nimport mtl_opt.solvers.sparse.bnb.kernels"],
                           check=True, capture_output=True, env={**os.environ, "PYTHONPATH": str(site)})
            (site / ".ready").touch()
    return site


def test_mip_blocks_set_a_time_limit():
    mips = [block for found in BLOCKS.values() for block in found if any(mark in block for mark in MIP)]
    assert mips
    for block in mips:
        assert "time_limit" in block, block


def test_the_readme_is_short_and_reaches_every_page():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= README_LINES
    targets = {target.split("#")[0] for target in re.findall(r"\]\(([^)\s]+)\)", readme)
               if "://" not in target}
    for target in targets:
        assert (ROOT / target).exists(), f"README links to {target}, which does not exist"
    linked = {(ROOT / target).resolve() for target in targets}
    for page in [*PAGES[1:], ROOT / "docs" / "develop" / "layout.md", ROOT / "docs" / "api" / "index.rst"]:
        if page.name == "index.md":   # the guide's table of contents: the README lists its pages
            continue
        assert page.resolve() in linked, f"the README does not link to {page.relative_to(ROOT)}"


@pytest.mark.parametrize("page", [page for page in PAGES if BLOCKS[page]], ids=lambda page: page.name)
def test_page_python_blocks_run_from_a_wheel_in_an_empty_directory(page, wheel_site, tmp_path):
    blocks = BLOCKS if os.environ.get("MTL_OPT_README_FULL") == "1" else _shrunk(BLOCKS)
    script = tmp_path / "blocks.py"
    script.write_text(textwrap.dedent(f"""
        {WHEEL_ONLY}
        import mtl_opt
        assert mtl_opt.__file__.startswith({str(wheel_site)!r}), mtl_opt.__file__
        if __name__ == "__main__":   # as a script must, where Dask starts worker processes
            for i, block in enumerate({blocks[page]!r}):
                exec(compile(block, f"{page.name} python block {{i + 1}}", "exec"), globals())
    """))
    work = tmp_path / "empty"
    work.mkdir()
    env = {**os.environ, "PYTHONPATH": str(wheel_site), "MPLBACKEND": "Agg"}
    run = subprocess.run([sys.executable, script], cwd=work, env=env, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    written = [name for name in WRITTEN if name in "".join(blocks[page])]
    for name in written:
        assert (work / name).exists(), name
