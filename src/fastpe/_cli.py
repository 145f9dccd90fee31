"""The ``fastpe`` command line (also ``python -m fastpe``).

Subcommands: ``table`` (write a table to .npy/.npz/.csv), ``plot`` (the seeds'
pictures in one PNG), ``bench`` (the NumPy/PyTorch comparison, in
``fastpe._bench``) and ``info`` (build and machine).  Exit codes: 0 success,
1 the command could not be completed, 2 invalid command line or arguments,
130 interrupted (Ctrl-C), 143 terminated (SIGTERM).

``table`` and ``plot`` never write the output file in place: they write a
temporary file in the same directory and rename it over the output only when
it is complete (see ``_AtomicOutput``), so a failed or interrupted run leaves
an existing file exactly as it was.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import importlib
import json
import os
import signal
import stat
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import fastpe

EXIT_OK = 0
EXIT_FAILURE = 1  # could not do it: I/O error, out of memory, optional dependency missing
EXIT_USAGE = 2  # the command line or an argument value is wrong (argparse's own code)
EXIT_INTERRUPTED = 130  # 128 + SIGINT
EXIT_TERMINATED = 143  # 128 + SIGTERM, what a shell reports for a process killed by SIGTERM

EXIT_CODES_EPILOG = """\
exit codes:
  0    success
  1    the command could not be completed (file not writable, out of memory,
       optional dependency such as matplotlib missing)
  2    invalid command line or argument value (e.g. a negative SEQ_LEN)
  130  interrupted (Ctrl-C)
  143  terminated (SIGTERM)
"""

OUTPUT_EPILOG = """\
output file:
  FILE is never written in place. The {what} goes to a temporary file in
  FILE's directory (created before anything is computed, so an unwritable
  directory fails at once), which is renamed to FILE only when complete: an
  error, Ctrl-C or SIGTERM leaves an existing FILE exactly as it was and
  removes the temporary file.
  - an existing FILE this user may not write (read-only, another user's, on a
    read-only file system) is refused and left unchanged (exit 1)
  - a symbolic link is followed: the file it points to is written (replaced,
    or created) and the link kept; a link into a missing directory fails
    (exit 1)
  - a directory, or anything else that is not a regular file, is refused
    (exit 1)
  - a new FILE gets the usual permissions (0666 minus the umask); a replaced
    FILE keeps its permissions (and, where allowed, its owner and group)
"""

TABLE_FORMATS = (".npy", ".npz", ".csv")
PLOT_FORMATS = (".png", ".svg", ".pdf")
BENCH_MISSING = "benchmark module not available in this build"

# OpenMP's _OPENMP macro is the release date of the specification it implements.
_OPENMP_SPECS = {
    199810: "1.0",
    200203: "2.0",
    200505: "2.5",
    200805: "3.0",
    201107: "3.1",
    201307: "4.0",
    201511: "4.5",
    201811: "5.0",
    202011: "5.1",
    202111: "5.2",
    202411: "6.0",
}


class UsageError(Exception):
    """An argument value the parser accepted but the command cannot use (exit 2)."""


def _conventions() -> tuple[str, ...]:
    return tuple(getattr(fastpe, "CONVENTIONS", ("vaswani",)))


def _positions_arg(text: str) -> list[int]:
    """argparse type for ``0,10,25``."""
    try:
        values = [int(v) for v in text.replace(" ", "").split(",") if v != ""]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers such as 0,10,25, got {text!r}"
        ) from None
    if not values:
        raise argparse.ArgumentTypeError("expected at least one position")
    return values


def _quoted(path: str) -> str:
    """A file name as messages show it: quoted, control characters escaped, and on
    Windows its backslashes single, as the user typed them (repr doubles them;
    they are never part of a name there, so nothing becomes ambiguous)."""
    text = repr(path)
    return text.replace("\\\\", "\\") if sys.platform == "win32" else text


def _error_text(exc: BaseException) -> str:
    """str(exc), with the file names of an OSError raised by the OS (not by this
    module, which names files itself) shown as :func:`_quoted` shows them."""
    if not (isinstance(exc, OSError) and isinstance(exc.filename, (str, bytes)) and exc.strerror):
        return str(exc)
    winerror = getattr(exc, "winerror", None)  # what str() shows on Windows
    code = f"[WinError {winerror}]" if winerror else f"[Errno {exc.errno}]"
    text = f"{code} {exc.strerror}: {_quoted(os.fsdecode(exc.filename))}"
    if isinstance(exc.filename2, (str, bytes)):
        text += f" -> {_quoted(os.fsdecode(exc.filename2))}"
    return text


def _suffix(path: str, allowed: Sequence[str], what: str) -> str:
    suffix = os.path.splitext(path)[1].lower()
    if suffix not in allowed:
        raise UsageError(
            f"cannot tell the {what} format from {_quoted(path)}: "
            f"the file name must end in {', '.join(allowed)}"
        )
    return suffix


def _human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError  # pragma: no cover


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms" if seconds < 1 else f"{seconds:.2f} s"


# ------------------------------------------------------------ output files


class Terminated(BaseException):
    """SIGTERM, raised in the main thread while ``table`` or ``plot`` runs.

    A BaseException, like KeyboardInterrupt, so that no ``except Exception``
    swallows it and the ``with`` blocks on the way out remove temporary files.
    """


def _raise_terminated(signum: int, frame: Any) -> None:
    raise Terminated


def _raise_on_sigterm() -> Callable[[], None] | None:
    """Make SIGTERM raise :class:`Terminated` until the returned function is called.

    Only where SIGTERM still has its default action (which kills the process
    without running any cleanup) and only in the main thread, where Python runs
    signal handlers: a handler installed by a program that calls ``main`` itself,
    or an inherited SIG_IGN, is left alone.  Returns None when nothing was changed.
    """
    if threading.current_thread() is not threading.main_thread():
        return None
    sigterm = getattr(signal, "SIGTERM", None)
    if sigterm is None or signal.getsignal(sigterm) != signal.SIG_DFL:
        return None
    signal.signal(sigterm, _raise_terminated)

    def restore() -> None:
        signal.signal(sigterm, signal.SIG_DFL)

    return restore


def _umask() -> int:
    # The only portable way to read the umask is to set it; 0o022 (not 0) is what
    # another thread would see in the meantime.
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


class _AtomicOutput:
    """The output file of ``table`` and ``plot``, which appears only when complete.

    The content is written to a temporary file in the directory of the real
    target (a symbolic link is followed, so the link itself survives) and
    :meth:`commit` renames it over the target.  Leaving the ``with`` block
    without committing (an error, Ctrl-C, SIGTERM) removes the temporary file
    and touches nothing else.  The temporary file is created in ``__init__``, so
    an output that cannot be written is reported before any long computation.

    An existing target that this user may not write (``os.access``: read-only,
    another user's) is refused rather than replaced, because renaming over it
    needs only a writable directory and would defeat its permissions; so are
    directories and anything that is not a regular file.
    """

    def __init__(self, path: str):
        self.path = path
        self.target = os.path.realpath(path)
        self.tmp: str | None = None
        self._fd: int | None = None
        self._existing = self._check_existing()
        directory = os.path.dirname(self.target)
        # The name is kept well below the usual 255-byte limit for the random
        # part and suffix mkstemp adds.
        prefix = "." + os.path.basename(self.target)[:200] + "."
        try:
            self._fd, self.tmp = tempfile.mkstemp(dir=directory, prefix=prefix, suffix=".tmp")
        except OSError as exc:
            raise type(exc)(
                exc.errno,
                f"{exc.strerror or exc}: cannot create a file in {_quoted(directory)} "
                f"for {self._name()}",
            ) from None

    def _name(self) -> str:
        if os.path.islink(self.path):
            return f"{_quoted(self.path)} (a link to {_quoted(self.target)})"
        return _quoted(self.path)

    def _check_existing(self) -> os.stat_result | None:
        try:
            st = os.stat(self.target)
        except FileNotFoundError:
            return None  # a new file (or a missing directory, which mkstemp reports)
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(
                errno.EISDIR, f"Is a directory: {self._name()}; the output must be a file name"
            )
        if not stat.S_ISREG(st.st_mode):
            raise OSError(f"{self._name()} exists and is not a regular file; it is not replaced")
        if not os.access(self.target, os.W_OK):
            raise PermissionError(
                errno.EACCES,
                f"Permission denied: {self._name()} exists "
                "and is not writable by this user; it was left "
                "unchanged",
            )
        if hasattr(os, "geteuid") and os.geteuid() not in (0, st.st_uid):
            # In a sticky directory such as /tmp only the owner may rename over a
            # file: the final os.replace would fail, after all the computing.
            parent = os.stat(os.path.dirname(self.target))
            if parent.st_mode & stat.S_ISVTX and parent.st_uid != os.geteuid():
                raise PermissionError(
                    errno.EPERM,
                    f"Operation not permitted: {self._name()} "
                    "belongs to another user in a sticky directory "
                    "(like /tmp), where only its owner may replace "
                    "it; it was left unchanged",
                )
        return st

    @property
    def tmp_path(self) -> str:
        """The temporary file's name, for writers that open it themselves."""
        assert self.tmp is not None
        return self.tmp

    def file(self) -> Any:
        """The temporary file, opened for writing (closing it keeps it for :meth:`commit`)."""
        assert self._fd is not None
        return os.fdopen(self._fd, "wb", closefd=False)

    def commit(self) -> None:
        """Put the complete temporary file in place of the target."""
        assert self._fd is not None and self.tmp is not None
        # On disk before the rename makes it the output: a crash right after
        # cannot leave an empty file where the old one was.
        os.fsync(self._fd)
        os.close(self._fd)
        self._fd = None
        self._copy_metadata()
        try:
            os.replace(self.tmp, self.target)
        except OSError as exc:  # named after the output, not the temporary file
            raise type(exc)(
                exc.errno,
                f"{exc.strerror or exc}: cannot replace {self._name()}; it was left unchanged",
            ) from None
        self.tmp = None

    def _copy_metadata(self) -> None:
        # What writing the file in place would have given: a new file the mode
        # open() creates (mkstemp's is 0o600), a replaced one its own mode and,
        # where this user may set them (root; a member of its group), its owner
        # and group.  setuid/setgid/sticky bits are not carried to a data file.
        st, tmp = self._existing, self.tmp
        assert tmp is not None
        if st is None:
            os.chmod(tmp, 0o666 & ~_umask())
            return
        if hasattr(os, "chown") and (st.st_uid, st.st_gid) != (os.geteuid(), os.getegid()):
            for uid in (st.st_uid, -1):
                try:
                    os.chown(tmp, uid, st.st_gid)
                    break
                except OSError:
                    pass
        os.chmod(tmp, stat.S_IMODE(st.st_mode) & 0o777)

    def discard(self) -> None:
        """Remove the temporary file, if it is still there (never the target)."""
        try:
            if self._fd is not None:
                os.close(self._fd)
        finally:
            self._fd = None
            if self.tmp is not None:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.tmp)
                self.tmp = None

    def __enter__(self) -> _AtomicOutput:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.discard()


# ------------------------------------------------------------------- table


def _cmd_table(args: argparse.Namespace) -> int:
    fmt = _suffix(args.output, TABLE_FORMATS, "output")
    # Only the options given on the command line are passed on, so the library's
    # defaults (and a convention's own defaults) apply to the others.
    kwargs: dict[str, Any] = {"dtype": args.dtype}
    for name, value in (
        ("base", args.base),
        ("offset", args.offset),
        ("layout", args.layout),
        ("num_threads", args.threads),
    ):
        if value is not None:
            kwargs[name] = value
    if args.convention != "vaswani":
        kwargs["convention"] = args.convention

    # Opened before computing: a table of gigabytes is not computed for an
    # output that cannot be written.
    with _AtomicOutput(args.output) as out:
        t0 = time.perf_counter()
        table = fastpe.sinusoidal(args.seq_len, args.d_model, **kwargs)
        t_compute = time.perf_counter() - t0

        t0 = time.perf_counter()
        with out.file() as f:
            _write_table(f, args, fmt, table, kwargs)
        out.commit()
        t_write = time.perf_counter() - t0

    if not args.quiet:
        size = os.path.getsize(args.output)
        print(
            f"wrote {args.output}: shape {table.shape}, dtype {table.dtype}, {_human_bytes(size)}"
        )
        print(f"time: computed in {_ms(t_compute)}, written in {_ms(t_write)}")
    return EXIT_OK


def _write_table(
    f: Any, args: argparse.Namespace, fmt: str, table: Any, kwargs: dict[str, Any]
) -> None:
    import numpy as np

    if fmt == ".npy":
        np.save(f, table)
    elif fmt == ".npz":
        # The table under "table", and the parameters that made it beside it
        # (0-d arrays: loadable without allow_pickle).
        meta: dict[str, Any] = {k: np.asarray(v) for k, v in kwargs.items() if k != "num_threads"}
        meta["dtype"] = np.asarray(str(table.dtype))
        np.savez(
            f,
            table=table,
            seq_len=np.asarray(args.seq_len),
            d_model=np.asarray(args.d_model),
            convention=np.asarray(args.convention),
            **meta,
        )
    else:
        # Enough digits to round-trip: 5 for float16, 9 for float32, 17 for float64.
        digits = {2: 5, 4: 9}.get(table.dtype.itemsize, 17)
        np.savetxt(f, table, fmt=f"%.{digits}g", delimiter=",")


# -------------------------------------------------------------------- plot


def _cmd_plot(args: argparse.Namespace) -> int:
    fmt = _suffix(args.output, PLOT_FORMATS, "image")
    from . import _plot

    # Checked first: without matplotlib nothing is computed and no file is created.
    try:
        _plot._require_matplotlib()
    except ImportError:
        print(_plot.MATPLOTLIB_MISSING, file=sys.stderr)
        return EXIT_FAILURE

    kwargs: dict[str, Any] = {} if args.base is None else {"base": args.base}
    t0 = time.perf_counter()
    try:
        with _AtomicOutput(args.output) as out:
            # The temporary name ends in .tmp, so the format is given explicitly.
            _plot.plot_encoding(
                args.seq_len,
                args.d_model,
                positions=args.positions,
                wave_positions=args.wave_positions,
                dpi=args.dpi,
                path=out.tmp_path,
                format=fmt[1:],
                **kwargs,
            )
            out.commit()
    except ImportError as exc:
        if str(exc) != _plot.MATPLOTLIB_MISSING:
            raise
        print(_plot.MATPLOTLIB_MISSING, file=sys.stderr)
        return EXIT_FAILURE
    if not args.quiet:
        print(f"wrote {args.output} in {_ms(time.perf_counter() - t0)}")
    return EXIT_OK


# ------------------------------------------------------------------- bench


def _load_bench():
    """fastpe._bench, or None in a build that does not have it."""
    name = f"{__package__}._bench"
    try:
        return importlib.import_module(name)  # i.e. `from . import _bench`, lazily
    except ModuleNotFoundError as exc:
        if exc.name != name:
            raise  # _bench exists but one of its own imports failed: show that
        return None


def _cmd_bench(args: argparse.Namespace) -> int:
    bench = _load_bench()
    if bench is None:
        print(f"fastpe bench: {BENCH_MISSING}", file=sys.stderr)
        return EXIT_USAGE
    return int(bench.run(args))


# -------------------------------------------------------------------- info


def _cmd_info(args: argparse.Namespace) -> int:
    info = fastpe.build_info()
    if args.json:
        print(json.dumps(info, indent=2, sort_keys=True))
        return EXIT_OK
    if info["openmp"]:
        spec = _OPENMP_SPECS.get(info["openmp_version"])
        openmp = f"yes (_OPENMP {info['openmp_version']}" + (f", OpenMP {spec})" if spec else ")")
    else:
        openmp = "no (serial build)"
    omp_env = os.environ.get("OMP_NUM_THREADS")
    threads = f"{info['max_threads']} (num_threads=None; OMP_NUM_THREADS={omp_env or 'unset'})"
    rows = [
        ("fastpe", info["version"]),
        ("OpenMP", openmp),
        ("threads", threads),
        ("machine", info["machine"]),
        ("CPU features", " ".join(info.get("cpu_features") or []) or "(unknown)"),
        ("streaming", info.get("streaming_stores", "plain")),
        ("NumPy", info["numpy"]),
        ("Python", sys.version.split()[0]),
    ]
    rows += [
        (k, str(v))
        for k, v in info.items()
        if k
        not in {
            "version",
            "openmp",
            "openmp_version",
            "max_threads",
            "machine",
            "cpu_features",
            "streaming_stores",
            "numpy",
        }
    ]
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key + ':':<{width + 1}}  {value}")
    return EXIT_OK


# ------------------------------------------------------------------ parser


def _add_output_options(p: argparse.ArgumentParser, what: str, handler: Callable) -> None:
    """-o/--output and -q/--quiet of the commands that write a file, and the handler."""
    p.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="FILE",
        help=f"{what} (replaced only when complete; see 'output file' below)",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="print nothing on success")
    p.set_defaults(handler=handler)


def _add_table_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("seq_len", metavar="SEQ_LEN", type=int, help="number of positions (rows)")
    p.add_argument("d_model", metavar="D_MODEL", type=int, help="encoding width (columns)")
    p.add_argument(
        "--base",
        type=float,
        default=None,
        metavar="N",
        help="wavelength base n (default: 10000, as in the paper)",
    )


def build_parser(
    prog: str | None = None, *, with_bench_options: bool = True
) -> argparse.ArgumentParser:
    """The ``fastpe`` argument parser.  ``with_bench_options`` imports
    ``fastpe._bench`` to add the ``bench`` subcommand's options."""
    fmt = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(
        prog=prog or "fastpe",
        description="Fast, accurate sinusoidal positional encodings "
        "(P[k,2i] = sin(k/n^(2i/d)), P[k,2i+1] = cos(k/n^(2i/d))).",
        epilog=EXIT_CODES_EPILOG + "\nRun 'fastpe COMMAND --help' for a command's options.",
        formatter_class=fmt,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {fastpe.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def command(
        name: str, help: str, description: str, example: str = "", what: str = ""
    ) -> argparse.ArgumentParser:
        """A subcommand's parser; with ``example``, one that writes a table's file
        (its epilog shows the example and the output file's rules, and it takes
        the table's arguments)."""
        epilog = EXIT_CODES_EPILOG
        if example:
            epilog = f"example:\n  {example}\n\n{OUTPUT_EPILOG.format(what=what)}\n{epilog}"
        p = sub.add_parser(
            name, help=help, description=description, epilog=epilog, formatter_class=fmt
        )
        if example:
            _add_table_options(p)
        return p

    p = command(
        "table",
        "write the encoding table to .npy, .npz or .csv",
        "Compute the (SEQ_LEN, D_MODEL) table with fastpe.sinusoidal and write it; "
        "the format comes from the file name: .npy (np.load), .npz (key 'table', "
        "plus the parameters) or .csv (comma-separated, round-trip precision).",
        "fastpe table 2048 512 -o pe.npy",
        "table",
    )
    p.add_argument("--offset", type=int, default=None, help="first position (default: 0)")
    p.add_argument(
        "--dtype",
        choices=("float16", "float32", "float64"),
        default="float32",
        help="element type (default: float32); bfloat16 has no .npy type, so it is "
        "left to the Python API",
    )
    p.add_argument(
        "--layout",
        choices=("interleaved", "split"),
        default=None,
        help="interleaved: sin, cos in columns 2i, 2i+1; split: all sines, then all "
        "cosines (default: interleaved)",
    )
    conventions = _conventions()
    p.add_argument(
        "--convention",
        choices=conventions,
        default="vaswani",
        help="which framework's formula (default: vaswani, the paper's)",
    )
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        metavar="N",
        help="OpenMP threads (default: OMP_NUM_THREADS or all cores)",
    )
    _add_output_options(p, "output file: .npy, .npz or .csv", _cmd_table)

    p = command(
        "plot",
        "draw the heatmap, sinusoids, vectors and similarity of a table",
        "One figure with four panels: (a) heatmap of the table with a colour bar, "
        "(b) the sine wave of a few positions across dimensions (the seeds' "
        "plotSinusoid), (c) the encoding vectors of a few positions as lines, "
        "(d) the position-by-position dot-product matrix (near positions are "
        "alike). Needs matplotlib: pip install 'fastpe[plot]'.",
        "fastpe plot 100 512 -o pe.png",
        "image",
    )
    for flag, shown, default in (
        ("--positions", "positions drawn as lines in panel (c)", "0,10,25"),
        ("--wave-positions", "positions whose sinusoids panel (b) draws", "0,4,8,12"),
    ):
        p.add_argument(
            flag,
            type=_positions_arg,
            default=None,
            metavar="K,K,...",
            help=f"{shown} (default: {default}, those below SEQ_LEN)",
        )
    p.add_argument(
        "--dpi",
        type=float,
        default=100.0,
        help="resolution; the figure is 14 x 10 inches (default: 100)",
    )
    _add_output_options(p, "image file: .png (or .svg, .pdf)", _cmd_plot)

    p = command(
        "bench",
        "time fastpe against NumPy and PyTorch and print the table",
        "The benchmark comparison: fastpe against the NumPy and PyTorch "
        "formulas, with a progress bar; --quick for a short run, --json for machines.",
    )
    bench = _load_bench() if with_bench_options else None
    if bench is not None:
        bench.add_arguments(p)
    p.set_defaults(handler=_cmd_bench)

    p = command(
        "info",
        "version, OpenMP runtime, thread count and CPU features",
        "What fastpe.build_info() reports: version, OpenMP, the thread count "
        "num_threads=None uses, machine and CPU features.",
    )
    p.add_argument("--json", action="store_true", help="print build_info() as JSON")
    p.set_defaults(handler=_cmd_info)
    return parser


def _command_of(argv: Sequence[str]) -> str | None:
    """The subcommand named on the command line (the first non-option word)."""
    return next((a for a in argv if not a.startswith("-")), None)


def main(argv: Sequence[str] | None = None, *, prog: str | None = None) -> int:
    """Run the command line; returns the exit code (see ``fastpe --help``)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    # fastpe._bench (and whatever it imports) is loaded only for `fastpe bench`.
    parser = build_parser(prog, with_bench_options=_command_of(argv) == "bench")
    try:
        args, extra = parser.parse_known_args(argv)
        # Without fastpe._bench, `bench`'s options are unknown: let the handler
        # say the module is missing instead of calling them unrecognized.
        if extra and not (args.command == "bench" and _load_bench() is None):
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
    except SystemExit as exc:  # --help, --version, or a usage error already printed
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    name = f"{parser.prog} {args.command}"
    # The commands that write a file turn SIGTERM into an exception, so that the
    # temporary file is removed on the way out.
    restore = _raise_on_sigterm() if args.command in ("table", "plot") else None
    try:
        if args.command == "bench":
            return _cmd_bench(args)  # _bench reports its own errors
        return args.handler(args)
    except (UsageError, ValueError, TypeError) as exc:
        # Argument values fastpe rejects (its messages name the argument and value).
        print(f"{name}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (OSError, MemoryError) as exc:
        print(f"{name}: error: {type(exc).__name__}: {_error_text(exc)}", file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        print(f"{name}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Terminated:
        print(f"{name}: terminated", file=sys.stderr)
        return EXIT_TERMINATED
    finally:
        if restore is not None:
            restore()
