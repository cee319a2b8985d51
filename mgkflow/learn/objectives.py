"""Objectives for fitting a Gaussian process's hyperparameters, with their analytic gradients.

Each objective takes the training covariance ``K`` (kernel plus noise, n × n), its derivatives
``dK`` (n × n × H, with respect to θ, the logarithms of the free hyperparameters: what
``kernel(X, eval_gradient=True)`` returns) and the targets ``y``, and returns the value and its
gradient over θ. Larger is better for all three (they are maximized):

============================= =================================================================
:func:`log_marginal_likelihood` log p(y | X, θ), the usual evidence (Rasmussen & Williams eq. 5.8)
:func:`loo_log_predictive`     Σᵢ log p(yᵢ | X₋ᵢ, y₋ᵢ, θ), the leave-one-out log predictive
                               probability in closed form (R&W §5.4.2, eqs. 5.10–5.13)
:func:`loo_neg_squared_error`  −Σᵢ (yᵢ − μ₋ᵢ)², minus the leave-one-out squared error
============================= =================================================================

The leave-one-out forms cost one inverse of K and one product K⁻¹ ∂K/∂θⱼ per hyperparameter,
like the evidence's gradient, and no refit: with c = diag(K⁻¹) and a = K⁻¹ y, the mean left out
of point i is yᵢ − aᵢ/cᵢ and its variance 1/cᵢ.

Examples
--------
>>> import numpy as np
>>> from sklearn.gaussian_process.kernels import RBF, WhiteKernel
>>> X = np.linspace(0, 1, 8)[:, None]
>>> y = np.sin(6 * X[:, 0])
>>> kern = RBF(0.3) + WhiteKernel(1e-2)
>>> K, dK = kern(X, eval_gradient=True)
>>> value, grad = loo_log_predictive(K, dK, y)
>>> grad.shape
(2,)
>>> from sklearn.gaussian_process import GaussianProcessRegressor
>>> lml, _ = log_marginal_likelihood(K, dK, y)
>>> gp = GaussianProcessRegressor(kern, optimizer=None).fit(X, y)
>>> bool(np.isclose(lml, gp.log_marginal_likelihood_value_))
True
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import scipy.linalg as sla

from ..errors import ParameterError

__all__ = ["log_marginal_likelihood", "loo_log_predictive", "loo_neg_squared_error", "OBJECTIVES", "Objective"]

#: ``objective(K, dK, y) -> (value, gradient)``; larger is better.
Objective = Callable[[np.ndarray, np.ndarray, np.ndarray], tuple[float, np.ndarray]]


class NotPositiveDefiniteError(ParameterError):
    """The covariance matrix of the training points is not positive definite at these
    hyperparameters (add noise: a ``WhiteKernel`` or a larger ``alpha``)."""


def _cholesky(K: np.ndarray) -> np.ndarray:
    try:
        return sla.cholesky(K, lower=True, check_finite=False)
    except np.linalg.LinAlgError as exc:
        raise NotPositiveDefiniteError(
            "the training covariance K is not positive definite at these hyperparameters; "
            "add noise (a WhiteKernel or a larger alpha)"
        ) from exc


def _inverse(L: np.ndarray) -> np.ndarray:
    """K⁻¹ from K's lower Cholesky factor (LAPACK potri: a third of the work of solving with I)."""
    inv, info = sla.lapack.dpotri(L, lower=1)
    if info != 0:
        n = L.shape[0]
        return sla.cho_solve((L, True), np.eye(n), check_finite=False)
    lower = np.tril(inv)
    return lower + np.tril(inv, -1).T


def log_marginal_likelihood(K: np.ndarray, dK: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
    """log p(y | θ) = −½ yᵀK⁻¹y − ½ log|K| − n/2 log 2π and its gradient ½ tr((aaᵀ − K⁻¹) ∂K/∂θⱼ).

    ``y`` may have several columns (independent outputs sharing K): values and gradients add up.
    """
    y = np.asarray(y, dtype=np.float64)
    Y = y[:, None] if y.ndim == 1 else y
    L = _cholesky(K)
    a = sla.cho_solve((L, True), Y, check_finite=False)
    n, m = Y.shape
    value = -0.5 * float(np.sum(Y * a)) - m * float(np.log(np.diag(L)).sum()) - 0.5 * n * m * np.log(2 * np.pi)
    inner = a @ a.T - m * _inverse(L)
    # tr(inner ∂K_j) with inner symmetric: one matrix-vector product over the flattened matrices
    grad = 0.5 * (inner.reshape(1, -1) @ dK.reshape(n * n, -1))[0] if dK.shape[2] else np.zeros(0)
    return value, grad


def _loo_parts(K: np.ndarray, dK: np.ndarray, y: np.ndarray):
    y = np.asarray(y, dtype=np.float64)
    if y.ndim != 1:
        raise ParameterError("the leave-one-out objectives take one target column")
    L = _cholesky(K)
    Kinv = _inverse(L)
    a = Kinv @ y
    c = np.diag(Kinv).copy()
    # Z_j = K⁻¹ ∂K_j (one BLAS product per hyperparameter): [Z_j a] and diag(Z_j K⁻¹)
    n, H = K.shape[0], dK.shape[2]
    Za = np.empty((n, H))
    ZKd = np.empty((n, H))
    for j in range(H):
        Z = Kinv @ dK[:, :, j]
        Za[:, j] = Z @ a
        ZKd[:, j] = np.einsum("ij,ji->i", Z, Kinv)
    return a, c, Za, ZKd


def loo_log_predictive(K: np.ndarray, dK: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
    """Σᵢ log p(yᵢ | rest) in closed form, with its gradient (R&W eqs. 5.12–5.13).

    p(yᵢ | rest) is normal with mean yᵢ − aᵢ/cᵢ and variance 1/cᵢ (a = K⁻¹y, c = diag K⁻¹), so
    log p = ½ log cᵢ − aᵢ²/(2cᵢ) − ½ log 2π; its derivative is
    (aᵢ [Zⱼa]ᵢ − ½ (1 + aᵢ²/cᵢ) [ZⱼK⁻¹]ᵢᵢ) / cᵢ with Zⱼ = K⁻¹ ∂K/∂θⱼ.
    """
    a, c, Za, ZKd = _loo_parts(K, dK, y)
    value = float(np.sum(0.5 * np.log(c) - 0.5 * a * a / c - 0.5 * np.log(2 * np.pi)))
    grad = ((a[:, None] * Za - 0.5 * (1.0 + (a * a / c))[:, None] * ZKd) / c[:, None]).sum(axis=0)
    return value, grad


def loo_neg_squared_error(K: np.ndarray, dK: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
    """−Σᵢ rᵢ² with rᵢ = aᵢ/cᵢ the leave-one-out residual, and its gradient.

    ∂aᵢ/∂θⱼ = −[Zⱼa]ᵢ and ∂cᵢ/∂θⱼ = −[ZⱼK⁻¹]ᵢᵢ, so ∂rᵢ/∂θⱼ = (aᵢ [ZⱼK⁻¹]ᵢᵢ − cᵢ [Zⱼa]ᵢ) / cᵢ².
    Unlike the other two it ignores the predicted variances: it tunes the mean alone.
    """
    a, c, Za, ZKd = _loo_parts(K, dK, y)
    r = a / c
    dr = (a[:, None] * ZKd - c[:, None] * Za) / (c * c)[:, None]
    return -float(np.sum(r * r)), -2.0 * (r[:, None] * dr).sum(axis=0)


#: Objectives by name (``GraphGPR(objective=...)``).
OBJECTIVES: dict[str, Objective] = {
    "lml": log_marginal_likelihood,
    "loo": loo_log_predictive,
    "loo_mse": loo_neg_squared_error,
}
