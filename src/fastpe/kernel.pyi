"""Type stubs for the compiled kernel (fastpe/kernel.pyx).

Private to fastpe: the public API in fastpe._api validates every argument and
calls these.  C and Cython users reach the kernel through fastpe.h / kernel.pxd.
"""

from typing import Any

import numpy as np

ERROR_MESSAGES: dict[int, str]
C_API_VERSION: tuple[int, int]
_C_API: Any  # PyCapsule "fastpe.kernel._C_API" holding the versioned function table
_C_CONSTANTS: dict[str, int]

class Plan:
    """Frequencies and rotation table for one spec, reusable across fills."""

    nf: int
    block_rows: int
    def __init__(self, spec: dict[str, Any]) -> None: ...
    @property
    def nbytes(self) -> int: ...

def plan_nbytes(spec: dict[str, Any]) -> int: ...
def fill_rows(
    out: Any,
    spec: dict[str, Any],
    *,
    nseq: int,
    seq_len: int,
    offset: int = ...,
    offsets: np.ndarray | None = ...,
    positions: np.ndarray | None = ...,
    zero_pos: int | None = ...,
    add: bool = ...,
    scale: float = ...,
    num_threads: int = ...,
    plan: Plan | None = ...,
    fresh: bool = ...,
) -> Any: ...
def _set_stream_bytes(nbytes: float | tuple[float, float]) -> tuple[float, float]: ...
def _set_avx512_writers(on: bool) -> bool: ...
def streaming_stores() -> str: ...
def spec_max_position(spec: dict[str, Any]) -> float: ...
def max_position(base: float, d_model: int) -> int: ...
def max_threads() -> int: ...
def forked_child() -> bool: ...
def openmp_info() -> tuple[bool, int]: ...
