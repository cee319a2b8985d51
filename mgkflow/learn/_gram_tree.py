"""The training covariance K(X, X) of a kernel tree and its gradient's contraction W ↦ Σ W ∘ ∂K/∂θ.

:func:`mgkflow.learn.contract.gram_contraction` walks the kernel's tree once per optimizer step:
scikit-learn's ``Sum`` and ``Product`` pass the weights down, ``ConstantKernel`` stays a number and
``WhiteKernel`` a diagonal, mgkflow's graph kernels contract over their solved pairs, and any other
kernel is a leaf that gives its own (value, gradient).

A contraction is linear in W, so a constant factor scales the other factor's contraction instead of
the n × n weights, and the sums Σ W ∘ A are BLAS dot products. Every n × n array of a step comes from
a :class:`Scratch`: a fit passes one that keeps them from step to step. A fresh 2 MB array
(n ≈ 500) is a fresh mapping of the process's memory whose pages fault in one by one when written;
about 20 of them per step cost a FreeSolv fit a third of its time (``mgkflow/gpu/NOTES.md``, session 15).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.gaussian_process.kernels import ConstantKernel, Product, Sum, WhiteKernel

from ..mgk import MarginalizedGraphKernel
from .cached import Cached
from .exp_similarity import ExpSimilarity
from .feature_kernel import FeatureKernel

__all__ = ["Scratch", "tree_gram"]


class Scratch:
    """n × n float64 arrays by (kernel node, role): fresh ones, or with ``keep`` (a dict) the same
    ones again on the next step (a node's arrays are its own; ids are those of live nodes).

    Examples
    --------
    >>> s = Scratch({})
    >>> node = object()
    >>> s(node, "value", 3) is s(node, "value", 3), Scratch()(node, "value", 3) is Scratch()(node, "value", 3)
    (True, False)
    """

    def __init__(self, keep: dict | None = None) -> None:
        self.keep = keep

    def __call__(self, node: Any, role: str, n: int) -> np.ndarray:
        if self.keep is None:
            return np.empty((n, n))
        key = (id(node), role)
        a = self.keep.get(key)
        if a is None or a.shape != (n, n):
            a = self.keep[key] = np.empty((n, n))
        return a


def _none(W: np.ndarray) -> np.ndarray:
    return np.zeros(0)


def _dot(W: np.ndarray, A: Any) -> float:
    """Σ W ∘ A for an n × n array A (a BLAS dot product) or a number."""
    if np.ndim(A) == 0:
        return float(A) * float(np.sum(W))
    return float(np.dot(W.ravel(), np.asarray(A).ravel()))


def tree_gram(k: Any, X: Any, n: int, scratch: Scratch) -> tuple[Any, Any]:
    """(value, contract) of a kernel over X, X: value a number or an n × n array, contract W ↦ g."""
    if isinstance(k, Sum):
        return _sum(k, X, n, scratch)
    if isinstance(k, Product):
        return _product(k, X, n, scratch)
    if isinstance(k, ConstantKernel):
        c = float(k.constant_value)
        if k.hyperparameter_constant_value.fixed:
            return c, _none
        return c, lambda W: np.array([c * float(np.sum(W))])  # ∂K/∂log c = K
    if isinstance(k, WhiteKernel):
        value = scratch(k, "value", n)
        value.fill(0.0)
        value.flat[:: n + 1] = float(k.noise_level)
        return value, _white_contraction(k)
    if isinstance(k, MarginalizedGraphKernel) and k.n_dims and not isinstance(X, np.ndarray):
        return k.gram_contraction(X)  # over the solved pairs: no n × n × H array
    if isinstance(k, Cached):
        if k.kernel.n_dims:
            return tree_gram(k.kernel, X, n, scratch)  # free hyperparameters: nothing to keep between steps
        return k.gram_view(X), _none
    if isinstance(k, ExpSimilarity):
        return _exp_similarity(k, X, n, scratch)
    if isinstance(k, FeatureKernel) and k.isotropic_rbf():
        return _feature_rbf(k, X, n, scratch)
    K, dK = k(X, eval_gradient=True)
    if dK.shape[2] == 0:
        return K, _none
    return K, lambda W: (W.reshape(1, -1) @ dK.reshape(n * n, -1))[0]


def _white_contraction(k: WhiteKernel) -> Any:
    s = float(k.noise_level)
    if k.hyperparameter_noise_level.fixed:
        return _none
    return lambda W: np.array([s * float(np.trace(W))])


def _sum(k: Sum, X: Any, n: int, scratch: Scratch) -> tuple[Any, Any]:
    """K₁ + K₂ and W ↦ [g₁(W), g₂(W)]; a white kernel adds to the diagonal without an array of its own."""
    white1, white2 = isinstance(k.k1, WhiteKernel), isinstance(k.k2, WhiteKernel)
    if white1 != white2:
        white, other = (k.k1, k.k2) if white1 else (k.k2, k.k1)
        v, g = tree_gram(other, X, n, scratch)
        out = scratch(k, "value", n)
        out[...] = v
        out.flat[:: n + 1] += float(white.noise_level)
        gw = _white_contraction(white)
        first, second = (gw, g) if white1 else (g, gw)
        return out, lambda W: np.concatenate([first(W), second(W)])
    v1, g1 = tree_gram(k.k1, X, n, scratch)
    v2, g2 = tree_gram(k.k2, X, n, scratch)
    if np.ndim(v1) == 0 and np.ndim(v2) == 0:
        return float(v1) + float(v2), lambda W: np.concatenate([g1(W), g2(W)])
    out = np.add(v1, v2, out=scratch(k, "value", n))
    return out, lambda W: np.concatenate([g1(W), g2(W)])


def _product(k: Product, X: Any, n: int, scratch: Scratch) -> tuple[Any, Any]:
    """K₁ K₂ and W ↦ [g₁(W ∘ K₂), g₂(W ∘ K₁)]; a constant factor c gives c Σ W ∘ K₂ and c g₂(W)."""
    v1, g1 = tree_gram(k.k1, X, n, scratch)
    v2, g2 = tree_gram(k.k2, X, n, scratch)
    if np.ndim(v1) == 0 and np.ndim(v2) == 0:
        value: Any = float(v1) * float(v2)
    else:
        value = np.multiply(v1, v2, out=scratch(k, "value", n))
    c1, c2 = isinstance(k.k1, ConstantKernel), isinstance(k.k2, ConstantKernel)
    if not (c1 or c2):
        def weighted(g: Any, W: np.ndarray, v: Any) -> np.ndarray:
            return g(np.multiply(W, v, out=scratch(k, "weights", n)))

        return value, lambda W: np.concatenate([weighted(g1, W, v2), weighted(g2, W, v1)])
    free1 = c1 and not k.k1.hyperparameter_constant_value.fixed
    free2 = c2 and not k.k2.hyperparameter_constant_value.fixed

    def contract(W: np.ndarray) -> np.ndarray:
        # g₁(W ∘ K₂): ∂(c K₂)/∂log c = c K₂ for a constant k₁; c g₁(W) for a constant K₂ = c
        if c1:
            first = np.array([float(v1) * _dot(W, v2)]) if free1 else np.zeros(0)
        else:
            first = float(v2) * g1(W)
        if c2:
            second = np.array([float(v2) * _dot(W, v1)]) if free2 else np.zeros(0)
        else:
            second = float(v1) * g2(W)
        return np.concatenate([first, second])

    return value, contract


def _exp_similarity(k: ExpSimilarity, X: Any, n: int, scratch: Scratch) -> tuple[Any, Any]:
    """E = exp(γ (K − 1)) and its contraction: γ's term γ Σ W ∘ (K − 1) E, then the inner kernel's
    contraction with the weights W ∘ γ E (the chain rule of :class:`ExpSimilarity`)."""
    g = k._check()
    K, inner = tree_gram(k.kernel, X, n, scratch)
    E = scratch(k, "value", n)
    np.multiply(K, g, out=E)
    E -= g
    np.exp(E, out=E)
    free_gamma = not k._gamma_fixed()
    free_inner = k.kernel.n_dims > 0

    def contract(W: np.ndarray) -> np.ndarray:
        WE = np.multiply(W, E, out=scratch(k, "weights", n))
        head = [np.array([g * (_dot(WE, K) - float(np.sum(WE)))])] if free_gamma else []
        if not free_inner:
            return np.concatenate(head or [np.zeros(0)])
        WE *= g
        return np.concatenate([*head, inner(WE)])

    return E, contract


def _feature_rbf(k: FeatureKernel, X: Any, n: int, scratch: Scratch) -> tuple[Any, Any]:
    """exp(−D / 2l²) of the kept squared distances D, and l's term Σ W ∘ K ∘ D / l²."""
    D = k.squared_distances(X)
    inv = 1.0 / float(k.kernel.length_scale) ** 2
    K = np.multiply(D, -0.5 * inv, out=scratch(k, "value", n))
    np.exp(K, out=K)
    if k.kernel.hyperparameter_length_scale.fixed:
        return K, _none

    def contract(W: np.ndarray) -> np.ndarray:
        WK = np.multiply(W, K, out=scratch(k, "weights", n))
        return np.array([inv * _dot(WK, D)])

    return K, contract
