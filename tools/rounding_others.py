"""The code people use instead of fastpe, one entry at a time, for rounding_sweep.py.

Each item of OTHERS is (name, dtype, kind, entry): entry(k, j, d) runs that code for
the single position k and width d and returns column j of its output row as float64
(exactly), with the columns put in one of two layouts so that the sweep samples
every library the same way:

* kind "table": Vaswani's interleaved row, sin at even columns and cos at odd ones,
  frequency 10000^(-2i/d) for pair i = j // 2;
* kind "rope" (theta 10000) and "rope-llama3" (theta 500000, llama3 rule): the
  halves layout, cos of pair j for j < d/2 and sin of pair j - d/2 after it.

An entry is None where the code cannot take the position (ggml's rope takes int32
positions only).  Rows are computed whole, as each library computes them (its
vectorised loops), and only then sampled; the tutorials' scalar loops are run for the
sampled pair only, which is the same computation.  The code follows its source:
the NumPy tutorials people copy (functions named below), PyTorch's transformer tutorial,
Meta's Llama reference (precompute_freqs_cis), transformers' LlamaRotaryEmbedding
as installed, and ggml's own compiled operators from the libggml-python wheel.
"""

from __future__ import annotations

import ctypes
import math
import os
from collections.abc import Callable

import numpy as np

# entry(k, j, d): column j of the row at position k, width d, as float64 (exactly)
Entry = Callable[[float, int, int], "float | None"]
# (name, dtype, kind, entry)
OTHERS: list[tuple[str, str, str, Entry]] = []
# why a library is missing from OTHERS, for the report
SKIPPED: dict[str, str] = {}


def _interleave(s: np.ndarray, c: np.ndarray) -> np.ndarray:
    out = np.empty(2 * len(s))
    out[0::2] = s
    out[1::2] = c
    return out


# ---- NumPy: the tutorials ------------------------------------------------------------


def tutorial_loop_power(k: float, d: int, i: int) -> tuple[float, float]:
    """getPositionEncoding (Machine Learning Mastery's tutorial and its copies): the
    loop body for pair i."""
    denominator = np.power(10000, 2 * np.int64(i) / d)
    return float(np.sin(k / denominator)), float(np.cos(k / denominator))


def tutorial_loop_pow(k: float, d: int, i: int) -> tuple[float, float]:
    """The blog loop `np.sin(pos / (10000 ** ((2*i)/d_embedding)))`: Python's pow."""
    return float(np.sin(k / (10000 ** ((2 * i) / d)))), float(np.cos(k / (10000 ** ((2 * i) / d))))


def _loop(body: Callable[[float, int, int], tuple[float, float]]) -> Entry:
    # the tutorials' loops compute each pair on its own: the sampled pair is the same
    # computation as in the whole table
    def entry(k: float, j: int, d: int) -> float:
        return body(k, d, j // 2)[j % 2]

    return entry


def _row(row: Callable[[float, int], np.ndarray | None]) -> Entry:
    def entry(k: float, j: int, d: int) -> float | None:
        r = row(k, d)
        return None if r is None else float(r[j])

    return entry


def tutorial_exp(k: float, d: int) -> np.ndarray:
    """get_positional_encoding: div_term = exp(arange(0, d, 2) * -(log(10000)/d)), float64."""
    position = np.array([[k]])
    div_term = np.exp(np.arange(0, d, 2) * -(np.log(10000.0) / d))
    return _interleave(np.sin(position * div_term)[0], np.cos(position * div_term)[0])


def tutorial_cast(k: float, d: int) -> np.ndarray:
    """generate_positional_encoding: angle rates over np.float32(d) (NumPy promotes them to
    float64), then cast to float32 (tf.cast)."""
    positions = np.array([k])[:, np.newaxis]
    dims = np.arange(d)[np.newaxis, :]
    angle_rates = 1 / np.power(10000, (2 * (dims // 2)) / np.float32(d))
    angle_radians = positions * angle_rates
    angle_radians[:, 0::2] = np.sin(angle_radians[:, 0::2])
    angle_radians[:, 1::2] = np.cos(angle_radians[:, 1::2])
    return angle_radians[0].astype(np.float32).astype(np.float64)


def numpy_float32(k: float, d: int) -> np.ndarray:
    """get_positional_encoding's lines in float32 (docs/accuracy_figures.py's formula)."""
    pos = np.array([[k]], dtype=np.float32)
    div = np.exp(np.arange(0, d, 2, dtype=np.float32) * np.float32(-np.log(10000.0) / d))
    return _interleave(np.sin(pos * div)[0], np.cos(pos * div)[0]).astype(np.float64)


OTHERS += [
    ("NumPy tutorial loop (np.power)", "float64", "table", _loop(tutorial_loop_power)),
    ("NumPy tutorial loop (Python **)", "float64", "table", _loop(tutorial_loop_pow)),
    ("NumPy tutorial, np.exp form", "float64", "table", _row(tutorial_exp)),
    ("NumPy tutorial, float64 cast", "float32", "table", _row(tutorial_cast)),
    ("NumPy tutorial, np.exp form", "float32", "table", _row(numpy_float32)),
]


# ---- PyTorch --------------------------------------------------------------------

try:
    import torch
except ImportError:
    SKIPPED["PyTorch"] = "torch is not installed (nor are transformers' rows measured)"
else:

    def torch_tutorial(bits: int = 32) -> Callable[[float, int], np.ndarray]:
        """pytorch/tutorials, transformer_tutorial.py's PositionalEncoding (float32),
        and the same lines with every tensor float64."""
        dtype = torch.float64 if bits == 64 else torch.float32

        def row(k: float, d: int) -> np.ndarray:
            position = torch.tensor([[k]], dtype=dtype)
            div_term = torch.exp(torch.arange(0, d, 2, dtype=dtype) * (-math.log(10000.0) / d))
            pe = torch.zeros(1, d, dtype=dtype)
            pe[:, 0::2] = torch.sin(position * div_term)
            pe[:, 1::2] = torch.cos(position * div_term)
            return pe[0].double().numpy()

        return row

    def torch_freqs_cis(k: float, d: int) -> np.ndarray:
        """Meta's Llama reference, precompute_freqs_cis (float32, torch.polar)."""
        theta = 10000.0
        freqs = 1.0 / (theta ** (torch.arange(0, d, 2)[: (d // 2)].float() / d))
        t = torch.tensor([k], dtype=torch.float32)
        freqs = torch.outer(t, freqs).float()
        freqs_cis = torch.polar(torch.ones_like(freqs), freqs)
        return torch.cat((freqs_cis.real[0], freqs_cis.imag[0])).double().numpy()

    OTHERS += [
        ("PyTorch tutorial PositionalEncoding", "float32", "table", _row(torch_tutorial())),
        ("PyTorch tutorial, float64 tensors", "float64", "table", _row(torch_tutorial(64))),
        ("torch precompute_freqs_cis (Llama ref.)", "float32", "rope", _row(torch_freqs_cis)),
    ]

    try:
        from transformers import LlamaConfig
        from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding
    except ImportError:
        SKIPPED["transformers"] = "transformers is not installed"
    else:
        LLAMA3 = {
            "rope_type": "llama3",
            "rope_theta": 500000.0,
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192,
        }
        DEFAULT = {"rope_type": "default", "rope_theta": 10000.0}
        _modules: dict[tuple[str, int], LlamaRotaryEmbedding] = {}

        def transformers_rope(params: dict, dtype: torch.dtype) -> Entry:
            """LlamaRotaryEmbedding(config).forward(x, position_ids): float32, or cast to
            x's dtype (bfloat16) as a bfloat16 model gets it."""

            def entry(k: float, j: int, d: int) -> float:
                key = (params["rope_type"], d)
                if key not in _modules:
                    config = LlamaConfig(
                        hidden_size=d,
                        num_attention_heads=1,
                        head_dim=d,
                        max_position_embeddings=131072,
                        rope_parameters=dict(params),
                    )
                    _modules[key] = LlamaRotaryEmbedding(config)
                x = torch.zeros(1, dtype=dtype)
                cos, sin = _modules[key](x, torch.tensor([[k]], dtype=torch.float64))
                half = d // 2
                src = cos if j < half else sin
                return float(src[0, 0, j % half].double())

            return entry

        for name, kind, params in (
            ("transformers Llama rotary", "rope", DEFAULT),
            ("transformers Llama 3.1 rotary", "rope-llama3", LLAMA3),
        ):
            for fmt, dtype in (("float32", torch.float32), ("bfloat16", torch.bfloat16)):
                OTHERS.append((name, fmt, kind, transformers_rope(params, dtype)))


# ---- ggml (its compiled operators, from the libggml-python wheel) -----------------

GGML_TYPE_F32 = 0
GGML_TYPE_I32 = 26
GGML_ROPE_TYPE_NORMAL = 0


class _InitParams(ctypes.Structure):
    _fields_ = [
        ("mem_size", ctypes.c_size_t),
        ("mem_buffer", ctypes.c_void_p),
        ("no_alloc", ctypes.c_bool),
    ]


def _load_ggml() -> tuple[ctypes.CDLL, ctypes.CDLL] | None:
    try:
        import libggml
    except ImportError:
        SKIPPED["ggml"] = "libggml-python (ggml's prebuilt libraries) is not installed"
        return None
    where = os.path.join(os.path.dirname(libggml.__file__), "lib64")
    if not os.path.isdir(where):
        where = os.path.join(os.path.dirname(libggml.__file__), "lib")
    try:
        base = ctypes.CDLL(os.path.join(where, "libggml-base.so"), mode=ctypes.RTLD_GLOBAL)
        cpu = ctypes.CDLL(os.path.join(where, "libggml-cpu.so"), mode=ctypes.RTLD_GLOBAL)
    except OSError as exc:  # another platform's library names, or a broken install
        SKIPPED["ggml"] = f"ggml's libraries did not load ({exc})"
        return None
    p = ctypes.c_void_p
    base.ggml_init.argtypes, base.ggml_init.restype = [_InitParams], p
    base.ggml_free.argtypes, base.ggml_free.restype = [p], None
    base.ggml_new_tensor_1d.argtypes = [p, ctypes.c_int, ctypes.c_int64]
    base.ggml_new_tensor_1d.restype = p
    i64 = ctypes.c_int64
    base.ggml_new_tensor_3d.argtypes = [p, ctypes.c_int, i64, i64, i64]
    base.ggml_new_tensor_3d.restype = p
    base.ggml_get_data.argtypes, base.ggml_get_data.restype = [p], p
    base.ggml_new_graph.argtypes, base.ggml_new_graph.restype = [p], p
    base.ggml_build_forward_expand.argtypes, base.ggml_build_forward_expand.restype = [p, p], None
    f = ctypes.c_float
    i = ctypes.c_int
    base.ggml_rope_ext.argtypes = [p, p, p, p, i, i, i, f, f, f, f, f, f]
    base.ggml_rope_ext.restype = p
    base.ggml_timestep_embedding.argtypes = [p, p, ctypes.c_int, ctypes.c_int]
    base.ggml_timestep_embedding.restype = p
    cpu.ggml_graph_compute_with_ctx.argtypes = [p, p, ctypes.c_int]
    cpu.ggml_graph_compute_with_ctx.restype = ctypes.c_int
    return base, cpu


# build(ctx) adds the inputs and the operator: (result, [(input tensor, its values)])
Build = Callable[[int], tuple[int, list[tuple[int, np.ndarray]]]]


def _ggml_run(build: Build, n: int) -> np.ndarray:
    """Make a context, let build() add its inputs and operator, compute, copy n floats out."""
    base, cpu = _GGML  # type: ignore[misc]
    ctx = base.ggml_init(_InitParams(64 * n + (1 << 20), None, False))
    if not ctx:
        raise MemoryError("ggml_init failed")
    try:
        result, inputs = build(ctx)
        for tensor, values in inputs:
            ctypes.memmove(base.ggml_get_data(tensor), values.ctypes.data, values.nbytes)
        graph = base.ggml_new_graph(ctx)
        base.ggml_build_forward_expand(graph, result)
        if cpu.ggml_graph_compute_with_ctx(ctx, graph, 1) != 0:
            raise RuntimeError("ggml_graph_compute_with_ctx failed")
        out = np.empty(n, np.float32)
        ctypes.memmove(out.ctypes.data, base.ggml_get_data(result), out.nbytes)
        return out.astype(np.float64)
    finally:
        base.ggml_free(ctx)


def ggml_rope(k: float, d: int) -> np.ndarray | None:
    """ggml_rope_ext, normal mode, theta 10000, on one head of (1, 0) pairs: the rotated
    pair is (cos, sin) exactly, so the output is ggml's own cos/sin cache."""
    if k != int(k) or k >= 2**31:
        return None
    base = _GGML[0]  # type: ignore[index]
    x = np.zeros(d, np.float32)
    x[0::2] = 1.0

    def build(ctx):
        a = base.ggml_new_tensor_3d(ctx, GGML_TYPE_F32, d, 1, 1)
        b = base.ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 1)
        # n_ctx_orig 0, theta 10000, freq_scale 1, ext_factor 0 (no YaRN), attn_factor 1
        r = base.ggml_rope_ext(
            ctx, a, b, None, d, GGML_ROPE_TYPE_NORMAL, 0, 10000.0, 1.0, 0.0, 1.0, 0.0, 0.0
        )
        return r, [(a, x), (b, np.array([int(k)], np.int32))]

    out = _ggml_run(build, d)
    return np.concatenate((out[0::2], out[1::2]))


def ggml_timestep(k: float, d: int) -> np.ndarray:
    """ggml_timestep_embedding(timesteps, d, 10000): [cos | sin], float32 timesteps."""
    base = _GGML[0]  # type: ignore[index]

    def build(ctx):
        t = base.ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 1)
        return base.ggml_timestep_embedding(ctx, t, d, 10000), [(t, np.array([k], np.float32))]

    out = _ggml_run(build, d)
    half = d // 2
    return _interleave(out[half:], out[:half])


_GGML = _load_ggml()
if _GGML is not None:
    OTHERS += [
        ("ggml timestep_embedding", "float32", "table", _row(ggml_timestep)),
        ("ggml rope_ext (normal mode)", "float32", "rope", _row(ggml_rope)),
    ]
