"""A kernel tree's covariance block and its gradient's contraction W ↦ Σ W ∘ ∂K/∂θ.

:func:`mgkflow.learn.contract.gram_contraction` (the training covariance K(X, X)) and
:func:`mgkflow.learn.contract.cross_contraction` (a cross block K(X, Z), e.g. a low-rank GP's
training rows against its landmarks) walk the kernel's tree once per optimizer step: scikit-learn's
``Sum`` and ``Product`` pass the weights down, ``ConstantKernel`` stays a number and ``WhiteKernel``
a diagonal (nothing in a cross block), mgkflow's graph kernels contract over their solved pairs, a
fixed ``Cached`` kernel and the RBF of a ``FeatureKernel`` reuse what they kept (the block, the
squared distances), and any other kernel is a leaf that gives its own (value, gradient).

A contraction is linear in W, so a constant factor scales the other factor's contraction instead of
the weights, and the sums Σ W ∘ A are BLAS dot products: no block × H array of derivatives is made.
Every block-sized array of a step comes from a :class:`Scratch`: a fit passes one that keeps them
from step to step. A fresh 2 MB array (n ≈ 500) is a fresh mapping of the process's memory whose
pages fault in one by one when written; about 20 of them per step cost a FreeSolv fit a third of its
time (``mgkflow/gpu/NOTES.md``, session 15).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.gaussian_process.kernels import ConstantKernel, Product, Sum, WhiteKernel

from ..mgk import MarginalizedGraphKernel
from ._passes import exp_affine, weighted_sums
from ._wrap import input_key, kept_inputs
from .cached import Cached
from .exp_similarity import ExpSimilarity
from .feature_kernel import FeatureKernel, _features

__all__ = ["Scratch", "Block", "tree_gram", "tree_block", "block_arrays", "check_fit_memory"]


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

    def __call__(self, node: Any, role: str, n: int | tuple) -> np.ndarray:
        shape = (n, n) if np.ndim(n) == 0 else tuple(n)
        if self.keep is None:
            return np.empty(shape)
        key = (id(node), role)
        a = self.keep.get(key)
        if a is None or a.shape != shape:
            a = self.keep[key] = np.empty(shape)
        return a


@dataclass
class Block:
    """What a walk evaluates: K(X, X) with its noise (``Y`` None) or the cross block K(X, Y) of two
    sets taken as different (no noise; ``cache``: where fixed leaves keep their blocks, the
    dictionary of :func:`mgkflow.learn.contract.cross_kernel`)."""

    X: Any
    Y: Any
    shape: tuple
    scratch: Scratch
    cache: dict | None = None
    #: whether contractions are wanted (without, leaves are evaluated without their gradients)
    grad: bool = True
    #: ``cross(k, X, Y, grad, cache) -> (K, dK or None)`` of a cross block's leaves
    #: (:func:`mgkflow.learn.contract._cross`, passed in: that module calls this one)
    cross: Any = None

    def array(self, node: Any, role: str) -> np.ndarray:
        return self.scratch(node, role, self.shape)


def _none(W: np.ndarray) -> np.ndarray:
    return np.zeros(0)


def _dot(W: np.ndarray, A: Any) -> float:
    """Σ W ∘ A for an n × n array A (a BLAS dot product) or a number."""
    if np.ndim(A) == 0:
        return float(A) * float(np.sum(W))
    return float(np.dot(W.ravel(), np.asarray(A).ravel()))


def block_arrays(k: Any) -> int:
    """How many block-sized float64 arrays a walk of ``k`` over K(X, X) keeps (its scratch arrays, the fixed
    kernels' kept blocks, a leaf's value and derivatives), for a memory estimate made before the walk.

    Examples
    --------
    >>> from sklearn.gaussian_process.kernels import RBF, WhiteKernel
    >>> from sklearn.gaussian_process.kernels import ConstantKernel as C
    >>> block_arrays(C(1.0) * RBF(1.0) + WhiteKernel(0.1))  # the sum's value, the product's, RBF's K and dK
    4
    """
    if isinstance(k, Sum):
        white1, white2 = isinstance(k.k1, WhiteKernel), isinstance(k.k2, WhiteKernel)
        if white1 != white2:  # the white kernel is added into the sum's array
            return 1 + block_arrays(k.k2 if white1 else k.k1)
        return 1 + block_arrays(k.k1) + block_arrays(k.k2)
    if isinstance(k, Product):
        constant = isinstance(k.k1, ConstantKernel) or isinstance(k.k2, ConstantKernel)
        return (1 if constant else 2) + block_arrays(k.k1) + block_arrays(k.k2)
    if isinstance(k, ConstantKernel):
        return 0
    if isinstance(k, WhiteKernel):
        return 1
    if isinstance(k, Cached):
        return block_arrays(k.kernel) if k.kernel.n_dims else 1
    if isinstance(k, ExpSimilarity):
        return 2 + block_arrays(k.kernel)
    if isinstance(k, FeatureKernel) and k.isotropic_rbf():
        return 2  # the value and the squared distances
    if isinstance(k, MarginalizedGraphKernel):
        return 2
    return 1 + k.n_dims  # a leaf's K and its n × n × H derivatives


def check_fit_memory(kernel: Any, rows: int, cols: int, extra: int, what: str, way_out: str) -> None:
    """Raise the project's ``ResourceError`` (before any kernel evaluation) when a fit's ``rows`` × ``cols``
    float64 arrays, :func:`block_arrays` of ``kernel`` plus ``extra``, exceed the host's available memory;
    the message says ``what`` keeps them and ``way_out``."""
    from ..gram.resources import ResourceError, _fmt, host_available_bytes

    arrays = block_arrays(kernel) + extra
    need = 8 * rows * cols * arrays
    available = host_available_bytes()
    if available and need > available:
        raise ResourceError(
            f"{what} keeps about {arrays} arrays of {rows} × {cols} float64 ({_fmt(need)}), more than the "
            f"{_fmt(available)} of host memory available now; {way_out}"
        )


def tree_gram(k: Any, X: Any, n: int, scratch: Scratch, grad: bool = True) -> tuple[Any, Any]:
    """(value, contract) of a kernel over X, X: value a number or an n × n array, contract W ↦ g (without
    ``grad`` the leaves are evaluated without their gradients and the contraction is not to be called)."""
    return tree_block(k, Block(X, None, (n, n), scratch, grad=grad))


def tree_block(k: Any, b: Block) -> tuple[Any, Any]:
    """(value, contract) of a kernel over the block ``b``: value a number or an array of ``b.shape``,
    contract W ↦ g (W of ``b.shape``)."""
    if isinstance(k, Sum):
        return _sum(k, b)
    if isinstance(k, Product):
        return _product(k, b)
    if isinstance(k, ConstantKernel):
        c = float(k.constant_value)
        if k.hyperparameter_constant_value.fixed:
            return c, _none
        return c, lambda W: np.array([c * float(np.sum(W))])  # ∂K/∂log c = K
    if isinstance(k, WhiteKernel):
        if b.Y is not None:  # no noise between two sets
            return 0.0, lambda W: np.zeros(k.n_dims)
        n = b.shape[0]
        value = b.array(k, "value")
        value.fill(0.0)
        value.flat[:: n + 1] = float(k.noise_level)
        return value, _white_contraction(k)
    opened = b.Y is None and b.grad and not isinstance(b.X, np.ndarray)
    if isinstance(k, MarginalizedGraphKernel) and k.n_dims and opened:
        return k.gram_contraction(b.X)  # over the solved pairs: no n × n × H array
    if isinstance(k, Cached):
        if k.kernel.n_dims:
            return tree_block(k.kernel, b)  # free hyperparameters: nothing to keep between steps
        if b.Y is None:
            return k.gram_view(b.X), _none
        return _kept_block(k, b), _none
    if isinstance(k, ExpSimilarity):
        return _exp_similarity(k, b)
    if isinstance(k, FeatureKernel) and k.isotropic_rbf():
        return _feature_rbf(k, b)
    K, dK = _leaf(k, b)
    if dK is None or dK.shape[2] == 0:
        return K, _none
    return K, lambda W: (W.reshape(1, -1) @ dK.reshape(W.size, -1))[0]


def _leaf(k: Any, b: Block) -> tuple[np.ndarray, np.ndarray | None]:
    """(K, dK) of a kernel the walk does not open (dK None without ``b.grad``)."""
    if b.Y is None:
        return k(b.X, eval_gradient=True) if b.grad else (k(b.X), None)
    return b.cross(k, b.X, b.Y, b.grad, b.cache)


def _kept_block(k: Cached, b: Block) -> np.ndarray:
    """A fixed kernel's cross block, made once per (X, Y) and kept in ``b.cache`` (read-only)."""
    kx, ky = input_key(b.X), input_key(b.Y)
    if b.cache is None or kx is None or ky is None:
        return b.cross(k, b.X, b.Y, False, b.cache)[0]
    key = ("block", id(k), repr(k.kernel), kx, ky)
    hit = b.cache.get(key)
    if hit is None:
        K = np.ascontiguousarray(b.cross(k, b.X, b.Y, False, b.cache)[0])
        K.flags.writeable = False
        hit = b.cache[key] = (K, (kept_inputs(b.X), kept_inputs(b.Y)))
    return hit[0]


def _white_contraction(k: WhiteKernel) -> Any:
    s = float(k.noise_level)
    if k.hyperparameter_noise_level.fixed:
        return _none
    return lambda W: np.array([s * float(np.trace(W))])


def _sum(k: Sum, b: Block) -> tuple[Any, Any]:
    """K₁ + K₂ and W ↦ [g₁(W), g₂(W)]; a white kernel adds to the diagonal without an array of its own."""
    white1, white2 = isinstance(k.k1, WhiteKernel), isinstance(k.k2, WhiteKernel)
    if white1 != white2 and b.Y is None:
        white, other = (k.k1, k.k2) if white1 else (k.k2, k.k1)
        v, g = tree_block(other, b)
        out = b.array(k, "value")
        out[...] = v
        out.flat[:: b.shape[0] + 1] += float(white.noise_level)
        gw = _white_contraction(white)
        first, second = (gw, g) if white1 else (g, gw)
        return out, lambda W: np.concatenate([first(W), second(W)])
    v1, g1 = tree_block(k.k1, b)
    v2, g2 = tree_block(k.k2, b)
    if np.ndim(v1) == 0 and np.ndim(v2) == 0:
        return float(v1) + float(v2), lambda W: np.concatenate([g1(W), g2(W)])
    if b.Y is not None and (white1 or white2):  # a cross block: the white kernel's 0 adds nothing
        return (v2 if white1 else v1), lambda W: np.concatenate([g1(W), g2(W)])
    out = np.add(v1, v2, out=b.array(k, "value"))
    return out, lambda W: np.concatenate([g1(W), g2(W)])


def _product(k: Product, b: Block) -> tuple[Any, Any]:
    """K₁ K₂ and W ↦ [g₁(W ∘ K₂), g₂(W ∘ K₁)]; a constant factor c gives c Σ W ∘ K₂ and c g₂(W)."""
    v1, g1 = tree_block(k.k1, b)
    v2, g2 = tree_block(k.k2, b)
    if np.ndim(v1) == 0 and np.ndim(v2) == 0:
        value: Any = float(v1) * float(v2)
    else:
        value = np.multiply(v1, v2, out=b.array(k, "value"))
    c1, c2 = isinstance(k.k1, ConstantKernel), isinstance(k.k2, ConstantKernel)
    if not (c1 or c2):

        def weighted(g: Any, W: np.ndarray, v: Any) -> np.ndarray:
            return g(np.multiply(W, v, out=b.array(k, "weights")))

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


def _exp_similarity(k: ExpSimilarity, b: Block) -> tuple[Any, Any]:
    """E = exp(γ (K − 1)) and its contraction: γ's term γ Σ W ∘ (K − 1) E, then the inner kernel's
    contraction with the weights W ∘ γ E (the chain rule of :class:`ExpSimilarity`)."""
    g = k._check()
    K, inner = tree_block(k.kernel, b)
    E = exp_affine(np.asarray(K), g, -g, b.array(k, "value"))
    free_gamma = not k._gamma_fixed()
    free_inner = k.kernel.n_dims > 0

    def contract(W: np.ndarray) -> np.ndarray:
        if not free_inner:  # γ's term alone: Σ W ∘ E ∘ K and Σ W ∘ E in one pass
            if not free_gamma:
                return np.zeros(0)
            wek, we = weighted_sums(W, E, K)
            return np.array([g * (wek - we)])
        WE = np.multiply(W, E, out=b.array(k, "weights"))
        head = [np.array([g * (_dot(WE, K) - float(np.sum(WE)))])] if free_gamma else []
        WE *= g
        return np.concatenate([*head, inner(WE)])

    return E, contract


def _feature_rbf(k: FeatureKernel, b: Block) -> tuple[Any, Any]:
    """exp(−D / 2l²) of the kept squared distances D, and l's term Σ W ∘ K ∘ D / l²."""
    D = k.squared_distances(b.X) if b.Y is None else _cross_distances(k, b)
    inv = 1.0 / float(k.kernel.length_scale) ** 2
    K = exp_affine(D, -0.5 * inv, 0.0, b.array(k, "value"))
    if k.kernel.hyperparameter_length_scale.fixed:
        return K, _none

    def contract(W: np.ndarray) -> np.ndarray:
        return np.array([inv * weighted_sums(W, K, D)[0]])

    return K, contract


def _cross_distances(k: FeatureKernel, b: Block) -> np.ndarray:
    """‖fᵢ − gⱼ‖² between X's and Y's feature vectors, kept in ``b.cache`` (read-only)."""
    kx, ky = input_key(b.X), input_key(b.Y)
    key = None if b.cache is None or kx is None or ky is None else ("feature distances", kx, ky)
    hit = None if key is None else b.cache.get(key)
    if hit is not None:
        return hit[0]
    A, B = k._checked(_features(b.X)), k._checked(_features(b.Y))
    D = np.maximum(np.sum(A * A, axis=1)[:, None] + np.sum(B * B, axis=1)[None, :] - 2.0 * (A @ B.T), 0.0)
    D.flags.writeable = False
    if key is not None:
        b.cache[key] = (D, (kept_inputs(b.X), kept_inputs(b.Y)))
    return D
