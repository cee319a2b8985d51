"""The graph model: an immutable labeled, weighted, undirected graph in CSR form."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

import numpy as np
import scipy.sparse as sp

from .errors import GraphError, describe_graph

__all__ = ["Graph"]


def _frozen(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    a.setflags(write=False)
    return a


def _as_label_array(values: Any, name: str, kind: str, size: int, who: str) -> np.ndarray:
    arr = np.asarray(values)
    if arr.dtype == bool:
        arr = arr.astype(np.int64)
    if arr.ndim != 1 or arr.shape[0] != size:
        raise GraphError(
            f"{who}: {kind} label field '{name}' has shape {arr.shape}, expected ({size},)"
        )
    if arr.dtype.kind in "iu":
        return arr.astype(np.int64)
    if arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)):
            raise GraphError(f"{who}: {kind} label field '{name}' holds NaN or infinite values")
        return arr.astype(np.float64)
    raise GraphError(
        f"{who}: {kind} label field '{name}' must be numeric (int, float or bool), "
        f"got dtype {arr.dtype}; encode categorical labels as integers"
    )


class Graph:
    """An immutable undirected graph with weighted edges and labeled nodes and edges.

    The adjacency matrix is stored as a symmetric :class:`scipy.sparse.csr_array`
    with sorted column indices and no explicit zeros. Edge-label arrays are
    aligned with its ``data`` array (one entry per stored nonzero, so every
    undirected edge appears twice with the same label).

    Parameters
    ----------
    adjacency : sparse matrix or array_like, shape (n, n)
        Symmetric, non-negative, finite weights; zero diagonal.
    node_labels : mapping of str to array_like, optional
        Node label fields, each of length n (int, float or bool).
    edge_labels : mapping of str to array_like, optional
        Edge label fields as *matrices* with the sparsity of ``adjacency``
        (sparse or dense, symmetric). Use :meth:`from_csr` to pass arrays
        aligned with CSR data directly.
    coords : array_like, shape (n, d), optional
        Node coordinates (used by geometric orderings).
    title : str, optional
        A name used in messages and reports.

    Examples
    --------
    >>> import numpy as np
    >>> g = Graph(np.array([[0, 1], [1, 0]]), node_labels={"label": [0, 1]}, title="edge")
    >>> g.n_nodes, g.n_edges
    (2, 1)
    """

    __slots__ = ("_adj", "_node_labels", "_edge_labels", "_coords", "_title")

    def __init__(
        self,
        adjacency: Any,
        node_labels: Mapping[str, Any] | None = None,
        edge_labels: Mapping[str, Any] | None = None,
        coords: Any = None,
        title: str | None = None,
    ) -> None:
        who = describe_graph(None, title)
        coo = sp.coo_array(adjacency, dtype=np.float64) if sp.issparse(adjacency) else None
        if coo is None:
            dense = np.asarray(adjacency, dtype=np.float64)
            if dense.ndim != 2:
                raise GraphError(f"{who}: adjacency must be a 2-D matrix, got shape {dense.shape}")
            coo = sp.coo_array(dense)
        coo.sum_duplicates()
        n = coo.shape[0]
        if coo.shape[0] != coo.shape[1]:
            raise GraphError(f"{who}: adjacency matrix must be square, got {coo.shape}")
        rows, cols = coo.row.astype(np.int64), coo.col.astype(np.int64)
        order = np.lexsort((cols, rows))
        rows, cols, data = rows[order], cols[order], coo.data[order]
        labels = {}
        for name, mat in (edge_labels or {}).items():
            if sp.issparse(mat):
                vals = np.asarray(sp.csr_array(mat)[rows, cols]).ravel()
            else:
                dense_lab = np.asarray(mat)
                if dense_lab.shape != coo.shape:
                    raise GraphError(
                        f"{who}: edge label field '{name}' has shape {dense_lab.shape}, "
                        f"expected {coo.shape}"
                    )
                vals = dense_lab[rows, cols]
            labels[name] = vals
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(rows, minlength=n), out=indptr[1:])
        adj = sp.csr_array((data, cols, indptr), shape=(n, n))
        self._init_from_csr(adj, node_labels or {}, labels, coords, title)

    # ------------------------------------------------------------------ builders
    @classmethod
    def from_csr(
        cls,
        indptr: Any,
        indices: Any,
        data: Any,
        n_nodes: int,
        node_labels: Mapping[str, Any] | None = None,
        edge_labels: Mapping[str, Any] | None = None,
        coords: Any = None,
        title: str | None = None,
    ) -> Graph:
        """Build a graph from CSR arrays; edge labels aligned with ``data``.

        Examples
        --------
        >>> g = Graph.from_csr([0, 1, 2], [1, 0], [2.0, 2.0], 2, edge_labels={"len": [1.5, 1.5]})
        >>> g.edge_labels["len"]
        array([1.5, 1.5])
        """
        self = cls.__new__(cls)
        who = describe_graph(None, title)
        indptr = np.asarray(indptr, dtype=np.int64).ravel()
        indices = np.asarray(indices, dtype=np.int64).ravel()
        data = np.asarray(data, dtype=np.float64).ravel()
        n_nodes = int(n_nodes)
        # scipy does not check CSR arrays on construction; bad ones corrupt memory later
        if n_nodes < 0 or indptr.shape != (n_nodes + 1,):
            raise GraphError(
                f"{who}: CSR indptr has {indptr.size} entries, expected n_nodes + 1 = {n_nodes + 1}"
            )
        if indptr[0] != 0 or np.any(np.diff(indptr) < 0) or indptr[-1] != len(indices):
            raise GraphError(f"{who}: CSR indptr must rise from 0 to len(indices) = {len(indices)}")
        if len(data) != len(indices):
            raise GraphError(f"{who}: CSR data has {len(data)} entries, indices {len(indices)}")
        if len(indices) and (indices.min() < 0 or indices.max() >= n_nodes):
            raise GraphError(f"{who}: CSR column index out of range 0..{n_nodes - 1}")
        adj = sp.csr_array((data, indices, indptr), shape=(n_nodes, n_nodes))
        labels = {
            k: _as_label_array(v, k, "edge", len(data), who) for k, v in (edge_labels or {}).items()
        }
        if not adj.has_sorted_indices:
            # sort, carrying labels along
            order = np.empty(len(data), dtype=np.int64)
            for r in range(n_nodes):  # rare path (input not sorted)
                s, e = indptr[r], indptr[r + 1]
                order[s:e] = s + np.argsort(indices[s:e], kind="stable")
            adj = sp.csr_array((data[order], indices[order], indptr), shape=(n_nodes, n_nodes))
            labels = {k: v[order] for k, v in labels.items()}
            indices = indices[order]
        dup = np.flatnonzero(indices[1:] == indices[:-1]) + 1
        dup = dup[~np.isin(dup, indptr)]  # equal neighbours in different rows are fine
        if dup.size:
            k = int(dup[0])
            i = int(np.searchsorted(indptr, k, side="right") - 1)
            raise GraphError(f"{who}: CSR arrays hold entry ({i}, {int(indices[k])}) twice")
        self._init_from_csr(adj, node_labels or {}, labels, coords, title)
        return self

    @classmethod
    def from_adjacency(
        cls,
        adjacency: Any,
        node_labels: Mapping[str, Any] | None = None,
        edge_labels: Mapping[str, Any] | None = None,
        coords: Any = None,
        title: str | None = None,
    ) -> Graph:
        """Build a graph from a (dense or sparse) weighted adjacency matrix.

        Edge labels are given as matrices with the same sparsity (see :class:`Graph`).

        Examples
        --------
        >>> import numpy as np
        >>> A = np.array([[0, 1, 0], [1, 0, 2], [0, 2, 0]])
        >>> Graph.from_adjacency(A).degree_sum()
        array([1., 3., 2.])
        """
        return cls(adjacency, node_labels, edge_labels, coords, title)

    @classmethod
    def from_networkx(
        cls,
        G: Any,
        weight: str | None = "weight",
        node_labels: Sequence[str] = (),
        edge_labels: Sequence[str] = (),
        title: str | None = None,
        coords: str | None = None,
    ) -> Graph:
        """Build a graph from an undirected networkx graph.

        Parameters
        ----------
        G : networkx.Graph
            Undirected graph. Nodes are numbered in ``G.nodes`` order.
        weight : str or None
            Edge attribute holding the weight; a missing attribute (or None) means 1.0.
        node_labels, edge_labels : sequence of str
            Attribute names to copy as label fields; every node/edge must have them.
        title : str, optional
            Defaults to ``G.graph.get("name")``.
        coords : str, optional
            Node attribute holding coordinates (a sequence of 2 or 3 floats).

        Examples
        --------
        >>> import networkx as nx
        >>> G = nx.path_graph(3)
        >>> nx.set_node_attributes(G, {0: 1, 1: 2, 2: 1}, "label")
        >>> Graph.from_networkx(G, node_labels=["label"]).node_labels["label"]
        array([1, 2, 1])
        """
        if G.is_directed():
            raise GraphError("from_networkx: directed graphs are not supported; call G.to_undirected()")
        if G.is_multigraph():
            raise GraphError("from_networkx: multigraphs are not supported; merge parallel edges first")
        if title is None:
            title = G.graph.get("name") or None
        who = describe_graph(None, title)
        nodes = list(G.nodes)
        n = len(nodes)
        index = {v: i for i, v in enumerate(nodes)}
        nl = {}
        for field in node_labels:
            vals = []
            for v in nodes:
                attrs = G.nodes[v]
                if field not in attrs:
                    raise GraphError(f"{who}: node {v!r} has no label field '{field}'")
                vals.append(attrs[field])
            nl[field] = vals
        rows, cols, w = [], [], []
        el = {f: [] for f in edge_labels}
        for u, v, attrs in G.edges(data=True):
            if u == v:
                raise GraphError(f"{who}: self loop at node {u!r}; self loops are not allowed")
            wt = 1.0 if weight is None else attrs.get(weight, 1.0)
            i, j = index[u], index[v]
            rows += [i, j]
            cols += [j, i]
            w += [wt, wt]
            for f in edge_labels:
                if f not in attrs:
                    raise GraphError(f"{who}: edge ({u!r}, {v!r}) has no label field '{f}'")
                el[f] += [attrs[f], attrs[f]]
        rows = np.asarray(rows, dtype=np.int64)
        cols = np.asarray(cols, dtype=np.int64)
        try:
            w = np.asarray(w, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise GraphError(f"{who}: edge weight '{weight}' is not numeric") from exc
        order = np.lexsort((cols, rows))
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(rows, minlength=n), out=indptr[1:])
        xyz = None
        if coords is not None:
            try:
                xyz = np.asarray([G.nodes[v][coords] for v in nodes], dtype=np.float64)
            except KeyError as exc:
                raise GraphError(f"{who}: node without coordinate attribute '{coords}'") from exc
        return cls.from_csr(
            indptr,
            cols[order],
            w[order],
            n,
            node_labels=nl,
            edge_labels={f: np.asarray(v)[order] for f, v in el.items()},
            coords=xyz,
            title=title,
        )

    @classmethod
    def from_smiles(cls, smiles: str, title: str | None = None) -> Graph:
        """Build a molecular graph from a SMILES string (needs RDKit, ``pip install mgkflow[chem]``).

        Heavy atoms are nodes with labels ``element`` (atomic number), ``charge``
        (formal charge), ``aromatic`` (0/1) and ``hybridization`` (RDKit enum value);
        bonds are unit-weight edges with labels ``bond_order`` (1, 1.5, 2, 3),
        ``conjugated`` (0/1) and ``in_ring`` (0/1).

        Examples
        --------
        >>> g = Graph.from_smiles("c1ccccc1O")  # doctest: +SKIP
        >>> g.n_nodes  # doctest: +SKIP
        7
        """
        from .io_chem import graph_arrays_from_smiles

        return cls.from_csr(**graph_arrays_from_smiles(smiles), title=title or smiles)

    @classmethod
    def from_pdb(
        cls, path: Any, cutoff: float = 6.0, title: str | None = None, chain: str | None = None
    ) -> Graph:
        """Build a protein contact graph from a PDB file (plain or ``.gz``).

        Heavy atoms are nodes (labels ``element`` as atomic number and
        ``residue`` as a residue-type code); two atoms closer than ``cutoff``
        Ångström are joined by an edge of weight ``(1 - (r/cutoff)**2)**2``
        (smooth, reaching zero at the cutoff) and edge label ``distance`` = r.
        Coordinates are kept.

        Examples
        --------
        >>> g = Graph.from_pdb("datasets/proteins/1abc.pdb.gz", cutoff=5.0)  # doctest: +SKIP
        """
        from .io_pdb import graph_arrays_from_pdb

        arrays = graph_arrays_from_pdb(path, cutoff=cutoff, chain=chain)
        return cls.from_csr(**arrays, title=title or str(getattr(path, "name", path)))

    # ------------------------------------------------------------------ internals
    def _init_from_csr(self, adj, node_labels, edge_labels, coords, title) -> None:
        who = describe_graph(None, title)
        n = adj.shape[0]
        if adj.shape[0] != adj.shape[1]:
            raise GraphError(f"{who}: adjacency matrix must be square, got {adj.shape}")
        if n == 0:
            raise GraphError(f"{who}: empty graph (0 nodes)")
        data = adj.data
        bad = ~np.isfinite(data) | (data < 0)
        if np.any(bad):
            k = int(np.flatnonzero(bad)[0])
            i = int(np.searchsorted(adj.indptr, k, side="right") - 1)
            what = "negative" if data[k] < 0 else "NaN or infinite"
            raise GraphError(
                f"{who}: edge weight between nodes {i} and {int(adj.indices[k])} is {what} ({data[k]}); "
                "edge weights must be finite and non-negative"
            )
        diag = adj.diagonal()
        if np.any(diag != 0):
            raise GraphError(
                f"{who}: self loop at node {int(np.flatnonzero(diag)[0])}; self loops are not allowed"
            )
        # drop explicit zeros, carrying labels along
        keep = data != 0
        labels = {}
        for name, vals in edge_labels.items():
            labels[name] = _as_label_array(vals, name, "edge", len(data), who)[keep]
        if not np.all(keep):
            coo = adj.tocoo()
            adj = sp.csr_array(
                (data[keep], (coo.row[keep], coo.col[keep])), shape=adj.shape
            )
        adj.indices = adj.indices.astype(np.int64)
        adj.indptr = adj.indptr.astype(np.int64)
        diff = adj - adj.T
        if diff.count_nonzero() and np.abs(diff.data).max() > 1e-12 * max(1.0, np.abs(data).max()):
            raise GraphError(f"{who}: adjacency matrix is not symmetric (graphs are undirected)")
        if labels:
            # position of the mirror entry (j, i) of each stored entry (i, j)
            pos = sp.csr_array(
                (np.arange(1, adj.nnz + 1, dtype=np.float64), adj.indices, adj.indptr), shape=adj.shape
            )
            mirror = pos.T.tocsr()
            mirror.sort_indices()
            mirror_idx = mirror.data.astype(np.int64) - 1
            for name, vals in labels.items():
                if not np.array_equal(vals, vals[mirror_idx]):
                    raise GraphError(f"{who}: edge label field '{name}' is not symmetric")
        nl = {name: _as_label_array(v, name, "node", n, who) for name, v in node_labels.items()}
        xyz = None
        if coords is not None:
            xyz = np.asarray(coords, dtype=np.float64)
            if xyz.ndim != 2 or xyz.shape[0] != n:
                raise GraphError(f"{who}: coords must have shape (n_nodes, d), got {xyz.shape}")
            if not np.all(np.isfinite(xyz)):
                raise GraphError(f"{who}: coords hold NaN or infinite values")
            xyz = _frozen(xyz)
        for a in (adj.data, adj.indices, adj.indptr):
            a.setflags(write=False)
        self._adj = adj
        self._node_labels = MappingProxyType({k: _frozen(v) for k, v in nl.items()})
        self._edge_labels = MappingProxyType({k: _frozen(v) for k, v in labels.items()})
        self._coords = xyz
        self._title = title

    # ------------------------------------------------------------------ pickling
    def __getstate__(self) -> dict:
        adj = self._adj
        return {
            "indptr": np.asarray(adj.indptr),
            "indices": np.asarray(adj.indices),
            "data": np.asarray(adj.data),
            "n": adj.shape[0],
            "node_labels": dict(self._node_labels),
            "edge_labels": dict(self._edge_labels),
            "coords": self._coords,
            "title": self._title,
        }

    def __setstate__(self, state: dict) -> None:
        # the state was validated when the graph was built: restore without re-checking
        n = int(state["n"])
        adj = sp.csr_array((state["data"], state["indices"], state["indptr"]), shape=(n, n))
        for a in (adj.data, adj.indices, adj.indptr):
            a.setflags(write=False)
        self._adj = adj
        self._node_labels = MappingProxyType({k: _frozen(v) for k, v in state["node_labels"].items()})
        self._edge_labels = MappingProxyType({k: _frozen(v) for k, v in state["edge_labels"].items()})
        self._coords = None if state["coords"] is None else _frozen(state["coords"])
        self._title = state["title"]

    def __deepcopy__(self, memo: dict) -> Graph:
        return self  # immutable

    def __copy__(self) -> Graph:
        return self

    # ------------------------------------------------------------------ accessors
    @property
    def adjacency(self) -> sp.csr_array:
        """Symmetric weighted adjacency (read-only CSR array, sorted indices)."""
        return self._adj

    @property
    def node_labels(self) -> Mapping[str, np.ndarray]:
        """Node label fields: name -> array of length ``n_nodes``."""
        return self._node_labels

    @property
    def edge_labels(self) -> Mapping[str, np.ndarray]:
        """Edge label fields: name -> array aligned with ``adjacency.data``."""
        return self._edge_labels

    @property
    def coords(self) -> np.ndarray | None:
        """Node coordinates (n, d) or None."""
        return self._coords

    @property
    def title(self) -> str | None:
        """The graph's name, or None."""
        return self._title

    @property
    def n_nodes(self) -> int:
        """Number of nodes."""
        return self._adj.shape[0]

    @property
    def n_edges(self) -> int:
        """Number of undirected edges."""
        return self._adj.nnz // 2

    @property
    def nnz(self) -> int:
        """Number of stored adjacency nonzeros (twice the edge count)."""
        return self._adj.nnz

    def degree_sum(self) -> np.ndarray:
        """Row sums of the weighted adjacency matrix."""
        return np.asarray(self._adj.sum(axis=1)).ravel()

    def coo(self) -> tuple[np.ndarray, np.ndarray]:
        """Row and column index of every stored nonzero, in CSR data order."""
        n = self.n_nodes
        rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(self._adj.indptr))
        return rows, self._adj.indices

    def permute(self, perm: Iterable[int]) -> Graph:
        """Return the graph with nodes reordered.

        ``perm[k]`` is the original index of the node placed at position k
        (the convention of ``numpy.argsort`` and scipy's ``reverse_cuthill_mckee``).

        Examples
        --------
        >>> import numpy as np
        >>> g = Graph(np.array([[0, 1, 0], [1, 0, 0], [0, 0, 0]]), node_labels={"x": [5, 6, 7]})
        >>> g.permute([2, 0, 1]).node_labels["x"]
        array([7, 5, 6])
        """
        n = self.n_nodes
        perm = np.asarray(list(perm) if not isinstance(perm, np.ndarray) else perm)
        if perm.shape != (n,) or perm.dtype.kind not in "iu":
            raise GraphError(
                f"{describe_graph(None, self._title)}: permutation must be {n} integers"
            )
        perm = perm.astype(np.int64)
        if not np.array_equal(np.sort(perm), np.arange(n)):
            raise GraphError(
                f"{describe_graph(None, self._title)}: not a permutation of 0..{n - 1}"
            )
        inv = np.empty(n, dtype=np.int64)
        inv[perm] = np.arange(n)
        rows, cols = self.coo()
        new_r, new_c = inv[rows], inv[cols]
        order = np.lexsort((new_c, new_r))
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(new_r, minlength=n), out=indptr[1:])
        g = Graph.__new__(Graph)
        adj = sp.csr_array((self._adj.data[order], new_c[order], indptr), shape=(n, n))
        for a in (adj.data, adj.indices, adj.indptr):
            a.setflags(write=False)
        g._adj = adj
        g._node_labels = MappingProxyType({k: _frozen(v[perm]) for k, v in self._node_labels.items()})
        g._edge_labels = MappingProxyType({k: _frozen(v[order]) for k, v in self._edge_labels.items()})
        g._coords = None if self._coords is None else _frozen(self._coords[perm])
        g._title = self._title
        return g

    def to_networkx(self) -> Any:
        """Return an equivalent :class:`networkx.Graph` (weights and labels as attributes)."""
        import networkx as nx

        G = nx.Graph(name=self._title or "")
        for i in range(self.n_nodes):
            attrs = {k: v[i].item() for k, v in self._node_labels.items()}
            if self._coords is not None:
                attrs["coords"] = tuple(self._coords[i])
            G.add_node(i, **attrs)
        rows, cols = self.coo()
        for k in np.flatnonzero(rows < cols):
            attrs = {f: v[k].item() for f, v in self._edge_labels.items()}
            G.add_edge(int(rows[k]), int(cols[k]), weight=float(self._adj.data[k]), **attrs)
        return G

    def __repr__(self) -> str:
        t = f" '{self._title}'" if self._title else ""
        return (
            f"<Graph{t}: {self.n_nodes} nodes, {self.n_edges} edges, "
            f"node labels {list(self._node_labels)}, edge labels {list(self._edge_labels)}>"
        )
