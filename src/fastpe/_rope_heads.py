"""RoPE by angle tables built here: per-head frequencies, mixed axes, xPos.

Each token's [sin | cos] row is computed in float64 from exact angles (the
encodings of ``_rope_rules``), combined or scaled in float64 (angle addition for mixed
axes, xPos's ``zeta ** power``), and the rows of q and k are rotated by these
tables with one rounding per entry.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from . import kernel as _kernel
from ._rope_args import (
    _as_position_ids,
    _as_seq,
    _rope_views,
    _token_positions,
    _unaliased,
    _write_caches,
)
from ._rope_rules import (
    ROPE_LAYOUTS,
    SECTION_LAYOUTS,
    _angles,
    _as_frequencies,
    _per_axis_rules,
    _Rule,
)
from ._validate import (
    _is_torch_bfloat16,
    as_base,
    as_choice,
    as_float_dtype,
    as_num_threads,
    check_table_size,
    kernel_view,
)


def wants_tables(
    inv_freq: Any, section_layout: Any, xpos_scale_base: Any, xpos_center: Any
) -> bool:
    """Whether a call needs this module: per-head or mixed frequencies, or xPos."""
    return (
        xpos_scale_base is not None
        or xpos_center is not None
        or (type(section_layout) is str and section_layout == "mixed")
        or (inv_freq is not None and np.ndim(inv_freq) >= 2)
    )


def _frequency_rows(inv_freq: Any, mixed: bool) -> np.ndarray:
    """inv_freq as float64 of shape (n_axes, heads, nf): heads 1 when shared."""
    if inv_freq is None:
        raise ValueError(
            'section_layout="mixed" needs inv_freq of shape (n_axes, rotary_dim/2) or '
            "(n_axes, heads, rotary_dim/2)"
        )
    if _is_torch_bfloat16(inv_freq):
        inv_freq = inv_freq.detach().float()
    if hasattr(inv_freq, "detach"):
        inv_freq = inv_freq.detach()
    try:
        w = np.asarray(inv_freq)
    except Exception as exc:
        raise TypeError(f"inv_freq must be an array of frequencies ({exc})") from None
    allowed = (2, 3) if mixed else (1, 2)
    if w.ndim not in allowed:
        want = (
            '(n_axes, rotary_dim/2) or (n_axes, heads, rotary_dim/2) with section_layout="mixed"'
            if mixed
            else "(rotary_dim/2,) or (heads, rotary_dim/2)"
        )
        raise TypeError(f"inv_freq must have shape {want}, got {w.shape}")
    if w.shape[-1] < 1 or (w.ndim > 1 and w.shape[-2] < 1) or w.shape[0] < 1:
        raise ValueError(f"inv_freq must not be empty, got shape {w.shape}")
    if not mixed:
        w = w[None]
    if w.ndim == 2:
        w = w[:, None]
    out = np.empty(w.shape, np.float64)
    for a in range(w.shape[0]):
        for h in range(w.shape[1]):
            try:
                # (a learned frequency may be negative: the angle's sign, applied to
                # the sine of the exact angle of its magnitude)
                out[a, h] = _as_frequencies(abs(np.asarray(w[a, h], np.float64)))
            except (TypeError, ValueError) as exc:
                where = f"inv_freq[{a}, {h}]" if mixed else f"inv_freq[{h}]"
                raise type(exc)(str(exc).replace("inv_freq", where, 1)) from None
            out[a, h] = np.copysign(out[a, h], w[a, h])
    return out


def _per_head(inv_freq: Any, mixed: bool) -> bool:
    """Whether (checked) inv_freq has a heads axis: every head counted, even one."""
    return inv_freq is not None and np.ndim(inv_freq) == (3 if mixed else 2)


def _heads_axis(v: np.ndarray, sa: int, name: str) -> int:
    """The heads axis of q or k: the one after the sequence axis (positions-first
    ``(batch, seq, heads, head_dim)``) when that is not the last, else the one before
    (heads-first ``(batch, heads, seq, head_dim)``)."""
    if sa + 1 < v.ndim - 1:
        return sa + 1
    if sa >= 1:
        return sa - 1
    raise ValueError(
        f"per-head frequencies need a heads axis next to the sequence axis; {name} has "
        f"shape {v.shape}"
    )


def _xpos(xpos_scale_base: Any, xpos_center: Any, seq: int) -> tuple[float, float]:
    """(scale_base, center) checked; the center defaults to ``seq // 2``."""
    try:
        base = float(xpos_scale_base)
    except (TypeError, ValueError):
        raise TypeError(
            f"xpos_scale_base must be a real number, got {type(xpos_scale_base).__name__}"
        ) from None
    if not (math.isfinite(base) and base > 0):
        raise ValueError(f"xpos_scale_base must be finite and > 0, got {xpos_scale_base!r}")
    if xpos_center is None:
        return base, float(seq // 2)
    try:
        center = float(xpos_center)
    except (TypeError, ValueError):
        raise TypeError(
            f"xpos_center must be a real number, got {type(xpos_center).__name__}"
        ) from None
    if not math.isfinite(center):
        raise ValueError(f"xpos_center must be finite, got {xpos_center!r}")
    return base, center


def xpos_scales(nf: int, power: np.ndarray) -> np.ndarray:
    """``zeta_i ** power`` in float64, shape (len(power), nf): rotary-embedding-torch's
    xPos decay, ``zeta_i = (2 i + 0.4 d) / (1.4 d)`` for rotary dim ``d = 2 nf``."""
    d = 2.0 * nf
    zeta = (2.0 * np.arange(nf, dtype=np.float64) + 0.4 * d) / (1.4 * d)
    with np.errstate(over="ignore", under="ignore"):
        return _kernel._power(zeta[None, :], power.reshape(-1, 1))


class _Tables:
    """The frequencies and positions of a call, checked, and its float64 [sin | cos]
    tables: one per head (or one shared), each row a token."""

    def __init__(
        self,
        head_dim: int,
        rule: Any,
        w: np.ndarray | None,
        axes_pos: list[dict[str, Any]],
        lo: list[int],
        hi: list[int],
    ) -> None:
        if w is None:  # one 1-D rule for every head (xPos alone)
            w1, self.attention, enc = _angles(head_dim, rule, lo[0], hi[0])
            self.nf = int(w1.size)
            self.encs = [[enc]]
        else:
            if rule.rope_parameters is not None:
                raise ValueError("give rope_parameters or inv_freq, not both")
            self.nf = int(w.shape[-1])
            self.attention = 1.0
            self.encs = []
            for a in range(w.shape[0]):
                row = []
                for h in range(w.shape[1]):
                    one = rule._replace(inv_freq=np.abs(w[a, h]), attention_factor=None)
                    try:
                        row.append(_angles(head_dim, one, lo[a], hi[a])[2])
                    except ValueError as exc:
                        if "positions must stay" in str(exc) and w.shape[0] > 1:
                            raise ValueError(f"positions[..., {a}]: {exc}") from None
                        raise
                self.encs.append(row)
            if rule.attention_factor is not None:
                self.attention = as_base(rule.attention_factor, "attention_factor")
        self.axes_pos = axes_pos
        self.heads = len(self.encs[0])
        self.negative = None if w is None or not np.signbit(w).any() else np.signbit(w)

    def table(
        self,
        h: int,
        rows: int,
        nthreads: int,
        accurate: bool = False,
        into: np.ndarray | None = None,
        bf16: bool = False,
    ) -> np.ndarray:
        """Head h's float64 [sin | cos] table, ``rows`` tokens (``accurate``: one axis's
        entries correctly rounded, times the attention factor, written into ``into``
        when given: a table of the cache's dtype, rounded once; bf16: its bfloat16
        bits)."""
        nf = self.nf
        out = None
        for a, where in enumerate(self.axes_pos):
            t = np.empty((rows, 2 * nf), np.float64) if into is None else into
            if rows:
                self.encs[a][h].fill_rows(
                    t,
                    num_threads=nthreads,
                    fresh=into is None,
                    accurate=accurate,
                    scale=self.attention if accurate else 1.0,
                    bfloat16=bf16,
                    **where,
                )
                if self.negative is not None and self.negative[a, h].any():
                    # sin(-x) = -sin(x), exactly: the sign bit of the 16-bit entries
                    neg = t[:, :nf][:, self.negative[a, h]]
                    if t.dtype.itemsize == 2:
                        neg = (neg.view(np.uint16) ^ np.uint16(0x8000)).view(t.dtype)
                    else:
                        neg *= -1.0
                    t[:, :nf][:, self.negative[a, h]] = neg
            if out is None:
                out = t
                continue
            # the sum of the axes' exact angles by the angle-addition formulas (error a
            # few 1e-16 in double; the output's rounding is the one that matters)
            s0, c0, s1, c1 = out[:, :nf], out[:, nf:], t[:, :nf], t[:, nf:]
            out = np.concatenate((s0 * c1 + c0 * s1, c0 * c1 - s0 * s1), axis=1)
        assert out is not None
        return out


def _scaled(table: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """table with its [sin | cos] rows multiplied by ``scale`` (rows x nf) in float64."""
    return table * np.concatenate((scale, scale), axis=1)


def _is_mixed(rope_parameters: Any, sections: Any, section_layout: Any) -> bool:
    """Whether section_layout is "mixed", after the checks rotate and cache share:
    no sections, one rule."""
    mixed = type(section_layout) is str and section_layout == "mixed"
    if not mixed:
        as_choice(section_layout, "section_layout", (*SECTION_LAYOUTS, "mixed"))
    if sections is not None:
        raise ValueError(
            "sections does not apply here: per-head and mixed frequencies and xPos take "
            'every frequency along every axis (section_layout="mixed" sums the axes)'
        )
    if _per_axis_rules(rope_parameters):
        raise TypeError("rope_parameters must be one rule (a mapping) here, not a list")
    return mixed


def rotate(given: tuple[Any, ...], xpos_scale_base: Any, xpos_center: Any) -> Any:
    """apply_rope with per-head or mixed frequencies, or xPos (see its docstring):
    ``given``, its arguments as kernel.rope_apply_axes takes them."""
    (q, k, rope_parameters, head_dim, offset, positions, sections, section_layout, seq_axis,
     layout, max_position_embeddings, precision, inv_freq, attention_factor,
     num_threads) = given  # fmt: skip
    layout = as_choice(layout, "layout", ROPE_LAYOUTS)
    nthreads = as_num_threads(num_threads)
    mixed = _is_mixed(rope_parameters, sections, section_layout)
    views, head_dim, sa, seq, batch = _rope_views(q, k, head_dim, seq_axis)
    if xpos_scale_base is not None and k is None:
        raise ValueError("xpos_scale_base needs k: xPos scales q and k by inverse factors")
    if xpos_scale_base is None and xpos_center is not None:
        raise ValueError("xpos_center applies with xpos_scale_base only")
    w = None
    if inv_freq is not None or mixed:
        w = _frequency_rows(inv_freq, mixed)
    heads = 1 if w is None else w.shape[1]
    ha = None
    if _per_head(inv_freq, mixed):
        ha = _heads_axis(views[0], sa, "q")
        for v, name in zip(views, ("q", "k"), strict=False):
            if v.shape[ha] != heads:
                raise ValueError(
                    f"inv_freq has frequencies for {heads} heads, but {name} has "
                    f"{v.shape[ha]} on axis {ha} (shape {v.shape}); grouped-query attention "
                    "with per-head frequencies is not defined"
                )
        if ha == 0:
            batch = 1
    # each axis's positions, as the table fill takes them
    if mixed:
        assert w is not None
        n = w.shape[0]
        if not (np.ndim(offset) == 0 and offset == 0):
            raise ValueError(
                'offset does not apply with section_layout="mixed"; add it to positions'
            )
        if positions is None:
            raise ValueError(
                f'section_layout="mixed" needs positions of shape ({seq}, {n}) or '
                f"({batch}, {seq}, {n})"
            )
        pos = _unaliased(_as_position_ids(positions), views)
        lo, hi = _kernel.rope_check_axes_tokens(pos, n, batch, seq, f" for inv_freq of {n} axes")
        if pos.ndim == 2:
            pos = pos[None]
        nb = pos.shape[0]
        axes_pos = [
            {"nseq": nb, "seq_len": seq, "positions": np.ascontiguousarray(pos[:, :, a])}
            for a in range(n)
        ]
        tok = pos.astype(np.float64)  # (xPos needs one position; refused below)
    else:
        off_scalar, offsets, p2, lo1, hi1 = _token_positions(views, seq, batch, offset, positions)
        nb = batch if offsets is not None or (p2 is not None and p2.shape[0] > 1) else 1
        lo, hi = [lo1], [hi1]
        axes_pos = [
            {
                "nseq": nb,
                "seq_len": seq,
                "offset": off_scalar,
                "offsets": offsets,
                "positions": p2,
            }
        ]
        base = np.zeros((nb, 1)) + (off_scalar if offsets is None else offsets[:, None])
        tok = base + (np.arange(seq, dtype=np.float64)[None] if p2 is None else p2)
    if mixed and xpos_scale_base is not None:
        raise ValueError('xpos_scale_base applies to 1-axis positions, not section_layout="mixed"')
    rule = _Rule(rope_parameters, None, attention_factor, max_position_embeddings, precision)
    tables = _Tables(head_dim, rule, w, axes_pos, lo, hi)
    xpos = None
    if xpos_scale_base is not None:
        xpos = _xpos(xpos_scale_base, xpos_center, seq)
    rows = nb * seq
    if rows == 0 or not any(v.size for v in views):
        return q if k is None else (q, k)
    check_table_size(rows, 2 * tables.nf, 8, working_copies=4)
    scale = None
    if xpos is not None:
        power = (tok.reshape(-1) - xpos[1]) / xpos[0]
        scale = (xpos_scales(tables.nf, power), xpos_scales(tables.nf, -power))
    for h in range(heads):
        hv = views if ha is None else [v[(slice(None),) * ha + (h,)] for v in views]
        hsa = sa if ha is None or sa < ha else sa - 1
        t = tables.table(h, rows, nthreads)
        qt = kt = t
        if scale is not None:
            qt, kt = _scaled(t, scale[0]), _scaled(t, scale[1])
        parts = [kernel_view(v) for v in hv]
        _kernel.rope_rotate_tables(
            parts[0][0],
            qt,
            hsa,
            layout == "half",
            tables.attention,
            nthreads,
            parts[0][1],
            parts[1][0] if len(parts) > 1 else None,
            kt,
            len(parts) > 1 and parts[1][1],
            nb > 1,
        )
    return q if k is None else (q, k)


def cache(
    given: tuple[Any, ...], xpos_scale_base: Any, xpos_center: Any, accurate: bool = False
) -> tuple[np.ndarray, ...]:
    """rope_cache with per-head or mixed frequencies, or xPos (see its docstring):
    ``given``, its arguments as kernel.rope_cache_axes_fast takes them; ``accurate``:
    its correctly_rounded (per-head frequencies of one axis, whose tables are the
    accurate fills as they are, the signs of negative frequencies flipped exactly)."""
    (head_dim, rope_parameters, seq_len, offset, positions, sections, section_layout, layout,
     dtype, max_position_embeddings, precision, inv_freq, attention_factor, out,
     num_threads) = given  # fmt: skip
    layout = as_choice(layout, "layout", ROPE_LAYOUTS)
    nthreads = as_num_threads(num_threads)
    explicit = None if dtype is None else as_float_dtype(dtype, bits_ok=out is not None)
    mixed = _is_mixed(rope_parameters, sections, section_layout)
    if xpos_scale_base is None and xpos_center is not None:
        raise ValueError("xpos_center applies with xpos_scale_base only")
    w = None
    if inv_freq is not None or mixed:
        w = _frequency_rows(inv_freq, mixed)
    if (seq_len is None) == (positions is None):
        raise ValueError("give either seq_len (with offset) or positions")
    if mixed:
        assert w is not None
        n = w.shape[0]
        if seq_len is not None or not (np.ndim(offset) == 0 and offset == 0):
            raise ValueError(
                'seq_len and offset do not apply with section_layout="mixed"; give every '
                "token's coordinates in positions"
            )
        if xpos_scale_base is not None:
            raise ValueError(
                'xpos_scale_base applies to 1-axis positions, not section_layout="mixed"'
            )
        pos = _as_position_ids(positions)
        lo, hi = _kernel.rope_check_axes_tokens(pos, n, -1, -1, f" for inv_freq of {n} axes")
        shape = pos.shape[:-1]
        flat = pos.reshape(-1, n)
        axes_pos = [
            {
                "nseq": 1,
                "seq_len": flat.shape[0],
                "positions": np.ascontiguousarray(flat[:, a])[None],
            }
            for a in range(n)
        ]
        tok = None
    else:
        if positions is None:
            seq_len, offset = _as_seq(seq_len, offset)
            shape = (seq_len,)
            lo, hi = [offset], [offset + seq_len - 1]
            axes_pos = [{"nseq": 1, "seq_len": seq_len, "offset": offset}]
            tok = offset + np.arange(seq_len, dtype=np.float64)
        else:
            if offset != 0:
                raise ValueError("offset applies to seq_len; add it to positions instead")
            p = _as_position_ids(positions)
            shape = p.shape
            lo, hi = _kernel.rope_check_axes_tokens(p.reshape(-1, 1), 1, -1, -1, "")
            axes_pos = [{"nseq": 1, "seq_len": p.size, "positions": p.reshape(1, -1)}]
            tok = p.reshape(-1).astype(np.float64)
    rule = _Rule(rope_parameters, None, attention_factor, max_position_embeddings, precision)
    tables = _Tables(head_dim, rule, w, axes_pos, lo, hi)
    heads = tables.heads
    ntok = math.prod(shape)
    xpos = None
    if xpos_scale_base is not None:
        xpos = _xpos(xpos_scale_base, xpos_center, ntok)
    full = ((heads,) if _per_head(inv_freq, mixed) else ()) + shape

    def fill(view: np.ndarray, bf16: bool) -> None:
        for h in range(heads):
            part = view[h * ntok : (h + 1) * ntok]
            if accurate and part.dtype.itemsize != 8:
                # (one axis: each entry rounded once into the cache's dtype by the fill)
                tables.table(h, ntok, nthreads, accurate, into=part, bf16=bf16)
                continue
            t = tables.table(h, ntok, nthreads, accurate)
            if part.dtype.itemsize == 2:  # rounded once (NumPy's bfloat16 cast is twice)
                _kernel.round_to_half(t.reshape(-1), part.view(np.uint16).reshape(-1), bf16)
            else:
                part[...] = t

    result = _write_caches(
        full, tables.nf, tables.attention, fill, layout, explicit, out, accurate
    )
    if xpos is None:
        return result
    assert tok is not None
    power = (tok - xpos[1]) / xpos[0]
    scale64 = xpos_scales(tables.nf, power)
    dt = result[0].dtype
    sc = np.empty((*shape, 2 * tables.nf), dt)
    s = scale64.reshape((*shape, tables.nf))
    with np.errstate(over="ignore"):
        if layout == "half":
            sc[..., : tables.nf] = s
            sc[..., tables.nf :] = s
        else:
            sc[..., 0::2] = s
            sc[..., 1::2] = s
    return (*result, sc)
