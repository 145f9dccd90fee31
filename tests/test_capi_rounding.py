"""C API 1.5: correct rounding as a handle setting (fastpe_spec_set_rounding,
fastpe_rope_set_rounding), called through the capsule's table with ctypes -- the
pointers a C extension gets from import_fastpe() -- and compared bitwise with
fastpe.sinusoidal / sinusoidal_at / rope_cache(..., correctly_rounded=True), and
with mpmath on the hard rows (355, 103993, 833719: sin(k) within 1e-5 of 0)."""

import ctypes
import importlib.util
from typing import ClassVar

import mpmath
import numpy as np
import pytest
import test_capi_rope as capi_rope
import test_capi_rope_axes as capi_axes
from rules import LLAMA31

import fastpe
from fastpe import kernel

C = kernel._C_CONSTANTS
OK, EINVAL, EHANDLE = C["FASTPE_OK"], 11, 12
# FASTPE_ROUND_DEFAULT and FASTPE_ROUND_CORRECT (lib/include/fastpe/fastpe.h)
DEFAULT, CORRECT = 0, 1
i64, dbl, cint, vp = ctypes.c_int64, ctypes.c_double, ctypes.c_int, ctypes.c_void_p
SET_ROUNDING = ctypes.CFUNCTYPE(cint, vp, cint)
HARD = np.array([355, 103993, 833719])
CR = dict(dtype=np.float64, correctly_rounded=True)
SENTINEL = 12345.0


class Table(capi_axes.Table):
    """fastpe_api_t up to ABI 1.5."""

    _fields_: ClassVar = [
        ("spec_set_rounding", SET_ROUNDING),
        ("rope_set_rounding", SET_ROUNDING),
    ]


@pytest.fixture(scope="module")
def t():
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    table = Table.from_address(get(kernel._C_API, b"fastpe.kernel._C_API"))
    assert (table.abi_major, table.abi_minor) == kernel.C_API_VERSION >= (1, 5)
    assert table.size >= ctypes.sizeof(Table)
    return table


def p(a):
    return a.ctypes.data if a is not None else None


def spec(t, convention, d, rounding=CORRECT):
    h = t.spec_new(convention, d)
    assert t.spec_set_rounding(h, rounding) == OK
    return h


def rope_handle(t, h, rounding=CORRECT):
    assert t.rope_set_rounding(h, rounding) == OK
    return h


def _exact_row(k, d):
    """Vaswani's row of position k, interleaved, each entry rounded once (mpmath)."""
    with mpmath.workdps(60):
        out = []
        for j in range(d):
            x = mpmath.mpf(int(k)) * mpmath.power(10000, -mpmath.mpf(j // 2) / (d / 2))
            out.append(float(mpmath.sin(x) if j % 2 == 0 else mpmath.cos(x)))
        return np.array(out)


# ---------------------------------------------------------------- tables


@pytest.mark.parametrize(
    "convention, d", [("vaswani", 64), ("vaswani", 7), ("fairseq", 33), ("gptj", 16),
                      ("diffusers", 130), ("tensor2tensor", 9)]
)  # fmt: skip
@pytest.mark.parametrize("offset, S, nt", [(0, 97, 0), (-355, 40, 2), (103990, 7, 1)])
def test_spec_fill_is_sinusoidal_correctly_rounded(t, convention, d, offset, S, nt):
    h = spec(t, convention, d)
    try:
        out = np.full((S, d), SENTINEL)
        assert t.spec_fill_f64(h, p(out), S, d, offset, nt) == OK
        want = fastpe.sinusoidal(S, d, offset=offset, convention=convention, **CR)
        np.testing.assert_array_equal(out, want)
        pos = offset + 2.5 * np.arange(S) - 3.0
        out[:] = SENTINEL
        assert t.spec_fill_positions_f64(h, p(out), S, d, p(pos), nt) == OK
        np.testing.assert_array_equal(
            out, fastpe.sinusoidal_at(pos, d, convention=convention, **CR)
        )
    finally:
        t.spec_free(h)


def test_hard_rows_are_the_exact_values_rounded_once(t):
    h = spec(t, "vaswani", 16)
    try:
        out = np.empty((3, 16))
        assert t.spec_fill_positions_f64(h, p(out), 3, 16, p(HARD.astype(np.float64)), 0) == OK
        for r, k in enumerate(HARD):
            np.testing.assert_array_equal(out[r], _exact_row(k, 16), err_msg=f"k={k}")
        # a row at a time through the offset, as a decoding step asks for it
        for r, k in enumerate(HARD):
            row = np.empty(16)
            assert t.spec_fill_f64(h, p(row), 1, 16, int(k), 1) == OK
            np.testing.assert_array_equal(row, out[r])
    finally:
        t.spec_free(h)


def test_the_default_is_left_as_it_was(t):
    """A spec set back to FASTPE_ROUND_DEFAULT fills the default bits (which differ
    from the correctly rounded ones on some hard row: the option is not a no-op)."""
    h = spec(t, "vaswani", 64)
    try:
        cr = np.empty((3, 64))
        assert t.spec_fill_positions_f64(h, p(cr), 3, 64, p(HARD.astype(np.float64)), 0) == OK
        assert t.spec_set_rounding(h, DEFAULT) == OK
        out = np.empty((3, 64))
        assert t.spec_fill_positions_f64(h, p(out), 3, 64, p(HARD.astype(np.float64)), 0) == OK
        np.testing.assert_array_equal(out, fastpe.sinusoidal_at(HARD, 64, dtype=np.float64))
        assert not np.array_equal(out, cr)
    finally:
        t.spec_free(h)


# ---------------------------------------------------------------- RoPE caches


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("attention", [1.0, 0.75])
def test_rope_cache_is_rope_cache_correctly_rounded(t, layout, attention):
    w = 1.0 / 10000.0 ** (np.arange(16) / 16)
    h = rope_handle(t, t.rope_from_frequencies(p(w), 16, attention))
    try:
        for where in ({"seq_len": 50, "offset": 103970}, {"positions": HARD}):
            n = where.get("seq_len") or len(where["positions"])
            cos, sin = np.full((n, 32), SENTINEL), np.full((n, 32), SENTINEL)
            pos = where.get("positions")
            pos = None if pos is None else np.ascontiguousarray(pos, np.int64)
            assert (
                t.rope_cache_f64(h, p(cos), p(sin), n, 32, p(pos), where.get("offset", 0),
                                 capi_rope.LAYOUT[layout], 2) == OK
            )  # fmt: skip
            want = fastpe.rope_cache(
                32, inv_freq=w, attention_factor=attention, layout=layout, **where, **CR
            )
            np.testing.assert_array_equal(cos, want[0])
            np.testing.assert_array_equal(sin, want[1])
    finally:
        t.rope_free(h)


@pytest.mark.parametrize("params", [capi_rope.YARN, LLAMA31])
def test_rule_handles_give_rope_cache_correctly_rounded(t, params):
    h = rope_handle(t, t.rope_new(params, 128, 0, -1, None))
    try:
        S = 33
        cos, sin = np.empty((S, 128)), np.empty((S, 128))
        half = capi_rope.LAYOUT["half"]
        assert t.rope_cache_f64(h, p(cos), p(sin), S, 128, None, 833700, half, 0) == OK
        want = fastpe.rope_cache(128, params, seq_len=S, offset=833700, layout="half", **CR)
        np.testing.assert_array_equal(cos, want[0])
        np.testing.assert_array_equal(sin, want[1])
    finally:
        t.rope_free(h)


@pytest.mark.parametrize("section_layout", ["contiguous", "interleaved"])
def test_multi_axis_cache_is_rope_cache_correctly_rounded(t, section_layout):
    w = 1.0 / 500.0 ** (np.arange(12) / 12)
    sections = (4, 4, 4)
    h = rope_handle(t, capi_axes.handle(t, w, sections, section_layout, 1.5))
    try:
        pos = np.stack([HARD, HARD[::-1] - 7, np.array([0, -5, 12])], axis=-1).astype(np.int64)
        cos, sin = np.empty((3, 24)), np.empty((3, 24))
        half = capi_rope.LAYOUT["half"]
        assert t.rope_cache_axes_f64(h, p(cos), p(sin), 3, 24, p(pos), half, 1) == OK
        want = fastpe.rope_cache(
            24, positions=pos, sections=sections, section_layout=section_layout, inv_freq=w,
            attention_factor=1.5, layout="half", **CR,
        )  # fmt: skip
        np.testing.assert_array_equal(cos, want[0])
        np.testing.assert_array_equal(sin, want[1])
    finally:
        t.rope_free(h)


# ---------------------------------------------------------------- refusals


def _adds_residues(t, s):
    """Whether spec s adds correctly rounded, as fastpe.add_to does: x = -(the
    rounded rows at 355, 356) plus their exact values leaves P - round(P)
    rounded once in every entry, never 0 (where a default add of equal rows
    leaves 0)."""
    rows = fastpe.sinusoidal(2, 8, offset=355, **CR)
    x = -rows
    assert t.spec_add_f64(s, p(x), 1, 2, 8, 355, 1.0, 1) == OK
    want = fastpe.add_to(-rows, offset=355, correctly_rounded=True)
    np.testing.assert_array_equal(x, want)
    return bool(np.all(x != 0.0))


def test_other_dtypes_adds_and_rotations_take_the_setting(t):
    s = spec(t, "vaswani", 8)
    w = np.array([1.0, 0.5])
    r = rope_handle(t, t.rope_from_frequencies(p(w), 2, 1.0))
    try:
        f32, f16 = np.full((2, 8), 7, np.float32), np.full((2, 8), 7, np.float16)
        u16 = np.full((2, 8), 7, np.uint16)
        # (the one-axis rotations take it: tests/test_rope_apply_rounding.py)
        assert _adds_residues(t, s)
        # the 16/32-bit fills and caches: the Python API's correctly rounded bits
        assert t.spec_fill_f32(s, p(f32), 2, 8, 355, 1) == OK
        assert t.spec_fill_f16(s, p(f16), 2, 8, 355, 1) == OK
        assert t.spec_fill_bf16(s, p(u16), 2, 8, 355, 1) == OK
        for got, dt in ((f32, np.float32), (f16, np.float16)):
            want = fastpe.sinusoidal(2, 8, offset=355, dtype=dt, correctly_rounded=True)
            np.testing.assert_array_equal(got, want)
        # (bfloat16 arrays need ml_dtypes, an extra the wheel's test venv goes without)
        if importlib.util.find_spec("ml_dtypes") is not None:
            import ml_dtypes

            bf = fastpe.sinusoidal(
                2, 8, offset=355, dtype=ml_dtypes.bfloat16, correctly_rounded=True
            )
            np.testing.assert_array_equal(u16, bf.view(np.uint16))
        c32, s32 = np.full((1, 4), 7, np.float32), np.full((1, 4), 7, np.float32)
        assert t.rope_cache_f32(r, p(c32), p(s32), 1, 4, None, 0, 0, 1) == OK
        assert np.all(c32 == 1.0) and np.all(s32 == 0.0)  # (position 0)
        assert t.spec_set_rounding(s, 2) == EINVAL
        assert t.rope_set_rounding(r, -1) == EINVAL
        assert t.spec_set_rounding(None, CORRECT) == C["FASTPE_ENULL"]
        # the refused values left the handles correctly rounded
        assert _adds_residues(t, s)
    finally:
        t.spec_free(s)
        t.rope_free(r)
    assert t.spec_set_rounding(s, CORRECT) == EHANDLE
    assert t.rope_set_rounding(r, CORRECT) == EHANDLE


# ---------------------------------------------------------------- the Python API's way in


@pytest.mark.parametrize("params", [{"rope_theta": 500000.0}, capi_rope.YARN])
def test_a_decoding_step_goes_through_the_c_entry_point(params):
    """rope_cache(..., correctly_rounded=True) of a planned rule takes the C API's
    fastpe_rope_cache_f64 (the fast path, with a correctly rounded copy of the plan's
    handle): the general path's bits, and the default's left as they were."""
    from fastpe import _rope_cache

    args = (128, params, None, 0, HARD, "half", np.float64, None, "float32", None, None, None, 1)
    fastpe.rope_cache(128, params, positions=HARD, dtype=np.float64)  # (plans the rule)
    fast = kernel.rope_cache_fast(*args, True)
    assert fast is not None
    # the general path: positions as a tuple, which the fast path does not take
    assert kernel.rope_cache_fast(*args[:4], tuple(HARD), *args[5:], True) is None
    general = _rope_cache.rope_cache(128, params, positions=tuple(HARD), **CR)
    np.testing.assert_array_equal(fast[0], general[0])
    np.testing.assert_array_equal(fast[1], general[1])
    np.testing.assert_array_equal(fastpe.rope_cache(128, params, positions=HARD, **CR)[0], fast[0])
    default = kernel.rope_cache_fast(*args)
    np.testing.assert_array_equal(
        default[0], fastpe.rope_cache(128, params, positions=HARD, dtype=np.float64)[0]
    )
    # float32 (asked for, or the default) too, through fastpe_rope_cache_f32: the
    # general path's bits (tests/test_rope_fast_rounding.py: every dtype)
    f32 = kernel.rope_cache_fast(*args[:6], np.float32, *args[7:], True)
    assert f32 is not None and f32[0].dtype == np.float32
    g32 = _rope_cache.rope_cache(128, params, positions=tuple(HARD), correctly_rounded=True)
    np.testing.assert_array_equal(f32[0], g32[0])
    np.testing.assert_array_equal(f32[1], g32[1])
    assert kernel.rope_cache_fast(*args[:6], None, *args[7:], True) is not None
    c32 = fastpe.rope_cache(128, params, positions=HARD, correctly_rounded=True)
    assert c32[0].dtype == np.float32
    np.testing.assert_array_equal(
        c32[1],
        fastpe.rope_cache(128, params, positions=HARD, dtype="float32", correctly_rounded=True)[1],
    )


def test_one_handle_set_once_serves_many_threads(t):
    """The rule of the header: set the rounding, then share the handle; threads
    calling through it at once (without the GIL) each get the same bits."""
    import threading

    h = spec(t, "vaswani", 96)
    w = 1.0 / 10000.0 ** (np.arange(48) / 48)
    r = rope_handle(t, t.rope_from_frequencies(p(w), 48, 1.25))
    S, offset = 301, 833500
    want_t = fastpe.sinusoidal(S, 96, offset=offset, **CR)
    want_r = fastpe.rope_cache(
        96, inv_freq=w, attention_factor=1.25, seq_len=S, offset=offset, **CR
    )
    outs = [(np.empty((S, 96)), np.empty((S, 96)), np.empty((S, 96))) for _ in range(6)]
    codes = []

    def work(i):
        a, c, s = outs[i]
        codes.append(t.spec_fill_f64(h, p(a), S, 96, offset, 1 + i % 3))
        codes.append(t.rope_cache_f64(r, p(c), p(s), S, 96, None, offset, 1, 1 + i % 2))

    try:
        threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert codes == [OK] * 12
        for a, c, s in outs:
            np.testing.assert_array_equal(a, want_t)
            np.testing.assert_array_equal(c, want_r[0])
            np.testing.assert_array_equal(s, want_r[1])
    finally:
        t.spec_free(h)
        t.rope_free(r)


def test_python_tables_take_the_fast_path(t):
    """sinusoidal / sinusoidal_at(..., correctly_rounded=True) of the common argument
    types fill through the cached encoding (the C API's bits), float64 and float32
    (asked for, the default, or an out) alike."""
    h = spec(t, "fairseq", 40)
    try:
        want = np.empty((6, 40))
        assert t.spec_fill_f64(h, p(want), 6, 40, 103990, 1) == OK
        args = (6, 40, 10000.0, 103990, np.float64, "interleaved", None, 1, "fairseq")
        fastpe.sinusoidal(1, 40, convention="fairseq")  # (the encoding, cached)
        np.testing.assert_array_equal(kernel.table(*args, True), want)
        pos = np.arange(103990, 103996, dtype=np.int64)
        at = (pos, 40, 10000.0, np.float64, "interleaved", None, 1, "fairseq")
        np.testing.assert_array_equal(kernel.table_at(*at, True), want)
        want32 = np.empty((6, 40), np.float32)
        assert t.spec_fill_f32(h, p(want32), 6, 40, 103990, 1) == OK
        for dtype in (None, np.float32, "float32"):
            np.testing.assert_array_equal(kernel.table(*args[:4], dtype, *args[5:], True), want32)
            np.testing.assert_array_equal(kernel.table_at(*at[:3], dtype, *at[4:], True), want32)
        out32 = np.empty((6, 40), np.float32)
        assert kernel.table(*args[:4], None, "interleaved", out32, 1, "fairseq", True) is out32
        np.testing.assert_array_equal(out32, want32)
        np.testing.assert_array_equal(
            fastpe.sinusoidal(6, 40, offset=103990, convention="fairseq", correctly_rounded=True),
            want32,
        )
    finally:
        t.spec_free(h)


def test_a_handle_keeps_what_its_first_correctly_rounded_cache_made(t):
    """The first correctly rounded cache of a handle makes the table rows' low
    parts that later calls reuse; every call gives the bits of the Python general
    path, which evaluates them per call (attention_factor given: no fast path)."""
    w = 1.0 / 10000.0 ** (np.arange(64) / 64)
    kept = rope_handle(t, t.rope_from_frequencies(p(w), 64, 1.0))
    try:
        for k in (*HARD, 7, -355, 10**12):
            pos = np.array([k, k + 1, k + 40], np.int64)
            cos, sin = np.empty((3, 128)), np.empty((3, 128))
            assert t.rope_cache_f64(kept, p(cos), p(sin), 3, 128, p(pos), 0, 1, 1) == OK
            want = fastpe.rope_cache(128, inv_freq=w, attention_factor=1.0, positions=pos, **CR)
            np.testing.assert_array_equal(cos, want[0], err_msg=f"k={k}")
            np.testing.assert_array_equal(sin, want[1], err_msg=f"k={k}")
    finally:
        t.rope_free(kept)
