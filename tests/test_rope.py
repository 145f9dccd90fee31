"""RoPE frequencies: every family against its published formula (float64, written
here per index from the papers / model cards), and against transformers' own
functions where transformers and torch are installed."""

from __future__ import annotations

import math
import re
import warnings

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rules import LLAMA3_8K, LLAMA4, LLAMA31, LONGROPE4, YARN4K

import fastpe

# ---------------------------------------------------------------- published formulas


def default_ref(d, theta):
    return [theta ** (-(2 * i) / d) for i in range(d // 2)]


def dynamic_ref(d, theta, factor, seq_len, max_pos):
    # NTK-aware: a larger base once the sequence outgrows the trained length
    L = max(seq_len, max_pos)
    return default_ref(d, theta * (factor * L / max_pos - (factor - 1)) ** (d / (d - 2)))


def yarn_ref(d, theta, factor, old_len, beta_fast=32, beta_slow=1, truncate=True):
    # YaRN (Peng et al. 2023): frequencies that turn fewer than beta_slow times over
    # the trained length are interpolated (w/factor), more than beta_fast times kept,
    # a linear ramp over the pair index between
    def index_of(rotations):
        return d * math.log(old_len / (rotations * 2 * math.pi)) / (2 * math.log(theta))

    lo, hi = index_of(beta_fast), index_of(beta_slow)
    if truncate:
        lo, hi = math.floor(lo), math.ceil(hi)
    lo, hi = max(lo, 0), min(hi, d - 1)
    if lo == hi:
        hi += 0.001
    out = []
    with mpmath.workprec(200):  # the formula's exact value, rounded once
        for i in range(d // 2):
            w = mpmath.mpf(theta) ** (-mpmath.mpf(2 * i) / d)
            ramp = min(max((i - mpmath.mpf(lo)) / (mpmath.mpf(hi) - lo), 0), 1)
            out.append(float(w / factor * ramp + w * (1 - ramp)))  # 0: keep w, 1: interpolate
    return out, 0.1 * math.log(factor) + 1.0


def llama3_ref(d, theta, factor, low, high, old_len):
    # Llama 3.1's model card: wavelengths above old_len/low scaled by 1/factor, below
    # old_len/high kept, between: a blend linear in old_len/wavelength
    out = []
    for w in default_ref(d, theta):
        wavelen = 2 * math.pi / w
        if wavelen < old_len / high:
            out.append(w)
        elif wavelen > old_len / low:
            out.append(w / factor)
        else:
            s = (old_len / wavelen - low) / (high - low)
            out.append((1 - s) * w / factor + s * w)
    return out


def longrope_ref(d, theta, ext, factor, old_len):
    return (
        [1.0 / (e * theta ** (2 * i / d)) for i, e in enumerate(ext)],
        math.sqrt(1 + math.log(factor) / math.log(old_len)) if factor > 1 else 1.0,
    )


def f64(head_dim, params, **kw):
    return fastpe.rope_frequencies(head_dim, params, precision="float64", **kw)


def close(got, want, ulps=8):
    want = np.asarray(want, dtype=np.float64)
    np.testing.assert_allclose(got, want, rtol=ulps * 2.0**-52, atol=0)


# ---------------------------------------------------------------- each family


@pytest.mark.parametrize("head_dim, theta", [(128, 10000.0), (64, 500000.0), (80, 1e6), (2, 10.0)])
def test_default(head_dim, theta):
    w, a = f64(head_dim, {"rope_theta": theta})
    close(w, default_ref(head_dim, theta))
    assert a == 1.0 and w[0] == 1.0


def test_no_parameters_is_the_default_rule():
    w, _a = fastpe.rope_frequencies(64)
    np.testing.assert_array_equal(w, fastpe.rope_frequencies(64, {"rope_type": "default"})[0])
    close(w, default_ref(64, 10000.0), ulps=2**29)  # float32 frequencies: 2^-23 relative


def test_linear():
    w, _ = f64(128, {"rope_type": "linear", "factor": 3.0})
    close(w, np.array(default_ref(128, 10000.0)) / 3.0)


@pytest.mark.parametrize("seq_len", [None, 100, 4096, 10000, 123457])
def test_dynamic(seq_len):
    w, _ = f64(
        128, {"rope_type": "dynamic", "factor": 2.5}, max_position_embeddings=4096, seq_len=seq_len
    )
    close(w, dynamic_ref(128, 10000.0, 2.5, seq_len or 0, 4096), ulps=64)


@pytest.mark.parametrize("kw", [dict(), dict(beta_fast=16, beta_slow=2), dict(truncate=False)])
@pytest.mark.parametrize("head_dim, theta, factor", [(128, 10000.0, 4.0), (64, 1e6, 40.0)])
def test_yarn(kw, head_dim, theta, factor):
    params = {
        "rope_type": "yarn",
        "rope_theta": theta,
        "factor": factor,
        "original_max_position_embeddings": 4096,
        **kw,
    }
    w, a = f64(head_dim, params)
    want, attention = yarn_ref(head_dim, theta, factor, 4096, **kw)
    np.testing.assert_array_equal(w, want)  # correctly rounded
    assert a == pytest.approx(attention, rel=1e-15)
    assert w[0] == 1.0 and w[-1] == pytest.approx(default_ref(head_dim, theta)[-1] / factor)


def test_yarn_attention_factor_variants():
    base = {"rope_type": "yarn", "factor": 40.0, "original_max_position_embeddings": 4096}
    _, a = f64(64, {**base, "mscale": 1.0, "mscale_all_dim": 0.5})
    m = lambda k: 0.1 * k * math.log(40.0) + 1.0  # noqa: E731
    assert a == pytest.approx(m(1.0) / m(0.5), rel=1e-15)
    assert f64(64, {**base, "attention_factor": 0.75})[1] == 0.75
    # factor from the context lengths when absent
    w, a = f64(
        64,
        {"rope_type": "yarn", "original_max_position_embeddings": 4096},
        max_position_embeddings=32768,
    )
    close(w, yarn_ref(64, 10000.0, 8.0, 4096)[0])
    assert a == pytest.approx(0.1 * math.log(8.0) + 1.0, rel=1e-15)


@pytest.mark.parametrize("head_dim, theta, factor", [(128, 500000.0, 8.0), (64, 10000.0, 32.0)])
def test_llama3(head_dim, theta, factor):
    params = {
        "rope_type": "llama3",
        "rope_theta": theta,
        "factor": factor,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
    }
    w, a = f64(head_dim, params)
    close(w, llama3_ref(head_dim, theta, factor, 1.0, 4.0, 8192))
    assert a == 1.0


# Llama 4's released configs (16, 1, 1), and equal factors away from 1
@pytest.mark.parametrize(
    "head_dim, theta, factor, band",
    [(128, 500000.0, 16.0, 1.0), (64, 10000.0, 8.0, 2.5), (256, 1e6, 32.0, 0.75)],
)
def test_llama3_equal_factors(head_dim, theta, factor, band):
    params = {
        "rope_type": "llama3",
        "rope_theta": theta,
        "factor": factor,
        "low_freq_factor": band,
        "high_freq_factor": band,
        "original_max_position_embeddings": 8192,
    }
    w, a = f64(head_dim, params)
    want = llama3_ref(head_dim, theta, factor, band, band, 8192)
    close(w, want)
    assert a == 1.0
    # both sides of the edge occur: some kept, some divided
    ratio = np.array(default_ref(head_dim, theta)) / np.array(want)
    assert np.any(ratio == 1.0) and np.any(ratio != 1.0)


@pytest.mark.parametrize("precision", ["float32", "float64"])
def test_llama3_equal_factors_wavelength_on_the_edge_is_refused(precision):
    # head_dim 2: one frequency, 1, wavelength 2 pi == 8192 / band in float32 steps;
    # in float64 (the real formula) 2 pi is never a rational 8192 / band: the
    # frequency is kept or divided as the exact comparison says
    band = 8192 / (2 * math.pi)
    params = {**LLAMA3_8K, "low_freq_factor": band, "high_freq_factor": band}
    if precision == "float32":
        with pytest.raises(ValueError, match="exactly on original_max_position_embeddings"):
            fastpe.rope_frequencies(2, params, precision=precision)
    else:
        with mpmath.workprec(200):
            kept = 2 * mpmath.pi < mpmath.mpf(8192) / band
        want = 1.0 if kept else 1 / 8
        assert fastpe.rope_frequencies(2, params, precision=precision)[0][0] == want
    # a hair either side of the edge (more than a float32 ulp), divided or kept
    for nudge, want in ((1 + 1e-6, 1 / 8), (1 - 1e-6, 1.0)):
        near = {**params, "low_freq_factor": band * nudge, "high_freq_factor": band * nudge}
        assert fastpe.rope_frequencies(2, near, precision=precision)[0][0] == want


@pytest.mark.parametrize("seq_len, which", [(None, "short"), (4096, "short"), (4097, "long")])
def test_longrope(seq_len, which):
    short = list(np.linspace(1.0, 2.0, 48))
    long = list(np.linspace(1.0, 30.0, 48))
    params = {
        "rope_type": "longrope",
        "short_factor": short,
        "long_factor": long,
        "original_max_position_embeddings": 4096,
    }
    w, a = f64(96, params, max_position_embeddings=131072, seq_len=seq_len)
    want, attention = longrope_ref(96, 10000.0, short if which == "short" else long, 32.0, 4096)
    close(w, want)
    assert a == pytest.approx(attention, rel=1e-15)


def test_partial_rotary():
    w, _ = f64(80, {"partial_rotary_factor": 0.25})  # NeoX rotary_pct: 20 dims rotate
    close(w, default_ref(20, 10000.0))
    w, _ = f64(96, {"partial_rotary_factor": 0.5, "rope_type": "linear", "factor": 2.0})
    close(w, np.array(default_ref(48, 10000.0)) / 2.0)


@settings(max_examples=50, deadline=None)
@given(
    st.sampled_from(["default", "linear", "dynamic", "yarn", "llama3"]),
    st.integers(2, 256).map(lambda n: 2 * n),
    st.floats(100.0, 1e7),
    st.floats(1.0, 64.0),
)
def test_float32_is_the_float64_formula_rounded_through_float32_steps(rt, head_dim, theta, f):
    params = {"rope_type": rt, "rope_theta": theta}
    if rt != "default":
        params["factor"] = f
    if rt == "llama3":
        params.update(low_freq_factor=1.0, high_freq_factor=4.0)
    kw = dict(max_position_embeddings=8192, seq_len=20000)
    w32, a32 = fastpe.rope_frequencies(head_dim, params, **kw)
    w64, a64 = fastpe.rope_frequencies(head_dim, params, precision="float64", **kw)
    assert a32 == a64
    assert np.all(w32.astype(np.float32) == w32)  # float32 values
    # a handful of float32 roundings; llama3's blend weight comes from a difference
    # (old_len / wavelength - low_freq_factor) whose float32 rounding the factor magnifies
    rtol = 32 * 2.0**-24 * (f if rt == "llama3" else 1.0)
    np.testing.assert_allclose(w32, w64, rtol=rtol, atol=1e-37)


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "head_dim, params, kw, exc, match",
    [
        (7, {"partial_rotary_factor": 1.0}, {}, ValueError, "even"),
        (64, {"partial_rotary_factor": 0.01}, {}, ValueError, "even"),
        (64, {"partial_rotary_factor": 1.5}, {}, ValueError, "partial_rotary_factor"),
        (64, {"rope_type": "linear", "factor": 0.0}, {}, ValueError, "factor"),
        (64, {"rope_type": "linear", "factor": -2.0}, {}, ValueError, "factor"),
        (64, {"rope_type": "linear"}, {}, ValueError, "factor"),
        (64, {"rope_type": "ntk"}, {}, ValueError, "rope_type"),
        (64, {"rope_type": "linear", "factor": 2.0, "facter": 3.0}, {}, ValueError, "facter"),
        (64, {"rope_type": "default", "factor": 2.0}, {}, ValueError, "factor"),
        (64, {"rope_type": "dynamic", "factor": 2.0}, {}, ValueError, "max_position_embeddings"),
        (
            2,
            {"rope_type": "dynamic", "factor": 2.0},
            {"max_position_embeddings": 8},
            ValueError,
            "at least 4",
        ),
        (
            64,
            {
                "rope_type": "llama3",
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
            },
            {},
            ValueError,
            "original_max_position_embeddings",
        ),
        (
            64,
            {
                "rope_type": "longrope",
                "short_factor": [1.0] * 31,
                "long_factor": [1.0] * 32,
                "original_max_position_embeddings": 4096,
                "factor": 2.0,
            },
            {},
            ValueError,
            "short_factor",
        ),
        (
            64,
            {
                "rope_type": "longrope",
                "short_factor": "1,2",
                "long_factor": [1.0] * 32,
                "original_max_position_embeddings": 4096,
                "factor": 2.0,
            },
            {},
            TypeError,
            "short_factor",
        ),
        (64, {"rope_theta": float("nan")}, {}, ValueError, "rope_theta"),
        (64, [("rope_theta", 10.0)], {}, TypeError, "rope_parameters"),
        (64, None, {"precision": "float16"}, ValueError, "precision"),
        (64.0, None, {}, TypeError, "head_dim"),
    ],
)
def test_bad_parameters(head_dim, params, kw, exc, match):
    with pytest.raises(exc, match=match):
        fastpe.rope_frequencies(head_dim, params, **kw)


def test_the_callers_mapping_is_not_changed():
    params = {"type": "linear", "factor": 2.0}
    fastpe.rope_frequencies(64, params)
    assert params == {"type": "linear", "factor": 2.0}


# Parameters each valid alone whose frequencies overflow (to inf in float32, past
# 1e280 in float64) or whose formula breaks down: refused with the key and value.
OVERFLOWING = [
    (64, {"rope_theta": 1e-300}, {}, "rope_theta", 1e-300),
    (64, {"rope_type": "linear", "factor": 1e-300}, {}, "factor", 1e-300),
    (
        64,
        {"rope_type": "dynamic", "factor": 1e300},
        {"max_position_embeddings": 4096},
        "factor",
        1e300,
    ),
    (
        64,
        {"rope_type": "dynamic", "rope_theta": 1e306, "factor": 4.0},
        {"max_position_embeddings": 4096, "seq_len": 10**6},
        "rope_theta",
        1e306,
    ),
    (64, {**LLAMA3_8K, "factor": 1e-300}, {}, "factor", 1e-300),
    (64, {**YARN4K, "factor": 1e-300}, {}, "factor", 1e-300),
    (64, {**YARN4K, "rope_theta": 1.0}, {}, "rope_theta", 1.0),  # ln(theta) = 0
    (64, {**YARN4K, "beta_fast": 5e-324}, {}, "beta_fast", 5e-324),
    (8, {**LONGROPE4, "short_factor": [1e-300] * 4}, {}, "short_factor", [1e-300] * 4),
    (8, {**LONGROPE4, "original_max_position_embeddings": 1}, {}, "factor", 2.0),
    # mscale_all_dim's 0.1 * m * ln(factor) + 1 is 0 at factor e^10: a division by 0
    (
        64,
        {**YARN4K, "factor": 22026.465794806718, "mscale": 1.0, "mscale_all_dim": -1.0},
        {},
        "mscale_all_dim",
        -1.0,
    ),
]


@pytest.mark.parametrize("precision", ["float32", "float64"])
@pytest.mark.parametrize("head_dim, params, kw, key, value", OVERFLOWING)
def test_overflowing_frequencies_are_refused_by_name(head_dim, params, kw, key, value, precision):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # and no NumPy RuntimeWarning on the way
        with pytest.raises(ValueError) as info:
            fastpe.rope_frequencies(head_dim, params, precision=precision, **kw)
    assert f"rope_parameters[{key!r}]={value!r}" in str(info.value)


@pytest.mark.parametrize(
    "head_dim, params, kw, key, value", [c for c in OVERFLOWING[:6] if "seq_len" not in c[2]]
)
def test_cache_and_apply_refuse_them_by_name_too(head_dim, params, kw, key, value):
    # they handed the frequencies on to the kernel, which printed its internal spec
    kw = {"max_position_embeddings": kw.get("max_position_embeddings"), "precision": "float32"}
    for call in (
        lambda: fastpe.rope_cache(head_dim, params, seq_len=2, **kw),
        lambda: fastpe.apply_rope(np.ones((1, 1, 2, head_dim)), rope_parameters=params, **kw),
    ):
        with pytest.raises(ValueError, match=re.escape(f"rope_parameters[{key!r}]")):
            call()


NAN = float("nan")


@pytest.mark.parametrize(
    "params, exc, key, value",
    [
        ({**YARN4K, "beta_fast": NAN, "truncate": False}, ValueError, "beta_fast", "nan"),
        ({**YARN4K, "beta_slow": NAN}, ValueError, "beta_slow", "nan"),
        ({**YARN4K, "beta_fast": -1}, ValueError, "beta_fast", "-1"),
        ({**YARN4K, "beta_slow": 0.0}, ValueError, "beta_slow", "0.0"),
        ({**YARN4K, "beta_fast": "32"}, TypeError, "beta_fast", "'32'"),
        ({**YARN4K, "mscale": "1", "mscale_all_dim": 1.0}, TypeError, "mscale", "'1'"),
        (
            {**YARN4K, "mscale_all_dim": math.inf, "mscale": 1.0},
            ValueError,
            "mscale_all_dim",
            "inf",
        ),
        ({**YARN4K, "truncate": "no"}, TypeError, "truncate", "'no'"),
        ({**YARN4K, "attention_factor": -1.0}, ValueError, "attention_factor", "-1.0"),
        (
            {**YARN4K, "original_max_position_embeddings": 4096.5},
            TypeError,
            "original_max_position_embeddings",
            "4096.5",
        ),
        ({**LLAMA3_8K, "low_freq_factor": "1"}, TypeError, "low_freq_factor", "'1'"),
        ({**LLAMA3_8K, "high_freq_factor": 0.999}, ValueError, "high_freq_factor", "0.999"),
        ({**LLAMA3_8K, "high_freq_factor": 0.5}, ValueError, "high_freq_factor", "0.5"),
        ({"rope_type": "linear", "factor": NAN}, ValueError, "factor", "nan"),
        ({"rope_theta": None}, ValueError, "rope_theta", "needs"),
    ],
)
def test_parameter_messages_name_the_key_and_value(params, exc, key, value):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(exc) as info:
            fastpe.rope_frequencies(64, params)
    msg = str(info.value)
    assert f"rope_parameters[{key!r}" in msg and value in msg, msg


def test_longrope_factor_messages_name_the_entry():
    with pytest.raises(TypeError, match=re.escape("rope_parameters['long_factor'][2]")):
        fastpe.rope_frequencies(8, {**LONGROPE4, "long_factor": [1.0, 2.0, "3", 4.0]})
    with pytest.raises(ValueError, match=re.escape("rope_parameters['short_factor'][1] must")):
        fastpe.rope_frequencies(8, {**LONGROPE4, "short_factor": [1.0, NAN, 1.0, 1.0]})


def test_inv_freq_overflow_is_named_not_a_base():
    for call in (
        lambda: fastpe.rope_cache(8, inv_freq=[1.0, 1e300], seq_len=2),
        lambda: fastpe.apply_rope(np.ones((1, 1, 2, 8)), inv_freq=[1.0, 1e300]),
    ):
        with pytest.raises(ValueError, match=re.escape("inv_freq[1] = 1e+300")):
            call()


@pytest.mark.parametrize(
    "head_dim, exc, match",
    [
        ("x", TypeError, "head_dim"),
        (0, ValueError, "head_dim"),
        (8.0, TypeError, "head_dim"),
        (6, ValueError, "more than head_dim=6"),  # 4 frequencies rotate 8 dims
    ],
)
def test_cache_checks_head_dim_with_inv_freq(head_dim, exc, match):
    with pytest.raises(exc, match=match):
        fastpe.rope_cache(head_dim, inv_freq=np.ones(4), seq_len=2)


def test_cache_inv_freq_may_be_wider_than_the_frequencies():
    w = 10000.0 ** (-np.arange(0, 8, 2) / 8)
    a = fastpe.rope_cache(8, inv_freq=w, seq_len=3, dtype=np.float64)
    b = fastpe.rope_cache(12, inv_freq=w, seq_len=3, dtype=np.float64)  # partial rotary
    np.testing.assert_array_equal(a, b)


def test_bfloat16_inv_freq_is_converted_exactly():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    w = (10000.0 ** (-np.arange(0, 64, 2) / 64)).astype(ml_dtypes.bfloat16)
    exact = w.astype(np.float64)  # (every bfloat16 is a float64)
    assert not np.array_equal(exact, 10000.0 ** (-np.arange(0, 64, 2) / 64))
    want = fastpe.rope_cache(64, inv_freq=exact, seq_len=5, offset=3, dtype=np.float64)
    got = fastpe.rope_cache(64, inv_freq=w, seq_len=5, offset=3, dtype=np.float64)
    np.testing.assert_array_equal(got, want)
    k = np.arange(3, 8)[:, None]
    np.testing.assert_allclose(got[0][:, :32], np.cos(k * exact), rtol=0, atol=1e-15)
    q = np.ones((1, 2, 5, 64))
    want_q = fastpe.apply_rope(q.copy(), offset=3, inv_freq=exact)
    np.testing.assert_array_equal(fastpe.apply_rope(q, offset=3, inv_freq=w), want_q)


def test_torch_bfloat16_inv_freq_is_converted_exactly():
    torch = pytest.importorskip("torch")
    w = torch.tensor(10000.0 ** (-np.arange(0, 64, 2) / 64), dtype=torch.bfloat16)
    exact = w.float().numpy().astype(np.float64)
    got = fastpe.rope_cache(64, inv_freq=w, seq_len=5, dtype=np.float64)
    np.testing.assert_array_equal(
        got, fastpe.rope_cache(64, inv_freq=exact, seq_len=5, dtype=np.float64)
    )


# ---------------------------------------------------------------- transformers itself

CASES = [
    ("default", {"rope_theta": 10000.0}, 128, None),
    ("default", {"rope_theta": 500000.0}, 64, None),
    ("linear", {"factor": 3.0}, 80, None),
    ("dynamic", {"factor": 2.0}, 128, 10000),
    ("dynamic", {"factor": 2.0}, 128, 100),
    ("yarn", {"factor": 4.0, "original_max_position_embeddings": 4096}, 128, None),
    (
        "yarn",
        {
            "rope_theta": 1e6,
            "factor": 40.0,
            "original_max_position_embeddings": 4096,
            "mscale": 1.0,
            "mscale_all_dim": 1.0,
        },
        64,
        None,
    ),
    (
        "llama3",
        {
            "rope_theta": 500000.0,
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192,
        },
        128,
        None,
    ),
    (
        "longrope",
        {
            "short_factor": list(np.linspace(1, 2, 48)),
            "long_factor": list(np.linspace(1, 30, 48)),
            "original_max_position_embeddings": 4096,
        },
        96,
        8000,
    ),
]


@pytest.mark.parametrize(
    "rope_type, extra, head_dim, seq_len", CASES, ids=[f"{c[0]}-{c[2]}-{c[3]}" for c in CASES]
)
def test_against_transformers(rope_type, extra, head_dim, seq_len):
    pytest.importorskip("torch")
    tr = pytest.importorskip("transformers")
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    params = {"rope_type": rope_type, "rope_theta": 10000.0, **extra}
    mpe = 4096 if rope_type == "dynamic" else 32768
    config = tr.LlamaConfig(
        hidden_size=4 * head_dim,
        num_attention_heads=4,
        head_dim=head_dim,
        max_position_embeddings=mpe,
        rope_parameters=dict(params),
    )
    if rope_type == "default":
        inv, attention = LlamaRotaryEmbedding.compute_default_rope_parameters(config)
    else:
        inv, attention = ROPE_INIT_FUNCTIONS[rope_type](config, device="cpu", seq_len=seq_len)
    inv = inv.numpy()
    w, a = fastpe.rope_frequencies(head_dim, params, max_position_embeddings=mpe, seq_len=seq_len)
    assert a == attention
    # torch's float32 pow (SLEEF, 1 ulp) is not always the correctly rounded power
    # fastpe uses: at most one float32 ulp apart, most entries bitwise
    np.testing.assert_allclose(w, inv, rtol=2.0**-23, atol=0)
    assert np.mean(w == inv) >= 0.9
    w64, _ = fastpe.rope_frequencies(
        head_dim, params, max_position_embeddings=mpe, seq_len=seq_len, precision="float64"
    )
    np.testing.assert_allclose(w64, inv, rtol=16 * 2.0**-24, atol=0)


def generated_configs(n_per_type=60, seed=2026):
    """(rope_type, rope_parameters, head_dim, max_position_embeddings, seq_len) of
    n configurations per rule from a seeded RNG: round and odd thetas and factors,
    partial rotary, each rule's own keys over the ranges models use and beyond."""
    rng = np.random.default_rng(seed)

    def pick(*xs):
        return xs[int(rng.integers(len(xs)))]

    def theta():
        if rng.random() < 0.4:
            return pick(10000.0, 25000.0, 500000.0, 1e6, 5e6)
        return float(np.round(10 ** rng.uniform(3, 7), int(rng.integers(0, 3))))

    def hd():
        return pick(32, 48, 64, 80, 96, 128, 160, 256)

    def old():
        if rng.random() < 0.6:
            return pick(2048, 4096, 8192, 16384, 32768)
        return int(rng.integers(500, 40000))

    def prf():
        return pick(1.0, 1.0, 1.0, 0.5, 0.75, 0.25)

    def num(lo, hi):
        return float(np.round(rng.uniform(lo, hi), int(rng.integers(0, 3))))

    out = []
    for _ in range(n_per_type):
        # (Llama's default rule reads no partial_rotary_factor)
        out.append(("default", {"rope_theta": theta()}, hd(), 4096, None))
        p = {"rope_theta": theta(), "factor": num(1, 16), "partial_rotary_factor": prf()}
        out.append(("linear", p, hd(), 4096, None))
        mpe = old()
        seq = pick(None, int(rng.integers(1, mpe)), int(rng.integers(mpe, 8 * mpe)))
        p = {"rope_theta": theta(), "factor": num(1, 8), "partial_rotary_factor": prf()}
        out.append(("dynamic", p, hd(), mpe, seq))
        o, low = old(), pick(0.5, 1.0, 1.0, 2.0, rng.uniform(0.25, 3))
        p = {
            "rope_theta": theta(),
            "factor": pick(8.0, 16.0, 32.0, float(np.round(rng.uniform(1.5, 64), 2))),
            "low_freq_factor": low,
            "high_freq_factor": low + pick(1.0, 3.0, 7.0, rng.uniform(0.1, 10)),
            "original_max_position_embeddings": o,
            "partial_rotary_factor": prf(),
        }
        out.append(("llama3", p, hd(), 8 * o, None))
        o = old()
        p = {
            "rope_theta": theta(),
            "factor": num(1.5, 64),
            "original_max_position_embeddings": o,
            "beta_fast": pick(32.0, 16.0, rng.uniform(4, 64)),
            "beta_slow": pick(1.0, 2.0, rng.uniform(0.25, 4)),
            "truncate": bool(rng.random() < 0.6),
            "partial_rotary_factor": prf(),
        }
        if rng.random() < 0.3:
            p.update(mscale=pick(1.0, 0.707), mscale_all_dim=pick(1.0, 0.707, 0.5))
        out.append(("yarn", p, hd(), 8 * o, None))
        o, h, pr = old(), hd(), prf()
        n = int(h * pr) // 2
        p = {
            "rope_theta": theta(),
            "short_factor": [float(x) for x in np.round(rng.uniform(1, 3, n), 4)],
            "long_factor": [float(x) for x in np.round(rng.uniform(1, 40, n), 3)],
            "original_max_position_embeddings": o,
            "partial_rotary_factor": pr,
        }
        seq = pick(None, int(rng.integers(1, o)), int(rng.integers(o + 1, 8 * o)))
        out.append(("longrope", p, h, 16 * o, seq))
    return out


def transformers_frequencies(rope_type, params, head_dim, mpe, seq_len):
    """transformers' own frequencies and attention factor for one configuration."""
    tr = pytest.importorskip("transformers")
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    config = tr.LlamaConfig(
        hidden_size=4 * head_dim,
        num_attention_heads=4,
        head_dim=head_dim,
        max_position_embeddings=mpe,
        rope_parameters={"rope_type": rope_type, **params},
    )
    if rope_type == "default":
        inv, attention = LlamaRotaryEmbedding.compute_default_rope_parameters(config)
    else:
        inv, attention = ROPE_INIT_FUNCTIONS[rope_type](config, device="cpu", seq_len=seq_len)
    return inv.numpy(), attention


def float32_ulps(a, b):
    """How many float32 values lie between a and b (both >= 0)."""
    a = np.asarray(a, np.float32).view(np.int32).astype(np.int64)
    return np.abs(a - np.asarray(b, np.float32).view(np.int32).astype(np.int64))


@pytest.fixture(scope="module")
def transformers_cases():
    pytest.importorskip("torch")
    tr = pytest.importorskip("transformers")
    tr.logging.set_verbosity_error()  # (its config checks warn about odd generated values)
    cases = []
    for rope_type, params, head_dim, mpe, seq_len in generated_configs():
        inv, attention = transformers_frequencies(rope_type, params, head_dim, mpe, seq_len)
        cases.append(
            (rope_type, {"rope_type": rope_type, **params}, head_dim, mpe, seq_len, inv, attention)
        )
    return cases


def with_torch_power(monkeypatch):
    """The library's float32 rules with torch's float32 power in place of the
    correctly rounded one, over all exponents at once as transformers evaluates it
    (one tensor ``base ** (arange(0, dim, 2) / dim)``: torch's vector and scalar
    loops may differ in the last bit)."""
    import torch

    from fastpe import kernel

    def torch_pow(base, e):
        return (base ** torch.from_numpy(e.copy())).numpy()

    real = getattr(kernel._rope_rule, "__wrapped__", kernel._rope_rule)

    def rule(*args, **kw):
        return real(*args, **kw, pow32=torch_pow)

    rule.__wrapped__ = real  # type: ignore[attr-defined]
    monkeypatch.setattr(kernel, "_rope_rule", rule)


def test_float32_steps_are_torchs_operation_order(transformers_cases, monkeypatch):
    """With torch's own float32 power in place of the correctly rounded one, the
    rest of precision="float32" -- scalars cast at each operation, scalar / tensor as
    reciprocal(tensor) * scalar -- is torch's to the bit, for every rule."""
    with_torch_power(monkeypatch)
    for _rope_type, params, head_dim, mpe, seq_len, inv, attention in transformers_cases:
        w, a = fastpe.rope_frequencies(
            head_dim, params, max_position_embeddings=mpe, seq_len=seq_len
        )
        assert a == attention, (params, head_dim, mpe, seq_len)
        np.testing.assert_array_equal(w, inv, err_msg=f"{params} {head_dim} {mpe} {seq_len}")


# The most float32 ulps between fastpe's frequencies and transformers' over the
# generated configurations (torch 2.13 CPU). Every difference is torch's float32
# power, one ulp off the correctly rounded one for about 2 % of entries (the test
# above): the reciprocal makes that 2 ulps near a power of two, linear's division 3.
ULPS = {"default": 2, "linear": 3, "dynamic": 2, "yarn": 2, "longrope": 2, "llama3": 3}


def llama3_condition(params, head_dim):
    """How much llama3's blend magnifies a relative change of the power, per entry:
    1 outside the band, 1 + r (1 - 1/factor) / ((high - low) ((1 - s)/factor + s))
    inside it (r = L_orig / wavelength, s = (r - low) / (high - low))."""
    dim = int(head_dim * params.get("partial_rotary_factor", 1.0))
    w = params["rope_theta"] ** (-np.arange(0, dim, 2) / dim)
    r = params["original_max_position_embeddings"] * w / (2 * math.pi)
    lo, hi, f = params["low_freq_factor"], params["high_freq_factor"], params["factor"]
    s = (r - lo) / (hi - lo)
    inside = (r >= lo) & (r <= hi)
    return np.where(inside, 1 + r * (1 - 1 / f) / ((hi - lo) * ((1 - s) / f + s)), 1.0)


def test_float32_within_a_few_ulps_of_transformers(transformers_cases):
    bitwise = []
    for rope_type, params, head_dim, mpe, seq_len, inv, attention in transformers_cases:
        w, a = fastpe.rope_frequencies(
            head_dim, params, max_position_embeddings=mpe, seq_len=seq_len
        )
        assert a == attention
        u = float32_ulps(w, inv)
        bound = ULPS[rope_type] * (
            llama3_condition(params, head_dim) if rope_type == "llama3" else 1
        )
        assert np.all(u <= bound), (params, head_dim, mpe, seq_len, u, bound)
        bitwise.append(u == 0)
    assert np.mean(np.concatenate(bitwise)) >= 0.97


@pytest.mark.parametrize("head_dim, factor", [(128, 8.0), (64, 32.0)], ids=["3.1", "3.2"])
def test_float32_llama_3_1_and_3_2_are_transformers_bitwise(head_dim, factor):
    pytest.importorskip("torch")
    params = {**LLAMA31, "factor": factor}
    inv, _ = transformers_frequencies("llama3", params, head_dim, 131072, None)
    w, _ = fastpe.rope_frequencies(head_dim, params)
    np.testing.assert_array_equal(w, inv)


def test_float32_llama_4_equal_factors_are_transformers_bitwise():
    pytest.importorskip("torch")
    inv, attention = transformers_frequencies("llama3", LLAMA4, 128, 10485760, None)
    w, a = fastpe.rope_frequencies(128, LLAMA4)
    np.testing.assert_array_equal(w, inv)
    assert a == attention


@pytest.mark.parametrize("head_dim", [32, 64, 80, 128, 256])
@pytest.mark.parametrize("band", [0.5, 1.0, 2.0, 3.7])
def test_float32_equal_factors_are_torchs_operation_order(head_dim, band, monkeypatch):
    """Equal factors over head sizes and bands, with torch's float32 power: torch's
    frequencies to the bit (and within a few ulps with the correctly rounded one)."""
    pytest.importorskip("torch")

    params = {**LLAMA4, "rope_theta": 10000.0 * band, "low_freq_factor": band}
    params["high_freq_factor"] = band
    inv, _ = transformers_frequencies("llama3", params, head_dim, 8 * 8192, None)
    assert np.isfinite(inv).all()
    w, _ = fastpe.rope_frequencies(head_dim, params)
    assert np.all(float32_ulps(w, inv) <= ULPS["llama3"])

    with_torch_power(monkeypatch)
    w, _ = fastpe.rope_frequencies(head_dim, params)
    np.testing.assert_array_equal(w, inv)


# ---------------------------------------------------------------- the cos/sin cache

YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096}


@pytest.mark.parametrize("params", [None, LLAMA31, YARN], ids=["default", "llama3", "yarn"])
def test_cache_vs_mpmath_far_positions(params):
    # exact angles for the chosen frequencies, positions up to 2^20
    mpmath.mp.dps = 40
    pos = np.array([0, 1, 777, 65535, 2**20 - 3, 2**20])
    cos, sin = fastpe.rope_cache(64, params, positions=pos, dtype=np.float64)
    w, a = fastpe.rope_frequencies(64, params)
    c32, s32 = fastpe.rope_cache(64, params, positions=pos)
    for r, k in enumerate(pos):
        for i in range(0, 32, 3):
            ang = mpmath.mpf(int(k)) * mpmath.mpf(w[i])
            for got, got32, want in (
                (cos[r, i], c32[r, i], a * mpmath.cos(ang)),
                (sin[r, i], s32[r, i], a * mpmath.sin(ang)),
            ):
                assert abs(float(got - want)) <= 1e-15 * max(a, 1.0)
                assert abs(float(got32 - want)) <= 2.0**-24 * 1.5 * max(a, 1.0)


def test_cache_layouts():
    kw = dict(seq_len=5, dtype=np.float64, precision="float64")
    cos, sin = fastpe.rope_cache(16, **kw)
    ci, si = fastpe.rope_cache(16, layout="interleaved", **kw)
    k = np.arange(5)[:, None]
    w = 10000.0 ** (-np.arange(0, 16, 2) / 16)
    np.testing.assert_allclose(cos[:, :8], np.cos(k * w), rtol=0, atol=1e-15)
    np.testing.assert_array_equal(cos[:, :8], cos[:, 8:])
    np.testing.assert_array_equal(sin[:, :8], sin[:, 8:])
    np.testing.assert_array_equal(ci[:, 0::2], cos[:, :8])
    np.testing.assert_array_equal(ci[:, 1::2], cos[:, :8])
    np.testing.assert_array_equal(si[:, 0::2], sin[:, :8])


def test_cache_positions_are_the_range_rows_bitwise():
    cos, sin = fastpe.rope_cache(64, LLAMA31, seq_len=300, offset=1000)
    ids = np.array([[1000, 1001, 1299], [1150, 1000, 1000]])
    c, s = fastpe.rope_cache(64, LLAMA31, positions=ids)
    assert c.shape == (2, 3, 64)
    np.testing.assert_array_equal(c, cos[ids - 1000])
    np.testing.assert_array_equal(s, sin[ids - 1000])


def test_cache_attention_factor_and_inv_freq():
    w, a = fastpe.rope_frequencies(64, YARN)
    assert a > 1
    c, _s = fastpe.rope_cache(64, YARN, seq_len=40, dtype=np.float64)
    c1, _s1 = fastpe.rope_cache(64, inv_freq=w, seq_len=40, dtype=np.float64)
    np.testing.assert_array_equal(c, c1 * a)  # float64: the same one rounding
    c2, _ = fastpe.rope_cache(64, inv_freq=w, attention_factor=a, seq_len=40, dtype=np.float64)
    np.testing.assert_array_equal(c2, c)
    assert np.max(np.abs(c)) == pytest.approx(a)


def test_cache_out_is_filled_and_returned():
    c0, s0 = fastpe.rope_cache(32, seq_len=10, offset=5)
    out = (np.zeros((10, 32), np.float32), np.zeros((10, 32), np.float32))
    got = fastpe.rope_cache(32, seq_len=10, offset=5, out=out)
    assert got[0] is out[0] and got[1] is out[1]
    np.testing.assert_array_equal(out[0], c0)
    np.testing.assert_array_equal(out[1], s0)


def test_cache_dynamic_uses_the_longest_position():
    params = {"rope_type": "dynamic", "factor": 2.0}
    c, _ = fastpe.rope_cache(
        64, params, seq_len=10, offset=8000, max_position_embeddings=4096, dtype=np.float64
    )
    w, _ = fastpe.rope_frequencies(64, params, max_position_embeddings=4096, seq_len=8010)
    k = np.arange(8000, 8010)[:, None]
    np.testing.assert_allclose(c[:, :32], np.cos(k * w), rtol=0, atol=1e-11)


@pytest.mark.parametrize(
    "kw, exc, match",
    [
        (dict(), ValueError, "seq_len"),
        (dict(seq_len=4, positions=[1]), ValueError, "seq_len"),
        (dict(positions=[1.5, np.nan]), ValueError, "positions must be finite"),
        (dict(positions=[0], offset=3), ValueError, "offset"),
        (dict(seq_len=-1), ValueError, "seq_len"),
        (dict(seq_len=4, layout="neox"), ValueError, "layout"),
        (dict(seq_len=4, dtype=np.int32), TypeError, "dtype"),
        (dict(seq_len=4, inv_freq=[1.0, -1.0]), ValueError, "inv_freq"),
        (dict(seq_len=4, inv_freq=[[[1.0]]]), TypeError, "inv_freq"),  # (2-D: one row per head)
        (
            dict(seq_len=4, rope_parameters={"rope_theta": 10.0}, inv_freq=[1.0]),
            ValueError,
            "inv_freq",
        ),
        (dict(seq_len=4, out=np.zeros((4, 8))), TypeError, "pair"),
        (dict(seq_len=4, out=(np.zeros((4, 8)), np.zeros((4, 7)))), ValueError, "shape"),
        (
            dict(seq_len=4, out=(np.zeros((4, 8)), np.zeros((4, 8), np.float32))),
            TypeError,
            "dtype",
        ),
        (dict(seq_len=2**50), ValueError, "positions"),
    ],
)
def test_cache_bad_arguments(kw, exc, match):
    kw = {"rope_parameters": None, **kw}
    with pytest.raises(exc, match=match):
        fastpe.rope_cache(8, **kw)


def test_cache_refused_out_is_untouched():
    a = np.full((4, 8), 7.0)
    with pytest.raises(ValueError):
        fastpe.rope_cache(8, seq_len=4, out=(a, a))
    assert (a == 7).all()


def test_against_transformers_llama_rotary_embedding():
    torch = pytest.importorskip("torch")
    tr = pytest.importorskip("transformers")
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    config = tr.LlamaConfig(
        hidden_size=512,
        num_attention_heads=4,
        head_dim=128,
        max_position_embeddings=131072,
        rope_parameters=dict(LLAMA31),
    )
    rot = LlamaRotaryEmbedding(config)
    ids = torch.tensor([[0, 1, 5, 4095, 100000]])
    tc, ts = rot(torch.zeros(1, 5, 128), ids)
    inv = rot.inv_freq.numpy()
    c, s = fastpe.rope_cache(128, inv_freq=inv, positions=ids.numpy(), dtype=np.float64)
    # transformers rounds the angle k*w to float32: its error grows with k, fastpe's does not
    ang = 100000 * float(inv.max())
    np.testing.assert_allclose(tc.numpy(), c, rtol=0, atol=2.0**-24 * (4 + 2 * ang))
    np.testing.assert_allclose(ts.numpy(), s, rtol=0, atol=2.0**-24 * (4 + 2 * ang))


# ---------------------------------------------------------------- applying the rotation


def rotate_half(x):
    h = x.shape[-1] // 2
    return np.concatenate([-x[..., h:], x[..., :h]], axis=-1)


def rotate_every_two(x):
    return np.stack([-x[..., 1::2], x[..., 0::2]], axis=-1).reshape(x.shape)


def rope_ref(x, cos, sin, layout):
    """transformers' apply_rotary_pos_emb (half) / GPT-J's (interleaved), in float64,
    on the first cos.shape[-1] dims; cos/sin broadcast against x."""
    r = cos.shape[-1]
    x = x.astype(np.float64)
    rot = rotate_half if layout == "half" else rotate_every_two
    out = x.copy()
    out[..., :r] = x[..., :r] * cos + rot(x[..., :r]) * sin
    return out


def one_ulp(dtype):
    return 2.0**-23 if dtype == np.float32 else 2.0**-52


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("params", [None, LLAMA31, YARN], ids=["default", "llama3", "yarn"])
def test_apply_bhsd_with_per_batch_offsets(dtype, layout, params):
    rng = np.random.default_rng(1)
    q = rng.standard_normal((2, 4, 9, 64)).astype(dtype)
    k = rng.standard_normal((2, 2, 9, 64)).astype(dtype)  # fewer kv heads (GQA)
    q0, k0 = q.copy(), k.copy()
    got = fastpe.apply_rope(q, k, rope_parameters=params, offset=[5, 70000], layout=layout)
    assert got[0] is q and got[1] is k
    for b, off in enumerate([5, 70000]):
        cos, sin = fastpe.rope_cache(
            64,
            params,
            seq_len=9,
            offset=off,
            layout=layout,
            dtype=np.float64,
            max_position_embeddings=131072,
        )
        for x, x0 in ((q, q0), (k, k0)):
            want = rope_ref(x0[b], cos, sin, layout)
            tol = one_ulp(dtype) * 4 * (np.abs(want) + 1)
            assert np.all(np.abs(x[b] - want) <= tol)


def test_apply_bshd_positions_and_partial_rotary():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 6, 3, 80))  # (batch, seq, heads, dim)
    x0 = x.copy()
    ids = np.array([[0, 0, 0, 1, 2, 3], [4, 5, 6, 7, 8, 9]])  # left padding in row 0
    params = {"partial_rotary_factor": 0.25}  # 20 of 80 dims rotate
    fastpe.apply_rope(x, rope_parameters=params, positions=ids, seq_axis=1)
    cos, sin = fastpe.rope_cache(80, params, positions=ids, dtype=np.float64)
    want = rope_ref(x0, cos[:, :, None, :], sin[:, :, None, :], "half")
    np.testing.assert_allclose(x, want, rtol=0, atol=4e-16 * 8)
    np.testing.assert_array_equal(x[..., 20:], x0[..., 20:])


def test_apply_strided_view_in_place():
    base = np.random.default_rng(3).standard_normal((4, 10, 2, 40))
    x = base[:, ::2, :, 4:36].transpose(0, 2, 1, 3)  # (batch, heads, seq, 32)
    x0 = np.array(x)
    before = base.copy()
    fastpe.apply_rope(x, offset=11)
    cos, sin = fastpe.rope_cache(32, seq_len=5, offset=11, dtype=np.float64)
    np.testing.assert_allclose(x, rope_ref(x0, cos, sin, "half"), rtol=0, atol=4e-15)
    untouched = np.ones(base.shape, bool)
    untouched[:, ::2, :, 4:36] = False
    np.testing.assert_array_equal(base[untouched], before[untouched])


def test_apply_inv_freq_is_the_rule_bitwise():
    q = np.random.default_rng(4).standard_normal((1, 2, 5, 32)).astype(np.float32)
    a, b = q.copy(), q.copy()
    w, att = fastpe.rope_frequencies(32, YARN)
    fastpe.apply_rope(a, rope_parameters=YARN, offset=3)
    fastpe.apply_rope(b, inv_freq=w, attention_factor=att, offset=3)
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
    "make, kw, exc, match",
    [
        (lambda: np.zeros((2, 3, 8), np.int32), {}, TypeError, "float32"),
        (lambda: np.zeros(8), {}, ValueError, "shape"),
        (
            lambda: np.broadcast_to(np.zeros((1, 3, 8)), (2, 3, 8)),
            {},
            ValueError,
            "writable|overlap",
        ),
        (lambda: np.zeros((2, 3, 16))[..., ::2], {}, ValueError, "contiguous"),
        (lambda: np.zeros((2, 3, 7)), {}, ValueError, "even"),
        (lambda: np.zeros((2, 3, 8)), dict(head_dim=16), ValueError, "head_dim"),
        (lambda: np.zeros((2, 3, 8)), dict(positions=[1, 2]), ValueError, "positions"),
        (lambda: np.zeros((2, 3, 8)), dict(positions=[1, 2, 3], offset=2), ValueError, "offset"),
        (lambda: np.zeros((2, 3, 8)), dict(offset=[1, 2, 3]), ValueError, "offset"),
        (lambda: np.zeros((2, 3, 8)), dict(positions=[1.5, 2, np.inf]), ValueError, "finite"),
        (lambda: np.zeros((2, 3, 8)), dict(seq_axis=2), ValueError, "seq_axis"),
        (lambda: np.zeros((2, 3, 8)), dict(seq_axis=-1), ValueError, "seq_axis"),
        (lambda: np.zeros((2, 3, 8)), dict(seq_axis=-4), ValueError, "seq_axis"),
        (lambda: np.zeros((2, 3, 8)), dict(layout="neox"), ValueError, "layout"),
        (lambda: np.zeros((2, 3, 8)), dict(offset=2**60), ValueError, "positions"),
        (lambda: np.zeros((2, 3, 8)), dict(inv_freq=[1.0] * 5), ValueError, "head_dim"),
    ],
)
def test_apply_bad_arguments_leave_q_untouched(make, kw, exc, match):
    q = make()
    before = np.array(q, copy=True)
    with pytest.raises(exc, match=match):
        fastpe.apply_rope(q, **kw)
    np.testing.assert_array_equal(q, before)


def test_apply_q_and_k_must_not_share_memory_or_disagree():
    x = np.ones((2, 3, 8))
    with pytest.raises(ValueError, match="share memory"):
        fastpe.apply_rope(x, x[:1])
    with pytest.raises(ValueError, match="agree"):
        fastpe.apply_rope(np.ones((2, 3, 8)), np.ones((2, 4, 8)))
    assert (x == 1).all()


def test_apply_against_transformers_apply_rotary_pos_emb():
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    rng = np.random.default_rng(5)
    q = torch.tensor(rng.standard_normal((1, 4, 6, 64)), dtype=torch.float64)
    k = torch.tensor(rng.standard_normal((1, 2, 6, 64)), dtype=torch.float64)
    ids = np.array([[10, 11, 12, 13, 14, 15]])
    cos, sin = fastpe.rope_cache(64, LLAMA31, positions=ids, dtype=np.float64)
    tq, tk = apply_rotary_pos_emb(q, k, torch.tensor(cos), torch.tensor(sin))
    fastpe.apply_rope(q, k, rope_parameters=LLAMA31, positions=ids)  # torch tensors, in place
    np.testing.assert_allclose(q.numpy(), tq.numpy(), rtol=0, atol=1e-15)
    np.testing.assert_allclose(k.numpy(), tk.numpy(), rtol=0, atol=1e-15)
