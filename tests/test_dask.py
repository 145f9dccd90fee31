"""fastpe.dask: bitwise equality with the single-process functions for every
chunking, on the threaded scheduler and on a real 2-process LocalCluster, plus a
table several times a worker's memory limit reduced block by block."""

import os
import re
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from platform_info import UNDER_WINE

import fastpe
import fastpe.dask as fd

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

DOC = Path(__file__).resolve().parents[1] / "docs" / "dask_ray.md"

# Functions of this module travel to the workers by value (under importlib mode
# the workers cannot import this file by name).
try:
    import cloudpickle

    if __name__ in sys.modules:
        cloudpickle.register_pickle_by_value(sys.modules[__name__])
except ImportError:  # pragma: no cover - distributed depends on cloudpickle
    pass


def _same(got, want, **params):
    assert got.dtype == want.dtype and got.shape == want.shape, params
    # bitwise, NaN-safe: compare the bit patterns
    assert np.array_equal(got.view(f"u{got.itemsize}"), want.view(f"u{want.itemsize}")), params


# ----------------------------------------------------------------- the lazy table


@pytest.mark.parametrize(
    "chunks",
    [
        (128, -1),  # even row chunks
        ((300, 1, 699), (65,)),  # uneven, with a one-row chunk
        -1,  # a single block
        "auto",
        ((500, 500), (10, 55)),  # column chunks
        (256, 16),  # a grid of row and column chunks
    ],
)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_table_bitwise_any_chunking(chunks, dtype):
    P = fd.sinusoidal(1000, 65, chunks=chunks, offset=-7, dtype=dtype)
    assert P.dtype == np.dtype(dtype)
    want = fastpe.sinusoidal(1000, 65, offset=-7, dtype=dtype)
    _same(P.compute(scheduler="threads"), want, chunks=chunks, dtype=dtype)
    _same(P.compute(scheduler="sync"), want, chunks=chunks, dtype=dtype)


@pytest.mark.parametrize(
    "convention,kw,d",
    [
        ("vaswani", dict(base=500.0, layout="split"), 64),
        ("vaswani", dict(), 7),
        ("fairseq", dict(offset=-3), 33),  # the padding row 1 is all zeros
        ("tensor2tensor", dict(offset=10**9), 128),
        ("diffusers", dict(), 32),
        ("gptj", dict(num_threads=2), 64),
        (fastpe.Convention.diffusers(flip_sin_to_cos=True, downscale_freq_shift=0.0), dict(), 16),
    ],
)
def test_table_conventions_and_offsets(convention, kw, d):
    P = fd.sinusoidal(777, d, chunks=(100, -1), convention=convention, **kw)
    want = fastpe.sinusoidal(777, d, convention=convention, **kw)
    _same(P.compute(scheduler="threads"), want, convention=convention, **kw)


def test_table_edges_and_defaults():
    P = fd.sinusoidal(0, 8)
    assert P.shape == (0, 8) and P.compute().shape == (0, 8)
    P = fd.sinusoidal(5000, 512)
    assert P.dtype == np.float32 and P.chunks[1] == (512,)  # rows only by default
    _same(P.compute(), fastpe.sinusoidal(5000, 512))
    # deterministic graph names: same arguments, same name; any change, another
    assert fd.sinusoidal(100, 8, chunks=10).name == fd.sinusoidal(100, 8, chunks=10).name
    assert fd.sinusoidal(100, 8, chunks=10).name != fd.sinusoidal(100, 8, chunks=10, offset=1).name
    assert (
        fd.sinusoidal(100, 8, chunks=10).name != fd.sinusoidal(100, 8, chunks=10, base=99.0).name
    )


def _error(fn, *args, **kwargs):
    with pytest.raises(Exception) as info:
        fn(*args, **kwargs)
    return type(info.value), str(info.value)


@pytest.mark.parametrize(
    "args,kw",
    [
        ((-1, 8), {}),
        ((8, 0), {}),
        ((8, 8), dict(base=-1.0)),
        ((8, 8), dict(dtype="int32")),
        ((8, 8), dict(layout="diagonal")),
        ((8, 8), dict(convention="bogus")),
        ((8, 8), dict(convention="fairseq", base=500.0)),
        ((8, 7), dict(convention="gptj")),
        ((10, 512), dict(offset=2**60)),  # range of exact angle reduction
        ((8, 8), dict(num_threads=0)),
        ((8.0, 8), {}),
    ],
)
def test_table_errors_at_build_time_match_fastpe(args, kw):
    """Errors surface when the graph is built, with fastpe's own messages."""
    assert _error(fd.sinusoidal, *args, **kw) == _error(fastpe.sinusoidal, *args, **kw)


def test_table_bad_chunks():
    with pytest.raises(ValueError, match="chunks"):
        fd.sinusoidal(100, 8, chunks=(10, 10, 10))


def test_import_error_names_the_extra(monkeypatch):
    for mod in [m for m in sys.modules if m == "dask" or m.startswith("dask.")]:
        monkeypatch.delitem(sys.modules, mod)
    monkeypatch.setitem(sys.modules, "dask", None)
    with pytest.raises(ImportError, match=re.escape("pip install 'fastpe[dask]'")):
        fd.sinusoidal(4, 4)
    with pytest.raises(ImportError, match=re.escape("pip install 'fastpe[dask]'")):
        fd.add_to(np.zeros((4, 4), np.float32))


# ----------------------------------------------------------------- the fused add


@pytest.fixture
def emb(rng):
    return rng.standard_normal((3, 4, 50, 33)).astype(np.float32)


@pytest.mark.parametrize(
    "chunks",
    [
        (3, 4, 50, 33),  # one block
        (1, 4, 50, 33),  # batch
        (3, 1, 17, 33),  # inner batch and seq, uneven
        (2, 3, 7, 10),  # every axis, columns too
        (3, 4, 50, 1),  # one column per block
    ],
)
@pytest.mark.parametrize(
    "how",
    [
        "plain",
        "offset",
        "offsets",
        "offsets_bcast",
        "positions",
        "positions_offsets",
        "float_positions",
        "dask_offsets",
        "dask_positions",
        "fairseq",
    ],
)
def test_add_bitwise_any_chunking(emb, rng, chunks, how):
    offs = np.arange(12).reshape(3, 4) * 1000 - 5000
    pos = rng.integers(-300, 300, (4, 50))
    kw = dict(
        plain={},
        offset=dict(offset=123),
        offsets=dict(offset=offs),
        offsets_bcast=dict(offset=offs[:, :1]),
        positions=dict(positions=pos),
        positions_offsets=dict(positions=pos[None], offset=offs[:1]),
        float_positions=dict(positions=pos * 0.37 + 0.5),
        dask_offsets=dict(offset=da.from_array(offs, chunks=(2, 3))),
        dask_positions=dict(positions=da.from_array(pos, chunks=(1, 9)), offset=offs),
        fairseq=dict(positions=np.abs(pos), convention="fairseq"),
    )[how]
    local = {k: (v.compute() if isinstance(v, da.Array) else v) for k, v in kw.items()}
    x = da.from_array(emb, chunks=chunks)
    y = fd.add_to(x, scale=5.75, **kw)
    assert isinstance(y, da.Array) and y.chunks == x.chunks and y.dtype == x.dtype
    want = fastpe.add_to(emb.copy(), scale=5.75, **local)
    _same(y.compute(scheduler="threads"), want, chunks=chunks, how=how)
    assert np.array_equal(x.compute(), emb)  # the input blocks are not written


def test_add_float64_2d_and_unchanged_input(rng):
    a = rng.standard_normal((1001, 96))
    x = da.from_array(a, chunks=(250, 32))
    y = fd.add_to(x, offset=-40, layout="split", base=77.0)
    want = fastpe.add_to(a.copy(), offset=-40, layout="split", base=77.0)
    _same(y.compute(scheduler="threads"), want)
    assert np.array_equal(a, x.compute())


@pytest.mark.parametrize(
    "x_shape,kw",
    [
        ((2, 8, 16), dict(offset=[1, 2, 3])),  # offsets do not broadcast
        ((2, 8, 16), dict(positions=np.zeros((3, 8), int))),
        ((2, 8, 16), dict(positions=np.zeros(8) + 0.5, offset=2)),  # float positions + offset
        ((2, 8, 16), dict(offset=np.array([0.5, 1.0]))),  # float offsets
        ((2, 8, 16), dict(offset=2**60)),
        ((2, 8, 16), dict(positions=np.array([2**60] * 8))),
        ((2, 8, 16), dict(scale=float("nan"))),
        ((2, 8, 16), dict(scale="2")),
        ((2, 8, 16), dict(convention="fairseq", layout="split")),
        ((2, 8, 16), dict(num_threads=-1)),
        ((2, 8, 16), dict(positions=np.array([True] * 8))),
        ((2, 8, 16), dict(offset=np.array(2.0))),  # a 0-d array is an array: integers only
        ((2, 8, 16), dict(offset=[1, 2], positions=np.zeros(8) + 0.5)),
        ((8,), {}),
    ],
)
def test_add_errors_at_build_time_match_fastpe(x_shape, kw):
    a = np.zeros(x_shape, np.float32)
    got = _error(fd.add_to, da.from_array(a, chunks=3), **kw)
    assert got == _error(fastpe.add_to, a, **kw)


def test_add_type_errors():
    with pytest.raises(TypeError, match=r"dask\.array\.Array"):
        fd.add_to(np.zeros((4, 4), np.float32))
    with pytest.raises(TypeError, match="float32 or float64"):
        fd.add_to(da.zeros((4, 4), dtype=np.int32))
    x = da.zeros((2, 4, 4), dtype=np.float32)
    with pytest.raises(TypeError, match="offset must be integers, got dtype float64"):
        fd.add_to(x, offset=da.zeros(2))
    with pytest.raises(TypeError, match="positions must be integers or real numbers"):
        fd.add_to(x, positions=da.zeros(4, dtype=bool))
    with pytest.raises(ValueError, match="float positions cannot be combined with offset"):
        fd.add_to(x, offset=da.ones(2, dtype=int), positions=da.zeros(4))
    with pytest.raises(ValueError, match=r"offset of shape \(3,\) does not broadcast"):
        fd.add_to(x, offset=da.ones(3, dtype=int))


def test_add_empty_batch_with_empty_offset_list():
    a = np.zeros((0, 5, 8), np.float32)
    got = fd.add_to(da.from_array(a), offset=[]).compute()
    assert got.shape == (0, 5, 8)
    assert got.dtype == np.float32
    assert fastpe.add_to(a.copy(), offset=[]).shape == (0, 5, 8)


def test_lazy_positions_out_of_range_raise_in_the_task():
    x = da.zeros((2, 8, 16), dtype=np.float32, chunks=(1, 8, 16))
    y = fd.add_to(x, positions=da.full((8,), 2**60, dtype=np.int64))  # builds fine
    with pytest.raises(ValueError, match="within"):
        y.compute(scheduler="sync")


def test_doc_example_runs():
    """The Dask example of docs/dask_ray.md, as printed."""
    code = _doc_block(DOC.read_text(), "dask-example")
    exec(compile(code, str(DOC), "exec"), {})


def _doc_block(text, marker):
    m = re.search(r"```python\n# " + marker + r"\n(.*?)```", text, re.S)
    assert m, f"no ```python block starting with '# {marker}' in {DOC}"
    return m.group(1)


# ----------------------------------------------------------------- a real cluster

MEMORY_LIMIT = 400 * 10**6
TIMEOUT = 300  # seconds: a lost task fails the test instead of hanging the suite


@pytest.fixture(scope="module")
def client():
    """Two single-threaded worker processes on loopback, no dashboard.  (The
    scheduler still serves its plain HTTP routes; on a free loopback port rather
    than 8787, which parallel runs would fight over.)"""
    if "libasan" in os.environ.get("LD_PRELOAD", ""):
        # tools/sanitize.sh: ASan's shadow memory pushes each worker process past the
        # memory limit these tests set, and the nanny kills it.  The cluster tests run
        # in the normal builds; the sanitizer still covers fastpe.dask on the threaded
        # scheduler (every other test in this file).
        pytest.skip("cluster workers under ASan exceed the tests' memory limit")
    if UNDER_WINE:
        # distributed's Windows clock (distributed/metrics.py) calibrates by waiting for
        # time.time() to return one value five times in ten calls; Windows' clock ticks
        # every ~16 ms, Wine's every microsecond, so the scheduler never starts.
        pytest.skip("distributed's Windows clock calibration never ends under Wine")
    # The helpers below travel to the workers by value: by reference they name
    # this test module, which a worker cannot import when the suite runs from
    # outside the source tree (an installed wheel), and the result never came.
    import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    cluster = distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        memory_limit=MEMORY_LIMIT,
        host="127.0.0.1",
        dashboard_address=None,
        silence_logs=40,
        scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
    )
    c = distributed.Client(cluster)
    try:
        yield c
    finally:
        c.close()
        cluster.close()


def test_cluster_table_and_add(client, rng):
    P = fd.sinusoidal(
        20_000, 130, chunks=((7_000, 7_000, 5_999, 1), (130,)), offset=12_345, dtype="float64"
    )
    _same(
        client.compute(P).result(timeout=TIMEOUT),
        fastpe.sinusoidal(20_000, 130, offset=12_345, dtype="float64"),
    )
    P = fd.sinusoidal(3_000, 64, chunks=(1_000, 16))
    _same(client.compute(P).result(timeout=TIMEOUT), fastpe.sinusoidal(3_000, 64))

    a = rng.standard_normal((6, 300, 64)).astype(np.float32)
    offs = rng.integers(0, 10_000, 6)
    pos = rng.integers(0, 5_000, (6, 300))
    x = da.from_array(a, chunks=(4, 128, 32))
    for kw in (dict(offset=offs), dict(positions=da.from_array(pos, chunks=(3, 100)))):
        y = fd.add_to(x, scale=8.0, **kw)
        local = {k: (v.compute() if isinstance(v, da.Array) else v) for k, v in kw.items()}
        _same(
            client.compute(y).result(timeout=TIMEOUT), fastpe.add_to(a.copy(), scale=8.0, **local)
        )
    # the tasks really ran in the worker processes
    assert len(client.scheduler_info()["workers"]) == 2


def _checksum(block):
    """A bitwise checksum of one block, shape (1, 1)."""
    return block.view(np.uint32).sum(dtype=np.uint64).reshape(1, 1)


def _reset_peak_rss():
    """Reset this process's peak RSS (VmHWM), Linux >= 4.0; False where refused."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _peak_rss():
    """Peak RSS in bytes: VmHWM, not getrusage's ru_maxrss, which survives fork +
    exec and so reports the parent's size at the time (pytest's, for the workers)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc/self/status")
def test_cluster_table_larger_than_workers_is_reduced_block_by_block(client):
    """A 2 GiB table (5x a worker's 400 MB limit, 2.7x the cluster's) in 64 MiB
    row chunks, reduced to one checksum per block: never materialised, each
    worker's peak RSS stays under its limit, and the checksums equal those of
    the single-process table computed here chunk by chunk."""
    rows, d, step = 2**19, 1024, 2**14  # 2**29 float32 = 2 GiB; 64 MiB blocks
    table_bytes = rows * d * 4
    assert table_bytes > 5 * MEMORY_LIMIT
    P = fd.sinusoidal(rows, d, chunks=(step, -1))
    sums = P.map_blocks(_checksum, chunks=((1,) * (rows // step), (1,)), dtype=np.uint64)
    client.run(_reset_peak_rss)  # measure this computation, not earlier tests
    t = time.perf_counter()
    got = client.compute(sums).result(timeout=TIMEOUT)[:, 0]
    elapsed = time.perf_counter() - t

    want = np.array(
        [_checksum(fastpe.sinusoidal(step, d, offset=r))[0, 0] for r in range(0, rows, step)]
    )
    assert np.array_equal(got, want)
    peaks = client.run(_peak_rss)
    assert len(peaks) == 2
    for worker, peak in peaks.items():
        # what a worker holds: the interpreter + Dask (~150 MB) and a block or two
        assert peak < MEMORY_LIMIT, (worker, peak)
    print(
        f"\n2 GiB table reduced on the cluster in {elapsed:.2f} s; "
        f"worker peak RSS {sorted(round(p / 1e6) for p in peaks.values())} MB "
        f"(limit {MEMORY_LIMIT / 1e6:.0f} MB)"
    )
