"""Rotary position embedding (RoPE) frequencies: the published families.

The rules of Hugging Face transformers' ``ROPE_INIT_FUNCTIONS`` (``default``,
``linear``, ``dynamic``, ``yarn``, ``longrope``, ``llama3``) with their parameters
and defaults, as a function of the model's ``rope_parameters`` (``rope_scaling``)
dictionary.  The rules themselves are the C library's (lib/src/rope_rules.c): in
float32, operation by operation as the framework evaluates it (the frequencies a
checkpoint was trained with), or in float64, the exact formula rounded once.  This
module checks the rule's arguments, names them in errors, and turns a rule into the
kernel's encoder of its angles (shared by the caches and the rotation).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal, NamedTuple

import numpy as np

from . import kernel as _kernel
from ._validate import (
    MAX_SCALE,
    _is_torch_bfloat16,
    as_base,
    as_bool,
    as_choice,
    as_int,
    as_real,
    check_table_size,
    is_bfloat16,
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
    return _rule(*_convert(head_dim, rope_parameters, max_position_embeddings, seq_len, precision))


def _convert(
    head_dim: Any,
    rope_parameters: Any,
    max_position_embeddings: Any,
    seq_len: Any,
    precision: Any,
) -> tuple[dict[str, Any], dict[str, Any], _Params]:
    """rope_frequencies' arguments as the library's fastpe_rope_params fields:
    (given, fields, p), for _rule."""
    # The binding converts (Python types, dict keys, None, sizes beyond int64); every
    # value is the library's rule to check, and its refusal is named here as the
    # caller wrote it.
    head_dim = as_int(head_dim, "head_dim")
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
    fields: dict[str, Any] = {
        "rope_type": ROPE_TYPES.index(rope_type),
        "precision": 0 if precision == "float32" else 1,  # FASTPE_PRECISION_*
    }
    # the lengths (the library's are int64: a larger one is refused where a rule
    # computes with it, else it only needs to compare as large)
    uses_mpe = rope_type not in ("default", "linear")
    mpe = None
    if max_position_embeddings is not None:
        mpe = as_int(
            max_position_embeddings,
            "max_position_embeddings",
            maximum=_INT64_MAX if uses_mpe else None,
        )
        fields["max_position_embeddings"] = _clamp64(mpe)
    if seq_len is not None:
        seq_len = as_int(
            seq_len, "seq_len", maximum=_INT64_MAX if rope_type == "dynamic" else None
        )
        fields["seq_len"] = _clamp64(seq_len)
    for key in ("rope_theta", "partial_rotary_factor"):
        p.number(fields, key, required=key in params)
    if rope_type in ("yarn", "longrope", "llama3"):
        if "original_max_position_embeddings" in params:
            v = params["original_max_position_embeddings"]
            if v is None:
                raise ValueError(_needs_original(rope_type))
            v = as_int(v, p.name("original_max_position_embeddings"), maximum=_INT64_MAX)
            fields["original_max_position_embeddings"] = _clamp64(v)
            p.used["original_max_position_embeddings"] = v
        else:
            p.used["original_max_position_embeddings"] = mpe
    if rope_type in ("linear", "dynamic", "llama3"):
        p.number(fields, "factor", required=True)
    if rope_type == "llama3":
        p.number(fields, "low_freq_factor", required=True)
        p.number(fields, "high_freq_factor", required=True)
    elif rope_type in ("yarn", "longrope"):
        p.number(fields, "factor", required=False)
        old_len = p.used["original_max_position_embeddings"]
        if p.used["factor"] is None and mpe is not None and old_len is not None and old_len > 0:
            p.used["factor"] = mpe / old_len  # (the library takes the same ratio)
        keys: tuple[str, ...] = ("attention_factor",)
        if rope_type == "yarn":
            keys += ("mscale", "mscale_all_dim", "beta_fast", "beta_slow")
        for key in keys:
            # transformers reads mscale and mscale_all_dim by truth value: 0 (or
            # None) means absent
            p.number(fields, key, required=False)
        if rope_type == "yarn":
            fields["truncate"] = int(p.flag("truncate", True))
        else:
            for key in ("short_factor", "long_factor"):
                factors = p.factors(key)
                if factors is not None:
                    fields[key] = factors
    given = {"head_dim": head_dim, "max_position_embeddings": mpe, "seq_len": seq_len}
    return given, fields, p


def _rule(given: dict[str, Any], fields: dict[str, Any], p: _Params) -> tuple[np.ndarray, float]:
    """The library's rule for converted fields, its refusals as the caller's keys."""
    head_dim = given["head_dim"]
    err, inv, attention, nf, why = _kernel._rope_rule(_clamp64(head_dim), fields)
    if err != 0:
        code, arg, index, value, limit = _kernel._last_error()
        if arg == "capacity" and code == err:
            # more than the default buffer: only when the memory exists
            check_table_size(1, int(limit), 8, working_copies=8)
            err, inv, attention, nf, why = _kernel._rope_rule(head_dim, fields, int(limit))
    if err == 0 and inv is not None:
        return inv[:nf], attention
    code, arg, index, value, limit = _kernel._last_error()
    if why is None or why[0] == 0:
        raise p.argument_error(given, arg, index, value, limit)
    reason, index, value = why
    rt = p.rope_type
    dim = int(head_dim * p.used["partial_rotary_factor"])
    old_len = p.used.get("original_max_position_embeddings")
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
            f"that is not finite (original_max_position_embeddings={old_len}, d={dim})",
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
            f"({old_len / low!r}), where the blend is 0/0"
        )
    if reason == _FREQUENCY:
        if rt == "longrope":
            keys: tuple[str, ...] = ("rope_theta", _longrope_list(fields, old_len))
        else:
            keys = _FREQUENCY_KEYS[rt]
        raise p.refuse(
            f"frequencies that are not finite numbers in [0, {MAX_FREQUENCY:g}] "
            f"(index {index}: {value!r} in precision={p.precision!r})",
            *keys,
        )
    raise ValueError(f"rope_parameters refused by the library's rule (code {err})")


def _needs_original(rope_type: str) -> str:
    return (
        f"rope_type={rope_type!r} needs original_max_position_embeddings "
        "(in rope_parameters) or max_position_embeddings"
    )


def _clamp64(v: int) -> int:
    """An int as the library's int64 sees it: beyond the range, its end (then
    refused or compared alike); INT64_MIN is the struct's "absent"."""
    return min(max(v, -_INT64_MAX), _INT64_MAX)


def _longrope_list(fields: dict[str, Any], old_len: Any) -> str:
    """The list longrope uses: long_factor beyond the original length."""
    long = fields.get("seq_len", 0) > old_len
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
    """One rule's rope_parameters as the library's fields: each value converted
    (its Python type), checked by the library, and a refusal named as the caller
    wrote it (``rope_parameters['beta_fast']``) with the value given."""

    def __init__(self, params: dict[str, Any], rope_type: str, precision: str) -> None:
        self.params = params
        self.rope_type = rope_type
        self.precision = precision
        # the value each key was read as (the rule's default where absent)
        self.used: dict[str, Any] = {"rope_theta": 10000.0, "partial_rotary_factor": 1.0}

    @staticmethod
    def name(key: str) -> str:
        return f"rope_parameters[{key!r}]"

    def number(self, fields: dict[str, Any], key: str, *, required: bool) -> None:
        """The real number at ``key`` into ``fields``; absent (or None where not
        ``required``) leaves the library's default.  NaN is the struct's "absent",
        so a NaN given is passed as inf, refused alike by every field."""
        v = self.params.get(key)
        if v is None:
            if required and key in self.params:
                raise ValueError(f"rope_type={self.rope_type!r} needs {self.name(key)}")
            self.used.setdefault(key, None)
            return
        f = as_real(v, self.name(key))
        self.used[key] = f
        fields[key] = math.inf if math.isnan(f) else f

    def flag(self, key: str, default: bool) -> bool:
        self.used[key] = v = as_bool(self.params.get(key, default), self.name(key))
        return v

    def factors(self, key: str) -> np.ndarray | None:
        """A list of real numbers (longrope's per-pair factors) as float64; None
        for anything but a list (the library then names it, with its length)."""
        v = self.params.get(key)
        if not isinstance(v, Sequence) or isinstance(v, (str, bytes)):
            return None
        out = [as_real(x, f"{self.name(key)}[{i}]") for i, x in enumerate(v)]
        self.used[key] = out
        return np.array([math.inf if math.isnan(x) else x for x in out], dtype=np.float64)

    def argument_error(
        self, given: dict[str, Any], arg: str | None, index: int, value: float, limit: float
    ) -> Exception:
        """The exception for the library's refusal of field ``arg`` (the error
        detail: element, value, bound), with the values as given."""
        rt = self.rope_type
        absent = math.isnan(value)
        if arg in given:  # (arguments of rope_frequencies itself)
            v = given[arg]
            if arg == "head_dim" and limit == 2:
                return ValueError(f"head_dim must be an integer >= 2, got {v}")
            if arg == "head_dim":
                return ValueError(f"head_dim must be an integer <= {int(limit)}, got {v}")
            if arg == "max_position_embeddings" and absent:
                return ValueError(f"rope_type={rt!r} needs max_position_embeddings")
            if arg == "max_position_embeddings":
                return ValueError(f"max_position_embeddings must be an integer >= 1, got {v}")
            return ValueError(f"seq_len must be a non-negative integer, got {v}")
        if arg == "rotary_dim" and limit == 4:
            return ValueError(
                f"rope_type={rt!r} needs a rotary dimension of at least 4, got {int(value)}"
            )
        if arg == "rotary_dim":
            return ValueError(
                f"the rotary dimension int(head_dim * partial_rotary_factor) = {int(value)} "
                "must be even and at least 2"
            )
        if arg is None or arg not in _KEYS[rt] + _COMMON:
            return ValueError(f"rope_parameters refused by the library's rule ({arg})")
        name = self.name(arg)
        v = self.params.get(arg)
        if arg == "original_max_position_embeddings":
            if absent:
                return ValueError(_needs_original(rt))
            return ValueError(f"{name} must be an integer >= 1, got {v}")
        if arg in ("short_factor", "long_factor"):
            if index >= 0:
                entry = self.params[arg][index]
                return ValueError(f"{name}[{index}] must be finite and > 0, got {entry!r}")
            if absent:
                return TypeError(
                    f"{name} must be a list of {int(limit)} numbers, got {type(v).__name__}"
                )
            return ValueError(
                f"{name} must have rotary_dim / 2 = {int(limit)} entries, got {int(value)}"
            )
        if arg == "high_freq_factor" and limit > 0:
            return ValueError(
                f"rope_type='llama3' needs {name} >= {self.name('low_freq_factor')}, "
                f"got {self.used[arg]!r} and {self.used['low_freq_factor']!r}"
            )
        if absent and arg == "factor" and rt in ("yarn", "longrope"):
            return ValueError(f"rope_type={rt!r} needs {name} or max_position_embeddings")
        if absent:
            return ValueError(f"rope_type={rt!r} needs {name}")
        if limit == 0:
            return ValueError(f"{name} must be finite and > 0, got {v!r}")
        if math.isnan(limit):
            return ValueError(f"{name} must be finite, got {v!r}")
        return ValueError(f"{name} must be <= {limit:g}, got {v!r}")

    def refuse(self, what: str, *keys: str) -> ValueError:
        """The refusal of values that are each valid but give ``what`` together."""
        given = ", ".join(f"{self.name(k)}={self.used.get(k, self.params.get(k))!r}" for k in keys)
        return ValueError(f"rope_type={self.rope_type!r} with {given} gives {what}")


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
) -> tuple[np.ndarray, float, _kernel.RopePlan]:
    """(frequencies, attention factor, compiled encoding) for positions lo .. hi
    (none when hi < lo), every argument checked.  The rule sees the longest
    sequence hi + 1, as transformers' rotary modules do."""
    given = head_dim
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
    enc = _kernel.RopePlan(w, _rule_args(rule, given, w.size))
    _kernel.rope_check_range(lo, hi, enc.max_position)
    return w, attention, enc


def _length(hi: float) -> int:
    """The sequence length a rule sees for the largest position ``hi`` (int or float)."""
    return math.floor(hi) + 1


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
    w = w.astype(np.float64)  # (a copy: the caller's array may change later)
    _kernel.check_frequencies(w)  # (the library's range, as its handles')
    check_table_size(1, w.size, 8, working_copies=8)
    return w


def _rule_key(rule: _Rule, head_dim: Any) -> Any:
    """The small-call paths' key of checked rope_parameters (head_dim as given), or
    None when they do not remember the rule: its frequencies depend on the sequence
    length, an attention_factor or listed frequencies are given (those need no
    conversion), or the arguments are not plain values."""
    if (
        rule.attention_factor is not None
        or rule.inv_freq is not None
        or _rope_type(rule.rope_parameters or {}) in ("dynamic", "longrope")
    ):
        return None
    return _kernel.rope_plan_key(
        rule.rope_parameters, head_dim, rule.max_position_embeddings, rule.precision
    )


def _rule_args(rule: _Rule, head_dim: Any, nf: int) -> _kernel.RopeArgs | None:
    """The library's conversion of a checked rule of nf frequencies that the
    small-call paths may remember (see _rule_key; at most head_dim / 2 frequencies,
    which apply_rope's path relies on), or None.  The general path's plan is then the
    rule's entry of the library's cache, the one those paths find: one entry per
    configuration."""
    key = _rule_key(rule, head_dim)
    if key is None or 2 * nf > head_dim:  # (a key means an int head_dim)
        return None
    known = _kernel.rope_args.get(key)
    if known is not None:
        return known
    _, fields, _ = _convert(
        head_dim, rule.rope_parameters, rule.max_position_embeddings, None, rule.precision
    )
    return _kernel.RopeArgs(head_dim, fields)


def _plan(rule: _Rule, head_dim: Any, enc: _kernel.RopePlan | _kernel.RopeAxes) -> None:
    """Remember the conversion of the rule whose entry ``enc`` is (see _rule_args)
    for the small-call paths, once a call by it succeeded."""
    if enc.args is not None:
        _kernel.remember_rope_args(_rule_key(rule, head_dim), enc.args)


def _per_axis_rules(rope_parameters: Any) -> bool:
    """Whether rope_parameters is a list of rules (one per axis) rather than one rule."""
    if rope_parameters is None or type(rope_parameters) is dict:
        return False  # (the usual spellings, without the slower ABC checks below)
    return isinstance(rope_parameters, Sequence) and not isinstance(
        rope_parameters, (str, bytes, Mapping)
    )
