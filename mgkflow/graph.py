"""The graph model: an immutable labeled, weighted, undirected graph in CSR form.

The class holds the graph and documents its constructors; the array work lives beside it:
the checks behind the constructors in :mod:`mgkflow._graph_checks`, the pickle state and the batch
packing of :meth:`Graph.pack_many` in :mod:`mgkflow._graph_pack`, and the converters behind the ``from_*``
constructors and :meth:`Graph.to_networkx` in :mod:`mgkflow.io` (:mod:`~mgkflow.io.networkx`,
:mod:`~mgkflow.io.rdkit`, :mod:`~mgkflow.io.pdb_parser`), which return plain arrays and never
import this module (the file readers of :mod:`mgkflow.io` import it to build graphs).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

from . import _graph_pack
from ._graph_checks import (
    checked_arguments,
    checked_csr,
    checked_features,
    csr_from_matrices,
    permuted_parts,
    validated_parts,
)
from .errors import describe_graph

__all__ = ["Graph"]


def _default_title(title: Any, default: str) -> Any:
    """``title``, or ``default`` for None and empty text (anything else goes on to be checked as a title:
    ``title or default`` would ask an array or a data frame for its truth value)."""
    return default if title is None or (isinstance(title, str) and not title) else title


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
    features : array_like, shape (d,), optional
        A graph-level feature vector (for instance standardized RDKit 2-D descriptors of a
        molecule): d >= 1 finite real numbers, stored as a read-only float64 copy
        (:attr:`features`). The graph kernel does not read it; it travels with the graph
        (pickling, :meth:`pack_many`, :meth:`permute`) for models that combine both.

    Examples
    --------
    >>> import numpy as np
    >>> g = Graph(np.array([[0, 1], [1, 0]]), node_labels={"label": [0, 1]}, title="edge")
    >>> g.n_nodes, g.n_edges
    (2, 1)
    >>> Graph(np.array([[0, 1], [1, 0]]), features=[0.5, -1.0]).features
    array([ 0.5, -1. ])
    """

    __slots__ = ("_adj", "_node_labels", "_edge_labels", "_coords", "_title", "_features")

    def __init__(
        self,
        adjacency: Any,
        node_labels: Mapping[str, Any] | None = None,
        edge_labels: Mapping[str, Any] | None = None,
        coords: Any = None,
        title: str | None = None,
        *,
        features: Any = None,
    ) -> None:
        node_labels, edge_labels, title = checked_arguments(node_labels, edge_labels, title)
        who = describe_graph(None, title)
        adj, labels = csr_from_matrices(adjacency, edge_labels, who)
        self._assign(*validated_parts(adj, node_labels, labels, coords, title), title, checked_features(features, who))

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
        *,
        features: Any = None,
    ) -> Graph:
        """Build a graph from CSR arrays; edge labels aligned with ``data``.

        ``features`` is the optional graph-level feature vector (see :class:`Graph`).

        Examples
        --------
        >>> g = Graph.from_csr([0, 1, 2], [1, 0], [2.0, 2.0], 2, edge_labels={"len": [1.5, 1.5]})
        >>> g.edge_labels["len"]
        array([1.5, 1.5])
        >>> Graph.from_csr([0, 1, 2], [1, 0], [2.0, 2.0], 2, features=[3, 4]).features
        array([3., 4.])
        """
        self = cls.__new__(cls)
        node_labels, edge_labels, title = checked_arguments(node_labels, edge_labels, title)
        who = describe_graph(None, title)
        adj, labels = checked_csr(indptr, indices, data, n_nodes, edge_labels, who)
        self._assign(*validated_parts(adj, node_labels, labels, coords, title), title, checked_features(features, who))
        return self

    @classmethod
    def from_adjacency(
        cls,
        adjacency: Any,
        node_labels: Mapping[str, Any] | None = None,
        edge_labels: Mapping[str, Any] | None = None,
        coords: Any = None,
        title: str | None = None,
        *,
        features: Any = None,
    ) -> Graph:
        """Build a graph from a (dense or sparse) weighted adjacency matrix.

        Edge labels are given as matrices with the same sparsity, ``features`` is the optional
        graph-level feature vector (see :class:`Graph`).

        Examples
        --------
        >>> import numpy as np
        >>> A = np.array([[0, 1, 0], [1, 0, 2], [0, 2, 0]])
        >>> Graph.from_adjacency(A).degree_sum()
        array([1., 3., 2.])
        >>> Graph.from_adjacency(A, features=np.arange(3)).features.dtype
        dtype('float64')
        """
        return cls(adjacency, node_labels, edge_labels, coords, title, features=features)

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
        from .io.networkx import graph_arrays_from_networkx

        return cls.from_csr(**graph_arrays_from_networkx(G, weight, node_labels, edge_labels, title, coords))

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

        return cls.from_csr(**graph_arrays_from_smiles(smiles, extended=extended), title=_default_title(title, smiles))

    @classmethod
    def from_pdb(cls, path: Any, cutoff: float = 6.0, title: str | None = None, chain: str | None = None) -> Graph:
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
        return cls.from_csr(**arrays, title=_default_title(title, str(getattr(path, "name", path))))

    # ------------------------------------------------------------------ internals
    def _assign(self, adj, node_labels, edge_labels, coords, title, features=None) -> None:
        """Set the slots from checked, read-only parts (:func:`~mgkflow._graph_checks.validated_parts`,
        :func:`~mgkflow._graph_checks.checked_features`)."""
        self._adj, self._node_labels, self._edge_labels = adj, node_labels, edge_labels
        self._coords, self._title, self._features = coords, title, features

    # ------------------------------------------------------------------ pickling
    def __getstate__(self) -> dict:
        return _graph_pack.graph_state(
            self._adj, self._node_labels, self._edge_labels, self._coords, self._title, self._features
        )

    def __setstate__(self, state: dict) -> None:
        # the state was validated when the graph was built: restore without re-checking (a state
        # pickled before graphs had features has no "features" key: None)
        self._assign(*_graph_pack.restored_parts(state), state["title"], _graph_pack.restored_features(state))

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
        return _graph_pack.pack_many(graphs)

    @staticmethod
    def unpack_many(packed: dict) -> tuple[Graph, ...]:
        """The graphs of :meth:`pack_many` (their arrays are read-only views of the packed ones)."""
        return _graph_pack.unpack_many(packed, Graph)

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
    def features(self) -> np.ndarray | None:
        """The graph-level feature vector (read-only float64, shape (d,)), or None.

        Examples
        --------
        >>> import numpy as np
        >>> g = Graph(np.array([[0, 1], [1, 0]]), features=[1.5, 0.0, -2.0])
        >>> g.features, g.features.flags.writeable
        (array([ 1.5,  0. , -2. ]), False)
        >>> Graph(np.array([[0, 1], [1, 0]])).features is None
        True
        """
        return self._features

    def with_features(self, features: Any) -> Graph:
        """The same graph (adjacency, labels, coordinates and title shared) with ``features`` as
        its feature vector (checked as in :class:`Graph`; None removes it).

        Examples
        --------
        >>> import numpy as np
        >>> g = Graph(np.array([[0, 1], [1, 0]]), node_labels={"x": [1, 2]})
        >>> h = g.with_features([0.25, 4.0])
        >>> h.features, h.node_labels is g.node_labels, g.features is None
        (array([0.25, 4.  ]), True, True)
        >>> h.with_features(None).features is None
        True
        """
        checked = checked_features(features, describe_graph(None, self._title))
        g = Graph.__new__(Graph)
        g._assign(self._adj, self._node_labels, self._edge_labels, self._coords, self._title, checked)
        return g

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

        The graph-level :attr:`features` do not depend on the node order and are kept.
        """
        parts = permuted_parts(self._adj, self._node_labels, self._edge_labels, self._coords, perm, self._title)
        g = Graph.__new__(Graph)
        g._assign(*parts, self._title, self._features)
        return g

    def to_networkx(self) -> Any:
        """Return an equivalent :class:`networkx.Graph` (weights and labels as attributes)."""
        from .io.networkx import graph_to_networkx

        return graph_to_networkx(self)

    def __repr__(self) -> str:
        t = f" '{self._title}'" if self._title else ""
        f = "" if self._features is None else f", {self._features.size} features"
        return (
            f"<Graph{t}: {self.n_nodes} nodes, {self.n_edges} edges, "
            f"node labels {list(self._node_labels)}, edge labels {list(self._edge_labels)}{f}>"
        )
