"""add_to(..., correctly_rounded=True): every entry of the result is the exact
``x*scale + PE`` -- x and scale as given, PE the sine or cosine of the
convention's real frequency times the position -- rounded once to x's dtype
(float64, float32, float16, bfloat16; subnormals included), checked against
mpmath at 300 bits (tools/rounding_sweep.py's round_to).  An exact sum of 0 is
+0.0, but -0.0 where x*scale is -0.0 and no encoding goes (fairseq's padding row
and zero column).  The library decides each entry from a double-double value and
its error bound and sends the undecided ones to an exact path, whose runs it
counts; forcing that path gives the same bits.
"""

from __future__ import annotations

import ctypes
import importlib.util
import math
from typing import Any

import mpmath
import numpy as np
import pytest
import test_f64_rounding as f64_rounding
import test_rounding_narrow as narrow

import fastpe
from fastpe import _api
from fastpe import kernel as _kernel

PREC = 300
HAVE_BF16 = importlib.util.find_spec("ml_dtypes") is not None
FORMATS = ("float64", "float32", "float16", *(("bfloat16",) if HAVE_BF16 else ()))
CONVENTIONS = ("vaswani", "tensor2tensor", "fairseq", "diffusers", "gptj")
sweep_tool = narrow.sweep_tool


def _bits(a: np.ndarray, fmt: str) -> np.ndarray:
    """The entries' bits (so that -0.0 and 0.0 differ), as unsigned integers."""
    return np.ascontiguousarray(a).view({8: np.uint64, 4: np.uint32, 2: np.uint16}[a.itemsize])


def _expected(
    x: np.ndarray, positions: Any, scale: float, fmt: str, convention: str, layout: str
) -> np.ndarray:
    """The exact x*scale + PE of every entry (x: (rows, d), row r at positions[r])
    rounded once to fmt, as float64 (the sign of a zero as documented)."""
    d = x.shape[-1]
    conv = _api._convention(convention, 10000.0, layout)
    cols = f64_rounding._columns(conv, d)
    xs = sweep_tool.as_float64(x, fmt)
    out = np.empty(xs.shape)
    with mpmath.workprec(PREC):
        w0, base = mpmath.mpf(conv.position_scale), mpmath.mpf(conv.base)
        denom = mpmath.mpf(f64_rounding._denominator(conv, d))
        sc = mpmath.mpf(scale)
        for r, k in enumerate(np.asarray(positions, dtype=np.float64).tolist()):
            padding = conv.padding_idx is not None and k == conv.padding_idx
            for j in range(d):
                c = None if padding else cols[j]
                prod = mpmath.mpf(float(xs[r, j])) * sc
                if c is None:
                    p = mpmath.mpf(0)
                else:
                    i, is_sin = c
                    a = mpmath.mpf(k) * w0 * mpmath.power(base, -mpmath.mpf(i) / denom)
                    p = mpmath.sin(a) if is_sin else mpmath.cos(a)
                v = prod + p
                if v != 0:
                    out[r, j] = sweep_tool.round_to(v, fmt)
                    if out[r, j] == 0.0:  # (rounded to a zero: the sum's sign)
                        out[r, j] = math.copysign(0.0, float(v))
                else:  # an exact 0: -0.0 only for -0.0 with no encoding
                    neg = c is None and math.copysign(1.0, float(xs[r, j]) * scale) < 0
                    out[r, j] = -0.0 if neg else 0.0
    return out


def _check(got: np.ndarray, want: np.ndarray, fmt: str, what: str) -> None:
    vals = sweep_tool.as_float64(got, fmt).reshape(want.shape)
    same = (vals == want) & (np.signbit(vals) == np.signbit(want))
    same |= np.isnan(vals) & np.isnan(want)
    if not same.all():
        bad = np.argwhere(~same)[:6]
        lines = [f"{what} {fmt} at {tuple(b)}: got {vals[tuple(b)]!r}, want {want[tuple(b)]!r}"
                 for b in bad]  # fmt: skip
        raise AssertionError("\n".join(lines))


def _finfo(fmt: str) -> Any:
    if fmt == "bfloat16":
        import ml_dtypes

        return ml_dtypes.finfo(ml_dtypes.bfloat16)
    return np.finfo(fmt)


def _x(rng: np.random.Generator, shape: tuple[int, ...], fmt: str) -> np.ndarray:
    return rng.standard_normal(shape).astype(narrow._dtype(fmt))


def _add(x: np.ndarray, convention: str, layout: str, **kw: Any) -> np.ndarray:
    y = x.copy()
    lay = {"layout": layout} if convention == "vaswani" else {}
    out = fastpe.add_to(y, convention=convention, correctly_rounded=True, **lay, **kw)
    assert out is y
    return y


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("convention", CONVENTIONS)
def test_every_convention_offsets_and_scales(convention, fmt):
    rng = np.random.default_rng(3)
    for d, layout in ((1, "interleaved"), (7, "split"), (16, "interleaved"), (33, "split")):
        if convention == "gptj" and d % 2:
            d += 1  # (its width is even)
        lay = layout if convention == "vaswani" else "interleaved"
        for scale, offset in ((1.0, 0), (2.5, 103990), (-0.75, 355 - 2), (math.sqrt(d), 7)):
            x = _x(rng, (2, 4, d), fmt)
            got = _add(x, convention, lay, offset=offset, scale=scale)
            pos = np.tile(np.arange(offset, offset + 4), 2)
            want = _expected(x.reshape(8, d), pos, scale, fmt, convention, lay)
            _check(got, want, fmt, f"{convention} d={d} {lay} scale={scale} offset={offset}")


@pytest.mark.parametrize("fmt", FORMATS)
def test_cancellation_tiny_and_subnormal_x(fmt):
    """x = -PE rounded (the sum cancels to PE's own rounding error), tiny and
    subnormal x (the sum is PE's, or x*scale's where PE is 0), exact zeros."""
    rng = np.random.default_rng(17)
    dt, d, S = narrow._dtype(fmt), 12, 6
    for offset in (0, 355, 103993 - 3):
        table = fastpe.sinusoidal(S, d, offset=offset, dtype=dt, correctly_rounded=True)
        tiny = _finfo(fmt).smallest_subnormal
        x = np.stack(
            [
                -table,  # cancels to PE - round(PE)
                (rng.standard_normal((S, d)) * 30 * float(tiny)).astype(dt),  # subnormal
                (rng.standard_normal((S, d)) * float(_finfo(fmt).eps) ** 2).astype(dt),
                np.where(rng.random((S, d)) < 0.5, -0.0, 0.0).astype(dt),  # signed zeros
                -np.ones((S, d), dt),  # x = -cos(0) at position 0: an exact 0
            ]
        )
        for scale in (1.0, -1.0, 0.5):
            got = _add(x, "vaswani", "interleaved", offset=offset, scale=scale)
            pos = np.tile(np.arange(offset, offset + S), 5)
            want = _expected(x.reshape(-1, d), pos, scale, fmt, "vaswani", "interleaved")
            _check(got, want, fmt, f"offset={offset} scale={scale}")
    # the exact zero's sign: x = -1 at a cosine of position 0 gives +0.0, a sine
    # of position 0 (exactly 0) added to -0.0 gives +0.0 (IEEE's sum of the two)
    y = _add(np.array([[-0.0, -1.0]], dt), "vaswani", "interleaved")
    assert _bits(y, fmt).tolist() == [[0, 0]]


@pytest.mark.parametrize("fmt", FORMATS)
def test_fairseq_padding_row_and_zero_column(fmt):
    """fairseq's padding row (position 1) and its zero column (odd width): no
    encoding, so the result is x*scale rounded once, signed zeros kept."""
    rng = np.random.default_rng(23)
    d = 9
    x = _x(rng, (3, 4, d), fmt)
    x[0, 1, :3] = -0.0
    x[1, 1, 3] = float(_finfo(fmt).tiny)
    for scale in (1.0, 3.0, -1e-3):
        got = _add(x, "fairseq", "interleaved", scale=scale)
        pos = np.tile(np.arange(4), 3)
        want = _expected(x.reshape(-1, d), pos, scale, fmt, "fairseq", "interleaved")
        _check(got, want, fmt, f"fairseq scale={scale}")
        assert np.array_equal(_bits(got[:, 1], fmt), _bits(_scaled(x[:, 1], scale, fmt), fmt))


def _scaled(x: np.ndarray, scale: float, fmt: str) -> np.ndarray:
    """x*scale rounded once to x's dtype (the double product is exact for 16/32-bit
    x; float64 through mpmath)."""
    if fmt != "float64":
        return (x.astype(np.float64) * scale).astype(x.dtype)
    with mpmath.workprec(PREC):
        flat = [sweep_tool.round_to(mpmath.mpf(float(v)) * mpmath.mpf(scale), fmt) or v * scale
                for v in x.ravel().tolist()]  # fmt: skip
    return np.array(flat).reshape(x.shape)


@pytest.mark.parametrize("fmt", FORMATS)
def test_explicit_and_fractional_positions_and_offsets(fmt):
    rng = np.random.default_rng(29)
    d = 10
    x = _x(rng, (3, 5, d), fmt)
    frac = np.concatenate([rng.uniform(0, 1000, 12), [0.25, 355.0 + 2**-20, 0.0]]).reshape(3, 5)
    got = _add(x, "diffusers", "interleaved", positions=frac, scale=1.5)
    want = _expected(x.reshape(-1, d), frac.ravel(), 1.5, fmt, "diffusers", "interleaved")
    _check(got, want, fmt, "fractional positions")
    ids = rng.integers(0, 10**6, (3, 5))
    offs = np.array([0, 7, 833719 - 10**6])
    got = _add(x, "vaswani", "split", positions=ids, offset=offs, scale=0.5)
    want = _expected(x.reshape(-1, d), (ids + offs[:, None]).ravel(), 0.5, fmt, "vaswani", "split")
    _check(got, want, fmt, "position ids with offsets")


@pytest.mark.parametrize("fmt", FORMATS)
def test_the_forced_exact_path_gives_the_same_bits_and_is_counted(fmt):
    rng = np.random.default_rng(31)
    x = _x(rng, (2, 6, 14), fmt)
    x[0, 0, 0] = np.inf  # (not finite: the double sum, not the exact path)
    want = _add(x, "fairseq", "interleaved", offset=355, scale=2.0, num_threads=1)
    before = _kernel._exact_path_runs()
    was = _kernel._force_exact_path(True)
    try:
        got = _add(x, "fairseq", "interleaved", offset=355, scale=2.0, num_threads=1)
    finally:
        _kernel._force_exact_path(was)
    assert _kernel._exact_path_runs() - before == x.size - 1
    assert np.array_equal(_bits(got, fmt), _bits(want, fmt))
    assert np.isposinf(sweep_tool.as_float64(got, fmt)[0, 0, 0])


def test_the_exact_path_runs_where_the_test_cannot_decide():
    """float64 x = -PE rounded leaves PE - round(PE), far below the double-double
    value's error bound: each such entry is undecided, so the exact path runs,
    and its result is the residue rounded once (never 0)."""
    table = fastpe.sinusoidal(8, 16, offset=1000, dtype=np.float64, correctly_rounded=True)
    before = _kernel._exact_path_runs()
    got = fastpe.add_to(-table, offset=1000, num_threads=1, correctly_rounded=True)
    assert _kernel._exact_path_runs() - before == table.size
    assert np.all(got != 0.0)
    want = _expected(-table, np.arange(1000, 1008), 1.0, "float64", "vaswani", "interleaved")
    _check(got, want, "float64", "residues")


@pytest.mark.parametrize("fmt", ["float64", "float32"])
def test_threads_paths_and_the_default(fmt):
    """Every thread count and the general path (a strided x) give the fast path's
    bits; the default (False) keeps its own: x*scale + the float64 table, rounded
    once."""
    rng = np.random.default_rng(37)
    dt = np.dtype(fmt)
    x = rng.standard_normal((5, 97, 40)).astype(dt)
    one = _add(x, "vaswani", "interleaved", offset=3, scale=6.0, num_threads=1)
    for nt in (2, 3):
        many = _add(x, "vaswani", "interleaved", offset=3, scale=6.0, num_threads=nt)
        assert np.array_equal(_bits(many, fmt), _bits(one, fmt))
    wide = np.zeros((5, 97, 50), dt)
    wide[..., :40] = x
    view = wide[..., :40]  # (rows at a stride: the general path)
    fastpe.add_to(view, offset=3, scale=6.0, correctly_rounded=True)
    assert np.array_equal(_bits(view, fmt), _bits(one, fmt))
    default = fastpe.add_to(x.copy(), offset=3, scale=6.0)
    table = fastpe.sinusoidal(97, 40, offset=3, dtype=np.float64)
    assert np.array_equal(default, (x.astype(np.float64) * 6.0 + table).astype(dt))
    assert np.array_equal(default, fastpe.add_to(x.copy(), offset=3, scale=6.0,
                                                 correctly_rounded=False))  # fmt: skip


def test_correctly_rounded_must_be_a_bool():
    x = np.zeros((2, 4), np.float32)
    with pytest.raises(TypeError, match="correctly_rounded must be True or False"):
        fastpe.add_to(x, correctly_rounded="yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="correctly_rounded must be True or False"):
        fastpe.add_to(x, positions=np.arange(2), correctly_rounded=1)  # type: ignore[arg-type]
    assert np.all(x == 0.0)


def test_dask_forwards_it():
    da = pytest.importorskip("dask.array")
    import fastpe.dask

    rng = np.random.default_rng(41)
    x = rng.standard_normal((4, 50, 16))
    want = fastpe.add_to(x.copy(), offset=[0, 5, 10, 15], scale=4.0, correctly_rounded=True)
    lazy = da.from_array(x, chunks=(2, 20, 8))
    got = fastpe.dask.add_to(
        lazy, offset=np.array([0, 5, 10, 15]), scale=4.0, correctly_rounded=True
    ).compute()
    assert np.array_equal(_bits(got, "float64"), _bits(want, "float64"))
    with pytest.raises(TypeError, match="correctly_rounded"):
        fastpe.dask.add_to(lazy, correctly_rounded=None)  # type: ignore[arg-type]


@pytest.mark.parametrize("fmt", ["float64", "float32", "float16"])
def test_the_c_api_spec_adds_give_the_same_bits(fmt):
    """fastpe_spec_add_* of a spec set to FASTPE_ROUND_CORRECT, through the
    capsule's table: add_to's bits."""
    capi = pytest.importorskip("test_capi_rounding")
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    t = capi.Table.from_address(get(_kernel._C_API, b"fastpe.kernel._C_API"))
    s = capi.spec(t, "fairseq", 9)
    try:
        rng = np.random.default_rng(43)
        x = rng.standard_normal((3, 5, 9)).astype(fmt)
        got = x.copy()
        add = {"float64": t.spec_add_f64, "float32": t.spec_add_f32, "float16": t.spec_add_f16}
        assert add[fmt](s, got.ctypes.data, 3, 5, 9, 103990, 1.75, 2) == capi.OK
        want = _add(x, "fairseq", "interleaved", offset=103990, scale=1.75)
        assert np.array_equal(_bits(got, fmt), _bits(want, fmt))
    finally:
        t.spec_free(s)
