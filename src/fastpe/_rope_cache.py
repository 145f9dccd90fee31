"""fastpe.rope_cache: the cos and sin caches of rotary position embeddings."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np

from . import _rope_heads
from . import kernel as _kernel
from ._rope_args import _as_rope_positions, _as_seq, _write_caches
from ._rope_axes import _rope_cache_axes
from ._rope_rules import ROPE_LAYOUTS, SECTION_LAYOUTS, _angles, _per_axis_rules, _plan, _Rule
from ._validate import (
    as_bool,
    as_choice,
    as_float_dtype,
    as_num_threads,
)


def rope_cache(
    head_dim: int,
    rope_parameters: Mapping[str, Any] | Sequence[Mapping[str, Any] | None] | None = None,
    *,
    seq_len: int | None = None,
    offset: int = 0,
    positions: Any = None,
    sections: Sequence[int] | None = None,
    section_layout: Literal["contiguous", "interleaved", "mixed"] = "contiguous",
    layout: Literal["half", "interleaved"] = "half",
    dtype: Any = None,
    max_position_embeddings: int | None = None,
    precision: Literal["float32", "float64"] = "float32",
    inv_freq: Any = None,
    attention_factor: float | None = None,
    out: tuple[np.ndarray, np.ndarray] | None = None,
    num_threads: int | None = None,
    xpos_scale_base: float | None = None,
    xpos_center: float | None = None,
    correctly_rounded: bool = False,
) -> tuple[np.ndarray, ...]:
    """The cos and sin caches of rotary position embeddings, with exact angles.

    ``cos[..., j]`` and ``sin[..., j]`` are the cosine and sine of ``k * w`` for
    position ``k`` and the frequency ``w`` of rotated dimension ``j``, times the
    family's attention factor; the angle ``k * w`` is never rounded (float64
    within 1e-15 of the exact value for the chosen frequencies, float32 within
    2^-24 before the attention factor).

    Parameters
    ----------
    head_dim, rope_parameters, max_position_embeddings, precision
        The frequencies, as in :func:`rope_frequencies`.  The rules that depend on
        the sequence length (``dynamic``, ``longrope``) get the largest position
        plus one, as transformers' rotary modules do.
    seq_len, offset : int, keyword-only
        Positions ``offset .. offset+seq_len-1`` (a prompt, or KV-cache decoding at
        ``offset``).  Give either these or ``positions``.
    positions : array_like of int or float, keyword-only
        Explicit position ids of any shape (e.g. ``(batch, seq)`` with left padding).
        Repeated small calls (a decoding step's cos and sin) are fastest with a 1-D
        int64 NumPy array, or ``seq_len`` and ``offset`` as ints.  Float positions
        (float16/32/64: the fractional grids of vision models) are finite; each angle
        is the exact product of the position's float64 value and the frequency,
        rounded once, and an integer value gives bitwise what the integer gives.  With
        ``sections``: shape ``(..., n_axes)``, each token's coordinates (e.g.
        ``(t, h, w)``), and the caches have shape ``(..., rotary_dim)``.
    sections : sequence of int, keyword-only
        Multi-axis positions (M-RoPE, axial 2-D/3-D RoPE): the number of
        frequencies (rotated pairs) that follow each axis of ``positions``, as
        transformers' ``mrope_section``; they sum to ``rotary_dim / 2``.  Frequency
        ``i``'s angle is ``positions[..., a(i)] * w[i]``, ``a(i)`` the axis that
        ``section_layout`` gives it.  ``seq_len`` and ``offset`` do not apply.
        ``rope_parameters`` may then be one rule for all frequencies or a list of
        one rule per axis (axis ``a``'s frequencies are
        ``rope_frequencies(2 * sections[a], rope_parameters[a])``, placed in its
        columns in order; rules whose attention factors differ need
        ``attention_factor``); ``inv_freq`` lists every column's frequency.
    section_layout : {"contiguous", "interleaved"}, keyword-only
        ``"contiguous"``: the first ``sections[0]`` frequencies follow axis 0, the
        next ``sections[1]`` axis 1, ... (Qwen2-VL, Qwen2.5-VL, axial RoPE with
        concatenated axes).  ``"interleaved"``: frequency ``i`` follows axis ``r =
        i % n_axes`` when ``r >= 1`` and ``i < n_axes * sections[r]``, else axis 0
        (Qwen3-VL); each axis must then get exactly ``sections[a]`` frequencies.
        ``"mixed"`` (RoPE-Mixed, timm's ``RotaryEmbeddingMixed``), without
        ``sections``: every frequency follows every axis, the angle of frequency
        ``i`` being ``sum_a positions[..., a] * inv_freq[a, i]`` (``inv_freq`` of
        shape ``(n_axes, rotary_dim/2)``, or ``(n_axes, heads, rotary_dim/2)`` per
        head), each axis's angle exact and their sum by the angle-addition
        formulas in float64 (float64 results within 1e-15 of the exact values).
    layout : {"half", "interleaved"}, keyword-only
        ``"half"``: the ``rotate_half`` layout of GPT-NeoX, LLaMA, Mistral, Qwen
        (``[w_0 .. w_{n-1} | w_0 .. w_{n-1}]``); ``"interleaved"``: GPT-J's
        ``rotate_every_two`` (``w_0 w_0 w_1 w_1 ...``).
    dtype : float16, bfloat16, float32 or float64, keyword-only
        Default float32 (or ``out``'s). bfloat16 is ml_dtypes' type.
    inv_freq : array_like of float, keyword-only
        Use these frequencies (radians per position; e.g. a model's own
        ``rotary_emb.inv_freq`` buffer, for bitwise its training-time values)
        instead of a rule; ``rope_parameters`` must then be None. Any real dtype,
        bfloat16 included (ml_dtypes' arrays, PyTorch tensors), converted exactly
        to float64; finite, >= 0 and <= 1e280. ``head_dim`` must be at least
        ``2 * len(inv_freq)``, the width of the caches.  Shape ``(heads,
        rotary_dim/2)``: one row of frequencies per head (learned or per-head
        bands); the caches then have shape ``(heads, *positions.shape,
        rotary_dim)``, head ``h``'s those of ``inv_freq[h]``.  Per-head and mixed
        frequencies may be negative (a learned frequency's sign is its angle's).
    attention_factor : float, keyword-only
        Overrides the family's (1.0 without a rule).
    out : (cos, sin) pair of ndarrays, keyword-only
        Write the caches there (shape ``(seq_len, rotary_dim)`` or
        ``(*positions.shape, rotary_dim)``, float16, bfloat16, float32 or float64,
        writable, C-contiguous rows) and return them. ``cos`` and ``sin`` may be
        views of one buffer (side by side) as long as they share no element.
    num_threads : int, keyword-only
        As in :func:`sinusoidal`.
    xpos_scale_base, xpos_center : float, keyword-only
        xPos (rotary-embedding-torch's ``use_xpos=True``): also return the scales
        ``zeta_i ** ((position - xpos_center) / xpos_scale_base)``, ``zeta_i = (2 i
        + 0.4 d) / (1.4 d)`` for rotary dim ``d``, laid out like ``cos`` (each
        value rounded once; the keys' scales are their inverses), as its
        ``get_scale``.  ``xpos_center`` defaults to the number of tokens // 2.
    correctly_rounded : bool, keyword-only
        Caches correctly rounded, in every dtype: each entry is the attention
        factor times the sine or cosine of the exact product of the position's
        float64 value and the float64 frequency (``inv_freq``, or the rule's
        frequencies at its ``precision``), rounded once to the output's dtype
        (subnormals included), entries near zero included (the default float64
        path is within ~5e-16 absolute, which near zero can be many ulps; the
        default float32 one rounds a rare entry beside a midpoint the wrong
        way).  As :func:`sinusoidal`'s option: a proved error bound decides
        nearly every entry, the rest are evaluated again in 256-bit arithmetic;
        it costs a few times the default time, more with an attention factor
        other than 1 (docs/performance.md).  ``sections`` and per-head
        ``inv_freq`` are covered, mixed ``inv_freq`` (a sum of angles) and xPos
        are not: those are a ValueError.

    Returns
    -------
    (cos, sin) : pair of ndarrays
        (``(cos, sin, scale)`` with ``xpos_scale_base``.)

    Examples
    --------
    >>> import fastpe
    >>> cos, sin = fastpe.rope_cache(128, {"rope_theta": 500000.0}, seq_len=4096)
    >>> cos.shape, cos.dtype
    ((4096, 128), dtype('float32'))
    """
    accurate = as_bool(correctly_rounded, "correctly_rounded")
    if accurate:
        _refuse_correctly_rounded(inv_freq, section_layout, xpos_scale_base)
    # the arguments the general paths take, in the order of kernel.rope_cache_axes_fast
    given = (
        head_dim, rope_parameters, seq_len, offset, positions, sections, section_layout,
        layout, dtype, max_position_embeddings, precision, inv_freq, attention_factor, out,
        num_threads,
    )  # fmt: skip
    if (
        xpos_scale_base is not None
        or xpos_center is not None
        or (type(section_layout) is str and section_layout == "mixed")
        or inv_freq is not None
    ) and _rope_heads.wants_tables(inv_freq, section_layout, xpos_scale_base, xpos_center):
        return _rope_heads.cache(given, xpos_scale_base, xpos_center, accurate)
    if sections is None and not (type(section_layout) is str and section_layout == "contiguous"):
        as_choice(section_layout, "section_layout", (*SECTION_LAYOUTS, "mixed"))  # (a typo)
    if sections is not None or (
        rope_parameters is not None
        and type(rope_parameters) is not dict
        and _per_axis_rules(rope_parameters)
    ):
        done = _kernel.rope_cache_axes_fast(*given, accurate)
        if done is not None:  # sections and frequencies already planned: filled
            return done
        return _rope_cache_axes(given, accurate)
    done = _kernel.rope_cache_fast(
        head_dim,
        rope_parameters,
        seq_len,
        offset,
        positions,
        layout,
        dtype,
        max_position_embeddings,
        precision,
        inv_freq,
        attention_factor,
        out,
        num_threads,
        accurate,
    )
    if done is not None:  # the common arguments, frequencies already planned: filled
        return done
    layout = as_choice(layout, "layout", ROPE_LAYOUTS)
    nthreads = as_num_threads(num_threads)
    explicit = None if dtype is None else as_float_dtype(dtype, bits_ok=out is not None)
    if (seq_len is None) == (positions is None):
        raise ValueError("give either seq_len (with offset) or positions")
    if positions is None:
        seq_len, offset = _as_seq(seq_len, offset)
        pos = None
        shape: tuple[int, ...] = (seq_len,)
        lo, hi = offset, offset + seq_len - 1
    else:
        if offset != 0:
            raise ValueError("offset applies to seq_len; add it to positions instead")
        pos = _as_rope_positions(positions)
        shape = pos.shape
        # (the library's check of the positions, one axis: finite; their span)
        (lo,), (hi,) = _kernel.rope_check_axes_tokens(pos.reshape(-1, 1), 1, -1, -1, "")
    rule = _Rule(rope_parameters, inv_freq, attention_factor, max_position_embeddings, precision)
    w, attention, enc = _angles(head_dim, rule, lo, hi)

    def fill(view: np.ndarray, bf16: bool) -> None:
        where = {"offset": offset} if pos is None else {"positions": pos.reshape(1, -1)}
        enc.fill_rows(
            view,
            nseq=1,
            seq_len=view.shape[0],
            num_threads=nthreads,
            fresh=True,
            bfloat16=bf16,
            accurate=accurate,
            scale=attention if accurate else 1.0,  # (correctly_rounded: applied there)
            **where,
        )

    result = _write_caches(shape, w.size, attention, fill, layout, explicit, out, accurate)
    _plan(rule, head_dim, enc)  # (a call that failed plans nothing)
    return result


def _refuse_correctly_rounded(inv_freq: Any, section_layout: Any, xpos_scale_base: Any) -> None:
    """correctly_rounded covers caches whose every entry is the sine or cosine of one
    position times one frequency (sections and per-head frequencies included): mixed
    axes sum several angles, and xPos's scales are not sines."""
    what = None
    if type(section_layout) is str and section_layout == "mixed":
        what = 'section_layout="mixed"'
    elif xpos_scale_base is not None:
        what = "xpos_scale_base"
    if what is not None:
        raise ValueError(f"correctly_rounded=True does not apply with {what}")
