"""The GPR example (mgkflow.examples.gpr_freesolv): helpers and fast smoke runs on tiny subsets.

The kernels, scores and fingerprints it uses (mgkflow.learn) are tested in test_learn.py."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.gaussian_process.kernels import Hyperparameter, Kernel

from mgkflow import MarginalizedGraphKernel
from mgkflow.examples import gpr_freesolv as ex

QUIET = dict(log=lambda s: None)


class NodeCountKernel(Kernel):
    """A stand-in scikit-learn kernel on graphs (RBF on node counts, unnormalized by a linear
    factor) so that the example's GPR path runs before the MGK has the scikit-learn interface."""

    def __init__(self, length_scale=2.0, length_scale_bounds=(1e-2, 1e2)):
        self.length_scale = length_scale
        self.length_scale_bounds = length_scale_bounds

    @property
    def hyperparameter_length_scale(self):
        return Hyperparameter("length_scale", "numeric", self.length_scale_bounds)

    @property
    def requires_vector_input(self):
        return False

    def _n(self, X):
        return np.array([g.n_nodes for g in X], dtype=float)

    def __call__(self, X, Y=None, eval_gradient=False):
        a = self._n(X)
        b = a if Y is None else self._n(Y)
        d2 = (a[:, None] - b[None, :]) ** 2
        scale = np.outer(a, b)  # makes the diagonal differ from 1, so normalizing matters
        K = scale * np.exp(-0.5 * d2 / self.length_scale**2)
        if eval_gradient:
            return K, (K * d2 / self.length_scale**2)[:, :, None]
        return K

    def diag(self, X):
        return self._n(X) ** 2

    def is_stationary(self):
        return False


def _check_outputs(out, name, models, n_rows):
    folds = pd.read_csv(out / f"{name}_folds.csv")
    summary = pd.read_csv(out / f"{name}_summary.csv")
    pred = pd.read_csv(out / f"{name}_predictions.csv")
    assert list(summary["model"]) == models
    assert np.all(np.isfinite(folds[["rmse", "mae"]].to_numpy()))
    assert (folds["rmse"] >= folds["mae"]).all()
    for m in models:
        assert (pred["model"] == m).sum() == n_rows
    png = (out / f"{name}_parity.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert not list(out.glob("*.tmp"))
    return folds, summary, pred


def _models():
    return ["mgk-krr-grid"] + (["morgan-tanimoto-gpr"] if ex.morgan_fingerprints(["C"]) is not None else []) + ["mean"]


def test_grid_fallback_smoke_freesolv(tmp_path):
    cfg = ex.RunConfig(
        dataset="freesolv", out=tmp_path, n_molecules=24, seeds=(0,), folds=3, backend="cpu", mode="grid",
        grid=ex.GRID[:2], maxiter=3, **QUIET,
    )  # fmt: skip
    summary = ex.run(cfg)
    folds, saved, pred = _check_outputs(tmp_path, "freesolv", _models(), 24)
    assert list(saved["n_molecules"]) == [24] * len(saved)
    assert len(folds) == 3 * len(saved)
    # out-of-fold: every molecule predicted exactly once per model
    assert sorted(pred[pred["model"] == "mean"]["index"]) == list(range(24))
    # the mean predictor of each fold is the training mean
    y = ex._load(cfg).y
    for _, sub in pred[pred["model"] == "mean"].groupby("fold"):
        te = sub["index"].to_numpy()
        np.testing.assert_allclose(sub["y_pred"], np.delete(y, te).mean())
    assert folds[folds["model"] == "mgk-krr-grid"]["params"].str.contains("h_node=0.2").all()
    np.testing.assert_allclose(summary["rmse_mean"], saved["rmse_mean"])


def test_grid_fallback_smoke_solubility_split(tmp_path):
    cfg = ex.RunConfig(
        dataset="solubility", out=tmp_path, n_molecules=30, backend="cpu", mode="grid", grid=ex.GRID[:1],
        models=("mgk", "mean"), **QUIET,
    )  # fmt: skip
    ex.run(cfg)
    data = ex._load(cfg)
    n_test = sum(s == "test" for s in data.split)
    folds, _, pred = _check_outputs(tmp_path, "solubility", ["mgk-krr-grid", "mean"], n_test)
    assert (folds["n_test"] == n_test).all() and (folds["n_train"] == 30 - n_test).all()


def test_gpr_path_with_a_stand_in_graph_kernel(tmp_path):
    cfg = ex.RunConfig(
        dataset="freesolv", out=tmp_path, n_molecules=20, seeds=(1,), folds=2, mode="gpr", maxiter=2,
        models=("mgk", "mean"), mgk_factory=lambda: ex.Normalized(NodeCountKernel()), **QUIET,
    )  # fmt: skip
    ex.run(cfg)
    folds, _, _ = _check_outputs(tmp_path, "freesolv", ["mgk-gpr", "mean"], 20)
    assert folds[folds["model"] == "mgk-gpr"]["params"].str.contains("Normalized").all()


@pytest.mark.parametrize("bias", [True, False])
def test_gpr_bias_term(tmp_path, bias):
    cfg = ex.RunConfig(
        dataset="freesolv", out=tmp_path, n_molecules=16, seeds=(0,), folds=2, mode="gpr", maxiter=2,
        models=("mgk",), mgk_factory=lambda: ex.Normalized(NodeCountKernel()), bias=bias, **QUIET,
    )  # fmt: skip
    ex.run(cfg)
    folds = pd.read_csv(tmp_path / "freesolv_folds.csv")
    # C * k + White, plus a fitted constant (intercept) kernel when bias is on
    assert [p.count(" + ") for p in folds["params"]] == [2 if bias else 1] * 2


def test_gpr_with_the_real_mgk(tmp_path):
    cfg = ex.RunConfig(
        dataset="freesolv", out=tmp_path, n_molecules=12, seeds=(0,), folds=2, backend="cpu", mode="gpr",
        maxiter=2, models=("mgk",), **QUIET,
    )  # fmt: skip
    ex.run(cfg)
    _check_outputs(tmp_path, "freesolv", ["mgk-gpr"], 12)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--folds", "1", "--n-molecules", "8", "--models", "mean"], "folds"),
        (["--models", "mgk,svm"], "unknown models"),
        (["--n-molecules", "2"], "at least 4"),
    ],
)
def test_cli_errors(tmp_path, capsys, argv, message):
    assert ex.main([*argv, "--out", str(tmp_path)]) == 2
    assert message in capsys.readouterr().err


def test_cli_mean_only(tmp_path, capsys):
    assert ex.main(["--n-molecules", "10", "--seeds", "0", "--models", "mean", "--out", str(tmp_path)]) == 0
    assert "mean" in capsys.readouterr().out
    _check_outputs(tmp_path, "freesolv", ["mean"], 10)


# ---------------------------------------------------------------------- helpers
def test_molecular_kernels_and_normalized_mgk():
    node, edge = ex.molecular_kernels(0.3, 0.7)
    assert [h.value for h in node.hyperparameters] == [0.3] * 5
    assert "hydrogens" in node.fields
    assert [h.value for h in edge.hyperparameters] == [0.7] * 2
    k = ex.normalized_mgk(0.3, 0.7, q=0.1, backend="cpu")
    assert isinstance(k, MarginalizedGraphKernel) and k.q == 0.1 and k.normalize
