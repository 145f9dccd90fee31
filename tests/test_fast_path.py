"""The small-call paths: calls with the common argument types (exact ints and
floats, plain float32/float64 ndarrays, a cached encoding) are served by the
kernel's fast paths without the general validation.  They must give bitwise the
results of the general path, which the same calls with other argument spellings
(NumPy scalars, lists, an int base) take, and decline whatever they do not
handle so that the general path raises its documented errors."""

import numpy as np
import pytest

import fastpe
from fastpe import kernel


def slow(v):
    """The same value, spelled so that the fast paths decline it."""
    if isinstance(v, bool) or v is None:
        return v
    if isinstance(v, int):
        return np.int64(v)
    if isinstance(v, float):
        return np.float64(v)
    return v


TABLES = [
    dict(seq_len=1, d_model=512, offset=1000),
    dict(seq_len=64, d_model=512),
    dict(seq_len=300, d_model=96, offset=-77, dtype=np.float64),
    dict(seq_len=5, d_model=33, layout="split", dtype="float64"),
    dict(seq_len=40, d_model=20, convention="fairseq", offset=-3),
    dict(seq_len=7, d_model=320, convention="diffusers"),
    dict(seq_len=3, d_model=16, base=500.0, num_threads=1),
    dict(seq_len=0, d_model=8),
]


@pytest.mark.parametrize("kw", TABLES)
def test_table_fast_equals_general(kw):
    fastpe.sinusoidal(**kw)  # caches the encoding
    args = dict(kw)
    S, D = args.pop("seq_len"), args.pop("d_model")
    fast = kernel.table(
        S,
        D,
        args.get("base", 10000.0),
        args.get("offset", 0),
        args.get("dtype"),
        args.get("layout", "interleaved"),
        None,
        args.get("num_threads"),
        args.get("convention", "vaswani"),
    )
    assert fast is not None, "the fast path declined a common call"
    general = fastpe.sinusoidal(slow(S), slow(D), **{k: slow(v) for k, v in args.items()})
    assert fast.dtype == general.dtype and fast.shape == general.shape
    np.testing.assert_array_equal(fast, general)
    # into out=: a column window of a wider matrix, and a plain array
    wide = np.full((S, D + 9), 5.0, fast.dtype)
    assert fastpe.sinusoidal(S, D, out=wide[:, 4 : 4 + D], **args) is not None
    np.testing.assert_array_equal(wide[:, 4 : 4 + D], general)
    assert (wide[:, :4] == 5).all() and (wide[:, 4 + D :] == 5).all()


@pytest.mark.parametrize(
    "positions",
    [
        np.array([999.5, 800.25, 600.0, 1.0, 0.0, 2.5, 3.75, 100.125]),
        np.arange(24, dtype=np.int64).reshape(2, 3, 4) * 7 - 30,
        np.array(12.5),
    ],
)
@pytest.mark.parametrize("convention", ["vaswani", "diffusers"])
def test_at_fast_equals_general(positions, convention):
    fastpe.sinusoidal_at(positions, 320, convention=convention)
    fast = kernel.table_at(positions, 320, 10000.0, None, "interleaved", None, None, convention)
    assert fast is not None
    general = fastpe.sinusoidal_at(positions.tolist(), np.int64(320), convention=convention)
    np.testing.assert_array_equal(fast, general)
    out = np.zeros((*positions.shape, 320), np.float64)
    assert fastpe.sinusoidal_at(positions, 320, convention=convention, out=out) is out
    np.testing.assert_array_equal(
        out, fastpe.sinusoidal_at(positions.tolist(), 320, convention=convention, dtype=np.float64)
    )


@pytest.mark.parametrize("shape", [(1, 1, 4096), (2, 5, 8), (3, 4, 2, 16), (4, 64)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_add_fast_equals_general(shape, dtype):
    rng = np.random.default_rng(7)
    x0 = rng.standard_normal(shape).astype(dtype)
    a = x0.copy()
    fastpe.add_to(a, offset=1000, scale=2.0)  # caches; then the fast path
    b = x0.copy()
    assert kernel.add(b, 1000, None, 2.0, 10000.0, "interleaved", None, "vaswani") is b
    c = x0.copy()
    fastpe.add_to(c, offset=np.int64(1000), scale=np.float64(2.0))
    np.testing.assert_array_equal(b, c)
    np.testing.assert_array_equal(a, c)


def test_add_fast_path_on_a_column_window():
    x = np.zeros((2, 6, 40), np.float32)
    fastpe.add_to(x[:, :, 8:24], offset=3)
    fastpe.add_to(x[:, :, 8:24], offset=3)
    y = np.zeros((2, 6, 16), np.float32)
    fastpe.add_to(y, offset=np.int64(3))
    fastpe.add_to(y, offset=np.int64(3))
    np.testing.assert_array_equal(x[:, :, 8:24], y)
    assert not x[:, :, :8].any() and not x[:, :, 24:].any()


@pytest.mark.parametrize(
    "call, exc, match",
    [
        (lambda: fastpe.sinusoidal(-1, 512), ValueError, "seq_len must be a non-negative"),
        (lambda: fastpe.sinusoidal(True, 512), TypeError, "seq_len must be an integer, got bool"),
        (lambda: fastpe.sinusoidal(3, 512, offset=2**70), ValueError, "every position within"),
        (lambda: fastpe.sinusoidal(3, 512, num_threads=0), ValueError, "num_threads"),
        (lambda: fastpe.sinusoidal(3, 512, dtype=np.complex64), TypeError, "dtype"),
        (
            lambda: fastpe.sinusoidal(3, 512, out=np.zeros((3, 512), np.float32)[:, ::-1]),
            ValueError,
            "last axis",
        ),
        (
            lambda: fastpe.sinusoidal(3, 512, out=np.zeros((3, 512)), dtype=np.float32),
            TypeError,
            "dtype",
        ),
        (lambda: fastpe.sinusoidal_at([np.nan], 512), ValueError, "finite"),
        (lambda: fastpe.add_to(np.zeros((1, 1, 512), np.complex64)), TypeError, "dtype"),
        (lambda: fastpe.add_to(np.zeros((1, 1, 512)), scale=float("inf")), ValueError, "scale"),
    ],
)
def test_declined_calls_raise_the_documented_errors(call, exc, match):
    fastpe.sinusoidal(1, 512)  # the encoding is cached
    with pytest.raises(exc, match=match):
        call()


def test_read_only_out_is_refused_by_the_general_path():
    fastpe.sinusoidal(1, 512)
    out = np.zeros((1, 512), np.float32)
    out.flags.writeable = False
    with pytest.raises(ValueError, match="writable"):
        fastpe.sinusoidal(1, 512, out=out)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("d_model", [8, 512, 4096])
def test_decoding_steps_reuse_anchors_bitwise(dtype, d_model):
    """Consecutive one-row calls share their block's anchor through the
    encoding's anchor cache; every row must still be the table's row."""
    table = fastpe.sinusoidal(700, d_model, offset=-100, dtype=dtype)
    row = np.empty((1, d_model), dtype)
    x = np.zeros((1, 1, d_model), dtype)
    for k in [*list(range(-100, 600, 3)), 0, 599, -100, 37, 38, 37]:
        fastpe.sinusoidal(1, d_model, offset=k, out=row)
        np.testing.assert_array_equal(row[0], table[k + 100])
        x[:] = 0
        fastpe.add_to(x, offset=k)
        np.testing.assert_array_equal(x[0, 0], table[k + 100])


def test_concurrent_steps_on_one_encoding():
    import threading

    table = fastpe.sinusoidal(5000, 512, dtype=np.float64)
    errors = []

    def work(seed):
        rng = np.random.default_rng(seed)
        row = np.empty((1, 512))
        for k in rng.integers(0, 5000, 400):
            k = int(k)
            fastpe.sinusoidal(1, 512, offset=k, out=row)
            if not np.array_equal(row[0], table[k]):
                errors.append(k)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors[:5]
