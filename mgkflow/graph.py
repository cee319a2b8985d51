"""The graph model: an immutable labeled, weighted, undirected graph in CSR form."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
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


_INT64_MAX = np.iinfo(np.int64).max
_INT64_MIN = np.iinfo(np.int64).min
_EXACT_FLOAT_INT = 2**53  # integers above this are not all representable as float64


def _is_number(v: Any) -> bool:
    return isinstance(v, (bool, int, float, np.bool_, np.integer, np.floating))


def _object_labels(values: Any, arr: np.ndarray, name: str, kind: str, who: str) -> np.ndarray:
    """Convert an object array of python scalars exactly (int64 or float64) or raise."""
    flat = arr.ravel()
    if not all(_is_number(v) for v in flat):
        bad = next(v for v in flat if not _is_number(v))
        raise GraphError(
            f"{who}: {kind} label field '{name}' must be numeric (int, float or bool), "
            f"got {type(bad).__name__} {bad!r}; encode categorical labels as integers"
        )
    if all(isinstance(v, (bool, int, np.bool_, np.integer)) for v in flat):
        big = [v for v in flat if not (_INT64_MIN <= int(v) <= _INT64_MAX)]
        if big:
            raise GraphError(
                f"{who}: {kind} label field '{name}' holds integer {int(big[0])} outside the int64 range; "
                "encode such labels as smaller integers"
            )
        return np.asarray([int(v) for v in flat], dtype=np.int64).reshape(arr.shape)
    _check_no_inexact_ints(flat, name, kind, who)
    return np.asarray([float(v) for v in flat], dtype=np.float64).reshape(arr.shape)


def _check_no_inexact_ints(flat: Any, name: str, kind: str, who: str) -> None:
    for v in flat:
        if isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) and abs(int(v)) > _EXACT_FLOAT_INT:
            raise GraphError(
                f"{who}: {kind} label field '{name}' mixes floats with integer {int(v)} > 2**53, "
                "which float64 cannot hold exactly (distinct labels would merge); use all integers or all floats"
            )


def _as_label_array(values: Any, name: str, kind: str, size: int, who: str) -> np.ndarray:
    """Validate one label field: shape (size,) int64/float64, or (size, d) float64 vectors."""
    try:
        arr = np.asarray(values)
    except (ValueError, TypeError) as exc:
        raise GraphError(
            f"{who}: {kind} label field '{name}' is ragged or not array-like "
            f"(vector labels need the same length d for every entry): {exc}"
        ) from exc
    if arr.ndim == 0 or arr.ndim > 2 or arr.shape[0] != size or (arr.ndim == 2 and arr.shape[1] == 0):
        raise GraphError(
            f"{who}: {kind} label field '{name}' has shape {arr.shape}, expected ({size},) "
            f"or ({size}, d) for vector labels"
        )
    if arr.dtype == bool:
        arr = arr.astype(np.int64)
    if arr.dtype == object:
        arr = _object_labels(values, arr, name, kind, who)
    if arr.dtype.kind == "u" and arr.size and arr.max() > _INT64_MAX:
        raise GraphError(
            f"{who}: {kind} label field '{name}' holds integer {int(arr.max())} >= 2**63, "
            "outside the int64 range; encode such labels as smaller integers"
        )
    if arr.dtype.kind in "fu" and arr.ndim == 1 and not isinstance(values, np.ndarray):
        # a python list of ints beyond int64, or mixing ints and floats: numpy would round silently
        arr = _object_labels(values, np.asarray(list(values), dtype=object), name, kind, who)
    if arr.dtype.kind not in "iuf":
        raise GraphError(
            f"{who}: {kind} label field '{name}' must be numeric (int, float or bool), "
            f"got dtype {arr.dtype}; encode categorical labels as integers"
        )
    if arr.ndim == 2:
        arr = arr.astype(np.float64)  # vector labels (coordinates, descriptors) are real vectors
    elif arr.dtype.kind in "iu":
        return arr.astype(np.int64)
    if not np.all(np.isfinite(arr)):
        raise GraphError(f"{who}: {kind} label field '{name}' holds NaN or infinite values")
    return arr.astype(np.float64)


def _as_weights(values: Any, what: str, who: str) -> np.ndarray:
    """Edge weights as float64, refusing strings, bytes, complex and other non-numbers."""
    try:
        arr = np.asarray(values)
    except (ValueError, TypeError) as exc:
        raise GraphError(f"{who}: {what} is not a numeric array: {exc}") from exc
    if arr.dtype == object:
        bad = [v for v in arr.ravel() if not (v is None or _is_number(v))]
        if bad:
            raise GraphError(
                f"{who}: {what} holds {type(bad[0]).__name__} {bad[0]!r}; expected numbers"
            )
        arr = np.asarray([np.nan if v is None else float(v) for v in arr.ravel()], dtype=np.float64).reshape(
            arr.shape
        )
    if arr.dtype.kind not in "biuf":
        raise GraphError(f"{who}: {what} has dtype {arr.dtype}; expected real numbers (not text or complex)")
    return arr.astype(np.float64)


class Graph:
    """An immutable undirected graph with weighted edges and labeled nodes and edges.

    The adjacency matrix is stored as a symmetric :class:`scipy.sparse.csr_array`
    with sorted column indices and no explicit zeros. Edge-label arrays are
    aligned with its ``data`` array (one entry per stored nonzero, so every
    undirected edge appears twice with the same label).

    Parameters
    ----------
    adjacency : sparse matrix or array_like, shape (n, n)
        Symmetric (each pair within 1e-12 relative), non-negative, finite real
        weights (not text, bytes or complex); zero diagonal.
    node_labels : mapping of str to array_like, optional
        Node label fields, each of length n: int, float or bool scalars (stored as
        int64 or float64), or real vectors of one length d (shape (n, d), stored as
        float64: coordinates, descriptors). Integers must fit int64; python ints
        above 2**53 may not be mixed with floats (they would merge). Strings are
        refused: encode categorical labels as integers (:mod:`mgkflow.io` does this
        for files).
    edge_labels : mapping of str to array_like, optional
        Edge label fields as *matrices* with the sparsity of ``adjacency``
        (sparse or dense, symmetric; dense (n, n, d) for vector labels). Use
        :meth:`from_csr` to pass arrays aligned with CSR data directly (shape
        (nnz,) or (nnz, d)).
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
        if sp.issparse(adjacency):
            if adjacency.dtype.kind not in "biuf":
                raise GraphError(
                    f"{who}: adjacency has dtype {adjacency.dtype}; weights must be real numbers"
                )
            coo = sp.coo_array(adjacency, dtype=np.float64)
        else:
            dense = _as_weights(adjacency, "adjacency matrix", who)
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
                if mat.shape != coo.shape:
                    raise GraphError(
                        f"{who}: edge label field '{name}' has shape {mat.shape}, expected {coo.shape}"
                    )
                lab = sp.csr_array(mat)
                vals = np.asarray(lab[rows, cols]).ravel() if len(rows) else np.zeros(0, dtype=lab.dtype)
            else:
                try:
                    dense_lab = np.asarray(mat)
                except (ValueError, TypeError) as exc:
                    raise GraphError(f"{who}: edge label field '{name}' is ragged or not array-like: {exc}") from exc
                if dense_lab.shape[:2] != coo.shape or dense_lab.ndim not in (2, 3):
                    raise GraphError(
                        f"{who}: edge label field '{name}' has shape {dense_lab.shape}, "
                        f"expected {coo.shape} (or {coo.shape + ('d',)} for vector labels)"
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
        data = _as_weights(data, "CSR data (edge weights)", who).ravel()
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
        if not all(hasattr(G, a) for a in ("is_directed", "is_multigraph", "nodes", "edges")):
            raise GraphError(f"from_networkx: expected a networkx.Graph, got {type(G).__name__}")
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
            if not (wt is None or _is_number(wt)):
                raise GraphError(
                    f"{who}: edge weight '{weight}' is not numeric: edge ({u!r}, {v!r}) has "
                    f"{type(wt).__name__} {wt!r}"
                )
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
    def from_rdkit(
        cls, mol: Any, title: str | None = None, conformer: bool | None = None, extended: bool = True
    ) -> Graph:
        """Build a molecular graph from an RDKit molecule (needs RDKit, ``pip install mgkflow[chem]``).

        Heavy atoms are nodes, bonds between them unit-weight edges. Node label
        fields: ``element`` (atomic number), ``charge`` (formal charge),
        ``aromatic`` (0/1), ``hybridization`` (RDKit enum value) and, with
        ``extended`` (default), ``hydrogens`` (attached hydrogen count). Edge
        label fields: ``bond_order`` (1, 1.5, 2, 3), ``conjugated`` (0/1),
        ``in_ring`` (0/1) and, with ``extended``, ``aromatic`` (0/1). See
        :mod:`mgkflow.io.rdkit` for the exact conventions.

        Parameters
        ----------
        mol : rdkit.Chem.Mol
            The molecule.
        title : str, optional
            Defaults to the molecule's ``_Name`` property (the SDF title line) if set.
        conformer : bool or None
            Use the conformer: ``coords`` = heavy-atom positions and edge field
            ``distance`` = bond length (Å). None: only for a 3-D conformer; True:
            any conformer (error if none); False: never.
        extended : bool
            Add ``hydrogens`` and edge ``aromatic`` (False: exactly the drugs set's fields).

        Examples
        --------
        >>> from rdkit import Chem  # doctest: +SKIP
        >>> g = Graph.from_rdkit(Chem.MolFromSmiles("c1ccccc1O"), title="phenol")  # doctest: +SKIP
        >>> g.node_labels["hydrogens"].tolist()  # doctest: +SKIP
        [1, 1, 1, 1, 1, 0, 1]
        """
        from .io.rdkit import graph_arrays_from_mol

        arrays = graph_arrays_from_mol(mol, extended=extended, conformer=conformer)
        if title is None and mol.HasProp("_Name"):
            title = mol.GetProp("_Name").strip() or None
        return cls.from_csr(**arrays, title=title)

    @classmethod
    def from_smiles(cls, smiles: str, title: str | None = None, extended: bool = False) -> Graph:
        """Build a molecular graph from a SMILES string (needs RDKit, ``pip install mgkflow[chem]``).

        The graph of :meth:`from_rdkit` for ``Chem.MolFromSmiles(smiles)``, by
        default with exactly the drugs set's fields: heavy atoms are nodes with
        labels ``element`` (atomic number), ``charge`` (formal charge),
        ``aromatic`` (0/1) and ``hybridization`` (RDKit enum value); bonds are
        unit-weight edges with labels ``bond_order`` (1, 1.5, 2, 3),
        ``conjugated`` (0/1) and ``in_ring`` (0/1). ``extended=True`` adds
        ``hydrogens`` (node) and ``aromatic`` (edge).

        Examples
        --------
        >>> g = Graph.from_smiles("c1ccccc1O")  # doctest: +SKIP
        >>> g.n_nodes  # doctest: +SKIP
        7
        """
        from .io.rdkit import graph_arrays_from_smiles

        return cls.from_csr(**graph_arrays_from_smiles(smiles, extended=extended), title=title or smiles)

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
        from .io.pdb_parser import graph_arrays_from_pdb

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
        # symmetry, relative to each entry pair: |a_ij - a_ji| <= 1e-12 max(a_ij, a_ji)
        excess = (abs(adj - adj.T) - 1e-12 * adj.maximum(adj.T)).tocoo()
        bad_sym = excess.data > 0
        if np.any(bad_sym):
            k = int(np.flatnonzero(bad_sym)[0])
            i, j = int(excess.row[k]), int(excess.col[k])
            raise GraphError(
                f"{who}: adjacency matrix is not symmetric (graphs are undirected): "
                f"entry ({i}, {j}) is {float(adj[i, j])!r} but ({j}, {i}) is {float(adj[j, i])!r}"
            )
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
            xyz = _as_weights(coords, "coords", who)  # real numbers only (no text, complex, ragged)
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

    # ------------------------------------------------------------------ many graphs at once
    @staticmethod
    def pack_many(graphs: Sequence[Graph]) -> dict | None:
        """The states of ``graphs`` as a few concatenated arrays (one per array field, with each graph's
        length), for sending thousands of graphs at once: pickling them one by one makes ~10 small
        arrays per graph (and as many out-of-band buffers for Dask). None when the graphs do not
        share their label fields, dtypes and coordinates (pickle them one by one then).
        :meth:`unpack_many` gives the graphs back.

        Examples
        --------
        >>> import numpy as np
        >>> gs = [Graph(np.array([[0, 1, 0], [1, 0, 1], [0, 1, 0]]), node_labels={"el": [6, 8, 6]}),
        ...       Graph(np.array([[0, 1], [1, 0]]), node_labels={"el": [7, 7]})]
        >>> back = Graph.unpack_many(Graph.pack_many(gs))
        >>> [g.n_nodes for g in back], back[1].node_labels["el"].tolist()
        ([3, 2], [7, 7])
        """
        if not graphs:
            return None
        states = [g.__getstate__() for g in graphs]
        first = states[0]
        nkeys, ekeys, xyz = tuple(first["node_labels"]), tuple(first["edge_labels"]), first["coords"] is not None
        getters: dict[str, Callable[[dict], np.ndarray]] = {
            "indptr": lambda st: st["indptr"], "indices": lambda st: st["indices"], "data": lambda st: st["data"],
        }  # fmt: skip
        for k in nkeys:
            getters["n:" + k] = lambda st, k=k: st["node_labels"][k]
        for k in ekeys:
            getters["e:" + k] = lambda st, k=k: st["edge_labels"][k]
        if xyz:
            getters["coords"] = lambda st: st["coords"]
        for st in states:
            if (tuple(st["node_labels"]) != nkeys or tuple(st["edge_labels"]) != ekeys
                    or (st["coords"] is not None) != xyz):  # fmt: skip
                return None
        arrays, lengths = {}, {}
        for name, get in getters.items():
            parts = [np.asarray(get(st)) for st in states]
            a0 = parts[0]
            if any(p.dtype != a0.dtype or p.shape[1:] != a0.shape[1:] for p in parts):
                return None
            arrays[name] = np.concatenate(parts) if len(parts) > 1 else a0.copy()
            lengths[name] = np.array([len(p) for p in parts], dtype=np.int64)
        return {"arrays": arrays, "lengths": lengths, "n": np.array([st["n"] for st in states], dtype=np.int64),
                "titles": [st["title"] for st in states], "node_keys": nkeys, "edge_keys": ekeys}  # fmt: skip

    @staticmethod
    def unpack_many(packed: dict) -> tuple[Graph, ...]:
        """The graphs of :meth:`pack_many` (their arrays are read-only views of the packed ones)."""
        arrays, lengths = packed["arrays"], packed["lengths"]
        splits = {name: np.split(a, np.cumsum(lengths[name])[:-1]) for name, a in arrays.items()}
        out = []
        for t, n in enumerate(packed["n"].tolist()):
            g = Graph.__new__(Graph)
            g.__setstate__({
                "indptr": splits["indptr"][t], "indices": splits["indices"][t], "data": splits["data"][t], "n": n,
                "node_labels": {k: splits["n:" + k][t] for k in packed["node_keys"]},
                "edge_labels": {k: splits["e:" + k][t] for k in packed["edge_keys"]},
                "coords": splits["coords"][t] if "coords" in splits else None,
                "title": packed["titles"][t],
            })  # fmt: skip
            out.append(g)
        return tuple(out)

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
        """Row sums of the weighted adjacency matrix (summed in CSR order, as scipy's ``sum(axis=1)``)."""
        adj = self._adj
        out = np.zeros(adj.shape[0], dtype=np.result_type(adj.data.dtype, np.float64))
        rows = np.flatnonzero(np.diff(adj.indptr))
        if rows.size:
            out[rows] = np.add.reduceat(adj.data, adj.indptr[rows])
        return out

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
            attrs = {k: v[i].tolist() for k, v in self._node_labels.items()}
            if self._coords is not None:
                attrs["coords"] = tuple(self._coords[i])
            G.add_node(i, **attrs)
        rows, cols = self.coo()
        for k in np.flatnonzero(rows < cols):
            attrs = {f: v[k].tolist() for f, v in self._edge_labels.items()}
            G.add_edge(int(rows[k]), int(cols[k]), weight=float(self._adj.data[k]), **attrs)
        return G

    def __repr__(self) -> str:
        t = f" '{self._title}'" if self._title else ""
        return (
            f"<Graph{t}: {self.n_nodes} nodes, {self.n_edges} edges, "
            f"node labels {list(self._node_labels)}, edge labels {list(self._edge_labels)}>"
        )
