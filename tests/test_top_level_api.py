"""The top-level API: ``from mtl_opt import ...`` for every public name, loaded lazily."""

import importlib
import subprocess
import sys

import pytest

import mtl_opt


@pytest.mark.parametrize("name", mtl_opt.__all__)
def test_every_top_level_name_is_its_home_modules_object(name):
    home = importlib.import_module(f"mtl_opt.{mtl_opt._HOME[name]}")
    assert getattr(mtl_opt, name) is getattr(home, name)
    assert name in dir(mtl_opt)


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'Sparse'"):
        mtl_opt.Sparse


def test_importing_the_package_or_one_name_loads_only_what_it_needs():
    """``import mtl_opt`` loads no numpy; ``from mtl_opt import SolveOptions`` no estimator and
    no solver backend; ``from mtl_opt import MOLAR`` neither numba nor Pyomo's solvers."""
    code = ("import sys, mtl_opt; a = 'numpy' in sys.modules\n"
            "from mtl_opt import SolveOptions; b = 'mtl_opt.estimators.base' in sys.modules\n"
            "from mtl_opt import MOLAR; c = 'numba' in sys.modules\n"
            "print(a, b, c, SolveOptions(rel_gap=0.5).rel_gap)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False", "False", "0.5"], out
