"""The ``fastpe`` command line (also ``python -m fastpe``).

Subcommands: ``table`` (write a table to .npy/.npz/.csv), ``plot`` (the seeds'
pictures in one PNG), ``bench`` (the NumPy/PyTorch comparison, in
``fastpe._bench``) and ``info`` (build and machine).  Exit codes: 0 success,
1 the command could not be completed, 2 invalid command line or arguments,
130 interrupted.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

import fastpe

EXIT_OK = 0
EXIT_FAILURE = 1  # could not do it: I/O error, out of memory, optional dependency missing
EXIT_USAGE = 2  # the command line or an argument value is wrong (argparse's own code)
EXIT_INTERRUPTED = 130

EXIT_CODES_EPILOG = """\
exit codes:
  0    success
  1    the command could not be completed (file not writable, out of memory,
       optional dependency such as matplotlib missing)
  2    invalid command line or argument value (e.g. a negative SEQ_LEN)
  130  interrupted (Ctrl-C)
"""

TABLE_FORMATS = (".npy", ".npz", ".csv")
PLOT_FORMATS = (".png", ".svg", ".pdf")
BENCH_MISSING = "benchmark module not available in this build"

# OpenMP's _OPENMP macro is the release date of the specification it implements.
_OPENMP_SPECS = {
    199810: "1.0", 200203: "2.0", 200505: "2.5", 200805: "3.0", 201107: "3.1",
    201307: "4.0", 201511: "4.5", 201811: "5.0", 202011: "5.1", 202111: "5.2",
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


def _suffix(path: str, allowed: Sequence[str], what: str) -> str:
    suffix = os.path.splitext(path)[1].lower()
    if suffix not in allowed:
        raise UsageError(
            f"cannot tell the {what} format from {path!r}: "
            f"the file name must end in {', '.join(allowed)}"
        )
    return suffix


def _human_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError  # pragma: no cover


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms" if seconds < 1 else f"{seconds:.2f} s"


# ------------------------------------------------------------------- table


def _cmd_table(args: argparse.Namespace) -> int:
    fmt = _suffix(args.output, TABLE_FORMATS, "output")
    # Only the options given on the command line are passed on, so the library's
    # defaults (and a convention's own defaults) apply to the others.
    kwargs: dict[str, Any] = {"dtype": args.dtype}
    for name, value in (("base", args.base), ("offset", args.offset),
                        ("layout", args.layout), ("num_threads", args.threads)):
        if value is not None:
            kwargs[name] = value
    if args.convention != "vaswani":
        kwargs["convention"] = args.convention

    t0 = time.perf_counter()
    table = fastpe.sinusoidal(args.seq_len, args.d_model, **kwargs)
    t_compute = time.perf_counter() - t0

    t0 = time.perf_counter()
    try:
        _write_table(args, fmt, table, kwargs)
    except BaseException:
        # Leave no truncated file behind (disk full, interrupted).
        try:
            os.remove(args.output)
        except OSError:
            pass
        raise
    t_write = time.perf_counter() - t0

    if not args.quiet:
        size = os.path.getsize(args.output)
        print(f"wrote {args.output}: shape {table.shape}, dtype {table.dtype}, {_human_bytes(size)}")
        print(f"time: computed in {_ms(t_compute)}, written in {_ms(t_write)}")
    return EXIT_OK


def _write_table(args: argparse.Namespace, fmt: str, table: Any, kwargs: dict[str, Any]) -> None:
    import numpy as np

    with open(args.output, "wb") as f:
        if fmt == ".npy":
            np.save(f, table)
        elif fmt == ".npz":
            # The table under "table", and the parameters that made it beside it
            # (0-d arrays: loadable without allow_pickle).
            meta = {k: np.asarray(v) for k, v in kwargs.items() if k != "num_threads"}
            meta["dtype"] = np.asarray(str(table.dtype))
            np.savez(f, table=table, seq_len=np.asarray(args.seq_len),
                     d_model=np.asarray(args.d_model), convention=np.asarray(args.convention),
                     **meta)
        else:
            # Enough digits to round-trip: 9 for float32, 17 for float64.
            digits = 9 if table.dtype == np.float32 else 17
            np.savetxt(f, table, fmt=f"%.{digits}g", delimiter=",")


# -------------------------------------------------------------------- plot


def _cmd_plot(args: argparse.Namespace) -> int:
    _suffix(args.output, PLOT_FORMATS, "image")
    from . import _plot

    kwargs: dict[str, Any] = {} if args.base is None else {"base": args.base}
    t0 = time.perf_counter()
    try:
        _plot.plot_encoding(
            args.seq_len, args.d_model, positions=args.positions,
            wave_positions=args.wave_positions, dpi=args.dpi, path=args.output, **kwargs,
        )
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
    rows += [(k, str(v)) for k, v in info.items()
             if k not in {"version", "openmp", "openmp_version", "max_threads", "machine",
                          "cpu_features", "streaming_stores", "numpy"}]
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key + ':':<{width + 1}}  {value}")
    return EXIT_OK


# ------------------------------------------------------------------ parser


def _add_table_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("seq_len", metavar="SEQ_LEN", type=int, help="number of positions (rows)")
    p.add_argument("d_model", metavar="D_MODEL", type=int, help="encoding width (columns)")
    p.add_argument("--base", type=float, default=None, metavar="N",
                   help="wavelength base n (default: 10000, as in the paper)")


def build_parser(prog: str | None = None, *, with_bench_options: bool = True) -> argparse.ArgumentParser:
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

    p = sub.add_parser(
        "table", help="write the encoding table to .npy, .npz or .csv",
        description="Compute the (SEQ_LEN, D_MODEL) table with fastpe.sinusoidal and write it; "
                    "the format comes from the file name: .npy (np.load), .npz (key 'table', "
                    "plus the parameters) or .csv (comma-separated, round-trip precision).",
        epilog="example:\n  fastpe table 2048 512 -o pe.npy\n\n" + EXIT_CODES_EPILOG,
        formatter_class=fmt,
    )
    _add_table_options(p)
    p.add_argument("--offset", type=int, default=None, help="first position (default: 0)")
    p.add_argument("--dtype", choices=("float32", "float64"), default="float32",
                   help="element type (default: float32)")
    p.add_argument("--layout", choices=("interleaved", "split"), default=None,
                   help="interleaved: sin, cos in columns 2i, 2i+1; split: all sines, then all "
                        "cosines (default: interleaved)")
    conventions = _conventions()
    p.add_argument("--convention", choices=conventions, default="vaswani",
                   help="which framework's formula (default: vaswani, the paper's)")
    p.add_argument("--threads", type=int, default=None, metavar="N",
                   help="OpenMP threads (default: OMP_NUM_THREADS or all cores)")
    p.add_argument("-o", "--output", required=True, metavar="FILE",
                   help="output file: .npy, .npz or .csv")
    p.add_argument("-q", "--quiet", action="store_true", help="print nothing on success")
    p.set_defaults(handler=_cmd_table)

    p = sub.add_parser(
        "plot", help="draw the heatmap, sinusoids, vectors and similarity of a table",
        description="One figure with four panels: (a) heatmap of the table with a colour bar, "
                    "(b) the sine wave of a few positions across dimensions (the seeds' "
                    "plotSinusoid), (c) the encoding vectors of a few positions as lines, "
                    "(d) the position-by-position dot-product matrix (near positions are "
                    "alike). Needs matplotlib: pip install 'fastpe[plot]'.",
        epilog="example:\n  fastpe plot 100 512 -o pe.png\n\n" + EXIT_CODES_EPILOG,
        formatter_class=fmt,
    )
    _add_table_options(p)
    p.add_argument("--positions", type=_positions_arg, default=None, metavar="K,K,...",
                   help="positions drawn as lines in panel (c) (default: 0,10,25, "
                        "those below SEQ_LEN)")
    p.add_argument("--wave-positions", type=_positions_arg, default=None, metavar="K,K,...",
                   help="positions whose sinusoids panel (b) draws (default: 0,4,8,12, "
                        "those below SEQ_LEN)")
    p.add_argument("--dpi", type=float, default=100.0,
                   help="resolution; the figure is 14 x 10 inches (default: 100)")
    p.add_argument("-o", "--output", required=True, metavar="FILE",
                   help="image file: .png (or .svg, .pdf)")
    p.add_argument("-q", "--quiet", action="store_true", help="print nothing on success")
    p.set_defaults(handler=_cmd_plot)

    p = sub.add_parser(
        "bench", help="time fastpe against NumPy and PyTorch and print the table",
        description="The benchmark comparison: fastpe against the NumPy and PyTorch "
                    "formulas, with a progress bar; --quick for a short run, --json for machines.",
        epilog=EXIT_CODES_EPILOG, formatter_class=fmt,
    )
    bench = _load_bench() if with_bench_options else None
    if bench is not None:
        bench.add_arguments(p)
    p.set_defaults(handler=_cmd_bench)

    p = sub.add_parser(
        "info", help="version, OpenMP runtime, thread count and CPU features",
        description="What fastpe.build_info() reports: version, OpenMP, the thread count "
                    "num_threads=None uses, machine and CPU features.",
        epilog=EXIT_CODES_EPILOG, formatter_class=fmt,
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
    try:
        if args.command == "bench":
            return _cmd_bench(args)  # _bench reports its own errors
        return args.handler(args)
    except (UsageError, ValueError, TypeError) as exc:
        # Argument values fastpe rejects (its messages name the argument and value).
        print(f"{name}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (OSError, MemoryError) as exc:
        print(f"{name}: error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        print(f"{name}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
