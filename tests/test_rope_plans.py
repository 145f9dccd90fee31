"""The library's one plan cache (lib/src/plans.c) as fastpe.apply_rope and
rope_cache use it: a caller cycling over many configurations builds each plan
once, changed arguments are new plans, and threads sharing it get the bits a
single thread gets."""

import gc
import threading

import numpy as np
import pytest

import fastpe
from fastpe import kernel


def _builds():
    """Plans the library's cache has built since it was loaded."""
    return kernel._c_plans()[2]


def _configs(n):
    """n distinct rules whose frequencies do not depend on the length."""
    return [
        {"rope_type": "linear", "factor": 1.0 + i / 64, "rope_theta": 10000.0} for i in range(n)
    ]


@pytest.mark.parametrize("n", [100, 300])
def test_a_caller_cycling_over_many_rules_builds_each_plan_once(n):
    q = np.ones((1, 4, 1, 64), np.float32)
    configs = _configs(n)
    kernel._c_plans(clear=True)
    for params in configs:  # the first round converts and plans every rule (the general path)
        fastpe.apply_rope(q.copy(), offset=7, rope_parameters=params)
    built = _builds()
    for _ in range(2):
        for params in configs:
            fastpe.apply_rope(q.copy(), offset=8, rope_parameters=params)
            fastpe.rope_cache(64, params, seq_len=1, offset=9)
    assert _builds() == built, "a cycling caller rebuilt its plans"


def test_a_caller_cycling_over_many_frequency_lists_builds_each_plan_once():
    q = np.ones((1, 4, 1, 32), np.float64)
    lists = [np.geomspace(1.0, 1e-4, 16) * (1 + i / 128) for i in range(150)]
    kernel._c_plans(clear=True)
    for w in lists:
        fastpe.apply_rope(q.copy(), offset=3, inv_freq=w)
    built = _builds()
    for w in lists:
        got = fastpe.apply_rope(q.copy(), offset=4, inv_freq=w)
        assert (
            kernel.rope_apply(
                q.copy(), None, None, None, 4, None, -2, "half", None, "float32", w, None, None
            )
            is not None
        )  # served by the cache
        np.testing.assert_array_equal(
            got, fastpe.apply_rope.__wrapped__(q.copy(), offset=4, inv_freq=w.tolist())
        )
    assert _builds() == built


def test_a_smaller_cache_rebuilds():
    """The counter the tests above read does count rebuilds: with room for 64
    plans (the old bound), cycling over 100 rules builds on every call."""
    q = np.ones((1, 4, 1, 64), np.float32)
    configs = _configs(100)
    _, old = kernel._c_plans(clear=True, max_entries=64)
    try:
        for _ in range(2):
            for params in configs:
                fastpe.apply_rope(q.copy(), rope_parameters=params)
        built = _builds()
        for params in configs:
            fastpe.apply_rope(q.copy(), rope_parameters=params)
        assert _builds() - built == len(configs)
    finally:
        kernel._c_plans(max_entries=old)


def test_a_changed_array_or_dict_is_a_new_plan():
    q = np.ones((1, 2, 1, 8))
    w = np.array([1.0, 0.1, 0.01, 0.001])
    fastpe.apply_rope(q.copy(), offset=10, inv_freq=w)
    built = _builds()
    w[2] = 0.02  # in place: the cache holds its own copy of the values
    got = fastpe.apply_rope(q.copy(), offset=10, inv_freq=w)
    assert _builds() == built + 1
    np.testing.assert_array_equal(
        got, fastpe.apply_rope.__wrapped__(q.copy(), offset=10, inv_freq=w.tolist())
    )
    params = {"rope_type": "linear", "factor": 2.0, "rope_theta": 123.0}
    fastpe.apply_rope(q.copy(), offset=10, rope_parameters=params)
    built = _builds()
    params["factor"] = 3.0
    fastpe.apply_rope(q.copy(), offset=10, rope_parameters=params)  # converted (general path)
    # (the general path plans the rule's entry, which the small-call path then finds)
    assert _builds() == built + 1
    got = fastpe.apply_rope(q.copy(), offset=10, rope_parameters=params)
    assert _builds() == built + 1
    np.testing.assert_array_equal(
        got, fastpe.apply_rope.__wrapped__(q.copy(), offset=10, rope_parameters=dict(params))
    )


def test_equal_parameters_share_one_plan():
    """The key is the library's parameters, not the dict's spelling: an int
    rope_theta converts to the same double as the float."""
    q = np.ones((1, 2, 1, 8))
    fastpe.apply_rope(q.copy(), rope_parameters={"rope_theta": 4321.0})
    fastpe.apply_rope(q.copy(), rope_parameters={"rope_theta": 4321.0})
    built = _builds()
    fastpe.apply_rope(q.copy(), rope_parameters={"rope_theta": 4321})  # general path once
    fastpe.apply_rope(q.copy(), rope_parameters={"rope_theta": 4321})
    assert _builds() == built


def test_the_python_side_keeps_no_frequencies():
    assert not hasattr(kernel, "rope_plans")
    fastpe.apply_rope(np.ones((1, 1, 1, 8)), rope_parameters={"rope_theta": 777.0})
    assert all(isinstance(v, kernel.RopeArgs) for v in kernel.rope_args.values())


def _threads_agree(call, n):
    """The mismatches when eight threads make ``call(kind, i)`` (kind "r": a rule,
    "w": a frequency list; i < n) in random orders, the cache bounded at 8 entries
    (so entries are evicted while others are in use), against one thread's results."""

    def same(a, b):
        return all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))

    want = {(kind, i): call(kind, i) for i in range(n) for kind in "rw"}
    errors = []
    _, old = kernel._c_plans(clear=True, max_entries=8)

    def work(seed):
        rng = np.random.default_rng(seed)
        for i in rng.permutation(n * 4) % n:
            kind = "r" if rng.random() < 0.5 else "w"
            if not same(call(kind, i), want[kind, i]):
                errors.append((kind, int(i)))

    try:
        threads = [threading.Thread(target=work, args=(s,)) for s in range(8)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    finally:
        kernel._c_plans(max_entries=old)
    return errors


def test_threads_sharing_the_cache_get_a_single_threads_bits():
    """Eight threads over more configurations than the cache holds: every result is
    bitwise the serial one."""
    configs = _configs(24)
    lists = [np.geomspace(1.0, 1e-3, 8) * (1 + i / 32) for i in range(24)]
    q0 = np.random.default_rng(0).standard_normal((1, 2, 3, 16))

    def call(kind, i):
        kw = {"rope_parameters": configs[i]} if kind == "r" else {"inv_freq": lists[i]}
        return (fastpe.apply_rope(q0.copy(), offset=5, **kw),)

    errors = _threads_agree(call, 24)
    assert not errors, errors[:5]
    stats = kernel._c_plans()
    assert stats[0] <= 8  # bounded while the bound was 8
    assert all(refs == 0 for *_, refs in kernel._c_plan_cache())


# ---- multi-axis plans: one entry of the same cache each ----------------------------

SEC = (16, 24, 24)  # Qwen2-VL's mrope sections for head_dim 128
STEP = np.array([[[4321, 17, 33]]], np.int64)  # one decoding step's coordinates


def _axes_entries():
    return kernel._c_plan_kinds()["rope axes"][0]


def _mrope_step(params=None, inv_freq=None, sections=SEC, layout="contiguous", pos=STEP):
    q = np.linspace(-1, 1, 2 * 128, dtype=np.float32).reshape(1, 2, 1, 128)
    k = q[:, :1].copy()
    return fastpe.apply_rope(
        q, k, rope_parameters=params, inv_freq=inv_freq, positions=pos, sections=sections,
        section_layout=layout,
    )  # fmt: skip


def _axes_args(q, k, params, pos, sections, layout="contiguous", inv_freq=None):
    """kernel.rope_apply_axes's arguments: the small-call path alone (None: declined)."""
    return (q, k, params, None, 0, pos, sections, layout, -2, "half", None, "float32",
            inv_freq, None, None)  # fmt: skip


def test_a_caller_cycling_over_many_multi_axis_configs_builds_each_plan_once():
    configs = [{"rope_theta": 1e6 + 7 * i} for i in range(100)]
    kernel._c_plans(clear=True)
    for params in configs:  # the general path converts each rule and builds its plan
        _mrope_step(params)
    built = _builds()
    assert _axes_entries() >= len(configs)
    for _ in range(2):
        for params in configs:
            _mrope_step(params)
            fastpe.rope_cache(128, params, positions=STEP[0], sections=SEC)
    assert _builds() == built, "a cycling caller rebuilt its multi-axis plans"


def test_other_sections_or_layouts_are_other_plans_and_equal_ones_hit():
    params = {"rope_theta": 54321.0}
    _mrope_step(params)
    _mrope_step(params)
    built, entries = _builds(), _axes_entries()
    _mrope_step(params)  # a hit
    assert (_builds(), _axes_entries()) == (built, entries)
    q = np.ones((1, 1, 1, 128), np.float32)
    for sections, layout in [
        ((24, 20, 20), "interleaved"),
        ((24, 20, 20), "contiguous"),
        ((30, 17, 17), "interleaved"),
    ]:
        built = _builds()
        got = kernel.rope_apply_axes(*_axes_args(q.copy(), None, params, STEP, sections, layout))
        assert got is not None  # served at once: the library checks the sections
        assert _builds() == built + 1  # a new plan
        kernel.rope_args.clear()  # (the general path alone, which converts the rule again)
        want = fastpe.apply_rope(
            q.copy(), rope_parameters=params, positions=STEP, sections=sections,
            section_layout=layout,
        )  # fmt: skip
        np.testing.assert_array_equal(got, want)


def test_the_small_call_path_serves_a_cold_listed_call():
    """Listed frequencies need no conversion: the first call is the small-call path's,
    bitwise the general path's."""
    w = np.geomspace(1.0, 1e-5, 64) * 1.000123
    kernel._c_plans(clear=True)
    q = np.linspace(-1, 1, 128, dtype=np.float32).reshape(1, 1, 1, 128)
    got = kernel.rope_apply_axes(*_axes_args(q.copy(), None, None, STEP, SEC, inv_freq=w))
    assert got is not None
    want = fastpe.apply_rope.__wrapped__(
        q.copy(), inv_freq=w.tolist(), positions=STEP.tolist(), sections=list(SEC)
    )
    np.testing.assert_array_equal(got, want)


def test_cold_and_warm_multi_axis_calls_agree_bitwise_and_in_their_errors():
    params = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096}
    bad = [
        {"pos": np.array([[[0, 0, 2**60]]])},
        {"pos": np.array([[[0, 0]]])},
        {"sections": (16, 24, 25)},
        {"sections": (24, 24, 16), "layout": "interleaved"},
        {"sections": (-1, 24, 41)},
    ]

    def run():
        out = [_mrope_step(params)]
        out.append(_mrope_step(params, layout="interleaved", sections=(24, 20, 20)))
        out.append(fastpe.rope_cache(128, params, positions=STEP[0], sections=SEC))
        errors = []
        for kw in bad:
            with pytest.raises(ValueError) as info:
                _mrope_step(params, **kw)
            errors.append(str(info.value))
        return out, errors

    kernel.rope_args.clear()
    kernel._c_plans(clear=True)
    cold = run()
    warm = run()
    q = np.zeros((1, 1, 1, 128))
    assert kernel.rope_apply_axes(*_axes_args(q, None, params, STEP, SEC)) is not None
    for a, b in zip(cold[0], warm[0], strict=True):
        for x, y in zip(a, b, strict=True):
            assert x.tobytes() == y.tobytes()
    assert cold[1] == warm[1]


def test_a_smaller_cache_evicts_and_rebuilds_multi_axis_plans():
    configs = [{"rope_theta": 2e5 + i} for i in range(20)]
    want = [_mrope_step(p) for p in configs]
    _, old = kernel._c_plans(clear=True, max_entries=8)
    try:
        for _ in range(2):
            for p, w in zip(configs, want, strict=True):
                got = _mrope_step(p)
                assert all(np.array_equal(g, x) for g, x in zip(got, w, strict=True))
        built = _builds()
        for p in configs:
            _mrope_step(p)
        assert _builds() - built >= len(configs)  # evicted, so built again
        assert kernel._c_plans()[0] <= 8
    finally:
        kernel._c_plans(max_entries=old)


def test_a_held_multi_axis_plan_outlives_a_clear():
    w = np.geomspace(1.0, 1e-4, 64) * 1.000321
    kernel._c_plans(clear=True)
    axes = kernel.RopeAxes(w, SEC, 0)
    assert kernel._c_plan_kinds()["rope axes"] == (1, 1)
    kernel._c_plans(clear=True)  # a caller's plan is never dropped under it
    assert kernel._c_plan_kinds()["rope axes"] == (1, 1)
    assert len(axes.max_positions) == 3
    del axes
    assert kernel._c_plan_kinds()["rope axes"] == (1, 0)
    kernel._c_plans(clear=True)
    assert kernel._c_plan_kinds()["rope axes"] == (0, 0)


def test_one_rotation_takes_either_plan_and_names_what_it_refuses():
    """kernel.rope_rotate rotates by a RopePlan (one position per token) or a
    RopeAxes (a position per axis, and nothing else); anything else, and a buffer
    it cannot rotate, is refused naming the argument."""
    w = np.geomspace(1.0, 1e-4, 64)
    axes, plan = kernel.RopeAxes(w, SEC, 0), kernel.RopePlan(w)
    x = np.ones((1, 2, 128), np.float32)  # (batch, seq, 2 nf)
    pos = np.array([[[0, 0, 0], [1, 1, 1]]], np.int64)  # (batch, seq, axes)
    by_axes, by_plan = x.copy(), x.copy()
    kernel.rope_rotate(by_axes, axes, 1, 0, None, pos, True, 1.0, 1)
    kernel.rope_rotate(by_plan, plan, 1, 0, None, None, True, 1.0, 1)
    # every axis at the token's position: the one-axis rotation's bits
    np.testing.assert_array_equal(by_axes, by_plan)
    assert not np.array_equal(by_plan, x)
    for offset, offsets, accurate in [(1, None, False), (0, pos[0, :, 0], False), (0, None, True)]:
        with pytest.raises(ValueError, match=r"^a RopeAxes plan takes no offset"):
            kernel.rope_rotate(x, axes, 1, offset, offsets, pos, True, 1.0, 1, accurate=accurate)
    for wrong in (None, w):
        with pytest.raises(TypeError, match=r"^plan must be a RopePlan or a RopeAxes, got "):
            kernel.rope_rotate(x, wrong, 1, 0, None, None, True, 1.0, 1)
    ints = x.astype(np.int32)
    with pytest.raises(ValueError, match=r"^x must be a writable, aligned float16/"):
        kernel.rope_rotate(ints, plan, 1, 0, None, None, True, 1.0, 1)
    with pytest.raises(ValueError, match=r"^k must be a writable, aligned float16/"):
        kernel.rope_rotate(x, axes, 1, 0, None, pos, True, 1.0, 1, k=ints)
    table = np.zeros((2, 128))
    with pytest.raises(ValueError, match=r"^x must be a writable, aligned float16/"):
        kernel.rope_rotate_tables(ints, table, 1, True, 1.0, 1)
    with pytest.raises(ValueError, match=r"^k must be a writable, aligned float16/"):
        kernel.rope_rotate_tables(x, table, 1, True, 1.0, 1, k=ints, ktable=table)
    assert (ints == 1).all() and (x == 1).all()  # refused before anything was written


YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096}
Q = np.linspace(-1, 1, 2 * 3 * 128, dtype=np.float32).reshape(1, 2, 3, 128)
COORDS = np.array([[0, 1, 2], [3, 4, 5], [6, 7, 8]], np.int64)
# (a call by one rule, the entry kind its plan is): cold (the general path) and warm
# (the small-call paths) alike
ONE_RULE_CALLS = [
    (lambda: fastpe.rope_cache(128, YARN, seq_len=8), "rope rule"),
    (lambda: fastpe.rope_cache(128, positions=[3, 4]), "rope rule"),
    (lambda: fastpe.rope_cache(128, YARN, seq_len=2, dtype=np.float64), "rope rule"),
    (lambda: fastpe.apply_rope(Q.copy(), rope_parameters=YARN, offset=5), "rope rule"),
    (lambda: fastpe.rope_cache(128, YARN, positions=COORDS, sections=SEC), "rope axes"),
    (lambda: _mrope_step(YARN), "rope axes"),
    (lambda: fastpe.rope_cache(128, inv_freq=np.geomspace(1, 1e-4, 64), seq_len=3), "rope list"),
]


@pytest.mark.parametrize("call, kind", ONE_RULE_CALLS)
def test_one_configuration_is_one_entry(call, kind):
    """A rule's plan is one entry of the library's cache, the one the small-call
    paths find by the rule: the general path (the first call) plans it there too, not
    under its frequencies; a multi-axis plan takes the rule's frequencies without an
    entry of the whole list beside it."""
    kernel.encoders.clear()
    kernel.rope_args.clear()
    gc.collect()  # (a plan an earlier test's traceback still reaches: released)
    kernel._c_plans(clear=True)
    first = call()
    for _ in range(3):
        assert {k: n for k, (n, _) in kernel._c_plan_kinds().items() if n} == {kind: 1}
        for a, b in zip(call(), first, strict=True):
            np.testing.assert_array_equal(a, b)


def test_a_rule_and_its_sections_are_two_plans():
    """One rule by itself and laid out over sections: two plans (the layout differs),
    whichever comes first."""
    for calls in (ONE_RULE_CALLS[0::4], ONE_RULE_CALLS[4::-4]):
        kernel.encoders.clear()
        kernel.rope_args.clear()
        gc.collect()
        kernel._c_plans(clear=True)
        for _ in range(2):
            for call, _kind in calls:
                call()
        assert {k: n for k, (n, _) in kernel._c_plan_kinds().items() if n} == {
            "rope rule": 1,
            "rope axes": 1,
        }


def test_a_multi_axis_plan_holds_no_plan_of_the_whole_list():
    """A multi-axis handle fills each axis by its own plan: the whole list's plan,
    which nothing reads, is not prepared (a one-axis plan costs what a list's does)."""
    w = np.geomspace(1.0, 1e-4, 64) * 1.000123
    kernel._c_plans(clear=True)
    plan = kernel.RopePlan(w)
    listed = kernel._c_plans()[1]
    del plan
    kernel._c_plans(clear=True)
    axes = kernel.RopeAxes(w, [64], 0)
    one_axis = kernel._c_plans()[1]
    del axes
    kernel._c_plans(clear=True)
    assert listed <= one_axis < 1.1 * listed


def test_the_python_side_keeps_no_multi_axis_plans_or_rope_encodings():
    from fastpe import _rope_axes

    assert not hasattr(kernel, "rope_axes_plans") and not hasattr(_rope_axes, "_AXES")
    _mrope_step({"rope_theta": 999.0})
    fastpe.apply_rope(np.ones((1, 1, 1, 8)), rope_parameters={"rope_theta": 998.0}, offset=3)
    assert not [key for key in kernel.encoders if key[0] == "rope"]


def test_threads_sharing_multi_axis_plans_get_a_single_threads_bits():
    """Eight threads over more multi-axis configurations than the cache holds, the
    general and small-call paths mixed: every result is bitwise the serial one and
    no hold is left behind."""
    configs = [{"rope_theta": 3e5 + 11 * i} for i in range(12)]
    lists = [np.geomspace(1.0, 1e-4, 64) * (1 + i / 64) for i in range(12)]

    def call(kind, i):
        return _mrope_step(configs[i]) if kind == "r" else _mrope_step(inv_freq=lists[i])

    errors = _threads_agree(call, 12)
    assert not errors, errors[:5]
    # (a plan object an earlier test's traceback still reaches is released by the collector)
    gc.collect()
    assert all(holds == 0 for _, holds in kernel._c_plan_kinds().values())
