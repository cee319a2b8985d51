"""The per-block solver's schedule of an XMV pass, on the host.

Once per pair, a per-block launch prices the work units of its XMV pass and cuts them, in index
order, into one contiguous range per warp of about equal cost (``SCHEDULE_RANGES`` in
``mgk_solver.cu``):

- a unit is a tile pair (the lane's outputs (x, u) and (7 - x, 7 - u) of an 8 x 8 output tile pair),
  or, in resident launches and in gradient launches of 1,024-thread blocks with P in shared memory
  (``UNIT_HALVES``), half a tile pair (unit ``2 tp``: output (x, u) of every lane, G1's tile rows
  0..3; unit ``2 tp + 1``: output (7 - x, 7 - u), rows 4..7), so that a hub row's work lands in one
  half;
- its cost is its busiest lane's products (the row-pair XMV walks a row of G1 against a row of G2:
  deg1 * deg2 products an output) plus :data:`UNIT_OVERHEAD` an output;
- unit u goes to warp ``floor(nwarp * m_u / total)``, ``m_u`` the midpoint of its cost in the prefix
  sum, in integers: a schedule fixed by the pair, so the kernel's sums add in the same order on
  every run.

Launches whose search direction lives in global memory keep the round robin (warp w takes tile
pairs w, w + nwarp, ...): their warps then share P's entries in the caches.

This module mirrors the kernel's arithmetic so that the schedule can be tested and its balance
studied without a GPU (``python -m mgkflow.bench balance``: the lane-work model of
``mgkflow/gpu/NOTES.md``, sessions 17 and 23).

Examples
--------
>>> import numpy as np
>>> costs = np.array([10, 1, 1, 1, 1, 1, 1, 4])
>>> schedule_ranges(costs, 4).tolist()  # unit 0's midpoint (5) lies in warp 1's share [5, 10)
[0, 0, 1, 6, 8]
>>> warp_loads(costs, schedule_ranges(costs, 4)).tolist()
[0, 10, 5, 5]
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = [
    "UNIT_OVERHEAD",
    "padded_degrees",
    "unit_costs",
    "schedule_ranges",
    "optimal_ranges",
    "warp_loads",
    "round_robin_loads",
]

#: A work unit's fixed cost per output, in products (addressing, the diagonal, the store): the
#: kernel's ``UNIT_OVERHEAD``.
UNIT_OVERHEAD = 4


def padded_degrees(graph: Any) -> np.ndarray:
    """The node degrees (nonzeros per adjacency row) of ``graph`` in its node order, padded with zeros
    to a whole number of 8-node tiles (the packed layout of the row-pair XMV).

    Examples
    --------
    >>> import numpy as np
    >>> from mgkflow import Graph
    >>> padded_degrees(Graph(np.ones((3, 3)) - np.eye(3))).tolist()
    [2, 2, 2, 0, 0, 0, 0, 0]
    """
    deg = np.diff(graph.adjacency.indptr).astype(np.int64)
    out = np.zeros(8 * (-(-deg.size // 8)), dtype=np.int64)
    out[: deg.size] = deg
    return out


def unit_costs(deg1: np.ndarray, deg2: np.ndarray, halves: bool = False) -> np.ndarray:
    """The schedule's cost of every work unit of a pair, in the kernel's unit order.

    Parameters
    ----------
    deg1, deg2 : array of int
        :func:`padded_degrees` of the two graphs (as packed: after the degree order).
    halves : bool
        Half tile pairs (``UNIT_HALVES`` launches: units ``2 tp`` and ``2 tp + 1``) instead of tile pairs.

    Returns
    -------
    ndarray of int64
        One cost per unit: tile pair ``tp = I nt2 + I2`` costs its busiest lane's products over both
        outputs plus ``2 UNIT_OVERHEAD``; a half costs the largest degree of its four G1 rows times the
        largest of G2's tile, plus ``UNIT_OVERHEAD``.

    Examples
    --------
    >>> import numpy as np
    >>> d1 = np.array([3, 1, 1, 1, 2, 0, 0, 0]); d2 = np.array([1] * 8)
    >>> unit_costs(d1, d2).tolist()
    [11]
    >>> unit_costs(d1, d2, halves=True).tolist()
    [7, 6]
    """
    a = np.asarray(deg1, dtype=np.int64).reshape(-1, 8)
    b = np.asarray(deg2, dtype=np.int64).reshape(-1, 8)
    if halves:
        ma = np.stack([a[:, :4].max(axis=1), a[:, 4:].max(axis=1)], axis=1)  # (nt1, 2)
        mb = b.max(axis=1)  # (nt2,)
        return (ma[:, None, :] * mb[None, :, None] + UNIT_OVERHEAD).ravel()
    x, u = np.arange(32) >> 3, np.arange(32) & 7
    lanes = a[:, None, x] * b[None, :, u] + a[:, None, 7 - x] * b[None, :, 7 - u]  # (nt1, nt2, 32)
    return (lanes.max(axis=2) + 2 * UNIT_OVERHEAD).ravel()


def _checked(costs: np.ndarray, nwarp: int) -> np.ndarray:
    """``costs`` as int64, after the checks the range schedules share (at least one warp, costs of at least 1)."""
    c = np.asarray(costs, dtype=np.int64)
    if nwarp < 1:
        raise ValueError(f"nwarp must be at least 1, got {nwarp}")
    if c.size and c.min() < 1:
        raise ValueError("work unit costs must be at least 1")
    return c


def schedule_ranges(costs: np.ndarray, nwarp: int) -> np.ndarray:
    """The first unit of each warp's range, then the number of units (``nwarp + 1`` integers): warp w
    takes units ``starts[w] .. starts[w + 1] - 1``. Integer arithmetic as in the kernel; a warp whose
    share a costlier unit's midpoint skips gets an empty range.

    Every warp's load is at most ``total / nwarp + max(costs)`` (its units' midpoints lie in one
    ``total / nwarp`` interval).

    Examples
    --------
    >>> schedule_ranges(np.array([1, 1, 1, 1]), 2).tolist()
    [0, 2, 4]
    """
    c = _checked(costs, nwarp)
    n = c.size
    if n == 0:
        return np.zeros(nwarp + 1, dtype=np.int64)
    twice_mid = 2 * np.cumsum(c) - c
    warp = np.minimum(nwarp - 1, twice_mid * nwarp // (2 * int(c.sum())))
    starts = np.empty(nwarp + 1, dtype=np.int64)
    starts[:nwarp] = np.searchsorted(warp, np.arange(nwarp), side="left")
    starts[nwarp] = n
    return starts


def optimal_ranges(costs: np.ndarray, nwarp: int) -> np.ndarray:
    """The contiguous ranges (as :func:`schedule_ranges` returns them) whose busiest warp carries the least:
    a binary search on that load, each probe filling the warps greedily. A bound for schedules of contiguous
    ranges in ``python -m mgkflow.bench balance``; the kernel does not use it (a search per pair).

    Examples
    --------
    >>> costs = np.array([10, 1, 1, 1, 1, 1, 1, 4])
    >>> warp_loads(costs, schedule_ranges(costs, 4)).max(), warp_loads(costs, optimal_ranges(costs, 4)).max()
    (np.int64(10), np.int64(10))
    >>> optimal_ranges(np.array([3, 3, 2, 2, 2]), 2).tolist()
    [0, 2, 5]
    """
    c = _checked(costs, nwarp)
    n = c.size
    if n == 0:
        return np.zeros(nwarp + 1, dtype=np.int64)
    prefix = np.concatenate([[0], np.cumsum(c)])

    def fill(limit: int) -> np.ndarray | None:
        starts = np.full(nwarp + 1, n, dtype=np.int64)
        at = 0
        for w in range(nwarp):
            starts[w] = at
            if at < n:  # the longest range from unit `at` within the limit (at least one unit: limit >= max)
                at = int(np.searchsorted(prefix, prefix[at] + limit, side="right")) - 1
        return starts if at >= n else None

    lo, hi = int(c.max()), int(prefix[-1])
    while lo < hi:
        mid = (lo + hi) // 2
        if fill(mid) is None:
            lo = mid + 1
        else:
            hi = mid
    return fill(lo)


def warp_loads(costs: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Each warp's summed cost under ``starts`` (:func:`schedule_ranges`)."""
    c = np.concatenate([[0], np.cumsum(np.asarray(costs, dtype=np.int64))])
    s = np.asarray(starts, dtype=np.int64)
    return c[s[1:]] - c[s[:-1]]


def round_robin_loads(costs: np.ndarray, nwarp: int) -> np.ndarray:
    """Each warp's summed cost when warp w takes units w, w + nwarp, ... (launches with P in global memory).

    Examples
    --------
    >>> round_robin_loads(np.array([5, 1, 1, 1, 5]), 2).tolist()
    [11, 2]
    """
    c = np.asarray(costs, dtype=np.int64)
    return np.bincount(np.arange(c.size) % nwarp, weights=c, minlength=nwarp).astype(np.int64)
