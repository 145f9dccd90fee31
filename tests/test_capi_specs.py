"""C API 1.2: compiled specs (every convention from C) and the C API's plan cache,
called through the capsule's table with ctypes -- the pointers a C extension gets
from import_fastpe() -- and compared bitwise with the Python API."""

import ctypes
import threading
from typing import ClassVar

import numpy as np
import pytest
import test_capi_add_positions as capi_add

import fastpe
from fastpe import kernel

C = kernel._C_CONSTANTS
i64, dbl, cint, vp, cp = (
    ctypes.c_int64,
    ctypes.c_double,
    ctypes.c_int,
    ctypes.c_void_p,
    ctypes.c_char_p,
)
# the constructors need the GIL and set Python exceptions: PYFUNCTYPE keeps the GIL
# and raises them; the fills are GIL-free: CFUNCTYPE releases it
SPEC_NEW = ctypes.PYFUNCTYPE(vp, ctypes.py_object, i64)
SPEC_KNOBS = ctypes.PYFUNCTYPE(vp, i64, dbl, cp, dbl, dbl, cp, cp, cint, i64)
SPEC_FREE = ctypes.CFUNCTYPE(None, vp)
SPEC_D = ctypes.CFUNCTYPE(i64, vp)
SPEC_FILL = ctypes.CFUNCTYPE(cint, vp, vp, i64, i64, i64, cint)
SPEC_FILLPOS = ctypes.CFUNCTYPE(cint, vp, vp, i64, i64, vp, cint)
SPEC_ADD = ctypes.CFUNCTYPE(cint, vp, vp, i64, i64, i64, i64, dbl, cint)


class Table(capi_add.Table):
    """fastpe_api_t up to ABI 1.2: the 1.1 table and the compiled-spec entries."""

    _fields_: ClassVar = [
        ("spec_new", SPEC_NEW),
        ("spec_from_knobs", SPEC_KNOBS),
        ("spec_free", SPEC_FREE),
        ("spec_d_model", SPEC_D),
        ("spec_fill_f32", SPEC_FILL),
        ("spec_fill_f64", SPEC_FILL),
        ("spec_fill_positions_f32", SPEC_FILLPOS),
        ("spec_fill_positions_f64", SPEC_FILLPOS),
        ("spec_add_f32", SPEC_ADD),
        ("spec_add_f64", SPEC_ADD),
    ]


@pytest.fixture(scope="module")
def t():
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    table = Table.from_address(get(kernel._C_API, b"fastpe.kernel._C_API"))
    assert (table.abi_major, table.abi_minor) == kernel.C_API_VERSION >= (1, 2)
    assert table.size >= ctypes.sizeof(Table)
    return table


@pytest.fixture
def spec(t):
    made = []

    def make(convention, d_model):
        h = t.spec_new(convention, d_model)
        made.append(h)
        return h

    yield make
    for h in made:
        t.spec_free(h)


def fill(t, dtype):
    return t.spec_fill_f32 if dtype == np.float32 else t.spec_fill_f64


CONVENTIONS = [
    "vaswani",
    "tensor2tensor",
    "fairseq",
    "diffusers",
    "gptj",
    fastpe.Convention.diffusers(flip_sin_to_cos=True, downscale_freq_shift=0.0),
    fastpe.Convention(base=500.0, layout="split", odd="zero"),
]


@pytest.mark.parametrize("convention", CONVENTIONS, ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("d_model, seq_len, offset", [(64, 300, -7), (33, 20, 5), (512, 1, 1000)])
def test_spec_fill_equals_python(t, spec, convention, dtype, d_model, seq_len, offset):
    if convention == "gptj" and d_model % 2:
        pytest.skip("gptj tables have an even width")
    h = spec(convention, d_model)
    assert t.spec_d_model(h) == d_model
    wide = np.full((seq_len, d_model + 5), 3.0, dtype)
    assert fill(t, dtype)(h, wide[:, 2:].ctypes.data, seq_len, d_model + 5, offset, 0) == 0
    want = fastpe.sinusoidal(seq_len, d_model, offset=offset, dtype=dtype, convention=convention)
    np.testing.assert_array_equal(wide[:, 2 : 2 + d_model], want)
    assert (wide[:, :2] == 3).all() and (wide[:, 2 + d_model :] == 3).all()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_spec_positions_and_add_equal_python(t, spec, dtype):
    h = spec("fairseq", 40)  # includes the zero row at padding_idx = 1
    pos = np.array([0.0, 1.0, 2.5, 999.0, -3.0])
    out = np.zeros((5, 40), dtype)
    fp = t.spec_fill_positions_f32 if dtype == np.float32 else t.spec_fill_positions_f64
    assert fp(h, out.ctypes.data, 5, 40, pos.ctypes.data, 1) == 0
    np.testing.assert_array_equal(
        out, fastpe.sinusoidal_at(pos, 40, dtype=dtype, convention="fairseq")
    )
    x0 = np.linspace(-1, 1, 3 * 7 * 40).reshape(3, 7, 40).astype(dtype)
    x = x0.copy()
    add = t.spec_add_f32 if dtype == np.float32 else t.spec_add_f64
    assert add(h, x.ctypes.data, 3, 7, 40, 11, 0.5, 0) == 0
    y = x0.copy()
    fastpe.add_to(y, offset=11, scale=0.5, convention="fairseq")
    np.testing.assert_array_equal(x, y)


def test_spec_from_knobs_equals_the_convention(t):
    h = t.spec_from_knobs(48, 321.0, b"h-shift", 0.5, 2.0, b"split_cos_first", b"zero", 1, 4)
    try:
        out = np.zeros((9, 48))
        assert t.spec_fill_f64(h, out.ctypes.data, 9, 48, 0, 1) == 0
        conv = fastpe.Convention(
            base=321.0,
            denominator="h-shift",
            shift=0.5,
            position_scale=2.0,
            layout="split_cos_first",
            odd="zero",
            padding_idx=4,
        )
        np.testing.assert_array_equal(
            out, fastpe.sinusoidal(9, 48, dtype=np.float64, convention=conv)
        )
        assert not out[4].any()
    finally:
        t.spec_free(h)


@pytest.mark.parametrize(
    "args, exc, match",
    [
        (("nope", 8), ValueError, "convention"),
        (("vaswani", 0), ValueError, "d_model"),
        ((3.5, 8), TypeError, "convention"),
        (("gptj", 7), ValueError, "even"),
        ((fastpe.Convention(base=5e-324), 64), ValueError, "base"),
    ],
)
def test_spec_new_errors_are_the_python_ones(t, args, exc, match):
    with pytest.raises(exc, match=match):
        t.spec_new(*args)


def test_spec_from_knobs_errors(t):
    with pytest.raises(ValueError, match="layout"):
        t.spec_from_knobs(8, 1e4, b"d/2", 0.0, 1.0, b"diagonal", b"sin", 0, 0)
    with pytest.raises(TypeError, match="NULL"):
        t.spec_from_knobs(8, 1e4, None, 0.0, 1.0, b"split", b"sin", 0, 0)


def test_spec_fill_codes_touch_nothing(t, spec):
    h = spec("vaswani", 8)
    x = np.ones((2, 8))
    pos = np.array([1.0, np.nan])
    cases = [
        (t.spec_fill_f64, (None, x.ctypes.data, 2, 8, 0, 0), "FASTPE_ENULL"),
        (t.spec_fill_f64, (h, None, 2, 8, 0, 0), "FASTPE_ENULL"),
        (t.spec_fill_f64, (h, x.ctypes.data, -1, 8, 0, 0), "FASTPE_ESIZE"),
        (t.spec_fill_f64, (h, x.ctypes.data, 2, 4, 0, 0), "FASTPE_ESTRIDE"),
        (t.spec_fill_f64, (h, x.ctypes.data, 2, 8, 2**62, 0), "FASTPE_ERANGE"),
        (t.spec_add_f64, (h, x.ctypes.data, 1, 2, 8, 0, float("nan"), 0), "FASTPE_ESCALE"),
        (t.spec_add_f64, (h, x.ctypes.data, -1, 2, 8, 0, 1.0, 0), "FASTPE_ESIZE"),
        (t.spec_fill_positions_f64, (h, x.ctypes.data, 2, 8, pos.ctypes.data, 0), "FASTPE_ERANGE"),
        (
            t.spec_fill_positions_f64,
            (h, x.ctypes.data, 2, 8, x.ctypes.data + 64, 0),
            "FASTPE_EOVERLAP",
        ),
    ]
    for fn, args, code in cases:
        assert fn(*args) == C[code], (args, code)
        np.testing.assert_array_equal(x, 1.0)
    assert t.spec_d_model(None) == -1


def test_c_plan_cache_is_bounded_and_shared(t, spec):
    out = np.zeros((4, 700))
    _, old = kernel._c_plans(clear=True, max_entries=8)  # (the library's one cache)
    try:
        for d in range(600, 620):  # more widths than the cache holds
            assert t.fill_f64(out.ctypes.data, 4, d, 700, 1e4, 0, 0, 1) == 0
        cached = kernel._c_plan_cache()
        assert 0 < len(cached) <= 8
        assert kernel._c_plans()[0] <= 8
    finally:
        kernel._c_plans(max_entries=old)
    assert all(refs == 0 for *_, refs in cached)  # every fill released its plan
    # a spec of the same frequencies uses the same plan as the plain fill
    h = spec("vaswani", 256)
    t.fill_f64(out.ctypes.data, 1, 256, 700, 1e4, 0, 0, 1)
    before = len(kernel._c_plan_cache())
    t.spec_fill_f64(h, out.ctypes.data, 1, 700, 5, 1)
    assert len(kernel._c_plan_cache()) == before


def test_many_threads_share_the_cache(t, spec):
    """Concurrent C calls over more widths than the cache holds: each result is
    bitwise the single-threaded one (entries are never freed while in use)."""
    widths = list(range(100, 132))
    want = {d: fastpe.sinusoidal(20, d, offset=50, dtype=np.float64) for d in widths}
    specs = {d: spec("tensor2tensor" if d % 2 else "vaswani", d) for d in widths}
    want_t2t = {
        d: fastpe.sinusoidal(20, d, offset=50, dtype=np.float64, convention="tensor2tensor")
        for d in widths
        if d % 2
    }
    errors = []

    def work(seed):
        rng = np.random.default_rng(seed)
        for d in rng.permutation(widths * 3):
            d = int(d)
            out = np.empty((20, d))
            if t.spec_fill_f64(specs[d], out.ctypes.data, 20, d, 50, 1) != 0:
                errors.append(("code", d))
            elif not np.array_equal(out, want_t2t[d] if d % 2 else want[d]):
                errors.append(("bits", d))

    threads = [threading.Thread(target=work, args=(s,)) for s in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors[:5]
    assert all(refs == 0 for *_, refs in kernel._c_plan_cache())
