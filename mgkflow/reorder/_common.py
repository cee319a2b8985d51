"""Shared helpers of the orderings: input normalization and permutation checks."""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from ..errors import GraphError, ParameterError, ParameterTypeError

__all__ = ["pattern", "coords_of", "check_perm", "TILE"]

#: Tile edge length (octiles are 8x8).
TILE = 8


def _matrix(adj: Any) -> np.ndarray:
    """``adj`` as a numeric array; :class:`~mgkflow.errors.ParameterTypeError` for anything else (text, None,
    objects, a DataFrame of text)."""
    if adj is None or isinstance(adj, (str, bytes)):
        raise ParameterTypeError(f"expected a Graph or an adjacency matrix, got {type(adj).__name__}")
    try:
        arr = np.asarray(adj)
    except Exception as exc:  # noqa: BLE001 - ragged or odd input: the caller's error
        raise ParameterTypeError(f"expected a Graph or an adjacency matrix: {exc}") from None
    if arr.dtype.kind not in "biuf":
        raise ParameterTypeError(f"expected a Graph or a numeric adjacency matrix, got dtype {arr.dtype}")
    return arr


def pattern(graph: Any) -> sp.csr_array:
    """Binary symmetric adjacency pattern (int8 CSR, sorted indices, no diagonal) of a graph or matrix.

    Parameters
    ----------
    graph : Graph, scipy sparse matrix or array_like
        A :class:`mgkflow.graph.Graph` or a square (sparse or dense) matrix; the
        pattern is symmetrized (``A | A.T``) and the diagonal dropped.

    Examples
    --------
    >>> import numpy as np
    >>> pattern(np.array([[0, 2], [0, 0]])).toarray()
    array([[0, 1],
           [1, 0]], dtype=int8)
    """
    adj = getattr(graph, "adjacency", graph)
    if sp.issparse(adj):
        coo = sp.coo_array(adj)
    else:
        arr = _matrix(adj)
        if arr.ndim != 2:
            raise GraphError(f"adjacency must be a 2-D matrix, got shape {arr.shape}")
        coo = sp.coo_array(arr)
    n = coo.shape[0]
    if coo.shape[0] != coo.shape[1]:
        raise GraphError(f"adjacency matrix must be square, got {coo.shape}")
    keep = (coo.data != 0) & (coo.row != coo.col)
    r, c = coo.row[keep].astype(np.int64), coo.col[keep].astype(np.int64)
    rr, cc = np.concatenate([r, c]), np.concatenate([c, r])
    A = sp.csr_array((np.ones(rr.size, dtype=np.int8), (rr, cc)), shape=(n, n))
    A.sum_duplicates()
    A.data[:] = 1
    A.sort_indices()
    return A


def coords_of(graph: Any) -> np.ndarray | None:
    """Node coordinates of a :class:`~mgkflow.graph.Graph` (None for a matrix or a graph without)."""
    xyz = getattr(graph, "coords", None)
    return None if xyz is None else np.asarray(xyz, dtype=np.float64)


def check_perm(perm: Any, n: int, method: str = "ordering") -> np.ndarray:
    """Return ``perm`` as an int64 array after checking it is a permutation of ``0..n-1``.

    Examples
    --------
    >>> check_perm([1, 0, 2], 3)
    array([1, 0, 2])
    """
    p = np.asarray(perm)
    if p.shape != (n,) or (n and p.dtype.kind not in "iu"):
        raise ParameterError(f"{method}: expected {n} integer indices, got shape {p.shape} dtype {p.dtype}")
    p = p.astype(np.int64)
    seen = np.zeros(n, dtype=bool)
    if n and (p.min() < 0 or p.max() >= n):
        raise ParameterError(f"{method}: index out of range 0..{n - 1}")
    seen[p] = True
    if not seen.all():
        raise ParameterError(f"{method}: not a permutation of 0..{n - 1}")
    return p
