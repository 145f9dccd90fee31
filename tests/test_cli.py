"""The ``fastpe`` command line: exit codes, files written and their values, help.

Everything here runs without matplotlib (the plotting tests are in test_plot.py).
Most cases call ``fastpe._cli.main`` in-process; a few run real subprocesses to
check the console script, ``python -m fastpe`` and the matplotlib-less path.
"""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import fastpe
from fastpe._cli import main

# Runs the CLI with `import matplotlib` made to fail, as in a venv without it.
NO_MATPLOTLIB = (
    "import sys; sys.modules['matplotlib'] = None; "
    "from fastpe._cli import main; sys.exit(main(sys.argv[1:]))"
)


def run(*args, code=None, timeout=120):
    """Run ``python -m fastpe ARGS`` (or ``python -c CODE ARGS``) outside the source tree."""
    cmd = [sys.executable] + (["-c", code] if code else ["-m", "fastpe"]) + [str(a) for a in args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          cwd=os.path.dirname(sys.executable))


# ---------------------------------------------------------------- entry points


def test_python_m_fastpe_help():
    r = run("--help")
    assert r.returncode == 0, r.stderr
    for command in ("table", "plot", "bench", "info"):
        assert command in r.stdout
    assert "exit codes" in r.stdout
    assert r.stderr == ""


def test_console_script_installed():
    script = shutil.which("fastpe", path=os.path.dirname(sys.executable))
    if script is None:
        pytest.skip("no `fastpe` script next to this interpreter (not a venv install)")
    r = subprocess.run([script, "--version"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"fastpe {fastpe.__version__}"


@pytest.mark.parametrize("command", [[], ["table"], ["plot"], ["bench"], ["info"]])
def test_help_of_every_subcommand(command, capsys):
    assert main([*command, "--help"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("usage: fastpe")
    assert err == ""


@pytest.mark.parametrize("command", [["--help"], ["table", "--help"], ["plot", "--help"],
                                     ["info", "--help"], ["bench", "--help"]])
def test_help_works_without_matplotlib(command):
    r = run(*command, code=NO_MATPLOTLIB)
    assert r.returncode == 0, r.stderr
    assert "usage:" in r.stdout


def test_plot_without_matplotlib_says_how_to_install(tmp_path):
    png = tmp_path / "pe.png"
    r = run("plot", 20, 16, "-o", png, code=NO_MATPLOTLIB)
    assert r.returncode == 1
    assert "matplotlib is required for `fastpe plot`: pip install 'fastpe[plot]'" in r.stderr
    assert r.stdout == ""
    assert not png.exists()


@pytest.mark.parametrize("argv", [[], ["frobnicate"], ["table", "10"], ["info", "--bogus"],
                                  ["table", "10", "8"]])  # the last one lacks -o
def test_usage_errors_exit_2(argv, capsys):
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert "usage:" in err and "error:" in err
    assert out == ""


# ---------------------------------------------------------------- table


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_table_npy_values(tmp_path, capsys, dtype):
    path = tmp_path / "pe.npy"
    assert main(["table", "300", "64", "--dtype", dtype, "-o", str(path)]) == 0
    out = capsys.readouterr().out
    assert "(300, 64)" in out and dtype in out and "ms" in out and "time" in out
    P = np.load(path)
    assert P.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(P, fastpe.sinusoidal(300, 64, dtype=dtype))


def test_table_options_are_passed_on(tmp_path):
    path = tmp_path / "pe.npy"
    argv = ["table", "50", "9", "--base", "100", "--offset", "-7", "--layout", "split",
            "--dtype", "float64", "--threads", "1", "--convention", "vaswani", "-q", "-o", str(path)]
    assert main(argv) == 0
    expected = fastpe.sinusoidal(50, 9, base=100, offset=-7, layout="split", dtype=np.float64)
    np.testing.assert_array_equal(np.load(path), expected)


def test_table_seed_worked_example_csv(tmp_path):
    """The seeds' "I am a robot" table (n=100, d=4), through a CSV file."""
    path = tmp_path / "pe.csv"
    assert main(["table", "4", "4", "--base", "100", "--dtype", "float64", "-o", str(path)]) == 0
    P = np.loadtxt(path, delimiter=",")
    np.testing.assert_allclose(P, [[0.0, 1.0, 0.0, 1.0],
                                   [0.84147098, 0.54030231, 0.09983342, 0.99500417],
                                   [0.90929743, -0.41614684, 0.19866933, 0.98006658],
                                   [0.14112001, -0.9899925, 0.29552021, 0.95533649]], atol=5e-9)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_table_csv_round_trips_exactly(tmp_path, dtype):
    path = tmp_path / "pe.CSV"  # the suffix is case-insensitive
    assert main(["table", "200", "33", "--offset", "123456", "--dtype", dtype, "-q", "-o", str(path)]) == 0
    P = np.loadtxt(path, delimiter=",", dtype=np.float64).astype(dtype)
    np.testing.assert_array_equal(P, fastpe.sinusoidal(200, 33, offset=123456, dtype=dtype))


def test_table_npz_has_table_and_parameters(tmp_path):
    path = tmp_path / "pe.npz"
    assert main(["table", "20", "6", "--base", "500", "--offset", "3", "-q", "-o", str(path)]) == 0
    with np.load(path) as z:  # no allow_pickle needed
        np.testing.assert_array_equal(z["table"], fastpe.sinusoidal(20, 6, base=500, offset=3))
        assert int(z["seq_len"]) == 20 and int(z["d_model"]) == 6
        assert float(z["base"]) == 500.0 and int(z["offset"]) == 3
        assert str(z["dtype"]) == "float32" and str(z["convention"]) == "vaswani"


def test_table_empty(tmp_path):
    path = tmp_path / "pe.npy"
    assert main(["table", "0", "8", "-q", "-o", str(path)]) == 0
    assert np.load(path).shape == (0, 8)


@pytest.mark.parametrize(
    "args, message",
    [
        (["-3", "8"], "seq_len must be a non-negative integer, got -3"),
        (["4", "0"], "d_model must be an integer >= 1, got 0"),
        (["4", "8", "--base", "-1"], "base must be finite and > 0"),
        (["4", "8", "--base", "nan"], "base must be finite and > 0"),
        (["4", "8", "--threads", "0"], "num_threads must be an integer >= 1"),
    ],
)
def test_table_bad_values_exit_2_and_write_nothing(tmp_path, capsys, args, message):
    path = tmp_path / "pe.npy"
    assert main(["table", *args, "-o", str(path)]) == 2
    out, err = capsys.readouterr()
    assert err.startswith("fastpe table: error: ") and message in err
    assert out == ""
    assert not path.exists()


@pytest.mark.parametrize("args", [["--dtype", "float16"], ["--layout", "diagonal"],
                                  ["--convention", "nonesuch"], ["--offset", "1.5"]])
def test_table_bad_choices_exit_2(tmp_path, capsys, args):
    assert main(["table", "4", "8", *args, "-o", str(tmp_path / "pe.npy")]) == 2
    assert "invalid" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["pe.txt", "pe", "pe.npy.gz"])
def test_table_unknown_suffix_exit_2(tmp_path, capsys, name):
    path = tmp_path / name
    assert main(["table", "4", "8", "-o", str(path)]) == 2
    err = capsys.readouterr().err
    assert "cannot tell the output format" in err and ".npy, .npz, .csv" in err
    assert not path.exists()


def test_table_unwritable_exit_1(tmp_path, capsys):
    path = tmp_path / "no" / "such" / "dir" / "pe.npy"
    assert main(["table", "4", "8", "-o", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("fastpe table: error: ") and "No such file or directory" in err


def test_table_subprocess_exit_codes(tmp_path):
    path = tmp_path / "pe.npy"
    ok = run("table", 128, 32, "-o", path)
    assert ok.returncode == 0, ok.stderr
    assert "shape (128, 32)" in ok.stdout and "float32" in ok.stdout
    assert np.load(path).shape == (128, 32)
    bad = run("table", -1, 32, "-o", tmp_path / "bad.npy")
    assert bad.returncode == 2 and "seq_len" in bad.stderr and bad.stdout == ""


# ---------------------------------------------------------------- info


def test_info_human(capsys):
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    info = fastpe.build_info()
    assert "fastpe:" in out and info["version"] in out
    assert "OpenMP:" in out and ("yes" if info["openmp"] else "no") in out
    assert f"threads:       {info['max_threads']}" in out
    assert "CPU features:" in out and info["machine"] in out


def test_info_json_is_build_info(capsys):
    assert main(["info", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data == json.loads(json.dumps(fastpe.build_info()))
    assert isinstance(data["cpu_features"], list)


def test_cpu_features_on_linux():
    feats = fastpe.build_info()["cpu_features"]
    assert all(isinstance(f, str) for f in feats)
    if sys.platform.startswith("linux") and os.uname().machine in ("x86_64", "AMD64"):
        assert "sse2" in feats  # every x86-64 CPU has it


# ---------------------------------------------------------------- bench


def test_bench_runs_end_to_end(capsys):
    assert main(["bench", "--quick", "--size", "8x4", "--no-add-to", "--no-progress"]) == 0
    assert "fastpe out=" in capsys.readouterr().out


def test_bench_help_lists_its_options(capsys):
    assert main(["bench", "--help"]) == 0
    out = capsys.readouterr().out
    for option in ("--quick", "--json"):
        assert option in out


def test_other_commands_do_not_import_bench():
    code = ("import sys; from fastpe._cli import main; rc = main(['info', '--json']); "
            "sys.exit(rc if rc else ('fastpe._bench' in sys.modules) * 3)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr


def test_bench_is_wired_to_the_bench_module(monkeypatch, capsys):
    """`fastpe bench ARGS` hands ARGS to _bench.add_arguments/_bench.run (a stand-in here)."""
    import types

    calls = []
    fake = types.ModuleType("fastpe._bench")
    fake.add_arguments = lambda parser: (parser.add_argument("--quick", action="store_true"),
                                         parser.add_argument("--json", action="store_true"))
    fake.run = lambda args: calls.append((args.quick, args.json)) or 7
    monkeypatch.setitem(sys.modules, "fastpe._bench", fake)
    assert main(["bench", "--quick"]) == 7
    assert calls == [(True, False)]
    assert main(["bench", "--nonesuch"]) == 2
    assert "unrecognized arguments: --nonesuch" in capsys.readouterr().err
