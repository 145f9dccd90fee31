"""The small-call paths hand the library the largest position of their cached
encoding (worked out once, when the encoding was built) instead of letting it
work the bound out again: the bound must be the library's own, so that every
call is accepted or refused exactly as the general path accepts or refuses it,
at the limit itself and one past it, for every convention and kind of call."""

import numpy as np
import pytest

import fastpe
from fastpe import kernel

# (widths odd and even, conventions whose frequencies differ: each has its own bound)
ENCODINGS = [
    dict(d_model=16),
    dict(d_model=33, layout="split"),
    dict(d_model=64, base=0.5),  # (frequencies above 1: a bound of its own per width)
    dict(d_model=20, convention=fastpe.Convention(position_scale=1000.0, layout="split")),
    dict(d_model=40, convention="fairseq"),
    dict(d_model=320, convention="diffusers"),
    dict(d_model=24, convention="tensor2tensor"),
    dict(d_model=24, convention="gptj"),
]


def _limit(enc):
    """The library's bound for this encoding, from the cached Encoder."""
    kernel.encoders.clear()
    fastpe.sinusoidal(1, **enc)
    (encoder,) = kernel.encoders.values()
    return int(encoder.max_position)


def _outcome(call):
    """The array a call returns, or the text of the ValueError it raises."""
    try:
        return call()
    except ValueError as e:
        return str(e)


def _calls(enc, position, slow):
    """Small calls at |position|; with slow, spelled so the fast paths decline them."""
    n = np.int64 if slow else int
    d = enc["d_model"]
    kw = {k: v for k, v in enc.items() if k != "d_model"}
    pos = np.array([position, -position], np.int64)
    return [
        lambda: fastpe.sinusoidal(1, d, offset=n(position), **kw),
        lambda: fastpe.sinusoidal(
            1, d, offset=n(position), out=np.empty((1, d), np.float32), **kw
        ),
        lambda: fastpe.sinusoidal(2, d, offset=n(-position), dtype="float64", **kw),
        lambda: fastpe.sinusoidal_at(pos if not slow else list(pos), d, **kw),
        lambda: fastpe.sinusoidal_at(
            pos if not slow else list(pos), d, out=np.empty((2, d), np.float64), **kw
        ),
        lambda: fastpe.add_to(np.zeros((1, 1, d), np.float32), offset=n(position), **kw),
    ]


def _id(enc):
    return "-".join("custom" if isinstance(v, fastpe.Convention) else str(v) for v in enc.values())


@pytest.mark.parametrize("enc", ENCODINGS, ids=_id)
@pytest.mark.parametrize("past", [0, 1])
def test_fast_paths_accept_and_refuse_as_the_general_path(enc, past):
    limit = _limit(enc)
    if not past:  # (the exact spellings are the fast paths' own)
        d, row = enc["d_model"], np.empty((1, enc["d_model"]), np.float32)
        base, layout = enc.get("base", 10000.0), enc.get("layout", "interleaved")
        served = kernel.table(
            1, d, base, limit, None, layout, row, None, enc.get("convention", "vaswani")
        )
        assert served is row
    for fast, slow in zip(
        _calls(enc, limit + past, False), _calls(enc, limit + past, True), strict=True
    ):
        general = _outcome(slow)
        cached = _outcome(fast)
        if past:
            assert isinstance(general, str) and "every position within" in general
            assert cached == general
        else:
            assert not isinstance(cached, str), cached
            np.testing.assert_array_equal(cached, general)


def test_the_bound_is_the_encodings_not_the_last_ones():
    """Encodings of different bounds called in turn: each call is checked
    against its own encoding's bound, whichever was called before."""
    narrow, wide = dict(d_model=16, base=0.5), dict(d_model=16)
    lo, hi = _limit(narrow), _limit(wide)
    assert lo < hi
    fastpe.sinusoidal(1, **narrow)  # both cached now
    row = np.empty((1, 16), np.float32)
    for _ in range(3):
        fastpe.sinusoidal(1, offset=hi, out=row, **wide)
        with pytest.raises(ValueError, match="every position within"):
            fastpe.sinusoidal(1, offset=lo + 1, out=row, **narrow)
        fastpe.sinusoidal(1, offset=lo, out=row, **narrow)
        with pytest.raises(ValueError, match="every position within"):
            fastpe.sinusoidal(1, offset=hi + 1, out=row, **wide)
