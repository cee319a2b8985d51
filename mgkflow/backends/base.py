"""The backend protocol and the records every backend returns (docs/design.md §9).

A backend solves the product-graph systems of a list of graph pairs. It receives prepared
:class:`~mgkflow.system.GraphSystem` objects (labels gathered, p and q scaled, degrees
computed by :func:`mgkflow.system.prepare_graph`) and the node and edge base kernels; it knows
nothing of normalization, ``lmin`` or the scikit-learn API, which the evaluation layer
(:mod:`mgkflow.evaluation`) applies to what it returns.

``pairs`` is a (k, 2) int array (or a list of ``(i, j)``) of indices into ``xs`` and ``ys``;
``xs is ys`` for a Gram matrix. ``progress``, when given, is called with the number of pairs
finished since its last call. Results are aligned with ``pairs``.

Examples
--------
>>> import numpy as np
>>> from mgkflow.backends.base import Solution
>>> sol = Solution(np.ones(2), np.ones(2, dtype=np.int64), np.zeros(2), np.ones(2, dtype=bool))
>>> values, iterations, residuals, converged = sol     # a record unpacks like a tuple
>>> sol.values.tolist()
[1.0, 1.0]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, Protocol, runtime_checkable

import numpy as np

from ..kernels import BaseKernel
from ..system import GraphSystem

__all__ = ["Backend", "Solution", "GradientSolution", "NodalSolution", "Progress", "Pairs"]

#: ``progress(n)``: n more pairs are done.
Progress = Callable[[int], Any]
#: (k, 2) int array or sequence of ``(i, j)``: pair t is ``(xs[i], ys[j])``.
Pairs = Sequence[tuple[int, int]] | np.ndarray


class Solution(NamedTuple):
    """Values of k pairs and how their solves went (arrays of length k)."""

    values: np.ndarray
    iterations: np.ndarray
    residuals: np.ndarray
    converged: np.ndarray


class GradientSolution(NamedTuple):
    """Values and dK/dh of k pairs.

    ``gradient`` has shape (k, H): dK/dh in linear space for the H hyperparameters
    ``node_kernel.hyperparameters + edge_kernel.hyperparameters (+ q if wrt_q)``, fixed ones
    included (the caller drops them). Values are the plain (lmin = 0) kernel.
    """

    values: np.ndarray
    gradient: np.ndarray
    iterations: np.ndarray
    residuals: np.ndarray
    converged: np.ndarray


class NodalSolution(NamedTuple):
    """Node-pair similarities: ``blocks[t]`` is the (n_i, m_j) array p_i p'_i' x_ii' of pair t
    (it sums to K of the pair)."""

    blocks: list[np.ndarray]
    iterations: np.ndarray
    residuals: np.ndarray
    converged: np.ndarray


@runtime_checkable
class Backend(Protocol):
    """What :class:`~mgkflow.MarginalizedGraphKernel` asks of a backend.

    ``solve`` is required. ``solve_gradient`` and ``solve_nodal`` may be missing (``None`` or
    absent): the evaluation layer then asks the exact backend, the oracle. ``wrt_q`` in
    ``solve_gradient`` means one scalar q for every node of every graph, differentiated too.
    """

    name: str

    def solve(
        self,
        xs: Sequence[GraphSystem],
        ys: Sequence[GraphSystem],
        pairs: Pairs,
        node_kernel: BaseKernel,
        edge_kernel: BaseKernel,
        progress: Progress | None = None,
    ) -> Solution: ...

    def solve_gradient(
        self,
        xs: Sequence[GraphSystem],
        ys: Sequence[GraphSystem],
        pairs: Pairs,
        node_kernel: BaseKernel,
        edge_kernel: BaseKernel,
        wrt_q: bool = False,
        progress: Progress | None = None,
    ) -> GradientSolution: ...

    def solve_nodal(
        self,
        xs: Sequence[GraphSystem],
        ys: Sequence[GraphSystem],
        pairs: Pairs,
        node_kernel: BaseKernel,
        edge_kernel: BaseKernel,
        progress: Progress | None = None,
    ) -> NodalSolution: ...
