"""fastpe.sinusoidal: shapes, layouts, out=, threads, the GIL, and bad input."""

import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from truth import column_map

import fastpe

# ---------------------------------------------------------------- basic results


@pytest.mark.parametrize("dtype", [np.float32, np.float64, "float32", "f8", np.dtype("f4")])
def test_dtype_and_shape(dtype):
    P = fastpe.sinusoidal(5, 6, dtype=dtype)
    assert P.shape == (5, 6)
    assert P.dtype == np.dtype(dtype)
    assert P.flags.c_contiguous


def test_default_dtype_is_float32():
    assert fastpe.sinusoidal(3, 4).dtype == np.float32


@pytest.mark.parametrize("layout", ["interleaved", "split"])
@pytest.mark.parametrize("d_model", [1, 2, 3, 4, 7, 8, 129, 256])
@pytest.mark.parametrize("offset", [0, 5, -9, 100_000])
def test_matches_numpy_reference(layout, d_model, offset):
    P = fastpe.sinusoidal(70, d_model, offset=offset, layout=layout, dtype=np.float64)
    R = fastpe.reference(70, d_model, offset=offset, layout=layout)
    # the reference's own error at k ~ 1e5 is ~1e-11; fastpe's is ~1e-16
    np.testing.assert_allclose(P, R, atol=1e-10, rtol=0)


def test_odd_width_interleaved_last_column_is_next_sine():
    P = fastpe.sinusoidal(10, 5, dtype=np.float64)
    k = np.arange(10)
    np.testing.assert_allclose(P[:, 4], np.sin(k / 10000 ** (4 / 5)), atol=1e-15)


def test_split_layout_is_a_permutation_of_interleaved():
    for d in (6, 7):
        inter = fastpe.sinusoidal(33, d, dtype=np.float64)
        split = fastpe.sinusoidal(33, d, dtype=np.float64, layout="split")
        cmap_i = column_map(d, "interleaved")
        cmap_s = column_map(d, "split")
        for js, key in enumerate(cmap_s):
            ji = cmap_i.index(key)
            np.testing.assert_array_equal(split[:, js], inter[:, ji])


def test_first_row_and_cos_columns_at_position_zero():
    P = fastpe.sinusoidal(1, 8)
    np.testing.assert_array_equal(P[0], [0, 1, 0, 1, 0, 1, 0, 1])
    # also inside a large table (where rows are written in mirrored pairs) and
    # when position 0 is not the first row
    for dtype in (np.float32, np.float64):
        for offset in (0, -100, -37):
            P = fastpe.sinusoidal(300, 512, offset=offset, dtype=dtype)
            assert np.array_equal(P[-offset], np.tile([0.0, 1.0], 256))


def test_empty_table():
    P = fastpe.sinusoidal(0, 16)
    assert P.shape == (0, 16) and P.dtype == np.float32


def test_numpy_integer_scalars_accepted():
    P = fastpe.sinusoidal(np.int64(4), np.int32(4), base=np.float32(100), offset=np.uint8(2))
    np.testing.assert_allclose(P, fastpe.reference(4, 4, base=100, offset=2), atol=1e-7)


# ---------------------------------------------------------------- chunking/offsets


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_offset_chunks_are_bitwise_equal_to_one_table(dtype):
    """Every entry depends only on (position, column): any split into chunks agrees."""
    full = fastpe.sinusoidal(1000, 96, dtype=dtype)
    for start, stop in [(0, 1), (1, 64), (63, 200), (500, 1000), (999, 1000), (137, 611)]:
        part = fastpe.sinusoidal(stop - start, 96, offset=start, dtype=dtype)
        np.testing.assert_array_equal(part, full[start:stop])


# ---------------------------------------------------------------- out=


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_out_is_filled_and_returned(dtype):
    out = np.full((20, 10), np.nan, dtype=dtype)
    res = fastpe.sinusoidal(20, 10, out=out)
    assert res is out
    np.testing.assert_array_equal(out, fastpe.sinusoidal(20, 10, dtype=dtype))


def test_out_dtype_decides_when_dtype_left_default():
    out = np.empty((4, 4), dtype=np.float64)
    assert fastpe.sinusoidal(4, 4, out=out).dtype == np.float64


def test_out_with_conflicting_explicit_dtype():
    with pytest.raises(TypeError, match="dtype"):
        fastpe.sinusoidal(4, 4, out=np.empty((4, 4), np.float64), dtype="float32")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_out_strided_rows_column_window(dtype):
    """A column slice of a wider embedding matrix: only the window is written."""
    emb = np.full((50, 300), 7.0, dtype=dtype)
    window = emb[:, 100:228]
    fastpe.sinusoidal(50, 128, out=window, offset=3)
    np.testing.assert_array_equal(window, fastpe.sinusoidal(50, 128, offset=3, dtype=dtype))
    assert np.all(emb[:, :100] == 7.0) and np.all(emb[:, 228:] == 7.0)


def test_out_every_other_row():
    big = np.zeros((40, 16))
    fastpe.sinusoidal(20, 16, out=big[::2])
    np.testing.assert_array_equal(big[::2], fastpe.sinusoidal(20, 16, dtype=np.float64))
    assert np.all(big[1::2] == 0)


def test_out_ndarray_subclass():
    class Sub(np.ndarray):
        pass

    out = np.zeros((3, 4)).view(Sub)
    assert fastpe.sinusoidal(3, 4, out=out) is out


@pytest.mark.parametrize(
    "make, exc, match",
    [
        (lambda: np.empty((5, 4), np.float32), ValueError, "shape"),
        (lambda: np.empty((4, 5), np.float32), ValueError, "shape"),
        (lambda: np.empty((4,), np.float32), ValueError, "shape"),
        (lambda: np.empty((4, 4), np.int32), TypeError, "dtype"),
        (lambda: np.empty((4, 4), np.complex64), TypeError, "dtype"),
        (lambda: np.empty((4, 4), ">f8"), TypeError, "byte order"),
        (lambda: np.broadcast_to(np.zeros(4, np.float32), (4, 4)), ValueError, "writable"),
        (lambda: np.zeros((4, 4), np.float32).T.copy(order="F"), ValueError, "contiguous"),
        (lambda: np.zeros((4, 8), np.float32)[:, ::2], ValueError, "contiguous"),
        (lambda: np.zeros((4, 4), np.float32)[::-1], ValueError, "backwards"),
        (lambda: [[0.0] * 4] * 4, TypeError, "ndarray"),
        (
            lambda: np.frombuffer(
                bytearray(4 * 4 * 4 + 1), np.float32, offset=1, count=16
            ).reshape(4, 4),
            ValueError,
            "aligned|writable",
        ),
    ],
)
def test_bad_out_is_refused_and_untouched(make, exc, match):
    out = make()
    before = np.array(out, copy=True) if isinstance(out, np.ndarray) else None
    with pytest.raises(exc, match=match):
        fastpe.sinusoidal(4, 4, out=out)
    if before is not None:
        np.testing.assert_array_equal(out, before)


def test_readonly_out():
    out = np.zeros((4, 4), np.float32)
    out.flags.writeable = False
    with pytest.raises(ValueError, match="writable"):
        fastpe.sinusoidal(4, 4, out=out)


# ---------------------------------------------------------------- bad arguments


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        (dict(seq_len=-1, d_model=4), ValueError, "seq_len"),
        (dict(seq_len=2.0, d_model=4), TypeError, "seq_len"),
        (dict(seq_len=True, d_model=4), TypeError, "seq_len"),
        (dict(seq_len="3", d_model=4), TypeError, "seq_len"),
        (dict(seq_len=None, d_model=4), TypeError, "seq_len"),
        (dict(seq_len=3, d_model=0), ValueError, "d_model"),
        (dict(seq_len=3, d_model=-4), ValueError, "d_model"),
        (dict(seq_len=3, d_model=4.5), TypeError, "d_model"),
        (dict(seq_len=3, d_model=4, base=0), ValueError, "base"),
        (dict(seq_len=3, d_model=4, base=-2.0), ValueError, "base"),
        (dict(seq_len=3, d_model=4, base=float("nan")), ValueError, "base"),
        (dict(seq_len=3, d_model=4, base=float("inf")), ValueError, "base"),
        (dict(seq_len=3, d_model=4, base="10000"), TypeError, "base"),
        (dict(seq_len=3, d_model=4, base=1 + 2j), TypeError, "base"),
        (dict(seq_len=3, d_model=4, offset=1.5), TypeError, "offset"),
        (dict(seq_len=3, d_model=4, offset=2**62), ValueError, "offset"),
        (dict(seq_len=3, d_model=4, layout="zigzag"), ValueError, "layout"),
        (dict(seq_len=3, d_model=4, layout=1), TypeError, "layout"),
        (dict(seq_len=3, d_model=4, dtype=np.int32), TypeError, "dtype"),
        (dict(seq_len=3, d_model=4, dtype=np.complex128), TypeError, "dtype"),
        (dict(seq_len=3, d_model=4, dtype="not-a-dtype"), TypeError, "dtype"),
        (dict(seq_len=3, d_model=4, num_threads=0), ValueError, "num_threads"),
        (dict(seq_len=3, d_model=4, num_threads=-2), ValueError, "num_threads"),
        (dict(seq_len=3, d_model=4, num_threads=1.0), TypeError, "num_threads"),
    ],
)
def test_bad_arguments(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        fastpe.sinusoidal(**kwargs)


def test_positional_options_are_rejected():
    with pytest.raises(TypeError):
        fastpe.sinusoidal(3, 4, 100.0)


@pytest.mark.parametrize("shape", [(2**40, 2**40), (2**62, 4), (10**12, 10**6)])
def test_huge_tables_fail_cleanly(shape):
    with pytest.raises((MemoryError, ValueError)):
        fastpe.sinusoidal(*shape)


def test_positions_beyond_exact_range():
    limit = fastpe.kernel.max_position(10000.0, 64)
    fastpe.sinusoidal(1, 64, offset=limit - 1)
    with pytest.raises(ValueError, match="offset"):
        fastpe.sinusoidal(2, 64, offset=limit)


# ---------------------------------------------------------------- threads


def test_gil_released_during_fill():
    """A pure-Python thread keeps counting while one long fill runs."""
    # Fractional positions cost one accurate evaluation per row; the table grows
    # until one fill lasts long enough (tens of ms on one thread) to dwarf the
    # 5 ms switch interval, whatever the speed of the machine.
    rows = 512
    while True:
        pos = np.arange(rows) + 0.5
        out = np.empty((rows, 4096), np.float32)
        fastpe.sinusoidal_at(pos, 4096, out=out, num_threads=1)  # touch pages, warm up
        t0 = time.perf_counter()
        fastpe.sinusoidal_at(pos, 4096, out=out, num_threads=1)
        fill_time = time.perf_counter() - t0
        if fill_time > 0.05 or rows >= 1 << 15:
            break
        rows *= 2

    count = 0
    started = threading.Event()
    stop = threading.Event()

    def spin():
        nonlocal count
        started.set()
        while not stop.is_set():
            count += 1

    th = threading.Thread(target=spin)
    th.start()
    started.wait()
    before = count
    fastpe.sinusoidal_at(pos, 4096, out=out, num_threads=1)
    during = count - before
    stop.set()
    th.join()
    # With the GIL held the counter would advance at most by one switch interval's
    # worth; released, it runs for the whole fill.
    assert fill_time > 0.02
    assert during > 1000, (during, fill_time)


# ---------------------------------------------------------------- build info


def test_build_info():
    info = fastpe.build_info()
    assert info["version"] == fastpe.__version__
    assert isinstance(info["openmp"], bool)
    assert isinstance(info["max_threads"], int) and info["max_threads"] >= 1
    if not info["openmp"]:
        assert info["max_threads"] == 1


def test_build_has_expected_openmp():
    """The CI sets FASTPE_EXPECT_OPENMP for each build it makes (sklearn's test_build)."""
    expected = os.environ.get("FASTPE_EXPECT_OPENMP")
    if expected is None:
        pytest.skip("FASTPE_EXPECT_OPENMP not set (only CI knows which build it made)")
    assert fastpe.build_info()["openmp"] is (expected == "1")


# ---------------------------------------------------------------- properties

sizes = st.integers(min_value=0, max_value=300)
widths = st.integers(min_value=1, max_value=300)


@given(
    seq_len=sizes,
    d_model=widths,
    offset=st.integers(min_value=-(10**6), max_value=10**6),
    base=st.floats(min_value=1.5, max_value=1e6),
    layout=st.sampled_from(["interleaved", "split"]),
    dtype=st.sampled_from([np.float32, np.float64]),
    num_threads=st.one_of(st.none(), st.integers(1, 4)),
)
def test_property_matches_reference(seq_len, d_model, offset, base, layout, dtype, num_threads):
    P = fastpe.sinusoidal(
        seq_len,
        d_model,
        base=base,
        offset=offset,
        layout=layout,
        dtype=dtype,
        num_threads=num_threads,
    )
    R = fastpe.reference(seq_len, d_model, base=base, offset=offset, layout=layout)
    assert P.shape == (seq_len, d_model) and P.dtype == dtype
    # reference error <= ~|k| * 2^-52; fastpe float32 rounding <= 2^-24
    tol = (1e6 * 2.0**-51) + (2.0**-24 if dtype == np.float32 else 0.0)
    assert np.all(np.abs(P - R) <= tol)


@given(
    d_model=st.integers(1, 64),
    start=st.integers(0, 500),
    length=st.integers(0, 200),
    col0=st.integers(0, 10),
)
def test_property_out_window_only_writes_inside(d_model, start, length, col0):
    wide = np.full((length, d_model + 20), -5.0)
    win = wide[:, col0 : col0 + d_model]
    fastpe.sinusoidal(length, d_model, offset=start, out=win)
    np.testing.assert_array_equal(
        win, fastpe.sinusoidal(length, d_model, offset=start, dtype=np.float64)
    )
    mask = np.ones(wide.shape, bool)
    mask[:, col0 : col0 + d_model] = False
    assert np.all(wide[mask] == -5.0)


@pytest.mark.parametrize("base", [5e-324, 1e-310])
def test_tiny_base_whose_frequencies_overflow_is_refused(base):
    """Found by tools/fuzz_api.py: base**(-2i/d) overflowed to inf and position 0
    came out as 0 * inf = NaN.  Now a ValueError naming base (and a code in C)."""
    with pytest.raises(ValueError, match="base"):
        fastpe.sinusoidal(1, 34, base=base)
    assert fastpe.kernel.max_position(base, 34) == 0


def test_small_base_with_finite_frequencies_still_works():
    P = fastpe.sinusoidal(1, 34, base=1e-30, dtype=np.float64)
    np.testing.assert_array_equal(P[0], np.tile([0.0, 1.0], 17))


def test_import_fastpe_does_not_import_torch():
    # fastpe.torch is the only module that needs torch, and only when imported
    code = "import sys, fastpe; assert 'torch' not in sys.modules, 'torch was imported'"
    subprocess.run([sys.executable, "-c", code], check=True)
