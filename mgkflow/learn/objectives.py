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

Every gradient is a contraction g_j = Σ W ∘ ∂K/∂θⱼ with one weight matrix W (``WEIGHTS``: the
``*_weights`` functions return the value and W), so a caller that can contract without forming
∂K (:func:`mgkflow.learn.contract.gram_contraction`) never holds the n × n × H array. The
leave-one-out forms cost one inverse of K and one more n³ product, for all hyperparameters
together, and no refit: with c = diag(K⁻¹) and a = K⁻¹ y, the mean left out of point i is
yᵢ − aᵢ/cᵢ and its variance 1/cᵢ.

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
from functools import cache

import numpy as np
import scipy.linalg as sla

from ..errors import ParameterError

__all__ = [
    "log_marginal_likelihood",
    "loo_log_predictive",
    "loo_neg_squared_error",
    "lml_weights",
    "lml_value",
    "loo_log_predictive_weights",
    "loo_neg_squared_error_weights",
    "contract",
    "OBJECTIVES",
    "WEIGHTS",
    "Objective",
]

#: ``objective(K, dK, y) -> (value, gradient)``; larger is better.
Objective = Callable[[np.ndarray, np.ndarray, np.ndarray], tuple[float, np.ndarray]]


class NotPositiveDefiniteError(ParameterError):
    """The covariance matrix of the training points is not positive definite at these
    hyperparameters (add noise: a ``WhiteKernel`` or a larger ``alpha``)."""


def _cholesky(K: np.ndarray, overwrite: bool = False) -> np.ndarray:
    """K's lower Cholesky factor (LAPACK potrf), in Fortran order; with ``overwrite`` in K's own
    memory when K is C-contiguous (K is symmetric, so its transpose is K in Fortran order)."""
    A = K.T if overwrite and K.flags.c_contiguous else K
    L, info = sla.lapack.dpotrf(A, lower=1, clean=1, overwrite_a=int(overwrite))
    if info != 0:
        raise NotPositiveDefiniteError(
            "the training covariance K is not positive definite at these hyperparameters; "
            "add noise (a WhiteKernel or a larger alpha)"
        )
    return L


def _inverse(L: np.ndarray, overwrite: bool = False) -> np.ndarray:
    """K⁻¹ from K's lower Cholesky factor (LAPACK potri: a third of the work of solving with I)."""
    return _weights(L, None, 1.0, overwrite)


def _weights(L: np.ndarray, a: np.ndarray | None, scale: float, overwrite: bool = False) -> np.ndarray:
    """scale · K⁻¹ + ½ a aᵀ (a: n × m, or None for no term) from K's lower Cholesky factor L
    (in L's memory with ``overwrite``, when L is in Fortran order).

    LAPACK's potri writes K⁻¹'s lower triangle; one compiled pass scales it, adds the outer
    product and mirrors it into the upper triangle (numpy's ``tril``, transpose and sums took
    four passes over n² and most of a fit's step at n ≈ 500). The result is C-contiguous."""
    inv, info = sla.lapack.dpotri(L, lower=1, overwrite_c=int(overwrite))
    if info != 0:
        n = L.shape[0]
        full = scale * sla.cho_solve((L, True), np.eye(n), check_finite=False)
        return full if a is None else full + 0.5 * (a @ a.T)
    _fill_kernel()(inv, np.zeros((len(inv), 0)) if a is None else np.ascontiguousarray(a), scale)
    return inv.T if inv.flags.f_contiguous else inv  # symmetric: the transpose is the same matrix


@cache
def _fill_kernel() -> Callable:
    from numba import njit

    @njit(cache=True)
    def fill(W, a, scale):  # pragma: no cover - compiled
        n, m = W.shape[0], a.shape[1]
        for i in range(n):
            for j in range(i + 1):
                s = 0.0
                for c in range(m):
                    s += a[i, c] * a[j, c]
                w = scale * W[i, j] + 0.5 * s
                W[i, j] = w
                W[j, i] = w

    return fill


def contract(W: np.ndarray, dK: np.ndarray) -> np.ndarray:
    """g_j = Σᵢₖ Wᵢₖ ∂Kᵢₖ/∂θⱼ: one matrix-vector product over the flattened matrices."""
    n = W.shape[0]
    return (W.reshape(1, -1) @ dK.reshape(n * n, -1))[0] if dK.shape[2] else np.zeros(0)


def lml_value(Y: np.ndarray, a: np.ndarray, half_logdet: float) -> float:
    """log p(Y | θ) from the targets Y (n × m), a = K⁻¹ Y and ½ log|K| = Σ log Lᵢᵢ (L: K's Cholesky factor)."""
    n, m = (Y.shape[0], 1) if Y.ndim == 1 else Y.shape
    return -0.5 * float(np.sum(Y * a)) - m * half_logdet - 0.5 * n * m * float(np.log(2 * np.pi))


def lml_weights(K: np.ndarray, y: np.ndarray, overwrite: bool = False) -> tuple[float, np.ndarray]:
    """log p(y | θ) and the weights W of its gradient, g_j = Σ W ∘ ∂K/∂θⱼ (W = ½ (aaᵀ − m K⁻¹)).

    With ``overwrite`` K's memory may be used for the factor and W (a fit's step does not keep K)."""
    y = np.asarray(y, dtype=np.float64)
    Y = y[:, None] if y.ndim == 1 else y
    L = _cholesky(K, overwrite)
    a = sla.cho_solve((L, True), Y, check_finite=False)
    value = lml_value(Y, a, float(np.log(np.diag(L)).sum()))
    return value, _weights(L, a, -0.5 * Y.shape[1], overwrite)


def _loo_parts(K: np.ndarray, y: np.ndarray, overwrite: bool = False):
    y = np.asarray(y, dtype=np.float64)
    if y.ndim != 1:
        raise ParameterError("the leave-one-out objectives take one target column")
    Kinv = _inverse(_cholesky(K, overwrite), overwrite)
    a = Kinv @ y
    c = np.diag(Kinv).copy()
    return Kinv, a, c


def _loo_weights(Kinv: np.ndarray, a: np.ndarray, u: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """W with Σ W ∘ ∂K_j = Σᵢ uᵢ [K⁻¹∂K_j a]ᵢ − Σᵢ βᵢ [K⁻¹∂K_j K⁻¹]ᵢᵢ, i.e. (K⁻¹u)aᵀ − K⁻¹ diag(β) K⁻¹
    (symmetrized: ∂K_j is symmetric). One n³ product for every hyperparameter together."""
    W = -((Kinv * beta) @ Kinv)
    left = np.outer(Kinv @ u, a)
    W += 0.5 * (left + left.T)
    return W


def loo_log_predictive_weights(K: np.ndarray, y: np.ndarray, overwrite: bool = False) -> tuple[float, np.ndarray]:
    """Σᵢ log p(yᵢ | rest) and the weights W of its gradient (see :func:`loo_log_predictive`)."""
    Kinv, a, c = _loo_parts(K, y, overwrite)
    value = float(np.sum(0.5 * np.log(c) - 0.5 * a * a / c - 0.5 * np.log(2 * np.pi)))
    return value, _loo_weights(Kinv, a, a / c, 0.5 * (1.0 + a * a / c) / c)


def loo_neg_squared_error_weights(K: np.ndarray, y: np.ndarray, overwrite: bool = False) -> tuple[float, np.ndarray]:
    """−Σᵢ rᵢ² and the weights W of its gradient (see :func:`loo_neg_squared_error`)."""
    Kinv, a, c = _loo_parts(K, y, overwrite)
    r = a / c
    # ∂rᵢ = (aᵢ [ZK⁻¹]ᵢᵢ − cᵢ [Za]ᵢ) / cᵢ², so −2 Σ rᵢ ∂rᵢ = Σ 2rᵢ/cᵢ [Za]ᵢ − Σ 2rᵢaᵢ/cᵢ² [ZK⁻¹]ᵢᵢ
    return -float(np.sum(r * r)), _loo_weights(Kinv, a, 2.0 * r / c, 2.0 * r * a / (c * c))


def log_marginal_likelihood(K: np.ndarray, dK: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
    """log p(y | θ) = −½ yᵀK⁻¹y − ½ log|K| − n/2 log 2π and its gradient ½ tr((aaᵀ − K⁻¹) ∂K/∂θⱼ).

    ``y`` may have several columns (independent outputs sharing K): values and gradients add up.
    """
    value, W = lml_weights(K, y)
    return value, contract(W, dK)


def loo_log_predictive(K: np.ndarray, dK: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
    """Σᵢ log p(yᵢ | rest) in closed form, with its gradient (R&W eqs. 5.12–5.13).

    p(yᵢ | rest) is normal with mean yᵢ − aᵢ/cᵢ and variance 1/cᵢ (a = K⁻¹y, c = diag K⁻¹), so
    log p = ½ log cᵢ − aᵢ²/(2cᵢ) − ½ log 2π; its derivative is
    (aᵢ [Zⱼa]ᵢ − ½ (1 + aᵢ²/cᵢ) [ZⱼK⁻¹]ᵢᵢ) / cᵢ with Zⱼ = K⁻¹ ∂K/∂θⱼ.
    """
    value, W = loo_log_predictive_weights(K, y)
    return value, contract(W, dK)


def loo_neg_squared_error(K: np.ndarray, dK: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
    """−Σᵢ rᵢ² with rᵢ = aᵢ/cᵢ the leave-one-out residual, and its gradient.

    ∂aᵢ/∂θⱼ = −[Zⱼa]ᵢ and ∂cᵢ/∂θⱼ = −[ZⱼK⁻¹]ᵢᵢ, so ∂rᵢ/∂θⱼ = (aᵢ [ZⱼK⁻¹]ᵢᵢ − cᵢ [Zⱼa]ᵢ) / cᵢ².
    Unlike the other two it ignores the predicted variances: it tunes the mean alone.
    """
    value, W = loo_neg_squared_error_weights(K, y)
    return value, contract(W, dK)


#: ``weights(K, y) -> (value, W)`` of each objective: its gradient is Σ W ∘ ∂K/∂θⱼ.
WEIGHTS: dict[str, Callable[..., tuple[float, np.ndarray]]] = {
    "lml": lml_weights,
    "loo": loo_log_predictive_weights,
    "loo_mse": loo_neg_squared_error_weights,
}


#: Objectives by name (``GraphGPR(objective=...)``).
OBJECTIVES: dict[str, Objective] = {
    "lml": log_marginal_likelihood,
    "loo": loo_log_predictive,
    "loo_mse": loo_neg_squared_error,
}
