"""A bounded run of tools/rounding_sweep.py (the documented sweep runs longer):
16- and 32-bit table and RoPE-cache entries against mpmath at 300 bits, rounded
once to the format (subnormals included), at random rows and columns and at the
rows where sin is tiny (convergents of pi)."""

from __future__ import annotations

import importlib.util
import pathlib

import mpmath
import pytest

_TOOL = pathlib.Path(__file__).resolve().parent.parent / "tools" / "rounding_sweep.py"
_spec = importlib.util.spec_from_file_location("rounding_sweep", _TOOL)
sweep_tool = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sweep_tool)


@pytest.mark.parametrize(
    ("value", "fmt", "want"),
    [
        (mpmath.mpf(1) / 3, "float32", float.fromhex("0x1.555556p-2")),
        (mpmath.mpf(2) ** -149 * mpmath.mpf("0.5"), "float32", 0.0),  # tie: to even (0)
        (mpmath.mpf(2) ** -149 * mpmath.mpf("1.5"), "float32", 2.0**-148),  # tie: to even
        (mpmath.mpf(2) ** -24 * mpmath.mpf("0.75"), "float16", 2.0**-24),  # subnormal
        (mpmath.mpf(65520), "float16", float("inf")),  # beyond the largest, rounded
        (mpmath.mpf(1) + mpmath.mpf(2) ** -8, "bfloat16", 1.0),  # tie: to even
        (-(mpmath.mpf(1) + mpmath.mpf(3) * 2**-9), "bfloat16", -(1.0 + 2.0**-7)),
    ],
)
def test_the_oracles_rounding(value, fmt, want):
    with mpmath.workprec(300):
        assert sweep_tool.round_to(value, fmt) == want


def test_narrow_formats_are_correctly_rounded():
    results = sweep_tool.sweep(300, seed=7, fmts=("float32", "float16", "bfloat16"))
    assert {name for name, _ in results} >= {"sinusoidal_at", "rope_cache"}
    for (name, fmt), (n, ok, worst) in results.items():
        if fmt == "float64":
            continue  # (NumPy's formula, for the report)
        assert n >= 100 and ok == n, (name, fmt, n, ok, worst)
        assert worst <= 0.5
