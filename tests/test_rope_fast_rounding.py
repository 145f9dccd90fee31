"""rope_cache's small-call paths with correctly_rounded=True, in every dtype: the
general path's bits, cold (the call that plans) and warm (the fast path), and the
correctly rounded values themselves (mpmath)."""

from __future__ import annotations

import importlib.util

import mpmath
import numpy as np
import pytest
from test_rounding_narrow import sweep_tool

import fastpe
from fastpe import kernel

HAVE_BF16 = importlib.util.find_spec("ml_dtypes") is not None
DTYPES = [np.float32, np.float64, np.float16, "float16", None]
if HAVE_BF16:
    import ml_dtypes

    DTYPES += [ml_dtypes.bfloat16, "bfloat16"]

YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 2048}

# (one-axis calls) a decoding step, a prompt at an offset, ndarray positions, a
# rule with an attention factor other than 1, listed frequencies, interleaved pairs
CALLS = [
    dict(rope_parameters={"rope_theta": 500000.0}, positions=[777]),
    dict(rope_parameters={"rope_theta": 10000.0}, seq_len=5, offset=3000),
    dict(positions=np.array([0, 5, 70000, -3])),
    dict(rope_parameters=YARN, seq_len=3, offset=9000),
    dict(inv_freq=1.0 / 10000.0 ** (np.arange(0, 64, 2) / 64), positions=[1, 2, 103993]),
    dict(rope_parameters={"rope_theta": 10000.0}, positions=[31, 4], layout="interleaved"),
]

AXES_CALLS = [
    dict(positions=np.array([[100000, 7, 9]]), sections=(16, 8, 8)),
    dict(
        positions=np.array([[0, 0, 0], [5, 70000, 3]]),
        sections=(16, 8, 8),
        rope_parameters=YARN,
        section_layout="interleaved",
        layout="interleaved",
    ),
]

_CACHE_NAMES = ("rope_parameters", "seq_len", "offset", "positions", "layout", "dtype")
_CACHE_NAMES += ("max_position_embeddings", "precision", "inv_freq", "attention_factor")
_CACHE_NAMES += ("out", "num_threads")
_AXES_NAMES = ("rope_parameters", "seq_len", "offset", "positions", "sections")
_AXES_NAMES += ("section_layout", "layout", "dtype", "max_position_embeddings", "precision")
_AXES_NAMES += ("inv_freq", "attention_factor", "out", "num_threads")
_DEFAULTS = dict(offset=0, layout="half", section_layout="contiguous", precision="float32")


def _args(kw, names):
    return [kw.get(n, _DEFAULTS.get(n)) for n in names]


def _bits(a):
    return np.ascontiguousarray(a).view(np.uint8)


def _same_bits(got, want, what):
    assert len(got) == len(want) == 2, what
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape, (what, g.dtype, w.dtype)
        np.testing.assert_array_equal(_bits(g), _bits(w), err_msg=str(what))


def _general(head_dim, kw):
    """The same call through the general path: the fast paths decline a NumPy
    integer head_dim (their plans are keyed by ints)."""
    return fastpe.rope_cache(np.int64(head_dim), **kw, correctly_rounded=True)


@pytest.mark.parametrize("dtype", DTYPES, ids=repr)
@pytest.mark.parametrize("call", range(len(CALLS)))
def test_small_call_path_gives_the_general_paths_bits(call, dtype):
    kw = dict(CALLS[call], dtype=dtype)
    head_dim = 64
    fastpe.kernel.rope_args.clear()  # cold: the first call plans the rule
    cold = fastpe.rope_cache(head_dim, **kw, correctly_rounded=True)
    fast = kernel.rope_cache_fast(head_dim, *_args(kw, _CACHE_NAMES), True)
    assert fast is not None, "the small-call path declined a correctly rounded call"
    warm = fastpe.rope_cache(head_dim, **kw, correctly_rounded=True)
    assert kernel.rope_cache_fast(np.int64(head_dim), *_args(kw, _CACHE_NAMES), True) is None
    general = _general(head_dim, kw)
    for what, got in (("cold", cold), ("fast", fast), ("warm", warm)):
        _same_bits(got, general, (what, kw))


@pytest.mark.parametrize("dtype", DTYPES, ids=repr)
@pytest.mark.parametrize("call", range(len(AXES_CALLS)))
def test_multi_axis_path_gives_the_general_paths_bits(call, dtype):
    kw = dict(AXES_CALLS[call], dtype=dtype)
    head_dim = 64
    cold = fastpe.rope_cache(head_dim, **kw, correctly_rounded=True)
    fast = kernel.rope_cache_axes_fast(head_dim, *_args(kw, _AXES_NAMES), True)
    assert fast is not None, "the multi-axis path declined a correctly rounded call"
    warm = fastpe.rope_cache(head_dim, **kw, correctly_rounded=True)
    slow = dict(kw, sections=np.array(kw["sections"]))  # (declined: not a tuple of ints)
    assert kernel.rope_cache_axes_fast(head_dim, *_args(slow, _AXES_NAMES), True) is None
    general = fastpe.rope_cache(head_dim, **slow, correctly_rounded=True)
    for what, got in (("cold", cold), ("fast", fast), ("warm", warm)):
        _same_bits(got, general, (what, kw))
    # and the option is honoured there: the default float64 caches differ from these
    if dtype is np.float64:
        default = kernel.rope_cache_axes_fast(head_dim, *_args(kw, _AXES_NAMES))
        assert default is not None
        assert any((d != f).any() for d, f in zip(default, fast, strict=True)) or call == 0


# the exact value rounded once to nearest (ties to even) in a format: the suite's one
# rounding (tools/rounding_sweep.py)
_round_to = sweep_tool.round_to


# Positions whose sine at frequency 1 is tiny (numerators of convergents of pi):
# there the default float64 value is off by many ulps and, at the last two, the
# default float32 entry is rounded the wrong way too.
TINY = [833719, 5419351, 245850922, 1068966896]
SPOT_DTYPES = ["float64", "float32", "float16"] + (["bfloat16"] if HAVE_BF16 else [])


@pytest.mark.parametrize("fmt", SPOT_DTYPES)
def test_small_call_path_entries_are_correctly_rounded(fmt):
    w = np.array([1.0, 0.125, 1e-3, 3.0e-5])
    ks = [*TINY, 0, 1, 777, 123456]
    kw = dict(inv_freq=w, positions=ks, dtype=fmt)
    fastpe.rope_cache(8, **kw, correctly_rounded=True)  # plans the frequencies
    got = kernel.rope_cache_fast(8, *_args(kw, _CACHE_NAMES), True)
    assert got is not None
    cos, sin = (np.asarray(x, np.float64) for x in got)
    with mpmath.workprec(300):
        for r, k in enumerate(ks):
            for i, f in enumerate(w.tolist()):
                x = mpmath.mpf(k) * mpmath.mpf(f)
                assert cos[r, i] == cos[r, i + 4] == _round_to(mpmath.cos(x), fmt), (k, f)
                assert sin[r, i] == sin[r, i + 4] == _round_to(mpmath.sin(x), fmt), (k, f)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_small_call_path_does_not_drop_the_option(dtype):
    # entries whose default value is not the correctly rounded one: a fast path
    # that ignored the option would return the default
    kw = dict(inv_freq=np.array([1.0]), positions=[245850922, 1068966896], dtype=dtype)
    fastpe.rope_cache(2, **kw, correctly_rounded=True)
    default = kernel.rope_cache_fast(2, *_args(kw, _CACHE_NAMES), False)
    exact = kernel.rope_cache_fast(2, *_args(kw, _CACHE_NAMES), True)
    public = fastpe.rope_cache(2, **kw, correctly_rounded=True)
    assert default is not None and exact is not None
    assert (default[1] != exact[1]).all()
    with mpmath.workprec(300):
        want = [_round_to(mpmath.sin(k), np.dtype(dtype).name) for k in kw["positions"]]
    assert exact[1][:, 0].tolist() == public[1][:, 0].tolist() == want


def test_default_16_bit_caches_still_take_the_general_path():
    # (the small-call paths write 16-bit caches only with the option: the default
    # 16-bit writers are the general path's)
    fastpe.rope_cache(8, seq_len=3, dtype=np.float16)
    kw = dict(seq_len=3, dtype=np.float16)
    assert kernel.rope_cache_fast(8, *_args(kw, _CACHE_NAMES), False) is None
    assert kernel.rope_cache_fast(8, *_args(kw, _CACHE_NAMES), True) is not None
    # a 16-bit out pair: the general path's (with or without the option)
    out = (np.empty((3, 8), np.float16), np.empty((3, 8), np.float16))
    kw = dict(seq_len=3, dtype=np.float16, out=out)
    assert kernel.rope_cache_fast(8, *_args(kw, _CACHE_NAMES), True) is None
