"""GraphGPR and the objectives of mgkflow.learn: values against brute force and scikit-learn,
gradients against central differences, the estimator's API."""

import pickle

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C

from mgkflow import MarginalizedGraphKernel, datasets
from mgkflow.errors import MgkflowError, ParameterError
from mgkflow.kernels import KroneckerDelta
from mgkflow.learn import GraphGPR
from mgkflow.learn.objectives import OBJECTIVES, NotPositiveDefiniteError


def _data(n=14, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=n)
    return X, y


KERNEL = C(1.3) * RBF([0.7, 1.2]) + WhiteKernel(0.05)


@pytest.mark.parametrize("name", sorted(OBJECTIVES))
def test_gradient_matches_central_differences(name):
    X, y = _data()
    f = OBJECTIVES[name]
    _, g = f(*KERNEL(X, eval_gradient=True), y)
    th = KERNEL.theta
    fd = np.empty_like(th)
    for j in range(th.size):
        e = np.zeros_like(th)
        e[j] = 1e-6
        up = f(*KERNEL.clone_with_theta(th + e)(X, eval_gradient=True), y)[0]
        down = f(*KERNEL.clone_with_theta(th - e)(X, eval_gradient=True), y)[0]
        fd[j] = (up - down) / 2e-6
    assert np.linalg.norm(g - fd) <= 1e-6 * np.linalg.norm(fd)


def test_leave_one_out_equals_refitting_without_each_point():
    X, y = _data(10)
    K = KERNEL(X)
    mu, var = np.empty(10), np.empty(10)
    for i in range(10):
        m = np.arange(10) != i
        w = np.linalg.solve(K[np.ix_(m, m)], K[i, m])
        mu[i], var[i] = w @ y[m], K[i, i] - K[i, m] @ w
    lpp = np.sum(-0.5 * np.log(var) - (y - mu) ** 2 / (2 * var) - 0.5 * np.log(2 * np.pi))
    empty = np.zeros((10, 10, 0))
    assert OBJECTIVES["loo"](K, empty, y)[0] == pytest.approx(lpp, rel=1e-12)
    assert OBJECTIVES["loo_mse"](K, empty, y)[0] == pytest.approx(-np.sum((y - mu) ** 2), rel=1e-12)


def test_lml_fit_matches_scikit_learn():
    X, y = _data(20)
    ours = GraphGPR(KERNEL, objective="lml", verbose=0).fit(X, y)
    theirs = GaussianProcessRegressor(KERNEL, normalize_y=True, random_state=0).fit(X, y)
    assert ours.objective_value_ == pytest.approx(theirs.log_marginal_likelihood_value_, abs=1e-4)
    fixed = GraphGPR(theirs.kernel_, optimize=False, verbose=0).fit(X, y)
    m1, s1 = fixed.predict(X[:5], return_std=True)
    m2, s2 = theirs.predict(X[:5], return_std=True)
    np.testing.assert_allclose(m1, m2, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(s1, s2, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(fixed.L_, theirs.L_, rtol=1e-10, atol=1e-12)  # the posterior's factor
    np.testing.assert_allclose(fixed.alpha_, theirs.alpha_, rtol=1e-8)
    assert fixed.objective_value_ == pytest.approx(theirs.log_marginal_likelihood_value_, rel=1e-10)


def test_restarts_never_end_worse_and_are_seeded():
    X, y = _data(16)
    one = GraphGPR(KERNEL, objective="loo", verbose=0).fit(X, y)
    more = GraphGPR(KERNEL, objective="loo", n_restarts=3, random_state=1, verbose=0).fit(X, y)
    again = GraphGPR(KERNEL, objective="loo", n_restarts=3, random_state=1, verbose=0).fit(X, y)
    assert more.objective_value_ >= one.objective_value_ - 1e-9
    np.testing.assert_array_equal(more.kernel_.theta, again.kernel_.theta)


def test_progress_lines_on_stderr_and_silence(capsys):
    X, y = _data(10)
    GraphGPR(KERNEL, max_iter=3, verbose=1).fit(X, y)
    err = capsys.readouterr().err
    assert "mgkflow: fit step 1: lml = " in err and "mgkflow: fit done" in err
    GraphGPR(KERNEL, max_iter=3, verbose=0).fit(X, y)
    assert capsys.readouterr().err == ""


def test_graph_kernel_fit_predict_pickle_and_clone():
    data = datasets.freesolv()
    graphs, y = data.graphs[:24], data.y[:24]
    mgk = MarginalizedGraphKernel(KroneckerDelta(0.5, "element"), KroneckerDelta(0.5, "bond_order"),
                                  q=0.05, normalize=True, backend="cpu")
    gp = GraphGPR(C(1.0) * mgk + WhiteKernel(0.1), objective="loo", max_iter=5, verbose=0).fit(graphs[:18], y[:18])
    mean, std = gp.predict(graphs[18:], return_std=True)
    assert mean.shape == (6,) and np.all(np.isfinite(mean)) and np.all(std > 0)
    back = pickle.loads(pickle.dumps(gp))
    np.testing.assert_allclose(back.predict(graphs[18:]), mean, rtol=1e-12)
    assert isinstance(clone(gp), GraphGPR) and not hasattr(clone(gp), "kernel_")


@pytest.mark.parametrize(
    "kwargs", [{"objective": "mse"}, {"n_restarts": -1}, {"max_iter": 0}, {"alpha": -1.0}, {"n_restarts": 1.5}]
)
def test_bad_parameters_are_mgkflow_errors(kwargs):
    X, y = _data(6)
    with pytest.raises(ParameterError):
        GraphGPR(KERNEL, verbose=0, **kwargs).fit(X, y)


def test_bad_targets_and_unfitted_predict():
    X, y = _data(6)
    with pytest.raises(ParameterError):
        GraphGPR(KERNEL, verbose=0).fit(X, y[:5])
    with pytest.raises(ParameterError):
        GraphGPR(KERNEL, verbose=0).fit(X, np.r_[y[:5], np.nan])
    with pytest.raises(MgkflowError):
        GraphGPR(KERNEL, verbose=0).predict(X)


def test_singular_covariance_is_an_mgkflow_error():
    X = np.zeros((4, 1))
    with pytest.raises(NotPositiveDefiniteError):
        GraphGPR(RBF(1.0), alpha=0.0, optimize=False, verbose=0).fit(X, np.arange(4.0))


@pytest.mark.parametrize("name", sorted(OBJECTIVES))
def test_objective_weights_give_the_gradient_of_every_objective(name):
    """The weights W of each objective (g_j = Σ W ∘ ∂K_j) against the stacked-gradient form."""
    from sklearn.gaussian_process.kernels import RBF, WhiteKernel
    from sklearn.gaussian_process.kernels import ConstantKernel as C

    from mgkflow.learn.contract import gram_contraction
    from mgkflow.learn.objectives import WEIGHTS

    rng = np.random.default_rng(5)
    X = rng.normal(size=(15, 2))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=15)
    k = C(1.5) * RBF([0.8, 1.3]) + C(0.3, "fixed") * RBF(0.2) + WhiteKernel(0.05)
    K, dK = k(X, eval_gradient=True)
    value, grad = OBJECTIVES[name](K, dK, y)
    K2, g = gram_contraction(k, X)
    v2, W = WEIGHTS[name](K2, y)
    assert v2 == pytest.approx(value, rel=1e-12)
    np.testing.assert_allclose(g(W), grad, rtol=1e-9, atol=1e-10)


def test_a_fit_too_large_for_the_host_is_refused_before_any_work(monkeypatch):
    """An exact GP whose n × n arrays cannot fit the available memory: an mgkflow error naming the way out,
    raised before the kernel is evaluated."""
    from mgkflow.gram.resources import ResourceError

    calls = []

    class Counting(RBF):
        def __call__(self, X, Y=None, eval_gradient=False):
            calls.append(1)
            return super().__call__(X, Y, eval_gradient)

    X, y = _data(20)
    gp = GraphGPR(C(1.0) * Counting(1.0) + WhiteKernel(0.1), verbose=0, max_iter=2)
    monkeypatch.setattr("mgkflow.gram.resources.host_available_bytes", lambda: 8 * 20 * 20 * 4)
    with pytest.raises(ResourceError, match=r"about 5 arrays of 20 × 20 .*low-rank"):
        gp.fit(X, y)
    assert not calls
    monkeypatch.setattr("mgkflow.gram.resources.host_available_bytes", lambda: 8 * 20 * 20 * 5)
    assert gp.fit(X, y).n_evaluations_ >= 1 and calls
