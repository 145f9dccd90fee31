"""The array arguments of the RoPE functions: positions, q and k, and the caches.

Positions as int64 ids or float64 coordinates, q and k as views the kernel rotates
in place, the refusal of outputs that overlap, and the writing of a [sin | cos]
table into cos and sin caches.  Shared by rope_cache, apply_rope, the multi-axis
and the per-head paths; it knows nothing of the frequency rules.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from . import kernel as _kernel
from ._api import _as_positions
from ._validate import (
    SUPPORTED,
    as_int,
    as_out_array,
    check_out_dtype,
    check_table_size,
    dtype_name,
    is_bfloat16,
    is_output_dtype,
    kernel_view,
    writable_out,
)


def _kernel_pair(views: list[Any]) -> tuple[Any, bool, Any, bool] | None:
    """The kernel's views of q and k for one rotation call, with their bfloat16
    flags: ``(x, x_bf16, other, other_bf16)``, ``other`` None when there is one;
    an empty view is left out (k then takes q's place), None when all are empty."""
    parts = [kernel_view(v) for v in views if v.size]
    if not parts:
        return None
    other, other_bf16 = parts[1] if len(parts) > 1 else (None, False)
    return parts[0][0], parts[0][1], other, other_bf16


def _write_caches(
    shape: tuple[int, ...],
    nf: int,
    attention: float,
    fill: Any,
    layout: str,
    explicit: np.dtype | None,
    out: Any,
    accurate: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """rope_cache's caches of ``shape`` tokens: ``fill(view, bfloat16)`` writes their
    [sin | cos] rows of nf frequencies into a C-contiguous table, which is then
    scaled by the attention factor and laid out into new arrays or ``out``
    (``accurate``: correctly_rounded, the fill's rows already scaled)."""
    full = (*shape, 2 * nf)
    if out is None:
        dt = explicit if explicit is not None else np.dtype(np.float32)
        check_table_size(math.prod(shape), 2 * nf, 8, working_copies=3)  # + the [sin | cos] table
        cos, sin = np.empty(full, dt), np.empty(full, dt)
    else:
        if not isinstance(out, tuple) or len(out) != 2:
            raise TypeError("out must be a (cos, sin) pair of arrays")
        cos, sin = (writable_out(o) for o in out)
        _kernel.check_out(kernel_view(cos)[0], kernel_view(sin)[0], full)
        cos, sin = (check_out_dtype(o, explicit) for o in (cos, sin))
        if cos.dtype != sin.dtype:
            raise TypeError(
                f"out's cos and sin must have one dtype, got {cos.dtype} and {sin.dtype}"
            )
        check_table_size(math.prod(shape), 2 * nf, 8, working_copies=1)
    # [sin | cos] of the nf frequencies, each entry rounded once into the table's
    # dtype (float64 when the attention factor is still to be applied; correctly
    # rounded rows come with it applied)
    dt = cos.dtype if attention == 1.0 or accurate else np.dtype(np.float64)
    table = np.empty((math.prod(shape), 2 * nf), dt)
    if table.shape[0]:
        fill(*kernel_view(table))
    if attention != 1.0 and not accurate:
        table *= attention
        if cos.dtype.itemsize == 2:  # rounded once (NumPy's bfloat16 cast goes through float32)
            half = np.empty(table.shape, cos.dtype)
            bits = half.view(np.uint16).reshape(-1)
            _kernel.round_to_half(table.reshape(-1), bits, is_bfloat16(cos.dtype))
            table = half
    s, c = table[:, :nf].reshape((*shape, nf)), table[:, nf:].reshape((*shape, nf))
    # (an attention factor beyond the dtype's range gives inf, the rounding of the value)
    with np.errstate(over="ignore"):
        for dst, src in ((cos, c), (sin, s)):
            if layout == "half":
                dst[..., :nf] = src
                dst[..., nf:] = src
            else:
                dst[..., 0::2] = src
                dst[..., 1::2] = src
    return (cos, sin) if out is None else out


def _as_seq(seq_len: Any, offset: Any) -> tuple[int, int]:
    """rope_cache's ``seq_len`` and ``offset`` as ints: converted here, their ranges
    checked by the library (kernel.rope_check_seq, the small-call path's check too)."""
    seq_len = as_int(seq_len, "seq_len")
    offset = as_int(offset, "offset")
    _kernel.rope_check_seq(seq_len, offset)
    return seq_len, offset


def _as_rope_positions(positions: Any) -> np.ndarray:
    """RoPE positions: integer ids as int64 (see _as_position_ids), or a non-empty
    float array as C-contiguous float64 (fractional grids)."""
    if positions is not None and not isinstance(positions, np.ma.MaskedArray):
        try:
            arr = np.asarray(positions)
        except Exception:  # ragged nested lists: explained by _as_position_ids
            arr = None
        if arr is not None and arr.dtype.kind == "f" and arr.size:
            # (NaN and inf: the library's check of the positions refuses them)
            real = _as_positions(arr, "positions", check_finite=False)
            # (np.ascontiguousarray would make a 0-d position 1-d)
            return real if real.flags.c_contiguous else np.ascontiguousarray(real)
    return _as_position_ids(positions)


def _as_position_ids(positions: Any, name: str = "positions") -> np.ndarray:
    """Integer position ids (or offsets: ``name``) as a C-contiguous int64 array
    (RoPE positions are token indices)."""
    if positions is None:
        raise TypeError(f"{name} must be an int or an array of integers, got None")
    if isinstance(positions, np.ma.MaskedArray):
        raise TypeError(f"{name} must not be a masked array (its mask would be ignored)")
    try:
        arr = np.asarray(positions)
    except Exception as exc:  # ragged nested lists
        raise TypeError(f"{name} must be an array of integers ({exc})") from None
    if arr.dtype.kind not in "iu" and not (arr.dtype.kind == "f" and arr.size == 0):
        raise TypeError(f"{name} must be integers, got dtype {arr.dtype}")
    # (the range is the library's token check; only what int64 cannot hold is refused
    # here, as the conversion would wrap it)
    if arr.dtype.kind == "u" and arr.size and int(arr.max()) > 2**63 - 1:
        raise ValueError(f"{name} must stay within +-2**62, got {int(arr.max())}")
    return arr.astype(np.int64, order="C", copy=False)  # (0-d stays 0-d)


def _unaliased(arr: np.ndarray, outputs: list[np.ndarray]) -> np.ndarray:
    """``arr`` (an input read while the outputs are written), copied when it may
    share memory with any of them: q is rotated before k's angles are computed."""
    if any(np.may_share_memory(arr, o) for o in outputs):
        return arr.copy()
    return arr


def _rope_views(q: Any, k: Any, head_dim: Any, seq_axis: Any) -> tuple:
    """(q and k as checked ndarray views, head_dim, sequence axis, its length, batch).
    The conversions are made here; the sizes, strides, overlap, head_dim and
    sequence axis are checked by the library (kernel.rope_check_arrays)."""
    views = [_rope_array(q, "q")] + ([] if k is None else [_rope_array(k, "k")])
    if head_dim is not None:
        head_dim = as_int(head_dim, "head_dim")
    seq_axis = as_int(seq_axis, "seq_axis")
    head_dim, sa = _kernel.rope_check_arrays(
        kernel_view(views[0])[0],
        None if k is None else kernel_view(views[1])[0],
        head_dim,
        seq_axis,
    )
    qv = views[0]
    seq = qv.shape[sa]
    batch = qv.shape[0] if sa != 0 else 1
    return views, head_dim, sa, seq, batch


def _token_positions(
    views: list[np.ndarray], seq: int, batch: int, offset: Any, positions: Any
) -> tuple[int, np.ndarray | None, np.ndarray | None, int, int]:
    """Each token's position, ``off_scalar`` or ``offsets[b]``, plus ``pos[b or 0, s]``
    or ``s``: (off_scalar, offsets, pos, lo, hi), hi < lo when there are none.  The
    shapes and the offsets' bound are checked by the library (kernel.rope_check_tokens)."""
    off_scalar, offsets, pos = 0, None, None
    if positions is not None:
        if not (np.ndim(offset) == 0 and offset == 0):
            raise ValueError("offset applies without positions; add it to positions instead")
        pos = _unaliased(_as_rope_positions(positions), views)
        lo, hi = _kernel.rope_check_tokens(pos, None, batch, seq)
        if pos.ndim == 1:
            pos = pos[None]
    else:
        off = _unaliased(_as_position_ids(offset, "offset"), views)
        lo, hi = _kernel.rope_check_tokens(None, off, batch, seq)
        if off.size == 1:
            off_scalar = int(off.reshape(-1)[0])
        elif off.size:
            offsets = off
    return off_scalar, offsets, pos, lo, hi


def _rope_array(x: Any, name: str) -> np.ndarray:
    """q or k as a writable ndarray of a rotated dtype, viewing the caller's memory."""
    if isinstance(x, np.ma.MaskedArray):
        raise TypeError(f"{name} must not be a masked array")
    try:
        v = as_out_array(x)
    except (TypeError, ValueError) as exc:
        raise type(exc)(str(exc).replace("out", name, 1)) from None
    if not is_output_dtype(v.dtype):
        raise TypeError(
            f"{name} must have dtype {SUPPORTED} (native byte order), got {dtype_name(v.dtype)}"
        )
    if not v.flags.writeable:
        raise ValueError(f"{name} must be writable (it is rotated in place)")
    return v
