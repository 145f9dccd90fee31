"""The public Python API of fastpe: validate, resolve defaults, allocate, call the kernel."""

from __future__ import annotations

import platform
from typing import Any

import numpy as np
from numpy.typing import DTypeLike

from . import kernel as _kernel
from ._validate import (
    INT64_MAX,
    as_base,
    as_float_dtype,
    as_int,
    as_layout,
    as_num_threads,
    check_out,
    check_table_size,
)
from ._version import __version__

_DEFAULT_DTYPE = np.float32


# Above 2**997 the kernel's Veltkamp split of base (2**27 * base) overflows and
# the frequencies come out NaN; 1e300 is a round bound below that.
MAX_BASE = 1e300


def _check_positions(offset: int, seq_len: int, base: float, d_model: int) -> None:
    limit = _kernel.max_position(base, d_model)
    hi = max(abs(offset), abs(offset + seq_len))
    if hi > limit:
        raise ValueError(
            f"seq_len and offset must keep every position within +-{limit} for base={base:g}, "
            f"d_model={d_model} (exact angle reduction); got positions up to {hi}"
        )


def sinusoidal(
    seq_len: int,
    d_model: int,
    *,
    base: float = 10000.0,
    offset: int = 0,
    dtype: DTypeLike | None = None,
    layout: str = "interleaved",
    out: np.ndarray | None = None,
    num_threads: int | None = None,
) -> np.ndarray:
    """Sinusoidal positional-encoding table of "Attention Is All You Need".

    Row ``r`` encodes position ``k = offset + r``; with ``w_i = base**(-2*i/d_model)``::

        layout="interleaved":  P[r, 2i] = sin(k*w_i),  P[r, 2i+1] = cos(k*w_i)
        layout="split":        P[r, i]  = sin(k*w_i),  P[r, ns+i]  = cos(k*w_i),  ns = ceil(d_model/2)

    For odd ``d_model`` the extra column is the sine of the next frequency (the
    formula applied per column, as in DistilBERT/XLM and keras_hub); in the split
    layout the sine block holds that extra column.

    Parameters
    ----------
    seq_len : int
        Number of positions (rows), >= 0.  ``seq_len=0`` gives a ``(0, d_model)`` table.
    d_model : int
        Width of the encoding (columns), >= 1.
    base : float, keyword-only
        The wavelength base ``n`` (10000 in the paper); finite, > 0 and <= 1e300.
    offset : int, keyword-only
        First position (e.g. the length of a KV cache).  May be negative.
    dtype : float32 or float64, optional, keyword-only
        Output dtype.  ``None`` (the default) means float32 (what ML pipelines
        feed to models), or ``out.dtype`` when ``out`` is given; an explicit
        dtype must match ``out.dtype``.
    layout : {"interleaved", "split"}, keyword-only
    out : ndarray, optional, keyword-only
        Array of shape ``(seq_len, d_model)``, dtype float32/float64, writable,
        with a contiguous last axis; its rows may be strided (e.g. a column slice
        ``emb[:, 64:128]`` of a wider matrix).  Filled in place and returned.
    num_threads : int, optional, keyword-only
        OpenMP threads for this call.  ``None`` follows the OpenMP default
        (``OMP_NUM_THREADS``, ``threadpoolctl.threadpool_limits``).  Capped at
        the OpenMP thread limit; always 1 in a process forked after fastpe was
        imported (see ``build_info()["forked_child"]``).

    Returns
    -------
    ndarray
        The ``(seq_len, d_model)`` table (``out`` itself when given).

    Notes
    -----
    Every entry is within ~3e-16 of the exact value in float64 (the angle is
    never rounded to a double) and is the correctly rounded float32 value in
    float32 for all but a vanishing fraction of entries.  Results are bitwise
    identical for any ``num_threads`` and any split of the positions into
    chunks (``offset``).  The GIL is released while the table is filled.

    Examples
    --------
    >>> import fastpe
    >>> fastpe.sinusoidal(4, 4, base=100, dtype="float64").round(8)
    array([[ 0.        ,  1.        ,  0.        ,  1.        ],
           [ 0.84147098,  0.54030231,  0.09983342,  0.99500417],
           [ 0.90929743, -0.41614684,  0.19866933,  0.98006658],
           [ 0.14112001, -0.9899925 ,  0.29552021,  0.95533649]])
    >>> emb = np.zeros((8, 512), dtype=np.float32)
    >>> _ = fastpe.sinusoidal(8, 128, out=emb[:, :128])   # fill a column window in place
    """
    seq_len = as_int(seq_len, "seq_len", minimum=0, maximum=INT64_MAX)
    d_model = as_int(d_model, "d_model", minimum=1, maximum=INT64_MAX)
    base = as_base(base, maximum=MAX_BASE)
    offset = as_int(offset, "offset")
    layout_code = as_layout(layout)
    nthreads = as_num_threads(num_threads)
    explicit = None if dtype is None else as_float_dtype(dtype)
    _check_positions(offset, seq_len, base, d_model)
    if out is None:
        dt = explicit if explicit is not None else np.dtype(_DEFAULT_DTYPE)
        check_table_size(seq_len, d_model, dt.itemsize)
        # np.empty, not zeros: the kernel writes every entry, and its threads
        # touching the pages first spreads the page faults over the cores.
        out = np.empty((seq_len, d_model), dtype=dt)
    else:
        check_out(out, (seq_len, d_model), explicit)
    if seq_len == 0:
        return out
    return _kernel.fill(out, offset, base, layout_code, nthreads)


def build_info() -> dict[str, Any]:
    """How this fastpe was built and what it will use at run time.

    Returns
    -------
    dict
        ``version``; ``openmp`` (bool, built with OpenMP); ``openmp_version``
        (the ``_OPENMP`` date macro, 0 for a serial build); ``max_threads`` (what
        ``num_threads=None`` uses now: follows OMP_NUM_THREADS and threadpoolctl);
        ``forked_child`` (True in a process forked from one that had imported
        fastpe: calls there run on one thread, because GNU libgomp's thread pool
        does not survive ``fork()``; ``max_threads`` is then 1);
        ``machine``; ``numpy`` (the NumPy version in use).
    """
    openmp, omp_version = _kernel.openmp_info()
    return {
        "version": __version__,
        "openmp": openmp,
        "openmp_version": omp_version,
        "max_threads": int(_kernel.max_threads()),
        "forked_child": _kernel.forked_child(),
        "machine": platform.machine(),
        "numpy": np.__version__,
    }
