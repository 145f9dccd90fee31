"""The C library's RoPE rules (lib/src/rope_rules.c: fastpe_rope_frequencies and
fastpe_rope_from_params) as C callers reach them, against fastpe.rope_frequencies.

fastpe.rope_frequencies checks the Python arguments, writes them into a
fastpe_rope_params and calls the same rule.  Every call here is made twice:
through the Python function, and through the library with the configuration
written as a fastpe_rope_params by hand (kernel._rope_rule).  The frequencies
must be bitwise equal and the attention factor equal (the binding passes every
parameter through unchanged), and every configuration the Python function
refuses must get an error code from C, with nothing written -- and the other
way round (no check of the binding is missing in C, none of C's is stricter).
The values themselves are tested against mpmath and transformers in
tests/test_rope_truth.py and tests/test_rope.py.  Values the struct cannot hold
(None where Python refuses it, NaN, strings: NaN and the sentinels mean
"absent" in C) are left out of the comparison.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import event, given
from hypothesis import strategies as st
from rules import LLAMA4, LLAMA31, LLAMA32, LONGROPE4, YARN4K
from test_rope import generated_configs

import fastpe
from fastpe import kernel

ROPE_TYPES = ("default", "linear", "dynamic", "yarn", "longrope", "llama3")  # FASTPE_ROPE_*
PRECISIONS = ("float32", "float64")  # FASTPE_PRECISION_*
FLOAT_KEYS = (
    "rope_theta",
    "partial_rotary_factor",
    "factor",
    "attention_factor",
    "beta_fast",
    "beta_slow",
    "mscale",
    "mscale_all_dim",
    "low_freq_factor",
    "high_freq_factor",
)
# the keys fastpe.rope_frequencies reads as absent when they are None
NONE_IS_ABSENT = {
    "yarn": {"factor", "attention_factor", "beta_fast", "beta_slow", "mscale", "mscale_all_dim"},
    "longrope": {"factor", "attention_factor"},
}
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

FASTPE_OK, FASTPE_ENULL, FASTPE_ESIZE, FASTPE_EBASE, FASTPE_EINVAL = 0, 1, 2, 4, 11


def _int(v) -> int | None:
    """An int64 the struct can hold (INT64_MIN is its "absent")."""
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
        return None
    return int(v) if INT64_MIN < v <= INT64_MAX else None


def to_fields(head_dim, params, mpe, seq_len, precision) -> dict | None:
    """The fastpe_rope_params of a rope_frequencies call, or None where the struct
    has no way to say it."""
    params = dict(params or {})
    rt = params.pop("rope_type") if "rope_type" in params else params.get("type", "default")
    params.pop("type", None)
    if not isinstance(rt, str) or rt not in ROPE_TYPES or precision not in PRECISIONS:
        return None
    fields: dict = {"rope_type": ROPE_TYPES.index(rt), "precision": PRECISIONS.index(precision)}
    for key, v in params.items():
        if v is None:
            if key not in NONE_IS_ABSENT.get(rt, ()):
                return None
        elif key in FLOAT_KEYS:
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.number)):
                return None
            try:
                fields[key] = float(v)
            except OverflowError:  # a Python int beyond the floats: inf, as Python reads it
                fields[key] = math.inf
            if math.isnan(fields[key]):
                return None
        elif key == "truncate":
            if not isinstance(v, (bool, np.bool_)):
                return None
            fields[key] = int(v)
        elif key in ("short_factor", "long_factor"):
            if not isinstance(v, (list, tuple)) or any(
                isinstance(x, bool) or not isinstance(x, (int, float)) for x in v
            ):
                return None
            fields[key] = np.array(v, dtype=np.float64)
        elif key == "original_max_position_embeddings":
            if _int(v) is None:
                return None
            fields[key] = int(v)
        else:
            return None  # a key the struct has no field for
    for key, v in (("max_position_embeddings", mpe), ("seq_len", seq_len)):
        if v is not None:
            if _int(v) is None:
                return None
            fields[key] = int(v)
    return fields if _int(head_dim) is not None else None


# The library's pow and log are the C runtime's, NumPy's and CPython's are theirs:
# bitwise the same libm on Linux.  The Windows build tested here (mingw-w64, under
# Wine) has mingw-w64's own pow, measured up to 154 ulps (3.4e-14) from the MSVC
# runtime's that NumPy and CPython use there; the float32 steps round that away.
FLOAT64_RTOL = 0.0  # the same bits on every platform


def python_rules(head_dim, params, mpe=None, seq_len=None, precision="float32"):
    try:
        return fastpe.rope_frequencies(
            head_dim, params, max_position_embeddings=mpe, seq_len=seq_len, precision=precision
        )
    except (ValueError, TypeError) as exc:
        return exc


def compare(head_dim, params, mpe=None, seq_len=None, precision="float32") -> str:
    """Both sides of one configuration: "refused", "equal" or "inexpressible"."""
    fields = to_fields(head_dim, params, mpe, seq_len, precision)
    if fields is None:
        return "inexpressible"
    want = python_rules(head_dim, params, mpe, seq_len, precision)
    err, buf, attention, nf, _why = kernel._rope_rule(head_dim, fields)
    herr, _, _, hnf, _ = kernel._rope_rule(head_dim, fields, handle=True)
    case = f"head_dim={head_dim} params={params} mpe={mpe} seq_len={seq_len} {precision}"
    assert herr == err, f"from_params gives {herr}, frequencies {err}: {case}"
    if isinstance(want, Exception):
        assert err != FASTPE_OK, f"C accepts what Python refuses ({want}): {case}"
        assert np.isnan(buf).all() and math.isnan(attention) and nf == -1, case
        assert hnf == -1, case
        return "refused"
    assert err == FASTPE_OK, f"C refuses ({err}) what Python accepts: {case}"
    w, a = want
    assert nf == w.size == hnf, case
    if FLOAT64_RTOL and precision == "float64":
        np.testing.assert_allclose(buf[:nf], w, rtol=FLOAT64_RTOL, atol=0, err_msg=case)
        assert abs(attention - a) <= FLOAT64_RTOL * abs(a), case
    else:
        assert np.array_equal(buf[:nf].view(np.uint64), w.view(np.uint64)), (
            f"{int(np.sum(buf[:nf] != w))} of {nf} frequencies differ: {case}"
        )
        assert attention == a and math.copysign(1, attention) == math.copysign(1, a), case
    assert np.isnan(buf[nf:]).all(), case  # nothing beyond nf written
    return "equal"


# ---------------------------------------------------------------- real models

PHI3_SHORT = [1.0 + 0.05 * (i % 7) + 0.01 * i for i in range(48)]
PHI3_LONG = [1.0 + 1.3 * i + 0.07 * (i % 5) for i in range(48)]
# (both entries' rule: seq_len up to original_max_position_embeddings takes short_factor)
PHI3 = {
    "rope_type": "longrope",
    "short_factor": PHI3_SHORT,
    "long_factor": PHI3_LONG,
    "original_max_position_embeddings": 4096,
}

REAL = {
    # (head_dim, rope_parameters, max_position_embeddings, seq_len)
    "llama-3.1": (128, LLAMA31, 131072, None),
    "llama-3.2": (64, LLAMA32, 131072, None),
    "llama-4": (128, LLAMA4, 10485760, None),
    "qwen2-yarn": (
        128,
        {
            "type": "yarn",
            "rope_theta": 1000000.0,
            "factor": 4.0,
            "original_max_position_embeddings": 32768,
        },
        32768,
        None,
    ),
    "phi-3-short": (96, PHI3, 131072, 4096),
    "phi-3-long": (96, PHI3, 131072, 4097),
    "deepseek-v2-yarn": (
        64,
        {
            "rope_type": "yarn",
            "rope_theta": 10000.0,
            "factor": 40.0,
            "original_max_position_embeddings": 4096,
            "beta_fast": 32,
            "beta_slow": 1,
            "mscale": 0.707,
            "mscale_all_dim": 0.707,
        },
        163840,
        None,
    ),
    "deepseek-v3-yarn": (
        64,
        {
            "rope_type": "yarn",
            "rope_theta": 10000.0,
            "factor": 40.0,
            "original_max_position_embeddings": 4096,
            "beta_fast": 32,
            "beta_slow": 1,
            "mscale": 1.0,
            "mscale_all_dim": 1.0,
        },
        163840,
        None,
    ),
    "gpt-oss-yarn": (
        64,
        {
            "rope_type": "yarn",
            "rope_theta": 150000.0,
            "factor": 32.0,
            "original_max_position_embeddings": 4096,
            "beta_fast": 32.0,
            "beta_slow": 1.0,
            "truncate": False,
        },
        131072,
        None,
    ),
    "gemma-3-linear": (
        256,
        {"rope_type": "linear", "rope_theta": 1e6, "factor": 8.0},
        131072,
        None,
    ),
    "dynamic-ntk": (128, {"type": "dynamic", "factor": 2.0}, 4096, 10000),
    "llama-2": (128, {"rope_theta": 10000.0}, 4096, None),
    "pythia-partial": (128, {"partial_rotary_factor": 0.25}, 2048, None),
    "phi-2-partial": (80, {"partial_rotary_factor": 0.4}, 2048, None),
}


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("model", sorted(REAL))
def test_real_configs(model, precision):
    head_dim, params, mpe, seq_len = REAL[model]
    assert compare(head_dim, params, mpe, seq_len, precision) == "equal"


def test_generated_configs():
    """tests/test_rope.py's seeded sweep of every rule (compared there with
    transformers), in both precisions."""
    for rope_type, params, head_dim, mpe, seq_len in generated_configs(40):
        for precision in PRECISIONS:
            got = compare(head_dim, {"rope_type": rope_type, **params}, mpe, seq_len, precision)
            assert got == "equal"


# ---------------------------------------------------------------- generated, good and bad

HEAD_DIMS = [2, 3, 5, 6, 7, 33, 64, 80, 128, 256]


SPECIAL = [0.0, -0.0, -1.0, 1.0, math.inf, -math.inf, 1e-300, 5e-324, 1e300, 10**400]


@st.composite
def configs(draw, rope_type: str):
    """A configuration of one rule: in three of four, every value in its range
    (the keys a rule requires given, high_freq_factor at or above low_freq_factor);
    otherwise any value may be out of range, absent, None, NaN or a key the
    rule does not take."""
    bad = draw(st.integers(0, 3)) == 0

    def number(lo: float, hi: float):
        good = st.floats(lo, hi) | st.integers(math.ceil(lo), math.floor(hi))
        if not bad:
            return good
        return good | st.sampled_from(SPECIAL) | st.none() | st.just(math.nan)

    def maybe(key, values, required=False):
        if (required and not bad) or draw(st.booleans()):
            params[key] = draw(values)

    old = st.integers(1, 70000) | st.sampled_from([2048, 4096, 8192, 32768])
    if bad:
        old = old | st.sampled_from([0, -1, 2**62, 2**70, 4096.0])
    params: dict = {"rope_type": rope_type}
    head_dim = draw(st.sampled_from(HEAD_DIMS) | (st.integers(-2, 300) if bad else st.nothing()))
    maybe("rope_theta", number(1.5, 1e7))
    maybe("partial_rotary_factor", st.sampled_from([1.0, 0.5, 0.25, 0.4, 0.3]) | number(0.05, 1))
    if bad and draw(st.booleans()):  # a key the rule may not take
        maybe(draw(st.sampled_from(FLOAT_KEYS)), number(0.1, 10.0))
    if rope_type != "default":
        maybe("factor", number(1.0, 64.0) | number(0.25, 1), rope_type in ("linear", "dynamic"))
    if rope_type in ("yarn", "longrope", "llama3"):
        maybe("original_max_position_embeddings", old, True)
    if rope_type in ("yarn", "longrope"):
        maybe("attention_factor", number(0.1, 4.0))
    if rope_type == "yarn":
        maybe("beta_fast", number(1.0, 64.0))
        maybe("beta_slow", number(0.1, 4.0))
        maybe("mscale", number(-2.0, 2.0) | st.just(0.0))
        maybe("mscale_all_dim", number(-2.0, 2.0) | st.just(0.0))
        maybe("truncate", st.booleans())
    if rope_type == "llama3":
        params["factor"] = draw(number(1.0, 64.0))
        maybe("low_freq_factor", number(0.25, 4.0), True)
        low = params.get("low_freq_factor")
        finite = isinstance(low, (int, float)) and abs(low) < 1e300  # (not NaN, inf, 10**400)
        above = low + draw(st.floats(0.01, 10.0)) if finite else 4.0
        equal = st.just(low) if finite else st.nothing()  # no blended band (Llama 4)
        maybe("high_freq_factor", st.just(above) | equal | number(0.5, 16.0), True)
    if rope_type == "longrope":
        prf = params.get("partial_rotary_factor", 1.0)
        usable = isinstance(prf, (int, float)) and 0 < prf <= 1  # (NaN is not)
        n = max(int(head_dim * (prf if usable else 1.0)) // 2, 0)  # the entries needed
        size = st.sampled_from([n, n // 2, n + 1]) if bad else st.just(n)
        entry = st.floats(0.5, 40.0)
        if bad:
            entry = entry | st.sampled_from([0.0, -1.0, math.inf, 1e-300])
        for key in ("short_factor", "long_factor"):
            lists = size.flatmap(lambda m: st.lists(entry, min_size=m, max_size=m))
            maybe(key, lists, True)
    mpe = draw((st.none() if bad or rope_type != "dynamic" else st.nothing()) | old)
    seq_len = draw(st.none() | st.integers(-1 if bad else 0, 10**6))
    precision = draw(st.sampled_from(PRECISIONS))
    return head_dim, params, mpe, seq_len, precision


@pytest.mark.parametrize("rope_type", ROPE_TYPES)
@given(data=st.data())
def test_generated_parameters_good_and_bad(rope_type, data):
    """Bitwise the same frequencies, or refused by both."""
    head_dim, params, mpe, seq_len, precision = data.draw(configs(rope_type))
    event(compare(head_dim, params, mpe, seq_len, precision))


# ---------------------------------------------------------------- refusals, named

LLAMA3_8K = dict(LLAMA31, rope_theta=10000.0)

REFUSED = [
    # (head_dim, params, mpe, seq_len, the library's code)
    (1, None, None, None, FASTPE_ESIZE),
    (2**31 + 2, None, None, None, FASTPE_ESIZE),
    (7, None, None, None, FASTPE_EINVAL),  # odd rotary dimension
    (64, {"partial_rotary_factor": 0.01}, None, None, FASTPE_EINVAL),
    (64, {"partial_rotary_factor": 1.5}, None, None, FASTPE_EINVAL),
    (64, {"rope_theta": 0.0}, None, None, FASTPE_EINVAL),
    (64, {"rope_theta": math.inf}, None, None, FASTPE_EINVAL),
    (64, {"rope_type": "linear"}, None, None, FASTPE_EINVAL),
    (64, {"rope_type": "linear", "factor": -2.0}, None, None, FASTPE_EINVAL),
    (64, {"rope_type": "default", "factor": 2.0}, None, None, FASTPE_EINVAL),  # not its key
    (64, {"rope_type": "linear", "factor": 2.0, "beta_fast": 3.0}, None, None, FASTPE_EINVAL),
    (64, {"rope_type": "dynamic", "factor": 2.0}, None, None, FASTPE_EINVAL),  # no mpe
    (2, {"rope_type": "dynamic", "factor": 2.0}, 8, None, FASTPE_EINVAL),
    (64, {"rope_type": "dynamic", "factor": 1e300}, 4096, None, FASTPE_EBASE),
    (64, None, 0, None, FASTPE_EINVAL),
    (64, None, None, -1, FASTPE_EINVAL),
    (64, {k: v for k, v in LLAMA3_8K.items() if k[0] != "o"}, None, None, FASTPE_EINVAL),
    (64, {**LLAMA3_8K, "high_freq_factor": 0.999}, None, None, FASTPE_EINVAL),
    (64, {**LLAMA3_8K, "original_max_position_embeddings": 0}, None, None, FASTPE_EINVAL),
    # equal factors with a wavelength exactly on the edge, 8192 / band == 2 pi
    (64, {**LLAMA3_8K, "factor": 1e-300}, None, None, FASTPE_EBASE),
    (64, {"rope_theta": 1e-300}, None, None, FASTPE_EBASE),
    (64, {"rope_type": "linear", "factor": 1e-300}, None, None, FASTPE_EBASE),
    (64, {**YARN4K, "factor": 1e-300}, None, None, FASTPE_EBASE),
    (64, {**YARN4K, "rope_theta": 1.0}, None, None, FASTPE_EINVAL),  # ln(theta) = 0
    (64, {**YARN4K, "beta_fast": 5e-324}, None, None, FASTPE_EINVAL),
    (64, {**YARN4K, "attention_factor": -1.0}, None, None, FASTPE_EINVAL),
    (64, {**YARN4K, "mscale": math.inf}, None, None, FASTPE_EINVAL),
    (
        64,
        {**YARN4K, "factor": 22026.465794806718, "mscale": 1.0, "mscale_all_dim": -1.0},
        None,
        None,
        FASTPE_EINVAL,
    ),
    (64, {"rope_type": "yarn"}, None, None, FASTPE_EINVAL),  # no length at all
    (
        64,
        {"rope_type": "yarn", "original_max_position_embeddings": 4096},
        None,
        None,
        FASTPE_EINVAL,
    ),
    (8, {**LONGROPE4, "short_factor": [1e-300] * 4}, None, None, FASTPE_EBASE),
    (8, {**LONGROPE4, "short_factor": [1.0] * 3}, None, None, FASTPE_EINVAL),
    (8, {**LONGROPE4, "long_factor": [1.0, 1.0, 0.0, 1.0]}, None, None, FASTPE_EINVAL),
    (8, {**LONGROPE4, "original_max_position_embeddings": 1}, None, None, FASTPE_EINVAL),
    (8, {k: v for k, v in LONGROPE4.items() if k != "long_factor"}, None, None, FASTPE_EINVAL),
]


# llama3 with equal factors: a wavelength 2 pi exactly on 8192 / band in float32
# steps (in float64's real formula, 2 pi is never on a rational edge)
EDGE = {
    **LLAMA3_8K,
    "low_freq_factor": 8192 / (2 * math.pi),
    "high_freq_factor": 8192 / (2 * math.pi),
}


def test_the_edge_is_a_code_in_float32():
    test_refusals_are_codes(2, EDGE, None, None, FASTPE_EBASE, "float32")
    assert compare(2, EDGE, precision="float64") == "equal"


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("head_dim, params, mpe, seq_len, code", REFUSED)
def test_refusals_are_codes(head_dim, params, mpe, seq_len, code, precision):
    assert isinstance(python_rules(head_dim, params, mpe, seq_len, precision), Exception)
    fields = to_fields(head_dim, params, mpe, seq_len, precision)
    assert kernel._rope_rule(head_dim, fields)[0] == code
    assert compare(head_dim, params, mpe, seq_len, precision) == "refused"


def test_absent_is_not_a_value():
    """NaN and the sentinels are "absent": the defaults, as a missing key."""
    for params, fields in [
        ({}, {"rope_theta": math.nan, "partial_rotary_factor": math.nan}),
        (YARN4K, {**YARN4K, "rope_type": 3, "mscale": math.nan, "truncate": -1}),
        (YARN4K, {**YARN4K, "rope_type": 3, "beta_fast": math.nan, "mscale": 0.0}),
    ]:
        w, a = fastpe.rope_frequencies(64, params)
        err, buf, attention, nf, _why = kernel._rope_rule(64, fields)
        assert err == FASTPE_OK and attention == a
        assert np.array_equal(buf[:nf], w)
    # a key given as 0 is a key given: the default rule does not take mscale
    assert kernel._rope_rule(64, {"mscale": 0.0})[0] == FASTPE_EINVAL


def test_capacity_and_struct_size():
    err, buf, attention, nf, _why = kernel._rope_rule(64, {}, capacity=31)
    assert err == FASTPE_ESIZE and np.isnan(buf).all() and nf == -1 and math.isnan(attention)
    err, buf, _, nf, _why = kernel._rope_rule(64, {}, capacity=32)
    assert err == FASTPE_OK and nf == 32 and not np.isnan(buf).any()
    for size in (0, 8, 10**6):
        assert kernel._rope_rule(64, {"size": size})[0] == FASTPE_EINVAL
        assert kernel._rope_rule(64, {"size": size}, handle=True)[0] == FASTPE_EINVAL
