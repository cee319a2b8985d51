"""Reverse Cuthill–McKee ordering (scipy)."""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import reverse_cuthill_mckee

from ._common import pattern

__all__ = ["rcm"]


def rcm(graph: Any, seed: int = 0) -> np.ndarray:
    """Reverse Cuthill–McKee order of the adjacency pattern (``scipy.sparse.csgraph``).

    Deterministic (``seed`` is accepted for the common interface and ignored).
    Disconnected graphs are handled component by component by scipy.

    Examples
    --------
    >>> import numpy as np
    >>> A = np.array([[0, 0, 1], [0, 0, 1], [1, 1, 0]])
    >>> sorted(rcm(A).tolist())
    [0, 1, 2]
    """
    del seed
    A = pattern(graph)
    return np.asarray(reverse_cuthill_mckee(sp.csr_matrix(A), symmetric_mode=True), dtype=np.int64)
