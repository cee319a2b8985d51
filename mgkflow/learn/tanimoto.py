"""The Tanimoto (Jaccard) kernel of non-negative count or bit vectors (molecular fingerprints)."""

from __future__ import annotations

import numpy as np
from sklearn.gaussian_process.kernels import Kernel

__all__ = ["Tanimoto"]


class Tanimoto(Kernel):
    """Tanimoto (Jaccard) similarity of non-negative count or bit vectors: a·b / (a·a + b·b - a·b).

    No hyperparameters; two all-zero vectors have similarity 1.

    Examples
    --------
    >>> import numpy as np
    >>> Tanimoto()(np.array([[1, 1, 0], [0, 1, 1]]))
    array([[1.        , 0.33333333],
           [0.33333333, 1.        ]])

    With ``eval_gradient=True`` the gradient is empty (no θ):

    >>> Tanimoto()(np.eye(3), eval_gradient=True)[1].shape
    (3, 3, 0)
    """

    def __init__(self) -> None:
        pass

    def __call__(self, X, Y=None, eval_gradient=False):
        X = np.asarray(X, dtype=np.float64)
        Yv = X if Y is None else np.asarray(Y, dtype=np.float64)
        dot = X @ Yv.T
        den = (X * X).sum(1)[:, None] + (Yv * Yv).sum(1)[None, :] - dot
        K = np.where(den > 0, dot / np.where(den > 0, den, 1.0), 1.0)
        if eval_gradient:
            if Y is not None:
                raise ValueError("Tanimoto: the gradient is only available when Y is None")
            return K, np.empty((X.shape[0], X.shape[0], 0))
        return K

    def diag(self, X):
        return np.ones(np.asarray(X).shape[0])

    def is_stationary(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "Tanimoto()"
