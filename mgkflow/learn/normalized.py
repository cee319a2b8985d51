"""The normalized kernel k(x, y) / sqrt(k(x, x) k(y, y)) of any scikit-learn kernel."""

from __future__ import annotations

import numpy as np

from ..errors import ParameterError
from ._wrap import KernelWrapper

__all__ = ["Normalized"]


class Normalized(KernelWrapper):
    """k(x, y) / sqrt(k(x, x) k(y, y)) for any scikit-learn kernel, with its θ-gradient.

    With ``eval_gradient=True`` (symmetric case, as GP fitting asks), the diagonal and its
    gradient come from the same call: d log k̂_ij = d log k_ij - (d log k_ii + d log k_jj) / 2.

    Parameters
    ----------
    kernel : sklearn.gaussian_process.kernels.Kernel
        The kernel to normalize; its hyperparameters are those of this kernel (named
        ``kernel__NAME``), and ``k(x, x)`` must be positive.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.gaussian_process.kernels import DotProduct
    >>> X = np.array([[1.0, 0.0], [1.0, 1.0]])
    >>> Normalized(DotProduct(sigma_0=0.0))(X).round(4)
    array([[1.    , 0.7071],
           [0.7071, 1.    ]])

    The gradient has one slice per hyperparameter of the wrapped kernel:

    >>> K, dK = Normalized(DotProduct(sigma_0=1.0))(X, eval_gradient=True)
    >>> dK.shape
    (2, 2, 1)
    """

    @property
    def requires_vector_input(self) -> bool:
        return bool(getattr(self.kernel, "requires_vector_input", True))

    def __call__(self, X, Y=None, eval_gradient=False):
        if eval_gradient:
            if Y is not None:
                raise ParameterError("Normalized: the gradient is only available when Y is None")
            K, dK = self.kernel(X, eval_gradient=True)
            d = np.diag(K).copy()
            _check_diag(d)
            s = np.sqrt(d)
            Kn = K / np.outer(s, s)
            ddiag = np.einsum("iik->ik", dK) / d[:, None]  # d log k_ii / dθ
            dKn = dK / np.outer(s, s)[:, :, None] - 0.5 * Kn[:, :, None] * (ddiag[:, None, :] + ddiag[None, :, :])
            return Kn, dKn
        if Y is None:
            K = self.kernel(X)
            d = np.diag(K).copy()
            _check_diag(d)
            s = np.sqrt(d)
            return K / np.outer(s, s)
        K = self.kernel(X, Y)
        dx, dy = self.kernel.diag(X), self.kernel.diag(Y)
        _check_diag(dx)
        _check_diag(dy)
        return K / np.sqrt(np.outer(dx, dy))

    def diag(self, X):
        return np.ones(len(X))


def _check_diag(d: np.ndarray) -> None:
    if not np.all(d > 0):
        raise ParameterError(f"Normalized: k(x, x) must be positive, got {d[~(d > 0)][:3]} (first entries)")
