"""Registry entry ``gpu``: the PyCUDA backend, which lives in its own room, :mod:`mgkflow.gpu`.

The GPU backend has CUDA sources, solver strategies, calibrated cost models and a run log
(``mgkflow/gpu/NOTES.md``), so it is a package of its own; this module is only its entry in
:mod:`mgkflow.backends` and imports :mod:`mgkflow.gpu` (never PyCUDA) until a backend is made.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import BackendUnavailableError


def available() -> bool:
    """True when PyCUDA imports and a CUDA device is present (never raises)."""
    try:
        from ..gpu import device_available
    except ImportError:
        return False
    try:
        return bool(device_available())
    except Exception:  # noqa: BLE001 - any driver failure means "no GPU"
        return False


def make(rtol: float | None, max_iter: int, options: Mapping[str, Any]):
    """A :class:`mgkflow.gpu.GPUBackend` (``options``: its keyword arguments)."""
    try:
        from ..gpu import GPUBackend
    except ImportError as exc:
        raise BackendUnavailableError(
            "backend='gpu' needs PyCUDA and a CUDA device (pip install mgkflow[gpu]); "
            "backend='cpu' runs on any machine"
        ) from exc
    kw = {"max_iter": max_iter, **dict(options)}
    if rtol is not None:
        kw["rtol"] = rtol
    return GPUBackend(**kw)
