"""GPU backend (PyCUDA) of the marginalized graph kernel.

Importing this package does not import PyCUDA; :class:`GPUBackend` is loaded on
first use, and :func:`device_available` answers False (never raises) without
PyCUDA or without a CUDA device.

Modules: :mod:`.backend` (``GPUBackend.solve``: configuration -> compile -> pack/upload ->
launch plan -> per-block launches -> wide pairs), :mod:`.wide` (one large pair with the whole
device, CG loop on the host), :mod:`.strategies` (the XMV strategies: a registry with one
module per strategy, their cost models and the chooser), :mod:`.device` (context, compile
cache, occupancy, typed launches by parameter name), :mod:`.source` (CUDA source generation
from the kernels' structure; hyperparameter values travel at run time), :mod:`.pack` (host
packing, no GPU), :mod:`.plan` (launch groups), :mod:`.emulate` (numpy references of the
XMVs). Everything but :mod:`.backend` imports without PyCUDA.
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
