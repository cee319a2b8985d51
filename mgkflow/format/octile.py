"""The octile format (docs/design.md §4): non-empty 8x8 tiles of a (reordered) graph.

A graph's n x n adjacency matrix is cut into 8x8 tiles ("octiles"); only the
non-empty ones are stored, in COO order (row-major by tile row, then tile
column), each with a uint64 bitmap (bit ``r*8+c`` set iff entry
``(8*row+r, 8*col+c)`` is nonzero) and an offset into compact arrays that hold
the weights and edge-label fields of the nonzeros in bitmap bit order. Node
arrays (labels, d, p, q) are padded to a multiple of 8 nodes.

:func:`pack_batch` packs many graphs into a few contiguous arrays with
per-graph offsets (one upload to the GPU per call); :func:`pack_graph` packs
one graph. Both round-trip exactly (:meth:`OctileGraph.to_dense`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import GraphError
from .count import TILE

__all__ = [
    "OctileGraph", "OctileBatch", "pack_graph", "pack_batch", "label_dtype", "held_dtype", "concat_labels",
    "row_lengths",
]  # fmt: skip

_T2 = TILE * TILE


def held_dtype(arrays: Sequence[np.ndarray]) -> np.dtype:
    """The dtype of one label field over several graphs: numpy's promotion of the dtypes of the
    arrays that hold entries (an integer field stays integer only where every graph holds it as
    integers; an edgeless graph's empty array, whatever its dtype, does not count).

    Examples
    --------
    >>> held_dtype([np.zeros(0), np.array([1, 2])]), held_dtype([np.array([1]), np.array([0.5])])
    (dtype('int64'), dtype('float64'))
    """
    arrays = [a if isinstance(a, np.ndarray) else np.asarray(a) for a in arrays]
    held = {a.dtype for a in arrays if a.size}  # (a call's thousands of graphs hold one or two dtypes)
    if held:
        return np.result_type(*held)
    return arrays[0].dtype if arrays else np.dtype(np.float64)


def concat_labels(arrays: Sequence[np.ndarray]) -> np.ndarray:
    """The label arrays of several graphs as one array of dtype :func:`held_dtype` (empty arrays left out)."""
    arrays = [np.asarray(a) for a in arrays]
    held = [a for a in arrays if a.size]
    if held:
        return np.concatenate(held)
    return arrays[0] if arrays else np.zeros(0)


def row_lengths(indptr: np.ndarray, n_nodes: np.ndarray) -> np.ndarray:
    """Every node's row length (int64) from the CSR pointers of several graphs concatenated (``n + 1`` a graph):
    the differences within each graph's pointers, those across two graphs dropped, in one pass.

    Examples
    --------
    >>> row_lengths(np.array([0, 1, 3, 0, 2]), np.array([2, 1])).tolist()
    [1, 2, 2]
    """
    ptr = np.asarray(indptr, dtype=np.int64)
    if not ptr.size:
        return np.zeros(0, np.int64)
    return np.delete(np.diff(ptr), np.cumsum(np.asarray(n_nodes, dtype=np.int64) + 1)[:-1] - 1)


def label_dtype(values: np.ndarray) -> np.dtype:
    """Storage dtype of a label field: int32 for integer labels, float32 otherwise."""
    return np.dtype(np.int32) if np.asarray(values).dtype.kind in "iub" else np.dtype(np.float32)


def _cast_labels(values: np.ndarray, name: str) -> np.ndarray:
    values = np.asarray(values)
    dt = label_dtype(values)
    if dt == np.int32 and values.size:
        lo, hi = values.min(), values.max()
        if lo < np.iinfo(np.int32).min or hi > np.iinfo(np.int32).max:
            raise GraphError(
                f"integer label field '{name}' holds values outside int32 ([{lo}, {hi}]), which the GPU "
                "backend stores; map them to smaller integers (a delta kernel only compares them)"
            )
    return values.astype(dt)


def _system_parts(item: Any) -> tuple[Any, np.ndarray | None, np.ndarray | None, np.ndarray | None]:
    """(graph, p, q, d) of a Graph or a GraphSystem."""
    graph = getattr(item, "graph", item)
    if graph is item:
        return graph, None, None, None
    return graph, item.p, item.q, item.d


def _default_pqd(graph: Any, q: float = 0.05) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n = graph.n_nodes
    rowsum = graph.degree_sum()
    rowsum = np.where(rowsum > 0, rowsum, 1.0)
    qv = np.full(n, q)
    return np.ones(n), qv, rowsum / (1.0 - qv)


#: The array attributes of an :class:`OctileBatch` (besides the label dicts).
_ARRAY_FIELDS = (
    "n_nodes",
    "n_tiles_side",
    "node_offset",
    "rowptr_offset",
    "tile_offset",
    "nnz_offset",
    "tile_row",
    "tile_col",
    "bitmap",
    "offset",
    "rowptr",
    "weight",
    "d",
    "p",
    "q",
)


class _OctileArrays:
    """What :class:`OctileBatch` and :class:`OctileGraph` share: counts, bytes, tile densities.

    A subclass names its array attributes (besides the label dicts) in ``_ARRAYS``.
    """

    _ARRAYS: tuple[str, ...] = ()
    bitmap: np.ndarray
    weight: np.ndarray
    edge_labels: dict[str, np.ndarray]
    node_labels: dict[str, np.ndarray]

    @property
    def n_octiles(self) -> int:
        """Number of non-empty octiles (of all graphs, in a batch)."""
        return int(self.bitmap.size)

    @property
    def nnz(self) -> int:
        """Number of stored nonzeros (both triangles; of all graphs, in a batch)."""
        return int(self.weight.size)

    @property
    def nbytes(self) -> int:
        """Bytes of all arrays (what goes to the GPU)."""
        arrays = [getattr(self, f) for f in self._ARRAYS]
        arrays += list(self.edge_labels.values()) + list(self.node_labels.values())
        return int(sum(a.nbytes for a in arrays))

    def density_histogram(self) -> np.ndarray:
        """Length-65 counts of nonzeros per octile (entry 0 is 0)."""
        counts = np.bitwise_count(self.bitmap).astype(np.int64)
        return np.bincount(counts, minlength=_T2 + 1)


@dataclass
class OctileBatch(_OctileArrays):
    """Many graphs in octile format, concatenated into contiguous arrays.

    Per graph ``k``: nodes ``node_offset[k] : node_offset[k] + 8*n_tiles_side[k]``
    of the node arrays (padded; real nodes first ``n_nodes[k]``), octiles
    ``tile_offset[k] : tile_offset[k+1]``, tile-row pointers
    ``rowptr[rowptr_offset[k] : rowptr_offset[k] + n_tiles_side[k] + 1]`` (absolute
    octile indices), and nonzeros ``nnz_offset[k] : nnz_offset[k+1]`` of the compact
    arrays. ``offset`` of every octile is absolute in the compact arrays.

    Attributes
    ----------
    n_nodes, n_tiles_side : int32 arrays (n_graphs,)
    node_offset, rowptr_offset : int32 arrays (n_graphs,)
    tile_offset, nnz_offset : int64 arrays (n_graphs + 1,)
    tile_row, tile_col, offset : int32 arrays (n_octiles,)
    bitmap : uint64 array (n_octiles,)
    rowptr : int32 array
    weight : float32 array (nnz,), float64 where some weight is not exactly a float32
    edge_labels : dict of str to float32/int32 arrays (nnz,)
    node_labels : dict of str to float32/int32 arrays (padded nodes,)
    d, p, q : float64 arrays (padded nodes,); padding has d = 1, p = q = 0.
    """

    n_nodes: np.ndarray
    n_tiles_side: np.ndarray
    node_offset: np.ndarray
    rowptr_offset: np.ndarray
    tile_offset: np.ndarray
    nnz_offset: np.ndarray
    tile_row: np.ndarray
    tile_col: np.ndarray
    bitmap: np.ndarray
    offset: np.ndarray
    rowptr: np.ndarray
    weight: np.ndarray
    edge_labels: dict[str, np.ndarray] = field(default_factory=dict)
    node_labels: dict[str, np.ndarray] = field(default_factory=dict)
    d: np.ndarray = field(default_factory=lambda: np.zeros(0))
    p: np.ndarray = field(default_factory=lambda: np.zeros(0))
    q: np.ndarray = field(default_factory=lambda: np.zeros(0))

    _ARRAYS = _ARRAY_FIELDS

    @property
    def n_graphs(self) -> int:
        """Number of graphs in the batch."""
        return int(self.n_nodes.size)

    def octiles_per_graph(self) -> np.ndarray:
        """Number of non-empty octiles of each graph."""
        return np.diff(self.tile_offset)

    def graph(self, k: int) -> OctileGraph:
        """The octile form of graph ``k`` alone (offsets made relative)."""
        if not 0 <= k < self.n_graphs:
            raise IndexError(f"graph index {k} out of range for a batch of {self.n_graphs}")
        t0, t1 = int(self.tile_offset[k]), int(self.tile_offset[k + 1])
        z0, z1 = int(self.nnz_offset[k]), int(self.nnz_offset[k + 1])
        nt = int(self.n_tiles_side[k])
        v0 = int(self.node_offset[k])
        v1 = v0 + nt * TILE
        r0 = int(self.rowptr_offset[k])
        return OctileGraph(
            n_nodes=int(self.n_nodes[k]),
            tile_row=self.tile_row[t0:t1].copy(),
            tile_col=self.tile_col[t0:t1].copy(),
            bitmap=self.bitmap[t0:t1].copy(),
            offset=(self.offset[t0:t1] - z0).astype(np.int32),
            rowptr=(self.rowptr[r0 : r0 + nt + 1] - t0).astype(np.int32),
            weight=self.weight[z0:z1].copy(),
            edge_labels={f: v[z0:z1].copy() for f, v in self.edge_labels.items()},
            node_labels={f: v[v0:v1].copy() for f, v in self.node_labels.items()},
            d=self.d[v0:v1].copy(),
            p=self.p[v0:v1].copy(),
            q=self.q[v0:v1].copy(),
        )

    def to_dense(self, k: int, field: str | None = None) -> np.ndarray:
        """Dense n x n weight matrix of graph ``k`` (or edge-label field ``field``)."""
        return self.graph(k).to_dense(field)


@dataclass
class OctileGraph(_OctileArrays):
    """One graph in octile format (see the module docstring).

    Attributes
    ----------
    n_nodes : int
        Real nodes; node arrays are padded to ``8 * n_tiles_side``.
    tile_row, tile_col : int32 arrays (n_octiles,)
        Tile coordinates, row-major sorted.
    bitmap : uint64 array (n_octiles,)
        Bit ``r*8+c`` set iff entry ``(8*row+r, 8*col+c)`` is nonzero.
    offset : int32 array (n_octiles,)
        Start of each octile's nonzeros in the compact arrays.
    rowptr : int32 array (n_tiles_side + 1,)
        Octiles of tile row ``I`` are ``rowptr[I] : rowptr[I+1]``.
    weight : float32 or float64 array (nnz,)
        Edge weights in bitmap bit order; float32 unless some weight would round
        (the GPU solver's accuracy at small q needs the exact weights).
    edge_labels, node_labels : dict of str to arrays
        float32 or int32 per field; node labels padded (padding 0).
    d, p, q : float64 arrays (padded nodes,)
        Degree, start and stop probability; padding has d = 1, p = q = 0.
    """

    n_nodes: int
    tile_row: np.ndarray
    tile_col: np.ndarray
    bitmap: np.ndarray
    offset: np.ndarray
    rowptr: np.ndarray
    weight: np.ndarray
    edge_labels: dict[str, np.ndarray]
    node_labels: dict[str, np.ndarray]
    d: np.ndarray
    p: np.ndarray
    q: np.ndarray

    _ARRAYS = ("tile_row", "tile_col", "bitmap", "offset", "rowptr", "weight", "d", "p", "q")

    @property
    def n_tiles_side(self) -> int:
        """Tiles per side, ceil(n / 8)."""
        return -(-self.n_nodes // TILE)

    def entries(self) -> tuple[np.ndarray, np.ndarray]:
        """(rows, cols) of the stored nonzeros in compact (bitmap) order."""
        bits = ((self.bitmap[:, None] >> np.arange(_T2, dtype=np.uint64)) & np.uint64(1)).astype(bool)
        t, b = np.nonzero(bits)  # row-major: octile, then bit -> compact order
        rows = self.tile_row[t].astype(np.int64) * TILE + b // TILE
        cols = self.tile_col[t].astype(np.int64) * TILE + b % TILE
        return rows, cols

    def to_dense(self, field: str | None = None) -> np.ndarray:
        """Dense n x n matrix of the weights (or of edge-label field ``field``, 0 off the edges)."""
        rows, cols = self.entries()
        vals = self.weight if field is None else self.edge_labels[field]
        out = np.zeros((self.n_nodes, self.n_nodes), dtype=np.float64 if field is None else vals.dtype)
        out[rows, cols] = vals
        return out

    def to_graph(self, title: str | None = None) -> Any:
        """Unpack into a :class:`mgkflow.graph.Graph` (weights and labels in storage precision)."""
        import scipy.sparse as sp

        from ..graph import Graph

        rows, cols = self.entries()
        n = self.n_nodes
        order = np.lexsort((cols, rows))
        csr = sp.csr_array((self.weight[order].astype(np.float64), (rows[order], cols[order])), shape=(n, n))
        csr.sort_indices()
        return Graph.from_csr(
            csr.indptr,
            csr.indices,
            csr.data,
            n,
            node_labels={f: v[:n] for f, v in self.node_labels.items()},
            edge_labels={f: v[order] for f, v in self.edge_labels.items()},
            title=title,
        )


def _octiles(parts: list, edge_fields: list[str], n_nodes: np.ndarray, nt: np.ndarray) -> dict[str, Any]:
    """The octiles of all graphs at once, from their nonzeros in CSR order (rows, then columns, ascending).

    Returns the arrays of :class:`OctileBatch` that describe octiles and nonzeros (``tile_row``,
    ``tile_col``, ``bitmap``, ``offset``, ``tile_offset``, ``nnz_offset``, ``rowptr``,
    ``rowptr_offset``), the weights in compact order (``weight``), the permutation from CSR to
    compact order (``order``), the edge-label arrays per field in CSR order (``labels``) and
    the local index of every real node (``local``).
    """
    G = len(parts)
    adjs = [g.adjacency for g, *_rest in parts]
    lab_l: dict[str, list[np.ndarray]] = {f: [] for f in edge_fields}
    for f in edge_fields:
        for k, (g, *_rest) in enumerate(parts):
            if f not in g.edge_labels:
                raise ValueError(f"graph {k}: edge label field '{f}' missing")
            lab_l[f].append(np.asarray(g.edge_labels[f]))
    nnz_g = np.array([a.indices.size for a in adjs], dtype=np.int64)
    deg = row_lengths(np.concatenate([a.indptr for a in adjs]), n_nodes)
    real_start = np.cumsum(n_nodes) - n_nodes
    local = np.arange(int(n_nodes.sum()), dtype=np.int64) - np.repeat(real_start, n_nodes)
    rows = np.repeat(local, deg)
    cols = np.concatenate([a.indices for a in adjs]).astype(np.int64)
    gid = np.repeat(np.arange(G, dtype=np.int64), nnz_g)
    weight = np.concatenate([a.data for a in adjs])
    tr, tc = rows // TILE, cols // TILE
    bit = (rows % TILE) * TILE + cols % TILE
    # global tile key: graph, tile row, tile col (all < 2^20 for sane sizes)
    tkey = (gid * int(nt.max() + 1) + tr) * int(nt.max() + 1) + tc
    # by tile, then bit: one stable sort of tkey * 64 + bit (the keys are unique, so the order is lexsort's; the
    # nonzeros come nearly sorted, which the stable sort exploits: 2.1M nonzeros of 40,000 molecules 0.22 -> 0.02 s)
    order = np.argsort(tkey * TILE * TILE + bit, kind="stable") if tkey.size and tkey.max() < 2**56 else \
        np.lexsort((bit, tkey))  # fmt: skip
    tkey, bit, weight = tkey[order], bit[order], weight[order]
    tr, tc, gid = tr[order], tc[order], gid[order]
    if tkey.size:
        new = np.empty(tkey.size, dtype=bool)
        new[0] = True
        np.not_equal(tkey[1:], tkey[:-1], out=new[1:])
    else:
        new = np.zeros(0, dtype=bool)
    starts = np.flatnonzero(new)
    tile_id = np.cumsum(new) - 1
    n_oct = starts.size
    bitmap = np.zeros(n_oct, dtype=np.uint64)
    np.bitwise_or.at(bitmap, tile_id, np.left_shift(np.uint64(1), bit.astype(np.uint64)))
    tile_row = tr[starts].astype(np.int32)
    tile_col = tc[starts].astype(np.int32)
    tile_gid = gid[starts]
    offset = starts.astype(np.int32)
    tile_offset = np.zeros(G + 1, dtype=np.int64)
    np.cumsum(np.bincount(tile_gid, minlength=G), out=tile_offset[1:])
    nnz_offset = np.zeros(G + 1, dtype=np.int64)
    np.cumsum(np.bincount(gid, minlength=G), out=nnz_offset[1:])
    # tile-row pointers (absolute octile indices), nt+1 per graph: rowptr[(k, I)] is the
    # number of octiles before graph k's tile row I in the sorted octile list
    rowptr_offset = np.zeros(G + 1, dtype=np.int64)
    np.cumsum(nt + 1, out=rowptr_offset[1:])
    span = int(nt.max()) + 1
    row_key = tile_gid * span + tile_row
    slot_g = np.repeat(np.arange(G), nt + 1)
    slot_i = np.arange(int(rowptr_offset[-1])) - rowptr_offset[:-1][slot_g]
    rowptr = np.searchsorted(row_key, slot_g * span + slot_i, side="left").astype(np.int32)
    return {
        "tile_row": tile_row, "tile_col": tile_col, "bitmap": bitmap, "offset": offset, "tile_offset": tile_offset,
        "nnz_offset": nnz_offset, "rowptr": rowptr, "rowptr_offset": rowptr_offset, "weight": weight,
        "order": order, "labels": lab_l, "local": local,
    }


def _node_arrays(
    parts: list, node_fields: list[str], n_nodes: np.ndarray, node_offset: np.ndarray, local: np.ndarray, q: float
) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray, np.ndarray]:
    """The padded node arrays of :class:`OctileBatch`: (node_labels, d, p, q); padding has d = 1, p = q = 0."""
    total = int(node_offset[-1])
    d = np.ones(total)
    p = np.zeros(total)
    qv = np.zeros(total)
    node_labels: dict[str, np.ndarray] = {}
    at = np.repeat(node_offset[:-1], n_nodes) + local  # padded position of every real node
    for f in node_fields:
        vals = []
        for k, (g, *_r) in enumerate(parts):
            if f not in g.node_labels:
                raise ValueError(f"graph {k}: node label field '{f}' missing")
            vals.append(np.asarray(g.node_labels[f]))
        allv = concat_labels(vals)
        dt = label_dtype(allv)
        arr = np.zeros((total, *allv.shape[1:]), dtype=dt)
        if len({v.dtype.kind in "iub" for v in vals}) == 1:  # one kind: one cast (the same values)
            arr[at] = _cast_labels(allv, f)
        else:
            for k, v in enumerate(vals):
                arr[node_offset[k] : node_offset[k] + v.size] = _cast_labels(v, f)
        node_labels[f] = arr
    pqd = [(pk, qk, dk) if pk is not None else _default_pqd(g, q) for g, pk, qk, dk in parts]
    p[at] = np.concatenate([v[0] for v in pqd])
    qv[at] = np.concatenate([v[1] for v in pqd])
    d[at] = np.concatenate([v[2] for v in pqd])
    return node_labels, d, p, qv


def pack_batch(
    graphs: Sequence[Any],
    node_fields: Sequence[str] | None = None,
    edge_fields: Sequence[str] | None = None,
    q: float = 0.05,
) -> OctileBatch:
    """Pack graphs (already reordered) into one :class:`OctileBatch`.

    Parameters
    ----------
    graphs : sequence of Graph or GraphSystem
        A :class:`~mgkflow.system.GraphSystem` brings its exact p, q and d; a plain
        Graph gets p = 1, q = ``q`` and d = rowsum / (1 - q).
    node_fields, edge_fields : sequence of str, optional
        Label fields to pack (default: every field of the first graph).
    q : float
        Stop probability for plain graphs.

    Returns
    -------
    OctileBatch

    Examples
    --------
    >>> import numpy as np
    >>> from mgkflow.graph import Graph
    >>> A = np.zeros((10, 10)); A[0, 9] = A[9, 0] = 1; A[1, 2] = A[2, 1] = 2
    >>> b = pack_batch([Graph(A)])
    >>> b.n_octiles, b.nnz, bool((b.to_dense(0) == A).all())
    (3, 4, True)
    """
    parts = [_system_parts(g) for g in graphs]
    if not parts:
        raise ValueError("pack_batch needs at least one graph")
    first = parts[0][0]
    if node_fields is None:
        node_fields = list(first.node_labels)
    if edge_fields is None:
        edge_fields = list(first.edge_labels)
    node_fields, edge_fields = list(node_fields), list(edge_fields)
    G = len(parts)
    n_nodes = np.array([g.n_nodes for g, *_ in parts], dtype=np.int64)
    if np.any(n_nodes < 1):
        k = int(np.argmin(n_nodes))
        raise ValueError(f"graph {k} has no nodes; the octile format needs at least one node")
    nt = -(-n_nodes // TILE)
    npad = nt * TILE
    node_offset = np.zeros(G + 1, dtype=np.int64)
    np.cumsum(npad, out=node_offset[1:])
    tiles = _octiles(parts, edge_fields, n_nodes, nt)
    node_labels, d, p, qv = _node_arrays(parts, node_fields, n_nodes, node_offset, tiles["local"], q)
    edge_labels = {}
    for f in edge_fields:
        lab_l = tiles["labels"][f]
        allv = concat_labels(lab_l)
        edge_labels[f] = _cast_labels(allv, f)[tiles["order"]] if allv.size else allv.astype(label_dtype(allv))
    return OctileBatch(
        n_nodes=n_nodes.astype(np.int32),
        n_tiles_side=nt.astype(np.int32),
        node_offset=node_offset[:-1].astype(np.int32),
        rowptr_offset=tiles["rowptr_offset"][:-1].astype(np.int32),
        tile_offset=tiles["tile_offset"],
        nnz_offset=tiles["nnz_offset"],
        tile_row=tiles["tile_row"],
        tile_col=tiles["tile_col"],
        bitmap=tiles["bitmap"],
        offset=tiles["offset"],
        rowptr=tiles["rowptr"],
        weight=_weight_storage(tiles["weight"]),
        edge_labels=edge_labels,
        node_labels=node_labels,
        d=d,
        p=p,
        q=qv,
    )


def _weight_storage(weight: np.ndarray) -> np.ndarray:
    """float32 when every weight is exactly a float32 (e.g. unweighted graphs), else float64."""
    w32 = weight.astype(np.float32)
    return w32 if np.array_equal(w32, weight) else weight.astype(np.float64)


def pack_graph(
    graph: Any,
    node_fields: Sequence[str] | None = None,
    edge_fields: Sequence[str] | None = None,
    q: float = 0.05,
) -> OctileGraph:
    """Pack one graph (or GraphSystem) into an :class:`OctileGraph`.

    Examples
    --------
    >>> import numpy as np
    >>> from mgkflow.graph import Graph
    >>> A = np.ones((3, 3)) - np.eye(3)
    >>> og = pack_graph(Graph(A))
    >>> og.n_octiles, og.nnz, og.density_histogram()[6]
    (1, 6, np.int64(1))
    """
    return pack_batch([graph], node_fields, edge_fields, q).graph(0)
