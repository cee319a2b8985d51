"""MarginalizedGraphKernel as a scikit-learn kernel: API contract, composition, estimators,
diag, nodal similarities."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

pytest.importorskip("sklearn")

from sklearn.base import clone  # noqa: E402
from sklearn.gaussian_process import GaussianProcessRegressor  # noqa: E402
from sklearn.gaussian_process.kernels import ConstantKernel as C  # noqa: E402
from sklearn.gaussian_process.kernels import WhiteKernel  # noqa: E402
from sklearn.kernel_ridge import KernelRidge  # noqa: E402
from sklearn.svm import SVC  # noqa: E402

from mgkflow import Graph, GraphError, MarginalizedGraphKernel, datasets  # noqa: E402
from mgkflow.kernels import Constant, KroneckerDelta, SquareExponential  # noqa: E402

NK = KroneckerDelta(0.4, "l")
EK = SquareExponential(0.8, "e")


def graphs(count: int = 10, seed: int = 0) -> list[Graph]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(count):
        n = int(rng.integers(3, 8))
        upper = np.triu(rng.random((n, n)) < 0.5, 1)
        upper[np.arange(n - 1), np.arange(1, n)] = True  # a path: connected
        A = np.where(upper, 1.0, 0.0)
        E = np.triu(rng.uniform(0, 2, (n, n)), 1)
        out.append(Graph(A + A.T, node_labels={"l": rng.integers(0, 3, n)}, edge_labels={"e": E + E.T}, title=f"g{i}"))
    return out


def target(gs: list[Graph]) -> np.ndarray:
    return np.array([g.n_nodes + 0.5 * g.n_edges + float(np.sum(g.node_labels["l"] == 0)) for g in gs])


def kernel(**kw) -> MarginalizedGraphKernel:
    return MarginalizedGraphKernel(NK, EK, q=0.1, backend="cpu", **kw)


# ---------------------------------------------------------------------- kernel API
def test_hyperparameters_theta_bounds():
    kern = kernel()
    names = [h.name for h in kern.hyperparameters]
    assert names == ["node_kernel__h", "edge_kernel__length_scale", "q"]
    np.testing.assert_allclose(kern.theta, np.log([0.4, 0.8, 0.1]))
    np.testing.assert_allclose(kern.bounds, np.log([[1e-3, 1.0], [1e-2, 1e2], [1e-4, 0.5]]))
    assert kern.n_dims == 3 and kern.requires_vector_input is False and not kern.is_stationary()
    kern.theta = np.log([0.5, 2.0, 0.2])
    assert kern.node_kernel.h == pytest.approx(0.5) and kern.edge_kernel.length_scale == pytest.approx(2.0)
    assert kern.q == pytest.approx(0.2)
    with pytest.raises(ValueError, match="theta has 2 entries"):
        kern.theta = np.zeros(2)


def test_theta_at_a_bound_stays_in_range():
    kern = kernel()
    kern.theta = np.log([1.0, 0.8, 0.1])  # exp(log(1)) may round above 1
    assert kern.node_kernel.h == 1.0


def test_fixed_hyperparameters_drop_out():
    kern = MarginalizedGraphKernel(
        KroneckerDelta(0.4, "l", h_bounds="fixed") * Constant(0.9, c_bounds=(0.1, 1.0)), EK, q="l2", backend="cpu"
    )
    assert [h.name for h in kern.hyperparameters if not h.fixed] == ["node_kernel__1.c", "edge_kernel__length_scale"]
    assert kern.n_dims == 2 and kern.bounds.shape == (2, 2)


def test_get_set_params_clone_eq():
    kern = kernel(normalize=True)
    params = kern.get_params()
    assert params["node_kernel__h"] == 0.4 and params["normalize"] is True and params["q"] == 0.1
    twin = clone(kern)
    assert twin is not kern and twin == kern and twin.normalize
    twin.set_params(**{"node_kernel__h": 0.7}, q=0.3)
    assert twin.node_kernel.h == 0.7 and twin.q == 0.3 and kern.node_kernel.h == 0.4
    assert twin != kern
    with pytest.raises(ValueError, match="invalid parameter 'foo'"):
        twin.set_params(foo=1)
    with pytest.raises(ValueError, match="stop probability q must lie"):
        twin.set_params(q=1.5)
    other = kern.clone_with_theta(np.log([0.2, 1.0, 0.05]))
    assert other.node_kernel.h == pytest.approx(0.2) and kern.node_kernel.h == 0.4


def test_nested_params_through_sklearn_operators():
    k = C(2.0) * kernel() + WhiteKernel(0.1)
    assert "k1__k2__node_kernel__h" in k.get_params()
    k.set_params(k1__k2__node_kernel__h=0.6)
    assert k.k1.k2.node_kernel.h == 0.6
    assert k.n_dims == 1 + 3 + 1
    k2 = k.clone_with_theta(k.theta)
    np.testing.assert_allclose(k2.theta, k.theta)


def test_composition_calls_and_diag_with_lists():
    X = graphs(5)
    k = C(2.0) * kernel() + WhiteKernel(0.1)
    K, dK = k(X, eval_gradient=True)
    raw = kernel()(X)
    np.testing.assert_allclose(K, 2.0 * raw + 0.1 * np.eye(5), rtol=1e-10)
    assert dK.shape == (5, 5, 5)
    np.testing.assert_allclose(k.diag(X), np.diag(K), rtol=1e-10)
    Xa = np.empty(5, dtype=object)
    Xa[:] = X  # what scikit-learn's validation makes of a list of graphs
    np.testing.assert_allclose(k(Xa), K, rtol=1e-10)


def test_eval_gradient_needs_gram():
    X = graphs(3)
    with pytest.raises(ValueError, match="eval_gradient=True needs Y=None"):
        kernel()(X, X[:2], eval_gradient=True)
    K, dK = kernel()(X, list(X), eval_gradient=True)  # the same graphs: a Gram matrix
    assert dK.shape == (3, 3, 3)


# ---------------------------------------------------------------------- estimators
@pytest.mark.filterwarnings("ignore:The optimal value found")
def test_gaussian_process_regression_fit_predict_pickle():
    gs = graphs(12, seed=1)
    y = target(gs)
    kern = C(1.0) * kernel(normalize=True) + WhiteKernel(1e-2)
    gpr = GaussianProcessRegressor(kernel=kern, normalize_y=True, random_state=0).fit(gs[:8], y[:8])
    assert not np.allclose(gpr.kernel_.theta, kern.theta)  # hyperparameters were fitted
    lml0 = gpr.log_marginal_likelihood(kern.theta)
    assert gpr.log_marginal_likelihood_value_ >= lml0 - 1e-9
    mean, std = gpr.predict(gs[8:], return_std=True)
    assert mean.shape == (4,) and np.all(np.isfinite(std)) and np.all(std > 0)
    loaded = pickle.loads(pickle.dumps(gpr))
    mean2, std2 = loaded.predict(gs[8:], return_std=True)
    np.testing.assert_array_equal(mean, mean2)
    np.testing.assert_array_equal(std, std2)
    inner = loaded.kernel_.k1.k2
    assert inner._backend_obj is None or inner.last_stats is not None


def test_kernel_ridge_and_svc_precomputed():
    gs = graphs(14, seed=2)
    y = target(gs)
    K = kernel(normalize=True)(gs)
    krr = KernelRidge(kernel="precomputed", alpha=0.1).fit(K[:10, :10], y[:10])
    Kt = kernel(normalize=True)(gs[10:], gs[:10])
    np.testing.assert_allclose(Kt, K[10:, :10], rtol=1e-12)
    assert krr.predict(Kt).shape == (4,)
    labels = (y > np.median(y)).astype(int)
    svc = SVC(kernel="precomputed").fit(K[:10, :10], labels[:10])
    assert set(svc.predict(Kt)) <= {0, 1}


# ---------------------------------------------------------------------- diag, symmetry, normalization
def test_diag_solves_only_the_self_pairs():
    X = graphs(6)
    kern = kernel()
    d = kern.diag(X)
    assert kern.last_stats.pairs == 6
    np.testing.assert_allclose(d, np.diag(kern(X)), rtol=1e-13)
    np.testing.assert_array_equal(kernel(normalize=True).diag(X), np.ones(6))
    with pytest.raises(GraphError, match=r"graph 0.*K\(G, G\) = 0"):
        kernel(normalize=True, lmin=1).diag(
            [Graph(np.zeros((2, 2)), node_labels={"l": [0, 1]}, edge_labels={"e": np.zeros((2, 2))})]
        )


def test_kern_x_x_is_solved_as_a_gram_matrix():
    X = graphs(6)
    kern = kernel()
    K = kern(X)
    assert kern.last_stats.pairs == 21
    K2 = kern(X, X)
    assert kern.last_stats.pairs == 21 and K2.shape == (6, 6)
    np.testing.assert_array_equal(K, K2)
    kern(X, list(X))  # a different list of the same graphs
    assert kern.last_stats.pairs == 21
    kern(X, X[:3])
    assert kern.last_stats.pairs == 18


def test_lmin1_edgeless_graph_cannot_be_normalized():
    bare = Graph(np.zeros((3, 3)), node_labels={"l": [0, 1, 0]}, title="bare")
    kern = MarginalizedGraphKernel(NK, q=0.1, backend="cpu", lmin=1)
    assert kern([bare])[0, 0] == pytest.approx(0.0, abs=1e-16)
    with pytest.raises(GraphError, match=r"bare.*K\(G, G\).*lmin=1"):
        kern([bare, graphs(1)[0]], normalize=True)


def test_normalized_cross_matrix_does_not_overflow():
    X, Y = graphs(2, seed=3), graphs(2, seed=4)
    big = MarginalizedGraphKernel(NK, EK, q=0.1, p=1e150, backend="cpu")
    ref = kernel()(X, Y, normalize=True)
    np.testing.assert_allclose(big(X, Y, normalize=True), ref, rtol=1e-12)
    np.testing.assert_allclose(big(X, normalize=True), kernel()(X, normalize=True), rtol=1e-12)


# ---------------------------------------------------------------------- nodal
def test_nodal_blocks_sum_to_the_kernel():
    X, Y = graphs(3, seed=5), graphs(2, seed=6)
    for lmin in (0, 1):
        kern = kernel(lmin=lmin)
        R = kern(X, Y, nodal=True)
        K = kern(X, Y)
        nx_, ny = [g.n_nodes for g in X], [g.n_nodes for g in Y]
        assert R.shape == (sum(nx_), sum(ny))
        ox, oy = np.cumsum([0, *nx_]), np.cumsum([0, *ny])
        for i in range(3):
            for j in range(2):
                assert R[ox[i] : ox[i + 1], oy[j] : oy[j + 1]].sum() == pytest.approx(K[i, j], rel=1e-12)
        Rg = kern(X, nodal=True)
        np.testing.assert_allclose(Rg, Rg.T, rtol=0, atol=0)
        np.testing.assert_allclose(kern.diag(X, nodal=True), np.diag(Rg), rtol=1e-13)
    Rn = kernel()(X, nodal=True, normalize=True)
    np.testing.assert_allclose(np.diag(Rn), 1.0, rtol=1e-14)
    rx, ry = kernel().diag(X, nodal=True), kernel().diag(Y, nodal=True)
    expect = kernel()(X, Y, nodal=True) / np.sqrt(np.outer(rx, ry))
    np.testing.assert_allclose(kernel()(X, Y, nodal=True, normalize=True), expect, rtol=1e-12)


def test_nodal_node_pairs_match_the_solution():
    """p_i p'_i' x_ii' with x the product-graph solution (labels that agree score higher)."""
    from mgkflow.backends.exact import solve_pair
    from mgkflow.system import prepare_graph

    X = graphs(2, seed=7)
    R = kernel()(X[:1], X[1:], nodal=True)
    s1, s2 = (prepare_graph(g, i, NK, EK, q=0.1) for i, g in enumerate(X))
    np.testing.assert_allclose(R, solve_pair(s1, s2, NK, EK).x, rtol=1e-10)


def test_real_molecules_normalized_gradient_shapes():
    X = datasets.drugs(3)
    kern = MarginalizedGraphKernel(
        KroneckerDelta(0.5, "element"), KroneckerDelta(0.5, "bond_order"), q=0.05, backend="cpu", normalize=True
    )
    K, dK = kern(X, eval_gradient=True)
    np.testing.assert_allclose(np.diag(K), 1.0, rtol=1e-14)
    assert dK.shape == (3, 3, 3) and np.all(np.isfinite(dK))


#: ``pickle.dumps(MarginalizedGraphKernel(KroneckerDelta(0.5, "l"), q=0.1, backend="exact"), protocol=4)``
#: made by mgkflow before the kernel object and its evaluation were split (issue 21)
_OLD_PICKLE = (
    "gASV8wEAAAAAAACMC21na2Zsb3cubWdrlIwXTWFyZ2luYWxpemVkR3JhcGhLZXJuZWyUk5QpgZR9lCiMC25vZGVfa2VybmVslIwPbWdrZmxvdy5r"
    "ZXJuZWxzlIwOS3JvbmVja2VyRGVsdGGUk5QpgZR9lCiMAWiURz/gAAAAAAAAjAVmaWVsZJSMAWyUjAhoX2JvdW5kc5RHP1BiTdLxqfxHP/AAAAAA"
    "AACGlIwGZmllbGRzlGgNhZR1YowLZWRnZV9rZXJuZWyUaAaMCENvbnN0YW50lJOUKYGUfZQojAFjlEc/8AAAAAAAAIwIY19ib3VuZHOUjAVmaXhl"
    "ZJRoECl1YowBcZRHP7mZmZmZmZqMAXCURz/wAAAAAAAAjAdiYWNrZW5klIwFZXhhY3SUjARydG9slE6MCG1heF9pdGVylE0QJ4wRb25fbm9uY29u"
    "dmVyZ2VuY2WUjAVyYWlzZZSMCHByb2dyZXNzlImMC2dwdV9vcHRpb25zlE6MCHFfYm91bmRzlEc/Gjbi6xxDLUc/4AAAAAAAAIaUjARsbWlulEsA"
    "jAlub3JtYWxpemWUiYwKbGFzdF9zdGF0c5ROjAxfYmFja2VuZF9vYmqUTowMX2JhY2tlbmRfa2V5lE6MC19vcmFjbGVfb2JqlE6MCF9zeXN0ZW1z"
    "lH2UdWIu"
)


def test_a_kernel_pickled_before_the_split_loads_and_computes():
    import base64

    old = pickle.loads(base64.b64decode(_OLD_PICKLE))
    new = MarginalizedGraphKernel(KroneckerDelta(0.5, "l"), q=0.1, backend="exact")
    assert type(old) is MarginalizedGraphKernel and old == new
    gs = [
        Graph(np.array([[0, 1], [1, 0]]), node_labels={"l": [0, 1]}),
        Graph(np.ones((3, 3)) - np.eye(3), node_labels={"l": [0, 0, 1]}),
    ]
    np.testing.assert_array_equal(old(gs), new(gs))
    assert old.last_stats is not None and old._get_backend().name == "exact"


def test_fixed_hyperparameters_solve_no_gradient(monkeypatch):
    """eval_gradient=True with every hyperparameter fixed (a Cached graph kernel in a GP) returns
    K and an empty dK without the gradient solves (which cost as much as several K)."""
    import mgkflow.evaluation.matrix as matrix
    from mgkflow import datasets
    from mgkflow.kernels import KroneckerDelta

    seen = []
    real = matrix.solve

    def spy(*args, **kwargs):
        seen.append(kwargs.get("gradient", False))
        return real(*args, **kwargs)

    monkeypatch.setattr(matrix, "solve", spy)
    g = datasets.freesolv(n_graphs=8).graphs
    k = MarginalizedGraphKernel(
        KroneckerDelta(0.5, "element", h_bounds="fixed"), KroneckerDelta(0.5, "bond_order", h_bounds="fixed"),
        q=0.2, q_bounds="fixed", normalize=True, backend="cpu",
    )  # fmt: skip
    K, dK = k(g, eval_gradient=True)
    assert dK.shape == (8, 8, 0) and not any(seen)
    np.testing.assert_array_equal(K, k(g))
    K2, dK2 = k(g, g, eval_gradient=True)  # the same graphs as Y: still a Gram matrix
    assert dK2.shape == (8, 8, 0) and np.array_equal(K2, K)
