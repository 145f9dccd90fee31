"""Every named convention against an independent float64 re-implementation of the
project's published code (conventions_ref.py), against mpmath, and through its raw knobs.

The re-implementations carry their own float64 rounding error (``ref_tol``);
fastpe itself is held to 1e-15 against mpmath (``test_fastpe_vs_mpmath``).
The frameworks' own functions are compared in test_frameworks.py (optional).
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import typing

import mpmath
import numpy as np
import pytest
from conventions_ref import (
    F64,
    TIMESTEPS,
    close,
    diffusers_ref,
    fairseq_ref,
    gptj_ref,
    llama_freqs_cis_ref,
    mae_ref,
    make_positions_ref,
    pytorch_tutorial_ref,
    t2t_ref,
    timm_ref,
    vaswani_ref,
)

import fastpe
from fastpe import Convention

# ---------------------------------------------------------------- vaswani

WIDTHS = [1, 2, 3, 5, 8, 33, 64, 129]


@pytest.mark.parametrize("layout", ["interleaved", "split"])
@pytest.mark.parametrize("d", WIDTHS)
@pytest.mark.parametrize("offset", [0, 7, -300, 5000])
def test_vaswani_vs_distilbert_marian_rule(d, layout, offset):
    k = np.arange(offset, offset + 40)
    ref, angle = vaswani_ref(k, d, layout=layout)
    close(fastpe.sinusoidal(40, d, offset=offset, layout=layout, dtype=F64), ref, angle)
    close(fastpe.sinusoidal_at(k, d, layout=layout, dtype=F64), ref, angle)


@pytest.mark.parametrize("base", [100.0, 10000.0, 500000.0])
def test_vaswani_base_is_keras_hub_max_wavelength(base):
    # keras_hub SinePositionEncoding: max_wavelength^(-2*floor(j/2)/d), the same per-column rule
    ref, angle = vaswani_ref(np.arange(64), 48, base=base)
    close(fastpe.sinusoidal(64, 48, base=base, dtype=F64), ref, angle)


@pytest.mark.parametrize("d", [2, 16, 512])
def test_vaswani_vs_pytorch_tutorial_formula(d):
    ref, angle = pytorch_tutorial_ref(300, d)
    close(fastpe.sinusoidal(300, d, dtype=F64), ref, angle)


# ---------------------------------------------------------------- tensor2tensor


@pytest.mark.parametrize("channels", [1, 2, 3, 4, 5, 8, 31, 64])
@pytest.mark.parametrize("start_index", [0, 3, 1000])
def test_tensor2tensor(channels, start_index):
    ref, angle = t2t_ref(50, channels, start_index=start_index)
    P = fastpe.sinusoidal(50, channels, offset=start_index, convention="tensor2tensor", dtype=F64)
    close(P, ref, angle)
    if channels % 2:
        assert np.all(P[:, -1] == 0)


@pytest.mark.parametrize("min_ts, max_ts", [(1.0, 1.0e4), (2.0, 1.0e3), (0.5, 64.0)])
def test_tensor2tensor_timescales(min_ts, max_ts):
    ref, angle = t2t_ref(40, 17, min_ts, max_ts, start_index=5)
    conv = Convention.tensor2tensor(min_timescale=min_ts, max_timescale=max_ts)
    close(fastpe.sinusoidal(40, 17, offset=5, convention=conv, dtype=F64), ref, angle)


# ---------------------------------------------------------------- fairseq


@pytest.mark.parametrize("d", [4, 5, 6, 9, 64, 65])
@pytest.mark.parametrize("padding_idx", [None, 0, 1, 3])
def test_fairseq_table(d, padding_idx):
    ref, angle = fairseq_ref(60, d, padding_idx)
    P = fastpe.sinusoidal(60, d, convention=Convention.fairseq(padding_idx=padding_idx), dtype=F64)
    close(P, ref, angle)
    if padding_idx is not None:
        assert np.all(P[padding_idx] == 0)


def test_fairseq_default_padding_idx_is_1():
    assert fastpe.Convention.fairseq().padding_idx == 1
    assert np.all(fastpe.sinusoidal(3, 8, convention="fairseq")[1] == 0)


@pytest.mark.parametrize("padding_idx", [0, 1, 2])
def test_fairseq_tokens_end_to_end(padding_idx):
    """tokens -> make_positions -> table lookup, as SinusoidalPositionalEmbedding.forward."""
    rng = np.random.default_rng(6)
    tokens = rng.integers(0, 6, size=(3, 17))
    tokens[0, :4] = padding_idx  # left padding
    tokens[1, -5:] = padding_idx  # right padding
    pos = make_positions_ref(tokens, padding_idx)
    np.testing.assert_array_equal(fastpe.fairseq_positions(tokens, padding_idx), pos)
    table, angle = fairseq_ref(pos.max() + 1, 10, padding_idx)
    conv = Convention.fairseq(padding_idx=padding_idx)
    close(fastpe.sinusoidal_at(pos, 10, convention=conv, dtype=F64), table[pos], angle)
    x = np.zeros((3, 17, 10))
    fastpe.add_to(x, positions=fastpe.fairseq_positions(tokens, padding_idx), convention=conv)
    close(x, table[pos], angle)
    assert np.all(x[tokens == padding_idx] == 0)


def test_fairseq_width_2_and_3_are_defined():
    # fairseq divides by half_dim - 1 = 0 here (NaN table); fastpe takes the
    # limit of its one frequency, w_0 = 1, which is what every other width gives w_0.
    for d in (2, 3):
        P = fastpe.sinusoidal(5, d, convention=Convention.fairseq(padding_idx=None), dtype=F64)
        k = np.arange(5.0)
        np.testing.assert_allclose(P[:, 0], np.sin(k), atol=1e-15, rtol=0)
        np.testing.assert_allclose(P[:, 1], np.cos(k), atol=1e-15, rtol=0)


# ---------------------------------------------------------------- diffusers


@pytest.mark.parametrize("d", [1, 3, 4, 7, 32, 320, 321])
@pytest.mark.parametrize("flip", [False, True])
@pytest.mark.parametrize(
    "shift, scale, period",
    [(1.0, 1.0, 10000), (0.0, 1.0, 10000), (0.5, 1000.0, 10000), (1.0, 1.0, 100)],
)
def test_diffusers(d, flip, shift, scale, period):
    if d // 2 - shift <= 0 and d // 2 > 1:
        pytest.skip("diffusers divides by zero here")
    conv = Convention.diffusers(
        max_period=period, downscale_freq_shift=shift, scale=scale, flip_sin_to_cos=flip
    )
    t = TIMESTEPS if scale == 1.0 else TIMESTEPS / 1000.0  # scale=1000: t in [0, 1]
    got = fastpe.sinusoidal_at(t, d, convention=conv, dtype=F64)
    if d // 2 <= 1:
        # one frequency: diffusers computes 0/0 for shift=1 (NaN); fastpe uses w_0 = scale
        ref, angle = diffusers_ref(t, d, flip, 0.0, scale, period)
    else:
        ref, angle = diffusers_ref(t, d, flip, shift, scale, period)
    close(got, ref, angle)


def test_diffusers_integer_and_float_timesteps_agree():
    t = np.array([0, 1, 2, 999])
    conv = "diffusers"
    np.testing.assert_array_equal(
        fastpe.sinusoidal_at(t, 64, convention=conv),
        fastpe.sinusoidal_at(t.astype(F64), 64, convention=conv),
    )


# ---------------------------------------------------------------- gptj / rotary


@pytest.mark.parametrize("dim", [2, 4, 64, 128])
@pytest.mark.parametrize("base", [10000.0, 500000.0])
def test_gptj_table(dim, base):
    ref, angle = gptj_ref(300, dim, base)
    close(
        fastpe.sinusoidal(300, dim, convention=Convention.gptj(base=base), dtype=F64), ref, angle
    )


def test_gptj_refuses_odd_width():
    with pytest.raises(ValueError, match="even d_model"):
        fastpe.sinusoidal(4, 7, convention="gptj")


@pytest.mark.parametrize("start_pos", [0, 37])
def test_llama_freqs_cis_from_the_gptj_table(start_pos):
    dim, end, theta = 64, 200, 500000.0
    ref, angle = llama_freqs_cis_ref(dim, end, theta, start_pos)
    T = fastpe.sinusoidal(
        end - start_pos, dim, offset=start_pos, convention=Convention.gptj(base=theta), dtype=F64
    )
    sin, cos = T[:, : dim // 2], T[:, dim // 2 :]
    close(cos, ref.real, angle)
    close(sin, ref.imag, angle)


# ---------------------------------------------------------------- 2-D


@pytest.mark.parametrize("d", [4, 16, 768])
@pytest.mark.parametrize("grid", [1, 3, 14])
@pytest.mark.parametrize("cls_token", [False, True])
def test_mae(d, grid, cls_token):
    ref, angle = mae_ref(d, grid, cls_token)
    close(fastpe.sinusoidal_2d(grid, grid, d, cls_token=cls_token, dtype=F64), ref, angle)


@pytest.mark.parametrize("shape", [(1, 1), (3, 5), (14, 14), (7, 2)])
@pytest.mark.parametrize("reverse_coord", [False, True])
@pytest.mark.parametrize("interleave", [False, True])
def test_timm(shape, reverse_coord, interleave):
    ref, angle = timm_ref(shape, 32, reverse_coord=reverse_coord, interleave_sin_cos=interleave)
    got = fastpe.sinusoidal_2d(
        *shape,
        32,
        convention="timm",
        reverse_coord=reverse_coord,
        interleave_sin_cos=interleave,
        dtype=F64,
    )
    close(got, ref, angle)


def test_timm_temperature_is_base():
    ref, angle = timm_ref((4, 6), 16, temperature=100.0)
    close(fastpe.sinusoidal_2d(4, 6, 16, convention="timm", base=100.0, dtype=F64), ref, angle)


def test_mae_non_square_grid_is_row_major():
    # MAE only builds square grids; for h x w the rows are (h outer, w inner) and
    # the first half encodes w, as in its square case.
    P = fastpe.sinusoidal_2d(3, 5, 8, dtype=F64)
    w_table = fastpe.sinusoidal(5, 4, layout="split", dtype=F64)
    h_table = fastpe.sinusoidal(3, 4, layout="split", dtype=F64)
    for h in range(3):
        for w in range(5):
            np.testing.assert_array_equal(P[h * 5 + w], np.concatenate([w_table[w], h_table[h]]))


# ---------------------------------------------------------------- fastpe vs mpmath


def _mp_row(k, d, conv: Convention):
    """One exact row from the knobs' meaning (w_i = scale * base**(-i/denom)),
    with the column placement spelled out independently of the kernel's spec."""
    h = d // 2
    nf = (d + 1) // 2 if conv.odd == "sin" else h
    denom = {
        "d/2": mpmath.mpf(d) / 2,
        "h": h,
        "h-1": h - 1,
        "max(h-1,1)": max(h - 1, 1),
        "h-shift": h - mpmath.mpf(conv.shift),
    }[conv.denominator]
    if nf <= 1:
        denom = 1
    kk = mpmath.mpf(float(k))
    w = [
        mpmath.mpf(conv.position_scale)
        * mpmath.power(mpmath.mpf(conv.base), -mpmath.mpf(i) / denom)
        for i in range(nf)
    ]
    s = [mpmath.sin(kk * wi) for wi in w]
    c = [mpmath.cos(kk * wi) for wi in w[:h]]
    if conv.padding_idx is not None and k == conv.padding_idx:
        return [mpmath.mpf(0)] * d
    if conv.layout == "interleaved":
        row = []
        for i in range(h):
            row += [s[i], c[i]]
        if nf > h:
            row.append(s[h])
    elif conv.layout == "split":
        row = s + c
    else:
        row = c + s
    row += [mpmath.mpf(0)] * (d - len(row))
    return row


@pytest.mark.parametrize(
    "conv",
    [
        Convention.vaswani(),
        Convention.vaswani(base=300.0, layout="split"),
        Convention.tensor2tensor(),
        Convention.tensor2tensor(2.0, 5.0e3),
        Convention.fairseq(),
        Convention.diffusers(),
        Convention.diffusers(downscale_freq_shift=0.0, scale=1000.0, flip_sin_to_cos=True),
        Convention.gptj(base=500000.0),
    ],
    ids=lambda c: f"{c.name}-{c.base:g}-{c.layout}",
)
@pytest.mark.parametrize("d", [6, 7, 66])
def test_fastpe_vs_mpmath(conv, d):
    if conv.odd == "error" and d % 2:
        d += 1
    positions = np.array([0.0, 1.0, 2.0, 17.0, 999.0, 12345.0, 0.5, 0.1, 731.37, 99999.999])
    got = fastpe.sinusoidal_at(positions, d, convention=conv, dtype=F64)
    with mpmath.workdps(40):
        worst = 0.0
        for r, k in enumerate(positions):
            for j, e in enumerate(_mp_row(k, d, conv)):
                worst = max(worst, float(abs(mpmath.mpf(float(got[r, j])) - e)))
    assert worst <= 1e-15, worst


# ---------------------------------------------------------------- the knob route

# Each source's default knobs, written from its own definition (as the named
# constructors' docstrings cite them), not read from the library: Vaswani et al.
# (10000^(-2i/d), sin/cos interleaved, one more sine column for odd width);
# tensor2tensor get_timing_signal_1d (min/max_timescale 1/1e4 over max(h-1, 1)
# steps, [sin | cos], zero column); fairseq SinusoidalPositionalEmbedding
# (ln(10000)/(h-1), [sin | cos], zero column, padding_idx 1); diffusers
# get_timestep_embedding (max_period 10000, downscale_freq_shift 1 over h-shift,
# scale 1, no flip: [sin | cos], zero column); GPT-J create_sinusoidal_positions
# (10000^(-2i/d), [sin | cos], even widths only).
DOCUMENTED = {
    "vaswani": dict(denominator="d/2", shift=0.0, layout="interleaved", odd="sin"),
    "tensor2tensor": dict(denominator="max(h-1,1)", shift=0.0, layout="split", odd="zero"),
    "fairseq": dict(denominator="h-1", shift=0.0, layout="split", odd="zero", padding_idx=1),
    "diffusers": dict(denominator="h-shift", shift=1.0, layout="split", odd="zero"),
    "gptj": dict(denominator="d/2", shift=0.0, layout="split", odd="error"),
}
for _knobs in DOCUMENTED.values():
    _knobs.setdefault("padding_idx", None)
    _knobs.update(base=10000.0, position_scale=1.0)  # every source's base and scale
RAW = {name: Convention(**knobs) for name, knobs in DOCUMENTED.items()}


def test_every_named_convention_has_its_raw_knobs_here():
    assert set(fastpe.CONVENTIONS) == set(RAW)


@pytest.mark.parametrize("name", sorted(RAW))
@pytest.mark.parametrize("d", [2, 5, 8, 65])
def test_raw_knobs_give_bitwise_the_named_table(name, d):
    if name == "gptj" and d % 2:
        return
    from conventions_ref import close, knob_ref

    raw = RAW[name]
    named = getattr(Convention, name)()
    assert raw._key[2:] == named._key[2:]  # the same knobs (the names differ)
    # the table against the knobs' float64 formula, the zero column and padding row too
    ref, angles = knob_ref(np.arange(-3, 67), d, raw)
    close(fastpe.sinusoidal(70, d, offset=-3, convention=raw, dtype=F64), ref, angles)
    for dtype in (np.float32, F64):
        a = fastpe.sinusoidal(70, d, offset=-3, convention=name, dtype=dtype)
        b = fastpe.sinusoidal(70, d, offset=-3, convention=raw, dtype=dtype)
        np.testing.assert_array_equal(a, b)
        t = np.array([0.5, 3.0, 77.25])
        np.testing.assert_array_equal(
            fastpe.sinusoidal_at(t, d, convention=name, dtype=dtype),
            fastpe.sinusoidal_at(t, d, convention=raw, dtype=dtype),
        )
        x1 = np.ones((2, 9, d), dtype)
        x2 = x1.copy()
        fastpe.add_to(x1, offset=[4, 100], convention=name)
        fastpe.add_to(x2, offset=[4, 100], convention=raw)
        np.testing.assert_array_equal(x1, x2)


def test_the_library_presets_the_documented_knobs():
    """The C presets (fastpe_knobs_preset) and the named constructors built on
    them, against each source's own defaults."""
    from fastpe import _api, kernel
    from fastpe.typing import ConventionName

    assert kernel.PRESET_NAMES == fastpe.CONVENTIONS == tuple(DOCUMENTED)
    assert typing.get_args(ConventionName) == fastpe.CONVENTIONS
    for name, knobs in DOCUMENTED.items():
        assert kernel.knobs_preset(name) == knobs, name
        conv = getattr(Convention, name)()
        assert conv.name == name
        assert {key: getattr(conv, key) for key in knobs} == knobs, name
        # the string route: the same knobs as the constructor's
        assert _api._convention(name, 10000.0, "interleaved") == conv
    with pytest.raises(ValueError, match=r"name must be one of .*, got 'Vaswani'"):
        kernel.knobs_preset("Vaswani")


def test_the_named_constructors_default_to_the_sources_defaults():
    """Their parameters' defaults (read from the library's presets) are each
    source's own: what a caller sees in the signature."""
    want = {
        "vaswani": dict(base=10000.0, layout="interleaved"),
        "tensor2tensor": dict(min_timescale=1.0, max_timescale=1.0e4),
        "fairseq": dict(padding_idx=1),
        "diffusers": dict(
            max_period=10000.0, downscale_freq_shift=1.0, scale=1.0, flip_sin_to_cos=False
        ),
        "gptj": dict(base=10000.0),
    }
    for name, defaults in want.items():
        params = inspect.signature(getattr(Convention, name)).parameters
        got = {key: p.default for key, p in params.items()}
        assert got == defaults, name
        assert all(type(got[key]) is type(value) for key, value in defaults.items()), name
    fields = {f.name: f.default for f in dataclasses.fields(Convention)}
    assert fields == {"name": "custom", **DOCUMENTED["vaswani"]}


def test_the_named_constructors_apply_their_own_arguments():
    """Each constructor's parameters land on their knobs, the rest stay the preset's."""
    cases = [
        (
            Convention.vaswani(base=500.0, layout="split"),
            "vaswani",
            dict(base=500.0, layout="split"),
        ),
        (
            Convention.tensor2tensor(min_timescale=2.0, max_timescale=64.0),
            "tensor2tensor",
            dict(base=32.0, position_scale=2.0),
        ),
        (Convention.fairseq(padding_idx=None), "fairseq", dict(padding_idx=None)),
        (Convention.fairseq(padding_idx=-4), "fairseq", dict(padding_idx=-4)),
        (
            Convention.diffusers(
                max_period=50.0, downscale_freq_shift=0.5, scale=3.0, flip_sin_to_cos=True
            ),
            "diffusers",
            dict(base=50.0, shift=0.5, position_scale=3.0, layout="split_cos_first"),
        ),
        (Convention.gptj(base=20.0), "gptj", dict(base=20.0)),
    ]
    for conv, name, changes in cases:
        want = {**DOCUMENTED[name], **changes}
        assert {key: getattr(conv, key) for key in want} == want, (name, changes)


# the knobs' spellings, as the module docstring and fastpe.Convention's document them
SPELLINGS = {
    "denominator": ("d/2", "h", "h-1", "max(h-1,1)", "h-shift"),
    "layout": ("interleaved", "split", "split_cos_first"),
    "odd": ("sin", "zero", "error"),
}


def test_the_library_spells_the_documented_knobs():
    from fastpe import _conventions, kernel

    assert kernel.KNOB_SPELLINGS == SPELLINGS
    python_side = (_conventions._DENOMINATORS, _conventions._LAYOUTS, _conventions._ODD)
    assert python_side == tuple(SPELLINGS.values())
    for knob, spellings in SPELLINGS.items():
        with pytest.raises(ValueError) as info:
            Convention(**{knob: "bogus"})
        assert str(info.value) == f"{knob} must be one of {spellings}, got 'bogus'"


@pytest.mark.parametrize("denominator", SPELLINGS["denominator"])
@pytest.mark.parametrize("layout", SPELLINGS["layout"])
@pytest.mark.parametrize("odd", SPELLINGS["odd"])
def test_every_spelling_means_its_knob(denominator, layout, odd):
    """Each spelling becomes the library's enum that computes what the spelling
    says (conventions_ref.knob_ref reads the spellings on its own)."""
    from conventions_ref import knob_ref

    conv = Convention(base=300.0, denominator=denominator, shift=0.5, layout=layout, odd=odd)
    positions = np.arange(-2, 30)
    for d in (7, 12) if odd != "error" else (12,):
        ref, angles = knob_ref(positions, d, conv)
        close(fastpe.sinusoidal_at(positions, d, convention=conv, dtype=F64), ref, angles)


@pytest.mark.parametrize(
    "kw",
    [
        dict(max_period=100.0),
        dict(downscale_freq_shift=0.0),
        dict(scale=1000.0),
        dict(flip_sin_to_cos=True),
    ],
)
def test_diffusers_knobs_through_raw_convention(kw):
    named = Convention.diffusers(**kw)
    raw = Convention(
        base=kw.get("max_period", 10000.0),
        denominator="h-shift",
        shift=kw.get("downscale_freq_shift", 1.0),
        position_scale=kw.get("scale", 1.0),
        layout="split_cos_first" if kw.get("flip_sin_to_cos") else "split",
        odd="zero",
    )
    t = np.array([0.0, 0.3, 10.0, 999.0])
    np.testing.assert_array_equal(
        fastpe.sinusoidal_at(t, 33, convention=named), fastpe.sinusoidal_at(t, 33, convention=raw)
    )


def test_denominator_h_equals_d_over_2_for_even_widths_only():
    raw = Convention(denominator="h")
    np.testing.assert_array_equal(
        fastpe.sinusoidal(20, 16, convention=raw), fastpe.sinusoidal(20, 16)
    )
    assert not np.array_equal(
        fastpe.sinusoidal(20, 17, convention=raw, dtype=F64), fastpe.sinusoidal(20, 17, dtype=F64)
    )


def test_with_changes_one_knob():
    c = Convention.fairseq().with_(padding_idx=None)
    assert c.padding_idx is None and c.denominator == "h-1"
    assert not np.any(np.all(fastpe.sinusoidal(5, 8, convention=c) == 0, axis=1))


def test_knobs_are_normalised():
    c = Convention(
        base=100, position_scale=np.float32(2), shift=np.int8(1), padding_idx=np.int64(3)
    )
    assert (type(c.base), type(c.position_scale), type(c.shift), type(c.padding_idx)) == (
        float,
        float,
        float,
        int,
    )


# ---------------------------------------------------------------- bad knobs


@pytest.mark.parametrize(
    "kw, exc, match",
    [
        (dict(base=0.0), ValueError, "base"),
        (dict(base=-1.0), ValueError, "base"),
        (dict(base=math.nan), ValueError, "base"),
        (dict(base=math.inf), ValueError, "base"),
        (dict(base="10000"), TypeError, "base"),
        (dict(base=True), TypeError, "base"),
        (dict(denominator="d"), ValueError, "denominator"),
        (dict(denominator=2), TypeError, "denominator"),
        (dict(layout="SPLIT"), ValueError, "layout"),
        (dict(layout=None), TypeError, "layout"),
        (dict(odd="pad"), ValueError, "odd"),
        (dict(position_scale=0.0), ValueError, "position_scale"),
        (dict(position_scale=math.inf), ValueError, "position_scale"),
        (dict(position_scale=True), TypeError, "position_scale"),
        (dict(shift=math.nan), ValueError, "shift"),
        (dict(shift="1"), TypeError, "shift"),
        (dict(shift=True), TypeError, "shift"),
        (dict(padding_idx=1.0), TypeError, "padding_idx"),
        (dict(padding_idx=True), TypeError, "padding_idx"),
        (dict(padding_idx=2**70), ValueError, "padding_idx"),  # OverflowError in the kernel before
        (dict(name=3), TypeError, "name"),
    ],
)
def test_bad_knobs(kw, exc, match):
    with pytest.raises(exc, match=match):
        Convention(**kw)


@pytest.mark.parametrize(
    "make, exc, match",
    [
        (lambda: Convention.tensor2tensor(min_timescale=0.0), ValueError, "min_timescale"),
        (lambda: Convention.tensor2tensor(max_timescale="1e4"), TypeError, "max_timescale"),
        (lambda: Convention.tensor2tensor(1e-300, 1e300), ValueError, "max_timescale / min"),
        (lambda: Convention.diffusers(max_period=-1.0), ValueError, "max_period"),
        (
            lambda: Convention.diffusers(scale=10**400),
            ValueError,
            "position_scale",
        ),  # OverflowError
        (lambda: Convention.diffusers(downscale_freq_shift="1"), TypeError, "shift"),
        (lambda: Convention.diffusers(flip_sin_to_cos="no"), TypeError, "flip_sin_to_cos"),
        (lambda: Convention.gptj(base=0), ValueError, "base"),
        (lambda: Convention.fairseq(padding_idx="1"), TypeError, "padding_idx"),
    ],
)
def test_bad_named_knobs(make, exc, match):
    with pytest.raises(exc, match=match):
        make()


@pytest.mark.parametrize(
    "call, exc, match",
    [
        (lambda: fastpe.sinusoidal(3, 8, convention="Vaswani"), ValueError, "convention"),
        (lambda: fastpe.sinusoidal(3, 8, convention=None), TypeError, "convention"),
        (lambda: fastpe.sinusoidal(3, 8, convention="fairseq", base=100), ValueError, "base"),
        (
            lambda: fastpe.sinusoidal(3, 8, convention="gptj", layout="interleaved "),
            ValueError,
            "layout",
        ),
        (
            lambda: fastpe.sinusoidal(3, 8, convention=Convention(), layout="split"),
            ValueError,
            "layout",
        ),
        (lambda: fastpe.sinusoidal(3, 4, convention="fairseq"), None, None),
        (
            lambda: fastpe.sinusoidal(
                3, 8, convention=Convention.diffusers(downscale_freq_shift=4)
            ),
            ValueError,
            "h-shift",
        ),
        (
            lambda: fastpe.sinusoidal(
                3, 8, convention=Convention(denominator="h-1", shift=0.0), dtype=F64
            ),
            None,
            None,
        ),
    ],
)
def test_convention_arguments(call, exc, match):
    if exc is None:
        assert np.isfinite(call()).all()
    else:
        with pytest.raises(exc, match=match):
            call()


@pytest.mark.parametrize("name", sorted(RAW))
@pytest.mark.parametrize("d", [1, 2, 3, 6, 9, 64])
def test_knob_ref_agrees_with_the_framework_refs(name, d):
    """conventions_ref.knob_ref (the hostile-input oracle) against the frameworks'
    own formulas, so that oracle is checked too."""
    from conventions_ref import knob_ref

    if name == "gptj" and d % 2:
        return
    k = np.arange(40)
    conv = getattr(Convention, name)()
    got, angle = knob_ref(k, d, conv)
    if d // 2 <= 1 and name in ("fairseq", "diffusers"):
        return  # the frameworks divide by zero there (see test_fairseq_width_2_and_3)
    ref = {
        "vaswani": lambda: vaswani_ref(k, d)[0],
        "tensor2tensor": lambda: t2t_ref(40, d)[0],
        "fairseq": lambda: fairseq_ref(40, d, 1)[0],
        "diffusers": lambda: diffusers_ref(k, d)[0],
        "gptj": lambda: gptj_ref(40, d)[0],
    }[name]()
    close(got, ref, angle)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: Convention(base=-1.5), "base must be finite and > 0, got -1.5"),
        (lambda: Convention(position_scale=0.0), "position_scale must be finite and > 0, got 0.0"),
        (lambda: Convention(position_scale=1e300), "position_scale must be <= 1e+280, got 1e+300"),
        (lambda: Convention(shift=math.inf), "shift must be finite, got inf"),
        (
            lambda: fastpe.sinusoidal(2, 5, convention="gptj"),
            "the gptj convention needs an even d_model, got 5",
        ),
        (
            lambda: fastpe.sinusoidal(2, 3, convention=Convention(denominator="h-1")),
            "the custom convention divides by h-1, which is 0 at d_model=3; use a larger d_model",
        ),
        (
            lambda: fastpe.sinusoidal(
                2, 8, convention=Convention.diffusers(downscale_freq_shift=5.5)
            ),
            "the diffusers convention divides by h-shift (shift=5.5), which is -1.5 at d_model=8; "
            "use a larger d_model",
        ),
        (
            lambda: fastpe.sinusoidal(2, 64, convention=Convention(base=1e-310)),
            "base=1e-310 gives frequencies base**(-i/denominator) that overflow a double at this "
            "width; use a base closer to 1",
        ),
    ],
)
def test_knob_and_width_refusals_name_the_argument(call, message):
    """The library refuses (pe_knobs_check when a Convention is built, pe_spec_of
    for a width); the binding words its detail as these messages."""
    with pytest.raises(ValueError) as info:
        call()
    assert str(info.value) == message
