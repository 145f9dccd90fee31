"""fastpe: fast, accurate sinusoidal positional encodings on the CPU.

>>> import fastpe
>>> P = fastpe.sinusoidal(2048, 512)          # (2048, 512) float32 table
>>> P.shape, P.dtype
((2048, 512), dtype('float32'))

Tables: :func:`sinusoidal` (a range of positions), :func:`sinusoidal_at` (any
positions, fractional too), :func:`sinusoidal_2d` (image grids); in place:
:func:`add_to` (``x * scale + PE``); :func:`fairseq_positions` (positions from
token ids); other frameworks' tables: :class:`Convention`, :data:`CONVENTIONS`;
rotary embeddings: :func:`rope_frequencies`, :func:`rope_cache`, :func:`apply_rope`;
the pure-NumPy twin: :func:`reference`; the build: :func:`build_info`,
:func:`get_include` (the C header, for extensions), ``__version__``.
"""

from ._version import __version__

try:
    from ._api import (
        add_to,
        build_info,
        fairseq_positions,
        sinusoidal,
        sinusoidal_2d,
        sinusoidal_at,
    )
except ImportError as exc:  # pragma: no cover - only on a broken install
    if "kernel" in str(exc) or "fastpe" in str(exc):
        raise ImportError(
            f"fastpe's compiled kernel could not be imported ({exc}). If you are in the "
            "source tree, you are importing the uncompiled sources: install the package "
            "(`pip install .`) and run from another directory. If this is an installed "
            "wheel, the OpenMP runtime it was built against may be missing."
        ) from exc
    raise
from . import rope_presets  # (NumPy only, unlike the optional fastpe.torch and fastpe.dask)
from ._conventions import CONVENTIONS, Convention
from ._include import get_include
from ._reference import reference
from ._rope_apply import apply_rope
from ._rope_cache import rope_cache
from ._rope_rules import ROPE_TYPES, rope_frequencies

__all__ = [
    "CONVENTIONS",
    "ROPE_TYPES",
    "Convention",
    "__version__",
    "add_to",
    "apply_rope",
    "build_info",
    "fairseq_positions",
    "get_include",
    "reference",
    "rope_cache",
    "rope_frequencies",
    "rope_presets",
    "sinusoidal",
    "sinusoidal_2d",
    "sinusoidal_at",
]
