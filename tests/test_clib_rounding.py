"""Correct rounding in the C library (fastpe_spec_set_rounding,
fastpe_rope_set_rounding) gives the Python API's correctly_rounded=True bits.

lib/tests/test_rounding.c (ctest) fills a sweep of tables, positions and RoPE
caches through handles set to FASTPE_ROUND_CORRECT and writes one digest per case
to lib/tests/digests_rounding.txt; here the same digests come from
fastpe.sinusoidal / sinusoidal_at / rope_cache(..., correctly_rounded=True).  The
exact values that C test holds for its hard rows (355, 103993, 833719) are
recomputed with mpmath here, and the Python functions must give them too.
"""

from __future__ import annotations

import pathlib
import re

import mpmath
import numpy as np
import pytest
from test_clib import _digest

import fastpe

LIB_TESTS = pathlib.Path(__file__).resolve().parent.parent / "lib" / "tests"
DIGESTS = LIB_TESTS / "digests_rounding.txt"
C_TEST = LIB_TESTS / "test_rounding.c"
HARD = (355, 103993, 833719)
LAYOUT = {"interleaved": "interleaved", "split": "half"}
# test_rounding.c's yarn rule (DeepSeek's, as digest.c's)
YARN = {
    "rope_type": "yarn",
    "factor": 40.0,
    "original_max_position_embeddings": 4096,
    "mscale": 0.707,
    "mscale_all_dim": 1.0,
}


def _frequencies(nf: int) -> np.ndarray:
    """test_rounding.c's frequencies(): (1 + i/8) 2^-i, exact."""
    i = np.arange(nf)
    return np.ldexp(1.0 + i / 8.0, -i)


def _compute(kind: str, fields: list[str]) -> np.ndarray:
    cr = dict(dtype=np.float64, correctly_rounded=True)
    if kind.startswith("cr_spec"):
        conv, d, S, offset = fields[0], *(int(f) for f in fields[1:4])
        if kind == "cr_spec":
            return fastpe.sinusoidal(S, d, offset=offset, convention=conv, **cr)
        positions = offset + 2.5 * np.arange(S, dtype=np.float64) - 3.0
        return fastpe.sinusoidal_at(positions, d, convention=conv, **cr)
    layout = LAYOUT[fields[0]]
    if kind == "cr_rope_rule_yarn":
        head_dim, S, offset, bits = (int(f) for f in fields[1:5])
        cos, sin = fastpe.rope_cache(
            head_dim, YARN, seq_len=S, offset=offset, layout=layout,
            precision=f"float{bits}", **cr,
        )  # fmt: skip
        return np.stack([cos, sin])
    nf, S, offset = (int(f) for f in fields[1:4])
    kw = dict(layout=layout, inv_freq=_frequencies(nf), attention_factor=float(fields[4]), **cr)
    s = np.arange(S, dtype=np.int64)
    if kind == "cr_rope":
        cos, sin = fastpe.rope_cache(2 * nf, seq_len=S, offset=offset, **kw)
    elif kind == "cr_rope_positions":
        cos, sin = fastpe.rope_cache(2 * nf, positions=offset + 7919 * s - 3000, **kw)
    else:  # cr_rope_axes: frequency i on axis i % 2, token s at (offset + 13 s, 5 - 7 s)
        pos = np.stack([offset + 13 * s, 5 - 7 * s], axis=-1)
        sections = (nf - nf // 2, nf // 2)
        cos, sin = fastpe.rope_cache(
            2 * nf, positions=pos, sections=sections, section_layout="interleaved", **kw
        )
    return np.stack([cos, sin])


def _cases() -> list[str]:
    return DIGESTS.read_text().splitlines()


def test_the_committed_file_covers_the_sweep():
    lines = [line.split() for line in _cases()]
    assert {f[0] for f in lines} == {
        "cr_spec", "cr_spec_positions", "cr_rope", "cr_rope_positions", "cr_rope_axes",
        "cr_rope_rule_yarn",
    }  # fmt: skip
    assert {f[1] for f in lines if f[0].startswith("cr_spec")} == {
        "vaswani", "tensor2tensor", "fairseq", "diffusers", "gptj",
    }  # fmt: skip
    assert {f[5] for f in lines if f[0] in ("cr_rope", "cr_rope_axes")} == {"1", "1.25"}
    assert {f[1] for f in lines if f[0].startswith("cr_rope")} == {"interleaved", "split"}
    assert len(lines) == 324


@pytest.mark.parametrize("chunk", range(4))
def test_python_functions_give_the_c_digests(chunk):
    lines = _cases()[chunk::4]
    bad = []
    for line in lines:
        kind, *fields, want = line.split()
        if _digest(_compute(kind, fields)) != int(want, 16):
            bad.append(line)
    assert not bad, f"{len(bad)} of {len(lines)} cases differ, e.g. {bad[:3]}"


def _c_exact_values() -> dict[str, np.ndarray]:
    """test_rounding.c's VASWANI and ROPE tables, read from its source."""
    text = C_TEST.read_text()
    block = re.search(r"---- exact values: begin ----(.*)---- exact values: end ----", text, re.S)
    assert block is not None
    out = {}
    for name, shape in (("VASWANI", (3, 8)), ("ROPE", (2, 3, 4))):
        body = re.search(rf"static const double {name}\[.*?= (\{{.*?\}});\n", block.group(1), re.S)
        assert body is not None, name
        hexes = re.findall(r"-?0x[0-9a-f.]+p[-+]\d+", body.group(1))
        out[name] = np.array([float.fromhex(h) for h in hexes]).reshape(shape)
    return out


def _rounded(x: mpmath.mpf) -> float:
    """x rounded once to nearest float64 (mpmath's conversion rounds to nearest)."""
    return float(x)


def test_the_c_tests_exact_values_are_mpmaths():
    got = _c_exact_values()
    with mpmath.workdps(80):
        vaswani = [
            [
                _rounded(f(mpmath.mpf(k) * mpmath.power(10000, -mpmath.mpf(i) / 4)))
                for i in range(4)
                for f in (mpmath.sin, mpmath.cos)
            ]
            for k in HARD
        ]
        rope = [
            [
                [
                    _rounded(mpmath.mpf(a) * f(mpmath.mpf(k) * mpmath.mpf(w)))
                    for w in (1.0, 0.125)
                    for f in (mpmath.sin, mpmath.cos)
                ]
                for k in HARD
            ]
            for a in (1.0, 1.25)
        ]
    np.testing.assert_array_equal(got["VASWANI"], np.array(vaswani))
    np.testing.assert_array_equal(got["ROPE"], np.array(rope))


def test_the_python_functions_give_the_exact_values_on_the_hard_rows():
    exact = _c_exact_values()
    cr = dict(dtype=np.float64, correctly_rounded=True)
    for r, k in enumerate(HARD):
        np.testing.assert_array_equal(
            fastpe.sinusoidal(1, 8, offset=k, **cr)[0], exact["VASWANI"][r]
        )
    np.testing.assert_array_equal(fastpe.sinusoidal_at(np.array(HARD), 8, **cr), exact["VASWANI"])
    for a, att in enumerate((1.0, 1.25)):
        cos, sin = fastpe.rope_cache(
            4, positions=np.array(HARD), inv_freq=np.array([1.0, 0.125]), attention_factor=att,
            **cr,
        )  # fmt: skip
        np.testing.assert_array_equal(sin[:, :2], exact["ROPE"][a][:, 0::2])
        np.testing.assert_array_equal(cos[:, :2], exact["ROPE"][a][:, 1::2])
