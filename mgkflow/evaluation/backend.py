"""Which backend solves a kernel's pairs: made through :func:`mgkflow.backends.make_backend`, kept on
the kernel object (``_backend_obj``) while its backend options stay the same.

:func:`get_backend` makes (or returns the kept) backend of ``kern.backend``; :func:`oracle` the exact
backend, which answers what the chosen one does not implement (:func:`gradient_solver`,
:func:`nodal_solver`). A backend set from outside (``kern._backend_obj = ...`` with
``kern._backend_key = None``, as the benchmarks do) is used as it is.

Examples
--------
>>> from mgkflow import MarginalizedGraphKernel
>>> kern = MarginalizedGraphKernel(backend="exact")
>>> get_backend(kern) is get_backend(kern) is oracle(kern)
True
"""

from __future__ import annotations

from collections.abc import Callable

from ..backends import Backend, make_backend, resolve_backend
from ..backends.gpu import available
from .spec import KernelSpec

__all__ = ["gpu_available", "get_backend", "oracle", "gradient_solver", "nodal_solver"]


def gpu_available() -> bool:
    """True when the GPU backend can be imported and a CUDA device is present.

    Examples
    --------
    >>> isinstance(gpu_available(), bool)
    True
    """
    return available()


def get_backend(kern: KernelSpec) -> Backend:
    """The backend of ``kern``: the kept one while ``backend``, ``rtol``, ``max_iter`` and
    ``gpu_options`` are unchanged (or one set from outside), else a new one, warmed up (its
    ``warm_up()``, where it has one: the CPU backend compiles its kernels once per process)."""
    key = (kern.backend, kern.rtol, int(kern.max_iter), repr(kern.gpu_options))
    if kern._backend_obj is not None and kern._backend_key in (None, key):
        return kern._backend_obj  # (None: set from outside, e.g. by the benchmarks)
    name = resolve_backend(kern.backend)
    if name == "exact":
        kern._backend_obj = oracle(kern)
    else:
        options = kern.gpu_options if name == "gpu" else None
        kern._backend_obj = make_backend(name, rtol=kern.rtol, max_iter=int(kern.max_iter), options=options)
    kern._backend_key = key
    warm = getattr(kern._backend_obj, "warm_up", None)
    if warm is not None:  # compile (numba) now, not inside the first call's timed solve
        warm()
    return kern._backend_obj


def oracle(kern: KernelSpec) -> Backend:
    """The exact backend of ``kern`` (kept in ``_oracle_obj``), for what the chosen backend does not implement."""
    if kern._oracle_obj is None or kern._oracle_obj.max_iter != int(kern.max_iter):
        kern._oracle_obj = make_backend("exact", rtol=kern.rtol, max_iter=int(kern.max_iter))
    return kern._oracle_obj


def gradient_solver(kern: KernelSpec) -> Callable:
    """``solve_gradient`` of the backend, or of the oracle where the backend has none."""
    return getattr(get_backend(kern), "solve_gradient", None) or oracle(kern).solve_gradient


def nodal_solver(kern: KernelSpec) -> Callable:
    """``solve_nodal`` of the backend, or of the oracle where the backend has none."""
    return getattr(get_backend(kern), "solve_nodal", None) or oracle(kern).solve_nodal
