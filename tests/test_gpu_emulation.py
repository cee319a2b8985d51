"""The GPU solver's octile XMV and blocked layout, emulated in numpy (no GPU needed)."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from mgkflow.cpu_solver import _offdiag_operator
from mgkflow.format import pack_batch
from mgkflow.gpu.emulate import from_blocked, to_blocked, xmv_blocked, xmv_blocked_flat
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
@pytest.mark.parametrize("flat", [False, True], ids=["octile-pair", "row-flat"])
def test_xmv_matches_cpu(edge_kernel, sizes, flat) -> None:
    n, m = sizes
    g1, g2 = _graph(n, 0.3, n), _graph(m, 0.25, m + 100)
    nk = KroneckerDelta(0.5, "label")
    s1, s2 = prepare_graph(g1, 0, nk, edge_kernel), prepare_graph(g2, 1, nk, edge_kernel)
    b = pack_batch([s1, s2], node_fields=["label"], edge_fields=list(edge_kernel.fields))
    mv, _ = _offdiag_operator(s1, s2, edge_kernel, False)
    X = np.random.default_rng(0).random((n, m))
    nt1, nt2 = -(-n // 8), -(-m // 8)
    xmv = xmv_blocked_flat if flat else xmv_blocked
    y = xmv(b, 0, 1, to_blocked(X, nt1, nt2), edge_kernel if edge_kernel.fields else None)
    if not edge_kernel.fields:
        y = y * edge_kernel.c
    ref = mv(X)
    np.testing.assert_allclose(from_blocked(y, n, m, nt2), ref, rtol=1e-5, atol=1e-6 * np.abs(ref).max())
