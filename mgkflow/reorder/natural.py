"""The natural (identity) ordering."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._common import pattern

__all__ = ["natural"]


def natural(graph: Any, seed: int = 0) -> np.ndarray:
    """The identity permutation (the input order).

    Examples
    --------
    >>> import numpy as np
    >>> natural(np.zeros((3, 3)))
    array([0, 1, 2])
    """
    del seed
    return np.arange(pattern(graph).shape[0], dtype=np.int64)
