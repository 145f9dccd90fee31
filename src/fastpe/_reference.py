"""The pure-NumPy version of the table, written the way the tutorials write it.

It is the kernel's twin (same arguments, same layouts, same odd-width rule) and
serves two purposes: the baseline the benchmarks compare against, and an
independent oracle in the tests.  It computes the angle ``k / base**(2i/d)`` in
float64 and calls ``np.sin``/``np.cos`` per element, so its error grows with the
position (about ``k * 2**-53``); see ``fastpe.sinusoidal`` for the accurate one.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import DTypeLike

from ._validate import as_base, as_float_dtype, as_int, as_layout, check_table_size


def reference(
    seq_len: int,
    d_model: int,
    *,
    base: float = 10000.0,
    offset: int = 0,
    dtype: DTypeLike = np.float64,
    layout: str = "interleaved",
) -> np.ndarray:
    """Pure-NumPy sinusoidal table (float64 arithmetic, cast to ``dtype`` at the end).

    Same meaning of every argument as :func:`fastpe.sinusoidal`.

    Examples
    --------
    >>> import fastpe
    >>> fastpe.reference(2, 4, base=100).round(6)
    array([[0.      , 1.      , 0.      , 1.      ],
           [0.841471, 0.540302, 0.099833, 0.995004]])
    """
    seq_len = as_int(seq_len, "seq_len", minimum=0)
    d_model = as_int(d_model, "d_model", minimum=1)
    base = as_base(base)
    offset = as_int(offset, "offset")
    layout_code = as_layout(layout)
    dt = as_float_dtype(dtype)
    check_table_size(seq_len, d_model, 8)

    nf = (d_model + 1) // 2          # frequencies: odd d_model has one more sine
    nc = d_model // 2                # cosines
    k = np.arange(offset, offset + seq_len, dtype=np.float64)[:, np.newaxis]
    i = np.arange(nf, dtype=np.float64)
    denominator = np.power(base, 2.0 * i / d_model)    # the seeds' n^(2i/d)
    angle = k / denominator
    sines = np.sin(angle)
    cosines = np.cos(angle[:, :nc])
    out = np.empty((seq_len, d_model), dtype=np.float64)
    if layout_code == 0:
        out[:, 0::2] = sines
        out[:, 1::2] = cosines
    else:
        out[:, :nf] = sines
        out[:, nf:] = cosines
    return out.astype(dt, copy=False)
