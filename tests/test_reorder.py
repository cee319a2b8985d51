"""Tests of the orderings (mgkflow.reorder) and of the octile counter they are judged by."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from mgkflow.format.count import count_octiles
from mgkflow.graph import Graph
from mgkflow.reorder import available_methods, get_method, pbr_groups, register, reorder, unregister
from mgkflow.reorder.hilbert import hilbert_keys
from mgkflow.reorder.morton import morton_keys

METHODS = ["natural", "random", "rcm", "pbr", "tsp", "morton", "hilbert"]
FAST = {"tsp": {"time_limit": 0.02}}


def _graph(n: int, edges: list[tuple[int, int]], coords: bool = False) -> Graph:
    A = np.zeros((n, n))
    for u, v in edges:
        if u != v:
            A[u, v] = A[v, u] = 1.0
    xyz = np.random.default_rng(n).random((n, 3)) if coords else None
    return Graph(A, coords=xyz)


def _is_perm(p: np.ndarray, n: int) -> bool:
    return isinstance(p, np.ndarray) and p.dtype == np.int64 and p.shape == (n,) and np.array_equal(
        np.sort(p), np.arange(n)
    )


def _dense_octiles(A: np.ndarray, perm: np.ndarray) -> int:
    B = (A[np.ix_(perm, perm)] != 0)
    n = B.shape[0]
    nt = -(-n // 8)
    P = np.zeros((8 * nt, 8 * nt), dtype=bool)
    P[:n, :n] = B
    return int(P.reshape(nt, 8, nt, 8).any(axis=(1, 3)).sum())


@st.composite
def small_graphs(draw):
    n = draw(st.integers(1, 40))
    m = draw(st.integers(0, 3 * n))
    edges = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=m))
    isolated = draw(st.integers(0, 5))
    coords = draw(st.booleans())
    return _graph(n + isolated, edges, coords=coords)


EDGE_CASES = {
    "n1": _graph(1, []),
    "n2-edge": _graph(2, [(0, 1)]),
    "n5-empty": _graph(5, []),
    "n7-path": _graph(7, [(i, i + 1) for i in range(6)]),
    "n8-clique": _graph(8, [(i, j) for i in range(8) for j in range(i)]),
    "n13-two-comp+isolated": _graph(13, [(0, 1), (1, 2), (5, 6), (6, 7), (7, 5)]),
    "n30-disconnected": _graph(30, [(i, i + 1) for i in range(10)] + [(20, 25), (25, 29)]),
    "n200-isolated-half": _graph(200, [(i, (i * 7 + 3) % 100) for i in range(100)]),
}


def test_registry_lists_builtins():
    assert available_methods()[:7] == METHODS
    with pytest.raises(ValueError, match="unknown ordering"):
        reorder(EDGE_CASES["n7-path"], method="nope")


def test_register_custom_ordering():
    register("reverse-test", lambda g, seed=0: np.arange(g.n_nodes)[::-1])
    try:
        assert reorder(EDGE_CASES["n7-path"], method="reverse-test").tolist() == list(range(6, -1, -1))
        with pytest.raises(ValueError, match="already registered"):
            register("reverse-test", lambda g, seed=0: np.arange(g.n_nodes))
        register("bad-test", lambda g, seed=0: np.zeros(g.n_nodes, dtype=int))
        with pytest.raises(ValueError, match="not a permutation"):
            reorder(EDGE_CASES["n7-path"], method="bad-test")
    finally:
        unregister("reverse-test")
        unregister("bad-test")
    assert "reverse-test" not in available_methods()


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("case", sorted(EDGE_CASES))
def test_edge_cases_give_permutations(method, case):
    g = EDGE_CASES[case]
    p = reorder(g, method=method, seed=1, **FAST.get(method, {}))
    assert _is_perm(p, g.n_nodes)
    g.permute(p)  # accepted by the graph


@pytest.mark.parametrize("method", METHODS)
def test_accepts_sparse_and_dense_matrices(method):
    g = EDGE_CASES["n30-disconnected"]
    for mat in (g.adjacency, sp.csr_matrix(g.adjacency), g.adjacency.toarray()):
        assert _is_perm(reorder(mat, method=method, **FAST.get(method, {})), 30)


@settings(max_examples=25, deadline=None)
@given(small_graphs())
def test_random_small_graphs_all_methods(g):
    for method in METHODS:
        p = reorder(g, method=method, seed=3, **FAST.get(method, {}))
        assert _is_perm(p, g.n_nodes), method


@settings(max_examples=40, deadline=None)
@given(small_graphs(), st.integers(0, 2**31 - 1))
def test_octile_counter_matches_dense_count(g, seed):
    A = g.adjacency.toarray()
    perm = np.random.default_rng(seed).permutation(g.n_nodes)
    assert count_octiles(g, perm) == _dense_octiles(A, perm)
    assert count_octiles(g) == _dense_octiles(A, np.arange(g.n_nodes))


@settings(max_examples=20, deadline=None)
@given(small_graphs())
def test_pbr_groups_exact_sizes(g):
    n = g.n_nodes
    groups = pbr_groups(g, seed=0)
    sizes = np.bincount(groups)
    k = -(-n // 8)
    assert sizes.size == k
    assert np.all(sizes[:-1] == 8)
    assert sizes[-1] == n - 8 * (k - 1)
    # the layout keeps every full group on an aligned 8-row stripe, the short group last
    p = reorder(g, method="pbr", seed=0)
    if k > 1:
        assert np.all(np.ptp(groups[p[: 8 * (k - 1)]].reshape(k - 1, 8), axis=1) == 0)
    if k > 1:
        assert np.all(groups[p[8 * (k - 1):]] == groups[p[-1]])


def test_pbr_groups_exact_sizes_larger_graph():
    G = nx.random_geometric_graph(613, 0.09, seed=2)
    g = Graph.from_networkx(G)
    sizes = np.bincount(pbr_groups(g, seed=0))
    assert np.all(sizes[:-1] == 8) and sizes[-1] == 613 % 8


@pytest.mark.parametrize("method", METHODS)
def test_deterministic_for_a_seed(method):
    g = Graph.from_networkx(nx.newman_watts_strogatz_graph(40, 3, 0.2, seed=5))
    opts = {"tsp": {"time_limit": None}}.get(method, {})
    a = reorder(g, method=method, seed=7, **opts)
    b = reorder(g, method=method, seed=7, **opts)
    assert np.array_equal(a, b)


def test_random_depends_on_seed():
    g = EDGE_CASES["n30-disconnected"]
    assert not np.array_equal(reorder(g, "random", seed=0), reorder(g, "random", seed=1))


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_pbr_beats_natural_and_rcm_on_nws(seed):
    g = Graph.from_networkx(nx.newman_watts_strogatz_graph(96, 3, 0.1, seed=seed))
    p = reorder(g, method="pbr", seed=0)
    ours = count_octiles(g, p)
    assert ours < count_octiles(g)
    assert ours < count_octiles(g, reorder(g, method="rcm"))


def test_pbr_beats_rcm_on_ba():
    g = Graph.from_networkx(nx.barabasi_albert_graph(96, 6, seed=0))
    assert count_octiles(g, reorder(g, "pbr")) < count_octiles(g, reorder(g, "rcm"))


def test_pbr_two_cliques_of_eight_are_perfect():
    # two 8-cliques joined by one edge, shuffled: the optimum is 2 diagonal + 2 off-diagonal tiles
    rng = np.random.default_rng(0)
    edges = [(i, j) for i in range(8) for j in range(i)] + [(8 + i, 8 + j) for i in range(8) for j in range(i)]
    edges.append((0, 8))
    shuffle = rng.permutation(16)
    g = _graph(16, [(int(shuffle[u]), int(shuffle[v])) for u, v in edges])
    assert count_octiles(g, reorder(g, "pbr")) == 4


def test_space_filling_keys_follow_the_curves():
    grid = np.array([[x, y] for y in range(4) for x in range(4)], dtype=float)
    z = grid[np.argsort(morton_keys(grid))]
    assert z[:4].tolist() == [[0, 0], [1, 0], [0, 1], [1, 1]]
    h = grid[np.argsort(hilbert_keys(grid))]
    steps = np.abs(np.diff(h, axis=0)).sum(axis=1)
    assert np.all(steps == 1)  # the Hilbert curve moves to a grid neighbour at every step


def test_geometric_orderings_use_coordinates():
    rng = np.random.default_rng(0)
    X = rng.random((64, 3))
    g = Graph(np.zeros((64, 64)), coords=X)
    p = reorder(g, "hilbert")
    assert np.array_equal(p, np.argsort(hilbert_keys(X), kind="stable"))
    assert get_method("morton") is not None


@pytest.mark.parametrize("method", METHODS)
def test_kernel_invariant_under_reordering_pattern(method):
    # reordering is a relabelling: the permuted graph has the same degree multiset and edge count
    g = Graph.from_networkx(nx.barabasi_albert_graph(30, 3, seed=1))
    p = reorder(g, method=method, **FAST.get(method, {}))
    h = g.permute(p)
    assert h.n_edges == g.n_edges
    assert np.array_equal(h.degree_sum(), g.degree_sum()[p])


@settings(max_examples=15, deadline=None)
@given(small_graphs())
def test_pbr_objective_equals_octile_count(g):
    from mgkflow.reorder._common import pattern
    from mgkflow.reorder.pbr import tile_count_of_groups

    groups = pbr_groups(g, seed=0)
    assert tile_count_of_groups(pattern(g), groups) == count_octiles(g, reorder(g, "pbr", seed=0))


def test_pbr_windowed_path_beats_rcm_on_a_geometric_graph():
    from mgkflow.bench.reorder import random_geometric_graph

    g = random_geometric_graph(700, seed=3)  # > 128 nodes: refined window by window
    p = reorder(g, "pbr", seed=0)
    assert count_octiles(g, p) < min(count_octiles(g, reorder(g, "rcm")), count_octiles(g, reorder(g, "hilbert")))


# ---------------------------------------------- identity orderings (reorder_graphs short cut)
def test_identity_registry_and_resolution():
    from mgkflow.reorder import default_method, is_identity, resolve_method

    assert is_identity("natural") and is_identity("Natural")
    assert not any(is_identity(m) for m in METHODS[1:] + ["auto", "no-such-ordering"])
    small, large = np.eye(20), sp.identity(300, format="csr")
    assert resolve_method("auto", small) == "natural" and resolve_method("AUTO", large) == "pbr"
    assert resolve_method("RCM", small) == "rcm" and resolve_method("no-such-ordering", small) == "no-such-ordering"
    assert default_method(Graph(np.zeros((3, 3)))) == "natural"  # from the shape, no pattern built
    for bad in (np.zeros((2, 3)), np.zeros(4)):
        with pytest.raises(ValueError, match="square|2-D"):
            default_method(bad)
    register("ident-test", lambda g, seed=0: np.arange(g.n_nodes), identity=True)
    try:
        assert is_identity("ident-test")
        register("ident-test", lambda g, seed=0: np.arange(g.n_nodes)[::-1], overwrite=True)
        assert not is_identity("ident-test")  # a replacement is not the identity unless it says so
        register("ident-test", lambda g, seed=0: np.arange(g.n_nodes), overwrite=True, identity=True)
    finally:
        unregister("ident-test")
    assert not is_identity("ident-test")


def test_reorder_graphs_identity_returns_the_graphs_untouched(monkeypatch, tmp_path):
    import mgkflow.gram.reorder as greorder
    from mgkflow.datasets import molecules
    from mgkflow.reorder import default_method

    gs = molecules(30, seed=1)

    def boom(*args, **kwargs):
        raise AssertionError("the identity short cut must not digest, pool or copy")

    monkeypatch.setattr(greorder, "graph_digest", boom)  # cache key
    monkeypatch.setattr(greorder, "ProcessPoolExecutor", boom)
    monkeypatch.setattr(Graph, "permute", boom)
    cache = greorder.PermutationCache(tmp_path / "perm")
    for method in ("natural", "auto", default_method):
        r = greorder.reorder_graphs(gs, method, workers=2, chunk=1, cache=cache, n_kicks=3)  # options unused
        assert all(h is g for h, g in zip(r.graphs, gs))
        assert all(np.array_equal(p, np.arange(g.n_nodes)) and p.dtype == np.int64 for p, g in zip(r.perms, gs))
        assert not r.perms[0].flags.writeable  # shared between graphs of one size
        assert (r.identity, r.computed, r.cached) == (30, 0, 0)
        assert r.methods == [method if isinstance(method, str) else "natural"] * 30
    assert len(cache) == 0 and not any((tmp_path / "perm").iterdir())


def test_reorder_graphs_mixed_identity_and_permuted():
    from mgkflow.datasets import molecules
    from mgkflow.gram.reorder import PermutationCache, reorder_graphs
    from mgkflow.reorder import default_method

    mols = molecules(6, seed=2)
    big = [Graph.from_networkx(nx.newman_watts_strogatz_graph(n, 3, 0.2, seed=n)) for n in (260, 300)]
    gs = [mols[0], big[0], mols[1], mols[2], big[1], big[0], mols[3]]  # big[0] twice: computed once
    cache = PermutationCache()
    r = reorder_graphs(gs, default_method, seed=4, cache=cache, n_kicks=2)
    assert r.methods == [default_method(g) for g in gs] == ["natural", "pbr", "natural", "natural", "pbr", "pbr",
                                                            "natural"]  # fmt: skip
    assert (r.identity, r.computed, r.cached) == (4, 2, 0) and len(cache) == 2
    for g, h, p, m in zip(gs, r.graphs, r.perms, r.methods):
        if m == "natural":
            assert h is g and np.array_equal(p, np.arange(g.n_nodes))
        else:
            assert h is not g and np.array_equal(p, reorder(g, "pbr", seed=4, n_kicks=2))
            assert not np.array_equal(p, np.arange(g.n_nodes))
            assert np.array_equal(h.adjacency.toarray(), g.permute(p).adjacency.toarray())
    again = reorder_graphs(gs, "auto", seed=4, cache=cache, n_kicks=2)  # "auto" keys differ from "pbr" keys
    assert (again.identity, again.computed, again.cached) == (4, 2, 0)
    assert again.methods == ["auto"] * len(gs)
    assert all(np.array_equal(a, b) for a, b in zip(again.perms, r.perms))
    assert reorder_graphs(gs, "auto", seed=4, cache=cache, n_kicks=2).cached == 3
    # a chooser picking "rcm" for some molecules and "natural" for the rest
    choose = lambda g: "rcm" if g.n_nodes % 2 else "natural"  # noqa: E731
    c = reorder_graphs(mols, choose)
    n_rcm = sum(g.n_nodes % 2 for g in mols)
    assert 0 < n_rcm < len(mols) and (c.identity, c.computed) == (len(mols) - n_rcm, n_rcm)
    for g, h, p in zip(mols, c.graphs, c.perms):
        assert np.array_equal(p, reorder(g, choose(g)))
        assert (h is g) == (choose(g) == "natural")
        assert np.array_equal(h.node_labels["element"], g.node_labels["element"][p])
