"""Checked by mypy (tests/test_typing.py), never run: the public signatures give
these types.  Each assert_type fails the check if its type is wrong."""

import sys
from array import array
from typing import Any

import numpy as np

import fastpe
from fastpe._signatures import signature_of
from fastpe.typing import BuildInfo, Layout

if sys.version_info >= (3, 11):
    from typing import assert_type
else:
    from typing_extensions import assert_type


class Tensor:
    """Stands in for torch.Tensor (a DLPack producer), whose stubs are slow to check."""

    def __dlpack__(self, *, stream: int | None = None) -> object:
        return object()

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)


class Embeddings(np.ndarray):
    pass


# (annotated: what np.empty & co. return is more precise in newer NumPy releases)
table: np.ndarray = np.empty((4, 8))
floats: "array[float]" = array("f", bytes(64))

# Without out=, a new ndarray; with out=, the very type passed.
assert_type(fastpe.sinusoidal(4, 8), np.ndarray)
assert_type(fastpe.sinusoidal(4, 8, out=Tensor()), Tensor)
assert_type(fastpe.sinusoidal(4, 8, out=table), np.ndarray)
assert_type(fastpe.sinusoidal_at([1, 2], 8), np.ndarray)
assert_type(fastpe.sinusoidal_at([1, 2], 8, out=Tensor()), Tensor)
assert_type(fastpe.sinusoidal_at([1, 2], 8, out=floats), "array[float]")  # a buffer
assert_type(fastpe.add_to(table), np.ndarray)
assert_type(fastpe.add_to(Embeddings((2, 8))), Embeddings)
assert_type(fastpe.sinusoidal_2d(2, 2, 8, convention="timm"), np.ndarray)

# Literal parameters, and a Convention where one is accepted.
layout: Layout = "split"
fastpe.sinusoidal(4, 8, layout=layout, convention="fairseq")
fastpe.sinusoidal(4, 8, convention=fastpe.Convention.diffusers())
fastpe.add_to(np.zeros((2, 8)), convention=fastpe.Convention(base=500.0))

info = fastpe.build_info()
assert_type(info, BuildInfo)
assert_type(info["openmp"], bool)
assert_type(info["cpu_features"], list[str])


# An in-place twin takes its model's parameters (fastpe.torch.apply_rope_ takes
# apply_rope's) and keeps its own return type.
def model(x: int, *, scale: float = 1.0) -> str:
    return str(x * scale)


@signature_of(model)
def twin(x: Any, **given: Any) -> bytes:
    return b""


assert_type(twin(1, scale=2.0), bytes)
