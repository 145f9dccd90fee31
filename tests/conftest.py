"""Shared pytest configuration and fixtures (the truths themselves live in truth.py)."""

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=25, deadline=None)
# Long bug hunts (HYPOTHESIS_PROFILE=thorough), not run in CI.
settings.register_profile(
    "thorough", max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(autouse=True, scope="session")
def small_fills_use_threads_too():
    """The tests use small tables; with a low serial threshold their fills still
    run on several threads, so the thread-count independence they check is real
    (the threshold chooses the team size, never the values)."""
    from fastpe import kernel

    old = kernel._set_serial_below(4096)
    yield
    kernel._set_serial_below(old)


@pytest.fixture
def rng():
    return np.random.default_rng(20261122)
