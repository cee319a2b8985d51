"""Shared pytest configuration: tests marked ``gpu`` are skipped without a CUDA device; property tests
(hypothesis) run the same examples on every run.

Hypothesis draws its examples at random unless told otherwise, so a fresh clone's run (CI) could meet a
counterexample that no earlier run met and fail on code nobody changed. The ``mgkflow`` profile, loaded
here, derandomizes the draws (fixed seeds) and keeps no example database; ``HYPOTHESIS_PROFILE=explore``
draws at random (500 examples where a test does not set its number) to look for new counterexamples on purpose.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import settings

settings.register_profile("mgkflow", derandomize=True, database=None)
settings.register_profile("explore", derandomize=False, max_examples=500)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "mgkflow"))


def _gpu_ok() -> bool:
    try:
        from mgkflow.gpu import device_available
    except Exception:  # noqa: BLE001
        return False
    return bool(device_available())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # the marker itself, not ``"gpu" in item.keywords`` (keywords include folder names: a checkout in a
    # folder named gpu would skip every test)
    if not any(item.get_closest_marker("gpu") for item in items):
        return
    if _gpu_ok():
        return
    skip = pytest.mark.skip(reason="needs PyCUDA and a CUDA device")
    for item in items:
        if item.get_closest_marker("gpu"):
            item.add_marker(skip)
