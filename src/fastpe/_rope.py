"""The RoPE names the torch binding and the C API's handle constructors reach.

RoPE lives in modules by job: ``_rope_rules`` (the frequency rules and their
encoders), ``_rope_args`` (positions, q and k views, the caches' layout),
``_rope_axes`` (multi-axis positions), ``_rope_heads`` (per-head frequencies and
xPos), ``_rope_cache`` (:func:`fastpe.rope_cache`) and ``_rope_apply``
(:func:`fastpe.apply_rope`).  This module only gathers the names other layers use
under one roof; nothing below imports it.
"""

from ._rope_apply import apply_rope
from ._rope_cache import rope_cache
from ._rope_rules import (
    _COMMON,
    _KEYS,
    ROPE_LAYOUTS,
    ROPE_TYPES,
    SECTION_LAYOUTS,
    _as_frequencies,
    _rope_type,
    rope_frequencies,
)
from ._validate import as_base

__all__ = [
    "ROPE_LAYOUTS",
    "ROPE_TYPES",
    "SECTION_LAYOUTS",
    "_COMMON",
    "_KEYS",
    "_as_frequencies",
    "_rope_type",
    "apply_rope",
    "as_base",
    "rope_cache",
    "rope_frequencies",
]
