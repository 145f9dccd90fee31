"""fastpe.kernel below the public API: prepared plans, and the cache _api keeps of them."""

import contextlib

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import fastpe
from fastpe import _api, kernel
from fastpe._conventions import resolve

CONVENTIONS = ["vaswani", "tensor2tensor", "fairseq", "diffusers", "gptj"]


def _encoding(name, d_model):
    conv = resolve(
        name, base=10000.0, layout="interleaved", base_default=True, layout_default=True
    )
    return kernel.Encoder(conv, d_model)


def _fill(
    enc, n, plan, *, dtype=np.float64, offset=0, positions=None, add=False, x=None, num_threads=0
):
    out = np.zeros((n, enc.d_model), dtype) if x is None else x.copy()
    kernel.fill_rows(
        out,
        enc,
        nseq=1,
        seq_len=n,
        offset=offset,
        positions=positions,
        add=add,
        scale=0.5,
        num_threads=num_threads,
        plan=plan,
    )
    return out


@pytest.mark.parametrize("name", CONVENTIONS)
@pytest.mark.parametrize("d_model", [1, 2, 7, 64, 513, 4096])
def test_plan_gives_the_same_bits_as_a_per_call_preparation(name, d_model):
    if name == "gptj" and d_model % 2:
        pytest.skip("gptj (rotary) tables have an even width")
    enc = _encoding(name, d_model)
    plan = kernel.Plan(enc)
    assert plan.nf == ((d_model + 1) // 2 if name == "vaswani" else d_model // 2)  # odd: sin
    assert plan.nbytes == kernel.plan_nbytes(enc)
    for dtype in (np.float32, np.float64):
        for offset, n in [(0, 300), (-77, 130), (12345, 3), (5, 1)]:
            a = _fill(enc, n, None, dtype=dtype, offset=offset)
            b = _fill(enc, n, plan, dtype=dtype, offset=offset)
            assert np.array_equal(a, b), (dtype, offset, n)


@given(
    st.lists(st.integers(-(10**6), 10**6), min_size=1, max_size=40),
    st.sampled_from([np.float32, np.float64]),
    st.booleans(),
)
def test_plan_gives_the_same_bits_for_explicit_positions(pos, dtype, add):
    enc = _encoding("vaswani", 96)
    plan = _api._encoder("vaswani", 10000.0, "interleaved", 96).plan
    p = np.array(pos, np.int64).reshape(1, -1)
    x = np.linspace(-1, 1, p.size * 96).reshape(p.size, 96).astype(dtype)
    a = _fill(enc, p.size, None, dtype=dtype, positions=p, add=add, x=x)
    b = _fill(enc, p.size, plan, dtype=dtype, positions=p, add=add, x=x)
    assert np.array_equal(a, b)


def test_plan_is_thread_count_independent():
    enc = _encoding("vaswani", 256)
    plan = kernel.Plan(enc)
    ref = _fill(enc, 1000, plan, num_threads=1)
    for nt in (2, 3, 8):
        assert np.array_equal(_fill(enc, 1000, plan, num_threads=nt), ref)


def test_plan_for_another_spec_is_refused():
    enc = _encoding("vaswani", 64)
    other = _encoding("vaswani", 128)
    t2t = _encoding("tensor2tensor", 64)
    out = np.zeros((4, 64))
    for wrong in (kernel.Plan(other), kernel.Plan(t2t)):
        with pytest.raises(ValueError, match="plan"):
            kernel.fill_rows(out, enc, nseq=1, seq_len=4, plan=wrong)
    assert not out.any()  # refused before anything was written
    with pytest.raises(TypeError):
        kernel.fill_rows(out, enc, nseq=1, seq_len=4, plan="not a plan")


def test_encodings_come_from_conventions_only():
    """An encoding's spec is the library's, made from a Convention's knobs: no
    other object, and the library's refusals name the argument."""
    for bad in ("vaswani", {"d": 8, "nf": 4}, None):
        with pytest.raises(TypeError, match="convention"):
            kernel.Encoder(bad, 8)
    with pytest.raises(TypeError):
        kernel.Plan({"d": 8, "nf": 100})
    with pytest.raises(ValueError, match=r"^base=5e-324 gives frequencies .* overflow"):
        kernel.Encoder(fastpe.Convention(base=5e-324), 64)
    with pytest.raises(ValueError, match=r"^d_model must be an integer >= 1, got 0$"):
        kernel.Encoder(fastpe.Convention(), 0)
    with pytest.raises(ValueError, match=r"^d_model must be an integer <= \d+"):
        kernel.Encoder(fastpe.Convention(), 1 << 41)


def test_encoder_cache_is_bounded_and_skips_huge_plans():
    for d in range(2, kernel.ENCODERS_MAX + 40):
        fastpe.sinusoidal(1, d)
    assert len(kernel.encoders) <= kernel.ENCODERS_MAX
    for d in range(8000, 8000 + 60):  # ~1 MiB plans: the byte budget binds
        fastpe.sinusoidal(1, d)
    held = sum(e.nbytes for e in kernel.encoders.values())
    assert held <= kernel.ENCODERS_MAX_BYTES and len(kernel.encoders) < 60
    wide = 1 << 20  # a plan of ~80 MiB: prepared per call, not kept
    enc = _api._encoder("vaswani", 10000.0, "interleaved", wide)
    assert kernel.plan_nbytes(enc) > kernel.PLAN_MAX_BYTES
    assert enc.plan is None
    # and the public function still fills such a width correctly (one row)
    row = fastpe.sinusoidal(1, wide, offset=3, dtype=np.float64)
    assert np.array_equal(row, fastpe.sinusoidal_at([3], wide, dtype=np.float64))


def test_encoders_are_keyed_by_value_and_failed_calls_cache_nothing():
    kernel.encoders.clear()
    fastpe.sinusoidal(2, 48, base=500)  # an int base: the float's key
    assert list(kernel.encoders) == [("vaswani", 500.0, "interleaved", 48)]
    conv = fastpe.Convention(base=77.0, layout="split")
    fastpe.sinusoidal(2, 48, convention=conv)
    (key,) = [k for k in kernel.encoders if k[0] != "vaswani"]
    assert conv not in key and key[0] == conv._key  # values, not the object
    before = dict(kernel.encoders)
    for bad in (
        dict(base=-1.0),
        dict(layout="diagonal"),
        dict(convention="nope"),
        dict(convention="fairseq", base=3.0),
        dict(base=True),
    ):
        with pytest.raises((ValueError, TypeError)):
            fastpe.sinusoidal(2, 48, **bad)
    assert kernel.encoders == before


@pytest.fixture
def force_streaming():
    old = kernel._set_stream_bytes(0.0)
    try:
        yield
    finally:
        kernel._set_stream_bytes(old)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "name,d_model", [("vaswani", 64), ("vaswani", 37), ("fairseq", 33), ("tensor2tensor", 130)]
)
def test_streaming_stores_give_the_same_bits(force_streaming, dtype, name, d_model):
    # out= (memory the caller already has) takes the streaming path when the
    # threshold is 0; compare with the plain path, in a window of a wider array
    # whose rows start at every alignment (odd widths, odd column offsets)
    ref = fastpe.sinusoidal(300, d_model, offset=-5, dtype=dtype, convention=name)
    for col in (0, 1, 3):
        big = np.full((300, d_model + 7), 7.0, dtype)
        got = fastpe.sinusoidal(
            300, d_model, offset=-5, out=big[:, col : col + d_model], convention=name
        )
        assert np.array_equal(got, ref)
        # nothing outside the window was written
        assert (big[:, :col] == 7).all() and (big[:, col + d_model :] == 7).all()
    t = np.array([0.5, 3.0, 1e4 + 0.25])
    assert np.array_equal(
        fastpe.sinusoidal_at(
            t, d_model, dtype=dtype, convention=name, out=np.empty((3, d_model), dtype)
        ),
        fastpe.sinusoidal_at(t, d_model, dtype=dtype, convention=name),
    )


@contextlib.contextmanager
def _kernel_settings(*, stream_bytes, avx512):
    old_s = kernel._set_stream_bytes(stream_bytes)
    old_w = kernel._set_avx512_writers(avx512)
    try:
        yield
    finally:
        kernel._set_stream_bytes(old_s)
        kernel._set_avx512_writers(old_w)


def _require_avx512_writers():
    """Skip where the AVX-512 writers cannot be on: there both settings run the
    portable loops, and comparing them would prove nothing."""
    if not kernel._avx512_writers_built:
        pytest.skip(
            "no AVX-512 writers in this build (not x86-64 GCC/Clang, or FASTPE_NO_AVX512_WRITERS)"
        )
    if "avx512f" not in fastpe.build_info()["cpu_features"]:
        pytest.skip("the CPU has no AVX-512F: only the portable writers run here")


@pytest.fixture(params=[True, False], ids=["avx512", "portable"])
def writers(request):
    if request.param:
        _require_avx512_writers()
    old = kernel._set_avx512_writers(request.param)
    try:
        yield request.param
    finally:
        kernel._set_avx512_writers(old)


@pytest.mark.parametrize("stream", [True, False], ids=["streaming", "plain"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("layout", ["interleaved", "split"])
@pytest.mark.parametrize("d_model", [14, 17, 33, 64, 100, 257, 1000])
def test_pair_writers_at_every_alignment(writers, stream, dtype, layout, d_model):
    # The AVX-512 writers handle the head (up to the first 64-byte boundary) and
    # the tail through a whole vector block; streaming stores need both rows of a
    # pair aligned alike (row stride a multiple of 64 bytes, as here), else the
    # row buffer path.  Every start, every column offset, both writers, both
    # store kinds: the bits of the portable plain path, nothing outside touched.
    n, width = 300, 1088  # 1088 * 4 and 1088 * 8 are multiples of 64
    with _kernel_settings(stream_bytes=float("inf"), avx512=False):
        ref = fastpe.sinusoidal(n, d_model, offset=-70, dtype=dtype, layout=layout)
    item = np.dtype(dtype).itemsize
    with _kernel_settings(stream_bytes=0.0 if stream else float("inf"), avx512=writers):
        for shift in range(0, 64 // item, 3):  # the array's first byte, mod 64
            flat = np.full(n * width + 64, 7.0, dtype)
            base = (-flat.ctypes.data // item) % (64 // item) + shift
            big = flat[base : base + n * width].reshape(n, width)
            for col in (0, 1, 2, 6, 16, width - d_model):
                big[...] = 7.0
                window = big[:, col : col + d_model]
                got = fastpe.sinusoidal(
                    n, d_model, offset=-70, dtype=dtype, layout=layout, out=window
                )
                assert got is window
                assert np.array_equal(got, ref), (shift, col)
                assert (big[:, :col] == 7).all() and (big[:, col + d_model :] == 7).all()
            assert (flat[:base] == 7).all() and (flat[base + n * width :] == 7).all()


# rows alone on both sides of their block's centre (B is 128 up to 1024 columns,
# 32 at 4096), position 0 (evaluated directly) and a far one
SINGLE_POSITIONS = np.array(
    [0, 1, 2, 63, 64, 65, 100, 127, 128, -1, -64, -65, -200, 950, 1000, 10**6 + 3]
)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "enc",
    [
        dict(layout="interleaved"),
        dict(layout="split"),
        dict(convention=fastpe.Convention(layout="split_cos_first", odd="zero")),
        dict(convention=fastpe.Convention(odd="zero")),
    ],
    ids=["interleaved", "split", "split_cos_first", "interleaved_zero"],
)
def test_single_row_writers_at_every_alignment(dtype, enc):
    # Rows written one at a time -- a one-row fill, the first half-block of a table
    # from position 0, explicit positions, add_to's float64 row buffer -- by the
    # AVX-512 single-row writers (and, streaming, into the row buffer that is then
    # copied), at every start alignment: windows at columns 0..15 of a wider array
    # whose rows start at every offset mod 64 bytes.  Every width up to 70 (below,
    # at and past one vector block, every tail length) and a few wide ones.  The
    # bits of the portable loops with the writers on and off, nothing outside the
    # window touched.
    _require_avx512_writers()
    item = np.dtype(dtype).itemsize
    pos, n = SINGLE_POSITIONS, 64
    kw = dict(dtype=dtype, **enc)
    calls = [  # (rows, initial x for add_to or None, fill(window))
        (1, None, lambda w, d: fastpe.sinusoidal(1, d, offset=1000, out=w, **kw)),
        (1, None, lambda w, d: fastpe.sinusoidal(1, d, offset=950, out=w, **kw)),
        (1, None, lambda w, d: fastpe.sinusoidal(1, d, offset=0, out=w, **kw)),
        (n, None, lambda w, d: fastpe.sinusoidal(n, d, out=w, **kw)),
        (len(pos), None, lambda w, d: fastpe.sinusoidal_at(pos, d, out=w, **kw)),
        (len(pos), 0.375, lambda w, d: fastpe.add_to(w[None], positions=pos, **enc)),
        (1, -2.5, lambda w, d: fastpe.add_to(w[None], offset=1000, **enc)),
    ]
    for d in [*list(range(1, 71)), 127, 257, 1000, 4096]:
        width = d + 16 + 1  # odd: consecutive rows at every alignment
        flat = np.full(n * width + 64, 7.0, dtype)
        base = (-flat.ctypes.data // item) % (64 // item)
        big = flat[base : base + n * width].reshape(n, width)
        refs = []
        with _kernel_settings(stream_bytes=float("inf"), avx512=False):
            for rows, x, fill in calls:
                w = np.zeros((rows, d), dtype) if x is None else np.full((rows, d), x, dtype)
                fill(w, d)
                refs.append(w)
        for on, stream in [(True, float("inf")), (True, 0.0), (False, float("inf"))]:
            with _kernel_settings(stream_bytes=stream, avx512=on):
                for col in range(16):
                    for (rows, x, fill), ref in zip(calls, refs, strict=False):
                        big[...] = 7.0
                        w = big[:rows, col : col + d]
                        if x is not None:
                            w[...] = x
                        fill(w, d)
                        assert np.array_equal(w, ref), (d, col, rows, on, stream)
                        w[...] = 7.0
                        assert (big == 7).all(), (d, col, rows, on, stream)
        assert (flat == 7).all()


def test_avx512_writer_switch():
    old = kernel._set_avx512_writers(False)
    try:
        assert kernel._set_avx512_writers(True) is False
        # on only where the CPU has AVX-512F and the build has the writers
        has = "avx512f" in fastpe.build_info()["cpu_features"] and kernel._avx512_writers_built
        assert kernel._set_avx512_writers(True) == has
        assert fastpe.build_info()["streaming_stores"] in ("avx512", "sse2", "plain")
        assert (fastpe.build_info()["streaming_stores"] == "avx512") == has
    finally:
        kernel._set_avx512_writers(old)


def test_streaming_threshold_default_is_sane():
    old = kernel._set_stream_bytes(0.0)
    assert kernel._set_stream_bytes(old) == (0.0, 0.0)
    assert kernel._set_stream_bytes(old) == old
    f64, f32 = old
    assert 8 << 20 <= f64 <= f32 < 1 << 40
