"""out= with non-NumPy containers: filled in their own memory, never through a copy."""

import array
import ctypes

import numpy as np
import pytest

import fastpe


def _truth(seq_len, d_model, dtype, **kw):
    return fastpe.sinusoidal(seq_len, d_model, dtype=dtype, **kw)


@pytest.mark.parametrize("typecode, dtype", [("f", np.float32), ("d", np.float64)])
def test_memoryview_of_array_array_is_filled_in_place(typecode, dtype):
    backing = array.array(typecode, [7.0] * (9 * 6))
    out = memoryview(backing).cast("B").cast(typecode, (9, 6))
    res = fastpe.sinusoidal(9, 6, offset=11, out=out)
    assert res is out
    # read the backing store, not `out`: the values must live in the caller's memory
    got = np.frombuffer(backing, dtype=dtype).reshape(9, 6)
    np.testing.assert_array_equal(got, _truth(9, 6, dtype, offset=11))


def test_bytearray_backed_buffer_is_filled_in_place():
    raw = bytearray(np.full((10, 16), -1.0, np.float32).tobytes())
    fastpe.sinusoidal(10, 16, out=memoryview(raw).cast("f", (10, 16)))
    full = np.frombuffer(raw, np.float32).reshape(10, 16)
    np.testing.assert_array_equal(full, _truth(10, 16, np.float32))


def test_array_interface_object_is_filled_in_place():
    backing = np.zeros((5, 8), np.float64)

    class Holder:  # exposes memory only through __array_interface__
        __array_interface__ = backing.__array_interface__

    h = Holder()
    assert fastpe.sinusoidal(5, 8, out=h, layout="split") is h
    np.testing.assert_array_equal(backing, _truth(5, 8, np.float64, layout="split"))


def test_ctypes_array_is_filled_in_place():
    buf = (ctypes.c_double * 4 * 3)()  # 3 rows of 4, buffer protocol with shape
    fastpe.sinusoidal(3, 4, out=buf)
    np.testing.assert_array_equal(np.ctypeslib.as_array(buf), _truth(3, 4, np.float64))


@pytest.mark.parametrize(
    "make, exc, match",
    [
        # read-only buffers
        (lambda: memoryview(bytes(4 * 4 * 4)).cast("f", (4, 4)), ValueError, "writable"),
        # wrong shape / dtype seen through the buffer
        (lambda: array.array("f", [0.0] * 16), ValueError, "shape"),
        (
            lambda: memoryview(array.array("i", [0] * 16)).cast("B").cast("i", (4, 4)),
            TypeError,
            "dtype",
        ),
        (lambda: bytearray(64), ValueError, "shape"),
        # only __array__: cannot be verified to alias, so it is refused
        (
            lambda: type(
                "A", (), {"__array__": lambda self, *a, **k: np.zeros((4, 4), np.float32)}
            )(),
            TypeError,
            "without a copy",
        ),
        (lambda: (1.0, 2.0), TypeError, "ndarray"),
    ],
)
def test_non_numpy_out_refused(make, exc, match):
    out = make()
    with pytest.raises(exc, match=match):
        fastpe.sinusoidal(4, 4, out=out)


def test_refused_buffer_is_untouched_and_released():
    raw = bytearray(b"\x01" * (4 * 5 * 4))
    with pytest.raises(ValueError, match="shape"):
        fastpe.sinusoidal(4, 4, out=memoryview(raw).cast("f", (4, 5)))
    assert raw == bytearray(b"\x01" * 80)
    raw.extend(b"x")  # raises BufferError if fastpe still held an export of it


# ---------------------------------------------------------------- DLPack without torch


class _DLPackOnly:
    """Exposes an ndarray's memory through DLPack only."""

    def __init__(self, a, legacy=False):
        self._a, self._legacy = a, legacy

    def __dlpack__(self, **kwargs):
        if self._legacy:  # an old producer: ignores max_version, unversioned capsule
            return self._a.__dlpack__()
        return self._a.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


def _numpy_imports_writable_dlpack():
    # NumPy < 2.2.5 imports every DLPack tensor read-only (numpy/numpy#28599)
    return np.from_dlpack(np.zeros(1)).flags.writeable


def test_dlpack_producer_is_filled_in_place():
    backing = np.zeros((6, 10), np.float32)
    prod = _DLPackOnly(backing)
    if not _numpy_imports_writable_dlpack():
        with pytest.raises(ValueError, match="read-only once viewed through DLPack"):
            fastpe.sinusoidal(6, 10, out=prod)
        return
    assert fastpe.sinusoidal(6, 10, out=prod) is prod
    np.testing.assert_array_equal(backing, _truth(6, 10, np.float32))


def test_legacy_dlpack_producer_is_refused_as_read_only():
    backing = np.zeros((6, 10), np.float32)
    with pytest.raises(ValueError, match=r"read-only once viewed through DLPack.*legacy"):
        fastpe.sinusoidal(6, 10, out=_DLPackOnly(backing, legacy=True))
    assert not backing.any()


# ---------------------------------------------------------------- PyTorch (optional)


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_torch_cpu_tensor_is_filled_in_its_own_memory(torch, dt):
    t = torch.full((33, 20), float("nan"), dtype=getattr(torch, dt))
    ptr = t.data_ptr()
    res = fastpe.sinusoidal(33, 20, offset=5, out=t)
    assert res is t and t.data_ptr() == ptr
    np.testing.assert_array_equal(t.numpy(), _truth(33, 20, dt, offset=5))


def test_torch_column_window_of_a_wider_tensor(torch):
    emb = torch.zeros(16, 64)
    fastpe.sinusoidal(16, 32, out=emb[:, 16:48])
    np.testing.assert_array_equal(emb[:, 16:48].numpy(), _truth(16, 32, np.float32))
    assert not emb[:, :16].any() and not emb[:, 48:].any()


@pytest.mark.parametrize(
    "make, exc, match",
    [
        (lambda torch: torch.zeros(4, 4, requires_grad=True), TypeError, "DLPack"),
        (lambda torch: torch.zeros(4, 4).T.contiguous().T, ValueError, "contiguous"),
        (lambda torch: torch.zeros(4, 4, dtype=torch.int32), TypeError, "dtype"),
        (lambda torch: torch.zeros(4).expand(4, 4), ValueError, "overlap"),
    ],
)
def test_torch_bad_tensors_refused(torch, make, exc, match):
    t = make(torch)
    with pytest.raises(exc, match=match):
        fastpe.sinusoidal(4, 4, out=t)


def test_ndarray_with_explicit_native_byte_order():
    """NumPy keeps "<f8" (not "=f8") for arrays made from PEP 3118 buffers."""
    a = np.asarray(memoryview((ctypes.c_double * 4 * 3)()))
    if a.dtype.byteorder == "=":
        pytest.skip("this NumPy normalises PEP 3118 byte order; the case does not arise")
    assert fastpe.sinusoidal(3, 4, out=a) is a
    np.testing.assert_array_equal(a, _truth(3, 4, np.float64))
