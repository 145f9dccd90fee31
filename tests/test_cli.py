"""The ``fastpe`` command line: exit codes, files written and their values, help.

Everything here runs without matplotlib (the plotting tests are in test_plot.py).
Most cases call ``fastpe._cli.main`` in-process; a few run real subprocesses to
check the console script, ``python -m fastpe`` and the matplotlib-less path.
"""

import errno
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time

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
    return subprocess.run(
        cmd, capture_output=True, text=True, timeout=timeout, cwd=os.path.dirname(sys.executable)
    )


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


@pytest.mark.parametrize(
    "command",
    [["--help"], ["table", "--help"], ["plot", "--help"], ["info", "--help"], ["bench", "--help"]],
)
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


@pytest.mark.parametrize(
    "argv", [[], ["frobnicate"], ["table", "10"], ["info", "--bogus"], ["table", "10", "8"]]
)  # the last one lacks -o
def test_usage_errors_exit_2(argv, capsys):
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert "usage:" in err and "error:" in err
    assert out == ""


# ---------------------------------------------------------------- table


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
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
    argv = [
        "table",
        "50",
        "9",
        "--base",
        "100",
        "--offset",
        "-7",
        "--layout",
        "split",
        "--dtype",
        "float64",
        "--threads",
        "1",
        "--convention",
        "vaswani",
        "-q",
        "-o",
        str(path),
    ]
    assert main(argv) == 0
    expected = fastpe.sinusoidal(50, 9, base=100, offset=-7, layout="split", dtype=np.float64)
    np.testing.assert_array_equal(np.load(path), expected)


def test_table_seed_worked_example_csv(tmp_path):
    """The seeds' "I am a robot" table (n=100, d=4), through a CSV file."""
    path = tmp_path / "pe.csv"
    assert main(["table", "4", "4", "--base", "100", "--dtype", "float64", "-o", str(path)]) == 0
    P = np.loadtxt(path, delimiter=",")
    np.testing.assert_allclose(
        P,
        [
            [0.0, 1.0, 0.0, 1.0],
            [0.84147098, 0.54030231, 0.09983342, 0.99500417],
            [0.90929743, -0.41614684, 0.19866933, 0.98006658],
            [0.14112001, -0.9899925, 0.29552021, 0.95533649],
        ],
        atol=5e-9,
    )


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_table_csv_round_trips_exactly(tmp_path, dtype):
    path = tmp_path / "pe.CSV"  # the suffix is case-insensitive
    assert (
        main(["table", "200", "33", "--offset", "123456", "--dtype", dtype, "-q", "-o", str(path)])
        == 0
    )
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


@pytest.mark.parametrize(
    "args",
    [
        ["--dtype", "bfloat16"],
        ["--dtype", "int8"],
        ["--layout", "diagonal"],
        ["--convention", "nonesuch"],
        ["--offset", "1.5"],
    ],
)
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


_X86_CPUINFO = "processor\t: 0\nflags\t\t: fpu sse sse2 avx avx2 fma avx512f avx512vl\n"
_ARM_CPUINFO = "processor\t: 0\nFeatures\t: fp asimd evtstrm aes sve sve2\n"


@pytest.mark.parametrize(
    "machine, cpuinfo, expected",
    [
        ("x86_64", _X86_CPUINFO, ["sse2", "avx", "avx2", "fma", "avx512f", "avx512vl"]),
        ("AMD64", _X86_CPUINFO, ["sse2", "avx", "avx2", "fma", "avx512f", "avx512vl"]),
        ("aarch64", _ARM_CPUINFO, ["asimd", "sve", "sve2"]),
        # QEMU user emulation shows the host's /proc/cpuinfo to the guest: an aarch64
        # process on an AVX-512 host must not report avx512f, nor an x86-64 one on an
        # Arm host asimd.
        ("aarch64", _X86_CPUINFO, []),
        ("x86_64", _ARM_CPUINFO, []),
        ("riscv64", _X86_CPUINFO, []),
    ],
)
def test_cpu_features_are_those_of_this_architecture(tmp_path, machine, cpuinfo, expected):
    from fastpe._api import _cpu_features

    path = tmp_path / "cpuinfo"
    path.write_text(cpuinfo)
    assert _cpu_features(str(path), machine) == expected
    assert _cpu_features(str(tmp_path / "missing"), machine) == []


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
    code = (
        "import sys; from fastpe._cli import main; rc = main(['info', '--json']); "
        "sys.exit(rc if rc else ('fastpe._bench' in sys.modules) * 3)"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr


def test_bench_is_wired_to_the_bench_module(monkeypatch, capsys):
    """`fastpe bench ARGS` hands ARGS to _bench.add_arguments/_bench.run (a stand-in here)."""
    import types

    calls = []
    fake = types.ModuleType("fastpe._bench")
    fake.add_arguments = lambda parser: (
        parser.add_argument("--quick", action="store_true"),
        parser.add_argument("--json", action="store_true"),
    )
    fake.run = lambda args: calls.append((args.quick, args.json)) or 7
    monkeypatch.setitem(sys.modules, "fastpe._bench", fake)
    assert main(["bench", "--quick"]) == 7
    assert calls == [(True, False)]
    assert main(["bench", "--nonesuch"]) == 2
    assert "unrecognized arguments: --nonesuch" in capsys.readouterr().err


# ---------------------------------------------------------------- output files
# `table` and `plot` write a temporary file beside the output and rename it into
# place when complete; they never delete or truncate a file they did not create.

PRECIOUS = b"precious bytes, not a table\n"


def temp_files(directory):
    """The CLI's temporary files (.NAME.XXXXXXXX.tmp) left in ``directory``."""
    return sorted(n for n in os.listdir(directory) if n.endswith(".tmp"))


def shown_mode(mode):
    """The permission bits os.stat reports for a file given ``mode``.  Windows keeps
    one of them, the owner's write bit (the read-only attribute): its files show
    0o666 or 0o444."""
    if sys.platform == "win32":
        return 0o666 if mode & stat.S_IWRITE else 0o444
    return mode


@pytest.fixture(scope="session")
def symlinks(tmp_path_factory):
    """Skips where symbolic links cannot be made."""
    probe = tmp_path_factory.mktemp("symlink_probe") / "link"
    try:
        probe.symlink_to(probe.parent)
    except (OSError, NotImplementedError) as exc:
        # Windows: creating one needs a privilege or developer mode
        pytest.skip(f"symbolic links cannot be made here: {exc}")
    if not probe.is_symlink():
        pytest.skip(
            "making a symbolic link reports success and makes none (Wine's CreateSymbolicLinkW)"
        )


def precious_file(path, mode=0o644):
    path.write_bytes(PRECIOUS)
    os.chmod(path, mode)
    return path


@pytest.fixture
def no_computing(monkeypatch):
    """Fail the test if the table is computed."""

    def computed(*args, **kwargs):
        pytest.fail("the table was computed before the output was found unwritable")

    from fastpe import _plot

    monkeypatch.setattr(fastpe, "sinusoidal", computed)  # what `table` calls
    monkeypatch.setattr(_plot, "sinusoidal", computed)  # what `plot` calls


def test_table_refuses_read_only_file(tmp_path, capsys):
    path = precious_file(tmp_path / "r.npy", 0o444)
    if os.access(path, os.W_OK):
        pytest.skip(
            "this user may write read-only files (root); "
            "test_table_refuses_file_of_another_user covers the refusal as root"
        )
    assert main(["table", "4", "4", "-o", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("fastpe table: error: PermissionError: ")
    assert str(path) in err and "left unchanged" in err
    assert path.read_bytes() == PRECIOUS
    assert stat.S_IMODE(path.stat().st_mode) == shown_mode(0o444)
    assert temp_files(tmp_path) == []


NOBODY = 65534  # the conventional unprivileged uid/gid ("nobody"/"nogroup")


def as_nobody(args, cwd):
    """``python -m fastpe ARGS`` run as uid/gid 65534 (the caller must be root)."""
    return subprocess.run(
        [sys.executable, "-m", "fastpe", *map(str, args)],
        user=NOBODY,
        group=NOBODY,
        extra_groups=[],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.skipif(not hasattr(os, "geteuid"), reason="POSIX users and permissions")
def test_table_refuses_file_of_another_user():
    """As root, a read-only file is writable; so the CLI runs as uid 65534 on a
    root-owned 0644 file in a directory anyone may write: it could delete the file
    or rename over it, and must do neither."""
    if os.geteuid() != 0:
        pytest.skip(
            "needs root to run the CLI as another user "
            "(test_table_refuses_read_only_file covers this user)"
        )
    directory = tempfile.mkdtemp(prefix="fastpe-cli-")
    try:
        os.chmod(directory, 0o777)
        try:
            probe = subprocess.run(
                [sys.executable, "-c", "import fastpe"],
                user=NOBODY,
                group=NOBODY,
                extra_groups=[],
                cwd=directory,
                capture_output=True,
                text=True,
                timeout=60,
            )
        except PermissionError as exc:
            pytest.skip(
                f"uid {NOBODY} cannot run {sys.executable} from {directory} ({exc}): "
                "the interpreter or venv lies under a directory other users may not "
                "enter (e.g. /root, mode 0700)"
            )
        if probe.returncode != 0:
            last = (probe.stderr.strip().splitlines() or ["?"])[-1]
            pytest.skip(f"uid {NOBODY} cannot import fastpe with {sys.executable}: {last}")

        path = os.path.join(directory, "root.npy")
        with open(path, "wb") as f:
            f.write(PRECIOUS)
        os.chmod(path, 0o644)
        r = as_nobody(["table", 4, 4, "-o", path], cwd=directory)
        assert r.returncode == 1, (r.stdout, r.stderr)
        assert "PermissionError" in r.stderr and path in r.stderr and r.stdout == ""
        with open(path, "rb") as f:
            assert f.read() == PRECIOUS
        st = os.stat(path)
        assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (0, 0o644)
        assert temp_files(directory) == []

        # A file this user may write, but in a sticky directory (like /tmp) where
        # only its owner may rename over it.
        sticky = os.path.join(directory, "sticky")
        os.mkdir(sticky)
        os.chmod(sticky, 0o1777)
        shared = os.path.join(sticky, "shared.npy")
        with open(shared, "wb") as f:
            f.write(PRECIOUS)
        os.chmod(shared, 0o666)
        r = as_nobody(["table", 4, 4, "-o", shared], cwd=directory)
        assert r.returncode == 1, (r.stdout, r.stderr)
        assert "PermissionError" in r.stderr and "left unchanged" in r.stderr
        with open(shared, "rb") as f:
            assert f.read() == PRECIOUS
        assert temp_files(sticky) == []

        # The same user can write a new file there: the refusal is about the file.
        new = os.path.join(directory, "new.npy")
        r = as_nobody(["table", 4, 4, "-q", "-o", new], cwd=directory)
        assert r.returncode == 0, r.stderr
        assert os.stat(new).st_uid == NOBODY
        np.testing.assert_array_equal(np.load(new), fastpe.sinusoidal(4, 4))
    finally:
        shutil.rmtree(directory)


def test_table_dangling_symlink_into_missing_directory(tmp_path, capsys, symlinks):
    link = tmp_path / "pe.npy"
    target = tmp_path / "unmounted" / "pe.npy"
    link.symlink_to(target)
    assert main(["table", "4", "4", "-o", str(link)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("fastpe table: error: FileNotFoundError: ")
    assert "No such file or directory" in err and str(link) in err
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert not target.parent.exists()
    assert temp_files(tmp_path) == []


def test_table_dangling_symlink_creates_its_target(tmp_path, symlinks):
    link = tmp_path / "pe.npy"
    target = tmp_path / "data" / "real.npy"
    target.parent.mkdir()
    link.symlink_to(target)
    assert main(["table", "4", "4", "-q", "-o", str(link)]) == 0
    assert link.is_symlink() and os.readlink(link) == str(target)
    np.testing.assert_array_equal(np.load(target), fastpe.sinusoidal(4, 4))
    assert temp_files(tmp_path) == [] and temp_files(target.parent) == []


def test_table_writes_through_symlink(tmp_path, symlinks):
    real_dir = tmp_path / "data"
    real_dir.mkdir()
    real = precious_file(real_dir / "real.npy", 0o640)
    link = tmp_path / "pe.npy"
    link.symlink_to(real)
    assert main(["table", "6", "4", "-q", "-o", str(link)]) == 0
    assert link.is_symlink() and os.readlink(link) == str(real)
    np.testing.assert_array_equal(np.load(real), fastpe.sinusoidal(6, 4))
    assert stat.S_IMODE(real.stat().st_mode) == shown_mode(0o640)
    assert temp_files(tmp_path) == [] and temp_files(real_dir) == []


def test_table_output_is_a_directory(tmp_path, capsys, no_computing):
    path = tmp_path / "pe.npy"
    path.mkdir()
    (path / "keep").write_bytes(PRECIOUS)
    assert main(["table", "4", "4", "-o", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("fastpe table: error: IsADirectoryError: ") and str(path) in err
    assert path.is_dir() and (path / "keep").read_bytes() == PRECIOUS
    assert temp_files(tmp_path) == []


@pytest.mark.parametrize("writer, name", [("save", "pe.npy"), ("savetxt", "pe.csv")])
def test_table_write_failure_keeps_old_file(tmp_path, capsys, monkeypatch, writer, name):
    """Disk full half way: the old file stays as it was, the partial one is removed."""
    path = precious_file(tmp_path / name)

    def disk_full(f, *args, **kwargs):
        f.write(b"half a table")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(np, writer, disk_full)
    assert main(["table", "100", "8", "-o", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("fastpe table: error: OSError: ") and "No space left" in err
    assert path.read_bytes() == PRECIOUS
    assert temp_files(tmp_path) == []


def test_table_replaces_atomically_and_keeps_mode(tmp_path, monkeypatch):
    path = precious_file(tmp_path / "pe.npy", 0o604)
    inode = path.stat().st_ino
    real_save = np.save
    seen = []

    def save(f, table):
        # While the table is written, FILE still holds the old bytes and the
        # temporary file is in the same directory.
        seen.append((path.read_bytes(), temp_files(tmp_path)))
        real_save(f, table)

    monkeypatch.setattr(np, "save", save)
    assert main(["table", "64", "16", "-q", "-o", str(path)]) == 0
    assert len(seen) == 1 and seen[0][0] == PRECIOUS
    assert len(seen[0][1]) == 1 and seen[0][1][0].startswith(".pe.npy.")
    np.testing.assert_array_equal(np.load(path), fastpe.sinusoidal(64, 16))
    assert path.stat().st_ino != inode  # renamed into place, not rewritten
    assert stat.S_IMODE(path.stat().st_mode) == shown_mode(0o604)
    assert temp_files(tmp_path) == []


def test_table_new_file_gets_umask_permissions(tmp_path):
    old = os.umask(0o027)
    try:
        assert main(["table", "4", "4", "-q", "-o", str(tmp_path / "pe.npy")]) == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "pe.npy").stat().st_mode) == shown_mode(0o640)  # not 0600


def test_table_missing_directory_refused_before_computing(tmp_path, capsys, no_computing):
    path = tmp_path / "missing" / "pe.npy"
    assert main(["table", "4", "4", "-o", str(path)]) == 1
    err = capsys.readouterr().err
    assert "FileNotFoundError" in err and str(path) in err


@pytest.mark.parametrize("winerror", [None, 3])
def test_os_errors_show_file_names_as_given(tmp_path, winerror):
    """An OSError from the OS names its files as they were written: quoted, and on
    Windows with single backslashes (str() of the error doubles them)."""
    from fastpe._cli import _error_text

    path, other = str(tmp_path / "missing" / "pe.npy"), str(tmp_path / "b")
    exc = FileNotFoundError(errno.ENOENT, "No such file or directory", path, winerror, other)
    if winerror is not None and sys.platform != "win32":
        exc.winerror = winerror  # what Windows sets; elsewhere the attribute is absent
    code = f"[WinError {winerror}]" if winerror else f"[Errno {errno.ENOENT}]"
    assert _error_text(exc) == f"{code} No such file or directory: '{path}' -> '{other}'"
    if sys.platform != "win32" and winerror is None:
        assert _error_text(exc) == str(exc)  # str()'s own text there
    assert _error_text(OSError("no file named")) == "no file named"


def test_table_read_only_directory_refused_before_computing(tmp_path, capsys, no_computing):
    directory = tmp_path / "ro"
    directory.mkdir()
    directory.chmod(0o555)
    try:
        if os.access(directory, os.W_OK):
            pytest.skip("this user may write read-only directories (root)")
        assert main(["table", "4", "4", "-o", str(directory / "pe.npy")]) == 1
        err = capsys.readouterr().err
        assert "PermissionError" in err and str(directory) in err
        assert os.listdir(directory) == []
    finally:
        directory.chmod(0o755)


def test_table_read_only_file_refused_before_computing(tmp_path, no_computing):
    path = precious_file(tmp_path / "r.npy", 0o444)
    if os.access(path, os.W_OK):
        pytest.skip("this user may write read-only files (root)")
    assert main(["table", "4", "4", "-o", str(path)]) == 1


@pytest.mark.skipif(
    not hasattr(signal, "SIGTERM") or sys.platform == "win32", reason="POSIX signals"
)
@pytest.mark.parametrize(
    "signum, code, said",
    [(signal.SIGTERM, 143, "terminated"), (signal.SIGINT, 130, "interrupted")],
)
def test_table_signal_mid_write_keeps_old_file(tmp_path, signum, code, said):
    """A real process killed while writing a large CSV (200000 x 64 float64, ~200 MB
    of text): the old file is untouched, its temporary file removed, and the exit
    code is the documented one."""
    path = precious_file(tmp_path / "pe.csv")
    cmd = [
        sys.executable,
        "-m",
        "fastpe",
        "table",
        "200000",
        "64",
        "--dtype",
        "float64",
        "-o",
        str(path),
    ]
    # The default action in the child even where this process ignores the signal
    # (an ignored SIGTERM/SIGINT is inherited, and the CLI rightly leaves it alone).
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=os.path.dirname(sys.executable),
        preexec_fn=lambda: signal.signal(signum, signal.SIG_DFL),
    )
    try:
        deadline = time.monotonic() + 60
        # Wait until rows are being written (the temporary file has grown).
        while not any(os.path.getsize(tmp_path / n) > 0 for n in temp_files(tmp_path)):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the write did not start within 60 s"
            time.sleep(0.01)
        assert path.read_bytes() == PRECIOUS  # nothing visible at FILE while writing
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == code, (out, err)
    assert f"fastpe table: {said}" in err
    assert path.read_bytes() == PRECIOUS
    assert temp_files(tmp_path) == []


@pytest.mark.skipif(
    not hasattr(signal, "SIGTERM") or sys.platform == "win32", reason="POSIX signals"
)
def test_table_sigterm_in_process_and_handler_restored(tmp_path, capsys, monkeypatch):
    path = precious_file(tmp_path / "pe.npy")
    real_save = np.save

    def save(f, table):
        if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
            pytest.fail("no SIGTERM handler while the table is written")  # would kill pytest
        real_save(f, table)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(1)  # the handler runs before this returns

    monkeypatch.setattr(np, "save", save)
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    assert main(["table", "64", "16", "-o", str(path)]) == 143
    assert capsys.readouterr().err == "fastpe table: terminated\n"
    assert path.read_bytes() == PRECIOUS
    assert temp_files(tmp_path) == []
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


def test_exit_codes_documented(capsys):
    assert main(["table", "--help"]) == 0
    out = capsys.readouterr().out
    assert "143  terminated (SIGTERM)" in out and "130  interrupted (Ctrl-C)" in out
    assert "output file:" in out and "symbolic link" in out and "directory" in out


# plot: the same temporary file and rename, with a stand-in for the drawing so
# that this runs without matplotlib (test_plot.py draws real images).


@pytest.fixture
def fake_plot(monkeypatch):
    """Stand-in for _plot.plot_encoding: records where it drew, fails if ``.fail``."""
    import types

    from fastpe import _plot

    state = types.SimpleNamespace(calls=[], fail=False)

    def plot_encoding(seq_len, d_model, *, path, format, **kwargs):
        state.calls.append((path, format))
        with open(path, "wb") as f:
            f.write(b"\x89PNG fake image")
            if state.fail:
                raise OSError(28, "No space left on device")
        return path

    monkeypatch.setattr(_plot, "_require_matplotlib", lambda: None)
    monkeypatch.setattr(_plot, "plot_encoding", plot_encoding)
    return state


def test_plot_replaces_atomically_and_keeps_mode(tmp_path, fake_plot):
    path = precious_file(tmp_path / "pe.png", 0o640)
    assert main(["plot", "10", "8", "-q", "-o", str(path)]) == 0
    [(drawn_to, fmt)] = fake_plot.calls
    assert os.path.dirname(drawn_to) == str(tmp_path) and drawn_to != str(path)
    assert fmt == "png"
    assert path.read_bytes() == b"\x89PNG fake image"
    assert stat.S_IMODE(path.stat().st_mode) == shown_mode(0o640)
    assert temp_files(tmp_path) == []


def test_plot_failure_keeps_old_file(tmp_path, capsys, fake_plot):
    fake_plot.fail = True
    path = precious_file(tmp_path / "pe.svg")
    assert main(["plot", "10", "8", "-o", str(path)]) == 1
    assert "No space left" in capsys.readouterr().err
    assert path.read_bytes() == PRECIOUS
    assert temp_files(tmp_path) == []


def test_plot_through_symlink(tmp_path, fake_plot, symlinks):
    real = precious_file(tmp_path / "real.png")
    link = tmp_path / "pe.png"
    link.symlink_to(real)
    assert main(["plot", "10", "8", "-q", "-o", str(link)]) == 0
    assert link.is_symlink() and real.read_bytes() == b"\x89PNG fake image"
    assert temp_files(tmp_path) == []


def test_plot_output_is_a_directory(tmp_path, fake_plot):
    (tmp_path / "d.png").mkdir()
    assert main(["plot", "10", "8", "-q", "-o", str(tmp_path / "d.png")]) == 1
    assert (tmp_path / "d.png").is_dir()
    assert temp_files(tmp_path) == []


# Optional dependencies are checked before any long work.


def test_plot_without_matplotlib_fails_before_computing(
    tmp_path, capsys, monkeypatch, no_computing
):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as NO_MATPLOTLIB does
    path = tmp_path / "pe.png"
    assert main(["plot", "2000", "512", "-o", str(path)]) == 1
    assert "matplotlib is required for `fastpe plot`" in capsys.readouterr().err
    assert os.listdir(tmp_path) == []


def test_bench_chart_without_matplotlib_fails_before_benchmarking(tmp_path, capsys, monkeypatch):
    from fastpe import _bench

    def measured(*args, **kwargs):
        pytest.fail("the benchmark ran before --chart found matplotlib missing")

    monkeypatch.setattr(_bench, "measure", measured)
    monkeypatch.setattr(_bench, "measure_add_to", measured)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as NO_MATPLOTLIB does
    chart = tmp_path / "bench.png"
    assert main(["bench", "--quick", "--no-progress", "--chart", str(chart)]) == 1
    out, err = capsys.readouterr()
    assert "--chart needs matplotlib: pip install 'fastpe[plot]'" in err
    assert out == "" and not chart.exists()


def test_bench_chart_without_matplotlib_subprocess_is_quick(tmp_path):
    t0 = time.monotonic()
    r = run(
        "bench", "--quick", "--no-progress", "--chart", tmp_path / "bench.png", code=NO_MATPLOTLIB
    )
    elapsed = time.monotonic() - t0
    assert r.returncode == 1 and "--chart needs matplotlib" in r.stderr
    assert r.stdout == ""  # no results table: nothing was measured
    assert elapsed < 30, f"{elapsed:.1f} s: the benchmark ran first"


def test_bench_chart_into_missing_directory_fails_before_benchmarking(
    tmp_path, capsys, monkeypatch
):
    pytest.importorskip("matplotlib")
    from fastpe import _bench

    monkeypatch.setattr(_bench, "measure", lambda *a, **k: pytest.fail("benchmark ran"))
    chart = tmp_path / "missing" / "bench.png"
    assert main(["bench", "--quick", "--no-progress", "--chart", str(chart)]) == 1
    assert "cannot write" in capsys.readouterr().err
