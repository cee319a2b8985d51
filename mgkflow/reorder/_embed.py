"""Node positions for the space-filling-curve orderings: coordinates or a spectral embedding."""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from ._common import coords_of, pattern

__all__ = ["positions", "spectral_embedding"]

_DENSE_MAX = 600  # nodes: dense eigensolver up to this size


def spectral_embedding(graph: Any, dim: int = 2, seed: int = 0) -> np.ndarray:
    """``dim``-D spectral embedding: leading non-trivial eigenvectors of ``D^-1/2 A D^-1/2``.

    Isolated nodes sit at the origin; disconnected graphs are fine (components
    separate along the indicator eigenvectors). Eigenvector signs are fixed
    (largest-magnitude entry positive) so that the result is deterministic.

    Examples
    --------
    >>> import networkx as nx
    >>> from mgkflow.graph import Graph
    >>> spectral_embedding(Graph.from_networkx(nx.path_graph(5)), dim=2).shape
    (5, 2)
    """
    A = pattern(graph).astype(np.float64)
    n = A.shape[0]
    k = min(dim + 1, n)
    deg = np.asarray(A.sum(axis=1)).ravel()
    inv = np.zeros(n)
    inv[deg > 0] = 1.0 / np.sqrt(deg[deg > 0])
    M = sp.diags(inv) @ A @ sp.diags(inv)
    if n <= _DENSE_MAX or k >= n - 1:
        w, V = np.linalg.eigh(M.toarray())
        V = V[:, np.argsort(-w, kind="stable")[:k]]
    else:
        from scipy.sparse.linalg import eigsh

        v0 = np.random.default_rng(seed).uniform(0.5, 1.5, n)
        w, V = eigsh(sp.csr_matrix(M) + sp.identity(n, format="csr"), k=k, which="LA", v0=v0, tol=1e-6)
        V = V[:, np.argsort(-w, kind="stable")]
    V = V[:, 1:] * inv[:, None] if k > 1 else np.zeros((n, 0))
    idx = np.argmax(np.abs(V), axis=0) if V.size else np.zeros(0, dtype=np.int64)
    signs = np.sign(V[idx, np.arange(V.shape[1])]) if V.size else np.zeros(0)
    V = V * np.where(signs == 0, 1.0, signs)
    if V.shape[1] < dim:
        V = np.hstack([V, np.zeros((n, dim - V.shape[1]))])
    return V


def positions(graph: Any, dim: int | None = None, seed: int = 0) -> np.ndarray:
    """Coordinates of the graph's nodes if it has them, else a spectral embedding.

    Parameters
    ----------
    graph : Graph or sparse matrix
    dim : int, optional
        Embedding dimension (2 or 3) when there are no coordinates (default 2).
    seed : int
        Seed of the iterative eigensolver start vector (large graphs only).
    """
    xyz = coords_of(graph)
    if xyz is not None and xyz.shape[1] > 0:
        return xyz
    return spectral_embedding(graph, dim=dim or 2, seed=seed)


def quantize(X: np.ndarray, bits: int) -> np.ndarray:
    """Map each column of X onto integers 0..2**bits-1 (uint64), same scale for all axes."""
    X = np.asarray(X, dtype=np.float64)
    lo = X.min(axis=0) if X.size else np.zeros(X.shape[1])
    span = float((X.max(axis=0) - lo).max()) if X.size else 0.0
    if span <= 0:
        return np.zeros(X.shape, dtype=np.uint64)
    q = np.floor((X - lo) / span * (2**bits - 1) + 0.5)
    return np.clip(q, 0, 2**bits - 1).astype(np.uint64)
