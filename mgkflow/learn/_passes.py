"""The element-wise passes of a Gaussian process's step over its kernel blocks, on a few threads (numba).

A low-rank GP's step at N = 20,000 training molecules and m = 2,000 landmarks walks n × m blocks of
320 MB: the exponentials of ``ExpSimilarity`` and of the descriptors' RBF, their weighted sums, the
weights of the low-rank algebra. numpy makes each a single-threaded pass, and a temporary for each
intermediate product; these passes fuse them and run on :func:`mgkflow._host_threads.host_threads`
threads (``mgkflow/gpu/NOTES.md``, session 16: about half of a step's 4 s on the H100's host were such
passes). Every function takes and returns C-contiguous float64 arrays.

Examples
--------
>>> import numpy as np
>>> x = np.array([[0.0, 1.0], [2.0, 3.0]])
>>> exp_affine(x, -1.0, 0.5, np.empty_like(x)).round(4).tolist()
[[1.6487, 0.6065], [0.2231, 0.0821]]
>>> weighted_sums(np.ones((2, 2)), x, x)           # (Σ w e k, Σ w e)
(14.0, 6.0)
"""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np

from .._host_threads import host_threads

__all__ = ["exp_affine", "weighted_sums", "scaled_transpose", "half_outer_minus_scaled"]

#: Below this many elements numpy's own passes are as fast (no threads started).
PARALLEL_MIN = 1 << 16


@cache
def _kernels() -> tuple[Any, ...]:
    from numba import njit, prange

    @njit(parallel=True, cache=True)
    def exp_affine_(x, a, b, out):  # pragma: no cover
        for i in prange(x.size):
            out[i] = np.exp(a * x[i] + b)

    @njit(parallel=True, cache=True)
    def weighted_sums_(w, e, k):  # pragma: no cover
        s1 = 0.0
        s2 = 0.0
        for i in prange(w.size):
            we = w[i] * e[i]
            s1 += we * k[i]
            s2 += we
        return s1, s2

    @njit(parallel=True, cache=True)
    def scale_(x, c, out):  # pragma: no cover
        for i in prange(x.size):
            out[i] = c * x[i]

    @njit(parallel=True, cache=True)
    def scaled_transpose_(a, c, out):  # pragma: no cover
        m, n = a.shape
        for j in prange(n):
            for i in range(m):
                out[j, i] = c * a[i, j]

    @njit(parallel=True, cache=True)
    def half_outer_minus_scaled_t_(at, d, u, v, outt):  # pragma: no cover
        # on the transposes of a column-major a and out: at = aᵀ and outt = outᵀ row-major
        n, m = at.shape
        for j in prange(n):
            for i in range(m):
                outt[j, i] = 0.5 * (u[i] * v[j] - at[j, i] / d[j])

    return exp_affine_, weighted_sums_, scaled_transpose_, half_outer_minus_scaled_t_, scale_


def exp_affine(x: np.ndarray, a: float, b: float, out: np.ndarray) -> np.ndarray:
    """``out = exp(a x + b)`` element-wise (``out`` may be ``x``); returns ``out``."""
    if x.size < PARALLEL_MIN:
        np.multiply(x, a, out=out)
        out += b
        return np.exp(out, out=out)
    with host_threads():
        _kernels()[0](x.reshape(-1), float(a), float(b), out.reshape(-1))
    return out


def weighted_sums(w: np.ndarray, e: np.ndarray, k: np.ndarray) -> tuple[float, float]:
    """(Σ w ∘ e ∘ k, Σ w ∘ e) in one pass, without the product w ∘ e as an array."""
    if w.size < PARALLEL_MIN:
        we = w * e
        return float(np.dot(we.reshape(-1), k.reshape(-1))), float(np.sum(we))
    with host_threads():
        s1, s2 = _kernels()[1](w.reshape(-1), e.reshape(-1), k.reshape(-1))
    return float(s1), float(s2)


def scaled_transpose(a: np.ndarray, c: float) -> np.ndarray:
    """``c · aᵀ`` as a new C-contiguous array (a column-major ``a``: a scaled copy of the same memory).

    Examples
    --------
    >>> a = np.asfortranarray([[1.0, 2.0], [3.0, 4.0]])
    >>> scaled_transpose(a, 2.0), scaled_transpose(np.ascontiguousarray(a), 2.0).flags.c_contiguous
    (array([[2., 6.],
           [4., 8.]]), True)
    """
    if a.size < PARALLEL_MIN:
        return np.multiply(a.T, c, order="C")
    out = np.empty((a.shape[1], a.shape[0]))
    with host_threads():
        if a.flags.f_contiguous:  # aᵀ is row-major already: a scaled copy, element by element
            _kernels()[4](a.T.reshape(-1), float(c), out.reshape(-1))
        else:
            _kernels()[2](np.ascontiguousarray(a), float(c), out)
    return out


def half_outer_minus_scaled(a: np.ndarray, d: np.ndarray, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``½ (u vᵀ − a D⁻¹)`` (D = diag d, scaling a's columns) as a new array in a's layout (row- or
    column-major). A large column-major ``a`` (a low-rank step's M V, from products with a triangular
    solve's column-major result) takes one threaded pass; others numpy's passes.

    Examples
    --------
    >>> half_outer_minus_scaled(np.ones((1, 2)), np.array([1.0, 2.0]), np.array([2.0]), np.array([1.0, 3.0]))
    array([[0.5 , 2.75]])
    """
    column_major = a.flags.f_contiguous and not a.flags.c_contiguous
    out = np.empty(a.shape, order="F" if column_major else "C")  # in a's layout
    if a.size < PARALLEL_MIN or not column_major:
        np.divide(a, d, out=out)
        out -= np.outer(u, v)
        out *= -0.5
        return out
    d, u, v = (np.ascontiguousarray(x, dtype=np.float64) for x in (d, u, v))
    with host_threads():
        _kernels()[3](a.T, d, u, v, out.T)
    return out

