"""C API 1.1 (fused add, explicit positions), called through the capsule's
function table with ctypes -- exactly the pointers a C extension gets from
import_fastpe() -- and compared with the Python API, which is tested against
mpmath and the NumPy reference elsewhere."""

import ctypes

import numpy as np
import pytest

import fastpe
from fastpe import kernel

C = kernel._C_CONSTANTS
i64, dbl, cint, vp = ctypes.c_int64, ctypes.c_double, ctypes.c_int, ctypes.c_void_p
FILL = ctypes.CFUNCTYPE(cint, vp, i64, i64, i64, dbl, i64, cint, cint)
ADD = ctypes.CFUNCTYPE(cint, vp, i64, i64, i64, i64, dbl, i64, dbl, cint, cint)
FILLPOS = ctypes.CFUNCTYPE(cint, vp, i64, i64, i64, vp, dbl, cint, cint)
ADDPOS = ctypes.CFUNCTYPE(cint, vp, i64, i64, i64, vp, dbl, dbl, cint, cint)


class Table(ctypes.Structure):
    _fields_ = [
        ("abi_major", ctypes.c_uint32),
        ("abi_minor", ctypes.c_uint32),
        ("size", ctypes.c_size_t),
        ("fill_f32", FILL),
        ("fill_f64", FILL),
        ("add_f32", ADD),
        ("add_f64", ADD),
        ("fill_positions_f32", FILLPOS),
        ("fill_positions_f64", FILLPOS),
        ("add_positions_f32", ADDPOS),
        ("add_positions_f64", ADDPOS),
    ]


@pytest.fixture(scope="module")
def table():
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    t = Table.from_address(get(kernel._C_API, b"fastpe.kernel._C_API"))
    assert (t.abi_major, t.abi_minor) == kernel.C_API_VERSION >= (1, 1)
    assert t.size >= ctypes.sizeof(Table)  # later minors append entries
    return t


SUFFIX = {np.float32: "f32", np.float64: "f64"}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("layout", [0, 1])
def test_add_matches_python_add_to(table, dtype, layout):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 37, 20)).astype(dtype)
    expected = fastpe.add_to(
        x.copy(), offset=11, scale=0.5, layout=["interleaved", "split"][layout]
    )
    fn = getattr(table, "add_" + SUFFIX[dtype])
    assert fn(x.ctypes.data, 3, 37, 20, 20, 10000.0, 11, 0.5, layout, 2) == C["FASTPE_OK"]
    np.testing.assert_array_equal(x, expected)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fill_positions_matches_sinusoidal_at(table, dtype):
    pos = np.array([0.0, 5.0, 2.5, 1e6, -3.0, 0.125])
    out = np.full((6, 9), np.nan, dtype)
    fn = getattr(table, "fill_positions_" + SUFFIX[dtype])
    assert fn(out.ctypes.data, 6, 9, 9, pos.ctypes.data, 10000.0, 0, 0) == C["FASTPE_OK"]
    np.testing.assert_array_equal(out, fastpe.sinusoidal_at(pos, 9, dtype=dtype))
    # integer-valued positions give exactly the rows of the plain table
    np.testing.assert_array_equal(out[1], fastpe.sinusoidal(6, 9, dtype=dtype)[5])


def test_add_positions_in_a_column_window(table):
    wide = np.ones((4, 30))
    pos = np.array([3.0, 1.5, 0.0, 7.0])
    before = wide.copy()
    assert (
        table.add_positions_f64(
            wide[:, 5:].ctypes.data, 4, 16, 30, pos.ctypes.data, 100.0, 2.0, 1, 1
        )
        == C["FASTPE_OK"]
    )
    pe = fastpe.sinusoidal_at(pos, 16, base=100.0, layout="split", dtype=np.float64)
    np.testing.assert_array_equal(wide[:, 5:21], 2.0 + pe)
    np.testing.assert_array_equal(wide[:, :5], before[:, :5])
    np.testing.assert_array_equal(wide[:, 21:], before[:, 21:])


def test_bad_arguments_return_codes_and_touch_nothing(table):
    x = np.ones((2, 8))
    pos = np.array([1.0, np.nan])
    ok_pos = np.array([1.0, 2.0])
    cases = [
        (table.add_f64, (None, 1, 2, 8, 8, 10000.0, 0, 1.0, 0, 0), "FASTPE_ENULL"),
        (table.add_f64, (x.ctypes.data, -1, 2, 8, 8, 10000.0, 0, 1.0, 0, 0), "FASTPE_ESIZE"),
        (table.add_f64, (x.ctypes.data, 2, 1, 8, 4, 10000.0, 0, 1.0, 0, 0), "FASTPE_ESTRIDE"),
        (table.add_f64, (x.ctypes.data, 1, 2, 8, 8, float("nan"), 0, 1.0, 0, 0), "FASTPE_EBASE"),
        (
            table.add_f64,
            (x.ctypes.data, 1, 2, 8, 8, 10000.0, 0, float("inf"), 0, 0),
            "FASTPE_ESCALE",
        ),
        (table.add_f64, (x.ctypes.data, 1, 2, 8, 8, 10000.0, 0, 1.0, 9, 0), "FASTPE_ELAYOUT"),
        (table.add_f64, (x.ctypes.data, 1, 2, 8, 8, 10000.0, 2**62, 1.0, 0, 0), "FASTPE_ERANGE"),
        (
            table.add_positions_f64,
            (x.ctypes.data, 2, 8, 8, pos.ctypes.data, 10000.0, 1.0, 0, 0),
            "FASTPE_ERANGE",
        ),
        (
            table.add_positions_f64,
            (x.ctypes.data, 2, 8, 8, None, 10000.0, 1.0, 0, 0),
            "FASTPE_ENULL",
        ),
        (
            table.fill_positions_f64,
            (x.ctypes.data, 2, 8, 8, ok_pos.ctypes.data, 0.0, 0, 0),
            "FASTPE_EBASE",
        ),
        (
            table.fill_positions_f64,
            (x.ctypes.data, 2, 2**41, 2**41, ok_pos.ctypes.data, 10000.0, 0, 0),
            "FASTPE_ESIZE",
        ),
        # positions inside the rows to be written
        (
            table.fill_positions_f64,
            (x.ctypes.data, 2, 8, 8, x.ctypes.data + 8 * 8, 10000.0, 0, 0),
            "FASTPE_EOVERLAP",
        ),
        (
            table.add_positions_f64,
            (x.ctypes.data, 2, 8, 8, x.ctypes.data + 14 * 8, 10000.0, 1.0, 0, 0),
            "FASTPE_EOVERLAP",
        ),
    ]
    for fn, args, code in cases:
        assert fn(*args) == C[code], (fn, args, code)
        np.testing.assert_array_equal(x, 1.0)
