"""tools/rounding_sweep.py --others: the oracle on values checked by hand, the
faithful test, and every other library's code path on a tiny sample (each skipped
when its package is missing), so that the comparison in docs/accuracy.md cannot
silently measure nothing or the wrong column."""

from __future__ import annotations

import importlib.util
import math
import pathlib

import mpmath
import numpy as np
import pytest

_TOOL = pathlib.Path(__file__).resolve().parent.parent / "tools" / "rounding_sweep.py"
_spec = importlib.util.spec_from_file_location("rounding_sweep_tool", _TOOL)
sweep_tool = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sweep_tool)
others = sweep_tool._others()


# sin(355) = -3.01443533594884492143...e-5 (mpmath, 300 bits).  Rounded by hand from its
# hex digits -0x1.f9bd0307d1de3p-16: float32 keeps 23 bits after the point (f9bd03 -> the
# 24th bit is 1 and more follow: up, f9bd04); bfloat16 keeps 7 (f9 -> 1111100|1bd..: up, fa).
@pytest.mark.parametrize(
    ("fmt", "want"),
    [
        ("float64", float.fromhex("-0x1.f9bd0307d1de3p-16")),
        ("float32", float.fromhex("-0x1.f9bd04p-16")),
        ("bfloat16", float.fromhex("-0x1.fap-16")),
    ],
)
def test_the_oracle_on_a_convergent_of_pi(fmt, want):
    with mpmath.workprec(300):
        exact = sweep_tool.exact_table(355.0, 0, 512)  # column 0: frequency 1
        assert sweep_tool.round_to(exact, fmt) == want
        assert sweep_tool.faithful(want, exact, fmt)


def test_faithful_means_one_of_the_two_neighbours():
    one = mpmath.mpf(1)
    with mpmath.workprec(300):
        up, down = one + mpmath.ldexp(1, -30), one - mpmath.ldexp(1, -30)
        assert sweep_tool.faithful(1.0, up, "float32")
        assert sweep_tool.faithful(1.0 + 2.0**-23, up, "float32")
        assert not sweep_tool.faithful(1.0 + 2.0**-22, up, "float32")
        # below a power of two the spacing halves
        assert sweep_tool.faithful(1.0 - 2.0**-24, down, "float32")
        assert not sweep_tool.faithful(1.0 - 2.0**-23, down, "float32")
        assert not sweep_tool.faithful(-1.0, up, "float32")
        assert sweep_tool.faithful(0.0, mpmath.ldexp(1, -150), "float32")
        assert not sweep_tool.faithful(0.0, mpmath.ldexp(3, -150), "float32")


def _exact(kind: str, k: float, j: int, d: int) -> mpmath.mpf:
    if kind == "table":
        return sweep_tool.exact_table(k, j, d)
    return sweep_tool.exact_rope_rule(k, j, d, kind)


def _rows(library: str) -> list:
    rows = [o for o in others.OTHERS if o[0].startswith(library)]
    if not rows:
        pytest.skip(f"{library} not measured: " + "; ".join(others.SKIPPED.values()))
    return rows


@pytest.mark.parametrize("library", ["NumPy", "PyTorch", "torch", "transformers", "ggml"])
def test_every_column_is_the_entry_it_claims(library):
    # small positions, where every library is accurate to its format: a column taken
    # from the wrong place (sin for cos, the wrong pair, the wrong half) is 0.1 .. 1 off
    bound = {"float64": 1e-12, "float32": 1e-6, "bfloat16": 1e-2}
    with mpmath.workprec(300):
        for name, fmt, kind, entry in _rows(library):
            for k in (1.0, 3.0, 17.0):
                for j in range(8):
                    got = entry(k, j, 8)
                    assert got is not None, (name, k, j)
                    error = abs(got - _exact(kind, k, j, 8))
                    assert error < bound[fmt], (name, fmt, k, j, got)


def test_ggml_rope_takes_integer_positions_only():
    [(_, _, _, entry)] = _rows("ggml rope")
    assert entry(2.5, 0, 8) is None
    assert entry(2.0, 0, 8) is not None


def test_a_small_sweep_measures_every_installed_library():
    results = sweep_tool.measure(40, seed=11, fmts=("float32",), others=True)
    for name, fmt, _, _ in others.OTHERS:
        t = results[(name, fmt)]
        assert t.n > 0 and t.cr <= t.faithful <= t.n, (name, fmt)
        assert math.isfinite(t.abs)
    # fastpe against the ideal frequencies, next to them
    for label in sweep_tool.RULE_NAMES.values():
        assert results[(f"rope_cache, {label}", "float32")].n > 0
    # the tutorials round the angle: at positions to 2^30 some entries must be off (if
    # none were, the sweep would be comparing a value with itself)
    t = results[("NumPy tutorial, np.exp form", "float32")]
    assert t.cr < t.n and t.abs > 1e-3


def test_below_draws_a_context_of_integer_positions():
    triples = sweep_tool.sample(np.random.default_rng(1), 200, below=100)
    assert all(k == int(k) and 0 <= k < 100 and 0 <= j < d for k, j, d in triples)
    assert len({k for k, _, _ in triples}) > 50


def test_markdown_table_has_a_row_per_measurement():
    results = sweep_tool.measure(6, seed=5, fmts=("float32",), others=False)
    lines: list[str] = []
    sweep_tool.markdown(results, lines.append)
    assert lines[0].startswith("| code | dtype |")
    assert len(lines) == 2 + len(results)
    assert any(line.startswith("| fastpe `sinusoidal_at` | float32 |") for line in lines)
