"""timm's frequency rules (fastpe.rope_presets.timm_rotary, timm_dinov3 and the grid's
linspace; the library's lib/src/rope_presets.c) against truth:

- float64: each frequency is the real number of its formula (docs/rope.md: the
  exponents i / (n - 1) and 2i / (dim // 2) exact rationals, pi exact), in mpmath at
  256 bits, rounded once -- bit for bit, with the fast path and with every value
  forced through the exact path;
- float32: each of timm's torch float32 steps emulated exactly (exact rationals
  rounded to float32, the powers correctly rounded), bit for bit; and, where torch
  imports, timm's own expressions (written out from timm.layers.pos_embed_sincos) on
  torch tensors, with torch's power standing in for the correctly rounded one;
- the refusals, as ValueError naming the argument.
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fastpe import kernel
from fastpe import rope_presets as rp


def mp256(fn):
    """fn() evaluated with 256 bits, rounded once to the nearest double."""
    with mpmath.workprec(256):
        return float(fn())


def frac(x) -> Fraction:
    """An mpmath number or a float as the exact rational it is."""
    if isinstance(x, float):
        return Fraction(x)
    man, exp = mpmath.mpf(x).man_exp
    return Fraction(int(man)) * Fraction(2) ** int(exp) if man else Fraction(0)


def f32(q) -> float:
    """The exact rational q rounded to the nearest float32 (ties to even), as a float."""
    q = Fraction(q)
    if q == 0:
        return 0.0
    sign, q = (-1 if q < 0 else 1), abs(q)
    e = q.numerator.bit_length() - q.denominator.bit_length()
    if Fraction(2) ** e > q:
        e -= 1
    if e > 127:
        return sign * math.inf
    e = max(e, -126)  # subnormals: the spacing stays 2^-149
    scaled = q / Fraction(2) ** (e - 23)
    m = math.floor(scaled)
    r = scaled - m
    if r > Fraction(1, 2) or (r == Fraction(1, 2) and m % 2):
        m += 1
    v = sign * m * 2.0 ** (e - 23)
    return v if abs(v) <= float(np.finfo(np.float32).max) else sign * math.inf


def pow32(base: float, e: float) -> float:
    """The correctly rounded float32 power of float32 operands."""
    if base == 0.0:
        return 1.0 if e == 0 else 0.0
    with mpmath.workprec(256):
        return f32(frac(mpmath.mpf(base) ** mpmath.mpf(e)))


def linspace32(start: float, end: float, steps: int) -> list[float]:
    """torch.linspace's scalar formula in float32, each step exact then rounded once."""
    a, b = f32(Fraction(start)), f32(Fraction(end))
    if steps == 1:
        return [a]
    step = f32(Fraction(f32(Fraction(b) - Fraction(a))) / f32(steps - 1))
    return [
        f32(Fraction(a) + Fraction(step) * i)
        if i < steps // 2
        else f32(Fraction(b) - Fraction(step) * (steps - 1 - i))
        for i in range(steps)
    ]


PI32 = f32(Fraction(math.pi))

# ---------------------------------------------------------------- float64: the real formula

DIMS = [4, 8, 12, 36, 64, 130]


def real_bands(kind: str, n: int, x: float, y: float = 0.0, half: int = 0) -> list[float]:
    """The rule's real numbers (pe_presets.h), each rounded once from 256 bits."""
    m = max(n - 1, 1)
    with mpmath.workprec(256):
        X, Y, pi = mpmath.mpf(x), mpmath.mpf(y), mpmath.pi
        t = [mpmath.mpf(i) / m for i in range(n)]
        if kind == "pixel_linear":
            f = [lambda k=k: (1 + (X / 2 - 1) * k) * pi for k in t]
        elif kind == "pixel_log":
            f = [lambda k=k: (X / 2) ** k * pi for k in t]
        elif kind == "language":
            f = [lambda i=i: X ** (-mpmath.mpf(i) / n) for i in range(n)]
        elif kind == "dinov3_temperature":
            f = [lambda i=i: 2 * pi / X ** (mpmath.mpf(2 * i) / half) for i in range(n)]
        else:
            f = [lambda k=k: 2 * pi / (X * (Y / X) ** k) for k in t]
        return [mp256(g) for g in f]


@pytest.mark.parametrize("dim", DIMS)
@pytest.mark.parametrize("max_res", [224, 256, 100, 3, 2.5, 0.75, 1e6, 1e300])
@pytest.mark.parametrize("linear", [True, False])
def test_pixel_bands_float64_are_the_real_formula_rounded_once(dim, max_res, linear):
    nb = dim // 4
    p = rp.timm_rotary(dim, max_res=max_res, linear_bands=linear, precision="float64")
    want = real_bands("pixel_linear" if linear else "pixel_log", nb, float(max_res))
    assert p.inv_freq[:nb].tolist() == want, (dim, max_res, linear)
    assert p.inv_freq.tolist() == want * 2


@pytest.mark.parametrize("dim", DIMS)
@pytest.mark.parametrize("temperature", [10000, 100.0, 3.7, 1e9, 0.01])
def test_language_bands_and_dinov3_temperature_float64(dim, temperature):
    nb = dim // 4
    p = rp.timm_rotary(dim, temperature=temperature, in_pixels=False, precision="float64")
    assert p.inv_freq[:nb].tolist() == real_bands("language", nb, float(temperature))
    d = rp.timm_dinov3(dim, temperature, precision="float64")
    want = real_bands("dinov3_temperature", nb, float(temperature), half=dim // 2)
    assert d.inv_freq.tolist() == want * 2, (dim, temperature)


@pytest.mark.parametrize("dim", DIMS)
@pytest.mark.parametrize(
    "lo, hi", [(0.5, 64.0), (1.0, 1000.0), (3.0, 2.0), (1e-3, 7.5), (2.0, 2.0)]
)
def test_dinov3_periods_float64(dim, lo, hi):
    nb = dim // 4
    d = rp.timm_dinov3(dim, None, lo, hi, precision="float64")
    assert d.inv_freq.tolist() == real_bands("dinov3_periods", nb, lo, hi) * 2, (dim, lo, hi)


CASES = [
    ("pixel_linear", 17, 224.0, 0.0, 0),
    ("pixel_log", 17, 224.0, 0.0, 0),
    ("pixel_log", 40, 3.3, 0.0, 0),
    ("dinov3_temperature", 16, 100.0, 0.0, 33),
    ("dinov3_periods", 16, 0.5, 64.0, 0),
    ("dinov3_periods", 9, 7.0, 0.1, 0),
]


@pytest.mark.parametrize("kind, n, x, y, half", CASES)
def test_exact_path_gives_the_same_bits(kind, n, x, y, half):
    """Every value through the exact path (pe_mp): the bits of the fast path."""
    fast = kernel._timm_frequencies(kind, n, x, y, half=half, precision="float64")
    was = kernel._force_exact_path(True)
    try:
        exact = kernel._timm_frequencies(kind, n, x, y, half=half, precision="float64")
    finally:
        kernel._force_exact_path(was)
    assert fast.tolist() == exact.tolist()
    assert fast.tolist() == real_bands(kind, n, x, y, half)


# ---------------------------------------------------------------- float32: timm's steps


@pytest.mark.parametrize(
    "start, end, steps",
    [(-1.0, 1.0, n) for n in (1, 2, 3, 5, 7, 14, 33, 224)]
    + [(1.0, 112.0, 12), (0.0, 6.807354922057604, 16), (0.0, 1.0, 9), (1.0, 1.0000001, 30)]
    + [(1.0, 1e-30, 5), (0.3, -7.1, 100)],
)
def test_linspace32_is_torchs_scalar_formula(start, end, steps):
    got = kernel._linspace32(start, end, steps)
    assert got.tolist() == linspace32(start, end, steps)


def timm_bands32(kind: str, n: int, x: float, y: float = 0.0, half: int = 0) -> list[float]:
    """timm's float32 steps emulated exactly (the expressions: timm_torch_bands)."""
    if kind == "pixel_linear":
        return [f32(Fraction(b) * Fraction(PI32)) for b in linspace32(1.0, x / 2, n)]
    if kind == "pixel_log":
        end = kernel._log(x) / kernel._log(2.0) - 1  # math.log(max_res, 2) - 1
        e = linspace32(0.0, end, n)
        return [f32(Fraction(pow32(2.0, v)) * Fraction(PI32)) for v in e]
    if kind == "language":  # 1 / temperature ** (arange(n) / n)
        return [f32(1 / Fraction(pow32(f32(Fraction(x)), f32(Fraction(i, n))))) for i in range(n)]
    if kind == "dinov3_temperature":
        e = [f32(Fraction(f32(2 * i)) / f32(half)) for i in range(n)]
        return [2 * math.pi / pow32(f32(Fraction(x)), v) for v in e]
    base = f32(Fraction(y / x))
    periods = [
        f32(Fraction(f32(Fraction(x))) * Fraction(pow32(base, v))) for v in linspace32(0.0, 1.0, n)
    ]
    return [2 * math.pi / p for p in periods]


CASES32 = [
    (kind, n, x, y, half)
    for n in (1, 2, 8, 16, 33)
    for kind, x, y, half in [
        ("pixel_linear", 224.0, 0.0, 0),
        ("pixel_linear", 2.2, 0.0, 0),
        ("pixel_log", 224.0, 0.0, 0),
        ("pixel_log", 1000.0, 0.0, 0),
        ("language", 10000.0, 0.0, 0),
        ("language", 100.0, 0.0, 0),
        ("dinov3_temperature", 100.0, 0.0, 2 * n),
        ("dinov3_temperature", 10000.0, 0.0, 2 * n + 1),
        ("dinov3_periods", 0.5, 64.0, 0),
        ("dinov3_periods", 1.0, 1000.0, 0),
    ]
]


@pytest.mark.parametrize("kind, n, x, y, half", CASES32)
def test_float32_steps_emulated_exactly(kind, n, x, y, half):
    got = kernel._timm_frequencies(kind, n, x, y, half=half)
    assert got.tolist() == timm_bands32(kind, n, x, y, half)


def test_presets_take_the_rules():
    p = rp.timm_rotary(64, max_res=256)
    assert p.inv_freq[:16].tolist() == timm_bands32("pixel_log", 16, 256.0)
    p = rp.timm_rotary(72, linear_bands=True, rotate_half=True)
    assert p.inv_freq[:18].tolist() == timm_bands32("pixel_linear", 18, 224.0)
    d = rp.timm_dinov3(66)  # dim // 2 = 33, dim // 4 = 16
    assert d.inv_freq[:16].tolist() == timm_bands32("dinov3_temperature", 16, 100.0, half=33)
    d = rp.timm_dinov3(64, None, 0.5, 64.0)
    assert d.inv_freq[:16].tolist() == timm_bands32("dinov3_periods", 16, 0.5, 64.0)
    g = rp.timm_positions([7, 3])
    assert g[::3, 0].tolist() == linspace32(-1.0, 1.0, 7)


def timm_torch_bands(torch, kind, n, x, y=0.0, half=0):
    """timm's own expressions (timm.layers.pos_embed_sincos: pixel_freq_bands,
    freq_bands, RotaryEmbeddingDinoV3._compute_periods) on torch tensors."""
    f32 = torch.float32
    if kind == "pixel_linear":
        return (torch.linspace(1.0, x / 2, n, dtype=f32) * torch.pi).double()
    if kind == "pixel_log":
        return (2 ** torch.linspace(0, math.log(x, 2) - 1, n, dtype=f32) * torch.pi).double()
    if kind == "language":
        exp = torch.arange(0, n, 1, dtype=torch.int64).to(f32) / n
        return (1.0 / (x**exp)).double()
    if kind == "dinov3_temperature":
        periods = x ** (2.0 * torch.arange(n, dtype=f32) / half)
    else:
        periods = x * ((y / x) ** torch.linspace(0, 1, n, dtype=f32))
    # fastpe's frequency 2 pi / period, one float64 division (torch's scalar / tensor
    # would be reciprocal(period) * 2 pi, two roundings)
    return 2 * math.pi / periods.double().numpy()


@pytest.mark.parametrize("kind, n, x, y, half", CASES32)
def test_float32_steps_are_timms_with_torchs_power(kind, n, x, y, half):
    """With torch's own power in place of the correctly rounded one, the other
    float32 steps are timm's torch expressions to the bit."""
    torch = pytest.importorskip("torch")

    def torch_pow(base, e):
        return (float(base) ** torch.from_numpy(e.copy())).numpy()

    got = kernel._timm_frequencies(kind, n, x, y, half=half, pow32=torch_pow)
    want = np.asarray(timm_torch_bands(torch, kind, n, x, y, half))
    assert got.tolist() == want.tolist()


KINDS = ["pixel_linear", "pixel_log", "language", "dinov3_temperature", "dinov3_periods"]


@given(
    kind=st.sampled_from(KINDS),
    n=st.integers(1, 40),
    extra=st.integers(0, 3),
    x=st.floats(1e-3, 1e6),
    y=st.floats(1e-3, 1e6),
)
def test_generated_rules_against_truth(kind, n, extra, x, y):
    """Generated arguments: float64 the real formula rounded once, float32 the exact
    emulation of timm's steps (every parameter in the message)."""
    half = 2 * n + extra // 2 if kind == "dinov3_temperature" else 0
    args = (kind, n, x, y, half)
    got = kernel._timm_frequencies(kind, n, x, y, half=half, precision="float64")
    assert got.tolist() == real_bands(*args), args
    got = kernel._timm_frequencies(kind, n, x, y, half=half)
    assert got.tolist() == timm_bands32(*args), args


# ---------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    "call, match",
    [
        (
            lambda: rp.timm_rotary(64, max_res=1.7e308, linear_bands=True, precision="float64"),
            "max_res",
        ),
        (lambda: rp.timm_rotary(64, max_res=1.7e308, precision="float64"), "max_res"),
        (lambda: rp.timm_rotary(64, max_res=1e39), "max_res"),
        (
            lambda: rp.timm_rotary(64, in_pixels=False, temperature=1e-300, precision="float64"),
            "temperature",
        ),
        (lambda: rp.timm_dinov3(64, 1e-50), "temperature"),
        (lambda: rp.timm_dinov3(64, None, 1e-308, 1.0, precision="float64"), "min_period"),
        (lambda: rp.timm_dinov3(64, None, 1e-50, 1.0), "min_period"),
        (lambda: kernel._timm_frequencies("pixel_log", 0, 224.0), "number of frequencies"),
        (lambda: kernel._timm_frequencies("pixel_log", 2**31, 224.0), "number of frequencies"),
        (lambda: rp.timm_rotary(2**34), "dim"),
        (lambda: rp.timm_dinov3(2**34), "dim"),
        (lambda: kernel._timm_frequencies("pixel_log", 4, math.nan), "max_res"),
        (lambda: kernel._timm_frequencies("language", 4, -1.0), "temperature"),
        (lambda: kernel._timm_frequencies("dinov3_periods", 4, 1.0, math.inf), "max_period"),
        (lambda: kernel._timm_frequencies("dinov3_periods", 4, 0.0, 1.0), "min_period"),
        (lambda: kernel._timm_frequencies("dinov3_temperature", 4, 100.0, half=3), "half"),
        (
            lambda: kernel._timm_frequencies("pixel_log", 4, 224.0, precision="float16"),
            "precision",
        ),
    ],
)
def test_refusals_name_the_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call()
