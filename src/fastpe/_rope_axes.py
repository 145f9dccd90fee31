"""Multi-axis positions (Qwen2-VL's mrope, 2-D and 3-D RoPE): each frequency
follows one coordinate of its token.

``sections`` split the frequencies among the coordinates (contiguous or
interleaved columns), each axis with its own rule or one rule for all; the
compiled axes are the library's plan cache's, keyed by the frequencies and
sections.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from . import kernel as _kernel
from ._rope_args import _as_rope_positions, _kernel_pair, _unaliased, _write_caches
from ._rope_rules import (
    MAX_AXES,
    ROPE_LAYOUTS,
    SECTION_LAYOUTS,
    _as_frequencies,
    _length,
    _per_axis_rules,
    _plan,
    _Rule,
    _rule_args,
    rope_frequencies,
)
from ._validate import (
    as_base,
    as_choice,
    as_float_dtype,
    as_int,
    as_num_threads,
    check_table_size,
)


def _as_sections(sections: Any) -> tuple[int, ...]:
    """``sections`` as 1 to MAX_AXES ints (frequencies per axis; the count bounds
    the conversion, and the positions' check takes it); their range and sum are the
    library's to check (_axis_columns)."""
    if isinstance(sections, np.ndarray):
        sections = sections.tolist()
    if not isinstance(sections, Sequence) or isinstance(sections, (str, bytes)):
        raise TypeError(
            f"sections must be a sequence of ints (frequencies per axis), got "
            f"{type(sections).__name__}"
        )
    if not 1 <= len(sections) <= MAX_AXES:
        raise ValueError(f"sections must list 1 to {MAX_AXES} axes, got {len(sections)}")
    return tuple(as_int(v, f"sections[{i}]") for i, v in enumerate(sections))


def _axis_columns(
    sections: tuple[int, ...], section_layout: str, nf: int | None = None
) -> list[np.ndarray]:
    """The frequencies (columns) of each axis of nf frequencies (None: as many as the
    sections give), in increasing order: the library's assignment
    (fastpe_rope_section_axes; interleaved as transformers' apply_interleaved_mrope),
    which checks the sections -- each in 0 .. 2^31, summing to nf, laid out as asked
    -- and names the one it refuses."""
    n, total = len(sections), sum(sections)
    nf = total if nf is None else nf
    layout = SECTION_LAYOUTS.index(section_layout)  # (FASTPE_SECTIONS_*)
    # (beyond int64 only the size matters: the library refuses it, named as given)
    err, axis = _kernel._rope_section_axes_native(
        [max(-(2**63), min(v, 2**63 - 1)) for v in sections], layout, nf
    )
    if err:
        _, arg, a, value, limit = _kernel._last_error()
        if arg == "sections" and a < 0:  # (the sum: value, the frequencies: limit)
            raise ValueError(
                f"sections must sum to the number of frequencies, rotary_dim / 2 = {nf}, "
                f"got sections={list(sections)} (sum {total})"
            )
        if math.isnan(limit):  # (an axis the interleaving cannot give its columns)
            raise ValueError(
                f"sections={list(sections)} cannot be interleaved over {nf} frequencies: "
                f"axis {a} needs {a} + n_axes * (sections[{a}] - 1) = "
                f"{a + n * (int(value) - 1)} < {nf}"
            )
        if limit == 0:
            raise ValueError(f"sections[{a}] must be a non-negative integer, got {sections[a]}")
        raise ValueError(f"sections[{a}] must be an integer <= {limit:.0f}, got {sections[a]}")
    return [np.flatnonzero(axis == a).astype(np.int64) for a in range(n)]


def _axes_angles(
    head_dim: Any,
    rule: _Rule,
    sections: tuple[int, ...],
    section_layout: str,
    lo: list[Any],
    hi: list[Any],
) -> tuple[np.ndarray, float, _kernel.RopeAxes]:
    """(frequencies in column order, attention factor, compiled axes) of a multi-axis
    RoPE for positions whose axis a spans lo[a] .. hi[a] (hi < lo: no tokens), every
    argument checked."""
    given = head_dim
    head_dim = as_int(head_dim, "head_dim", minimum=2, maximum=2**31)
    n = len(sections)
    nf = sum(sections)
    cols = None
    if _per_axis_rules(rule.rope_parameters):
        rules = list(rule.rope_parameters)
        if rule.inv_freq is not None:
            raise ValueError("give rope_parameters or inv_freq, not both")
        if len(rules) != n:
            raise ValueError(
                f"rope_parameters must hold one rule per axis ({n} for sections="
                f"{list(sections)}), got {len(rules)}"
            )
        if 2 * nf > head_dim:  # (here the sections give nf: refused before arrays of nf)
            try:  # (the library names a section out of range; then the sum is too large)
                _axis_columns(sections, section_layout, head_dim // 2)
            except ValueError:
                if _kernel._last_error()[2] >= 0:
                    raise
            raise ValueError(
                f"{nf} frequencies rotate {2 * nf} dims, more than head_dim={head_dim}"
            )
        cols = _axis_columns(sections, section_layout)
        w = np.empty(nf, np.float64)
        factors = []
        for a, params in enumerate(rules):
            if not isinstance(params, (Mapping, type(None))):
                raise TypeError(
                    f"rope_parameters[{a}] must be a mapping (the rule of axis {a}), got "
                    f"{type(params).__name__}"
                )
            if sections[a] == 0:
                continue
            try:
                wa, fa = rope_frequencies(
                    2 * sections[a],
                    params,
                    max_position_embeddings=rule.max_position_embeddings,
                    seq_len=_length(hi[a]) if hi[a] >= lo[a] else None,
                    precision=rule.precision,
                )
            except (TypeError, ValueError) as exc:
                raise type(exc)(f"rope_parameters[{a}] (axis {a}): {exc}") from None
            if wa.size != sections[a]:
                raise ValueError(
                    f"rope_parameters[{a}] gives {wa.size} frequencies for sections[{a}]="
                    f"{sections[a]} (a partial_rotary_factor below 1 does not apply per axis)"
                )
            w[cols[a]] = wa
            factors.append(fa)
        attention = factors[0] if factors else 1.0
        if rule.attention_factor is None and len(set(factors)) > 1:
            raise ValueError(
                f"the rules of rope_parameters have different attention factors {factors}; "
                "give attention_factor (one for all frequencies)"
            )
    elif rule.inv_freq is not None:
        if rule.rope_parameters is not None:
            raise ValueError("give rope_parameters or inv_freq, not both")
        w = _as_frequencies(rule.inv_freq)
        attention = 1.0
    else:
        top = max(hi)
        w, attention = rope_frequencies(
            head_dim,
            rule.rope_parameters,
            max_position_embeddings=rule.max_position_embeddings,
            seq_len=_length(top) if hi[0] >= lo[0] else None,
            precision=rule.precision,
        )
    if 2 * w.size > head_dim:
        raise ValueError(
            f"{w.size} frequencies rotate {2 * w.size} dims, more than head_dim={head_dim}"
        )
    # (a rule per axis is not one rule's entry: the frequencies' own)
    args = None if cols is not None else _rule_args(rule, given, nf)
    if cols is None:  # (the library's check that the sections sum to w's frequencies)
        cols = _axis_columns(sections, section_layout, w.size)
    if rule.attention_factor is not None:
        attention = as_base(rule.attention_factor, "attention_factor")
    return w, attention, _rope_axes(w, sections, section_layout, lo, hi, args)


def _rope_axes(
    w: np.ndarray,
    sections: tuple[int, ...],
    section_layout: str,
    lo: list[float],
    hi: list[float],
    args: _kernel.RopeArgs | None = None,
) -> _kernel.RopeAxes:
    """The compiled axes (the library's plan of the frequencies and sections, which
    its cache keeps: the rule's entry with ``args``, see _rule_args), the positions of
    each axis checked against its exact reduction."""
    axes = _kernel.RopeAxes(w, sections, SECTION_LAYOUTS.index(section_layout), args)
    for a, limit in enumerate(axes.max_positions):
        if sections[a]:
            _kernel.rope_check_range(lo[a], hi[a], limit, a)
    return axes


def _axes_positions(
    positions: Any, sections: Any, section_layout: Any, batch: int = -1, seq: int = -1
) -> tuple:
    """(sections, section_layout, positions as int64 or float64 of shape (..., n_axes),
    each axis's smallest and largest coordinate) after the library's checks
    (kernel.rope_check_axes_tokens; ``seq``: a rotation's batch x seq tokens)."""
    sections = _as_sections(sections)
    section_layout = as_choice(section_layout, "section_layout", SECTION_LAYOUTS)
    if positions is None:
        raise ValueError("sections needs positions of shape (..., n_axes)")
    pos = _as_rope_positions(positions)
    what = f" for sections={list(sections)} (one coordinate per axis)"
    lo, hi = _kernel.rope_check_axes_tokens(pos, len(sections), batch, seq, what)
    return sections, section_layout, pos, lo, hi


def _rope_cache_axes(
    given: tuple[Any, ...], accurate: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """rope_cache with multi-axis positions (``sections`` given): ``given``, its
    arguments as kernel.rope_cache_axes_fast takes them; ``accurate``: its
    correctly_rounded."""
    (head_dim, rope_parameters, seq_len, offset, positions, sections, section_layout, layout,
     dtype, max_position_embeddings, precision, inv_freq, attention_factor, out,
     num_threads) = given  # fmt: skip
    if sections is None:
        raise TypeError(
            "rope_parameters as a list of rules (one per axis) needs sections= "
            "(multi-axis positions)"
        )
    layout = as_choice(layout, "layout", ROPE_LAYOUTS)
    nthreads = as_num_threads(num_threads)
    explicit = None if dtype is None else as_float_dtype(dtype, bits_ok=out is not None)
    if seq_len is not None or not (np.ndim(offset) == 0 and offset == 0):
        raise ValueError(
            "seq_len and offset do not apply with sections (multi-axis positions); give "
            "every token's coordinates in positions"
        )
    sections, section_layout, pos, lo, hi = _axes_positions(positions, sections, section_layout)
    rule = _Rule(rope_parameters, inv_freq, attention_factor, max_position_embeddings, precision)
    w, attention, axes = _axes_angles(head_dim, rule, sections, section_layout, lo, hi)
    flat = pos.reshape(-1, len(sections))

    def fill(view: np.ndarray, bf16: bool) -> None:
        _kernel.rope_table_axes(axes, view, flat, nthreads, bf16, accurate, attention)

    result = _write_caches(
        pos.shape[:-1], w.size, attention, fill, layout, explicit, out, accurate
    )
    _plan(rule, head_dim, axes)  # (a call that failed plans nothing)
    return result


def _rotate_axes(
    views: list[np.ndarray],
    sa: int,
    seq: int,
    batch: int,
    head_dim: int,
    rope_parameters: Any,
    offset: Any,
    positions: Any,
    sections: Any,
    section_layout: Any,
    layout: str,
    max_position_embeddings: Any,
    precision: Any,
    inv_freq: Any,
    attention_factor: Any,
    nthreads: int,
) -> None:
    """apply_rope's rotation with multi-axis positions (q, k checked by the caller)."""
    if sections is None:
        raise TypeError(
            "rope_parameters as a list of rules (one per axis) needs sections= "
            "(multi-axis positions)"
        )
    if not (np.ndim(offset) == 0 and offset == 0):
        raise ValueError(
            "offset does not apply with sections (multi-axis positions); add it to positions"
        )
    sections, section_layout, pos, lo, hi = _axes_positions(
        positions, sections, section_layout, batch, seq
    )
    pos = _unaliased(pos, views)
    if pos.ndim == 2:
        pos = pos[None]
    rule = _Rule(rope_parameters, inv_freq, attention_factor, max_position_embeddings, precision)
    w, attention, axes = _axes_angles(head_dim, rule, sections, section_layout, lo, hi)
    if pos.size:
        check_table_size(pos.shape[0] * seq, 2 * w.size, 8, working_copies=2)
        pair = _kernel_pair(views)
        if pair is not None:
            x, x_bf16, other, other_bf16 = pair
            half = layout == "half"
            _kernel.rope_rotate(
                x,
                axes,
                sa,
                0,
                None,
                np.ascontiguousarray(pos),
                half,
                attention,
                nthreads,
                x_bf16,
                other,
                other_bf16,
            )
    _plan(rule, head_dim, axes)  # (a call that failed plans nothing)
