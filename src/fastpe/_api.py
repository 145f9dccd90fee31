"""The public Python API of fastpe: validate, resolve defaults, allocate, call the kernel."""

from __future__ import annotations

import math
import platform
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import DTypeLike

from . import kernel as _kernel
from ._conventions import Convention, resolve
from ._validate import (
    INT64_MAX,
    INT64_MIN,
    LAYOUTS,
    as_base,
    as_bool,
    as_choice,
    as_float_dtype,
    as_int,
    as_layout,
    as_num_threads,
    as_real,
    check_out,
    check_table_size,
    kernel_view,
)
from ._version import __version__
from .typing import BuildInfo, Convention2DName, ConventionName, Layout, OutArrayT, _ArrayT

_DEFAULT_DTYPE = np.float32


def _convention(convention: Any, base: Any, layout: Any) -> Convention:
    """Resolve (convention, base, layout); base/layout are Vaswani's own knobs
    (a Convention checks its base)."""
    base = as_real(base, "base")
    layout = LAYOUTS[as_layout(layout)]
    return resolve(
        convention,
        base=base,
        layout=layout,
        base_default=(base == 10000.0),
        layout_default=(layout == "interleaved"),
    )


def _encoder(convention: Any, base: Any, layout: Any, d_model: int) -> _kernel.Encoder:
    """The compiled encoding of (convention, base, layout) at width ``d_model``
    (validated; ``d_model`` already is): from the cache the kernel's fast paths
    read, or resolved, compiled and kept there.  What it holds -- frequencies and
    rotation table -- is most of the cost of a small call, and depends only on
    these arguments, the way FFT libraries keep their twiddle factors."""
    key = _kernel.encoder_key(convention, as_real(base, "base"), layout, d_model)
    enc = _kernel.encoders.get(key) if key is not None else None
    if enc is None:
        conv = _convention(convention, base, layout)
        enc = _kernel.remember(key, _kernel.Encoder(conv, d_model))
    return enc


def _int64_offset(offset: int) -> int:
    """An offset beyond int64 as the nearest int64: beyond any position the
    library accepts, so its range check refuses it like any other too large."""
    return min(max(offset, INT64_MIN), INT64_MAX)


def _table_extent(offset: int, seq_len: int) -> int:
    """Largest |position| of the rows offset .. offset+seq_len-1."""
    return max(abs(offset), abs(offset + max(seq_len - 1, 0)))


def _check_range(enc: _kernel.Encoder, largest: float, name: str) -> None:
    """The library's range check of positions up to ``largest`` (named ``name``):
    for the Dask front end, which checks before its tasks run (the public
    functions meet the same check in the fill)."""
    offset = _int64_offset(int(largest)) if math.isfinite(largest) else INT64_MAX
    enc.fill_rows(None, nseq=1, seq_len=1, offset=offset, errctx=({"offset": name}, None, "x"))


def sinusoidal(
    seq_len: int,
    d_model: int,
    *,
    base: float = 10000.0,
    offset: int = 0,
    dtype: DTypeLike | None = None,
    layout: Layout = "interleaved",
    out: OutArrayT | None = None,
    num_threads: int | None = None,
    convention: ConventionName | Convention = "vaswani",
    correctly_rounded: bool = False,
) -> OutArrayT:
    """Sinusoidal positional-encoding table of "Attention Is All You Need".

    Row ``r`` encodes position ``k = offset + r``; with ``w_i = base**(-2*i/d_model)``::

        layout="interleaved":  P[r, 2i] = sin(k*w_i),  P[r, 2i+1] = cos(k*w_i)
        layout="split":        P[r, i]  = sin(k*w_i),  P[r, ns+i]  = cos(k*w_i),
                                ns = ceil(d_model/2)

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
    dtype : float32, float64, float16 or "bfloat16", optional, keyword-only
        Output dtype.  ``None`` (the default) means float32 (what ML pipelines
        feed to models), or ``out.dtype`` when ``out`` is given; an explicit
        dtype must match ``out.dtype``.  float16 and bfloat16 entries are the
        float64 result rounded once; "bfloat16" arrays are ml_dtypes' type
        (``pip install 'fastpe[bfloat16]'``).
    layout : {"interleaved", "split"}, keyword-only
    out : ndarray, optional, keyword-only
        Array of shape ``(seq_len, d_model)``, dtype float16/bfloat16/float32/
        float64, writable,
        with a contiguous last axis; its rows may be strided (e.g. a column slice
        ``emb[:, 64:128]`` of a wider matrix).  Filled in place and returned.
    num_threads : int, optional, keyword-only
        OpenMP threads for this call.  ``None`` follows the OpenMP default
        (``OMP_NUM_THREADS``, ``threadpoolctl.threadpool_limits``).  Capped at
        the OpenMP thread limit and at the cores this process may use
        (``build_info()["usable_cpus"]``: affinity mask, cgroup CPU quota), so a
        huge value is not an error and never starts more threads than cores;
        always 1 in a process forked after fastpe was imported (see
        ``build_info()["forked_child"]``).
    convention : str or Convention, keyword-only
        ``"vaswani"`` (default), ``"tensor2tensor"``, ``"fairseq"``,
        ``"diffusers"``, ``"gptj"``, or a :class:`Convention` with custom knobs.
        ``base`` and ``layout`` only apply to ``"vaswani"``.
    correctly_rounded : bool, keyword-only
        Entries correctly rounded, in every dtype: each is the exact value
        (sin/cos of position x frequency, the frequency the convention's
        formula) rounded once to the output's dtype (to nearest even,
        subnormals included), entries near zero included (the default float64
        path is within ~5e-16 absolute, which near zero can be many ulps; the
        default float32 one rounds a rare entry beside a midpoint the wrong
        way).  A proved error bound decides nearly every entry; the few it
        cannot decide are evaluated again in 256-bit arithmetic
        (docs/accuracy.md).  float64: 0.015 % of entries at positions beyond
        2^20, none in tables from 0, and ~6-10x the default time for a table,
        ~15-20x for a small call; float32: about one entry in 4 million, ~2.5x
        the default time for a table, ~1.3x for one row; float16 and bfloat16
        ~3-3.5x for a table (docs/performance.md).

    Returns
    -------
    ndarray
        The ``(seq_len, d_model)`` table (``out`` itself when given).

    Raises
    ------
    KeyboardInterrupt
        Ctrl-C stops a long fill within milliseconds; ``out`` then holds the
        encoding in the rows written so far and its old values in the others.
    MemoryError
        The table and the kernel's working memory exceed what this process may
        use (RAM, cgroup memory limit, ``ulimit -v``), checked before any work.

    Notes
    -----
    Every entry is within ~5e-16 of the exact value in float64 (the angle is
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
    >>> import torch                                        # doctest: +SKIP
    >>> t = torch.empty(8, 128)                             # doctest: +SKIP
    >>> fastpe.sinusoidal(8, 128, out=t) is t               # doctest: +SKIP
    True
    """
    done = _kernel.table(
        seq_len,
        d_model,
        base,
        offset,
        dtype,
        layout,
        out,
        num_threads,
        convention,
        correctly_rounded,
    )
    if done is not None:  # the common argument types, already cached: filled
        return done
    accurate = as_bool(correctly_rounded, "correctly_rounded")
    # Python integers to int64 here; their values are the library's to check
    seq_len = as_int(seq_len, "seq_len", minimum=INT64_MIN, maximum=INT64_MAX)
    d_model = as_int(d_model, "d_model", minimum=INT64_MIN, maximum=INT64_MAX)
    offset = _int64_offset(as_int(offset, "offset"))
    _kernel.check_sizes(1, seq_len, d_model, _kernel.TABLE_ERRORS[0])
    enc = _encoder(convention, base, layout, d_model)
    nthreads = as_num_threads(num_threads)
    explicit = None if dtype is None else as_float_dtype(dtype, bits_ok=out is not None)
    shape = (seq_len, d_model)
    return _fill_table(enc, out, shape, explicit, nthreads, accurate, _kernel.TABLE_ERRORS, offset)


def _fill_table(
    enc: Any,
    out: Any,
    shape: tuple[int, ...],
    explicit: np.dtype | None,
    nthreads: int,
    accurate: bool,
    errctx: Any,
    offset: int = 0,
    positions: np.ndarray | None = None,
) -> Any:
    """sinusoidal's and sinusoidal_at's table, ``shape`` (..., d_model), into a new
    array or ``out`` (returned): the rows of ``offset``, ``offset + 1``, ... or of
    the ``positions`` (one a row, in C order)."""
    rows = math.prod(shape[:-1])
    fresh = out is None
    out, view = _output(out, shape, explicit, enc.scratch_nbytes(rows, nthreads, False))
    # (_rows only where there is more than one row axis: it costs microseconds)
    view, bf16 = kernel_view(_rows(view) if view.ndim != 2 else view)
    flat = None if positions is None else np.ascontiguousarray(positions).reshape(1, -1)
    enc.fill_rows(
        view,
        nseq=1,
        seq_len=rows,
        offset=offset,
        positions=flat,
        num_threads=nthreads,
        fresh=fresh,
        bfloat16=bf16,
        errctx=errctx,
        accurate=accurate,
    )
    return out


def _output(
    out: Any, shape: tuple[int, ...], explicit: np.dtype | None, scratch: int
) -> tuple[Any, np.ndarray]:
    """(what to return, an ndarray view to fill): a new array (float32 unless
    ``explicit``), or the caller's ``out`` and a validated zero-copy view of it
    (the caller gets back the object it passed: a tensor stays a tensor).
    ``scratch``: the kernel's working memory for the fill, counted in the size check."""
    rows = math.prod(shape[:-1])
    if out is None:
        dt = explicit if explicit is not None else np.dtype(_DEFAULT_DTYPE)
        check_table_size(rows, shape[-1], dt.itemsize, scratch=scratch)
        # np.empty, not zeros: the kernel writes every entry, and its threads
        # touching the pages first spreads the page faults over the cores.
        new = np.empty(shape, dtype=dt)
        return new, new
    view = check_out(out, shape, explicit)
    check_table_size(0, shape[-1], view.dtype.itemsize, scratch=scratch)
    return out, view


def _rows(a: np.ndarray) -> np.ndarray:
    """``a`` viewed as 2-D rows (N, d) without a copy; ValueError if impossible."""
    view = a.reshape((int(np.prod(a.shape[:-1])), a.shape[-1]))
    # reshape copies when no view exists, and filling a copy would leave ``a``
    # unchanged (setting .shape, which raised instead, is deprecated in NumPy 2.5)
    if view.size and not np.may_share_memory(view, a):
        raise ValueError(
            "the array's rows must be laid out at one stride (C-contiguous rows, e.g. a "
            f"contiguous array or a column slice of one); got strides {a.strides}"
        )
    return view


def _as_positions(positions: Any, name: str, *, check_finite: bool = True) -> np.ndarray:
    """Integer positions as int64, real ones as float64 (exact conversions only);
    ``check_finite=False`` leaves NaN and inf to the library's check in the fill."""
    if isinstance(positions, np.ma.MaskedArray):
        raise TypeError(
            f"{name} must not be a masked array (its mask would be ignored); "
            f"pass {name}.compressed() or {name}.filled(value)"
        )
    try:
        arr = np.asarray(positions)
    except Exception as exc:  # e.g. ragged nested lists
        raise TypeError(f"{name} must be an array of integers or floats ({exc})") from None
    kind = arr.dtype.kind
    if kind in "iu":
        if arr.size and kind == "u" and arr.max() > np.iinfo(np.int64).max:
            raise ValueError(f"{name} must fit in int64, got a maximum of {arr.max()}")
        arr = arr.astype(np.int64, copy=False).astype(
            np.dtype(np.int64).newbyteorder("="), copy=False
        )
        # Aligned: the kernel reads int64/float64 buffers (NumPy exports an unaligned
        # one as "=q", e.g. an array Dask's network layer rebuilt from a message frame).
        return np.require(arr, requirements="A")
    if kind == "f":
        if arr.dtype.itemsize > 8:
            # long double: taken only where float64 holds every value exactly
            wide = arr
            arr = arr.astype(np.float64)
            if arr.size and not np.array_equal(arr, wide, equal_nan=True):
                raise ValueError(
                    f"{name} of dtype {wide.dtype} must hold values that float64 represents "
                    "exactly (positions are computed from their float64 value); round them "
                    "to float64 first"
                )
        arr = arr.astype(np.float64, copy=False)
        arr = arr.astype(np.dtype(np.float64).newbyteorder("="), copy=False)
        if check_finite and arr.size and not np.all(np.isfinite(arr)):
            raise ValueError(f"{name} must be finite (got NaN or inf)")
        return np.require(arr, requirements="A")
    raise TypeError(f"{name} must be integers or real numbers, got dtype {arr.dtype}")


def _largest(a: np.ndarray) -> float:
    return float(np.max(np.abs(a))) if a.size else 0.0


def sinusoidal_at(
    positions: Any,
    d_model: int,
    *,
    base: float = 10000.0,
    dtype: DTypeLike | None = None,
    layout: Layout = "interleaved",
    out: OutArrayT | None = None,
    num_threads: int | None = None,
    convention: ConventionName | Convention = "vaswani",
    correctly_rounded: bool = False,
) -> OutArrayT:
    """Encodings of arbitrary positions: shape ``(*positions.shape, d_model)``.

    Parameters
    ----------
    positions : array_like of int or float
        Any shape (a scalar gives one ``(d_model,)`` vector).  Integer positions
        give bitwise the rows :func:`sinusoidal` gives; float positions (e.g.
        diffusion timesteps) are exact too: the product ``k * w_i`` is formed in
        double-double, so the only error beyond ~4e-16 is the one already in the
        float64 value of the position.  NaN/inf are refused, and so are
        masked arrays (the mask would be ignored) and long-double positions
        that float64 cannot hold exactly.  Positions may share memory with
        ``out`` (they are then copied first, as NumPy's ufuncs do).
    d_model : int
    base, dtype, layout, out, num_threads, convention, correctly_rounded
        As in :func:`sinusoidal`; ``out`` must have shape ``(*positions.shape, d_model)``.

    Examples
    --------
    >>> import fastpe, numpy as np
    >>> t = np.array([0.0, 0.5, 999.0])              # diffusion timesteps
    >>> fastpe.sinusoidal_at(t, 8, convention="diffusers").shape
    (3, 8)
    >>> P = fastpe.sinusoidal(10, 16)
    >>> bool(np.array_equal(fastpe.sinusoidal_at([3, 7], 16), P[[3, 7]]))
    True
    """
    done = _kernel.table_at(
        positions, d_model, base, dtype, layout, out, num_threads, convention, correctly_rounded
    )
    if done is not None:  # the common argument types, already cached: filled
        return done
    accurate = as_bool(correctly_rounded, "correctly_rounded")
    d_model = as_int(d_model, "d_model", minimum=INT64_MIN, maximum=INT64_MAX)
    _kernel.check_sizes(1, 0, d_model)
    enc = _encoder(convention, base, layout, d_model)
    nthreads = as_num_threads(num_threads)
    explicit = None if dtype is None else as_float_dtype(dtype, bits_ok=out is not None)
    pos = _as_positions(positions, "positions", check_finite=False)
    shape = (*pos.shape, d_model)
    errctx = (None, pos.shape, "positions")
    return _fill_table(enc, out, shape, explicit, nthreads, accurate, errctx, positions=pos)


def add_to(
    x: _ArrayT,
    *,
    offset: Any = 0,
    positions: Any = None,
    scale: float = 1.0,
    base: float = 10000.0,
    layout: Layout = "interleaved",
    num_threads: int | None = None,
    convention: ConventionName | Convention = "vaswani",
    correctly_rounded: bool = False,
) -> _ArrayT:
    """Add the encoding to embeddings in place: ``x = x * scale + PE``; returns ``x``.

    One pass over ``x``: no temporary table, no temporary the size of ``x``.

    Parameters
    ----------
    x : ndarray, shape (..., seq_len, d_model), float16, bfloat16, float32 or float64
        (16-bit ``x``: ``x*scale + PE`` computed in double and rounded once).
        Writable, with rows at one stride (C-contiguous rows; a column slice of a
        contiguous array is fine).  Each leading index is one sequence.
    offset : int or array_like of int, keyword-only
        Position of each sequence's first token: one int for all, or one per
        sequence (broadcastable to ``x.shape[:-2]``; e.g. KV-cache lengths).
    positions : array_like of int or float, optional, keyword-only
        Explicit positions, broadcastable to ``x.shape[:-1]`` (packed sequences,
        left padding, fractional timesteps).  Integer positions are added to
        ``offset``; float positions need ``offset=0``.
    scale : float, keyword-only
        Multiplies ``x`` first (e.g. ``sqrt(d_model)`` as in the paper).
    base, layout, num_threads, convention
        As in :func:`sinusoidal`.  With ``convention="fairseq"`` rows at
        ``padding_idx`` get no encoding (see :func:`fairseq_positions`).
    correctly_rounded : bool, keyword-only
        Every entry of the result is the exact ``x*scale + PE`` (``x`` and
        ``scale`` as given, ``PE`` the exact sine or cosine of the convention's
        real frequency) rounded once to ``x``'s dtype, for every dtype.  An exact
        sum of zero is ``+0.0`` (``-0.0`` only where ``x*scale`` is ``-0.0`` and no
        encoding goes: a padding row, a padded column).  It costs 5-12x the
        default add (the encoding in double-double, each entry tested, the rare
        undecided one computed exactly); see docs/accuracy.md.  Default ``False``:
        ``x*scale + PE`` in double (``PE`` within a few ulps), rounded once.

    ``offset`` and ``positions`` may share memory with ``x`` (they are copied
    first).  If the call is interrupted (Ctrl-C), the rows of ``x`` processed so
    far hold ``x*scale + PE`` and the others are unchanged.

    Examples
    --------
    >>> import fastpe, numpy as np
    >>> x = np.zeros((2, 5, 8), np.float32)           # (batch, seq_len, d_model)
    >>> _ = fastpe.add_to(x, offset=[0, 3])            # second sequence continues at 3
    >>> bool(np.array_equal(x[1], fastpe.sinusoidal(5, 8, offset=3)))
    True
    """
    done = _kernel.add(
        x, offset, positions, scale, base, layout, num_threads, convention, correctly_rounded
    )
    if done is not None:  # the common argument types, already cached: added
        return done
    accurate = as_bool(correctly_rounded, "correctly_rounded")
    if not isinstance(x, np.ndarray):
        raise TypeError(f"x must be a numpy.ndarray, got {type(x).__name__}")
    if isinstance(x, np.ma.MaskedArray):
        raise TypeError(
            "x must not be a masked array: the encoding would be added under "
            "the mask too; pass x.data (or x.filled(...)) explicitly"
        )
    if x.ndim < 2:
        raise ValueError(f"x must have shape (..., seq_len, d_model), got shape {x.shape}")
    seq_len, d_model = x.shape[-2], x.shape[-1]
    _kernel.check_sizes(1, seq_len, d_model, _kernel.ADD_ERRORS)
    check_out(x, x.shape, None)
    enc = _encoder(convention, base, layout, d_model)
    nthreads = as_num_threads(num_threads)
    scale = as_real(scale, "scale")  # (beyond the float range: inf, which the library refuses)
    batch = x.shape[:-2]
    nseq = int(np.prod(batch, dtype=np.int64))
    rows, bf16 = kernel_view(_rows(x))
    # no early return for an empty x: offset and positions are checked all the same

    where = _offset_positions(offset, positions, x.shape, None, _unchecked_positions)
    offsets, pos2 = _where_rows(where, x.shape)
    check_table_size(
        0, d_model, x.dtype.itemsize, scratch=enc.scratch_nbytes(rows.shape[0], nthreads, True)
    )
    enc.fill_rows(
        rows,
        nseq=nseq,
        seq_len=seq_len,
        offset=_int64_offset(where.off_scalar),
        offsets=offsets,
        positions=pos2,
        add=True,
        scale=scale,
        num_threads=nthreads,
        bfloat16=bf16,
        errctx=(_kernel.ADD_ERRORS, x.shape[:-1], "x"),
        accurate=accurate,
    )
    return x


class _Where(NamedTuple):
    """add_to's ``offset`` and ``positions``, checked but not broadcast."""

    off_scalar: int
    offset: Any  # integer array broadcastable to x.shape[:-2], or None
    positions: Any  # int64/float64 array broadcastable to x.shape[:-1], or None
    largest: float | None  # the largest |position|; None when only known later


def _numpy_positions(
    values: Any, name: str, kinds: str, *, check_finite: bool = True
) -> tuple[np.ndarray, float | None]:
    arr = _as_positions(values, name, check_finite=check_finite)
    if name == "offset" and arr.size == 0:  # offset=[] for an empty batch: NumPy makes it float64
        arr = arr.astype(np.int64)
    if arr.dtype.kind not in kinds:  # (_as_positions refused all but integers and reals)
        raise TypeError(f"{name} must be integers, got dtype {np.asarray(values).dtype}")
    return arr, _largest(arr) if check_finite else None


def _unchecked_positions(values: Any, name: str, kinds: str) -> tuple[np.ndarray, float | None]:
    """add_to's conversion: the values are the library's to check, in the fill."""
    return _numpy_positions(values, name, kinds, check_finite=False)


def _offset_positions(
    offset: Any,
    positions: Any,
    shape: tuple[int, ...],
    enc: _kernel.Encoder | None,
    convert: Callable[[Any, str, str], tuple[Any, float | None]] = _numpy_positions,
    array_types: tuple[type, ...] = (np.ndarray,),
) -> _Where:
    """Check add_to's ``offset`` and ``positions`` for an ``x`` of ``shape``.

    ``convert(values, name, kinds)`` turns a non-scalar argument into an array
    (int64 for kinds "i", int64 or float64 for "if") and its largest |value|,
    or None where that is not known yet (the Dask front end's lazy arrays); an
    ``offset`` of one of ``array_types`` goes to ``convert`` even when 0-d.
    With ``enc``, the range is checked here whenever every part of it is known
    (the Dask front end, before its tasks run); add_to passes None: the
    library checks every position in the fill.
    """
    batch, seq_len = shape[:-2], shape[-2]
    off_scalar, off, pos = 0, None, None
    largest: float | None
    if np.ndim(offset) == 0 and not isinstance(offset, array_types):
        off_scalar = as_int(offset, "offset")
        largest = min(abs(off_scalar), 2**64)  # (beyond any range; a float sum must not overflow)
    else:
        off, largest = convert(offset, "offset", "i")
        if not _broadcasts(off.shape, batch):
            raise ValueError(
                f"offset of shape {off.shape} does not broadcast to the sequences' shape {batch}"
            )
    if positions is None:
        largest = None if largest is None else largest + seq_len
    else:
        pos, top = convert(positions, "positions", "if")
        if pos.dtype.kind == "f" and (off is not None or off_scalar != 0):
            raise ValueError(
                "float positions cannot be combined with offset; add the offset to the positions"
            )
        if not _broadcasts(pos.shape, shape[:-1]):
            raise ValueError(
                f"positions of shape {pos.shape} do not broadcast to x.shape[:-1] = {shape[:-1]}"
            )
        largest = None if largest is None or top is None else largest + top
    where = _Where(off_scalar, off, pos, largest)
    if enc is not None and all(a is None or isinstance(a, np.ndarray) for a in (off, pos)):
        # every value known (the Dask front end's NumPy arguments): the library's
        # check of add_to's rows, as the fill will run it
        offsets, pos2 = _where_rows(where, shape)
        enc.fill_rows(
            None,
            nseq=int(np.prod(batch, dtype=np.int64)),
            seq_len=seq_len,
            offset=_int64_offset(off_scalar),
            offsets=offsets,
            positions=pos2,
            errctx=(_kernel.ADD_ERRORS, shape[:-1], "x"),
        )
    return where


def _where_rows(where: _Where, shape: tuple[int, ...]) -> tuple[Any, Any]:
    """(offsets, positions) of add_to's rows for an ``x`` of ``shape``: one offset
    per sequence (nseq,), positions (nseq, seq_len), or None."""
    batch, seq_len = shape[:-2], shape[-2]
    nseq = int(np.prod(batch, dtype=np.int64))
    offsets = None
    if where.offset is not None:
        offsets = np.ascontiguousarray(np.broadcast_to(where.offset, batch)).reshape(-1)
    pos2 = None
    if where.positions is not None:
        # a view when the broadcast allows, else a copy
        pos2 = np.broadcast_to(where.positions, shape[:-1]).reshape(nseq, seq_len)
    return offsets, pos2


def _broadcasts(shape: tuple[int, ...], target: tuple[int, ...]) -> bool:
    """Whether an array of ``shape`` broadcasts *to* ``target`` (np.broadcast_to's rule)."""
    if len(shape) > len(target):
        return False
    return all(h in (1, t) for h, t in zip(shape[::-1], target[::-1], strict=False))


def fairseq_positions(tokens: Any, padding_idx: int = 1) -> np.ndarray:
    """fairseq's ``make_positions``: positions of a (batch, seq_len) token array.

    Real tokens get ``padding_idx + 1, padding_idx + 2, ...`` counting only
    non-padding tokens; padding tokens get ``padding_idx`` (whose encoding the
    fairseq convention makes all zeros).  Use with
    ``add_to(x, positions=fairseq_positions(tokens), convention="fairseq")``.
    """
    padding_idx = as_int(padding_idx, "padding_idx", minimum=INT64_MIN, maximum=INT64_MAX)
    tok = np.asarray(tokens)
    if tok.dtype.kind not in "iu":
        raise TypeError(f"tokens must be integers, got dtype {tok.dtype}")
    if tok.ndim < 1:
        raise ValueError("tokens must have at least one axis (..., seq_len), got a scalar")
    if padding_idx + tok.shape[-1] > INT64_MAX:  # the positions would wrap around
        raise ValueError(f"padding_idx + seq_len must fit in int64, got padding_idx={padding_idx}")
    mask = (tok != padding_idx).astype(np.int64)
    return np.cumsum(mask, axis=-1) * mask + padding_idx


def sinusoidal_2d(
    grid_h: int,
    grid_w: int,
    d_model: int,
    *,
    base: float = 10000.0,
    convention: Convention2DName = "mae",
    cls_token: bool = False,
    interleave_sin_cos: bool = False,
    reverse_coord: bool = False,
    dtype: DTypeLike | None = None,
    num_threads: int | None = None,
) -> np.ndarray:
    """2-D sin-cos position embedding of a ``grid_h x grid_w`` patch grid (ViT/MAE).

    Tokens are in row-major order (row ``h`` outer, column ``w`` inner); each
    coordinate gets a quarter-width frequency ladder ``base**(-k/(d_model/4))``.

    - ``convention="mae"``: MAE's ``get_2d_sincos_pos_embed`` -- columns
      ``[sin(w) | cos(w) | sin(h) | cos(h)]`` (its first half encodes the column
      coordinate); ``cls_token=True`` prepends a zero row.
    - ``convention="timm"``: timm's ``build_sincos2d_pos_embed`` --
      ``[sin(h) | sin(w) | cos(h) | cos(w)]``, or ``[sin(h) | cos(h) | sin(w) | cos(w)]``
      with ``interleave_sin_cos=True``; ``reverse_coord=True`` swaps the roles
      of the two grid axes (and so the token order), as timm does.  (timm has
      no cls row; ``cls_token=True`` prepends a zero row here too.)

    ``d_model`` must be a multiple of 4.  Returns ``(cls_token + grid_h*grid_w, d_model)``.
    """
    grid_h = as_int(grid_h, "grid_h", minimum=0, maximum=INT64_MAX)
    grid_w = as_int(grid_w, "grid_w", minimum=0, maximum=INT64_MAX)
    d_model = as_int(d_model, "d_model", minimum=1, maximum=INT64_MAX)
    if d_model % 4:
        raise ValueError(f"d_model must be a multiple of 4 for a 2-D encoding, got {d_model}")
    convention = as_choice(convention, "convention", ("mae", "timm"))
    cls_token = as_bool(cls_token, "cls_token")
    interleave_sin_cos = as_bool(interleave_sin_cos, "interleave_sin_cos")
    reverse_coord = as_bool(reverse_coord, "reverse_coord")
    if convention == "mae" and (interleave_sin_cos or reverse_coord):
        raise ValueError(
            "interleave_sin_cos and reverse_coord are timm's options; use convention='timm'"
        )
    dt = np.dtype(_DEFAULT_DTYPE) if dtype is None else as_float_dtype(dtype)
    base = as_base(base)
    as_num_threads(num_threads)
    half, q = d_model // 2, d_model // 4
    n1, n2 = grid_h, grid_w
    if convention == "timm" and reverse_coord:
        n1, n2 = grid_w, grid_h
    extra = 1 if cls_token else 0
    check_table_size(n1 * n2 + extra, d_model, dt.itemsize)
    if n1 * n2 == 0:  # no per-axis tables for an empty grid (one axis may be huge)
        return np.zeros((extra, d_model), dtype=dt)
    # per-axis [sin | cos] tables of width d/2: frequencies base^(-2k/(d/2))
    # float64 tables rounded by the assignment below, or the 16-bit tables
    # themselves (rounded once by the kernel: NumPy's casts to bfloat16 go
    # through float32)
    tdt = dt if dt.itemsize == 2 else np.dtype(np.float64)
    t1 = sinusoidal(n1, half, base=base, layout="split", dtype=tdt, num_threads=num_threads)
    t2 = sinusoidal(n2, half, base=base, layout="split", dtype=tdt, num_threads=num_threads)
    out = np.zeros((extra + n1 * n2, d_model), dtype=dt)
    grid = out[extra:].reshape(n1, n2, d_model)
    if convention == "mae":
        grid[:, :, :half] = t2[np.newaxis, :, :]  # first half: the w coordinate
        grid[:, :, half:] = t1[:, np.newaxis, :]
    elif interleave_sin_cos:
        grid[:, :, :half] = t1[:, np.newaxis, :]
        grid[:, :, half:] = t2[np.newaxis, :, :]
    else:
        grid[:, :, 0:q] = t1[:, np.newaxis, :q]
        grid[:, :, q : 2 * q] = t2[np.newaxis, :, :q]
        grid[:, :, 2 * q : 3 * q] = t1[:, np.newaxis, q:]
        grid[:, :, 3 * q :] = t2[np.newaxis, :, q:]
    return out


# CPU features worth knowing about for this kernel (vector width, FMA), by
# architecture; the names are the kernel's /proc/cpuinfo spellings (x86 "flags",
# Arm "Features").
_X86_FEATURES = (
    "sse2",
    "sse4_1",
    "sse4_2",
    "avx",
    "avx2",
    "fma",
    "avx512f",
    "avx512dq",
    "avx512vl",
)
_ARM_FEATURES = ("neon", "asimd", "sve", "sve2")
_CPU_FEATURES = _X86_FEATURES + _ARM_FEATURES


def _features_of(machine: str) -> tuple[str, ...]:
    """The names of ``_CPU_FEATURES`` that a CPU of this ``platform.machine()`` can have."""
    m = machine.lower()
    if m in ("x86_64", "amd64", "x86", "i386", "i486", "i586", "i686"):
        return _X86_FEATURES
    if m.startswith(("aarch64", "arm")):
        return _ARM_FEATURES
    return ()


def _cpu_features(cpuinfo: str = "/proc/cpuinfo", machine: str | None = None) -> list[str]:
    """Interesting CPU feature flags of this machine, in ``_CPU_FEATURES`` order.

    Read from ``/proc/cpuinfo`` on Linux; an empty list elsewhere or when it is
    unreadable.  Only the names of this process's architecture count: under QEMU
    user emulation (aarch64 on an x86-64 host) ``/proc/cpuinfo`` is the host's,
    whose ``avx512f`` this code cannot use.  Informational: the kernel picks its
    code paths from the CPU's own CPUID at import (see ``streaming_stores`` in
    :func:`build_info`), not from this.
    """
    names = _features_of(platform.machine() if machine is None else machine)
    try:
        with open(cpuinfo, encoding="ascii", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip().lower() in ("flags", "features"):
                    present = set(value.split())
                    return [name for name in names if name in present]
    except OSError:
        pass
    return []


def build_info() -> BuildInfo:
    """How this fastpe was built and what it will use at run time.

    Returns
    -------
    dict
        ``version``; ``openmp`` (bool, built with OpenMP); ``openmp_version``
        (the ``_OPENMP`` date macro, 0 for a serial build); ``max_threads`` (what
        ``num_threads=None`` uses now: follows OMP_NUM_THREADS and threadpoolctl,
        at most ``usable_cpus``); ``usable_cpus`` (the cores this process may run
        on: its affinity mask and its cgroup's CPU quota; no call uses more threads);
        ``forked_child`` (True in a process forked from one that had imported
        fastpe: calls there run on one thread, because GNU libgomp's thread pool
        does not survive ``fork()``; ``max_threads`` is then 1);
        ``machine``; ``numpy`` (the NumPy version in use); ``cpu_features``
        (list of notable CPU flags such as ``avx2``, ``fma``, ``avx512f``,
        ``neon``/``asimd``, read from ``/proc/cpuinfo``; empty where unavailable);
        ``streaming_stores``: how fills into existing memory larger than a share of
        the last-level cache are written -- ``"avx512"`` (straight from registers
        with non-temporal stores), ``"sse2"`` (through a row buffer, streamed) or
        ``"plain"`` (ordinary stores).
    """
    openmp, omp_version = _kernel.openmp_info()
    return {
        "version": __version__,
        "openmp": openmp,
        "openmp_version": omp_version,
        "max_threads": int(_kernel.max_threads()),
        "usable_cpus": int(_kernel.usable_cpus()),
        "forked_child": _kernel.forked_child(),
        "machine": platform.machine(),
        "numpy": np.__version__,
        "cpu_features": _cpu_features(),
        "streaming_stores": _kernel.streaming_stores(),
    }
