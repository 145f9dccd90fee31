"""fastpe inside PyTorch models: operators, autograd and drop-in modules.

Importing this module needs PyTorch (``pip install 'fastpe[torch]'``); ``import
fastpe`` alone never imports it.

Operators, registered with ``torch.library`` so that ``torch.compile(fullgraph=True)``
traces through them and ``torch.export`` keeps them in the graph:

=============================  ===================================================================
``fastpe::sinusoidal``         a ``(seq_len, d_model)`` table (:func:`sinusoidal`)
``fastpe::sinusoidal_at``      the table of any positions (:func:`sinusoidal_at`)
``fastpe::add_to``             ``x * scale + PE`` as a new tensor, differentiable (:func:`add_to`)
``fastpe::add_to_``            the same in place (:func:`add_to_`)
``fastpe::rope_cache``         RoPE's cos and sin (:func:`rope_cache`)
``fastpe::rope_cache_axes``    M-RoPE's (:class:`RotaryEmbedding` with ``sections``)
``fastpe::apply_rope``         rotated copies of q (and k), differentiable (:func:`apply_rope`)
``fastpe::apply_rope_``        the rotation in place (:func:`apply_rope_`)
=============================  ===================================================================

Modules: :class:`RotaryEmbedding` (a transformers model's rotary module, same call),
:func:`apply_rotary_pos_emb` (transformers' signature; :func:`apply_rotary_pos_emb_`
in place), :func:`patch_model` (swaps the rotary modules of a model, loaded or on the
meta device, and says which it left alone), :class:`SinusoidalPositionalEmbedding` (the
PyTorch tutorial's module) and :class:`Timesteps` (diffusers' timestep embedding).

Tensors live on the CPU, with dtype float32, float64, float16 or bfloat16; a tensor
on another device is refused with an error naming it.
"""

from __future__ import annotations

import importlib
import re
import warnings
from collections.abc import Mapping
from typing import Any, Literal

import numpy as np
import torch

from . import _api, _conventions, _rope_apply, _rope_cache
from ._conventions import Convention
from ._rope_args import _as_seq
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
from ._signatures import keywords, signature_of
from ._validate import as_base, as_choice, as_finite, as_int, as_out_array, check_table_size

# torch.library.custom_op, register_fake, register_autograd and opcheck
MIN_TORCH = (2, 4)


def _torch_version(text: str) -> tuple[int, int]:
    found = re.match(r"(\d+)\.(\d+)", text)
    return (int(found.group(1)), int(found.group(2))) if found else (0, 0)


if _torch_version(torch.__version__) < MIN_TORCH:
    raise ImportError(
        f"fastpe.torch needs torch >= {MIN_TORCH[0]}.{MIN_TORCH[1]} (torch.library.custom_op); "
        f"found torch {torch.__version__}: pip install 'fastpe[torch]'"
    )

__all__ = [
    "PatchReport",
    "RotaryEmbedding",
    "SinusoidalPositionalEmbedding",
    "Timesteps",
    "add_to",
    "add_to_",
    "apply_rope",
    "apply_rope_",
    "apply_rotary_pos_emb",
    "apply_rotary_pos_emb_",
    "patch_model",
    "rope_cache",
    "sinusoidal",
    "sinusoidal_at",
]

_FLOATS = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
# the integer dtypes position ids come in, int64 (the usual) first
_INTEGERS = (
    torch.int64,
    torch.int32,
    torch.int16,
    torch.int8,
    torch.uint8,
    torch.uint16,
    torch.uint32,
    torch.uint64,
)
# A Convention is built (and its knobs checked by the library) while a compiled
# function is traced: the check's result is a constant, not a graph break.
torch.compiler.assume_constant_result(_conventions._check_knobs)
# module-level names for RotaryEmbedding's traced path (see there)
_Tensor = torch.Tensor
_is_compiling = torch.compiler.is_compiling
# torch's context that sets the tracing modes aside (fake tensors, export's proxies)
_disable_current_modes = importlib.import_module(
    "torch.utils._python_dispatch"
)._disable_current_modes
_DTYPES = "float32, float64, float16 or bfloat16"


# ---------------------------------------------------------------- checks and views


def _on_cpu(t: Any, name: str, fake: bool = False) -> None:
    """TypeError for a non-tensor, ValueError for a tensor off the CPU (``fake``:
    shape inference, where meta tensors stand for CPU ones too)."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.device.type != "cpu" and not (fake and t.device.type == "meta"):
        raise ValueError(
            f"{name} is on device {t.device}: fastpe computes on the CPU; move it there "
            f"with {name}.cpu()"
        )


def _float_tensor(t: Any, name: str, fake: bool = False) -> None:
    _on_cpu(t, name, fake)
    if t.dtype not in _FLOATS:
        raise TypeError(f"{name} must have dtype {_DTYPES}, got {t.dtype}")


def _out_dtype(dtype: Any) -> torch.dtype:
    if dtype not in _FLOATS:
        raise TypeError(f"dtype must be torch.{_DTYPES.replace(', ', ', torch.')}, got {dtype}")
    return dtype  # type: ignore[no-any-return]


def _view(t: torch.Tensor) -> np.ndarray:
    """A zero-copy ndarray of a CPU tensor for the kernel (bfloat16: its bits)."""
    if t.dtype == torch.bfloat16:
        return as_out_array(t.detach())
    return t.detach().numpy()


def _ids(t: torch.Tensor | None, name: str) -> np.ndarray | None:
    """Integer position ids as an ndarray (int64 for the kernel's fast paths)."""
    if t is None:
        return None
    _on_cpu(t, name)
    if t.dtype.is_floating_point or t.dtype.is_complex or t.dtype == torch.bool:
        raise TypeError(f"{name} must be an integer tensor, got {t.dtype}")
    return t.detach().to(torch.int64).numpy()


def _eager(*tensors: Any) -> bool:
    """Whether a call may skip the dispatcher: plain tensors outside compile,
    export and functorch, none of them needing a gradient.  The operator's own
    implementation then runs directly (one Python call instead of the
    dispatcher's several), with the same checks and the same result."""
    if torch.compiler.is_compiling():
        return False
    for t in tensors:
        if t is not None and (
            type(t) is not torch.Tensor or t.requires_grad or t.device.type != "cpu"
        ):
            return False
    return True


# ---------------------------------------------------------------- operators

# The tables and the cache are defined on a Library with one implementation for
# every device (so a tensor elsewhere meets fastpe's error, not the dispatcher's):
# one Python call per use, about a third of what a torch.library.custom_op costs
# (its Python autograd layer), which is what a compiled decoding step pays for
# its cos and sin.  The operators with autograd or mutation are custom_ops, whose
# autograd and in-place bookkeeping torch provides.
_LIB = torch.library.Library("fastpe", "FRAGMENT")
_PT2 = (torch.Tag.pt2_compliant_tag,)
_CONV_SCHEMA = (
    "str name, float base, str denominator, float shift, float position_scale, str layout, "
    "str odd, int? padding_idx"
)


def _define(schema: str, impl: Any, fake: Any) -> Any:
    name = schema.split("(", 1)[0]
    _LIB.define(schema, tags=_PT2)
    _LIB.impl(name, impl, "CompositeExplicitAutograd")
    torch.library.register_fake(f"fastpe::{name}", fake, lib=_LIB)
    return getattr(torch.ops.fastpe, name).default


# ---------------------------------------------------------------- tables

# A sinusoidal convention travels through an operator as its knobs (an
# operator's schema has no place for a Python object).


def _knobs(convention: Any, base: Any, layout: Any) -> tuple[Any, ...]:
    conv = _api._convention(convention, base, layout)
    return (
        conv.name,
        conv.base,
        conv.denominator,
        conv.shift,
        conv.position_scale,
        conv.layout,
        conv.odd,
        conv.padding_idx,
    )


def _empty(shape: tuple[int, ...], dtype: Any, copies: int = 1) -> torch.Tensor:
    """A new tensor for the kernel to fill, its size checked first (fastpe's
    MemoryError/ValueError rather than an allocator's RuntimeError)."""
    dtype = _out_dtype(dtype)
    rows = int(np.prod(shape[:-1], dtype=object))
    check_table_size(rows, shape[-1], dtype.itemsize, working_copies=copies)
    return torch.empty(shape, dtype=dtype)


def _sinusoidal_impl(
    seq_len: int, d_model: int, offset: int, dtype: torch.dtype, *knobs: Any
) -> torch.Tensor:
    conv = Convention(*knobs)
    seq_len = as_int(seq_len, "seq_len", minimum=0)
    d_model = as_int(d_model, "d_model", minimum=1)
    _api.sinusoidal(0, d_model, offset=offset, convention=conv)  # the checks, no table
    out = _empty((seq_len, d_model), dtype)
    _api.sinusoidal(seq_len, d_model, offset=offset, convention=conv, out=_view(out))
    return out


def _sinusoidal_fake(seq_len, d_model, offset, dtype, *conv):
    return torch.empty((seq_len, d_model), dtype=_out_dtype(dtype))


_sinusoidal_op = _define(
    "sinusoidal(SymInt seq_len, SymInt d_model, int offset, ScalarType dtype, "
    f"{_CONV_SCHEMA}) -> Tensor",
    _sinusoidal_impl,
    _sinusoidal_fake,
)


def sinusoidal(
    seq_len: int,
    d_model: int,
    *,
    base: float = 10000.0,
    offset: int = 0,
    dtype: torch.dtype = torch.float32,
    layout: str = "interleaved",
    convention: str | Convention = "vaswani",
) -> torch.Tensor:
    """:func:`fastpe.sinusoidal` as a new CPU tensor (operator ``fastpe::sinusoidal``).

    The arguments are :func:`fastpe.sinusoidal`'s; ``dtype`` is a torch dtype.
    A constant: no gradient.

    >>> import torch, fastpe.torch
    >>> fastpe.torch.sinusoidal(4, 8).shape
    torch.Size([4, 8])
    """
    return _sinusoidal_op(seq_len, d_model, offset, dtype, *_knobs(convention, base, layout))  # type: ignore[no-any-return]


def _positions(positions: Any) -> np.ndarray:
    _on_cpu(positions, "positions")
    if positions.dtype.is_complex or positions.dtype == torch.bool:
        raise TypeError(f"positions must be integers or real numbers, got {positions.dtype}")
    if positions.dtype in (torch.float16, torch.bfloat16):
        positions = positions.double()  # (exact: float64 holds every 16-bit float)
    return positions.detach().numpy()  # type: ignore[no-any-return]


def _sinusoidal_at_impl(
    positions: torch.Tensor, d_model: int, dtype: torch.dtype, *knobs: Any
) -> torch.Tensor:
    pos = _positions(positions)
    conv = Convention(*knobs)
    d_model = as_int(d_model, "d_model", minimum=1)
    _api.sinusoidal_at(pos.reshape(-1)[:0], d_model, convention=conv)  # the checks, no table
    out = _empty((*pos.shape, d_model), dtype)
    _api.sinusoidal_at(pos, d_model, convention=conv, out=_view(out))
    return out


def _sinusoidal_at_fake(positions, d_model, dtype, *conv):
    _on_cpu(positions, "positions", fake=True)
    return positions.new_empty((*positions.shape, d_model), dtype=_out_dtype(dtype))


_sinusoidal_at_op = _define(
    f"sinusoidal_at(Tensor positions, SymInt d_model, ScalarType dtype, {_CONV_SCHEMA}) -> Tensor",
    _sinusoidal_at_impl,
    _sinusoidal_at_fake,
)


def sinusoidal_at(
    positions: torch.Tensor,
    d_model: int,
    *,
    base: float = 10000.0,
    dtype: torch.dtype = torch.float32,
    layout: str = "interleaved",
    convention: str | Convention = "vaswani",
) -> torch.Tensor:
    """:func:`fastpe.sinusoidal_at` of a tensor of positions (integer or float, e.g.
    diffusion timesteps), as a new tensor of shape ``(*positions.shape, d_model)``
    (operator ``fastpe::sinusoidal_at``).  A constant: no gradient."""
    knobs = _knobs(convention, base, layout)
    if _eager(positions):
        return _sinusoidal_at_impl(positions, d_model, dtype, *knobs)
    return _sinusoidal_at_op(positions, d_model, dtype, *knobs)  # type: ignore[no-any-return]


# ---------------------------------------------------------------- add_to


def _add_to_inplace_impl(
    x: torch.Tensor,
    offset: int,
    offsets: torch.Tensor | None,
    positions: torch.Tensor | None,
    scale: float,
    *knobs: Any,
) -> None:
    _float_tensor(x, "x")
    off = _ids(offsets, "offset")
    pos = None if positions is None else _positions(positions)
    _api.add_to(
        _view(x),
        offset=offset if off is None else off,
        positions=pos,
        scale=scale,
        convention=Convention(*knobs),
    )


# The schemas are written out (rather than read from the annotations) so that the
# convention's knobs travel as *knobs, named once in _CONV_SCHEMA.  add_to's say
# SymInt where the annotations' did: exported graphs keep the schema they met.
_ADD_SCHEMA = (
    "SymInt offset, Tensor? offsets, Tensor? positions, float scale, "
    + _CONV_SCHEMA.replace("int? padding_idx", "SymInt? padding_idx")
)
_add_to_inplace_op = torch.library.custom_op(
    "fastpe::add_to_", mutates_args=("x",), schema=f"(Tensor(a0!) x, {_ADD_SCHEMA}) -> ()"
)(_add_to_inplace_impl)


@_add_to_inplace_op.register_fake
def _(x, offset, offsets, positions, *rest):
    _float_tensor(x, "x", fake=True)


def _copy_op(name: str, arg: str, schema: str, in_place: Any) -> tuple[Any, Any]:
    """The out-of-place operator ``name`` (and its implementation) of an in-place
    one that writes its first argument, the tensor ``arg``: a contiguous copy of
    that tensor, written.  The caller registers the backward."""

    def impl(x: torch.Tensor, *args: Any) -> torch.Tensor:
        _float_tensor(x, arg)
        out = x.clone(memory_format=torch.contiguous_format)
        in_place(out, *args)
        return out

    def fake(x: Any, *args: Any) -> torch.Tensor:
        _float_tensor(x, arg, fake=True)
        return torch.empty_like(x, memory_format=torch.contiguous_format)

    op = torch.library.custom_op(
        f"fastpe::{name}", mutates_args=(), schema=f"(Tensor {arg}, {schema}) -> Tensor"
    )(impl)
    op.register_fake(fake)
    return impl, op


_add_to_impl, _add_to_op = _copy_op("add_to", "x", _ADD_SCHEMA, _add_to_inplace_impl)


def _add_to_setup(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
    ctx.scale = inputs[4]


def _add_to_backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:
    # d(x * scale + PE)/dx = scale; the table is a constant
    return (grad * ctx.scale,) + (None,) * 12


_add_to_op.register_autograd(_add_to_backward, setup_context=_add_to_setup)


def _offset_args(offset: Any) -> tuple[int, torch.Tensor | None]:
    """(one offset for all, or None and a tensor of them)."""
    if isinstance(offset, torch.Tensor):
        return 0, offset
    if isinstance(offset, (list, tuple, np.ndarray)):
        return 0, torch.as_tensor(np.asarray(offset))
    return as_int(offset, "offset"), None


def _tensor_or_none(values: Any) -> torch.Tensor | None:
    if values is None or isinstance(values, torch.Tensor):
        return values
    return torch.as_tensor(np.asarray(values))


def _add_args(
    x: Any, offset: Any, positions: Any, scale: Any, base: Any, layout: Any, convention: Any
) -> tuple[Any, ...]:
    off, offsets = _offset_args(offset)
    scale = as_finite(scale, "scale")
    knobs = _knobs(convention, base, layout)
    return (x, off, offsets, _tensor_or_none(positions), scale, *knobs)


def add_to(
    x: torch.Tensor,
    *,
    offset: Any = 0,
    positions: Any = None,
    scale: float = 1.0,
    base: float = 10000.0,
    layout: str = "interleaved",
    convention: str | Convention = "vaswani",
) -> torch.Tensor:
    """``x * scale + PE`` as a new tensor (operator ``fastpe::add_to``); ``x`` is left
    as it is.  Differentiable in ``x`` (the gradient is ``scale`` times the
    incoming one).  The arguments are :func:`fastpe.add_to`'s; ``offset`` and
    ``positions`` may be tensors."""
    args = _add_args(x, offset, positions, scale, base, layout, convention)
    if _eager(x, args[2], args[3]):
        return _add_to_impl(*args)
    return _add_to_op(*args)  # type: ignore[no-any-return]


@signature_of(add_to)
def add_to_(x: torch.Tensor, **given: Any) -> torch.Tensor:
    """:func:`fastpe.add_to` on a tensor, in place (operator ``fastpe::add_to_``);
    returns ``x``.  Not differentiable: use :func:`add_to` for a tensor that needs
    a gradient."""
    args = _add_args(x, **keywords("add_to_", given))
    _no_grad_in_place(x, "x", "add_to")
    if _eager(x, args[2], args[3]):
        _add_to_inplace_impl(*args)
    else:
        _add_to_inplace_op(*args)
    return x


def _no_grad_in_place(t: Any, name: str, functional: str) -> None:
    if isinstance(t, torch.Tensor) and t.requires_grad and torch.is_grad_enabled():
        raise ValueError(
            f"{name} requires a gradient and the in-place operator has none: use "
            f"fastpe.torch.{functional} (out of place, differentiable)"
        )


# ---------------------------------------------------------------- RoPE


@torch.compiler.assume_constant_result
def _frequencies(
    head_dim: Any,
    rope_parameters: Mapping[str, Any] | None,
    inv_freq: Any,
    attention_factor: float | None,
    max_position_embeddings: int | None,
    precision: Any,
) -> tuple[list[float], float]:
    """(frequencies, attention factor) of the arguments, resolved once in Python:
    the operators take plain numbers, so compile and export see constants."""
    if inv_freq is not None:
        if rope_parameters is not None:
            raise ValueError("give rope_parameters or inv_freq, not both")
        if isinstance(inv_freq, torch.Tensor):
            _on_cpu(inv_freq, "inv_freq")
            inv_freq = inv_freq.detach().double().numpy()
        w = _as_frequencies(inv_freq)
        attention = 1.0
    else:
        if _rope_type(rope_parameters or {}) in ("dynamic", "longrope"):
            raise ValueError(
                "rope_type 'dynamic' and 'longrope' depend on the sequence length: compute "
                "their frequencies with fastpe.rope_frequencies(..., seq_len=...) and pass "
                "inv_freq and attention_factor"
            )
        w, attention = rope_frequencies(
            head_dim,
            rope_parameters,
            max_position_embeddings=max_position_embeddings,
            precision=precision,
        )
    if attention_factor is not None:
        attention = as_base(attention_factor, "attention_factor")
    return [float(v) for v in w], attention


def _cache_shape(positions: Any, seq_len: int, nf: int) -> tuple[int, ...]:
    lead = (seq_len,) if positions is None else tuple(positions.shape)
    return (*lead, 2 * nf)


_NUMPY = {torch.float32: np.float32, torch.float64: np.float64, torch.float16: np.float16}
_W_ARRAYS: dict[tuple[float, ...], np.ndarray] = {}


def _frequency_array(inv_freq: list[float]) -> np.ndarray:
    """The frequencies as a float64 ndarray, one per list of values (a decoding
    loop passes the same ones at every step)."""
    key = tuple(inv_freq)
    w = _W_ARRAYS.get(key)
    if w is None:
        if len(_W_ARRAYS) >= 64:
            _W_ARRAYS.clear()
        w = _W_ARRAYS[key] = np.asarray(key, dtype=np.float64)
    return w


def _cache_impl(
    positions: torch.Tensor | None,
    seq_len: int,
    offset: int,
    inv_freq: list[float],
    attention_factor: float,
    layout: str,
    dtype: torch.dtype,
) -> tuple[torch.Tensor, torch.Tensor]:
    w = _frequency_array(inv_freq)
    attention = None if attention_factor == 1.0 else attention_factor
    if (
        positions is not None
        and type(positions) is torch.Tensor
        and positions.dtype == torch.int64
        and positions.device.type == "cpu"
        and dtype in _NUMPY
    ):
        # a decoding step's few positions: what the general path below does, with
        # the conversions it would skip anyway (fastpe checks the values)
        cos, sin = _rope_cache.rope_cache(
            2 * w.size,
            positions=positions.detach().numpy().reshape(-1),
            inv_freq=w,
            attention_factor=attention,
            layout=layout,  # type: ignore[arg-type]
            dtype=_NUMPY[dtype],
        )
        shape = (*positions.shape, 2 * w.size)
        return torch.from_numpy(cos.reshape(shape)), torch.from_numpy(sin.reshape(shape))
    pos = _ids(positions, "positions")
    where: dict[str, Any] = {"seq_len": seq_len, "offset": offset}
    if pos is not None:
        where = {"positions": pos.reshape(-1)}  # (1-D: the kernel's small-call path)
    shape = _cache_shape(positions, seq_len, w.size)
    kw: dict[str, Any] = {"inv_freq": w, "attention_factor": attention, "layout": layout}
    if dtype in _NUMPY:  # fastpe allocates (after its checks), torch shares the memory
        cos, sin = _rope_cache.rope_cache(2 * w.size, **where, **kw, dtype=_NUMPY[dtype])
        return torch.from_numpy(cos.reshape(shape)), torch.from_numpy(sin.reshape(shape))
    tc, ts = _empty(shape, dtype, copies=3), _empty(shape, dtype)
    rows = (-1, 2 * w.size)
    _rope_cache.rope_cache(
        2 * w.size, **where, **kw, out=(_view(tc).reshape(rows), _view(ts).reshape(rows))
    )
    return tc, ts


def _cache_fake(positions, seq_len, offset, inv_freq, attention_factor, layout, dtype):
    if positions is not None:
        _on_cpu(positions, "positions", fake=True)
    shape = _cache_shape(positions, seq_len, len(inv_freq))
    dtype = _out_dtype(dtype)
    device = "cpu" if positions is None else positions.device
    return (
        torch.empty(shape, dtype=dtype, device=device),
        torch.empty(shape, dtype=dtype, device=device),
    )


_rope_cache_op = _define(
    "rope_cache(Tensor? positions, SymInt seq_len, int offset, float[] inv_freq, "
    "float attention_factor, str layout, ScalarType dtype) -> (Tensor, Tensor)",
    _cache_impl,
    _cache_fake,
)


def rope_cache(
    head_dim: int | None = None,
    rope_parameters: Mapping[str, Any] | None = None,
    *,
    seq_len: int | None = None,
    offset: int = 0,
    positions: Any = None,
    layout: Literal["half", "interleaved"] = "half",
    dtype: torch.dtype = torch.float32,
    max_position_embeddings: int | None = None,
    precision: Literal["float32", "float64"] = "float32",
    inv_freq: Any = None,
    attention_factor: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`fastpe.rope_cache` as new tensors (operator ``fastpe::rope_cache``):
    ``(cos, sin)`` of shape ``(seq_len, rotary_dim)`` or ``(*positions.shape,
    rotary_dim)``.  Constants: no gradient.  The frequencies are resolved here, in
    Python (``dynamic`` and ``longrope`` need ``inv_freq`` from
    :func:`fastpe.rope_frequencies`); the operator gets them as numbers."""
    if head_dim is None and inv_freq is None:
        raise ValueError("give head_dim (with rope_parameters) or inv_freq")
    w, attention = _frequencies(
        head_dim, rope_parameters, inv_freq, attention_factor, max_position_embeddings, precision
    )
    layout = as_choice(layout, "layout", ROPE_LAYOUTS)
    if (seq_len is None) == (positions is None):
        raise ValueError("give either seq_len (with offset) or positions")
    if positions is None:
        seq_len, offset = _as_seq(seq_len, offset)
    elif not (isinstance(offset, int) and offset == 0):
        raise ValueError("offset applies to seq_len; add it to positions instead")
    positions = _tensor_or_none(positions)
    args = (positions, seq_len or 0, offset, w, attention, layout, _out_dtype(dtype))
    if positions is not None and _eager(positions):
        return _cache_impl(*args)
    return _rope_cache_op(*args)  # type: ignore[no-any-return]


def _rotate_impl(
    q: torch.Tensor,
    k: torch.Tensor | None,
    positions: torch.Tensor | None,
    offset: int,
    offsets: torch.Tensor | None,
    seq_axis: int,
    layout: str,
    inv_freq: list[float],
    attention_factor: float,
) -> None:
    _float_tensor(q, "q")
    if k is not None:
        _float_tensor(k, "k")
    off = _ids(offsets, "offset")
    _rope_apply.apply_rope(
        _view(q),
        None if k is None else _view(k),
        head_dim=q.shape[-1],
        positions=_ids(positions, "positions"),
        offset=offset if off is None else off,
        seq_axis=seq_axis,
        layout=layout,  # type: ignore[arg-type]
        inv_freq=np.asarray(inv_freq, dtype=np.float64),
        attention_factor=None if attention_factor == 1.0 else attention_factor,
    )


# the rotation's arguments after q (and k), for both operators
_ROPE_SCHEMA = (
    "Tensor? positions, SymInt offset, Tensor? offsets, SymInt seq_axis, str layout, "
    "float[] inv_freq, float attention_factor"
)
_apply_rope_inplace_op = torch.library.custom_op(
    "fastpe::apply_rope_",
    mutates_args=("q", "k"),
    schema=f"(Tensor(a0!) q, Tensor(a1!)? k, {_ROPE_SCHEMA}) -> ()",
)(_rotate_impl)


@_apply_rope_inplace_op.register_fake
def _(q, k, *rest):
    _float_tensor(q, "q", fake=True)
    if k is not None:
        _float_tensor(k, "k", fake=True)


_apply_rope_impl, _apply_rope_op = _copy_op(
    "apply_rope", "q", _ROPE_SCHEMA, lambda out, *args: _rotate_impl(out, None, *args)
)


def _apply_rope_setup(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
    q, positions, offset, offsets, seq_axis, layout, inv_freq, attention = inputs
    ctx.save_for_backward(positions, offsets)
    ctx.args = (q.shape[seq_axis % q.ndim], offset, seq_axis, layout, inv_freq, attention)


def _apply_rope_backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:
    # A rotation's transpose is the rotation by the opposite angle: the gradient
    # is rotated at the negated positions (same kernel, same attention factor).
    positions, offsets = ctx.saved_tensors
    seq, offset, seq_axis, layout, inv_freq, attention = ctx.args
    if positions is None:
        steps = torch.arange(seq, dtype=torch.int64, device=grad.device)
        positions = steps + (offset if offsets is None else offsets.to(torch.int64)[:, None])
    back = _apply_rope_op(grad, -positions, 0, None, seq_axis, layout, inv_freq, attention)
    return (back,) + (None,) * 7


_apply_rope_op.register_autograd(_apply_rope_backward, setup_context=_apply_rope_setup)


def _rope_args(
    q: Any,
    head_dim: Any,
    rope_parameters: Any,
    inv_freq: Any,
    attention_factor: Any,
    max_position_embeddings: Any,
    precision: Any,
    offset: Any,
    positions: Any,
    seq_axis: Any,
    layout: Any,
) -> tuple[Any, ...]:
    if head_dim is None and isinstance(q, torch.Tensor):
        head_dim = q.shape[-1]
    w, attention = _frequencies(
        head_dim, rope_parameters, inv_freq, attention_factor, max_position_embeddings, precision
    )
    layout = as_choice(layout, "layout", ROPE_LAYOUTS)
    off, offsets = _offset_args(offset)
    if positions is not None and (offsets is not None or off != 0):
        raise ValueError("offset applies without positions; add it to positions instead")
    seq_axis = as_int(seq_axis, "seq_axis")
    return _tensor_or_none(positions), off, offsets, seq_axis, layout, w, attention


def apply_rope(
    q: torch.Tensor,
    k: torch.Tensor | None = None,
    *,
    rope_parameters: Mapping[str, Any] | None = None,
    head_dim: int | None = None,
    offset: Any = 0,
    positions: Any = None,
    seq_axis: int = -2,
    layout: Literal["half", "interleaved"] = "half",
    max_position_embeddings: int | None = None,
    precision: Literal["float32", "float64"] = "float32",
    inv_freq: Any = None,
    attention_factor: float | None = None,
) -> Any:
    """Rotated copies of ``q`` (and ``k``): :func:`fastpe.apply_rope` out of place
    (operator ``fastpe::apply_rope``), differentiable in ``q`` and ``k``.  The
    backward pass rotates the gradient by the opposite angles with the same kernel.

    Returns the rotated ``q``, or ``(q, k)`` when ``k`` is given.  ``head_dim``
    (which sets the frequencies of ``rope_parameters``) defaults to
    ``q.shape[-1]``; ``dynamic`` and ``longrope`` need ``inv_freq`` (see
    :func:`rope_cache`).
    """
    args = _rope_args(
        q,
        head_dim,
        rope_parameters,
        inv_freq,
        attention_factor,
        max_position_embeddings,
        precision,
        offset,
        positions,
        seq_axis,
        layout,
    )
    out = []
    for x in (q,) if k is None else (q, k):
        if _eager(x, args[0], args[2]):
            out.append(_apply_rope_impl(x, *args))
        else:
            out.append(_apply_rope_op(x, *args))
    return out[0] if k is None else (out[0], out[1])


@signature_of(apply_rope)
def apply_rope_(q: torch.Tensor, k: torch.Tensor | None = None, **given: Any) -> Any:
    """:func:`fastpe.apply_rope` on tensors, in place (operator ``fastpe::apply_rope_``);
    returns ``q``, or ``(q, k)``.  Not differentiable: use :func:`apply_rope` for
    tensors that need a gradient."""
    args = _rope_args(q, **keywords("apply_rope_", given))
    _no_grad_in_place(q, "q", "apply_rope")
    _no_grad_in_place(k, "k", "apply_rope")
    if _eager(q, k, args[0], args[2]):
        _rotate_impl(q, k, *args)
    else:
        _apply_rope_inplace_op(q, k, *args)
    return q if k is None else (q, k)


# ---------------------------------------------------------------- multi-axis cos and sin


def _cache_axes_impl(
    positions: torch.Tensor,
    sections: list[int],
    section_layout: str,
    inv_freq: list[float],
    attention_factor: float,
    layout: str,
    dtype: torch.dtype,
) -> tuple[torch.Tensor, torch.Tensor]:
    pos = _ids(positions, "positions")
    assert pos is not None
    w = _frequency_array(inv_freq)
    shape = (*positions.shape[:-1], 2 * w.size)
    kw: dict[str, Any] = {
        "positions": pos,
        "sections": sections,
        "section_layout": section_layout,
        "inv_freq": w,
        "attention_factor": None if attention_factor == 1.0 else attention_factor,
        "layout": layout,
    }
    if dtype in _NUMPY:
        cos, sin = _rope_cache.rope_cache(2 * w.size, **kw, dtype=_NUMPY[dtype])
        return torch.from_numpy(cos.reshape(shape)), torch.from_numpy(sin.reshape(shape))
    tc, ts = _empty(shape, dtype, copies=3), _empty(shape, dtype)
    _rope_cache.rope_cache(2 * w.size, **kw, out=(_view(tc), _view(ts)))
    return tc, ts


def _cache_axes_fake(positions, sections, section_layout, inv_freq, attention, layout, dtype):
    _on_cpu(positions, "positions", fake=True)
    shape = (*positions.shape[:-1], 2 * len(inv_freq))
    dtype = _out_dtype(dtype)
    return (
        positions.new_empty(shape, dtype=dtype),
        positions.new_empty(shape, dtype=dtype),
    )


_rope_cache_axes_op = _define(
    "rope_cache_axes(Tensor positions, int[] sections, str section_layout, float[] inv_freq, "
    "float attention_factor, str layout, ScalarType dtype) -> (Tensor, Tensor)",
    _cache_axes_impl,
    _cache_axes_fake,
)


# ---------------------------------------------------------------- modules

# The rules whose frequencies follow the sequence length (transformers'
# dynamic_rope_update): the module updates its inv_freq buffer before rotating.
_LENGTH_RULES = ("dynamic", "longrope")


def _tensor_version(t: torch.Tensor) -> int:
    try:
        return int(t._version)
    except RuntimeError:  # an inference tensor keeps no version: read it every time
        return -1


class RotaryEmbedding(torch.nn.Module):
    """A transformers model's rotary module with fastpe's cos and sin.

    ``forward(x, position_ids) -> (cos, sin)``, each of shape ``(*position_ids.shape,
    rotary_dim)`` in ``x.dtype``: the call of ``LlamaRotaryEmbedding`` and its kin, so
    ``model.model.rotary_emb = RotaryEmbedding(model.config)`` swaps it (or see
    :func:`patch_model`).  The angles ``k * inv_freq`` are exact and each entry is
    rounded once (transformers rounds the angle to float32 first).

    The module rotates by what its ``inv_freq`` buffer holds, read again whenever
    the buffer is replaced or written (a model's ``init_weights``, ``to_empty``,
    ``load_state_dict`` of a state dict that has it, ``model.to(dtype)``).  As in
    transformers, ``inv_freq`` and ``original_inv_freq`` are non-persistent
    buffers (no entry in the state dict), so the module can be built on the meta
    device and materialised with the model; ``reset_parameters()`` (or a
    transformers model's ``init_weights``) fills them from the rule.  The
    attributes transformers' code reads carry its meanings: ``config``,
    ``rope_type``, ``attention_scaling``, ``max_seq_len_cached``,
    ``original_max_seq_len``, ``original_inv_freq`` and
    ``compute_default_rope_parameters``.

    Parameters
    ----------
    config : transformers config, optional
        Read for ``rope_parameters`` (or ``rope_scaling`` and ``rope_theta``),
        ``head_dim`` (or ``hidden_size // num_attention_heads``) and
        ``max_position_embeddings``.  Keys of ``rope_parameters`` that its
        ``rope_type`` does not read (transformers ignores them too, e.g.
        ``mrope_section``) are left out and listed in ``ignored_keys``.
    head_dim, rope_parameters, max_position_embeddings, precision : keyword-only
        Instead of ``config``, or to override it; as in :func:`fastpe.rope_cache`.
    inv_freq : keyword-only
        The frequencies themselves (a model's own ``inv_freq`` buffer), instead of
        a rule; ``attention_factor`` then defaults to 1.
    attention_factor : float, keyword-only
        Overrides the family's.
    layout : {"half", "interleaved"}, keyword-only
    sections : sequence of int, keyword-only
        Multi-axis positions (M-RoPE, transformers' ``mrope_section``): the
        number of frequencies that follow each axis.  ``position_ids`` is then
        ``(len(sections), batch, seq)`` (or ``(batch, seq)`` or ``(1, batch,
        seq)``, the same position on every axis, as Qwen2-VL's module broadcasts
        it) and the cos and sin
        have shape ``(batch, seq, rotary_dim)``.
    section_layout : {"contiguous", "interleaved"}, keyword-only
        Which frequencies follow which axis, as :func:`fastpe.rope_cache`'s:
        Qwen2-VL and Qwen2.5-VL are contiguous, Qwen3-VL interleaved.
    device : torch.device or str, keyword-only
        Where the buffers are made (default: the default device), as the
        ``device`` argument of transformers' rotary modules, which its tests
        pass (``rope_class(config=config, device=torch_device)``).
    table_size : int, keyword-only
        Positions ``0 .. table_size - 1`` that a traced graph (``torch.compile``,
        ``torch.export``) reads from a table of fastpe's cos and sin (bitwise the
        operator's values) instead of calling the operator; default
        ``max_position_embeddings`` (none without it), 0 for no table.  The table
        of a dtype is computed when the module is first traced for it
        (``table_size * rotary_dim * 2`` entries) from the buffer as it is then,
        and becomes a constant of the compiled graph or the exported program,
        which refuse any position outside it (a RuntimeError or IndexError,
        "index out of bounds").  Eager calls always use the operator, for any
        position.  The rules that follow the sequence length, and multi-axis
        modules, call the operator when traced.

    ``rope_type`` ``dynamic`` and ``longrope`` follow the sequence length as
    transformers' ``dynamic_rope_update`` does (the largest position id plus one):
    ``dynamic`` recomputes its frequencies beyond ``max_seq_len_cached`` and goes
    back to ``original_inv_freq`` for a sequence shorter than
    ``max_position_embeddings``; ``longrope`` switches between its short and long
    factors at ``original_max_position_embeddings``.  Traced, ``longrope``
    computes both and picks one (no graph break); ``dynamic``, like
    transformers', breaks the graph there.
    """

    inv_freq: torch.Tensor
    original_inv_freq: torch.Tensor

    def __init__(
        self,
        config: Any = None,
        *,
        head_dim: int | None = None,
        rope_parameters: Mapping[str, Any] | None = None,
        max_position_embeddings: int | None = None,
        precision: Literal["float32", "float64"] = "float32",
        inv_freq: Any = None,
        attention_factor: float | None = None,
        layout: Literal["half", "interleaved"] = "half",
        table_size: int | None = None,
        sections: Any = None,
        section_layout: Literal["contiguous", "interleaved"] = "contiguous",
        device: Any = None,
    ) -> None:
        super().__init__()
        ignored: tuple[str, ...] = ()
        if config is not None:
            if head_dim is None:
                head_dim = getattr(config, "head_dim", None) or (
                    config.hidden_size // config.num_attention_heads
                )
            if rope_parameters is None and inv_freq is None:
                rope_parameters, ignored = _config_rope_parameters(config)
            if max_position_embeddings is None:
                max_position_embeddings = getattr(config, "max_position_embeddings", None)
        if inv_freq is not None and rope_parameters is not None:
            raise ValueError("give rope_parameters or inv_freq, not both")
        if head_dim is None and inv_freq is None:
            raise ValueError("give config, head_dim (with rope_parameters) or inv_freq")
        self.config = config
        self.ignored_keys = ignored
        self.rope_type = "default"
        if rope_parameters is not None:
            self.rope_type = as_choice(_rope_type(rope_parameters), "rope_type", ROPE_TYPES)
        if max_position_embeddings is not None:
            max_position_embeddings = as_int(
                max_position_embeddings, "max_position_embeddings", minimum=1
            )
        self.max_seq_len_cached = max_position_embeddings
        self.original_max_seq_len = max_position_embeddings
        self._given = None
        if inv_freq is not None:
            if isinstance(inv_freq, torch.Tensor):
                inv_freq = inv_freq.detach().to("cpu", torch.float64).numpy()
            self._given = [float(v) for v in _as_frequencies(inv_freq)]
        self._rule = (head_dim, None if rope_parameters is None else dict(rope_parameters),
                      max_position_embeddings, precision, attention_factor)  # fmt: skip
        w, self.attention_scaling = self._rule_frequencies()
        # where longrope's long factors take over (a constant of a traced graph)
        self._long_after = self._original_length() if self.rope_type == "longrope" else 0
        self.layout = as_choice(layout, "layout", ROPE_LAYOUTS)
        self.mrope_section: list[int] | None = None
        self.section_layout = as_choice(section_layout, "section_layout", SECTION_LAYOUTS)
        if sections is not None:
            self.mrope_section = [as_int(s, "sections", minimum=0) for s in sections]
            if sum(self.mrope_section) != len(w):
                raise ValueError(
                    f"sections {self.mrope_section} must sum to rotary_dim / 2 = {len(w)}"
                )
        self._special = self.mrope_section is not None or self.rope_type in _LENGTH_RULES
        if table_size is None:
            table_size = max_position_embeddings or 0
        self.table_size = as_int(table_size, "table_size", minimum=0, maximum=2**40)
        self._tables: dict[torch.dtype, torch.Tensor] = {}
        # A float32 buffer where every frequency is a float32 (the rules' float32
        # steps, a model's buffer), float64 otherwise: the buffer holds the values
        # exactly.  Made on ``device``, else the default device, which is meta
        # under torch.device("meta") or init_empty_weights.
        arr = np.asarray(w, dtype=np.float64)
        exact32 = np.array_equal(arr.astype(np.float32).astype(np.float64), arr)
        self._dtype = torch.float32 if exact32 else torch.float64
        buffer = torch.tensor(w, dtype=self._dtype, device=device)
        self.register_buffer("inv_freq", buffer, persistent=False)
        self.register_buffer("original_inv_freq", buffer.clone(), persistent=False)
        self.long_inv_freq: torch.Tensor | None = None
        # the replaced module's own default rule (set by patch_model): the buffer
        # values its init_weights gives, bitwise, where fastpe's float32 power
        # may differ from torch's by an ulp
        self._family_rule: Any = None
        self._w = w  # the frequencies last read from the buffer, as the operator takes them
        # (a buffer on the meta device holds no values yet: read when materialised)
        self._seen: tuple[Any, int] = (None, -1)
        if buffer.device.type != "meta":
            self._seen = (buffer, _tensor_version(buffer))

    # ---- the rule

    def _rule_frequencies(self, seq_len: int | None = None) -> tuple[list[float], float]:
        """(frequencies, attention factor) of the module's rule at ``seq_len``."""
        head_dim, params, mpe, precision, attention = self._rule
        if self._given is not None:
            w, factor = self._given, 1.0
        else:
            assert head_dim is not None  # (checked when the module was made)
            inv, factor = rope_frequencies(
                head_dim, params, max_position_embeddings=mpe, seq_len=seq_len,
                precision=precision,
            )  # fmt: skip
            w = [float(v) for v in inv]
        if attention is not None:
            factor = as_base(attention, "attention_factor")
        return w, factor

    def compute_default_rope_parameters(
        self, config: Any = None, device: Any = None, seq_len: int | None = None, **kwargs: Any
    ) -> tuple[torch.Tensor, float]:
        """``(inv_freq, attention_scaling)`` of the module's rule, as a float32 (or
        float64) tensor on ``device``: what transformers' ``_init_weights`` and
        :meth:`reset_parameters` fill the buffers with (for a module that
        :func:`patch_model` put in place of a ``default`` one, that module's own
        rule: the values the unpatched model holds, bitwise).  ``config`` is
        accepted for transformers' call and not read (the module's rule came from
        it)."""
        if self._family_rule is not None and seq_len is None and self.config is not None:
            with torch.device("cpu"):
                inv, factor = self._family_rule(self.config)
            return (inv if device is None else inv.to(device)), factor
        w, factor = self._rule_frequencies(seq_len)
        return torch.tensor(w, dtype=self._dtype, device=device), factor

    def reset_parameters(self) -> None:
        """Fill ``inv_freq`` and ``original_inv_freq`` from the rule (after
        ``to_empty``, say) and forget a sequence length seen before."""
        w, self.attention_scaling = self.compute_default_rope_parameters()
        with torch.no_grad():
            for name in ("inv_freq", "original_inv_freq"):
                buf = self._buffers[name]
                assert buf is not None
                buf.copy_(w)
        self.max_seq_len_cached = self.original_max_seq_len
        self.long_inv_freq = None

    def _extra_repr_rule(self) -> str:
        return f"rope_type={self.rope_type!r}, rotary_dim={2 * len(self._w)}"

    def extra_repr(self) -> str:
        extra = self._extra_repr_rule()
        if self.mrope_section is not None:
            extra += f", sections={self.mrope_section}, section_layout={self.section_layout!r}"
        return extra

    # ---- the buffer

    def _buffer_frequencies(self) -> list[float]:
        """The frequencies the ``inv_freq`` buffer holds, read again when it was
        replaced or written since the last call.  A buffer that cannot be read
        (fake tensors while tracing) gives the values read last."""
        t = self._buffers["inv_freq"]
        assert t is not None
        seen, version = self._seen
        if t is seen and version >= 0 and _tensor_version(t) == version:
            return self._w
        try:
            with _disable_current_modes():
                values = t.detach().to("cpu", torch.float64).numpy()
        except (RuntimeError, NotImplementedError, TypeError):
            if t.device.type == "meta" and not _is_compiling():
                raise ValueError(
                    "the rotary module's inv_freq is on the meta device: materialise the "
                    "model first (to_empty then init_weights, or from_pretrained)"
                ) from None
            return self._w
        w = [float(v) for v in _as_frequencies(values)]
        if len(w) != len(self._w):
            raise ValueError(
                f"inv_freq has {len(w)} frequencies; the module rotates {len(self._w)} pairs"
            )
        if w != self._w:
            self._w = w
            self._tables.clear()
        self._seen = (t, _tensor_version(t))
        return w

    def _follow_length(self, position_ids: torch.Tensor) -> None:
        """transformers' dynamic_rope_update: the buffer follows the sequence length."""
        seq_len = int(position_ids.max()) + 1
        current = self._buffers["inv_freq"]
        assert current is not None
        if self.rope_type == "dynamic":
            cached, original = self.max_seq_len_cached, self.original_max_seq_len
            assert cached is not None and original is not None
            if seq_len > cached:  # growth: the rule at this length
                inv, self.attention_scaling = self.compute_default_rope_parameters(
                    device=current.device, seq_len=seq_len
                )
                self.register_buffer("inv_freq", inv.to(current.dtype), persistent=False)
                self.max_seq_len_cached = seq_len
            if seq_len < original and cached > original:  # back to the original frequencies
                back = self.original_inv_freq.to(current.device)
                self.original_inv_freq = back
                self.register_buffer("inv_freq", back, persistent=False)
                self.max_seq_len_cached = original
            return
        if seq_len > self._long_after:
            if self.long_inv_freq is None:
                self.long_inv_freq = self.compute_default_rope_parameters(
                    device=current.device, seq_len=self._long_after + 1
                )[0]
            target = self.long_inv_freq
        else:
            target = self.original_inv_freq
        with torch.no_grad():
            current.copy_(target)

    def _original_length(self) -> int:
        params, mpe = self._rule[1], self._rule[2]
        value = (params or {}).get("original_max_position_embeddings", mpe)
        return as_int(value, "original_max_position_embeddings", minimum=1)

    def _longrope_frequencies(self) -> tuple[list[float], list[float]]:
        """The short and the long frequencies (the first from ``original_inv_freq``)."""
        t = self._buffers["original_inv_freq"]
        assert t is not None
        try:
            with _disable_current_modes():
                short = [float(v) for v in t.detach().to("cpu", torch.float64).numpy()]
        except (RuntimeError, NotImplementedError, TypeError):
            short = self._rule_frequencies()[0]
        long_ = self._rule_frequencies(self._long_after + 1)[0]
        return short, long_

    # ---- forward

    def forward(
        self, x: torch.Tensor, position_ids: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        dtype = x.dtype if x.dtype in _FLOATS else torch.float32
        # (one attribute for the rarer paths: traced, each attribute read is a guard
        # the compiled code checks at every call)
        if self._special:
            return self._special_forward(position_ids, dtype)
        if not _is_compiling():
            args = (position_ids, 0, 0, self._buffer_frequencies(), self.attention_scaling,
                    self.layout, dtype)  # fmt: skip
            if _eager(position_ids):
                return _cache_impl(*args)
            return _rope_cache_op(*args)  # type: ignore[no-any-return]
        # Traced (torch.compile or torch.export).  Nothing here reads a global of
        # torch or of another module: dynamo turns each such read into a guard it
        # checks at every call of the compiled code, which a decoding step pays.
        size = self.table_size
        if (
            size
            and isinstance(position_ids, _Tensor)
            and position_ids.device.type == "cpu"
            and position_ids.dtype in _INTEGERS
        ):
            # From a compiled graph the operator is a trip from the dispatcher into
            # Python that costs more than a decoding step's fused rotation; a
            # lookup in a constant table fuses into it instead (one table holds
            # cos and sin: one input of the graph, not two).  Indexing
            # refuses a position at table_size or beyond ("index out of bounds");
            # a negative one would wrap around, so it is sent to table_size too.
            both = _table(self, dtype)
            # int64, as the operator reads them (a uint8 index would be a mask);
            # an exported program would keep even a no-op conversion
            ids = position_ids
            if ids.dtype != _INTEGERS[0]:
                ids = ids.long()
            index = ids.where(ids >= 0, size)
            # (two gathers, not one split in two: a compiled graph's outputs that
            # are views of one intermediate cost its runtime wrapper more)
            return both[0, index], both[1, index]
        args = (position_ids, 0, 0, _module_frequencies(self), self.attention_scaling,
                self.layout, dtype)  # fmt: skip
        return _rope_cache_op(*args)  # type: ignore[no-any-return]

    def _special_forward(
        self, position_ids: torch.Tensor, dtype: torch.dtype
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """M-RoPE, and the rules that follow the sequence length."""
        if self.mrope_section is not None:
            return self._axes(position_ids, dtype)
        if not _is_compiling():
            self._follow_length(position_ids)
            args = (position_ids, 0, 0, self._buffer_frequencies(), self.attention_scaling,
                    self.layout, dtype)  # fmt: skip
            if _eager(position_ids):
                return _cache_impl(*args)
            return _rope_cache_op(*args)  # type: ignore[no-any-return]
        if self.rope_type == "dynamic":
            return _dynamic_step(self, position_ids, dtype)
        short, long_ = _longrope_lists(self)
        # both sets and a choice by the length, as transformers' torch.where
        longer = position_ids.max() + 1 > self._long_after
        rest = (self.attention_scaling, self.layout, dtype)
        a = _rope_cache_op(position_ids, 0, 0, short, *rest)
        b = _rope_cache_op(position_ids, 0, 0, long_, *rest)
        return a[0].where(~longer, b[0]), a[1].where(~longer, b[1])

    def _axes(
        self, position_ids: torch.Tensor, dtype: torch.dtype
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """M-RoPE: ``position_ids`` of shape ``(n_axes, batch, seq)`` (or ``(batch,
        seq)`` or ``(1, batch, seq)``, broadcast to every axis) to caches of shape
        ``(batch, seq, rotary_dim)``."""
        sections = self.mrope_section
        assert sections is not None
        if not isinstance(position_ids, torch.Tensor):
            raise TypeError(
                f"position_ids must be a torch.Tensor, got {type(position_ids).__name__}"
            )
        # transformers' modules take the same shapes, through expand(3, -1, -1); its
        # generation hands (1, batch, seq) text positions when continuing from a cache
        if position_ids.ndim == 2 or (position_ids.ndim == 3 and position_ids.shape[0] == 1):
            position_ids = position_ids.expand(len(sections), -1, -1)
        if position_ids.ndim != 3 or position_ids.shape[0] != len(sections):
            raise ValueError(
                f"position_ids must have shape ({len(sections)}, batch, seq), (batch, seq) or "
                f"(1, batch, seq), got {tuple(position_ids.shape)}"
            )
        coords = position_ids.movedim(0, -1)
        w = _module_frequencies(self) if _is_compiling() else self._buffer_frequencies()
        args = (coords, sections, self.section_layout, w, self.attention_scaling, self.layout,
                dtype)  # fmt: skip
        if not _is_compiling() and _eager(coords):
            return _cache_axes_impl(*args)
        return _rope_cache_axes_op(*args)  # type: ignore[no-any-return]

    def table(self, dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
        """The ``(cos, sin)`` of positions ``0 .. table_size - 1`` in ``dtype`` that a
        traced graph reads, computed on first use (by the operator's code, so
        bitwise its values, for the frequencies the buffer holds) and kept: two
        contiguous halves of one tensor of shape ``(2, table_size, rotary_dim)``."""
        both = self._both(_out_dtype(dtype))
        return both[0], both[1]

    def _both(self, dtype: torch.dtype) -> torch.Tensor:
        w = self._buffer_frequencies()
        both = self._tables.get(dtype)
        if both is None:
            nf = len(w)
            attention = None if self.attention_scaling == 1.0 else self.attention_scaling
            # (made outside any tracing mode: export's non-strict tracing would
            # otherwise record, or fake, the fill instead of holding its values)
            with _disable_current_modes():
                copies = 3 if dtype == torch.bfloat16 else 1
                both = _empty((2 * self.table_size, 2 * nf), dtype, copies=copies)
                both = both.view(2, self.table_size, 2 * nf)
                _rope_cache.rope_cache(
                    2 * nf,
                    seq_len=self.table_size,
                    inv_freq=_frequency_array(w),
                    attention_factor=attention,
                    layout=self.layout,  # type: ignore[arg-type]
                    out=(_view(both[0]), _view(both[1])),
                )
            if not torch.compiler.is_exporting():  # (export refuses a new tensor attribute)
                self._tables[dtype] = both
        return both


@torch.compiler.assume_constant_result
def _table(module: RotaryEmbedding, dtype: torch.dtype) -> torch.Tensor:
    """The module's ``[cos, sin]`` table, computed once outside the traced graph
    (whose constant it becomes)."""
    return module._both(dtype)


@torch.compiler.assume_constant_result
def _module_frequencies(module: RotaryEmbedding) -> list[float]:
    """The frequencies in the module's buffer, read once while tracing."""
    return module._buffer_frequencies()


@torch.compiler.assume_constant_result
def _longrope_lists(module: RotaryEmbedding) -> tuple[list[float], list[float]]:
    return module._longrope_frequencies()


@torch.compiler.disable
def _dynamic_step(
    module: RotaryEmbedding, position_ids: torch.Tensor, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """``dynamic``'s step outside the graph: its frequencies are a function of
    the values of the positions, which a graph cannot hold as constants."""
    module._follow_length(position_ids)
    args = (position_ids, 0, 0, module._buffer_frequencies(), module.attention_scaling,
            module.layout, dtype)  # fmt: skip
    return _rope_cache_op(*args)  # type: ignore[no-any-return]


def _config_rope_parameters(config: Any) -> tuple[dict[str, Any], tuple[str, ...]]:
    """A config's RoPE rule: ``rope_parameters`` (transformers >= 5), else the
    older ``rope_scaling`` with ``rope_theta`` beside it; and the keys left out,
    those its rope_type does not read (transformers' rules ignore them too)."""
    params = getattr(config, "rope_parameters", None)
    if params is None:
        params = dict(getattr(config, "rope_scaling", None) or {})
        if getattr(config, "rope_theta", None) is not None:
            params.setdefault("rope_theta", config.rope_theta)
    params = dict(params)
    prf = getattr(config, "partial_rotary_factor", None)
    if prf is not None:
        params.setdefault("partial_rotary_factor", prf)
    nested = sorted(k for k, v in params.items() if isinstance(v, Mapping))
    if nested:
        raise ValueError(
            f"the config's rope_parameters hold one rule per layer type ({nested}): give "
            "one of them as rope_parameters"
        )
    rope_type = as_choice(_rope_type(params), "rope_type", ROPE_TYPES)
    read = set(_COMMON) | set(_KEYS[rope_type])
    ignored = tuple(sorted(k for k in params if k not in read))
    return {k: v for k, v in params.items() if k in read}, ignored


def apply_rotary_pos_emb(
    q: torch.Tensor,
    k: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    position_ids: torch.Tensor | None = None,
    unsqueeze_dim: int = 1,
) -> tuple[torch.Tensor, torch.Tensor]:
    """transformers' ``apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1)``
    (``position_ids`` is accepted and unused, as in older releases): ``q * cos +
    rotate_half(q) * sin`` with one fused multiply-add, for the ``half`` layout
    and any ``cos`` and ``sin`` (e.g. those of :class:`RotaryEmbedding`).

    Partial rotary (GPT-NeoX, Phi-3, any ``partial_rotary_factor``): ``cos`` and
    ``sin`` narrower than the head rotate its first ``cos.shape[-1]``
    dimensions and the rest pass through, as those families do."""
    cos = cos.unsqueeze(unsqueeze_dim)
    sin = sin.unsqueeze(unsqueeze_dim)
    return _rotate_part(q, cos, sin, "q"), _rotate_part(k, cos, sin, "k")


# (positional parameters: named again for binding, their types and defaults shown
# from apply_rotary_pos_emb; a test checks the defaults agree)
@signature_of(apply_rotary_pos_emb)
def apply_rotary_pos_emb_(
    q: Any, k: Any, cos: Any, sin: Any, position_ids: Any = None, unsqueeze_dim: Any = 1
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`apply_rotary_pos_emb` in place: the first ``cos.shape[-1]``
    dimensions of ``q`` and ``k`` are overwritten by their rotation (bitwise
    the out-of-place values), the rest are left as they are; returns ``(q, k)``.
    Not differentiable: use :func:`apply_rotary_pos_emb` for tensors that need
    a gradient."""
    _no_grad_in_place(q, "q", "apply_rotary_pos_emb")
    _no_grad_in_place(k, "k", "apply_rotary_pos_emb")
    cos = cos.unsqueeze(unsqueeze_dim)
    sin = sin.unsqueeze(unsqueeze_dim)
    for x, name in ((q, "q"), (k, "k")):
        rd = _rotary_width(x, cos, name)
        part = x[..., :rd]
        part.copy_(_rotate_half_mul(part, cos, sin))
    return q, k


def _rotary_width(x: torch.Tensor, cos: torch.Tensor, name: str) -> int:
    rd = cos.shape[-1]
    if rd > x.shape[-1] or rd % 2:
        raise ValueError(
            f"cos and sin have {rd} columns: the rotated part of {name} (last dimension "
            f"{x.shape[-1]}) must be an even number of columns at most its width"
        )
    return rd  # type: ignore[no-any-return]


def _rotate_part(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, name: str) -> torch.Tensor:
    rd = _rotary_width(x, cos, name)
    if rd == x.shape[-1]:
        return _rotate_half_mul(x, cos, sin)
    return torch.cat((_rotate_half_mul(x[..., :rd], cos, sin), x[..., rd:]), dim=-1)


def _rotate_half_mul(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return torch.addcmul(x * cos, rotated, sin)


class PatchReport(list):  # type: ignore[type-arg]
    """What :func:`patch_model` did: the list of the module names it replaced,
    and ``skipped``, a dict from each rotary module it left as it was to the
    reason."""

    skipped: dict[str, str]

    def __init__(self) -> None:
        super().__init__()
        self.skipped = {}


def patch_model(model: torch.nn.Module, *, warn: bool = True) -> PatchReport:
    """Swap every transformers rotary module of ``model`` for a :class:`RotaryEmbedding`
    built from its config, in place; returns a :class:`PatchReport`, the list of the
    names replaced, whose ``skipped`` says which rotary modules were left alone
    and why (also told in one warning, unless ``warn=False``).

    A rotary module is one whose class name ends in ``RotaryEmbedding``.  It is
    replaced when it has a ``config`` whose rule fastpe computes (every
    ``rope_type`` of :func:`fastpe.rope_frequencies`; M-RoPE's ``mrope_section``
    through the multi-axis path) and that rule gives the frequencies and
    attention factor the module's own rule gives.  Works on models on the meta
    device (``from_pretrained``'s, ``init_empty_weights``'): the new module is
    made there too and materialises with the model.  A materialised module's
    state is carried over: ``inv_freq`` and ``original_inv_freq`` (so the new
    module rotates by the same frequencies, in the same dtype), and what
    ``dynamic`` and ``longrope`` have seen of the sequence length."""
    report = PatchReport()
    made: dict[int, torch.nn.Module] = {}
    for name, module in list(model.named_modules()):
        if isinstance(module, RotaryEmbedding) or not type(module).__name__.endswith(
            "RotaryEmbedding"
        ):
            continue
        try:
            made[id(module)] = _replacement(module)
        except (ValueError, TypeError, AttributeError, KeyError, RuntimeError) as e:
            report.skipped[name or type(module).__name__] = str(e)
            continue
        report.append(name)
    if made:
        # every place a module is found (one rotary module may serve several parents)
        for _, module in list(model.named_modules(remove_duplicate=False)):
            for child_name, child in list(module.named_children()):
                if id(child) in made:
                    setattr(module, child_name, made[id(child)])
    if report.skipped and warn:
        told = "; ".join(f"{name}: {why}" for name, why in report.skipped.items())
        warnings.warn(
            f"fastpe.torch.patch_model left {len(report.skipped)} rotary module(s) as they "
            f"were ({told})",
            stacklevel=2,
        )
    return report


def _replacement(module: torch.nn.Module) -> RotaryEmbedding:
    """A :class:`RotaryEmbedding` in place of transformers' ``module``, or a
    ValueError (TypeError, ...) saying why there is none."""
    config = getattr(module, "config", None)
    if config is None:
        raise ValueError("no config to build the module from (no rule fastpe knows)")
    theirs = getattr(module, "inv_freq", None)
    if not isinstance(theirs, torch.Tensor):
        raise ValueError("no inv_freq buffer")
    if theirs.device.type not in ("cpu", "meta"):
        raise ValueError(f"on device {theirs.device}: fastpe computes on the CPU")
    rope_type = getattr(module, "rope_type", None)
    if rope_type is not None and not isinstance(rope_type, str):
        raise ValueError(f"one rope_type per layer type ({rope_type!r})")
    sections = getattr(module, "mrope_section", None)
    layout: Literal["contiguous", "interleaved"] = "contiguous"
    if sections is not None:
        layout = _section_layout(module, list(sections))
    with torch.device(theirs.device):
        ours = RotaryEmbedding(config, sections=sections, section_layout=layout)
    if rope_type is not None and rope_type != ours.rope_type:
        raise ValueError(f"rope_type {rope_type!r}; its config's is {ours.rope_type!r}")
    if tuple(theirs.shape) != tuple(ours.inv_freq.shape):
        raise ValueError(
            f"{theirs.numel()} frequencies; the config's rule gives {ours.inv_freq.numel()}"
        )
    _same_rule(module, config, ours)
    if ours.rope_type == "default":
        ours._family_rule = getattr(type(module), "compute_default_rope_parameters", None)
    if theirs.device.type != "meta":
        # the module's state: what it rotates by, and what it has seen so far
        with torch.no_grad():
            ours.inv_freq = theirs.detach().clone()
            original = getattr(module, "original_inv_freq", None)
            if isinstance(original, torch.Tensor) and original.shape == theirs.shape:
                ours.original_inv_freq = original.detach().to(theirs.device).clone()
        for attr in ("max_seq_len_cached", "attention_scaling", "long_inv_freq"):
            if getattr(module, attr, None) is not None:
                setattr(ours, attr, getattr(module, attr))
    ours.train(module.training)
    return ours


def _same_rule(module: torch.nn.Module, config: Any, ours: RotaryEmbedding) -> None:
    """ValueError unless the module's own rule (as transformers' init_weights
    reads it) gives the frequencies and attention factor of fastpe's."""
    rule = None
    if ours.rope_type == "default":
        rule = getattr(type(module), "compute_default_rope_parameters", None)
    else:
        try:
            utils = importlib.import_module("transformers.modeling_rope_utils")
            rule = utils.ROPE_INIT_FUNCTIONS.get(ours.rope_type)
        except ImportError:
            rule = None
    theirs = getattr(module, "inv_freq", None)
    if rule is not None:
        with torch.device("cpu"):
            reference, factor = rule(config)
    elif isinstance(theirs, torch.Tensor) and theirs.device.type != "meta":
        reference, factor = theirs, getattr(module, "attention_scaling", 1.0)
    else:
        raise ValueError("no rule to compare fastpe's with")
    w = np.asarray(ours._rule_frequencies()[0], dtype=np.float64)
    if reference.device.type == "meta":
        raise ValueError("its rule gave frequencies on the meta device")
    reference = reference.detach().to("cpu", torch.float64).numpy()
    if reference.shape != w.shape or not np.allclose(w, reference, rtol=1e-6, atol=0):
        raise ValueError("its frequencies differ from those of its config's rule in fastpe")
    if not np.isclose(ours.attention_scaling, float(factor), rtol=1e-6):
        raise ValueError(
            f"attention factor {float(factor)}; fastpe's rule gives {ours.attention_scaling}"
        )


def _section_layout(
    module: torch.nn.Module, sections: list[int]
) -> Literal["contiguous", "interleaved"]:
    """Which of fastpe's section layouts an M-RoPE module uses, read from its
    ``recomposition_frequencies`` applied to frequencies that name their axis."""
    recompose = getattr(module, "recomposition_frequencies", None)
    n, nf = len(sections), sum(sections)
    if recompose is None or n == 0:
        raise ValueError("an M-RoPE module without recomposition_frequencies")
    probe = torch.arange(n, dtype=torch.float32, device="cpu").view(n, 1, 1, 1)
    with torch.device("cpu"):
        axes = recompose(probe.expand(n, 1, 1, nf).clone())[0, 0, :nf].tolist()
    contiguous = [a for a, s in enumerate(sections) for _ in range(s)]
    interleaved = [r if (r := i % n) >= 1 and i < n * sections[r] else 0 for i in range(nf)]
    if axes == contiguous:
        return "contiguous"
    if axes == interleaved:
        return "interleaved"
    raise ValueError(f"an M-RoPE layout fastpe does not have (frequency axes {axes})")


class SinusoidalPositionalEmbedding(torch.nn.Module):
    """The PyTorch tutorial's ``PositionalEncoding(d_model, dropout=0.1, max_len=5000)``
    with fastpe's table: ``forward(x)`` for ``x`` of shape ``(seq_len, batch,
    d_model)`` returns ``dropout(x + pe[:seq_len])``.  ``pe`` is a buffer of shape
    ``(max_len, 1, d_model)``, as the tutorial's, so its state dicts load both ways;
    its entries are fastpe's float32 table (within half an ulp plus 1e-16 of the exact
    value; the tutorial's float32 angles drift at large positions)."""

    pe: torch.Tensor

    def __init__(self, d_model: int, dropout: float = 0.1, max_len: int = 5000) -> None:
        super().__init__()
        self.dropout = torch.nn.Dropout(p=dropout)
        table = sinusoidal(max_len, d_model)
        self.register_buffer("pe", table.unsqueeze(1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.pe[: x.size(0)]
        return self.dropout(x)  # type: ignore[no-any-return]


class Timesteps(torch.nn.Module):
    """diffusers' ``Timesteps(num_channels, flip_sin_to_cos, downscale_freq_shift,
    scale=1)``: ``forward(timesteps)`` for a 1-D tensor of (float or integer)
    timesteps returns their ``(N, num_channels)`` float32 embedding, as
    ``get_timestep_embedding`` does, with exact angles."""

    def __init__(
        self,
        num_channels: int,
        flip_sin_to_cos: bool,
        downscale_freq_shift: float,
        scale: float = 1,
        max_period: float = 10000,
    ) -> None:
        super().__init__()
        self.num_channels = as_int(num_channels, "num_channels", minimum=1)
        self.flip_sin_to_cos = flip_sin_to_cos
        self.downscale_freq_shift = downscale_freq_shift
        self.scale = scale
        conv = Convention.diffusers(
            downscale_freq_shift=downscale_freq_shift,
            scale=scale,
            flip_sin_to_cos=flip_sin_to_cos,
            max_period=max_period,
        )
        self._knobs = _knobs(conv, 10000.0, "interleaved")

    def forward(self, timesteps: torch.Tensor) -> torch.Tensor:
        if timesteps.ndim != 1:
            raise ValueError(f"timesteps must be a 1-D tensor, got shape {tuple(timesteps.shape)}")
        if _eager(timesteps):
            return _sinusoidal_at_impl(timesteps, self.num_channels, torch.float32, *self._knobs)
        return _sinusoidal_at_op(timesteps, self.num_channels, torch.float32, *self._knobs)  # type: ignore[no-any-return]
