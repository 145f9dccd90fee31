"""Checked by mypy (tests/test_typing.py), never run: each line marked `# E` is a
mistake the signatures must reject, so mypy must report an error on exactly those."""

import sys
from typing import Any

import numpy as np

import fastpe
from fastpe._signatures import signature_of

if sys.version_info >= (3, 11):
    from typing import assert_type
else:
    from typing_extensions import assert_type

assert_type(fastpe.sinusoidal(4, 8), list[float])  # E: the table is an ndarray
assert_type(fastpe.sinusoidal(4, 8, out=np.empty((4, 8))), memoryview)  # E: out's type
fastpe.sinusoidal(4, 8, layout="interleave")  # E: not a layout
fastpe.sinusoidal_at([1], 8, convention="vaswanni")  # E: not a convention
fastpe.sinusoidal_2d(2, 2, 8, convention="vaswani")  # E: 2-D conventions are mae, timm
fastpe.sinusoidal(4, 8, out=[0.0] * 32)  # E: a list is not writable memory
fastpe.add_to([[0.0] * 8])  # E: x is an ndarray
fastpe.build_info()["openmp_threads"]  # E: no such key


def model(x: int, *, scale: float = 1.0) -> str:
    return str(x * scale)


@signature_of(model)
def twin(x: Any, **given: Any) -> bytes:
    return b""


twin(1, scael=2.0)  # E: not a keyword of the model
twin("1")  # E: the model's type, not the twin's Any
