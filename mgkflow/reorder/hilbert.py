"""Hilbert curve ordering of node positions (Skilling's transform, vectorized)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._embed import positions, quantize

__all__ = ["hilbert", "hilbert_keys"]


def hilbert_keys(X: np.ndarray) -> np.ndarray:
    """Hilbert-curve keys (uint64) of points X (n, d), d <= 3 used.

    J. Skilling, "Programming the Hilbert curve", AIP Conf. Proc. 707 (2004).

    Examples
    --------
    >>> import numpy as np
    >>> pts = np.array([[0.0, 0.0], [0.0, 1.0], [1.0, 1.0], [1.0, 0.0]])
    >>> hilbert_keys(pts).argsort().tolist()
    [0, 1, 2, 3]
    """
    X = np.asarray(X, dtype=np.float64)[:, :3]
    n, d = X.shape
    if d == 0:
        return np.zeros(n, dtype=np.uint64)
    if d == 1:
        return quantize(X, 63)[:, 0]
    bits = 63 // d
    Q = [q.copy() for q in quantize(X, bits).T]
    one = np.uint64(1)
    m = one << np.uint64(bits - 1)
    # inverse undo excess work
    q = m
    while q > one:
        p = q - one
        for i in range(d):
            hit = (Q[i] & q) != 0
            Q[0] = np.where(hit, Q[0] ^ p, Q[0])
            t = np.where(hit, np.uint64(0), (Q[0] ^ Q[i]) & p)
            Q[0] ^= t
            Q[i] ^= t
        q >>= one
    # Gray encode
    for i in range(1, d):
        Q[i] ^= Q[i - 1]
    t = np.zeros(n, dtype=np.uint64)
    q = m
    while q > one:
        t = np.where((Q[d - 1] & q) != 0, t ^ (q - one), t)
        q >>= one
    for i in range(d):
        Q[i] ^= t
    key = np.zeros(n, dtype=np.uint64)
    for b in range(bits - 1, -1, -1):
        for i in range(d):
            key = (key << one) | ((Q[i] >> np.uint64(b)) & one)
    return key


def hilbert(graph: Any, seed: int = 0, dim: int = 2) -> np.ndarray:
    """Nodes in Hilbert-curve order of their coordinates (or of a ``dim``-D spectral embedding).

    Ties keep the input order. Deterministic.

    Examples
    --------
    >>> import networkx as nx
    >>> from mgkflow.graph import Graph
    >>> sorted(hilbert(Graph.from_networkx(nx.cycle_graph(10))).tolist()) == list(range(10))
    True
    """
    X = positions(graph, dim=dim, seed=seed)
    return np.argsort(hilbert_keys(X), kind="stable").astype(np.int64)
