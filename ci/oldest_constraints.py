"""Print pip constraints pinning the core numerical dependencies to the lower bounds in pyproject.toml.

CI's oldest-versions pass installs with ``pip install -c`` on this output, so the bounds that
pyproject.toml declares are the versions that are tested; a bound that does not install or
pass must be raised there, not here.
"""

import re
import sys
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:   # Python 3.10: the same parser as a package (mtl_opt depends on it there)
    import tomli as tomllib

CORE = ("numpy", "numba", "scipy", "pyomo", "highspy", "pyscipopt", "scikit-learn", "networkx", "joblib")


def main() -> int:
    pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
    bounds = {}
    for requirement in tomllib.loads(pyproject.read_text())["project"]["dependencies"]:
        match = re.fullmatch(r"([A-Za-z0-9_.-]+)>=([0-9][0-9A-Za-z.]*)", requirement.strip())
        if match:
            bounds[match[1].lower()] = match[2]
    missing = [name for name in CORE if name not in bounds]
    if missing:
        print(f"pyproject.toml: no 'name>=version' lower bound for {', '.join(missing)}", file=sys.stderr)
        return 1
    print("\n".join(f"{name}=={bounds[name]}" for name in CORE))
    return 0


if __name__ == "__main__":
    sys.exit(main())
