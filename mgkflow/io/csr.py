"""Symmetric CSR arrays from undirected edge lists (numpy only; no :class:`~mgkflow.graph.Graph`).

The low-level step shared by the converters (:mod:`mgkflow.io.rdkit`,
:mod:`mgkflow.io.pdb_parser`), the TU reader and the built-in datasets: their
arrays become the keyword arguments of :meth:`mgkflow.Graph.from_csr`.
"""

from __future__ import annotations

import numpy as np

__all__ = ["csr_from_edges"]


def csr_from_edges(
    n: int,
    u: np.ndarray,
    v: np.ndarray,
    edge_values: dict[str, np.ndarray],
    weights: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """Symmetric CSR arrays from an undirected edge list (each edge once).

    Returns ``indptr, indices, data, edge_labels`` with column indices sorted
    within each row and every edge label duplicated onto both directions.

    Examples
    --------
    >>> indptr, indices, data, labels = csr_from_edges(3, np.array([0, 1]), np.array([1, 2]), {"x": [5, 6]})
    >>> indptr.tolist(), indices.tolist(), labels["x"].tolist()
    ([0, 1, 3, 4], [1, 0, 2, 1], [5, 5, 6, 6])
    """
    u = np.asarray(u, dtype=np.int64)
    v = np.asarray(v, dtype=np.int64)
    rows = np.concatenate([u, v])
    cols = np.concatenate([v, u])
    order = np.lexsort((cols, rows))
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n), out=indptr[1:])
    w = np.ones(len(u), dtype=np.float64) if weights is None else np.asarray(weights, dtype=np.float64)
    data = np.concatenate([w, w])[order]
    labels = {}
    for name, vals in edge_values.items():
        vals = np.asarray(vals)
        labels[name] = np.concatenate([vals, vals])[order]
    return indptr, cols[order], data, labels
