"""What the evaluation layer reads and keeps on a kernel object: the :class:`KernelSpec` protocol.

:class:`~mgkflow.MarginalizedGraphKernel` holds its parameters and a few caches as attributes
(so that scikit-learn's ``clone``, pickling and the benchmarks, which set ``_backend_obj``, see
them); every function of :mod:`mgkflow.evaluation` takes the kernel object as its first argument
and reads (and, for the caches and ``last_stats``, writes) only what is listed here.

Examples
--------
>>> from mgkflow import MarginalizedGraphKernel
>>> isinstance(MarginalizedGraphKernel(), KernelSpec)
True
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from ..kernels import BaseKernel
from ..system import NodeProbability
from .stats import SolveStats

__all__ = ["KernelSpec"]


@runtime_checkable
class KernelSpec(Protocol):
    """The parameters of a marginalized graph kernel and its per-object caches."""

    node_kernel: BaseKernel
    edge_kernel: BaseKernel
    q: NodeProbability
    p: NodeProbability
    backend: str
    rtol: float | None
    max_iter: int
    on_nonconvergence: str
    progress: bool
    gpu_options: dict | None
    q_bounds: Any
    lmin: int
    normalize: bool
    #: statistics of the last call (written by every evaluation)
    last_stats: SolveStats | None
    #: the backend object, the key it was made for (None: set from outside) and the exact oracle
    _backend_obj: Any
    _backend_key: Any
    _oracle_obj: Any
    #: prepared systems of the last call, by argument ("X", "Y")
    _systems: dict
