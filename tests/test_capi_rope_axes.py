"""C API 1.4: RoPE of multi-axis positions (M-RoPE, axial RoPE) through the
capsule's table -- with ctypes, the pointers a C extension gets from
import_fastpe(), and from a compiled extension through fastpe.h's wrappers --
compared bitwise with fastpe.rope_cache / fastpe.apply_rope with sections
(tested against the frameworks and mpmath in test_rope_axes.py), and the section
rule and the float64 values against a NumPy reference here."""

import ctypes
from typing import ClassVar

import numpy as np
import pytest
import test_capi_rope as capi_rope
from test_capi import probe, probes  # noqa: F401  (the compiled probe's fixtures)

import fastpe
from fastpe import kernel

C = kernel._C_CONSTANTS
i64, cint, dbl, vp = ctypes.c_int64, ctypes.c_int, ctypes.c_double, ctypes.c_void_p
FROM_AXES = ctypes.PYFUNCTYPE(vp, vp, i64, vp, cint, dbl)
SECTION_AXES = ctypes.CFUNCTYPE(cint, vp, cint, cint, vp, i64)
N_AXES = ctypes.CFUNCTYPE(cint, vp)
CACHE_AXES = ctypes.CFUNCTYPE(cint, vp, vp, vp, i64, i64, vp, cint, cint)
APPLY_AXES = ctypes.CFUNCTYPE(cint, vp, vp, i64, i64, i64, i64, i64, i64, vp, cint, cint)
SFX = ("f32", "f64", "f16", "bf16")
LAYOUT = capi_rope.LAYOUT
SECTIONS = {"contiguous": 0, "interleaved": 1}
# the library's FASTPE_EINVAL and FASTPE_EHANDLE (lib/include/fastpe/fastpe.h), which
# fastpe.h repeats
EINVAL = 11
CODES = {**C, "FASTPE_EINVAL": EINVAL, "FASTPE_EHANDLE": 12}


class Table(capi_rope.Table):
    """fastpe_api_t up to ABI 1.4."""

    _fields_: ClassVar = [
        ("rope_from_axes", FROM_AXES),
        ("rope_section_axes", SECTION_AXES),
        ("rope_n_axes", N_AXES),
        *((f"rope_cache_axes_{s}", CACHE_AXES) for s in SFX),
        *((f"rope_apply_axes_{s}", APPLY_AXES) for s in SFX),
    ]


@pytest.fixture(scope="module")
def t():
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    table = Table.from_address(get(kernel._C_API, b"fastpe.kernel._C_API"))
    assert (table.abi_major, table.abi_minor) == kernel.C_API_VERSION >= (1, 4)
    assert table.size >= ctypes.sizeof(Table)
    return table


def p(a):
    return a.ctypes.data if a is not None else None


def section_axes_reference(sections, layout):
    """The axis of each frequency, from the rule fastpe.rope_cache documents."""
    n, nf = len(sections), sum(sections)
    if layout == "contiguous":
        return np.repeat(np.arange(n), sections).astype(np.int32)
    return np.array(
        [i % n if i % n >= 1 and i < n * sections[i % n] else 0 for i in range(nf)], np.int32
    )


def handle(t, w, sections, layout, attention=1.0):
    sec = np.asarray(sections, np.int64)
    axis = np.full(len(w), -1, np.int32)
    assert (
        t.rope_section_axes(p(sec), len(sec), SECTIONS[layout], p(axis), len(w)) == C["FASTPE_OK"]
    )
    np.testing.assert_array_equal(axis, section_axes_reference(sections, layout))
    return t.rope_from_axes(p(w), len(w), p(axis), len(sec), attention)


def frequencies(nf):
    return 10000.0 ** (-np.arange(nf) / nf)


DTYPES = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "bf16": np.uint16}


def as_bits(a, sfx):
    return a.view(np.uint16) if sfx == "bf16" else a


@pytest.mark.parametrize("sfx", SFX)
@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize(
    "sections, section_layout",
    [((16, 24, 24), "contiguous"), ((24, 20, 20), "interleaved"), ((8, 8), "contiguous")],
)
@pytest.mark.parametrize("attention", [1.0, 0.75])
def test_cache_is_rope_cache_bitwise(t, sfx, layout, sections, section_layout, attention):
    if sfx == "bf16":
        pytest.importorskip(
            "ml_dtypes"
        )  # (fastpe's bfloat16 arrays; absent with the oldest NumPy)
    nf = sum(sections)
    w = frequencies(nf)
    rng = np.random.default_rng(nf)
    pos = rng.integers(-5000, 5000, (37, len(sections)))
    dtype = "bfloat16" if sfx == "bf16" else DTYPES[sfx]
    want = fastpe.rope_cache(
        2 * nf,
        inv_freq=w,
        attention_factor=attention,
        positions=pos,
        sections=sections,
        section_layout=section_layout,
        layout=layout,
        dtype=dtype,
    )
    h = handle(t, w, sections, section_layout, attention)
    try:
        assert t.rope_n_axes(h) == len(sections)
        cos = np.full((37, 2 * nf), 7, DTYPES[sfx])
        sin = np.full((37, 2 * nf), 7, DTYPES[sfx])
        fn = getattr(t, f"rope_cache_axes_{sfx}")
        assert fn(h, p(cos), p(sin), 37, 2 * nf, p(pos), LAYOUT[layout], 0) == C["FASTPE_OK"]
    finally:
        t.rope_free(h)
    np.testing.assert_array_equal(cos, as_bits(want[0], sfx))
    np.testing.assert_array_equal(sin, as_bits(want[1], sfx))


@pytest.mark.parametrize("section_layout", ["contiguous", "interleaved"])
def test_cache_float64_is_the_numpy_reference(t, section_layout):
    # Qwen2-VL's sections, and Qwen3-VL's (interleaved)
    sections = (16, 24, 24) if section_layout == "contiguous" else (24, 20, 20)
    w = frequencies(64)
    pos = np.random.default_rng(1).integers(0, 3000, (50, 3))
    h = handle(t, w, sections, section_layout)
    cos, sin = np.empty((50, 128)), np.empty((50, 128))
    try:
        err = t.rope_cache_axes_f64(h, p(cos), p(sin), 50, 128, p(pos), LAYOUT["half"], 0)
    finally:
        t.rope_free(h)
    assert err == C["FASTPE_OK"]
    angle = pos[:, section_axes_reference(sections, section_layout)] * w  # (50, 64)
    np.testing.assert_allclose(cos[:, :64], np.cos(angle), rtol=0, atol=1e-12)
    np.testing.assert_allclose(sin[:, 64:], np.sin(angle), rtol=0, atol=1e-12)


@pytest.mark.parametrize("sfx", SFX)
@pytest.mark.parametrize("seq_axis", [1, 2])
@pytest.mark.parametrize("per_batch", [False, True])
def test_apply_is_apply_rope_bitwise(t, sfx, seq_axis, per_batch):
    sections, nf = (8, 12, 12), 32
    w = frequencies(nf)
    rng = np.random.default_rng(3)
    shape = (2, 5, 3, 64) if seq_axis == 2 else (2, 3, 5, 64)  # 5 heads, 3 tokens
    x = rng.standard_normal(shape).astype(np.float32)
    if sfx == "f64":
        x = x.astype(np.float64)
    elif sfx == "f16":
        x = x.astype(np.float16)
    elif sfx == "bf16":
        ml_dtypes = pytest.importorskip("ml_dtypes")
        x = x.astype(ml_dtypes.bfloat16)
    pos = rng.integers(0, 4000, (2, 3, 3) if per_batch else (3, 3))
    want = fastpe.apply_rope(
        x.copy(), inv_freq=w, positions=pos, sections=sections, seq_axis=seq_axis
    )
    got = x.copy()
    h = handle(t, w, sections, "contiguous")
    item = got.itemsize
    if seq_axis == 2:
        sb, sh, ss = (s // item for s in got.strides[:3])
        heads, seq = got.shape[1], got.shape[2]
    else:
        sb, ss, sh = (s // item for s in got.strides[:3])
        seq, heads = got.shape[1], got.shape[2]
    # one sequence's positions for every batch entry: batch 1 with a stride-0 batch
    # is not a layout the rotation accepts, so rotate each entry by the same ids
    full = np.ascontiguousarray(np.broadcast_to(pos, (2, 3, 3)))
    try:
        fn = getattr(t, f"rope_apply_axes_{sfx}")
        err = fn(h, p(got), 2, seq, heads, sb, ss, sh, p(full), LAYOUT["half"], 0)
    finally:
        t.rope_free(h)
    assert err == C["FASTPE_OK"]
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


def test_errors_return_codes_and_write_nothing(t):
    w = frequencies(8)
    h = handle(t, w, (4, 2, 2), "contiguous")
    plain = t.rope_from_frequencies(p(w), 8, 1.0)
    spec = t.spec_new("vaswani", 16)
    x = np.ones((1, 3, 2, 16), np.float32)
    cos, sin = np.full((3, 16), 7.0, np.float32), np.full((3, 16), 7.0, np.float32)
    pos = np.zeros((3, 3), np.int64)
    far = np.array([[0, 0, 0], [0, 2**60, 0], [0, 0, 0]])
    L = LAYOUT["half"]
    ok = C["FASTPE_OK"]
    try:
        cases = [
            (lambda: t.rope_cache_axes_f32(None, p(cos), p(sin), 3, 16, p(pos), L, 0), "ENULL"),
            (lambda: t.rope_cache_axes_f32(h, None, p(sin), 3, 16, p(pos), L, 0), "ENULL"),
            (lambda: t.rope_cache_axes_f32(h, p(cos), p(sin), 3, 16, None, L, 0), "ENULL"),
            (lambda: t.rope_cache_axes_f32(h, p(cos), p(sin), -1, 16, p(pos), L, 0), "ESIZE"),
            (lambda: t.rope_cache_axes_f32(h, p(cos), p(sin), 3, 15, p(pos), L, 0), "ESTRIDE"),
            (lambda: t.rope_cache_axes_f32(h, p(cos), p(sin), 3, 16, p(pos), 9, 0), "ELAYOUT"),
            (
                lambda: t.rope_cache_axes_f32(h, p(cos), p(cos) + 4, 3, 16, p(pos), L, 0),
                "EOVERLAP",
            ),
            (lambda: t.rope_cache_axes_f32(h, p(cos), p(sin), 3, 16, p(far), L, 0), "ERANGE"),
            # a handle of another kind: a spec is not a RoPE handle
            (lambda: t.rope_cache_axes_f32(spec, p(cos), p(sin), 3, 16, p(pos), L, 0), "EHANDLE"),
            (
                lambda: t.rope_apply_axes_f32(spec, p(x), 1, 3, 2, 96, 32, 16, p(pos), L, 0),
                "EHANDLE",
            ),
            (
                lambda: t.rope_apply_axes_f32(None, p(x), 1, 3, 2, 96, 32, 16, p(pos), L, 0),
                "ENULL",
            ),
            (lambda: t.rope_apply_axes_f32(h, None, 1, 3, 2, 96, 32, 16, p(pos), L, 0), "ENULL"),
            (lambda: t.rope_apply_axes_f32(h, p(x), 1, 3, 2, 96, 32, 16, None, L, 0), "ENULL"),
            (lambda: t.rope_apply_axes_f32(h, p(x), 1, 3, 2, 96, 32, 0, p(pos), L, 0), "ESTRIDE"),
            (lambda: t.rope_apply_axes_f32(h, p(x), 1, 3, 2, 96, 32, 16, p(far), L, 0), "ERANGE"),
            (lambda: t.rope_apply_axes_f32(h, p(x), 1, 3, 2, 96, 32, 16, p(pos), 5, 0), "ELAYOUT"),
        ]
        for call, code in cases:
            assert call() == CODES[f"FASTPE_{code}"], code
            assert np.all(x == 1.0) and np.all(cos == 7.0) and np.all(sin == 7.0), code
        # a multi-axis handle given to the 1-axis entry points: refused, nothing written
        assert t.rope_cache_f32(h, p(cos), p(sin), 3, 16, None, 0, L, 0) == EINVAL
        assert t.rope_apply_f32(h, p(x), 1, 3, 2, 96, 32, 16, None, 0, L, 0) == EINVAL
        assert np.all(x == 1.0) and np.all(cos == 7.0) and np.all(sin == 7.0)
        # a plain handle is a 1-axis one for the multi-axis entry points
        assert t.rope_n_axes(plain) == 1 and t.rope_n_axes(None) == -1
        assert t.rope_n_axes(spec) == -1
        one = np.arange(3, dtype=np.int64)
        assert t.rope_cache_axes_f32(plain, p(cos), p(sin), 3, 16, p(one), L, 0) == ok
        want = fastpe.rope_cache(16, inv_freq=w, positions=one)
        np.testing.assert_array_equal(cos, want[0])
        np.testing.assert_array_equal(sin, want[1])
        # nothing to do: OK, NULL buffers welcome
        assert t.rope_cache_axes_f64(h, None, None, 0, 16, None, L, 0) == ok
        assert t.rope_apply_axes_f64(h, None, 0, 3, 2, 96, 32, 16, None, L, 0) == ok
    finally:
        t.rope_free(h)
        t.rope_free(plain)
        t.spec_free(spec)


def test_section_axes_errors_write_nothing(t):
    axis = np.full(8, -1, np.int32)
    sec = np.array([4, 2, 2], np.int64)
    assert t.rope_section_axes(p(sec), 3, 0, p(axis), 9) == C["FASTPE_ESIZE"]  # sum 8, not 9
    assert t.rope_section_axes(p(sec), 3, 2, p(axis), 8) != C["FASTPE_OK"]  # no such layout
    assert t.rope_section_axes(None, 3, 0, p(axis), 8) == C["FASTPE_ENULL"]
    assert t.rope_section_axes(p(sec), 3, 0, None, 8) == C["FASTPE_ENULL"]
    assert t.rope_section_axes(p(sec), 0, 0, p(axis), 8) != C["FASTPE_OK"]
    assert t.rope_section_axes(p(sec), 65, 0, p(axis), 8) != C["FASTPE_OK"]
    # (1, 4, 3) cannot be interleaved over 8: axis 1 would need column 1 + 3*3 = 10
    bad = np.array([1, 4, 3], np.int64)
    assert t.rope_section_axes(p(bad), 3, 1, p(axis), 8) == EINVAL
    assert np.all(axis == -1)
    with pytest.raises(ValueError, match="cannot be interleaved"):
        fastpe.rope_cache(
            16,
            inv_freq=frequencies(8),
            positions=np.zeros((1, 3), np.int64),
            sections=(1, 4, 3),
            section_layout="interleaved",
        )


def test_from_axes_raises_the_python_apis_errors(t):
    w = frequencies(4)
    axis = np.array([0, 1, 1, 2], np.int32)
    with pytest.raises(TypeError, match=r"^inv_freq must not be NULL"):
        t.rope_from_axes(None, 4, p(axis), 3, 1.0)
    with pytest.raises(TypeError, match=r"^axis must not be NULL"):
        t.rope_from_axes(p(w), 4, None, 3, 1.0)
    with pytest.raises(ValueError, match=r"axis\[3\].*got 2"):
        t.rope_from_axes(p(w), 4, p(axis), 2, 1.0)
    with pytest.raises(ValueError, match="n_axes"):
        t.rope_from_axes(p(w), 4, p(np.zeros(4, np.int32)), 0, 1.0)
    with pytest.raises(ValueError, match="n_axes"):
        t.rope_from_axes(p(w), 4, p(np.zeros(4, np.int32)), 65, 1.0)
    with pytest.raises(ValueError, match="nf"):
        t.rope_from_axes(p(w), 0, p(axis), 3, 1.0)
    nan = np.array([1.0, np.nan, 0.5, 0.25])
    with pytest.raises(ValueError, match="inv_freq"):
        t.rope_from_axes(p(nan), 4, p(axis), 3, 1.0)
    with pytest.raises(ValueError, match="attention_factor"):
        t.rope_from_axes(p(w), 4, p(axis), 3, -1.0)


def test_compiled_extension_through_the_header(probe):  # noqa: F811
    consts = probe.axes_constants()
    assert consts["FASTPE_EINVAL"] == EINVAL
    assert (consts["FASTPE_SECTIONS_CONTIGUOUS"], consts["FASTPE_SECTIONS_INTERLEAVED"]) == (0, 1)
    assert consts["unimported_section_axes"] == 100  # FASTPE_ENOTIMPORTED
    assert consts["unimported_n_axes"] == -1
    w = frequencies(32)
    rng = np.random.default_rng(5)
    pos = rng.integers(0, 2000, (9, 3))
    for sections, section_layout in (((8, 12, 12), "contiguous"), ((12, 10, 10), "interleaved")):
        x = rng.standard_normal((9, 64)).astype(np.float32)
        got = x.copy()
        cc, ca, n_axes, cos, sin = probe.rope_axes(
            w.tobytes(),
            np.array(sections, np.int64).tobytes(),
            SECTIONS[section_layout],
            pos.tobytes(),
            got,
        )
        assert (cc, ca, n_axes) == (C["FASTPE_OK"], C["FASTPE_OK"], 3)
        want = fastpe.rope_cache(
            64,
            inv_freq=w,
            positions=pos,
            sections=sections,
            section_layout=section_layout,
            dtype=np.float64,
        )
        np.testing.assert_array_equal(np.frombuffer(cos).reshape(9, 64), want[0])
        np.testing.assert_array_equal(np.frombuffer(sin).reshape(9, 64), want[1])
        rot = fastpe.apply_rope(
            x.reshape(1, 9, 1, 64).copy(),
            inv_freq=w,
            positions=pos,
            sections=sections,
            section_layout=section_layout,
            seq_axis=1,
        )
        np.testing.assert_array_equal(got, rot.reshape(9, 64))
    with pytest.raises(ValueError, match="inv_freq"):
        probe.rope_axes(
            np.array([np.inf] * 4).tobytes(),
            np.array([2, 2], np.int64).tobytes(),
            0,
            np.zeros(2, np.int64).tobytes(),
            np.zeros((1, 8), np.float32),
        )
