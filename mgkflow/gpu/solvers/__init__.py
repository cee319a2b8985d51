"""Pair solvers of the GPU backend: a registry with one module per solver.

A solver is one CUDA program that solves whole pairs, with the host code that routes pairs to it
and runs its launches. :class:`~mgkflow.gpu.backend.GPUBackend` offers the pairs of a call to the
registered solvers in the order of their ``rank``; each claims the pairs its rule accepts, and the
last one takes the rest:

======  =============  ==================  ===================================================
 rank   name           CUDA source         claims
======  =============  ==================  ===================================================
 0      ``compact``    ``mgk_compact.cu``  small pairs of a value-only call in the row layout
                                           (:mod:`.compact`: bins by product size and shared
                                           memory; molecules)
 1      ``wide``       ``mgk_wide.cu``     large pairs, one at a time with the whole device
                                           (:mod:`.wide`: ``wide=True``, or by the launch
                                           plan's rule, :func:`mgkflow.gpu.plan.plan_launches`)
 2      ``per_block``  ``mgk_solver.cu``   every other pair, one thread block each, in launch
                                           groups by size (:mod:`.per_block`)
======  =============  ==================  ===================================================

The per-block and the wide solver run the XMV strategies of :mod:`mgkflow.gpu.strategies` (the
inner loop of their CG: a strategy is an XMV, a solver the whole PCG around it); the compact
solver has its own XMV. That is why the solvers are a registry of their own beside the strategies
rather than entries of it: a strategy is chosen per pair among interchangeable XMVs by a cost
model of one XMV; a solver claims pairs by a rule over the whole pair and orders the jobs of its
launches by a cost model of the whole solve (:meth:`Solver.job_cost`).

Each solver module defines one :class:`Solver` subclass instance and registers it: its ``name``,
``rank``, ``source`` (the CUDA template in :mod:`mgkflow.gpu`), ``kernels``, its claim rule
(:meth:`Solver.claims`, described in ``claim``), its job cost model (:meth:`Solver.job_cost`) and
its run path (:meth:`Solver.path`: an object bound to one backend, which builds the solver's
modules, routes pairs to it and queues its launches through the backend's
:class:`mgkflow.gpu.launch.Launcher`). The modules import without PyCUDA.

Adding a solver
---------------
1. one module here, ``mgkflow/gpu/solvers/<name>.py``: a :class:`Solver` subclass (``name``,
   ``rank``, ``source``, ``kernels``, ``claim``, ``claims``, ``job_cost``, ``path``) instantiated and
   passed to :func:`register` (every module of this package is imported when it loads), and its
   source generator (its ``${...}`` placeholders filled from a
   :class:`~mgkflow.gpu.source.KernelConfig`; hyperparameter values travel in ``mgk_kpar``);
2. one CUDA source, ``mgkflow/gpu/<source>.cu``, including the shared helpers of
   ``mgk_common.cuh`` (spliced as ``${COMMON}``: the per-pair kernels' shared parameter groups, warp
   reductions; :func:`mgkflow.gpu.source.common_placeholders` fills the placeholders all sources share);
3. one test file (``tests/test_gpu_compact.py`` for ``compact``, ``tests/test_wide.py`` for ``wide``,
   ``tests/test_gpu.py`` for ``per_block``): numpy emulation of a launch vs the CPU solver, nvcc
   compile of the generated source, fake-driver launch through ``GPUBackend.solve``;
4. its step in :meth:`mgkflow.gpu.backend.GPUBackend.solve`, at its rank: the solvers before it
   have claimed their pairs, the ones after it get what it leaves.

Examples
--------
>>> [s.name for s in ranked()]
['compact', 'wide', 'per_block']
>>> get("compact").source, get("per_block").source, get("wide").source
('mgk_compact.cu', 'mgk_solver.cu', 'mgk_wide.cu')
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["Solver", "register", "unregister", "get", "available", "ranked"]


class Solver:
    """One pair solver (subclass per module; see the package docstring).

    Attributes
    ----------
    name : str
        Registry name.
    rank : int
        Routing order: a call offers its pairs to the solvers by ascending rank.
    source : str
        CUDA template of :mod:`mgkflow.gpu` the solver's modules are generated from.
    kernels : tuple of str
        Kernels of the source the solver launches.
    claim : str
        The claim rule in words (which pairs the solver takes).
    """

    name = ""
    rank = 0
    source = ""
    kernels: tuple[str, ...] = ()
    claim = ""

    def claims(self, *args: Any, **kwargs: Any) -> Any:
        """The pairs of a call this solver takes (the solver's own signature and result)."""
        raise NotImplementedError

    def job_cost(self, db: Any, g1: np.ndarray, g2: np.ndarray) -> np.ndarray:
        """Estimated relative cost of each pair (g1[t], g2[t]) of an uploaded batch ``db``: the order in
        which its launches hand out their jobs (largest first) or solve their pairs."""
        raise NotImplementedError

    def path(self, backend: Any) -> Any:
        """The solver's run path for one :class:`~mgkflow.gpu.backend.GPUBackend` (its settings and
        :class:`~mgkflow.gpu.launch.Launcher`)."""
        raise NotImplementedError


_REGISTRY: dict[str, Solver] = {}


def register(solver: Solver, *, overwrite: bool = False) -> Solver:
    """Register a solver instance under ``solver.name``."""
    name = solver.name
    if not name or not solver.source:
        raise ValueError(f"a solver needs a name and a CUDA source, got {name!r}, {solver.source!r}")
    if name in _REGISTRY and not overwrite:
        raise ValueError(f"solver {name!r} is already registered")
    _REGISTRY[name] = solver
    return solver


def unregister(name: str) -> None:
    """Remove a solver (tests, experiments)."""
    _REGISTRY.pop(name, None)


def get(name: str) -> Solver:
    """The solver registered under ``name``."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown GPU solver {name!r}; available: {sorted(_REGISTRY)}") from None


def available() -> list[str]:
    """Names of the registered solvers, in routing order."""
    return [s.name for s in ranked()]


def ranked() -> list[Solver]:
    """The registered solvers in routing order (ascending ``rank``, then name)."""
    return sorted(_REGISTRY.values(), key=lambda s: (s.rank, s.name))


def _load_modules() -> None:
    """Import every solver module of this package (each registers its solver)."""
    import importlib
    import pkgutil

    for m in pkgutil.iter_modules(__path__):
        if not m.name.startswith("_"):
            importlib.import_module(f"{__name__}.{m.name}")


_load_modules()
