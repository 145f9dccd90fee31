"""fastpe.torch's operator schemas, written out in the module rather than read
from annotations: each must stay what graphs exported with torch.export (and
any C++ caller) were built against."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("fastpe.torch")

_CONV = (
    "str name, float base, str denominator, float shift, float position_scale, str layout, "
    "str odd, {int}? padding_idx"
)
_ADD = "SymInt offset, Tensor? offsets, Tensor? positions, float scale, " + _CONV.format(
    int="SymInt"
)
_ROPE = (
    "Tensor? positions, SymInt offset, Tensor? offsets, SymInt seq_axis, str layout, "
    "float[] inv_freq, float attention_factor"
)
SCHEMAS = {
    "add_to": f"(Tensor x, {_ADD}) -> Tensor",
    "add_to_": f"(Tensor(a0!) x, {_ADD}) -> ()",
    "apply_rope": f"(Tensor q, {_ROPE}) -> Tensor",
    "apply_rope_": f"(Tensor(a0!) q, Tensor(a1!)? k, {_ROPE}) -> ()",
    "sinusoidal": "(SymInt seq_len, SymInt d_model, int offset, ScalarType dtype, "
    + _CONV.format(int="int")
    + ") -> Tensor",
    "sinusoidal_at": "(Tensor positions, SymInt d_model, ScalarType dtype, "
    + _CONV.format(int="int")
    + ") -> Tensor",
    "rope_cache": "(Tensor? positions, SymInt seq_len, int offset, float[] inv_freq, "
    "float attention_factor, str layout, ScalarType dtype) -> (Tensor, Tensor)",
    "rope_cache_axes": "(Tensor positions, int[] sections, str section_layout, float[] inv_freq, "
    "float attention_factor, str layout, ScalarType dtype) -> (Tensor, Tensor)",
}


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_operator_schema_is_unchanged(name):
    got = str(getattr(torch.ops.fastpe, name).default._schema)
    assert got == f"fastpe::{name}{SCHEMAS[name]}"


@pytest.mark.parametrize("in_place", [False, True])
def test_add_to_operators_take_the_convention_knobs(in_place):
    # through the dispatcher (torch.ops), not the eager shortcut of fastpe.torch.add_to
    import fastpe
    import fastpe.torch as ft

    conv = fastpe.Convention("mine", base=500.0, layout="split")
    knobs = ft._knobs(conv, 10000.0, "interleaved")
    x = torch.zeros(3, 8, dtype=torch.float64)
    if in_place:
        torch.ops.fastpe.add_to_(x, 2, None, None, 1.0, *knobs)
        got = x
    else:
        got = torch.ops.fastpe.add_to(x, 2, None, None, 1.0, *knobs)
    want = fastpe.sinusoidal(3, 8, offset=2, convention=conv, dtype="float64")
    assert torch.equal(got, torch.from_numpy(want))
