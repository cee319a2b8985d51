"""Octile format: exact round trip, counts, edge cases (CPU only)."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mgkflow.format import (
    OctileBatch,
    count_octiles,
    octile_nnz_histogram,
    pack_batch,
    pack_graph,
)
from mgkflow.graph import Graph


def _random_graph(n: int, density: float, seed: int, labeled: bool = True) -> Graph:
    rng = np.random.default_rng(seed)
    upper = np.triu(rng.random((n, n)) < density, 1)
    W = np.where(upper, rng.uniform(0.5, 3.0, (n, n)), 0.0)
    W = W + W.T
    if not labeled:
        return Graph(W)
    L = np.triu(rng.uniform(1, 2, (n, n)), 1)
    L = L + L.T
    B = np.triu(rng.integers(1, 4, (n, n)), 1)
    B = B + B.T
    return Graph(
        W,
        node_labels={"element": rng.integers(0, 5, n), "charge": rng.normal(size=n)},
        edge_labels={"length": L, "order": B},
    )


def _check_round_trip(g: Graph) -> None:
    og = pack_graph(g)
    A = g.adjacency.toarray()
    assert og.to_dense().shape == A.shape
    np.testing.assert_array_equal(og.to_dense(), A)
    assert og.n_octiles == count_octiles(g)
    assert og.nnz == g.nnz
    np.testing.assert_array_equal(og.density_histogram(), octile_nnz_histogram(g))
    assert og.density_histogram().shape == (65,)
    assert og.density_histogram().sum() == og.n_octiles
    rows, cols = g.coo()
    for f, v in g.edge_labels.items():
        dense = np.zeros(A.shape, dtype=og.edge_labels[f].dtype)
        dense[rows, cols] = v
        np.testing.assert_array_equal(og.to_dense(f), dense)
    for f, v in g.node_labels.items():
        np.testing.assert_array_equal(og.node_labels[f][: g.n_nodes], v.astype(og.node_labels[f].dtype))
        assert og.node_labels[f].size % 8 == 0
    # tile-row pointers cover each tile row exactly; bitmap order of the compact arrays
    for I in range(og.n_tiles_side):
        sl = slice(og.rowptr[I], og.rowptr[I + 1])
        assert np.all(og.tile_row[sl] == I)
        assert np.all(np.diff(og.tile_col[sl]) > 0)
    assert og.rowptr[-1] == og.n_octiles
    np.testing.assert_array_equal(np.diff(np.append(og.offset, og.nnz)), np.bitwise_count(og.bitmap))
    back = og.to_graph()
    np.testing.assert_array_equal(back.adjacency.toarray(), og.to_dense())


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 40),
    density=st.floats(0.0, 1.0),
    seed=st.integers(0, 2**31 - 1),
)
def test_round_trip_random(n: int, density: float, seed: int) -> None:
    _check_round_trip(_random_graph(n, density, seed))


@pytest.mark.parametrize("n", [1, 2, 7, 8, 9, 16, 17, 33])
def test_round_trip_sizes(n: int) -> None:
    _check_round_trip(_random_graph(n, 0.4, n))


def test_isolated_nodes_and_padding() -> None:
    A = np.zeros((11, 11))
    A[0, 10] = A[10, 0] = 2.0
    og = pack_graph(Graph(A))
    assert og.n_octiles == 2
    assert og.d.size == 16 and og.p.size == 16
    np.testing.assert_array_equal(og.d[11:], 1.0)
    np.testing.assert_array_equal(og.p[11:], 0.0)
    np.testing.assert_array_equal(og.q[11:], 0.0)
    # isolated nodes count a raw degree of 1
    np.testing.assert_allclose(og.d[1:10], 1.0 / 0.95)
    _check_round_trip(Graph(A))


def test_empty_edges() -> None:
    og = pack_graph(Graph(np.zeros((5, 5))))
    assert og.n_octiles == 0 and og.nnz == 0
    np.testing.assert_array_equal(og.to_dense(), np.zeros((5, 5)))
    np.testing.assert_array_equal(og.density_histogram(), np.zeros(65))


def test_label_dtypes() -> None:
    g = _random_graph(20, 0.3, 3)
    og = pack_graph(g)
    assert og.node_labels["element"].dtype == np.int32
    assert og.node_labels["charge"].dtype == np.float32
    assert og.edge_labels["order"].dtype == np.int32
    assert og.edge_labels["length"].dtype == np.float32
    assert og.weight.dtype == np.float64 and og.bitmap.dtype == np.uint64  # random weights
    unweighted = pack_graph(Graph.from_networkx(nx.cycle_graph(9)))
    assert unweighted.weight.dtype == np.float32


def test_batch_offsets_and_counts() -> None:
    gs = [_random_graph(n, 0.25, n) for n in (3, 8, 19, 40, 1)]
    b = pack_batch(gs)
    assert isinstance(b, OctileBatch)
    assert b.n_graphs == 5
    assert b.n_octiles == sum(count_octiles(g) for g in gs)
    assert b.nnz == sum(g.nnz for g in gs)
    np.testing.assert_array_equal(b.density_histogram(), sum(octile_nnz_histogram(g) for g in gs))
    assert b.nbytes > 0
    for k, g in enumerate(gs):
        np.testing.assert_array_equal(b.to_dense(k), g.adjacency.toarray())
        og = b.graph(k)
        assert og.n_octiles == count_octiles(g)
    with pytest.raises(IndexError):
        b.graph(5)


def test_pack_uses_system_pqd() -> None:
    from mgkflow.kernels import Constant
    from mgkflow.system import prepare_graph

    g = Graph.from_networkx(nx.path_graph(10))
    s = prepare_graph(g, 0, Constant(1.0), Constant(1.0), p=0.5, q=0.2)
    og = pack_graph(s)
    np.testing.assert_array_equal(og.d[:10], s.d)
    np.testing.assert_array_equal(og.p[:10], s.p)
    np.testing.assert_array_equal(og.q[:10], s.q)


def test_paper_workload_counts() -> None:
    gs = [Graph.from_networkx(nx.barabasi_albert_graph(96, 6, seed=i)) for i in range(10)]
    b = pack_batch(gs)
    assert b.n_octiles == sum(count_octiles(g) for g in gs)
    np.testing.assert_array_equal(b.octiles_per_graph(), [count_octiles(g) for g in gs])


def test_label_outside_int32_is_a_graph_error() -> None:
    from mgkflow.errors import GraphError

    g = Graph.from_networkx(nx.path_graph(3))
    g = Graph(g.adjacency, node_labels={"id": np.array([0, 1, 2**32 + 5])})
    with pytest.raises(GraphError, match="outside int32"):
        pack_batch([g])
