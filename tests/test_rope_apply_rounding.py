"""apply_rope(..., correctly_rounded=True) against mpmath, entry by entry.

The exact value of a rotated pair is ``a (x1 cos t - x2 sin t)`` and ``a (x2 cos t
+ x1 sin t)``: x1, x2 the entries given (exact in float64), t the exact product of
the position's float64 value and the float64 frequency (``inv_freq``, or the
rule's frequencies as rope_frequencies gives them), a the attention factor.  Each
entry must hold it rounded once to nearest-even in the array's dtype, with that
dtype's precision and exponent range (subnormals, overflow to infinity).  The
oracle evaluates it with 256-bit mpmath.
"""

from __future__ import annotations

import importlib.util
from typing import Any

import mpmath
import numpy as np
import pytest
import test_capi_rope as capi_rope
from rules import LLAMA31
from test_capi_rounding import CORRECT, OK, rope_handle, t  # noqa: F401 (the fixture)
from test_rope_rounding import CONVERGENTS, PREC
from test_rounding_narrow import sweep_tool

import fastpe
from fastpe import kernel as _kernel

YARN = {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
        "original_max_position_embeddings": 4096}  # fmt: skip

HAVE_BF16 = importlib.util.find_spec("ml_dtypes") is not None
if HAVE_BF16:
    import ml_dtypes

    BF16: Any = ml_dtypes.bfloat16
DTYPES = [np.float64, np.float32, np.float16] + (
    [BF16] if HAVE_BF16 else [pytest.param(None, marks=pytest.mark.skip("needs ml_dtypes"))]
)


def _rounded(exact: mpmath.mpf, dtype: Any) -> float:
    """exact rounded once to dtype, subnormals and overflow included."""
    return sweep_tool.round_to(exact, np.dtype(dtype).name)


def _oracle(x: np.ndarray, tokens: np.ndarray, w: np.ndarray, a: float, layout: str) -> np.ndarray:
    """x (batch, heads, seq, d) rotated exactly and rounded once to x's dtype; tokens:
    the position of each (batch, seq), shape (batch, seq)."""
    nf = w.size
    out = np.asarray(x, np.float64).copy()
    src = np.asarray(x, np.float64)
    angles: dict[tuple[float, int], tuple[mpmath.mpf, mpmath.mpf]] = {}
    with mpmath.workprec(PREC):
        g = mpmath.mpf(float(a))
        for b, h, s in np.ndindex(*x.shape[:3]):
            k = float(tokens[b, s])
            for i in range(nf):
                if (k, i) not in angles:
                    ang = mpmath.mpf(k) * mpmath.mpf(float(w[i]))
                    angles[(k, i)] = (mpmath.cos(ang), mpmath.sin(ang))
                c, sn = angles[(k, i)]
                j1, j2 = (i, i + nf) if layout == "half" else (2 * i, 2 * i + 1)
                x1, x2 = mpmath.mpf(src[b, h, s, j1]), mpmath.mpf(src[b, h, s, j2])
                out[b, h, s, j1] = _rounded(g * (x1 * c - x2 * sn), x.dtype)
                out[b, h, s, j2] = _rounded(g * (x2 * c + x1 * sn), x.dtype)
    with np.errstate(over="ignore"):
        return out.astype(x.dtype)


def _check(got: np.ndarray, want: np.ndarray, what: str) -> None:
    """Every entry equal (value equality: a real 0 has no sign)."""
    g, wv = np.asarray(got, np.float64), np.asarray(want, np.float64)
    bad = np.argwhere(~((g == wv) | (np.isnan(g) & np.isnan(wv))))
    if bad.size:
        idx = tuple(bad[0])
        raise AssertionError(
            f"{what}: {len(bad)} of {g.size} entries differ; first at {idx}: got {g[idx]!r}, "
            f"correctly rounded {wv[idx]!r}"
        )


def _inputs(rng: np.random.Generator, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    return rng.standard_normal(shape).astype(dtype)


def _tokens(positions: np.ndarray, batch: int) -> np.ndarray:
    p = np.asarray(positions, np.float64)
    return np.broadcast_to(p, (batch, p.shape[-1]))


RULES = [
    pytest.param(None, {}, id="default"),
    pytest.param(LLAMA31, {}, id="llama3"),
    pytest.param(YARN, {"precision": "float64"}, id="yarn"),  # (its attention factor)
    pytest.param(None, {"inv_freq": 10.0 ** -np.arange(0, 8, dtype=np.float64)}, id="inv_freq"),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize(("params", "extra"), RULES)
def test_every_entry_is_the_exact_rotation_rounded_once(dtype, layout, params, extra):
    d = 16
    rng = np.random.default_rng(hash((str(dtype), layout)) % 2**32)
    w, a = fastpe.rope_frequencies(d, params, precision=extra.get("precision", "float32"))
    if "inv_freq" in extra:
        w = extra["inv_freq"]
    if params is YARN:
        assert a != 1.0  # (the scaled rounding is exercised)
    pos = np.array([0, 1, -3, *CONVERGENTS, 2**31 - 1, -(2**24) - 5], np.int64)
    q = _inputs(rng, (1, 2, pos.size, d), dtype)
    k = _inputs(rng, (1, 1, pos.size, d), dtype)  # (fewer heads: grouped-query attention)
    want_q = _oracle(q, _tokens(pos, 1), w, a, layout)
    want_k = _oracle(k, _tokens(pos, 1), w, a, layout)
    fastpe.apply_rope(q, k, rope_parameters=params, positions=pos, layout=layout,
                      correctly_rounded=True, **extra)  # fmt: skip
    _check(q, want_q, f"{params} {layout} q")
    _check(k, want_k, f"{params} {layout} k")


@pytest.mark.parametrize("dtype", DTYPES)
def test_fractional_positions_and_offsets_per_batch(dtype):
    rng = np.random.default_rng(3)
    w, a = fastpe.rope_frequencies(8, None)
    pos = np.array([0.5, -355.25, 2.0**30 + 0.125, 1e-300])
    q = _inputs(rng, (1, 2, pos.size, 8), dtype)
    want = _oracle(q, _tokens(pos, 1), w, a, "half")
    fastpe.apply_rope(q, positions=pos, correctly_rounded=True)
    _check(q, want, "fractional")
    # one offset per batch entry, (batch, seq, heads, d)
    x = _inputs(rng, (2, 3, 2, 8), dtype)
    offs = np.array([103993, -7])
    tokens = offs[:, None] + np.arange(3)[None, :]
    want = _oracle(x.transpose(0, 2, 1, 3), tokens, w, a, "interleaved").transpose(0, 2, 1, 3)
    fastpe.apply_rope(x, offset=offs, seq_axis=1, layout="interleaved", correctly_rounded=True)
    _check(x, want, "offsets")
    # position ids per sequence (left padding), k with fewer heads
    ids = np.array([[0, 0, 1, 2], [5419351, -1, 3, 2**40]])
    q, k = _inputs(rng, (2, 4, 4, 8), dtype), _inputs(rng, (2, 2, 4, 8), dtype)
    want_q, want_k = _oracle(q, ids, w, a, "half"), _oracle(k, ids, w, a, "half")
    fastpe.apply_rope(q, k, positions=ids, correctly_rounded=True)
    _check(q, want_q, "ids q")
    _check(k, want_k, "ids k")


@pytest.mark.parametrize("dtype", DTYPES)
def test_cancelling_and_tiny_inputs(dtype):
    """x1 cos ~ x2 sin (x2 = x1 cot t rounded): a result far below the inputs, where
    the default's float64 error is many of its ulps; and inputs near the dtype's
    least subnormal, whose products leave the normal range."""
    d, pos = 8, np.array([355, 103993, 7, 1])
    w, a = fastpe.rope_frequencies(d, None, precision="float64")
    nf = d // 2
    q = np.ones((1, 1, pos.size, d))
    with mpmath.workprec(PREC):
        for s, k in enumerate(pos):
            for i in range(nf):
                ang = mpmath.mpf(int(k)) * mpmath.mpf(float(w[i]))
                q[0, 0, s, nf + i] = float(mpmath.cot(ang))
    q = q.astype(dtype)
    want = _oracle(q, _tokens(pos, 1), w, a, "half")
    got = q.copy()
    fastpe.apply_rope(got, positions=pos, correctly_rounded=True, precision="float64")
    _check(got, want, "cancelling")
    # tiny: a few units of the least subnormal, and the smallest normals
    prec, emin = sweep_tool.FORMATS[np.dtype(dtype).name]
    units = np.array([1, 2, 3, 5, 2 ** (prec - 1), 2**prec + 1, 7, 1], np.float64)
    tiny = (np.ldexp(units, emin) * np.array([1, -1] * 4)).astype(dtype)
    x = np.broadcast_to(tiny, (1, 1, pos.size, d)).copy()
    want = _oracle(x, _tokens(pos, 1), w, a, "half")
    fastpe.apply_rope(x, positions=pos, correctly_rounded=True, precision="float64")
    _check(x, want, "tiny")


@pytest.mark.parametrize("dtype", [np.float64, np.float16])
def test_large_inputs_overflow_as_the_exact_value(dtype):
    """Entries near the largest finite value: a rotation past it is infinite."""
    big = float(np.finfo(dtype).max)
    pos = np.array([1, 5])
    w, a = fastpe.rope_frequencies(4, None, precision="float64")
    x = np.array([big, big * 0.75, -big, big * 0.5], np.float64).astype(dtype)
    x = np.broadcast_to(x, (1, 1, 2, 4)).copy()
    want = _oracle(x, _tokens(pos, 1), w, a, "half")
    with np.errstate(over="ignore", invalid="ignore"):
        fastpe.apply_rope(x, positions=pos, correctly_rounded=True, precision="float64")
    _check(x, want, "large")


def test_forced_exact_path_gives_the_same_bits_and_is_counted():
    rng = np.random.default_rng(11)
    pos = np.array([0, 355, 103993, -41])
    for dtype in DTYPES:
        if not isinstance(dtype, type):
            continue
        q = _inputs(rng, (1, 2, pos.size, 16), dtype)
        fast, forced = q.copy(), q.copy()
        fastpe.apply_rope(fast, positions=pos, correctly_rounded=True, attention_factor=0.7)
        old = _kernel._force_exact_path(True)
        try:
            before = _kernel._exact_path_runs()
            fastpe.apply_rope(forced, positions=pos, correctly_rounded=True, attention_factor=0.7)
            runs = _kernel._exact_path_runs() - before
        finally:
            _kernel._force_exact_path(old)
        assert runs >= q.size, (dtype, runs)  # (every rotated entry took it)
        assert np.array_equal(fast.view(np.uint8), forced.view(np.uint8)), dtype


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_zero_pairs_are_decided_without_the_exact_path(dtype):
    """Zero padding (either sign) rotates to +0 on the fast path: the exact path costs
    tens of microseconds an entry."""
    q = np.zeros((1, 2, 64, 32), dtype)
    q[0, 1] = -0.0
    q[0, 0, :, 5] = 1.5  # (a nonzero entry: its pair is not zero)
    want = _oracle(q, _tokens(np.arange(64), 1), fastpe.rope_frequencies(32)[0], 1.0, "half")
    before = _kernel._exact_path_runs()
    fastpe.apply_rope(q, correctly_rounded=True)
    assert _kernel._exact_path_runs() - before == 0
    _check(q, want, "zeros")
    assert not np.signbit(q[want == 0]).any()


def test_exact_path_is_rare_on_ordinary_inputs():
    """The rounding test decides nearly every entry: a float32 prefill's worth of
    entries sends few (if any) to the exact path."""
    rng = np.random.default_rng(5)
    q = _inputs(rng, (1, 4, 512, 64), np.float32)
    before = _kernel._exact_path_runs()
    fastpe.apply_rope(q, correctly_rounded=True)
    assert _kernel._exact_path_runs() - before <= q.size // 1000


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_default_keeps_its_bits(dtype):
    """correctly_rounded=False (and not given): the float64 rotation by the float64
    table, one rounding, as before the option."""
    rng = np.random.default_rng(8)
    q = _inputs(rng, (1, 3, 37, 32), dtype)
    cos, sin = fastpe.rope_cache(32, seq_len=37, offset=101, dtype=np.float64)
    x = q.astype(np.float64)
    x1, x2 = x[..., :16], x[..., 16:]
    want = np.concatenate(
        [x1 * cos[:, :16] - x2 * sin[:, :16], x2 * cos[:, :16] + x1 * sin[:, :16]], axis=-1
    ).astype(dtype)
    a, b = q.copy(), q.copy()
    fastpe.apply_rope(a, offset=101)
    fastpe.apply_rope(b, offset=101, correctly_rounded=False)
    assert np.array_equal(a, want) and np.array_equal(b, want)


def test_threads_do_not_change_the_bits():
    rng = np.random.default_rng(2)
    q = _inputs(rng, (3, 5, 97, 24), np.float32)
    outs = []
    for nt in (1, 2, 3):
        x = q.copy()
        fastpe.apply_rope(x, offset=np.array([0, 355, 7]), correctly_rounded=True,
                          num_threads=nt, attention_factor=1.25)  # fmt: skip
        outs.append(x)
    assert all(np.array_equal(outs[0], o) for o in outs[1:])


@pytest.mark.parametrize(
    ("kw", "name"),
    [
        ({"xpos_scale_base": 512.0}, "xpos_scale_base"),
        ({"xpos_center": 3.0}, "xpos_center"),
        ({"sections": [2, 2], "positions": np.zeros((3, 2), np.int64)}, "sections"),
        ({"inv_freq": np.ones((2, 4))}, "inv_freq"),
    ],
)
def test_refused_where_it_does_not_apply(kw, name):
    q = np.ones((1, 2, 3, 8), np.float32)
    with pytest.raises(ValueError, match=name):
        fastpe.apply_rope(q, q.copy(), correctly_rounded=True, **kw)
    assert np.all(q == 1.0)
    with pytest.raises(TypeError, match="correctly_rounded"):
        fastpe.apply_rope(q, correctly_rounded="yes")


# ---------------------------------------------------------------- the C API


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("params", [None, YARN])
def test_c_rotation_with_a_correct_handle_has_the_python_bits(t, dtype, params):  # noqa: F811
    h = rope_handle(t, t.rope_new(params, 32, 4096, -1, None), CORRECT)
    try:
        rng = np.random.default_rng(4)
        x = _inputs(rng, (2, 3, 5, 32), dtype)  # (batch, heads, seq, d)
        want = x.copy()
        fastpe.apply_rope(want, rope_parameters=params, offset=103990,
                          max_position_embeddings=4096, correctly_rounded=True)  # fmt: skip
        name = np.dtype(dtype).name
        fn = {"float64": t.rope_apply_f64, "float32": t.rope_apply_f32,
              "float16": t.rope_apply_f16, "bfloat16": t.rope_apply_bf16}[name]  # fmt: skip
        sb, sh, ss = (s // x.itemsize for s in x.strides[:3])
        err = fn(h, x.ctypes.data, 2, 5, 3, sb, ss, sh, None, 103990, capi_rope.LAYOUT["half"], 0)
        assert err == OK
        assert np.array_equal(x.view(np.uint8), want.view(np.uint8))
    finally:
        t.rope_free(h)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
@pytest.mark.parametrize("params", [None, LLAMA31, YARN])
def test_the_small_call_path_gives_the_general_paths_bits(dtype, params):
    """A decoding step with the option takes the compiled small-call path (it
    returns, not None) and writes the general path's bits (position ids as a
    list, which that path declines), through the correctly rounded rotation:
    with the exact path forced, every entry is counted there."""
    rng = np.random.default_rng(12)
    q = _inputs(rng, (1, 4, 3, 64), dtype)
    k = _inputs(rng, (1, 2, 3, 64), dtype)
    ids = [[355, 103993, 833719]]
    args = (params, None, 0)
    rest = (-2, "half", None, "float32", None, None, 1)
    fastpe.apply_rope(q.copy(), k.copy(), rope_parameters=params, positions=np.array(ids))
    fq, fk = q.copy(), k.copy()
    assert _kernel.rope_apply(fq, fk, *args, np.array(ids), *rest, True) is not None
    gq, gk = q.copy(), k.copy()
    assert _kernel.rope_apply(gq, gk, *args, ids, *rest, True) is None  # (declined)
    fastpe.apply_rope(gq, gk, rope_parameters=params, positions=ids, correctly_rounded=True)
    assert np.array_equal(fq.view(np.uint8), gq.view(np.uint8))
    assert np.array_equal(fk.view(np.uint8), gk.view(np.uint8))
    xq, xk = q.copy(), k.copy()
    old = _kernel._force_exact_path(True)
    try:
        before = _kernel._exact_path_runs()
        assert _kernel.rope_apply(xq, xk, *args, np.array(ids), *rest, True) is not None
        runs = _kernel._exact_path_runs() - before
    finally:
        _kernel._force_exact_path(old)
    assert runs >= q.size + k.size
    assert np.array_equal(fq.view(np.uint8), xq.view(np.uint8))
