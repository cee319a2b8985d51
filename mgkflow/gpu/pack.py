"""Host-side packing of a GPU batch (no PyCUDA needed): what the pipeline's Pack stage
produces and the GPU backend uploads.

:func:`pack_host` turns prepared systems into every array the device kernels read (the
octile batch of :func:`mgkflow.format.pack_batch`, the row-order arrays of
:func:`mgkflow.gpu.strategies.row_pair.row_arrays`, label words, node vectors) as a :class:`HostBatch`
whose :attr:`~HostBatch.key` names the graphs (by identity) and the layout. The backend
(:meth:`mgkflow.gpu.backend.GPUBackend.adopt`) uploads an adopted batch of the same key
instead of packing again; :func:`pack_for_kernels` builds the batch a backend with given
options would build (the Pack stage of :mod:`mgkflow.pipeline` uses it).

Examples
--------
>>> import networkx as nx
>>> from mgkflow.graph import Graph
>>> from mgkflow.kernels import Constant
>>> from mgkflow.system import prepare_graph
>>> gs = [Graph.from_networkx(nx.cycle_graph(n)) for n in (5, 9)]
>>> systems = [prepare_graph(g, i, Constant(1.0), Constant(1.0), q=0.05) for i, g in enumerate(gs)]
>>> hb = pack_for_kernels(systems, Constant(1.0), Constant(1.0))
>>> hb.host["hdr"].reshape(2, 5)[:, :2].tolist(), hb.nbytes > 0
([[5, 1], [9, 2]], True)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..format.octile import OctileBatch, held_dtype, pack_batch
from ..kernels import BaseKernel
from ..system import GraphSystem, Restopped, system_graphs
from .solvers.compact import degree_classes, edge_categories
from .strategies.row_pair import degree_order, label_words, permute_system, row_arrays

__all__ = [
    "HostBatch",
    "pack_host",
    "pack_for_kernels",
    "layout_key",
    "weights_need_double",
    "weights_all_one",
    "label_dtypes",
]


@dataclass
class HostBatch:
    """Host arrays of one GPU batch (see the module docstring).

    Attributes
    ----------
    key : tuple
        :func:`layout_key` of the systems and layout it was packed for.
    vectors : tuple
        The systems whose p, q, d the packed node vectors hold (compared by identity: another q
        makes new systems, and their vectors are uploaded again).
    batch : OctileBatch
        The octile batch (node vectors and labels included).
    host : dict of ndarray
        Every device array by name (dtypes as the kernels declare them).
    elab_stride, nlab_stride, relab_stride : int
        Strides of the field-major label words.
    perms : tuple of ndarray or None
        Node permutation applied to each graph (tile degree sort), None for none.
    graphs : tuple
        The graphs (kept alive: the key holds their ids).
    ncat : int
        Edge categories of the compact solver's category build (``host["rcat"]``, ``host["ecat"]``;
        :func:`mgkflow.gpu.solvers.compact.edge_categories`), 0 where there are too many.
    """

    key: tuple
    vectors: tuple
    batch: OctileBatch
    host: dict[str, np.ndarray]
    elab_stride: int
    nlab_stride: int
    relab_stride: int
    perms: tuple | None
    graphs: tuple
    ncat: int = 0

    @property
    def nbytes(self) -> int:
        return int(sum(v.nbytes for v in self.host.values()))


def layout_key(systems: Sequence[GraphSystem], config: Any, sort: bool) -> tuple:
    """What the packed arrays depend on besides p, q, d: the graphs (identity), the label fields
    and their storage, the weight storage and the tile sort."""
    ids = tuple(map(id, system_graphs(systems)))
    return (ids, tuple(config.node_fields), tuple(config.edge_fields), bool(config.weight_double), bool(sort))


def weights_need_double(systems: Sequence[GraphSystem]) -> bool:
    """Whether some edge weight is not exactly a float32 (the weights are then stored in float64).

    Examples
    --------
    >>> from mgkflow.graph import Graph
    >>> from mgkflow.kernels import Constant
    >>> from mgkflow.system import prepare_graph
    >>> def system(w):
    ...     return prepare_graph(Graph(np.array([[0, w], [w, 0]])), 0, Constant(1.0), Constant(1.0))
    >>> weights_need_double([system(1.5), system(3.0)]), weights_need_double([system(1.5), system(0.1)])
    (False, True)
    """
    data = [g.adjacency.data for g in system_graphs(systems)]
    if not data:
        return False
    weights = np.concatenate(data)  # one comparison over every weight (per graph: 26 ms for 7,000 graphs, now 4)
    return not np.array_equal(weights.astype(np.float32), weights)


def weights_all_one(systems: Sequence[GraphSystem]) -> bool:
    """Whether every edge weight of the systems' graphs is exactly 1 (unweighted graphs: the solvers'
    products then skip the weights, :attr:`mgkflow.gpu.source.KernelConfig.unit_weight`).

    Examples
    --------
    >>> from mgkflow.graph import Graph
    >>> from mgkflow.kernels import Constant
    >>> from mgkflow.system import prepare_graph
    >>> def system(w):  # a path of two edges, weights 1 and w (a graph's weights are stored scaled by a power of 2)
    ...     return prepare_graph(Graph(np.array([[0, 1, 0], [1, 0, w], [0, w, 0]])), 0, Constant(1.0), Constant(1.0))
    >>> weights_all_one([system(1.0), system(1.0)]), weights_all_one([system(1.0), system(2.0)])
    (True, False)
    """
    data = [g.adjacency.data for g in system_graphs(systems)]
    return bool(data) and bool(np.all(np.concatenate(data) == 1.0))  # one comparison, as weights_need_double


def label_dtypes(
    systems: Sequence[GraphSystem], node_fields: Sequence[str], edge_fields: Sequence[str]
) -> tuple[dict[str, np.dtype], dict[str, np.dtype]]:
    """The dtype of each label field over all the systems' graphs (:func:`~mgkflow.format.octile.held_dtype`):
    the dtype the packed arrays hold, so the generated code reads every graph's labels as what they are
    (an integer field in one graph beside floats in another is read as floats, never the floats as integers)."""
    graphs = system_graphs(systems)
    if not graphs:
        return {f: held_dtype([]) for f in node_fields}, {f: held_dtype([]) for f in edge_fields}
    # one pass over the graphs gathering each field's distinct dtypes (a list per field was 3x slower)
    sides = (node_fields, edge_fields)
    held: dict[tuple[int, str], set] = {(side, f): set() for side, fs in enumerate(sides) for f in fs}
    for g in graphs:
        labels = (g.node_labels, g.edge_labels)
        for (side, f), dtypes in held.items():
            arr = labels[side][f]
            if arr.size:
                dtypes.add(arr.dtype)
    first = (graphs[0].node_labels, graphs[0].edge_labels)  # a field no graph holds entries of: the first's dtype
    out = {k: np.result_type(*d) if d else np.asarray(first[k[0]][k[1]]).dtype for k, d in held.items()}
    return {f: out[0, f] for f in node_fields}, {f: out[1, f] for f in edge_fields}


def pack_host(systems: Sequence[GraphSystem], config: Any, sort: bool) -> HostBatch:
    """Pack ``systems`` for the device with the label fields and weight storage of ``config``
    (a :class:`mgkflow.gpu.source.KernelConfig`), nodes of each tile sorted by degree if ``sort``."""
    key = layout_key(systems, config, sort)
    vectors = systems if isinstance(systems, Restopped) else tuple(systems)
    originals = tuple(s.graph for s in systems)
    perms = None
    if sort:
        perms = tuple(degree_order(s.graph) for s in systems)
        systems = [permute_system(s, perm) for s, perm in zip(systems, perms, strict=True)]
    nf = [f for f, _ in config.node_fields]
    ef = [f for f, _ in config.edge_fields]
    batch = pack_batch(systems, node_fields=nf, edge_fields=ef)
    n_nodes_total = int(batch.d.size)
    wdt = np.float64 if config.weight_double else np.float32
    rows = row_arrays(systems, ef, wdt)
    hdr = np.stack(
        [batch.n_nodes, batch.n_tiles_side, batch.node_offset, batch.rowptr_offset, rows["rrow_off"]], axis=1
    ).astype(np.int32)
    host = {
        "hdr": hdr.ravel(),
        "rowptr": batch.rowptr.astype(np.int32),
        "tile_col": batch.tile_col.astype(np.int32) if batch.n_octiles else np.zeros(1, np.int32),
        "bitmap": batch.bitmap if batch.n_octiles else np.zeros(1, np.uint64),
        "toff": batch.offset.astype(np.int32) if batch.n_octiles else np.zeros(1, np.int32),
        "weight": np.concatenate([batch.weight.astype(wdt), np.zeros(1, dtype=wdt)]),
        "elab": label_words([batch.edge_labels[f] for f in ef], batch.nnz),
        "rrowptr": rows["rrowptr"],
        "rcoff": rows["rcoff"],
        "rweight": rows["rweight"],
        "relab": rows["relab"],
        "nlab": label_words([batch.node_labels[f] for f in nf], n_nodes_total),
        "d": batch.d,
        "p": batch.p,
        "q": batch.q,
    }
    host["dord"], host["dcls"] = degree_classes(rows["rrowptr"], batch.n_nodes, batch.n_tiles_side)
    host["rcat"], host["ecat"], ncat = edge_categories(rows["relab"], len(ef), int(rows["relab_stride"]))
    return HostBatch(key, vectors, batch, host, batch.nnz + 1, n_nodes_total + 1, int(rows["relab_stride"]), perms,
                     originals, ncat)  # fmt: skip


def pack_for_kernels(
    systems: Sequence[GraphSystem],
    node_kernel: BaseKernel,
    edge_kernel: BaseKernel,
    xmv: str = "rows",
    tile_sort: bool = True,
) -> HostBatch:
    """The :class:`HostBatch` a :class:`~mgkflow.gpu.backend.GPUBackend` with XMV strategy
    ``xmv`` and ``tile_sort`` builds for these systems and kernels."""
    from . import strategies
    from .source import make_config

    node_dtypes, edge_dtypes = label_dtypes(systems, node_kernel.fields, edge_kernel.fields)
    config = make_config(
        node_kernel,
        edge_kernel,
        node_dtypes,
        edge_dtypes,
        weight_double=weights_need_double(systems),
        xmv=xmv,
    )
    return pack_host(systems, config, strategies.get(xmv).tile_sort and bool(tile_sort))
