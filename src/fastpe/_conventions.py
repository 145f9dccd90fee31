"""Frequency conventions of the major frameworks, as knobs of one formula.

Every 1-D sinusoidal encoding in use is

    w_i = position_scale * base ** (-i / denominator),   i = 0 .. nf-1
    row(k) = sin(k w_i) and cos(k w_i) placed by `layout`, plus `odd` handling

and differs only in these knobs (see the README's conventions table):

==============  ========  ==================  ================  ========  ===========
name            base      denominator         position_scale    layout    odd width
==============  ========  ==================  ================  ========  ===========
vaswani         10000     d/2                 1                 (arg)     extra sine
tensor2tensor   max/min   max(h-1, 1)         min_timescale     split     zero column
fairseq         10000     h-1                 1                 split     zero column
diffusers       period    h - shift           scale             split*    zero column
gptj            10000     d/2                 1                 split     (even only)
==============  ========  ==================  ================  ========  ===========

h = d_model // 2; split* = [cos | sin] when flip_sin_to_cos.  fairseq also zeroes
the row of position ``padding_idx`` (its real positions start at padding_idx+1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from . import kernel as _kernel
from ._validate import (
    INT64_MAX,
    INT64_MIN,
    MAX_SCALE,
    as_base,
    as_bool,
    as_choice,
    as_int,
    as_real,
)

# The string knobs' spellings, in the order of the library's enums: its own table
# (lib/src/spec.c), which turns them into the enums too.
_DENOMINATORS: tuple[str, ...] = _kernel.KNOB_SPELLINGS["denominator"]
_LAYOUTS: tuple[str, ...] = _kernel.KNOB_SPELLINGS["layout"]
_ODD: tuple[str, ...] = _kernel.KNOB_SPELLINGS["odd"]
# Each named convention's default knobs, the library's presets
# (fastpe_knobs_preset), read once here: a named constructor applies its own
# arguments to them and calls nothing compiled (it may run while TorchDynamo
# traces a function).
_PRESETS: dict[str, dict[str, Any]] = {
    name: _kernel.knobs_preset(name) for name in _kernel.PRESET_NAMES
}
# the presets the defaults below are read from (the dataclass's are Vaswani's)
_VASWANI = _PRESETS["vaswani"]
_T2T = _PRESETS["tensor2tensor"]
_DIFFUSERS = _PRESETS["diffusers"]


def _check_knobs(base: float, position_scale: float, shift: float) -> None:
    """The library's check of the numeric knobs (ValueError naming the knob).  A
    Python function of its own so that fastpe.torch can tell TorchDynamo its result
    is a constant (a compiled function's call would break the graph)."""
    _kernel.check_knobs(base, position_scale, shift)


@dataclass(frozen=True)
class Convention:
    """The knobs of a sinusoidal convention (see the module docstring).

    Use the named constructors (``Convention.fairseq(padding_idx=1)``, ...) or
    build one directly, e.g. ``Convention(base=500.0, layout="split")``.

    Attributes
    ----------
    name : str
    base : float
        Frequencies fall geometrically from ``position_scale`` by ``base`` over
        ``denominator`` steps: ``w_i = position_scale * base**(-i/denominator)``.
    denominator : {"d/2", "h", "h-1", "max(h-1,1)", "h-shift"}
        With ``h = d_model // 2``; "h-shift" uses ``shift``.
    shift : float
        For ``denominator="h-shift"`` (diffusers' downscale_freq_shift).
    position_scale : float
        Multiplies every frequency (diffusers' ``scale``, tensor2tensor's min_timescale).
    layout : {"interleaved", "split", "split_cos_first"}
    odd : {"sin", "zero", "error"}
        Odd ``d_model``: one more sine column (Vaswani/DistilBERT), a zero column
        at the end (tensor2tensor/fairseq/diffusers), or refuse.
    padding_idx : int or None
        Position whose encoding is all zeros (fairseq).
    """

    name: str = "custom"
    base: float = _VASWANI["base"]
    denominator: str = _VASWANI["denominator"]
    shift: float = _VASWANI["shift"]
    position_scale: float = _VASWANI["position_scale"]
    layout: str = _VASWANI["layout"]
    odd: str = _VASWANI["odd"]
    padding_idx: int | None = _VASWANI["padding_idx"]

    def __post_init__(self) -> None:
        # Checked when built, so that a bad Convention fails here and nothing
        # malformed reaches the kernel; stored normalised (float / int).  Python
        # checks what the library cannot see -- the types, the spellings of the
        # string knobs (against the library's own, for a message listing them;
        # the library takes their enums) and a padding_idx beyond int64 (it takes
        # an int64) -- and the library checks the numbers (pe_knobs_check: the
        # same check that makes the spec).
        if not isinstance(self.name, str):
            raise TypeError(f"name must be a string, got {type(self.name).__name__}")
        as_choice(self.denominator, "denominator", _DENOMINATORS)
        as_choice(self.layout, "layout", _LAYOUTS)
        as_choice(self.odd, "odd", _ODD)
        norm = {
            "base": as_real(self.base, "base"),
            "position_scale": as_real(self.position_scale, "position_scale"),
            "shift": as_real(self.shift, "shift"),
        }
        _check_knobs(norm["base"], norm["position_scale"], norm["shift"])
        if self.padding_idx is not None:
            norm["padding_idx"] = as_int(
                self.padding_idx, "padding_idx", minimum=INT64_MIN, maximum=INT64_MAX
            )
        for key, value in norm.items():
            object.__setattr__(self, key, value)  # frozen dataclass
        # the values that define the encoding: what fastpe's caches key on (never
        # the object itself, which belongs to the caller)
        object.__setattr__(
            self,
            "_key",
            (
                "Convention",
                self.name,
                self.base,
                self.denominator,
                self.shift,
                self.position_scale,
                self.layout,
                self.odd,
                self.padding_idx,
            ),
        )

    # ----------------------------------------------------------- named conventions
    @classmethod
    def _preset(cls, name: str, **changes: Any) -> Convention:
        """The library's preset ``name`` with the constructor's own knobs set."""
        return cls(name, **{**_PRESETS[name], **changes})

    @classmethod
    def vaswani(
        cls, base: float = _VASWANI["base"], layout: str = _VASWANI["layout"]
    ) -> Convention:
        """The paper, the seeds, the PyTorch tutorial, DistilBERT/XLM, keras_hub."""
        return cls._preset("vaswani", base=base, layout=layout)

    @classmethod
    def tensor2tensor(
        cls,
        min_timescale: float = _T2T["position_scale"],
        max_timescale: float = _T2T["position_scale"] * _T2T["base"],
    ) -> Convention:
        """tensor2tensor ``get_timing_signal_1d`` (positions = start_index + 0..):
        inv_timescale_i = min_timescale * exp(-i ln(max/min) / max(h-1, 1))."""
        min_timescale = as_base(min_timescale, "min_timescale", maximum=MAX_SCALE)
        max_timescale = as_base(max_timescale, "max_timescale")
        ratio = max_timescale / min_timescale
        if not (ratio > 0 and math.isfinite(ratio)):
            raise ValueError(
                f"max_timescale / min_timescale must be a finite ratio > 0, got "
                f"{max_timescale!r} / {min_timescale!r}"
            )
        return cls._preset("tensor2tensor", base=ratio, position_scale=min_timescale)

    @classmethod
    def fairseq(cls, padding_idx: int | None = _PRESETS["fairseq"]["padding_idx"]) -> Convention:
        """fairseq ``SinusoidalPositionalEmbedding``: exp(-i ln(10000)/(h-1)),
        [sin | cos], zero column for odd width, row ``padding_idx`` all zeros."""
        return cls._preset("fairseq", padding_idx=padding_idx)

    @classmethod
    def diffusers(
        cls,
        max_period: float = _DIFFUSERS["base"],
        downscale_freq_shift: float = _DIFFUSERS["shift"],
        scale: float = _DIFFUSERS["position_scale"],
        flip_sin_to_cos: bool = False,
    ) -> Convention:
        """diffusers ``get_timestep_embedding`` (float timesteps welcome)."""
        flip = as_bool(flip_sin_to_cos, "flip_sin_to_cos")
        max_period = as_base(max_period, "max_period")
        flipped = {"layout": "split_cos_first"} if flip else {}
        return cls._preset(
            "diffusers",
            base=max_period,
            shift=downscale_freq_shift,
            position_scale=scale,
            **flipped,
        )

    @classmethod
    def gptj(cls, base: float = _PRESETS["gptj"]["base"]) -> Convention:
        """GPT-J ``create_sinusoidal_positions``: the [sin | cos] table of
        base^(-2i/d) that rotary code slices into its sin and cos halves."""
        return cls._preset("gptj", base=base)

    def with_(self, **changes: Any) -> Convention:
        """A copy with some knobs changed."""
        return replace(self, **changes)


CONVENTIONS: tuple[str, ...] = tuple(_PRESETS)


def resolve(
    convention: Any, *, base: float, layout: str, base_default: bool, layout_default: bool
) -> Convention:
    """The Convention for a public function's (convention, base, layout) arguments.

    ``base`` and ``layout`` are Vaswani's knobs; with another named convention
    they must be left at their defaults (change its knobs with its constructor,
    e.g. ``Convention.diffusers(max_period=...)``)."""
    if isinstance(convention, Convention):
        conv = convention
    elif isinstance(convention, str):
        if convention not in CONVENTIONS:
            raise ValueError(
                f"convention must be one of {CONVENTIONS} or a fastpe.Convention, "
                f"got {convention!r}"
            )
        if convention == "vaswani":
            return Convention.vaswani(base=base, layout=layout)
        conv = getattr(Convention, convention)()
    else:
        raise TypeError(
            f"convention must be a string or a fastpe.Convention, got {type(convention).__name__}"
        )
    if conv.name != "vaswani" or isinstance(convention, Convention):
        if not base_default:
            raise ValueError(
                f"base cannot be combined with convention {conv.name!r}: set the "
                f"convention's own knob (e.g. fastpe.Convention.{conv.name}(...))"
            )
        if not layout_default:
            raise ValueError(
                f"layout cannot be combined with convention {conv.name!r}: the "
                "convention fixes the layout"
            )
    return conv
