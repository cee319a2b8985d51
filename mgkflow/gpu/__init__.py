"""GPU backend (PyCUDA) of the marginalized graph kernel (DESIGN §5).

Importing this package does not import PyCUDA; :class:`GPUBackend` is loaded on
first use, and :func:`device_available` answers False (never raises) without
PyCUDA or without a CUDA device. The CUDA source generator lives in
:mod:`mgkflow.gpu.source` and needs no GPU.
"""

from __future__ import annotations

from typing import Any

__all__ = ["GPUBackend", "device_available"]


def device_available() -> bool:
    """True when PyCUDA imports and at least one CUDA device is present."""
    try:
        import pycuda.driver as cuda
    except Exception:  # noqa: BLE001 - ImportError, or a broken driver library
        return False
    try:
        cuda.init()
        return cuda.Device.count() > 0
    except Exception:  # noqa: BLE001
        return False


def __getattr__(name: str) -> Any:
    if name == "GPUBackend":
        from .backend import GPUBackend

        return GPUBackend
    raise AttributeError(f"module 'mgkflow.gpu' has no attribute {name!r}")
