"""The C library (lib/) computes what the Python functions compute, bit for bit.

lib/tests/digest.c sweeps dtype x layout x width x offset (negative, near the
limit) x positions x thread counts, for every convention and for RoPE (the cache
and the rotation of both tensor layouts, from explicit frequencies; the caches
of handles made from each rope_type's rule), and writes
one digest per case to lib/tests/digests.txt; ctest (tools/test_clib.sh)
compares the static, shared and serial builds with that file.  Here the same
digests are computed from the Python functions' arrays: the committed file is
the meeting point, and neither side's values are copied from the other.
"""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest
from rules import LLAMA31

import fastpe

DIGESTS = pathlib.Path(__file__).resolve().parent.parent / "lib" / "tests" / "digests.txt"


def _digest(a: np.ndarray) -> int:
    """lib/tests/digest.c's digest of an array's bytes (C order)."""
    raw = np.ascontiguousarray(a).tobytes()
    n = len(raw)
    words = np.frombuffer(raw + b"\0" * (-n % 8), dtype="<u8")
    mixed = words ^ (words >> np.uint64(29))
    weights = np.arange(len(words), dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    with np.errstate(over="ignore"):
        total = int(np.sum(mixed * weights, dtype=np.uint64))
    return (n + total) % 2**64


def _dtype(name: str):
    if name == "bfloat16":
        ml_dtypes = pytest.importorskip("ml_dtypes")
        return ml_dtypes.bfloat16
    return np.dtype(name)


def _x_init(shape: tuple[int, ...], dtype) -> np.ndarray:
    n = int(np.prod(shape))
    values = ((np.arange(n, dtype=np.int64) * 37) % 201 - 100) / 16.0
    return values.astype(dtype).reshape(shape)


# lib/tests/digest.c's custom(): every knob away from its default
CUSTOM = fastpe.Convention(
    base=321.0,
    denominator="h-shift",
    shift=0.5,
    position_scale=2.0,
    layout="split_cos_first",
    odd="zero",
    padding_idx=4,
)


def _compute_spec(kind: str, dtype, conv: str, d: int, S: int, offset: int):
    convention = CUSTOM if conv == "custom" else conv
    if kind == "spec":
        return fastpe.sinusoidal(S, d, offset=offset, dtype=dtype, convention=convention)
    if kind == "spec_add":
        x = _x_init((2, S, d), dtype)
        return fastpe.add_to(x, offset=offset, scale=0.5, convention=convention)
    positions = offset + 2.5 * np.arange(S, dtype=np.float64) - 3.0
    return fastpe.sinusoidal_at(positions, d, dtype=dtype, convention=convention)


def _compute_rope(kind: str, dtype, layout: str, nf: int, S: int, offset: int, attention: float):
    """digest.c's sweep_rope through fastpe.rope_cache / fastpe.apply_rope."""
    inv_freq = 1.0 / (1 + np.arange(nf, dtype=np.int64) ** 2).astype(np.float64)
    lay = "half" if layout == "split" else "interleaved"
    steps = (37 * np.arange(S, dtype=np.int64)) % 11 - 5
    if kind.startswith("rope_cache"):
        where = (
            {"positions": offset + steps}
            if kind.endswith("_positions")
            else {"seq_len": S, "offset": offset}
        )
        cos, sin = fastpe.rope_cache(
            2 * nf,
            layout=lay,
            dtype=dtype,
            inv_freq=inv_freq,
            attention_factor=attention,
            **where,
        )
        return np.stack([cos, sin])
    bhsd = kind.startswith("rope_bhsd")
    x = _x_init((2, 3, S, 2 * nf + 2) if bhsd else (2, S, 3, 2 * nf + 2), dtype)
    where = (
        {"positions": offset + 3 * np.arange(2)[:, None] + steps[None, :]}
        if kind.endswith("_positions")
        else {"offset": offset}
    )
    fastpe.apply_rope(
        x,
        seq_axis=-2 if bhsd else -3,
        layout=lay,
        inv_freq=inv_freq,
        attention_factor=attention,
        **where,
    )
    return x


# digest.c's rule_params: one model's rope_parameters (and max_position_embeddings)
# per rope_type, at head_dim
RULES = {
    "default": (128, {"rope_theta": 500000.0}, None),
    "linear": (96, {"rope_type": "linear", "factor": 4.0, "partial_rotary_factor": 0.5}, None),
    "dynamic": (64, {"rope_type": "dynamic", "factor": 2.0}, 64),
    "yarn": (
        64,
        {
            "rope_type": "yarn",
            "factor": 40.0,
            "original_max_position_embeddings": 4096,
            "mscale": 0.707,
            "mscale_all_dim": 1.0,
        },
        None,
    ),
    "longrope": (
        16,
        {
            "rope_type": "longrope",
            "short_factor": [1.0 + i / 8.0 for i in range(8)],
            "long_factor": [1.0 + 3.0 * i for i in range(8)],
            "factor": 8.0,
            "original_max_position_embeddings": 100,
        },
        None,
    ),
    "llama3": (128, LLAMA31, None),
}


def _compute_rule(kind: str, dtype, layout: str, head_dim: int, S: int, offset: int, bits: int):
    """digest.c's sweep_rules through fastpe.rope_cache with rope_parameters."""
    want_dim, params, mpe = RULES[kind.removeprefix("rope_rule_")]
    assert head_dim == want_dim
    cos, sin = fastpe.rope_cache(
        head_dim,
        params,
        seq_len=S,
        offset=offset,
        layout="half" if layout == "split" else "interleaved",
        dtype=dtype,
        max_position_embeddings=mpe,
        precision=f"float{bits}",
    )
    return np.stack([cos, sin])


def _axes_case(nf: int, S: int, offset: int, batch: int):
    """digest.c's sweep_rope_axes: (sections, positions of shape (batch, S, 3))."""
    sections = (nf - 2 * (nf // 3), nf // 3, nf // 3)
    b, s, a = np.ix_(np.arange(batch), np.arange(S), np.arange(3))
    return sections, offset + (37 * s + 13 * a + 5 * b) % 11 - 5 + 7 * a


def _compute_rope_axes(kind: str, dtype, layout: str, nf: int, S: int, offset: int, att: float):
    """digest.c's sweep_rope_axes through fastpe.rope_cache / fastpe.apply_rope with
    sections."""
    inv_freq = 1.0 / (1 + np.arange(nf, dtype=np.int64) ** 2).astype(np.float64)
    kw = dict(
        layout="half" if layout == "split" else "interleaved",
        inv_freq=inv_freq,
        attention_factor=att,
        section_layout="interleaved" if kind.endswith("_interleaved") else "contiguous",
    )
    what = kind.removeprefix("rope_axes_").removesuffix("_interleaved")
    if what == "cache":
        sections, pos = _axes_case(nf, S, offset, 1)
        cos, sin = fastpe.rope_cache(
            2 * nf, positions=pos[0], sections=sections, dtype=dtype, **kw
        )
        return np.stack([cos, sin])
    sections, pos = _axes_case(nf, S, offset, 2)
    bhsd = what == "bhsd"
    x = _x_init((2, 3, S, 2 * nf + 2) if bhsd else (2, S, 3, 2 * nf + 2), dtype)
    fastpe.apply_rope(x, seq_axis=-2 if bhsd else -3, positions=pos, sections=sections, **kw)
    return x


def _compute(kind: str, dtype, layout: str, d: int, S: int, offset: int, base: float):
    if kind.startswith("rope_axes_"):
        return _compute_rope_axes(kind, dtype, layout, d, S, offset, base)
    if kind.startswith("rope_rule_"):
        return _compute_rule(kind, dtype, layout, d, S, offset, int(base))
    if kind.startswith("rope"):
        return _compute_rope(kind, dtype, layout, d, S, offset, base)
    if kind.startswith("spec"):
        return _compute_spec(kind, dtype, layout, d, S, offset)
    if kind == "fill":
        return fastpe.sinusoidal(S, d, base=base, offset=offset, dtype=dtype, layout=layout)
    if kind == "add":
        x = _x_init((2, S, d), dtype)
        return fastpe.add_to(x, offset=offset, scale=0.5, base=base, layout=layout)
    positions = offset + 2.5 * np.arange(S, dtype=np.float64) - 3.0
    if kind == "positions":
        return fastpe.sinusoidal_at(positions, d, base=base, dtype=dtype, layout=layout)
    x = _x_init((S, d), dtype)
    return fastpe.add_to(x, positions=positions, scale=0.5, base=base, layout=layout)


def _cases() -> list[str]:
    return DIGESTS.read_text().splitlines()


def test_the_committed_file_covers_the_sweep():
    lines = _cases()
    kinds = {line.split()[0] for line in lines}
    dtypes = {line.split()[1] for line in lines}
    offsets = [int(line.split()[5]) for line in lines]
    assert kinds == {"fill", "add", "positions", "add_positions"} | {
        "spec",
        "spec_add",
        "spec_positions",
    } | {f"rope_{k}{p}" for k in ("cache", "bshd", "bhsd") for p in ("", "_positions")} | {
        f"rope_rule_{t}" for t in RULES
    } | {f"rope_axes_{k}{p}" for k in ("cache", "bshd", "bhsd") for p in ("", "_interleaved")}
    conventions = {line.split()[2] for line in lines if line.startswith("spec")}
    rope = [line.split() for line in lines if line.startswith("rope") and "_rule_" not in line]
    axes = [f for f in rope if f[0].startswith("rope_axes_")]
    assert {(f[1], f[2], int(f[3]) % 2) for f in axes} == {
        (d, lay, odd) for d in dtypes for lay in ("interleaved", "split") for odd in (0, 1)
    }
    rules = [line.split() for line in lines if line.startswith("rope_rule_")]
    assert {(f[0], f[6]) for f in rules} == {
        (f"rope_rule_{t}", b) for t in RULES for b in ("32", "64")
    }
    assert {int(f[3]) % 2 for f in rope} == {0, 1}  # odd and even nf
    assert {f[6] for f in rope} == {"1", "1.25"}  # attention factor 1 and another
    assert {f[2] for f in rope} == {"interleaved", "split"}
    assert conventions == {"vaswani", "tensor2tensor", "fairseq", "diffusers", "gptj", "custom"}
    assert dtypes == {"float32", "float64", "float16", "bfloat16"}
    assert min(offsets) < -(10**12) and max(offsets) > 10**12  # near the limit, both signs
    assert len(lines) > 3500


@pytest.mark.parametrize("chunk", range(8))
def test_python_functions_give_the_c_digests(chunk):
    lines = _cases()[chunk::8]
    bad = []
    for line in lines:
        kind, dtype, layout, d, S, offset, base, want = line.split()
        got = _compute(kind, _dtype(dtype), layout, int(d), int(S), int(offset), float(base))
        if _digest(got) != int(want, 16):
            bad.append(line)
    assert not bad, f"{len(bad)} of {len(lines)} cases differ, e.g. {bad[:3]}"


def test_multi_axis_digests_are_of_the_numpy_reference_values():
    """The float64 multi-axis caches that the committed digests pin (the Python
    functions give them, test above) are cos and sin of each frequency times its
    axis's coordinate, the axis from the section rule restated here."""
    lines = [f.split() for f in _cases() if f.startswith("rope_axes_cache")]
    checked = 0
    for kind, dtype, layout, d, S, offset, att, _ in lines:
        if dtype != "float64":
            continue
        nf, S, att = int(d), int(S), float(att)
        sections, pos = _axes_case(nf, S, int(offset), 1)
        n = 3
        if kind.endswith("_interleaved"):
            axis = [i % n if i % n >= 1 and i < n * sections[i % n] else 0 for i in range(nf)]
        else:
            axis = np.repeat(np.arange(n), sections)
        angle = pos[0][:, axis] * (1.0 / (1 + np.arange(nf) ** 2.0))
        cos, sin = _compute_rope_axes(kind, np.float64, layout, nf, S, int(offset), att)
        pairs = (
            (slice(0, nf), slice(nf, 2 * nf))
            if layout == "split"
            else (
                slice(0, None, 2),
                slice(1, None, 2),
            )
        )
        tol = 1e-15 * (1 + np.abs(angle).max())
        for half in pairs:
            np.testing.assert_allclose(cos[:, half], att * np.cos(angle), rtol=0, atol=4 * tol)
            np.testing.assert_allclose(sin[:, half], att * np.sin(angle), rtol=0, atol=4 * tol)
        checked += 1
    assert checked >= 40


# The rotation of apply_rope is the library's too (lib/src/rope_rotate.c): one call,
# which polls the binding's callback between chunks of rows.  A SIGINT that
# arrives mid-rotation raises KeyboardInterrupt with the last rows unrotated.
ROTATION_INTERRUPT = """
import os, signal, sys, threading, time, numpy as np, fastpe
# Python's own handler, even where a launcher started us with SIGINT ignored (a
# background job of a non-interactive shell): then Python installs none
signal.signal(signal.SIGINT, signal.default_int_handler)
fastpe.kernel._set_chunk_entries(128 * 16)      # 16 rows of 128 per chunk: many polls
q = np.ones((1, 1, 400000, 128))
fastpe.apply_rope(q[:, :, :4].copy(), head_dim=128, offset=1)   # warm up (the plan)

def fire():                                     # SIGINT once the rotation has begun
    while q[0, 0, 0, 0] == 1.0:                 # (row 0, position 1, changes)
        time.sleep(0.0002)
    os.kill(os.getpid(), signal.SIGINT)

threading.Thread(target=fire, daemon=True).start()
try:
    fastpe.apply_rope(q, head_dim=128, offset=1, num_threads=1)
    print("finished")
except KeyboardInterrupt:
    print("interrupted", int((q[0, 0, :, 0] == 1.0).sum()))
"""


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_ctrl_c_interrupts_a_long_rotation():
    r = subprocess.run(
        [sys.executable, "-c", ROTATION_INTERRUPT],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=os.path.dirname(sys.executable),
    )
    assert r.returncode == 0, r.stderr
    words = r.stdout.split()
    assert words[0] == "interrupted", r.stdout
    assert int(words[1]) > 0, "every row was rotated before the interrupt was seen"


def test_every_code_has_its_message():
    """fastpe.kernel.ERROR_MESSAGES holds the library's message for every code its
    header defines: a code added later without a message (or beyond the range the
    binding reads) fails here."""
    header = (DIGESTS.parent.parent / "include" / "fastpe" / "fastpe.h").read_text()
    codes = {
        name: int(value)
        for name, value in re.findall(r"^#define (FASTPE_E[A-Z]+)\s+(\d+)", header, re.M)
    }
    assert codes["FASTPE_EHANDLE"] == 12 and len(codes) >= 12
    for name, code in codes.items():
        message = fastpe.kernel.ERROR_MESSAGES.get(code)
        assert message is not None, f"{name} = {code} has no entry in ERROR_MESSAGES"
        assert message and message != "unknown fastpe error code", f"{name} = {code}"
    assert set(fastpe.kernel.ERROR_MESSAGES) == set(codes.values())
