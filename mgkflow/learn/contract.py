"""Kernel blocks between two sets with their θ-gradients, and the gradient contracted with weights.

scikit-learn kernels give ∂K/∂θ only for the Gram matrix K(X, X). A low-rank Gaussian process
(:class:`~mgkflow.learn.LowRankGPR`) needs it for the cross block K(X, Z) between the training
points and a few landmarks Z, and for the landmarks' own K(Z, Z) *without* the noise. This module
gives both, for every kernel over graphs or vectors:

=================================== =============================================================
:func:`gram_contraction`            K(X, X) with its noise and ``W -> Σᵢⱼ Wᵢⱼ ∂Kᵢⱼ/∂θ``, for an
                                    exact GP: sums and products pass the weights down instead of
                                    stacking an n × n × H array
:func:`cross_kernel`                K(X, Y) (and dK, shape len X × len Y × H) with X and Y taken as
                                    different sets: a ``WhiteKernel`` adds nothing, even where
                                    Y holds the same points as X
:func:`kernel_diag`                 k(x, x) of every x with and without the white noise (its
                                    *signal* part, what a cross block holds), with gradients
:func:`contracted_gradient`         K(X, Y) and g_h = Σᵢⱼ Wᵢⱼ ∂Kᵢⱼ/∂θ_h, evaluated in row blocks:
                                    never an len X × len Y × H array, memory O(block × len Y × H)
:func:`cross_contraction`           K(X, Y) and ``W -> Σᵢⱼ Wᵢⱼ ∂Kᵢⱼ/∂θ`` by the walk of
                                    :func:`gram_contraction`: a low-rank GP's step, no block × H
                                    array, fixed leaves kept in ``cache``
=================================== =============================================================

How a block's gradient is found, by the kernel's kind (recursively through compositions):

- scikit-learn's ``Sum``, ``Product``, ``Exponentiation``, ``ConstantKernel``, ``WhiteKernel``
  and ``RBF`` (isotropic or ARD) by their formulas;
- mgkflow's :class:`~mgkflow.MarginalizedGraphKernel` by its backend's gradient solve of the cross
  pairs (and of the self pairs, normalized), :class:`Normalized`, :class:`ExpSimilarity`,
  :class:`FeatureKernel` and :class:`Cached` by their chain rules; a ``Cached`` kernel without free
  hyperparameters keeps its blocks in the ``cache`` dictionary a caller passes (a fit evaluates
  K(X, Z), K(Z, Z) and the diagonal at every step, which ``Cached``'s single entry cannot hold);
- any other kernel: ``kernel(X, Y, eval_gradient=True)`` where it accepts it, else the block of
  ``kernel(X ∪ Y, eval_gradient=True)`` (correct for any kernel whose value on a pair depends on
  that pair alone; (len X + len Y)² entries, so prefer small blocks), and its diagonal's gradient
  one point at a time.

A Gaussian process's step meets ∂K only through weights: :func:`gram_contraction` and
:func:`cross_contraction` pass them down the kernel's tree, so ∂K of a whole block is never formed;
a graph kernel with free hyperparameters is the leaf that contracts over its solved pairs (the seam
for a contraction on the device).

Examples
--------
>>> import numpy as np
>>> from sklearn.gaussian_process.kernels import RBF, WhiteKernel
>>> from sklearn.gaussian_process.kernels import ConstantKernel as C
>>> k = C(2.0) * RBF(1.5) + WhiteKernel(0.1)
>>> X, Z = np.linspace(0, 3, 7)[:, None], np.array([[0.5], [2.5]])
>>> K, dK = cross_kernel(k, X, Z, eval_gradient=True)
>>> K.shape, dK.shape, bool(np.allclose(K, k(X, Z)))
((7, 2), (7, 2, 3), True)
>>> W = np.ones((7, 2))
>>> K2, g = contracted_gradient(k, X, Z, W, block_rows=3)
>>> bool(np.allclose(g, np.einsum("ij,ijh->h", W, dK)))
True
>>> d = kernel_diag(k, X[:2], eval_gradient=True)
>>> d.value.round(3).tolist(), d.signal.round(3).tolist()
([2.1, 2.1], [2.0, 2.0])
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
from sklearn.gaussian_process.kernels import (
    RBF,
    ConstantKernel,
    DotProduct,
    Exponentiation,
    NormalizedKernelMixin,
    Product,
    Sum,
    WhiteKernel,
)

from ..errors import GraphError, ParameterError, ParameterTypeError
from ..evaluation.backend import get_backend
from ..evaluation.checks import check_convergence, check_diagonal, check_finite, same_graphs, warn_degenerate
from ..evaluation.gradient import log_space, normalized_gradient
from ..evaluation.solve import record, solve
from ..evaluation.systems import cross_pairs, prepare, self_pairs
from ..mgk import MarginalizedGraphKernel
from ._gram_tree import Block, Scratch, tree_block, tree_gram
from ._wrap import input_key, kept_inputs
from .cached import Cached
from .exp_similarity import ExpSimilarity
from .feature_kernel import FeatureKernel, _features
from .normalized import Normalized

__all__ = ["cross_kernel", "kernel_diag", "contracted_gradient", "gram_contraction", "cross_contraction", "KernelDiag"]


class KernelDiag(NamedTuple):
    """k(x, x) of every x: ``value`` as ``kernel.diag`` gives it (white noise included), ``signal``
    as a cross block holds it (without), and their gradients (n × H; None without gradient)."""

    value: np.ndarray
    signal: np.ndarray
    gradient: np.ndarray | None
    signal_gradient: np.ndarray | None


# ---------------------------------------------------------------------------- public functions
def cross_kernel(
    kernel: Any,
    X: Sequence,
    Y: Sequence,
    eval_gradient: bool = False,
    cache: dict | None = None,
    block_rows: int | None = None,
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """K(X, Y) of two sets taken as different (a ``WhiteKernel`` adds nothing), and with
    ``eval_gradient`` dK of shape (len X, len Y, H), H = ``kernel.n_dims``, over θ (log space).

    Parameters
    ----------
    kernel : scikit-learn kernel
        Any kernel over graphs or vectors (see the module docstring for how each kind is handled).
    X, Y : sequence of graphs or 2-D array
    eval_gradient : bool
        Also return dK.
    cache : dict, optional
        Where ``Cached`` kernels without free hyperparameters keep their blocks between calls
        (a fit passes one dictionary to every call and drops it at the end).
    block_rows : int, optional
        Evaluate X in blocks of this many rows (results are the same; a block's entries in
        ``cache`` are found again only by a call with the same blocks).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.gaussian_process.kernels import RBF, WhiteKernel
    >>> X = np.array([[0.0], [1.0]])
    >>> cross_kernel(RBF(1.0) + WhiteKernel(0.5), X, X).round(4)  # no noise on the diagonal
    array([[1.    , 0.6065],
           [0.6065, 1.    ]])
    """
    grad = _flag(eval_gradient, "eval_gradient")
    _check_kernel(kernel)
    _check_sets(X, Y)
    _check_cache(cache)
    rows = len(X) if block_rows is None else _rows(block_rows)
    if len(X) <= rows:
        K, dK = _cross(kernel, X, Y, grad, cache)
    else:
        whole = None if cache is None else input_key(X)
        parts = []
        for a, b in _blocks(len(X), rows):
            if whole is not None:  # where the block lies in X: columns kept for all of X serve it
                cache["#rows"] = (whole, a, b)
            try:
                parts.append(_cross(kernel, X[a:b], Y, grad, cache))
            finally:
                if whole is not None:
                    cache.pop("#rows", None)
        K = np.vstack([p[0] for p in parts])
        dK = np.concatenate([p[1] for p in parts], axis=0) if grad else None
    return (K, dK) if grad else K


def kernel_diag(kernel: Any, X: Sequence, eval_gradient: bool = False, cache: dict | None = None) -> KernelDiag:
    """k(x, x) of every x of X, with and without white noise, and their gradients (n × H).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.gaussian_process.kernels import RBF, WhiteKernel
    >>> d = kernel_diag(RBF(1.0) + WhiteKernel(0.5), np.zeros((2, 1)), eval_gradient=True)
    >>> d.value.tolist(), d.signal.tolist(), d.gradient.tolist()  # θ = (log ℓ, log noise)
    ([1.5, 1.5], [1.0, 1.0], [[0.0, 0.5], [0.0, 0.5]])
    """
    grad = _flag(eval_gradient, "eval_gradient")
    _check_kernel(kernel)
    _check_sets(X, X)
    _check_cache(cache)
    v, s, gv, gs = _diag(kernel, X, grad, cache)
    return KernelDiag(np.asarray(v, dtype=np.float64), np.asarray(s, dtype=np.float64), gv, gs)


def contracted_gradient(
    kernel: Any,
    X: Sequence,
    Y: Sequence,
    W: np.ndarray,
    block_rows: int = 512,
    cache: dict | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """K(X, Y) and g_h = Σᵢⱼ Wᵢⱼ ∂Kᵢⱼ/∂θ_h, the kernel evaluated in blocks of ``block_rows`` rows.

    Each block's dK (block × len Y × H) is contracted as soon as it is computed, so memory stays
    O(block_rows × len Y × H) beside the len X × len Y result K. X and Y are different sets (a
    ``WhiteKernel`` adds nothing; see :func:`cross_kernel`).

    Parameters
    ----------
    kernel : scikit-learn kernel
    X, Y : sequence of graphs or 2-D array
    W : ndarray, shape (len X, len Y) or (r, len X, len Y)
        The weights; with several (r) weight matrices, g has one row per matrix.
    block_rows : int
        Rows of X per kernel evaluation.
    cache : dict, optional
        As for :func:`cross_kernel`.

    Returns
    -------
    K : ndarray (len X, len Y)
    g : ndarray (H,) or (r, H)

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.gaussian_process.kernels import RBF
    >>> X, Y = np.array([[0.0], [1.0], [2.0]]), np.array([[0.5]])
    >>> K, g = contracted_gradient(RBF(1.0), X, Y, np.ones((3, 1)), block_rows=1)
    >>> K.shape, g.shape
    ((3, 1), (1,))
    """
    _check_kernel(kernel)
    _check_sets(X, Y)
    _check_cache(cache)
    rows = _rows(block_rows)
    try:
        W = np.asarray(W, dtype=np.float64)
    except (TypeError, ValueError):
        raise ParameterTypeError(
            f"contracted_gradient: W must be an array of numbers, got {type(W).__name__}"
        ) from None
    n, m = len(X), len(Y)
    if W.shape[-2:] != (n, m) or W.ndim not in (2, 3):
        raise ParameterError(f"contracted_gradient: W must have shape ({n}, {m}) or (r, {n}, {m}), got {W.shape}")
    if not np.all(np.isfinite(W)):
        raise ParameterError("contracted_gradient: W has NaN or infinite values")
    Ws = W[None] if W.ndim == 2 else W
    K = np.empty((n, m))
    g = np.zeros((Ws.shape[0], kernel.n_dims))
    for a, b in _blocks(n, rows):
        Kb, dKb = _cross(kernel, X[a:b], Y, True, cache)
        K[a:b] = Kb
        g += np.einsum("rij,ijh->rh", Ws[:, a:b], dKb)
    return K, (g[0] if W.ndim == 2 else g)


def gram_contraction(
    kernel: Any, X: Any, workspace: dict | None = None, gradient: bool = True
) -> tuple[np.ndarray, Any]:
    """K(X, X) with its noise, and a function ``W -> g`` with g_h = Σᵢⱼ Wᵢⱼ ∂Kᵢⱼ/∂θ_h.

    The training covariance of an exact Gaussian process and its gradient's contraction, without
    the n × n × H stack that ``kernel(X, eval_gradient=True)`` builds: scikit-learn's ``Sum`` and
    ``Product`` pass the weights down (a product multiplies them by the other factor),
    ``ConstantKernel`` stays a number and ``WhiteKernel`` a diagonal; any other kernel is a leaf
    that gives its own (value, gradient) and contracts it. θ's order is ``kernel.theta``'s.

    Parameters
    ----------
    kernel : scikit-learn kernel
    X : sequence of graphs or 2-D array
    workspace : dict, optional
        Keeps the n × n arrays of a call for the next one (a fit passes the same dict at every
        step and drops it at the end). K is then one of them: the caller may change it, but the
        next call overwrites it, and ``W -> g`` holds only until then.
    gradient : bool
        False: K alone (the leaves evaluated without their gradients; ``W -> g`` is not to be called),
        e.g. a fit's posterior at the fitted θ in the arrays its steps used.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.gaussian_process.kernels import RBF, WhiteKernel
    >>> from sklearn.gaussian_process.kernels import ConstantKernel as C
    >>> k = C(2.0) * RBF(1.5) + C(0.5) * RBF(0.3) + WhiteKernel(0.1)
    >>> X = np.linspace(0, 3, 6)[:, None]
    >>> K, g = gram_contraction(k, X)
    >>> K0, dK0 = k(X, eval_gradient=True)
    >>> W = np.arange(36.0).reshape(6, 6)
    >>> bool(np.allclose(K, K0)), bool(np.allclose(g(W), np.einsum("ij,ijh->h", W, dK0)))
    (True, True)
    """
    if workspace is not None and not isinstance(workspace, dict):
        raise ParameterTypeError(f"workspace must be None or a dict, got {type(workspace).__name__}")
    n = len(X)
    scratch = Scratch(workspace)
    value, g = tree_gram(kernel, X, n, scratch, grad=gradient)
    if np.ndim(value) == 0:
        return np.full((n, n), float(value)), g
    if isinstance(kernel, Sum | Product):
        return value, g  # the root's own array: no contraction reads it
    out = scratch(gram_contraction, "value", n)
    out[...] = value
    return out, g


def cross_contraction(
    kernel: Any, X: Any, Y: Any, cache: dict | None = None, workspace: dict | None = None, gradient: bool = True
) -> tuple[np.ndarray, Any]:
    """K(X, Y) of two sets taken as different, and a function ``W -> g`` with g_h = Σᵢⱼ Wᵢⱼ ∂Kᵢⱼ/∂θ_h.

    What a low-rank Gaussian process's step needs of its cross block K(X, Z), by the walk of
    :func:`gram_contraction` (a ``WhiteKernel`` adds nothing between two sets): no
    len X × len Y × H array is made, a fixed ``Cached`` kernel's block and a ``FeatureKernel``'s
    squared distances are made once and kept in ``cache``, and the block-sized arrays of a step in
    ``workspace``. θ's order is ``kernel.theta``'s.

    Parameters
    ----------
    kernel : scikit-learn kernel
    X, Y : sequence of graphs or 2-D array
    cache : dict, optional
        As for :func:`cross_kernel` (a fit passes one dictionary to every call).
    workspace : dict, optional
        As for :func:`gram_contraction`: K and ``W -> g`` then hold until the next call.
    gradient : bool
        Whether ``W -> g`` will be called (without, leaves skip their gradients: the same K).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.gaussian_process.kernels import RBF, WhiteKernel
    >>> from sklearn.gaussian_process.kernels import ConstantKernel as C
    >>> k = C(2.0) * RBF(1.5) + WhiteKernel(0.1)
    >>> X, Z = np.linspace(0, 3, 6)[:, None], np.array([[0.5], [2.0]])
    >>> K, g = cross_contraction(k, X, Z)
    >>> K0, dK0 = cross_kernel(k, X, Z, eval_gradient=True)
    >>> W = np.arange(12.0).reshape(6, 2)
    >>> bool(np.allclose(K, K0)), bool(np.allclose(g(W), np.einsum("ij,ijh->h", W, dK0)))
    (True, True)
    """
    _check_kernel(kernel)
    _check_sets(X, Y)
    _check_cache(cache)
    if workspace is not None and not isinstance(workspace, dict):
        raise ParameterTypeError(f"workspace must be None or a dict, got {type(workspace).__name__}")
    n, m = len(X), len(Y)
    scratch = Scratch(workspace)
    value, g = tree_block(kernel, Block(X, Y, (n, m), scratch, cache, _flag(gradient, "gradient"), _cross))
    if np.ndim(value) == 0:
        return np.full((n, m), float(value)), g
    white = isinstance(kernel, Sum) and any(isinstance(c, WhiteKernel) for c in (kernel.k1, kernel.k2))
    if isinstance(kernel, Sum | Product) and not white:
        return value, g  # the root's own array: no contraction reads it
    out = scratch(cross_contraction, "value", (n, m))
    out[...] = value
    return out, g


# ---------------------------------------------------------------------------- helpers
def _flag(value: Any, name: str) -> bool:
    if not isinstance(value, bool | np.bool_):
        raise ParameterTypeError(f"{name} must be True or False, got {value!r:.60}")
    return bool(value)


def _check_kernel(kernel: Any) -> None:
    if not callable(kernel) or not all(hasattr(kernel, a) for a in ("diag", "theta", "n_dims")):
        raise ParameterTypeError(f"kernel must be a scikit-learn kernel (callable, with diag and theta), "
                                 f"got {type(kernel).__name__}")


def _check_cache(cache: Any) -> None:
    if cache is not None and not isinstance(cache, dict):
        raise ParameterTypeError(f"cache must be None or a dict, got {type(cache).__name__}")


def _rows(block_rows: Any) -> int:
    if isinstance(block_rows, bool) or not isinstance(block_rows, int | np.integer) or block_rows < 1:
        raise ParameterError(f"block_rows must be an integer >= 1, got {block_rows!r:.60}")
    return int(block_rows)


def _check_sets(X: Any, Y: Any) -> None:
    for name, S in (("X", X), ("Y", Y)):
        if S is None or isinstance(S, str | bytes) or not hasattr(S, "__len__") or not hasattr(S, "__getitem__"):
            raise ParameterTypeError(f"{name} must be a sequence of graphs or a 2-D array, got {type(S).__name__}")
        if len(S) == 0:
            raise ParameterError(f"{name} is empty")


def _blocks(n: int, rows: int):
    return [(a, min(a + rows, n)) for a in range(0, n, rows)]


def _take(X: Any, idx: Sequence[int]) -> Any:
    if isinstance(X, np.ndarray):
        return X[np.asarray(idx, dtype=np.int64)]
    return [X[int(i)] for i in idx]


def _concat(X: Any, Y: Any) -> Any:
    if isinstance(X, np.ndarray) and isinstance(Y, np.ndarray) and X.dtype != object and Y.dtype != object:
        return np.concatenate([X, Y], axis=0)
    return list(X) + list(Y)


def _empty(n: int, m: int) -> np.ndarray:
    return np.zeros((n, m, 0))


def _vectors(X: Any) -> np.ndarray:
    A = np.asarray(X, dtype=np.float64)
    return A[:, None] if A.ndim == 1 else A


def _memo(cache: dict | None, key: tuple | None, compute, keep: tuple = ()):
    """``compute()`` once per key in ``cache`` (no cache or no key: every time)."""
    if cache is None or key is None:
        return compute()
    hit = cache.get(key)
    if hit is None:
        hit = cache[key] = (compute(), keep)
    return hit[0]


def _kept_features(X: Any, cache: dict | None) -> np.ndarray:
    """The graph-level feature vectors of X as an array, made once per X (by its items' identities)
    and kept in ``cache``: a landmark choice asks for one column at a time with the same X."""
    kx = None if cache is None or isinstance(X, np.ndarray) or len(X) < 2 else input_key(X)
    if kx is None:
        return _features(X)
    hit = cache.get(("features", kx))
    if hit is None:
        F = _features(X)
        F.flags.writeable = False
        hit = cache[("features", kx)] = (F, kept_inputs(X))
    return hit[0]


# ---------------------------------------------------------------------------- cross blocks
def _cross(k: Any, X: Any, Y: Any, grad: bool, cache: dict | None) -> tuple[np.ndarray, np.ndarray | None]:
    """(K, dK or None) of the block X × Y, Y a set apart from X."""
    n, m = len(X), len(Y)
    if isinstance(k, Sum | Product):
        K1, d1 = _cross(k.k1, X, Y, grad, cache)
        K2, d2 = _cross(k.k2, X, Y, grad, cache)
        if isinstance(k, Sum):
            return K1 + K2, (np.concatenate([d1, d2], axis=2) if grad else None)
        return K1 * K2, (np.concatenate([d1 * K2[:, :, None], K1[:, :, None] * d2], axis=2) if grad else None)
    if type(k) is Exponentiation:
        K, d = _cross(k.kernel, X, Y, grad, cache)
        p = k.exponent
        return K**p, (d * (p * K ** (p - 1))[:, :, None] if grad else None)
    if type(k) is ConstantKernel:
        K = np.full((n, m), k.constant_value, dtype=np.float64)
        return K, ((K[:, :, None] if not k.hyperparameter_constant_value.fixed else _empty(n, m)) if grad else None)
    if type(k) is WhiteKernel:
        return np.zeros((n, m)), (np.zeros((n, m, k.n_dims)) if grad else None)
    if type(k) is RBF:
        return _rbf_cross(k, X, Y, grad, cache)
    if isinstance(k, MarginalizedGraphKernel):
        return _mgk_cross(k, X, Y, grad, cache)
    if type(k) is Cached:
        return _cached_cross(k, X, Y, grad, cache)
    if type(k) is Normalized:
        return _normalized_cross(k, X, Y, grad, cache)
    if type(k) is ExpSimilarity:
        return _exp_cross(k, X, Y, grad, cache)
    if type(k) is FeatureKernel:
        A, B = k._checked(_kept_features(X, cache)), k._checked(_kept_features(Y, cache))
        if A.shape[1] != B.shape[1]:
            raise ParameterError(f"FeatureKernel: X has {A.shape[1]} features per graph, Y has {B.shape[1]}")
        # not memoized by the feature arrays' bytes (a key of n × d floats per call): a fit's blocks keep
        # their distances by the graphs' identities (_gram_tree), and a landmark choice's columns come once
        return _cross(k.kernel, A, B, grad, None)
    return _other_cross(k, X, Y, grad)


def _rbf_cross(k: RBF, X: Any, Y: Any, grad: bool, cache: dict | None):
    A, B = _vectors(X), _vectors(Y)
    ls = np.asarray(k.length_scale, dtype=np.float64)
    if ls.ndim == 0 or ls.size == 1:

        def sq():
            a2, b2 = np.sum(A * A, axis=1), np.sum(B * B, axis=1)
            return np.maximum(a2[:, None] + b2[None, :] - 2.0 * (A @ B.T), 0.0)

        key = None if cache is None else ("sqdist", input_key(A), input_key(B))
        D = _memo(cache, key, sq) / float(ls.reshape(-1)[0]) ** 2
        K = np.exp(-0.5 * D)
        if not grad:
            return K, None
        return K, ((K * D)[:, :, None] if not k.hyperparameter_length_scale.fixed else _empty(*K.shape))
    if A.shape[1] != ls.size:
        raise ParameterError(f"RBF: {ls.size} length scales for {A.shape[1]} features")
    As, Bs = A / ls, B / ls
    a2, b2 = np.sum(As * As, axis=1), np.sum(Bs * Bs, axis=1)
    K = np.exp(-0.5 * np.maximum(a2[:, None] + b2[None, :] - 2.0 * (As @ Bs.T), 0.0))
    if not grad:
        return K, None
    if k.hyperparameter_length_scale.fixed:
        return K, _empty(*K.shape)
    dK = np.empty(K.shape + (ls.size,))
    for j in range(ls.size):
        dK[:, :, j] = K * (As[:, j, None] - Bs[None, :, j]) ** 2
    return K, dK


def _mgk_cross(k: MarginalizedGraphKernel, X: Any, Y: Any, grad: bool, cache: dict | None):
    """The graph kernel's cross block; its gradient by the backend's gradient solve of every pair
    (normalized: of the self pairs too), as a Gram matrix's gradient is found (docs/design.md §7.1)."""
    if not grad or not k.n_dims:
        if k.normalize and not k.n_dims and cache is not None and not same_graphs(X, Y):
            K = _mgk_normalized_cross(k, X, Y, cache)
        else:
            K = k(X, Y)
        return K, (_empty(*K.shape) if grad else None)
    if same_graphs(X, Y):
        return k(X, eval_gradient=True)
    xs = prepare(k, X, "X")
    ys = prepare(k, Y, "Y", xs)
    get_backend(k)
    norm = bool(k.normalize)
    if norm:
        warn_degenerate(k, stacklevel=4)
    t0 = time.perf_counter()
    n, m = len(xs), len(ys)
    pairs = cross_pairs(n, m)
    vals, grads, its, res, conv = solve(k, xs, ys, pairs, gradient=True, raw=not norm)
    K, dK = vals.reshape(n, m), grads.reshape(n, m, -1)
    check_finite(K, xs, ys)
    convs, ress, npairs = [conv], [res], len(pairs)
    if norm:
        dx, gx, _, rx, cx = solve(k, xs, xs, self_pairs(n), gradient=True, raw=False)
        dy, gy, _, ry, cy = solve(k, ys, ys, self_pairs(m), gradient=True, raw=False)
        convs += [cx, cy]
        ress += [rx, ry]
        npairs += n + m
        check_finite(dx[:, None], xs, xs)
        check_finite(dy[:, None], ys, ys)
        check_diagonal(k, dx, xs, "X")
        check_diagonal(k, dy, ys, "Y")
        K, dK = normalized_gradient(K, dK, dx, gx, dy, gy)
    record(k, (n, m), npairs, its.reshape(n, m), res.reshape(n, m), conv.reshape(n, m), t0)
    check_convergence(k, np.concatenate(convs), np.concatenate(ress), stacklevel=4)
    free = k._free()
    values = np.array([v for _, _, v in k._hyper_entries()], dtype=np.float64)
    dK = log_space(dK[:, :, free], values[free])
    if not np.all(np.isfinite(dK)):
        i, j = (int(v) for v in np.argwhere(~np.isfinite(dK).all(axis=2))[0])
        raise GraphError(f"the derivatives of K({xs[i].name}, {ys[j].name}) overflow float64")
    return K, dK


def _positions(X: Any, Y: Any, kx: tuple | None, cache: dict) -> list[int] | None:
    """The positions in X of Y's graphs when Y is a few graphs that are all items of X (by identity),
    else None (``kx``: X's :func:`input_key`; the map of X's items is kept in ``cache``)."""
    if kx is None or isinstance(Y, np.ndarray) or len(Y) > 64:
        return None
    where = _memo(cache, ("positions", kx), lambda: {gid: i for i, gid in enumerate(kx)}, (kept_inputs(X),))
    out = [where.get(id(g)) for g in Y]
    return None if any(i is None for i in out) else out


def _mgk_normalized_cross(k: MarginalizedGraphKernel, X: Any, Y: Any, cache: dict) -> np.ndarray:
    """The normalized block of a graph kernel without free hyperparameters, with the self
    similarities of X kept in ``cache``: a landmark choice asks for one column at a time with the
    same X, which would otherwise solve X's len(X) self pairs again for each column."""
    xs = prepare(k, X, "X")
    kx = input_key(X)
    where = _positions(X, Y, kx, cache)
    # Y among X's graphs (a landmark choice's column): pairs within X, whose batch the backend keeps
    ys = [xs[i] for i in where] if where is not None else prepare(k, Y, "Y", xs)
    get_backend(k)
    warn_degenerate(k, stacklevel=5)
    t0 = time.perf_counter()
    n, m = len(xs), len(ys)
    if where is None:
        vals, _, its, res, conv = solve(k, xs, ys, cross_pairs(n, m), raw=False)
    else:
        pairs = cross_pairs(n, m)
        pairs[:, 1] = np.asarray(where, dtype=np.int64)[pairs[:, 1]]
        vals, _, its, res, conv = solve(k, xs, xs, pairs, raw=False)

    solved = [n * m]

    def self_similarities(systems):
        solved[0] += len(systems)
        d, _, _, r, c = solve(k, systems, systems, self_pairs(len(systems)), raw=False)
        check_convergence(k, c, r, stacklevel=5)
        check_finite(d[:, None], systems, systems)
        return d

    key = None if kx is None else ("mgk self", id(k), kx, repr(k))
    dx = _memo(cache, key, lambda: self_similarities(xs), (kept_inputs(X),))
    dy = dx[where] if where is not None else self_similarities(ys)
    record(k, (n, m), solved[0], its.reshape(n, m), res.reshape(n, m), conv.reshape(n, m), t0)
    check_convergence(k, conv, res, stacklevel=5)
    K = vals.reshape(n, m)
    check_finite(K, xs, ys)
    check_diagonal(k, dx, xs, "X")
    check_diagonal(k, dy, ys, "Y")
    return normalized_gradient(K, None, dx, None, dy, None)[0]


def _cached_cross(k: Cached, X: Any, Y: Any, grad: bool, cache: dict | None):
    """A fixed kernel's block, kept in ``cache`` column by column (per block of rows of X): the
    columns a landmark choice computed are found again by the fit's K(X, Z)."""
    inner = k.kernel
    if inner.n_dims:  # its θ changes from call to call: nothing worth keeping
        return _cross(inner, X, Y, grad, cache)
    kx = input_key(X)
    cols = None if cache is None or kx is None else [input_key(_take(Y, [j])) for j in range(len(Y))]
    if cols is None or any(c is None for c in cols):
        if grad:
            K, _ = _cross(inner, X, Y, False, None)
            return K, _empty(*K.shape)
        return k(X, Y), None
    base = ("column", id(k), kx, repr(inner))
    keys = [(*base, c) for c in cols]
    rows = cache.get("#rows")  # (key of all of X, a, b): this block is X[a:b] (set by cross_kernel)
    missing = []
    for j, key in enumerate(keys):
        if key in cache:
            continue
        whole = None if rows is None else cache.get(("column", id(k), rows[0], repr(inner), cols[j]))
        if whole is not None:  # the column computed for all of X (a landmark choice): its rows a:b
            cache[key] = (whole[0][rows[1] : rows[2]], whole[1])
        else:
            missing.append(j)
    if missing:
        new = _cross(inner, X, _take(Y, missing), False, cache)[0]
        cache.setdefault(("inputs", id(k), kx), kept_inputs(X))  # the items whose identities the keys hold
        for t, j in enumerate(missing):
            cache[keys[j]] = (np.array(new[:, t]), kept_inputs(_take(Y, [j])))
    K = np.stack([cache[key][0] for key in keys], axis=1)
    return K, (_empty(*K.shape) if grad else None)


def _normalized_cross(k: Normalized, X: Any, Y: Any, grad: bool, cache: dict | None):
    K, dK = _cross(k.kernel, X, Y, grad, cache)
    dx, _, gx, _ = _diag(k.kernel, X, grad, cache)
    dy, _, gy, _ = _diag(k.kernel, Y, grad, cache)
    for d in (dx, dy):
        if not np.all(d > 0):
            raise ParameterError(f"Normalized: k(x, x) must be positive, got {d[~(d > 0)][:3]} (first entries)")
    s = np.sqrt(dx)[:, None] * np.sqrt(dy)[None, :]
    Kn = K / s
    if not grad:
        return Kn, None
    dKn = dK / s[:, :, None] - 0.5 * Kn[:, :, None] * ((gx / dx[:, None])[:, None, :] + (gy / dy[:, None])[None, :, :])
    return Kn, dKn


def _exp_cross(k: ExpSimilarity, X: Any, Y: Any, grad: bool, cache: dict | None):
    g = k._check()
    K, dK = _cross(k.kernel, X, Y, grad, cache)
    E = np.exp(g * (K - 1.0))
    if not grad:
        return E, None
    parts = [] if k.hyperparameters[0].fixed else [(g * (K - 1.0) * E)[:, :, None]]
    parts.append(g * E[:, :, None] * dK)
    return E, np.concatenate(parts, axis=2)


def _other_cross(k: Any, X: Any, Y: Any, grad: bool):
    if not grad:
        return np.asarray(k(X, Y), dtype=np.float64), None
    n, m = len(X), len(Y)
    if not k.n_dims:
        return np.asarray(k(X, Y), dtype=np.float64), _empty(n, m)
    try:
        out = k(X, Y, eval_gradient=True)
        if isinstance(out, tuple) and np.shape(out[0]) == (n, m) and np.shape(out[1]) == (n, m, k.n_dims):
            return np.asarray(out[0], dtype=np.float64), np.asarray(out[1], dtype=np.float64)
    except (ValueError, TypeError):  # scikit-learn's kernels refuse a gradient with Y
        pass
    J, dJ = k(_concat(X, Y), eval_gradient=True)
    return np.asarray(J[:n, n:], dtype=np.float64), np.asarray(dJ[:n, n:], dtype=np.float64)


# ---------------------------------------------------------------------------- diagonals
def _diag(k: Any, X: Any, grad: bool, cache: dict | None):
    """(value, signal, value gradient, signal gradient) of k(x, x) over X; gradients None without grad."""
    n = len(X)
    if isinstance(k, Sum | Product):
        v1, s1, gv1, gs1 = _diag(k.k1, X, grad, cache)
        v2, s2, gv2, gs2 = _diag(k.k2, X, grad, cache)
        if isinstance(k, Sum):
            if not grad:
                return v1 + v2, s1 + s2, None, None
            return v1 + v2, s1 + s2, np.hstack([gv1, gv2]), np.hstack([gs1, gs2])
        if not grad:
            return v1 * v2, s1 * s2, None, None
        gv = np.hstack([gv1 * v2[:, None], v1[:, None] * gv2])
        gs = np.hstack([gs1 * s2[:, None], s1[:, None] * gs2])
        return v1 * v2, s1 * s2, gv, gs
    if type(k) is Exponentiation:
        v, s, gv, gs = _diag(k.kernel, X, grad, cache)
        p = k.exponent
        if not grad:
            return v**p, s**p, None, None
        return v**p, s**p, gv * (p * v ** (p - 1))[:, None], gs * (p * s ** (p - 1))[:, None]
    if type(k) is ConstantKernel:
        v = np.full(n, float(k.constant_value))
        g = v[:, None] if not k.hyperparameter_constant_value.fixed else np.zeros((n, 0))
        return v, v, (g if grad else None), (g if grad else None)
    if type(k) is WhiteKernel:
        v = np.full(n, float(k.noise_level))
        g = v[:, None] if not k.hyperparameter_noise_level.fixed else np.zeros((n, 0))
        return v, np.zeros(n), (g if grad else None), (np.zeros_like(g) if grad else None)
    if isinstance(k, NormalizedKernelMixin):  # RBF, Matern, RationalQuadratic, ExpSineSquared: k(x, x) = 1
        v = np.ones(n)
        g = np.zeros((n, k.n_dims)) if grad else None
        return v, v, g, g
    if type(k) is DotProduct:
        A = _vectors(X)
        v = np.einsum("ij,ij->i", A, A) + k.sigma_0**2
        g = (np.full((n, 1), 2.0 * k.sigma_0**2) if not k.hyperparameter_sigma_0.fixed else np.zeros((n, 0)))
        return v, v, (g if grad else None), (g if grad else None)
    if isinstance(k, MarginalizedGraphKernel):
        return _mgk_diag(k, X, grad)
    if type(k) is Cached:
        inner = k.kernel
        kx = input_key(X)
        if inner.n_dims or cache is None or kx is None:
            return _diag(inner, X, grad, cache)
        key = ("diag", id(k), kx, repr(inner))
        v, s, gv, gs = _memo(cache, key, lambda: _diag(inner, X, True, None), (kept_inputs(X),))
        return (v, s, gv, gs) if grad else (v, s, None, None)
    if type(k) is Normalized:
        v, s, gv, gs = _diag(k.kernel, X, grad, cache)
        if not np.all(v > 0):
            raise ParameterError(f"Normalized: k(x, x) must be positive, got {v[~(v > 0)][:3]} (first entries)")
        ones = np.ones(n)
        if not grad:
            return ones, s / v, None, None
        return ones, s / v, np.zeros_like(gv), gs / v[:, None] - (s / v**2)[:, None] * gv
    if type(k) is ExpSimilarity:
        g = k._check()
        v, s, gv, gs = _diag(k.kernel, X, grad, cache)
        ev, es = np.exp(g * (v - 1.0)), np.exp(g * (s - 1.0))
        if not grad:
            return ev, es, None, None
        own = not k.hyperparameters[0].fixed
        gv = np.hstack(([(g * (v - 1.0) * ev)[:, None]] if own else []) + [g * ev[:, None] * gv])
        gs = np.hstack(([(g * (s - 1.0) * es)[:, None]] if own else []) + [g * es[:, None] * gs])
        return ev, es, gv, gs
    if type(k) is FeatureKernel:
        return _diag(k.kernel, k._checked(_features(X)), grad, cache)
    v = np.asarray(k.diag(X), dtype=np.float64)
    if not grad:
        return v, v, None, None
    if not k.n_dims:
        return v, v, np.zeros((n, 0)), np.zeros((n, 0))
    g = np.stack([np.asarray(k(_take(X, [i]), eval_gradient=True)[1], dtype=np.float64)[0, 0] for i in range(n)])
    return v, v, g, g


def _mgk_diag(k: MarginalizedGraphKernel, X: Any, grad: bool):
    if not grad or k.normalize or not k.n_dims:
        v = np.asarray(k.diag(X), dtype=np.float64)
        g = np.zeros((len(v), k.n_dims)) if grad else None
        return v, v, g, g
    xs = prepare(k, X, "X")
    vals, grads, _, res, conv = solve(k, xs, xs, self_pairs(len(xs)), gradient=True, raw=True)
    check_finite(vals[:, None], xs, xs)
    check_convergence(k, conv, res, stacklevel=4)
    free = k._free()
    values = np.array([v for _, _, v in k._hyper_entries()], dtype=np.float64)
    g = log_space(grads[:, free], values[free])
    return vals, vals, g, g
