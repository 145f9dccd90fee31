"""Types for annotating code that calls fastpe (as ``numpy.typing`` is for NumPy).

>>> import fastpe
>>> from fastpe.typing import BuildInfo, Layout
>>> info: BuildInfo = fastpe.build_info()
>>> layout: Layout = "split"

Nothing here is needed at run time; type checkers read these through the
signatures of :func:`fastpe.sinusoidal` and the other public functions.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypedDict, TypeVar, Union

import numpy as np

if sys.version_info >= (3, 12):
    from collections.abc import Buffer
elif TYPE_CHECKING:
    from typing_extensions import Buffer
else:  # only named at run time (typing_extensions is not a dependency)
    Buffer = memoryview

__all__ = ["BuildInfo", "Convention2DName", "ConventionName", "Layout", "OutArray", "OutArrayT"]

#: ``layout=`` of :func:`fastpe.sinusoidal`, :func:`fastpe.sinusoidal_at`, :func:`fastpe.add_to`.
Layout = Literal["interleaved", "split"]
#: The named conventions (``fastpe.CONVENTIONS``); a :class:`fastpe.Convention` is accepted too.
ConventionName = Literal["vaswani", "tensor2tensor", "fairseq", "diffusers", "gptj"]
#: ``convention=`` of :func:`fastpe.sinusoidal_2d`.
Convention2DName = Literal["mae", "timm"]


class BuildInfo(TypedDict):
    """What :func:`fastpe.build_info` returns (its docstring describes each key)."""

    version: str
    openmp: bool
    openmp_version: int
    max_threads: int
    usable_cpus: int
    forked_child: bool
    machine: str
    numpy: str
    cpu_features: list[str]
    streaming_stores: str  # "avx512", "sse2" or "plain"


class _SupportsDLPack(Protocol):
    # A read-only attribute rather than a method: any method matches it, whatever
    # its parameters (torch's __dlpack__ takes stream=, NumPy's also max_version=).
    @property
    def __dlpack__(self) -> Any: ...


class _SupportsArrayInterface(Protocol):
    @property
    def __array_interface__(self) -> Any: ...


#: What ``out=`` accepts, as far as a type checker can tell: an ndarray, an object
#: with the buffer protocol or ``__array_interface__`` (memoryview, array.array), or
#: a DLPack producer (a PyTorch CPU tensor).  Shape, dtype and device are checked
#: at run time.
OutArray = Union[np.ndarray, Buffer, _SupportsArrayInterface, _SupportsDLPack]

#: What :func:`fastpe.sinusoidal` and :func:`fastpe.sinusoidal_at` return: the ``out``
#: object passed (a tensor stays a tensor), or a new ndarray when ``out`` is not given
#: (the default, which type checkers read: PEP 696).
if TYPE_CHECKING:
    from typing_extensions import TypeVar as _TypeVarDefault

    OutArrayT = _TypeVarDefault("OutArrayT", bound=OutArray, default=np.ndarray)
else:
    OutArrayT = TypeVar("OutArrayT", bound=OutArray)
# add_to returns its x (an ndarray, or a subclass of one).
_ArrayT = TypeVar("_ArrayT", bound=np.ndarray)
