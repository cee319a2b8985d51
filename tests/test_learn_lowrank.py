"""LowRankGPR, the landmark choices and the contracted gradients (mgkflow.learn.lowrank, landmarks,
contract): cross blocks and their gradients against the joint Gram matrix and central differences,
contractions against the full dK, the low-rank objectives' gradients against central differences,
equality with the exact GP when every point is a landmark, the landmarks' properties, the
estimator's API."""

import pickle

import networkx as nx
import numpy as np
import pytest
from sklearn.base import clone
from sklearn.gaussian_process.kernels import RBF, DotProduct, Exponentiation, Matern, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C

from mgkflow import Graph, MarginalizedGraphKernel
from mgkflow.errors import ParameterError, ParameterTypeError
from mgkflow.kernels import KroneckerDelta
from mgkflow.learn import (
    Cached,
    ExpSimilarity,
    FeatureKernel,
    GraphGPR,
    LowRankGPR,
    Normalized,
    contracted_gradient,
    cross_kernel,
    kernel_diag,
    kmeans_plus_plus,
    pivoted_cholesky,
    random_landmarks,
)
from mgkflow.learn.lowrank import APPROXIMATIONS, lowrank_log_likelihood
from mgkflow.learn.objectives import log_marginal_likelihood


# ---------------------------------------------------------------------------- data
def _graphs(n=10, seed=0):
    """Small labeled graphs (4–7 nodes) with a 3-vector of graph features."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        size = int(rng.integers(4, 8))
        G = nx.cycle_graph(size) if i % 2 else nx.path_graph(size)
        if size > 4 and i % 3 == 0:
            G.add_edge(0, 2)
        A = nx.to_numpy_array(G)
        E = np.where(A > 0, rng.integers(1, 3, size=A.shape), 0)
        E = np.triu(E, 1) + np.triu(E, 1).T
        out.append(Graph(A, node_labels={"a": rng.integers(0, 3, size=size)}, edge_labels={"b": E},
                         features=rng.normal(size=3), title=f"g{i}"))
    return out


def _target(gs):
    return np.array([g.n_nodes + 0.5 * float(np.sum(g.node_labels["a"] == 1)) for g in gs])


def _mgk(free=True, normalize=True):
    hb = (0.05, 0.95) if free else "fixed"
    return MarginalizedGraphKernel(KroneckerDelta(0.5, "a", h_bounds=hb), KroneckerDelta(0.6, "b", h_bounds=hb),
                                   q=0.2, q_bounds=(0.01, 0.9) if free else "fixed", normalize=normalize,
                                   backend="exact")


GRAPH_KERNELS = {
    "mgk normalized": lambda: _mgk(),
    "mgk raw": lambda: _mgk(normalize=False),
    "molecular-like": lambda: (C(1.5) * ExpSimilarity(Cached(_mgk(free=False)), gamma=3.0)
                               + C(0.5) * FeatureKernel(RBF(2.0)) + WhiteKernel(0.1)),
    "free exp + features ARD": lambda: C(1.2) * ExpSimilarity(_mgk(), gamma=2.0) * FeatureKernel(RBF([1.0, 2.0, 3.0]))
    + WhiteKernel(0.05),
    "normalized raw + white": lambda: Normalized(_mgk(normalize=False) + WhiteKernel(0.01)),
    "power of normalized": lambda: Exponentiation(Normalized(C(2.0) * _mgk(normalize=False)), 2.0),
}

VECTOR_KERNELS = {
    "rbf ard": lambda: C(2.0) * RBF([1.0, 2.0]) + WhiteKernel(0.1),
    "matern * dot": lambda: Matern(1.2) * DotProduct(0.5) + WhiteKernel(0.1),  # the generic path
}


def _theta_fd(f, k, eps=1e-6):
    """Central differences of f(kernel) over the kernel's θ (stacked along the last axis)."""
    th = k.theta.copy()
    cols = []
    for j in range(th.size):
        e = np.zeros_like(th)
        e[j] = eps
        cols.append((np.asarray(f(k.clone_with_theta(th + e))) - np.asarray(f(k.clone_with_theta(th - e)))) / (2 * eps))
    return np.stack(cols, axis=-1)


def _rel(a, b):
    return np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-300)


# ---------------------------------------------------------------------------- contract
@pytest.mark.parametrize("name", sorted(GRAPH_KERNELS))
def test_cross_block_and_gradient_equal_the_joint_gram_block(name):
    k = GRAPH_KERNELS[name]()
    gs = _graphs(7)
    X, Y = gs[:4], gs[4:]
    K, dK = cross_kernel(k, X, Y, eval_gradient=True)
    J, dJ = k(X + Y, eval_gradient=True)
    assert dK.shape == (4, 3, k.n_dims)
    np.testing.assert_allclose(K, J[:4, 4:], rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(dK, dJ[:4, 4:], rtol=1e-9, atol=1e-13)
    np.testing.assert_allclose(cross_kernel(k, X, Y), k(X, Y), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("name", sorted(VECTOR_KERNELS))
def test_cross_block_of_vector_kernels(name):
    k = VECTOR_KERNELS[name]()
    rng = np.random.default_rng(3)
    A, B = rng.normal(size=(5, 2)), rng.normal(size=(3, 2))
    K, dK = cross_kernel(k, A, B, eval_gradient=True)
    J, dJ = k(np.vstack([A, B]), eval_gradient=True)
    np.testing.assert_allclose(K, J[:5, 5:], rtol=1e-12)
    np.testing.assert_allclose(dK, dJ[:5, 5:], rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("normalize", [True, False])
def test_graph_kernel_cross_gradient_against_central_differences(normalize):
    k = _mgk(normalize=normalize)
    gs = _graphs(5, seed=1)
    _, dK = cross_kernel(k, gs[:3], gs[3:], eval_gradient=True)
    fd = _theta_fd(lambda kk: kk(gs[:3], gs[3:]), k)
    assert _rel(dK, fd) <= 1e-6


def test_white_noise_is_left_out_of_cross_blocks_even_on_equal_points():
    X = np.array([[0.0], [1.0]])
    k = RBF(1.0) + WhiteKernel(0.5)
    np.testing.assert_allclose(cross_kernel(k, X, X), RBF(1.0)(X))
    gs = _graphs(3)
    kg = C(1.0) * _mgk() + WhiteKernel(0.5)
    np.testing.assert_allclose(cross_kernel(kg, gs, list(gs)), _mgk()(gs), rtol=1e-12)


@pytest.mark.parametrize("name", sorted(GRAPH_KERNELS))
def test_diagonal_with_and_without_noise(name):
    k = GRAPH_KERNELS[name]()
    gs = _graphs(4, seed=2)
    d = kernel_diag(k, gs, eval_gradient=True)
    K, dK = k(gs, eval_gradient=True)
    np.testing.assert_allclose(d.value, np.diag(K), rtol=1e-12)
    np.testing.assert_allclose(d.gradient, np.einsum("iih->ih", dK), rtol=1e-9, atol=1e-13)
    own = np.array([cross_kernel(k, [g], [g])[0, 0] for g in gs])
    np.testing.assert_allclose(d.signal, own, rtol=1e-12)
    fd = _theta_fd(lambda kk: kernel_diag(kk, gs).signal, k)
    np.testing.assert_allclose(d.signal_gradient, fd, rtol=1e-5, atol=1e-8)


@pytest.mark.parametrize("block_rows", [1, 3, 100])
def test_contracted_gradient_equals_the_full_contraction(block_rows):
    k = GRAPH_KERNELS["free exp + features ARD"]()
    gs = _graphs(8, seed=4)
    X, Y = gs[:6], gs[6:]
    K, dK = cross_kernel(k, X, Y, eval_gradient=True)
    rng = np.random.default_rng(0)
    W = rng.normal(size=(6, 2))
    K2, g = contracted_gradient(k, X, Y, W, block_rows=block_rows)
    np.testing.assert_allclose(K2, K, rtol=1e-13)
    full = np.einsum("ij,ijh->h", W, dK)
    assert _rel(g, full) <= 1e-6
    Ws = rng.normal(size=(3, 6, 2))  # several weight matrices at once
    _, gs3 = contracted_gradient(k, X, Y, Ws, block_rows=block_rows)
    assert _rel(gs3, np.einsum("rij,ijh->rh", Ws, dK)) <= 1e-6


def test_contracted_gradient_needs_weights_of_the_block_shape():
    X = np.zeros((3, 1))
    with pytest.raises(ParameterError, match="shape"):
        contracted_gradient(RBF(1.0), X, X[:2], np.ones((2, 3)))
    with pytest.raises(ParameterError, match="NaN"):
        contracted_gradient(RBF(1.0), X, X[:2], np.full((3, 2), np.nan))
    with pytest.raises(ParameterError, match="block_rows"):
        contracted_gradient(RBF(1.0), X, X[:2], np.ones((3, 2)), block_rows=0)


class _Counting(RBF):
    """An RBF whose calls are counted (a kernel the contraction knows only by the generic path)."""

    calls = 0

    def __call__(self, X, Y=None, eval_gradient=False):
        type(self).calls += 1
        return super().__call__(X, Y, eval_gradient)


def test_a_cache_keeps_the_blocks_of_fixed_cached_kernels():
    X = np.random.default_rng(0).normal(size=(6, 2))
    k = C(2.0) * Cached(_Counting(1.0, length_scale_bounds="fixed")) + WhiteKernel(0.1)
    cache: dict = {}
    _Counting.calls = 0
    first = cross_kernel(k, X, X[:2], eval_gradient=True, cache=cache, block_rows=4)
    calls = _Counting.calls
    assert calls == 2  # one per block
    again = contracted_gradient(k, X, X[:2], np.ones((6, 2)), block_rows=4, cache=cache)
    assert _Counting.calls == calls  # the same blocks: kept
    np.testing.assert_allclose(again[0], first[0])
    k.k1.k1.constant_value = 3.0  # a free hyperparameter outside the cached part changes: still kept
    cross_kernel(k, X, X[:2], cache=cache, block_rows=4)
    assert _Counting.calls == calls


def test_landmark_columns_serve_the_fit_and_the_graph_kernels_diagonal_is_kept():
    gs = _graphs(16, seed=11)
    mgk = _mgk(free=False)
    k = C(1.0) * ExpSimilarity(Cached(mgk), gamma=2.0) + WhiteKernel(0.1)
    cache: dict = {}
    idx = pivoted_cholesky(k, gs, 5, cache=cache, block_rows=6)
    Z = [gs[i] for i in idx]
    mgk.last_stats = None
    K = cross_kernel(k, gs, Z, cache=cache, block_rows=6)
    assert mgk.last_stats is None  # no graph-kernel solve: every column was kept
    np.testing.assert_allclose(K, k(gs, Z), rtol=1e-12)
    # a normalized graph kernel's cross block with a cache keeps X's self similarities
    cache = {}
    first = cross_kernel(mgk, gs, Z[:1], cache=cache)
    assert mgk.last_stats.pairs == 2 * len(gs)  # the column and X's self pairs (Z[0] is one of X's graphs)
    cols = np.hstack([first] + [cross_kernel(mgk, gs, [g], cache=cache) for g in Z[1:]])
    assert mgk.last_stats.pairs == len(gs)  # the column alone
    np.testing.assert_allclose(cols, mgk(gs, Z), rtol=1e-12)
    other = _graphs(2, seed=12)  # graphs outside X: solved as a cross block, with their self pairs
    block = cross_kernel(mgk, gs, other, cache=cache)
    assert mgk.last_stats.pairs == 2 * len(gs) + 2
    np.testing.assert_allclose(block, mgk(gs, other), rtol=1e-12)


def test_landmark_columns_over_all_of_x_serve_a_blocked_fit():
    """pivoted_cholesky computes each column over all of X in one call; the fit's K(X, Z) in row blocks
    takes the blocks' rows of those columns (no solve), and equals the kernel's block."""
    gs = _graphs(14, seed=13)
    mgk = _mgk(free=False)
    k = C(1.0) * ExpSimilarity(Cached(mgk), gamma=2.0) + WhiteKernel(0.1)
    cache: dict = {}
    idx = pivoted_cholesky(k, gs, 4, cache=cache, block_rows=5)
    assert "#rows" not in cache
    Z = [gs[i] for i in idx]
    mgk.last_stats = None
    K = cross_kernel(k, gs, Z, cache=cache, block_rows=5)
    assert mgk.last_stats is None  # every block's columns were found in the whole columns
    np.testing.assert_allclose(K, k(gs, Z), rtol=1e-12)


# ---------------------------------------------------------------------------- low-rank objective
@pytest.mark.parametrize("approximation", APPROXIMATIONS)
@pytest.mark.parametrize("fixed_graphs", [False, True])
def test_objective_gradient_against_central_differences(approximation, fixed_graphs):
    gs = _graphs(9, seed=5)
    y = _target(gs)
    y = (y - y.mean()) / y.std()
    inner = Cached(_mgk(free=False)) if fixed_graphs else _mgk()  # fixed: its K(X, Z) kept in the cache
    k = C(1.3) * ExpSimilarity(inner, gamma=2.0) + C(0.4) * FeatureKernel(RBF(2.0)) + WhiteKernel(0.2)
    Z = [gs[i] for i in (0, 3, 7)]
    value, g = lowrank_log_likelihood(k, gs, Z, y, approximation, eval_gradient=True, cache={})
    assert value == pytest.approx(lowrank_log_likelihood(k, gs, Z, y, approximation), rel=1e-13)
    fd = _theta_fd(lambda kk: lowrank_log_likelihood(kk, gs, Z, y, approximation), k, eps=1e-5)
    assert _rel(g, fd) <= 1e-6


@pytest.mark.parametrize("approximation", APPROXIMATIONS)
def test_objective_with_every_point_a_landmark_is_the_exact_evidence(approximation):
    gs = _graphs(8, seed=6)
    y = _target(gs)
    y = y - y.mean()
    k = C(1.0) * _mgk() + WhiteKernel(0.1)
    exact = log_marginal_likelihood(*k(gs, eval_gradient=True), y)
    value, g = lowrank_log_likelihood(k, gs, list(reversed(gs)), y, approximation, jitter=1e-12, eval_gradient=True)
    assert value == pytest.approx(exact[0], rel=1e-8)
    assert _rel(g, exact[1]) <= 1e-6


def test_the_variational_bound_grows_with_nested_landmarks_up_to_the_evidence():
    X = np.linspace(0, 8, 40)[:, None]
    y = np.sin(X[:, 0])
    k = RBF(1.0) + WhiteKernel(0.05)
    order = pivoted_cholesky(k, X, 40)
    bounds = [lowrank_log_likelihood(k, X, X[order[:m]], y, "vfe", jitter=1e-10) for m in (2, 4, 8, 16, 40)]
    exact = log_marginal_likelihood(*k(X, eval_gradient=True), y)[0]
    assert np.all(np.diff(bounds) >= -1e-8)
    assert bounds[-1] == pytest.approx(exact, rel=1e-7)
    assert all(b <= exact + 1e-8 for b in bounds)


@pytest.mark.parametrize("approximation", APPROXIMATIONS)
def test_with_every_point_a_landmark_the_model_is_the_exact_gp(approximation):
    gs = _graphs(12, seed=7)
    y = _target(gs)
    k = C(1.0) * _mgk(free=False) + WhiteKernel(0.1)
    exact = GraphGPR(k, optimize=False, verbose=0).fit(gs[:9], y[:9])
    low = LowRankGPR(k, n_landmarks=9, approximation=approximation, jitter=1e-12, optimize=False,
                     verbose=0).fit(gs[:9], y[:9])
    assert sorted(low.landmark_indices_.tolist()) == list(range(9))
    m0, s0 = exact.predict(gs[9:], return_std=True)
    m1, s1 = low.predict(gs[9:], return_std=True)
    np.testing.assert_allclose(m1, m0, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(s1, s0, rtol=1e-6, atol=1e-6)
    assert low.objective_value_ == pytest.approx(exact.objective_value_, rel=1e-7)


def test_fitted_hyperparameters_equal_the_exact_gps_with_every_point_a_landmark():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(25, 2))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=25)
    k = C(1.0) * RBF([1.0, 1.0]) + WhiteKernel(0.1)
    exact = GraphGPR(k, verbose=0).fit(X, y)
    low = LowRankGPR(k, n_landmarks=25, jitter=1e-12, verbose=0).fit(X, y)
    np.testing.assert_allclose(low.kernel_.theta, exact.kernel_.theta, atol=1e-4)
    np.testing.assert_allclose(low.predict(X[:5]), exact.predict(X[:5]), atol=1e-5)


def test_fit_on_graphs_with_few_landmarks():
    gs = _graphs(40, seed=8)
    y = np.array([np.sin(g.features[0]) + 0.5 * g.features[1] for g in gs])  # what the features tell
    k = C(1.0) * ExpSimilarity(Cached(_mgk(free=False)), gamma=2.0) + C(1.0) * FeatureKernel(RBF(1.0))
    k = k + WhiteKernel(0.1)
    # from θ0 the bound's best is all noise (a local optimum of sparse GPs); a restart finds the fit
    gp = LowRankGPR(k, n_landmarks=15, n_restarts=1, max_iter=40, random_state=0, verbose=0).fit(gs[:30], y[:30])
    assert gp.n_landmarks_ == 15 and gp.n_evaluations_ > 1
    assert gp.score(gs[30:], y[30:]) > 0.8
    mean, std = gp.predict(gs[30:], return_std=True)
    assert mean.shape == std.shape == (10,) and np.all(std > 0)


# ---------------------------------------------------------------------------- landmarks
def test_pivoted_cholesky_picks_distinct_points_and_its_residual_trace_decreases():
    gs = _graphs(12, seed=9)
    k = C(2.0) * _mgk() + WhiteKernel(0.3)
    idx, trace = pivoted_cholesky(k, gs, 8, return_trace=True)
    assert len(set(idx.tolist())) == 8 and trace.shape == (9,)
    assert np.all(np.diff(trace) <= 1e-12)
    assert trace[0] == pytest.approx(2.0 * len(gs))  # the signal's diagonal: no noise
    # the residual trace is that of K − K_nZ K_ZZ⁻¹ K_Zn
    K = cross_kernel(k, gs, gs)
    Z = idx[:5]
    resid = K - K[:, Z] @ np.linalg.solve(K[np.ix_(Z, Z)], K[Z, :])
    assert trace[5] == pytest.approx(np.trace(resid), rel=1e-8, abs=1e-10)
    assert trace[-1] < trace[0]


@pytest.mark.parametrize("prefetch", [2, 3, 64])
def test_pivoted_cholesky_fetching_columns_ahead_takes_the_same_points(prefetch):
    """Columns fetched several at a time (the points of largest residual) give the landmarks and
    residuals of one column per step, on graphs (a fixed graph kernel, kept) and on vectors."""
    gs = _graphs(14, seed=4)
    k = C(1.5) * ExpSimilarity(Cached(_mgk(free=False)), gamma=2.0) + C(0.5) * FeatureKernel(RBF(2.0)) \
        + WhiteKernel(0.2)
    X = np.random.default_rng(3).normal(size=(60, 2))
    for kern, data, m in ((k, gs, 10), (RBF(1.0) + WhiteKernel(0.1), X, 25)):
        one, t1 = pivoted_cholesky(kern, data, m, return_trace=True, prefetch=1)
        many, t2 = pivoted_cholesky(kern, data, m, return_trace=True, prefetch=prefetch, cache={})
        assert one.tolist() == many.tolist()
        np.testing.assert_allclose(t2, t1, rtol=1e-10, atol=1e-12)
    with pytest.raises(ParameterError, match="prefetch"):
        pivoted_cholesky(RBF(1.0), X, 3, prefetch=0)


def test_pivoted_cholesky_past_the_numerical_rank():
    X = np.array([[0.0], [0.0], [3.0], [3.0], [9.0]])  # duplicates: rank 3
    idx, trace = pivoted_cholesky(RBF(1.0), X, 5, return_trace=True)
    assert sorted(idx.tolist()) == [0, 1, 2, 3, 4]
    assert {int(i) for i in idx[:3]} in ({0, 2, 4}, {0, 3, 4}, {1, 2, 4}, {1, 3, 4})
    assert trace[3] == pytest.approx(0.0, abs=1e-10)


def test_kmeans_plus_plus_draws_distinct_points_and_never_a_duplicate_first():
    X = np.array([[0.0], [0.0], [0.0], [5.0], [10.0]])
    for seed in range(10):
        idx = kmeans_plus_plus(RBF(1.0), X, 3, random_state=seed)
        assert len(set(idx.tolist())) == 3
        assert len({0, 1, 2} & set(idx.tolist())) == 1  # two copies of a point are never both taken
    assert np.array_equal(kmeans_plus_plus(RBF(1.0), X, 5, random_state=1), kmeans_plus_plus(RBF(1.0), X, 5, 1))
    gs = _graphs(10)
    assert len(set(kmeans_plus_plus(_mgk(), gs, 6, random_state=0).tolist())) == 6


def test_random_landmarks_are_distinct_and_seeded():
    a = random_landmarks(np.zeros((20, 1)), 7, random_state=3)
    assert len(set(a.tolist())) == 7
    assert np.array_equal(a, random_landmarks(np.zeros((20, 1)), 7, random_state=3))


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda: pivoted_cholesky(RBF(1.0), np.zeros((3, 1)), 4), ParameterError),
        (lambda: pivoted_cholesky(RBF(1.0), np.zeros((3, 1)), 0), ParameterError),
        (lambda: pivoted_cholesky(RBF(1.0), np.zeros((3, 1)), 2, tol=2.0), ParameterError),
        (lambda: pivoted_cholesky("rbf", np.zeros((3, 1)), 2), ParameterTypeError),
        (lambda: kmeans_plus_plus(RBF(1.0), np.zeros((3, 1)), 2, random_state=-1), ParameterError),
        (lambda: random_landmarks("abc", 2), ParameterTypeError),
        (lambda: random_landmarks([], 1), ParameterError),
    ],
)
def test_landmark_arguments_raise_mgkflow_errors(call, error):
    with pytest.raises(error):
        call()


# ---------------------------------------------------------------------------- estimator API
def _small():
    X = np.linspace(0, 6, 30)[:, None]
    return X, np.sin(X[:, 0])


def test_clone_params_pickle_and_score():
    X, y = _small()
    gp = LowRankGPR(RBF(1.0) + WhiteKernel(1e-2), n_landmarks=8, landmarks="kmeans++", random_state=0, verbose=0)
    assert clone(gp).get_params()["n_landmarks"] == 8
    gp.fit(X, y)
    back = pickle.loads(pickle.dumps(gp))
    m0, s0 = gp.predict(X[:7], return_std=True)
    m1, s1 = back.predict(X[:7], return_std=True)
    np.testing.assert_array_equal(m0, m1)
    np.testing.assert_array_equal(s0, s1)
    assert gp.score(X, y) > 0.95
    assert not hasattr(gp, "_X")  # prediction needs only the landmarks
    assert len(gp.X_landmarks_) == 8


def test_pickle_round_trip_on_graphs():
    gs = _graphs(10, seed=10)
    y = _target(gs)
    gp = LowRankGPR(C(1.0) * Cached(_mgk(free=False)) + WhiteKernel(0.1), n_landmarks=4, max_iter=5,
                    verbose=0).fit(gs, y)
    back = pickle.loads(pickle.dumps(gp))
    np.testing.assert_allclose(back.predict(gs[:3]), gp.predict(gs[:3]), rtol=1e-12)


def test_landmarks_given_as_indices_and_more_landmarks_than_points():
    X, y = _small()
    gp = LowRankGPR(RBF(1.0) + WhiteKernel(1e-2), landmarks=[0, 10, 20, 29], optimize=False, verbose=0).fit(X, y)
    assert gp.landmark_indices_.tolist() == [0, 10, 20, 29]
    gp = LowRankGPR(RBF(1.0) + WhiteKernel(1e-2), n_landmarks=100, optimize=False, verbose=0).fit(X, y)
    assert gp.n_landmarks_ == 30


def test_restarts_and_progress_lines(capsys):
    X, y = _small()
    gp = LowRankGPR(RBF(1.0) + WhiteKernel(1e-2), n_landmarks=6, n_restarts=1, max_iter=5, random_state=0,
                    verbose=1).fit(X, y)
    err = capsys.readouterr().err
    assert "landmarks" in err and "restart 1" in err and "low-rank fit done" in err
    assert np.isfinite(gp.objective_value_)


@pytest.mark.parametrize(
    ("params", "error"),
    [
        ({"n_landmarks": 0}, ParameterError),
        ({"n_landmarks": 2.5}, ParameterError),
        ({"n_landmarks": True}, ParameterError),
        ({"landmarks": "greedy"}, ParameterError),
        ({"landmarks": 3}, ParameterTypeError),
        ({"landmarks": [0, 0]}, ParameterError),
        ({"landmarks": [0, 99]}, ParameterError),
        ({"landmarks": [0.5]}, ParameterTypeError),
        ({"approximation": "sor"}, ParameterError),
        ({"jitter": -1.0}, ParameterError),
        ({"jitter": float("nan")}, ParameterError),
        ({"normalize_y": "yes"}, ParameterTypeError),
        ({"n_restarts": -1}, ParameterError),
        ({"max_iter": 0}, ParameterError),
        ({"block_rows": 0}, ParameterError),
        ({"random_state": -3}, ParameterError),
        ({"verbose": "loud"}, ParameterError),
        ({"kernel": "rbf"}, ParameterTypeError),
        ({"kernel": RBF(1.0)}, ParameterError),  # no white noise
    ],
)
def test_bad_parameters_raise_mgkflow_errors(params, error):
    X, y = _small()
    gp = LowRankGPR(RBF(1.0) + WhiteKernel(1e-2), n_landmarks=5, verbose=0).set_params(**params)
    with pytest.raises(error):
        gp.fit(X, y)


def test_bad_data_and_unfitted_prediction_raise_mgkflow_errors():
    X, y = _small()
    gp = LowRankGPR(RBF(1.0) + WhiteKernel(1e-2), n_landmarks=5, verbose=0)
    with pytest.raises(ParameterError, match="not fitted"):
        gp.predict(X)
    with pytest.raises(ParameterError):
        gp.fit(X, y[:-1])
    with pytest.raises(ParameterError):
        gp.fit(X, np.where(np.arange(30) == 3, np.nan, y))
    with pytest.raises(ParameterTypeError):
        gp.fit(X, ["a"] * 30)
    with pytest.raises(ParameterTypeError):
        gp.fit("abc", y)
    gp.fit(X, y)
    with pytest.raises(ParameterTypeError):
        gp.predict(X, return_std="yes")


def test_a_fit_too_large_for_the_host_is_refused_before_any_work(monkeypatch):
    """A low-rank GP whose n × m arrays cannot fit the available memory: an mgkflow error naming the way out,
    raised before the kernel is evaluated (landmarks chosen by a method, or given)."""
    from mgkflow.gram.resources import ResourceError
    from mgkflow.learn._gram_tree import block_arrays
    from mgkflow.learn.lowrank import EXTRA_NM_ARRAYS

    calls = []

    class Counting(RBF):
        def __call__(self, X, Y=None, eval_gradient=False):
            calls.append(1)
            return super().__call__(X, Y, eval_gradient)

        def diag(self, X):
            calls.append(1)
            return super().diag(X)

    X, y = _small()
    kernel = C(1.0) * Counting(1.0) + WhiteKernel(0.1)
    arrays = block_arrays(kernel) + EXTRA_NM_ARRAYS
    need = 8 * 30 * 8 * arrays
    monkeypatch.setattr("mgkflow.gram.resources.host_available_bytes", lambda: need - 1)
    for landmarks in ("pivoted_cholesky", list(range(0, 30, 4))):
        gp = LowRankGPR(kernel, n_landmarks=8, landmarks=landmarks, verbose=0, max_iter=2)
        with pytest.raises(ResourceError, match=rf"30 points with 8 landmarks keeps about {arrays} arrays of 30 × 8"):
            gp.fit(X, y)
    assert not calls
    monkeypatch.setattr("mgkflow.gram.resources.host_available_bytes", lambda: need)
    with pytest.raises(ResourceError, match=rf"keeps about {arrays + 1} arrays"):  # the local correction keeps V too
        LowRankGPR(kernel, n_landmarks=8, verbose=0, max_iter=2, n_neighbors=4).fit(X, y)
    assert not calls
    assert LowRankGPR(kernel, n_landmarks=8, verbose=0, max_iter=2).fit(X, y).n_evaluations_ >= 1 and calls


def test_a_pickle_keeps_the_factors_lower_triangles_only():
    """The Cholesky factors travel as their lower triangles (about half the bytes); predictions after a round
    trip are bitwise the same, and a model pickled with full factors still loads."""
    X = np.random.default_rng(0).random((400, 3))
    y = X.sum(axis=1)
    gp = LowRankGPR(RBF(1.0) + WhiteKernel(1e-2), n_landmarks=150, verbose=0, max_iter=2).fit(X, y)
    full = gp.__dict__.copy()
    blob = pickle.dumps(gp)
    factors = 2 * 150 * 150 * 8
    assert len(blob) < len(pickle.dumps(full)) - 0.4 * factors
    back = pickle.loads(blob)
    np.testing.assert_array_equal(back._L_A, np.tril(gp._L_A))
    for a, b in zip(gp.predict(X[:20], return_std=True), back.predict(X[:20], return_std=True), strict=True):
        np.testing.assert_array_equal(a, b)
    old = LowRankGPR.__new__(LowRankGPR)
    old.__setstate__(full)  # an older pickle's state: full matrices
    np.testing.assert_array_equal(old.predict(X[:5]), gp.predict(X[:5]))


# ---------------------------------------------------------------------------- local correction (n_neighbors)
def _local_reference(gp, kernel, X, y, Xs, k, extra=0.0):
    """The local correction in dense numpy from its definition (lowrank.py's docstring): the low-rank mean and
    variance, then the exact GP of the residuals on each point's k nearest training points (cosine of the
    landmark features), under R = K − Q plus the noise (and ``extra`` more in the local GP)."""
    noise = kernel.k2.noise_level
    sig = kernel.k1
    Z = X[gp.landmark_indices_]
    Kmm = sig(Z)
    Kmm = Kmm + gp.jitter * np.mean(np.diag(Kmm)) * np.eye(len(Z))
    L = np.linalg.cholesky(Kmm)
    V = np.linalg.solve(L, sig(Z, X))
    Vs = np.linalg.solve(L, sig(Z, Xs))
    mu, sd = y.mean(), y.std()
    yn = (y - mu) / sd
    B = Kmm + sig(Z, X) @ sig(X, Z) / noise
    w = np.linalg.solve(B, sig(Z, X) @ yn / noise)
    base, base_tr = sig(Xs, Z) @ w, sig(X, Z) @ w
    var = sig.diag(Xs) + noise - np.sum(Vs * Vs, axis=0)
    var += np.einsum("ij,ji->i", sig(Xs, Z), np.linalg.solve(B, sig(Z, Xs)))
    cos = (Vs.T @ V) / np.outer(np.linalg.norm(Vs, axis=0), np.linalg.norm(V, axis=0))
    mean = base.copy()
    for t in range(len(Xs)):
        N = np.argsort(-cos[t])[:k]
        A = sig(X[N]) + (noise + extra) * np.eye(k) - V[:, N].T @ V[:, N]
        r = sig(Xs[t : t + 1], X[N])[0] - Vs[:, t] @ V[:, N]
        mean[t] += r @ np.linalg.solve(A, (yn - base_tr)[N])
        var[t] -= r @ np.linalg.solve(A, r)
    return mean * sd + mu, np.sqrt(var) * sd


def test_local_correction_matches_its_definition():
    rng = np.random.default_rng(3)
    X = rng.uniform(0, 6, (80, 2))
    y = np.sin(X[:, 0]) * np.cos(X[:, 1])
    Xs = rng.uniform(0, 6, (15, 2))
    kernel = RBF(0.8) + WhiteKernel(1e-3)
    gp = LowRankGPR(kernel, n_landmarks=12, optimize=False, n_neighbors=10, local_noise="fitted", verbose=0).fit(X, y)
    assert gp.local_noise_ == 0.0
    # with a noise of 1e-7 the left-out points choose more noise for the local GP (0.01 here), which enters its
    # definition as such
    tiny = RBF(0.8) + WhiteKernel(1e-7)
    auto = LowRankGPR(tiny, n_landmarks=12, optimize=False, n_neighbors=10, verbose=0).fit(X, y)
    assert 0 < auto.local_noise_ < np.inf
    for model, kern in ((gp, kernel), (auto, tiny)):
        mean, std = model.predict(Xs, return_std=True)
        ref_mean, ref_std = _local_reference(model, kern, X, y, Xs, 10, model.local_noise_)
        # the model keeps V in float32 (half the memory of a large fit): Q(N, N) carries its rounding, over a noise
        # of 1e-3 here; the correction itself is far larger than that tolerance
        assert np.allclose(mean, ref_mean, atol=5e-5)
        assert np.allclose(std, ref_std, atol=5e-5)
    mean, std = gp.predict(Xs, return_std=True)
    plain = LowRankGPR(kernel, n_landmarks=12, optimize=False, verbose=0).fit(X, y).predict(Xs)
    assert np.abs(mean - plain).max() > 1e-2
    assert np.array_equal(gp.predict(Xs), mean)
    gp.n_neighbors = 0  # switched off after the fit: the plain low-rank prediction
    assert np.allclose(gp.predict(Xs), plain, rtol=1e-12, atol=1e-12)


def test_local_correction_lowers_the_error_of_few_landmarks():
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 6, (300, 2))
    y = np.sin(X[:, 0]) * np.cos(X[:, 1])
    Xs = rng.uniform(0, 6, (60, 2))
    ys = np.sin(Xs[:, 0]) * np.cos(Xs[:, 1])
    kernel = RBF(0.7) + WhiteKernel(1e-4)
    plain = LowRankGPR(kernel, n_landmarks=20, optimize=False, verbose=0).fit(X, y)
    local = LowRankGPR(kernel, n_landmarks=20, optimize=False, n_neighbors=30, verbose=0).fit(X, y)
    assert np.array_equal(plain.landmark_indices_, local.landmark_indices_)
    err = [np.sqrt(np.mean((g.predict(Xs) - ys) ** 2)) for g in (plain, local)]
    assert err[1] < 0.7 * err[0]
    s_plain, s_local = plain.predict(Xs, return_std=True)[1], local.predict(Xs, return_std=True)[1]
    assert np.all(s_local <= s_plain + 1e-12)  # the local GP only takes variance away


def test_local_noise_rescues_the_correction_of_noise_free_fits():
    """With a fitted noise near zero the local systems are ill-conditioned: the correction with the fitted noise
    lands far above the plain low-rank error, the chosen noise well below it (module docstring)."""
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 6, (500, 2))
    y = np.sin(X[:, 0]) * np.cos(X[:, 1]) + 0.1 * X[:, 0]
    kernel = RBF(0.7, "fixed") + WhiteKernel(1e-7, "fixed")
    kw = {"n_landmarks": 30, "optimize": False, "verbose": 0}
    err = {}
    for name, extra in (("plain", {}), ("fitted", {"n_neighbors": 40, "local_noise": "fitted"}),
                        ("auto", {"n_neighbors": 40})):  # fmt: skip
        gp = LowRankGPR(kernel, **kw, **extra).fit(X[:400], y[:400])
        err[name] = np.sqrt(np.mean((gp.predict(X[400:]) - y[400:]) ** 2))
    assert err["fitted"] > 3 * err["plain"] and err["auto"] < 0.8 * err["plain"], err


def test_local_noise_switches_a_useless_correction_off():
    """Labels without structure: no local correction fits the left-out residuals better than the plain mean, so
    the model predicts with the plain mean (local_noise_ = inf); bad values of local_noise are refused."""
    rng = np.random.default_rng(5)
    X = rng.uniform(0, 6, (200, 2))
    y = rng.normal(size=200)
    kernel = RBF(0.5) + WhiteKernel(1e-2)
    kw = {"n_landmarks": 10, "optimize": False, "verbose": 0}
    gp = LowRankGPR(kernel, n_neighbors=20, **kw).fit(X, y)
    plain = LowRankGPR(kernel, **kw).fit(X, y)
    assert gp.local_noise_ == np.inf
    assert np.array_equal(gp.predict(X[:9], return_std=True)[0], plain.predict(X[:9], return_std=True)[0])
    for bad in ("none", 0.1, None):
        with pytest.raises(ParameterError, match="local_noise"):
            LowRankGPR(kernel, n_neighbors=5, local_noise=bad, **kw).fit(X, y)


def test_local_correction_pickles_and_refuses_bad_counts():
    rng = np.random.default_rng(1)
    X = rng.uniform(0, 6, (40, 1))
    y = np.sin(X[:, 0])
    gp = LowRankGPR(RBF(1.0) + WhiteKernel(1e-3), n_landmarks=5, optimize=False, n_neighbors=50, verbose=0)
    gp.fit(X, y)  # more neighbours than training points: all of them
    again = pickle.loads(pickle.dumps(gp))
    assert np.array_equal(again.predict(X[:7]), gp.predict(X[:7]))
    # a model pickled by session 25 kept the landmark features as an m × n array: loaded as rows
    old = gp.__getstate__()
    X_train, VT, norm, resid = old.pop("_local")
    old.pop("_local_rows")
    old["_local"] = (X_train, np.ascontiguousarray(VT.T), norm, resid)
    legacy = LowRankGPR.__new__(LowRankGPR)
    legacy.__setstate__(old)
    assert legacy._local[1].shape == VT.shape
    assert np.array_equal(legacy.predict(X[:7]), gp.predict(X[:7]))
    for bad in (-1, 1.5, True):
        with pytest.raises((ParameterError, ParameterTypeError), match="n_neighbors"):
            LowRankGPR(RBF(1.0) + WhiteKernel(1e-3), n_neighbors=bad).fit(X, y)


# ---------------------------------------------------------------------------- hyperparameter_sample
def _toy(n=300, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 6, (n, 2))
    return X, np.sin(X[:, 0]) * np.cos(X[:, 1]) + 0.01 * rng.normal(size=n)


def test_hyperparameter_sample_takes_the_exact_gps_hyperparameters():
    X, y = _toy(120)
    kernel = C(1.0) * RBF(1.0) + WhiteKernel(0.1)
    gp = LowRankGPR(kernel, n_landmarks=10, hyperparameter_sample=500, verbose=0, random_state=0).fit(X, y)
    # a sample of every point: the exact GP on all of them, fitted to the targets the low-rank GP scales
    exact = GraphGPR(kernel, normalize_y=False, verbose=0).fit(X, (y - y.mean()) / y.std())
    assert np.allclose(gp.kernel_.theta, exact.kernel_.theta, rtol=1e-10, atol=1e-12)
    assert gp.sample_seconds_ > 0 and gp.n_evaluations_ == exact.n_evaluations_
    # the landmarks are chosen with the fitted hyperparameters, the posterior built on every point
    fixed = LowRankGPR(exact.kernel_, n_landmarks=10, optimize=False, verbose=0).fit(X, y)
    assert np.array_equal(gp.landmark_indices_, fixed.landmark_indices_)
    assert np.allclose(gp.predict(X[:9]), fixed.predict(X[:9]), rtol=1e-10, atol=1e-12)


def test_hyperparameter_sample_avoids_the_dtc_noise():
    """DTC's evidence takes what 15 landmarks miss for noise; the exact GP on 150 of the 300 points does not."""
    X, y = _toy()
    kernel = C(1.0) * RBF(1.0) + WhiteKernel(0.1)
    dtc = LowRankGPR(kernel, n_landmarks=15, verbose=0, random_state=0).fit(X, y)
    sample = LowRankGPR(kernel, n_landmarks=15, hyperparameter_sample=150, verbose=0, random_state=0).fit(X, y)
    noise = [g.kernel_.k2.noise_level for g in (dtc, sample)]
    assert noise[1] < 0.1 * noise[0]
    local = LowRankGPR(kernel, n_landmarks=15, hyperparameter_sample=150, n_neighbors=20, verbose=0,
                       random_state=0).fit(X, y)  # fmt: skip
    Xs, ys = _toy(60, seed=1)
    err = [np.sqrt(np.mean((g.predict(Xs) - ys) ** 2)) for g in (dtc, sample, local)]
    assert err[2] < err[1]


@pytest.mark.parametrize("bad, error", [(1, ParameterError), (1.5, ParameterError), (True, ParameterError)])
def test_hyperparameter_sample_is_checked(bad, error):
    X, y = _toy(30)
    with pytest.raises(error, match="hyperparameter_sample"):
        LowRankGPR(RBF(1.0) + WhiteKernel(1e-2), n_landmarks=5, hyperparameter_sample=bad).fit(X, y)
    with pytest.raises(ParameterError, match="optimize=True"):
        LowRankGPR(RBF(1.0) + WhiteKernel(1e-2), hyperparameter_sample=10, optimize=False).fit(X, y)
