"""fastpe.apply_rope: q and k rotated in place by rotary position embeddings."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from . import _rope_heads
from . import kernel as _kernel
from ._rope_args import _kernel_pair, _rope_views, _token_positions
from ._rope_axes import _rotate_axes
from ._rope_cache import _refuse_correctly_rounded
from ._rope_rules import ROPE_LAYOUTS, SECTION_LAYOUTS, _angles, _per_axis_rules, _plan, _Rule
from ._validate import as_bool, as_choice, as_num_threads, check_table_size


@_kernel.rope_front
def apply_rope(
    q: Any,
    k: Any = None,
    *,
    rope_parameters: Mapping[str, Any] | Sequence[Mapping[str, Any] | None] | None = None,
    head_dim: int | None = None,
    offset: Any = 0,
    positions: Any = None,
    sections: Sequence[int] | None = None,
    section_layout: Literal["contiguous", "interleaved", "mixed"] = "contiguous",
    seq_axis: int = -2,
    layout: Literal["half", "interleaved"] = "half",
    max_position_embeddings: int | None = None,
    precision: Literal["float32", "float64"] = "float32",
    inv_freq: Any = None,
    attention_factor: float | None = None,
    num_threads: int | None = None,
    xpos_scale_base: float | None = None,
    xpos_center: float | None = None,
    correctly_rounded: bool = False,
) -> Any:
    """Rotate queries (and keys) in place by their positions' RoPE angles.

    ``x[..., j1], x[..., j2] = x1*cos - x2*sin, x2*cos + x1*sin`` for each rotated
    pair (``j2 = j1 + rotary_dim/2`` in the half-split layout, ``j1 + 1`` in the
    interleaved one), times the family's attention factor: what transformers'
    ``apply_rotary_pos_emb`` computes, in one pass over ``q`` and ``k``, in
    float64 with one rounding per entry, with exact angles. The cos/sin of each
    distinct position is computed once (a table of positions x rotary_dim/2, not
    the size of ``q``). Dimensions past ``rotary_dim`` are left as they are.

    Parameters
    ----------
    q, k : arrays, float16, bfloat16, float32 or float64, shape (..., head_dim)
        Writable, rotated in place: NumPy arrays (bfloat16: ml_dtypes'), or anything
        viewable without a copy (a PyTorch CPU tensor through DLPack, bfloat16
        included). Each entry is rounded once from the float64 result. Any strides, the last axis
        contiguous; ``k`` may have another number of heads (grouped-query
        attention). ``q`` and ``k`` may be views of one buffer (a fused QKV
        projection) as long as they share no element. Their sequence axis is ``seq_axis``: -2 for
        ``(batch, heads, seq, head_dim)``, -3 (or 1) for ``(batch, seq, heads, head_dim)``.
    rope_parameters, max_position_embeddings, precision, inv_freq, attention_factor
        The frequencies, as in :func:`rope_cache` (keyword-only). Repeated calls
        (decoding steps) are fastest with a dict of plain values or an ``inv_freq``
        NumPy array (a torch buffer: ``inv_freq.numpy()`` once).  ``inv_freq`` of
        shape ``(heads, rotary_dim/2)``: head ``h`` of q and of k rotates by row
        ``h``, bitwise as one call per head; the heads axis is the one after
        ``seq_axis`` when that is not the last (``(batch, seq, heads, head_dim)``),
        else the one before (``(batch, heads, seq, head_dim)``).  q and k must both
        have ``heads`` heads (per-head frequencies with grouped-query attention
        are not defined).
    head_dim : int, keyword-only
        Defaults to ``q.shape[-1]``.
    offset : int or array_like of int, keyword-only
        Position of the first token: one for all, or one per batch entry (axis 0),
        e.g. KV-cache lengths.
    positions : array_like of int or float, keyword-only
        Position ids, shape ``(seq,)`` or ``(batch, seq)`` (e.g. left padding), or
        fractional positions as in :func:`rope_cache`;
        excludes ``offset``. ``offset`` and ``positions`` may share memory with
        ``q`` or ``k``: they are read (copied if need be) before anything is rotated.
        With ``sections``: shape ``(seq, n_axes)`` or ``(batch, seq, n_axes)``, each
        token's coordinates (e.g. ``(t, h, w)``).
    sections, section_layout : keyword-only
        Multi-axis positions, as in :func:`rope_cache` (``rope_parameters`` may then
        be a list of one rule per axis); ``offset`` does not apply.
        ``section_layout="mixed"`` (without ``sections``): RoPE-Mixed, every
        frequency along every axis, ``inv_freq`` of shape ``(n_axes,
        rotary_dim/2)`` or ``(n_axes, heads, rotary_dim/2)``, ``positions`` of
        shape ``(seq, n_axes)`` or ``(batch, seq, n_axes)``.
    layout : {"half", "interleaved"}, keyword-only
        As in :func:`rope_cache`.
    num_threads : int, keyword-only
        As in :func:`sinusoidal`. The result does not depend on it.
    xpos_scale_base, xpos_center : float, keyword-only
        xPos, as rotary-embedding-torch's ``rotate_queries_and_keys`` with
        ``use_xpos=True``: each rotated pair ``i`` of q is also multiplied by
        ``zeta_i ** power`` and of k by ``zeta_i ** -power``, ``power = (position -
        xpos_center) / xpos_scale_base``, ``zeta_i = (2 i + 0.4 d) / (1.4 d)`` for
        rotary dim ``d``; folded into the rotation (each entry still rounded
        once).  ``xpos_center`` defaults to ``seq // 2``, the library's centre for
        positions ``0 .. seq-1``.  Needs ``k``; 1-axis positions only.
    correctly_rounded : bool, keyword-only
        Every rotated entry correctly rounded, in every dtype: the exact value of
        ``a * (x1*cos(t) - x2*sin(t))`` (and ``a * (x2*cos(t) + x1*sin(t))``), with
        ``x1, x2`` the input entries, ``t`` the exact product of the position
        (fractional ones as their float64 value) and the float64 frequency (as in
        :func:`rope_cache`'s option) and ``a`` the attention factor, rounded once
        to the array's dtype (subnormals included).  The default is within about
        an ulp and rounds a rare entry the wrong way, more where ``x1*cos`` and
        ``x2*sin`` nearly cancel.  A proved error bound on a double-double
        evaluation decides nearly every entry; the rest are evaluated again in
        256-bit arithmetic.  It costs about 10x the default's time on a prefill
        and ~40x on a decoding step (docs/performance.md).  Not with
        ``sections``, one rule per axis, per-head or mixed frequencies, or xPos
        (a ValueError).

    Returns
    -------
    q, or (q, k) when ``k`` is given: the objects passed, rotated.

    Examples
    --------
    >>> import fastpe, numpy as np
    >>> q = np.ones((1, 2, 3, 8), np.float32)  # (batch, heads, seq, head_dim)
    >>> _ = fastpe.apply_rope(q, offset=5)
    >>> cos, sin = fastpe.rope_cache(8, seq_len=3, offset=5)
    >>> def rotate_half(x):
    ...     return np.concatenate([-x[..., 4:], x[..., :4]], axis=-1)
    >>> one = np.ones((3, 8), np.float32)
    >>> bool(np.allclose(q[0, 1], one * cos + rotate_half(one) * sin, atol=1e-6))
    True
    """
    accurate = as_bool(correctly_rounded, "correctly_rounded")
    if accurate:
        _refuse_apply_correctly_rounded(
            rope_parameters, inv_freq, sections, section_layout, xpos_scale_base, xpos_center
        )
    # the arguments of the multi-axis and per-head paths, in kernel.rope_apply_axes's order
    given = (
        q, k, rope_parameters, head_dim, offset, positions, sections, section_layout, seq_axis,
        layout, max_position_embeddings, precision, inv_freq, attention_factor, num_threads,
    )  # fmt: skip
    # (the common case was rotated before this path, so no test is inlined here)
    if _rope_heads.wants_tables(inv_freq, section_layout, xpos_scale_base, xpos_center):
        return _rope_heads.rotate(given, xpos_scale_base, xpos_center)
    if sections is None and not (type(section_layout) is str and section_layout == "contiguous"):
        # (it has no meaning without sections, but a misspelling is still refused)
        as_choice(section_layout, "section_layout", (*SECTION_LAYOUTS, "mixed"))
    # (the usual spellings decided without a call: a decoding step takes microseconds)
    multi = sections is not None or (
        rope_parameters is not None
        and type(rope_parameters) is not dict
        and _per_axis_rules(rope_parameters)
    )
    # (kernel.rope_apply takes the same arguments but sections and section_layout)
    # (the option was refused above for the multi-axis rotations)
    if multi:
        done = _kernel.rope_apply_axes(*given)
    else:
        done = _kernel.rope_apply(*given[:6], *given[8:], accurate)
    if done is not None:  # the common arguments, frequencies already planned: rotated
        return done
    layout = as_choice(layout, "layout", ROPE_LAYOUTS)
    nthreads = as_num_threads(num_threads)
    views, head_dim, sa, seq, batch = _rope_views(q, k, head_dim, seq_axis)
    if multi:
        _rotate_axes(
            views, sa, seq, batch, head_dim, rope_parameters, offset, positions, sections,
            section_layout, layout, max_position_embeddings, precision, inv_freq,
            attention_factor, nthreads,
        )  # fmt: skip
        return q if k is None else (q, k)
    off_scalar, offsets, pos, lo, hi = _token_positions(views, seq, batch, offset, positions)
    rule = _Rule(rope_parameters, inv_freq, attention_factor, max_position_embeddings, precision)
    w, attention, enc = _angles(head_dim, rule, lo, hi)
    # (every argument is checked even when there is nothing to rotate; an empty q
    # leaves k to be rotated all the same)
    if hi >= lo:
        rows = (1 if offsets is None and (pos is None or pos.shape[0] == 1) else batch) * seq
        check_table_size(rows, 2 * w.size, 8)
        # q and k in one pass by one table
        pair = _kernel_pair(views)
        if pair is not None:
            x, x_bf16, other, other_bf16 = pair
            _kernel.rope_rotate(
                x,
                enc,
                sa,
                off_scalar,
                offsets,
                pos,
                layout == "half",
                attention,
                nthreads,
                x_bf16,
                other,
                other_bf16,
                accurate,
            )
    _plan(rule, head_dim, enc)  # (a call that failed plans nothing)
    return q if k is None else (q, k)


def _refuse_apply_correctly_rounded(
    rope_parameters: Any,
    inv_freq: Any,
    sections: Any,
    section_layout: Any,
    xpos_scale_base: Any,
    xpos_center: Any,
) -> None:
    """correctly_rounded rotates by one axis's angles with one row of frequencies:
    rope_cache's exclusions, and the multi-axis and per-head rotations, which the
    option does not cover yet."""
    _refuse_correctly_rounded(inv_freq, section_layout, xpos_scale_base)
    what = None
    if xpos_center is not None:
        what = "xpos_center"
    elif sections is not None or (
        rope_parameters is not None
        and type(rope_parameters) is not dict
        and _per_axis_rules(rope_parameters)
    ):
        what = "sections" if sections is not None else "one rope_parameters per axis"
    elif inv_freq is not None and _rope_heads.wants_tables(inv_freq, "contiguous", None, None):
        what = "inv_freq of one row per head"
    if what is not None:
        raise ValueError(f"correctly_rounded=True does not apply with {what}")
