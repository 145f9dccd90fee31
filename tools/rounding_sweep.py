"""How many of fastpe's table and RoPE-cache entries are correctly rounded, per
output dtype, against mpmath at 300 bits rounded once to the target format
(exponent range and subnormals included), beside NumPy's float64 formula.

    python tools/rounding_sweep.py              # the documented sweep (minutes)
    python tools/rounding_sweep.py --entries 2000 --seed 3
    python tools/rounding_sweep.py --others --markdown --entries 5000
    python tools/rounding_sweep.py --others --markdown --entries 5000 --below 131072
    python tools/rounding_sweep.py --search 300000 --widths 200 1000

--others measures, on the same entries and against the same oracle, the code people
use instead (tools/rounding_others.py): the tutorials' NumPy tables,
PyTorch's tutorial table and a torch RoPE cache, transformers' own rotary module
(default and llama3 rules, float32 and its bfloat16 cast) and ggml's rope and
timestep embedding (through the libggml-python wheel), each skipped when its
package is missing.  Every one is measured against the ideal value: the sine or
cosine of the exact angle k * theta^(-2i/d) (for llama3, the exact rule), never
against the library's own rounded frequencies.  --markdown prints the table of
docs/accuracy.md, with the share within one ulp (faithful) and the largest
absolute error.

--search N looks for hard entries instead: rows 0..N of tables of the given widths
whose float64 value lies within a few times its error (4.6e-16) of a float32
rounding midpoint (a fast filter over whole tables), then checks each against
mpmath and prints those whose float32 entry is not the correctly rounded one
(tests/test_rounding.py keeps the ones found as a table).

Rows: random positions up to 2^30 (integers and fractions), and the hard rows
where sin is tiny: numerators of continued-fraction convergents of pi (355,
103993, ... 5419351: sin(p) ~ 1e-5 .. 1e-7 at frequency 1).  Columns: random
over widths 2 .. 65536.  --below N draws integer positions 0 .. N-1 instead (a
model's context).  Prints, per function and dtype, the entries checked,
the share correctly rounded, and the largest error in ulps of the exact value.
tests/test_rounding.py runs a bounded sweep of the same code.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import math
import pathlib
from collections.abc import Callable
from types import ModuleType

import mpmath
import numpy as np

import fastpe

# (precision, least subnormal exponent) of each format
FORMATS = {
    "float64": (53, -1074),
    "float32": (24, -149),
    "float16": (11, -24),
    "bfloat16": (8, -133),
}
# the exponent of each format's largest finite values
EMAX = {"float64": 1023, "float32": 127, "float16": 15, "bfloat16": 127}
CONVERGENTS = (355, 103993, 104348, 208341, 312689, 833719, 1146408, 4272943, 5419351)


def round_to(v: mpmath.mpf, fmt: str) -> float:
    """The exact value v rounded once to nearest (ties to even) in fmt."""
    prec, emin = FORMATS[fmt]
    if v == 0:
        return 0.0
    sign = -1.0 if v < 0 else 1.0
    v = abs(v)
    lead = int(mpmath.floor(mpmath.log(v, 2)))
    # log2 may land one off at a power of two: fix it from the value itself
    while mpmath.ldexp(1, lead) > v:
        lead -= 1
    while mpmath.ldexp(1, lead + 1) <= v:
        lead += 1
    q = max(lead - (prec - 1), emin)
    n = mpmath.ldexp(v, -q)
    i = int(mpmath.floor(n))
    f = n - i
    if f > 0.5 or (f == 0.5 and i % 2):
        i += 1
    if i.bit_length() + q > EMAX[fmt] + 1:  # rounded beyond the largest finite value
        return sign * math.inf
    return sign * math.ldexp(i, q)


def faithful(got: float, exact: mpmath.mpf, fmt: str) -> bool:
    """got is one of the two values of fmt around exact (exact itself if representable)."""
    if got == round_to(exact, fmt):
        return True
    prec, emin = FORMATS[fmt]
    if got == 0:
        return bool(abs(exact) < mpmath.ldexp(1, emin))
    if exact == 0 or not math.isfinite(got) or (got < 0) != (exact < 0):
        return False
    # no value of fmt may lie strictly between got and exact, nor at exact (then
    # that value would be the nearest one): compare the gap with the spacing of fmt
    # next to got on exact's side
    a = abs(got)
    e = math.frexp(a)[1]  # a = m 2^e, 0.5 <= m < 1
    if abs(exact) < a and a == math.ldexp(0.5, e):
        e -= 1  # below a power of two the spacing halves
    return bool(abs(abs(exact) - a) < math.ldexp(1.0, max(e - prec, emin)))


def ulps(got: float, exact: mpmath.mpf, fmt: str) -> float:
    """|got - exact| in units of the format's spacing at the exact value."""
    prec, emin = FORMATS[fmt]
    if exact == 0:
        return 0.0 if got == 0 else math.inf
    lead = int(mpmath.floor(mpmath.log(abs(exact), 2)))
    unit = mpmath.ldexp(1, max(lead - (prec - 1), emin))
    return float(abs(mpmath.mpf(got) - exact) / unit)


def as_float64(a: np.ndarray, fmt: str) -> np.ndarray:
    """Entries of a fastpe output of dtype fmt as float64 (exactly)."""
    if fmt == "bfloat16":
        bits = np.asarray(a).view(np.uint16).astype(np.uint32) << 16
        return bits.view(np.float32).astype(np.float64)
    return np.asarray(a, dtype=np.float64)


def sample(
    rng: np.random.Generator, n: int, below: int | None = None
) -> list[tuple[float, int, int]]:
    """(position, column, width) triples: random rows and columns, hard rows; with
    below, integer positions drawn uniformly from 0 .. below-1 instead (a context)."""
    out = []
    for _ in range(n):
        wide = rng.random() < 0.5
        d = int(2 * rng.integers(1, 32769 if wide else 257))
        j = int(rng.integers(d))
        r = rng.random()
        if below is not None:
            k = float(rng.integers(0, below))
        elif r < 0.3:
            k = float(CONVERGENTS[int(rng.integers(len(CONVERGENTS)))])
            j = int(rng.integers(2))  # frequency 1: sin(k) is tiny
        elif r < 0.5:
            k = float(rng.integers(0, 2**30)) + float(rng.integers(0, 1024)) / 1024.0
        else:
            k = float(rng.integers(0, 2**20))
        out.append((k, j, d))
    return out


def exact_table(k: float, j: int, d: int) -> mpmath.mpf:
    """Vaswani's interleaved entry: sin/cos(k 10000^(-2i/d)), exact."""
    w = mpmath.mpf(10000) ** (-mpmath.mpf(j - j % 2) / d)
    return mpmath.sin(k * w) if j % 2 == 0 else mpmath.cos(k * w)


def fastpe_table(k: float, j: int, d: int, fmt: str, accurate: bool = False) -> float:
    row = fastpe.sinusoidal_at(np.array([k]), d, dtype=fmt, correctly_rounded=accurate)
    return float(as_float64(row, fmt)[0, j])


def numpy_table(k: float, j: int, d: int, fmt: str) -> float:
    """The seeds' NumPy formula in float64 (then cast, for the narrow formats)."""
    i = j // 2
    w = 1.0 / np.power(10000.0, 2 * i / d)
    v = np.sin(k * w) if j % 2 == 0 else np.cos(k * w)
    return float(np.float64(v).astype(np.float32)) if fmt == "float32" else float(v)


def exact_rope(k: float, j: int, d: int, inv_freq: np.ndarray) -> mpmath.mpf:
    """rope_cache's cos (j < d/2) or sin entry of pair j % (d/2) at position k."""
    w = mpmath.mpf(float(inv_freq[j % (d // 2)]))
    return mpmath.cos(k * w) if j < d // 2 else mpmath.sin(k * w)


def fastpe_rope(
    k: float, j: int, d: int, fmt: str, inv_freq: np.ndarray, accurate: bool = False
) -> float:
    at = np.array([k])
    cos, sin = fastpe.rope_cache(
        d, positions=at, inv_freq=inv_freq, dtype=fmt, correctly_rounded=accurate
    )
    half = d // 2
    src = cos if j < half else sin
    return float(as_float64(src, fmt).reshape(-1)[j % half])


def exact_rope_rule(k: float, j: int, d: int, kind: str) -> mpmath.mpf:
    """The ideal rope entry (halves layout) of a rule, frequency and angle exact:
    "rope" is theta 10000; "rope-llama3" is Llama 3.1's rule (theta 500000, factor 8,
    low/high frequency factors 1 and 4, original context 8192) in exact arithmetic."""
    half = d // 2
    i = j % half
    if kind == "rope":
        w = mpmath.mpf(10000) ** (-mpmath.mpf(2 * i) / d)
    else:
        w = mpmath.mpf(500000) ** (-mpmath.mpf(2 * i) / d)
        factor, low, high, old = 8, 1, 4, 8192
        wavelen = 2 * mpmath.pi / w
        if wavelen > mpmath.mpf(old) / low:
            w = w / factor
        elif wavelen >= mpmath.mpf(old) / high:
            smooth = (old / wavelen - low) / (high - low)
            w = (1 - smooth) * w / factor + smooth * w
    return mpmath.cos(k * w) if j < half else mpmath.sin(k * w)


@functools.cache
def _others() -> ModuleType:
    """tools/rounding_others.py, loaded from beside this file (tools is no package)."""
    path = pathlib.Path(__file__).resolve().with_name("rounding_others.py")
    spec = importlib.util.spec_from_file_location("rounding_others", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# the rules of the --others rows, as fastpe.rope_cache's rope_parameters
LLAMA31 = {
    "rope_type": "llama3",
    "rope_theta": 500000.0,
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
}
RULE_NAMES = {"rope": "theta 1e4, ideal", "rope-llama3": "Llama 3.1, ideal"}
_CR = "(correctly_rounded=True)"


class Tally:
    """Entries checked, correctly rounded, faithful; largest ulps and |error|."""

    def __init__(self) -> None:
        self.n = self.cr = self.faithful = 0
        self.ulps = self.abs = 0.0

    def add(self, got: float, exact: mpmath.mpf, fmt: str) -> None:
        self.n += 1
        self.cr += got == round_to(exact, fmt)
        self.faithful += faithful(got, exact, fmt)
        self.ulps = max(self.ulps, ulps(got, exact, fmt))
        self.abs = max(self.abs, float(abs(mpmath.mpf(got) - exact)))


def measure(
    entries: int,
    seed: int,
    fmts: tuple[str, ...] = tuple(FORMATS),
    others: bool = False,
    below: int | None = None,
    accurate: bool = False,
) -> dict[tuple[str, str], Tally]:
    """{(function, dtype): Tally} over the sampled entries; with others, also the
    code of rounding_others.OTHERS (rope kinds at widths up to 4096, as fastpe's);
    with accurate, also fastpe's functions with ``correctly_rounded=True``."""
    rng = np.random.default_rng(seed)
    triples = sample(rng, entries, below)
    results: dict[tuple[str, str], Tally] = {}
    alternatives = _others().OTHERS if others else []

    def record(name: str, fmt: str, got: float | None, exact: mpmath.mpf) -> None:
        if got is not None:
            results.setdefault((name, fmt), Tally()).add(got, exact, fmt)

    freqs: dict[int, np.ndarray] = {}
    with mpmath.workprec(300):
        for k, j, d in triples:
            exact = {"table": exact_table(k, j, d)}
            for fmt in fmts:
                record("sinusoidal_at", fmt, fastpe_table(k, j, d, fmt), exact["table"])
                if accurate:
                    got = fastpe_table(k, j, d, fmt, True)
                    record(f"sinusoidal_at{_CR}", fmt, got, exact["table"])
            got = numpy_table(k, j, d, "float64")
            record("numpy float64 formula", "float64", got, exact["table"])
            if d <= 4096:
                if d not in freqs:
                    freqs[d] = fastpe.rope_frequencies(d, precision="float64")[0]
                ex = exact_rope(k, j, d, freqs[d])
                for fmt in fmts:
                    record("rope_cache", fmt, fastpe_rope(k, j, d, fmt, freqs[d]), ex)
                    if accurate:
                        got = fastpe_rope(k, j, d, fmt, freqs[d], True)
                        record(f"rope_cache{_CR}", fmt, got, ex)
                if others:
                    exact["rope"] = exact_rope_rule(k, j, d, "rope")
                    exact["rope-llama3"] = exact_rope_rule(k, j, d, "rope-llama3")
                    for fmt in fmts:
                        for kind, params in (("rope", None), ("rope-llama3", LLAMA31)):
                            got = fastpe_rope_rule(k, j, d, fmt, params)
                            record(f"rope_cache, {RULE_NAMES[kind]}", fmt, got, exact[kind])
            for name, fmt, kind, entry in alternatives:
                if kind in exact:
                    record(name, fmt, entry(k, j, d), exact[kind])
    return results


def fastpe_rope_rule(k: float, j: int, d: int, fmt: str, params: dict | None) -> float:
    """rope_cache with the rule's frequencies in float64 (precision="float64")."""
    at = np.array([k])
    cos, sin = fastpe.rope_cache(d, params, positions=at, dtype=fmt, precision="float64")
    half = d // 2
    src = cos if j < half else sin
    return float(as_float64(src, fmt).reshape(-1)[j % half])


def sweep(
    entries: int, seed: int, fmts: tuple[str, ...] = tuple(FORMATS)
) -> dict[tuple[str, str], tuple[int, int, float]]:
    """{(function, dtype): (checked, correctly rounded, max ulps)}."""
    return {key: (t.n, t.cr, t.ulps) for key, t in measure(entries, seed, fmts).items()}


def search(rows: int, widths: list[int], chunk: int = 10000) -> list[tuple[int, int, int, bool]]:
    """(position, column, width, correctly rounded) of the float32 entries whose
    float64 value lies within 4 x 4.6e-16 of a float32 midpoint."""
    found = []
    for d in widths:
        for start in range(0, rows, chunk):
            v = fastpe.sinusoidal(min(chunk, rows - start), d, offset=start, dtype=np.float64)
            f = v.astype(np.float32)
            away = np.where(v > f, np.float32(np.inf), np.float32(-np.inf))
            mid = (f.astype(np.float64) + np.nextafter(f, away).astype(np.float64)) / 2
            for r, j in np.argwhere((np.abs(v - mid) < 4 * 4.6e-16) & (v != 0)):
                found.append((start + int(r), int(j), d))
    out = []
    with mpmath.workprec(300):
        for k, j, d in found:
            want = round_to(exact_table(float(k), j, d), "float32")
            out.append((k, j, d, fastpe_table(float(k), j, d, "float32") == want))
    return out


def report(
    results: dict[tuple[str, str], tuple[int, int, float]], print_: Callable = print
) -> None:
    print_(f"{'function':<24}{'dtype':<10}{'entries':>8}{'correctly rounded':>19}{'max ulps':>10}")
    for (name, fmt), (n, ok, worst) in sorted(results.items()):
        print_(f"{name:<24}{fmt:<10}{n:>8}{100.0 * ok / n:>18.2f}%{worst:>10.3g}")


def markdown(results: dict[tuple[str, str], Tally], print_: Callable = print) -> None:
    """The table of docs/accuracy.md: fastpe's rows first, then the others as listed,
    each function's dtypes together."""
    names = list(dict.fromkeys(name for name, _ in results))
    dtypes = list(FORMATS)
    order = sorted(results, key=lambda key: (names.index(key[0]), dtypes.index(key[1])))
    columns = ["correctly rounded", "within 1 ulp", "max ulps", "max abs. error"]
    print_("| code | dtype | entries | " + " | ".join(columns) + " |")
    print_("|---|---|---|---|---|---|---|")
    for name, fmt in order:
        t = results[(name, fmt)]
        label = f"fastpe `{name}`" if name.startswith(("sinusoidal_at", "rope_cache")) else name
        print_(
            f"| {label} | {fmt} | {t.n} | {_share(t.cr, t.n)} | "
            f"{_share(t.faithful, t.n)} | {t.ulps:.3g} | {t.abs:.2g} |"
        )


def _share(part: int, whole: int) -> str:
    """A percentage rounded down: 4999 of 5000 is 99.98 %, never 100 %."""
    return f"{math.floor(10000.0 * part / whole) / 100:.2f} %"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=20000, help="(position, column) samples")
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--search", type=int, default=0, metavar="N", help="rows of the hard search")
    ap.add_argument("--widths", type=int, nargs="+", default=[200, 1000])
    ap.add_argument("--others", action="store_true", help="NumPy, PyTorch, transformers, ggml too")
    ap.add_argument("--markdown", action="store_true", help="print a Markdown table")
    ap.add_argument(
        "--below", type=int, metavar="N", help="integer positions 0 .. N-1 only (a context)"
    )
    ap.add_argument(
        "--correctly-rounded",
        action="store_true",
        help="fastpe's functions with correctly_rounded=True too",
    )
    args = ap.parse_args()
    if args.search:
        hard = search(args.search, args.widths)
        for k, j, d, ok in hard:
            if not ok:
                print(f"not correctly rounded: position {k}, column {j}, width {d}")
        print(f"{len(hard)} entries near a float32 midpoint, {sum(not h[3] for h in hard)} wrong")
        return
    results = measure(
        args.entries,
        args.seed,
        others=args.others,
        below=args.below,
        accurate=args.correctly_rounded,
    )
    if args.markdown:
        markdown(results)
    else:
        report({key: (t.n, t.cr, t.ulps) for key, t in results.items()})
    if args.others:
        for library, why in _others().SKIPPED.items():
            print(f"{library}: skipped ({why})")


if __name__ == "__main__":
    main()
