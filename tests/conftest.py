"""Shared pytest configuration: tests marked ``gpu`` are skipped without a CUDA device."""

from __future__ import annotations

import pytest


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
