"""python -m mgkflow.examples.property_benchmark: a small run end to end, prepared files, bad arguments."""

from __future__ import annotations

import gzip
import pickle

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("rdkit")

from mgkflow.examples import property_benchmark as pb  # noqa: E402


@pytest.fixture(scope="module")
def prepared():
    return pb.prepare("lombardo", n_molecules=24)


def test_prepare_featurizes_without_features(prepared):
    assert prepared.name == "lombardo" and len(prepared.y) == 24 == len(prepared.graphs)
    assert all(g.features is None for g in prepared.graphs)
    assert prepared.descriptors.shape == (24, len(prepared.descriptor_names))
    assert prepared.fingerprints.dtype == np.uint8 and prepared.fingerprints.shape == (24, 2048 // 8)


def test_benchmark_fits_every_model_on_the_same_folds(prepared):
    folds, preds = pb.benchmark([prepared], folds=3, seeds=(0,), backend="cpu")
    assert set(folds.model) == set(pb.DEFAULT_MODELS) and len(folds) == 3 * len(pb.DEFAULT_MODELS)
    assert np.all(np.isfinite(folds.rmse))
    for _, g in preds.groupby("model"):  # each model predicted each molecule once
        assert sorted(g["index"]) == list(range(24))
    summary = pb.summarize(folds)
    assert set(summary.columns) >= {"rmse_mean", "rmse_std", "fit_seconds_total", "n_fits"}
    mean = folds[folds.model == "mean"].rmse.to_numpy()
    assert np.all(mean > 0)


def test_main_writes_outputs_and_prepared_files_round_trip(prepared, tmp_path, monkeypatch):
    monkeypatch.setattr(pb, "prepare", lambda name, n: prepared)
    f = tmp_path / "sets.pkl.gz"
    assert pb.main(["--datasets", "lombardo", "--prepare", str(f), "--quiet"]) == 0
    with gzip.open(f) as fh:
        assert [d["name"] for d in pickle.load(fh)] == ["lombardo"]
    out = tmp_path / "out"
    argv = [
        "--prepared",
        str(f),
        "--datasets",
        "lombardo",
        "--models",
        "mean,descriptors",
        "--folds",
        "3",
        "--seeds",
        "0",
        "--backend",
        "cpu",
        "--out",
        str(out),
        "--quiet",
    ]
    assert pb.main(argv) == 0
    for name in ("folds.csv", "predictions.csv", "summary.csv", "summary.md", "parity_lombardo.png"):
        assert (out / name).stat().st_size > 0
    assert set(pd.read_csv(out / "summary.csv").model) == {"mean", "descriptors"}


@pytest.mark.parametrize(
    "argv",
    [
        ["--datasets", "nope", "--out", "x"],
        ["--models", "svm", "--out", "x"],
        ["--seeds", "a", "--out", "x"],
        ["--folds", "1", "--out", "x"],
        ["--n-molecules", "3", "--out", "x"],
        [],
        ["--prepare", "a", "--prepared", "b"],
    ],
)
def test_bad_arguments_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        pb.main(argv)
    assert exc.value.code == 2
    assert "Traceback" not in capsys.readouterr().err


def test_a_missing_prepared_file_is_one_line(tmp_path, capsys):
    assert pb.main(["--prepared", str(tmp_path / "none.pkl.gz"), "--out", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("mgkflow: error:") and len(err.strip().splitlines()) == 1
