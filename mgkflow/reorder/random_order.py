"""A uniformly random ordering (seeded) — the worst-case baseline."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._common import pattern

__all__ = ["random_order"]


def random_order(graph: Any, seed: int = 0) -> np.ndarray:
    """A random permutation from ``numpy.random.default_rng(seed)``.

    Examples
    --------
    >>> import numpy as np
    >>> p = random_order(np.zeros((5, 5)), seed=1)
    >>> sorted(p.tolist()), (p == random_order(np.zeros((5, 5)), seed=1)).all()
    ([0, 1, 2, 3, 4], np.True_)
    """
    n = pattern(graph).shape[0]
    return np.random.default_rng(seed).permutation(n).astype(np.int64)
