"""The GPU solver's octile XMV and blocked layout, emulated in numpy (no GPU needed)."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from mgkflow.backends.exact import _offdiag_operator
from mgkflow.format import pack_batch
from mgkflow.gpu.emulate import from_blocked, to_blocked, xmv_blocked, xmv_rows
from mgkflow.graph import Graph
from mgkflow.kernels import Constant, KroneckerDelta, SquareExponential
from mgkflow.system import prepare_graph


def _graph(n: int, p: float, seed: int) -> Graph:
    rng = np.random.default_rng(seed)
    G = nx.gnp_random_graph(n, p, seed=seed)
    for e in G.edges:
        G.edges[e]["length"] = float(rng.uniform(1, 2))
        G.edges[e]["weight"] = float(rng.uniform(0.5, 2))
    for v in G.nodes:
        G.nodes[v]["label"] = int(v % 3)
    return Graph.from_networkx(G, node_labels=["label"], edge_labels=["length"])


@pytest.mark.parametrize(
    "edge_kernel", [Constant(1.0), SquareExponential(1.0, "length"), Constant(0.5)], ids=repr
)
@pytest.mark.parametrize("sizes", [(13, 21), (8, 8), (3, 17), (30, 9)])
def test_xmv_matches_cpu(edge_kernel, sizes) -> None:
    n, m = sizes
    g1, g2 = _graph(n, 0.3, n), _graph(m, 0.25, m + 100)
    nk = KroneckerDelta(0.5, "label")
    s1, s2 = prepare_graph(g1, 0, nk, edge_kernel), prepare_graph(g2, 1, nk, edge_kernel)
    b = pack_batch([s1, s2], node_fields=["label"], edge_fields=list(edge_kernel.fields))
    mv, _ = _offdiag_operator(s1, s2, edge_kernel, False)
    X = np.random.default_rng(0).random((n, m))
    nt1, nt2 = -(-n // 8), -(-m // 8)
    y = xmv_blocked(b, 0, 1, to_blocked(X, nt1, nt2), edge_kernel if edge_kernel.fields else None)
    if not edge_kernel.fields:
        y = y * edge_kernel.c
    ref = mv(X)
    np.testing.assert_allclose(from_blocked(y, n, m, nt2), ref, rtol=1e-5, atol=1e-6 * np.abs(ref).max())


def test_degree_order_keeps_large_graphs_in_their_tiles() -> None:
    """Graphs over DEGREE_SORT_MAX_NODES nodes are sorted within their 8-node tiles only (the locality of
    the user's ordering stays); smaller ones as a whole; both are permutations, stable among equal degrees."""
    from mgkflow.gpu.strategies.row_pair import DEGREE_SORT_MAX_NODES, degree_order

    for n in (DEGREE_SORT_MAX_NODES, DEGREE_SORT_MAX_NODES + 13):
        g = _graph(n, 0.05, n)
        p = degree_order(g)
        assert np.array_equal(np.sort(p), np.arange(n))
        deg = np.diff(g.adjacency.indptr)[p]
        groups = [np.arange(n)] if n <= DEGREE_SORT_MAX_NODES else [np.arange(t, min(t + 8, n)) for t in range(0, n, 8)]
        if n > DEGREE_SORT_MAX_NODES:
            assert np.array_equal(p // 8, np.arange(n) // 8)
        for idx in groups:
            assert np.all(np.diff(deg[idx]) <= 0)
            ties = np.flatnonzero(np.diff(deg[idx]) == 0)
            assert np.all(p[idx][ties] < p[idx][ties + 1])


@pytest.mark.parametrize(
    "edge_kernel", [Constant(1.0), SquareExponential(1.0, "length")], ids=repr
)
@pytest.mark.parametrize("sizes", [(13, 21), (8, 8), (3, 17), (30, 9)])
@pytest.mark.parametrize("tile_sort", [False, True], ids=["natural", "tile-sorted"])
def test_row_pair_xmv_matches_cpu(edge_kernel, sizes, tile_sort) -> None:
    """The row-pair XMV's storage (padded row pointers, blocked column offsets, row-order
    labels) and lane mapping reproduce the CPU product, before and after the tile sort."""
    from mgkflow.gpu.strategies.row_pair import degree_order, permute_system, row_arrays

    n, m = sizes
    g1, g2 = _graph(n, 0.3, n), _graph(m, 0.25, m + 100)
    nk = KroneckerDelta(0.5, "label")
    s1, s2 = prepare_graph(g1, 0, nk, edge_kernel), prepare_graph(g2, 1, nk, edge_kernel)
    X = np.random.default_rng(0).random((n, m))
    if tile_sort:
        p1, p2 = degree_order(g1), degree_order(g2)
        # a small graph: the degrees are non-increasing over the whole graph
        assert np.all(np.diff(np.diff(g1.adjacency.indptr)[p1]) <= 0)
        s1, s2 = permute_system(s1, p1), permute_system(s2, p2)
        X = X[np.ix_(p1, p2)]
    fields = list(edge_kernel.fields)
    rows = row_arrays([s1, s2], fields, np.float64)
    nt1, nt2 = -(-n // 8), -(-m // 8)
    hdr = np.array([[n, nt1, 0, 0, rows["rrow_off"][0]], [m, nt2, 0, 0, rows["rrow_off"][1]]])
    assert rows["rrowptr"].size == (nt1 + nt2) * 8 + 2
    # row-order labels, as the solver stores them (field-major words; float32 here)
    words = rows["relab"].reshape(max(len(fields), 1), -1)
    labels = {f: words[k].view(np.float32)[:-1].astype(np.float64) for k, f in enumerate(fields)}
    y = xmv_rows(rows, hdr, 0, 1, to_blocked(X, nt1, nt2), labels, edge_kernel if fields else None)
    mv, _ = _offdiag_operator(s1, s2, edge_kernel, False)
    ref = mv(X)
    np.testing.assert_allclose(from_blocked(y, n, m, nt2), ref, rtol=1e-5, atol=1e-6 * np.abs(ref).max())


@pytest.mark.parametrize("q", [0.05, 0.01])
def test_emulated_value_cg_takes_the_classic_steps(q: float) -> None:
    """The resident F32_SUMS value builds' PCG in the Chronopoulos-Gear form (``VALUE_CG``; float32 z, q and a)
    stops after the steps of the classic form, one XMV a step, and its K stays at the float64 solve's level."""
    from test_gpu_gradient import KERNELS, _emulation_inputs, _ring

    from mgkflow.backends.exact import solve_pair
    from mgkflow.gpu.core import DEFAULT_RTOL
    from mgkflow.gpu.emulate import pcg_blocked, pcg_cg_blocked, system_blocked

    nk, ek = KERNELS["kd-se"]
    graphs = [_ring(40, 1), _ring(33, 2), _graph(17, 0.2, 3)]
    systems = [prepare_graph(g, k, nk, ek, q=q) for k, g in enumerate(graphs)]
    h, hdr, nlab, elab, rows = _emulation_inputs(systems, nk, ek)
    seen: list[int] = []
    for g1, g2 in ((0, 1), (1, 2), (2, 2)):
        DG, b, px, _ = system_blocked(hdr, g1, g2, nlab, nk, h["d"], h["p"], h["q"])

        def xmv(P: np.ndarray, g1: int = g1, g2: int = g2) -> np.ndarray:
            seen.append(1)
            return xmv_rows(rows, hdr, g1, g2, P, elab, ek)

        X, it, _, conv = pcg_blocked(DG, b, xmv, DEFAULT_RTOL, 500)
        calls = len(seen)
        k, it_cg, res, conv_cg = pcg_cg_blocked(DG, b, px, xmv, DEFAULT_RTOL, 500)
        ref = solve_pair(systems[g1], systems[g2], nk, ek, rtol=1e-13).value
        assert conv and conv_cg and res <= DEFAULT_RTOL
        assert it_cg == it == len(seen) - calls, (g1, g2, it, it_cg, len(seen) - calls)
        assert abs(k - ref) <= 1e-8 * abs(ref) and abs(px @ X - ref) <= 1e-8 * abs(ref), (k, px @ X, ref)
