"""The typed public API: mypy on the modules ``[tool.mypy]`` lists (pyproject.toml), as a
type-checking user of the installed package (``py.typed``) would see them; any error fails."""

import subprocess
import sys
from pathlib import Path

from mtl_opt.tomlfile import read_toml

ROOT = Path(__file__).resolve().parents[1]


def test_the_typed_modules_pass_mypy():
    """mypy is in the test extra (``pip install -e ".[test]"``); a cold run takes ~9 s."""
    run = subprocess.run([sys.executable, "-m", "mypy", "--no-error-summary"], cwd=ROOT,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr


def test_the_wheel_carries_py_typed():
    """PEP 561: without the marker a type checker ignores the package's annotations."""
    package_data = read_toml(ROOT / "pyproject.toml", "pyproject")["tool"]["setuptools"][
        "package-data"]
    assert "py.typed" in package_data["mtl_opt"] and (ROOT / "mtl_opt" / "py.typed").is_file()
