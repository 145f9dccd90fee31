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

from ._validate import INT64_MAX, as_base, as_float_dtype, as_int, as_layout, check_table_size


def reference(
    seq_len: int,
    d_model: int,
    *,
    base: float = 10000.0,
    offset: int = 0,
    dtype: DTypeLike | None = np.float64,
    layout: str = "interleaved",
) -> np.ndarray:
    """Pure-NumPy sinusoidal table (float64 arithmetic, cast to ``dtype`` at the end).

    Same meaning of every argument as :func:`fastpe.sinusoidal` (``dtype=None``
    means float64 here).

    Examples
    --------
    >>> import fastpe
    >>> fastpe.reference(2, 4, base=100).round(6)
    array([[0.      , 1.      , 0.      , 1.      ],
           [0.841471, 0.540302, 0.099833, 0.995004]])
    """
    seq_len = as_int(seq_len, "seq_len", minimum=0, maximum=INT64_MAX)
    d_model = as_int(d_model, "d_model", minimum=1, maximum=INT64_MAX)
    base = as_base(base)
    offset = as_int(offset, "offset")
    layout_code = as_layout(layout)
    dt = np.dtype(np.float64) if dtype is None else as_float_dtype(dtype)
    # angle, sines, cosines and the float64 table are alive together (~3 tables)
    check_table_size(seq_len, d_model, 8, working_copies=3)
    # Positions are float64 here: beyond 2**53 neighbouring rows would collide.
    hi = max(abs(offset), abs(offset + seq_len))
    if hi > 2**53:
        raise ValueError(
            f"seq_len and offset must keep every position within +-2**53, got positions up to {hi}"
        )

    if seq_len == 0:  # no intermediates sized by d_model for an empty table
        return np.empty((0, d_model), dtype=dt)

    nf = (d_model + 1) // 2  # frequencies: odd d_model has one more sine
    nc = d_model // 2  # cosines
    k = np.arange(offset, offset + seq_len, dtype=np.float64)[:, np.newaxis]
    i = np.arange(nf, dtype=np.float64)
    denominator = np.power(base, 2.0 * i / d_model)  # the seeds' n^(2i/d)
    with np.errstate(over="ignore"):
        angle = k / denominator
    if not np.isfinite(angle).all():  # base so small that k / base**(2i/d) overflows
        raise ValueError(
            f"base={base!r} is too small for d_model={d_model}: the angles overflow float64"
        )
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
