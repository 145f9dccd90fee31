"""The table functions' numbers are checked once, by the library: every path
(the cached fast path, the general path, the Dask front end's early check)
raises the same message, built from the library's error detail, which names
the argument, the offending value and, for arrays, the element."""

import numpy as np
import pytest

import fastpe
from fastpe import kernel


def _message(call):
    with pytest.raises(ValueError) as info:
        call()
    return str(info.value)


@pytest.mark.parametrize("width", [40, 41])
def test_cold_and_warm_calls_raise_the_same_message(width):
    """The first call of a width takes the general path, later ones the cached
    fast path: one check, so one message."""
    limit = kernel.max_position(10000.0, width)
    calls = [
        lambda: fastpe.sinusoidal(2, width, offset=limit),
        lambda: fastpe.sinusoidal_at(np.array([0.0, np.nan]), width),
        lambda: fastpe.add_to(np.zeros((2, 3, width), np.float32), offset=limit, scale=1.0),
        lambda: fastpe.add_to(np.zeros((1, 1, width)), scale=float("inf")),
    ]
    for call in calls:
        kernel.encoders.clear()
        cold = _message(call)  # (nothing cached: the general path)
        fastpe.sinusoidal(1, width)  # the encoding is cached now
        warm = _message(call)
        assert cold == warm


def test_messages_name_the_argument_value_and_element():
    limit = kernel.max_position(10000.0, 8)
    msg = _message(lambda: fastpe.sinusoidal_at([[0, 1], [2, np.nan]], 8))
    assert msg == "positions must be finite, got nan at positions[1, 1]"
    msg = _message(lambda: fastpe.sinusoidal_at(np.array([[0, 1e300]]), 8))
    assert msg.startswith(f"positions must keep every position within +-{limit} ")
    assert msg.endswith("got positions up to 1e+300 at positions[0, 1]")
    msg = _message(lambda: fastpe.add_to(np.zeros((2, 3, 8)), positions=[0.0, 1.0, np.inf]))
    assert msg == "positions must be finite, got inf at x[0, 2]"
    msg = _message(lambda: fastpe.add_to(np.zeros((2, 3, 8)), offset=[0, limit]))
    assert msg.endswith(f"got positions up to {limit + 2} at x[1, 0]")
    assert _message(lambda: fastpe.sinusoidal(-3, 8)) == (
        "seq_len must be a non-negative integer, got -3"
    )
    assert _message(lambda: fastpe.sinusoidal(3, 0)) == "d_model must be an integer >= 1, got 0"
    assert _message(lambda: fastpe.add_to(np.zeros((2, 3, 8)), scale=10**400)) == (
        "scale must be finite, got inf"
    )
    msg = _message(lambda: fastpe.sinusoidal(3, 2**41))
    assert msg.startswith("d_model must be an integer <= 1099511627776")


def test_the_limit_is_inclusive_on_every_path():
    limit = kernel.max_position(10000.0, 16)
    for _ in range(2):  # cold, then warm
        fastpe.sinusoidal(1, 16, offset=limit)
        fastpe.sinusoidal_at(np.array([limit, -limit]), 16)
        fastpe.add_to(np.zeros((1, 1, 16)), offset=-limit)
        with pytest.raises(ValueError, match="exact angle reduction"):
            fastpe.sinusoidal_at(np.array([limit + 1]), 16)
