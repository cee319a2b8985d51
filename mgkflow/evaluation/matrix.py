"""A kernel call: the Gram matrix, the cross matrix or the diagonal, with gradients and normalization.

:func:`kernel_matrix` is ``kern(X, Y, eval_gradient, normalize, nodal)`` and :func:`diagonal`
``kern.diag(X, nodal)``: inputs checked, systems prepared, the pairs solved (a Gram matrix solves
its upper triangle), results checked (overflow, convergence), normalized, and ``kern.last_stats``
set. Gradients come back in the backend layout (linear space, every hyperparameter, fixed ones
included); the kernel object takes them to its θ (:func:`~mgkflow.evaluation.gradient.log_space`).

Examples
--------
>>> import networkx as nx
>>> import numpy as np
>>> from mgkflow import Graph, MarginalizedGraphKernel
>>> gs = [Graph.from_networkx(nx.path_graph(n)) for n in (2, 3)]
>>> kern = MarginalizedGraphKernel(q=0.1, backend="exact")
>>> K, dK = kernel_matrix(kern, gs, eval_gradient=True)
>>> K.shape, dK.shape, kern.last_stats.pairs  # dK: the node kernel's c, the edge kernel's c, q
((2, 2), (2, 2, 3), 3)
>>> bool(np.allclose(diagonal(kern, gs), np.diag(K)))
True
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np

from ..errors import GraphError, ParameterError, ParameterTypeError
from ..graph import Graph
from ..system import GraphSystem
from .assemble import contract_pairs, count_nonfinite, gram_with_gradient
from .backend import get_backend
from .checks import check_convergence, check_diagonal, check_finite, is_scalar, same_graphs, warn_degenerate
from .gradient import normalized_gradient
from .nodal import check_self_similarities, nodal_diagonal, nodal_matrix
from .solve import record, solve
from .spec import KernelSpec
from .systems import cross_pairs, diagonal_positions, gram_pairs, p_factor, p_scale, prepare, self_pairs

__all__ = ["kernel_matrix", "diagonal", "gram_contraction", "pair_values"]


def kernel_matrix(
    kern: KernelSpec,
    X: Sequence[Graph],
    Y: Sequence[Graph] | None = None,
    eval_gradient: bool = False,
    normalize: bool | None = None,
    nodal: bool = False,
    free: np.ndarray | None = None,
    log_values: np.ndarray | None = None,
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """``K`` (or ``(K, dK)`` with ``eval_gradient``, dK of shape (N, N, H) in the backend layout).

    Arguments as :meth:`mgkflow.MarginalizedGraphKernel.__call__`; ``normalize`` None means
    ``kern.normalize``. ``free`` (boolean, length H) marks the hyperparameters whose derivatives
    must be finite (default: all); with ``log_values`` (the H hyperparameters' values) dK holds only
    the ``free`` columns, in log space (dK/d log h = h dK/dh), scikit-learn's layout.
    """
    normalize = kern.normalize if normalize is None else normalize
    if not isinstance(normalize, bool | np.bool_):
        raise ParameterTypeError(f"normalize must be True or False, got {normalize!r}")
    if not isinstance(nodal, bool | np.bool_):
        raise ParameterTypeError(f"nodal must be True or False, got {nodal!r}")
    if Y is not None and same_graphs(X, Y):
        Y = None
    if eval_gradient and Y is not None:
        raise ParameterError("eval_gradient=True needs Y=None (the gradient of a Gram matrix)")
    if eval_gradient and nodal:
        raise ParameterError("eval_gradient is not available with nodal=True")
    xs = prepare(kern, X, "X")
    ys = None if Y is None else prepare(kern, Y, "Y", xs)
    get_backend(kern)  # made (and compiled) before the clocks of last_stats start
    if normalize:
        warn_degenerate(kern, stacklevel=3)
    if nodal:
        return nodal_matrix(kern, xs, ys, normalize)
    if ys is None:
        K, dK, C, R = _gram(kern, xs, eval_gradient, normalize, free, log_values)
    else:
        K, C, R = _cross(kern, xs, ys, normalize)
        dK = None
    check_convergence(kern, C, R, stacklevel=3)
    return (K, dK) if eval_gradient else K


def _gram(
    kern: KernelSpec,
    xs: list[GraphSystem],
    gradient: bool,
    normalize: bool,
    free: np.ndarray | None,
    log_values: np.ndarray | None = None,
):
    """The symmetric matrix of xs (upper triangle solved, mirrored), its derivatives with
    ``gradient`` (the ``free`` columns, times ``log_values`` when given: log space); returns K, dK
    or None, converged and residual matrices."""
    t0 = time.perf_counter()
    N = len(xs)
    pairs = gram_pairs(N)
    if gradient and _device_assembly(kern, xs, pairs, normalize):
        cols, scale = _columns(kern, free, log_values)
        assembled, solved = get_backend(kern).gram_gradient(
            xs, pairs, kern.node_kernel, kern.edge_kernel, is_scalar(kern.q), cols, scale, normalize
        )  # fmt: skip
        if assembled is not None:
            return _assembled(kern, xs, pairs, assembled, normalize, free, log_values, t0)
        vals, grads, its, res, conv = solved
        vals, grads = np.asarray(vals, dtype=np.float64), np.asarray(grads, dtype=np.float64)
    elif not gradient and _device_assembly(kern, xs, pairs, normalize, "gram_values"):
        assembled, solved = get_backend(kern).gram_values(xs, pairs, kern.node_kernel, kern.edge_kernel, normalize)
        if assembled is not None and not assembled[6][1]:  # (a non-finite value: the host path names its pair)
            K, _, I, R, C, kd, _ = assembled
            if normalize:
                check_diagonal(kern, kd, xs, "X")
            record(kern, K.shape, len(pairs), I, R, C, t0)
            return K, None, C, R
        if solved is None:
            solved = get_backend(kern).solve(xs, xs, pairs, kern.node_kernel, kern.edge_kernel)
        vals, its, res, conv = solved
        vals, grads = np.asarray(vals, dtype=np.float64), None
    else:
        vals, grads, its, res, conv = solve(kern, xs, xs, pairs, gradient=gradient, raw=not normalize)
    if grads is not None:
        return _gram_gradient(kern, xs, pairs, vals, grads, its, res, conv, normalize, free, log_values, t0)
    _checked_diagonal(kern, xs, pairs, vals, normalize)
    none = np.zeros(0, dtype=np.int64)
    K, _, I, R, C, _ = gram_with_gradient(
        N, pairs, vals, np.zeros((len(pairs), 0)), its, res, conv, none, none, normalize
    )  # fmt: skip
    record(kern, K.shape, len(pairs), I, R, C, t0)
    return K, None, C, R


def _device_assembly(
    kern: KernelSpec, xs: list[GraphSystem], pairs: np.ndarray, normalize: bool, method: str = "gram_gradient"
) -> bool:
    """Whether the backend may assemble a Gram call itself (``method``: ``gram_gradient``, or ``gram_values`` for
    a value call): it offers to, and the backend's pair results need none of
    :func:`~mgkflow.evaluation.solve.solve`'s corrections (no lmin = 1 term, no start-probability scale) and no
    progress bar."""
    if getattr(get_backend(kern), method, None) is None or kern.lmin == 1 or kern.progress:
        return False
    scale, ex = p_factor(kern, xs, xs, pairs, not normalize)
    return scale == 1.0 and ex is None


def _columns(kern: KernelSpec, free: np.ndarray | None, log_values: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """The backend-layout derivative columns dK holds (``free``; all by default) and their factors
    (``log_values``: log space)."""
    h = len(kern.node_kernel.hyperparameters) + len(kern.edge_kernel.hyperparameters) + int(is_scalar(kern.q))
    cols = np.arange(h) if free is None else np.flatnonzero(free)
    scale = np.ones(cols.size) if log_values is None else np.asarray(log_values, dtype=np.float64)[cols]
    return cols, scale


def _assembled(kern, xs, pairs, assembled, normalize, free, log_values, t0):
    """:func:`_gram`'s gradient case assembled by the backend: the host path's checks on its arrays. A
    non-finite value or derivative is reported by solving and assembling again on the host (which names
    the pair)."""
    K, dK, I, R, C, kd, counts = assembled
    if counts[0] or counts[1]:
        vals, grads, its, res, conv = solve(kern, xs, xs, pairs, gradient=True, raw=not normalize)
        return _gram_gradient(kern, xs, pairs, vals, grads, its, res, conv, normalize, free, log_values, t0)
    if normalize:
        check_diagonal(kern, kd, xs, "X")
    record(kern, K.shape, len(pairs), I, R, C, t0)
    return K, dK, C, R


def _gram_gradient(kern, xs, pairs, vals, grads, its, res, conv, normalize, free, log_values, t0):
    """:func:`_gram`'s gradient case: K and dK assembled from the pairs in one compiled pass
    (:func:`mgkflow.evaluation.assemble.gram_with_gradient`), checked as the value case is."""
    N = len(xs)
    _checked_diagonal(kern, xs, pairs, vals, normalize)
    cols = np.arange(grads.shape[1]) if free is None else np.flatnonzero(free)
    scale = np.ones(cols.size) if log_values is None else np.asarray(log_values, dtype=np.float64)[cols]
    K, dK, I, R, C, bad = gram_with_gradient(N, pairs, vals, grads, its, res, conv, cols, scale, normalize)
    record(kern, K.shape, len(pairs), I, R, C, t0)
    if bad:
        _overflow(xs, pairs, grads[:, cols])
    return K, dK, C, R


def gram_contraction(
    kern: KernelSpec, X: Sequence[Graph], free: np.ndarray, log_values: np.ndarray
) -> tuple[np.ndarray, Callable[[np.ndarray], np.ndarray]]:
    """K(X, X) (normalized as ``kern.normalize`` says) and ``W -> g`` with g_h = Σᵢⱼ Wᵢⱼ ∂Kᵢⱼ/∂log θ_h
    over the ``free`` hyperparameters (``log_values``: all of their values), without the N × N × H
    array: the contraction runs over the solved pairs' derivatives (P × H, P = N(N+1)/2), with the
    normalization's chain rule
    Σᵢⱼ Wᵢⱼ ∂K̂ᵢⱼ = Σᵢⱼ Wᵢⱼ ∂Kᵢⱼ / sᵢⱼ − ½ Σᵢ rᵢ (uᵢ + vᵢ), sᵢⱼ = √(Kᵢᵢ Kⱼⱼ), rᵢ = ∂Kᵢᵢ / Kᵢᵢ,
    u and v the row and column sums of W ∘ K̂.

    A Gaussian process's fit needs only such contractions (:func:`mgkflow.learn.contract.gram_contraction`):
    at each step of a θ search the host then does O(P H) work instead of building, normalizing and
    contracting N² H numbers.
    """
    normalize = bool(kern.normalize)
    xs = prepare(kern, X, "X")
    get_backend(kern)
    if normalize:
        warn_degenerate(kern, stacklevel=3)
    t0 = time.perf_counter()
    N = len(xs)
    pairs = gram_pairs(N)
    vals, grads, its, res, conv = solve(kern, xs, xs, pairs, gradient=True, raw=not normalize)
    kd = _checked_diagonal(kern, xs, pairs, vals, normalize)
    cols = np.flatnonzero(free)
    scale = np.asarray(log_values, dtype=np.float64)[cols]
    K, _, I, R, C, _ = gram_with_gradient(N, pairs, vals, grads, its, res, conv, cols[:0], scale[:0], normalize)
    record(kern, K.shape, len(pairs), I, R, C, t0)
    if count_nonfinite(grads, cols):
        _overflow(xs, pairs, grads[:, cols])
    check_convergence(kern, C, R, stacklevel=3)
    root = np.sqrt(kd) if normalize else None
    if normalize:
        r = grads[diagonal_positions(pairs, N)][:, cols] * scale / kd[:, None]

    def contract(W: np.ndarray) -> np.ndarray:
        try:
            W = np.asarray(W, dtype=np.float64)
        except (TypeError, ValueError):
            raise ParameterTypeError(f"the weights W must be an ({N}, {N}) array of numbers") from None
        if W.shape != (N, N):
            raise ParameterError(f"the weights W must have shape ({N}, {N}) (the Gram matrix's), got {W.shape}")
        g = contract_pairs(pairs, grads, cols, scale, W, root)  # each unordered pair once: both of its entries
        if not normalize:
            return g
        M = W * K
        return g - 0.5 * ((M.sum(axis=1) + M.sum(axis=0)) @ r)

    return K, contract


def _checked_diagonal(kern: KernelSpec, xs: list[GraphSystem], pairs: np.ndarray, vals: np.ndarray, normalize: bool):
    """K(G, G) of every graph from a Gram call's pairs, after the finiteness and (normalized) positivity checks."""
    N = len(xs)
    kd = vals[diagonal_positions(pairs, N)]
    if not np.all(np.isfinite(vals)):
        K = np.empty((N, N))
        K[pairs[:, 0], pairs[:, 1]] = vals
        K[pairs[:, 1], pairs[:, 0]] = vals
        check_finite(K, xs, xs)
    if normalize:
        check_diagonal(kern, kd, xs, "X")
    return kd


def _overflow(xs: list[GraphSystem], pairs: np.ndarray, G: np.ndarray) -> None:
    t = int(np.flatnonzero(~np.isfinite(G).all(axis=1))[0])
    i, j = (int(v) for v in pairs[t])
    raise GraphError(
        f"the derivatives of K({xs[i].name}, {xs[j].name}) overflow float64 (start probabilities p too large?)"
    )


def _cross(kern: KernelSpec, xs: list[GraphSystem], ys: list[GraphSystem], normalize: bool):
    """The (len(xs), len(ys)) matrix (every pair solved; normalized: the N + M self-pairs too, in the same
    backend call over X's graphs then Y's, so the GPU packs, configures and plans the graphs once, not three
    times); returns K, converged and residual matrices."""
    t0 = time.perf_counter()
    N, Mn = len(xs), len(ys)
    raw = not normalize
    NM = N * Mn
    if normalize:  # the N + M self-pairs in the same call, over the graphs of X then Y: one batch, packed once
        zs, both = [*xs, *ys], np.empty((NM + N + Mn, 2), dtype=np.int64)
        cross_pairs(N, Mn, out=both[:NM], offset=N)  # (written in place: a screen chunk's 10^7 pairs, once)
        both[NM:] = self_pairs(N + Mn)
        vals, _, its, res, conv = solve(kern, zs, zs, both, raw=raw)
        dxv, dyv, rs, cs = vals[NM : NM + N], vals[NM + N :], res[NM:], conv[NM:]
        vals, its, res, conv = vals[:NM], its[:NM], res[:NM], conv[:NM]
    else:
        vals, _, its, res, conv = solve(kern, xs, ys, cross_pairs(N, Mn), raw=raw)
    K = vals.reshape(N, Mn)
    I, R, C = its.reshape(N, Mn), res.reshape(N, Mn), conv.reshape(N, Mn)
    if not normalize:
        record(kern, K.shape, NM, I, R, C, t0)
        check_finite(K, xs, ys)
        return K, C, R
    record(kern, K.shape, NM + N + Mn, I, R, C, t0)
    check_convergence(kern, cs, rs, stacklevel=4)
    check_finite(K, xs, ys)
    check_finite(dxv[:, None], xs, xs)
    check_finite(dyv[:, None], ys, ys)
    check_diagonal(kern, dxv, xs, "X")
    check_diagonal(kern, dyv, ys, "Y")
    K, _ = normalized_gradient(K, None, dxv, None, dyv, None)
    return K, C, R


def _checked_pairs(pairs: object, n: int) -> np.ndarray:
    """``pairs`` as a (p, 2) int64 array of indices into n graphs, or a :class:`ParameterError`."""
    try:
        arr = np.asarray(pairs)
    except (TypeError, ValueError) as exc:
        raise ParameterTypeError(f"pairs must be a (p, 2) array of graph indices: {exc}") from None
    if arr.size == 0:
        return np.zeros((0, 2), dtype=np.int64)
    if arr.ndim != 2 or arr.shape[1] != 2:
        raise ParameterError(f"pairs must be a (p, 2) array of graph indices, got shape {arr.shape}")
    if arr.dtype.kind not in "iu":
        if arr.dtype.kind != "f" or not np.all(np.isfinite(arr)) or not np.all(arr == np.round(arr)):
            raise ParameterTypeError(f"pairs must hold integer graph indices, got dtype {arr.dtype}")
    arr = arr.astype(np.int64, copy=False)
    lo, hi = int(arr.min()), int(arr.max())
    if lo < 0 or hi >= n:
        raise ParameterError(f"pairs index graph {lo if lo < 0 else hi}, outside the {n} graphs of X")
    return arr


def pair_values(kern: KernelSpec, X: Sequence[Graph], pairs: object, normalize: bool | None = None) -> np.ndarray:
    """``kern.pair_values(X, pairs)``: K(X[i], X[j]) for each row (i, j) of ``pairs``, in one backend call.

    A caller that needs scattered entries of a large matrix (the k-neighbour blocks of a local
    Gaussian process, a sparse similarity graph) solves those pairs only, with the graphs prepared and
    packed once. Normalized values divide by K(G, G) of every graph of X, solved in the same call.
    """
    normalize = kern.normalize if normalize is None else normalize
    if not isinstance(normalize, bool | np.bool_):
        raise ParameterTypeError(f"normalize must be True or False, got {normalize!r}")
    xs = prepare(kern, X, "X")
    N = len(xs)
    pr = _checked_pairs(pairs, N)
    P = len(pr)
    if P == 0:
        return np.zeros(0)
    get_backend(kern)  # made (and compiled) before the clocks of last_stats start
    if normalize:
        warn_degenerate(kern, stacklevel=3)
    t0 = time.perf_counter()
    todo = np.concatenate([pr, self_pairs(N)]) if normalize else pr
    vals, _, its, res, conv = solve(kern, xs, xs, todo, raw=not normalize)
    record(kern, (P,), len(todo), its, res, conv, t0)
    check_convergence(kern, conv, res, stacklevel=3)
    bad = np.flatnonzero(~np.isfinite(vals))
    if bad.size:
        t = int(bad[0])
        check_finite(vals[t : t + 1, None], [xs[int(todo[t, 0])]], [xs[int(todo[t, 1])]])
    if not normalize:
        return vals
    d = vals[P:]
    check_diagonal(kern, d, xs, "X")
    s = np.sqrt(d)
    return vals[:P] / (s[pr[:, 0]] * s[pr[:, 1]])


def diagonal(kern: KernelSpec, X: Sequence[Graph], nodal: bool = False) -> np.ndarray:
    """``kern.diag(X, nodal)``: K(G, G) of every graph of X (ones when normalized, after checking
    that every K(G, G) > 0), or with ``nodal`` the self-similarity of every node of X."""
    xs = prepare(kern, X, "X")
    N = len(xs)
    if nodal:
        r = nodal_diagonal(kern, xs, raw=not kern.normalize)
        if kern.normalize:
            check_self_similarities(r, "X", ": cannot normalize")
            return np.ones_like(r)
        return r
    if kern.normalize:
        for s in xs:
            if p_scale(kern, True) == 0 or not np.any(s.p > 0) or (kern.lmin == 1 and s.graph.nnz == 0):
                check_diagonal(kern, np.zeros(1), [s], "X")
        return np.ones(N)
    get_backend(kern)  # made (and compiled) before the clock starts
    t0 = time.perf_counter()
    vals, _, its, res, conv = solve(kern, xs, xs, self_pairs(N))
    record(kern, (N,), N, its, res, conv, t0)
    check_finite(vals[:, None], xs, xs)
    check_convergence(kern, conv, res, stacklevel=3)
    return vals
