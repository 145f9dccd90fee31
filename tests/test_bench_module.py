"""fastpe._bench (``fastpe bench``): the comparison runs, its table and JSON are
well formed, and the competitors it times compute the same table as fastpe."""

import json

import numpy as np
import pytest

import fastpe
from fastpe import _bench


def test_competitor_formulas_are_the_sinusoidal_table():
    # the baselines must compute the same thing, or the speed ratios mean nothing
    ref = fastpe.reference(64, 32)
    np.testing.assert_allclose(_bench.seed_numpy_f64(64, 32), ref, atol=1e-12)
    np.testing.assert_allclose(_bench.numpy_f32(64, 32), ref, atol=1e-4)


def test_quick_run_prints_table(capsys):
    rc = _bench.main(
        [
            "--quick",
            "--size",
            "16x8",
            "--no-add-to",
            "--no-small",
            "--no-rope",
            "--no-busy",
            "--no-progress",
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0
    assert "fastpe out=" in out and "NumPy formula f32" in out and "NumPy seed formula f64" in out
    assert "out.fill() [memory limit]" in out
    # the speed is stated, not judged; correctness is
    assert "x NumPy (new)" in out and "docs/performance.md" in out
    assert not {"PASS", "FAIL", "target"} & set(out.replace(":", " ").split())
    assert "ok     16x8 float64: fastpe max |err| against mpmath" in out
    assert "ok     16x8 float32: out= and 1-thread tables equal the new array" in out
    assert "WRONG" not in out


BENCH_SMALL = ["--quick", "--size", "16x8", "--no-add-to", "--no-small", "--no-rope"]
BENCH_SMALL += ["--no-busy", "--no-progress"]


def test_an_error_beyond_the_bound_fails_the_run(monkeypatch, capsys):
    exact = _bench._exact
    monkeypatch.setattr(_bench, "_exact", lambda *a: exact(*a) + 1e-9)
    assert _bench.main(BENCH_SMALL) == 1
    cap = capsys.readouterr()
    assert "WRONG  16x8 float64: fastpe max |err| against mpmath: 1.0e-09" in cap.out
    # float32's bound (2**-24) is not crossed by 1e-9
    assert "ok     16x8 float32: fastpe max |err| against mpmath" in cap.out
    assert "fastpe bench: wrong result: 16x8 float64: fastpe max |err|" in cap.err


def test_a_one_thread_table_that_differs_fails_the_run(monkeypatch, capsys):
    real = _bench._api.sinusoidal

    def one_thread_off(*args, **kwargs):
        table = real(*args, **kwargs)
        if kwargs.get("num_threads") == 1:
            table[-1, -1] = 2.0  # no sine or cosine
        return table

    monkeypatch.setattr(_bench._api, "sinusoidal", one_thread_off)
    assert _bench.main([*BENCH_SMALL, "--no-accuracy"]) == 1
    out = capsys.readouterr().out
    assert "WRONG  16x8 float32: out= and 1-thread tables equal the new array" in out
    assert "max |err| against mpmath" not in out  # --no-accuracy: not measured, not checked


def test_rope_check_compares_with_the_numpy_formula(monkeypatch):
    rng = np.random.default_rng(3)
    q = rng.standard_normal((1, 2, 9, 16), dtype=np.float32)
    k = rng.standard_normal((1, 2, 9, 16), dtype=np.float32)
    cos, sin = fastpe.rope_cache(16, seq_len=9)
    assert _bench._rope_check(q, k, cos, sin)["ok"]
    # the same rotation by one position too many is a wrong result
    cos1, sin1 = fastpe.rope_cache(16, seq_len=9, offset=1)
    assert not _bench._rope_check(q, k, cos1, sin1)["ok"]


def test_json_output(capsys):
    rc = _bench.main(
        [
            "--quick",
            "--size",
            "8x4",
            "--no-add-to",
            "--no-small",
            "--no-rope",
            "--no-busy",
            "--no-progress",
            "--json",
        ]
    )
    data = json.loads(capsys.readouterr().out)
    assert rc == 0
    (row32, row64) = data["results"]
    assert (row32["seq_len"], row32["d_model"], row32["dtype"]) == (8, 4, "float32")
    for row in (row32, row64):
        for entry in row["methods"].values():
            assert entry["median_s"] > 0
    errs = {k: v["max_abs_error"] for k, v in row64["methods"].items() if v["max_abs_error"]}
    assert errs[_bench.FASTPE] < 1e-15


def test_small_call_competitors_compute_the_same_rows():
    pos = np.array([0, 3, 1000])
    np.testing.assert_allclose(
        _bench.numpy_rows_f32(pos, 64), fastpe.sinusoidal_at(pos, 64, dtype=np.float64), atol=2e-4
    )
    t = np.array([999.5, 0.0, 17.25])
    np.testing.assert_allclose(
        _bench.diffusers_numpy_f32(t, 320),
        fastpe.sinusoidal_at(t, 320, convention="diffusers", dtype=np.float64),
        atol=2e-4,
    )


def test_small_calls_section(monkeypatch, capsys):
    monkeypatch.setattr(
        _bench,
        "_interleaved_medians",
        lambda fns, rounds: {n: 1e-6 * (i + 1) for i, n in enumerate(fns)},
    )
    small = _bench.measure_small(quick=True)
    names = {what for what, *_ in _bench.SMALL_TARGETS}
    checks = _bench.small_targets(small)
    assert {c[0] for c in checks} == names
    # every target refers to a timed call, and the verdict follows the bound
    for _what, value, bound, kind, ok in checks:
        assert ok == (value <= bound if kind.endswith("max") else value >= bound)


def test_rope_competitor_computes_the_same_rotation():
    q = np.random.default_rng(1).standard_normal((1, 2, 5, 16))
    cos, sin = fastpe.rope_cache(16, seq_len=5, offset=3, dtype=np.float64)
    want = _bench.numpy_rotate_half(q, cos, sin)
    np.testing.assert_allclose(fastpe.apply_rope(q.copy(), offset=3), want, atol=1e-14)


def test_rope_section(monkeypatch, capsys):
    fake = lambda fns, *rest: {n: 1e-3 * (i + 1) for i, n in enumerate(fns)}  # noqa: E731
    monkeypatch.setattr(_bench, "_median_times", fake)
    monkeypatch.setattr(_bench, "_interleaved_medians", fake)
    monkeypatch.setattr(_bench, "_transformers_apply", lambda: None)
    rope = _bench.measure_rope(quick=True)
    checks = _bench.rope_targets(rope)
    # apply_rope 1 ms, copyto 2 ms, NumPy 3 ms, the step 1 ms = 1000 us
    assert [(c[0], round(c[1], 6), c[4]) for c in checks] == [
        ("apply_rope q, k / np.copyto q, k", 0.5, True),
        ("apply_rope decoding step (us)", 1000.0, False),
        ("apply_rope vs NumPy rotate_half", 3.0, False),
        # every other layout against the same copy (2 ms): 4, 5, 6 ms
        ("apply_rope heads-first interleaved / np.copyto q, k", 2.0, False),
        ("apply_rope positions-first half / np.copyto q, k", 2.5, False),
        ("apply_rope positions-first interleaved / np.copyto q, k", 3.0, False),
    ]
    machine = {"platform": "p", "processor": "x", "cpu_count": 2, "python": "3"}
    text = _bench.format_table(
        {"machine": machine, "build_info": fastpe.build_info(), "results": [], "rope": rope}
    )
    # stated as measured, with no verdict on a machine-dependent speed
    assert any(
        line.split()[-1:] == ["1000.00"] and "apply_rope decoding step (us)" in line
        for line in text.splitlines()
    )
    assert "FAIL" not in text and "PASS" not in text
    assert "ok     apply_rope q, k against the NumPy rotate_half formula" in text


def test_qwen2_vl_pair_rotates_as_transformers_does():
    """The bench's 3-axis pair times the same rotation on both sides."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    rng = np.random.default_rng(3)
    q = rng.standard_normal((1, 2, 192, 128), dtype=np.float32)
    k = rng.standard_normal((1, 2, 192, 128), dtype=np.float32)
    fns = _bench._qwen2_vl_pair(q, k)
    tq, tk = fns["transformers Qwen2-VL rotary + apply"]()
    before = q.copy()
    fns["fastpe.apply_rope(q, k) Qwen2-VL 3-axis"]()
    assert not np.array_equal(q, before)
    # float32 angles of positions below 64: within a few float32 roundings
    np.testing.assert_allclose(q, tq.numpy(), rtol=0, atol=2e-5)
    np.testing.assert_allclose(k, tk.numpy(), rtol=0, atol=2e-5)
    med = {
        "fastpe.apply_rope(q, k) Qwen2-VL 3-axis": 1e-3,
        "transformers Qwen2-VL rotary + apply": 2e-2,
    }
    base = {"fastpe.apply_rope(q, k)": 1e-3, "np.copyto q and k [memory pass]": 1e-3}
    base |= {"fastpe decoding step": 1e-6, "NumPy rotate_half formula": 1e-3}
    rope = {"shape": [1, 32, 4096, 128], "median_s": base | med}
    assert ("apply_rope 3-axis vs transformers Qwen2-VL rotary path", 20.0, "min", True) in [
        (c[0], round(c[1], 6), c[3], c[4]) for c in _bench.rope_targets(rope)
    ]


def test_add_to_comparison_small():
    res = _bench.measure_add_to((2, 16, 8), quick=True)
    assert set(res["median_s"]) == {
        "fastpe.add_to",
        "fastpe.add_to positions=",
        "NumPy x*=s; x+=table",
        "NumPy x*=s; x+=table[positions]",
        "fastpe.add_to(x) [scale 1]",
        "np.add(x, table, out=x) [limit]",
    }
    assert all(t > 0 for t in res["median_s"].values())


def test_busy_section(monkeypatch):
    """The busy column: every kind of call in every state, its verdict from the
    ratio of the medians, and background processes that are gone afterwards."""
    seen = []

    def fake(fn, rounds, n):
        state = len(seen) // 4  # calls in order: 4 kinds per state
        seen.append(fn)
        one = 1e-3
        return {
            "1": {"median_s": one, "max_s": 2 * one},
            "default": {"median_s": one * (0.5, 1.1, 1.5)[state], "max_s": 9e-3},
        }

    monkeypatch.setattr(_bench, "_one_vs_default", fake)
    spinners = []
    real = _bench.Spinners.__exit__

    def exit_and_check(self, *exc):
        spinners.extend(self.procs)
        real(self, *exc)

    monkeypatch.setattr(_bench.Spinners, "__exit__", exit_and_check)
    busy = _bench.measure_busy(quick=True)
    assert busy["quick"] and len(seen) == 12 and len(spinners) == 2 * busy["spinners"]
    # every background process was killed and reaped
    assert all(p.returncode is not None for p in spinners)
    assert {c[3] for c in _bench.busy_targets(busy)} == {"info", "info-max"}
    busy["quick"] = False  # the full shapes' verdicts
    checks = {c[0]: c for c in _bench.busy_targets(busy)}
    for name in busy["states"]["idle"]:
        assert checks[f"{name}: idle speed-up"][1] == 2.0
    # default / one thread: 1.1 beside the nice 19 loops (within 1.25), 1.5 at nice 0
    for what, value, bound, kind, ok in checks.values():
        if kind == "max":
            assert bound == 1.25 and ok == ("nice 19" in what), (what, value)
    lines = _bench.format_busy(busy)
    assert any("busy nice 19" in line and "1.10" in line for line in lines)


def test_spinners_run_and_stop():
    import os
    import time

    with _bench.Spinners(19, 2, settle=0.5) as sp:
        for p in sp.procs:
            assert p.poll() is None
            if hasattr(os, "getpriority"):  # (Windows: a priority class, not readable here)
                # (the child lowers its own priority once started: on a busy machine
                # that can take longer than the settle time)
                deadline = time.monotonic() + 30
                while os.getpriority(os.PRIO_PROCESS, p.pid) != 19 and time.monotonic() < deadline:
                    time.sleep(0.05)
                assert os.getpriority(os.PRIO_PROCESS, p.pid) == 19
    assert all(p.returncode is not None for p in sp.procs)


@pytest.mark.parametrize("bad", ["4096", "0x5", "axb", "1x2x3"])
def test_bad_size_is_a_usage_error(bad, capsys):
    assert _bench.main(["--size", bad, "--no-progress"]) == 2
    assert "--size" in capsys.readouterr().err
