"""mgkflow.learn: the scikit-learn kernels, scores, splits and fingerprints used around the graph kernel."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, DotProduct

from mgkflow.learn import (
    Normalized,
    Tanimoto,
    kfold_splits,
    labelled_split,
    morgan_fingerprints,
    regression_metrics,
)


# ---------------------------------------------------------------------- Normalized
def test_normalized_kernel_values_and_gradient():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(6, 2)) + 2.0
    Y = rng.normal(size=(3, 2)) + 2.0
    base = DotProduct(sigma_0=0.5) * RBF(length_scale=1.3)
    k = Normalized(base)
    K = k(X)
    np.testing.assert_allclose(np.diag(K), 1.0)
    raw = base(X)
    np.testing.assert_allclose(K, raw / np.sqrt(np.outer(np.diag(raw), np.diag(raw))))
    # the cross matrix agrees with the joint Gram's block
    J = k(np.vstack([X, Y]))
    np.testing.assert_allclose(k(X, Y), J[:6, 6:], rtol=1e-12)
    np.testing.assert_allclose(k.diag(X), 1.0)
    # gradient in log-theta vs central finite differences
    K2, dK = k(X, eval_gradient=True)
    np.testing.assert_allclose(K2, K)
    assert dK.shape == (6, 6, len(k.theta)) == (6, 6, 2)
    for i in range(len(k.theta)):
        e = np.zeros_like(k.theta)
        e[i] = 1e-6
        fd = (k.clone_with_theta(k.theta + e)(X) - k.clone_with_theta(k.theta - e)(X)) / 2e-6
        np.testing.assert_allclose(dK[:, :, i], fd, atol=1e-7)
    assert np.allclose(np.einsum("iik->ik", dK), 0.0)  # the diagonal stays 1 whatever theta
    with pytest.raises(ValueError, match="Y is None"):
        k(X, Y, eval_gradient=True)


def test_normalized_sklearn_protocol():
    k = Normalized(DotProduct(sigma_0=0.5) * RBF(length_scale=1.3))
    X = np.random.default_rng(1).normal(size=(4, 2)) + 1.0
    c = clone(k)
    assert c == k and c is not k and c.kernel is not k.kernel
    assert "kernel__k2__length_scale" in k.get_params()
    assert [h.name for h in k.hyperparameters] == ["kernel__k1__sigma_0", "kernel__k2__length_scale"]
    np.testing.assert_array_equal(k.theta, k.kernel.theta)
    assert k.bounds.shape == (2, 2)
    np.testing.assert_allclose(pickle.loads(pickle.dumps(k))(X), k(X))
    assert repr(k).startswith("Normalized(") and not k.is_stationary()
    k2 = k.clone_with_theta(k.theta + 0.1)
    np.testing.assert_allclose(k2.kernel.theta, k.theta + 0.1)


def test_normalized_refuses_a_non_positive_diagonal():
    X = np.array([[0.0, 0.0], [1.0, 1.0]])
    with pytest.raises(ValueError, match="must be positive"):
        Normalized(DotProduct(sigma_0=0.0))(X)
    with pytest.raises(ValueError, match="must be positive"):
        Normalized(DotProduct(sigma_0=0.0))(X[1:], X[:1])


def test_normalized_in_a_gaussian_process():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(12, 2)) + 3.0
    y = X[:, 0] - X[:, 1]
    gpr = GaussianProcessRegressor(Normalized(RBF(1.0)), random_state=0).fit(X, y)
    assert isinstance(gpr.kernel_, Normalized) and np.isfinite(gpr.log_marginal_likelihood_value_)


# ---------------------------------------------------------------------- Tanimoto
def test_tanimoto_by_hand():
    A = np.array([[1, 1, 0, 0], [0, 1, 1, 0], [0, 0, 0, 0], [1, 1, 1, 1]])
    K = Tanimoto()(A)
    # rows 0 and 1 share one bit of three set in either: 1 / (2 + 2 - 1); rows 0 and 3: 2 / (2 + 4 - 2)
    assert K[0, 1] == pytest.approx(1 / 3) and K[0, 3] == pytest.approx(0.5)
    assert K[2, 2] == 1.0 and K[2, 0] == 0.0  # two all-zero vectors are alike, zero and non-zero are not
    np.testing.assert_allclose(Tanimoto().diag(A), 1.0)
    np.testing.assert_allclose(Tanimoto()(A[:2], A[2:]), K[:2, 2:])
    assert np.linalg.eigvalsh(K).min() > -1e-12


def test_tanimoto_counts_gradient_and_protocol():
    A = np.array([[2.0, 1.0], [1.0, 3.0]])
    # counts: a.b = 5, a.a = 5, b.b = 10
    assert Tanimoto()(A)[0, 1] == pytest.approx(5 / (5 + 10 - 5))
    K, dK = Tanimoto()(A, eval_gradient=True)
    assert dK.shape == (2, 2, 0)
    np.testing.assert_allclose(K, Tanimoto()(A))
    with pytest.raises(ValueError, match="Y is None"):
        Tanimoto()(A, A, eval_gradient=True)
    assert clone(Tanimoto()) == Tanimoto() and len(Tanimoto().theta) == 0
    assert pickle.loads(pickle.dumps(Tanimoto())) == Tanimoto()
    assert repr(Tanimoto()) == "Tanimoto()" and not Tanimoto().is_stationary()


# ---------------------------------------------------------------------- scores and splits
def test_regression_metrics():
    y, p = np.array([1.0, 2.0, 3.0, 4.0]), np.array([1.0, 2.0, 3.0, 6.0])
    m = regression_metrics(y, p)
    assert m == pytest.approx({"rmse": 1.0, "mae": 0.5, "r2": 1 - 4 / 5})
    assert all(type(v) is float for v in m.values())
    one = regression_metrics(np.array([2.0]), np.array([3.0]))
    assert one["rmse"] == 1.0 and one["mae"] == 1.0 and np.isnan(one["r2"])


def test_kfold_splits_cover_every_index_once_per_seed():
    splits = kfold_splits(10, 3, seeds=(0, 1))
    assert [(s, k) for s, k, _, _ in splits] == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]
    for seed in (0, 1):
        tests = [te for s, _, _, te in splits if s == seed]
        assert sorted(np.concatenate(tests).tolist()) == list(range(10))
    for _, _, tr, te in splits:
        assert not set(tr) & set(te) and len(tr) + len(te) == 10
    assert [te.tolist() for *_, te in kfold_splits(10, 3, (0,))] == [te.tolist() for *_, te in splits[:3]]
    for folds in (1, 11):
        with pytest.raises(ValueError, match=r"folds must lie in \[2, 10\]"):
            kfold_splits(10, folds, (0,))


def test_labelled_split():
    tr, te = labelled_split(("test", "train", "train", "other", "test"))
    assert tr.tolist() == [1, 2] and te.tolist() == [0, 4]
    tr, te = labelled_split(["a", "b"], train="b", test="a")
    assert tr.tolist() == [1] and te.tolist() == [0]


# ---------------------------------------------------------------------- fingerprints
def test_morgan_fingerprints():
    pytest.importorskip("rdkit")
    fp = morgan_fingerprints(["CCO", "OCC", "c1ccccc1"])
    assert fp.shape == (3, 2048) and fp.dtype == np.uint8
    np.testing.assert_array_equal(fp[0], fp[1])  # same molecule
    assert 0 < fp[2].sum() < 20
    assert morgan_fingerprints(["CCO"], n_bits=64).shape == (1, 64)
    with pytest.raises(ValueError, match="cannot parse"):
        morgan_fingerprints(["C1CC"])


def test_morgan_fingerprints_without_rdkit(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_rdkit(name, *args, **kwargs):
        if name == "rdkit" or name.startswith("rdkit."):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_rdkit)
    assert morgan_fingerprints(["CCO"]) is None


def test_the_example_re_exports_them():
    from mgkflow.examples import gpr_freesolv
    from mgkflow.examples.gpr_freesolv import Normalized as N
    from mgkflow.examples.gpr_freesolv import Tanimoto as T

    assert N is Normalized and T is Tanimoto and gpr_freesolv.morgan_fingerprints is morgan_fingerprints
