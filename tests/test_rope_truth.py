"""RoPE frequencies in float64 against the exact value of each rule's formula
(mpmath at 200 bits, rounded once): every frequency correctly rounded, the same
bits on every machine.  The formulas are written here from the papers /
transformers' functions, independently of fastpe's evaluation (docs/rope.md).

The scalar steps transformers computes with Python floats (yarn's ramp ends,
dynamic's base check, the attention factors) are double operations with a
correctly rounded log (``cr_log``)."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from test_rope import generated_configs

import fastpe
from fastpe import kernel

mp = mpmath.mpf


def cr_log(x: float) -> float:
    with mpmath.workprec(200):
        return float(mpmath.log(mp(x)))


def exact(rope_type, params, head_dim, mpe, seq_len):
    """The rule's frequencies, each its real formula rounded once to float64."""
    theta = mp(params.get("rope_theta", 10000.0))
    d = int(head_dim * params.get("partial_rotary_factor", 1.0))
    old = params.get("original_max_position_embeddings", mpe)
    if rope_type == "dynamic":
        f = mp(params["factor"])
        L = max(seq_len or 0, mpe)
        theta = theta * (f * L / mpe - (f - 1)) ** (mp(d) / (d - 2))
    w = [theta ** (-mp(2 * i) / d) for i in range(d // 2)]
    if rope_type == "linear":
        w = [x / params["factor"] for x in w]
    elif rope_type == "llama3":
        f, lo, hi = params["factor"], params["low_freq_factor"], params["high_freq_factor"]
        out = []
        for x in w:
            wavelen = 2 * mpmath.pi / x
            if wavelen < mp(old) / hi:
                out.append(x)
            elif wavelen > mp(old) / lo:
                out.append(x / f)
            else:
                s = (mp(old) / wavelen - lo) / (mp(hi) - lo)
                out.append((1 - s) * x / f + s * x)
        w = out
    elif rope_type == "yarn":
        f = params.get("factor") or mpe / old
        bf, bs = params.get("beta_fast") or 32.0, params.get("beta_slow") or 1.0

        def ramp_end(rotations):
            return d * cr_log(old / (rotations * 2 * math.pi)) / (2 * cr_log(float(theta)))

        lo, hi = ramp_end(bf), ramp_end(bs)
        if params.get("truncate", True):
            lo, hi = math.floor(lo), math.ceil(hi)
        lo, hi = max(lo, 0), min(hi, d - 1)
        if lo == hi:
            hi += 0.001
        out = []
        for i, x in enumerate(w):
            r = min(max((i - mp(lo)) / (mp(hi) - lo), 0), 1)
            out.append(x / f * r + x * (1 - r))
        w = out
    elif rope_type == "longrope":
        which = "long_factor" if seq_len and seq_len > old else "short_factor"
        w = [x / e for x, e in zip(w, params[which], strict=True)]
    return np.array([float(x) for x in w])


def frequencies(rope_type, params, head_dim, mpe, seq_len, precision="float64"):
    return fastpe.rope_frequencies(
        head_dim,
        {"rope_type": rope_type, **params},
        max_position_embeddings=mpe,
        seq_len=seq_len,
        precision=precision,
    )


def test_float64_frequencies_are_correctly_rounded():
    """Every frequency is the correctly rounded value, those whose fast
    evaluation lies too close to a rounding boundary included (they take the
    exact path); nothing is left undecided."""
    n = 0
    undecided = kernel._undecided_roundings()
    with mpmath.workprec(200):
        for rope_type, params, head_dim, mpe, seq_len in generated_configs(n_per_type=25):
            try:
                w, _ = frequencies(rope_type, params, head_dim, mpe, seq_len)
            except ValueError:
                continue  # refused configurations: tests/test_rope.py
            want = exact(rope_type, params, head_dim, mpe, seq_len)
            np.testing.assert_array_equal(w, want, err_msg=f"{rope_type} {params} {head_dim}")
            n += w.size
    assert n > 5000
    assert kernel._undecided_roundings() == undecided


# Exact values within 2^-100 of a float64 rounding boundary: the fast path
# cannot round them.  10000^(-1/4) / 3.2 = 0.1 / 3.2 (3.2 as a double, a little
# above 3.2) = 1/32 - 2^-59 + 2^-113: just above the midpoint below 1/32.
HARD = [("linear", {"rope_theta": 10000.0, "factor": 3.2}, 48, 6)]


@pytest.mark.parametrize(("rope_type", "params", "head_dim", "i"), HARD)
def test_values_on_a_rounding_boundary_take_the_exact_path(rope_type, params, head_dim, i):
    runs = kernel._exact_path_runs()
    w, _ = frequencies(rope_type, params, head_dim, None, None)
    assert kernel._exact_path_runs() > runs
    with mpmath.workprec(300):
        want = exact(rope_type, params, head_dim, None, None)
    assert w[i] == want[i] == 2.0**-5


@pytest.fixture
def exact_path_only():
    was = kernel._force_exact_path(True)
    try:
        yield
    finally:
        kernel._force_exact_path(was)


def test_exact_path_gives_the_same_bits(exact_path_only):
    """Every value through the exact path alone equals the fast path's and the
    mpmath truth: the exact path is right wherever it runs."""
    rng = np.random.default_rng(11)
    base = np.concatenate([rng.uniform(1.0, 1e7, 150), 10.0 ** rng.uniform(-300, 300, 50)])
    expo = rng.uniform(-1.5, 1.5, 200)
    runs = kernel._exact_path_runs()
    got = kernel._power(base, expo)
    got32 = kernel._power(base[:150], expo[:150], float32=True)
    logs = [kernel._log(float(x)) for x in base[100:]]
    assert kernel._exact_path_runs() - runs >= 400
    configs = list(generated_configs(n_per_type=4))
    ours = []
    for rope_type, params, head_dim, mpe, seq_len in configs:
        try:
            ours.append(frequencies(rope_type, params, head_dim, mpe, seq_len)[0])
        except ValueError:
            ours.append(None)
    kernel._force_exact_path(False)
    np.testing.assert_array_equal(got, kernel._power(base, expo))
    np.testing.assert_array_equal(got32, kernel._power(base[:150], expo[:150], float32=True))
    assert logs == [kernel._log(float(x)) for x in base[100:]]
    with mpmath.workprec(200):
        assert logs == [cr_log(float(x)) for x in base[100:]]
        want = [float(mp(b) ** mp(e)) for b, e in zip(base, expo, strict=True)]
        np.testing.assert_array_equal(got, want)
        b32, e32 = base[:150].astype(np.float32), expo[:150].astype(np.float32)
        want32 = [_to_f32(mp(float(b)) ** mp(float(e))) for b, e in zip(b32, e32, strict=True)]
        np.testing.assert_array_equal(got32, np.array(want32, np.float32))
        for (rope_type, params, head_dim, mpe, seq_len), w in zip(configs, ours, strict=True):
            if w is not None:
                np.testing.assert_array_equal(w, exact(rope_type, params, head_dim, mpe, seq_len))


@pytest.mark.parametrize("theta", [10000.0, 500000.0, 1e6, 5e6, 1.5, 1e280])
@pytest.mark.parametrize("head_dim", [2, 64, 128, 4096])
def test_default_rule_is_the_correctly_rounded_power(theta, head_dim):
    w, _ = fastpe.rope_frequencies(head_dim, {"rope_theta": theta}, precision="float64")
    with mpmath.workprec(200):
        want = [float(mp(theta) ** (-mp(2 * i) / head_dim)) for i in range(head_dim // 2)]
    np.testing.assert_array_equal(w, want)


def test_power_is_correctly_rounded_float64_and_float32():
    rng = np.random.default_rng(7)
    base = np.concatenate([rng.uniform(1.0, 1e7, 400), rng.uniform(1e-3, 1.0, 100)])
    expo = rng.uniform(-1.5, 1.5, 500)
    got = kernel._power(base, expo)
    got32 = kernel._power(base, expo, float32=True)
    assert got.dtype == np.float64 and got32.dtype == np.float32
    b32, e32 = base.astype(np.float32), expo.astype(np.float32)
    with mpmath.workprec(200):
        want = [float(mp(b) ** mp(e)) for b, e in zip(base, expo, strict=True)]
        # rounded once to float32 (mpmath's own rounding at 24 bits)
        want32 = []
        for b, e in zip(b32, e32, strict=True):
            v = mp(float(b)) ** mp(float(e))
            want32.append(_to_f32(v))
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got32, np.array(want32, np.float32))
    # C's special values
    assert kernel._power(0.0, 0.0) == 1.0 and kernel._power(np.inf, 0.5) == np.inf
    assert kernel._power(0.0, 0.5) == 0.0 and kernel._power(2.0, 2000.0) == np.inf


def _to_f32(v) -> float:
    """An mpf rounded to nearest (even) float32, in range."""
    with mpmath.workprec(24):
        return float(+v)


def test_float32_power_is_rounded_once_not_through_double():
    # base 2^24 + 1 (not a float32: cast to 2^24) aside, find a float32 power
    # whose float64 value lies on a float32 midpoint: double rounding would tie
    # to even, the correctly rounded float32 of the exact power is the other
    # neighbour when the exact value is beyond the midpoint
    with mpmath.workprec(200):
        for b in (3.0, 5.0, 7.0, 11.0):
            for e in (0.5, 1.5, 2.5, 0.25):
                got = kernel._power(b, e, float32=True)
                assert got == _to_f32(mp(b) ** mp(e))


@pytest.mark.parametrize("x", [2.0, 10.0, 224.0, 0.3, 1e-300, 1e300, 1.0 + 2.0**-40, 5e-324])
def test_log_is_correctly_rounded(x):
    assert kernel._log(x) == cr_log(x)
    assert kernel._log(1.0) == 0.0 and kernel._log(0.0) == -math.inf
    assert math.isnan(kernel._log(-1.0))
