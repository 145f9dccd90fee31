"""Hostile input: every public function over its whole argument space.

Each call either returns the documented result (checked against an oracle) or
raises ValueError, TypeError or MemoryError -- never another exception type
(OverflowError included), never a crash, and never a write outside ``out``:
every ``out`` array is carved out of a larger byte buffer filled with canary
bytes, and after the call every byte the view does not cover must still be a
canary (and, if the call failed, the covered bytes must be untouched too).

Adding a public function: add an entry to SPECS (its argument names and an
oracle); test_every_public_function_has_a_spec fails until you do.  Public
classes (fastpe.Convention) are covered through the ``convention`` argument and
by test_convention_hostile.
"""

from __future__ import annotations

import copy
import fractions
import math
import operator
import re
import sys
import warnings

import numpy as np
import pytest
from conventions_ref import knob_ref, make_positions_ref, timm_ref
from hypothesis import HealthCheck, assume, event, given, note, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from rules import LLAMA31

import fastpe
from fastpe import Convention, kernel

ACCEPTED_ERRORS = (ValueError, TypeError, MemoryError)


RAM = fastpe._validate.physical_memory() or 2**36
try:
    import ml_dtypes

    BF16 = np.dtype(ml_dtypes.bfloat16)
    HAVE_ML_DTYPES = True
except ImportError:  # bfloat16 is an optional extra
    BF16 = None
    HAVE_ML_DTYPES = False
OUTPUT_DTYPES = [np.dtype(t) for t in (np.float16, np.float32, np.float64)] + (
    [BF16] if HAVE_ML_DTYPES else []
)
CANARY = 0xA5
PAD = 64

# ------------------------------------------------------------------ values

NUMPY_SCALAR_DTYPES = [
    "?",
    "i1",
    "i2",
    "i4",
    "i8",
    "u1",
    "u2",
    "u4",
    "u8",
    "f2",
    "f4",
    "f8",
    "g",
    "c8",
    "c16",
    "M8[s]",
    "m8[s]",
    "U3",
    "S3",
]


def numpy_scalars():
    """NumPy scalars of every kind (including NaN/inf floats, datetimes, strings)."""
    return st.sampled_from(NUMPY_SCALAR_DTYPES).flatmap(
        lambda dt: hnp.from_dtype(np.dtype(dt)).map(lambda v, dt=dt: np.array(v, dtype=dt)[()])
    )


def odd_objects():
    """Things that are not scalars at all."""
    return st.sampled_from(
        [
            None,
            "3",
            b"3",
            "",
            [],
            [3],
            (3,),
            {3: 3},
            object(),
            np.int64,
            float,
            np.array(5),
            np.array(5.0),
            np.array([5]),
            np.array([]),
            np.array(7, dtype=object),
            np.array([3, 4], dtype=object),
            np.zeros((2, 2)),
            slice(3),
            1 + 2j,
            math.nan,
            math.inf,
            -math.inf,
            -0.0,
            fractions.Fraction(10**400, 3),
        ]
    )


HUGE_INTS = [2**31, 2**40, 2**53 + 1, 2**62, 2**63 - 1, 2**63, 2**64, 10**30, 10**400]


def hostile_ints():
    return st.one_of(
        st.sampled_from(HUGE_INTS + [-x for x in HUGE_INTS] + [-1, 0, 1]),
        st.integers(),
        st.booleans(),
    )


def hostile_floats():
    return st.one_of(
        st.floats(allow_nan=True, allow_infinity=True),
        st.sampled_from([1e300, 1.5e300, 1e308, 5e-324, 1e-300, 1.0, 0.5, -1.0]),
    )


def anything():
    return st.one_of(
        hostile_ints(), hostile_floats(), numpy_scalars(), odd_objects(), st.text(max_size=4)
    )


SIZES = st.integers(0, 40)
WIDTHS = st.integers(1, 40)
# Plausible values (a call made only of these must succeed) ...
VALID = {
    "seq_len": st.one_of(SIZES, SIZES.map(np.int32), SIZES.map(np.uint64), SIZES.map(np.array)),
    "d_model": st.one_of(WIDTHS, WIDTHS.map(np.int16), WIDTHS.map(np.int64)),
    "base": st.one_of(
        st.floats(1.5, 1e6),
        st.integers(2, 10**6),
        st.floats(1.5, 1e6).map(np.float32),
        st.floats(1e-3, 1e300),
        st.sampled_from(
            [fractions.Fraction(10001, 1), np.float16(100), np.longdouble(1e4), 1e300, 1.0]
        ),
    ),
    "offset": st.one_of(st.integers(-(10**6), 10**6), st.integers(-50, 50).map(np.int8)),
    "dtype": st.sampled_from(
        [
            None,
            np.float32,
            np.float64,
            "f4",
            "float64",
            np.dtype("f8"),
            "=f8",
            np.dtype("float32").newbyteorder("="),
            np.float16,
            "float16",
            *(["bfloat16"] if HAVE_ML_DTYPES else []),
        ]
    ),
    "layout": st.sampled_from(["interleaved", "split"]),
    "num_threads": st.one_of(st.none(), st.integers(1, 5), st.just(2**40)),
    "convention": st.sampled_from(
        [
            "vaswani",
            "tensor2tensor",
            "fairseq",
            "diffusers",
            "gptj",
            Convention(base=500.0, layout="split"),
            Convention.fairseq(padding_idx=None),
            Convention.tensor2tensor(2.0, 5000.0),
            Convention.diffusers(downscale_freq_shift=0.0, scale=1000.0, flip_sin_to_cos=True),
            Convention(denominator="h", position_scale=0.25, odd="zero", padding_idx=3),
        ]
    ),
    "positions": st.one_of(
        st.integers(-1000, 1000),
        st.lists(st.integers(-1000, 1000), max_size=6),
        hnp.arrays(
            st.sampled_from(["i8", "i4", "u2", "f8", "f4"]),
            hnp.array_shapes(min_dims=0, max_dims=3, max_side=4),
            elements=st.integers(0, 1000),
        ),
    ),
    "x": hnp.arrays(
        st.sampled_from([np.float32, np.float64]),
        hnp.array_shapes(min_dims=2, max_dims=4, min_side=0, max_side=6),
        elements=st.floats(-10, 10, width=32),
    ),
    "scale": st.one_of(st.floats(-100, 100), st.integers(-5, 5), st.just(np.float32(0.5))),
    "tokens": hnp.arrays(
        st.sampled_from(["i8", "i4", "u1"]),
        hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=7),
        elements=st.integers(0, 4),
    ),
    "padding_idx": st.one_of(st.integers(-2, 5), st.integers(0, 3).map(np.int32)),
    "head_dim": st.one_of(st.integers(1, 128).map(lambda n: 2 * n), st.just(np.int64(64))),
    "rope_parameters": st.sampled_from(
        [
            None,
            {},
            {"rope_theta": 500000.0},
            {"rope_type": "linear", "factor": 4.0},
            {"type": "dynamic", "factor": 2.0, "partial_rotary_factor": 0.5},
            {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 2048},
            LLAMA31,
        ]
    ),
    "max_position_embeddings": st.one_of(st.integers(1, 10**6), st.just(np.int32(4096))),
    "precision": st.sampled_from(["float32", "float64"]),
    "inv_freq": st.lists(st.floats(0.0, 10.0), min_size=1, max_size=40),
    "q": hnp.arrays(
        st.sampled_from([np.float32, np.float64]),
        st.tuples(
            st.integers(1, 2),
            st.integers(1, 3),
            st.integers(0, 5),
            st.integers(1, 8).map(lambda n: 2 * n),
        ),
        elements=st.floats(-10, 10, width=32),
    ).map(np.array),  # (an array of its own: hypothesis may broadcast a repeated value)
    "k": st.none(),
    "seq_axis": st.sampled_from([-2, 2]),
    "attention_factor": st.floats(0.25, 4.0),
    "grid_h": st.one_of(st.integers(0, 9), st.integers(0, 9).map(np.int64)),
    "grid_w": st.integers(0, 9),
    "cls_token": st.booleans(),
    "interleave_sin_cos": st.booleans(),
    "reverse_coord": st.booleans(),
}
# Where one function's plausible values differ from the shared ones.
VALID_FOR = {
    ("add_to", "offset"): st.one_of(
        st.integers(-1000, 1000),
        st.lists(st.integers(-1000, 1000), min_size=1, max_size=3),
        hnp.arrays(
            np.int64,
            hnp.array_shapes(min_dims=0, max_dims=2, max_side=3),
            elements=st.integers(-1000, 1000),
        ),
    ),
    ("add_to", "positions"): st.one_of(
        st.lists(st.integers(0, 1000), min_size=1, max_size=6),
        hnp.arrays(
            st.sampled_from(["i8", "f8"]),
            hnp.array_shapes(min_dims=1, max_dims=2, max_side=6),
            elements=st.integers(0, 1000),
        ),
    ),
    ("sinusoidal_2d", "convention"): st.sampled_from(["mae", "timm"]),
    ("sinusoidal_2d", "d_model"): st.integers(1, 12).map(lambda n: 4 * n),
    ("rope_cache", "layout"): st.sampled_from(["half", "interleaved"]),
    ("apply_rope", "layout"): st.sampled_from(["half", "interleaved"]),
    ("apply_rope", "offset"): st.one_of(
        st.integers(-1000, 10**5), st.lists(st.integers(0, 10**5), min_size=1, max_size=2)
    ),
    ("apply_rope", "positions"): st.lists(st.integers(0, 10**4), max_size=5),
    ("apply_rope", "head_dim"): st.integers(1, 8).map(lambda n: 2 * n),
    ("rope_cache", "positions"): hnp.arrays(
        st.sampled_from(["i8", "i4", "u2"]),
        hnp.array_shapes(min_dims=0, max_dims=3, max_side=4),
        elements=st.integers(0, 1000),
    ),
}
# ... and, per argument, values aimed at it in particular (besides anything()).
AIMED = {
    "dtype": st.sampled_from(
        [
            ">f8",
            "<f4" if sys.byteorder == "big" else ">f4",
            "<f2" if sys.byteorder == "big" else ">f2",
            np.longdouble,
            np.int32,
            np.uint16,
            np.complex128,
            np.complex64,
            object,
            "f4,",
            "not-a-dtype",
            np.dtype("V8"),
            "M8[s]",
            np.dtype([("a", "f8")]),
            "(2,)f8",
            np.ndarray,
            "O",
        ]
    ),
    "layout": st.sampled_from(["SPLIT", "", "zigzag", b"split", "interleaved "]),
    "convention": st.sampled_from(["Vaswani", "", "mae", Convention, fastpe.CONVENTIONS]),
    "positions": st.sampled_from(
        [
            [np.nan],
            [np.inf, 1.0],
            [True],
            np.array([1], dtype=object),
            [1j],
            [[1], [1, 2]],
            np.array([2**64 - 1], np.uint64),
            [1e300],
            np.arange(6.0)[::-2],
            np.array([-0.0, 0.5]),
            np.array(["2020"], "M8[s]"),
        ]
    ),
    "x": st.sampled_from(
        [
            np.zeros((3, 8))[:, ::2],
            np.zeros((8, 3, 4)).transpose(1, 0, 2),
            np.zeros((4, 8), "f2"),
            np.zeros((4, 8), "i4"),
            np.zeros((4, 8), ">f8"),
            np.zeros(8),
            np.zeros((4, 0)),
            np.zeros((2, 4, 8))[::-1],
            np.broadcast_to(np.zeros(8), (3, 8)),
            np.zeros((4, 8), "c16"),
            np.zeros((1, 2, 3, 1, 5, 4), np.float32),
        ]
    ),
    "rope_parameters": st.sampled_from(
        [
            {"rope_type": "yarn"},
            {
                "rope_type": "longrope",
                "short_factor": [1.0],
                "long_factor": [1.0],
                "original_max_position_embeddings": 4,
            },
            {"rope_type": "linear", "factor": float("nan")},
            {"factor": 2.0},
            {"rope_type": None},
            {"rope_theta": -1.0},
            {"partial_rotary_factor": 2.0},
            {"rope_type": "LINEAR"},
            {1: 2},
        ]
    ),
    "precision": st.sampled_from(["float16", "exact", "", None, np.float32]),
    # offsets of the wrong kind or shape, None among them (the default is 0, not None)
    "offset": st.sampled_from(
        [
            None,
            np.array([[1]]),
            np.array([1.5]),
            np.array([1, 2, 3, 4, 5]),
            [None],
            "1",
            2.0,
            True,
            np.array(3, np.uint64),
            np.array([-(2**62) - 7, 2**62]),
        ]
    ),
    "tokens": st.sampled_from(
        [
            np.zeros(()),
            np.array([1.5]),
            np.array([[1], [2]], "u8") * 2**63,
            [[1, 2], [3]],
            np.array([True]),
        ]
    ),
}


def hostile_value(name):
    return st.one_of(anything(), AIMED[name]) if name in AIMED else anything()


# ------------------------------------------------------------------ out= arrays
OUT_KINDS = [
    "none",
    "c",
    "rows_strided",
    "fortran",
    "misaligned",
    "readonly",
    "broadcast",
    "overlapping",
    "zero_stride",
    "reversed",
    "nonnative",
    "wrong_shape",
    "transposed_shape",
    "three_d",
    "zero_d",
    "sub",
    "matrix",
    "masked",
    "object",
    "int32",
    "complex64",
    "list",
    "bytearray",
    "memoryview",
]


class Sub(np.ndarray):
    pass


def _guarded(shape, dtype, strides=None, extra=0, shift=0):
    """A view of `shape`/`dtype` inside a canary-filled byte buffer; returns
    (view, buffer, mask of the bytes the view covers)."""
    dtype = np.dtype(dtype)
    S, D = shape
    itemsize = dtype.itemsize
    if strides is None:
        strides = ((D + extra) * itemsize, itemsize)
    span = 1 + sum((n - 1) * abs(s) for n, s in zip(shape, strides, strict=False)) * (
        0 not in shape
    )
    nbytes = span + itemsize + 2 * PAD
    buf = np.full(nbytes, CANARY, dtype=np.uint8)
    start = PAD + shift + (0 if strides[0] >= 0 else max(S - 1, 0) * -strides[0])
    view = np.ndarray(shape, dtype=dtype, buffer=buf, offset=start, strides=strides)
    marker = np.zeros(nbytes, dtype=np.uint8)
    mview = np.ndarray(shape, dtype=dtype, buffer=marker, offset=start, strides=strides)
    mview[...] = np.frombuffer(b"\xff" * itemsize, dtype=dtype)[0]
    return view, buf, marker == 0xFF


def make_out(kind, shape, dtype):
    """(out argument, guard buffer or None, covered-byte mask or None)."""
    S, D = shape
    dt = np.dtype(dtype)
    isz = dt.itemsize
    if kind == "none":
        return None, None, None
    if kind == "c":
        return _guarded(shape, dt)
    if kind == "rows_strided":
        return _guarded(shape, dt, extra=3)
    if kind == "fortran":
        return _guarded(shape, dt, strides=(isz, max(S, 1) * isz))
    if kind == "misaligned":
        return _guarded(shape, dt, shift=1)
    if kind == "readonly":
        v, buf, m = _guarded(shape, dt)
        v.flags.writeable = False
        return v, buf, m
    if kind == "broadcast":
        return np.broadcast_to(np.zeros(D, dt), shape), None, None
    if kind == "overlapping":
        return _guarded(shape, dt, strides=(isz, isz))
    if kind == "zero_stride":
        return _guarded(shape, dt, strides=(0, isz))
    if kind == "reversed":
        return _guarded(shape, dt, strides=(-D * isz, isz))
    if kind == "nonnative":
        return _guarded(shape, dt.newbyteorder())
    if kind == "wrong_shape":
        return _guarded((S + 1, D), dt)
    if kind == "transposed_shape":
        return _guarded((D, S), dt)
    if kind == "three_d":
        return np.zeros((S, D, 1), dt), None, None
    if kind == "zero_d":
        return np.zeros((), dt), None, None
    if kind == "sub":
        v, buf, m = _guarded(shape, dt)
        return v.view(Sub), buf, m
    if kind == "matrix":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PendingDeprecationWarning)
            return np.matrix(np.zeros(shape, dt)), None, None
    if kind == "masked":
        return np.ma.masked_array(np.zeros(shape, dt), mask=False), None, None
    if kind == "object":
        return np.zeros(shape, dtype=object), None, None
    if kind == "int32":
        return _guarded(shape, np.int32)
    if kind == "complex64":
        return _guarded(shape, np.complex64)
    if kind == "list":
        return np.zeros(shape, dt).tolist(), None, None
    if kind == "bytearray":
        return bytearray(S * D * isz), None, None
    if kind == "memoryview":
        # (bfloat16 has no buffer format: its bits, a uint16 buffer, are refused)
        return memoryview(np.zeros(shape, np.uint16 if dt == BF16 else dt)), None, None
    raise AssertionError(kind)


# ------------------------------------------------------------------ oracles


def _index(v):
    # bools are refused by fastpe; NumPy < 1.24 only warns when np.bool_ is used as
    # an index (an error under this suite's warning filter)
    if isinstance(v, (bool, np.bool_)):
        raise TypeError("a bool is not an index")
    return operator.index(v)


def _angle_bound(seq_len, d_model, base, offset):
    nf = (d_model + 1) // 2
    try:
        w = 1.0 if base >= 1 else base ** (-2.0 * (nf - 1) / d_model)
    except OverflowError:  # tiny base: only "no NaN" is checked then
        w = math.inf
    return max(abs(offset), abs(offset + seq_len)) * w


def check_table(result, kwargs, default_dtype):
    """The documented result of sinusoidal/reference for arguments that were accepted."""
    S, D = _index(kwargs["seq_len"]), _index(kwargs["d_model"])
    base = float(kwargs.get("base", 10000.0))
    offset = _index(kwargs.get("offset", 0))
    layout = kwargs.get("layout", "interleaved")
    assert layout in ("interleaved", "split")
    assert math.isfinite(base) and base > 0
    assert S >= 0 and D >= 1
    out = kwargs.get("out")
    expected_dtype = _expected_dtype(kwargs, default_dtype)
    assert expected_dtype in OUTPUT_DTYPES
    if out is not None:
        assert result is out  # the caller's object back (a memoryview stays one)
        result = np.asarray(result)
    assert isinstance(result, np.ndarray)
    assert result.shape == (S, D) and result.dtype == expected_dtype
    if S == 0:
        return
    R = fastpe.reference(S, D, base=base, offset=offset, layout=layout)
    assert np.isfinite(result).all()
    # the reference's own error grows with the angle; fastpe's float32 rounding is 2^-24
    tol = 1e-12 + 16 * _angle_bound(S, D, base, offset) * 2.0**-53
    tol += _rounding(expected_dtype)
    assert np.max(np.abs(np.asarray(result, dtype=np.float64) - R)) <= tol


def _conv_of(kwargs):
    c = kwargs.get("convention", "vaswani")
    if isinstance(c, Convention):
        return c
    if c == "vaswani":
        return Convention.vaswani(
            base=float(kwargs.get("base", 10000.0)), layout=kwargs.get("layout", "interleaved")
        )
    return getattr(Convention, c)()


def _expected_dtype(kwargs, default_dtype):
    out = kwargs.get("out")
    dtype = kwargs.get("dtype")
    if out is not None and dtype is None:
        dt = np.asarray(out).dtype
        return dt if dt == BF16 else dt.newbyteorder("=")
    if isinstance(dtype, str) and dtype == "bfloat16":
        return BF16
    return np.dtype(default_dtype if dtype is None else dtype)


def _rounding(dt):
    """The largest rounding error of an entry in [-1, 1] in dtype dt (half an ulp of 1)."""
    return {4: 2.0**-24, 8: 0.0}.get(np.dtype(dt).itemsize, 2.0**-9 if dt == BF16 else 2.0**-12)


def _knob_tol(angles, dtype):
    tol = 1e-12 + 32 * float(np.max(np.abs(angles), initial=1.0)) * 2.0**-53
    return tol + _rounding(dtype)


def check_convention_table(result, kwargs, default_dtype):
    """sinusoidal with a convention other than plain Vaswani: the knobs' meaning."""
    conv = _conv_of(kwargs)
    S, D = _index(kwargs["seq_len"]), _index(kwargs["d_model"])
    offset = _index(kwargs.get("offset", 0))
    dt = _expected_dtype(kwargs, default_dtype)
    if kwargs.get("out") is not None:
        assert result is kwargs["out"]
        result = np.asarray(result)
    assert isinstance(result, np.ndarray) and result.shape == (S, D) and result.dtype == dt
    if S == 0:
        return
    ref, ang = knob_ref(np.arange(offset, offset + S), D, conv)
    assert np.max(np.abs(result.astype(np.float64) - ref), initial=0) <= _knob_tol(ang, dt)


def check_sinusoidal(result, kwargs, default_dtype):
    if "convention" in kwargs and kwargs["convention"] != "vaswani":
        check_convention_table(result, kwargs, default_dtype)
    else:
        check_table(result, kwargs, default_dtype)


def check_at(result, kwargs, default_dtype):
    conv = _conv_of(kwargs)
    pos = np.asarray(kwargs["positions"])
    assert pos.dtype.kind in "iuf"
    D = _index(kwargs["d_model"])
    dt = _expected_dtype(kwargs, default_dtype)
    if kwargs.get("out") is not None:
        assert result is kwargs["out"]
        result = np.asarray(result)
    assert isinstance(result, np.ndarray)
    assert result.shape == (*pos.shape, D) and result.dtype == dt
    if pos.size == 0:  # d_model may be huge: no oracle table for no rows
        return
    ref, ang = knob_ref(pos, D, conv)
    assert np.max(np.abs(result.astype(np.float64) - ref), initial=0) <= _knob_tol(ang, dt)


def check_add_to(result, kwargs, default_dtype, before):
    x0 = before["x"]
    x = kwargs["x"]
    assert result is x
    if x.size == 0:
        return
    S, D = x.shape[-2:]
    batch = x.shape[:-2]
    offset = np.asarray(kwargs.get("offset", 0))
    assert offset.dtype.kind in "iu" or offset.size == 0
    off = np.broadcast_to(offset, batch)[..., None] if offset.ndim else offset
    if kwargs.get("positions") is None:
        pos = off + np.arange(S)
    else:
        p = np.asarray(kwargs["positions"])
        pos = (off + p) if p.dtype.kind in "iu" else p
    pos = np.broadcast_to(pos, x.shape[:-1])
    ref, ang = knob_ref(pos, D, _conv_of(kwargs))
    scale = float(kwargs.get("scale", 1.0))
    with np.errstate(over="ignore", invalid="ignore"):
        expect = x0.astype(np.float64) * scale + ref
        rounded = expect.astype(x.dtype)  # a huge scale overflows to inf, as it should
    big = ~np.isfinite(rounded)
    np.testing.assert_array_equal(x[big], rounded[big])
    expect, got = expect[~big], x[~big].astype(np.float64)
    # one rounding of x*scale + PE into x's dtype: an ulp of the largest entry
    half = 2.0**-7 if x.dtype == BF16 else 2.0**-10
    ulp = {4: 2.0**-23, 8: 2.0**-51}.get(x.dtype.itemsize, half)
    tol = _knob_tol(ang, np.float64) + float(np.max(np.abs(expect), initial=1)) * ulp
    assert np.max(np.abs(got - expect), initial=0) <= tol


check_add_to.needs_before = True


def check_fairseq_positions(result, kwargs, default_dtype):
    tok = np.asarray(kwargs["tokens"])
    pad = _index(kwargs.get("padding_idx", 1))
    assert tok.dtype.kind in "iu" and tok.ndim >= 1
    assert result.shape == tok.shape and result.dtype == np.int64
    flat = tok.reshape(-1, tok.shape[-1]) if tok.size else tok.reshape(0, tok.shape[-1])
    np.testing.assert_array_equal(result.reshape(flat.shape), make_positions_ref(flat, pad))


def check_2d(result, kwargs, default_dtype):
    H, W, D = (_index(kwargs[k]) for k in ("grid_h", "grid_w", "d_model"))
    conv = kwargs.get("convention", "mae")
    cls = bool(kwargs.get("cls_token", False))
    base = float(kwargs.get("base", 10000.0))
    dt = np.dtype(np.float32 if kwargs.get("dtype") is None else kwargs["dtype"])
    assert D % 4 == 0 and result.shape == (cls + H * W, D) and result.dtype == dt
    if cls:
        assert not result[0].any()
    if H * W == 0:  # an empty grid; the other side may be huge
        return
    grid = result[cls:].astype(np.float64)
    if conv == "timm":
        ref, ang = timm_ref(
            (H, W),
            D,
            temperature=base,
            reverse_coord=bool(kwargs.get("reverse_coord", False)),
            interleave_sin_cos=bool(kwargs.get("interleave_sin_cos", False)),
        )
    else:
        half = Convention.vaswani(base=base, layout="split")
        hh, w = np.meshgrid(np.arange(H), np.arange(W), indexing="ij")
        ew, aw = knob_ref(w.reshape(-1), D // 2, half)
        eh, ah = knob_ref(hh.reshape(-1), D // 2, half)
        ref, ang = np.concatenate([ew, eh], axis=1), np.concatenate([aw, ah], axis=1)
    assert np.max(np.abs(grid - ref.reshape(grid.shape)), initial=0) <= _knob_tol(ang, dt)


def check_get_include(result, kwargs, default_dtype):
    import os

    assert kwargs == {}
    assert isinstance(result, str) and os.path.isfile(os.path.join(result, "fastpe.h"))


def check_rope_frequencies(result, kwargs, default_dtype):
    inv, attention = result
    params = kwargs.get("rope_parameters") or {}
    dim = int(_index(kwargs["head_dim"]) * params.get("partial_rotary_factor", 1.0))
    assert isinstance(inv, np.ndarray) and inv.dtype == np.float64 and inv.shape == (dim // 2,)
    assert np.all(np.isfinite(inv)) and np.all(inv >= 0) and inv[0] > 0
    assert isinstance(attention, float) and math.isfinite(attention) and attention > 0
    rope_type = params.get("rope_type", params.get("type", "default"))
    if rope_type in ("default", "linear"):  # the published rule, theta^(-2i/d) / factor
        theta = params.get("rope_theta", 10000.0)
        want = theta ** (-np.arange(0, dim, 2) / dim) / params.get("factor", 1.0)
        # float32 steps (the default precision): the exponent 2i/d rounded once, and
        # past 2**24 also 2i and d themselves (float32 integers end there), an error
        # scaled by ln(theta) in the power; the power, reciprocal and division round once
        k = 3 if dim > 2**24 else 1
        rtol = max(2.0**-20, 2.0**-24 * (k * abs(math.log(theta)) + 3) * 1.01)
        np.testing.assert_allclose(inv, want, rtol=rtol)


def check_rope_cache(result, kwargs, default_dtype):
    cos, sin = result
    if kwargs.get("inv_freq") is not None:
        w = np.asarray(kwargs["inv_freq"], dtype=np.float64)
    else:
        w, _ = fastpe.rope_frequencies(
            kwargs["head_dim"], kwargs.get("rope_parameters"), max_position_embeddings=10**9
        )  # (only its size here)
    if kwargs.get("positions") is not None:
        shape = np.shape(kwargs["positions"])
    else:
        shape = (_index(kwargs["seq_len"]),)
    dt = np.dtype(kwargs.get("dtype") or np.float32)
    assert cos.shape == sin.shape == (*shape, 2 * w.size) and cos.dtype == sin.dtype == dt
    a = kwargs.get("attention_factor")
    if a is not None and float(a) > min(
        float(np.finfo(np.float32).max if dt == BF16 else np.finfo(dt).max) / 2, 1e150
    ):
        return  # (cos and sin times a factor beyond the dtype's range, or its square's)
    assert np.all(np.isfinite(cos)) and np.all(np.isfinite(sin))
    # cos^2 + sin^2 is the attention factor squared, the same for every entry
    r2 = cos.astype(np.float64) ** 2 + sin.astype(np.float64) ** 2
    if r2.size:
        np.testing.assert_allclose(
            r2, r2.flat[0], rtol={4: 2.0**-20, 8: 1e-14}.get(dt.itemsize, 2.0**-6)
        )


def check_apply_rope(result, kwargs, default_dtype, before):
    # a rotation: each row keeps its length over the rotated dims (times the
    # attention factor), and the dims past them are untouched
    q, q0 = kwargs["q"], before["q"]
    assert result is q
    if kwargs.get("inv_freq") is not None:
        w, a = np.asarray(kwargs["inv_freq"], dtype=np.float64), 1.0
    else:
        w, a = fastpe.rope_frequencies(
            kwargs.get("head_dim") or q.shape[-1],
            kwargs.get("rope_parameters"),
            max_position_embeddings=10**9,
        )
    if kwargs.get("attention_factor") is not None:
        a = float(kwargs["attention_factor"])
    r = 2 * w.size
    np.testing.assert_array_equal(q[..., r:], q0[..., r:])
    if a > min(float(np.finfo(q.dtype).max) / 1e3, 1e150):
        return  # (rotated rows scaled beyond the dtype's range, or their squares': inf)
    n0 = np.sum(q0[..., :r].astype(np.float64) ** 2, axis=-1) * a * a
    n1 = np.sum(q[..., :r].astype(np.float64) ** 2, axis=-1)
    eps = 2.0**-20 if q.dtype == np.float32 else 1e-13
    np.testing.assert_allclose(n1, n0, rtol=eps, atol=eps)


check_apply_rope.needs_before = True


def check_build_info(result, kwargs, default_dtype):
    assert kwargs == {}
    assert isinstance(result, dict) and result["version"] == fastpe.__version__


# name -> (function, argument names it takes, positional names, oracle, default dtype)
SPECS = {
    "sinusoidal": (
        fastpe.sinusoidal,
        ["base", "offset", "dtype", "layout", "out", "num_threads", "convention"],
        ["seq_len", "d_model"],
        check_sinusoidal,
        np.float32,
    ),
    "reference": (
        fastpe.reference,
        ["base", "offset", "dtype", "layout"],
        ["seq_len", "d_model"],
        check_table,
        np.float64,
    ),
    "build_info": (fastpe.build_info, [], [], check_build_info, None),
    "get_include": (fastpe.get_include, [], [], check_get_include, None),
    "sinusoidal_at": (
        fastpe.sinusoidal_at,
        ["base", "dtype", "layout", "out", "num_threads", "convention"],
        ["positions", "d_model"],
        check_at,
        np.float32,
    ),
    "add_to": (
        fastpe.add_to,
        ["offset", "positions", "scale", "base", "layout", "num_threads", "convention"],
        ["x"],
        check_add_to,
        None,
    ),
    "fairseq_positions": (
        fastpe.fairseq_positions,
        ["padding_idx"],
        ["tokens"],
        check_fairseq_positions,
        None,
    ),
    "sinusoidal_2d": (
        fastpe.sinusoidal_2d,
        [
            "base",
            "convention",
            "cls_token",
            "interleave_sin_cos",
            "reverse_coord",
            "dtype",
            "num_threads",
        ],
        ["grid_h", "grid_w", "d_model"],
        check_2d,
        np.float32,
    ),
    "rope_frequencies": (
        fastpe.rope_frequencies,
        ["rope_parameters", "max_position_embeddings", "seq_len", "precision"],
        ["head_dim"],
        check_rope_frequencies,
        None,
    ),
    "apply_rope": (
        fastpe.apply_rope,
        [
            "k",
            "rope_parameters",
            "head_dim",
            "offset",
            "positions",
            "seq_axis",
            "layout",
            "max_position_embeddings",
            "precision",
            "inv_freq",
            "attention_factor",
            "num_threads",
        ],
        ["q"],
        check_apply_rope,
        None,
    ),
    "rope_cache": (
        fastpe.rope_cache,
        [
            "rope_parameters",
            "seq_len",
            "offset",
            "positions",
            "layout",
            "dtype",
            "max_position_embeddings",
            "precision",
            "inv_freq",
            "attention_factor",
            "num_threads",
        ],
        ["head_dim"],
        check_rope_cache,
        np.float32,
    ),
}


def test_every_public_function_has_a_spec():
    # classes are not functions: Convention is exercised through `convention=`
    # arguments and test_convention_hostile
    public = {
        n
        for n in fastpe.__all__
        if callable(getattr(fastpe, n)) and not isinstance(getattr(fastpe, n), type)
    }
    assert public == set(SPECS)
    assert {n for n in fastpe.__all__ if isinstance(getattr(fastpe, n), type)} == {"Convention"}


# ------------------------------------------------------------------ the property


@st.composite
def calls(draw, name, n_hostile=None):
    _fn, kw_names, pos_names, _, _ = SPECS[name]
    # How many arguments get a hostile value: 0 (a valid call), 1 or a few.
    at_least = 0 if n_hostile is None else n_hostile
    if n_hostile is None:
        n_hostile = draw(st.sampled_from([0, 0, 1, 1, 1, 2, 3]))
    present = pos_names + [k for k in kw_names if k != "out" and draw(st.booleans())]
    bad = (
        set(draw(st.lists(st.sampled_from(present), min_size=at_least, max_size=n_hostile)))
        if present
        else set()
    )
    kwargs = {
        k: draw(hostile_value(k) if k in bad else VALID_FOR.get((name, k), VALID[k]))
        for k in present
    }
    valid = not bad
    if draw(st.integers(0, 9)) == 0:  # a keyword the function does not take
        foreign = draw(st.sampled_from(sorted(set(VALID) | {"out", "bogus"})))
        if foreign not in kw_names and foreign not in pos_names:
            kwargs[foreign] = draw(st.one_of(VALID.get(foreign, anything()), anything()))
            valid = False
    # Tables that are valid and merely big (up to the machine's RAM) would be
    # really allocated and filled: keep the property cheap and the machine alive.
    # Bigger-than-RAM and overflowing sizes stay in (they must fail up front).
    try:
        if name == "sinusoidal_2d":
            H, W, D = (_index(kwargs[p]) for p in ("grid_h", "grid_w", "d_model"))
            S = H * W
        elif name == "sinusoidal_at":
            S, D = int(np.size(kwargs["positions"])), _index(kwargs["d_model"])
        else:
            S, D = (_index(kwargs[p]) for p in ("seq_len", "d_model"))
    except (KeyError, TypeError, ValueError):
        pass
    else:
        if not isinstance(S, bool) and not isinstance(D, bool):
            assume(not (S > 0 and D > 0 and S * D * 8 > 2**22 and S * D * 4 <= 2 * RAM))
    guard = None
    if "out" in kw_names or draw(st.integers(0, 19)) == 0:
        valid_kinds = ["none", "c", "rows_strided", "sub", "masked", "matrix"]
        kind = draw(st.sampled_from(valid_kinds if n_hostile == 0 else OUT_KINDS))
        try:
            if name == "sinusoidal_at":
                shape = (int(np.size(kwargs["positions"])), _index(kwargs.get("d_model")))
                if np.ndim(kwargs["positions"]) != 1:
                    shape = (3, 4)
            else:
                shape = (_index(kwargs.get("seq_len")), _index(kwargs.get("d_model")))
        except (TypeError, KeyError, ValueError):
            shape = (3, 4)
        if kind != "none":
            if not (0 <= shape[0] <= 64 and 1 <= shape[1] <= 64):
                shape = (3, 4)
            out_dtype = draw(st.sampled_from(OUTPUT_DTYPES))
            if valid and kwargs.get("dtype") is not None:
                out_dtype = np.dtype(kwargs["dtype"])
            out, buf, mask = make_out(kind, shape, out_dtype)
            kwargs["out"] = out
            valid = (
                valid
                and "out" in kw_names
                and kind in valid_kinds
                and kind != "masked"
                and np.shape(out) == _out_shape(name, kwargs)
            )
            if buf is not None:
                guard = (buf, mask, buf.copy())
            note(f"out kind={kind} shape={shape} dtype={np.dtype(out_dtype)}")
    return kwargs, guard, valid


def _out_shape(name, kwargs):
    """The shape a valid out= must have (None when it cannot be told)."""
    try:
        if name == "sinusoidal_at":
            return (*np.shape(kwargs["positions"]), _index(kwargs["d_model"]))
        return (_index(kwargs["seq_len"]), _index(kwargs["d_model"]))
    except (KeyError, TypeError, ValueError):
        return None


# Calls made only of plausible values must succeed, except where the values do
# not fit together (the messages of those refusals, which must name the problem).
COMBINATION_ERRORS = (
    r"exact angle reduction",  # positions too far for this width and base
    r"cannot be combined with",  # base with a convention's own knob; offset with floats
    r"do(es)? not broadcast to",  # offset/positions against x's batch shape
    r"last axis \(d_model\) must not be empty",
    r"are timm's options",  # 2-D options of another convention
    r"needs an even d_model",  # gptj's pairs
    r"needs (max_position_embeddings|original_max_position_embeddings)",  # a RoPE rule's length
    r"rotary dimension .* must be even",  # head_dim times partial_rotary_factor
    r"rotary dimension of at least 4",  # dynamic's exponent d/(d-2)
    r"give either seq_len|not both|offset applies to seq_len",  # rope_cache's alternatives
    # apply_rope's positions, offsets and head_dim against q's shape
    r"offset applies without positions|positions must have shape|offset must be an int or "
    r"one per batch|shorter than head_dim|more than head_dim",
)


def _run(name, kwargs, guard, valid=False):
    fn, _kw_names, pos_names, oracle, default_dtype = SPECS[name]
    note(f"{name}(**{kwargs!r})")
    call_kwargs = dict(kwargs)
    args = [call_kwargs.pop(p) for p in pos_names]
    before = {k: v.copy() for k, v in kwargs.items() if isinstance(v, np.ndarray)}
    try:
        result = fn(*args, **call_kwargs)
    except ACCEPTED_ERRORS as exc:
        event(f"raised {type(exc).__name__}")
        assert str(exc), "error without a message"
        if valid:
            assert re.search("|".join(COMBINATION_ERRORS), str(exc)), (
                f"a call made of valid arguments raised {exc!r}"
            )
        if guard is not None:  # nothing the caller passed is corrupted on error
            buf, _, snapshot = guard
            assert np.array_equal(buf, snapshot), "out was written although the call failed"
        for k, v in before.items():  # nor any array argument (add_to's x included)
            assert np.array_equal(kwargs[k], v, equal_nan=v.dtype.kind in "fc"), (
                f"{k} was changed although the call failed"
            )
        return
    event("returned" + (" into out=" if kwargs.get("out") is not None else ""))
    if getattr(oracle, "needs_before", False):
        oracle(result, kwargs, default_dtype, before)
    else:
        oracle(result, kwargs, default_dtype)
    if guard is not None:
        buf, mask, before = guard
        assert np.array_equal(buf[~mask], before[~mask]), "write outside out"


hostile = settings(
    max_examples=4 * settings.default.max_examples,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
        HealthCheck.data_too_large,
    ],
)


@hostile
@given(data=st.data())
def test_sinusoidal_hostile(data):
    _run("sinusoidal", *data.draw(calls("sinusoidal")))


@hostile
@given(data=st.data())
def test_reference_hostile(data):
    _run("reference", *data.draw(calls("reference")))


@hostile
@given(data=st.data())
def test_sinusoidal_at_hostile(data):
    _run("sinusoidal_at", *data.draw(calls("sinusoidal_at")))


@hostile
@given(data=st.data())
def test_add_to_hostile(data):
    _run("add_to", *data.draw(calls("add_to")))


@given(data=st.data())
def test_fairseq_positions_hostile(data):
    _run("fairseq_positions", *data.draw(calls("fairseq_positions")))


@hostile
@given(data=st.data())
def test_rope_frequencies_hostile(data):
    _run("rope_frequencies", *data.draw(calls("rope_frequencies")))


@hostile
@given(data=st.data())
def test_apply_rope_hostile(data):
    _run("apply_rope", *data.draw(calls("apply_rope")))


@hostile
@given(data=st.data())
def test_rope_cache_hostile(data):
    _run("rope_cache", *data.draw(calls("rope_cache")))


@given(data=st.data())
def test_sinusoidal_2d_hostile(data):
    _run("sinusoidal_2d", *data.draw(calls("sinusoidal_2d")))


CONVENTION_KNOBS = {
    "name": st.text(max_size=3),
    "base": VALID["base"],
    "position_scale": st.floats(0.01, 100),
    "shift": st.floats(-3, 3),
    "denominator": st.sampled_from(["d/2", "h", "h-1", "max(h-1,1)", "h-shift"]),
    "layout": st.sampled_from(["interleaved", "split", "split_cos_first"]),
    "odd": st.sampled_from(["sin", "zero", "error"]),
    "padding_idx": st.one_of(st.none(), st.integers(-3, 5)),
}


@given(data=st.data())
def test_convention_hostile(data):
    """Convention(**knobs) then a table: each step returns the knobs' table or raises
    ValueError/TypeError (never OverflowError, never a NaN table)."""
    knobs = {}
    for k, valid in CONVENTION_KNOBS.items():
        choice = data.draw(st.sampled_from(["absent", "valid", "valid", "hostile"]))
        if choice != "absent":
            knobs[k] = data.draw(anything() if choice == "hostile" else valid)
    note(f"Convention(**{knobs!r})")
    try:
        conv = Convention(**knobs)
    except ACCEPTED_ERRORS as exc:
        assert str(exc)
        return
    d = data.draw(st.integers(1, 40))
    offset = data.draw(st.integers(-500, 500))
    try:
        P = fastpe.sinusoidal(17, d, offset=offset, convention=conv, dtype=np.float64)
    except ACCEPTED_ERRORS as exc:
        assert str(exc)
        return
    ref, ang = knob_ref(np.arange(offset, offset + 17), d, conv)
    assert np.max(np.abs(P - ref), initial=0) <= _knob_tol(ang, np.float64)


@given(
    args=st.lists(anything(), max_size=2),
    kw=st.dictionaries(st.sampled_from(sorted(VALID)), anything(), max_size=2),
)
def test_get_include_hostile(args, kw):
    if not args and not kw:
        return
    with pytest.raises(TypeError):
        fastpe.get_include(*args, **kw)


@given(
    args=st.lists(anything(), max_size=2),
    kw=st.dictionaries(st.sampled_from(sorted(VALID)), anything(), max_size=2),
)
def test_build_info_hostile(args, kw):
    if not args and not kw:
        return
    with pytest.raises(TypeError):
        fastpe.build_info(*args, **kw)


# ------------------------------------------------------------------ guard bands, explicitly


@pytest.mark.parametrize("kind", ["c", "rows_strided", "sub"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(1, 1), (7, 5), (300, 129), (2000, 64)])
def test_guard_bands_valid_out(kind, dtype, shape):
    out, buf, mask = make_out(kind, shape, dtype)
    before = buf.copy()
    assert fastpe.sinusoidal(*shape, out=out, offset=11, num_threads=2) is out
    assert np.array_equal(buf[~mask], before[~mask])
    np.testing.assert_array_equal(out, fastpe.sinusoidal(*shape, offset=11, dtype=dtype))


@pytest.mark.parametrize(
    "kind",
    [
        "fortran",
        "misaligned",
        "readonly",
        "overlapping",
        "zero_stride",
        "reversed",
        "nonnative",
        "wrong_shape",
        "int32",
        "complex64",
    ],
)
def test_guard_bands_refused_out_untouched(kind):
    out, buf, _mask = make_out(kind, (6, 5), np.float64)
    before = buf.copy()
    with pytest.raises((ValueError, TypeError)):
        fastpe.sinusoidal(6, 5, out=out)
    assert np.array_equal(buf, before)


# ------------------------------------------------------------------ regressions found here


@pytest.mark.parametrize(
    "call, exc, match",
    [
        # these raised OverflowError before (Python int -> float/int64/C int)
        (lambda: fastpe.sinusoidal(3, 4, base=10**400), ValueError, "base"),
        (lambda: fastpe.reference(3, 4, base=10**400), ValueError, "base"),
        (lambda: fastpe.sinusoidal(3, 2**70), ValueError, "d_model"),
        (lambda: fastpe.sinusoidal(0, 2**63), ValueError, "d_model"),
        (lambda: fastpe.reference(3, 2**70), ValueError, "d_model"),
        (lambda: fastpe.reference(3, 4, offset=10**400), ValueError, "offset"),
        (lambda: fastpe.sinusoidal(2**64, 4), ValueError, "seq_len"),
        # silent NaN in the reference: k / base**(2i/d) overflowed
        (lambda: fastpe.reference(3, 1000, base=5e-324), ValueError, "base"),
        # NumPy's "array is too big" before
        (lambda: fastpe.sinusoidal(0, 2**62), ValueError, "table"),
        # whatever np.dtype raises for a malformed spelling (ValueError, SyntaxError, ...)
        # is a TypeError like the rest; record dtypes are refused (NumPy < 1.24 read
        # "f4," as plain float32, so "i4,f4" is the record spelling here)
        (lambda: fastpe.sinusoidal(3, 4, dtype="(2,)f4,,"), TypeError, "dtype"),
        (lambda: fastpe.sinusoidal(3, 4, dtype="i4,f4"), TypeError, "dtype"),
        # a huge position_scale gave a NaN table
        (lambda: Convention(position_scale=1e305), ValueError, "position_scale"),
        (lambda: Convention.tensor2tensor(1e-300, 1e300), ValueError, "max_timescale"),
        # OverflowError from the kernel / float() before
        (
            lambda: fastpe.sinusoidal(3, 8, convention=Convention(padding_idx=2**70)),
            ValueError,
            "padding_idx",
        ),
        (lambda: fastpe.add_to(np.zeros((2, 4)), scale=10**400), ValueError, "scale"),
        (lambda: Convention.diffusers(scale=10**400), ValueError, "scale"),
        # accepted silently before
        (lambda: fastpe.sinusoidal_2d(2, 2, 8, interleave_sin_cos=True), ValueError, "timm"),
        (lambda: fastpe.fairseq_positions(5), ValueError, "tokens"),
    ],
)
def test_regressions(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


@pytest.mark.parametrize("base", [1e300, 2.0**997, 1e305, sys.float_info.max])
@pytest.mark.parametrize("d_model", [2, 9, 64])
def test_any_finite_base_is_accurate(base, d_model):
    # NaN tables above 2**997 once (a split of base overflowed); the log of base now
    # works on its mantissa and exponent, so every finite base is accurate
    P = fastpe.sinusoidal(5, d_model, offset=-2, base=base, dtype=np.float64)
    R = fastpe.reference(5, d_model, offset=-2, base=base)
    np.testing.assert_allclose(P, R, atol=1e-15, rtol=0)
    C = fastpe.sinusoidal(
        5, d_model, offset=-2, convention=Convention(base=base), dtype=np.float64
    )
    np.testing.assert_array_equal(C, P)


@pytest.mark.parametrize("base", [2.2250738585072014e-308, 1e-300, 1e-200, 3e-150])
@pytest.mark.parametrize("d_model", [2, 6, 7])
def test_tiny_base_position_zero_is_exact_not_nan(base, d_model):
    # found by the fuzz target: the double-double log of a tiny base
    # overflowed (exp(-log a) = 1/a in a Veltkamp split), so frequencies were NaN
    # and even position 0 came out NaN for base = 2.2e-308, d_model = 6
    for dtype in (np.float32, np.float64):
        P = fastpe.sinusoidal(1, d_model, base=base, dtype=dtype)
        np.testing.assert_array_equal(P, fastpe.reference(1, d_model, base=base).astype(dtype))


def test_huge_num_threads_is_capped_not_an_error():
    # was OverflowError (Python int -> C int); the kernel caps at the thread limit anyway
    np.testing.assert_array_equal(
        fastpe.sinusoidal(300, 64, num_threads=2**40), fastpe.sinusoidal(300, 64, num_threads=1)
    )


def test_explicit_float32_dtype_must_match_out():
    # np.float32 used to be the default *sentinel*, so passing it explicitly was ignored
    with pytest.raises(TypeError, match="dtype"):
        fastpe.sinusoidal(3, 4, out=np.zeros((3, 4)), dtype=np.float32)


def test_dtype_none_means_the_default():
    assert fastpe.sinusoidal(3, 4, dtype=None).dtype == np.float32
    assert fastpe.sinusoidal(3, 4, dtype=None, out=np.zeros((3, 4))).dtype == np.float64
    assert fastpe.reference(3, 4, dtype=None).dtype == np.float64


def test_empty_reference_with_huge_width_allocates_nothing():
    assert fastpe.reference(0, 2**40).shape == (0, 2**40)


@pytest.mark.parametrize("dtype", [np.int64, np.float64])
def test_unaligned_positions_and_offsets_are_accepted(dtype):
    """Unaligned int64/float64 arrays (np.frombuffer at an odd offset, or what
    Dask's network layer rebuilds from a message frame) export the buffer format
    "=q"/"=d": they are copied to aligned memory, not refused."""

    def unaligned(values):
        buf = np.zeros(values.nbytes + 1, np.uint8)
        a = buf[1:].view(values.dtype).reshape(values.shape)
        a[...] = values
        assert not a.flags.aligned
        return a

    pos = unaligned(np.arange(8, dtype=dtype) * 3)
    x = np.zeros((2, 8, 16), np.float32)
    want = fastpe.sinusoidal_at(np.arange(8) * 3, 16)
    assert np.array_equal(fastpe.add_to(x, positions=pos)[1], want)
    assert np.array_equal(fastpe.sinusoidal_at(pos, 16), want)
    if dtype == np.int64:
        offs = unaligned(np.array([0, 5], dtype=np.int64))
        got = fastpe.add_to(np.zeros((2, 8, 16), np.float32), offset=offs)
        assert np.array_equal(got[1], fastpe.sinusoidal(8, 16, offset=5))


def test_bfloat16_without_ml_dtypes_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "ml_dtypes", None)  # import fails as if not installed
    with pytest.raises(ImportError, match=r"fastpe\[bfloat16\]"):
        fastpe.sinusoidal(3, 4, dtype="bfloat16")
    with pytest.raises(ImportError, match=r"fastpe\[bfloat16\]"):
        fastpe.rope_cache(8, seq_len=3, dtype="bfloat16")


@pytest.mark.parametrize("dtype", [np.longdouble, np.complex64, np.int16, np.uint16, np.int64])
def test_unsupported_dtypes_named_and_nothing_written(dtype):
    # NumPy names a 64-bit long double (Windows) "float64"; the refusal names it
    # longdouble, so that it does not seem to refuse float64.
    named = "longdouble" if np.dtype(dtype).char == "g" else str(np.dtype(dtype))
    with pytest.raises(TypeError, match=rf"float16, bfloat16, float32 or float64 .*got {named}"):
        fastpe.sinusoidal(3, 4, dtype=dtype)
    x = np.ones((2, 3, 4), dtype)
    with pytest.raises(TypeError, match=rf"float16, bfloat16, float32 or float64 .*got {named}"):
        fastpe.add_to(x)
    assert (x == 1).all()
    q = np.ones((2, 8), dtype)
    with pytest.raises(TypeError, match=rf"^q must have dtype .*got {named}"):
        fastpe.apply_rope(q, q.copy(), positions=[0, 1])
    assert (q == 1).all()


# ------------------------------------------------- aliasing among the arguments
#
# Every function with more than one array argument, its arrays carved at random
# places out of ONE byte buffer (overlapping, interleaved or apart), then filled
# in a random order (so an input may hold another's bytes): the call must give
# exactly what the same call gives on separate copies, or refuse -- and refuse
# only when two of its outputs share an element, leaving the buffer untouched.

# name -> (arrays: [(argument, role, dtype kind)], fixed keyword arguments)
ALIASED = {
    "apply_rope": "q k positions offset inv_freq",
    "rope_cache": "cos sin positions inv_freq",
    "add_to": "x positions offset",
    "sinusoidal_at": "positions out",
}
OUTPUTS = {"q", "k", "cos", "sin", "x", "out"}


@st.composite
def aliased_call(draw, name):
    """(arguments builder, the carved arrays by name, the byte buffer)."""
    names = ALIASED[name].split()
    fdt = np.dtype(draw(st.sampled_from([np.float32, np.float64])))
    B, S, H, D = draw(st.integers(1, 2)), draw(st.integers(1, 4)), draw(st.integers(1, 2)), 8
    shapes = {
        "q": ((B, H, S, D), fdt),
        "k": ((B, draw(st.integers(1, 2)), S, D), fdt),
        "cos": ((S, D), fdt),
        "sin": ((S, D), fdt),
        "x": ((B, S, D), fdt),
        "out": ((S, D), fdt),
        "inv_freq": ((D // 2,), np.dtype(np.float64)),
        "offset": ((B,), np.dtype(np.int64)),
    }
    if name == "sinusoidal_at":
        shapes["positions"] = ((S,), np.dtype(draw(st.sampled_from([np.int64, np.float64]))))
    elif name == "rope_cache":
        shapes["positions"] = ((S,), np.dtype(np.int64))
    else:
        shapes["positions"] = (draw(st.sampled_from([(S,), (B, S)])), np.dtype(np.int64))
    # which of the optional ones take part (positions and offset exclude each other)
    used = [n for n in names if n in OUTPUTS and n not in ("k",)]
    if "k" in names and draw(st.booleans()):
        used.append("k")
    where = draw(
        st.sampled_from(["positions", "offset", None] if "offset" in names else ["positions"])
    )
    if where is not None:
        used.append(where)
    if "inv_freq" in names and draw(st.booleans()):
        used.append("inv_freq")
    nbytes = 4096
    raw = np.zeros(nbytes + 64, np.uint8)
    buf = raw[-raw.ctypes.data % 64 :][:nbytes]
    arrays = {}
    pair = draw(st.booleans())  # outputs as interleaved slots of one block (fused QKV)
    slot0 = draw(st.integers(0, 64)) * 8
    for n in used:
        shape, dt = shapes[n]
        isz = dt.itemsize
        cstrides = [isz] * len(shape)
        for j in range(len(shape) - 2, -1, -1):
            cstrides[j] = cstrides[j + 1] * shape[j + 1]
        if pair and n in OUTPUTS and len(shape) > 1:
            # every output row in its own slot: the outputs interleave, sharing nothing
            nout = sum(1 for m in used if m in OUTPUTS)
            row = shape[-1] * isz
            strides = [s * nout for s in cstrides[:-1]] + [isz]
            start = slot0 + [m for m in used if m in OUTPUTS].index(n) * row
        else:
            mult = [draw(st.sampled_from([1, 1, 2])) for _ in shape[:-1]] + [1]
            if n == "x":  # (add_to takes rows at one stride: a column slice of a matrix)
                mult[:-2] = [1] * (len(shape) - 2)
            strides = [s * m for s, m in zip(cstrides, mult, strict=True)]
            for j in range(len(shape) - 2, -1, -1):  # (no row may overlap its neighbour)
                strides[j] = max(strides[j], strides[j + 1] * shape[j + 1])
                if n == "x" and j < len(shape) - 2:
                    strides[j] = strides[j + 1] * shape[j + 1]
            start = draw(st.integers(0, 96)) * isz
        end = start + sum((m - 1) * s for m, s in zip(shape, strides, strict=True)) + isz
        assume(end <= nbytes)
        arrays[n] = np.ndarray(shape, dt, buffer=buf, offset=start, strides=strides)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    for n in draw(st.permutations(list(arrays))):  # later writes win where they overlap
        a = arrays[n]
        if a.dtype.kind == "i":
            a[...] = rng.integers(0, 60, a.shape)
        elif n == "inv_freq":
            a[...] = rng.uniform(0, 2, a.shape)
        elif n == "positions":
            a[...] = rng.uniform(0, 60, a.shape)
        else:
            a[...] = rng.uniform(-2, 2, a.shape)
    note(
        f"{name}: "
        + ", ".join(
            f"{n} {a.shape} {a.dtype} at {a.ctypes.data - buf.ctypes.data} strides {a.strides}"
            for n, a in arrays.items()
        )
    )
    return arrays, buf


def _aliased_args(name, a):
    """(positional args, keyword args) of the call, from the arrays ``a``."""
    kw = {n: a[n] for n in ("positions", "offset", "inv_freq") if n in a}
    if name == "apply_rope":
        return (a["q"], a.get("k")), kw
    if name == "rope_cache":
        seq = {} if "positions" in a else {"seq_len": a["cos"].shape[0]}
        return (8,), {**kw, **seq, "out": (a["cos"], a["sin"])}
    if name == "add_to":
        return (a["x"],), kw
    return (a["positions"], 8), {"out": a["out"]}


def _outcome(fn, args, kw):
    try:
        fn(*args, **kw)
    except ACCEPTED_ERRORS as exc:
        return exc
    return None


@pytest.mark.parametrize("name", sorted(ALIASED))
@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_aliased_arguments_act_as_copies_or_are_refused(name, data):
    arrays, buf = data.draw(aliased_call(name))
    fn = getattr(fastpe, name)
    copies = {n: a.copy() for n, a in arrays.items()}
    want = _outcome(fn, *_aliased_args(name, copies))
    before = buf.copy()
    got = _outcome(fn, *_aliased_args(name, arrays))
    outs = [arrays[n] for n in arrays if n in OUTPUTS]
    clash = any(np.shares_memory(a, b) for i, a in enumerate(outs) for b in outs[i + 1 :])
    note(f"on copies: {want!r}; aliased: {got!r}; outputs share memory: {clash}")
    if got is not None:
        assert want is not None or clash, f"a legal call was refused: {got!r}"
        np.testing.assert_array_equal(buf, before)  # nothing written on refusal
        return
    assert want is None, f"on copies {want!r}, yet the aliased call returned"
    for n in arrays:
        if n in OUTPUTS:
            assert arrays[n].tobytes() == copies[n].tobytes(), f"{n} differs from the copies' call"


# ------------------------------------------------------------- cold == warm
#
# The small-call paths serve arguments whose frequencies or encoding were seen
# before: each call must give the same result, or the same error type, in a cold
# state (nothing remembered, as in a new process) as after the same frequencies
# were planned.

FAST_PATHED = ["sinusoidal", "sinusoidal_at", "add_to", "apply_rope", "rope_cache"]


def _clone(v):
    """A copy of an argument with the same kind, strides and flags, in new memory."""
    if isinstance(v, memoryview):
        return memoryview(np.array(v))
    if isinstance(v, np.ma.MaskedArray) or not isinstance(v, np.ndarray):
        return copy.deepcopy(v)
    root = v
    while isinstance(root.base, np.ndarray):
        root = root.base
    if root is v or not root.flags.c_contiguous:
        c = v.copy()
    else:
        new_root = root.copy()
        c = np.ndarray(
            v.shape,
            v.dtype,
            buffer=new_root,
            offset=v.ctypes.data - root.ctypes.data,
            strides=v.strides,
        )
    if type(v) is not np.ndarray:
        c = c.view(type(v))
    c.flags.writeable = v.flags.writeable
    return c


def _prime(name, kw):
    """Calls that remember the frequencies or encoding of ``kw`` (errors ignored)."""
    rule = {
        k: kw[k]
        for k in (
            "rope_parameters",
            "max_position_embeddings",
            "precision",
            "inv_freq",
            "head_dim",
        )
        if k in kw
    }
    table = {k: kw[k] for k in ("base", "layout", "convention") if k in kw}

    def last(a):
        return int(np.shape(a)[-1])

    tries = []
    if name == "apply_rope":
        tries.append(lambda: fastpe.apply_rope(np.zeros((1, 1, 1, last(kw["q"]))), **rule))
        tries.append(lambda: fastpe.apply_rope(np.zeros((1, 1, 1, kw["head_dim"])), **rule))
    elif name == "rope_cache":
        tries.append(lambda: fastpe.rope_cache(seq_len=1, **{"head_dim": 8, **rule}))
    elif name == "add_to":
        tries.append(lambda: fastpe.sinusoidal(1, last(kw["x"]), **table))
    else:
        tries.append(lambda: fastpe.sinusoidal(1, kw["d_model"], **table))
    for t in tries:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                t()
        except Exception:  # (priming only: the calls compared are checked)
            pass


# Values that a type test written for speed (an int, a str, an ndarray, "not None")
# may take for another argument's: the small-call paths must treat them as the
# general path does.
CONFUSABLE = [
    None,
    True,
    2.0,
    np.int64(2),
    np.float64(2.0),
    np.array(2),
    np.array([2]),
    [2],
    (2,),
    "2",
    "half",
    {},
]


@st.composite
def confusable_call(draw, name):
    """A valid call, one of its arguments (or one it does not pass) made CONFUSABLE."""
    kwargs, guard, _valid = draw(calls(name, n_hostile=0))
    _fn, kw_names, pos_names, _, _ = SPECS[name]
    arg = draw(st.sampled_from(pos_names + kw_names))
    kwargs[arg] = draw(st.sampled_from(CONFUSABLE))
    return kwargs, guard, False


def _signature_of(name, kwargs):
    """What a call did: its error type, or its result and every array argument after it."""
    fn, _kw, pos_names, _, _ = SPECS[name]
    kw = {k: _clone(v) for k, v in kwargs.items()}
    args = [kw.pop(p) for p in pos_names]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = fn(*args, **kw)
    except ACCEPTED_ERRORS as exc:
        return type(exc).__name__

    def bits(v):
        if isinstance(v, (memoryview, bytearray)):
            v = np.array(v)
        if isinstance(v, np.ndarray):
            return (v.dtype.str, v.shape, np.ascontiguousarray(v).tobytes())
        if isinstance(v, (tuple, list)):
            return tuple(bits(x) for x in v)
        return repr(v)

    return bits(result), bits([*args, *kw.values()])


@pytest.mark.parametrize("name", FAST_PATHED)
@hostile
@given(data=st.data())
def test_cold_and_warm_calls_agree(name, data):
    kwargs, _guard, _valid = data.draw(st.one_of(calls(name), confusable_call(name)))
    kernel.encoders.clear()
    kernel.rope_args.clear()
    cold = _signature_of(name, kwargs)
    _prime(name, kwargs)
    _signature_of(name, kwargs)  # (a call that succeeds remembers its own plan)
    warm = _signature_of(name, kwargs)
    assert cold == warm, f"cold {cold if isinstance(cold, str) else 'returned'}, warm " + (
        warm if isinstance(warm, str) else "returned"
    )


# Each argument of a call that the small-call path takes, replaced in turn by each
# CONFUSABLE value: exhaustive, as one overlooked pair is one silent divergence.
FAST_BASES = {
    "sinusoidal": lambda: {"seq_len": 4, "d_model": 8},
    "sinusoidal_at": lambda: {"positions": np.arange(3), "d_model": 8},
    "add_to": lambda: {"x": np.zeros((2, 3, 8), np.float32)},
    "apply_rope": lambda: {
        "q": np.ones((1, 2, 3, 8), np.float32),
        "k": np.ones((1, 2, 3, 8), np.float32),
    },
    "rope_cache": lambda: {"head_dim": 8, "seq_len": 4},
}


@pytest.mark.parametrize("name", FAST_PATHED)
def test_cold_and_warm_calls_agree_for_every_confusable_argument(name):
    _fn, kw_names, pos_names, _, _ = SPECS[name]
    for arg in pos_names + kw_names:
        for value in CONFUSABLE:
            kwargs = {**FAST_BASES[name](), arg: value}
            kernel.encoders.clear()
            kernel.rope_args.clear()
            cold = _signature_of(name, kwargs)
            _prime(name, FAST_BASES[name]())
            _signature_of(name, FAST_BASES[name]())
            warm = _signature_of(name, kwargs)
            assert cold == warm, f"{name}({arg}={value!r}): cold {cold!r:.60}, warm {warm!r:.60}"
