"""fastpe.torch: the operators against fastpe's NumPy API and float64 formulas, their
fake implementations (compile, export, opcheck), autograd (gradcheck), and the
drop-in modules against transformers', diffusers' and the PyTorch tutorial's own."""

from __future__ import annotations

import copy
import inspect
import math
import subprocess
import sys

import numpy as np
import pytest

import fastpe

# (that `import fastpe` never imports torch is checked in test_api.py, which runs
# without torch too)
torch = pytest.importorskip("torch")
ft = pytest.importorskip("fastpe.torch")


def test_older_torch_is_refused_with_an_import_error():
    code = (
        "import torch; torch.__version__ = '2.3.1'\n"
        "try:\n    import fastpe.torch\nexcept ImportError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "needs torch >= 2.4" in out.stdout and "found torch 2.3.1" in out.stdout


DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


def as_f64(t):
    return t.detach().double().numpy().copy()  # (a copy: .double() of float64 is t itself)


def ulp_close(got, want, dtype, angle=1.0):
    """Within one rounding of ``want`` (float64) in ``dtype``: 16-bit entries
    to their spacing, float32 to 2^-24 relative, float64 to 1e-14; plus the
    float64 formula's own error (w and k * w are rounded: ~1e-16 of the largest
    ``angle``)."""
    eps = {
        torch.float16: 2.0**-11,
        torch.bfloat16: 2.0**-8,
        torch.float32: 2.0**-24,
        torch.float64: 1e-14,
    }[dtype]
    tiny = {torch.float16: 2.0**-24, torch.bfloat16: 2.0**-133}.get(dtype, 0.0)
    np.testing.assert_array_less(
        np.abs(as_f64(got) - want), eps * np.abs(want) + tiny + 1e-15 * angle
    )


# ---------------------------------------------------------------- tables


@pytest.mark.parametrize("dtype", DTYPES)
def test_sinusoidal_is_the_float64_formula_rounded_once(dtype):
    t = ft.sinusoidal(33, 12, offset=-5, dtype=dtype)
    assert t.dtype == dtype and t.shape == (33, 12)
    k = np.arange(-5, 28, dtype=np.float64)[:, None]
    w = 10000.0 ** (-np.arange(0, 12, 2) / 12)
    want = np.empty((33, 12))
    want[:, 0::2], want[:, 1::2] = np.sin(k * w), np.cos(k * w)
    ulp_close(t, want, dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_sinusoidal_conventions_and_knobs_bitwise_the_numpy_api(dtype):
    npdt = "float32" if dtype == torch.float32 else "float64"
    conv = fastpe.Convention.diffusers(downscale_freq_shift=0.0, flip_sin_to_cos=True)
    for kw in [
        {"base": 500.0, "layout": "split"},
        {"convention": "fairseq"},
        {"convention": "tensor2tensor"},
        {"convention": conv},
    ]:
        got = ft.sinusoidal(9, 7 if "base" in kw else 8, offset=3, dtype=dtype, **kw)
        want = fastpe.sinusoidal(9, 7 if "base" in kw else 8, offset=3, dtype=npdt, **kw)
        np.testing.assert_array_equal(got.numpy(), want, err_msg=str(kw))


@pytest.mark.parametrize("dtype", DTYPES)
def test_sinusoidal_at_float_and_integer_positions(dtype):
    t = torch.tensor([[0.0, 0.5], [999.0, 12.25]], dtype=torch.float64)
    got = ft.sinusoidal_at(t, 10, dtype=dtype)
    assert got.shape == (2, 2, 10) and got.dtype == dtype
    w = 10000.0 ** (-np.arange(0, 10, 2) / 10)
    ang = t.numpy()[..., None] * w
    want = np.empty((2, 2, 10))
    want[..., 0::2], want[..., 1::2] = np.sin(ang), np.cos(ang)
    ulp_close(got, want, dtype, angle=999)
    ints = torch.tensor([3, 7], dtype=torch.int32)
    np.testing.assert_array_equal(
        ft.sinusoidal_at(ints, 16).numpy(), fastpe.sinusoidal(10, 16)[[3, 7]]
    )


# ---------------------------------------------------------------- add_to


@pytest.mark.parametrize("dtype", DTYPES)
def test_add_to_and_add_to_inplace(dtype):
    x = torch.linspace(-1, 1, 2 * 6 * 8, dtype=torch.float64).reshape(2, 6, 8).to(dtype)
    x0 = x.clone()
    got = ft.add_to(x, offset=torch.tensor([0, 4]), scale=2.0)
    assert torch.equal(x, x0)  # out of place
    k = np.array([0, 4])[:, None, None] + np.arange(6)[None, :, None]
    w = 10000.0 ** (-np.arange(0, 8, 2) / 8)
    pe = np.empty((2, 6, 8))
    pe[..., 0::2], pe[..., 1::2] = np.sin(k * w), np.cos(k * w)
    want = as_f64(x0) * 2.0 + pe
    ulp_close(got, want, dtype)
    assert ft.add_to_(x, offset=[0, 4], scale=2.0) is x
    assert torch.equal(x, got)


def test_add_to_inplace_on_a_column_window_and_float_positions():
    big = torch.zeros(5, 32)
    view = big[:, 8:24]
    ft.add_to_(view, positions=torch.tensor([0.5, 1.0, 2.0, 3.5, 9.0], dtype=torch.float64))
    want = fastpe.sinusoidal_at(np.array([0.5, 1.0, 2.0, 3.5, 9.0]), 16)
    np.testing.assert_array_equal(big[:, 8:24].numpy(), want)
    assert not big[:, :8].any() and not big[:, 24:].any()


# ---------------------------------------------------------------- RoPE


def rotate_half(x):
    h = x.shape[-1] // 2
    return np.concatenate([-x[..., h:], x[..., :h]], axis=-1)


def rope_truth(x, positions, w, attention=1.0, seq_axis=-2):
    """float64 rotation of x (..., seq, ..., d) at positions (seq,) or (batch, seq)."""
    ang = np.asarray(positions, np.float64)[..., None] * w  # (.., seq, nf)
    cos = np.concatenate([np.cos(ang)] * 2, -1) * attention
    sin = np.concatenate([np.sin(ang)] * 2, -1) * attention
    if cos.ndim == 3:  # (batch, seq, d) -> (batch, 1, seq, d) for (batch, heads, seq, d)
        cos, sin = cos[:, None], sin[:, None]
    if seq_axis == -3:
        cos, sin = np.moveaxis(cos, -2, -3), np.moveaxis(sin, -2, -3)
    return x * cos + rotate_half(x) * sin


@pytest.mark.parametrize("dtype", DTYPES)
def test_rope_cache_is_cos_and_sin_of_exact_angles(dtype):
    pos = torch.tensor([[0, 1, 2, 3000], [5, 6, 7, 8]])
    cos, sin = ft.rope_cache(
        16, {"rope_theta": 500.0}, positions=pos, dtype=dtype, precision="float64"
    )
    assert cos.shape == sin.shape == (2, 4, 16) and cos.dtype == dtype
    w = 500.0 ** (-np.arange(0, 16, 2) / 16)
    ang = pos.numpy()[..., None].astype(np.float64) * w
    ulp_close(cos, np.concatenate([np.cos(ang)] * 2, -1), dtype, angle=3000)
    ulp_close(sin, np.concatenate([np.sin(ang)] * 2, -1), dtype, angle=3000)
    c2, s2 = ft.rope_cache(
        16, {"rope_theta": 500.0}, seq_len=4, offset=5, dtype=dtype, precision="float64"
    )
    assert torch.equal(c2, cos[1]) and torch.equal(s2, sin[1])


def test_rope_cache_small_call_path_is_the_general_path():
    # int64 positions take the small-call path, int32 ones the general path: the
    # same values, and the same error for a position out of range
    w = ft._frequencies(16, {"rope_type": "yarn", "factor": 4.0,
                             "original_max_position_embeddings": 64}, None, None, None,
                        "float32")  # fmt: skip
    for dtype in (torch.float32, torch.float64, torch.float16):
        for layout in ("half", "interleaved"):
            args = (*w, layout, dtype)
            pos = torch.tensor([[0, 5, 70], [3, 2, 1000]])
            fast = ft._cache_impl(pos, 0, 0, *args)
            general = ft._cache_impl(pos.to(torch.int32), 0, 0, *args)
            for a, b in zip(fast, general, strict=True):
                assert a.shape == (2, 3, 16) and torch.equal(a, b)
    far = torch.tensor([2**60])
    for dtype in (torch.float32, torch.bfloat16):  # (bfloat16: the general path)
        with pytest.raises(ValueError, match="positions must stay within"):
            ft._cache_impl(far, 0, 0, *w, "half", dtype)


def test_rope_cache_bitwise_the_numpy_api():
    params = {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
              "original_max_position_embeddings": 64}  # fmt: skip
    pos = torch.tensor([3, 70, 1000])
    for layout in ("half", "interleaved"):
        got = ft.rope_cache(32, params, positions=pos, layout=layout)
        want = fastpe.rope_cache(32, params, positions=pos.numpy(), layout=layout)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_array_equal(g.numpy(), w)


@pytest.mark.parametrize("dtype", DTYPES)
def test_apply_rope_in_place_on_a_transposed_view(dtype):
    # transformers' layout: (batch, seq, heads * d) viewed as (batch, heads, seq, d)
    g = torch.Generator().manual_seed(1)
    proj_q = torch.randn(2, 5, 4 * 8, generator=g, dtype=torch.float64)
    proj_k = torch.randn(2, 5, 2 * 8, generator=g, dtype=torch.float64)
    q = proj_q.to(dtype).view(2, 5, 4, 8).transpose(1, 2)
    k = proj_k.to(dtype).view(2, 5, 2, 8).transpose(1, 2)
    q0, k0 = as_f64(q), as_f64(k)
    pos = torch.tensor([[0, 1, 2, 3, 4], [7, 8, 9, 10, 11]])
    out = ft.apply_rope_(q, k, positions=pos, attention_factor=1.5, precision="float64")
    assert out[0] is q and out[1] is k
    w = 10000.0 ** (-np.arange(0, 8, 2) / 8)
    ulp_close(q, rope_truth(q0, pos.numpy(), w, 1.5), dtype, angle=20)
    ulp_close(k, rope_truth(k0, pos.numpy(), w, 1.5), dtype, angle=20)


def test_apply_rope_out_of_place_bitwise_the_numpy_api():
    g = torch.Generator().manual_seed(2)
    q = torch.randn(3, 6, 2, 12, generator=g)  # (batch, seq, heads, d)
    q0 = q.clone()
    params = {"rope_type": "linear", "factor": 2.0, "partial_rotary_factor": 0.5}
    for kw in [
        {"offset": 4},
        {"offset": torch.tensor([0, 3, 9])},
        {"positions": torch.tensor([5, 1, 2, 3, 4, 0])},
        {"layout": "interleaved"},
    ]:
        got = ft.apply_rope(q, rope_parameters=params, seq_axis=-3, **kw)
        assert torch.equal(q, q0)
        want = q0.numpy().copy()
        npkw = {n: v.numpy() if isinstance(v, torch.Tensor) else v for n, v in kw.items()}
        fastpe.apply_rope(want, rope_parameters=params, seq_axis=-3, **npkw)
        np.testing.assert_array_equal(got.numpy(), want, err_msg=str(kw))


# ---------------------------------------------------------------- autograd


def _gradcheck(fn, *inputs):
    assert torch.autograd.gradcheck(fn, inputs, eps=1e-6, atol=1e-9, rtol=1e-7)
    assert torch.autograd.gradgradcheck(fn, inputs, eps=1e-6, atol=1e-9, rtol=1e-7)


@pytest.mark.parametrize(
    "kw",
    [
        {"offset": 3},
        {"offset": torch.tensor([2, -7])},
        {"positions": torch.tensor([[4, 0, 9], [1, 1, 2]])},
        {"layout": "interleaved", "attention_factor": 0.75},
        {"rope_parameters": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                             "high_freq_factor": 4.0, "original_max_position_embeddings": 16}},
    ],
)  # fmt: skip
def test_apply_rope_gradcheck(kw):
    g = torch.Generator().manual_seed(3)
    q = torch.randn(2, 2, 3, 8, generator=g, dtype=torch.float64, requires_grad=True)
    k = torch.randn(2, 1, 3, 8, generator=g, dtype=torch.float64, requires_grad=True)
    _gradcheck(lambda a, b: ft.apply_rope(a, b, **kw), q, k)


@pytest.mark.parametrize("scale", [1.0, -2.5])
def test_add_to_gradcheck(scale):
    x = torch.randn(2, 4, 6, dtype=torch.float64, requires_grad=True)
    _gradcheck(lambda a: ft.add_to(a, offset=torch.tensor([1, 5]), scale=scale), x)


def test_rope_training_gradient_matches_the_formula():
    # a projection, a rotation and a loss: fastpe's gradients are the float64
    # formula's (q * cos + rotate_half(q) * sin) within float32 rounding
    g = torch.Generator().manual_seed(4)
    x = torch.randn(2, 5, 16, generator=g)
    lin = torch.nn.Linear(16, 32)
    target = torch.randn(2, 2, 5, 16, generator=g)
    pos = torch.arange(5) + 100

    def step(rotate):
        lin.zero_grad()
        q = lin(x).view(2, 5, 2, 16).transpose(1, 2)
        loss = ((rotate(q) - target) ** 2).sum()
        loss.backward()
        return lin.weight.grad.clone(), lin.bias.grad.clone()

    w = torch.tensor(10000.0 ** (-np.arange(0, 16, 2) / 16))
    ang = (pos[:, None].double() * w).float()
    cos, sin = torch.cat([ang.double().cos()] * 2, -1), torch.cat([ang.double().sin()] * 2, -1)

    def theirs(q):
        h = q.shape[-1] // 2
        rot = torch.cat([-q[..., h:], q[..., :h]], -1)
        return q * cos.float() + rot * sin.float()

    ours = step(lambda q: ft.apply_rope(q, positions=pos))
    ref = step(theirs)
    for a, b in zip(ours, ref, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------- operators


def _opcheck_cases():
    f64 = torch.float64
    conv = ft._knobs("vaswani", 10000.0, "interleaved")
    q = torch.randn(2, 3, 4, 8, dtype=f64)
    freqs = [1.0, 0.1, 0.01, 0.001]
    return [
        (ft._sinusoidal_op, (5, 6, 2, torch.float32, *conv)),
        (ft._sinusoidal_at_op, (torch.tensor([0.5, 3.0]), 6, f64, *conv)),
        (ft._add_to_op, (torch.randn(2, 3, 4, dtype=f64, requires_grad=True), 1,
                         torch.tensor([0, 2]), None, 2.0, *conv)),
        (ft._add_to_inplace_op, (torch.randn(2, 3, 4), 0, None, torch.tensor([1, 2, 3]),
                                 1.0, *conv)),
        (ft._rope_cache_op, (torch.tensor([[1, 2, 3]]), 0, 0, freqs, 1.0, "half", f64)),
        (ft._rope_cache_op, (None, 4, 7, freqs, 1.25, "interleaved", torch.float32)),
        (ft._apply_rope_op, (q.clone().requires_grad_(), None, 2, None, -2, "half", freqs,
                             1.0)),
        (ft._apply_rope_op, (q.clone().requires_grad_(), torch.tensor([3, 1, 2, 0]), 0,
                             None, -2, "interleaved", freqs, 0.5)),
        (ft._apply_rope_inplace_op, (q.clone(), torch.randn(2, 1, 4, 8, dtype=f64), None, 0,
                                     torch.tensor([5, 9]), -2, "half", freqs, 1.0)),
    ]  # fmt: skip


@pytest.mark.parametrize("case", range(len(_opcheck_cases())))
def test_opcheck(case):
    op, args = _opcheck_cases()[case]
    torch.library.opcheck(op, args)


def test_fullgraph_compile_of_every_operator_has_no_graph_break():
    def f(x, q, k, pos):
        pe = ft.sinusoidal(x.shape[1], x.shape[2], dtype=x.dtype)
        x = ft.add_to(x + pe, offset=2) + ft.sinusoidal_at(pos.double(), x.shape[2])
        ft.add_to_(x, scale=0.5)
        cos, sin = ft.rope_cache(8, positions=pos)
        q2, k2 = ft.apply_rope(q, k, positions=pos)
        ft.apply_rope_(q, k, offset=3)
        return x, cos, sin, q2, k2, q, k

    args = (torch.randn(2, 4, 8), torch.randn(2, 2, 4, 8), torch.randn(2, 1, 4, 8),
            torch.tensor([0, 1, 5, 9]))  # fmt: skip
    explained = torch._dynamo.explain(f)(*[a.clone() for a in args])
    assert explained.graph_break_count == 0, explained.break_reasons
    want = f(*[a.clone() for a in args])
    got = torch.compile(f, fullgraph=True, backend="aot_eager")(*[a.clone() for a in args])
    for g, w in zip(got, want, strict=True):
        assert torch.equal(g, w)


def test_export_keeps_the_operators():
    class M(torch.nn.Module):
        def forward(self, x, q, pos):
            cos, sin = ft.rope_cache(8, positions=pos)
            return ft.add_to(x, positions=pos), ft.apply_rope(q, positions=pos), cos, sin

    args = (torch.randn(2, 3, 8), torch.randn(1, 2, 3, 8), torch.tensor([4, 0, 2]))
    ep = torch.export.export(M(), args)
    names = {str(n.target) for n in ep.graph.nodes if n.op == "call_function"}
    assert {
        "fastpe.add_to.default",
        "fastpe.apply_rope.default",
        "fastpe.rope_cache.default",
    } <= names
    for g, w in zip(ep.module()(*args), M()(*args), strict=True):
        assert torch.equal(g, w)


# ---------------------------------------------------------------- refusals


def fake_cuda(*shape, dtype=torch.float32):
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

    mode = FakeTensorMode(allow_non_fake_inputs=True)
    return FakeTensor(mode, torch.empty(*shape, dtype=dtype, device="meta"), torch.device("cuda"))


def test_other_devices_are_refused_naming_the_device():
    with pytest.raises(ValueError, match=r"device cuda.*CPU"):
        ft.apply_rope(fake_cuda(1, 2, 3, 8))
    with pytest.raises(ValueError, match=r"device cuda.*CPU"):
        ft.add_to_(fake_cuda(2, 3, 8))
    # the operators' own implementations check too (a tensor they are handed
    # by the dispatcher for a device without fake tensors)
    for impl, args in [
        (ft._add_to_impl, (torch.empty(2, 3, device="meta"), 0, None, None, 1.0)),
        (ft._apply_rope_impl, (torch.empty(1, 3, 4, device="meta"), None, 0, None, -2, "half")),
    ]:
        with pytest.raises(ValueError, match="device meta"):
            impl(*args, *([None] * (len(inspect.signature(impl).parameters) - len(args))))


def test_meta_tensors_get_shapes_only():
    # (shape inference: the fake implementations answer, nothing is computed)
    pos = torch.zeros(2, 3, dtype=torch.int64, device="meta")
    for t in (*ft.rope_cache(8, positions=pos), ft.sinusoidal_at(pos, 4), ft.add_to(pos.float())):
        assert t.device.type == "meta"
    assert ft.rope_cache(8, positions=pos)[0].shape == (2, 3, 8)
    assert ft.apply_rope(torch.zeros(1, 3, 8, device="meta"), positions=pos[0]).shape == (1, 3, 8)


@pytest.mark.parametrize(
    "call, exc, match",
    [
        (lambda: ft.sinusoidal(4, 8, dtype=torch.int32), TypeError, "dtype"),
        (lambda: ft.sinusoidal(-1, 8), ValueError, "seq_len"),
        (lambda: ft.add_to(torch.zeros(2, 3, dtype=torch.int64)), TypeError, "x must have dtype"),
        (lambda: ft.add_to(torch.zeros(2, 3), scale=math.inf), ValueError, "scale"),
        (lambda: ft.apply_rope(torch.zeros(1, 3, 8), positions=torch.tensor([0.5, 1, 2])),
         TypeError, "positions must be an integer"),
        (lambda: ft.rope_cache(8, {"rope_type": "dynamic", "factor": 2.0}, seq_len=3),
         ValueError, "dynamic"),
        (lambda: ft.rope_cache(8, seq_len=3, offset=2**61), ValueError, "positions must stay"),
        (lambda: ft.apply_rope_(torch.zeros(1, 3, 8, requires_grad=True)), ValueError,
         "fastpe.torch.apply_rope"),
        (lambda: ft.add_to_(torch.zeros(1, 3, 8, requires_grad=True)), ValueError,
         "fastpe.torch.add_to"),
    ],
)  # fmt: skip
def test_bad_arguments(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_refused_in_place_calls_leave_the_tensor_unchanged():
    x = torch.randn(2, 3, 8)
    x0 = x.clone()
    with pytest.raises(ValueError):
        ft.add_to_(x, offset=2**62)
    with pytest.raises(ValueError):
        ft.apply_rope_(x.view(2, 3, 1, 8), offset=torch.tensor([0, 2**62]), seq_axis=1)
    assert torch.equal(x, x0)


# ---------------------------------------------------------------- modules


def tiny_llama(**extra):
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=128,
        max_position_embeddings=512,
        **extra,
    )
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).eval()
    patched = copy.deepcopy(model)
    return model, patched


@pytest.fixture(scope="module")
def llama():
    model, patched = tiny_llama()
    assert ft.patch_model(patched) == ["model.rotary_emb"]
    assert isinstance(patched.model.rotary_emb, ft.RotaryEmbedding)
    return model, patched


IDS = torch.tensor([[5, 17, 99, 3, 64, 2, 120, 7, 7, 31], [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]])


def test_patched_llama_logits_and_greedy_tokens(llama):
    model, patched = llama
    with torch.no_grad():
        torch.testing.assert_close(patched(IDS).logits, model(IDS).logits, rtol=1e-5, atol=1e-5)
    a = model.generate(IDS, max_new_tokens=20, do_sample=False)
    b = patched.generate(IDS, max_new_tokens=20, do_sample=False)
    assert a.shape == (2, 30) and torch.equal(a, b)


def exported_targets(ep):
    return {str(n.target) for n in ep.graph.nodes if n.op == "call_function"}


def exported_tables(ep):
    """The shapes of the tensor constants an exported program holds (with the
    rotary module's inv_freq, a non-persistent buffer)."""
    return [tuple(t.shape) for t in ep.constants.values() if isinstance(t, torch.Tensor)]


def test_patched_llama_compiles_without_graph_break_and_exports(llama):
    model, patched = llama
    explained = torch._dynamo.explain(patched)(IDS, use_cache=False)
    assert explained.graph_break_count == 0, explained.break_reasons
    compiled = torch.compile(patched, fullgraph=True, backend="aot_eager")
    with torch.no_grad():
        want = model(IDS, use_cache=False).logits
        torch.testing.assert_close(compiled(IDS, use_cache=False).logits, want,
                                   rtol=1e-5, atol=1e-5)  # fmt: skip
        ep = torch.export.export(patched, (IDS,), {"use_cache": False})
        # the exported program reads the rotary table (max_position_embeddings rows)
        assert not any(t.startswith("fastpe.") for t in exported_targets(ep))
        assert (2, 512, 16) in exported_tables(ep)
        torch.testing.assert_close(ep.module()(IDS, use_cache=False).logits, want,
                                   rtol=1e-5, atol=1e-5)  # fmt: skip


def test_patched_llama_training_step_gradients(llama):
    model, patched = llama
    grads = []
    for m in (model, patched):
        m.train()
        m.zero_grad()
        m(IDS, labels=IDS).loss.backward()
        grads.append({n: p.grad.clone() for n, p in m.named_parameters()})
        m.zero_grad()
        m.eval()
    assert grads[0].keys() == grads[1].keys()
    for name, g in grads[0].items():
        torch.testing.assert_close(grads[1][name], g, rtol=1e-4, atol=1e-6, msg=name)


@pytest.mark.parametrize(
    "params",
    [
        {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
         "high_freq_factor": 4.0, "original_max_position_embeddings": 64},
        {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
         "original_max_position_embeddings": 64},
        {"rope_type": "linear", "rope_theta": 10000.0, "factor": 2.0},
    ],
)  # fmt: skip
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rotary_embedding_matches_transformers(params, dtype):
    model, _ = tiny_llama(rope_parameters=params)
    theirs = model.model.rotary_emb
    ours = ft.RotaryEmbedding(model.config)
    x = torch.zeros(1, dtype=dtype)
    pos = torch.tensor([[0, 1, 2, 300], [7, 8, 9, 10]])
    for a, b in zip(ours(x, pos), theirs(x, pos), strict=True):
        assert a.dtype == b.dtype == dtype and a.shape == b.shape
        # theirs rounds the angle to float32 first: 2^-24 of the angle, plus a rounding
        tol = 2.0**-8 if dtype == torch.bfloat16 else 300 * 2.0**-23
        torch.testing.assert_close(a.float(), b.float(), rtol=0, atol=tol)


def test_patch_model_carries_a_rotary_module_s_own_frequencies():
    model, patched = tiny_llama()
    for m in (model, patched):  # a model that set its own frequencies
        m.model.rotary_emb.inv_freq = m.model.rotary_emb.inv_freq * 2
    assert ft.patch_model(patched) == ["model.rotary_emb"]
    # the new module rotates by what the buffer holds, not by its config's rule
    assert torch.equal(patched.model.rotary_emb.inv_freq, model.model.rotary_emb.inv_freq)
    with torch.no_grad():
        torch.testing.assert_close(patched(IDS).logits, model(IDS).logits, rtol=1e-5, atol=1e-5)


def test_patch_model_reports_what_it_left_alone():
    _, patched = tiny_llama()
    patched.model.rotary_emb.inv_freq = patched.model.rotary_emb.inv_freq[:4]
    with pytest.warns(UserWarning, match="left 1 rotary module.*model.rotary_emb: 4 frequencies"):
        report = ft.patch_model(patched)
    assert report == [] and list(report.skipped) == ["model.rotary_emb"]
    assert "4 frequencies" in report.skipped["model.rotary_emb"]


# ---------------------------------------------------------------- compiled table

YARN = {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
        "original_max_position_embeddings": 16}  # fmt: skip


def graph_targets(fn, *args):
    """Call the compiled fn (aot_eager) and return its result and the names of the
    functions its traced graphs call."""
    seen = set()

    def backend(gm, example_inputs):
        seen.update(str(n.target) for n in gm.graph.nodes if n.op == "call_function")
        return torch._dynamo.backends.debugging.aot_eager(gm, example_inputs)

    torch._dynamo.reset()
    return torch.compile(fn, fullgraph=True, backend=backend)(*args), seen


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_rotary_table_is_bitwise_the_numpy_api(dtype, layout):
    rot = ft.RotaryEmbedding(head_dim=16, rope_parameters=YARN, table_size=300, layout=layout)
    cos, sin = rot.table(dtype)
    assert cos.shape == sin.shape == (300, 16) and cos.dtype == sin.dtype == dtype
    if dtype == torch.bfloat16:
        np_dtype = pytest.importorskip("ml_dtypes").bfloat16
    else:
        np_dtype = {torch.float16: np.float16, torch.float32: np.float32}.get(dtype, np.float64)
    pos = np.arange(300)
    want = fastpe.rope_cache(16, YARN, positions=pos, layout=layout, dtype=np_dtype)
    for got, w in zip((cos, sin), want, strict=True):
        bits = got.view(torch.int16) if dtype.itemsize == 2 else got
        np.testing.assert_array_equal(bits.numpy(), w.view(bits.numpy().dtype))
    again = rot.table(dtype)  # computed once: the same memory
    assert again[0].data_ptr() == cos.data_ptr() and again[1].data_ptr() == sin.data_ptr()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_compiled_rotary_embedding_reads_the_table(dtype):
    rot = ft.RotaryEmbedding(head_dim=16, rope_parameters=YARN, max_position_embeddings=64)
    assert rot.table_size == 64
    x = torch.zeros(1, dtype=dtype)
    pos = torch.tensor([[0, 1, 63, 17], [5, 40, 2, 9]])
    (cos, sin), targets = graph_targets(rot, x, pos)
    assert not any(t.startswith("fastpe.") for t in targets), targets
    want = rot(x, pos)  # eager: the operator's code
    assert torch.equal(cos, want[0]) and torch.equal(sin, want[1])
    assert cos.dtype == dtype and cos.shape == (2, 4, 16)
    for ids in (pos.to(torch.uint8), pos.to(torch.int32)):  # integers as the operator reads them
        (c, s), targets = graph_targets(rot, x, ids)
        assert not any(t.startswith("fastpe.") for t in targets), targets
        assert torch.equal(c, want[0]) and torch.equal(s, want[1])


BAD_POSITIONS = [64, 65, -1, -64, 2**40]


# (inductor's own code warns of a deprecated torch.jit function while it compiles)
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_compiled_table_refuses_positions_outside_it():
    rot = ft.RotaryEmbedding(head_dim=16, rope_parameters=YARN, table_size=64)
    x, good = torch.zeros(1), torch.tensor([[0, 63]])
    for backend in ("aot_eager", "inductor"):  # inductor: its generated bounds check
        torch._dynamo.reset()
        compiled = torch.compile(rot, fullgraph=True, backend=backend)
        cos, sin = compiled(x, good)
        assert torch.equal(cos, rot(x, good)[0]) and torch.equal(sin, rot(x, good)[1])
        for bad in BAD_POSITIONS:
            with pytest.raises((RuntimeError, IndexError), match="out of bounds"):
                compiled(x, torch.tensor([[3, bad]]))


def test_compiled_rotary_embedding_without_a_table_calls_the_operator():
    x, pos = torch.zeros(1), torch.tensor([[10**6, -7]])
    for rot in (
        ft.RotaryEmbedding(head_dim=16, rope_parameters=YARN, max_position_embeddings=64,
                           table_size=0),
        ft.RotaryEmbedding(head_dim=16, rope_parameters=YARN),  # no max_position_embeddings
    ):  # fmt: skip
        assert rot.table_size == 0
        (cos, sin), targets = graph_targets(rot, x, pos)
        assert "fastpe.rope_cache.default" in targets
        want = fastpe.rope_cache(16, YARN, positions=pos.numpy())
        np.testing.assert_array_equal(cos.numpy(), want[0])
        np.testing.assert_array_equal(sin.numpy(), want[1])


class Rotary(torch.nn.Module):
    """A rotary module inside a model (export traces a module's forward)."""

    def __init__(self, rot):
        super().__init__()
        self.rot = rot

    def forward(self, x, pos):
        return self.rot(x, pos)


@pytest.mark.parametrize("strict", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_exported_rotary_embedding_reads_the_table(dtype, strict):
    rot = ft.RotaryEmbedding(head_dim=16, rope_parameters=YARN, table_size=64)
    x = torch.zeros(1, dtype=dtype)
    pos = torch.tensor([[0, 1, 63, 17], [5, 40, 2, 9]])
    other = torch.tensor([[3, 60, 0, 1], [2, 2, 2, 2]])  # (the exported shape)
    for int_dtype in (torch.uint8, torch.int32, torch.int64):  # (the exported dtype)
        ep = torch.export.export(Rotary(rot), (x, pos.to(int_dtype)), strict=strict)
        assert not any(t.startswith("fastpe.") for t in exported_targets(ep))
        (table,) = [
            t for t in ep.constants.values() if isinstance(t, torch.Tensor) and t.ndim == 3
        ]
        assert table.shape == (2, 64, 16) and table.dtype == dtype
        want = fastpe.rope_cache(16, YARN, positions=np.arange(64), dtype=np.float64)
        for half, w in zip(table, want, strict=True):  # fastpe's values, rounded once
            assert torch.equal(half, torch.from_numpy(w).to(dtype))
        run = ep.module()
        for ids in (pos, other):
            cos, sin = run(x, ids.to(int_dtype))
            want = ft.rope_cache(16, YARN, positions=ids, dtype=dtype)
            assert cos.dtype == dtype and torch.equal(cos, want[0]) and torch.equal(sin, want[1])
    for bad in BAD_POSITIONS:  # never a silent read outside the table
        with pytest.raises(IndexError, match="out of bounds"):
            run(x, torch.tensor([[3, bad, 0, 1], [2, 2, 2, 2]]))  # (int64, as exported last)


def test_exported_rotary_embedding_without_a_table_calls_the_operator():
    rot = ft.RotaryEmbedding(head_dim=16, rope_parameters=YARN, max_position_embeddings=64,
                             table_size=0)  # fmt: skip
    x, pos = torch.zeros(1), torch.tensor([[10**6, -7]])
    ep = torch.export.export(Rotary(rot), (x, pos))
    assert "fastpe.rope_cache.default" in exported_targets(ep)
    assert exported_tables(ep) == [(8,), (8,)]  # inv_freq and original_inv_freq
    cos, sin = ep.module()(x, pos)
    want = fastpe.rope_cache(16, YARN, positions=pos.numpy())
    np.testing.assert_array_equal(cos.numpy(), want[0])
    np.testing.assert_array_equal(sin.numpy(), want[1])


def test_compiled_rotary_embedding_compiles_once_for_any_position():
    # a decoding loop's positions change at every step: no guard may depend on them
    rot = ft.RotaryEmbedding(head_dim=16, rope_parameters=YARN, table_size=64)
    x = torch.zeros(1)
    torch._dynamo.reset()
    counter = torch._dynamo.testing.CompileCounter()
    compiled = torch.compile(rot, fullgraph=True, backend=counter)
    for p in (0, 1, 17, 63):
        cos, sin = compiled(x, torch.tensor([[p]]))
        want = rot(x, torch.tensor([[p]]))
        assert torch.equal(cos, want[0]) and torch.equal(sin, want[1])
    assert counter.frame_count == 1


@pytest.mark.parametrize(
    "size, exc, match",
    [(-1, ValueError, "table_size"), (1.5, TypeError, "table_size"),
     (2**41, ValueError, "table_size")],
)  # fmt: skip
def test_bad_table_size(size, exc, match):
    with pytest.raises(exc, match=match):
        ft.RotaryEmbedding(head_dim=16, table_size=size)


def test_apply_rotary_pos_emb_matches_transformers():
    m = pytest.importorskip("transformers.models.llama.modeling_llama")
    g = torch.Generator().manual_seed(5)
    q, k = torch.randn(2, 4, 6, 16, generator=g), torch.randn(2, 2, 6, 16, generator=g)
    cos, sin = torch.randn(2, 6, 16, generator=g), torch.randn(2, 6, 16, generator=g)
    for a, b in zip(ft.apply_rotary_pos_emb(q, k, cos, sin),
                    m.apply_rotary_pos_emb(q, k, cos, sin), strict=True):  # fmt: skip
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)
    qt, kt = q.transpose(1, 2), k.transpose(1, 2)
    ours = ft.apply_rotary_pos_emb(qt, kt, cos, sin, unsqueeze_dim=2)
    theirs = m.apply_rotary_pos_emb(qt, kt, cos, sin, unsqueeze_dim=2)
    for a, b in zip(ours, theirs, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)


class TutorialPositionalEncoding(torch.nn.Module):
    """The PyTorch tutorial's module, as published (float64 here, for the truth)."""

    def __init__(self, d_model, dropout=0.1, max_len=5000, dtype=torch.float32):
        super().__init__()
        self.dropout = torch.nn.Dropout(p=dropout)
        position = torch.arange(max_len, dtype=dtype).unsqueeze(1)
        div_term = torch.exp(
            torch.arange(0, d_model, 2, dtype=dtype) * (-math.log(10000.0) / d_model)
        )
        pe = torch.zeros(max_len, 1, d_model, dtype=dtype)
        pe[:, 0, 0::2] = torch.sin(position * div_term)
        pe[:, 0, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe)

    def forward(self, x):
        x = x + self.pe[: x.size(0)]
        return self.dropout(x)


def test_sinusoidal_positional_embedding_is_the_tutorials_module():
    ours = ft.SinusoidalPositionalEmbedding(32, dropout=0.0, max_len=600).eval()
    truth = TutorialPositionalEncoding(32, dropout=0.0, max_len=600, dtype=torch.float64)
    x = torch.randn(500, 2, 32)
    want = x.double() + truth.pe[:500]
    np.testing.assert_array_less((ours(x).double() - want).abs().numpy(), 2.0**-21)
    # state dicts load both ways
    theirs = TutorialPositionalEncoding(32, dropout=0.0, max_len=600)
    theirs.load_state_dict(ours.state_dict())
    ours.load_state_dict(TutorialPositionalEncoding(32, max_len=600).state_dict())


@pytest.mark.parametrize(
    "flip, shift, scale", [(False, 1.0, 1.0), (True, 0.0, 1.0), (True, 1.0, 25.0)]
)
def test_timesteps_matches_diffusers(flip, shift, scale):
    emb = pytest.importorskip("diffusers.models.embeddings")
    t = torch.tensor([0.0, 1.0, 10.5, 999.0])
    theirs = emb.Timesteps(64, flip, shift, scale=scale)(t)
    ours = ft.Timesteps(64, flip, shift, scale=scale)(t)
    assert ours.dtype == theirs.dtype == torch.float32 and ours.shape == (4, 64)
    # theirs rounds the angle t * w (up to ~1000 * 25 rad) to float32
    torch.testing.assert_close(ours, theirs, rtol=0, atol=2e-3)
    conv = fastpe.Convention.diffusers(
        downscale_freq_shift=shift, scale=scale, flip_sin_to_cos=flip
    )
    f64 = ft.sinusoidal_at(t.double(), 64, dtype=torch.float64, convention=conv)
    np.testing.assert_array_less((ours.double() - f64).abs().numpy(), 2.0**-24 * 1.01)
