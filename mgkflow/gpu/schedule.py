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
    "warp_loads",
    "round_robin_loads",
    "xmv_shapes",
    "pass_cost",
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
    c = np.asarray(costs, dtype=np.int64)
    if nwarp < 1:
        raise ValueError(f"nwarp must be at least 1, got {nwarp}")
    if c.size and c.min() < 1:
        raise ValueError("work unit costs must be at least 1")
    n = c.size
    if n == 0:
        return np.zeros(nwarp + 1, dtype=np.int64)
    twice_mid = 2 * np.cumsum(c) - c
    warp = np.minimum(nwarp - 1, twice_mid * nwarp // (2 * int(c.sum())))
    starts = np.empty(nwarp + 1, dtype=np.int64)
    starts[:nwarp] = np.searchsorted(warp, np.arange(nwarp), side="left")
    starts[nwarp] = n
    return starts


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


def xmv_shapes(rrowptr: np.ndarray, rrow_off: np.ndarray, n_tiles_side: np.ndarray) -> np.ndarray:
    """Per graph, what :func:`pass_cost` needs of its packed rows: the sum over its tiles of both halves'
    largest degrees (rows 0..3 and 4..7), the sum of its tiles' largest degrees, and its largest degree.

    Parameters
    ----------
    rrowptr, rrow_off : int arrays
        The row-pair XMV's padded row pointers of all graphs and each graph's first
        (:func:`mgkflow.gpu.strategies.row_pair.row_arrays`).
    n_tiles_side : int array
        8-node tiles of each graph.

    Returns
    -------
    ndarray of int64, shape (n_graphs, 3)

    Examples
    --------
    >>> import numpy as np
    >>> from mgkflow import Graph
    >>> from mgkflow.gpu.strategies.row_pair import row_arrays
    >>> from mgkflow.kernels import Constant
    >>> from mgkflow.system import prepare_graph
    >>> star = Graph(np.array([[0, 1, 1, 1], [1, 0, 0, 0], [1, 0, 0, 0], [1, 0, 0, 0]]))
    >>> rows = row_arrays([prepare_graph(star, 0, Constant(1.0), Constant(1.0))], [], np.float32)
    >>> xmv_shapes(rows["rrowptr"], rows["rrow_off"], np.array([1])).tolist()  # halves 3 + 0, tile 3, degree 3
    [[3, 3, 3]]
    """
    rp = np.asarray(rrowptr, dtype=np.int64)
    off = np.asarray(rrow_off, dtype=np.int64)
    nt = np.asarray(n_tiles_side, dtype=np.int64)
    side = 8 * nt
    first = np.cumsum(side) - side
    rows = np.repeat(off - first, side) + np.arange(int(side.sum()))
    deg = (rp[rows + 1] - rp[rows]).reshape(-1, 8)
    halves = deg[:, :4].max(axis=1) + deg[:, 4:].max(axis=1)
    top = deg.max(axis=1)
    graph = np.repeat(np.arange(nt.size), nt)
    out = np.zeros((nt.size, 3), dtype=np.int64)
    out[:, 0] = np.bincount(graph, weights=halves, minlength=nt.size)
    out[:, 1] = np.bincount(graph, weights=top, minlength=nt.size)
    np.maximum.at(out[:, 2], graph, top)
    return out


def pass_cost(shapes: np.ndarray, nt: np.ndarray, g1: np.ndarray, g2: np.ndarray, nwarp: int = 32) -> np.ndarray:
    """The estimated cost of one XMV pass of each pair (g1, g2) over half tile pairs cut into ``nwarp`` ranges,
    per product unknown and warp: the busiest warp's load, ``max(total / nwarp, costliest unit)``, times
    ``nwarp`` over the pair's unknowns, in the products of :func:`unit_costs`. Even rows of ~2 entries
    (a ring) cost ~0.3, a hub row that no range can share (a tree with hubs) ~1 and more.

    Examples
    --------
    >>> import numpy as np
    >>> # 96 nodes of degree 2; the same with one row of degree 12 (as unit_costs and warp_loads give them)
    >>> shapes, nt = np.array([[48, 24, 2], [58, 34, 12]]), np.array([12, 12])
    >>> np.round(pass_cost(shapes, nt, np.array([0, 1]), np.array([0, 1])), 3).tolist()
    [0.25, 0.514]
    """
    s = np.asarray(shapes, dtype=np.float64)
    g1, g2 = np.asarray(g1), np.asarray(g2)
    tiles = nt[g1].astype(np.float64) * nt[g2]
    total = s[g1, 0] * s[g2, 1] + 2 * UNIT_OVERHEAD * tiles
    busiest = np.maximum(total / nwarp, s[g1, 2] * s[g2, 2] + UNIT_OVERHEAD)
    return busiest * nwarp / (64 * tiles)
