"""Lets test modules share helpers (e.g. the brute-force enumerators in test_sparse)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
