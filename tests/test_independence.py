"""Every entry is a pure function of (position, column): the bits of every public
function do not depend on how the work is split.

One harness for all of them: a generated call of each public function is run
once on one thread with the default settings, then again under every way the
kernel can split or route the same work -- thread counts, fills cut into small
interruptible chunks, the serial threshold (one thread even where a team would
start, or a team for the smallest fill), the AVX-512 writers on and off -- and
every result must be bitwise the first.  A table's rows must also be bitwise
the rows computed one call each (a row alone is written by other code than a
mirrored pair).  Accuracy against independent truth is tested elsewhere
(test_hostile.py's oracles, test_accuracy.py, test_conventions.py); here the
reference is fastpe itself, under other settings.
"""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fastpe
from fastpe import kernel

AVX512 = kernel._avx512_writers_built and "avx512f" in fastpe.build_info()["cpu_features"]

CONVENTIONS = st.sampled_from(
    [
        "vaswani",
        "fairseq",
        "diffusers",
        "tensor2tensor",
        "gptj",
        fastpe.Convention(layout="split_cos_first", odd="zero", position_scale=0.25),
    ]
)
try:
    import ml_dtypes

    _BF16 = [np.dtype(ml_dtypes.bfloat16)]
except ImportError:  # bfloat16 is an optional extra
    _BF16 = []
DTYPES = st.sampled_from([np.float32, np.float64, np.float16, *_BF16])


@contextlib.contextmanager
def split(*, chunk=None, serial_below=None, avx512=None, stream=None):
    """Run the block under other kernel settings (restored after)."""
    old_stream = kernel._set_stream_bytes(stream) if stream is not None else None
    old_chunk = kernel._set_chunk_entries(chunk) if chunk is not None else None
    old_serial = kernel._set_serial_below(serial_below) if serial_below is not None else None
    old_w = kernel._set_avx512_writers(avx512) if avx512 is not None else None
    try:
        yield
    finally:
        if old_chunk is not None:
            kernel._set_chunk_entries(old_chunk)
        if old_serial is not None:
            kernel._set_serial_below(old_serial)
        if old_w is not None:
            kernel._set_avx512_writers(old_w)
        if old_stream is not None:
            kernel._set_stream_bytes(old_stream)


# (threads, settings) under which every call must give the one-thread bits
SPLITS = [
    (2, {}),
    (3, {}),
    (7, {}),
    (None, {}),
    (2, dict(serial_below=0)),  # a team even for a one-row fill
    (3, dict(serial_below=2**62)),  # one thread whatever was asked
    (1, dict(chunk=1)),
    (3, dict(chunk=1, serial_below=0)),
    (2, dict(chunk=1000)),
    (1, dict(stream=0.0)),
    (3, dict(stream=0.0, serial_below=0)),  # non-temporal stores
    (1, dict(avx512=False)),
    (2, dict(avx512=False, serial_below=0)),
    (2, dict(avx512=False, stream=0.0, chunk=1000)),
] + (
    [
        (1, dict(avx512=True)),
        (3, dict(avx512=True, chunk=777, serial_below=0)),
        (2, dict(avx512=True, stream=0.0)),
    ]
    if AVX512
    else []
)


@st.composite
def calls(draw):
    """(name, fn(num_threads) -> result array): one call of a public function."""
    kind = draw(
        st.sampled_from(
            [
                "sinusoidal",
                "sinusoidal_at",
                "add_to",
                "add_to_positions",
                "sinusoidal_2d",
                "rope_cache",
                "apply_rope",
            ]
        )
    )
    d = draw(st.sampled_from([1, 2, 7, 16, 33, 64, 130, 1000]))
    conv = draw(CONVENTIONS)
    if conv == "gptj" and d % 2:
        d += 1
    dtype = draw(DTYPES)
    kw = dict(convention=conv)
    if conv == "vaswani":
        kw["layout"] = draw(st.sampled_from(["interleaved", "split"]))
    if kind == "sinusoidal":
        n, off = draw(st.integers(0, 600)), draw(st.integers(-700, 10**6))
        return kind, lambda nt: fastpe.sinusoidal(
            n, d, offset=off, dtype=dtype, num_threads=nt, **kw
        )
    if kind == "sinusoidal_at":
        pos = np.array(
            draw(
                st.lists(
                    st.one_of(
                        st.integers(-5000, 5000), st.floats(-5000, 5000).map(lambda v: v / 7)
                    ),
                    max_size=300,
                )
            ),
            dtype=np.float64,
        )
        return kind, lambda nt: fastpe.sinusoidal_at(pos, d, dtype=dtype, num_threads=nt, **kw)
    if kind == "rope_cache":
        ids = np.array(draw(st.lists(st.integers(0, 10**6), max_size=300)), dtype=np.int64)
        params = draw(
            st.sampled_from(
                [
                    None,
                    {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096},
                ]
            )
        )
        hd = 2 * max(d // 2, 1)
        return kind, lambda nt: np.stack(
            fastpe.rope_cache(hd, params, positions=ids, dtype=dtype, num_threads=nt)
        )
    if kind == "apply_rope":
        dtype = dtype if np.dtype(dtype).itemsize > 2 else np.float32  # (no 16-bit rotation)
        hd = 2 * max(d // 2, 1)
        q0 = np.random.default_rng(hd).standard_normal((2, 3, 40, hd)).astype(dtype)
        off = draw(
            st.one_of(
                st.integers(0, 10**6), st.lists(st.integers(0, 10**6), min_size=2, max_size=2)
            )
        )
        lay = draw(st.sampled_from(["half", "interleaved"]))
        return kind, lambda nt: fastpe.apply_rope(
            q0.copy(), offset=off, layout=lay, num_threads=nt
        )
    if kind == "sinusoidal_2d":
        h, w = draw(st.integers(0, 40)), draw(st.integers(0, 40))
        conv2 = draw(st.sampled_from(["mae", "timm"]))
        return kind, lambda nt: fastpe.sinusoidal_2d(
            h, w, 4 * max(d // 4, 1), convention=conv2, dtype=dtype, num_threads=nt
        )
    batch, seq = draw(st.integers(1, 4)), draw(st.integers(0, 200))
    x0 = np.random.default_rng(seq).standard_normal((batch, seq, d)).astype(dtype)
    scale = draw(st.sampled_from([1.0, 0.5, -3.0]))
    if kind == "add_to":
        off = draw(
            st.one_of(
                st.integers(-1000, 10**5),
                st.lists(st.integers(0, 10**5), min_size=batch, max_size=batch),
            )
        )
        return kind, lambda nt: fastpe.add_to(
            x0.copy(), offset=off, scale=scale, num_threads=nt, **kw
        )
    pos = draw(
        st.one_of(
            st.lists(st.integers(0, 10**4), min_size=seq, max_size=seq),
            st.lists(st.floats(0, 10**4), min_size=seq, max_size=seq).map(np.array),
        )
    )
    return kind, lambda nt: fastpe.add_to(
        x0.copy(), positions=pos, scale=scale, num_threads=nt, **kw
    )


@settings(max_examples=40, deadline=None)
@given(calls())
def test_every_split_gives_the_one_thread_bits(call):
    name, fn = call
    want = fn(1)
    for nt, how in SPLITS:
        with split(**how):
            got = fn(nt)
        assert got.dtype == want.dtype and got.shape == want.shape
        assert got.tobytes() == want.tobytes(), (name, nt, how)


@settings(max_examples=30, deadline=None)
@given(
    st.integers(-600, 10**6),
    st.integers(1, 300),
    DTYPES,
    CONVENTIONS,
    st.sampled_from([8, 30, 96, 1024, 4096]),
)
def test_rows_alone_are_the_table_rows(offset, n, dtype, conv, d):
    # A long fill writes rows centre+a and centre-a together; one-row calls write
    # each alone (other writers, other code): the same bits.
    table = fastpe.sinusoidal(n, d, offset=offset, dtype=dtype, convention=conv)
    for r in sorted({0, min(1, n - 1), n // 3, n // 2, n - 1}):
        row = fastpe.sinusoidal(1, d, offset=offset + r, dtype=dtype, convention=conv)
        assert np.array_equal(row[0], table[r]), r
        at = fastpe.sinusoidal_at(np.array([offset + r]), d, dtype=dtype, convention=conv)
        assert np.array_equal(at[0], table[r]), r


@pytest.mark.parametrize(
    "name,d_model,layout",
    [
        ("vaswani", 37, "interleaved"),
        ("vaswani", 20, "split"),
        ("tensor2tensor", 9, "interleaved"),
        ("fairseq", 16, "interleaved"),
    ],
)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, *_BF16])
def test_every_row_of_a_block_alone_equals_the_table(name, d_model, layout, dtype):
    # a long fill writes rows centre+a and centre-a together; a one-row fill
    # writes each alone: the same bits for every offset within a block (B <= 64)
    kw = dict(convention=name, dtype=dtype)
    if name == "vaswani":
        kw["layout"] = layout
    for nt in (1, 2):
        table = fastpe.sinusoidal(200, d_model, offset=-100, num_threads=nt, **kw)
        for k in range(-100, 100):
            row = fastpe.sinusoidal(1, d_model, offset=k, **kw)
            assert np.array_equal(row[0], table[k + 100]), k


def test_the_splits_really_differ():
    # The harness proves nothing if its settings do not reach the kernel: each
    # must change what the kernel reports or does.
    if AVX512:
        assert kernel._set_avx512_writers(False) is True
        assert fastpe.build_info()["streaming_stores"] != "avx512"
        kernel._set_avx512_writers(True)
    old = kernel._set_serial_below(0)
    try:
        assert kernel._set_serial_below(old) == 0
    finally:
        kernel._set_serial_below(old)
    old = kernel._set_chunk_entries(1)
    try:
        assert kernel._set_chunk_entries(old) == 1
    finally:
        kernel._set_chunk_entries(old)


@pytest.mark.skipif(
    not AVX512,
    reason="the CPU or the build has no AVX-512 writers: the harness runs the portable ones only",
)
def test_harness_includes_the_avx512_writers():
    assert any(how.get("avx512") for _, how in SPLITS)
