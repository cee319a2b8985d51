"""The marginalized graph kernel against its definition (docs/design.md §1, checks of §1.4).

The reference values are computed here from scratch with dense numpy:

* the linear-system form  K = p_x^T (D_x V_x^-1 - A_x∘E_x)^-1 D_x q_x, and
* the walk series  K = Σ_k p_x^T V_x (T_x V_x)^k q_x  with T_x = D_x^-1 (A_x∘E_x),
  i.e. start × node kernel × (transition × edge kernel × node kernel)^k × stop,
  truncated once the terms fall below 1e-15 (relative to the sum).

The two agree because (D V^-1 - W)^-1 D = (I - V D^-1 W)^-1 V = Σ_k (V D^-1 W)^k V.
"""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mgkflow import ConvergenceError, ConvergenceWarning, Graph, MarginalizedGraphKernel
from mgkflow.backends.exact import DIRECT_MAX_UNKNOWNS, solve_pair
from mgkflow.kernels import Constant, KroneckerDelta, SquareExponential
from mgkflow.system import prepare_graph

NODE_K = KroneckerDelta(0.3, "l")
EDGE_K = SquareExponential(0.8, "e") * KroneckerDelta(0.6, "b")
ONE = Constant(1.0)


# ---------------------------------------------------------------------- graphs
def random_graph(
    n: int,
    rng: np.random.Generator,
    density: float = 0.5,
    weighted: bool = True,
    labeled: bool = True,
    title: str | None = None,
) -> Graph:
    """Random undirected graph with node labels l (int), qq (float) and edge labels e (float), b (int)."""
    upper = np.triu(rng.random((n, n)) < density, 1)
    W = np.where(upper, rng.uniform(0.5, 2.0, (n, n)) if weighted else 1.0, 0.0)
    A = W + W.T
    E = np.triu(rng.uniform(0.0, 3.0, (n, n)), 1)
    B = np.triu(rng.integers(0, 2, (n, n)), 1)
    node_labels = {"l": rng.integers(0, 3, n), "qq": rng.uniform(0.05, 0.4, n)} if labeled else None
    edge_labels = {"e": E + E.T, "b": B + B.T} if labeled else None
    return Graph(A, node_labels=node_labels, edge_labels=edge_labels, title=title)


def nws_graph(n: int, seed: int) -> Graph:
    G = nx.newman_watts_strogatz_graph(n, 3, 0.2, seed=seed)
    rng = np.random.default_rng(seed)
    for u, v in sorted(G.edges()):
        G.edges[u, v]["e"] = rng.uniform(1, 2)
        G.edges[u, v]["b"] = int(rng.integers(0, 2))
    for v in G.nodes:
        G.nodes[v]["l"] = G.degree(v) % 3
    return Graph.from_networkx(G, node_labels=["l"], edge_labels=["e", "b"])


# ---------------------------------------------------------------------- references
def _node_vec(value, g: Graph) -> np.ndarray:
    if isinstance(value, str):
        return np.asarray(g.node_labels[value], dtype=float)
    if callable(value):
        return np.broadcast_to(np.asarray(value(g), dtype=float), (g.n_nodes,))
    return np.full(g.n_nodes, float(value))


def _dense_parts(g: Graph, q) -> tuple[np.ndarray, dict[str, np.ndarray], np.ndarray, np.ndarray]:
    A = g.adjacency.toarray()
    rows, cols = g.coo()
    E = {}
    for f, v in g.edge_labels.items():
        M = np.zeros(A.shape)
        M[rows, cols] = v
        E[f] = M
    qv = _node_vec(q, g)
    rowsum = A.sum(axis=1)
    d = np.where(rowsum > 0, rowsum, 1.0) / (1.0 - qv)  # isolated nodes: rowsum taken as 1
    return A, E, qv, d


def dense_system(g1: Graph, g2: Graph, nk=NODE_K, ek=EDGE_K, q=0.05, p=1.0):
    """Dense (M, b, p_x, V, T) of the pair: M x = b, K = p_x·x; T = D^-1 (A∘E)."""
    A1, E1, q1, d1 = _dense_parts(g1, q)
    A2, E2, q2, d2 = _dense_parts(g2, q)
    n, m = g1.n_nodes, g2.n_nodes
    V = np.broadcast_to(
        nk(
            {k: v[:, None] for k, v in g1.node_labels.items()},
            {k: v[None, :] for k, v in g2.node_labels.items()},
        ),
        (n, m),
    ).ravel()
    ke = np.broadcast_to(
        ek({k: v[:, :, None, None] for k, v in E1.items()}, {k: v[None, None] for k, v in E2.items()}),
        (n, n, m, m),
    )
    W = (A1[:, :, None, None] * A2[None, None] * ke).transpose(0, 2, 1, 3).reshape(n * m, n * m)
    Dx = np.outer(d1, d2).ravel()
    qx = np.outer(q1, q2).ravel()
    px = np.outer(_node_vec(p, g1), _node_vec(p, g2)).ravel()
    M = np.diag(Dx / V) - W
    return M, Dx * qx, px, V, W / Dx[:, None], qx


def dense_kernel(g1: Graph, g2: Graph, **kw) -> float:
    M, b, px, *_ = dense_system(g1, g2, **kw)
    return float(px @ np.linalg.solve(M, b))


def series_kernel(g1: Graph, g2: Graph, **kw) -> float:
    """Σ_k p_x^T V (T V)^k q_x, truncated when a term falls below 1e-15 of the sum."""
    _, _, px, V, T, qx = dense_system(g1, g2, **kw)
    total = 0.0
    vec = V * qx  # paths of length 0: start, node kernel, stop
    for _k in range(200_000):
        term = float(px @ vec)
        total += term
        if abs(term) < 1e-15 * abs(total):
            return total
        vec = V * (T @ vec)  # one more step: transition × edge kernel, node kernel
    raise AssertionError("series did not converge")


def closed_form(n: int, m: int, q: float) -> float:
    return n * m * q**2 / (1 - (1 - q) ** 2)


# ---------------------------------------------------------------------- series definition
SERIES_CASES = [
    # (sizes, node kernel, edge kernel, q, p, weighted)
    ((2, 3), NODE_K, EDGE_K, 0.05, 1.0, True),
    ((4, 6), NODE_K, EDGE_K, 0.2, 1.0, False),
    ((5, 5), ONE, ONE, 0.1, 1.0, True),
    ((6, 3), ONE, SquareExponential(0.5, "e"), 0.05, 1.0, True),
    ((3, 6), NODE_K, EDGE_K, "qq", 1.0, True),  # non-uniform q from a node label field
    ((6, 4), NODE_K, EDGE_K, lambda g: 0.05 + 0.3 * np.arange(g.n_nodes) / g.n_nodes, "qq", True),
    ((2, 2), KroneckerDelta(0.5, "l") * SquareExponential(2.0, "qq"), EDGE_K, 0.3, 1.0, True),
]


@pytest.mark.parametrize("case", range(len(SERIES_CASES)))
def test_series_equals_solve(case):
    (n, m), nk, ek, q, p, weighted = SERIES_CASES[case]
    rng = np.random.default_rng(100 + case)
    g1 = random_graph(n, rng, density=0.7, weighted=weighted)
    g2 = random_graph(m, rng, density=0.7, weighted=weighted)
    kw = dict(nk=nk, ek=ek, q=q, p=p)
    ref_series = series_kernel(g1, g2, **kw)
    ref_dense = dense_kernel(g1, g2, **kw)
    # the derivation: the dense linear system equals the walk series
    assert ref_dense == pytest.approx(ref_series, rel=1e-12)
    kern = MarginalizedGraphKernel(node_kernel=nk, edge_kernel=ek, q=q, p=p, backend="cpu")
    K = kern([g1], [g2])
    assert K.shape == (1, 1)
    assert K[0, 0] == pytest.approx(ref_series, rel=1e-10)
    M, b, *_ = dense_system(g1, g2, **kw)
    x_ref = np.linalg.solve(M, b).reshape(n, m)
    for method in ("direct", "cg"):
        s1 = prepare_graph(g1, 0, nk, ek, p=p, q=q)
        s2 = prepare_graph(g2, 1, nk, ek, p=p, q=q)
        sol = solve_pair(s1, s2, nk, ek, method=method)
        assert sol.value == pytest.approx(ref_series, rel=1e-10)
        np.testing.assert_allclose(sol.x, x_ref, rtol=1e-9)  # the same system, entry by entry


def test_series_first_terms_by_hand():
    """Two single edges, unlabeled: K = Σ_k 4 q^2 (1-q)^(2k), and the solve matches it."""
    q = 0.3
    g = Graph(np.array([[0, 1], [1, 0]]))
    expect = 4 * q**2 / (1 - (1 - q) ** 2)
    assert series_kernel(g, g, nk=ONE, ek=ONE, q=q) == pytest.approx(expect, rel=1e-13)
    assert MarginalizedGraphKernel(q=q, backend="cpu")([g])[0, 0] == pytest.approx(expect, rel=1e-12)


# ---------------------------------------------------------------------- closed form
@pytest.mark.parametrize("q", [0.05, 0.5, 0.0005])
def test_closed_form_unlabeled(q):
    graphs = [
        Graph.from_networkx(nx.cycle_graph(7)),
        Graph.from_networkx(nx.path_graph(2)),
        Graph.from_networkx(nx.star_graph(9)),
        Graph.from_networkx(nx.complete_graph(5)),
        Graph.from_networkx(nx.newman_watts_strogatz_graph(60, 3, 0.1, seed=1)),  # 60x60 > direct limit
        random_graph(11, np.random.default_rng(0), density=1.0, weighted=True, labeled=False),  # weighted
    ]
    kern = MarginalizedGraphKernel(q=q, backend="exact")
    K = kern(graphs)
    n = np.array([g.n_nodes for g in graphs])
    np.testing.assert_allclose(K, closed_form(n[:, None], n[None, :], q), rtol=1e-10)
    assert kern.last_stats.converged.all()
    cg = kern.last_stats.iterations > 0
    assert cg[4, 4] and not cg[0, 0]
    assert kern.last_stats.iterations.max() <= 2  # x is constant: one PCG step (two with round-off)


# ---------------------------------------------------------------------- symmetry, permutation
def test_symmetry_cross_calls():
    rng = np.random.default_rng(7)
    X = [random_graph(n, rng) for n in (3, 5, 9)]
    Y = [random_graph(n, rng) for n in (4, 6)]
    kern = MarginalizedGraphKernel(NODE_K, EDGE_K, q=0.1, backend="cpu")
    np.testing.assert_allclose(kern(X, Y), kern(Y, X).T, rtol=1e-12)
    G = kern(X)
    np.testing.assert_array_equal(G, G.T)
    # the mirrored half equals a direct solve of the swapped pair
    assert G[2, 0] == pytest.approx(kern([X[2]], [X[0]])[0, 0], rel=1e-12)


def test_permutation_invariance_labeled():
    rng = np.random.default_rng(11)
    X = [random_graph(n, rng, density=0.5) for n in (5, 8, 12)] + [nws_graph(53, 3)]
    kern = MarginalizedGraphKernel(NODE_K, EDGE_K, q=0.05, backend="cpu")
    K = kern(X)
    for trial in range(3):
        Xp = [g.permute(rng.permutation(g.n_nodes)) for g in X]
        np.testing.assert_allclose(kern(Xp), K, rtol=1e-10, err_msg=f"trial {trial}")


def test_permutation_invariance_nonuniform_q_and_p():
    rng = np.random.default_rng(12)
    X = [random_graph(n, rng, density=0.6) for n in (4, 7, 10)]
    kern = MarginalizedGraphKernel(
        NODE_K, EDGE_K, q="qq", p=lambda g: 1.0 + g.node_labels["l"], backend="cpu"
    )
    K = kern(X)
    Xp = [g.permute(rng.permutation(g.n_nodes)) for g in X]
    np.testing.assert_allclose(kern(Xp), K, rtol=1e-10)


# ---------------------------------------------------------------------- SPD
@pytest.mark.parametrize("seed", range(4))
def test_system_is_spd(seed):
    rng = np.random.default_rng(seed)
    g1 = random_graph(int(rng.integers(2, 8)), rng, density=0.4)
    g2 = random_graph(int(rng.integers(2, 8)), rng, density=0.4)
    for kw in (dict(), dict(q="qq"), dict(nk=ONE, ek=ONE, q=0.0005)):
        M, *_ = dense_system(g1, g2, **kw)
        np.testing.assert_array_equal(M, M.T)
        assert np.linalg.eigvalsh(M).min() > 0


# ---------------------------------------------------------------------- normalization
def test_normalized_diagonal_and_bounds():
    rng = np.random.default_rng(5)
    X = [random_graph(n, rng) for n in (1, 2, 5, 9, 14)]
    kern = MarginalizedGraphKernel(NODE_K, EDGE_K, q=0.05, backend="cpu")
    K = kern(X)
    Kn = kern(X, normalize=True)
    np.testing.assert_allclose(np.diag(Kn), 1.0, rtol=1e-14)
    np.testing.assert_allclose(Kn, K / np.sqrt(np.outer(np.diag(K), np.diag(K))), rtol=1e-14)
    assert np.all(Kn <= 1 + 1e-12) and np.all(Kn > 0)
    assert np.linalg.eigvalsh(Kn).min() > -1e-12  # a positive semi-definite kernel
    Kxy = kern(X[:2], X[2:], normalize=True)
    np.testing.assert_allclose(Kxy, Kn[:2, 2:], rtol=1e-12)


# ---------------------------------------------------------------------- edge cases
def test_isolated_nodes_rowsum_taken_as_one():
    # nodes 2 and 3 are isolated
    A = np.zeros((4, 4))
    A[0, 1] = A[1, 0] = 1.5
    g = Graph(A, node_labels={"l": [0, 1, 0, 2]})
    h = random_graph(5, np.random.default_rng(1), density=0.3)
    s = prepare_graph(g, 0, NODE_K, ONE, q=0.2)
    np.testing.assert_allclose(s.d, np.array([1.5, 1.5, 1.0, 1.0]) / 0.8)
    kern = MarginalizedGraphKernel(NODE_K, ONE, q=0.2, backend="cpu")
    for other in (g, h):
        ref = series_kernel(g, other, nk=NODE_K, ek=ONE, q=0.2)
        assert kern([g], [other])[0, 0] == pytest.approx(ref, rel=1e-10)


def test_single_node_graphs():
    q = 0.2
    a = Graph(np.zeros((1, 1)), node_labels={"l": [1]})
    b = Graph(np.zeros((1, 1)), node_labels={"l": [2]})
    kern = MarginalizedGraphKernel(NODE_K, ONE, q=q, backend="cpu")
    # M = d^2 / V with d = 1 / (1 - q), b = d^2 q^2  =>  K = V q^2
    np.testing.assert_allclose(kern([a, b]), np.array([[1, 0.3], [0.3, 1]]) * q**2, rtol=1e-14)
    np.testing.assert_allclose(kern([a, b], normalize=True), [[1, 0.3], [0.3, 1]], rtol=1e-14)


@pytest.mark.parametrize("sizes", [(7, 9), (13, 17), (1, 15), (3, 31)])
def test_sizes_not_multiple_of_8(sizes):
    rng = np.random.default_rng(sum(sizes))
    g1, g2 = (random_graph(n, rng, density=0.3) for n in sizes)
    kern = MarginalizedGraphKernel(NODE_K, EDGE_K, q=0.05, backend="cpu")
    assert kern([g1], [g2])[0, 0] == pytest.approx(dense_kernel(g1, g2), rel=1e-10)


def test_mixed_sizes_in_one_call_match_reference():
    rng = np.random.default_rng(21)
    X = [random_graph(n, rng, density=0.4) for n in (1, 3, 6, 10, 16)]
    kern = MarginalizedGraphKernel(NODE_K, EDGE_K, q=0.1, backend="cpu")
    K = kern(X)
    ref = np.array([[dense_kernel(a, b, q=0.1) for b in X] for a in X])
    np.testing.assert_allclose(K, ref, rtol=1e-10)


def test_cross_matrix_equals_gram_blocks():
    rng = np.random.default_rng(22)
    X = [random_graph(n, rng) for n in (2, 7, 11)]
    Y = [random_graph(n, rng) for n in (5, 9)]
    kern = MarginalizedGraphKernel(NODE_K, EDGE_K, q=0.05, backend="cpu")
    G = kern(X + Y)
    np.testing.assert_allclose(kern(X, Y), G[:3, 3:], rtol=1e-12)
    np.testing.assert_allclose(kern(Y, X), G[3:, :3], rtol=1e-12)
    np.testing.assert_allclose(kern(X, X), G[:3, :3], rtol=1e-12)
    Gn = kern(X + Y, normalize=True)
    np.testing.assert_allclose(kern(X, Y, normalize=True), Gn[:3, 3:], rtol=1e-12)


def test_weighted_scaling():
    """Scaling all weights leaves the transitions, hence K, unchanged; reweighting one edge does not."""
    rng = np.random.default_rng(23)
    g = random_graph(6, rng, density=0.6)
    h = random_graph(5, rng, density=0.6)
    g3 = Graph(
        3.0 * g.adjacency,
        node_labels=g.node_labels,
        edge_labels={k: _dense_parts(g, 0.1)[1][k] for k in "eb"},
    )
    kern = MarginalizedGraphKernel(NODE_K, EDGE_K, q=0.1, backend="cpu")
    assert kern([g3], [h])[0, 0] == pytest.approx(kern([g], [h])[0, 0], rel=1e-12)
    A = g.adjacency.toarray()
    i, j = np.argwhere(A > 0)[0]
    A[i, j] = A[j, i] = A[i, j] * 4
    E = _dense_parts(g, 0.1)[1]
    g4 = Graph(A, node_labels=g.node_labels, edge_labels=E)
    k4 = kern([g4], [h])[0, 0]
    assert k4 == pytest.approx(dense_kernel(g4, h, q=0.1), rel=1e-10)
    assert abs(k4 - kern([g], [h])[0, 0]) > 1e-6 * k4


# ---------------------------------------------------------------------- CG vs direct, small q
@pytest.mark.parametrize("q", [0.05, 0.0005])
def test_cg_matches_direct(q):
    g1, g2 = nws_graph(40, 1), nws_graph(47, 2)
    s1 = prepare_graph(g1, 0, NODE_K, EDGE_K, q=q)
    s2 = prepare_graph(g2, 1, NODE_K, EDGE_K, q=q)
    cg = solve_pair(s1, s2, NODE_K, EDGE_K, method="cg")
    direct = solve_pair(s1, s2, NODE_K, EDGE_K, method="direct")
    assert cg.converged and direct.converged
    assert cg.iterations > 1 and direct.iterations == 0
    assert cg.value == pytest.approx(direct.value, rel=1e-9)
    np.testing.assert_allclose(cg.x, direct.x, rtol=1e-8)
    assert cg.residual <= 1e-12


def test_small_q_converges_through_cg():
    q = 0.0005
    X = [nws_graph(53, 4), nws_graph(61, 5)]
    assert X[0].n_nodes * X[1].n_nodes > DIRECT_MAX_UNKNOWNS
    kern = MarginalizedGraphKernel(NODE_K, EDGE_K, q=q, backend="cpu")
    K = kern(X)
    st_ = kern.last_stats
    assert st_.converged.all() and (st_.iterations > 10).all()
    assert (st_.residual <= 1e-12).all()
    ref = dense_kernel(X[0], X[1], q=q)
    assert K[0, 1] == pytest.approx(ref, rel=1e-9)


# ---------------------------------------------------------------------- stats and convergence handling
def test_last_stats_shapes_and_flags():
    rng = np.random.default_rng(30)
    X = [random_graph(n, rng) for n in (3, 4, 5)] + [nws_graph(60, 6)]
    Y = [random_graph(n, rng) for n in (6, 7)]
    kern = MarginalizedGraphKernel(NODE_K, EDGE_K, q=0.05, backend="exact")
    assert kern.last_stats is None
    kern(X)
    s = kern.last_stats
    assert s.backend == "exact" and s.shape == (4, 4) and s.pairs == 10
    for a in (s.iterations, s.residual, s.converged):
        assert a.shape == (4, 4)
        np.testing.assert_array_equal(a, a.T)
    assert s.converged.dtype == bool and s.converged.all()
    assert s.iterations[3, 3] > 0 and s.iterations[0, 0] == 0  # CG only for 3600 unknowns
    assert (s.residual <= 1e-10).all() and s.seconds > 0
    summ = s.summary()
    assert summ["pairs"] == 10 and summ["not_converged"] == 0 and summ["cg_iter_max"] == s.iterations.max()
    kern(X, Y, normalize=True)
    s = kern.last_stats
    assert s.shape == (4, 2) and s.iterations.shape == (4, 2) and s.pairs == 8 + 4 + 2


def _large_pair():
    return [nws_graph(60, 7)], [nws_graph(64, 8)]


def test_convergence_error_with_max_iter_1():
    X, Y = _large_pair()
    kern = MarginalizedGraphKernel(NODE_K, EDGE_K, q=0.05, backend="cpu", max_iter=1)
    with pytest.raises(ConvergenceError, match=r"1 of 1 .*max_iter=1"):
        kern(X, Y)
    assert kern.last_stats is not None and not kern.last_stats.converged.any()


def test_convergence_warn_mode_returns_flagged_values():
    X, Y = _large_pair()
    kern = MarginalizedGraphKernel(
        NODE_K, EDGE_K, q=0.05, backend="cpu", max_iter=1, on_nonconvergence="warn"
    )
    with pytest.warns(ConvergenceWarning, match="did not converge"):
        K = kern(X + Y)
    s = kern.last_stats
    assert np.isfinite(K).all() and K.shape == (2, 2)
    assert not s.converged.any() and (s.iterations == 1).all() and (s.residual > 1e-12).all()
    assert s.summary()["not_converged"] == 4
    exact = MarginalizedGraphKernel(NODE_K, EDGE_K, q=0.05, backend="cpu")(X + Y)
    assert not np.allclose(K, exact, rtol=1e-9)  # the flags mark values that are truly off


# ---------------------------------------------------------------------- property-based
@st.composite
def small_graphs(draw, labeled=True):
    n = draw(st.integers(1, 6))
    seed = draw(st.integers(0, 2**31 - 1))
    density = draw(st.sampled_from([0.0, 0.3, 0.6, 1.0]))
    weighted = draw(st.booleans())
    return random_graph(n, np.random.default_rng(seed), density=density, weighted=weighted, labeled=labeled)


PROPS = settings(
    max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)


@PROPS
@given(g1=small_graphs(), g2=small_graphs(), q=st.sampled_from([0.05, 0.2, 0.6, "qq"]))
def test_property_solve_equals_series(g1, g2, q):
    kern = MarginalizedGraphKernel(NODE_K, EDGE_K, q=q, backend="cpu")
    value = kern([g1], [g2])[0, 0]
    assert value == pytest.approx(series_kernel(g1, g2, q=q), rel=1e-10)
    assert value == pytest.approx(kern([g2], [g1])[0, 0], rel=1e-12)


@PROPS
@given(g1=small_graphs(labeled=False), g2=small_graphs(labeled=False), q=st.sampled_from([0.01, 0.3]))
def test_property_unlabeled(g1, g2, q):
    kern = MarginalizedGraphKernel(q=q, backend="cpu")
    value = kern([g1], [g2])[0, 0]
    assert value == pytest.approx(dense_kernel(g1, g2, nk=ONE, ek=ONE, q=q), rel=1e-10)
    if (g1.degree_sum() > 0).all() and (g2.degree_sum() > 0).all():
        assert value == pytest.approx(closed_form(g1.n_nodes, g2.n_nodes, q), rel=1e-10)


@PROPS
@given(g1=small_graphs(), g2=small_graphs(), seed=st.integers(0, 1000))
def test_property_permutation_invariance(g1, g2, seed):
    rng = np.random.default_rng(seed)
    kern = MarginalizedGraphKernel(NODE_K, EDGE_K, q=0.1, backend="cpu")
    K = kern([g1, g2])
    Kp = kern([g1.permute(rng.permutation(g1.n_nodes)), g2.permute(rng.permutation(g2.n_nodes))])
    np.testing.assert_allclose(Kp, K, rtol=1e-10)


def test_prepared_systems_are_reused_and_invalidated() -> None:
    """Repeated calls reuse the prepared systems; a changed q or kernel prepares anew."""
    import networkx as nx

    import mgkflow
    from mgkflow.kernels import Constant

    gs = [mgkflow.Graph.from_networkx(nx.cycle_graph(n)) for n in (4, 7, 9)]
    kern = mgkflow.MarginalizedGraphKernel(q=0.05, backend="cpu")
    K1 = kern(gs)
    first = [v[2] for v in kern._systems["X"].values()]
    K2 = kern(gs)
    assert all(a is b for a, b in zip(first, [v[2] for v in kern._systems["X"].values()], strict=True))
    np.testing.assert_array_equal(K1, K2)
    kern.q = 0.2
    K3 = kern(gs)
    assert not np.allclose(K1, K3)
    ref = mgkflow.MarginalizedGraphKernel(q=0.2, backend="cpu")(gs)
    np.testing.assert_allclose(K3, ref, rtol=1e-12)
    kern.edge_kernel = Constant(0.5)
    np.testing.assert_allclose(
        kern(gs), mgkflow.MarginalizedGraphKernel(edge_kernel=Constant(0.5), q=0.2, backend="cpu")(gs), rtol=1e-12
    )
