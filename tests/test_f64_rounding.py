"""float64 entries against mpmath, one by one: every entry within one ulp of the
exact value (faithful), near zero too, and the share correctly rounded.

The exact value of an entry is sin/cos of position x frequency, the frequency
the convention's formula evaluated exactly from its float64 knobs (or the
given float64 frequency of a RoPE cache) and a fractional position its
float64 value.  Rows at numerators of convergents of pi (sin K ~ 1e-7) are
where a rotation in plain double arithmetic loses all relative accuracy.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest

import fastpe
from fastpe import _api
from fastpe import kernel as _kernel

CONVERGENTS = (355, 103993, 104348, 208341, 312689, 833719, 1146408, 4272943, 5419351)
DPS = 60


def _ulp(exact: mpmath.mpf) -> mpmath.mpf:
    """The float64 spacing of exact's binade (subnormals: 2^-1074)."""
    lead = int(mpmath.floor(mpmath.log(abs(exact), 2)))
    while mpmath.ldexp(1, lead) > abs(exact):
        lead -= 1
    while mpmath.ldexp(1, lead + 1) <= abs(exact):
        lead += 1
    return mpmath.ldexp(1, max(lead - 52, -1074))


def _round(v: mpmath.mpf) -> float:
    """v rounded once to nearest-even float64 (normal range)."""
    if v == 0:
        return 0.0
    u = _ulp(v)
    n = v / u
    i = int(mpmath.floor(n))
    f = n - i
    if f > 0.5 or (f == 0.5 and i % 2):
        i += 1
    return float(mpmath.mpf(i) * u)


def _columns(conv: fastpe.Convention, d: int) -> list[tuple[int, bool] | None]:
    """(frequency, is_sine) of each column of a convention's table at width d
    (None: the zero column), from the meaning of its knobs."""
    h = d // 2
    nf = (d + 1) // 2 if conv.odd == "sin" else h
    cols: list[tuple[int, bool] | None] = [None] * d
    if conv.layout == "interleaved":
        for i in range(h):
            cols[2 * i] = (i, True)
            cols[2 * i + 1] = (i, False)
        if nf > h:
            cols[d - 1] = (h, True)
    else:
        s_off, c_off = (0, nf) if conv.layout == "split" else (h, 0)
        for i in range(nf):
            cols[s_off + i] = (i, True)
        for i in range(h):
            cols[c_off + i] = (i, False)
    return cols


def _denominator(conv: fastpe.Convention, d: int) -> float:
    """The frequency ladder's denominator at width d (the conventions table)."""
    h = d // 2
    nf = (d + 1) // 2 if conv.odd == "sin" else h
    if nf <= 1:
        return 1.0  # one frequency: w_0 = position_scale, whatever the denominator
    return {"d/2": d / 2, "h": h, "h-1": h - 1, "max(h-1,1)": max(h - 1, 1)}.get(
        conv.denominator, h - conv.shift
    )


class Tally:
    """Faithful failures (with their parameters) and the correctly rounded share."""

    def __init__(self) -> None:
        self.n = 0
        self.cr = 0
        self.bad: list[str] = []

    def add(self, got: float, exact: mpmath.mpf, what: str) -> None:
        self.n += 1
        if exact == 0:
            ok = got == 0.0
            self.cr += ok
        else:
            err = abs(mpmath.mpf(got) - exact) / _ulp(exact)
            ok = err < 1
            self.cr += got == _round(exact)
            if not ok and len(self.bad) < 10:
                self.bad.append(
                    f"{what}: got {got!r}, exact {mpmath.nstr(exact, 20)}, {float(err):.3g} ulps"
                )
        if not ok and exact == 0 and len(self.bad) < 10:
            self.bad.append(f"{what}: got {got!r}, exact 0")

    def check(self, cr_share: float = 1.0) -> None:
        assert not self.bad, "\n".join(self.bad)
        assert self.cr >= cr_share * self.n, f"{self.cr} of {self.n} correctly rounded"


def _check_rows(
    positions: np.ndarray, d: int, convention: str, tally: Tally, columns: np.ndarray | None = None
) -> None:
    conv = _api._convention(convention, 10000.0, "interleaved")
    cols = _columns(conv, d)
    got = fastpe.sinusoidal_at(
        positions, d, dtype=np.float64, convention=convention, correctly_rounded=True
    )
    with mpmath.workdps(DPS):
        w0, base = mpmath.mpf(conv.position_scale), mpmath.mpf(conv.base)
        denom = mpmath.mpf(_denominator(conv, d))
        for r, k in enumerate(positions):
            for j in range(d) if columns is None else columns:
                c = cols[int(j)]
                if c is None:
                    continue
                i, is_sin = c
                x = mpmath.mpf(float(k)) * w0 * mpmath.power(base, -mpmath.mpf(i) / denom)
                exact = mpmath.sin(x) if is_sin else mpmath.cos(x)
                tally.add(float(got[r, j]), exact, f"{convention} d={d} k={k!r} col={j}")


CONVENTIONS = ("vaswani", "tensor2tensor", "fairseq", "diffusers", "gptj")


@pytest.mark.parametrize("convention", CONVENTIONS)
def test_every_convention_ladder_is_faithful(convention):
    rng = np.random.default_rng(7)
    tally = Tally()
    for d in (2, 8, 64, 130):
        pos = np.concatenate([rng.integers(0, 10**6, 6), np.array(CONVERGENTS[:3])])
        _check_rows(pos, d, convention, tally)
    tally.check()


def test_convergent_rows_are_faithful_and_rounded_near_zero():
    """sin(K) for K a convergent numerator of pi is ~1e-7: main's plain rotation
    was up to ~1e7 ulps off there."""
    tally = Tally()
    pos = np.array(CONVERGENTS)
    _check_rows(pos, 64, "vaswani", tally, columns=np.arange(8))
    tally.check(cr_share=1.0)


def test_table_rows_match_sinusoidal_at_and_are_faithful():
    """The table path (mirrored pairs around block centres) at the convergent rows."""
    rows = np.array(CONVERGENTS)
    for k in rows:
        table = fastpe.sinusoidal(
            300, 16, dtype=np.float64, offset=int(k) - 150, correctly_rounded=True
        )
        at = fastpe.sinusoidal_at(k, 16, dtype=np.float64, correctly_rounded=True)
        assert np.array_equal(table[150], at)
    tally = Tally()
    _check_rows(rows, 16, "vaswani", tally)
    tally.check(cr_share=1.0)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_widths_rows_and_columns_are_faithful(seed):
    rng = np.random.default_rng(seed)
    tally = Tally()
    for _ in range(6):
        d = int(rng.choice([1, 2, 3, 5, 17, 256, 1023, 4096, 65536]))
        pos = rng.integers(-(10**7), 10**7, 4)
        cols = rng.integers(0, d, min(d, 40))
        _check_rows(pos, d, "vaswani", tally, columns=cols)
    tally.check()


def test_fractional_positions_are_faithful():
    rng = np.random.default_rng(11)
    pos = np.concatenate([rng.uniform(0, 1000, 8), np.array([0.25, 355.0 + 2**-20, 1e-300])])
    tally = Tally()
    _check_rows(pos, 128, "diffusers", tally)
    _check_rows(pos, 64, "vaswani", tally)
    tally.check()


def test_an_entry_the_bound_cannot_decide_takes_the_exact_path():
    """sin(5419351) ~ -3.8e-8 at width 4890 (blocks of 16 rows): the bound there,
    ~2^-70 from the frequency's error times the position, exceeds the entry's ulp
    (2^-77), so the entry goes to the exact path (counted), which rounds it
    correctly."""
    before = _kernel._f64_undecided()
    runs = _kernel._exact_path_runs()
    v = fastpe.sinusoidal_at(np.array([5419351]), 4890, dtype=np.float64, correctly_rounded=True)
    assert _kernel._f64_undecided() - before >= 1
    assert _kernel._exact_path_runs() - runs >= 1
    with mpmath.workdps(DPS):
        assert float(v[0, 0]) == _round(mpmath.sin(5419351))


@pytest.mark.parametrize("convention", ["vaswani", "fairseq", "gptj"])
def test_the_forced_exact_path_gives_the_same_bits(convention):
    """With every entry sent through the exact path (sin/cos in 256-bit arithmetic of
    the exact frequency times the position), the rows are the fast path's bits, and
    mpmath's rounding: a broken exact path, or a fast path that rounds wrongly,
    fails here."""
    pos = np.array([3, 355, 103993, 2**20 + 3, 777.5, 5419351])  # (1: fairseq's padding row)
    d = 34
    fast = fastpe.sinusoidal_at(
        pos, d, dtype=np.float64, convention=convention, correctly_rounded=True
    )
    runs = _kernel._exact_path_runs()
    was = _kernel._force_exact_path(True)
    try:
        exact = fastpe.sinusoidal_at(
            pos, d, dtype=np.float64, convention=convention, correctly_rounded=True
        )
        table = fastpe.sinusoidal(
            8, d, dtype=np.float64, convention=convention, offset=103990, correctly_rounded=True
        )
    finally:
        _kernel._force_exact_path(was)
    conv = _api._convention(convention, 10000.0, "interleaved")
    live = sum(c is not None for c in _columns(conv, d))
    assert _kernel._exact_path_runs() - runs >= len(pos) * live
    assert np.array_equal(fast, exact)
    assert np.array_equal(
        table[3],
        fastpe.sinusoidal_at(
            103993, d, dtype=np.float64, convention=convention, correctly_rounded=True
        ),
    )
    tally = Tally()
    _check_rows(pos, d, convention, tally)
    tally.check(cr_share=1.0)


def test_undecided_entries_are_rare():
    """The rounding test leaves to the exact fallback only entries within the
    error bound of a rounding boundary: none in a table of a million entries."""
    before = _kernel._f64_undecided()
    fastpe.sinusoidal(2048, 512, dtype=np.float64, offset=10**6, correctly_rounded=True)
    assert _kernel._f64_undecided() - before < 4
    # row 0 (sines exactly 0) is exact as it is, not undecided
    before = _kernel._f64_undecided()
    fastpe.sinusoidal(3, 64, dtype=np.float64, correctly_rounded=True)
    assert _kernel._f64_undecided() == before


def test_correctly_rounded_float64_is_thread_count_and_layout_independent():
    kw = dict(dtype=np.float64, offset=355, correctly_rounded=True)
    a = fastpe.sinusoidal(777, 130, num_threads=1, **kw)
    b = fastpe.sinusoidal(777, 130, num_threads=3, **kw)
    assert np.array_equal(a, b)
    assert not math.isnan(float(a.sum()))
    # the same entries in the split layout, and through an out= with strided rows
    s = fastpe.sinusoidal(777, 130, layout="split", **kw)
    assert np.array_equal(s[:, :65], a[:, 0::2]) and np.array_equal(s[:, 65:], a[:, 1::2])
    big = np.zeros((777, 200))
    fastpe.sinusoidal(777, 130, out=big[:, 30:160], **kw)
    assert np.array_equal(big[:, 30:160], a)


def test_correctly_rounded_is_a_checked_keyword_only_flag():
    with pytest.raises(TypeError, match="correctly_rounded"):
        fastpe.sinusoidal(4, 8, correctly_rounded="yes")
    with pytest.raises(TypeError, match="correctly_rounded"):
        fastpe.sinusoidal_at([1, 2], 8, correctly_rounded=1)
    with pytest.raises(TypeError):
        fastpe.sinusoidal(4, 8, None, None, None, None, None, None, None, True)  # type: ignore


@pytest.mark.parametrize("dtype", [None, np.float32, np.float16])
def test_correctly_rounded_applies_to_the_other_dtypes(dtype):
    """The option covers float32 (the default dtype) and float16 too, into new
    arrays and an out= alike (tests/test_rounding_narrow.py checks their entries
    against mpmath)."""
    kw = dict(dtype=dtype, correctly_rounded=True)
    t = fastpe.sinusoidal(3, 8, offset=355, **kw)
    assert t.dtype == (dtype or np.float32)
    np.testing.assert_array_equal(fastpe.sinusoidal_at([355, 356, 357], 8, **kw), t)
    out = np.full((3, 8), 7, dtype or np.float32)
    assert fastpe.sinusoidal(3, 8, offset=355, out=out, correctly_rounded=True) is out
    np.testing.assert_array_equal(out, t)


def test_the_default_float64_path_is_not_faithful_near_zero():
    """Why the option exists: the default rotation is ~1e-16 absolute, which at
    sin(355) ~ -3e-5 is several ulps (the option's rows are exact there)."""
    d = fastpe.sinusoidal_at(np.array(CONVERGENTS), 2, dtype=np.float64)[:, 0]
    c = fastpe.sinusoidal_at(np.array(CONVERGENTS), 2, dtype=np.float64, correctly_rounded=True)[
        :, 0
    ]
    with mpmath.workdps(DPS):
        exact = [_round(mpmath.sin(k)) for k in CONVERGENTS]
    assert list(c) == exact
    assert list(d) != exact
