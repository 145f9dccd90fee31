"""The independent truths the tests compare against.

Truths used here never come from fastpe's own kernel:
- the worked table printed in the seed tutorials (n=100, d=4),
- mpmath at high precision (``exact_values``),
- fastpe.reference, the straightforward NumPy float64 formula (itself checked
  against the seed table and mpmath in test_reference.py).
"""

from __future__ import annotations

import mpmath
import numpy as np

# The worked example of seeds 000/003: getPositionEncoding(seq_len=4, d=4, n=100),
# as printed there to 8 decimals.  (Seed 000 prints 0.29552023 at [3, 2], a typo:
# sin(0.3) = 0.2955202067; seed 003 prints 0.29552021.)
SEED_TABLE = np.array(
    [
        [0.0, 1.0, 0.0, 1.0],
        [0.84147098, 0.54030231, 0.09983342, 0.99500417],
        [0.90929743, -0.41614684, 0.19866933, 0.98006658],
        [0.14112001, -0.9899925, 0.29552021, 0.95533649],
    ]
)


def column_map(d_model: int, layout: str = "interleaved"):
    """(frequency index i, is_sine) of every column, from the documented layout rules."""
    nf = (d_model + 1) // 2
    cols = []
    for j in range(d_model):
        if layout == "interleaved":
            cols.append((j // 2, j % 2 == 0))
        else:
            cols.append((j, True) if j < nf else (j - nf, False))
    return cols


def exact_entry(k, j, d_model, base=10000.0, layout="interleaved", dps=40):
    """sin/cos(k * base^(-2i/d)) in mpmath, with the exact (binary) base value."""
    i, is_sin = column_map(d_model, layout)[j]
    with mpmath.workdps(dps):
        x = mpmath.mpf(int(k)) * mpmath.power(mpmath.mpf(base), -mpmath.mpf(2 * i) / d_model)
        return mpmath.sin(x) if is_sin else mpmath.cos(x)


def exact_values(positions, columns, d_model, base=10000.0, layout="interleaved", dps=40):
    """Exact values (as float64 and as mpf) at paired (position, column) samples."""
    cmap = column_map(d_model, layout)
    out = []
    with mpmath.workdps(dps):
        b = mpmath.mpf(base)
        cache = {}
        for k, j in zip(positions, columns, strict=False):
            i, is_sin = cmap[int(j)]
            w = cache.get(i)
            if w is None:
                w = cache[i] = mpmath.power(b, -mpmath.mpf(2 * i) / d_model)
            x = mpmath.mpf(int(k)) * w
            out.append(mpmath.sin(x) if is_sin else mpmath.cos(x))
    return out


def abs_errors(values, exact):
    """|value - exact| computed in mpmath (no float64 rounding of the difference)."""
    return np.array(
        [float(abs(mpmath.mpf(float(v)) - e)) for v, e in zip(values, exact, strict=False)]
    )
