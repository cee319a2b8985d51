"""Per-graph quantities of the marginalized graph kernel's linear system (DESIGN §1).

:func:`prepare_graph` validates a graph against the kernels and the start/stop
probabilities and returns a :class:`GraphSystem` with p, q and d; every backend
(CPU, GPU) builds its system from these, so validation lives in one place.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Union

import numpy as np

from .errors import GraphError, describe_graph
from .graph import Graph
from .kernels import BaseKernel

#: A start/stop probability: a scalar, the name of a node label field, a
#: callable ``f(graph) -> array of length n``, or one vector (graphs of its length only).
NodeProbability = Union[float, str, Callable[[Graph], Any]]

__all__ = ["GraphSystem", "prepare_graph", "NodeProbability"]


@dataclass(frozen=True)
class GraphSystem:
    """A validated graph with its start probabilities ``p``, stop probabilities ``q``
    and degrees ``d = rowsum(A) / (1 - q)`` (isolated nodes count rowsum 1)."""

    graph: Graph
    index: int | None
    p: np.ndarray
    q: np.ndarray
    d: np.ndarray

    @property
    def n(self) -> int:
        return self.graph.n_nodes

    @property
    def name(self) -> str:
        return describe_graph(self.index, self.graph.title)


def _node_vector(value: NodeProbability, graph: Graph, what: str, who: str) -> np.ndarray:
    n = graph.n_nodes
    if isinstance(value, str):
        if value not in graph.node_labels:
            raise GraphError(f"{who}: {what} reads node label field '{value}', which the graph lacks")
        arr = np.asarray(graph.node_labels[value], dtype=np.float64)
    elif callable(value):
        arr = np.asarray(value(graph), dtype=np.float64)
        if arr.ndim == 0:
            arr = np.full(n, float(arr))
    elif isinstance(value, np.ndarray | list | tuple):
        arr = np.asarray(value, dtype=np.float64)  # one vector for graphs of its length
    else:
        try:
            arr = np.full(n, float(value))
        except (TypeError, ValueError) as exc:
            raise TypeError(
                f"{what} must be a number, a vector, a node label field name or a callable, got {value!r}"
            ) from exc
    if arr.shape != (n,):
        raise GraphError(f"{who}: {what} has shape {arr.shape}, expected ({n},)")
    if not np.all(np.isfinite(arr)):
        raise GraphError(f"{who}: {what} holds NaN or infinite values")
    return arr


def prepare_graph(
    graph: Graph,
    index: int | None,
    node_kernel: BaseKernel,
    edge_kernel: BaseKernel,
    p: NodeProbability = 1.0,
    q: NodeProbability = 0.05,
) -> GraphSystem:
    """Validate ``graph`` for the kernel and compute its p, q and d.

    Raises :class:`~mgkflow.errors.GraphError` naming the graph (``index`` and
    title) and the field for missing label fields, and q outside (0, 1) or
    negative p.

    Examples
    --------
    >>> import numpy as np
    >>> from mgkflow.kernels import Constant
    >>> g = Graph(np.array([[0, 2], [2, 0]]))
    >>> prepare_graph(g, 0, Constant(1.0), Constant(1.0), q=0.5).d
    array([4., 4.])
    """
    if not isinstance(graph, Graph):
        raise TypeError(
            f"{describe_graph(index, None)}: expected mgkflow.Graph, got {type(graph).__name__} "
            "(convert with Graph.from_networkx)"
        )
    who = describe_graph(index, graph.title)
    for field in node_kernel.fields:
        if field not in graph.node_labels:
            raise GraphError(
                f"{who}: node kernel reads node label field '{field}', which the graph lacks "
                f"(it has {sorted(graph.node_labels) or 'none'})"
            )
    for field in edge_kernel.fields:
        if field not in graph.edge_labels:
            raise GraphError(
                f"{who}: edge kernel reads edge label field '{field}', which the graph lacks "
                f"(it has {sorted(graph.edge_labels) or 'none'})"
            )
    qv = _node_vector(q, graph, "stop probability q", who)
    if np.any(qv <= 0) or np.any(qv >= 1):
        raise GraphError(f"{who}: stop probability q must lie in (0, 1), got values in [{qv.min()}, {qv.max()}]")
    pv = _node_vector(p, graph, "start probability p", who)
    if np.any(pv < 0):
        raise GraphError(f"{who}: start probability p must be non-negative")
    rowsum = graph.degree_sum()
    rowsum = np.where(rowsum > 0, rowsum, 1.0)
    d = rowsum / (1.0 - qv)
    return GraphSystem(graph=graph, index=index, p=pv, q=qv, d=d)
