"""Solving a list of pairs: the backend's values (and dK/dh), ``lmin`` and the start probabilities'
scale applied, and the :class:`~mgkflow.evaluation.stats.SolveStats` of the call.

Examples
--------
>>> import networkx as nx
>>> import numpy as np
>>> from mgkflow import Graph, MarginalizedGraphKernel
>>> from mgkflow.evaluation.systems import prepare, self_pairs
>>> kern = MarginalizedGraphKernel(q=0.1, p=2.0, backend="exact")
>>> xs = prepare(kern, [Graph.from_networkx(nx.path_graph(3))], "X")
>>> vals, grads, its, res, conv = solve(kern, xs, xs, self_pairs(1))
>>> bool(abs(vals[0] - 4 * solve(kern, xs, xs, self_pairs(1), raw=False)[0][0]) < 1e-12 * vals[0])  # p² K
True
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..system import GraphSystem
from .backend import get_backend, gradient_solver
from .checks import is_scalar
from .gradient import length0_term
from .spec import KernelSpec
from .stats import SolveStats
from .systems import p_factor

__all__ = ["LMIN_RESOLUTION", "solve", "record"]

#: With lmin=1, values below this fraction of the all-walks kernel are rounding noise (returned as 0).
LMIN_RESOLUTION = 1e-13


def solve(
    kern: KernelSpec,
    xs: Sequence[GraphSystem],
    ys: Sequence[GraphSystem],
    pairs: Any,
    gradient: bool = False,
    raw: bool = True,
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray, np.ndarray, np.ndarray]:
    """Values (and dK/dh in the backend layout) of ``pairs``, lmin applied, start probabilities
    scaled back (``raw``) or left as prepared (normalized results, where they cancel).

    Returns values, gradient or None, iterations, residuals, converged.
    """
    backend = get_backend(kern)
    wrt_q = is_scalar(kern.q)
    bar = None
    if kern.progress:
        from ..progress import progress_bar

        bar = progress_bar(len(pairs), desc=f"MGK {backend.name}", unit="pair")
    update = None if bar is None else bar.update
    try:
        if gradient:
            vals, grads, its, res, conv = gradient_solver(kern)(
                xs, ys, pairs, kern.node_kernel, kern.edge_kernel, wrt_q=wrt_q, progress=update
            )
        else:
            vals, its, res, conv = backend.solve(xs, ys, pairs, kern.node_kernel, kern.edge_kernel, update)
            grads = None
    finally:
        if bar is not None:
            bar.close()
    vals = np.asarray(vals, dtype=np.float64)
    if grads is not None:
        grads = np.asarray(grads, dtype=np.float64)  # the backend's own array (each call returns a new one)
    if kern.lmin == 1:
        vals, grads = _minus_length0(kern, xs, ys, pairs, vals, grads, wrt_q and grads is not None)
    pscale, ex = p_factor(kern, xs, ys, pairs, raw)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):  # reported by check_finite
        if ex is not None:
            vals = np.ldexp(vals, -ex)
            if grads is not None:
                grads = np.ldexp(grads, -ex[:, None])
        if pscale != 1.0:
            vals = vals * pscale * pscale
            if grads is not None:
                grads = grads * pscale * pscale
    return vals, grads, its, res, conv


def _minus_length0(kern: KernelSpec, xs, ys, pairs, vals, grads, wrt_q: bool):
    """K - p_xᵀ V_x q_x (lmin = 1): the difference is known to about 1e-16 K, so values below
    LMIN_RESOLUTION K (e.g. graphs without edges, exactly 0) are returned as 0."""
    ne = len(kern.edge_kernel.hyperparameters)
    full = vals.copy()
    vals = vals.copy()
    with np.errstate(all="ignore"):  # non-finite results are reported by check_finite
        for t, (i, j) in enumerate(np.asarray(pairs, dtype=np.int64).reshape(-1, 2).tolist()):
            v0, g0 = length0_term(xs[i], ys[j], kern.node_kernel, ne, wrt_q)
            vals[t] -= v0
            if grads is not None:
                grads[t] -= g0
        tiny = vals <= LMIN_RESOLUTION * np.abs(full)
    vals[tiny] = 0.0
    if grads is not None:
        grads[tiny] = 0.0
    return vals, grads


def record(
    kern: KernelSpec,
    shape: tuple[int, ...],
    npairs: int,
    iterations: np.ndarray,
    residual: np.ndarray,
    converged: np.ndarray,
    t0: float,
) -> None:
    """Set ``kern.last_stats`` for a call that started at ``time.perf_counter() == t0``."""
    backend = get_backend(kern)
    kern.last_stats = SolveStats(
        backend=backend.name,
        shape=shape,
        pairs=npairs,
        iterations=iterations,
        residual=residual,
        converged=converged,
        seconds=time.perf_counter() - t0,
        extra=dict(getattr(backend, "last_extra", {}) or {}),
    )
