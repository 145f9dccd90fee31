"""add_to: x = x*scale + PE in place, over batches, offsets and explicit positions."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

import fastpe

F64 = np.float64

# ---------------------------------------------------------------- add_to


def expected_add(x, positions, scale=1.0, conv="vaswani"):
    """x*scale + PE in float64, rounded once to x's dtype (what add_to promises)."""
    pe = fastpe.sinusoidal_at(positions, x.shape[-1], dtype=F64, convention=conv)
    return (x.astype(F64) * scale + pe).astype(x.dtype)


def random_x(shape, dtype, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, F64])
@pytest.mark.parametrize("scale", [1.0, 0.5, 22.627416997969522, -3.0, 0.0])
@pytest.mark.parametrize("d", [1, 7, 64])
def test_add_to_default_positions_bitwise(dtype, scale, d):
    x = random_x((3, 11, d), dtype)
    expect = expected_add(x, np.broadcast_to(np.arange(11), (3, 11)), scale)
    assert fastpe.add_to(x, scale=scale) is x
    np.testing.assert_array_equal(x, expect)


@pytest.mark.parametrize("dtype", [np.float32, F64])
def test_add_to_scalar_offset(dtype):
    x = random_x((2, 5, 16), dtype)
    expect = expected_add(x, np.broadcast_to(np.arange(40, 45), (2, 5)))
    fastpe.add_to(x, offset=40)
    np.testing.assert_array_equal(x, expect)


@pytest.mark.parametrize("dtype", [np.float32, F64])
def test_add_to_per_sequence_offsets_kv_cache(dtype):
    x = random_x((4, 6, 10), dtype)
    cache = np.array([0, 17, 3, 250])
    expect = expected_add(x, cache[:, None] + np.arange(6))
    fastpe.add_to(x, offset=cache)
    np.testing.assert_array_equal(x, expect)
    # offsets for a (2, 3, S, d) batch: one per sequence, broadcast from (3,) or (2, 1)
    y = random_x((2, 3, 4, 8), dtype, 1)
    off = np.array([[5, 6, 7], [8, 9, 10]])
    expect = expected_add(y, off[..., None] + np.arange(4))
    fastpe.add_to(y, offset=off)
    np.testing.assert_array_equal(y, expect)
    z = random_x((2, 3, 4, 8), dtype, 2)
    expect = expected_add(z, np.array([1, 2, 3])[None, :, None] + np.arange(4))
    fastpe.add_to(z, offset=[1, 2, 3])
    np.testing.assert_array_equal(z, expect)


def test_add_to_positions_shared_and_per_sequence():
    x = random_x((3, 5, 12), F64)
    p = np.array([4, 0, 9, 9, 2])  # (S,): every sequence
    expect = expected_add(x, np.broadcast_to(p, (3, 5)))
    fastpe.add_to(x, positions=p)
    np.testing.assert_array_equal(x, expect)
    y = random_x((3, 5, 12), F64, 1)
    P = np.arange(15).reshape(3, 5) * 7  # (B, S)
    expect = expected_add(y, P + 100)
    fastpe.add_to(y, positions=P, offset=100)  # integer positions + offset
    np.testing.assert_array_equal(y, expect)
    z = random_x((3, 5, 12), F64, 2)
    expect = expected_add(z, P + np.array([1, 2, 3])[:, None])
    fastpe.add_to(z, positions=P, offset=[1, 2, 3])
    np.testing.assert_array_equal(z, expect)


def test_add_to_packed_sequences_restart_at_zero():
    # three documents of lengths 3, 5, 2 packed into one row of 10 tokens
    lengths = [3, 5, 2]
    pos = np.concatenate([np.arange(n) for n in lengths])
    x = random_x((1, 10, 32), np.float32)
    expect = expected_add(x, pos[None])
    fastpe.add_to(x, positions=pos)
    np.testing.assert_array_equal(x, expect)
    table = fastpe.sinusoidal(5, 32, dtype=F64)
    x0 = np.zeros((10, 32))
    fastpe.add_to(x0, positions=pos)
    np.testing.assert_array_equal(x0[3:8], table)  # the second document starts at 0


def test_add_to_left_padding():
    # left-padded batch: real tokens count from 0 after the padding; padding rows
    # get any position (here 0): they are masked downstream
    pad = np.array([0, 3, 1])
    S = 6
    pos = np.maximum(np.arange(S)[None, :] - pad[:, None], 0)
    x = random_x((3, S, 16), np.float32)
    expect = expected_add(x, pos)
    fastpe.add_to(x, positions=pos)
    np.testing.assert_array_equal(x, expect)
    # the same through per-sequence negative offsets: position s - pad
    y = np.zeros((3, S, 16))
    fastpe.add_to(y, offset=-pad)
    for b in range(3):
        np.testing.assert_array_equal(y[b], fastpe.sinusoidal(S, 16, offset=-pad[b], dtype=F64))


@pytest.mark.parametrize("dtype", [np.float32, F64])
def test_add_to_float_positions(dtype):
    t = np.array([[0.5, 1.25, 999.9], [3.0, 0.0, 7.75]])
    x = random_x((2, 3, 20), dtype)
    expect = expected_add(x, t, scale=2.0, conv="diffusers")
    fastpe.add_to(x, positions=t, scale=2.0, convention="diffusers")
    np.testing.assert_array_equal(x, expect)
    with pytest.raises(ValueError, match="offset"):
        fastpe.add_to(x, positions=t, offset=3)
    with pytest.raises(ValueError, match="offset"):
        fastpe.add_to(x, positions=t, offset=[0, 1])


def test_add_to_column_slice_and_2d():
    wide = random_x((2, 9, 40), np.float32)
    before = wide.copy()
    view = wide[:, :, 8:24]
    expect = expected_add(view, np.broadcast_to(np.arange(3, 12), (2, 9)))
    assert fastpe.add_to(view, offset=3) is view
    np.testing.assert_array_equal(wide[:, :, 8:24], expect)
    np.testing.assert_array_equal(wide[:, :, :8], before[:, :, :8])
    np.testing.assert_array_equal(wide[:, :, 24:], before[:, :, 24:])
    x2 = random_x((9, 16), F64)  # one (S, d) sequence
    expect = expected_add(x2, np.arange(9))
    fastpe.add_to(x2)
    np.testing.assert_array_equal(x2, expect)


def test_add_to_fairseq_padding_rows_get_no_encoding():
    tokens = np.array([[1, 1, 5, 6], [7, 8, 9, 1]])
    x = random_x((2, 4, 8), F64)
    before = x.copy()
    fastpe.add_to(x, positions=fastpe.fairseq_positions(tokens), scale=2.0, convention="fairseq")
    np.testing.assert_array_equal(x[tokens == 1], 2.0 * before[tokens == 1])


@pytest.mark.parametrize("conv,d", [("tensor2tensor", 9), ("fairseq", 9), ("vaswani", 33)])
@pytest.mark.parametrize("dtype", [np.float32, F64])
def test_add_to_shared_positions_match_the_row_by_row_path(conv, d, dtype):
    # positions shared by every sequence take a path that encodes each row once
    # for all of them; per-sequence offsets go row by row: the same bits, signs
    # of zero included
    x = random_x((5, 70, d), dtype)
    x[0, :, :] = -0.0
    x[1, 1, :] = -0.0
    for nt in (1, 2):
        a, b = x.copy(), x.copy()
        fastpe.add_to(a, convention=conv, scale=0.5, num_threads=nt)
        fastpe.add_to(b, offset=np.zeros(5, np.int64), convention=conv, scale=0.5, num_threads=nt)
        assert a.tobytes() == b.tobytes()
    shared, per_seq = a, b
    table = fastpe.sinusoidal(70, d, convention=conv, dtype=F64)
    # the data does put -0.0 where the encoding is an exact zero (zero column,
    # fairseq's padding row, sin 0), the case where the paths could differ
    none = np.broadcast_to(table == 0, x.shape) & np.signbit(x)
    expect = (x.astype(F64) * 0.5 + table).astype(dtype)
    assert np.array_equal(shared, expect) and np.array_equal(per_seq, expect)
    assert none.any()


# ------------------------------------------- blocked adds (rows shared by sequences)

BF16 = "bfloat16"


def _round_bf16(v):
    """float64 -> the bits of bfloat16, nearest even, from the double's own bits
    (keep sign, exponent and 7 mantissa bits, round on the 45 below; normal range:
    the entries here are far from bfloat16's subnormals)."""
    u = np.ascontiguousarray(v, F64).view(np.uint64)
    r = (u + np.uint64(2**44 - 1) + ((u >> np.uint64(45)) & np.uint64(1))) >> np.uint64(45)
    exact = (r << np.uint64(45)).view(F64)  # representable: converts exactly
    return exact.astype(_as_dtype(BF16)).view(np.uint16)


def _as_dtype(name):
    if name == BF16:
        ml_dtypes = pytest.importorskip("ml_dtypes")
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def _expected_bits(x, positions, scale, conv="vaswani"):
    """The bits of x*scale + PE(positions) computed in float64 (NumPy) and rounded
    once to x's dtype, as unsigned integers."""
    pe = fastpe.sinusoidal_at(positions, x.shape[-1], dtype=F64, convention=conv)
    v = x.astype(F64) * scale + pe
    if x.dtype.name == BF16:
        return _round_bf16(v).astype(np.uint16)
    return v.astype(x.dtype).view(f"u{x.dtype.itemsize}")


def _forms(batch, S, rng):
    """add_to keyword arguments, each with the positions every row gets."""
    ar = np.arange(S)
    shape = (*batch, S)
    offs = rng.integers(-300, 3000, size=batch)
    starts = rng.integers(-40, 700, size=(*batch, 1))
    same = rng.integers(-500, 500, size=S)
    arb = rng.integers(-500, 500, size=shape)
    return {
        "offset": ({"offset": 0}, np.broadcast_to(ar, shape)),
        "offset negative": ({"offset": -(S // 2) - 3}, np.broadcast_to(ar - S // 2 - 3, shape)),
        "offset large": ({"offset": 10**9 + 17}, np.broadcast_to(ar + 10**9 + 17, shape)),
        "offsets": ({"offset": offs}, offs[..., None] + ar),
        "offsets equal": ({"offset": np.full(batch, 5)}, np.broadcast_to(ar + 5, shape)),
        "offsets far apart": (
            {"offset": (np.arange(np.prod(batch)) * 999_983 - 10**6).reshape(batch)},
            (np.arange(np.prod(batch)) * 999_983 - 10**6).reshape(batch)[..., None] + ar,
        ),
        "positions broadcast arange": ({"positions": ar[None]}, np.broadcast_to(ar, shape)),
        "positions arange + offsets": (
            {"positions": ar, "offset": offs},
            offs[..., None] + ar,
        ),
        "positions consecutive per sequence": ({"positions": starts + ar}, starts + ar),
        "positions repeated per sequence": (
            {"positions": np.ascontiguousarray(np.broadcast_to(same, shape))},
            np.broadcast_to(same, shape),
        ),
        "positions broadcast arbitrary": ({"positions": same}, np.broadcast_to(same, shape)),
        "positions arbitrary": ({"positions": arb}, arb),
    }


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", BF16])
@pytest.mark.parametrize(
    "shape",
    [(3, 600, 7), (4, 70, 600), (2, 3, 45, 33), (5, 1, 16)],
    ids=["long-narrow", "wide", "4d", "one-step"],
)
def test_add_to_blocked_forms_bitwise(dtype, shape):
    # every form of the positions (rows encoded once per block and added to each
    # sequence using them, or row by row) gives each entry the float64 value
    # rounded once, on any thread count, into contiguous and strided x
    dt = _as_dtype(dtype)
    batch, S, d = shape[:-2], shape[-2], shape[-1]
    rng = np.random.default_rng(sum(shape))
    x0 = rng.standard_normal(shape).astype(dt)
    for name, (kw, positions) in _forms(batch, S, rng).items():
        for scale in (1.0, -0.5):
            expect = _expected_bits(x0, positions, scale)
            for nt in (1, 2, 3):
                for strided in (False, True):
                    if strided:
                        x = np.zeros((*shape[:-1], d + 5), dt)[..., 2 : d + 2]
                        x[...] = x0
                    else:
                        x = x0.copy()
                    fastpe.add_to(x, scale=scale, num_threads=nt, **kw)
                    got = np.ascontiguousarray(x).view(expect.dtype)
                    assert np.array_equal(got, expect), (name, scale, nt, strided)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", BF16])
def test_add_to_rows_of_every_length_and_alignment(dtype):
    # the add loop runs over x's row in runs of whole cache lines after a head that
    # reaches a line boundary: every width around the run lengths (32, 64 and 128
    # entries), starting at every entry of a 64-byte line, gets each entry rounded
    # once from float64
    dt = _as_dtype(dtype)
    rng = np.random.default_rng(7)
    lane = 64 // dt.itemsize
    for d in (1, 2, 31, 32, 33, 63, 64, 65, 127, 128, 129, 191, 255, 256, 257, 300):
        for start in range(0, lane, 3 if lane > 16 else 1):
            buf = np.zeros(4 * (d + lane) + 64, dt)
            base = (-buf.ctypes.data % 64) // dt.itemsize + start
            x = buf[base : base + 4 * (d + lane)].reshape(4, d + lane)[:, :d]
            x[...] = rng.standard_normal((4, d)).astype(dt)
            x0 = x.copy()
            before = buf.copy()
            outside = np.ones(buf.shape, bool)
            outside[base : base + 4 * (d + lane)].reshape(4, d + lane)[:, :d] = False
            for kw, positions in (
                ({"offset": 3}, np.arange(3, 7)),
                ({"positions": np.arange(4) * 5}, np.arange(4) * 5),
            ):
                x[...] = x0
                fastpe.add_to(x, scale=-0.75, **kw)
                expect = _expected_bits(x0, positions, -0.75)
                got = np.ascontiguousarray(x).view(expect.dtype)
                assert np.array_equal(got, expect), (d, start, kw)
                # nothing beside x's rows is touched
                assert np.array_equal(buf[outside].view(np.uint8), before[outside].view(np.uint8))


@pytest.mark.parametrize("conv,d", [("tensor2tensor", 9), ("fairseq", 9), ("vaswani", 33)])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", BF16])
def test_add_to_blocked_forms_match_the_row_by_row_path(conv, d, dtype):
    # the blocked adds write a block of rows as a table is written, then give the
    # no-encoding column and fairseq's padding position -0.0: an extra sequence
    # with scattered positions sends the same rows through the row-by-row path,
    # whose bits (signs of zero included) the blocked forms must reproduce
    dt = _as_dtype(dtype)
    S, nseq = 300, 4
    rng = np.random.default_rng(d)
    x = rng.standard_normal((nseq, S, d)).astype(dt)
    x[0] = -0.0
    x[2, :5] = -0.0
    ar = np.arange(S)
    offs = np.array([0, 1, 7, 290])
    same = rng.integers(0, 400, size=S)
    forms = [
        ({"positions": offs[:, None] + ar}, offs[:, None] + ar),
        ({"positions": ar[None]}, np.broadcast_to(ar, (nseq, S))),
        ({"positions": np.tile(same, (nseq, 1))}, np.tile(same, (nseq, 1))),
        ({"positions": same}, np.tile(same, (nseq, 1))),
    ]
    if conv != "fairseq":  # (fairseq's default positions start after its padding index)
        forms += [
            ({"offset": offs}, offs[:, None] + ar),
            ({"offset": 0}, np.broadcast_to(ar, (nseq, S))),
        ]
    scattered = rng.permutation(S)[None]
    for kw, posmat in forms:
        for scale in (0.5, 0.0):
            for nt in (1, 2, 3):
                ref = np.concatenate([x, x[:1]])
                pos = np.concatenate([posmat, scattered])
                fastpe.add_to(ref, positions=pos, convention=conv, scale=scale, num_threads=nt)
                ref_bits = ref[:nseq].view(f"u{dt.itemsize}")
                got = x.copy()
                fastpe.add_to(got, convention=conv, scale=scale, num_threads=nt, **kw)
                assert np.array_equal(got.view(ref_bits.dtype), ref_bits), (kw, scale, nt)
    assert (np.signbit(x) & (x == 0)).any()


@pytest.mark.parametrize(
    "make, exc, match",
    [
        (lambda: np.zeros((3, 8))[:, ::2], ValueError, "contiguous"),  # strided last axis
        (lambda: np.zeros((8, 3, 4)).transpose(1, 0, 2), ValueError, "stride"),  # rows not uniform
        (lambda: np.zeros((4, 8), np.complex64), TypeError, "dtype"),
        (lambda: np.zeros((4, 8), np.int32), TypeError, "dtype"),
        (lambda: np.zeros((4, 8)).astype(">f8"), TypeError, "dtype"),
        (lambda: np.zeros(8), ValueError, "shape"),
        (lambda: np.zeros((4, 0)), ValueError, "d_model"),
        (lambda: np.zeros((4, 8)).tolist(), TypeError, "ndarray"),
    ],
)
def test_add_to_refuses_bad_x(make, exc, match):
    with pytest.raises(exc, match=match):
        fastpe.add_to(make())


def test_add_to_refuses_read_only():
    x = np.zeros((4, 8))
    x.flags.writeable = False
    with pytest.raises(ValueError, match="writable"):
        fastpe.add_to(x)


@pytest.mark.parametrize(
    "kw, exc, match",
    [
        (dict(offset=1.5), TypeError, "offset"),
        (dict(offset=[1.5, 2.0]), TypeError, "offset"),
        (dict(offset=[1, 2, 3]), ValueError, "offset"),
        (dict(offset=[True, False]), TypeError, "offset"),
        (dict(positions=np.arange(4)), ValueError, "positions"),
        (dict(positions=[[0, 1, 2]] * 3), ValueError, "positions"),
        (dict(positions=[np.nan, 0, 1]), ValueError, "positions"),
        (dict(positions=["a", "b", "c"]), TypeError, "positions"),
        (dict(scale=np.nan), ValueError, "scale"),
        (dict(scale=10**400), ValueError, "scale"),  # OverflowError before
        (dict(scale="2"), TypeError, "scale"),
        (dict(scale=True), TypeError, "scale"),
        (dict(offset=10**15), ValueError, "positions"),
    ],
)
def test_add_to_bad_arguments_leave_x_untouched(kw, exc, match):
    x = random_x((2, 3, 8), np.float32)
    before = x.copy()
    with pytest.raises(exc, match=match):
        fastpe.add_to(x, **kw)
    np.testing.assert_array_equal(x, before)


def test_add_to_empty_x_still_checks_its_arguments():
    x = np.zeros((0, 5, 8))
    assert fastpe.add_to(x, offset=[]) is x
    with pytest.raises(TypeError, match="positions"):  # returned silently before
        fastpe.add_to(x, positions="abc")
    with pytest.raises(TypeError, match="offset"):
        fastpe.add_to(x, offset=1.5)


# ---------------------------------------------------------------- memory


@pytest.mark.parametrize(
    "kw",
    [
        dict(positions=np.arange(512)),  # (S,), broadcast to every sequence
        dict(offset=np.arange(8) * 100),  # per-sequence offsets
        dict(positions=np.arange(512), offset=np.arange(8)),  # both
    ],
)
def test_add_to_allocates_no_temporary_the_size_of_x(kw):
    x = np.ones((8, 512, 256), np.float32)
    fastpe.add_to(x.copy(), **kw)  # warm up (imports, caches)
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base_current, _ = tracemalloc.get_traced_memory()
        fastpe.add_to(x, **kw)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    extra = peak - base_current
    assert extra < 0.05 * x.nbytes, f"peak extra {extra} bytes for x of {x.nbytes} bytes"


def test_numpy_equivalent_does_allocate_so_the_probe_works():
    # the probe sees NumPy's temporaries: table[positions] is the size of x
    x = np.ones((8, 512, 256), np.float32)
    table = fastpe.sinusoidal(512, 256)
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base_current, _ = tracemalloc.get_traced_memory()
        x += table[np.broadcast_to(np.arange(512), (8, 512))]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak - base_current >= 0.9 * x.nbytes
