"""Counting non-empty 8x8 tiles ("octiles") of an adjacency matrix.

The figure of merit of every ordering (docs/design.md §3): the number of non-empty 8x8
tiles of the full matrix (both triangles, diagonal tiles included).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

__all__ = ["TILE", "octile_keys", "count_octiles", "octile_nnz_histogram"]

#: Tile edge length.
TILE = 8


def _coo(matrix: Any) -> tuple[np.ndarray, np.ndarray, int]:
    adj = getattr(matrix, "adjacency", matrix)  # accept a Graph
    coo = sp.coo_array(adj)
    keep = coo.data != 0
    return coo.row[keep].astype(np.int64), coo.col[keep].astype(np.int64), coo.shape[0]


def octile_keys(matrix: Any, perm: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Sorted unique octile keys ``tile_row * n_tiles + tile_col`` and nnz per octile.

    Parameters
    ----------
    matrix : Graph or sparse matrix
    perm : array of int, optional
        Ordering to apply first (``perm[k]`` = original node placed at k).
    """
    rows, cols, n = _coo(matrix)
    if perm is not None:
        inv = np.empty(n, dtype=np.int64)
        inv[np.asarray(perm, dtype=np.int64)] = np.arange(n)
        rows, cols = inv[rows], inv[cols]
    nt = -(-n // TILE)
    keys = (rows // TILE) * nt + cols // TILE
    return np.unique(keys, return_counts=True)


def count_octiles(matrix: Any, perm: np.ndarray | None = None) -> int:
    """Number of non-empty 8x8 tiles of ``matrix`` (optionally under ``perm``).

    Examples
    --------
    >>> import numpy as np
    >>> A = np.zeros((16, 16)); A[0, 9] = A[9, 0] = 1
    >>> count_octiles(A)
    2
    """
    return int(octile_keys(matrix, perm)[0].size)


def octile_nnz_histogram(matrix: Any, perm: np.ndarray | None = None) -> np.ndarray:
    """Histogram (length 65) of nonzeros per non-empty octile; entry 0 is always 0."""
    _, counts = octile_keys(matrix, perm)
    return np.bincount(counts, minlength=TILE * TILE + 1)
