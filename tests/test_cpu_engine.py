"""The numba CPU backend (:mod:`mgkflow.backends.cpu`) against the exact scipy oracle (:mod:`mgkflow.backends.exact`).

Every path of the engine (cached / matrix-free / constant products, compiled / numpy-evaluated edge
kernels, one pair per thread / one pair over all threads) must give the oracle's values to ~1e-9.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from mgkflow import Graph, datasets
from mgkflow.backends.exact import ExactBackend
from mgkflow.errors import GraphError
from mgkflow.kernels import BaseKernel, Constant, KroneckerDelta, SquareExponential
from mgkflow.system import prepare_graph

pytest.importorskip("numba", reason="the numba CPU engine needs numba")
from mgkflow.backends import cpu as ce  # noqa: E402

RTOL = 1e-9


def systems(graphs, nk, ek, p=1.0, q=0.05):
    return [prepare_graph(g, i, nk, ek, p=p, q=q) for i, g in enumerate(graphs)]


def gram_pairs(n):
    iu, ju = np.triu_indices(n)
    return np.stack([iu, ju], axis=1)


def cross_pairs(n, m):
    ii, jj = np.meshgrid(np.arange(n), np.arange(m), indexing="ij")
    return np.stack([ii.ravel(), jj.ravel()], axis=1)


def check_against_oracle(xs, ys, pairs, nk, ek, **kw):
    ref, ref_it, _, ref_ok = ExactBackend().solve(xs, ys, pairs, nk, ek)
    be = ce.NumbaCPUBackend(**kw)
    vals, its, res, ok = be.solve(xs, ys, pairs, nk, ek)
    np.testing.assert_allclose(vals, ref, rtol=RTOL, atol=0)
    assert ok.all() and ref_ok.all()
    assert np.all(res <= 1e-12)
    assert np.all(its > 0)
    return be


# ---------------------------------------------------------------------- graphs
def weighted_graph(n, seed, isolated=True):
    """Random weighted graph with node labels l (int) and edge labels e (float), b (int); node n-1 isolated."""
    rng = np.random.default_rng(seed)
    upper = np.triu(rng.random((n, n)) < 0.3, 1)
    if isolated:
        upper[:, n - 1] = False
    W = np.where(upper, rng.uniform(0.5, 2.0, (n, n)), 0.0)
    E = np.triu(rng.uniform(0.0, 3.0, (n, n)), 1)
    B = np.triu(rng.integers(0, 3, (n, n)), 1)
    return Graph(
        W + W.T,
        node_labels={"l": rng.integers(0, 3, n), "qq": rng.uniform(0.05, 0.4, n), "pp": rng.uniform(0, 2, n)},
        edge_labels={"e": E + E.T, "b": B + B.T},
        title=f"w{seed}",
    )


NWS_K = (KroneckerDelta(0.5, "label"), SquareExponential(1.0, "length"))
PATHS = [
    pytest.param({}, id="cached-compiled"),
    pytest.param({"compiled_kernels": False}, id="cached-numpy"),
    pytest.param({"cache_bytes": 0}, id="free-compiled"),
    pytest.param({"cache_bytes": 0, "compiled_kernels": False}, id="free-numpy"),
]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("kw", PATHS)
def test_labeled_nws_gram_matches_oracle(kw, threads):
    xs = systems(datasets.nws(n_graphs=3, labeled=True), *NWS_K)
    be = check_against_oracle(xs, xs, gram_pairs(3), *NWS_K, threads=threads, **kw)
    expect = "pairs_matrix_free" if kw.get("cache_bytes") == 0 else "pairs_cached"
    assert be.last_extra[expect] == 6 and be.last_extra["threads"] == threads


@pytest.mark.parametrize("kw", PATHS)
def test_one_pair_over_all_threads_matches_oracle(kw, monkeypatch):
    # every pair counts as large: its rows are spread over the threads
    monkeypatch.setattr(ce, "_BIG_EDGE_PAIRS", 0)
    xs = systems(datasets.nws(n_graphs=2, labeled=True), *NWS_K)
    check_against_oracle(xs, xs, gram_pairs(2), *NWS_K, threads=2, **kw)


@pytest.mark.parametrize("budget", [4000, 330_000])
def test_small_budget_blocks_the_numpy_matrix_free_path(monkeypatch, budget):
    # 4000 bytes: a few edge rows per numpy block, x gathered on the fly; 330 kB: the 206 x 206
    # products (339 kB) do not fit, the gathered x (96 x 206 x 8 = 158 kB) does
    monkeypatch.setattr(ce, "_BIG_EDGE_PAIRS", 0)
    xs = systems(datasets.nws(n_graphs=2, labeled=True), *NWS_K)
    assert [g.nnz for g in (xs[0].graph, xs[1].graph)] == [206, 206]
    be = check_against_oracle(xs, xs, [(0, 1)], *NWS_K, threads=2, cache_bytes=budget, compiled_kernels=False)
    assert be.last_extra["pairs_matrix_free"] == 1


def test_ba_labeled_and_unlabeled_constant_kernels():
    gs = datasets.ba(n_graphs=3, n=40, m=3, labeled=True)
    xs = systems(gs, *NWS_K)
    check_against_oracle(xs, xs, gram_pairs(3), *NWS_K, threads=2)
    for ek in (Constant(1.0), Constant(0.3)):
        us = systems(datasets.ba(n_graphs=3, n=40, m=3), Constant(1.0), ek)
        be = check_against_oracle(us, us, gram_pairs(3), Constant(1.0), ek, threads=2)
        assert be.last_extra["pairs_constant"] == 6


def test_constant_edge_kernel_over_all_threads(monkeypatch):
    monkeypatch.setattr(ce, "_BIG_EDGE_PAIRS", 0)
    us = systems(datasets.nws(n_graphs=2), Constant(1.0), Constant(0.5))
    check_against_oracle(us, us, gram_pairs(2), Constant(1.0), Constant(0.5), threads=2)


@pytest.mark.parametrize("compiled", [True, False])
def test_drugs_product_and_sum_kernels(compiled):
    gs = datasets.drugs(n_graphs=4, coords=False)
    nk = KroneckerDelta(0.5, "element") * KroneckerDelta(0.8, "charge")
    ek = 0.5 * KroneckerDelta(0.5, "bond_order") + 0.5 * (KroneckerDelta(0.3, "in_ring") * Constant(0.9))
    xs = systems(gs, nk, ek)
    check_against_oracle(xs, xs, gram_pairs(4), nk, ek, threads=2, compiled_kernels=compiled)


def test_weighted_graphs_isolated_node_p_q_vectors_cross_matrix():
    nk = KroneckerDelta(0.3, "l")
    ek = SquareExponential(0.8, "e") * KroneckerDelta(0.6, "b")
    X = [weighted_graph(n, s) for s, n in enumerate([7, 12, 9])]
    Y = [weighted_graph(n, 10 + s) for s, n in enumerate([11, 5])]
    xs = [prepare_graph(g, i, nk, ek, p="pp", q="qq") for i, g in enumerate(X)]
    ys = [prepare_graph(g, i, nk, ek, p=lambda g: np.linspace(0.1, 1, g.n_nodes), q=0.2) for i, g in enumerate(Y)]
    for kw in ({}, {"cache_bytes": 0}, {"compiled_kernels": False}):
        check_against_oracle(xs, ys, cross_pairs(3, 2), nk, ek, threads=2, **kw)


def test_edgeless_graph_and_single_node():
    g0 = Graph(np.zeros((3, 3)), node_labels={"l": np.array([0, 1, 1])}, edge_labels={"e": np.zeros((3, 3))})
    g1 = Graph(np.zeros((1, 1)), node_labels={"l": np.array([1])}, edge_labels={"e": np.zeros((1, 1))})
    g2 = weighted_graph(6, 3)
    nk, ek = KroneckerDelta(0.5, "l"), SquareExponential(1.0, "e")
    xs = systems([g0, g1, g2], nk, ek)
    ref, *_ = ExactBackend().solve(xs, xs, gram_pairs(3), nk, ek)
    vals, its, res, ok = ce.NumbaCPUBackend(threads=2).solve(xs, xs, gram_pairs(3), nk, ek)
    np.testing.assert_allclose(vals, ref, rtol=RTOL)
    assert ok.all()


class HalfDelta(BaseKernel):
    """A kernel type the engine does not know: evaluated through its numpy __call__."""

    fields = ("b",)

    def __call__(self, x, y):
        return np.where(np.asarray(x["b"]) == np.asarray(y["b"]), 1.0, 0.25)

    @property
    def range(self):
        return KroneckerDelta(0.25, "b").range


def test_unknown_kernel_type_uses_the_numpy_path():
    assert ce.compile_edge_program(HalfDelta()) is None
    assert ce.compile_edge_program(HalfDelta() * Constant(0.5)) is None
    nk = KroneckerDelta(0.3, "l")
    xs = systems([weighted_graph(n, s) for s, n in enumerate([8, 10])], nk, HalfDelta())
    check_against_oracle(xs, xs, gram_pairs(2), nk, HalfDelta(), threads=2)
    check_against_oracle(xs, xs, gram_pairs(2), nk, HalfDelta(), threads=1, cache_bytes=0)


def test_kronecker_codes_follow_numpy_equality():
    # float labels shared between graphs of a call get the same code; distinct ones differ
    gs = [weighted_graph(8, s) for s in range(2)]
    prog = ce.compile_edge_program(KroneckerDelta(0.5, "b") * SquareExponential(1.0, "e"))
    xs = systems(gs, Constant(1.0), Constant(1.0))
    f0, f1 = ce._edge_features(prog, xs)
    b0, b1 = gs[0].edge_labels["b"], gs[1].edge_labels["b"]
    np.testing.assert_array_equal(f0[0][:, None] == f1[0][None, :], b0[:, None] == b1[None, :])
    np.testing.assert_array_equal(f1[1], gs[1].edge_labels["e"])


def test_progress_counts_every_pair_once():
    xs = systems(datasets.nws(n_graphs=3, labeled=True), *NWS_K)
    for threads in (1, 2):
        calls = []
        ce.NumbaCPUBackend(threads=threads).solve(xs, xs, gram_pairs(3), *NWS_K, progress=calls.append)
        assert sum(calls) == 6 and min(calls) >= 1


def test_not_converged_is_reported_like_the_oracle():
    xs = systems(datasets.nws(n_graphs=2, labeled=True), *NWS_K)
    _, its, res, ok = ce.NumbaCPUBackend(max_iter=3, threads=2).solve(xs, xs, gram_pairs(2), *NWS_K)
    assert not ok.any() and np.all(its == 3) and np.all(res > 1e-12)


def test_zero_node_kernel_value_is_a_graph_error():
    nk = KroneckerDelta(0.0, "l")
    xs = systems([weighted_graph(5, 0), weighted_graph(6, 1)], nk, Constant(1.0))
    with pytest.raises(GraphError, match="node kernel is 0.0"):
        ce.NumbaCPUBackend(threads=2).solve(xs, xs, [(0, 1)], nk, Constant(1.0))


@pytest.mark.parametrize("bad", [{"threads": 0}, {"threads": 1.5}, {"threads": True}, {"cache_bytes": -1}])
def test_bad_options(bad):
    with pytest.raises(ValueError, match=next(iter(bad))):
        ce.NumbaCPUBackend(**bad)


def test_empty_pair_list():
    vals, its, res, ok = ce.NumbaCPUBackend().solve([], [], np.empty((0, 2), dtype=int), *NWS_K)
    assert vals.shape == its.shape == res.shape == ok.shape == (0,)


def test_out_of_memory_names_the_pair(monkeypatch):
    xs = systems(datasets.nws(n_graphs=2, labeled=True), *NWS_K)

    def no_memory(*args, **kwargs):
        raise MemoryError("Unable to allocate")

    monkeypatch.setattr(ce._Context, "_solve_pair", no_memory)
    monkeypatch.setattr(ce, "_solve_batch", no_memory)  # a batch out of memory leaves its pairs to the per-pair path
    with pytest.raises(MemoryError, match=r"pair \(graph 0 .*96 x 96 = 9216 unknowns"):
        ce.NumbaCPUBackend(threads=1).solve(xs, xs, [(0, 1)], *NWS_K)


def test_compiled_exp_is_within_two_ulp_of_numpy():
    rng = np.random.default_rng(0)
    x = np.concatenate([-rng.exponential(30.0, 20_000), rng.uniform(-1, 1, 1000), [0.0, -1e-300, -700.0, -707.9]])
    v = x.copy()
    ce._exp_inplace(v, np.empty(len(v), dtype=np.int64))
    np.testing.assert_allclose(v, np.exp(x), rtol=4.5e-16, atol=0)
    # below exp(-708) (subnormal range) the engine returns 0
    v = np.array([-708.5, -800.0, -np.inf, np.nan])
    ce._exp_inplace(v, np.empty(4, dtype=np.int64))
    np.testing.assert_array_equal(v, [0.0, 0.0, 0.0, np.nan])


@pytest.mark.parametrize("kw", [{}, {"cache_bytes": 0}])
def test_nodal_blocks_match_the_oracle_solution(kw, monkeypatch):
    from mgkflow.backends.exact import solve_pair

    nk = KroneckerDelta(0.3, "l")
    ek = SquareExponential(0.8, "e") * KroneckerDelta(0.6, "b")
    X = [weighted_graph(n, s) for s, n in enumerate([7, 12])]
    xs = [prepare_graph(g, i, nk, ek, p="pp", q="qq") for i, g in enumerate(X)]
    pairs = gram_pairs(2)
    be = ce.NumbaCPUBackend(threads=2, **kw)
    for big in (False, True):
        if big:
            monkeypatch.setattr(ce, "_BIG_EDGE_PAIRS", 0)
        blocks, its, res, ok = be.solve_nodal(xs, xs, pairs, nk, ek)
        vals = be.solve(xs, xs, pairs, nk, ek)[0]
        for t, (i, j) in enumerate(pairs):
            ref = np.outer(xs[i].p, xs[j].p) * solve_pair(xs[i], xs[j], nk, ek).x
            assert blocks[t].shape == (xs[i].n, xs[j].n)
            np.testing.assert_allclose(blocks[t], ref, rtol=1e-9, atol=1e-12 * np.abs(ref).max())
            assert blocks[t].sum() == pytest.approx(vals[t], rel=1e-12)
        assert ok.all()


@pytest.mark.parametrize("c", [1e-150, 1e-40, 1e40, 1e150])
def test_scaling_every_weight_leaves_k_unchanged(c):
    # K is invariant under A -> c A; the right-hand side is scaled by a power of two inside
    nk = KroneckerDelta(0.3, "l")
    ek = SquareExponential(0.8, "e")
    gs = [weighted_graph(n, s, isolated=False) for s, n in enumerate([9, 12])]  # (an isolated node has d = 1)
    scaled = [
        Graph(c * g.adjacency.toarray(), node_labels=dict(g.node_labels),
              edge_labels={"e": _dense(g, "e")}) for g in gs
    ]  # fmt: skip
    ref = ce.NumbaCPUBackend(threads=2).solve(systems(gs, nk, ek), systems(gs, nk, ek), gram_pairs(2), nk, ek)[0]
    xs = systems(scaled, nk, ek)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        vals, _, _, ok = ce.NumbaCPUBackend(threads=2).solve(xs, xs, gram_pairs(2), nk, ek)
    assert ok.all()
    np.testing.assert_allclose(vals, ref, rtol=1e-9)


def _dense(g, field):
    A = g.adjacency
    out = np.zeros(A.shape)
    rows, cols = g.coo()
    out[rows, cols] = g.edge_labels[field]
    return out


def test_degree_products_underflowing_are_a_clear_error():
    """Weights 1e-300 and 9.3 in one graph: d_i d_j would underflow; an mgkflow error naming the graph
    (at preparation, the same for every backend: docs/design.md §1.3), no warning."""
    import warnings

    from mgkflow import Graph, GraphError, MarginalizedGraphKernel

    A = np.zeros((6, 6))
    A[3, 4] = A[4, 3] = 9.323598234705845
    A[1, 5] = A[5, 1] = 1e-300
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for backend in ("cpu", "exact"):
            with pytest.raises(GraphError, match=r"graph 0: edge weights span more than float64 .* node 1"):
                MarginalizedGraphKernel(q=0.1, backend=backend)([Graph(A)])


# ---------------------------------------------------------------------- gradients
def check_gradient_against_oracle(xs, ys, pairs, nk, ek, wrt_q=False, **kw):
    ref_v, ref_g, _, _, ref_ok = ExactBackend().solve_gradient(xs, ys, pairs, nk, ek, wrt_q=wrt_q)
    vals, grads, its, res, ok = ce.NumbaCPUBackend(**kw).solve_gradient(xs, ys, pairs, nk, ek, wrt_q=wrt_q)
    nh = len(nk.hyperparameters) + len(ek.hyperparameters) + int(wrt_q)
    assert grads.shape == ref_g.shape == (len(pairs), nh)
    np.testing.assert_allclose(vals, ref_v, rtol=RTOL, atol=0)
    # normwise per pair: a derivative can cancel to ~0 while its neighbours are O(1)
    err = np.linalg.norm(grads - ref_g, axis=1) / np.linalg.norm(ref_g, axis=1)
    assert np.all(err <= RTOL), err
    assert ok.all() and ref_ok.all() and np.all(res <= 1e-12) and np.all(its > 0)
    return grads


NWS_KG = (KroneckerDelta(0.5, "label", h_bounds=(1e-3, 1)), SquareExponential(1.0, "length"))


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("kw", PATHS)
def test_gradient_labeled_nws_matches_oracle(kw, threads):
    xs = systems(datasets.nws(n_graphs=3, labeled=True), *NWS_KG)
    check_gradient_against_oracle(xs, xs, gram_pairs(3), *NWS_KG, wrt_q=True, threads=threads, **kw)


@pytest.mark.parametrize("kw", [{}, {"compiled_kernels": False}, {"cache_bytes": 0}])
def test_gradient_one_pair_over_all_threads(kw, monkeypatch):
    monkeypatch.setattr(ce, "_BIG_EDGE_PAIRS", 0)
    xs = systems(datasets.nws(n_graphs=2, labeled=True), *NWS_KG)
    check_gradient_against_oracle(xs, xs, gram_pairs(2), *NWS_KG, wrt_q=True, threads=2, **kw)


def test_gradient_ba_sum_of_products_and_constant_edge_kernel():
    gs = datasets.ba(n_graphs=3, n=30, m=3, labeled=True)
    nk = KroneckerDelta(0.4, "label") * KroneckerDelta(0.9, "label")
    ek = 0.5 * SquareExponential(2.0, "length") + KroneckerDelta(0.7, "length") * SquareExponential(0.5, "length")
    xs = systems(gs, nk, ek)
    check_gradient_against_oracle(xs, xs, gram_pairs(3), nk, ek, wrt_q=True, threads=2)
    # a Constant edge kernel with a free c: the factorized product, no edge pairs
    ec = Constant(0.6, c_bounds=(0.1, 1.0))
    us = systems(datasets.ba(n_graphs=3, n=30, m=3), Constant(1.0), ec)
    grads = check_gradient_against_oracle(us, us, gram_pairs(3), Constant(1.0), ec, wrt_q=True, threads=2)
    assert np.all(grads[:, 1] > 0)  # dK/dc: a larger edge kernel, a larger K


@pytest.mark.parametrize("compiled", [True, False])
def test_gradient_drugs(compiled):
    gs = datasets.drugs(n_graphs=4, coords=False)
    nk = KroneckerDelta(0.5, "element") * KroneckerDelta(0.8, "charge")
    ek = 0.5 * KroneckerDelta(0.5, "bond_order") + 0.5 * (KroneckerDelta(0.3, "in_ring") * Constant(0.9))
    xs = systems(gs, nk, ek)
    check_gradient_against_oracle(xs, xs, gram_pairs(4), nk, ek, wrt_q=True, threads=2, compiled_kernels=compiled)


def test_gradient_weighted_graphs_isolated_node_p_q_vectors():
    nk = KroneckerDelta(0.3, "l")
    ek = SquareExponential(0.8, "e") * KroneckerDelta(0.6, "b")
    X = [weighted_graph(n, s) for s, n in enumerate([7, 12, 9])]
    Y = [weighted_graph(n, 10 + s) for s, n in enumerate([11, 5])]
    xs = [prepare_graph(g, i, nk, ek, p="pp", q="qq") for i, g in enumerate(X)]
    ys = [prepare_graph(g, i, nk, ek, p=lambda g: np.linspace(0.1, 1, g.n_nodes), q=0.2) for i, g in enumerate(Y)]
    for kw in ({}, {"cache_bytes": 0}, {"compiled_kernels": False}):
        check_gradient_against_oracle(xs, ys, cross_pairs(3, 2), nk, ek, threads=2, **kw)
    # dK/dq needs one scalar q: the same error as the oracle
    with pytest.raises(ValueError, match="scalar q"):
        ce.NumbaCPUBackend(threads=2).solve_gradient(xs, ys, [(0, 0)], nk, ek, wrt_q=True)
    # a scalar q with the isolated node
    zs = systems(X, nk, ek, q=0.1)
    check_gradient_against_oracle(zs, zs, gram_pairs(3), nk, ek, wrt_q=True, threads=2)


def test_gradient_kernel_the_compiler_does_not_know_and_progress():
    from mgkflow.kernels import RationalQuadratic

    nk = KroneckerDelta(0.3, "l")
    ek = RationalQuadratic(0.7, 1.5, "e") * KroneckerDelta(0.6, "b")
    assert ce.compile_edge_program(ek) is None
    xs = systems([weighted_graph(n, s) for s, n in enumerate([8, 10])], nk, ek)
    check_gradient_against_oracle(xs, xs, gram_pairs(2), nk, ek, wrt_q=True, threads=2)
    check_gradient_against_oracle(xs, xs, gram_pairs(2), nk, ek, threads=1, cache_bytes=0)
    calls = []
    ce.NumbaCPUBackend(threads=2).solve_gradient(xs, xs, gram_pairs(2), nk, ek, progress=calls.append)
    assert calls == [1, 1, 1]


def test_gradient_finite_difference():
    # independent of the oracle: dK/dh against central differences of the engine's own values
    gs = datasets.nws(n_graphs=2, labeled=True)
    h, ls, q, eps = 0.5, 1.0, 0.1, 1e-5

    def value(h, ls, q):
        nk, ek = KroneckerDelta(h, "label"), SquareExponential(ls, "length")
        xs = systems(gs, nk, ek, q=q)
        return ce.NumbaCPUBackend(threads=2).solve(xs, xs, [(0, 1)], nk, ek)[0][0]

    nk, ek = KroneckerDelta(h, "label"), SquareExponential(ls, "length")
    xs = systems(gs, nk, ek, q=q)
    _, grads, *_ = ce.NumbaCPUBackend(threads=2).solve_gradient(xs, xs, [(0, 1)], nk, ek, wrt_q=True)
    fd = [
        (value(h + eps, ls, q) - value(h - eps, ls, q)) / (2 * eps),
        (value(h, ls + eps, q) - value(h, ls - eps, q)) / (2 * eps),
        (value(h, ls, q + eps) - value(h, ls, q - eps)) / (2 * eps),
    ]
    np.testing.assert_allclose(grads[0], fd, rtol=1e-6)


@pytest.mark.parametrize("normalize", [False, True])
def test_gradient_through_the_kernel_matches_the_exact_backend(normalize):
    from mgkflow import MarginalizedGraphKernel

    gs = datasets.drugs(n_graphs=4, coords=False)
    nk = KroneckerDelta(0.5, "element") * KroneckerDelta(0.8, "charge")
    ek = KroneckerDelta(0.5, "bond_order") * KroneckerDelta(0.3, "in_ring")
    out = {}
    for backend in ("cpu", "exact"):
        kern = MarginalizedGraphKernel(nk, ek, q=0.1, backend=backend, normalize=normalize)
        out[backend] = kern(gs, eval_gradient=True)
    np.testing.assert_allclose(out["cpu"][0], out["exact"][0], rtol=RTOL)
    dk, ref = out["cpu"][1], out["exact"][1]
    assert dk.shape == ref.shape == (4, 4, 5)
    assert np.linalg.norm(dk - ref) <= RTOL * np.linalg.norm(ref)


@pytest.mark.parametrize("compiled", [True, False])
def test_gradient_node_kernel_sum_with_square_exponential(compiled):
    # the node kernel's compiled derivatives: a sum with a square exponential on a float label
    nk = 0.5 * KroneckerDelta(0.3, "l") + 0.5 * SquareExponential(0.4, "pp")
    ek = Constant(0.5) * SquareExponential(0.8, "e")
    xs = systems([weighted_graph(n, s) for s, n in enumerate([7, 9, 6])], nk, ek, q=0.1)
    check_gradient_against_oracle(xs, xs, gram_pairs(3), nk, ek, wrt_q=True, threads=2, compiled_kernels=compiled)
