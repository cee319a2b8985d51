"""GPU backend (PyCUDA) of the marginalized graph kernel.

Importing this package does not import PyCUDA; :class:`GPUBackend` is loaded on
first use, and :func:`device_available` answers False (never raises) without
PyCUDA or without a CUDA device.

Modules (imports run one way: backend -> gradient -> solvers -> core -> device; no cycle):

* :mod:`.backend`: :class:`GPUBackend`, the settings and a call's routing (configuration ->
  pack/upload -> compact waves -> launch plan -> per-block launches -> wide pairs); the only
  module that imports PyCUDA at import time;
* :mod:`.gradient`: ``solve_gradient`` / ``solve_nodal`` (the per-pair solver with a structure
  flag; closed form of the unlabeled case), on :mod:`.core` and :mod:`.solvers.per_block`;
* :mod:`.core`: what the value, gradient and nodal solves share (tunables, the per-pair solver's
  module, :class:`~.core.DeviceBatch`, output buffers, shared launch arguments);
  :mod:`.batch` (the device-batch cache) and :mod:`.launch` (stream, reused buffers, job launches);
* :mod:`.solvers`: the pair solvers, a registry with one module per solver, its CUDA source and
  its claim rule and cost model: :mod:`.solvers.compact` (``mgk_compact.cu``, small pairs),
  :mod:`.solvers.wide` (``mgk_wide.cu``, one large pair with the whole device, CG loop on the
  host), :mod:`.solvers.per_block` (``mgk_solver.cu``, one thread block per pair);
* :mod:`.strategies`: the XMV strategies of the per-block and wide solvers (a registry with one
  module per strategy, their cost models and the chooser);
* :mod:`.device` (context, compile cache, occupancy, typed launches by parameter name),
  :mod:`.source` (CUDA source generation from the kernels' structure; hyperparameter values
  travel at run time), :mod:`.pack` (host packing, no GPU), :mod:`.plan` (launch groups),
  :mod:`.primitive_map` (octile primitive maps), :mod:`.emulate` (numpy references of the XMVs).

Everything but :mod:`.backend` imports without PyCUDA. ``mgkflow.gpu.compact`` and
``mgkflow.gpu.wide`` are deprecated aliases of :mod:`.solvers.compact` and :mod:`.solvers.wide`.
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
