"""Checks of a kernel's parameters and of what a call computed.

:func:`validate` checks every constructor parameter (called at construction, by ``set_params``
and by the θ setter); the others check inputs and results of a call and name what is at fault:
:func:`check_finite` (overflow), :func:`check_diagonal` (a normalization by K(G, G) <= 0),
:func:`check_convergence` (``on_nonconvergence``) and :func:`warn_degenerate`.

Examples
--------
>>> from mgkflow import MarginalizedGraphKernel
>>> kern = MarginalizedGraphKernel(q=0.1)
>>> kern.lmin = 2
>>> validate(kern)
Traceback (most recent call last):
...
mgkflow.errors.ParameterError: lmin must be 0 or 1, got 2
>>> is_scalar(0.1), is_scalar(True), is_scalar("weight")
(True, False, False)
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..backends import available_backends
from ..errors import ConvergenceError, ConvergenceWarning, GraphError, ParameterError, ParameterTypeError
from ..kernels import check_edge_kernel, check_node_kernel
from ..system import GraphSystem
from .spec import KernelSpec
from .stats import DegenerateKernelWarning

__all__ = [
    "Q_MIN",
    "is_scalar",
    "same_graphs",
    "check_probability",
    "validate",
    "check_finite",
    "check_diagonal",
    "check_convergence",
    "warn_degenerate",
]

#: Smallest stop probability: the system's condition number grows as 1/q, and below this float64
#: no longer resolves K to about 1e-6.
Q_MIN = 1e-10


def is_scalar(value: Any) -> bool:
    """True for a real number (a scalar p or q), False for a bool, a vector, a field name or a callable."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def same_graphs(X: Any, Y: Any) -> bool:
    """True when Y is X, or holds the very same Graph objects in the same order."""
    if Y is X:
        return True
    try:
        if len(X) != len(Y):
            return False
        return all(a is b for a, b in zip(X, Y, strict=True))
    except TypeError:
        return False


def check_probability(value: Any, what: str, name: str, lo_open: bool) -> None:
    """Validate a start/stop probability parameter at construction (naming it)."""
    if isinstance(value, bool):
        raise ParameterTypeError(
            f"{what} {name} must be a number, a vector, a node label field name or a callable, got {value!r}"
        )
    if isinstance(value, numbers.Real):
        try:
            v = float(value)
        except OverflowError:
            v = math.inf if value > 0 else -math.inf
        if name == "q":
            if not (0.0 < v < 1.0):
                raise ParameterError(f"{what} {name} must lie in (0, 1), got {value!r:.40}")
            if v < Q_MIN:
                raise ParameterError(
                    f"{what} {name} = {v:g} is below {Q_MIN:g}: the product-graph system's condition number "
                    "grows as 1/q and float64 can no longer resolve K; use q >= 1e-10"
                )
        elif not (v >= 0.0) or not math.isfinite(v):
            raise ParameterError(f"{what} {name} must be non-negative and finite, got {value!r:.40}")
        return
    if isinstance(value, str) or callable(value):
        return
    if isinstance(value, np.ndarray | list | tuple):
        try:
            arr = np.asarray(value)
        except ValueError as exc:
            raise ParameterTypeError(f"{what} {name} must be a numeric vector, got a ragged sequence") from exc
        if arr.dtype.kind not in "biuf" or arr.ndim != 1:
            raise ParameterTypeError(
                f"{what} {name} must be a 1-D numeric vector (or a number, a field name or a callable), "
                f"got {value!r:.60}"
            )
        return
    raise ParameterTypeError(
        f"{what} {name} must be a number, a vector, a node label field name or a callable, got {value!r:.60}"
    )


def validate(kern: KernelSpec) -> None:
    """Check every parameter of ``kern``; raise :class:`~mgkflow.errors.ParameterError` or
    :class:`~mgkflow.errors.ParameterTypeError` naming the first one at fault."""
    check_node_kernel(kern.node_kernel)
    check_edge_kernel(kern.edge_kernel)
    check_probability(kern.q, "stop probability", "q", lo_open=True)
    check_probability(kern.p, "start probability", "p", lo_open=False)
    if not isinstance(kern.backend, str) or kern.backend not in available_backends():
        names = available_backends()
        raise ParameterError(
            f"backend must be {', '.join(map(repr, names[:-1]))} or {names[-1]!r}, got {kern.backend!r}"
        )
    if not isinstance(kern.on_nonconvergence, str) or kern.on_nonconvergence not in ("raise", "warn"):
        raise ParameterError(f"on_nonconvergence must be 'raise' or 'warn', got {kern.on_nonconvergence!r}")
    _check_solver_limits(kern.rtol, kern.max_iter)
    go = kern.gpu_options
    if go is not None and not isinstance(go, dict):
        raise ParameterTypeError(f"gpu_options must be a dict of GPUBackend options or None, got {go!r:.60}")
    if go and kern.backend in ("cpu", "exact"):
        raise ParameterError(f"gpu_options apply to the GPU backend; backend={kern.backend!r} was asked for")
    if go and not all(isinstance(k, str) for k in go):
        raise ParameterTypeError(f"gpu_options keys must be option names (str), got {list(go)!r:.60}")
    qb = kern.q_bounds
    if isinstance(qb, str):
        if qb != "fixed":
            raise ParameterError(f"q_bounds must be a (low, high) pair in (0, 1) or 'fixed', got {qb!r}")
    else:
        try:
            lo, hi = (float(v) for v in qb)
        except (TypeError, ValueError, OverflowError) as exc:
            raise ParameterError(f"q_bounds must be a (low, high) pair in (0, 1) or 'fixed', got {qb!r:.60}") from exc
        if not (0 < lo <= hi < 1):
            raise ParameterError(f"q_bounds must satisfy 0 < low <= high < 1, got ({lo}, {hi})")
    if isinstance(kern.lmin, bool) or not isinstance(kern.lmin, int | np.integer) or kern.lmin not in (0, 1):
        raise ParameterError(f"lmin must be 0 or 1, got {kern.lmin!r}")
    if not isinstance(kern.normalize, bool | np.bool_):
        raise ParameterTypeError(f"normalize must be True or False, got {kern.normalize!r}")


def _check_solver_limits(rtol: Any, mi: Any) -> None:
    """rtol in (0, 1) or None; max_iter a finite integer in [1, 2**62]."""
    if rtol is not None:
        if isinstance(rtol, bool) or not isinstance(rtol, numbers.Real):
            raise ParameterTypeError(f"rtol must be a number in (0, 1) or None, got {rtol!r}")
        if not (0 < float(rtol) < 1):
            raise ParameterError(f"rtol must lie in (0, 1), got {rtol}")
    if isinstance(mi, bool) or not isinstance(mi, numbers.Real):
        raise ParameterTypeError(f"max_iter must be an integer >= 1, got {mi!r}")
    if isinstance(mi, numbers.Integral):
        if mi < 1:
            raise ParameterError(f"max_iter must be >= 1, got {mi}")
    elif not (math.isfinite(float(mi)) and float(mi).is_integer() and mi >= 1):
        raise ParameterError(f"max_iter must be a finite integer >= 1, got {mi!r}")
    if int(mi) > 2**62:
        raise ParameterError(f"max_iter must be at most 2**62, got {mi}")


def check_finite(K: np.ndarray, xs: Sequence[GraphSystem], ys: Sequence[GraphSystem]) -> None:
    """:class:`~mgkflow.errors.GraphError` naming the first pair whose value K[i, j] overflowed."""
    bad = ~np.isfinite(K)
    if bad.any():
        i, j = (int(v) for v in np.argwhere(bad)[0])
        raise GraphError(
            f"K({xs[i].name}, {ys[j].name}) = {K[i, j]}: the kernel value overflows float64 "
            "(start probabilities p too large? K grows as p squared)"
        )


def check_diagonal(kern: KernelSpec, diag: np.ndarray, systems: Sequence[GraphSystem], what: str) -> None:
    """:class:`~mgkflow.errors.GraphError` naming the first graph of ``systems`` with K(G, G) <= 0
    (which cannot normalize)."""
    bad = np.flatnonzero(~(diag > 0))
    if bad.size:
        s = systems[int(bad[0])]
        why = "(are all start probabilities p zero?)"
        if kern.lmin == 1:
            why = "(with lmin=1 a graph without edges, or whose start nodes have none, has K(G, G) = 0)"
        raise GraphError(f"in {what}: {s.name}: K(G, G) = {diag[bad[0]]}, so the kernel cannot be normalized {why}")


def check_convergence(kern: KernelSpec, conv: np.ndarray, res: np.ndarray, stacklevel: int = 2) -> None:
    """Raise :class:`~mgkflow.errors.ConvergenceError` or warn (``kern.on_nonconvergence``) when a
    pair did not converge; ``stacklevel`` counts from the caller (2: the caller's caller)."""
    bad = int(conv.size - np.count_nonzero(conv))  # (not (~conv).sum(): 20 times the time on 6.8M flags)
    if not bad:
        return
    msg = (
        f"{bad} of {conv.size} kernel entries did not converge within max_iter={int(kern.max_iter)} "
        f"(worst relative residual {res[~conv].max():.3g}). The solver's difficulty grows as 1/q "
        "and with the spread of edge weights within a graph (the scale of all weights of a graph "
        "does not matter): raise max_iter or q, or pass on_nonconvergence='warn' to get the values "
        "with flags in last_stats"
    )
    if kern.on_nonconvergence == "raise":
        raise ConvergenceError(msg)
    warnings.warn(msg, ConvergenceWarning, stacklevel=stacklevel + 1)


def warn_degenerate(kern: KernelSpec, stacklevel: int = 2) -> None:
    """:class:`DegenerateKernelWarning` for a normalized kernel that is 1 between any two graphs
    (label-free base kernels, uniform p and q); ``stacklevel`` as in :func:`check_convergence`."""
    if kern.node_kernel.fields or kern.edge_kernel.fields:
        return
    if not (isinstance(kern.p, numbers.Real) and is_scalar(kern.q)):
        return
    warnings.warn(
        "normalized marginalized graph kernel with label-free node and edge kernels and uniform p "
        "and q: it is exactly 1 between any two graphs without isolated nodes (the solution x is "
        "constant over the product graph, so K(G, G') = n n' c and normalizing cancels n n'). "
        "Give the kernels label fields, use non-uniform p or q, or use the raw kernel.",
        DegenerateKernelWarning,
        stacklevel=stacklevel + 1,
    )
