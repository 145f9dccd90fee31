"""Leaks and huge requests.

10,000 calls across the API (successes, out=, and error paths) must not grow
the resident set by 1 MB, nor change the reference counts of the arguments;
requests for tables that overflow 64 bits or exceed the machine's RAM must fail
before anything is allocated or written.
"""

import gc
import os
import sys
import time

import numpy as np
import pytest

import fastpe

linux_only = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="RSS read from /proc/self/statm"
)
# Under AddressSanitizer freed memory sits in quarantine and RSS means nothing.
asan = "libasan" in os.environ.get("LD_PRELOAD", "")


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


OUT32 = np.empty((16, 24), np.float32)
OUT64_WIDE = np.zeros((16, 40))
BASE = 12345.678
DTYPE = np.dtype(np.float64)
Q = np.ones((1, 4, 2, 16), np.float32)  # rotations keep its norm: calls can repeat
C2, S2 = np.empty((2, 16), np.float32), np.empty((2, 16), np.float32)

# (callable, expected exception or None)
CALLS = [
    (lambda: fastpe.sinusoidal(16, 24), None),
    (lambda: fastpe.sinusoidal(40, 33, dtype=DTYPE, base=BASE, layout="split", offset=-5), None),
    (lambda: fastpe.sinusoidal(16, 24, out=OUT32, base=BASE), None),
    (lambda: fastpe.sinusoidal(16, 24, out=OUT64_WIDE[:, 8:32], num_threads=2), None),
    (lambda: fastpe.sinusoidal(0, 5), None),
    (lambda: fastpe.reference(8, 6, base=BASE, dtype=DTYPE), None),
    (lambda: fastpe.build_info(), None),
    (lambda: fastpe.sinusoidal(-1, 4), ValueError),
    (lambda: fastpe.sinusoidal(4, 4, base=-BASE), ValueError),
    (lambda: fastpe.sinusoidal(4, 4, base=10**400), ValueError),
    (lambda: fastpe.sinusoidal(4, 4, dtype="int8"), TypeError),
    (lambda: fastpe.sinusoidal(16, 24, out=OUT32, dtype=DTYPE), TypeError),
    (lambda: fastpe.sinusoidal(15, 24, out=OUT32), ValueError),
    (lambda: fastpe.sinusoidal(4, 4, layout="zigzag"), ValueError),
    (lambda: fastpe.sinusoidal(4, 4, offset=2**62), ValueError),
    (lambda: fastpe.sinusoidal(10**6, 10**6), MemoryError),
    (lambda: fastpe.reference(4, 4, num_threads=2), TypeError),
    (lambda: fastpe.reference("4", 4), TypeError),
    (lambda: fastpe.apply_rope(Q, offset=7), None),  # the small-call path
    (lambda: fastpe.apply_rope(Q, positions=[[3, 9]]), None),
    (lambda: fastpe.apply_rope(Q, offset=np.array([2]), layout="interleaved"), None),
    (lambda: fastpe.rope_cache(16, {"rope_type": "linear", "factor": 2.0}, seq_len=4), None),
    (lambda: fastpe.rope_cache(16, seq_len=4, offset=9), None),  # the small-call path
    (lambda: fastpe.rope_cache(16, positions=np.array([4, 1]), out=(C2, S2)), None),
    (lambda: fastpe.rope_cache(16, positions=np.array([2**61])), ValueError),
    (lambda: fastpe.rope_cache(16, seq_len=2, out=(C2, C2)), ValueError),
    (lambda: fastpe.apply_rope(Q, head_dim=32), ValueError),
    (lambda: fastpe.apply_rope(Q[..., ::2], offset=1), ValueError),
    (lambda: fastpe.apply_rope(Q, offset=2**61), ValueError),
]


def _round():
    for fn, exc in CALLS:
        if exc is None:
            fn()
        else:
            try:
                fn()
            except exc:
                pass
            else:  # pragma: no cover
                raise AssertionError(f"{exc.__name__} expected")


@linux_only
@pytest.mark.skipif(asan, reason="RSS is meaningless under ASan's quarantine")
def test_ten_thousand_calls_do_not_grow_rss():
    n_rounds = 10_000 // len(CALLS) + 1  # >= 10,000 calls in all
    for _ in range(50):  # warm up caches, allocator pools, OpenMP threads
        _round()
    gc.collect()
    before = rss_bytes()
    for _ in range(n_rounds):
        _round()
    gc.collect()
    growth = rss_bytes() - before
    assert growth < 2**20, (
        f"RSS grew by {growth / 1024:.0f} KiB over {n_rounds * len(CALLS)} calls"
    )


def test_argument_refcounts_unchanged():
    out = np.empty((16, 24), np.float32)
    base = float(BASE * 3)  # a fresh float object, not an interned constant
    # a descriptor of our own: np.dtype("f8") is a NumPy-wide singleton whose
    # count moves with every float64 array anywhere
    dtype = np.dtype(np.float64, metadata={"fastpe-test": 1})
    layout = "".join(["spl", "it"])  # a fresh str
    objs = [out, base, dtype, layout]
    before = [sys.getrefcount(o) for o in objs]
    for _ in range(1000):
        fastpe.sinusoidal(16, 24, out=out, base=base, layout=layout, num_threads=2)
        fastpe.sinusoidal(16, 24, base=base, dtype=dtype, layout=layout)
        fastpe.reference(4, 6, base=base, dtype=dtype, layout=layout)
        for bad in (
            dict(out=out, dtype=dtype),
            dict(out=out, offset=2**62),
            dict(base=-base, out=out),
        ):
            # try/except, not pytest.raises: its ExceptionInfo keeps the traceback
            # (and so `out`) alive, which would look like a leak
            try:
                fastpe.sinusoidal(16, 24, layout=layout, **bad)
            except (ValueError, TypeError):
                pass
            else:  # pragma: no cover
                raise AssertionError(f"{bad} accepted")
    del bad  # the loop variable itself holds `out`
    gc.collect()
    assert [sys.getrefcount(o) for o in objs] == before


def test_rope_argument_refcounts_unchanged():
    q = np.ones((1, 4, 2, 16), np.float32)
    k = np.ones((1, 2, 2, 16), np.float32)
    params = {"rope_type": "linear", "factor": float(2.5 * 2)}  # fresh dict and float
    offset = int("123456")  # a fresh int beyond the small-int cache
    objs = [q, k, params, params["factor"], offset]
    # the first call plans the rule: its cache key holds the values (immutable ones)
    fastpe.apply_rope(q, k, rope_parameters=params, offset=offset)
    before = [sys.getrefcount(o) for o in objs]
    for _ in range(1000):
        fastpe.apply_rope(q, k, rope_parameters=params, offset=offset)  # small-call path
        fastpe.apply_rope(q, k, rope_parameters=params, positions=[offset, offset + 1])
        try:
            fastpe.apply_rope(q, k[:, :, :1], rope_parameters=params, offset=offset)
        except ValueError:
            pass
        else:  # pragma: no cover
            raise AssertionError("q and k of different lengths accepted")
    gc.collect()
    assert [sys.getrefcount(o) for o in objs] == before


# ------------------------------------------------------------------ huge requests

HUGE = [
    (2**40, 2**40),  # product overflows int64
    (2**62, 4),  # bytes overflow int64
    (2**63 - 1, 2),
    (10**6, 10**6),  # 4-8 TB: larger than any machine's RAM here
    (2**33, 64),  # 2 TiB
    (1, 2**45),  # one absurdly wide row
]


@pytest.mark.parametrize("fn", [fastpe.sinusoidal, fastpe.reference])
@pytest.mark.parametrize("shape", HUGE)
def test_huge_requests_fail_before_allocating(fn, shape):
    rss0 = rss_bytes() if sys.platform.startswith("linux") else 0
    t0 = time.perf_counter()
    with pytest.raises((MemoryError, ValueError)) as info:
        fn(*shape)
    elapsed = time.perf_counter() - t0
    assert "table" in str(info.value) or "seq_len" in str(info.value), info.value
    assert elapsed < 1.0, elapsed  # refused up front, nothing was filled
    if sys.platform.startswith("linux") and not asan:
        assert rss_bytes() - rss0 < 2**20


def test_larger_than_ram_is_a_memoryerror_naming_the_size():
    ram = fastpe._validate.physical_memory()
    if ram is None:
        pytest.skip("the OS does not report its RAM")
    rows = ram // (4 * 64) + 1  # one row more than fits, float32, 64 columns
    with pytest.raises(MemoryError, match=r"\(\d+, 64\) table .* GiB"):
        fastpe.sinusoidal(rows, 64)


def test_huge_request_with_out_leaves_out_untouched():
    out = np.full((4, 4), 3.0)
    with pytest.raises(ValueError):
        fastpe.sinusoidal(2**62, 4, out=out)
    assert np.all(out == 3.0)
