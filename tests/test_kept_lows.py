"""The low parts of a correctly rounded table's rows (double-double), kept once
made: for a table's plan in the library's plan cache, for a RoPE handle of the
cache on the handle; counted in the cache's bytes either way, shared by threads,
and the same bits as rows whose low parts are evaluated per call."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import fastpe
from fastpe import kernel


def _lows_bytes(nf: int) -> int:
    """2 (B/2 + 1) nf doubles, B the plan's block rows for nf frequencies."""
    B = kernel.Encoder(fastpe.Convention.vaswani(), 2 * nf).plan.block_rows
    return 2 * (B // 2 + 1) * nf * 8


def _cleared():
    import gc

    gc.collect()  # (plans still held by dead objects)
    return kernel._c_plans(clear=True)


def test_table_lows_are_kept_once_and_counted():
    _cleared()
    before = kernel._c_plans()
    a = fastpe.sinusoidal(64, 1024, dtype=np.float64, correctly_rounded=True)
    after = kernel._c_plans()
    assert kernel._c_plan_kinds()["table lows"] == (1, 0)
    assert after[1] - before[1] == _lows_bytes(512)
    b = fastpe.sinusoidal(64, 1024, dtype=np.float64, correctly_rounded=True)
    assert kernel._c_plans()[:2] == after[:2]  # reused: nothing made again
    np.testing.assert_array_equal(a.view(np.uint64), b.view(np.uint64))


def test_table_lows_give_the_bits_of_rows_evaluated_per_call():
    # A few rows at a time, with nothing kept, evaluate the low parts they need
    # (the fill's own); a long table makes and keeps all of them.
    _cleared()
    d, rows, offset = 256, 70, 103950
    few = np.concatenate(
        [
            fastpe.sinusoidal(5, d, offset=offset + s, dtype=np.float64, correctly_rounded=True)
            for s in range(0, rows, 5)
        ]
    )
    assert kernel._c_plan_kinds()["table lows"][0] == 0
    many = fastpe.sinusoidal(rows, d, offset=offset, dtype=np.float64, correctly_rounded=True)
    assert kernel._c_plan_kinds()["table lows"][0] == 1
    np.testing.assert_array_equal(few.view(np.uint64), many.view(np.uint64))
    # and with them kept, a few rows give the same bits again
    again = fastpe.sinusoidal(5, d, offset=offset, dtype=np.float64, correctly_rounded=True)
    np.testing.assert_array_equal(again.view(np.uint64), many[:5].view(np.uint64))


def test_the_default_and_16_32_bit_tables_keep_none():
    _cleared()
    fastpe.sinusoidal(64, 512, dtype=np.float64)
    fastpe.sinusoidal(64, 512, dtype=np.float32, correctly_rounded=True)
    assert kernel._c_plan_kinds()["table lows"][0] == 0


def test_threads_share_the_kept_table_lows():
    _cleared()
    want = fastpe.sinusoidal(64, 768, dtype=np.float64, correctly_rounded=True)
    _cleared()
    got, errors = [], []
    start = threading.Barrier(4)

    def work():
        try:
            start.wait()
            for _ in range(3):
                got.append(
                    fastpe.sinusoidal(
                        64, 768, dtype=np.float64, correctly_rounded=True, num_threads=1
                    )
                )
        except Exception as e:  # pragma: no cover (reported below)
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(got) == 12
    for g in got:
        np.testing.assert_array_equal(g.view(np.uint64), want.view(np.uint64))
    assert kernel._c_plan_kinds()["table lows"] == (1, 0)  # one copy kept


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_rope_handle_lows_are_counted_in_the_cache_bytes(dtype):
    _cleared()
    rule = {"rope_theta": 321000.0}
    fastpe.rope_cache(128, rule, positions=[5], dtype=dtype)  # plans the rule
    before = kernel._c_plans()
    fastpe.rope_cache(128, rule, positions=[5], dtype=dtype, correctly_rounded=True)
    after = kernel._c_plans()
    assert after[0] == before[0]
    assert after[1] - before[1] == _lows_bytes(64)
    fastpe.rope_cache(128, rule, positions=[6], dtype=dtype, correctly_rounded=True)
    assert kernel._c_plans()[:2] == after[:2]
    # and given back with the entry
    _cleared()
    assert kernel._c_plans()[1] <= after[1] - _lows_bytes(64)
