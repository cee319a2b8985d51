"""The immutable Graph model: builders, permutation, immutability, networkx round trip."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp

from mgkflow import Graph, GraphError


def _labeled_nx() -> nx.Graph:
    G = nx.Graph(name="toy")
    G.add_nodes_from(
        [
            (0, {"label": 1, "x": 0.5, "pos": (0.0, 0.0)}),
            (1, {"label": 2, "x": 1.5, "pos": (1.0, 0.0)}),
            (2, {"label": 1, "x": 2.5, "pos": (1.0, 1.0)}),
            (3, {"label": 3, "x": 3.5, "pos": (0.0, 1.0)}),
        ]
    )
    G.add_edge(0, 1, weight=2.0, length=1.25)
    G.add_edge(1, 2, length=1.5)  # no weight -> 1.0
    G.add_edge(2, 3, weight=0.5, length=1.75)
    G.add_edge(3, 0, weight=3.0, length=2.0)
    return G


def _dense_edge_label(g: Graph, field: str) -> np.ndarray:
    rows, cols = g.coo()
    out = np.zeros((g.n_nodes, g.n_nodes))
    out[rows, cols] = g.edge_labels[field]
    return out


# ---------------------------------------------------------------------- from_networkx
def test_from_networkx_weights_labels_coords():
    g = Graph.from_networkx(_labeled_nx(), node_labels=["label", "x"], edge_labels=["length"], coords="pos")
    assert g.n_nodes == 4 and g.n_edges == 4 and g.nnz == 8
    assert g.title == "toy"
    A = g.adjacency.toarray()
    expected = np.zeros((4, 4))
    for (u, v), w in {(0, 1): 2.0, (1, 2): 1.0, (2, 3): 0.5, (3, 0): 3.0}.items():
        expected[u, v] = expected[v, u] = w
    np.testing.assert_array_equal(A, expected)
    np.testing.assert_array_equal(g.degree_sum(), expected.sum(axis=1))
    np.testing.assert_array_equal(g.node_labels["label"], [1, 2, 1, 3])
    assert g.node_labels["label"].dtype == np.int64
    np.testing.assert_array_equal(g.node_labels["x"], [0.5, 1.5, 2.5, 3.5])
    assert g.node_labels["x"].dtype == np.float64
    L = _dense_edge_label(g, "length")
    assert L[0, 1] == L[1, 0] == 1.25
    assert L[1, 2] == L[2, 1] == 1.5
    assert L[2, 3] == L[3, 2] == 1.75
    assert L[0, 3] == L[3, 0] == 2.0
    np.testing.assert_array_equal(g.coords, [[0, 0], [1, 0], [1, 1], [0, 1]])
    assert g.adjacency.has_sorted_indices


def test_from_networkx_missing_weight_is_one_and_weight_none():
    G = nx.Graph()
    G.add_edge("a", "b")
    G.add_edge("b", "c", weight=4.0)
    g = Graph.from_networkx(G)
    np.testing.assert_array_equal(g.adjacency.toarray(), [[0, 1, 0], [1, 0, 4], [0, 4, 0]])
    g1 = Graph.from_networkx(G, weight=None)
    np.testing.assert_array_equal(g1.adjacency.toarray(), [[0, 1, 0], [1, 0, 1], [0, 1, 0]])
    g2 = Graph.from_networkx(G, weight="cost")  # attribute absent everywhere -> 1.0
    np.testing.assert_array_equal(g2.adjacency.toarray(), g1.adjacency.toarray())


def test_from_networkx_node_order_follows_G_nodes():
    G = nx.Graph()
    G.add_node("z", label=7)
    G.add_node("a", label=8)
    G.add_edge("z", "a", weight=2.0)
    G.add_node("m", label=9)  # isolated
    g = Graph.from_networkx(G, node_labels=["label"])
    np.testing.assert_array_equal(g.node_labels["label"], [7, 8, 9])
    np.testing.assert_array_equal(g.adjacency.toarray(), [[0, 2, 0], [2, 0, 0], [0, 0, 0]])


def test_from_networkx_bool_labels_become_int():
    G = nx.path_graph(2)
    nx.set_node_attributes(G, {0: True, 1: False}, "flag")
    g = Graph.from_networkx(G, node_labels=["flag"])
    assert g.node_labels["flag"].dtype == np.int64
    np.testing.assert_array_equal(g.node_labels["flag"], [1, 0])


# ---------------------------------------------------------------------- from_adjacency / from_csr
def test_from_adjacency_dense_and_sparse_agree():
    A = np.array([[0, 1.5, 0], [1.5, 0, 2], [0, 2, 0]])
    E = np.array([[0, 3, 0], [3, 0, 4], [0, 4, 0]])
    g1 = Graph.from_adjacency(A, node_labels={"l": [0, 1, 2]}, edge_labels={"e": E}, title="t")
    g2 = Graph.from_adjacency(
        sp.csr_array(A), node_labels={"l": [0, 1, 2]}, edge_labels={"e": sp.coo_array(E)}
    )
    for g in (g1, g2):
        np.testing.assert_array_equal(g.adjacency.toarray(), A)
        np.testing.assert_array_equal(g.adjacency.indptr, [0, 1, 3, 4])
        np.testing.assert_array_equal(g.adjacency.indices, [1, 0, 2, 1])
        np.testing.assert_array_equal(g.edge_labels["e"], [3, 3, 4, 4])
        np.testing.assert_array_equal(g.degree_sum(), [1.5, 3.5, 2.0])
    assert g1.title == "t" and g2.title is None


def test_from_adjacency_drops_explicit_zeros_with_their_labels():
    A = sp.csr_array(
        (np.array([1.0, 0.0, 1.0, 0.0]), np.array([1, 2, 0, 0]), np.array([0, 2, 3, 4])), shape=(3, 3)
    )
    # entries: (0,1)=1, (0,2)=0, (1,0)=1, (2,0)=0
    g = Graph.from_csr(A.indptr, A.indices, A.data, 3, edge_labels={"e": [5.0, 9.0, 5.0, 9.0]})
    assert g.nnz == 2
    np.testing.assert_array_equal(g.edge_labels["e"], [5.0, 5.0])
    np.testing.assert_array_equal(g.adjacency.toarray(), [[0, 1, 0], [1, 0, 0], [0, 0, 0]])


def test_from_csr_sorts_indices_and_carries_labels():
    # row 1 lists its columns as 2, 0 (unsorted)
    indptr = [0, 1, 3, 4]
    indices = [1, 2, 0, 1]
    data = [1.0, 2.0, 1.0, 2.0]
    lab = [10.0, 20.0, 10.0, 20.0]
    g = Graph.from_csr(indptr, indices, data, 3, edge_labels={"e": lab})
    np.testing.assert_array_equal(g.adjacency.indices, [1, 0, 2, 1])
    np.testing.assert_array_equal(g.adjacency.data, [1.0, 1.0, 2.0, 2.0])
    np.testing.assert_array_equal(g.edge_labels["e"], [10.0, 10.0, 20.0, 20.0])


def test_single_node_graph_is_valid():
    g = Graph(np.zeros((1, 1)))
    assert g.n_nodes == 1 and g.n_edges == 0
    np.testing.assert_array_equal(g.degree_sum(), [0.0])


# ---------------------------------------------------------------------- permute
def test_permute_convention_and_carried_data():
    g = Graph.from_networkx(_labeled_nx(), node_labels=["label", "x"], edge_labels=["length"], coords="pos")
    rng = np.random.default_rng(3)
    for _ in range(5):
        perm = rng.permutation(4)
        h = g.permute(perm)
        # position k holds original node perm[k]
        A, B = g.adjacency.toarray(), h.adjacency.toarray()
        np.testing.assert_array_equal(B, A[np.ix_(perm, perm)])
        np.testing.assert_array_equal(
            _dense_edge_label(h, "length"), _dense_edge_label(g, "length")[np.ix_(perm, perm)]
        )
        for f in ("label", "x"):
            np.testing.assert_array_equal(h.node_labels[f], g.node_labels[f][perm])
        np.testing.assert_array_equal(h.coords, g.coords[perm])
        assert h.title == g.title
        assert h.adjacency.has_sorted_indices
        # the edge labels stay aligned with the (sorted) CSR data
        rows, cols = h.coo()
        np.testing.assert_array_equal(
            h.edge_labels["length"], _dense_edge_label(g, "length")[perm[rows], perm[cols]]
        )
        # inverse permutation restores the graph
        back = h.permute(np.argsort(perm))
        np.testing.assert_array_equal(back.adjacency.toarray(), A)
        np.testing.assert_array_equal(back.edge_labels["length"], g.edge_labels["length"])


def test_permute_doc_example():
    g = Graph(np.array([[0, 1, 0], [1, 0, 0], [0, 0, 0]]), node_labels={"x": [5, 6, 7]})
    h = g.permute([2, 0, 1])
    np.testing.assert_array_equal(h.node_labels["x"], [7, 5, 6])
    # original edge (0, 1) now joins positions 1 and 2
    np.testing.assert_array_equal(h.adjacency.toarray(), [[0, 0, 0], [0, 0, 1], [0, 1, 0]])


@pytest.mark.parametrize("perm", [[0, 1], [0, 0, 1], [0, 1, 3], [0.0, 1.0, 2.0]])
def test_permute_rejects_non_permutations(perm):
    g = Graph(np.array([[0, 1, 0], [1, 0, 0], [0, 0, 0]]), title="p")
    with pytest.raises(GraphError, match="'p'.*permutation"):
        g.permute(perm)


# ---------------------------------------------------------------------- immutability
def test_arrays_are_read_only():
    g = Graph.from_networkx(_labeled_nx(), node_labels=["label"], edge_labels=["length"], coords="pos")
    for h in (g, g.permute([3, 2, 1, 0])):
        arrays = [
            h.adjacency.data,
            h.adjacency.indices,
            h.adjacency.indptr,
            h.node_labels["label"],
            h.edge_labels["length"],
            h.coords,
        ]
        for a in arrays:
            with pytest.raises(ValueError, match="read-only"):
                a[0] = a[0]
        with pytest.raises(TypeError):
            h.node_labels["new"] = np.zeros(4)  # type: ignore[index]
        with pytest.raises(TypeError):
            h.edge_labels["new"] = np.zeros(8)  # type: ignore[index]
        with pytest.raises(AttributeError):
            h.title = "other"  # type: ignore[misc]


def test_input_arrays_are_not_aliased():
    labels = np.array([1, 2])
    A = np.array([[0.0, 1.0], [1.0, 0.0]])
    g = Graph(A, node_labels={"l": labels})
    labels[0] = 99
    A[0, 1] = A[1, 0] = 5.0
    np.testing.assert_array_equal(g.node_labels["l"], [1, 2])
    np.testing.assert_array_equal(g.adjacency.data, [1.0, 1.0])


# ---------------------------------------------------------------------- to_networkx
def test_to_networkx_round_trip():
    g = Graph.from_networkx(_labeled_nx(), node_labels=["label", "x"], edge_labels=["length"], coords="pos")
    G = g.to_networkx()
    assert G.graph["name"] == "toy"
    assert G.number_of_nodes() == 4 and G.number_of_edges() == 4
    assert G.nodes[3]["label"] == 3 and G.nodes[3]["coords"] == (0.0, 1.0)
    assert G.edges[1, 2]["weight"] == 1.0 and G.edges[1, 2]["length"] == 1.5
    h = Graph.from_networkx(G, node_labels=["label", "x"], edge_labels=["length"], coords="coords")
    assert h.title == g.title
    np.testing.assert_array_equal(h.adjacency.toarray(), g.adjacency.toarray())
    np.testing.assert_array_equal(h.adjacency.indices, g.adjacency.indices)
    np.testing.assert_array_equal(h.edge_labels["length"], g.edge_labels["length"])
    for f in ("label", "x"):
        np.testing.assert_array_equal(h.node_labels[f], g.node_labels[f])
        assert h.node_labels[f].dtype == g.node_labels[f].dtype
    np.testing.assert_array_equal(h.coords, g.coords)


def test_repr_names_graph():
    g = Graph(np.array([[0, 1], [1, 0]]), node_labels={"label": [0, 1]}, title="edge")
    assert repr(g) == "<Graph 'edge': 2 nodes, 1 edges, node labels ['label'], edge labels []>"


def test_graph_pickles_and_deepcopies():
    import copy
    import pickle

    g = Graph(
        np.array([[0, 2.0, 0], [2.0, 0, 1.0], [0, 1.0, 0]]),
        node_labels={"label": [0, 1, 2]},
        edge_labels={"w": np.array([[0, 1, 0], [1, 0, 3], [0, 3, 0]])},
        coords=np.zeros((3, 2)),
        title="t",
    )
    h = pickle.loads(pickle.dumps(g))
    assert h.title == "t" and h.n_nodes == 3
    assert np.array_equal(h.adjacency.toarray(), g.adjacency.toarray())
    assert np.array_equal(h.edge_labels["w"], g.edge_labels["w"])
    assert np.array_equal(h.node_labels["label"], g.node_labels["label"])
    assert not h.adjacency.data.flags.writeable
    assert copy.deepcopy(g) is g


# ---------------------------------------------------------------------- vector labels
def test_vector_node_and_edge_labels():
    A = np.array([[0, 1, 0], [1, 0, 1], [0, 1, 0]], dtype=float)
    xyz = [[0.0, 0.0], [1.0, 0.5], [2, 1]]  # ints mixed in a vector field are stored as floats
    E = np.zeros((3, 3, 2))
    E[0, 1] = E[1, 0] = (1.0, 2.0)
    E[1, 2] = E[2, 1] = (3.0, 4.0)
    g = Graph(A, node_labels={"pos": xyz, "kind": [1, 2, 1]}, edge_labels={"v": E}, title="vec")
    assert g.node_labels["pos"].shape == (3, 2) and g.node_labels["pos"].dtype == np.float64
    assert g.node_labels["kind"].dtype == np.int64  # 1-D behaviour unchanged
    np.testing.assert_array_equal(g.edge_labels["v"], [[1, 2], [1, 2], [3, 4], [3, 4]])
    h = g.permute([2, 1, 0])
    np.testing.assert_array_equal(h.node_labels["pos"], np.asarray(xyz, dtype=float)[[2, 1, 0]])
    np.testing.assert_array_equal(h.edge_labels["v"], [[3, 4], [3, 4], [1, 2], [1, 2]])
    csr = Graph.from_csr([0, 1, 2], [1, 0], [1.0, 1.0], 2, edge_labels={"v": [[0.5, 1.0], [0.5, 1.0]]})
    assert csr.edge_labels["v"].shape == (2, 2)
    assert g.to_networkx().nodes[1]["pos"] == [1.0, 0.5]


@pytest.mark.parametrize(
    "values, match",
    [
        ([[1.0, 2.0], [3.0]], "'pos' is ragged"),
        ([["a", "b"], ["c", "d"]], "'pos' must be numeric"),
        (np.zeros((2, 0)), r"'pos' has shape \(2, 0\)"),
        (np.zeros((2, 2, 2)), r"'pos' has shape \(2, 2, 2\)"),
        ([[1.0, np.nan], [0.0, 0.0]], "'pos' holds NaN"),
    ],
)
def test_bad_vector_labels_name_the_field(values, match):
    with pytest.raises(GraphError, match=match):
        Graph(np.array([[0, 1], [1, 0]]), node_labels={"pos": values})


def test_edge_vector_label_must_be_symmetric():
    E = np.zeros((2, 2, 2))
    E[0, 1] = (1.0, 2.0)
    E[1, 0] = (1.0, 3.0)
    with pytest.raises(GraphError, match="'v' is not symmetric"):
        Graph(np.array([[0, 1], [1, 0]]), edge_labels={"v": E})


# ---------------------------------------------------------------------- fuzz findings
EDGE2 = np.array([[0.0, 1.0], [1.0, 0.0]])


@pytest.mark.parametrize(
    "labels",
    [np.array([2**63, 1], dtype=np.uint64), [2**63, 1], [2**70, 0], [-(2**63) - 1, 0]],
)
def test_labels_outside_int64_are_rejected_not_wrapped(labels):
    with pytest.raises(GraphError, match="'x' holds integer .* outside the int64 range"):
        Graph(EDGE2, node_labels={"x": labels})


def test_uint64_labels_within_int64_are_kept_exactly():
    g = Graph(EDGE2, node_labels={"x": np.array([2**63 - 1, 7], dtype=np.uint64)})
    assert g.node_labels["x"].tolist() == [2**63 - 1, 7]
    g = Graph(EDGE2, node_labels={"x": [2**62 + 1, 2**62]})  # python ints stay exact
    assert g.node_labels["x"].tolist() == [2**62 + 1, 2**62]


@pytest.mark.parametrize("labels", [[2**53 + 1, 0.5], [2**53 + 1, float(2**53)]])
def test_big_ints_mixed_with_floats_do_not_merge(labels):
    with pytest.raises(GraphError, match=r"mixes floats with integer 9007199254740993 > 2\*\*53"):
        Graph(EDGE2, node_labels={"x": labels})
    G = nx.path_graph(2)
    nx.set_node_attributes(G, dict(enumerate(labels)), "x")
    with pytest.raises(GraphError, match="mixes floats"):
        Graph.from_networkx(G, node_labels=["x"])


def test_small_ints_mixed_with_floats_are_fine():
    np.testing.assert_array_equal(Graph(EDGE2, node_labels={"x": [1, 0.5]}).node_labels["x"], [1.0, 0.5])


def test_asymmetry_is_checked_per_entry_not_against_the_largest_weight():
    A = np.zeros((4, 4))
    A[0, 1] = A[1, 0] = 1e13
    A[2, 3] = 1.0  # (3, 2) is missing
    with pytest.raises(GraphError, match=r"not symmetric.*entry \(2, 3\) is 1.0 but \(3, 2\) is 0.0"):
        Graph(A)
    A = np.zeros((2, 2))
    A[0, 1] = 1e13
    with pytest.raises(GraphError, match="not symmetric"):
        Graph(sp.csr_array(A))
    B = np.array([[0.0, 1e13], [1e13 * (1 + 1e-15), 0.0]])  # rounding-level difference is accepted
    assert Graph(B).n_edges == 1


@pytest.mark.parametrize(
    "adj",
    [np.array([["0", "1.5"], ["1.5", "0"]]), np.array([[b"0", b"1"], [b"1", b"0"]]),
     np.array([[0, 1j], [1j, 0]]), np.array([[0, "1"], [1, 0]], dtype=object)],
)
def test_text_or_complex_weights_are_rejected(adj):
    with pytest.raises(GraphError, match="adjacency matrix (has dtype|holds)"):
        Graph(adj)


def test_text_weights_rejected_in_csr_and_networkx():
    with pytest.raises(GraphError, match="CSR data"):
        Graph.from_csr([0, 1, 2], [1, 0], ["1.5", "1.5"], 2)
    for w in ("1.5", b"1"):
        G = nx.path_graph(2)
        G.edges[0, 1]["weight"] = w
        with pytest.raises(GraphError, match=r"edge weight 'weight' is not numeric: edge \(0, 1\)"):
            Graph.from_networkx(G)


@pytest.mark.parametrize("obj", [{}, [], None, "graph"])
def test_from_networkx_rejects_non_graphs(obj):
    with pytest.raises(GraphError, match="expected a networkx.Graph"):
        Graph.from_networkx(obj)


def test_edgeless_graph_with_sparse_edge_labels():
    g = Graph(np.zeros((3, 3)), edge_labels={"e": sp.csr_array((3, 3))})
    assert g.n_edges == 0 and g.edge_labels["e"].shape == (0,)
    with pytest.raises(GraphError, match=r"'e' has shape \(2, 2\)"):
        Graph(np.zeros((3, 3)), edge_labels={"e": sp.csr_array((2, 2))})


def test_vector_labels_pickle_and_networkx_lists():
    import pickle

    G = nx.path_graph(3)
    nx.set_node_attributes(G, {0: [0.0, 1.0], 1: [1.0, 2.0], 2: [2.0, 3.0]}, "pos")
    g = Graph.from_networkx(G, node_labels=["pos"])
    assert g.node_labels["pos"].shape == (3, 2)
    h = pickle.loads(pickle.dumps(g))
    np.testing.assert_array_equal(h.node_labels["pos"], g.node_labels["pos"])


def test_pack_many_round_trip() -> None:
    """Graph.pack_many / unpack_many: the same graphs (adjacency, labels of every dtype, coordinates,
    titles); graphs that do not share their label fields are not packed."""
    import pickle

    from mgkflow.datasets import drugs, molecules

    for graphs in (molecules(40, seed=3), drugs(25)):
        packed = Graph.pack_many(graphs)
        assert packed is not None and len(packed["arrays"]["indptr"]) == sum(g.n_nodes + 1 for g in graphs)
        back = Graph.unpack_many(pickle.loads(pickle.dumps(packed)))
        assert len(back) == len(graphs)
        for a, b in zip(graphs, back, strict=True):
            assert a.title == b.title and (a.adjacency != b.adjacency).nnz == 0
            assert a.adjacency.dtype == b.adjacency.dtype
            for mine, theirs in ((a.node_labels, b.node_labels), (a.edge_labels, b.edge_labels)):
                assert list(mine) == list(theirs)
                for k in mine:
                    assert mine[k].dtype == theirs[k].dtype and np.array_equal(mine[k], theirs[k])
                    assert not theirs[k].flags.writeable
            assert (a.coords is None and b.coords is None) or np.array_equal(a.coords, b.coords)
    odd = [Graph(np.array([[0, 1], [1, 0]]), node_labels={"x": [1, 2]}), Graph(np.array([[0, 1], [1, 0]]))]
    assert Graph.pack_many(odd) is None and Graph.pack_many([]) is None


def test_converters_behind_graph_never_import_it() -> None:
    """graph.py calls into the converters (io.networkx, io.rdkit, io.pdb_parser) and its helper modules;
    none of them may import mgkflow.graph, even inside a function (the arrows run readers -> graph -> converters)."""
    import ast
    from pathlib import Path

    import mgkflow

    root = Path(mgkflow.__file__).parent

    def imports(mod: str) -> set[str]:
        path = root.joinpath(*mod.split(".")[1:]).with_suffix(".py")
        package = mod.rsplit(".", 1)[0].split(".")
        out = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                out |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = package[: len(package) - node.level + 1] if node.level else []
                name = ".".join(base + ([node.module] if node.module else []))
                out |= {name} | {f"{name}.{a.name}" for a in node.names}
        ours = {m for m in out if m.startswith("mgkflow.")}
        return {m for m in ours if root.joinpath(*m.split(".")[1:]).with_suffix(".py").is_file()}

    seen, todo = set(), list(imports("mgkflow.graph"))
    while todo:
        mod = todo.pop()
        if mod not in seen:
            seen.add(mod)
            todo += imports(mod)
    assert {"mgkflow.io.networkx", "mgkflow.io.rdkit", "mgkflow.io.pdb_parser", "mgkflow._graph_checks"} <= seen
    assert "mgkflow.graph" not in seen
