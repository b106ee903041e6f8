"""Every example in a docstring of the package runs as a doctest, so the API reference's examples
(docs/api) cannot drift from the code.  A module is imported only if its source holds an
example: importing every module would compile bnb's numba kernels for nothing."""

import doctest
import importlib
import warnings
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "mtl_opt"
MODULES = sorted(
    ".".join(("mtl_opt", *path.relative_to(PACKAGE).with_suffix("").parts)).removesuffix(".__init__")
    for path in PACKAGE.rglob("*.py") if ">>> " in path.read_text(encoding="utf-8"))


def test_the_public_api_has_examples():
    assert len(MODULES) >= 10, MODULES


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)   # an example that writes a file writes it here
    module = importlib.import_module(name)
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # an example that warns shows users a warning
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE,
                                 raise_on_error=False, report=True)
    assert result.attempted > 0 and result.failed == 0, f"{name}: {result}"
