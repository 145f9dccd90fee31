"""fastpe on Dask: lazy positional-encoding tables and a lazy fused add.

Needs the ``dask`` extra (``pip install 'fastpe[dask]'``); ``import fastpe.dask``
works without it, the functions raise ImportError naming the extra.

Each block of the result is filled by the fastpe kernel in a Dask task, with the
positions of that block (its row offset, its slice of the per-sequence offsets or
of the position array).  fastpe's entries are pure functions of (position,
column) -- the kernel's anchor blocks depend on the width only, never on where a
fill starts or on the thread count -- so every chunking, every scheduler and
every thread count gives arrays bitwise equal to the single-process
:func:`fastpe.sinusoidal` / :func:`fastpe.add_to`.

Arguments are validated when the graph is built, with the messages of the
single-process functions; only position ranges that live in Dask arrays (lazy
``offset`` or ``positions``) can be checked no earlier than in the task.

Threads: ``num_threads=1`` by default, one OpenMP thread per task, because Dask
already runs one task per worker thread; see docs/dask_ray.md.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import DTypeLike

from . import _api
from ._conventions import Convention
from ._validate import (
    INT64_MAX,
    as_bool,
    as_finite,
    as_float_dtype,
    as_int,
    as_num_threads,
    check_table_size,
)

__all__ = ["add_to", "sinusoidal"]

_MISSING = (
    "fastpe.dask needs Dask: pip install 'fastpe[dask]' (or pip install 'dask[array,distributed]')"
)


def _dask_array() -> Any:
    """``dask.array``, imported on first use (fastpe itself does not need Dask)."""
    try:
        import dask.array as da
    except ImportError as exc:
        raise ImportError(f"{_MISSING}; importing dask.array failed: {exc}") from exc
    return da


# ----------------------------------------------------------------- block functions
# Module-level functions (not closures): Dask pickles them by reference, so a
# worker imports fastpe.dask instead of receiving code.


def _table_block(*, offset: int, d_model: int, kwargs: dict, block_info: Any = None) -> np.ndarray:
    """Rows [r0, r1) of the table: one kernel call at offset + r0, full width."""
    (r0, r1), (c0, c1) = block_info[None]["array-location"]
    assert (c0, c1) == (0, d_model)
    return _api.sinusoidal(r1 - r0, d_model, offset=offset + r0, **kwargs)


def _add_block(
    x: np.ndarray,
    offs: np.ndarray | None,
    pos: np.ndarray | None,
    *,
    offset: int,
    d_model: int,
    kwargs: dict,
    block_info: Any = None,
) -> np.ndarray:
    """``x * scale + PE`` for one block of x, on a copy (Dask blocks are shared,
    never written to).  ``offs``: the block's offsets, shape (*batch, 1, 1);
    ``pos``: its positions, shape (*batch, rows, 1)."""
    loc = block_info[0]["array-location"]
    s0 = loc[-2][0]
    c0, c1 = loc[-1]
    if pos is not None:
        positions = pos[..., 0]
        off = offset if offs is None else offs[..., 0, 0]
    else:
        positions = None
        # Without positions, row s of a sequence sits at offset + s: shift by the
        # block's first row.
        off = offset + s0 if offs is None else offs[..., 0, 0] + s0
    if (c0, c1) == (0, d_model):
        out = np.array(x, order="C", copy=True)
        return _api.add_to(out, offset=off, positions=positions, **kwargs)
    # A column window: the kernel fills whole rows, so run it on a full-width
    # temporary holding this block's columns (d_model / (c1 - c0) times the work
    # of the window) and keep the window: bitwise what the full call gives there.
    tmp = np.zeros((*x.shape[:-1], d_model), dtype=x.dtype)
    tmp[..., c0:c1] = x
    _api.add_to(tmp, offset=off, positions=positions, **kwargs)
    return np.ascontiguousarray(tmp[..., c0:c1])


# ----------------------------------------------------------------- public functions


def sinusoidal(
    seq_len: int,
    d_model: int,
    *,
    chunks: Any = ("auto", -1),
    base: float = 10000.0,
    offset: int = 0,
    dtype: DTypeLike | None = None,
    layout: str = "interleaved",
    num_threads: int | None = 1,
    convention: str | Convention = "vaswani",
) -> Any:
    """The table of :func:`fastpe.sinusoidal` as a lazy ``dask.array.Array``.

    Row ``r`` encodes position ``offset + r``.  Each row chunk is one fastpe
    kernel call at its own offset, so the result is bitwise equal to
    ``fastpe.sinusoidal(seq_len, d_model, ...)`` for every chunking, scheduler
    and thread count, and a table larger than any machine's memory can be
    reduced block by block (``.map_blocks(...)``, ``.sum()``, ``.to_zarr()``)
    without ever existing whole.

    Parameters
    ----------
    seq_len, d_model : int
        Shape of the table, as in :func:`fastpe.sinusoidal`.
    chunks : Dask chunks, keyword-only
        Anything ``dask.array`` accepts for shape ``(seq_len, d_model)``: an int
        (for both axes, Dask's rule), a tuple such as ``(65536, -1)``, explicit
        block sizes ``((1000, 24), (512,))``, or ``"auto"``.  The default
        ``("auto", -1)`` takes rows up to Dask's ``array.chunk-size`` (128 MiB)
        at full width.  Keep rows at full width (``-1``) and blocks of a few MB
        or more: see docs/dask_ray.md.
    base, offset, dtype, layout, convention
        As in :func:`fastpe.sinusoidal` (``dtype=None`` is float32).
    num_threads : int or None, keyword-only
        OpenMP threads per task.  The default 1 suits Dask, which already runs a
        task per worker thread (more would oversubscribe the cores); use more
        only with fewer worker threads than cores, e.g. one single-threaded
        worker per machine.  ``None`` follows the workers' OpenMP default.

    Returns
    -------
    dask.array.Array
        Lazy, shape ``(seq_len, d_model)``, the requested chunks.

    Notes
    -----
    The kernel fills whole rows.  With column chunks, each row chunk is still
    filled once at full width and then split into its column blocks (a
    ``rechunk`` that only splits): no extra kernel work, but a task holds the
    full-width row chunk while its column blocks are made.

    Examples
    --------
    >>> import fastpe, fastpe.dask, numpy as np
    >>> P = fastpe.dask.sinusoidal(10_000, 256, chunks=(3_000, -1))
    >>> P.chunks
    ((3000, 3000, 3000, 1000), (256,))
    >>> bool(np.array_equal(P.compute(), fastpe.sinusoidal(10_000, 256)))
    True
    """
    da = _dask_array()
    from dask.base import tokenize

    seq_len = as_int(seq_len, "seq_len", minimum=0, maximum=INT64_MAX)
    d_model = as_int(d_model, "d_model", minimum=1, maximum=INT64_MAX)
    offset = as_int(offset, "offset")
    conv = _api._convention(convention, base, layout)
    enc = _api._encoder(convention, base, layout, d_model)
    as_num_threads(num_threads)
    dt = np.dtype(np.float32) if dtype is None else as_float_dtype(dtype)
    _api._check_range(enc, _api._table_extent(offset, seq_len), "seq_len and offset")
    shape = (seq_len, d_model)
    try:
        want = da.core.normalize_chunks(chunks, shape, dtype=dt)
    except Exception as exc:
        raise ValueError(f"chunks {chunks!r} do not fit shape {shape}: {exc}") from None
    # Each task holds one full-width row chunk: it must fit a machine.
    check_table_size(max(want[0], default=0), d_model, dt.itemsize)

    kwargs = dict(
        base=base, dtype=dt, layout=layout, num_threads=num_threads, convention=convention
    )
    name = "fastpe-sinusoidal-" + tokenize(
        seq_len, d_model, offset, conv, dt, want[0], num_threads
    )
    rows = da.map_blocks(
        _table_block,
        chunks=(want[0], (d_model,)),
        dtype=dt,
        meta=np.empty((0, 0), dtype=dt),
        name=name,
        offset=offset,
        d_model=d_model,
        kwargs=kwargs,
    )
    return rows if want[1] == (d_model,) else rows.rechunk(want)


def _lazy_like(values: Any, target_shape: tuple[int, ...], target_chunks: tuple, da: Any) -> Any:
    """``values`` (NumPy or Dask, broadcastable to ``target_shape``) as a Dask
    array of ``len(target_shape)`` dims chunked like the target along its full
    dims, kept at size 1 along its broadcast dims (Dask's blockwise broadcasts
    those): nothing is materialised at the broadcast size."""
    arr = values if isinstance(values, da.Array) else da.from_array(values, chunks=-1)
    arr = arr.reshape((1,) * (len(target_shape) - arr.ndim) + arr.shape)
    # (the caller checked that the shapes broadcast)
    chunks = tuple(
        want if have == size else (1,)
        for have, size, want in zip(arr.shape, target_shape, target_chunks, strict=False)
    )
    return arr.rechunk(chunks)


# The keywords of fastpe.add_to, written out again: this is its public twin,
# and tests/test_dask.py checks that both raise the same errors.
def add_to(
    x: Any,
    *,
    offset: Any = 0,
    positions: Any = None,
    scale: float = 1.0,
    base: float = 10000.0,
    layout: str = "interleaved",
    num_threads: int | None = 1,
    convention: str | Convention = "vaswani",
    correctly_rounded: bool = False,
) -> Any:
    """``x * scale + PE`` for a Dask array of embeddings, lazily, as a new array.

    The Dask twin of :func:`fastpe.add_to`: each block of ``x`` gets the
    encoding of its own positions (its rows' offset in the sequence, its slice
    of ``offset`` and ``positions``), with the kernel's one rounding per entry,
    so the result is bitwise equal to ``fastpe.add_to`` on the whole array.
    ``x`` is never modified: each task adds into a copy of its block.

    Parameters
    ----------
    x : dask.array.Array, shape (..., seq_len, d_model), float32 or float64
        Chunked along any axes.  Full-width blocks (``d_model`` in one chunk) are
        the fast path; a block holding only some columns is computed on a
        full-width temporary, ``d_model / block_columns`` times the kernel work.
    offset : int or array_like of int, keyword-only
        One position offset for all sequences, or one per sequence: a NumPy or
        Dask array broadcastable to ``x.shape[:-2]``, chunked alongside ``x``.
    positions : array_like of int or float, optional, keyword-only
        Explicit positions, a NumPy or Dask array broadcastable to
        ``x.shape[:-1]``, chunked alongside ``x``; integer positions are added
        to ``offset``, float positions need ``offset=0``.
    scale, base, layout, convention, correctly_rounded
        As in :func:`fastpe.add_to` (each entry is its own, so the blocks give
        the whole call's bits with correct rounding too).
    num_threads : int or None, keyword-only
        OpenMP threads per task; 1 by default (see :func:`sinusoidal`).

    Returns
    -------
    dask.array.Array
        Lazy, same shape, dtype and chunks as ``x``.

    Notes
    -----
    Everything NumPy is checked here, as the single-process call would; the
    range of positions held in Dask arrays is only known when the tasks run,
    where an out-of-range position raises fastpe's ValueError.

    Examples
    --------
    >>> import dask.array as da, fastpe, fastpe.dask, numpy as np
    >>> x = da.zeros((4, 1000, 64), dtype=np.float32, chunks=(2, 300, 64))
    >>> y = fastpe.dask.add_to(x, offset=np.array([0, 5, 10, 15]), scale=8.0)
    >>> want = fastpe.add_to(np.zeros((4, 1000, 64), np.float32),
    ...                      offset=[0, 5, 10, 15], scale=8.0)
    >>> bool(np.array_equal(y.compute(), want))
    True
    """
    da = _dask_array()
    from dask.base import tokenize

    if not isinstance(x, da.Array):
        raise TypeError(
            f"x must be a dask.array.Array, got {type(x).__name__} "
            "(use fastpe.add_to for NumPy arrays, or wrap with dask.array.from_array)"
        )
    if x.ndim < 2:
        raise ValueError(f"x must have shape (..., seq_len, d_model), got shape {x.shape}")
    if any(np.isnan(n) for n in x.shape):
        raise ValueError(
            f"x must have known chunk sizes, got shape {x.shape} "
            "(call x.compute_chunk_sizes() first)"
        )
    d_model = x.shape[-1]
    if d_model < 1:
        raise ValueError("x's last axis (d_model) must not be empty")
    xdt = np.dtype(x.dtype)
    if xdt not in (np.dtype(np.float32), np.dtype(np.float64)) or not xdt.isnative:
        raise TypeError(f"x must have dtype float32 or float64 (native byte order), got {xdt}")
    conv = _api._convention(convention, base, layout)
    enc = _api._encoder(convention, base, layout, d_model)
    as_num_threads(num_threads)
    scale = as_finite(scale, "scale")
    accurate = as_bool(correctly_rounded, "correctly_rounded")
    batch = x.shape[:-2]

    def convert(values: Any, name: str, kinds: str) -> tuple[Any, float | None]:
        if not isinstance(values, da.Array):
            return _api._numpy_positions(values, name, kinds)
        if values.dtype.kind not in kinds + "u":
            want = "integers" if kinds == "i" else "integers or real numbers"
            raise TypeError(f"{name} must be {want}, got dtype {values.dtype}")
        return values.astype(np.int64 if values.dtype.kind in "iu" else np.float64), None

    # Checked as fastpe.add_to checks them; the range of values held in Dask
    # arrays is checked by the tasks.  Arrays travel as Dask arrays of x's ndim.
    where = _api._offset_positions(
        offset, positions, x.shape, enc, convert, array_types=(np.ndarray, da.Array)
    )
    offs = pos = None
    if where.offset is not None:
        offs = _lazy_like(
            where.offset[..., None, None], (*batch, 1, 1), (*x.chunks[:-2], (1,), (1,)), da
        )
    if where.positions is not None:
        pos = _lazy_like(
            where.positions[..., None], (*x.shape[:-1], 1), (*x.chunks[:-1], (1,)), da
        )
    off_scalar = where.off_scalar

    kwargs = dict(
        scale=scale,
        base=base,
        layout=layout,
        num_threads=num_threads,
        convention=convention,
        correctly_rounded=accurate,
    )
    name = "fastpe-add-" + tokenize(x, offs, pos, off_scalar, scale, conv, num_threads, accurate)
    args = [x, offs, pos]
    return da.map_blocks(
        _add_block,
        *args,
        dtype=x.dtype,
        meta=np.empty((0,) * x.ndim, xdt),
        name=name,
        offset=off_scalar,
        d_model=d_model,
        kwargs=kwargs,
    )
