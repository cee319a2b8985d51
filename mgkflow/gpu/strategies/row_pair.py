"""Per-block strategy "rows" (default): row pairs in CSR order (``xmv_row_pair.cuh``), and
its host layout (also read by the wide path's "wide_rows").

Layout: the octile format (:mod:`mgkflow.format.octile`) stores each graph's nonzeros tile
by tile; the row-pair XMV walks them row by row instead: :func:`row_arrays` (padded node-row
pointers, blocked column offsets, weights and edge-label words in row order), with the nodes
sorted by degree (:func:`degree_order`; K is permutation invariant). Both
are built from the same reordered graph; nothing here needs a GPU. Numpy emulation:
:func:`mgkflow.gpu.emulate.xmv_rows`. Job cost: nonzero products per XMV plus the per-entry
vector work.

The fragment also defines, for the gradient configuration only (``#if GRADIENT``), the two-vector
variant ``XMV_TILE_PAIR2`` (``row_pair2``): the joint PCG of x and the adjoint y multiplies both
search directions in one pass, each product's coefficient (the edge kernel) formed once
(emulated by :func:`~mgkflow.gpu.emulate.xmv_rows` on an (N, 2) array).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any

import numpy as np

from ...format.octile import concat_labels, row_lengths
from ...system import GraphSystem
from . import register
from ._block import BlockStrategy

__all__ = [
    "RowPair", "STRATEGY", "degree_order", "DEGREE_SORT_MAX_NODES", "permute_system", "row_arrays", "label_words",
    "spread_order",
]  # fmt: skip


def label_words(arrays: Sequence[np.ndarray], length: int) -> np.ndarray:
    """Stack label fields (int32/float32) as raw 32-bit words, field-major."""
    if not arrays:
        return np.zeros(1, dtype=np.uint32)
    # one spare word per field: the dense loop may read (and discard) one past a field's end
    out = np.zeros((len(arrays), length + 1), dtype=np.uint32)
    for k, a in enumerate(arrays):
        a = np.asarray(a)
        a = a.astype(np.int32) if a.dtype.kind in "iub" else a.astype(np.float32)
        out[k, : a.size] = a.view(np.uint32)
    return out.ravel()


#: Graphs of at most this many nodes are sorted by degree as a whole (:func:`degree_order`); larger ones
#: within their 8-node tiles only, which keeps the locality of the user's ordering (the wide path's staged
#: XMV and global-memory launches need it).
DEGREE_SORT_MAX_NODES = 128


def degree_order(graph: Any) -> np.ndarray:
    """Permutation sorting the nodes by degree, descending (stable): all nodes of a graph of at most
    :data:`DEGREE_SORT_MAX_NODES`, else the nodes of every 8-node tile among themselves.

    The row-pair XMV gives lane (x, u) of a tile pair the outputs (x, u) and (7 - x, 7 - u), each
    deg1 * deg2 products, and a warp runs as long as its busiest lane. Sorting within tiles pairs a
    tile's heavy rows with its light ones; sorting the whole graph also puts a graph's hubs into the
    same tiles, so that no light tile pair waits on one hub. Lane-work model (a tile pair costs its
    busiest lane; the even share over the slowest lane, 24 PBR-ordered graphs, all pairs): BA 0.72
    within tiles, 0.94 whole; NWS 0.82, 0.96 (gpu/NOTES.md, session 17). Every tile pair is walked
    either way (the row-pair XMV's work does not depend on the octile count), and P sits in shared
    memory or a cache for graphs this small.

    Examples
    --------
    >>> import numpy as np
    >>> from mgkflow import Graph
    >>> A = np.zeros((9, 9)); A[1, 2:5] = A[2:5, 1] = 1; A[8, 7] = A[7, 8] = 1
    >>> degree_order(Graph(A)).tolist()
    [1, 2, 3, 4, 7, 8, 0, 5, 6]
    """
    deg = np.diff(graph.adjacency.indptr)
    n = deg.size
    group = np.zeros(n, dtype=np.int64) if n <= DEGREE_SORT_MAX_NODES else np.arange(n) // 8
    return np.lexsort((np.arange(n), -deg, group))


def permute_system(s: GraphSystem, perm: np.ndarray) -> GraphSystem:
    return GraphSystem(s.graph.permute(perm), s.index, s.p[perm], s.q[perm], s.d[perm])


@cache
def _spread_kernel() -> Any:
    from numba import njit

    @njit(cache=True)
    def extra_passes(r0, r1, row_start, row_len, cols, order):  # pragma: no cover
        # a tile's extra shared-memory passes in this order: per position, the most distinct columns that
        # share a residue mod 8, less one
        extra = 0
        seen = np.zeros(8, np.int64)
        count = np.zeros(8, np.int64)
        pos = 0
        while True:
            n_seen = 0
            count[:] = 0
            for r in range(r0, r1):
                if pos < row_len[r]:
                    c = cols[order[row_start[r] + pos]]
                    dup = False
                    for m in range(n_seen):
                        dup = dup or seen[m] == c
                    if not dup:
                        seen[n_seen] = c
                        n_seen += 1
                        count[c & 7] += 1
            if n_seen == 0:
                return extra
            extra += count.max() - 1
            pos += 1

    @njit(cache=True)
    def spread(tile_rows, row_start, row_len, cols, order):  # pragma: no cover
        # per tile of (up to) 8 consecutive rows: fill position 0 of every row, then position 1, ...; at each
        # position the rows with most entries left choose first: a column another row took at this position
        # (same address: a broadcast), else one whose residue mod 8 no row took (another bank), else the first.
        # A tile the greedy leaves with more extra passes than its given order keeps the given order (a
        # broadcast taken early can force a collision later).
        left = np.zeros(8, np.int64)
        taken = np.zeros(8, np.int64)
        count = np.zeros(8, np.int64)  # distinct columns per residue at the position
        given = order.copy()  # the tiles' entries are disjoint: each keeps its given order here
        for t in range(tile_rows.shape[0] - 1):
            r0, r1 = tile_rows[t], tile_rows[t + 1]
            nr = r1 - r0
            after = 0  # the greedy order's extra passes
            for k in range(nr):
                left[k] = row_len[r0 + k]
            pos = 0
            while True:
                busy = 0
                for k in range(nr):
                    busy += left[k] > 0
                if busy == 0:
                    break
                n_taken = 0
                count[:] = 0
                used = 0  # residues taken at this position (bits)
                for _ in range(busy):
                    kk = -1
                    for k in range(nr):  # the row with most entries left among those not served yet
                        if left[k] > 0 and row_len[r0 + k] - left[k] == pos and (kk < 0 or left[k] > left[kk]):
                            kk = k
                    a = row_start[r0 + kk] + pos  # this row's entries pos.. are its unplaced ones
                    b = row_start[r0 + kk] + row_len[r0 + kk]
                    pick = -1
                    for e in range(a, b):
                        c = cols[order[e]]
                        for m in range(n_taken):
                            if taken[m] == c:
                                pick = e
                                break
                        if pick >= 0:
                            break
                    if pick < 0:
                        for e in range(a, b):
                            if not (used >> (cols[order[e]] & 7)) & 1:
                                pick = e
                                break
                    if pick < 0:
                        pick = a
                    c = cols[order[pick]]
                    order[a], order[pick] = order[pick], order[a]
                    new = True
                    for m in range(n_taken):
                        new = new and taken[m] != c
                    if new:  # taken: the position's distinct columns (at most one a row, 8 rows a tile)
                        taken[n_taken] = c
                        n_taken += 1
                        count[c & 7] += 1
                    used |= 1 << (c & 7)
                    left[kk] -= 1
                after += count.max() - 1
                pos += 1
            if after > 0 and extra_passes(r0, r1, row_start, row_len, cols, given) < after:
                e0, e1 = row_start[r0], row_start[r1 - 1] + row_len[r1 - 1]
                order[e0:e1] = given[e0:e1]
        return order

    return spread


def spread_order(tile_rows: np.ndarray, row_start: np.ndarray, row_len: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """Order of the nonzeros (a permutation within each row) for the row-pair XMV's loads of P.

    A warp's lanes u = 0..7 walk rows 8I2 + u of a tile side by side, entry k of each at the same
    instruction, and load P at their columns: columns equal mod 8 but different fall on the same shared
    memory banks and serialize (a bank conflict), while equal columns are one broadcast. In each tile
    (rows ``tile_rows[t]`` to ``tile_rows[t + 1]``), the entries are reordered within their rows so that
    at every position the rows' columns are the same or differ mod 8 where the rows allow (greedy); a tile
    the greedy would leave with more colliding columns than its given order keeps that order (a broadcast
    taken early can force a collision later), so no tile gets more conflicts. The sums are the same up to
    rounding. Simulated on 20 labeled BA graphs (96 nodes, 2 pairs' first 30 tile
    pairs): 4.53 shared-memory wavefronts per load of P in column order, 2.59 after (2 is the least for
    32 doubles; gpu/NOTES.md, session 22).

    Examples
    --------
    >>> import numpy as np
    >>> cols = np.array([0, 8, 8, 9])  # one tile of two rows: columns (0, 8) and (8, 9)
    >>> spread_order(np.array([0, 2]), np.array([0, 2]), np.array([2, 2]), cols).tolist()  # (0, 9), then 8 and 8
    [0, 1, 3, 2]
    """
    order = np.arange(cols.size, dtype=np.int64)
    if tile_rows.size < 2 or not cols.size:
        return order
    return _spread_kernel()(
        np.asarray(tile_rows, np.int64), np.asarray(row_start, np.int64), np.asarray(row_len, np.int64),
        np.asarray(cols, np.int64), order,
    )  # fmt: skip


def row_arrays(systems: Sequence[GraphSystem], edge_fields: Sequence[str], wdt: Any) -> dict[str, np.ndarray]:
    """CSR (row-order) storage of the row-pair XMV: padded row pointers, blocked column
    offsets, weights and edge-label words, all graphs concatenated; within a row the entries in
    :func:`spread_order` (from the graph's ascending columns)."""
    adjs = [s.graph.adjacency for s in systems]
    n = np.array([A.shape[0] for A in adjs], dtype=np.int64)
    nnz = np.array([A.indices.size for A in adjs], dtype=np.int64)
    side = 8 * (-(-n // 8))
    base = np.cumsum(nnz) - nnz  # first nonzero of each graph
    # per graph: its CSR row pointers (columns already ascend within a row: Graph keeps its CSR
    # canonical), then the padding rows (empty), shifted to the graph's first nonzero
    lens = side + 1
    rrow_off = np.cumsum(lens) - lens
    ptr = np.repeat(base + nnz, lens)  # padding rows end where the graph's nonzeros end
    n1 = n + 1
    at = np.repeat(rrow_off - (np.cumsum(n1) - n1), n1) + np.arange(int(n1.sum()))
    indptr = np.concatenate([A.indptr for A in adjs]).astype(np.int64)
    ptr[at] = indptr + np.repeat(base, n1)
    cols = np.concatenate([A.indices for A in adjs] + [np.zeros(0, np.int64)]).astype(np.int64)
    weight = np.concatenate([A.data for A in adjs] + [np.zeros(0)])
    labels = [concat_labels([s.graph.edge_labels[f] for s in systems]) for f in edge_fields]
    total = int(nnz.sum())
    row_len = row_lengths(indptr, n)
    grow = np.repeat(np.arange(int(n.sum())), row_len)
    if total > 1 and np.any((cols[1:] <= cols[:-1]) & (grow[1:] == grow[:-1])):  # not canonical: sort rows
        order = np.lexsort((cols, grow))
        cols, weight, labels = cols[order], weight[order], [v[order] for v in labels]
    # then each row's entries in the order that spreads a tile's loads of P over the banks (spread_order)
    row_start = np.cumsum(row_len) - row_len
    first_row = np.cumsum(n) - n
    tiles = -(-n // 8)
    tile_in_graph = np.arange(int(tiles.sum())) - np.repeat(np.cumsum(tiles) - tiles, tiles)
    tile_first = np.repeat(first_row, tiles) + 8 * tile_in_graph
    tile_rows = np.append(tile_first, int(n.sum())).astype(np.int64)
    order = spread_order(tile_rows, row_start, row_len, cols)
    cols, weight, labels = cols[order], weight[order], [v[order] for v in labels]
    out = {
        "rrowptr": ptr.astype(np.int32),
        "rcoff": np.concatenate([((cols >> 3) << 6) | (cols & 7), np.zeros(1, np.int64)]).astype(np.int32),
        "rweight": np.concatenate([weight, np.zeros(1)]).astype(wdt),
        "rrow_off": rrow_off,
    }
    out["relab"] = label_words(labels, total)
    out["relab_stride"] = total + 1
    return out


class RowPair(BlockStrategy):
    name = "rows"
    kernel = "mgk_solve"
    fragment = "xmv_row_pair.cuh"
    feature_names = ("products", "unknowns")
    tile_sort = True
    fallback_rank = 0
    params = (
        ("const int* __restrict__", "rrowptr", "node-row pointers (padded rows empty)"),
        ("const int* __restrict__", "rcoff", "blocked column offset per nonzero"),
        ("const w_t* __restrict__", "rweight", "weights in row order"),
        ("const unsigned int* __restrict__", "relab", "edge labels in row order, field-major words"),
        ("const long long", "relab_stride", ""),
    )

    def args(self, db: Any, prim_map: Any) -> dict[str, Any]:
        a = db.arrays
        return {"rrowptr": a["rrowptr"], "rcoff": a["rcoff"], "rweight": a["rweight"], "relab": a["relab"],
                "relab_stride": db.relab_stride}  # fmt: skip

    def job_cost(self, db: Any, g1: np.ndarray, g2: np.ndarray) -> np.ndarray:
        N = db.nt[g1] * db.nt[g2] * 64
        return db.nnz_per_graph[g1].astype(np.float64) * db.nnz_per_graph[g2] + 4.0 * N


STRATEGY = register(RowPair())
