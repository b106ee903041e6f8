"""Start-up costs only what is used: the CLI and the estimators that do not run bnb never import
numba (bnb's kernels take ~40 s to compile on a fresh machine, 208 MB of it installed), nor Pyomo
where they build no model (0.3-0.5 s of import), the CLI's help and version not even numpy; a
Ctrl-C while a command imports is exit 130.

Each case runs in a fresh interpreter: this test process has imported everything already.
"""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "instances" / "molar_demo.toml"


def _loaded_after(code: str) -> dict:
    """Run ``code`` in a fresh interpreter; which heavy modules it left in ``sys.modules``."""
    probe = textwrap.dedent(code) + textwrap.dedent("""
        import json, sys
        print(json.dumps({name: name in sys.modules for name in
                          ("numba", "mtl_opt.solvers.sparse.bnb.search", "mtl_opt.solvers.sparse.bnb.kernels", "pyomo", "numpy")}))
    """)
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout.splitlines()[-1])


def test_help_and_version_import_neither_numpy_nor_pyomo():
    loaded = _loaded_after("""
        import contextlib, io
        from mtl_opt.cli import main
        for flag in ("--help", "--version"):
            with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
                main([flag])
    """)
    assert not any(loaded.values()), loaded


def test_fits_that_build_no_model_and_cli_validate_import_neither_numba_nor_pyomo():
    """The default fits build no model: no Pyomo; then ``validate`` of the MOLAR demo, an LP on
    HiGHS, asks whether HiGHS is installed, which is Pyomo's to say, but compiles nothing."""
    loaded = _loaded_after(f"""
        import contextlib, io, sys
        import numpy as np
        from mtl_opt.cli import main
        from mtl_opt.data import MultiTaskData
        from mtl_opt.estimators import ARMUL, MOLAR, PerTaskOLS, SparseMTL
        rng = np.random.default_rng(0)
        data = MultiTaskData([rng.normal(size=(30, 4)) for _ in range(3)],
                             [rng.normal(size=30) for _ in range(3)])
        MOLAR().fit(data); ARMUL().fit(data); PerTaskOLS().fit(data)
        SparseMTL(s=2).fit(data)   # bcd: no bnb
        assert "pyomo" not in sys.modules
        with contextlib.redirect_stdout(io.StringIO()):
            assert main(["validate", {str(DEMO)!r}]) == 0
    """)
    assert not (loaded["numba"] or loaded["mtl_opt.solvers.sparse.bnb.search"]), loaded


def test_bnb_compiles_in_the_fit_before_its_deadline_never_in_check():
    """``check`` (``mtl-opt validate``) asks bnb's scope only (``bnb.scope``), without its kernels;
    a fit imports bnb (``Method.prepare``) before its deadline starts, so no time limit pays for
    the compile: the Deadline is made with bnb already loaded."""
    loaded = _loaded_after("""
        import sys
        import numpy as np
        from mtl_opt.data import MultiTaskData
        from mtl_opt.estimators import SparseMTL
        from mtl_opt.estimators import sparse as sparse_module
        rng = np.random.default_rng(0)
        data = MultiTaskData([rng.normal(size=(10, 6)) for _ in range(2)],
                             [rng.normal(size=10) for _ in range(2)])
        estimator = SparseMTL(s=2, algorithm="bnb", lambda_ridge=0.1)
        estimator.check(data)
        assert "numba" not in sys.modules and "mtl_opt.solvers.sparse.bnb.search" not in sys.modules
        seen = []
        real = sparse_module.Deadline
        sparse_module.Deadline = lambda *a, **k: seen.append("mtl_opt.solvers.sparse.bnb.search" in sys.modules) or real(*a, **k)
        estimator.fit(data)
        assert seen and all(seen), seen
    """)
    assert loaded["mtl_opt.solvers.sparse.bnb.search"] and loaded["numba"], loaded


def test_a_slow_first_bnb_import_says_what_it_is_doing():
    """The notice's timer fires while the import runs (here at once); the import still succeeds."""
    run = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        from mtl_opt.solvers.sparse import methods
        methods.COMPILE_NOTICE_AFTER = 0.0
        assert methods._bnb_module().solve_bnb
    """)], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert run.returncode == 0, run.stderr
    assert run.stderr.count("loading the bnb kernels (numba compiles them once per Python environment") == 1, run.stderr


def test_ctrl_c_while_a_command_imports_is_exit_130_without_a_traceback():
    """The KeyboardInterrupt is raised by the import of numpy, which ``validate`` needs, as a
    Ctrl-C during start-up would (at a moment no timer can hit reliably)."""
    run = subprocess.run([sys.executable, "-c", textwrap.dedent(f"""
        import sys
        class Interrupt:
            def find_spec(self, name, path=None, target=None):
                if name == "numpy":
                    raise KeyboardInterrupt
        sys.meta_path.insert(0, Interrupt())
        from mtl_opt.cli import main
        sys.exit(main(["validate", {str(DEMO)!r}]))
    """)], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert run.returncode == 130, (run.returncode, run.stderr)
    assert "Traceback" not in run.stderr and "interrupted" in run.stderr, run.stderr


def test_python_dash_m_mtl_opt_is_the_cli():
    run = subprocess.run([sys.executable, "-m", "mtl_opt", "--version"], capture_output=True, text=True,
                         cwd=ROOT, timeout=600)
    assert run.returncode == 0 and run.stdout.startswith("mtl-opt "), (run.stdout, run.stderr)


def test_an_estimator_imports_its_own_modules_only():
    """A CV worker or a bench cell unpickles one estimator: the package loads no other family."""
    run = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import sys
        from mtl_opt.estimators import SparseMTL
        print(sorted(m for m in sys.modules if m.startswith("mtl_opt.estimators.")))
    """)], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["['mtl_opt.estimators.base',", "'mtl_opt.estimators.sparse']"], run.stdout


def test_the_estimator_registry_names_each_class_by_its_own_method():
    from mtl_opt import estimators

    assert len(estimators.ESTIMATORS) == 13
    for method, cls in estimators.ESTIMATORS.items():
        assert cls.method == method and getattr(estimators, cls.__name__) is cls
    assert "MOLARLogistic" in estimators.__all__   # imported from here, not offered to instance files
    assert estimators.MOLARLogistic.method not in estimators.ESTIMATORS
