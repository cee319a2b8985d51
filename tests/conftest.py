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
    if not any("gpu" in item.keywords for item in items):
        return
    if _gpu_ok():
        return
    skip = pytest.mark.skip(reason="needs PyCUDA and a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
