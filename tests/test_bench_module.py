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
    rc = _bench.main(["--quick", "--size", "16x8", "--no-add-to", "--no-progress"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "fastpe out=" in out and "NumPy formula f32" in out and "NumPy seed formula f64" in out
    assert "out.fill() [memory limit]" in out
    # 16x8 is not one of the sizes the targets are stated for
    assert "targets are stated for the standard sizes only" in out


def test_json_output(capsys):
    rc = _bench.main(["--quick", "--size", "8x4", "--no-add-to", "--no-progress", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert rc == 0
    (row32, row64) = data["results"]
    assert (row32["seq_len"], row32["d_model"], row32["dtype"]) == (8, 4, "float32")
    for row in (row32, row64):
        for entry in row["methods"].values():
            assert entry["median_s"] > 0
    errs = {k: v["max_abs_error"] for k, v in row64["methods"].items() if v["max_abs_error"]}
    assert errs[_bench.FASTPE] < 1e-15


def test_add_to_comparison_small():
    res = _bench.measure_add_to((2, 16, 8), quick=True)
    assert set(res["median_s"]) == {"fastpe.add_to", "fastpe.add_to positions=",
                                    "NumPy x*=s; x+=table", "NumPy x*=s; x+=table[positions]"}
    assert all(t > 0 for t in res["median_s"].values())


@pytest.mark.parametrize("bad", ["4096", "0x5", "axb", "1x2x3"])
def test_bad_size_is_a_usage_error(bad, capsys):
    assert _bench.main(["--size", bad, "--no-progress"]) == 2
    assert "--size" in capsys.readouterr().err
