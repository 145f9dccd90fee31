"""The in-place twins of fastpe.torch show, and take, their out-of-place model's
signature (written once, given by fastpe._signatures.signature_of)."""

import inspect

import pytest

torch = pytest.importorskip("torch")
ft = pytest.importorskip("fastpe.torch")

TWINS = [
    (ft.add_to_, ft.add_to),
    (ft.apply_rope_, ft.apply_rope),
    (ft.apply_rotary_pos_emb_, ft.apply_rotary_pos_emb),
]
IDS = [twin.__name__ for twin, _ in TWINS]


def _shown(f):
    return [
        (p.name, p.kind, p.default, p.annotation) for p in inspect.signature(f).parameters.values()
    ]


@pytest.mark.parametrize(("twin", "model"), TWINS, ids=IDS)
def test_a_twin_shows_its_models_parameters_and_its_own_return(twin, model):
    assert _shown(twin) == _shown(model)
    assert inspect.signature(twin).return_annotation == twin.__annotations__["return"]
    assert twin.__wrapped__ is model


@pytest.mark.parametrize(("twin", "model"), TWINS, ids=IDS)
def test_a_twin_binds_arguments_with_its_models_defaults(twin, model):
    # what the twin's own def declares must agree with what it shows: the positional
    # parameters and their defaults (keyword-only ones come from the model at call time)
    code = twin.__code__
    names = code.co_varnames[: code.co_argcount]
    shown = inspect.signature(model).parameters
    positional = [n for n, p in shown.items() if p.kind is p.POSITIONAL_OR_KEYWORD]
    assert list(names) == positional
    model_defaults = [
        shown[n].default for n in positional if shown[n].default is not inspect.Parameter.empty
    ]
    assert list(twin.__defaults__ or ()) == model_defaults


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda q: ft.apply_rope_(q, offest=1), "apply_rope_"),
        (lambda q: ft.add_to_(q, scael=2.0), "add_to_"),
    ],
)
def test_a_twin_refuses_an_unknown_keyword_by_its_own_name(call, name):
    with pytest.raises(TypeError, match=rf"^{name}\(\) got an unexpected keyword argument '"):
        call(torch.zeros(1, 3, 8))


def test_a_twin_called_with_every_keyword_matches_its_model():
    q = torch.randn(1, 2, 5, 8, dtype=torch.float64)
    kw = dict(
        rope_parameters={"rope_type": "linear", "factor": 2.0},
        head_dim=8,
        offset=3,
        seq_axis=-2,
        layout="interleaved",
        max_position_embeddings=64,
        precision="float64",
        attention_factor=1.25,
    )
    want = ft.apply_rope(q, **kw)
    got = ft.apply_rope_(q.clone(), **kw)
    assert torch.equal(got, want)
    x = torch.randn(4, 8, dtype=torch.float64)
    kw2 = dict(offset=2, scale=0.5, base=100.0, layout="split", convention="vaswani")
    assert torch.equal(ft.add_to_(x.clone(), **kw2), ft.add_to(x, **kw2))
