"""ExpSimilarity, FeatureKernel, Cached and the KernelWrapper base (mgkflow.learn): analytic
gradients against central differences for every hyperparameter, positive semi-definiteness,
scikit-learn's kernel API (clone, params, θ, bounds, composition), the cache's contract."""

import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.base import clone
from sklearn.gaussian_process.kernels import RBF, DotProduct, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C

from mgkflow import Graph, MarginalizedGraphKernel
from mgkflow.errors import ParameterError, ParameterTypeError
from mgkflow.kernels import KroneckerDelta
from mgkflow.learn import Cached, ExpSimilarity, FeatureKernel, MolecularFeaturizer, Normalized, molecular_kernel
from mgkflow.learn._wrap import KernelWrapper

pytest.importorskip("rdkit")

SMILES = ["CCO", "c1ccccc1", "CC(=O)N", "C1CC1", "CCCl"]


@pytest.fixture(scope="module")
def graphs():
    f = MolecularFeaturizer(atom_fields=("element", "aromatic", "hydrogens"), bond_fields=("bond_order",))
    return f.fit_transform(SMILES)


def _vectors(n=6, d=3, seed=0):
    return np.random.default_rng(seed).normal(size=(n, d))


def _mgk(backend="exact"):
    return MarginalizedGraphKernel(
        KroneckerDelta(0.4, "element") * KroneckerDelta(0.6, "hydrogens"),
        KroneckerDelta(0.5, "bond_order"),
        q=0.3,
        normalize=True,
        backend=backend,
    )


def _free_names(k):
    return [h.name for h in k.hyperparameters if not h.fixed]


def _gradient_error(k, X, eps=1e-6):
    """‖central differences − analytic‖ / ‖analytic‖ of dK/dθ, overall and per hyperparameter."""
    K, dK = k(X, eval_gradient=True)
    th = k.theta.copy()
    assert dK.shape == (*K.shape, th.size) and th.size > 0
    num = np.empty_like(dK)
    for j in range(th.size):
        e = np.zeros_like(th)
        e[j] = eps
        num[:, :, j] = (k.clone_with_theta(th + e)(X) - k.clone_with_theta(th - e)(X)) / (2 * eps)
    assert np.array_equal(k.theta, th)
    per = [np.linalg.norm(num[..., j] - dK[..., j]) / np.linalg.norm(dK[..., j]) for j in range(th.size)]
    return np.linalg.norm(num - dK) / np.linalg.norm(dK), per


def _assert_gradient(k, X, per_tol=1e-6):
    """The normwise error ≤ 1e-6, and that of each hyperparameter's slice ≤ ``per_tol``."""
    err, per = _gradient_error(k, X)
    assert err <= 1e-6, (err, per, _free_names(k))
    assert max(per) <= per_tol, (per, _free_names(k))


# ---------------------------------------------------------------------------- gradients
def test_exp_similarity_gradient_over_rbf():
    k = ExpSimilarity(RBF(0.8), gamma=2.0)
    assert _free_names(k) == ["gamma", "kernel__length_scale"]
    _assert_gradient(k, _vectors())


def test_exp_similarity_gradient_over_ard_rbf():
    k = ExpSimilarity(RBF([0.7, 1.5, 2.0]), gamma=0.7)
    assert k.theta.size == 4
    _assert_gradient(k, _vectors())


def test_exp_similarity_gradient_over_normalized_graph_kernel(graphs):
    k = ExpSimilarity(_mgk(), gamma=2.0)
    names = _free_names(k)
    assert names[0] == "gamma" and "kernel__q" in names
    assert sum(n.endswith((".h", "__h")) for n in names) == 3
    _assert_gradient(k, graphs)


def test_exp_similarity_with_fixed_gamma_differentiates_the_inner_kernel_only():
    k = ExpSimilarity(RBF(0.8), gamma=2.0, gamma_bounds="fixed")
    assert _free_names(k) == ["kernel__length_scale"] and k.theta.size == 1
    _assert_gradient(k, _vectors())


def test_feature_kernel_gradient_isotropic_and_ard(graphs):
    d = len(graphs[0].features)
    _assert_gradient(FeatureKernel(RBF(3.0)), graphs)
    ard = FeatureKernel(RBF(np.linspace(2.0, 5.0, d)))
    assert ard.theta.size == d
    _assert_gradient(ard, graphs)
    _assert_gradient(FeatureKernel(), graphs)  # the default RBF


def test_cached_gradient_equals_the_wrapped_kernels(graphs):
    X = _vectors()
    inner = C(1.3) * RBF([0.7, 1.2, 2.0])
    K0, dK0 = inner(X, eval_gradient=True)
    K1, dK1 = Cached(inner)(X, eval_gradient=True)
    assert np.array_equal(K0, K1) and np.array_equal(dK0, dK1)
    _assert_gradient(Cached(inner), X)
    _assert_gradient(Cached(_mgk()), graphs)


def test_molecular_kernel_gradient_with_the_graph_kernel_free(graphs):
    k = molecular_kernel(
        ((("element", "aromatic", "hydrogens"), ("bond_order",)),), h=0.4, q=0.3, fit_graph_kernel=True, backend="cpu"
    )
    names = _free_names(k)
    assert len(names) == 10, names  # C, γ, 3 + 1 h, q, C, length scale, noise
    assert sum(n.endswith(".h") or n.endswith("__h") for n in names) == 4 and any(n.endswith("__q") for n in names)
    _assert_gradient(k, graphs)


def test_molecular_kernel_fixed_graph_kernel():
    k = molecular_kernel(backend="cpu")
    assert _free_names(k) == [
        "k1__k1__k1__k1__constant_value",  # the coarse view's graph kernel
        "k1__k1__k1__k2__gamma",
        "k1__k1__k2__k1__constant_value",  # the fine view's
        "k1__k1__k2__k2__gamma",
        "k1__k2__k1__constant_value",  # the descriptors'
        "k1__k2__k2__kernel__length_scale",
        "k2__noise_level",
    ]


def test_molecular_kernel_two_views_gradient(graphs):
    views = ((("element", "aromatic"), ("bond_order",)), (("element", "aromatic", "hydrogens"), ("bond_order",)))
    k = molecular_kernel(views, descriptors=False, backend="cpu")
    assert len(_free_names(k)) == 5  # C, γ per view, noise
    _assert_gradient(k, graphs)


@pytest.mark.parametrize(
    "kw",
    [
        {"h": 0.0},
        {"h": 1.0},
        {"q": 1.5},
        {"q": True},
        {"views": ()},
        {"views": "element"},
        {"views": (((), ("bond_order",)),)},
        {"views": ((("neighbours",), ("bond_order",)),)},
        {"views": ((("element",), ("colour",)),)},
        {"views": (("element", ("bond_order",)),)},
        {"views": ((("element",),),)},
        {"descriptors": "yes"},
        {"fit_graph_kernel": 1},
    ],
)
def test_molecular_kernel_bad_arguments(kw):
    with pytest.raises((ParameterError, ParameterTypeError)):
        molecular_kernel(**kw)


# ---------------------------------------------------------------------------- properties
def test_exp_similarity_on_a_normalized_graph_kernel_is_psd_with_unit_diagonal(graphs):
    for gamma in (0.1, 2.0, 50.0):
        k = ExpSimilarity(_mgk(), gamma=gamma)
        K = k(graphs)
        assert np.allclose(np.diag(K), 1.0, atol=1e-12)
        assert np.allclose(k.diag(graphs), 1.0, atol=1e-12)
        assert np.allclose(K, K.T) and np.all((K > 0) & (K <= 1 + 1e-12))
        assert np.linalg.eigvalsh(K).min() >= -1e-10


@settings(max_examples=25, deadline=None)
@given(
    gamma=st.floats(0.01, 100.0),
    seed=st.integers(0, 2**16),
    n=st.integers(1, 8),
    d=st.integers(1, 4),
)
def test_exp_similarity_of_normalized_dot_product_is_psd(gamma, seed, n, d):
    X = np.random.default_rng(seed).normal(size=(n, d)) + 0.1
    k = ExpSimilarity(Normalized(DotProduct(sigma_0=0.5)), gamma=gamma)
    K = k(X)
    assert np.allclose(np.diag(K), 1.0) and np.allclose(k.diag(X), 1.0)
    assert np.linalg.eigvalsh(K).min() >= -1e-10
    # the Y form equals the symmetric one
    assert np.allclose(k(X, X), K, atol=1e-12)


def test_exp_similarity_values():
    X = np.array([[0.0], [1.0]])
    K = ExpSimilarity(RBF(1.0), gamma=2.0)(X)
    assert K[0, 1] == pytest.approx(np.exp(2.0 * (np.exp(-0.5) - 1.0)))
    with pytest.raises(ParameterError):
        ExpSimilarity(RBF(1.0))(X, X, eval_gradient=True)


@pytest.mark.parametrize(
    "make",
    [
        lambda: ExpSimilarity(RBF([1.0, 2.0]), gamma=3.0, gamma_bounds=(0.5, 50.0)),
        lambda: ExpSimilarity(RBF(1.0), gamma=3.0, gamma_bounds="fixed"),
        lambda: FeatureKernel(RBF([1.0, 2.0])),
        lambda: Cached(C(2.0) * RBF(1.0)),
        lambda: Normalized(RBF(1.0)),
    ],
)
def test_sklearn_kernel_api(make):
    k = make()
    c = clone(k)
    assert type(c) is type(k) and c == k and c is not k and c.kernel is not k.kernel
    assert c.get_params(deep=False).keys() == k.get_params(deep=False).keys()
    deep = k.get_params(deep=True)
    assert all(name.startswith("kernel__") or name in ("kernel", "gamma", "gamma_bounds") for name in deep)
    # θ and bounds line up with the free hyperparameters, and θ round-trips
    assert k.bounds.shape == (k.theta.size, 2) and k.n_dims == k.theta.size
    assert sum(h.n_elements for h in k.hyperparameters if not h.fixed) == k.theta.size
    theta = k.theta + 0.1
    k.theta = theta
    assert np.allclose(k.theta, theta)
    d = clone(k).clone_with_theta(theta)
    assert np.allclose(d.theta, theta) and d == k
    assert np.all(k.bounds[:, 0] <= k.bounds[:, 1])
    assert repr(k).startswith(type(k).__name__)
    assert not k.is_stationary()


def test_set_params_nested_and_own():
    k = ExpSimilarity(RBF(1.0), gamma=3.0)
    k.set_params(gamma=4.0, kernel__length_scale=2.0)
    assert k.gamma == 4.0 and k.kernel.length_scale == 2.0
    assert np.allclose(k.theta, np.log([4.0, 2.0]))
    assert np.allclose(k.bounds, np.log([[0.1, 100.0], [1e-5, 1e5]]))
    assert k != ExpSimilarity(RBF(1.0), gamma=3.0)
    f = FeatureKernel().set_params(kernel__length_scale=5.0)
    assert f.kernel.length_scale == 5.0 and f.get_params()["kernel__length_scale_bounds"] == (0.1, 1e3)


def test_fixed_gamma_bounds_removes_gamma_from_theta():
    free = ExpSimilarity(RBF(1.0, length_scale_bounds="fixed"), gamma=3.0)
    fixed = ExpSimilarity(RBF(1.0, length_scale_bounds="fixed"), gamma=3.0, gamma_bounds="fixed")
    assert free.theta.size == 1 and fixed.theta.size == 0 and fixed.bounds.size == 0
    assert np.allclose(free.theta, np.log(3.0))
    X = _vectors()
    K, dK = fixed(X, eval_gradient=True)
    assert dK.shape == (6, 6, 0) and np.allclose(K, free(X))
    fixed.theta = np.array([])
    assert fixed.gamma == 3.0


@pytest.mark.parametrize("bounds", [7, "abc", None, (0.0, 1.0), (5.0, 1.0), (1.0, np.inf), (1.0, 2.0, 3.0)])
def test_bad_gamma_bounds(bounds):
    k = ExpSimilarity(RBF(1.0), gamma_bounds=bounds)
    with pytest.raises((ParameterError, ParameterTypeError)):
        k.bounds  # noqa: B018


@pytest.mark.parametrize("gamma", [0.0, -1.0, np.nan, np.inf, "abc", None, True])
def test_bad_gamma(gamma):
    k = ExpSimilarity(RBF(1.0), gamma=gamma)
    X = _vectors()
    for call in (lambda: k(X), lambda: k.diag(X), lambda: k.theta):
        with pytest.raises(ParameterError):
            call()


def test_composition_with_sklearn_kernels(graphs):
    X = _vectors()
    k = C(2.0) * ExpSimilarity(RBF(1.0), gamma=3.0) + WhiteKernel(0.1)
    K = k(X)
    assert np.allclose(K, 2.0 * ExpSimilarity(RBF(1.0), gamma=3.0)(X) + 0.1 * np.eye(6))
    assert k.theta.size == 4
    _assert_gradient(k, X)
    g = ExpSimilarity(_mgk(), gamma=1.0) * FeatureKernel(RBF(4.0)) + C(0.5)
    G = g(graphs)
    assert np.allclose(G, ExpSimilarity(_mgk(), gamma=1.0)(graphs) * FeatureKernel(RBF(4.0))(graphs) + 0.5)
    assert np.allclose(np.diag(G), g.diag(graphs))
    # the edge kernel's slice is small beside the others: its own relative error is that of the differences
    _assert_gradient(g, graphs, per_tol=1e-4)


def test_kernel_wrapper_needs_a_kernel():
    for bad in (7, "abc", None, np.eye(2), len):
        for cls in (Cached, ExpSimilarity, FeatureKernel, Normalized):
            if cls is FeatureKernel and bad is None:
                continue  # None picks the default RBF
            with pytest.raises(ParameterTypeError):
                cls(bad)
    assert issubclass(Normalized, KernelWrapper) and issubclass(Cached, KernelWrapper)
    w = Cached(RBF(2.0, length_scale_bounds=(0.5, 5.0)))
    assert w.get_params(deep=True)["kernel__length_scale"] == 2.0
    assert [(h.name, h.fixed) for h in w.hyperparameters] == [("kernel__length_scale", False)]
    assert np.allclose(w.bounds, np.log([[0.5, 5.0]]))
    assert w == clone(w) and w != Cached(RBF(2.0)) and w != Normalized(w.kernel)


@pytest.mark.parametrize("cls", [Cached, ExpSimilarity, FeatureKernel])
def test_eval_gradient_must_be_a_bool(cls, graphs):
    k = cls(RBF(3.0))
    X = graphs if cls is FeatureKernel else _vectors()
    with pytest.raises(ParameterTypeError):
        k(X, eval_gradient="yes")


# ---------------------------------------------------------------------------- FeatureKernel
def test_feature_kernel_values_and_diag(graphs):
    F = np.vstack([g.features for g in graphs])
    k = FeatureKernel(RBF(7.0))
    assert np.allclose(k(graphs), RBF(7.0)(F), rtol=1e-13, atol=1e-15)  # from kept squared distances
    assert np.array_equal(k(graphs[:2], graphs), RBF(7.0)(F[:2], F))
    assert np.array_equal(k.diag(graphs), np.ones(len(graphs)))
    assert np.allclose(k(F), RBF(7.0)(F), rtol=1e-13, atol=1e-15)  # a feature array is taken as is
    assert k(graphs, []).shape == (len(graphs), 0)
    assert not k.requires_vector_input


def test_feature_kernel_errors(graphs):
    k = FeatureKernel(RBF(1.0))
    plain = Graph(np.zeros((1, 1)))
    with pytest.raises(ParameterError, match="no features"):
        k([plain])
    with pytest.raises(ParameterError, match="differ in length"):
        k([Graph(np.zeros((1, 1)), features=[1.0]), Graph(np.zeros((1, 1)), features=[1.0, 2.0])])
    with pytest.raises(ParameterError):
        k(graphs, [Graph(np.zeros((1, 1)), features=[1.0])])  # other dimension than X's
    with pytest.raises(ParameterError):
        FeatureKernel(RBF([1.0, 2.0]))(graphs)  # ARD of the wrong length
    with pytest.raises(ParameterError):
        k(graphs, graphs, eval_gradient=True)
    with pytest.raises(ParameterError):
        k(np.ones(3))
    for bad in (7, "abc", None):
        with pytest.raises(ParameterTypeError):
            k(bad)


# ---------------------------------------------------------------------------- Cached
class _Counting(RBF):
    """An RBF that counts its calls."""

    calls = 0

    def __call__(self, X, Y=None, eval_gradient=False):
        type(self).calls += 1
        return super().__call__(X, Y, eval_gradient)


def test_cached_returns_copies_and_counts_calls():
    _Counting.calls = 0
    k = Cached(_Counting(1.0))
    X = _vectors()
    K1 = k(X)
    K1[:] = -1.0  # a copy: the cache is untouched
    K2 = k(X)
    assert _Counting.calls == 1 and np.array_equal(K2, RBF(1.0)(X))
    K3, dK3 = k(X, eval_gradient=True)  # the cached K has no gradient: computed again
    assert _Counting.calls == 2
    dK3[:] = 0.0
    K4, dK4 = k(X, eval_gradient=True)
    K5 = k(X)  # after a gradient call, plain calls are served too
    assert _Counting.calls == 2 and np.array_equal(dK4, RBF(1.0)(X, eval_gradient=True)[1])
    assert K4 is not K5 and np.array_equal(K4, K5)


def test_cached_recomputes_when_theta_or_x_change(graphs):
    _Counting.calls = 0
    k = Cached(_Counting(1.0))
    X = _vectors()
    k(X)
    k.theta = np.log([2.0])
    assert np.allclose(k(X), RBF(2.0)(X)) and _Counting.calls == 2
    Z = _vectors(seed=1)
    assert np.allclose(k(Z), RBF(2.0)(Z)) and _Counting.calls == 3
    Z[0, 0] += 1.0  # the same array, changed in place
    assert np.allclose(k(Z), RBF(2.0)(Z)) and _Counting.calls == 4
    assert np.allclose(k(Z, X), RBF(2.0)(Z, X)) and _Counting.calls == 5
    assert np.allclose(k(Z, X), RBF(2.0)(Z, X)) and _Counting.calls == 5
    # graphs: the same graphs in another list are the same input; other graphs are not
    m = Cached(_mgk())
    K = m(graphs)
    assert np.array_equal(m(list(graphs)), K)
    assert np.allclose(m(graphs[::-1]), K[::-1, ::-1])
    m.theta = m.theta + 0.1
    assert np.allclose(m(graphs), _mgk().clone_with_theta(m.theta)(graphs))


def test_cached_list_changed_in_place_is_a_new_input():
    k = Cached(FeatureKernel(RBF(1.0)))
    a = [Graph(np.zeros((1, 1)), features=[0.0]), Graph(np.zeros((1, 1)), features=[1.0])]
    K = k(a)
    a[1] = Graph(np.zeros((1, 1)), features=[3.0])
    assert not np.allclose(k(a), K) and np.allclose(k(a)[0, 1], np.exp(-4.5))


def test_cached_pickles_without_its_cache():
    k = Cached(RBF(1.0))
    X = _vectors()
    K = k(X, eval_gradient=True)[0]
    assert k._last is not None
    j = pickle.loads(pickle.dumps(k))
    assert j._last is None and j == k
    assert np.array_equal(j(X), K)
    assert clone(k)._last is None


def test_cached_leaves_what_it_cannot_key_to_the_wrapped_kernel():
    k = Cached(FeatureKernel(RBF(1.0)))
    for bad in (7, None, 2.5):
        with pytest.raises(ParameterTypeError):
            k(bad)
    assert k._last is None


def test_gram_contraction_equals_the_stacked_gradient(graphs):
    """GraphGPR's gradient path: K and Σ W ∘ ∂K/∂θ through sums and products, without dK."""
    from mgkflow.learn.contract import gram_contraction

    views = ((("element", "aromatic"), ("bond_order",)), (("element", "aromatic", "hydrogens"), ("bond_order",)))
    W = np.random.default_rng(3).normal(size=(len(graphs), len(graphs)))
    for k in (
        molecular_kernel(views, backend="cpu"),
        molecular_kernel(views[:1], fit_graph_kernel=True, backend="cpu"),
        C(2.0, "fixed") * FeatureKernel() + WhiteKernel(0.1, "fixed"),
    ):
        K0, dK0 = k(graphs, eval_gradient=True)
        K, g = gram_contraction(k, graphs)
        np.testing.assert_allclose(K, K0, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(g(W), np.einsum("ij,ijh->h", W, dK0), rtol=1e-10, atol=1e-12)
