"""The learning-at-scale suite (``python -m mgkflow.bench scale``) on tiny sizes, on the CPU."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("rdkit")

from mgkflow.bench import SUITES, learn_scale  # noqa: E402
from mgkflow.errors import BackendUnavailableError, ParameterError  # noqa: E402
from mgkflow.io import PathNotFoundError  # noqa: E402

#: A run with every phase: 40 training molecules, 8 landmarks, an exact GP on 20, 30 screened in 3 chunks.
ARGS = [
    *"--n-train 40 --n-test 12 --landmarks 8 --n-screen 30 --chunk-size 10 --exact-n 20 --resume-check".split(),
    *"--backend cpu --max-iter 8 --seed 3 --keep-files -q".split(),
]
PHASES = ["data", "featurize", "fit", "predict", "exact", "lowrank_at_exact_n", "screen", "resume"]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[pd.DataFrame, str, Path]:
    out = tmp_path_factory.mktemp("scale")
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        assert learn_scale.main([*ARGS, "--out", str(out)]) == 0
    return pd.read_csv(out / "scale.csv").set_index("phase"), stdout.getvalue(), out


def test_one_row_and_one_line_per_phase(run):
    table, stdout, out = run
    assert list(table.index) == PHASES
    assert set(table["hardware"]) == {"cpu"} and set(table["backend"]) == {"cpu"} and set(table["seed"]) == {3}
    assert [line.split()[1] for line in stdout.splitlines()] == PHASES
    assert all("[cpu]" in line for line in stdout.splitlines())


def test_the_screen_output_and_what_is_kept(run, tmp_path):
    _, _, out = run
    files = out / "scale_files"
    assert sorted(p.name for p in files.iterdir()) == [
        "scale_model.mgk", "screen.csv", "screen_input.csv", "screen_resumed.csv"
    ]  # fmt: skip
    preds = pd.read_csv(files / "screen.csv", keep_default_na=False)
    assert preds["id"].tolist() == [f"s{i}" for i in range(30)] and np.all(np.isfinite(preds["mean"]))
    assert np.all(preds["std"] > 0) and set(preds["error"]) == {""}
    # without --keep-files nothing but scale.csv stays
    argv = "--n-train 4 --n-test 2 --landmarks 2 --n-screen 3 --max-iter 2 --no-descriptors --backend cpu -q --out"
    assert learn_scale.main([*argv.split(), str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scale.csv"]


def test_keep_files_without_a_screen_keeps_the_model_file(tmp_path):
    argv = "--n-train 4 --n-test 2 --landmarks 2 --n-screen 0 --max-iter 2 --no-descriptors --backend cpu -q"
    assert learn_scale.main([*argv.split(), "--keep-files", "--out", str(tmp_path)]) == 0
    files = tmp_path / "scale_files"
    assert sorted(p.name for p in files.iterdir()) == ["scale_model.mgk"]
    from mgkflow.learn.model_file import load_model

    assert load_model(files / "scale_model.mgk").predict(["CCO"]).shape == (1,)


def test_the_screen_stages_in_process_and_on_dask(run, tmp_path):
    table, _, _ = run
    row = table.loc["screen"]
    assert row["workers"] == 0 and row["featurize_s"] > 0 and row["predict_s"] > 0 and row["wait_s"] >= 0
    pytest.importorskip("distributed")
    argv = "--n-train 4 --n-test 2 --landmarks 2 --n-screen 6 --chunk-size 3 --max-iter 2 --no-descriptors"
    assert learn_scale.main([*argv.split(), "--backend", "cpu", "--dask", "local:1", "-q", "--out", str(tmp_path)]) == 0
    dask = pd.read_csv(tmp_path / "scale.csv").set_index("phase").loc["screen"]
    assert dask["workers"] == 1 and dask["n"] == 6 and np.isnan(dask["featurize_s"])  # stages: in-process only


def test_the_resume_check_sees_a_difference(run, tmp_path):
    _, _, out = run
    files = out / "scale_files"
    reference = tmp_path / "reference.csv"
    reference.write_bytes(files.joinpath("screen.csv").read_bytes().replace(b"s29", b"s30"))
    args = learn_scale._parser().parse_args(["--n-screen", "30", "--chunk-size", "10", "-q"])
    row = learn_scale._resume_row(files / "scale_model.mgk", files / "screen_input.csv", reference,
                                  tmp_path / "again.csv", args, lambda text: None)  # fmt: skip
    assert row["identical"] is False and row["resumed"] == 1 and row["computed"] == 2
    assert (tmp_path / "again.csv").read_bytes() == files.joinpath("screen_resumed.csv").read_bytes()


def test_sizes_and_counts(run):
    table, _, _ = run
    assert table.loc["data", ["n_train", "n_test", "n_screen", "dropped"]].tolist() == [40, 12, 30, 0]
    assert table.loc["fit", "m"] == 8 and table.loc["fit", "pairs"] == 40 * 8 and table.loc["fit", "kernel_evals"] > 1
    assert table.loc["lowrank_at_exact_n", "m"] == 8 and table.loc["lowrank_at_exact_n", "n"] == 20
    assert table.loc["exact", "pairs"] == 20 * 21 // 2 and np.isnan(table.loc["exact", "m"])
    assert table.loc["screen", "chunks"] == 3 and table.loc["screen", "failed"] == 0
    assert table.loc["screen", "model_bytes"] > 0


def test_figures_are_finite_and_consistent(run):
    table, _, _ = run
    assert np.all(table["seconds"] > 0) and np.all(np.isfinite(table["seconds"]))
    assert np.all(table["peak_rss_bytes"] > 1e6)
    assert np.all(np.diff(table["peak_rss_bytes"].to_numpy()) >= 0)  # a high-water mark
    for phase in ("predict", "screen"):
        r = table.loc[phase]
        assert r["pairs_per_s"] == pytest.approx(r["n"] * r["m"] / r["seconds"], rel=1e-12)
        assert r["molecules_per_s"] == pytest.approx(r["n"] / r["seconds"], rel=1e-12)
    assert table.loc["featurize", "molecules_per_s"] == pytest.approx(40 / table.loc["featurize", "seconds"])
    assert 0 < table.loc["fit", "landmark_s"] < table.loc["fit", "seconds"]
    for phase in ("predict", "exact", "lowrank_at_exact_n"):
        r = table.loc[phase]
        assert np.isfinite(r["rmse"]) and 0 < r["mae"] <= r["rmse"] < 3.0  # logP spreads over about ±1.5
    low, exact = table.loc["lowrank_at_exact_n"], table.loc["exact"]
    assert low["rmse_vs_exact"] == pytest.approx(low["rmse"] / exact["rmse"])
    assert exact["featurize_s"] > 0 and low["featurize_s"] > 0


def test_the_resumed_screen_is_identical(run):
    table, _, _ = run
    r = table.loc["resume"]
    assert bool(r["identical"]) is True
    assert r["chunks"] == 3 and r["stopped_after"] == 2
    assert r["resumed"] == r["stopped_after"] - 1 and r["computed"] == r["chunks"] - r["resumed"]


def test_registered_as_a_suite():
    assert SUITES["scale"] == "mgkflow.bench.learn_scale"
    assert importlib.import_module(SUITES["scale"]).main is learn_scale.main


@pytest.mark.parametrize(
    "argv",
    [
        ["--n-train", "0"],
        ["--n-test", "x"],
        ["--n-train", "10", "--exact-n", "11"],
        ["--exact-n", "1"],
        ["--resume-check", "--n-screen", "20", "--chunk-size", "10"],
        ["--backend", "tpu"],
        ["--target", "mw"],
        ["--dask", "local:x"],
    ],
)
def test_bad_options_exit_with_a_usage_error(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        learn_scale.main(argv)
    assert exc.value.code == 2
    assert "error:" in capsys.readouterr().err


def test_a_split_larger_than_the_source_is_refused(tmp_path):
    with pytest.raises(ParameterError, match="10000 molecules"):
        learn_scale.main([*"--n-train 9000 --n-test 1000 --n-screen 1 --backend cpu -q --out".split(), str(tmp_path)])
    with pytest.raises(PathNotFoundError):
        learn_scale.main(["--source", str(tmp_path / "none.csv.gz"), "--backend", "cpu", "-q"])
    assert not (tmp_path / "scale.csv").exists()


def test_without_rdkit_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "rdkit", None)  # import rdkit now raises ImportError
    with pytest.raises(BackendUnavailableError, match="needs RDKit"):
        learn_scale.main(["--backend", "cpu", "-q"])


def _namespace(source: str, **kw: int) -> argparse.Namespace:
    return argparse.Namespace(source=source, target="logp", seed=kw.get("seed", 0), n_train=kw.get("n_train", 3),
                              n_test=kw.get("n_test", 2), n_screen=kw.get("n_screen", 2))  # fmt: skip


def test_a_csv_source_gets_stand_in_labels_and_loses_bad_smiles(tmp_path):
    from mgkflow.datasets.moses_set import stand_in_labels

    smiles = ["CCO", "c1ccccc1", "not_a_smiles", "CC(=O)O", "CCN", "CCCCO", "c1ccccc1O", "CCOC"]
    pd.DataFrame({"SMILES": smiles, "SPLIT": "train"}).to_csv(tmp_path / "train.csv.gz", index=False)
    # a seed whose permutation meets the bad SMILES among the first five: it must be dropped and replaced
    seed = next(s for s in range(100) if list(np.random.default_rng(s).permutation(8)).index(2) < 5)
    data = learn_scale._load(_namespace(str(tmp_path / "train.csv.gz"), seed=seed))
    picked = data["train"] + data["test"] + data["screen"]
    assert (len(data["train"]), len(data["test"]), len(data["screen"])) == (3, 2, 2)
    assert data["row"]["dropped"] == 1 and "not_a_smiles" not in picked
    assert len(set(picked)) == 7 and set(picked) <= set(smiles)  # disjoint
    got = np.concatenate([data["y_train"], data["y_test"]])
    np.testing.assert_array_equal(got, [stand_in_labels(s)["logp"] for s in data["train"] + data["test"]])


def test_the_subset_split_is_seeded_and_reads_what_the_moses_loader_reads():
    from mgkflow.datasets.moses_set import moses

    smiles, y, _ = learn_scale._read_source("subset", "tpsa")
    ref = moses(n_graphs=5, target="tpsa")
    assert len(smiles) == 10000 and smiles[:5] == list(ref.smiles) and y[:5].tolist() == ref.y.tolist()
    a = learn_scale._load(_namespace("subset", seed=5, n_train=50, n_test=10, n_screen=10))
    b = learn_scale._load(_namespace("subset", seed=5, n_train=50, n_test=10, n_screen=10))
    c = learn_scale._load(_namespace("subset", seed=6, n_train=50, n_test=10, n_screen=10))
    assert a["train"] == b["train"] and a["screen"] == b["screen"] and a["train"] != c["train"]
    assert len(set(a["train"] + a["test"] + a["screen"])) == 70
    smiles, y, _ = learn_scale._read_source("subset", "logp")
    lookup = dict(zip(smiles, y))
    assert [lookup[s] for s in a["train"] + a["test"]] == a["y_train"].tolist() + a["y_test"].tolist()


def test_stand_in_labels_in_processes_equal_the_serial_ones():
    pytest.importorskip("rdkit")
    from mgkflow.bench.learn_scale import _labels
    from mgkflow.datasets._common import data_dir

    smiles = pd.read_csv(data_dir() / "moses.csv", dtype={"smiles": str}, keep_default_na=False)["smiles"][:2000]
    smiles = [*smiles[:-1], "not a smiles"]  # an unparsable one keeps its place, as None
    serial = _labels(smiles, "logp", None)
    assert serial[-1] is None and all(v is not None for v in serial[:-1])
    assert _labels(smiles, "logp", 2) == serial


def test_the_test_molecules_are_the_same_for_every_n():
    """The split takes the test molecules first: runs at two N score on the same molecules, and the
    smaller training set is the start of the larger one."""
    from mgkflow.bench.learn_scale import _load, _parser

    small = _load(_parser().parse_args("--n-train 6 --n-test 4 --n-screen 0".split()))
    large = _load(_parser().parse_args("--n-train 15 --n-test 4 --n-screen 3".split()))
    assert small["test"] == large["test"] and list(small["y_test"]) == list(large["y_test"])
    assert large["train"][:6] == small["train"] and not set(large["test"]) & set(large["train"])
    assert len(large["screen"]) == 3 and not set(large["screen"]) & set(large["train"] + large["test"])


def test_neighbors_reports_the_corrected_and_the_plain_error(tmp_path):
    argv = "--n-train 30 --n-test 6 --landmarks 3 --neighbors 8 --exact-n 30 --n-screen 0 --max-iter 2 --no-descriptors"
    assert learn_scale.main([*argv.split(), "--backend", "cpu", "-q", "--out", str(tmp_path)]) == 0
    table = pd.read_csv(tmp_path / "scale.csv").set_index("phase")
    row = table.loc["predict"]
    assert row["neighbors"] == 8 and row["rmse_lowrank"] > 0
    # the correction changed the predictions, unless the left-out training points switched it off at the fit
    assert (row["rmse"] != row["rmse_lowrank"]) != np.isinf(row["local_noise"]), row
    assert table.loc["lowrank_at_exact_n", "rmse"] == row["rmse"]  # E = N: the main fit and prediction, reused


def test_hyper_sample_fits_the_hyperparameters_on_a_sample(tmp_path):
    argv = "--n-train 30 --n-test 6 --landmarks 3 --hyper-sample 12 --n-screen 0 --max-iter 2 --no-descriptors"
    assert learn_scale.main([*argv.split(), "--backend", "cpu", "-q", "--out", str(tmp_path)]) == 0
    fit = pd.read_csv(tmp_path / "scale.csv").set_index("phase").loc["fit"]
    assert fit["sample_s"] > 0 and fit["kernel_evals"] >= 1
