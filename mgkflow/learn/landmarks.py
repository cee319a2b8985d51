"""Choosing landmarks (inducing points) of a low-rank kernel approximation among the data.

A low-rank Gaussian process (:class:`~mgkflow.learn.LowRankGPR`) approximates the n × n kernel
matrix by K(X, Z) K(Z, Z)⁻¹ K(Z, X) with m landmarks Z taken from X. Graphs have no continuous
coordinates to move landmarks along, so they are chosen once, among the data, by one of:

====================== ==================================================================
:func:`pivoted_cholesky` greedy: each step takes the point worst explained by those chosen
                        (the largest diagonal entry of the residual K − K_{·Z} K_{ZZ}⁻¹ K_{Z·});
                        one kernel column per step, n·m kernel entries in all, deterministic
:func:`kmeans_plus_plus` k-means++ seeding in the kernel's feature space: each step samples a
                        point with probability ∝ its squared kernel distance to the nearest
                        chosen one, d²(x, z) = k(x, x) + k(z, z) − 2 k(x, z); n·m entries
:func:`random_landmarks` m points drawn uniformly without replacement; no kernel entry
====================== ==================================================================

All three read the kernel without its white noise (:func:`~mgkflow.learn.contract.kernel_diag`'s
``signal``; a cross call ``kernel(X, Y)`` holds none): noise says nothing about which points
explain the others. :func:`select_landmarks` picks one by name.

Examples
--------
>>> import numpy as np
>>> from sklearn.gaussian_process.kernels import RBF, WhiteKernel
>>> X = np.linspace(0, 10, 50)[:, None]
>>> idx, trace = pivoted_cholesky(RBF(1.0) + WhiteKernel(0.1), X, 5, return_trace=True)
>>> len(set(idx.tolist())), bool(np.all(np.diff(trace) <= 0))
(5, True)
>>> kmeans_plus_plus(RBF(1.0), X, 5, random_state=0).shape, random_landmarks(X, 5, random_state=0).shape
((5,), (5,))
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..errors import ParameterError, ParameterTypeError
from .contract import _check_kernel, _take, cross_kernel, kernel_diag

__all__ = ["pivoted_cholesky", "kmeans_plus_plus", "random_landmarks", "select_landmarks", "LANDMARK_METHODS"]


def _count(X: Any, n_landmarks: Any) -> int:
    if X is None or isinstance(X, str | bytes) or not hasattr(X, "__len__") or not hasattr(X, "__getitem__"):
        raise ParameterTypeError(f"X must be a sequence of graphs or a 2-D array, got {type(X).__name__}")
    if len(X) == 0:
        raise ParameterError("X is empty")
    if isinstance(n_landmarks, bool) or not isinstance(n_landmarks, int | np.integer) or n_landmarks < 1:
        raise ParameterError(f"n_landmarks must be an integer >= 1, got {n_landmarks!r:.60}")
    if n_landmarks > len(X):
        raise ParameterError(f"n_landmarks ({n_landmarks}) is more than the {len(X)} points of X")
    return int(n_landmarks)


def _rng(random_state: Any) -> np.random.Generator:
    if isinstance(random_state, np.random.Generator):
        return random_state
    if random_state is not None and (
        isinstance(random_state, bool) or not isinstance(random_state, int | np.integer) or random_state < 0
    ):
        raise ParameterError(
            f"random_state must be None, an integer >= 0 or a numpy Generator, got {random_state!r:.60}"
        )
    return np.random.default_rng(random_state)


#: Columns a pivoted Cholesky step computes at once: the points of largest residual, in one kernel
#: call over all of X (at most 64: a graph kernel then solves them as pairs within X's kept batch).
PREFETCH = 64


def _column(kernel: Any, X: Any, j: int, cache: dict | None, block_rows: int | None) -> np.ndarray:
    """k(x, X[j]) for every x of X (a cross block: no white noise), in one call over all of X: a
    column is n numbers, and row blocks would cost a kernel call (and a graph kernel's packing of the
    block) per block and column. With ``cache``, the fit's K(X, Z) in blocks of ``block_rows`` finds
    these whole columns again (:func:`~mgkflow.learn.contract.cross_kernel`)."""
    return _columns(kernel, X, [j], cache)[:, 0]


def _columns(kernel: Any, X: Any, js: Sequence[int], cache: dict | None) -> np.ndarray:
    """k(x, X[j]) for every x of X and j of ``js`` (n × len js), in one call over all of X."""
    return cross_kernel(kernel, X, _take(X, list(js)), cache=cache)


def pivoted_cholesky(
    kernel: Any,
    X: Sequence,
    n_landmarks: int,
    tol: float = 1e-12,
    return_trace: bool = False,
    cache: dict | None = None,
    block_rows: int | None = None,
    prefetch: int = PREFETCH,
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Landmarks by greedy pivoted Cholesky of the kernel matrix (the diagonal and m columns).

    Step k takes the point i with the largest residual variance dᵢ = k(xᵢ, xᵢ) − Σ_{l<k} L_il²
    (what the chosen points leave unexplained), computes its kernel column and updates the
    residual. Once every residual is below ``tol`` times the largest diagonal entry (the kernel's
    numerical rank is reached), the remaining landmarks follow in the order of their residual,
    without further columns.

    The columns are fetched ``prefetch`` at a time: those of the points of largest residual, in one
    kernel call. The steps then run as before while the point they take is among the fetched ones;
    when it is not, the next points of largest residual are fetched. The landmarks and the residuals
    are those of fetching one column per step, up to the rounding of the kernel's values (a graph
    kernel's column of n pairs is one small launch; 64 columns are one launch of 64 n pairs). The
    fetched columns lose their projection on the factor's columns so far in one matrix product per
    fetch, and a step only subtracts the columns taken since (the factor is read once per fetch, not
    once per step: n = 50,000, m = 1,000 with an RBF kernel on 2 CPU cores, 9.3 s → 4.2 s).

    Parameters
    ----------
    kernel : scikit-learn kernel
    X : sequence of graphs or 2-D array
    n_landmarks : int
        m, at most len(X).
    tol : float
        Relative residual below which no further column is computed.
    return_trace : bool
        Also return the residual trace Σᵢ dᵢ before the first step and after each (length m + 1;
        non-increasing).
    cache, block_rows : optional
        As for :func:`~mgkflow.learn.contract.cross_kernel`: with the fit's cache and blocks, the
        columns of a fixed ``Cached`` kernel computed here serve the fit's K(X, Z).
    prefetch : int
        Columns fetched per kernel call (1: one per step; the result is the same).

    Returns
    -------
    indices : ndarray of int, shape (m,), distinct, in the order chosen
    trace : ndarray, shape (m + 1,) (with ``return_trace``)

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.gaussian_process.kernels import RBF
    >>> X = np.array([[0.0], [0.1], [5.0], [5.1], [10.0]])
    >>> pivoted_cholesky(RBF(1.0), X, 3).tolist()  # one point of each cluster, farthest first
    [0, 4, 2]
    """
    _check_kernel(kernel)
    m = _count(X, n_landmarks)
    if isinstance(tol, bool) or not (isinstance(tol, int | float | np.floating | np.integer) and 0 <= tol < 1):
        raise ParameterError(f"tol must be a number in [0, 1), got {tol!r:.60}")
    if not isinstance(return_trace, bool | np.bool_):
        raise ParameterTypeError(f"return_trace must be True or False, got {return_trace!r:.60}")
    if isinstance(prefetch, bool) or not isinstance(prefetch, int | np.integer) or prefetch < 1:
        raise ParameterError(f"prefetch must be an integer >= 1, got {prefetch!r:.60}")
    n = len(X)
    d = kernel_diag(kernel, X, cache=cache).signal.copy()
    if not np.all(np.isfinite(d)):
        raise ParameterError("pivoted_cholesky: the kernel's diagonal is not finite")
    floor = tol * max(float(d.max()), 0.0)
    L = np.zeros((n, m), order="F")  # column by column: each column contiguous
    chosen = np.zeros(n, dtype=bool)
    idx = np.empty(m, dtype=np.int64)
    trace = [float(d.sum())]
    k = k0 = 0
    # the fetched points not yet taken -> their column of cols; cols[:, a] is the kernel column of the
    # a-th fetched point less its projection on the k0 columns of L that existed at the fetch (one
    # matrix product per fetch: L is read once per fetch, not once per step)
    fetched: dict[int, int] = {}
    cols = np.zeros((n, 0))
    while k < m:
        j = int(np.argmax(np.where(chosen, -np.inf, d)))
        if not d[j] > floor:
            break
        if j not in fetched:  # the next points of largest residual, j first
            want = min(int(prefetch), m - k)
            top = np.flatnonzero(~chosen)
            top = top[np.argsort(-d[top], kind="stable")[:want]]
            if j not in top:
                top[-1] = j
            cols = np.asfortranarray(_columns(kernel, X, top.tolist(), cache), dtype=np.float64)
            if k:
                cols -= L[:, :k] @ L[top, :k].T
            k0 = k
            fetched = {int(t): a for a, t in enumerate(top)}
        a = fetched.pop(j)
        lk = cols[:, a] - L[:, k0:k] @ L[j, k0:k] if k > k0 else cols[:, a].copy()
        lk /= np.sqrt(d[j])
        lk[chosen] = 0.0
        L[:, k] = lk
        d = np.maximum(d - lk * lk, 0.0)
        d[j] = 0.0
        chosen[j] = True
        idx[k] = j
        trace.append(float(d.sum()))
        k += 1
    if k < m:  # past the numerical rank: the rest by residual, largest first
        rest = np.flatnonzero(~chosen)
        rest = rest[np.argsort(-d[rest], kind="stable")][: m - k]
        idx[k:] = rest
        trace.extend([trace[-1]] * (m - k))
    return (idx, np.asarray(trace)) if return_trace else idx


def kmeans_plus_plus(
    kernel: Any,
    X: Sequence,
    n_landmarks: int,
    random_state: Any = None,
    cache: dict | None = None,
    block_rows: int | None = None,
) -> np.ndarray:
    """Landmarks by k-means++ seeding in the kernel's feature space (D² sampling).

    The first landmark is drawn uniformly; each next one with probability proportional to the
    squared kernel distance d²(x, z) = k(x, x) + k(z, z) − 2 k(x, z) to its nearest chosen
    landmark. Points at distance 0 from a landmark (duplicates) are never drawn while others remain.

    Parameters
    ----------
    kernel : scikit-learn kernel
    X : sequence of graphs or 2-D array
    n_landmarks : int
        m, at most len(X).
    random_state : int, numpy Generator or None
    cache, block_rows : optional
        As for :func:`pivoted_cholesky`.

    Returns
    -------
    indices : ndarray of int, shape (m,), distinct, in the order drawn

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.gaussian_process.kernels import RBF
    >>> X = np.array([[0.0], [0.1], [5.0], [5.1], [10.0]])
    >>> idx = kmeans_plus_plus(RBF(1.0), X, 3, random_state=1)
    >>> len(set(idx.tolist())), idx.dtype
    (3, dtype('int64'))
    """
    _check_kernel(kernel)
    m = _count(X, n_landmarks)
    rng = _rng(random_state)
    n = len(X)
    diag = kernel_diag(kernel, X, cache=cache).signal
    chosen = np.zeros(n, dtype=bool)
    idx = np.empty(m, dtype=np.int64)
    nearest = np.full(n, np.inf)
    j = int(rng.integers(n))
    for k in range(m):
        idx[k] = j
        chosen[j] = True
        if k == m - 1:
            break
        d2 = np.maximum(diag + diag[j] - 2.0 * _column(kernel, X, j, cache, block_rows), 0.0)
        nearest = np.minimum(nearest, d2)
        w = np.where(chosen, 0.0, nearest)
        total = w.sum()
        if total > 0 and np.isfinite(total):
            j = int(rng.choice(n, p=w / total))
        else:  # every remaining point duplicates a landmark
            j = int(rng.choice(np.flatnonzero(~chosen)))
    return idx


def random_landmarks(X: Sequence, n_landmarks: int, random_state: Any = None) -> np.ndarray:
    """m points of X drawn uniformly without replacement.

    Examples
    --------
    >>> import numpy as np
    >>> random_landmarks(np.zeros((10, 1)), 4, random_state=0).shape
    (4,)
    """
    m = _count(X, n_landmarks)
    return np.asarray(_rng(random_state).choice(len(X), size=m, replace=False), dtype=np.int64)


#: Landmark choices by name: ``f(kernel, X, n_landmarks, rng, cache, block_rows) -> indices``.
LANDMARK_METHODS: dict[str, Callable[..., np.ndarray]] = {
    "pivoted_cholesky": lambda kernel, X, m, rng, cache, rows: pivoted_cholesky(kernel, X, m, cache=cache,
                                                                                block_rows=rows),
    "kmeans++": lambda kernel, X, m, rng, cache, rows: kmeans_plus_plus(kernel, X, m, rng, cache, rows),
    "random": lambda kernel, X, m, rng, cache, rows: random_landmarks(X, m, rng),
}


def select_landmarks(
    method: str,
    kernel: Any,
    X: Sequence,
    n_landmarks: int,
    random_state: Any = None,
    cache: dict | None = None,
    block_rows: int | None = None,
) -> np.ndarray:
    """The landmarks of ``method`` (a name of :data:`LANDMARK_METHODS`) as indices into X
    (``cache``, ``block_rows``: see :func:`pivoted_cholesky`).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.gaussian_process.kernels import RBF
    >>> select_landmarks("pivoted_cholesky", RBF(1.0), np.arange(6.0)[:, None], 2).tolist()  # the two ends
    [0, 5]
    """
    if not isinstance(method, str) or method not in LANDMARK_METHODS:
        raise ParameterError(f"landmarks must be one of {', '.join(LANDMARK_METHODS)}, got {method!r:.60}")
    return LANDMARK_METHODS[method](kernel, X, n_landmarks, _rng(random_state), cache, block_rows)
