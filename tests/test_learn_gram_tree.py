"""gram_contraction's tree (mgkflow/learn/_gram_tree.py) and the objectives' in-place weights against
the stacked gradient scikit-learn gives, with and without a workspace kept from call to call."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.gaussian_process.kernels import RBF, DotProduct, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C

from mgkflow import Graph
from mgkflow.errors import ParameterTypeError
from mgkflow.learn import Cached, ExpSimilarity, FeatureKernel
from mgkflow.learn.contract import cross_contraction, cross_kernel, gram_contraction
from mgkflow.learn.objectives import WEIGHTS


def _graphs(n=7, d=3, seed=0):
    F = np.random.default_rng(seed).normal(size=(n, d))
    return [Graph(np.zeros((1, 1)), features=f) for f in F]


def _trees():
    """Kernels over graphs with features: every branch of the tree walk."""
    rbf = FeatureKernel()
    return [
        C(2.0) * FeatureKernel() + WhiteKernel(0.1),
        WhiteKernel(0.2) + C(0.5) * FeatureKernel(),  # the white kernel first
        FeatureKernel() * C(1.5) + WhiteKernel(0.1, "fixed"),  # the constant second
        FeatureKernel() * FeatureKernel(RBF(3.0)),  # no constant factor
        C(2.0) * C(0.5, "fixed") + FeatureKernel(),  # a constant product
        C(1.3) * ExpSimilarity(FeatureKernel(), gamma=2.0) + WhiteKernel(0.05),  # free inner kernel
        C(1.3) * ExpSimilarity(Cached(FeatureKernel(RBF(2.0, "fixed"))), gamma=3.0) + WhiteKernel(0.05),
        ExpSimilarity(rbf, gamma=1.5, gamma_bounds="fixed") * C(0.7),
        FeatureKernel(RBF([1.0, 2.0, 0.5])) + WhiteKernel(0.1),  # an ARD leaf: its own gradient
        WhiteKernel(0.1) + WhiteKernel(0.2),
        FeatureKernel(),  # a leaf at the root
        ExpSimilarity(FeatureKernel(), gamma=2.0),
    ]


@pytest.mark.parametrize("index", range(len(_trees())))
def test_gram_contraction_equals_the_stacked_gradient_with_and_without_a_workspace(index):
    X = _graphs()
    W = np.random.default_rng(index).normal(size=(len(X), len(X)))
    kernel = _trees()[index]
    workspace: dict = {}
    for step in range(3):  # the workspace's arrays are reused from the second call on
        kernel.theta = kernel.theta + 0.1 * step
        K0, dK0 = kernel(X, eval_gradient=True)
        want = np.einsum("ij,ijh->h", W, dK0)
        for ws in (None, workspace):
            K, g = gram_contraction(kernel, X, ws)
            np.testing.assert_allclose(K, K0, rtol=1e-12, atol=1e-14)
            np.testing.assert_allclose(g(W), want, rtol=1e-10, atol=1e-12)
            K += 1.0  # the caller owns K until the next call
            np.testing.assert_allclose(g(W), want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("index", range(len(_trees())))
def test_cross_contraction_equals_the_stacked_cross_gradient(index):
    """The low-rank GP's walk over K(X, Z): K and Σ W ∘ ∂K as cross_kernel's stacked gradient gives,
    a white kernel adding nothing, with and without a cache and a workspace, with and without gradient."""
    X, Z = _graphs(7), _graphs(4, seed=1)
    W = np.random.default_rng(index).normal(size=(len(X), len(Z)))
    kernel = _trees()[index]
    cache: dict = {}
    workspace: dict = {}
    for step in range(3):
        kernel.theta = kernel.theta + 0.1 * step
        K0, dK0 = cross_kernel(kernel, X, Z, eval_gradient=True)
        want = np.einsum("ij,ijh->h", W, dK0)
        for c, ws in ((None, None), (cache, workspace)):
            K, g = cross_contraction(kernel, X, Z, cache=c, workspace=ws)
            np.testing.assert_allclose(K, K0, rtol=1e-12, atol=1e-14)
            np.testing.assert_allclose(g(W), want, rtol=1e-10, atol=1e-12)
            K += 1.0  # the caller owns K until the next call
            np.testing.assert_allclose(g(W), want, rtol=1e-10, atol=1e-12)
            K1, _ = cross_contraction(kernel, X, Z, cache=c, gradient=False)
            np.testing.assert_allclose(K1, K0, rtol=1e-12, atol=1e-14)


def test_a_workspace_keeps_the_arrays_and_a_fresh_call_does_not():
    X = _graphs()
    k = C(2.0) * FeatureKernel() + WhiteKernel(0.1)
    workspace: dict = {}
    K1, _ = gram_contraction(k, X, workspace)
    K2, _ = gram_contraction(k, X, workspace)
    assert K1 is K2 and workspace
    assert gram_contraction(k, X)[0] is not gram_contraction(k, X)[0]
    with pytest.raises(ParameterTypeError):
        gram_contraction(k, X, workspace=[])


def test_a_vector_kernel_goes_through_its_own_gradient():
    X = np.random.default_rng(2).normal(size=(6, 2))
    k = C(1.5) * RBF(0.8) * DotProduct(1.0) + WhiteKernel(0.1)
    W = np.random.default_rng(3).normal(size=(6, 6))
    K0, dK0 = k(X, eval_gradient=True)
    K, g = gram_contraction(k, X, {})
    np.testing.assert_allclose(K, K0, rtol=1e-12)
    np.testing.assert_allclose(g(W), np.einsum("ij,ijh->h", W, dK0), rtol=1e-10, atol=1e-12)


@settings(max_examples=25, deadline=None)
@given(n=st.integers(2, 30), m=st.integers(1, 3), seed=st.integers(0, 2**16), name=st.sampled_from(sorted(WEIGHTS)))
def test_weights_in_place_equal_the_copying_ones(n, m, seed, name):
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(n, n))
    K = A @ A.T + n * np.eye(n)
    y = rng.normal(size=(n, m)) if name == "lml" else rng.normal(size=n)
    keep = K.copy()
    value, W = WEIGHTS[name](K, y)
    assert np.array_equal(K, keep)  # not overwritten by default
    value2, W2 = WEIGHTS[name](K.copy(), y, overwrite=True)
    assert value2 == pytest.approx(value, rel=1e-12)
    np.testing.assert_allclose(W2, W, rtol=1e-9, atol=1e-12)
    if name == "lml":  # one compiled pass mirrors the triangle: exactly symmetric
        np.testing.assert_array_equal(W2, W2.T)
        Kinv = np.linalg.inv(keep)
        a = Kinv @ y
        np.testing.assert_allclose(W, 0.5 * (a @ a.T - m * Kinv), rtol=1e-7, atol=1e-9)


def test_without_gradient_the_leaves_are_evaluated_without_theirs():
    """gram_contraction(gradient=False): K as with the gradient, from the same workspace arrays, and no leaf
    asked for its gradient (a fit's posterior at the fitted θ)."""
    asked = []

    class Recording(RBF):
        def __call__(self, X, Y=None, eval_gradient=False):
            asked.append(eval_gradient)
            return super().__call__(X, Y, eval_gradient)

    X = np.random.default_rng(0).normal(size=(9, 2))
    kernel = C(2.0) * Recording(1.5) + WhiteKernel(0.1)
    workspace: dict = {}
    K0, _ = gram_contraction(kernel, X, workspace)
    want = K0.copy()
    assert asked == [True]
    K, _ = gram_contraction(kernel, X, workspace, gradient=False)
    assert asked == [True, False] and K is K0
    np.testing.assert_allclose(K, want, rtol=1e-15)
    np.testing.assert_allclose(K, kernel(X), rtol=1e-12)


@pytest.mark.parametrize("index", range(len(_trees())))
def test_block_arrays_counts_what_a_step_keeps(index):
    """block_arrays (the exact GP's memory estimate) is at least the workspace's arrays after a step with
    its contraction, plus the fixed kernels' kept blocks."""
    from mgkflow.learn._gram_tree import block_arrays

    kernel = _trees()[index]
    X = _graphs()
    workspace: dict = {}
    K, g = gram_contraction(kernel, X, workspace)
    g(np.ones_like(K))
    kept = sum(isinstance(v, Cached) and not v.kernel.n_dims for v in [kernel, *kernel.get_params().values()])
    assert all(a.shape == K.shape for a in workspace.values())
    assert block_arrays(kernel) >= len(workspace) + kept
