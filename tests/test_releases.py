"""benchmarks/releases.toml, the release record that travels with main (git tags do not)."""

import re
import subprocess
import sys
from pathlib import Path

from packaging.version import Version   # pytest's own dependency

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]


def test_every_release_is_a_commit_of_this_history_in_version_order():
    releases = tomllib.loads((ROOT / "benchmarks" / "releases.toml").read_text())["releases"]
    assert releases, "no release recorded"
    package = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert max(map(Version, releases)) <= Version(package)   # 0.4.0 < 0.5.0.dev0 < 0.5.0
    for version, commit in releases.items():
        assert re.fullmatch(r"\d+\.\d+\.\d+", version) and re.fullmatch(r"[0-9a-f]{40}", commit)
    inside = subprocess.run(["git", "rev-parse", "--is-inside-work-tree"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip() == "true"
    if inside:   # a checkout (an unpacked sdist has no history to look in)
        for commit in releases.values():
            kind = subprocess.run(["git", "cat-file", "-t", commit], cwd=ROOT,
                                  capture_output=True, text=True).stdout.strip()
            assert kind == "commit", commit
