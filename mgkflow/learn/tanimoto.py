"""The Tanimoto (Jaccard) kernel of non-negative count or bit vectors (molecular fingerprints)."""

from __future__ import annotations

import numpy as np
from sklearn.gaussian_process.kernels import Kernel

from ..errors import ParameterError, ParameterTypeError

__all__ = ["Tanimoto"]


def _fingerprints(values: object, what: str) -> np.ndarray:
    """A 2-D float matrix of fingerprints (one row per sample); mgkflow errors otherwise."""
    if values is None or isinstance(values, (str, bytes)):
        raise ParameterTypeError(f"Tanimoto: {what} must be a 2-D array of fingerprints, got {type(values).__name__}")
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ParameterTypeError(f"Tanimoto: {what} must be a 2-D array of numbers: {exc}") from None
    if arr.ndim != 2 or not np.all(np.isfinite(arr)):
        raise ParameterError(f"Tanimoto: {what} must be a 2-D array of finite numbers, got shape {arr.shape}")
    return arr


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
        X = _fingerprints(X, "X")
        Yv = X if Y is None else _fingerprints(Y, "Y")
        if Yv.shape[1] != X.shape[1]:
            raise ParameterError(f"Tanimoto: X and Y have {X.shape[1]} and {Yv.shape[1]} bits")
        dot = X @ Yv.T
        den = (X * X).sum(1)[:, None] + (Yv * Yv).sum(1)[None, :] - dot
        K = np.where(den > 0, dot / np.where(den > 0, den, 1.0), 1.0)
        if eval_gradient:
            if Y is not None:
                raise ParameterError("Tanimoto: the gradient is only available when Y is None")
            return K, np.empty((X.shape[0], X.shape[0], 0))
        return K

    def diag(self, X):
        return np.ones(_fingerprints(X, "X").shape[0])

    def is_stationary(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "Tanimoto()"
