"""Compare regenerated data files by what they mean, not by their bytes.

Generated numbers go through BLAS (Cholesky factors, matrix products), whose last bits differ
between CPUs, so a regenerated file may print a float one digit differently.  Names, headers,
keys and shapes must still match exactly; numbers only within ``RTOL`` / ``ATOL``.
"""

import csv
from pathlib import Path

import numpy as np

#: Far above BLAS rounding (~1e-15 relative) and far below any change of the generator's setup.
RTOL, ATOL = 1e-9, 1e-12


def _number(cell: str) -> float | None:
    try:
        return float(cell)
    except ValueError:
        return None


def assert_same_csv(fresh: Path, shipped: Path) -> None:
    """Same header, same rows and columns, same text cells, numeric cells within RTOL/ATOL."""
    rows = [list(csv.reader(path.read_text().splitlines())) for path in (fresh, shipped)]
    assert [len(r) for r in rows[0]] == [len(r) for r in rows[1]], f"{shipped.name}: shape differs"
    assert rows[0][0] == rows[1][0], f"{shipped.name}: header differs"
    numbers = ([], [])
    for new_row, old_row in zip(rows[0][1:], rows[1][1:]):
        for new, old in zip(new_row, old_row):
            a, b = _number(new), _number(old)
            if a is None or b is None:
                assert new == old, f"{shipped.name}: text cell {new!r} != {old!r}"
            else:
                numbers[0].append(a)
                numbers[1].append(b)
    np.testing.assert_allclose(*numbers, rtol=RTOL, atol=ATOL, err_msg=shipped.name)


def assert_same_arrays(fresh, shipped, name: str) -> None:
    """Two sequences of arrays: same count and shapes, values within RTOL/ATOL."""
    assert [np.shape(a) for a in fresh] == [np.shape(b) for b in shipped], f"{name}: shapes differ"
    for a, b in zip(fresh, shipped):
        np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL, err_msg=name)
