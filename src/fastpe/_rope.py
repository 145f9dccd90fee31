"""Rotary position embedding (RoPE) frequencies: the published families.

The rules of Hugging Face transformers' ``ROPE_INIT_FUNCTIONS`` (``default``,
``linear``, ``dynamic``, ``yarn``, ``longrope``, ``llama3``) with their parameters
and defaults, as a function of the model's ``rope_parameters`` (``rope_scaling``)
dictionary.  The rules themselves are the C library's (lib/src/rope_rules.c): in
float32, operation by operation as the framework evaluates it (the frequencies a
checkpoint was trained with), or in float64, the exact formula rounded once.  This
module checks the Python arguments, names them in errors, and builds the caches.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping, Sequence
from typing import Any, Literal, NamedTuple

import numpy as np

from . import kernel as _kernel
from ._api import _as_positions
from ._conventions import kernel_spec
from ._validate import (
    MAX_SCALE,
    SUPPORTED,
    _is_torch_bfloat16,
    as_base,
    as_bool,
    as_choice,
    as_finite,
    as_float_dtype,
    as_int,
    as_num_threads,
    as_out_array,
    check_out,
    check_table_size,
    dtype_name,
    is_bfloat16,
    is_output_dtype,
    kernel_view,
)

ROPE_TYPES = ("default", "linear", "dynamic", "yarn", "longrope", "llama3")
ROPE_LAYOUTS: tuple[Literal["half", "interleaved"], ...] = ("half", "interleaved")
SECTION_LAYOUTS: tuple[Literal["contiguous", "interleaved"], ...] = ("contiguous", "interleaved")
#: The most coordinates a token's position may have (the kernel's bound).
MAX_AXES = 64

# The keys each rule reads (besides rope_type, rope_theta, partial_rotary_factor).
_KEYS = {
    "default": (),
    "linear": ("factor",),
    "dynamic": ("factor",),
    "yarn": (
        "factor",
        "attention_factor",
        "beta_fast",
        "beta_slow",
        "mscale",
        "mscale_all_dim",
        "original_max_position_embeddings",
        "truncate",
    ),
    "longrope": (
        "factor",
        "attention_factor",
        "short_factor",
        "long_factor",
        "original_max_position_embeddings",
    ),
    "llama3": (
        "factor",
        "low_freq_factor",
        "high_freq_factor",
        "original_max_position_embeddings",
    ),
}
_COMMON = ("rope_type", "type", "rope_theta", "partial_rotary_factor")


def rope_frequencies(
    head_dim: int,
    rope_parameters: Mapping[str, Any] | None = None,
    *,
    max_position_embeddings: int | None = None,
    seq_len: int | None = None,
    precision: Literal["float32", "float64"] = "float32",
) -> tuple[np.ndarray, float]:
    """The inverse frequencies and attention factor of a RoPE family.

    Parameters
    ----------
    head_dim : int
        Width of one attention head. Only the first ``rotary_dim =
        int(head_dim * partial_rotary_factor)`` dimensions rotate (an even number).
    rope_parameters : mapping, optional
        A transformers config's ``rope_parameters`` (formerly ``rope_scaling``)
        dictionary: ``rope_type`` (or ``type``) one of ``"default"``, ``"linear"``,
        ``"dynamic"``, ``"yarn"``, ``"longrope"``, ``"llama3"``; ``rope_theta``
        (10000.0); ``partial_rotary_factor`` (1.0); and the family's own keys:
        ``factor``; ``low_freq_factor``, ``high_freq_factor`` (llama3);
        ``beta_fast`` (32), ``beta_slow`` (1), ``mscale``, ``mscale_all_dim``,
        ``truncate`` (True) (yarn); ``short_factor``, ``long_factor`` (longrope);
        ``attention_factor`` (yarn, longrope); ``original_max_position_embeddings``
        (yarn, longrope, llama3; defaults to ``max_position_embeddings``).
        An unknown key is an error (it could change the frequencies). ``None``:
        the default rule with theta 10000. The numbers must be finite and > 0
        (``mscale``, ``mscale_all_dim``: finite; 0 or None, as in transformers,
        means absent), ``truncate`` a bool, ``original_max_position_embeddings``
        an int, ``high_freq_factor >= low_freq_factor``.
    max_position_embeddings : int, optional
        The config's ``max_position_embeddings``: needed by ``dynamic``, and by
        yarn/longrope/llama3 when ``original_max_position_embeddings`` or (yarn,
        longrope) ``factor`` is not given.
    seq_len : int, optional
        The current sequence length, for the rules that depend on it: ``dynamic``
        (a larger base beyond ``max_position_embeddings``) and ``longrope``
        (``long_factor`` beyond ``original_max_position_embeddings``).
    precision : {"float32", "float64"}
        ``"float32"`` (default): the frequencies as transformers computes them, in
        float32, step by step -- the values a checkpoint was trained with, so a
        model sees the angles it learned. ``"float64"``: the same formula in
        float64, for new models or to study the framework's rounding.
        Either way the result is float64, and fastpe never rounds the angles
        ``k * inv_freq`` built from it. The float32 steps are torch's, in its
        order (``scalar / tensor`` is ``reciprocal(tensor) * scalar``), with the
        correctly rounded power: entries differ from transformers' only where
        torch's float32 power is one ulp off (docs/rope.md).

    Returns
    -------
    inv_freq : ndarray of float64, shape (rotary_dim // 2,)
        Radians per position of each rotated pair.
    attention_factor : float
        What the family multiplies cos and sin by (1.0 where it has none).

    Raises
    ------
    TypeError, ValueError
        A parameter of the wrong type or value, named as written
        (``rope_parameters['beta_fast']``) with its value; also parameters, each
        valid, whose frequencies are not finite or exceed 1e280 (a tiny
        ``rope_theta`` or ``factor`` overflows, in float32 first).

    Examples
    --------
    >>> import fastpe
    >>> w, a = fastpe.rope_frequencies(128, {"rope_type": "llama3", "rope_theta": 500000.0,
    ...     "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
    ...     "original_max_position_embeddings": 8192})
    >>> w.shape, a
    ((64,), 1.0)
    """
    head_dim = as_int(head_dim, "head_dim", minimum=2, maximum=2**31)
    if not isinstance(rope_parameters, (Mapping, type(None))):
        raise TypeError(
            "rope_parameters must be a mapping (a config's rope_parameters), "
            f"got {type(rope_parameters).__name__}"
        )
    params = dict(rope_parameters or {})
    rope_type = as_choice(_rope_type(params), "rope_type", ROPE_TYPES)
    unknown = sorted(set(params) - set(_COMMON) - set(_KEYS[rope_type]))
    if unknown:
        raise ValueError(
            f"rope_parameters has keys that rope_type={rope_type!r} does not take: {unknown}"
        )
    precision = as_choice(precision, "precision", ("float32", "float64"))
    p = _Params(params, rope_type, precision)
    theta = p.positive("rope_theta", 10000.0)
    prf = p.positive("partial_rotary_factor", 1.0, maximum=1.0)
    dim = int(head_dim * prf)
    if dim < 2 or dim % 2:
        raise ValueError(
            f"the rotary dimension int(head_dim * partial_rotary_factor) = {dim} "
            "must be even and at least 2"
        )
    # a handful of float64 arrays of dim/2 entries are alive at once
    check_table_size(1, dim // 2, 8, working_copies=8)
    mpe = (
        None
        if max_position_embeddings is None
        else as_int(max_position_embeddings, "max_position_embeddings", minimum=1)
    )
    if seq_len is not None:
        seq_len = as_int(seq_len, "seq_len", minimum=0)
    fields: dict[str, Any] = {
        "rope_type": ROPE_TYPES.index(rope_type),
        "precision": 0 if precision == "float32" else 1,  # FASTPE_PRECISION_*
        "rope_theta": theta,
    }
    if "partial_rotary_factor" in params:
        fields["partial_rotary_factor"] = prf
    # the lengths, for the rules that read them (the library's are int64)
    if mpe is not None and rope_type not in ("default", "linear"):
        fields["max_position_embeddings"] = as_int(
            mpe, "max_position_embeddings", maximum=_INT64_MAX
        )
    if seq_len is not None and rope_type == "dynamic":
        fields["seq_len"] = as_int(seq_len, "seq_len", maximum=_INT64_MAX)
    elif seq_len is not None and rope_type == "longrope":
        fields["seq_len"] = min(seq_len, _INT64_MAX)  # (only compared with a length)
    if rope_type in ("yarn", "longrope", "llama3"):
        v = params.get("original_max_position_embeddings", mpe)
        if v is None:
            raise ValueError(
                f"rope_type={rope_type!r} needs original_max_position_embeddings "
                "(in rope_parameters) or max_position_embeddings"
            )
        old_len = as_int(v, p.name("original_max_position_embeddings"), minimum=1)
        fields["original_max_position_embeddings"] = old_len
    if rope_type in ("linear", "dynamic", "llama3"):
        fields["factor"] = p.positive("factor")
    if rope_type == "llama3":
        low = fields["low_freq_factor"] = p.positive("low_freq_factor")
        high = fields["high_freq_factor"] = p.positive("high_freq_factor")
        if high < low:
            raise ValueError(
                f"rope_type='llama3' needs {p.name('high_freq_factor')} >= "
                f"{p.name('low_freq_factor')}, got {high!r} and {low!r}"
            )
    elif rope_type == "dynamic":
        if mpe is None:
            raise ValueError("rope_type='dynamic' needs max_position_embeddings")
        if dim == 2:  # the base's exponent d/(d-2) is undefined
            raise ValueError("rope_type='dynamic' needs a rotary dimension of at least 4, got 2")
    elif rope_type in ("yarn", "longrope"):
        factor = p.optional("factor")
        if factor is None:
            if mpe is None:
                raise ValueError(
                    f"rope_type={rope_type!r} needs {p.name('factor')} or max_position_embeddings"
                )
            # (the library takes the same ratio itself)
            p.used["factor"] = as_base(
                mpe / old_len, "max_position_embeddings / original_max_position_embeddings"
            )
        else:
            fields["factor"] = factor
        names: tuple[str, ...] = ("attention_factor",)
        if rope_type == "yarn":
            names += ("mscale", "mscale_all_dim", "beta_fast", "beta_slow")
        for key in names:
            # transformers reads mscale and mscale_all_dim by truth value: 0 (or
            # None) means absent
            v = p.optional(key, positive=key not in ("mscale", "mscale_all_dim"))
            if v is not None:
                fields[key] = v
        if rope_type == "yarn":
            fields["truncate"] = int(p.flag("truncate", True))
        else:
            for key in ("short_factor", "long_factor"):
                fields[key] = np.array(p.factors(key, dim // 2), dtype=np.float64)
    return _rule(head_dim, fields, p, dim)


def _rule(head_dim: int, fields: dict[str, Any], p: _Params, dim: int) -> tuple[np.ndarray, float]:
    """The library's rule for checked fields, its refusals as the caller's keys."""
    err, inv, attention, nf, why = _kernel._rope_rule(head_dim, fields)
    if err == 0 and inv is not None:
        return inv[:nf], attention
    reason, index, value = why or (0, -1, math.nan)
    rt = p.rope_type
    if reason == _ATTENTION and rt == "longrope":
        raise p.refuse(
            "no attention factor sqrt(1 + ln(factor) / ln(original_max_position_embeddings)) "
            "for original_max_position_embeddings=1 (give attention_factor)",
            "factor",
        )
    if reason == _ATTENTION:
        both = bool(p.used.get("mscale") and p.used.get("mscale_all_dim"))
        names = ("factor", "mscale", "mscale_all_dim") if both else ("factor",)
        raise p.refuse(f"an attention factor of {value!r} (it must be finite and > 0)", *names)
    if reason == _RAMP:
        raise p.refuse(
            "a ramp d * ln(original_max_position_embeddings / (2 pi beta)) / (2 ln theta) "
            f"that is not finite (original_max_position_embeddings="
            f"{fields['original_max_position_embeddings']}, d={dim})",
            "rope_theta",
            "beta_fast",
            "beta_slow",
        )
    if reason == _BASE:
        mpe = fields["max_position_embeddings"]
        L = max(fields.get("seq_len", mpe), mpe)
        raise p.refuse(
            f"a base theta * (factor * L / max_position_embeddings - (factor - 1)) "
            f"** (d / (d - 2)) that is not a finite number > 0 (L={L}, "
            f"max_position_embeddings={mpe}, d={dim})",
            "rope_theta",
            "factor",
        )
    if reason == _EDGE:
        low = p.used["low_freq_factor"]
        raise ValueError(
            f"rope_type='llama3' with {p.name('low_freq_factor')} == "
            f"{p.name('high_freq_factor')} ({low!r}) puts a wavelength exactly on "
            f"original_max_position_embeddings / low_freq_factor "
            f"({fields['original_max_position_embeddings'] / low!r}), where the blend is 0/0"
        )
    if reason == _FREQUENCY:
        if rt == "longrope":
            keys: tuple[str, ...] = ("rope_theta", _longrope_list(fields))
        else:
            keys = _FREQUENCY_KEYS[rt]
        raise p.refuse(
            f"frequencies that are not finite numbers in [0, {MAX_FREQUENCY:g}] "
            f"(index {index}: {value!r} in precision={p.precision!r})",
            *keys,
        )
    # the parameters were checked above: a code here is a contradiction between
    # the two, reported as it is
    raise ValueError(f"rope_parameters refused by the library's rule (code {err})")


def _longrope_list(fields: dict[str, Any]) -> str:
    """The list longrope uses: long_factor beyond the original length."""
    long = fields.get("seq_len", 0) > fields["original_max_position_embeddings"]
    return "long_factor" if long else "short_factor"


# The keys behind each rule's frequencies (named when they are refused).
_FREQUENCY_KEYS = {
    "default": ("rope_theta",),
    "linear": ("rope_theta", "factor"),
    "dynamic": ("rope_theta", "factor"),
    "yarn": ("rope_theta", "factor"),
    "llama3": ("rope_theta", "factor", "low_freq_factor", "high_freq_factor"),
}


_INT64_MAX = 2**63 - 1

# Why the library's rule refused (pe_crmath.h, PE_RULE_*).
_ATTENTION, _RAMP, _BASE, _FREQUENCY, _EDGE = 1, 2, 3, 4, 5


# The largest frequency the kernel takes (it splits 2**27 * w and multiplies by
# positions), the bound of every knob that scales the frequencies.
MAX_FREQUENCY = MAX_SCALE


class _Params:
    """One rule's rope_parameters, read with every check in one place: a refusal
    names the key as the caller wrote it (``rope_parameters['beta_fast']``) and
    the value."""

    def __init__(self, params: dict[str, Any], rope_type: str, precision: str) -> None:
        self.params = params
        self.rope_type = rope_type
        self.precision = precision
        self.used: dict[str, Any] = {}  # the value each key was read as

    @staticmethod
    def name(key: str) -> str:
        return f"rope_parameters[{key!r}]"

    def positive(self, key: str, default: Any = None, *, maximum: float | None = None) -> float:
        """A finite number > 0; ``default`` where the key is absent (required without)."""
        v = self.params.get(key, default)
        if v is None:
            raise ValueError(f"rope_type={self.rope_type!r} needs {self.name(key)}")
        self.used[key] = v = as_base(v, self.name(key), maximum=maximum)
        return v

    def optional(self, key: str, positive: bool = True, default: Any = None) -> Any:
        """A finite number (> 0 when ``positive``), or ``default`` where the key is
        absent or None."""
        v = self.params.get(key)
        if v is None:
            self.used[key] = default
            return default
        self.used[key] = v = (as_base if positive else as_finite)(v, self.name(key))
        return v

    def flag(self, key: str, default: bool) -> bool:
        self.used[key] = v = as_bool(self.params.get(key, default), self.name(key))
        return v

    def factors(self, key: str, n: int) -> list[float]:
        """A list of n finite numbers > 0 (longrope's per-pair factors)."""
        v = self.params.get(key)
        if not isinstance(v, Sequence) or isinstance(v, (str, bytes)):
            raise TypeError(
                f"{self.name(key)} must be a list of {n} numbers, got {type(v).__name__}"
            )
        if len(v) != n:
            raise ValueError(
                f"{self.name(key)} must have rotary_dim / 2 = {n} entries, got {len(v)}"
            )
        self.used[key] = out = [as_base(x, f"{self.name(key)}[{i}]") for i, x in enumerate(v)]
        return out

    def refuse(self, what: str, *keys: str) -> ValueError:
        """The refusal of values that are each valid but give ``what`` together."""
        given = ", ".join(f"{self.name(k)}={self.used.get(k, self.params.get(k))!r}" for k in keys)
        return ValueError(f"rope_type={self.rope_type!r} with {given} gives {what}")


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
    if (
        xpos_scale_base is not None
        or xpos_center is not None
        or (type(section_layout) is str and section_layout == "mixed")
        or inv_freq is not None
    ) and _rope_heads.wants_tables(inv_freq, section_layout, xpos_scale_base, xpos_center):
        return _rope_heads.cache(
            head_dim, rope_parameters, seq_len, offset, positions, sections, section_layout,
            layout, dtype, max_position_embeddings, precision, inv_freq, attention_factor, out,
            num_threads, xpos_scale_base, xpos_center,
        )  # fmt: skip
    if sections is None and not (type(section_layout) is str and section_layout == "contiguous"):
        as_choice(section_layout, "section_layout", (*SECTION_LAYOUTS, "mixed"))  # (a typo)
    if sections is not None or (
        rope_parameters is not None
        and type(rope_parameters) is not dict
        and _per_axis_rules(rope_parameters)
    ):
        done = _kernel.rope_cache_axes_fast(
            head_dim,
            rope_parameters,
            seq_len,
            offset,
            positions,
            sections,
            section_layout,
            layout,
            dtype,
            max_position_embeddings,
            precision,
            inv_freq,
            attention_factor,
            out,
            num_threads,
        )
        if done is not None:  # sections and frequencies already planned: filled
            return done
        return _rope_cache_axes(
            head_dim,
            rope_parameters,
            seq_len,
            offset,
            positions,
            sections,
            section_layout,
            layout,
            dtype,
            max_position_embeddings,
            precision,
            inv_freq,
            attention_factor,
            out,
            num_threads,
        )
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
    )
    if done is not None:  # the common arguments, frequencies already planned: filled
        return done
    layout = as_choice(layout, "layout", ROPE_LAYOUTS)
    nthreads = as_num_threads(num_threads)
    explicit = None if dtype is None else as_float_dtype(dtype, bits_ok=out is not None)
    if (seq_len is None) == (positions is None):
        raise ValueError("give either seq_len (with offset) or positions")
    if positions is None:
        seq_len = as_int(seq_len, "seq_len", minimum=0, maximum=2**62)
        offset = as_int(offset, "offset", minimum=-(2**62), maximum=2**62)
        pos = None
        shape: tuple[int, ...] = (seq_len,)
        lo, hi = offset, offset + seq_len - 1
    else:
        if offset != 0:
            raise ValueError("offset applies to seq_len; add it to positions instead")
        pos = _as_rope_positions(positions)
        shape = pos.shape
        lo, hi = (pos.min().item(), pos.max().item()) if pos.size else (0, -1)
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
            **where,
        )

    result = _write_caches(shape, w.size, attention, fill, layout, explicit, out)
    _plan(rule, head_dim, enc, attention, w.size)  # (a call that failed plans nothing)
    return result


def _write_caches(
    shape: tuple[int, ...],
    nf: int,
    attention: float,
    fill: Any,
    layout: str,
    explicit: np.dtype | None,
    out: Any,
) -> tuple[np.ndarray, np.ndarray]:
    """rope_cache's caches of ``shape`` tokens: ``fill(view, bfloat16)`` writes their
    [sin | cos] rows of nf frequencies into a C-contiguous table, which is then
    scaled by the attention factor and laid out into new arrays or ``out``."""
    full = (*shape, 2 * nf)
    if out is None:
        dt = explicit if explicit is not None else np.dtype(np.float32)
        check_table_size(math.prod(shape), 2 * nf, 8, working_copies=3)  # + the [sin | cos] table
        cos, sin = np.empty(full, dt), np.empty(full, dt)
    else:
        if not isinstance(out, tuple) or len(out) != 2:
            raise TypeError("out must be a (cos, sin) pair of arrays")
        cos, sin = (check_out(o, full, explicit) for o in out)
        if cos.dtype != sin.dtype:
            raise TypeError(
                f"out's cos and sin must have one dtype, got {cos.dtype} and {sin.dtype}"
            )
        _disjoint(cos, sin, "out's cos and sin")
        check_table_size(math.prod(shape), 2 * nf, 8, working_copies=1)
    # [sin | cos] of the nf frequencies, each entry rounded once into the table's
    # dtype (float64 when the attention factor is still to be applied)
    dt = cos.dtype if attention == 1.0 else np.dtype(np.float64)
    table = np.empty((math.prod(shape), 2 * nf), dt)
    if table.shape[0]:
        fill(*kernel_view(table))
    if attention != 1.0:
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


def _rope_type(params: Mapping[str, Any]) -> Any:
    return params.get("rope_type", params.get("type", "default"))


class _Rule(NamedTuple):
    """The frequency arguments of rope_cache and apply_rope, as given."""

    rope_parameters: Any  # one rule (a mapping or None), or one per axis
    inv_freq: Any
    attention_factor: float | None
    max_position_embeddings: int | None
    precision: Any


def _angles(
    head_dim: int, rule: _Rule, lo: float, hi: float
) -> tuple[np.ndarray, float, _kernel.Encoder]:
    """(frequencies, attention factor, compiled encoding) for positions lo .. hi
    (none when hi < lo), every argument checked.  The rule sees the longest
    sequence hi + 1, as transformers' rotary modules do."""
    head_dim = as_int(head_dim, "head_dim", minimum=2, maximum=2**31)
    if rule.inv_freq is not None:
        if rule.rope_parameters is not None:
            raise ValueError("give rope_parameters or inv_freq, not both")
        w = _as_frequencies(rule.inv_freq)
        attention = 1.0
        if 2 * w.size > head_dim:
            raise ValueError(
                f"{w.size} frequencies rotate {2 * w.size} dims, more than head_dim={head_dim}"
            )
    else:
        w, attention = rope_frequencies(
            head_dim,
            rule.rope_parameters,
            max_position_embeddings=rule.max_position_embeddings,
            seq_len=max(_length(hi), 0) if hi >= lo else None,
            precision=rule.precision,
        )
    if rule.attention_factor is not None:
        attention = as_base(rule.attention_factor, "attention_factor")
    enc = _encoder(w)
    largest = max(abs(lo), abs(hi)) if hi >= lo else 0
    if largest > enc.max_position:
        raise ValueError(
            f"positions must stay within +-{int(enc.max_position)} for these "
            f"frequencies (exact angle reduction); got up to {largest}"
        )
    return w, attention, enc


def _length(hi: float) -> int:
    """The sequence length a rule sees for the largest position ``hi`` (int or float)."""
    return math.floor(hi) + 1


def _as_rope_positions(positions: Any) -> np.ndarray:
    """RoPE positions: integer ids as int64 (see _as_position_ids), or a non-empty
    float array as C-contiguous float64 (fractional grids), finite."""
    if positions is not None and not isinstance(positions, np.ma.MaskedArray):
        try:
            arr = np.asarray(positions)
        except Exception:  # ragged nested lists: explained by _as_position_ids
            arr = None
        if arr is not None and arr.dtype.kind == "f" and arr.size:
            real = _as_positions(arr, "positions")
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
    if arr.dtype.kind == "u" and arr.size and int(arr.max()) > 2**62:
        raise ValueError(f"{name} must stay below 2**62, got {int(arr.max())}")
    return arr.astype(np.int64, order="C", copy=False)  # (0-d stays 0-d)


#: np.shares_memory's work bound: enough for any q/k or cos/sin pair of a real
#: model (a fused QKV buffer's views take a few steps); past it the pair is refused.
_OVERLAP_WORK = 1 << 16
_TOO_HARD: type[Exception] = getattr(np, "exceptions", np).TooHardError  # (NumPy < 1.25: np.)


def _disjoint(a: np.ndarray, b: np.ndarray, what: str) -> None:
    """Refuse two outputs that share an element (decided exactly: disjoint views of
    one buffer, such as q and k of a fused QKV projection, are fine)."""
    try:
        # (NumPy's stubs list only -1 and 0, but a positive bound is documented)
        shared = np.shares_memory(a, b, max_work=_OVERLAP_WORK)  # type: ignore[arg-type]
    except _TOO_HARD:
        raise ValueError(
            f"{what} may share memory (their strides are too irregular to decide it "
            "quickly); pass copies"
        ) from None
    if shared:
        raise ValueError(f"{what} must not share memory")


def _unaliased(arr: np.ndarray, outputs: list[np.ndarray]) -> np.ndarray:
    """``arr`` (an input read while the outputs are written), copied when it may
    share memory with any of them: q is rotated before k's angles are computed."""
    if any(np.may_share_memory(arr, o) for o in outputs):
        return arr.copy()
    return arr


def _as_frequencies(inv_freq: Any) -> np.ndarray:
    """Frequencies as float64, converted exactly: any real dtype, bfloat16 included
    (ml_dtypes' arrays, PyTorch tensors: a model's inv_freq buffer can be bfloat16)."""
    if _is_torch_bfloat16(inv_freq):
        inv_freq = inv_freq.detach().float()  # (exact: bfloat16 is float32's top half)
    elif getattr(inv_freq, "requires_grad", False):
        inv_freq = inv_freq.detach()  # (a learned parameter: its values)
    try:
        w = np.asarray(inv_freq)
    except Exception as exc:
        raise TypeError(f"inv_freq must be a 1-D array of frequencies ({exc})") from None
    if not (w.dtype.kind in "fiu" or is_bfloat16(w.dtype)) or w.ndim != 1 or w.size < 1:
        raise TypeError(
            f"inv_freq must be a 1-D array of real frequencies, got dtype "
            f"{w.dtype} and shape {w.shape}"
        )
    w = w.astype(np.float64)
    bad = ~(np.isfinite(w) & (w >= 0) & (w <= MAX_FREQUENCY))
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(
            f"inv_freq must be finite, >= 0 and <= {MAX_FREQUENCY:g}, got inv_freq[{i}] = "
            f"{float(w[i])!r}"
        )
    check_table_size(1, w.size, 8, working_copies=8)
    return w


def _encoder(w: np.ndarray) -> _kernel.Encoder:
    """The compiled encoding of a list of frequencies ([sin | cos] rows), cached
    by value like every encoding."""
    key = ("rope", w.tobytes())
    enc = _kernel.encoders.get(key)
    if enc is None:
        nf = int(w.size)
        spec = kernel_spec(2 * nf, nf, layout=1, ns=nf, c_off=nf, nc=nf, frequencies=w)
        enc = _kernel.remember(key, _kernel.Encoder(spec))
    return enc


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
    if (
        xpos_scale_base is not None
        or xpos_center is not None
        or (type(section_layout) is str and section_layout == "mixed")
        or inv_freq is not None
    ) and _rope_heads.wants_tables(inv_freq, section_layout, xpos_scale_base, xpos_center):
        return _rope_heads.rotate(
            q, k, rope_parameters=rope_parameters, head_dim=head_dim, offset=offset,
            positions=positions, sections=sections, section_layout=section_layout,
            seq_axis=seq_axis, layout=layout, max_position_embeddings=max_position_embeddings,
            precision=precision, inv_freq=inv_freq, attention_factor=attention_factor,
            num_threads=num_threads, xpos_scale_base=xpos_scale_base, xpos_center=xpos_center,
        )  # fmt: skip
    if sections is None and not (type(section_layout) is str and section_layout == "contiguous"):
        # (it has no meaning without sections, but a misspelling is still refused)
        as_choice(section_layout, "section_layout", (*SECTION_LAYOUTS, "mixed"))
    # (the usual spellings decided without a call: a decoding step takes microseconds)
    multi = sections is not None or (
        rope_parameters is not None
        and type(rope_parameters) is not dict
        and _per_axis_rules(rope_parameters)
    )
    if multi:
        done = _kernel.rope_apply_axes(
            q,
            k,
            rope_parameters,
            head_dim,
            offset,
            positions,
            sections,
            section_layout,
            seq_axis,
            layout,
            max_position_embeddings,
            precision,
            inv_freq,
            attention_factor,
            num_threads,
        )
    else:
        done = _kernel.rope_apply(
            q,
            k,
            rope_parameters,
            head_dim,
            offset,
            positions,
            seq_axis,
            layout,
            max_position_embeddings,
            precision,
            inv_freq,
            attention_factor,
            num_threads,
        )
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
        parts = [kernel_view(v) for v in views if v.size]
        if parts:
            _kernel.rope_rotate(
                parts[0][0],
                enc,
                sa,
                off_scalar,
                offsets,
                pos,
                layout == "half",
                attention,
                nthreads,
                parts[0][1],
                parts[1][0] if len(parts) > 1 else None,
                len(parts) > 1 and parts[1][1],
            )
    _plan(rule, head_dim, enc, attention, w.size)  # (a call that failed plans nothing)
    return q if k is None else (q, k)


def _rope_views(q: Any, k: Any, head_dim: Any, seq_axis: Any) -> tuple:
    """(q and k as checked ndarray views, head_dim, sequence axis, its length, batch)."""
    views = [_rope_target(q, "q")]
    if k is not None:
        views.append(_rope_target(k, "k"))
        _disjoint(views[0], views[1], "q and k")
    qv = views[0]
    if head_dim is None:
        head_dim = qv.shape[-1]
    head_dim = as_int(head_dim, "head_dim", minimum=2, maximum=2**31)
    seq_axis = as_int(seq_axis, "seq_axis")
    for v, name in zip(views, ("q", "k"), strict=False):
        if v.shape[-1] < head_dim:
            raise ValueError(
                f"{name}'s last axis ({v.shape[-1]}) is shorter than head_dim={head_dim}"
            )
        if not -v.ndim <= seq_axis < v.ndim or seq_axis % v.ndim == v.ndim - 1:
            raise ValueError(f"seq_axis={seq_axis} is not an axis of {name} before its last")
    if qv.ndim < 2 or (k is not None and views[1].ndim != qv.ndim):
        raise ValueError(
            "q (and k) must have shape (..., seq, ..., head_dim), the same number of axes"
        )
    sa = seq_axis % qv.ndim
    seq = qv.shape[sa]
    if k is not None and (views[1].shape[sa] != seq or views[1].shape[0] != qv.shape[0]):
        raise ValueError(
            f"q and k must agree on the batch and sequence axes, got {qv.shape} and "
            f"{views[1].shape}"
        )
    batch = qv.shape[0] if sa != 0 else 1
    return views, head_dim, sa, seq, batch


def _token_positions(
    views: list[np.ndarray], seq: int, batch: int, offset: Any, positions: Any
) -> tuple[int, np.ndarray | None, np.ndarray | None, int, int]:
    """Each token's position, ``off_scalar`` or ``offsets[b]``, plus ``pos[b or 0, s]``
    or ``s``: (off_scalar, offsets, pos, lo, hi), hi < lo when there are none."""
    off_scalar, offsets, pos = 0, None, None
    if positions is not None:
        if not (np.ndim(offset) == 0 and offset == 0):
            raise ValueError("offset applies without positions; add it to positions instead")
        pos = _unaliased(_as_rope_positions(positions), views)
        if pos.ndim == 1:
            pos = pos[None]
        if pos.ndim != 2 or pos.shape[1] != seq or pos.shape[0] not in (1, batch):
            raise ValueError(
                f"positions must have shape ({seq},) or ({batch}, {seq}), got "
                f"{np.shape(positions)}"
            )
        lo, hi = (pos.min().item(), pos.max().item()) if pos.size else (0, -1)
    else:
        off = _unaliased(_as_position_ids(offset, "offset"), views)
        if off.ndim > 1 or (off.ndim == 1 and off.shape[0] not in (1, batch)):
            raise ValueError(
                f"offset must be an int or one per batch entry ({batch}), got shape {off.shape}"
            )
        if off.size and int(np.max(np.abs(off))) > 2**62:
            raise ValueError("offset must stay within +-2**62")
        if off.size == 1:
            off_scalar = int(off.reshape(-1)[0])
        elif off.size:
            offsets = off
        lo, hi = (int(off.min()), int(off.max()) + seq - 1) if off.size and seq else (0, -1)
    return off_scalar, offsets, pos, lo, hi


def _plan(rule: _Rule, head_dim: Any, enc: _kernel.Encoder, attention: float, nf: int) -> None:
    """Remember checked frequency arguments for the small-call paths, when their
    frequencies do not depend on the sequence length (and rotate at most
    head_dim dims, which apply_rope's path relies on)."""
    if rule.attention_factor is not None or _rope_type(rule.rope_parameters or {}) in (
        "dynamic",
        "longrope",
    ):
        return
    key = _kernel.rope_plan_key(
        rule.rope_parameters, head_dim, rule.max_position_embeddings, rule.precision, rule.inv_freq
    )
    if key is not None and 2 * nf <= head_dim:  # (a key means an int head_dim)
        _kernel.remember_rope_plan(key, enc, attention)


def _rope_target(x: Any, name: str) -> np.ndarray:
    """A writable ndarray view of q or k whose rows do not overlap."""
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
    if not v.flags.aligned:
        raise ValueError(f"{name} must be aligned to its dtype")
    if v.ndim < 2:
        raise ValueError(f"{name} must have shape (..., seq, ..., head_dim), got {v.shape}")
    if v.size and v.shape[-1] > 1 and v.strides[-1] != v.itemsize:
        raise ValueError(f"{name}'s last axis must be contiguous, got strides {v.strides}")
    # rotated in place, so no two rows may share memory: sorted by stride, each axis
    # must step over everything the axes inside it span (no broadcast axes, no overlap)
    span = v.itemsize * v.shape[-1]
    if v.size == 0:
        return v
    axes = sorted(
        ((abs(st), n) for n, st in zip(v.shape[:-1], v.strides[:-1], strict=True) if n > 1)
    )
    for st, n in axes:
        if st < span:
            raise ValueError(
                f"{name}'s rows overlap (strides {v.strides}): it cannot be rotated in place"
            )
        span = st * (n - 1) + span
    return v


# ---------------------------------------------------------------------------
# Multi-axis positions: each frequency follows one coordinate of its token
# ---------------------------------------------------------------------------


def _per_axis_rules(rope_parameters: Any) -> bool:
    """Whether rope_parameters is a list of rules (one per axis) rather than one rule."""
    if rope_parameters is None or type(rope_parameters) is dict:
        return False  # (the usual spellings, without the slower ABC checks below)
    return isinstance(rope_parameters, Sequence) and not isinstance(
        rope_parameters, (str, bytes, Mapping)
    )


def _as_sections(sections: Any) -> tuple[int, ...]:
    """``sections``: 1 to MAX_AXES integers >= 0 (frequencies per axis)."""
    if isinstance(sections, np.ndarray):
        sections = sections.tolist()
    if not isinstance(sections, Sequence) or isinstance(sections, (str, bytes)):
        raise TypeError(
            f"sections must be a sequence of ints (frequencies per axis), got "
            f"{type(sections).__name__}"
        )
    if not 1 <= len(sections) <= MAX_AXES:
        raise ValueError(f"sections must list 1 to {MAX_AXES} axes, got {len(sections)}")
    return tuple(as_int(v, f"sections[{i}]", minimum=0) for i, v in enumerate(sections))


def _axis_columns(sections: tuple[int, ...], section_layout: str) -> list[np.ndarray]:
    """The frequencies (columns) of each axis, in increasing order."""
    n, nf = len(sections), sum(sections)
    if section_layout == "contiguous":
        ends = np.cumsum((0, *sections))
        return [np.arange(ends[a], ends[a + 1], dtype=np.int64) for a in range(n)]
    # transformers' apply_interleaved_mrope: column i (r = i % n >= 1,
    # i < n * sections[r]) takes axis r, every other column axis 0
    i = np.arange(nf, dtype=np.int64)
    axis = np.zeros(nf, dtype=np.int64)
    for r in range(1, n):
        axis[(i % n == r) & (i < n * sections[r])] = r
    cols = [np.flatnonzero(axis == a).astype(np.int64) for a in range(n)]
    counts = tuple(len(c) for c in cols)
    if counts != sections:
        raise ValueError(
            f"sections={list(sections)} cannot be interleaved over {nf} frequencies: "
            f"the axes would get {list(counts)} (axis r >= 1 needs "
            f"r + n_axes * (sections[r] - 1) < {nf})"
        )
    return cols


def _axes_angles(
    head_dim: Any,
    rule: _Rule,
    sections: tuple[int, ...],
    section_layout: str,
    pos: np.ndarray,
) -> tuple[np.ndarray, float, _kernel.RopeAxes]:
    """(frequencies in column order, attention factor, compiled axes) of a multi-axis
    RoPE for the positions ``pos`` (shape (..., n_axes)), every argument checked."""
    head_dim = as_int(head_dim, "head_dim", minimum=2, maximum=2**31)
    n = len(sections)
    flat = pos.reshape(-1, n)
    if flat.shape[0]:
        lo, hi = flat.min(axis=0).tolist(), flat.max(axis=0).tolist()
    else:
        lo, hi = [0] * n, [-1] * n
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
            seq_len=_length(top) if flat.shape[0] else None,
            precision=rule.precision,
        )
    if 2 * w.size > head_dim:
        raise ValueError(
            f"{w.size} frequencies rotate {2 * w.size} dims, more than head_dim={head_dim}"
        )
    if w.size != nf:
        raise ValueError(
            f"sections must sum to the number of frequencies, rotary_dim / 2 = {w.size}, "
            f"got sections={list(sections)} (sum {nf})"
        )
    if cols is None:
        cols = _axis_columns(sections, section_layout)
    if rule.attention_factor is not None:
        attention = as_base(rule.attention_factor, "attention_factor")
    return w, attention, _rope_axes(w, cols, lo, hi)


def _rope_axes(
    w: np.ndarray, cols: list[np.ndarray], lo: list[float], hi: list[float]
) -> _kernel.RopeAxes:
    """The compiled axes (each axis's frequencies an encoding, cached by value), the
    positions of each axis checked against its exact reduction."""
    encs = []
    for a, c in enumerate(cols):
        enc = _encoder(w[c]) if c.size else None
        largest = max(abs(lo[a]), abs(hi[a])) if hi[a] >= lo[a] else 0
        if enc is not None and largest > enc.max_position:
            raise ValueError(
                f"positions[..., {a}] must stay within +-{int(enc.max_position)} for the "
                f"frequencies of axis {a} (exact angle reduction); got up to {largest}"
            )
        encs.append(enc)
    key = (w.tobytes(), tuple(c.tobytes() for c in cols))
    axes = _AXES.get(key)
    if axes is None:
        axes = _kernel.RopeAxes(tuple(encs), tuple(cols), w.size)
        with _AXES_LOCK:
            _AXES[key] = axes
            while len(_AXES) > _kernel.ENCODERS_MAX:
                del _AXES[next(iter(_AXES))]
    return axes


#: (frequencies, columns of each axis) -> RopeAxes, the most recent ENCODERS_MAX
#: (each holds its axes' encodings, which the encoding cache may drop meanwhile)
_AXES: dict[Any, _kernel.RopeAxes] = {}
_AXES_LOCK = threading.Lock()


def _axes_positions(positions: Any, sections: Any, section_layout: Any) -> tuple:
    """(sections, section_layout, positions as int64 or float64 of shape (..., n_axes))
    checked."""
    sections = _as_sections(sections)
    section_layout = as_choice(section_layout, "section_layout", SECTION_LAYOUTS)
    if positions is None:
        raise ValueError("sections needs positions of shape (..., n_axes)")
    pos = _as_rope_positions(positions)
    if pos.ndim < 1 or pos.shape[-1] != len(sections):
        raise ValueError(
            f"positions must have shape (..., {len(sections)}) for sections={list(sections)} "
            f"(one coordinate per axis), got {pos.shape}"
        )
    return sections, section_layout, pos


def _rope_cache_axes(
    head_dim: Any,
    rope_parameters: Any,
    seq_len: Any,
    offset: Any,
    positions: Any,
    sections: Any,
    section_layout: Any,
    layout: Any,
    dtype: Any,
    max_position_embeddings: Any,
    precision: Any,
    inv_freq: Any,
    attention_factor: Any,
    out: Any,
    num_threads: Any,
) -> tuple[np.ndarray, np.ndarray]:
    """rope_cache with multi-axis positions (``sections`` given)."""
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
    sections_given = sections
    sections, section_layout, pos = _axes_positions(positions, sections, section_layout)
    rule = _Rule(rope_parameters, inv_freq, attention_factor, max_position_embeddings, precision)
    w, attention, axes = _axes_angles(head_dim, rule, sections, section_layout, pos)
    flat = pos.reshape(-1, len(sections))

    def fill(view: np.ndarray, bf16: bool) -> None:
        _kernel.rope_table_axes(axes, view, flat, nthreads, bf16)

    result = _write_caches(pos.shape[:-1], w.size, attention, fill, layout, explicit, out)
    _remember_axes_plan(rule, head_dim, sections_given, section_layout, axes, attention)
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
    sections_given = sections
    sections, section_layout, pos = _axes_positions(positions, sections, section_layout)
    n = len(sections)
    pos = _unaliased(pos, views)
    if pos.ndim == 2:
        pos = pos[None]
    if pos.ndim != 3 or pos.shape[1] != seq or pos.shape[0] not in (1, batch):
        raise ValueError(
            f"positions must have shape ({seq}, {n}) or ({batch}, {seq}, {n}), got "
            f"{np.shape(positions)}"
        )
    rule = _Rule(rope_parameters, inv_freq, attention_factor, max_position_embeddings, precision)
    w, attention, axes = _axes_angles(head_dim, rule, sections, section_layout, pos)
    if pos.size:
        check_table_size(pos.shape[0] * seq, 2 * w.size, 8, working_copies=2)
        parts = [kernel_view(v) for v in views if v.size]
        if parts:
            _kernel.rope_rotate_axes(
                parts[0][0],
                axes,
                sa,
                np.ascontiguousarray(pos),
                layout == "half",
                attention,
                nthreads,
                parts[0][1],
                parts[1][0] if len(parts) > 1 else None,
                len(parts) > 1 and parts[1][1],
            )
    _remember_axes_plan(rule, head_dim, sections_given, section_layout, axes, attention)


def _remember_axes_plan(
    rule: _Rule,
    head_dim: Any,
    sections_given: Any,
    section_layout: str,
    axes: _kernel.RopeAxes,
    attention: float,
) -> None:
    """Keep the checked multi-axis arguments for the small-call paths of apply_rope and
    rope_cache (a call that failed plans nothing; nor one whose frequencies depend on
    the length)."""
    if (
        rule.attention_factor is None
        and not _per_axis_rules(rule.rope_parameters)
        and _rope_type(rule.rope_parameters or {}) not in ("dynamic", "longrope")
    ):
        key = _kernel.rope_axes_plan_key(
            rule.rope_parameters,
            head_dim,
            rule.max_position_embeddings,
            rule.precision,
            rule.inv_freq,
            sections_given,
            section_layout,
        )
        if key is not None:
            _kernel.remember_rope_axes_plan(key, axes, attention)


from . import _rope_heads  # noqa: E402  (it uses this module's helpers)
