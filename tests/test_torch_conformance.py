"""fastpe.torch as a drop-in for transformers' rotary modules, on tiny random
models of each family: meta construction, to_empty + init_weights, save and
load, dtype moves, every rope_type, partial rotary, M-RoPE and compiled
generation with a static cache, patched and unpatched side by side."""

from __future__ import annotations

import copy
import importlib

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
ft = pytest.importorskip("fastpe.torch")

SMALL = {
    "hidden_size": 64,
    "intermediate_size": 96,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 96,
    "max_position_embeddings": 64,
}

# family: (config class, model class, extra config, where the rotary module is)
FAMILIES = {
    "llama": ("LlamaConfig", "LlamaForCausalLM", {}, "model.rotary_emb"),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", {}, "model.rotary_emb"),
    "mistral": ("MistralConfig", "MistralForCausalLM", {}, "model.rotary_emb"),
    "gemma": ("GemmaConfig", "GemmaForCausalLM", {"head_dim": 16}, "model.rotary_emb"),
    "phi3": ("Phi3Config", "Phi3ForCausalLM",
             {"rope_parameters": {"rope_type": "default", "rope_theta": 10000.0,
                                  "partial_rotary_factor": 0.5},
              "pad_token_id": 0}, "model.rotary_emb"),
    "gpt_neox": ("GPTNeoXConfig", "GPTNeoXForCausalLM",
                 {"rope_parameters": {"rope_type": "default", "rope_theta": 10000.0,
                                      "partial_rotary_factor": 0.25}}, "gpt_neox.rotary_emb"),
}  # fmt: skip
# the M-RoPE text models: (config class, model class, mrope_section, section layout)
MROPE = {
    "qwen2_vl": ("Qwen2VLTextConfig", "Qwen2VLTextModel", [2, 3, 3], "contiguous"),
    "qwen2_5_vl": ("Qwen2_5_VLTextConfig", "Qwen2_5_VLTextModel", [2, 3, 3], "contiguous"),
    "qwen3_vl": ("Qwen3VLTextConfig", "Qwen3VLTextModel", [4, 2, 2], "interleaved"),
}
IDS = torch.tensor([[5, 17, 90, 3, 64, 2, 80, 7, 7, 31], [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]])


def config_of(family, **extra):
    name, _, family_extra, _ = FAMILIES[family]
    return getattr(transformers, name)(**{**SMALL, **family_extra, **extra})


def build(family, config=None):
    """A tiny random model of ``family`` and a patched copy of it."""
    config = config or config_of(family)
    torch.manual_seed(0)
    model = getattr(transformers, FAMILIES[family][1])(config).eval()
    patched = copy.deepcopy(model)
    report = ft.patch_model(patched)
    assert report == [FAMILIES[family][3]] and report.skipped == {}
    return model, patched


def logits_agree(a, b, ids=IDS, tol=1e-5):
    with torch.no_grad():
        torch.testing.assert_close(b(ids).logits, a(ids).logits, rtol=tol, atol=tol)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_patched_logits_and_greedy_tokens_agree(family):
    model, patched = build(family)
    rot = patched.get_submodule(FAMILIES[family][3])
    assert isinstance(rot, ft.RotaryEmbedding)
    logits_agree(model, patched)
    a = model.generate(IDS, max_new_tokens=8, do_sample=False, pad_token_id=0)
    b = patched.generate(IDS, max_new_tokens=8, do_sample=False, pad_token_id=0)
    assert torch.equal(a, b)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_meta_model_patches_and_materialises(family):
    model, _ = build(family)
    config = model.config
    with torch.device("meta"):
        meta = getattr(transformers, FAMILIES[family][1])(config)
    assert ft.patch_model(meta) == [FAMILIES[family][3]]
    rot = meta.get_submodule(FAMILIES[family][3])
    assert isinstance(rot, ft.RotaryEmbedding) and rot.inv_freq.device.type == "meta"
    meta.to_empty(device="cpu")
    meta.init_weights()  # transformers' _init_weights fills the rotary buffers
    theirs = model.get_submodule(FAMILIES[family][3])
    assert torch.equal(rot.inv_freq, theirs.inv_freq)
    assert torch.equal(rot.original_inv_freq, theirs.original_inv_freq)
    meta.load_state_dict(model.state_dict())
    logits_agree(model, meta.eval())


def test_from_pretrained_patched_as_built_agrees(tmp_path, monkeypatch):
    model, _ = build("llama")
    model.save_pretrained(tmp_path)
    built = transformers.PreTrainedModel.post_init

    def post_init(self):  # every model patched as it is built (on the meta device)
        built(self)
        ft.patch_model(self)

    monkeypatch.setattr(transformers.PreTrainedModel, "post_init", post_init)
    loaded = transformers.LlamaForCausalLM.from_pretrained(tmp_path).eval()
    assert isinstance(loaded.model.rotary_emb, ft.RotaryEmbedding)
    assert torch.equal(loaded.model.rotary_emb.inv_freq, model.model.rotary_emb.inv_freq)
    logits_agree(model, loaded)


def test_state_dicts_are_the_originals():
    model, patched = build("llama")
    assert model.state_dict().keys() == patched.state_dict().keys()
    rot = patched.model.rotary_emb
    assert {n for n, _ in rot.named_buffers()} == {"inv_freq", "original_inv_freq"}
    assert rot.state_dict() == {}  # non-persistent, as transformers' buffers
    patched.load_state_dict(model.state_dict(), strict=True)
    model.load_state_dict(patched.state_dict(), strict=True)


def test_the_buffer_is_what_it_rotates_by():
    _, patched = build("llama")
    rot = patched.model.rotary_emb
    x, pos = torch.zeros(1), torch.tensor([[0, 1, 5, 40]])
    cos, _ = rot(x, pos)
    with torch.no_grad():
        rot.inv_freq.mul_(0.5)  # written in place: read again
    cos2, _ = rot(x, pos)
    want = torch.cos(pos[..., None].double() * rot.inv_freq.double())
    torch.testing.assert_close(cos2[..., :8].double(), want, rtol=0, atol=2e-7)
    assert not torch.equal(cos, cos2)
    rot.inv_freq = rot.original_inv_freq.clone()  # replaced: read again
    assert torch.equal(rot(x, pos)[0], cos)
    rot.inv_freq = torch.zeros(8)
    assert torch.equal(rot(x, pos)[0], torch.ones(1, 4, 16))


def test_init_weights_initialises_the_buffers():
    model, patched = build("llama")
    rot = patched.model.rotary_emb
    for name in ("inv_freq", "original_inv_freq"):
        getattr(rot, name).fill_(float("nan"))
        patched._init_weights(rot)  # what test_init_weights_can_init_buffers calls
    assert torch.equal(rot.inv_freq, model.model.rotary_emb.inv_freq)
    rot.inv_freq.zero_()
    rot.reset_parameters()
    assert torch.equal(rot.inv_freq, rot.original_inv_freq)
    logits_agree(model, patched)


def test_attributes_carry_transformers_meanings():
    model, patched = build("llama", config_of("llama", rope_parameters={
        "rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
        "original_max_position_embeddings": 16}))  # fmt: skip
    theirs, ours = model.model.rotary_emb, patched.model.rotary_emb
    assert ours.config is patched.config
    for attr in ("rope_type", "max_seq_len_cached", "original_max_seq_len"):
        assert getattr(ours, attr) == getattr(theirs, attr), attr
    assert ours.attention_scaling == pytest.approx(theirs.attention_scaling, rel=1e-12)
    w, a = ours.compute_default_rope_parameters(ours.config)
    torch.testing.assert_close(w, theirs.inv_freq, rtol=1e-6, atol=0)
    assert a == pytest.approx(theirs.attention_scaling)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_dtype_moves(dtype):
    model, patched = build("llama")
    model, patched = model.to(dtype), patched.to(dtype)
    # model.to(dtype) casts the buffers of both modules alike
    assert patched.model.rotary_emb.inv_freq.dtype == model.model.rotary_emb.inv_freq.dtype
    # (transformers computes the angles in float32 whatever the dtype)
    tol = 1e-6 if dtype == torch.float64 else 2e-2
    logits_agree(model, patched, tol=tol)


ROPE_TYPES = {
    "default": {"rope_type": "default", "rope_theta": 10000.0},
    # extra keys transformers accepts and ignores for these rules
    "default+": {"rope_type": "default", "rope_theta": 10000.0,
                 "original_max_position_embeddings": 32},
    "linear": {"rope_type": "linear", "rope_theta": 10000.0, "factor": 2.0,
               "original_max_position_embeddings": 32},
    "dynamic": {"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 2.0},
    "yarn": {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
             "original_max_position_embeddings": 16},
    "longrope": {"rope_type": "longrope", "rope_theta": 10000.0,
                 "short_factor": [1.0 + i / 10 for i in range(8)],
                 "long_factor": [2.0 + i for i in range(8)],
                 "original_max_position_embeddings": 32},
    "llama3": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
               "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 16},
}  # fmt: skip


@pytest.mark.parametrize("rope", sorted(ROPE_TYPES))
def test_every_rope_type_from_config_follows_the_sequence_length(rope):
    model, patched = build("llama", config_of("llama", rope_parameters=ROPE_TYPES[rope]))
    theirs, ours = model.model.rotary_emb, patched.model.rotary_emb
    assert ours.ignored_keys == (("original_max_position_embeddings",)
                                 if rope in ("default+", "linear") else ())  # fmt: skip
    gen = torch.Generator().manual_seed(1)
    # short, beyond max_position_embeddings (dynamic grows), back (it resets), ...
    for n in (10, 40, 100, 20, 70, 5, 33):
        ids = torch.randint(0, 96, (1, n), generator=gen)
        logits_agree(model, patched, ids)
        # the buffers follow the length as transformers' do, value for value
        torch.testing.assert_close(ours.inv_freq, theirs.inv_freq, rtol=2e-7, atol=0)
        assert int(ours.max_seq_len_cached) == int(theirs.max_seq_len_cached)
        assert ours.attention_scaling == pytest.approx(float(theirs.attention_scaling))


def test_compiled_longrope_picks_short_or_long_without_graph_break():
    rot = ft.RotaryEmbedding(head_dim=16, rope_parameters=ROPE_TYPES["longrope"],
                             max_position_embeddings=64)  # fmt: skip
    compiled = torch.compile(rot, fullgraph=True, backend="aot_eager")
    x = torch.zeros(1)
    for n in (8, 40):
        pos = torch.arange(n)[None]
        want = ft.RotaryEmbedding(head_dim=16, rope_parameters=ROPE_TYPES["longrope"],
                                  max_position_embeddings=64)(x, pos)  # fmt: skip
        for a, b in zip(compiled(x, pos), want, strict=True):
            assert torch.equal(a, b)


@pytest.mark.parametrize("family", ["phi3", "gpt_neox"])
@pytest.mark.parametrize("in_place", [False, True])
def test_partial_rotary_apply_matches_the_family(family, in_place):
    mod = importlib.import_module(f"transformers.models.{family}.modeling_{family}")
    gen = torch.Generator().manual_seed(2)
    q, k = torch.randn(2, 4, 5, 16, generator=gen), torch.randn(2, 2, 5, 16, generator=gen)
    rot = ft.RotaryEmbedding(head_dim=16, rope_parameters={"partial_rotary_factor": 0.5})
    cos, sin = rot(q, torch.arange(5)[None].expand(2, -1))
    assert cos.shape == (2, 5, 8)
    want = mod.apply_rotary_pos_emb(q, k, cos, sin)
    if in_place:
        qq, kk = q.clone(), k.clone()
        got = ft.apply_rotary_pos_emb_(qq, kk, cos, sin)
        assert got[0] is qq and got[1] is kk
    else:
        got = ft.apply_rotary_pos_emb(q, k, cos, sin)
    for a, b, x in zip(got, want, (q, k), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)
        assert torch.equal(a[..., 8:], x[..., 8:])  # passed through untouched


def test_partial_rotary_apply_compiles_and_exports():
    gen = torch.Generator().manual_seed(3)
    q, k = torch.randn(1, 2, 3, 16, generator=gen), torch.randn(1, 2, 3, 16, generator=gen)
    cos, sin = torch.rand(1, 3, 4, generator=gen), torch.rand(1, 3, 4, generator=gen)
    want = ft.apply_rotary_pos_emb(q, k, cos, sin)

    class Apply(torch.nn.Module):
        def forward(self, q, k, cos, sin):
            return ft.apply_rotary_pos_emb(q, k, cos, sin)

    got = torch.compile(Apply(), fullgraph=True, backend="aot_eager")(q, k, cos, sin)
    exported = torch.export.export(Apply(), (q, k, cos, sin)).module()(q, k, cos, sin)
    for out in (got, exported):
        for a, b in zip(out, want, strict=True):
            torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)


def test_partial_rotary_refuses_cos_wider_than_the_head():
    q = torch.zeros(1, 1, 2, 8)
    with pytest.raises(ValueError, match="16 columns"):
        ft.apply_rotary_pos_emb(q, q, torch.zeros(1, 2, 16), torch.zeros(1, 2, 16))


@pytest.mark.parametrize("family", sorted(MROPE))
def test_mrope_text_models_go_through_the_multi_axis_path(family):
    config_name, model_name, sections, layout = MROPE[family]
    rope = {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": sections}
    if family == "qwen3_vl":
        rope["mrope_interleaved"] = True
    config = getattr(transformers, config_name)(**SMALL, head_dim=16, rope_parameters=rope)
    torch.manual_seed(0)
    model = getattr(transformers, model_name)(config).eval()
    patched = copy.deepcopy(model)
    assert ft.patch_model(patched) == ["rotary_emb"]
    rot = patched.rotary_emb
    assert rot.mrope_section == sections and rot.section_layout == layout
    gen = torch.Generator().manual_seed(4)
    ids = torch.randint(0, 96, (2, 9), generator=gen)
    # text, then an image's grid of (t, h, w) positions, per sequence
    pos = torch.randint(0, 30, (3, 2, 9), generator=gen)
    x = torch.zeros(1)
    for a, b in zip(rot(x, pos), model.rotary_emb(x, pos), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=4e-6)
    with torch.no_grad():
        want = model(input_ids=ids, position_ids=pos).last_hidden_state
        got = patched(input_ids=ids, position_ids=pos).last_hidden_state
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("family", ["qwen2_vl", "qwen3_vl"])
def test_mrope_meta_model_patches_and_materialises(family):
    config_name, model_name, sections, layout = MROPE[family]
    rope = {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": sections}
    config = getattr(transformers, config_name)(**SMALL, head_dim=16, rope_parameters=rope)
    with torch.device("meta"):
        meta = getattr(transformers, model_name)(config)
    assert ft.patch_model(meta) == ["rotary_emb"]
    assert meta.rotary_emb.section_layout == layout
    meta.to_empty(device="cpu")
    meta.init_weights()
    theirs = getattr(transformers, model_name)(config).rotary_emb
    assert torch.equal(meta.rotary_emb.inv_freq, theirs.inv_freq)
    pos = torch.arange(12).view(3, 1, 4)
    for a, b in zip(
        meta.rotary_emb(torch.zeros(1), pos), theirs(torch.zeros(1), pos), strict=True
    ):
        torch.testing.assert_close(a, b, rtol=0, atol=4e-6)


def test_patch_model_reports_what_it_leaves_alone():
    config = transformers.Qwen2VLConfig(
        text_config={**SMALL, "rope_parameters": {"rope_type": "default", "rope_theta": 1e4,
                                                  "mrope_section": [2, 3, 3]}},
        vision_config={"depth": 1, "embed_dim": 32, "num_heads": 2, "hidden_size": 64},
    )  # fmt: skip
    model = transformers.Qwen2VLForConditionalGeneration(config)
    with pytest.warns(UserWarning, match="left 1 rotary module"):
        report = ft.patch_model(model)
    assert report == ["model.language_model.rotary_emb"]
    assert list(report.skipped) == ["model.visual.rotary_pos_emb"]
    # (its rule, transformers' "axial", is not one of fastpe's rope types)
    assert "'axial'" in report.skipped["model.visual.rotary_pos_emb"]


@pytest.mark.parametrize("family", ["llama", "phi3"])
def test_compiled_generation_with_a_static_cache(family):
    model, patched = build(family)
    tokens = []
    for m in (model, patched):
        m.generation_config.cache_implementation = "static"
        m.forward = torch.compile(m.forward, fullgraph=True, backend="aot_eager")
        tokens.append(m.generate(IDS, max_new_tokens=6, do_sample=False, pad_token_id=0))
    assert torch.equal(tokens[0], tokens[1])


def test_compiled_dynamic_follows_the_length_outside_the_graph():
    rule = {"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 2.0}
    eager = ft.RotaryEmbedding(head_dim=16, rope_parameters=rule, max_position_embeddings=32)
    traced = ft.RotaryEmbedding(head_dim=16, rope_parameters=rule, max_position_embeddings=32)
    compiled = torch.compile(traced, backend="aot_eager")  # (a graph break, as transformers')
    x = torch.zeros(1)
    for n in (8, 50, 8, 40):
        pos = torch.arange(n)[None]
        for a, b in zip(compiled(x, pos), eager(x, pos), strict=True):
            assert torch.equal(a, b)
        assert traced.max_seq_len_cached == eager.max_seq_len_cached
        assert torch.equal(traced.inv_freq, eager.inv_freq)


def test_a_module_left_on_the_meta_device_says_so():
    with torch.device("meta"):
        rot = ft.RotaryEmbedding(head_dim=16, max_position_embeddings=32)
    assert rot.inv_freq.device.type == "meta"
    with pytest.raises(ValueError, match="meta device: materialise"):
        rot(torch.zeros(1), torch.arange(4)[None])
    rot.to_empty(device="cpu")
    rot.reset_parameters()
    want = ft.RotaryEmbedding(head_dim=16, max_position_embeddings=32)
    assert torch.equal(rot.inv_freq, want.inv_freq)
    assert torch.equal(rot(torch.zeros(1), torch.arange(4)[None])[0],
                       want(torch.zeros(1), torch.arange(4)[None])[0])  # fmt: skip


def test_per_layer_type_rules_are_refused_not_guessed():
    config = transformers.Gemma3TextConfig(**SMALL, head_dim=16)
    assert all(isinstance(v, dict) for v in config.rope_parameters.values())
    with pytest.raises(ValueError, match="one rule per layer type"):
        ft.RotaryEmbedding(config)
    torch.manual_seed(0)
    model = transformers.Gemma3ForCausalLM(config)
    with pytest.warns(UserWarning, match="model.rotary_emb: "):
        report = ft.patch_model(model)
    assert report == [] and list(report.skipped) == ["model.rotary_emb"]


def test_rope_class_from_configs_as_transformers_tests_use_it():
    """The rotary class of a patched model, made from configs whose rope_parameters
    are updated in turn (default, linear, dynamic, yarn), as transformers' common
    model tests do."""
    _, patched = build("phi3")  # (half the head rotates)
    rope_class = type(patched.model.rotary_emb)
    config = copy.deepcopy(patched.config)
    x = torch.randn(1)
    short, long_ = torch.arange(10)[None], torch.arange(96)[None]

    def make(**params):
        config.rope_parameters.update({"rope_theta": 10000.0, **params})
        return rope_class(config=config)

    original = make(rope_type="default")
    cos_short, _ = original(x, short)
    cos_long, _ = original(x, long_)
    torch.testing.assert_close(cos_short, cos_long[:, :10])
    linear = make(rope_type="linear", factor=10)
    lin_long, _ = linear(x, long_)
    for p in range(0, 96, 10):
        torch.testing.assert_close(lin_long[:, p], cos_long[:, p // 10])
    ntk = make(rope_type="dynamic", factor=10)
    torch.testing.assert_close(ntk(x, short)[0], cos_short)
    ntk_long, _ = ntk(x, long_)  # beyond max_position_embeddings: new frequencies
    assert not torch.allclose(ntk_long, cos_long)
    assert (ntk.inv_freq <= original.inv_freq).all() and ntk.max_seq_len_cached == 96
    yarn = make(rope_type="yarn", factor=10)
    assert not torch.allclose(yarn(x, short)[0], cos_short)


@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_device_argument_as_transformers_tests_pass_it(device):
    """transformers' common model tests build a model's rotary class as
    ``rope_class(config=config, device=torch_device)``: the buffers are made there,
    with the values made without it."""
    _, patched = build("llama")
    rope_class = type(patched.model.rotary_emb)
    made = rope_class(config=patched.config, device=device)
    assert made.inv_freq.device.type == device
    assert made.original_inv_freq.device.type == device
    if device == "cpu":
        plain = rope_class(config=patched.config)
        assert torch.equal(made.inv_freq, plain.inv_freq)
        x, ids = torch.randn(1), torch.arange(10)[None]
        for a, b in zip(made(x, ids), plain(x, ids), strict=True):
            assert torch.equal(a, b)


@pytest.mark.parametrize("family", ["qwen2_vl", "qwen3_vl"])
def test_mrope_one_axis_of_positions_broadcasts_as_transformers_does(family):
    """Generation continuing from a cache hands M-RoPE modules text positions of
    shape (1, batch, seq); transformers' modules broadcast them to every axis."""
    config_name, model_name, sections, _ = MROPE[family]
    rope = {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": sections}
    if family == "qwen3_vl":
        rope["mrope_interleaved"] = True
    config = getattr(transformers, config_name)(**SMALL, head_dim=16, rope_parameters=rope)
    model = getattr(transformers, model_name)(config).eval()
    ours = ft.RotaryEmbedding(config, sections=sections, section_layout=MROPE[family][3])
    x = torch.zeros(1)
    for pos in (torch.tensor([[[40], [39], [39]]]), torch.arange(12).view(1, 2, 6)):
        for a, b in zip(ours(x, pos), model.rotary_emb(x, pos), strict=True):
            assert a.shape == b.shape
            torch.testing.assert_close(a, b, rtol=0, atol=4e-6)
    with pytest.raises(ValueError, match=r"position_ids must have shape"):
        ours(x, torch.zeros(2, 2, 6, dtype=torch.long))
