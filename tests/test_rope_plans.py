"""The library's one plan cache (lib/src/plans.c) as fastpe.apply_rope and
rope_cache use it: a caller cycling over many configurations builds each plan
once, changed arguments are new plans, and threads sharing it get the bits a
single thread gets."""

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
    for params in configs:  # the first round converts every rule (the general path)
        fastpe.apply_rope(q.copy(), offset=7, rope_parameters=params)
    for params in configs:  # the second builds each plan (the small-call path)
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
    # (the general path's plan of the frequencies, then the small-call path's of the rule)
    assert _builds() == built + 1
    got = fastpe.apply_rope(q.copy(), offset=10, rope_parameters=params)
    assert _builds() == built + 2
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


def test_threads_sharing_the_cache_get_a_single_threads_bits():
    """Eight threads over more configurations than the cache holds (so entries are
    evicted while others are in use): every result is bitwise the serial one."""
    configs = _configs(24)
    lists = [np.geomspace(1.0, 1e-3, 8) * (1 + i / 32) for i in range(24)]
    q0 = np.random.default_rng(0).standard_normal((1, 2, 3, 16))
    want = {}
    for i in range(24):
        want["r", i] = fastpe.apply_rope(q0.copy(), offset=5, rope_parameters=configs[i])
        want["w", i] = fastpe.apply_rope(q0.copy(), offset=5, inv_freq=lists[i])
    errors = []
    _, old = kernel._c_plans(clear=True, max_entries=8)

    def work(seed):
        rng = np.random.default_rng(seed)
        for i in rng.permutation(24 * 4) % 24:
            kind = "r" if rng.random() < 0.5 else "w"
            kw = {"rope_parameters": configs[i]} if kind == "r" else {"inv_freq": lists[i]}
            got = fastpe.apply_rope(q0.copy(), offset=5, **kw)
            if not np.array_equal(got, want[kind, i]):
                errors.append((kind, int(i)))

    try:
        threads = [threading.Thread(target=work, args=(s,)) for s in range(8)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    finally:
        kernel._c_plans(max_entries=old)
    assert not errors, errors[:5]
    stats = kernel._c_plans()
    assert stats[0] <= 8  # bounded while the bound was 8
    assert all(refs == 0 for *_, refs in kernel._c_plan_cache())
