"""Optional: fastpe's conventions against the frameworks' own functions.

Each test skips when its framework does not import here (they are never
dependencies of fastpe).  CI runs them with the pinned versions of
``requirements-frameworks.txt`` (``bash tools/test_frameworks.sh``).

Tolerances.  Most of these functions compute in float32: they round w_i (an
``exp``/``pow`` of an argument up to ln(10000) ~ 9.2, whose own float32 rounding
is amplified by that factor) and then the angle ``k * w_i``.  Their entries are
therefore off by up to about ``(|x| + 2) * |angle| * 2**-24``; :func:`f32_tol`
allows 16 * |angle| * 2**-24 plus one float32 ulp, for the largest angle in the
table.  That error is the framework's, not fastpe's: fastpe is compared with
mpmath in test_conventions.py.  Functions that compute in float64 and round once
to float32 (DistilBERT, Marian) are compared to one float32 ulp (2**-24).
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import sys
import types

import numpy as np
import pytest
from conventions_ref import (
    F64,
    TIMESTEPS,
    close,
    diffusers_ref,
    fairseq_ref,
    gptj_ref,
    make_positions_ref,
    pytorch_tutorial_ref,
    timm_ref,
    vaswani_ref,
)

import fastpe
from fastpe import Convention

F32_ULP = 2.0**-24  # one float32 ulp of a value in [0.5, 1)


_FAILED: dict[str, str] = {}


def _import_alone(name):
    """``name`` without running its parent packages' ``__init__``: timm's imports
    torchvision (for its data pipelines), whose PyPI wheels are built against the
    CUDA torch and fail to load beside the CPU one.  Empty parent packages that
    point at the real directories stand in while the module loads."""
    parts = name.split(".")
    spec = importlib.util.find_spec(parts[0])
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(f"No module named {parts[0]!r}")
    path = next(iter(spec.submodule_search_locations))
    stubs = []
    for i in range(1, len(parts)):
        pkg = ".".join(parts[:i])
        if pkg not in sys.modules:
            stub = types.ModuleType(pkg)
            stub.__path__ = [os.path.join(path, *parts[1:i])]
            sys.modules[pkg] = stub
            stubs.append(pkg)
    try:
        return importlib.import_module(name)
    finally:
        for pkg in stubs:  # the module keeps what it needs; others get the real ones
            del sys.modules[pkg]


def _import(name, *, alone=False):
    """The module, or a skip: importorskip only catches ImportError, and some of
    these packages raise other errors when a companion package (torchvision, a
    matching torch) is missing or mismatched.  A failure is remembered: a second
    import can "succeed" on the submodules the failed one left in sys.modules."""
    if name in _FAILED:
        pytest.skip(_FAILED[name])
    try:
        return _import_alone(name) if alone else importlib.import_module(name)
    except Exception as exc:
        _FAILED[name] = f"{name} is not importable here: {type(exc).__name__}: {exc}"
        pytest.skip(_FAILED[name])


def f32_tol(angles) -> float:
    return F32_ULP + 16 * F32_ULP * float(np.max(np.abs(angles), initial=1.0))


def assert_f32_close(fastpe_f32, framework, angles):
    a = np.asarray(fastpe_f32, dtype=F64)
    b = np.asarray(framework, dtype=F64)
    assert a.shape == b.shape
    err = np.max(np.abs(a - b), initial=0.0)
    assert err <= f32_tol(angles), f"max |fastpe - framework| = {err:.3g} > {f32_tol(angles):.3g}"


# ---------------------------------------------------------------- PyTorch tutorial


@pytest.mark.parametrize("d", [16, 512])
def test_pytorch_tutorial_positional_encoding(d):
    """beginner_source/transformer_tutorial.py PositionalEncoding, as written
    there (torch float32), and the same code in torch float64."""
    torch = _import("torch")
    import math

    max_len = 1000

    def tutorial(dtype):
        position = torch.arange(max_len, dtype=dtype).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d, 2, dtype=dtype) * (-math.log(10000.0) / d))
        pe = torch.zeros(max_len, 1, d, dtype=dtype)
        pe[:, 0, 0::2] = torch.sin(position * div_term)
        pe[:, 0, 1::2] = torch.cos(position * div_term)
        return pe[:, 0, :].numpy()

    _, angle = pytorch_tutorial_ref(max_len, d)
    assert_f32_close(fastpe.sinusoidal(max_len, d), tutorial(torch.float32), angle)
    close(fastpe.sinusoidal(max_len, d, dtype=F64), tutorial(torch.float64), angle)


def test_torch_tensor_as_out_and_add_to_through_numpy_view():
    torch = _import("torch")
    t = torch.empty(7, 32)
    assert fastpe.sinusoidal(7, 32, out=t) is t
    np.testing.assert_array_equal(t.numpy(), fastpe.sinusoidal(7, 32))
    x = torch.ones(2, 7, 32)
    fastpe.add_to(x.numpy(), offset=[0, 5])  # zero-copy: x changes in place
    # add_to forms x*scale + PE in float64 and rounds once
    expect = 1 + np.stack(
        [fastpe.sinusoidal(7, 32, dtype=F64), fastpe.sinusoidal(7, 32, offset=5, dtype=F64)]
    )
    np.testing.assert_array_equal(x.numpy(), expect.astype(np.float32))


# ---------------------------------------------------------------- diffusers


@pytest.mark.parametrize("d", [4, 7, 32, 320])
@pytest.mark.parametrize(
    "flip, shift, scale",
    [(False, 1.0, 1.0), (True, 0.0, 1.0), (True, 1.0, 1.0), (False, 0.5, 1000.0)],
)
def test_diffusers_get_timestep_embedding(d, flip, shift, scale):
    torch = _import("torch")
    emb = _import("diffusers.models.embeddings")
    t = TIMESTEPS if scale == 1.0 else TIMESTEPS / 1000.0
    theirs = emb.get_timestep_embedding(
        torch.tensor(t), d, flip_sin_to_cos=flip, downscale_freq_shift=shift, scale=scale
    ).numpy()
    conv = Convention.diffusers(downscale_freq_shift=shift, scale=scale, flip_sin_to_cos=flip)
    ours = fastpe.sinusoidal_at(t, d, convention=conv)
    _, angle = diffusers_ref(t, d, flip, shift, scale)
    assert_f32_close(ours, theirs, angle)


def test_diffusers_max_period():
    torch = _import("torch")
    emb = _import("diffusers.models.embeddings")
    theirs = emb.get_timestep_embedding(torch.tensor(TIMESTEPS), 64, max_period=100).numpy()
    ours = fastpe.sinusoidal_at(TIMESTEPS, 64, convention=Convention.diffusers(max_period=100))
    _, angle = diffusers_ref(TIMESTEPS, 64, max_period=100)
    assert_f32_close(ours, theirs, angle)


# ---------------------------------------------------------------- transformers


@pytest.mark.parametrize("d", [5, 16, 768])
def test_distilbert_create_sinusoidal_embeddings(d):
    torch = _import("torch")
    m = _import("transformers.models.distilbert.modeling_distilbert")
    out = torch.empty(512, d)
    m.create_sinusoidal_embeddings(512, d, out)  # float64 NumPy, rounded once to f32
    np.testing.assert_allclose(fastpe.sinusoidal(512, d), out.numpy(), atol=F32_ULP, rtol=0)
    close(
        fastpe.sinusoidal(512, d, dtype=F64),
        vaswani_ref(np.arange(512), d)[0],
        vaswani_ref(np.arange(512), d)[1],
    )


@pytest.mark.parametrize("d", [7, 16, 512])
def test_marian_sinusoidal_positional_embedding(d):
    _import("torch")
    m = _import("transformers.models.marian.modeling_marian")
    layer = m.MarianSinusoidalPositionalEmbedding(256, d)
    theirs = layer.create_weight().numpy()  # float64 NumPy, rounded once to f32
    np.testing.assert_allclose(
        fastpe.sinusoidal(256, d, layout="split"), theirs, atol=F32_ULP, rtol=0
    )


@pytest.mark.parametrize("dim", [4, 64, 256])
def test_gptj_create_sinusoidal_positions(dim):
    _import("torch")
    m = _import("transformers.models.gptj.modeling_gptj")
    theirs = m.create_sinusoidal_positions(2048, dim).numpy()
    _, angle = gptj_ref(2048, dim)
    assert_f32_close(fastpe.sinusoidal(2048, dim, convention="gptj"), theirs, angle)


@pytest.mark.parametrize("d", [5, 16, 64])
@pytest.mark.parametrize("padding_idx", [1, 0])
def test_fsmt_fairseq_embedding_and_make_positions(d, padding_idx):
    torch = _import("torch")
    m = _import("transformers.models.fsmt.modeling_fsmt")
    Emb = m.SinusoidalPositionalEmbedding
    theirs = Emb.get_embedding(300, d, padding_idx).numpy()
    conv = Convention.fairseq(padding_idx=padding_idx)
    _, angle = fairseq_ref(300, d, padding_idx)
    assert_f32_close(fastpe.sinusoidal(300, d, convention=conv), theirs, angle)

    rng = np.random.default_rng(3)
    tokens = rng.integers(0, 9, size=(4, 23))
    tokens[0, :6] = padding_idx
    tokens[2, -3:] = padding_idx
    theirs_pos = Emb.make_positions(torch.tensor(tokens), padding_idx).numpy()
    np.testing.assert_array_equal(fastpe.fairseq_positions(tokens, padding_idx), theirs_pos)
    np.testing.assert_array_equal(make_positions_ref(tokens, padding_idx), theirs_pos)

    # the module's forward, continuing from a KV cache of 5 (positions shift, pads too);
    # its one keyword argument is that length, whatever the installed release calls it
    # (past_key_values_length until transformers 5.23, cache_length from 5.24)
    layer = Emb(300, d, padding_idx)
    layer.make_weight(300, d, padding_idx)
    sig = inspect.signature(layer.forward)
    kw = [p.name for p in sig.parameters.values() if p.kind is p.KEYWORD_ONLY]
    assert len(kw) == 1, f"FSMT's positional-embedding forward{sig}: which is the cache length?"
    with torch.no_grad():
        fwd = layer(torch.tensor(tokens), **{kw[0]: 5}).numpy()
    x = np.zeros((4, 23, d), np.float32)
    fastpe.add_to(x, positions=fastpe.fairseq_positions(tokens, padding_idx) + 5, convention=conv)
    assert_f32_close(x, fwd, angle)


# ---------------------------------------------------------------- timm


@pytest.mark.parametrize("shape", [(14, 14), (3, 5)])
@pytest.mark.parametrize("reverse_coord", [False, True])
@pytest.mark.parametrize("interleave", [False, True])
def test_timm_build_sincos2d_pos_embed(shape, reverse_coord, interleave):
    _import("torch")
    m = _import("timm.layers.pos_embed_sincos", alone=True)
    theirs = m.build_sincos2d_pos_embed(
        list(shape), dim=64, reverse_coord=reverse_coord, interleave_sin_cos=interleave
    ).numpy()
    ours = fastpe.sinusoidal_2d(
        *shape, 64, convention="timm", reverse_coord=reverse_coord, interleave_sin_cos=interleave
    )
    _, angle = timm_ref(shape, 64, reverse_coord=reverse_coord, interleave_sin_cos=interleave)
    assert_f32_close(ours, theirs, angle)
