"""exp(γ (k − 1)) of a normalized kernel: :class:`ExpSimilarity`, a sharper kernel with a fitted width."""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.gaussian_process.kernels import Hyperparameter

from ..errors import ParameterError
from ._wrap import KernelWrapper, check_bounds, check_flag

__all__ = ["ExpSimilarity"]


class ExpSimilarity(KernelWrapper):
    """k'(x, y) = exp(γ (k(x, y) − 1)) of a kernel k with ones on its diagonal.

    With k normalized (a :class:`~mgkflow.MarginalizedGraphKernel` with ``normalize=True``),
    2 − 2 k(x, y) is the squared distance of x and y in k's feature space and k' is a squared
    exponential kernel of that distance with length scale 1 / sqrt(2 γ). It is positive
    semi-definite for every γ > 0 (the exponential of a positive semi-definite kernel is). A
    large γ tells molecules apart that k finds alike; the fit chooses γ. The hyperparameters
    are γ (``gamma``) and those of k (``kernel__NAME``), all with analytic gradients.

    Parameters
    ----------
    kernel : sklearn.gaussian_process.kernels.Kernel
        A kernel with values in [0, 1] and k(x, x) = 1.
    gamma : float
        The width γ > 0. Default 5.
    gamma_bounds : (float, float) or "fixed"
        Bounds of γ. Default (0.1, 100).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.gaussian_process.kernels import RBF
    >>> X = np.array([[0.0], [1.0]])
    >>> ExpSimilarity(RBF(1.0), gamma=2.0)(X).round(4)
    array([[1.    , 0.4552],
           [0.4552, 1.    ]])
    """

    def __init__(self, kernel: Any, gamma: float = 5.0, gamma_bounds: Any = (0.1, 100.0)) -> None:
        super().__init__(kernel)
        self.gamma = gamma
        self.gamma_bounds = gamma_bounds

    def get_params(self, deep: bool = True) -> dict:
        params = super().get_params(deep)
        params.update(gamma=self.gamma, gamma_bounds=self.gamma_bounds)
        return params

    @property
    def hyperparameters(self) -> list:
        return [Hyperparameter("gamma", "numeric", self._checked_bounds()), *super().hyperparameters]

    def _gamma_fixed(self) -> bool:
        """Whether γ is fixed (its bounds alone say so: no walk through the wrapped kernel's list)."""
        return self._checked_bounds() == "fixed"

    def _checked_bounds(self) -> Any:
        return check_bounds(self.gamma_bounds, "ExpSimilarity", "gamma_bounds")

    @property
    def theta(self) -> np.ndarray:
        own = [] if self._gamma_fixed() else [np.log(self._check())]
        return np.concatenate([own, self.kernel.theta])

    @theta.setter
    def theta(self, theta: np.ndarray) -> None:
        theta = np.asarray(theta, dtype=np.float64)
        if not self._gamma_fixed():
            self.gamma = float(np.exp(theta[0]))
            theta = theta[1:]
        self.kernel.theta = theta

    @property
    def bounds(self) -> np.ndarray:
        inner = self.kernel.bounds
        if self._gamma_fixed():
            return inner
        own = np.log(np.atleast_2d(np.asarray(self._checked_bounds(), dtype=np.float64)))
        return np.vstack([own, inner]) if inner.size else own

    @property
    def requires_vector_input(self) -> bool:
        return bool(getattr(self.kernel, "requires_vector_input", True))

    def __eq__(self, other: object) -> bool:
        return super().__eq__(other) and self.gamma == other.gamma  # type: ignore[attr-defined]

    def _check(self) -> float:
        g = self.gamma
        if isinstance(g, bool) or not isinstance(g, int | float | np.floating | np.integer) or not 0 < g < np.inf:
            raise ParameterError(f"ExpSimilarity: gamma must be a number > 0, got {g!r:.60}")
        return float(g)

    def __call__(self, X, Y=None, eval_gradient=False):
        g = self._check()
        eval_gradient = check_flag(eval_gradient, "eval_gradient", "ExpSimilarity")
        if eval_gradient:
            if Y is not None:
                raise ParameterError("ExpSimilarity: the gradient is only available when Y is None")
            K, dK = self.kernel(X, eval_gradient=True)
        else:
            K = self.kernel(X) if Y is None else self.kernel(X, Y)
        E = np.exp(g * (K - 1.0))
        if not eval_gradient:
            return E
        grads = [] if self._gamma_fixed() else [(g * (K - 1.0) * E)[:, :, None]]
        grads.append(g * E[:, :, None] * dK)
        return E, np.concatenate(grads, axis=2)

    def diag(self, X):
        self._check()
        return np.exp(self.gamma * (self.kernel.diag(X) - 1.0))

    def __repr__(self) -> str:
        return f"ExpSimilarity({self.kernel!r}, gamma={self.gamma:.4g})"
