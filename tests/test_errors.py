"""Invalid input gives a clear error naming the graph and the field (docs/design.md §1.3)."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from mgkflow import Graph, GraphError, KernelRangeError, MarginalizedGraphKernel
from mgkflow.kernels import Constant, KroneckerDelta, SquareExponential

EDGE = np.array([[0.0, 1.0], [1.0, 0.0]])
NAN, INF = float("nan"), float("inf")


def _labeled(title: str | None = "ok", l=(0, 1), e: float = 1.5) -> Graph:
    return Graph(EDGE, node_labels={"l": list(l)}, edge_labels={"e": EDGE * e}, title=title)


# ---------------------------------------------------------------------- empty graphs
def test_empty_graph():
    with pytest.raises(GraphError, match=r"graph 'void': empty graph \(0 nodes\)"):
        Graph(np.zeros((0, 0)), title="void")
    with pytest.raises(GraphError, match=r"graph 'void2': empty graph"):
        Graph.from_networkx(nx.Graph(name="void2"))
    with pytest.raises(GraphError, match="empty graph"):
        Graph.from_csr([0], [], [], 0)


# ---------------------------------------------------------------------- weights
@pytest.mark.parametrize(
    "w, what", [(-1.0, "negative"), (NAN, "NaN or infinite"), (INF, "NaN or infinite"), (-INF, "negative")]
)
def test_bad_weights_dense(w, what):
    A = np.array([[0, 1, 0], [1, 0, w], [0, w, 0]])
    with pytest.raises(GraphError, match=rf"graph 'w': edge weight between nodes 1 and 2 is {what}"):
        Graph(A, title="w")


@pytest.mark.parametrize("w, what", [(-2.0, "negative"), (NAN, "NaN"), (INF, "infinite"), (None, "NaN")])
def test_bad_weights_networkx(w, what):
    G = nx.path_graph(3)
    G.edges[1, 2]["weight"] = w
    with pytest.raises(GraphError, match=rf"graph 'nx': edge weight between nodes 1 and 2 is .*{what}"):
        Graph.from_networkx(G, title="nx")


def test_non_numeric_weight_networkx():
    G = nx.path_graph(3)
    G.graph["name"] = "strw"
    G.edges[0, 1]["w"] = "heavy"
    with pytest.raises(GraphError, match=r"graph 'strw': edge weight 'w' is not numeric"):
        Graph.from_networkx(G, weight="w")


def test_bad_weight_csr():
    with pytest.raises(GraphError, match=r"'c'.*edge weight between nodes 0 and 1 is negative"):
        Graph.from_csr([0, 1, 2], [1, 0], [-1.0, -1.0], 2, title="c")


# ---------------------------------------------------------------------- labels
@pytest.mark.parametrize("bad", [NAN, INF, -INF])
def test_non_finite_node_label(bad):
    with pytest.raises(GraphError, match=r"graph 'nl': node label field 'x' holds NaN or infinite"):
        Graph(EDGE, node_labels={"x": [0.5, bad]}, title="nl")
    G = nx.path_graph(2)
    nx.set_node_attributes(G, {0: 1.0, 1: bad}, "x")
    with pytest.raises(GraphError, match=r"graph 'nxl': node label field 'x' holds NaN"):
        Graph.from_networkx(G, node_labels=["x"], title="nxl")


@pytest.mark.parametrize("bad", [NAN, INF])
def test_non_finite_edge_label(bad):
    with pytest.raises(GraphError, match=r"graph 'el': edge label field 'len' holds NaN or infinite"):
        Graph(EDGE, edge_labels={"len": np.array([[0.0, bad], [bad, 0.0]])}, title="el")
    G = nx.path_graph(3)
    nx.set_edge_attributes(G, {(0, 1): 1.0, (1, 2): bad}, "len")
    with pytest.raises(GraphError, match=r"graph 'nxe': edge label field 'len' holds NaN"):
        Graph.from_networkx(G, edge_labels=["len"], title="nxe")
    with pytest.raises(GraphError, match=r"graph 'c': edge label field 'len' holds NaN"):
        Graph.from_csr([0, 1, 2], [1, 0], [1.0, 1.0], 2, edge_labels={"len": [bad, bad]}, title="c")


def test_non_numeric_and_misshaped_labels():
    with pytest.raises(GraphError, match=r"graph 's': node label field 'el' must be numeric"):
        Graph(EDGE, node_labels={"el": ["C", "O"]}, title="s")
    with pytest.raises(
        GraphError, match=r"graph 's': node label field 'el' has shape \(3,\), expected \(2,\)"
    ):
        Graph(EDGE, node_labels={"el": [1, 2, 3]}, title="s")
    with pytest.raises(GraphError, match=r"graph 's': edge label field 'e' has shape \(3, 3\)"):
        Graph(EDGE, edge_labels={"e": np.zeros((3, 3))}, title="s")
    with pytest.raises(
        GraphError, match=r"graph 's': edge label field 'e' has shape \(1,\), expected \(2,\)"
    ):
        Graph.from_csr([0, 1, 2], [1, 0], [1.0, 1.0], 2, edge_labels={"e": [1.0]}, title="s")
    with pytest.raises(GraphError, match=r"graph 's': edge label field 'e' is not symmetric"):
        Graph(EDGE, edge_labels={"e": np.array([[0, 1], [2, 0]])}, title="s")
    with pytest.raises(GraphError, match=r"graph 's': coords must have shape"):
        Graph(EDGE, coords=np.zeros((3, 2)), title="s")
    with pytest.raises(GraphError, match=r"graph 's': coords hold NaN"):
        Graph(EDGE, coords=[[0.0, 0.0], [NAN, 1.0]], title="s")


def test_label_field_missing_on_some_nodes_or_edges():
    G = nx.path_graph(3)
    G.graph["name"] = "part"
    nx.set_node_attributes(G, {0: 1, 2: 1}, "l")
    with pytest.raises(GraphError, match=r"graph 'part': node 1 has no label field 'l'"):
        Graph.from_networkx(G, node_labels=["l"])
    nx.set_edge_attributes(G, {(0, 1): 1.0}, "e")
    with pytest.raises(GraphError, match=r"graph 'part': edge \(1, 2\) has no label field 'e'"):
        Graph.from_networkx(G, edge_labels=["e"])
    with pytest.raises(GraphError, match=r"graph 'part': node without coordinate attribute 'pos'"):
        Graph.from_networkx(G, coords="pos")


# ---------------------------------------------------------------------- structure
def test_self_loops():
    with pytest.raises(GraphError, match=r"graph 'loop': self loop at node 1"):
        Graph(np.array([[0, 1], [1, 2]]), title="loop")
    G = nx.path_graph(3)
    G.add_edge(2, 2)
    with pytest.raises(GraphError, match=r"graph 'nxloop': self loop at node 2"):
        Graph.from_networkx(G, title="nxloop")
    with pytest.raises(GraphError, match=r"graph 'c': self loop at node 0"):
        Graph.from_csr([0, 1, 1], [0], [1.0], 2, title="c")


def test_non_symmetric_adjacency():
    with pytest.raises(GraphError, match=r"graph 'asym': adjacency matrix is not symmetric"):
        Graph(np.array([[0, 1], [2, 0]]), title="asym")
    with pytest.raises(GraphError, match=r"graph 'asym2': adjacency matrix is not symmetric"):
        Graph(np.array([[0, 1], [0, 0]]), title="asym2")
    with pytest.raises(GraphError, match=r"graph 'c': adjacency matrix is not symmetric"):
        Graph.from_csr([0, 1, 1], [1], [1.0], 2, title="c")


def test_not_square_or_directed_or_multi():
    with pytest.raises(GraphError, match=r"graph 'r': adjacency matrix must be square"):
        Graph(np.zeros((2, 3)), title="r")
    with pytest.raises(GraphError, match=r"graph 'r': adjacency must be a 2-D matrix"):
        Graph(np.zeros(3), title="r")
    with pytest.raises(GraphError, match="directed graphs are not supported"):
        Graph.from_networkx(nx.DiGraph([(0, 1)]))
    with pytest.raises(GraphError, match="multigraphs are not supported"):
        Graph.from_networkx(nx.MultiGraph([(0, 1)]))


@pytest.mark.parametrize(
    "indptr, indices, data, match",
    [
        ([0, 1], [1], [1.0], r"indptr has 2 entries, expected n_nodes \+ 1 = 3"),
        ([0, 2, 1], [1, 0], [1.0, 1.0], "indptr must rise"),
        ([0, 1, 3], [1, 0], [1.0, 1.0], "indptr must rise"),
        ([0, 1, 2], [1, 0], [1.0], "data has 1 entries, indices 2"),
        ([0, 1, 2], [1, 5], [1.0, 1.0], r"column index out of range 0\.\.1"),
        ([0, 1, 2], [1, -1], [1.0, 1.0], "column index out of range"),
        ([0, 2, 3], [1, 1, 0], [1.0, 1.0, 1.0], r"entry \(0, 1\) twice"),
    ],
)
def test_malformed_csr(indptr, indices, data, match):
    with pytest.raises(GraphError, match=rf"graph 'csr': CSR .*{match}"):
        Graph.from_csr(indptr, indices, data, 2, title="csr")


# ---------------------------------------------------------------------- kernel calls
def test_label_field_missing_from_graph_the_kernel_needs():
    kern = MarginalizedGraphKernel(KroneckerDelta(0.5, "l"), SquareExponential(1.0, "e"), backend="cpu")
    no_node = Graph(EDGE, edge_labels={"e": EDGE}, title="bare")
    with pytest.raises(GraphError, match=r"in X: graph 2 \('bare'\): node kernel reads node label field 'l'"):
        kern([_labeled(), _labeled(), no_node])
    no_edge = Graph(EDGE, node_labels={"l": [0, 1]})
    with pytest.raises(GraphError, match=r"in Y: graph 1: edge kernel reads edge label field 'e'.*lacks"):
        kern([_labeled()], [_labeled(), no_edge])
    with pytest.raises(GraphError, match=r"graph 0 \('ok'\): stop probability q reads node label field 'qq'"):
        MarginalizedGraphKernel(q="qq", backend="cpu")([_labeled()])


@pytest.mark.parametrize("q", [0.0, 1.0, -0.1, 1.5, NAN, INF])
def test_scalar_q_out_of_range(q):
    with pytest.raises(ValueError, match=r"stop probability q must lie in \(0, 1\)"):
        MarginalizedGraphKernel(q=q, backend="cpu")


def _q_graph(title: str, qq) -> Graph:
    return Graph(EDGE, node_labels={"qq": list(qq)}, title=title)


@pytest.mark.parametrize(
    "bad, match",
    [
        (np.array([0.5, 1.0]), r"stop probability q must lie in \(0, 1\), got values in \[0\.5, 1\.0\]"),
        (0.0, r"stop probability q must lie in \(0, 1\)"),
        (np.array([0.5, NAN]), "stop probability q holds NaN"),
        (np.ones(3) * 0.5, r"stop probability q has shape \(3,\), expected \(2,\)"),
    ],
)
def test_callable_q_out_of_range(bad, match):
    kern = MarginalizedGraphKernel(q=lambda g: 0.2 if g.title == "one" else bad, backend="cpu")
    with pytest.raises(GraphError, match=r"in X: graph 1 \('two'\): " + match):
        kern([_q_graph("one", (0.1, 0.2)), _q_graph("two", (0.1, 0.2))])


def test_label_field_q_out_of_range():
    kern = MarginalizedGraphKernel(q="qq", backend="cpu")
    with pytest.raises(
        GraphError,
        match=r"in Y: graph 1 \('two'\): stop probability q must lie in \(0, 1\), got "
        r"values in \[0\.0, 0\.5\]",
    ):
        kern([_q_graph("one", (0.1, 0.2))], [_q_graph("one", (0.1, 0.2)), _q_graph("two", (0.0, 0.5))])


@pytest.mark.parametrize(
    "q, match",
    [
        (np.array([0.2, 1.2]), r"stop probability q must lie in \(0, 1\), got values in \[0\.2, 1\.2\]"),
        ([0.2, 0.3, 0.4], r"stop probability q has shape \(3,\), expected \(2,\)"),
    ],
)
def test_vector_q_out_of_range(q, match):
    kern = MarginalizedGraphKernel(q=q, backend="cpu")
    with pytest.raises(GraphError, match=r"in X: graph 0 \('one'\): " + match):
        kern([_q_graph("one", (0.1, 0.2))])


def test_vector_q_accepted():
    kern = MarginalizedGraphKernel(q=np.array([0.1, 0.3]), backend="cpu")
    ref = MarginalizedGraphKernel(q=lambda g: np.array([0.1, 0.3]), backend="cpu")
    np.testing.assert_allclose(kern([_labeled()]), ref([_labeled()]), rtol=1e-15)


def test_bad_start_probability():
    with pytest.raises(ValueError, match="start probability p must be non-negative"):
        MarginalizedGraphKernel(p=-1.0, backend="cpu")
    with pytest.raises(GraphError, match=r"graph 0 \('ok'\): start probability p must be non-negative"):
        MarginalizedGraphKernel(p=lambda g: np.array([1.0, -1.0]), backend="cpu")([_labeled()])
    with pytest.raises(TypeError, match="start probability p must be a number"):
        MarginalizedGraphKernel(p=object(), backend="cpu")([_labeled()])


def test_zero_start_probability_cannot_be_normalized():
    kern = MarginalizedGraphKernel(p=lambda g: np.zeros(g.n_nodes) if g.title == "z" else 1.0, backend="cpu")
    K = kern([_labeled(), _labeled("z")])  # raw values are fine (zero)
    assert K[1, 1] == 0.0
    with pytest.raises(GraphError, match=r"in X: graph 1 \('z'\): K\(G, G\) = 0\.0.*cannot be normalized"):
        kern([_labeled(), _labeled("z")], normalize=True)
    with pytest.raises(GraphError, match=r"in Y: graph 0 \('z'\).*cannot be normalized"):
        kern([_labeled()], [_labeled("z")], normalize=True)


def test_kernels_out_of_range():
    with pytest.raises(KernelRangeError, match=r"KroneckerDelta\(h, 'x'\) needs 0 <= h <= 1, got h=1\.5"):
        KroneckerDelta(1.5, "x")
    with pytest.raises(KernelRangeError, match=r"node kernel .*KroneckerDelta\(0\.0, 'l'\).*\(0, 1\]"):
        MarginalizedGraphKernel(node_kernel=KroneckerDelta(0.0, "l"))
    with pytest.raises(KernelRangeError, match=r"edge kernel .*\[0, 1\]"):
        MarginalizedGraphKernel(edge_kernel=KroneckerDelta(0.5, "e") + Constant(0.6))


def test_non_graph_inputs():
    kern = MarginalizedGraphKernel(backend="cpu")
    with pytest.raises(TypeError, match=r"in X: graph 1: expected mgkflow.Graph, got Graph.*from_networkx"):
        kern([_labeled(), nx.path_graph(2)])
    with pytest.raises(TypeError, match=r"in Y: graph 0: expected mgkflow.Graph, got ndarray"):
        kern([_labeled()], [EDGE])
    with pytest.raises(TypeError, match="X must be a sequence of Graph objects, not a single Graph"):
        kern(_labeled())
    with pytest.raises(ValueError, match="X is empty"):
        kern([])
    with pytest.raises(ValueError, match="Y is empty"):
        kern([_labeled()], [])


def test_bad_options():
    with pytest.raises(ValueError, match="backend must be"):
        MarginalizedGraphKernel(backend="tpu")
    with pytest.raises(ValueError, match="on_nonconvergence must be"):
        MarginalizedGraphKernel(on_nonconvergence="ignore")
    with pytest.raises(ValueError, match="rtol must lie"):
        MarginalizedGraphKernel(rtol=0.0)
    with pytest.raises(ValueError, match="max_iter must be"):
        MarginalizedGraphKernel(max_iter=0)


def test_gpu_options_need_the_gpu_backend() -> None:
    import mgkflow

    with pytest.raises(ValueError, match="gpu_options"):
        mgkflow.MarginalizedGraphKernel(backend="cpu", gpu_options={"xmv": "octile"})
    kern = mgkflow.MarginalizedGraphKernel(backend="auto", gpu_options={"wide": False})
    assert kern.gpu_options == {"wide": False}
