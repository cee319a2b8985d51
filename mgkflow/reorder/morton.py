"""Morton (Z-order) curve ordering of node positions."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._embed import positions, quantize

__all__ = ["morton", "morton_keys"]


def morton_keys(X: np.ndarray) -> np.ndarray:
    """Z-order keys (uint64) of points X (n, d), d <= 3 used (extra axes ignored).

    Examples
    --------
    >>> import numpy as np
    >>> morton_keys(np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])).argsort().tolist()
    [0, 1, 2, 3]
    """
    X = np.asarray(X, dtype=np.float64)[:, :3]
    d = max(1, X.shape[1])
    bits = 63 // d
    if X.shape[1] == 0:
        return np.zeros(X.shape[0], dtype=np.uint64)
    Q = quantize(X, bits)
    key = np.zeros(X.shape[0], dtype=np.uint64)
    for b in range(bits):
        for i in range(d):
            bit = (Q[:, i] >> np.uint64(b)) & np.uint64(1)
            key |= bit << np.uint64(b * d + i)
    return key


def morton(graph: Any, seed: int = 0, dim: int = 2) -> np.ndarray:
    """Nodes in Morton order of their coordinates (or of a ``dim``-D spectral embedding).

    Ties (equal keys) keep the input order. Deterministic.

    Examples
    --------
    >>> import networkx as nx
    >>> from mgkflow.graph import Graph
    >>> sorted(morton(Graph.from_networkx(nx.cycle_graph(10))).tolist()) == list(range(10))
    True
    """
    X = positions(graph, dim=dim, seed=seed)
    return np.argsort(morton_keys(X), kind="stable").astype(np.int64)
