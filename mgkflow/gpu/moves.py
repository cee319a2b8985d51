"""Per-job results moved to their pairs on the host, in parallel (numba).

A launch solves its pairs in job order (the costliest first) and its results come back in that
order: values, iterations, residuals and flags (:meth:`mgkflow.gpu.core.Outputs.drain`), and the
gradient's rows (:attr:`mgkflow.gpu.gradient._GradientOut.grad`). In a Gaussian process's θ loop
these moves run at every step after the device is done, so they are on the step's critical path:
numpy's fancy indexing does them one array at a time on one core (about 2.5 ms for the four
arrays of 132,355 FreeSolv pairs and as much again for the gradient's rows, on a 2-core host);
these do the four arrays in one pass and the rows in another, in parallel on a few threads
(:mod:`mgkflow._host_threads`).

Examples
--------
>>> import numpy as np
>>> order = np.array([2, 0, 1])                  # job t solved pair order[t]
>>> k, it = np.zeros(3), np.zeros(3, dtype=np.int32)
>>> res, conv = np.zeros(3), np.zeros(3, dtype=bool)
>>> scatter_results(order, (k, it, res, conv), (np.array([1.0, 2.0, 3.0]), np.array([5, 6, 7], dtype=np.int32),
...                                             np.zeros(3), np.ones(3, dtype=bool)))
>>> k.tolist(), it.tolist()
([2.0, 3.0, 1.0], [6, 7, 5])
>>> out = np.zeros((3, 2))
>>> scatter_rows(np.array([2, 0]), np.arange(4.0).reshape(2, 2), out)
>>> out.tolist()
[[2.0, 3.0], [0.0, 0.0], [0.0, 1.0]]
"""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np

from .._host_threads import host_threads

__all__ = ["scatter_results", "scatter_rows"]

#: Below this many rows numpy's own indexing is as fast (no thread start-up).
PARALLEL_MIN = 4096


@cache
def _kernels() -> tuple[Any, Any]:
    from numba import njit, prange

    @njit(parallel=True, cache=True)
    def scatter4(order, k, it, res, conv, sk, si, sr, sc):  # pragma: no cover
        for t in prange(order.shape[0]):
            p = order[t]
            k[p] = sk[t]
            it[p] = si[t]
            res[p] = sr[t]
            conv[p] = sc[t]

    @njit(parallel=True, cache=True)
    def scatter(order, rows, out):  # pragma: no cover
        for t in prange(order.shape[0]):
            out[order[t], :] = rows[t, :]

    return scatter4, scatter


def scatter_results(order: np.ndarray, dst: tuple, src: tuple) -> None:
    """``dst[a][order] = src[a]`` for the four result arrays (values, iterations, residuals, flags) of
    a launch: job t's results go to pair ``order[t]``. ``dst`` and ``src`` are 1-D and of the same dtypes."""
    if len(order) < PARALLEL_MIN:
        for d, s in zip(dst, src, strict=True):
            d[order] = s
        return
    with host_threads():
        _kernels()[0](np.asarray(order, dtype=np.int64), *dst, *src)


def scatter_rows(order: np.ndarray, rows: np.ndarray, out: np.ndarray) -> None:
    """``out[order] = rows``: job t's row of a launch to its pair's row ``order[t]``."""
    if len(order) < PARALLEL_MIN:
        out[order] = rows
        return
    with host_threads():
        _kernels()[1](np.asarray(order, dtype=np.int64), rows, out)
