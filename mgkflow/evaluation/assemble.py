"""A Gram matrix and its derivatives from per-pair results, in one compiled pass.

A Gaussian-process fit asks for K and dK of the same graphs at every optimizer step. The backend
returns one value and H derivatives per pair of the upper triangle; what the caller wants is the
dense symmetric K (N, N), its normalized form K(G, G') / sqrt(K(G, G) K(G', G')), and the free
columns of dK (N, N, H) in log space (dK/d log h = h dK/dh), with the solver's iterations,
residuals and flags as matrices for ``last_stats``. Done with numpy, that is a scatter per array
and several passes over the N² H derivatives (about 45 ms for 514 molecules and 12
hyperparameters, 30 times the device's time for the solves); :func:`gram_with_gradient` does it in
one pass over the pairs, in parallel (numba, on :data:`~mgkflow._host_threads.HOST_PASS_THREADS`
threads), writing both triangles.

The arithmetic is :func:`mgkflow.evaluation.gradient.normalized_gradient`'s followed by
:func:`~mgkflow.evaluation.gradient.log_space`, in the same order of operations.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np

from .._host_threads import host_threads
from .systems import diagonal_positions

__all__ = ["gram_with_gradient", "contract_pairs", "count_nonfinite"]


@cache
def _kernel() -> Any:
    from numba import njit, prange

    @njit(parallel=True, cache=True)
    def assemble(pairs, vals, grads, its, res, conv, cols, scale, dpos, normalize, K, dK, I, R, C):  # pragma: no cover
        n = K.shape[0]
        h_out = cols.shape[0]
        root = np.ones(n)
        ratio = np.zeros((n, h_out))
        if normalize:
            for i in prange(n):
                t = dpos[i]
                kd = vals[t]
                root[i] = np.sqrt(kd)
                for h in range(h_out):
                    ratio[i, h] = grads[t, cols[h]] / kd
        bad = 0
        for t in prange(pairs.shape[0]):
            i = pairs[t, 0]
            j = pairs[t, 1]
            s = root[i] * root[j]
            kn = vals[t] / s if normalize else vals[t]
            K[i, j] = kn
            K[j, i] = kn
            I[i, j] = its[t]
            I[j, i] = its[t]
            R[i, j] = res[t]
            R[j, i] = res[t]
            C[i, j] = conv[t]
            C[j, i] = conv[t]
            for h in range(h_out):
                g = grads[t, cols[h]]
                if not np.isfinite(g):
                    bad += 1
                if normalize:
                    g = g / s - 0.5 * kn * (ratio[i, h] + ratio[j, h])
                g = g * scale[h]
                dK[i, j, h] = g
                dK[j, i, h] = g
        return bad

    @njit(parallel=True, cache=True)
    def contract(pairs, grads, cols, scale, W, root, normalize, chunks):  # pragma: no cover
        h_out = cols.shape[0]
        P = pairs.shape[0]
        part = np.zeros((chunks, h_out))
        step = (P + chunks - 1) // chunks
        for c in prange(chunks):
            for t in range(c * step, min(P, (c + 1) * step)):
                i = pairs[t, 0]
                j = pairs[t, 1]
                w = W[i, j] + W[j, i] if i != j else W[i, j]
                if normalize:
                    w = w / (root[i] * root[j])
                for h in range(h_out):
                    part[c, h] += w * grads[t, cols[h]]
        out = np.zeros(h_out)
        for c in range(chunks):
            for h in range(h_out):
                out[h] += part[c, h]
        for h in range(h_out):
            out[h] *= scale[h]
        return out

    @njit(parallel=True, cache=True)
    def nonfinite(grads, cols):  # pragma: no cover
        bad = 0
        for t in prange(grads.shape[0]):
            for h in range(cols.shape[0]):
                if not np.isfinite(grads[t, cols[h]]):
                    bad += 1
        return bad

    return assemble, contract, nonfinite


def contract_pairs(
    pairs: np.ndarray, grads: np.ndarray, cols: np.ndarray, scale: np.ndarray, W: np.ndarray, root: np.ndarray | None
) -> np.ndarray:
    """g_h = scale_h Σ_t w_t grads[t, cols_h] over the pairs t = (i, j) of a Gram matrix's upper triangle,
    w_t = (W_ij + W_ji) / s_ij (W_ii / s_ii on the diagonal), s_ij = root_i root_j (1 when ``root`` is None):
    the pair-domain part of Σᵢⱼ Wᵢⱼ ∂Kᵢⱼ/∂θ_h, in one parallel pass over the derivatives.

    Examples
    --------
    >>> import numpy as np
    >>> from mgkflow.evaluation.systems import gram_pairs
    >>> pairs = gram_pairs(2)                                    # (0, 0), (0, 1), (1, 1)
    >>> grads = np.array([[1.0, 0.0], [2.0, 1.0], [3.0, 0.0]])
    >>> W = np.array([[1.0, 2.0], [3.0, 4.0]])
    >>> contract_pairs(pairs, grads, np.array([0, 1]), np.ones(2), W, None).tolist()  # 1·1 + 5·2 + 4·3, 5·1
    [23.0, 5.0]
    """
    pairs = np.ascontiguousarray(pairs, dtype=np.int64)
    chunks = max(1, min(256, len(pairs) // 4096))
    one = np.ones(1) if root is None else np.ascontiguousarray(root, dtype=np.float64)
    with host_threads():
        return _kernel()[1](
            pairs, np.ascontiguousarray(grads, dtype=np.float64), np.ascontiguousarray(cols, dtype=np.int64),
            np.ascontiguousarray(scale, dtype=np.float64), np.ascontiguousarray(W, dtype=np.float64), one,
            root is not None, chunks,
        )  # fmt: skip


def count_nonfinite(grads: np.ndarray, cols: np.ndarray) -> int:
    """How many of ``grads[:, cols]`` are not finite (one parallel pass, no copy of the columns)."""
    with host_threads():
        return int(_kernel()[2](np.ascontiguousarray(grads, dtype=np.float64), np.ascontiguousarray(cols, np.int64)))


def gram_with_gradient(
    n: int,
    pairs: np.ndarray,
    vals: np.ndarray,
    grads: np.ndarray,
    its: np.ndarray,
    res: np.ndarray,
    conv: np.ndarray,
    cols: np.ndarray,
    scale: np.ndarray,
    normalize: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """K, dK (columns ``cols`` of ``grads``, times ``scale``), iterations, residuals and flags as
    (n, n) matrices from the results of ``pairs`` (each unordered pair once, the n self-pairs among
    them when ``normalize``); the last item counts the non-finite derivatives read.

    With ``normalize``, K and dK are those of K(G, G') / sqrt(K(G, G) K(G', G')) (the diagonal
    must be positive: check it first). ``scale`` = the hyperparameters' values gives dK in log space.

    Examples
    --------
    >>> import numpy as np
    >>> from mgkflow.evaluation.systems import gram_pairs
    >>> pairs = gram_pairs(2)                      # (0, 0), (0, 1), (1, 1)
    >>> vals = np.array([4.0, 2.0, 1.0])
    >>> grads = np.stack([2 * vals, vals], axis=1)  # K ∝ h² in column 0, ∝ c in column 1
    >>> ones = np.ones(3)
    >>> K, dK, I, R, C, bad = gram_with_gradient(2, pairs, vals, grads, ones, ones, ones > 0,
    ...                                          np.array([0]), np.array([0.5]), True)
    >>> K.tolist(), float(abs(dK).max()), bad      # normalized: ones, and no derivative left
    ([[1.0, 1.0], [1.0, 1.0]], 0.0, 0)
    """
    dpos = diagonal_positions(pairs, n) if normalize else np.zeros(n, dtype=np.int64)
    pairs = np.ascontiguousarray(pairs, dtype=np.int64)
    cols = np.ascontiguousarray(cols, dtype=np.int64)
    scale = np.ascontiguousarray(scale, dtype=np.float64)
    K = np.empty((n, n))
    dK = np.empty((n, n, len(cols)))
    I = np.empty((n, n), dtype=np.int64)
    R = np.empty((n, n))
    C = np.empty((n, n), dtype=bool)
    with host_threads():
        bad = _kernel()[0](
            pairs,
            np.ascontiguousarray(vals, dtype=np.float64),
            np.ascontiguousarray(grads, dtype=np.float64),
            np.ascontiguousarray(its, dtype=np.int64),
            np.ascontiguousarray(res, dtype=np.float64),
            np.ascontiguousarray(conv, dtype=np.bool_),
            cols,
            scale,
            dpos,
            bool(normalize),
            K,
            dK,
            I,
            R,
            C,
        )
    return K, dK, I, R, C, int(bad)
