"""RoPE of the vision and multimodal families, from each framework's own arguments.

Each function takes what its framework takes (a transformers config, a diffusers
call's arguments) and returns a :class:`RopePreset`: the frequencies, how the
rotary pairs are shared between the position axes, and the pair layout, ready to
splat into :func:`fastpe.rope_cache` and :func:`fastpe.apply_rope`::

    p = rope_presets.qwen2_vl(config)
    pos, _ = rope_presets.qwen_vl_position_ids(mm_token_type_ids, image_grid_thw=thw)
    cos, sin = fastpe.rope_cache(p.rotary_dim, positions=pos, **p.kwargs())

By default the frequencies are the framework's own, rounded as it rounds them
(float32, in torch's operation order, as :func:`fastpe.rope_frequencies`);
``precision="float64"`` gives the real formula's value, correctly rounded. The
angles fastpe builds from them are exact either way.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any, Literal, NamedTuple

import numpy as np

from . import kernel as _kernel
from ._rope_rules import rope_frequencies
from ._validate import as_base, as_bool, as_choice, as_int

__all__ = [
    "RopePreset",
    "allegro",
    "allegro_positions",
    "cogvideox_3d",
    "diffusers_1d",
    "diffusers_2d",
    "flux",
    "gemma3",
    "grid_positions",
    "hunyuan_video",
    "llama4",
    "lumina2",
    "lumina_next_2d",
    "pixtral",
    "qwen2_vl",
    "qwen3_vl",
    "qwen_vl_position_ids",
    "timm_dinov3",
    "timm_positions",
    "timm_rotary",
]

Precision = Literal["float32", "float64"]
_PRECISIONS: tuple[Precision, ...] = ("float32", "float64")
_AXES = ("t", "h", "w")


class RopePreset(NamedTuple):
    """One family's rotary embedding, as fastpe's RoPE functions take it.

    Its fields (a named tuple's, so they are documented once, here):

    - ``inv_freq`` (ndarray of float64, shape ``(rotary_dim // 2,)``, read-only):
      radians per position of each rotated pair; where the axes have their own
      frequencies, the concatenation of the per-axis lists in ``sections`` order.
    - ``sections`` (tuple of int, or None): rotary pairs per position axis
      (transformers' ``mrope_section``); ``None`` for one axis (1-D positions).
    - ``section_layout`` (``"contiguous"`` or ``"interleaved"``): the first
      ``sections[0]`` pairs follow axis 0, the next ``sections[1]`` axis 1, ...; or
      Qwen3-VL's interleaved assignment.
    - ``layout`` (``"half"`` or ``"interleaved"``): the pairs rotated together,
      ``(j, j + rotary_dim/2)`` (``rotate_half``) or ``(2j, 2j + 1)``.
    - ``attention_factor`` (float): what cos and sin are multiplied by.
    - ``axes`` (tuple of str): the grid coordinate each column of the positions
      holds, ``"t"`` (time, or the sequence index), ``"h"`` (row) or ``"w"``
      (column), in ``sections`` order; :meth:`grid` builds positions in this order.
    """

    inv_freq: np.ndarray
    sections: tuple[int, ...] | None
    section_layout: Literal["contiguous", "interleaved"]
    layout: Literal["half", "interleaved"]
    attention_factor: float
    axes: tuple[str, ...]

    @property
    def rotary_dim(self) -> int:
        """The dimensions that rotate: twice the number of frequencies."""
        return 2 * len(self.inv_freq)

    def kwargs(self) -> dict[str, Any]:
        """Keyword arguments for :func:`fastpe.rope_cache` and :func:`fastpe.apply_rope`
        (``sections`` and ``section_layout`` only where there is more than one axis,
        ``attention_factor`` only where it is not 1)."""
        kw: dict[str, Any] = {"inv_freq": self.inv_freq, "layout": self.layout}
        if self.attention_factor != 1.0:
            # (1 is what inv_freq implies; left out, the calls keep their fast paths)
            kw["attention_factor"] = self.attention_factor
        if self.sections is not None:
            kw["sections"] = self.sections
            kw["section_layout"] = self.section_layout
        return kw

    def grid(self, shape: Sequence[int], *, leading: int = 0) -> np.ndarray:
        """Positions of a patch grid for this preset, columns in :attr:`axes` order.

        ``shape`` gives the grid's sizes in ``t, h, w`` order, for the axes the
        preset has (``(h, w)`` for a 2-D preset); see :func:`grid_positions`.
        """
        names = sorted(self.axes, key=_AXES.index)
        pos = grid_positions(shape, leading=leading, name="shape")
        if pos.shape[1] != len(names):
            raise ValueError(
                f"shape must have {len(names)} sizes ({', '.join(names)}), got {tuple(shape)!r}"
            )
        order = [names.index(a) for a in self.axes]
        out = np.ascontiguousarray(pos[:, order])
        return out[:, 0].copy() if self.sections is None else out


def _preset(
    inv: np.ndarray,
    sections: Sequence[int] | None,
    section_layout: Literal["contiguous", "interleaved"],
    layout: Literal["half", "interleaved"],
    attention: float,
    axes: tuple[str, ...],
) -> RopePreset:
    inv = np.array(inv, dtype=np.float64)
    inv.setflags(write=False)
    return RopePreset(
        inv,
        None if sections is None else tuple(int(s) for s in sections),
        section_layout,
        layout,
        float(attention),
        axes,
    )


def _precision(precision: Any) -> Precision:
    return as_choice(precision, "precision", _PRECISIONS)


def _default_rule(dim: int, theta: float, precision: Precision) -> np.ndarray:
    """``1 / theta ** (arange(0, dim, 2) / dim)``, as torch evaluates it."""
    return rope_frequencies(dim, {"rope_theta": theta}, precision=precision)[0]


# ---------------------------------------------------------------- transformers


def _get(config: Any, key: str, default: Any = None) -> Any:
    if isinstance(config, Mapping):
        return config.get(key, default)
    return getattr(config, key, default)


def _head_dim(config: Any, minimum: int = 2) -> int:
    """config.head_dim, else hidden_size // num_attention_heads (as transformers)."""
    head_dim = _get(config, "head_dim")
    if head_dim is None:
        hidden = as_int(_get(config, "hidden_size"), "config.hidden_size", minimum=1)
        heads = as_int(
            _get(config, "num_attention_heads"), "config.num_attention_heads", minimum=1
        )
        head_dim = hidden // heads
    return as_int(head_dim, "config.head_dim", minimum=minimum)


def _text_config(config: Any) -> Any:
    """The language model's part of a multimodal config (object or dict)."""
    if not isinstance(config, Mapping) and not hasattr(config, "__dict__"):
        raise TypeError(
            f"config must be a transformers config or a dict, got {type(config).__name__}"
        )
    text = _get(config, "text_config")
    return config if text is None else text


def _mrope(
    config: Any, default_sections: tuple[int, ...], precision: Any, seq_len: int | None
) -> tuple[np.ndarray, float, tuple[int, ...]]:
    precision = _precision(precision)
    cfg = _text_config(config)
    params = _get(cfg, "rope_parameters") or _get(cfg, "rope_scaling") or {}
    if not isinstance(params, Mapping):
        raise TypeError(f"config's rope_parameters must be a mapping, got {type(params).__name__}")
    params = dict(params)
    sections = params.pop("mrope_section", list(default_sections))
    params.pop("mrope_interleaved", None)  # Qwen3-VL marks its layout; the function says it
    if _get(cfg, "rope_theta") is not None:  # configs before rope_parameters held it
        params.setdefault("rope_theta", _get(cfg, "rope_theta"))
    if params.get("rope_type", params.get("type")) == "mrope":
        params.pop("type", None)
        params["rope_type"] = "default"
    head_dim = _head_dim(cfg)
    mpe = _get(cfg, "max_position_embeddings")
    inv, attention = rope_frequencies(
        head_dim, params, max_position_embeddings=mpe, seq_len=seq_len, precision=precision
    )
    sec = _sections(sections, len(inv), "rope_parameters['mrope_section']")
    return inv, attention, sec


def _sections(sections: Any, n: int, name: str) -> tuple[int, ...]:
    if not isinstance(sections, Sequence) or isinstance(sections, (str, bytes)):
        raise TypeError(f"{name} must be a list of integers, got {type(sections).__name__}")
    sec = tuple(as_int(s, f"{name}[{i}]", minimum=0) for i, s in enumerate(sections))
    if sum(sec) != n:
        raise ValueError(f"{name} = {list(sec)} must sum to rotary_dim / 2 = {n}, got {sum(sec)}")
    return sec


def qwen2_vl(
    config: Any, *, precision: Precision = "float32", seq_len: int | None = None
) -> RopePreset:
    """Qwen2-VL's and Qwen2.5-VL's multimodal RoPE (M-RoPE), from their config.

    transformers' ``Qwen2VLRotaryEmbedding`` / ``Qwen2_5_VLRotaryEmbedding``: the
    text model's frequencies (``rope_parameters``, any rule of
    :func:`fastpe.rope_frequencies`; ``mrope_section`` taken out) with the pairs
    split between the (time, height, width) position axes in contiguous sections
    (``apply_multimodal_rotary_pos_emb``), ``rotate_half`` layout.

    Parameters
    ----------
    config : transformers config or dict
        ``Qwen2VLConfig`` / ``Qwen2_5_VLConfig`` (its ``text_config``), a text
        config, or the same as a dict (a checkpoint's ``config.json``).
    precision : {"float32", "float64"}
        The model's float32 frequencies (default) or the exact formula.
    seq_len : int, optional
        For the rules whose frequencies follow the sequence length (``dynamic``,
        ``longrope``).
    """
    inv, attention, sec = _mrope(config, (16, 24, 24), precision, seq_len)
    return _preset(inv, sec, "contiguous", "half", attention, _AXES)


def qwen3_vl(
    config: Any, *, precision: Precision = "float32", seq_len: int | None = None
) -> RopePreset:
    """Qwen3-VL's interleaved M-RoPE, from its config.

    transformers' ``Qwen3VLTextRotaryEmbedding``: as :func:`qwen2_vl`, with the
    pairs assigned to the axes in turn (``apply_interleaved_mrope``: pair ``i``
    follows height where ``i % 3 == 1`` and ``i < 3 * mrope_section[1]``, width where
    ``i % 3 == 2`` and ``i < 3 * mrope_section[2]``, time otherwise). Default
    ``mrope_section`` [24, 20, 20].
    """
    inv, attention, sec = _mrope(config, (24, 20, 20), precision, seq_len)
    return _preset(inv, sec, "interleaved", "half", attention, _AXES)


def pixtral(config: Any, *, precision: Precision = "float32") -> RopePreset:
    """Pixtral's 2-D rotary embedding (transformers ``PixtralVisionRotaryEmbedding``).

    The default rule's ``head_dim / 2`` frequencies, the even-indexed ones for the
    patch row and the odd-indexed ones for the column (``rotate_half`` layout);
    positions are ``(row, column)`` pairs, as the model's ``position_ids``.
    """
    precision = _precision(precision)
    params = _get(config, "rope_parameters") or {}
    theta = _get(params, "rope_theta", _get(config, "rope_theta", 10000.0))
    theta = as_base(theta, "config.rope_parameters['rope_theta']")
    head_dim = _head_dim(config, minimum=4)
    if head_dim % 4:
        raise ValueError(f"config.head_dim must be a multiple of 4, got {head_dim}")
    w = _default_rule(head_dim, theta, precision)
    return _preset(
        np.concatenate([w[0::2], w[1::2]]),
        (head_dim // 4, head_dim // 4),
        "contiguous",
        "half",
        1.0,
        ("h", "w"),
    )


def _one_axis(
    cfg: Any,
    params: Any,
    layout: Literal["half", "interleaved"],
    precision: Any,
    seq_len: int | None,
    name: str,
) -> RopePreset:
    """A language model's one-axis RoPE from its text config and one rule."""
    precision = _precision(precision)
    if not isinstance(params, Mapping):
        raise TypeError(f"{name} must be a mapping, got {type(params).__name__}")
    head_dim = _head_dim(cfg)
    try:
        inv, attention = rope_frequencies(
            head_dim,
            dict(params),
            max_position_embeddings=_get(cfg, "max_position_embeddings"),
            seq_len=seq_len,
            precision=precision,
        )
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"{name}: {exc}") from None
    return _preset(inv, None, "contiguous", layout, attention, ("t",))


def gemma3(
    config: Any, *, precision: Precision = "float32", seq_len: int | None = None
) -> dict[str, RopePreset]:
    """Gemma 3's RoPE of each layer type (transformers ``Gemma3RotaryEmbedding``).

    ``config.rope_parameters`` holds one rule per layer type: the sliding-window
    (local) layers' (``rope_theta`` = ``rope_local_base_freq``, 10 000) and the
    global layers' (1 000 000, with ``linear`` factor 8 in the 4B and larger
    models). Returns ``{layer_type: RopePreset}`` (``rotate_half`` layout); layer
    ``i`` uses ``presets[config.layer_types[i]]``.
    """
    cfg = _text_config(config)
    params = _get(cfg, "rope_parameters")
    types = _get(cfg, "layer_types")
    if not isinstance(params, Mapping) or not isinstance(types, Sequence):
        raise TypeError(
            "config must have rope_parameters as a mapping of layer type to rule and "
            "layer_types (a Gemma3TextConfig)"
        )
    out = {}
    for t in sorted(set(types)):
        rule = params.get(t)
        if rule is None:
            raise ValueError(f"config.rope_parameters has no rule for layer type {t!r}")
        out[t] = _one_axis(cfg, rule, "half", precision, seq_len, f"rope_parameters[{t!r}]")
    return out


def llama4(
    config: Any, *, precision: Precision = "float32", seq_len: int | None = None
) -> list[RopePreset | None]:
    """Llama 4's RoPE of each layer (transformers ``Llama4TextRotaryEmbedding`` and
    ``apply_rotary_emb``): one rule (``rope_parameters``, ``llama3`` scaling in the
    released models) rotating complex pairs ``(2j, 2j + 1)`` (``interleaved``
    layout); ``None`` for the layers without RoPE (``no_rope_layers[i] == 0``).
    """
    cfg = _text_config(config)
    params = _get(cfg, "rope_parameters") or {}
    if _get(cfg, "rope_theta") is not None and isinstance(params, Mapping):
        params = {"rope_theta": _get(cfg, "rope_theta"), **params}
    preset = _one_axis(cfg, params, "interleaved", precision, seq_len, "rope_parameters")
    n = as_int(_get(cfg, "num_hidden_layers"), "config.num_hidden_layers", minimum=0)
    flags = _get(cfg, "no_rope_layers") or [1] * n
    if not isinstance(flags, Sequence) or len(flags) != n:
        raise ValueError(
            f"config.no_rope_layers must have one entry per layer ({n}), got {flags!r}"
        )
    return [preset if f else None for f in flags]


# ---------------------------------------------------------------- diffusers


def _freqs_dtype(value: Any) -> Precision:
    """diffusers' ``freqs_dtype``: torch.float32/float64 or their names."""
    name = value if isinstance(value, str) else str(value).removeprefix("torch.")
    if name not in _PRECISIONS:
        raise ValueError(f"freqs_dtype must be float32 or float64, got {value!r}")
    return name  # type: ignore[return-value]


def _diffusers_freqs(
    dim: int,
    theta: Any,
    linear_factor: Any,
    ntk_factor: Any,
    precision: Precision,
    name: str = "dim",
) -> np.ndarray:
    """get_1d_rotary_pos_embed's ``1 / (theta*ntk) ** (arange(0, dim, 2) / dim) /
    linear_factor``: transformers' ``linear`` rule, base and factor renamed."""
    theta = as_base(theta, "theta")
    ntk = as_base(ntk_factor, "ntk_factor")
    linear = as_base(linear_factor, "linear_factor")
    base = theta * ntk  # a Python float product, as diffusers forms it
    if not math.isfinite(base):
        raise ValueError(f"theta * ntk_factor must be finite, got {theta!r} * {ntk!r}")
    dim = as_int(dim, name, minimum=2)
    if dim % 2:
        raise ValueError(f"{name} must be even, got {dim}")
    params = {"rope_type": "linear", "rope_theta": base, "factor": linear}
    return rope_frequencies(dim, params, precision=precision)[0]


def diffusers_1d(
    dim: int,
    *,
    theta: float = 10000.0,
    use_real: bool = False,
    linear_factor: float = 1.0,
    ntk_factor: float = 1.0,
    repeat_interleave_real: bool = True,
    freqs_dtype: Any = "float32",
    precision: Precision | None = None,
) -> RopePreset:
    """diffusers' ``get_1d_rotary_pos_embed`` (Lumina, Stable Audio, Allegro, ...).

    Frequencies ``1 / (theta * ntk_factor) ** (2i / dim) / linear_factor``; the pair
    layout is ``"interleaved"`` for the complex form (``use_real=False``, as
    ``apply_rotary_emb`` pairs it) and for ``repeat_interleave_real=True``, ``"half"``
    for ``use_real=True, repeat_interleave_real=False``. ``precision`` defaults to
    ``freqs_dtype`` (the framework's own rounding); positions are 1-D.
    """
    use_real = as_bool(use_real, "use_real")
    rir = as_bool(repeat_interleave_real, "repeat_interleave_real")
    prec = _freqs_dtype(freqs_dtype) if precision is None else _precision(precision)
    inv = _diffusers_freqs(dim, theta, linear_factor, ntk_factor, prec)
    layout: Literal["half", "interleaved"] = "half" if use_real and not rir else "interleaved"
    return _preset(inv, None, "contiguous", layout, 1.0, ("t",))


def diffusers_2d(
    embed_dim: int, *, use_real: bool = True, precision: Precision = "float32"
) -> RopePreset:
    """diffusers' ``get_2d_rotary_pos_embed`` (HunyuanDiT): two halves of
    ``embed_dim``, each ``get_1d_rotary_pos_embed(embed_dim // 2)`` (theta 10000,
    interleaved pairs); the first follows the patch column, the second the row, as
    its ``meshgrid(grid_w, grid_h, indexing="xy")`` orders them (``axes == ("w", "h")``).
    Its grid for ``crops_coords=((0, 0), (h, w))`` and ``grid_size=(h, w)`` is
    ``preset.grid((h, w))``.
    """
    as_bool(use_real, "use_real")
    precision = _precision(precision)
    embed_dim = as_int(embed_dim, "embed_dim", minimum=4)
    if embed_dim % 4:
        raise ValueError(f"embed_dim must be a multiple of 4, got {embed_dim}")
    half = _diffusers_freqs(embed_dim // 2, 10000.0, 1.0, 1.0, precision, "embed_dim // 2")
    n = embed_dim // 4
    return _preset(
        np.concatenate([half, half]), (n, n), "contiguous", "interleaved", 1.0, ("w", "h")
    )


def cogvideox_3d(
    embed_dim: int, *, theta: float = 10000.0, precision: Precision = "float32"
) -> RopePreset:
    """diffusers' ``get_3d_rotary_pos_embed`` (CogVideoX): ``embed_dim // 4``
    dimensions for time, ``embed_dim // 8 * 3`` each for height and width, each axis
    ``get_1d_rotary_pos_embed`` of its own width (interleaved pairs), concatenated
    in that order. Its grid for ``crops_coords=((0, 0), (h, w))``, ``grid_size=(h, w)``
    and ``temporal_size=t`` is ``preset.grid((t, h, w))``.
    """
    precision = _precision(precision)
    embed_dim = as_int(embed_dim, "embed_dim", minimum=8)
    dims = (embed_dim // 4, embed_dim // 8 * 3, embed_dim // 8 * 3)
    if any(d % 2 for d in dims):
        raise ValueError(
            f"embed_dim // 4 and embed_dim // 8 * 3 must be even, got {dims[0]} and "
            f"{dims[1]} for embed_dim={embed_dim}"
        )
    names = ("embed_dim // 4", "embed_dim // 8 * 3", "embed_dim // 8 * 3")
    inv = [
        _diffusers_freqs(d, theta, 1.0, 1.0, precision, n)
        for d, n in zip(dims, names, strict=True)
    ]
    return _preset(
        np.concatenate(inv), [d // 2 for d in dims], "contiguous", "interleaved", 1.0, _AXES
    )


def flux(theta: float, axes_dim: Sequence[int], *, precision: Precision = "float64") -> RopePreset:
    """diffusers' ``FluxPosEmbed(theta, axes_dim)`` (Flux, and the models that copy it).

    Axis ``a`` (a column of the ``ids`` the pipeline builds: ``(0, row, column)``
    for image tokens, zeros for text) takes ``axes_dim[a]`` dimensions, with
    ``get_1d_rotary_pos_embed(axes_dim[a], theta=theta)``'s frequencies, interleaved
    pairs. FluxPosEmbed computes them in float64 on the CPU (float32 on Apple's
    MPS), hence the default precision.
    """
    precision = _precision(precision)
    if not isinstance(axes_dim, Sequence) or isinstance(axes_dim, (str, bytes)):
        raise TypeError(f"axes_dim must be a list of integers, got {type(axes_dim).__name__}")
    if not 1 <= len(axes_dim) <= 3:
        raise ValueError(f"axes_dim must have 1 to 3 entries, got {len(axes_dim)}")
    dims = [as_int(d, f"axes_dim[{i}]", minimum=2) for i, d in enumerate(axes_dim)]
    inv = [
        _diffusers_freqs(d, theta, 1.0, 1.0, precision, f"axes_dim[{i}]")
        for i, d in enumerate(dims)
    ]
    axes = _AXES[-len(dims) :]
    return _preset(
        np.concatenate(inv), [d // 2 for d in dims], "contiguous", "interleaved", 1.0, axes
    )


def hunyuan_video(
    patch_size: int,
    patch_size_t: int,
    rope_dim: Sequence[int],
    theta: float = 256.0,
    *,
    precision: Precision = "float32",
) -> RopePreset:
    """diffusers' ``HunyuanVideoRotaryPosEmbed(patch_size, patch_size_t, rope_dim,
    theta)``: axis ``a`` of the (frame, row, column) patch grid takes ``rope_dim[a]``
    dimensions with ``get_1d_rotary_pos_embed(rope_dim[a], theta=theta)``'s float32
    frequencies, interleaved pairs. The grid of a latent of ``num_frames x height x
    width`` is ``preset.grid((num_frames // patch_size_t, height // patch_size, width
    // patch_size))``.
    """
    as_int(patch_size, "patch_size", minimum=1)
    as_int(patch_size_t, "patch_size_t", minimum=1)
    if not isinstance(rope_dim, Sequence) or isinstance(rope_dim, (str, bytes)):
        raise TypeError(f"rope_dim must be a list of 3 integers, got {type(rope_dim).__name__}")
    if len(rope_dim) != 3:
        raise ValueError(f"rope_dim must have 3 entries (t, h, w), got {len(rope_dim)}")
    precision = _precision(precision)
    dims = [as_int(d, f"rope_dim[{i}]", minimum=2) for i, d in enumerate(rope_dim)]
    inv = [
        _diffusers_freqs(d, theta, 1.0, 1.0, precision, f"rope_dim[{i}]")
        for i, d in enumerate(dims)
    ]
    return _preset(
        np.concatenate(inv), [d // 2 for d in dims], "contiguous", "interleaved", 1.0, _AXES
    )


def lumina_next_2d(
    embed_dim: int,
    *,
    linear_factor: float = 1.0,
    ntk_factor: float = 1.0,
    precision: Precision = "float32",
) -> RopePreset:
    """diffusers' ``get_2d_rotary_pos_embed_lumina(embed_dim, len_h, len_w,
    linear_factor, ntk_factor)`` (Lumina-Next): the ``embed_dim / 4`` frequencies of
    ``get_1d_rotary_pos_embed(embed_dim // 2, ...)``, each used twice, pair ``2j``
    by the row and pair ``2j + 1`` by the column (complex pairs, interleaved). Its
    grid for ``len_h x len_w`` is ``preset.grid((len_h, len_w))``.
    """
    precision = _precision(precision)
    embed_dim = as_int(embed_dim, "embed_dim", minimum=4)
    if embed_dim % 4:
        raise ValueError(f"embed_dim must be a multiple of 4, got {embed_dim}")
    w = _diffusers_freqs(
        embed_dim // 2, 10000.0, linear_factor, ntk_factor, precision, "embed_dim // 2"
    )
    n = embed_dim // 4
    # (Qwen3-VL's interleaved sections with two axes: even pairs axis 0, odd ones axis 1)
    return _preset(np.repeat(w, 2), (n, n), "interleaved", "interleaved", 1.0, ("h", "w"))


def lumina2(
    theta: float,
    axes_dim: Sequence[int],
    axes_lens: Sequence[int] = (300, 512, 512),
    *,
    precision: Precision = "float64",
) -> RopePreset:
    """diffusers' ``Lumina2RotaryPosEmbed(theta, axes_dim, axes_lens)`` (Lumina-Image
    2.0): as :func:`flux`, axis ``a`` of the model's ``position_ids`` (caption
    index, patch row, patch column) taking ``axes_dim[a]`` dimensions, frequencies
    in float64 as the module computes them on the CPU, interleaved pairs. Its
    tables stop at ``axes_lens[a]`` positions: positions must stay below them.
    """
    lens = [as_int(n, f"axes_lens[{i}]", minimum=1) for i, n in enumerate(axes_lens)]
    p = flux(theta, axes_dim, precision=precision)
    if len(lens) != len(p.sections or ()):
        raise ValueError(
            f"axes_lens must have one entry per axis ({len(p.sections or ())}), got {len(lens)}"
        )
    return p


def allegro(
    embed_dim: int, *, theta: float = 10000.0, precision: Precision = "float32"
) -> tuple[RopePreset, RopePreset, RopePreset]:
    """diffusers' ``get_3d_rotary_pos_embed_allegro`` with ``apply_rotary_emb_allegro``
    (Allegro): ``embed_dim`` splits into three thirds (time, row, column), each
    rotated on its own in the half-split layout by ``get_1d_rotary_pos_embed(embed_dim
    // 3, theta=theta)``'s frequencies. One preset per third, for
    ``q[..., a * d : (a + 1) * d]`` (``d = embed_dim // 3``) with the positions
    ``allegro_positions(...)[:, a]``.
    """
    precision = _precision(precision)
    embed_dim = as_int(embed_dim, "embed_dim", minimum=6)
    d = embed_dim // 3
    if d % 2:
        raise ValueError(f"embed_dim // 3 must be even, got {d} for embed_dim={embed_dim}")
    w = _diffusers_freqs(d, theta, 1.0, 1.0, precision, "embed_dim // 3")
    one = _preset(w, None, "contiguous", "half", 1.0, ("t",))
    return (one, one._replace(axes=("h",)), one._replace(axes=("w",)))


def allegro_positions(
    grid_size: Sequence[int],
    temporal_size: int,
    interpolation_scale: Sequence[float] = (1.0, 1.0, 1.0),
    *,
    precision: Precision = "float32",
) -> np.ndarray:
    """The (time, row, column) positions of Allegro's tokens, shape ``(t * h * w, 3)``
    (float64): frame, row and column index over the pipeline's
    ``interpolation_scale`` (crops from ``(0, 0)`` to ``grid_size``, as the pipeline
    calls it); fractional where a scale is not 1. By default each is the float32
    quotient diffusers forms; ``precision="float64"`` gives the exact one.
    """
    precision = _precision(precision)
    if not isinstance(grid_size, Sequence) or len(grid_size) != 2:
        raise ValueError(f"grid_size must be (height, width), got {grid_size!r}")
    h, w = (
        as_int(v, f"grid_size[{i}]", minimum=1, maximum=2**20) for i, v in enumerate(grid_size)
    )
    t = as_int(temporal_size, "temporal_size", minimum=1, maximum=2**20)
    if not isinstance(interpolation_scale, Sequence) or len(interpolation_scale) != 3:
        raise ValueError(f"interpolation_scale must have 3 entries, got {interpolation_scale!r}")
    scales = [as_base(v, f"interpolation_scale[{i}]") for i, v in enumerate(interpolation_scale)]
    axes = []
    for n, sc in zip((t, h, w), scales, strict=True):
        # linspace(0, n * (n - 1) / n, n): the integers 0 .. n-1 (exact in float32)
        i = np.arange(n, dtype=np.float64)
        if precision == "float32":
            axes.append((i.astype(np.float32) / np.float32(sc)).astype(np.float64))
        else:
            axes.append(i / sc)
    grids = np.meshgrid(*axes, indexing="ij")
    return np.ascontiguousarray(np.stack([g.reshape(-1) for g in grids], axis=1))


# ---------------------------------------------------------------- timm


def _timm_bands(
    num_bands: int,
    in_pixels: bool,
    max_res: float,
    temperature: float,
    linear_bands: bool,
    precision: Precision,
) -> np.ndarray:
    """timm's ``_build_bands`` (the library's rules): pixel bands (``linspace(1,
    max_res / 2) * pi``, or ``2 ** linspace(0, log2(max_res) - 1) * pi``) or
    ``1 / temperature ** (i / n)``."""
    if not in_pixels:
        return _kernel._timm_frequencies("language", num_bands, temperature, precision=precision)
    kind = "pixel_linear" if linear_bands else "pixel_log"
    return _kernel._timm_frequencies(kind, num_bands, max_res, precision=precision)


def timm_rotary(
    dim: int,
    max_res: int = 224,
    temperature: float = 10000,
    in_pixels: bool = True,
    linear_bands: bool = False,
    *,
    rotate_half: bool = False,
    n_axes: int = 2,
    precision: Precision = "float32",
) -> RopePreset:
    """timm's ``RotaryEmbedding`` and ``RotaryEmbeddingCat`` (EVA-02, ViTamin, ...):
    the frequencies, from the constructor's arguments.

    ``dim // 4`` bands per position axis (timm's ``_build_bands``): pixel bands
    (``in_pixels=True``: ``linspace(1, max_res / 2)`` times pi, or log-spaced
    ``2 ** linspace(0, log2(max_res) - 1)`` times pi without ``linear_bands``) or
    language bands ``1 / temperature ** (i / (dim // 4))``. Axis ``a`` of the grid
    (see :func:`timm_positions`) takes pairs ``a * (dim // 4)`` onwards; pairs are
    interleaved (``rot``), or half-split with ``rotate_half=True``. A 2-D grid
    rotates ``dim`` dimensions (``n_axes`` for grids of other ranks).

    The float32 default rounds as timm does (its float32 ``linspace`` by the scalar
    formula of torch's kernel, which its vectorised kernel can miss by an ulp);
    ``precision="float64"`` gives each band correctly rounded: the real number of
    its formula (``i / (dim // 4 - 1)`` and pi exact) rounded once.
    """
    precision = _precision(precision)
    dim = as_int(dim, "dim", minimum=4, maximum=2**32)
    n_axes = as_int(n_axes, "n_axes", minimum=1, maximum=3)
    in_pixels = as_bool(in_pixels, "in_pixels")
    linear_bands = as_bool(linear_bands, "linear_bands")
    half = as_bool(rotate_half, "rotate_half")
    nb = dim // 4
    if in_pixels:
        res = as_base(max_res, "max_res")
        bands = _timm_bands(nb, True, res, 0.0, linear_bands, precision)
    else:
        temp = as_base(temperature, "temperature")
        bands = _timm_bands(nb, False, 0.0, temp, linear_bands, precision)
    layout: Literal["half", "interleaved"] = "half" if half else "interleaved"
    return _preset(
        np.tile(bands, n_axes), (nb,) * n_axes, "contiguous", layout, 1.0, _AXES[-n_axes:]
    )


def timm_dinov3(
    dim: int,
    temperature: float | None = 100.0,
    min_period: float | None = None,
    max_period: float | None = None,
    *,
    rotate_half: bool = True,
    precision: Precision = "float32",
) -> RopePreset:
    """timm's ``RotaryEmbeddingDinoV3`` (DINOv3), from the constructor's arguments
    (eval mode: its coordinate augmentations apply only in training).

    ``dim // 4`` periods per axis, ``temperature ** (2i / (dim // 2))`` or
    ``min_period * (max_period / min_period) ** linspace(0, 1)``; the angle of a
    coordinate ``c`` is ``2 pi c / period``, so the frequencies are ``2 pi / period``.
    Axis 0 (the patch row, with ``grid_indexing="ij"``) takes the first ``dim // 4``
    pairs; half-split pairs (``rotate_half=True``, timm's default). Its coordinates
    are ``timm_positions(shape, grid_type="centered", ...)``.

    The float32 default divides by timm's float32 periods (the angle itself stays
    exact); ``precision="float64"`` gives each ``2 pi / period`` correctly rounded:
    the real number of its formula (the exponents and pi exact) rounded once.
    """
    precision = _precision(precision)
    dim = as_int(dim, "dim", minimum=4, maximum=2**32)
    half = as_bool(rotate_half, "rotate_half")
    nb = dim // 4
    if min_period is not None and max_period is not None:
        lo = as_base(min_period, "min_period")
        hi = as_base(max_period, "max_period")
        w = _kernel._timm_frequencies("dinov3_periods", nb, lo, hi, precision=precision)
    else:
        if temperature is None:
            raise ValueError("give temperature, or both min_period and max_period")
        t = as_base(temperature, "temperature")
        w = _kernel._timm_frequencies(
            "dinov3_temperature", nb, t, half=dim // 2, precision=precision
        )
    layout: Literal["half", "interleaved"] = "half" if half else "interleaved"
    return _preset(np.tile(w, 2), (nb, nb), "contiguous", layout, 1.0, ("h", "w"))


def timm_positions(
    feat_shape: Sequence[int],
    *,
    in_pixels: bool = True,
    grid_type: str | None = None,
    ref_feat_shape: Sequence[int] | None = None,
    grid_offset: float = 0.0,
    grid_indexing: str = "ij",
    normalize_coords: str = "separate",
    precision: Precision = "float32",
) -> np.ndarray:
    """The token coordinates timm's rotary embeddings rotate by (its ``_build_grid``),
    shape ``(prod(feat_shape), len(feat_shape))``, rows in row-major order.

    ``grid_type`` (default ``"pixel"`` with ``in_pixels``, else ``"index"``, as the
    modules choose): ``"pixel"`` ``linspace(-1, 1, s)`` per axis; ``"index"``
    ``arange(s) + grid_offset``; ``"centered"`` (DINOv3) ``((i + 0.5 + grid_offset) /
    n) * 2 - 1`` with ``n`` each axis's size (``normalize_coords="separate"``) or
    the smallest / largest (``"min"``, ``"max"``). ``ref_feat_shape`` rescales them by
    ``ref / size`` (EVA-02's fine-tuning at another resolution). ``grid_indexing="xy"``
    puts the column coordinate first (timm's meshgrid ``indexing="xy"`` on the
    swapped shape).

    By default the coordinates are timm's float32 values (as float64); with
    ``precision="float64"`` each is the exact value rounded once.
    """
    precision = _precision(precision)
    if not isinstance(feat_shape, Sequence) or isinstance(feat_shape, (str, bytes)):
        raise TypeError(f"feat_shape must be a sequence of ints, got {type(feat_shape).__name__}")
    if not 1 <= len(feat_shape) <= 3:
        raise ValueError(f"feat_shape must have 1 to 3 sizes, got {tuple(feat_shape)!r}")
    shape = [
        as_int(v, f"feat_shape[{i}]", minimum=1, maximum=2**24) for i, v in enumerate(feat_shape)
    ]
    if math.prod(shape) > 2**31:
        raise ValueError(f"feat_shape {tuple(shape)} is too large")
    kind = (
        grid_type
        if grid_type is not None
        else ("pixel" if as_bool(in_pixels, "in_pixels") else "index")
    )
    kind = as_choice(kind, "grid_type", ("pixel", "index", "centered"))
    indexing: Literal["ij", "xy"] = as_choice(grid_indexing, "grid_indexing", ("ij", "xy"))
    norm = as_choice(normalize_coords, "normalize_coords", ("separate", "min", "max"))
    offset = float(grid_offset)
    if not math.isfinite(offset):
        raise ValueError(f"grid_offset must be finite, got {grid_offset!r}")
    ref = None
    if ref_feat_shape is not None:
        if not isinstance(ref_feat_shape, Sequence) or len(ref_feat_shape) != len(shape):
            raise ValueError(
                f"ref_feat_shape must have {len(shape)} sizes (as feat_shape), got "
                f"{ref_feat_shape!r}"
            )
        ref = [as_int(v, f"ref_feat_shape[{i}]", minimum=1) for i, v in enumerate(ref_feat_shape)]
    if indexing == "xy" and len(shape) >= 2:
        shape = [shape[1], shape[0], *shape[2:]]
        if ref is not None:
            ref = [ref[1], ref[0], *ref[2:]]
    axes = []
    for a, n in enumerate(shape):
        denom = {"separate": n, "min": min(shape), "max": max(shape)}[norm] if shape else 1
        if precision == "float64":  # exact rationals, rounded once at the end
            off = Fraction(offset)
            if kind == "pixel":
                t = [Fraction(-1) + Fraction(2 * i, max(n - 1, 1)) for i in range(n)]
            elif kind == "index":
                t = [i + off for i in range(n)]
            else:
                t = [(i + Fraction(1, 2) + off) / denom for i in range(n)]
            if ref is not None:
                t = [x / shape[a] * ref[a] for x in t]
            if kind == "centered":
                t = [2 * x - 1 for x in t]
            axes.append(np.array([float(x) for x in t], dtype=np.float64))
            continue
        f32 = np.float32
        if kind == "pixel":
            v = _kernel._linspace32(-1.0, 1.0, n).astype(f32)
        elif kind == "index":
            v = np.arange(n, dtype=f32) + f32(offset)
        else:
            v = (np.arange(n, dtype=f32) + f32(0.5) + f32(offset)) / f32(denom)
        if ref is not None:
            v = v / f32(shape[a]) * f32(ref[a])
        if kind == "centered":
            v = f32(2.0) * v - f32(1.0)
        axes.append(v.astype(np.float64))
    grids = np.meshgrid(*axes, indexing=indexing)
    return np.ascontiguousarray(np.stack([g.reshape(-1) for g in grids], axis=1))


# ---------------------------------------------------------------- positions


def grid_positions(
    shape: Sequence[int], *, leading: int = 0, start: int | None = None, name: str = "shape"
) -> np.ndarray:
    """Positions of a row-major patch grid, with optional leading tokens.

    Parameters
    ----------
    shape : sequence of int
        The grid's sizes, e.g. ``(t, h, w)`` or ``(h, w)``; the last varies fastest.
    leading : int
        Tokens before the grid (text, a class token): token ``i`` gets position ``i``
        on every axis, as Qwen-VL's text tokens.
    start : int, optional
        Added to every grid coordinate; defaults to ``leading`` (the grid follows
        the leading tokens, as in Qwen-VL).

    Returns
    -------
    ndarray of int64, shape (leading + prod(shape), len(shape))
    """
    if not isinstance(shape, Sequence) or isinstance(shape, (str, bytes)):
        raise TypeError(f"{name} must be a sequence of integers, got {type(shape).__name__}")
    if not 1 <= len(shape) <= 3:
        raise ValueError(f"{name} must have 1 to 3 sizes, got {tuple(shape)!r}")
    sizes = [as_int(s, f"{name}[{i}]", minimum=0, maximum=2**31) for i, s in enumerate(shape)]
    leading = as_int(leading, "leading", minimum=0, maximum=2**31)
    start = leading if start is None else as_int(start, "start", minimum=0, maximum=2**40)
    if leading + math.prod(sizes) > 2**31:
        raise ValueError(f"{name} {tuple(sizes)} with {leading} leading tokens is too large")
    lead = np.repeat(np.arange(leading, dtype=np.int64)[:, None], len(sizes), axis=1)
    grids = np.meshgrid(*[np.arange(s, dtype=np.int64) for s in sizes], indexing="ij")
    body = np.stack([g.reshape(-1) for g in grids], axis=1) + start
    return np.ascontiguousarray(np.concatenate([lead, body]))


def qwen_vl_position_ids(
    mm_token_type_ids: Any,
    *,
    image_grid_thw: Any = None,
    video_grid_thw: Any = None,
    attention_mask: Any = None,
    spatial_merge_size: int = 2,
    video_time_intervals: Sequence[float] | None = None,
    split_video_frames: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Qwen-VL's 3-axis position ids, as transformers' ``get_rope_index`` computes them.

    Text tokens count up on all three axes; each image or video (a run of tokens of
    its type) takes a ``(t, h // m, w // m)`` grid of positions starting where the
    text left off, and the text after it resumes at that start plus
    ``max(h, w) // m`` (``m = spatial_merge_size``).

    Parameters
    ----------
    mm_token_type_ids : array of int, shape (batch, seq)
        0 for text, 1 for image and 2 for video tokens (the processor's output).
    image_grid_thw, video_grid_thw : array of int, shape (n, 3), optional
        The patch grid of each image and video, in order of appearance.
    attention_mask : array of 0/1, shape (batch, seq), optional
        Masked tokens (padding) are skipped and get position 0.
    spatial_merge_size : int
        The vision config's ``spatial_merge_size``.
    video_time_intervals : sequence of float, optional
        Qwen2.5-VL: each video's ``tokens_per_second * second_per_grid_t`` as the
        model forms it (a float32 product where ``second_per_grid_ts`` is a float32
        tensor: ``(tokens_per_second * second_per_grid_ts).tolist()``); frame ``f``
        gets time ``int(f * interval)``, the product in float32 as torch forms it.
    split_video_frames : bool
        Qwen3-VL: each video frame is its own grid of one time step.

    Returns
    -------
    positions : ndarray of int64, shape (batch, seq, 3)
        ``get_rope_index``'s ``position_ids`` with the axis last (``.transpose(1, 2, 0)``).
    deltas : ndarray of int64, shape (batch, 1)
        ``mrope_position_deltas``: the largest position + 1 minus the token count.
    """
    types = np.asarray(mm_token_type_ids)
    if types.ndim != 2 or not np.issubdtype(types.dtype, np.integer):
        raise ValueError(
            "mm_token_type_ids must be a 2-D integer array, "
            f"got {types.dtype} of shape {types.shape}"
        )
    if np.any((types < 0) | (types > 2)):
        raise ValueError("mm_token_type_ids entries must be 0 (text), 1 (image) or 2 (video)")
    merge = as_int(spatial_merge_size, "spatial_merge_size", minimum=1)
    if attention_mask is None:
        mask = np.ones(types.shape, dtype=bool)
    else:
        mask = np.asarray(attention_mask)
        if mask.shape != types.shape:
            raise ValueError(
                f"attention_mask must have mm_token_type_ids' shape {types.shape}, "
                f"got {mask.shape}"
            )
        mask = mask.astype(bool)
    grids = {
        1: _grid_thw(image_grid_thw, "image_grid_thw"),
        2: _grid_thw(video_grid_thw, "video_grid_thw"),
    }
    intervals = [1.0] * len(grids[2])
    if video_time_intervals is not None:
        if split_video_frames:
            raise ValueError("video_time_intervals and split_video_frames do not go together")
        if len(video_time_intervals) != len(grids[2]):
            raise ValueError(
                f"video_time_intervals must have one entry per video ({len(grids[2])}), "
                f"got {len(video_time_intervals)}"
            )
        intervals = [float(v) for v in video_time_intervals]
    if as_bool(split_video_frames, "split_video_frames") and len(grids[2]):
        v = grids[2]
        grids[2] = np.repeat(v, v[:, 0], axis=0)
        grids[2][:, 0] = 1
        intervals = [1.0] * len(grids[2])
    used = {1: 0, 2: 0}
    out = np.zeros((*types.shape, 3), dtype=np.int64)
    deltas = np.zeros((types.shape[0], 1), dtype=np.int64)
    for b in range(types.shape[0]):
        kept = types[b][mask[b]]
        pieces = []
        pos = 0
        for kind, run in itertools.groupby(kept.tolist()):
            n = len(list(run))
            if kind == 0:
                pieces.append(np.repeat(np.arange(pos, pos + n, dtype=np.int64)[:, None], 3, 1))
                pos += n
                continue
            i = used[kind]
            if i >= len(grids[kind]):
                raise ValueError(
                    f"{'image' if kind == 1 else 'video'}_grid_thw has {len(grids[kind])} "
                    f"grids, fewer than the {'image' if kind == 1 else 'video'} token runs"
                )
            used[kind] += 1
            t, h, w = (int(x) for x in grids[kind][i])
            step = np.float32(intervals[i] if kind == 2 else 1.0)
            tpos = (np.arange(t, dtype=np.float32) * step).astype(np.int64) + pos
            g = grid_positions((t, h // merge, w // merge), start=0)
            g[:, 0] = tpos[g[:, 0]]
            g[:, 1:] += pos
            if len(g) != n:
                raise ValueError(
                    f"a run of {n} {'image' if kind == 1 else 'video'} tokens does not match "
                    f"its grid {(t, h, w)} with spatial_merge_size={merge} "
                    f"({len(g)} tokens)"
                )
            pieces.append(g)
            pos += max(h, w) // merge
        if pieces:
            ids = np.concatenate(pieces)
            out[b][mask[b]] = ids
            deltas[b, 0] = int(ids.max()) + 1 - len(kept)
        else:
            deltas[b, 0] = 1 - len(kept)  # transformers' max() of nothing fails here
    return out, deltas


def _grid_thw(value: Any, name: str) -> np.ndarray:
    if value is None:
        return np.zeros((0, 3), dtype=np.int64)
    arr = np.asarray(value)
    if arr.ndim != 2 or arr.shape[1] != 3 or not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"{name} must be an integer array of shape (n, 3), got {arr.shape}")
    if np.any(arr < 0):
        raise ValueError(f"{name} must not be negative")
    return arr.astype(np.int64)
