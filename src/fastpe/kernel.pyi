"""Type stubs for the compiled kernel (fastpe/kernel.pyx).

Private to fastpe: the public API in fastpe._api validates every argument and
calls these.  C and Cython users reach the kernel through fastpe.h / kernel.pxd.
The signatures mirror kernel.pyx one for one, so functions that take the same
arguments repeat them here (stubtest checks both against each other).
"""

from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np
from typing_extensions import Self, disjoint_base

from ._conventions import Convention

ERROR_MESSAGES: dict[int, str]
SMALL_REQUEST: int
C_API_VERSION: tuple[int, int]
_C_API: Any  # PyCapsule "fastpe.kernel._C_API" holding the versioned function table
_C_CONSTANTS: dict[str, int]
_F = TypeVar("_F", bound=Callable[..., Any])

@disjoint_base
class Plan:
    """Frequencies and rotation table for one spec, reusable across fills."""

    nf: int
    block_rows: int
    def __new__(cls, enc: Encoder) -> Self: ...
    @property
    def nbytes(self) -> int: ...

def plan_nbytes(enc: Encoder) -> int: ...
def check_knobs(base: float, position_scale: float, shift: float) -> None: ...

KNOB_SPELLINGS: dict[str, tuple[str, ...]]
PRESET_NAMES: tuple[str, ...]

def knobs_preset(name: str) -> dict[str, Any]: ...
def rope_rotate(
    x: Any,
    plan: RopePlan | RopeAxes,
    seq_axis: int,
    offset: int,
    offsets: np.ndarray | None,
    positions: np.ndarray | None,
    half: bool,
    attention: float,
    num_threads: int,
    bfloat16: bool = ...,
    k: Any = ...,
    k_bfloat16: bool = ...,
    accurate: bool = ...,
) -> None: ...
def rope_check_arrays(q: Any, k: Any, head_dim: int | None, seq_axis: int) -> tuple[int, int]: ...
def check_out(out: Any, other: Any, shape: tuple[int, ...]) -> None: ...
def rope_check_tokens(positions: Any, offset: Any, batch: int, seq: int) -> tuple[Any, Any]: ...
def rope_check_range(lo: float, hi: float, limit: float, axis: int = -1) -> None: ...
def rope_check_seq(seq_len: int, offset: int) -> None: ...
def rope_check_axes_tokens(
    positions: Any, n: int, batch: int, seq: int, what: str
) -> tuple[list[Any], list[Any]]: ...
def rope_rotate_tables(
    x: Any,
    table: np.ndarray,
    seq_axis: int,
    half: bool,
    attention: float,
    num_threads: int,
    bfloat16: bool = ...,
    k: Any = ...,
    ktable: np.ndarray | None = ...,
    k_bfloat16: bool = ...,
    per_batch: bool = ...,
) -> None: ...

@disjoint_base
class RopeAxes:
    """A multi-axis RoPE plan of the library's cache, held while the object lives."""

    @property
    def max_positions(self) -> tuple[float, ...]: ...
    @property
    def args(self) -> RopeArgs | None: ...
    def __new__(
        cls, w: Any, sections: Any, section_layout: int, args: RopeArgs | None = ...
    ) -> Self: ...

def rope_table_axes(
    axes: RopeAxes,
    out: Any,
    positions: np.ndarray,
    num_threads: int,
    bfloat16: bool = ...,
    accurate: bool = ...,
    scale: float = ...,
) -> None: ...
def rope_apply_axes(
    q: Any,
    k: Any,
    rope_parameters: Any,
    head_dim: Any,
    offset: Any,
    positions: Any,
    sections: Any,
    section_layout: Any,
    seq_axis: Any,
    layout: Any,
    max_position_embeddings: Any,
    precision: Any,
    inv_freq: Any,
    attention_factor: Any,
    num_threads: Any,
) -> Any: ...
def rope_cache_axes_fast(
    head_dim: Any,
    rope_parameters: Any,
    seq_len: Any,
    offset: Any,
    positions: Any,
    sections: Any,
    section_layout: Any,
    layout: Any,
    dtype: Any,
    max_position_embeddings: Any,
    precision: Any,
    inv_freq: Any,
    attention_factor: Any,
    out: Any,
    num_threads: Any,
    correctly_rounded: bool = ...,
) -> tuple[np.ndarray, np.ndarray] | None: ...

@disjoint_base
class RopeArgs:
    """A rule's parameters as the library reads them, for one head_dim."""

    head_dim: int
    def __new__(cls, head_dim: int, fields: dict[str, Any]) -> Self: ...

rope_args: dict[Any, RopeArgs]
ROPE_ARGS_MAX: int

def _rope_section_axes_native(
    sections: Any, section_layout: int, nf: int
) -> tuple[int, np.ndarray]: ...
def _rope_axes_native(
    inv_freq: Any,
    axis: Any,
    attention: float,
    positions: Any,
    what: str,
    a: Any,
    b: Any = None,
    *,
    bfloat16: bool = False,
    half: bool = True,
    n: int | None = None,
    row_stride: int | None = None,
    batch: int = 0,
    seq: int = 0,
    heads: int = 0,
    sb: int = 0,
    ss: int = 0,
    sh: int = 0,
    num_threads: int = 0,
) -> int: ...
def rope_plan_key(
    rope_parameters: Any,
    head_dim: Any,
    max_position_embeddings: Any,
    precision: Any,
    inv_freq: Any = None,
) -> tuple[Any, ...] | None: ...
def remember_rope_args(key: Any, args: RopeArgs) -> None: ...
def _c_plans(
    clear: bool = False, max_entries: int | None = None
) -> tuple[int, int, int, int, int] | tuple[tuple[int, int, int, int, int], int]: ...
def _c_plan_kinds() -> dict[str, tuple[int, int]]: ...
def rope_apply(
    q: Any,
    k: Any,
    rope_parameters: Any,
    head_dim: Any,
    offset: Any,
    positions: Any,
    seq_axis: Any,
    layout: Any,
    max_position_embeddings: Any,
    precision: Any,
    inv_freq: Any,
    attention_factor: Any,
    num_threads: Any,
    accurate: bool = ...,
) -> Any | None: ...
def rope_front(general: _F) -> _F: ...

# fastpe.apply_rope's compiled front (see rope_front): its parameters are the general
# path's, _rope_apply.apply_rope, one for one (tests/test_fast_path.py compares them),
# so they are written there only
apply_rope: Callable[..., Any]

def rope_cache_fast(
    head_dim: Any,
    rope_parameters: Any,
    seq_len: Any,
    offset: Any,
    positions: Any,
    layout: Any,
    dtype: Any,
    max_position_embeddings: Any,
    precision: Any,
    inv_freq: Any,
    attention_factor: Any,
    out: Any,
    num_threads: Any,
    correctly_rounded: bool = ...,
) -> Any | None: ...
def fill_rows(
    out: Any,
    enc: Encoder,
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
    bfloat16: bool = ...,
) -> Any: ...

@disjoint_base
class _Rows:
    """What Encoder and RopePlan fill rows by; their one fill_rows."""

    zero_pos: int | None
    def fill_rows(
        self,
        out: Any,
        *,
        nseq: int,
        seq_len: int,
        offset: int = ...,
        offsets: np.ndarray | None = ...,
        positions: np.ndarray | None = ...,
        add: bool = ...,
        scale: float = ...,
        num_threads: int = ...,
        fresh: bool = ...,
        bfloat16: bool = ...,
        errctx: tuple[dict[str, str] | None, tuple[int, ...] | None, str] | None = ...,
        accurate: bool = ...,
    ) -> Any: ...

@disjoint_base
class Encoder(_Rows):
    """One encoding compiled for the kernel: spec, plan, zero position, limits."""

    plan: Plan | None
    max_position: float
    d_model: int
    def __new__(cls, convention: Convention, d_model: int) -> Self: ...
    @property
    def nbytes(self) -> int: ...
    def scratch_nbytes(self, rows: int, num_threads: int, add: bool) -> int: ...

@disjoint_base
class RopePlan(_Rows):
    """The library's plan of a list of frequencies, held while the object lives."""

    def __new__(cls, w: Any, args: RopeArgs | None = ...) -> Self: ...
    @property
    def args(self) -> RopeArgs | None: ...
    @property
    def max_position(self) -> float: ...

PLAN_MAX_BYTES: int
ENCODERS_MAX: int
ENCODERS_MAX_BYTES: int
encoders: dict[tuple[Any, ...], Encoder]

def check_sizes(
    nseq: int, seq_len: int, d_model: int, names: dict[str, str] | None = ...
) -> None: ...

TABLE_ERRORS: tuple[dict[str, str], None, str]
ADD_ERRORS: dict[str, str]

def encoder_key(
    convention: Any, base: float, layout: Any, d_model: int
) -> tuple[Any, ...] | None: ...
def remember(key: tuple[Any, ...] | None, enc: Encoder) -> Encoder: ...
def table(
    seq_len: Any,
    d_model: Any,
    base: Any,
    offset: Any,
    dtype: Any,
    layout: Any,
    out: Any,
    num_threads: Any,
    convention: Any,
    correctly_rounded: Any = ...,
) -> Any | None: ...
def table_at(
    positions: Any,
    d_model: Any,
    base: Any,
    dtype: Any,
    layout: Any,
    out: Any,
    num_threads: Any,
    convention: Any,
    correctly_rounded: Any = ...,
) -> Any | None: ...
def add(
    x: Any,
    offset: Any,
    positions: Any,
    scale: Any,
    base: Any,
    layout: Any,
    num_threads: Any,
    convention: Any,
    correctly_rounded: Any = ...,
) -> Any | None: ...
def usable_cpus() -> int: ...
def _set_chunk_entries(n: int) -> int: ...
def _cgroup_limits(proc_cgroup: str, root: str) -> tuple[int, int]: ...
def _rope_rule(
    head_dim: int,
    fields: dict[str, Any],
    capacity: int | None = ...,
    handle: bool = ...,
    pow32: Callable[[float, np.ndarray], Any] | None = ...,
) -> tuple[int, np.ndarray | None, float, int, tuple[int, int, float] | None]: ...
def check_frequencies(inv_freq: np.ndarray) -> None: ...
def _last_error() -> tuple[int, str | None, int, float, float]: ...
def _power(base: Any, exponent: Any, float32: bool = ...) -> np.ndarray: ...
def _log(x: float) -> float: ...
def _linspace32(start: float, end: float, steps: int) -> np.ndarray: ...
def _timm_frequencies(
    kind: str,
    n: int,
    x: float,
    y: float = ...,
    half: int = ...,
    precision: str = ...,
    pow32: Callable[[float, np.ndarray], Any] | None = ...,
) -> np.ndarray: ...
def _undecided_roundings() -> int: ...
def _f64_undecided() -> int: ...
def _exact_path_runs() -> int: ...
def _force_exact_path(on: bool) -> bool: ...
def _set_serial_below(work: int) -> int: ...
def _c_plan_cache() -> list[tuple[int, float, float, float, int]]: ...
def _set_stream_bytes(nbytes: float | tuple[float, float]) -> tuple[float, float]: ...
def _set_avx512_writers(on: bool) -> bool: ...
def _set_avx512_bf16(on: bool) -> bool: ...
def _set_rope_blocked(on: bool) -> bool: ...
def _set_rope_wide(on: bool) -> bool: ...
def streaming_stores() -> str: ...
def max_position(base: float, d_model: int) -> int: ...
def round_to_half(src: np.ndarray, dst: np.ndarray, bfloat16: bool = ...) -> None: ...
def max_threads() -> int: ...
def default_team() -> int: ...
def _set_idle_teams(on: bool) -> bool: ...
def _idle_estimate(n: int, others: float, own: float, last: int) -> int: ...
def forked_child() -> bool: ...
def openmp_info() -> tuple[bool, int]: ...
