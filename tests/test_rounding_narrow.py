"""correctly_rounded=True for float32, float16 and bfloat16: every entry against
mpmath at 300 bits, rounded once to the format with its exponent range
(subnormals included, tools/rounding_sweep.py's round_to).

The exact value of an entry is sin/cos of position x frequency: the frequency
the convention's formula evaluated exactly from its float64 knobs, or a RoPE
cache's float64 frequency (times its attention factor, one rounding).  The
tested writers decide each entry from its double value and error bound and
send the undecided ones to the exact path, whose runs the library counts.
"""

from __future__ import annotations

import importlib.util
import pathlib
from typing import Any

import mpmath
import numpy as np
import pytest
import test_f64_rounding as f64_rounding

import fastpe
from fastpe import _api
from fastpe import kernel as _kernel

_TOOL = pathlib.Path(__file__).resolve().parent.parent / "tools" / "rounding_sweep.py"
_spec = importlib.util.spec_from_file_location("rounding_sweep", _TOOL)
sweep_tool = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sweep_tool)

PREC = 300
CONVERGENTS = (355, 103993, 833719)
CONVENTIONS = ("vaswani", "tensor2tensor", "fairseq", "diffusers", "gptj")
# (bfloat16 arrays need ml_dtypes, an extra the wheel's test venv goes without)
HAVE_BF16 = importlib.util.find_spec("ml_dtypes") is not None
FORMATS = ("float32", "float16", *(("bfloat16",) if HAVE_BF16 else ()))


def _dtype(fmt: str) -> Any:
    if fmt == "bfloat16":
        import ml_dtypes

        return ml_dtypes.bfloat16
    return np.dtype(fmt)


def _check_table(
    got: np.ndarray,
    positions: Any,
    d: int,
    fmt: str,
    convention: str = "vaswani",
    layout: str = "interleaved",
    columns: Any = None,
) -> int:
    """Every entry of got (rows: positions) is the exact value rounded once to fmt
    (value equality: a real 0 has no sign); the number of entries checked."""
    conv = _api._convention(convention, 10000.0, layout)
    cols = f64_rounding._columns(conv, d)
    vals = sweep_tool.as_float64(got, fmt)
    bad, n = [], 0
    with mpmath.workprec(PREC):
        w0, base = mpmath.mpf(conv.position_scale), mpmath.mpf(conv.base)
        denom = mpmath.mpf(f64_rounding._denominator(conv, d))
        for r, k in enumerate(np.asarray(positions).tolist()):
            for j in range(d) if columns is None else columns:
                c = cols[int(j)]
                if c is None:
                    assert vals[r, j] == 0.0
                    continue
                i, is_sin = c
                x = mpmath.mpf(float(k)) * w0 * mpmath.power(base, -mpmath.mpf(i) / denom)
                want = sweep_tool.round_to(mpmath.sin(x) if is_sin else mpmath.cos(x), fmt)
                n += 1
                if vals[r, j] != want and len(bad) < 8:
                    bad.append(f"{convention} {layout} {fmt} d={d} k={k!r} col={j}: "
                               f"got {vals[r, j]!r}, want {want!r}")  # fmt: skip
    assert not bad, "\n".join(bad)
    return n


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("convention", CONVENTIONS)
def test_every_convention_and_layout_is_correctly_rounded(convention, fmt):
    rng = np.random.default_rng(5)
    for d, layout in ((1, "interleaved"), (3, "split"), (17, "interleaved"), (64, "split")):
        if convention == "gptj" and d % 2:
            d += 1  # (its width is even)
        pos = np.concatenate([rng.integers(0, 10**6, 3), np.array(CONVERGENTS)])
        # (only vaswani's layout is a choice: the other conventions fix theirs)
        kw = {"layout": layout} if convention == "vaswani" else {}
        got = fastpe.sinusoidal_at(
            pos, d, dtype=_dtype(fmt), convention=convention, correctly_rounded=True, **kw
        )
        _check_table(got, pos, d, fmt, convention, kw.get("layout", "interleaved"))


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("seed", [1, 2])
def test_random_widths_rows_and_columns(seed, fmt):
    rng = np.random.default_rng(seed)
    for _ in range(4):
        d = int(rng.choice([2, 5, 130, 1023, 4096]))
        pos = np.concatenate([rng.integers(-(10**7), 10**7, 3), rng.integers(0, 2**33, 2)])
        cols = rng.integers(0, d, min(d, 30))
        got = fastpe.sinusoidal_at(pos, d, dtype=_dtype(fmt), correctly_rounded=True)
        _check_table(got, pos, d, fmt, columns=cols)


@pytest.mark.parametrize("fmt", FORMATS)
def test_fractional_positions(fmt):
    rng = np.random.default_rng(11)
    pos = np.concatenate([rng.uniform(0, 1000, 6), np.array([0.25, 355.0 + 2**-20, 1e-300])])
    for convention in ("diffusers", "vaswani"):
        got = fastpe.sinusoidal_at(
            pos, 40, dtype=_dtype(fmt), convention=convention, correctly_rounded=True
        )
        _check_table(got, pos, 40, fmt, convention)


@pytest.mark.parametrize("fmt", FORMATS)
def test_table_rows_are_the_rows_at_their_positions(fmt):
    """The table path (mirrored pairs around block centres, several threads, a
    strided out=) gives sinusoidal_at's bits, the oracle's at the hard rows."""
    dt = _dtype(fmt)
    for k in CONVERGENTS:
        kw: dict[str, Any] = dict(dtype=dt, offset=k - 150, correctly_rounded=True)
        one = fastpe.sinusoidal(301, 50, num_threads=1, **kw)
        assert np.array_equal(
            one.view(np.uint8), fastpe.sinusoidal(301, 50, num_threads=3, **kw).view(np.uint8)
        )
        out = np.zeros((301, 80), dt)
        fastpe.sinusoidal(301, 50, out=out[:, 20:70], correctly_rounded=True, offset=k - 150)
        assert np.array_equal(out[:, 20:70].view(np.uint16), one.view(np.uint16))
        at = fastpe.sinusoidal_at(np.array([k]), 50, dtype=dt, correctly_rounded=True)
        assert np.array_equal(one[150:151].view(np.uint16), at.view(np.uint16))
        _check_table(one[148:153], np.arange(k - 2, k + 3), 50, fmt)


# Entries whose float64 value (error ~1e-16) lies on the far side of a float32
# midpoint from the exact value (tests/test_rounding.py: the default rounds them
# wrongly); the option decides them on the exact path.
HARD_FLOAT32 = [(29310, 455, 1000), (271107, 583, 1000)]


@pytest.mark.parametrize(("k", "j", "d"), HARD_FLOAT32)
def test_float32_entries_beside_a_midpoint_with_the_option(k, j, d):
    with mpmath.workprec(PREC):
        want = sweep_tool.round_to(sweep_tool.exact_table(float(k), j, d), "float32")
    runs = _kernel._exact_path_runs()
    at = fastpe.sinusoidal_at(np.array([float(k)]), d, dtype=np.float32, correctly_rounded=True)
    assert _kernel._exact_path_runs() - runs >= 1  # (undecided from its double: exact path)
    assert float(at[0, j]) == want
    table = fastpe.sinusoidal(5, d, offset=k - 2, dtype=np.float32, correctly_rounded=True)
    assert float(table[2, j]) == want
    # the default is left as it was: its own bits, here the wrong neighbour
    assert float(fastpe.sinusoidal_at(np.array([k]), d, dtype=np.float32)[0, j]) != want


@pytest.mark.parametrize("fmt", FORMATS)
def test_the_forced_exact_path_gives_the_same_bits(fmt):
    """With every entry sent through the exact path, the rows are the tested
    writers' bits and the oracle's: a fast path that rounds wrongly, or a broken
    exact path, fails here.  The runs are counted: one per entry."""
    dt = _dtype(fmt)
    pos = np.array([0, 3, 355, 103993, 2**20 + 3, 777.5, 2**33 + 1])
    d = 21
    fast = fastpe.sinusoidal_at(pos, d, dtype=dt, correctly_rounded=True)
    fast_t = fastpe.sinusoidal(8, d, dtype=dt, offset=103990, correctly_rounded=True)
    runs = _kernel._exact_path_runs()
    was = _kernel._force_exact_path(True)
    try:
        exact = fastpe.sinusoidal_at(pos, d, dtype=dt, correctly_rounded=True)
        exact_t = fastpe.sinusoidal(8, d, dtype=dt, offset=103990, correctly_rounded=True)
    finally:
        _kernel._force_exact_path(was)
    # (position 0's angles are exactly 0: answered without the 256-bit arithmetic)
    assert _kernel._exact_path_runs() - runs >= (len(pos) - 1 + 8) * d
    assert np.array_equal(fast.view(np.uint8), exact.view(np.uint8))
    assert np.array_equal(fast_t.view(np.uint8), exact_t.view(np.uint8))
    _check_table(exact, pos, d, fmt)


def test_undecided_entries_are_rare_and_the_default_is_unchanged():
    """The exact path runs only for entries within the error bound of a rounding
    boundary (about one in 2^22 for float32), and the default's bits are the
    option's wherever the default rounds correctly: everywhere in this table."""
    runs = _kernel._exact_path_runs()
    cr = fastpe.sinusoidal(1024, 1024, dtype=np.float32, correctly_rounded=True)
    assert _kernel._exact_path_runs() - runs < 32
    plain = fastpe.sinusoidal(1024, 1024, dtype=np.float32)
    assert np.count_nonzero(cr != plain) <= _kernel._exact_path_runs() - runs


def _rope_oracle(pos: np.ndarray, w: np.ndarray, fmt: str, a: float = 1.0) -> tuple:
    c = np.empty((pos.size, w.size))
    s = np.empty_like(c)
    with mpmath.workprec(PREC):
        g = mpmath.mpf(a)
        for r, k in enumerate(pos.tolist()):
            for i, f in enumerate(w.tolist()):
                x = mpmath.mpf(float(k)) * mpmath.mpf(float(f))
                c[r, i] = sweep_tool.round_to(g * mpmath.cos(x), fmt)
                s[r, i] = sweep_tool.round_to(g * mpmath.sin(x), fmt)
    return c, s


def _check_cache(cos: Any, sin: Any, pos: np.ndarray, w: np.ndarray, fmt: str, a: float = 1.0,
                 layout: str = "half") -> None:  # fmt: skip
    nf = w.size
    oc, os_ = _rope_oracle(pos, w, fmt, a)
    for name, got, want in (("cos", cos, oc), ("sin", sin, os_)):
        got = sweep_tool.as_float64(got, fmt).reshape(pos.size, 2 * nf)
        halves = (got[:, :nf], got[:, nf:]) if layout == "half" else (got[:, 0::2], got[:, 1::2])
        for half in halves:
            bad = np.argwhere(half != want)
            assert bad.size == 0, (name, fmt, a, bad[:4], half[tuple(bad[0])], want[tuple(bad[0])])


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(
    ("params", "extra"),
    [
        (None, {}),
        ({"rope_theta": 500000.0}, {"precision": "float64", "layout": "interleaved"}),
        ({"rope_theta": 10000.0}, {"attention_factor": 0.7}),
        ({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}, {}),
    ],
    ids=["default", "theta-interleaved", "attention", "yarn"],
)
def test_rope_cache_entries(params, extra, fmt):
    head_dim = 24
    w, a = fastpe.rope_frequencies(head_dim, params, **{k: v for k, v in extra.items()
                                                        if k in ("precision",)})  # fmt: skip
    a = extra.get("attention_factor", a)
    pos = np.array([0, 5, *CONVERGENTS, 2**31 - 1, 2**33 + 7])
    kw = dict(extra, dtype=_dtype(fmt), correctly_rounded=True)
    cos, sin = fastpe.rope_cache(head_dim, params, positions=pos, **kw)
    _check_cache(cos, sin, pos, np.asarray(w, np.float64), fmt, a, kw.get("layout", "half"))
    # the table path: the same rows
    cos_t, sin_t = fastpe.rope_cache(head_dim, params, seq_len=6, offset=355 - 2, **kw)
    assert np.array_equal(cos_t[2].view(np.uint8), cos[2].view(np.uint8))
    assert np.array_equal(sin_t[2].view(np.uint8), sin[2].view(np.uint8))


@pytest.mark.parametrize("fmt", FORMATS)
def test_rope_cache_frequencies_given_and_per_head(fmt):
    rng = np.random.default_rng(3)
    pos = np.array([1, 355, 103993, 4096])
    # (tiny frequencies: sines in the subnormals of float32, bfloat16 and float16)
    w = np.concatenate([rng.uniform(0.0, 1.0, 4), [1e-42, 3e-39, 2e-45, 1e-7, 3e-9]])
    for a in (1.0, 1.3):
        cos, sin = fastpe.rope_cache(2 * w.size, inv_freq=w, positions=pos, dtype=_dtype(fmt),
                                     attention_factor=a, correctly_rounded=True)  # fmt: skip
        _check_cache(cos, sin, pos, w, fmt, a)
    heads = rng.uniform(0.0, 1.0, (2, 4))
    heads[1, 0] = -heads[1, 0]  # (a negative frequency: its sines' signs flipped exactly)
    cos, sin = fastpe.rope_cache(8, inv_freq=heads, positions=pos, dtype=_dtype(fmt),
                                 correctly_rounded=True)  # fmt: skip
    for h in range(2):
        _check_cache(cos[h], sin[h], pos, heads[h], fmt)


def test_rope_cache_sections():
    pos = np.array([[3, 355, 7], [103993, 1, 2]], dtype=np.int64).T.copy()
    kw: dict[str, Any] = dict(sections=(2, 2), dtype=np.float32, correctly_rounded=True)
    cos, sin = fastpe.rope_cache(8, None, positions=pos, **kw)
    w, _ = fastpe.rope_frequencies(8, None)
    w = np.asarray(w, np.float64)
    # axis a's frequencies take their positions from column a (contiguous sections)
    for a, cols in enumerate((slice(0, 2), slice(2, 4))):
        oc, os_ = _rope_oracle(pos[:, a], w[cols], "float32")
        assert np.array_equal(cos[:, cols], oc) and np.array_equal(sin[:, cols], os_)
