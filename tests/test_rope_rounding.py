"""rope_cache(..., correctly_rounded=True) against mpmath, entry by entry.

The exact value of an entry is the sine or cosine of the exact product of the
position's float64 value and the float64 frequency (``inv_freq``, or the rule's
frequencies as rope_frequencies gives them), and the cache must hold it rounded
once to nearest-even float64.  The oracle evaluates it in 256-bit arithmetic
(every product of two doubles is exact there) and rounds it with mpmath.
Positions near numerators of convergents of pi (sin K ~ 1e-7 at frequency 1)
are where a float64 rotation loses its relative accuracy.
"""

from __future__ import annotations

from typing import Any

import mpmath
import numpy as np
import pytest
from rules import LLAMA31
from test_rounding_narrow import sweep_tool

import fastpe
from fastpe import kernel as _kernel

PREC = 256
CONVERGENTS = (355, 103993, 833719, 5419351)
YARN = {
    "rope_type": "yarn",
    "rope_theta": 10000.0,
    "factor": 4.0,
    "original_max_position_embeddings": 4096,
}
LINEAR = {"rope_type": "linear", "rope_theta": 10000.0, "factor": 2.0}


def _rounded(exact: mpmath.mpf) -> float:
    """exact rounded once to nearest-even float64, subnormals included."""
    return sweep_tool.round_to(exact, "float64")


def _oracle(pos: np.ndarray, w: np.ndarray, a: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """(a cos, a sin) of every pos[r] * w[i], correctly rounded, shape (len(pos), len(w))."""
    c = np.empty((pos.size, w.size))
    s = np.empty_like(c)
    with mpmath.workprec(PREC):
        for r, k in enumerate(pos.tolist()):
            for i, f in enumerate(w.tolist()):
                x = mpmath.mpf(float(k)) * mpmath.mpf(float(f))
                g = mpmath.mpf(a)
                c[r, i], s[r, i] = _rounded(g * mpmath.cos(x)), _rounded(g * mpmath.sin(x))
    return c, s


def _check(
    pos: np.ndarray,
    w: np.ndarray,
    cos: np.ndarray,
    sin: np.ndarray,
    layout: str,
    what: str,
    a: float = 1.0,
) -> None:
    """Every entry of the caches (rows: pos) equals the oracle's."""
    nf = w.size
    oc, os_ = _oracle(pos, w, a)
    for name, got, want in (("cos", cos, oc), ("sin", sin, os_)):
        got = got.reshape(pos.size, 2 * nf)
        halves = (got[:, :nf], got[:, nf:]) if layout == "half" else (got[:, 0::2], got[:, 1::2])
        for half in halves:
            # (value equality: bitwise but for the sign of a zero, which a real 0
            # does not have -- sin(0 * w) is -0.0 for a negative w)
            bad = np.argwhere(half != want)
            if bad.size:
                r, i = bad[0]
                raise AssertionError(
                    f"{what} {name}: {len(bad)} entries differ; first at position "
                    f"{pos[r]!r}, frequency {w[i]!r}: got {half[r, i]!r}, "
                    f"correctly rounded {want[r, i]!r}"
                )


def _cache(head_dim: int, params: Any = None, **kw: Any) -> tuple[np.ndarray, np.ndarray]:
    cos, sin = fastpe.rope_cache(head_dim, params, dtype=np.float64, correctly_rounded=True, **kw)
    return cos, sin


@pytest.mark.parametrize(
    ("params", "extra"),
    [
        (None, {}),
        ({"rope_theta": 500000.0}, {"precision": "float64"}),
        (LLAMA31, {"precision": "float64"}),
        (LLAMA31, {}),  # (float32 frequencies: float64 numbers all the same)
        (LINEAR, {"layout": "interleaved"}),
        (YARN, {"attention_factor": 1.0, "precision": "float64"}),
        (YARN, {"precision": "float64"}),
        (YARN, {"layout": "interleaved"}),
        ({"rope_theta": 10000.0}, {"attention_factor": 0.7}),
    ],
    ids=[
        "default",
        "theta5e5",
        "llama3",
        "llama3-f32",
        "linear",
        "yarn-af1",
        "yarn",
        "yarn-f32",
        "attention-0.7",
    ],
)
def test_rules_every_entry_is_correctly_rounded(params, extra):
    """Every entry the attention factor (the rule's, or attention_factor) times the
    sine or cosine, rounded once."""
    layout = extra.get("layout", "half")
    precision = extra.get("precision", "float32")
    w, a = fastpe.rope_frequencies(64, params, precision=precision)
    a = extra.get("attention_factor", a)
    if params is YARN and "attention_factor" not in extra:
        assert a != 1.0  # (yarn's own factor: the scaled rounding is exercised)
    rng = np.random.default_rng(5)
    # a table around a convergent (mirrored rows), then scattered large positions
    cos, sin = _cache(64, params, seq_len=12, offset=103993 - 6, **extra)
    _check(np.arange(103993 - 6, 103993 + 6), w, cos, sin, layout, f"{params} table", a)
    pos = np.concatenate(
        [np.array(CONVERGENTS), rng.integers(2**20, 2**31, 6), -rng.integers(0, 2**24, 2)]
    )
    cos, sin = _cache(64, params, positions=pos, **extra)
    _check(pos, w, cos, sin, layout, f"{params} positions", a)
    # positions 0 (sines 0, cosines the factor itself) and fractional ones
    pos = np.array([0.0, 0.5, -355.25, 2.0**30 + 0.125])
    cos, sin = _cache(64, params, positions=pos, **extra)
    _check(pos, w, cos, sin, layout, f"{params} fractional", a)


def test_dynamic_rule_sees_the_longest_sequence():
    """dynamic's frequencies depend on the largest position + 1: the oracle takes
    rope_frequencies at that length, as rope_cache does."""
    params = {"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 2.0}
    pos = np.array([0, 355, 103993, 2**20 + 1, 3, 2**24])
    w, _ = fastpe.rope_frequencies(
        48, params, max_position_embeddings=2048, seq_len=int(pos.max()) + 1, precision="float64"
    )
    cos, sin = _cache(48, params, positions=pos, max_position_embeddings=2048, precision="float64")
    _check(pos, w, cos, sin, "half", "dynamic")


def test_fractional_positions_are_correctly_rounded():
    rng = np.random.default_rng(9)
    pos = np.concatenate(
        [
            rng.uniform(-1, 1, 4),
            rng.uniform(0, 2**20, 3),
            np.array([355.0 + 2**-20, 2**31 - 0.5, 1e-300, 0.25]),
        ]
    )
    w, _ = fastpe.rope_frequencies(32, {"rope_theta": 10000.0}, precision="float64")
    cos, sin = _cache(32, {"rope_theta": 10000.0}, positions=pos, precision="float64")
    _check(pos, w, cos, sin, "half", "fractional")
    # a float position holding an integer gives the integer's bits
    ci, si = _cache(32, {"rope_theta": 10000.0}, positions=[103993], precision="float64")
    cf, sf = _cache(32, {"rope_theta": 10000.0}, positions=[103993.0], precision="float64")
    assert np.array_equal(ci, cf) and np.array_equal(si, sf)


@pytest.mark.parametrize("seed", [1, 2])
def test_random_inv_freq_tiny_and_huge(seed):
    """Frequencies over ~600 binades (subnormal sines included), each position kept
    within the frequencies' range (|position x frequency| well below 2^45 turns)."""
    rng = np.random.default_rng(seed)
    w = np.concatenate(
        [
            10.0 ** rng.uniform(-300, -1, 6),
            np.array([5e-324, 2.0**-1022, 1.0, 3.0, 0.0]),
            10.0 ** rng.uniform(0, 6, 5),
        ]
    )
    rng.shuffle(w)
    pos = np.concatenate([np.array([0, 1, 355, 103993, 833719]), rng.integers(-(2**31), 2**31, 5)])
    for layout in ("half", "interleaved"):
        cos, sin = _cache(2 * w.size, inv_freq=w, positions=pos, layout=layout)
        _check(pos, w, cos, sin, layout, f"seed {seed} {layout}")
    # a table from 0 and the same rows as scattered positions: one set of bits
    cos, sin = _cache(2 * w.size, inv_freq=w, seq_len=40, offset=833719 - 20)
    _check(np.arange(833719 - 20, 833719 + 20), w, cos, sin, "half", f"seed {seed} table")
    c1, s1 = _cache(2 * w.size, inv_freq=w, positions=np.arange(833719 - 20, 833719 + 20))
    assert np.array_equal(c1, cos) and np.array_equal(s1, sin)
    # and a table of negative positions
    cos, sin = _cache(2 * w.size, inv_freq=w, seq_len=40, offset=-103993 - 20)
    _check(np.arange(-103993 - 20, -103993 + 20), w, cos, sin, "half", f"seed {seed} negative")


def _axis_of(sections: tuple[int, ...], layout: str) -> list[int]:
    """The axis each frequency follows (rope_cache's section_layout)."""
    n, nf = len(sections), sum(sections)
    if layout == "contiguous":
        return [a for a, k in enumerate(sections) for _ in range(k)]
    return [i % n if i % n >= 1 and i < n * sections[i % n] else 0 for i in range(nf)]


@pytest.mark.parametrize("section_layout", ["contiguous", "interleaved"])
@pytest.mark.parametrize("real", [False, True])
def test_sections_every_entry_is_correctly_rounded(section_layout, real):
    """Multi-axis positions: entry i of a token is sin/cos of its coordinate on
    frequency i's axis times the frequency, correctly rounded the same way."""
    rng = np.random.default_rng(4)
    sections = (6, 5, 5)
    params = {"rope_theta": 1000000.0}
    w, _ = fastpe.rope_frequencies(32, params, precision="float64")
    pos = np.stack(
        [
            np.array([0, 355, 103993, 833719, 7]),
            rng.integers(0, 2**31, 5),
            rng.integers(-(2**20), 2**20, 5),
        ],
        axis=1,
    )
    if real:
        pos = pos + rng.uniform(-1, 1, pos.shape)
    cos, sin = _cache(
        32, params, positions=pos, sections=sections, section_layout=section_layout,
        precision="float64",
    )  # fmt: skip
    axis = _axis_of(sections, section_layout)
    for i, a in enumerate(axis):
        one = np.array([w[i]])
        pick = np.array([i, i + w.size])
        _check(pos[:, a], one, cos[:, pick], sin[:, pick], "half", f"frequency {i}, axis {a}")
    # with an attention factor (yarn's), every axis's entries scaled once
    w, att = fastpe.rope_frequencies(32, YARN, precision="float64")
    cos, sin = _cache(
        32, YARN, positions=pos, sections=sections, section_layout=section_layout,
        precision="float64",
    )  # fmt: skip
    for i, a in enumerate(axis):
        one = np.array([w[i]])
        pick = np.array([i, i + w.size])
        _check(pos[:, a], one, cos[:, pick], sin[:, pick], "half", f"yarn {i}, axis {a}", att)


def test_per_head_frequencies_every_entry_is_correctly_rounded():
    """inv_freq of shape (heads, nf), learned signs included: head h's caches are
    those of inv_freq[h], each entry correctly rounded (a negative frequency's sine
    is the negated one, exactly)."""
    rng = np.random.default_rng(6)
    w = 10.0 ** rng.uniform(-6, 0.5, (3, 8)) * rng.choice([-1.0, 1.0], (3, 8))
    w[0, 0] = 1.0
    pos = np.array([0, 355, 103993, 833719, 2**31 - 1])
    cos, sin = _cache(16, inv_freq=w, positions=pos)
    assert cos.shape == (3, pos.size, 16)
    for h in range(3):
        _check(pos, w[h], cos[h], sin[h], "half", f"head {h}")
    cos, sin = _cache(16, inv_freq=w, seq_len=10, offset=103990, layout="interleaved")
    for h in range(3):
        _check(np.arange(103990, 104000), w[h], cos[h], sin[h], "interleaved", f"head {h} table")
    cos, sin = _cache(16, inv_freq=w, positions=pos, attention_factor=1.3)
    for h in range(3):
        _check(pos, w[h], cos[h], sin[h], "half", f"head {h} attention 1.3", 1.3)


def test_an_undecided_entry_takes_the_exact_path():
    """sin(5419351) ~ -3.8e-8: the error bound at that position (~2^-70) exceeds the
    entry's ulp (2^-77), so the rounding test cannot decide it; the exact path
    (counted) rounds it correctly."""
    before, runs = _kernel._f64_undecided(), _kernel._exact_path_runs()
    cos, sin = _cache(2, inv_freq=np.array([1.0]), positions=[5419351])
    assert _kernel._f64_undecided() - before >= 1
    assert _kernel._exact_path_runs() - runs >= 1
    _check(np.array([5419351]), np.array([1.0]), cos, sin, "half", "undecided")
    # the same entry times an attention factor: undecided too, scaled on the exact path
    before = _kernel._f64_undecided()
    cos, sin = _cache(2, inv_freq=np.array([1.0]), positions=[5419351], attention_factor=1.5)
    assert _kernel._f64_undecided() - before >= 1
    _check(np.array([5419351]), np.array([1.0]), cos, sin, "half", "undecided x1.5", 1.5)


def test_the_forced_exact_path_gives_the_same_bits():
    """Every entry through the 256-bit path: the fast path's bits (a fast path
    that rounds wrongly, or a broken exact path, fails here)."""
    w, _ = fastpe.rope_frequencies(24, LLAMA31, precision="float64")
    pos = np.array([3, 355, 103993, 2**20 + 3, 2**31 - 1, 5419351])
    kw: dict[str, Any] = {"precision": "float64"}
    fast = _cache(24, LLAMA31, positions=pos, **kw)
    fast_t = _cache(24, LLAMA31, seq_len=8, offset=103990, **kw)
    fast_f = _cache(24, LLAMA31, positions=pos + 0.5, **kw)
    fast_y = _cache(24, YARN, positions=pos, **kw)
    runs = _kernel._exact_path_runs()
    was = _kernel._force_exact_path(True)
    try:
        exact = _cache(24, LLAMA31, positions=pos, **kw)
        exact_t = _cache(24, LLAMA31, seq_len=8, offset=103990, **kw)
        exact_f = _cache(24, LLAMA31, positions=pos + 0.5, **kw)
        exact_y = _cache(24, YARN, positions=pos, **kw)
    finally:
        _kernel._force_exact_path(was)
    assert _kernel._exact_path_runs() - runs >= 2 * w.size * (3 * len(pos) + 7)
    for a, b in ((fast, exact), (fast_t, exact_t), (fast_f, exact_f), (fast_y, exact_y)):
        assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    _check(pos, w, *exact, "half", "forced")


def test_the_option_fixes_the_default_near_zero():
    """Why the option exists: at sin(355) ~ -3e-5 the default float64 rotation
    (~1e-16 absolute) is several ulps off; the option's entries are exact."""
    pos = np.array(CONVERGENTS[:3])
    w = np.array([1.0])
    d = fastpe.rope_cache(2, inv_freq=w, positions=pos, dtype=np.float64)[1][:, 0]
    c = _cache(2, inv_freq=w, positions=pos)[1][:, 0]
    want = _oracle(pos, w)[1][:, 0]
    assert np.array_equal(c, want)
    assert not np.array_equal(d, want)


def test_default_path_is_unchanged_by_the_keyword():
    """correctly_rounded=False is the default path, bit for bit, and the option only
    changes float64 entries that the default left off by an ulp or more."""
    kw: dict[str, Any] = {"seq_len": 300, "offset": 103900, "dtype": np.float64}
    a = fastpe.rope_cache(128, {"rope_theta": 500000.0}, **kw)
    b = fastpe.rope_cache(128, {"rope_theta": 500000.0}, correctly_rounded=False, **kw)
    c = fastpe.rope_cache(128, {"rope_theta": 500000.0}, correctly_rounded=True, **kw)
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    assert all(np.allclose(x, y, rtol=0, atol=1e-15) for x, y in zip(a, c, strict=True))
    for dt in (np.float32, np.float16):
        x = fastpe.rope_cache(128, {"rope_theta": 500000.0}, seq_len=64, offset=355, dtype=dt)
        y = fastpe.rope_cache(
            128, {"rope_theta": 500000.0}, seq_len=64, offset=355, dtype=dt,
            correctly_rounded=False,
        )  # fmt: skip
        assert all(np.array_equal(p, q) for p, q in zip(x, y, strict=True))


def test_thread_count_and_out_give_the_same_bits():
    kw: dict[str, Any] = {"seq_len": 777, "offset": 355, "precision": "float64"}
    for params in (YARN, LLAMA31):  # (yarn: every entry through the scaled fix-up)
        a = _cache(130, params, num_threads=1, **kw)
        b = _cache(130, params, num_threads=3, **kw)
        assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    buf = np.zeros((777, 2 * 130))
    out = (buf[:, :130], buf[:, 130:])
    got = fastpe.rope_cache(130, LLAMA31, out=out, correctly_rounded=True, **kw)
    assert got[0] is out[0] and np.array_equal(buf[:, :130], a[0])
    assert np.array_equal(buf[:, 130:], a[1])


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        (
            {
                "positions": np.zeros((4, 2), np.int64),
                "section_layout": "mixed",
                "inv_freq": np.ones((2, 4)),
                "dtype": np.float64,
            },
            "mixed",
        ),
        ({"seq_len": 4, "xpos_scale_base": 512.0, "dtype": np.float64}, "xpos_scale_base"),
    ],
    ids=[
        "mixed",
        "xpos",
    ],
)
def test_the_option_is_refused_where_it_does_not_apply(kw, match):
    with pytest.raises(ValueError, match=match) as info:
        fastpe.rope_cache(8, correctly_rounded=True, **kw)
    assert "correctly_rounded" in str(info.value)


def test_correctly_rounded_is_a_checked_flag():
    with pytest.raises(TypeError, match="correctly_rounded"):
        fastpe.rope_cache(8, seq_len=2, dtype=np.float64, correctly_rounded="yes")
    with pytest.raises(TypeError, match="correctly_rounded"):
        fastpe.rope_cache(8, seq_len=2, dtype=np.float64, correctly_rounded=1)
    # a NumPy bool is a flag like True
    a = fastpe.rope_cache(8, seq_len=2, dtype=np.float64, correctly_rounded=np.True_)
    b = fastpe.rope_cache(8, seq_len=2, dtype=np.float64, correctly_rounded=True)
    assert np.array_equal(a[0], b[0])
