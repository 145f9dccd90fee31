"""One public signature for a function and its in-place twin.

``add_to_`` takes exactly ``add_to``'s arguments; rather than write the keyword list
twice, the twin declares ``**keywords`` and takes its model's signature from
:func:`signature_of`, which help(), IDEs and type checkers read.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

_P = ParamSpec("_P")
_R = TypeVar("_R")

# twin's name -> its model's keyword-only defaults (a plain dict, so torch.compile
# reads it as a constant while tracing the twin)
_DEFAULTS: dict[str, dict[str, Any]] = {}


def signature_of(model: Callable[_P, Any]) -> Callable[[Callable[..., _R]], Callable[_P, _R]]:
    """Give the decorated twin ``model``'s parameters, keeping its own return type.

    The twin itself is returned (no wrapper on the call path) with ``__signature__``
    and ``__wrapped__`` set as functools.wraps would; its ``**keywords`` are completed
    by :func:`keywords`.
    """

    def give(twin: Callable[..., _R]) -> Callable[_P, _R]:
        returns = inspect.signature(twin).return_annotation
        shown = inspect.signature(model).replace(return_annotation=returns)
        twin.__signature__ = shown  # type: ignore[attr-defined]
        twin.__wrapped__ = model  # type: ignore[attr-defined]
        _DEFAULTS[twin.__name__] = dict(model.__kwdefaults__ or {})
        return twin

    return give


def keywords(twin: str, given: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments ``given`` to ``twin``, completed with its model's defaults;
    an unknown one is refused with the message Python gives for an explicit signature."""
    defaults = _DEFAULTS[twin]
    for name in given:
        if name not in defaults:
            raise TypeError(f"{twin}() got an unexpected keyword argument '{name}'")
    return {**defaults, **given}
