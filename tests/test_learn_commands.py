"""``mgkflow fit`` and ``mgkflow predict`` (mgkflow/cli_learn.py), model files (mgkflow.learn.model_file) and
streamed, resumable screening (mgkflow.learn.screening): round trips, refusals, resuming after an interruption
(a chunk limit, an exception, a real ``kill -9``) to byte-identical output, and the error messages."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import pickle
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mgkflow.cli import main
from mgkflow.datasets import data_dir
from mgkflow.errors import FileFormatError, MgkflowError, ModelFileError, ModelVersionError, OutputPathError

pytest.importorskip("rdkit")

from mgkflow.learn import screening  # noqa: E402 - after the RDKit check
from mgkflow.learn.model_file import load_model, read_model_info, save_model  # noqa: E402
from mgkflow.learn.screening import ScreenMismatchError, parts_dir, screen  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
N_TRAIN, N_CANDIDATES = 30, 40


def _moses_rows() -> list[dict[str, str]]:
    with open(data_dir() / "moses.csv", newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _run(argv: list[str]) -> tuple[int, str]:
    """(exit code, stderr) of ``mgkflow ARGV`` run in this process."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            rc = main(argv)
        except SystemExit as exc:
            rc = exc.code
    return rc, err.getvalue()


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A training CSV (30 MOSES molecules, logP stand-in), candidates (40, two invalid), a fitted model file."""
    d = tmp_path_factory.mktemp("fitpredict")
    rows = _moses_rows()
    train = d / "train.csv"
    with open(train, "w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(["name", "smiles", "logp"])
        for r in rows[:N_TRAIN]:
            w.writerow([f"m{r['moses_index']}", r["smiles"], r["logp"]])
    cands = d / "candidates.csv"
    with open(cands, "w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(["smiles", "name"])
        for k, r in enumerate(rows[N_TRAIN:N_TRAIN + N_CANDIDATES]):
            w.writerow([r["smiles"], f"c{k}"])
            if k == 10:
                w.writerow(["C1CC(", "broken"])      # RDKit cannot parse it
            if k == 20:
                w.writerow(["[H][H]", "hydrogen"])   # no heavy atom
    model = d / "model.mgk"
    rc, err = _run(["fit", str(train), "--smiles-col", "smiles", "--target", "logp", "--model", str(model),
                    "--restarts", "0", "--seed", "0", "--backend", "cpu"])
    assert rc == 0, err
    assert "fit step 1:" in err  # a progress line per optimizer step
    return {"dir": d, "train": train, "candidates": cands, "model": model}


def _predict(files: dict[str, Path], out: Path, *extra: str) -> tuple[int, str]:
    return _run(["predict", str(files["model"]), str(files["candidates"]), "--out", str(out), "-q", *extra])


# ---------------------------------------------------------------------------- round trip
def test_fit_then_predict_round_trip(files: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "preds.csv"
    rc, err = _predict(files, out, "--chunk-size", "16")
    assert rc == 0, err
    df = pd.read_csv(out, keep_default_na=False, na_values={"mean": ["nan"], "std": ["nan"]})
    assert list(df.columns) == ["line", "id", "smiles", "mean", "std", "error"]
    assert len(df) == N_CANDIDATES + 2
    bad = df[df.error != ""]
    assert list(bad.id) == ["broken", "hydrogen"] and bad["mean"].isna().all() and bad["std"].isna().all()
    assert "RDKit could not parse" in bad.error.iloc[0] and "heavy atom" in bad.error.iloc[1]
    good = df[df.error == ""]
    assert np.all(np.isfinite(good["mean"])) and np.all(good["std"] > 0)
    assert list(df.line) == list(range(2, N_CANDIDATES + 4))  # input lines, header is line 1
    # the same numbers as the estimator of the model file gives in one call
    model = load_model(files["model"])
    mean, std = model.predict(list(good.smiles), return_std=True)
    np.testing.assert_allclose(good["mean"], mean, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(good["std"], std, rtol=1e-10, atol=1e-12)
    # the stand-in label is learnt: better than predicting the training mean
    truth = {r["smiles"]: float(r["logp"]) for r in _moses_rows()}
    y = np.array([truth[s] for s in good.smiles])
    assert np.sqrt(np.mean((good["mean"] - y) ** 2)) < np.std(y)
    assert not parts_dir(out).exists()  # the work directory goes once the output is assembled


def test_fit_without_descriptors(files: dict[str, Path], tmp_path: Path) -> None:
    model = tmp_path / "m.mgk"
    rc, err = _run(["fit", str(files["train"]), "--target", "logp", "--model", str(model), "--restarts", "0",
                    "--no-descriptors", "--backend", "cpu", "-q"])
    assert rc == 0, err
    assert err == ""  # --quiet
    info = read_model_info(model)
    assert info["metadata"]["options"]["descriptors"] is False and "FeatureKernel" not in info["kernel"]
    assert info["metadata"]["options"]["extensive"] is False
    assert info["metadata"]["training"]["n_molecules"] == N_TRAIN
    rc, err = _run(["predict", str(model), str(files["candidates"]), "--out", str(tmp_path / "p.csv"), "-q"])
    assert rc == 0, err


def test_model_file_records_what_it_holds(files: dict[str, Path]) -> None:
    info = read_model_info(files["model"])
    assert info["format"] == "mgkflow-model" and info["format_version"] == "1.0"
    assert info["estimator"] == "mgkflow.learn.molecular.MolecularGPR"
    assert "MarginalizedGraphKernel" in info["kernel"] and "k2__noise_level" in info["hyperparameters"]
    training = info["metadata"]["training"]
    assert training["target"] == "logp" and training["smiles_column"] == "smiles"
    assert len(training["sha256"]) == 64 and training["n_skipped"] == 0
    assert {"python", "numpy", "scikit-learn", "rdkit"} <= set(info["versions"])
    assert info["created"].endswith("+00:00")


def test_help_documents_every_option(capsys: pytest.CaptureFixture[str]) -> None:
    import argparse

    from mgkflow.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for cmd in ("fit", "predict"):
        with pytest.raises(SystemExit) as exc:
            main([cmd, "--help"])
        assert exc.value.code == 0
        text = capsys.readouterr().out
        for action in sub.choices[cmd]._actions:
            assert action.help, f"{cmd} {action.option_strings or action.dest} has no help"
            for opt in action.option_strings:
                assert opt in text, f"{cmd} --help does not show {opt}"
    with pytest.raises(SystemExit):
        main(["--help"])
    top = capsys.readouterr().out
    assert "fit" in top and "predict" in top


# ---------------------------------------------------------------------------- refusals
def test_existing_outputs_are_refused_without_force(files: dict[str, Path], tmp_path: Path) -> None:
    rc, err = _run(["fit", str(files["train"]), "--target", "logp", "--model", str(files["model"]), "-q"])
    assert rc == 1 and err.startswith("mgkflow fit: error:") and "--force" in err and len(err.splitlines()) == 1
    out = tmp_path / "p.csv"
    out.write_text("keep me\n")
    rc, err = _predict(files, out)
    assert rc == 1 and "exists" in err and "--force" in err
    assert out.read_text() == "keep me\n"
    rc, err = _predict(files, out, "--force")
    assert rc == 0, err
    assert out.read_text().startswith("line,id,smiles,mean,std,error\n")


def _rewrite_manifest(src: Path, dst: Path, **changes: object) -> None:
    with zipfile.ZipFile(src) as z:
        manifest = json.loads(z.read("manifest.json"))
        payload = z.read("model.pkl")
    manifest.update(changes)
    with zipfile.ZipFile(dst, "w") as z:
        z.writestr("manifest.json", json.dumps(manifest))
        z.writestr("model.pkl", payload)


def test_model_file_of_another_version_is_refused(files: dict[str, Path], tmp_path: Path) -> None:
    newer = tmp_path / "newer.mgk"
    _rewrite_manifest(files["model"], newer, mgkflow_version="0.2.0")
    with pytest.raises(ModelVersionError, match=r"written by mgkflow 0\.2\.0, this is mgkflow 0\.1\.\d+.*refit"):
        load_model(newer)
    fmt = tmp_path / "format2.mgk"
    _rewrite_manifest(files["model"], fmt, format_version="2.0")
    with pytest.raises(ModelVersionError, match="model-file format 2.0"):
        load_model(fmt)
    patch = tmp_path / "patch.mgk"  # another patch release of the same major.minor loads
    _rewrite_manifest(files["model"], patch, mgkflow_version="0.1.99")
    assert hasattr(load_model(patch), "predict")
    rc, err = _run(["predict", str(newer), str(files["candidates"]), "--out", str(tmp_path / "p.csv")])
    assert rc == 1 and err.startswith("mgkflow predict: error:") and "0.2.0" in err and "Traceback" not in err
    assert not (tmp_path / "p.csv").exists()


def test_non_model_files_are_refused_clearly(files: dict[str, Path], tmp_path: Path) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("not a model\n")
    with pytest.raises(ModelFileError, match="not an mgkflow model file"):
        load_model(text)
    pkl = tmp_path / "other.pkl"  # a pickle, but not a model file: never unpickled
    pkl.write_bytes(pickle.dumps({"a": 1}))
    with pytest.raises(ModelFileError, match="not a zip archive"):
        load_model(pkl)
    other_zip = tmp_path / "other.zip"
    with zipfile.ZipFile(other_zip, "w") as z:
        z.writestr("readme.txt", "hello")
    with pytest.raises(ModelFileError, match="not an mgkflow model file"):
        read_model_info(other_zip)
    damaged = tmp_path / "damaged.mgk"
    with zipfile.ZipFile(files["model"]) as z:
        manifest, payload = z.read("manifest.json"), bytearray(z.read("model.pkl"))
    payload[len(payload) // 2] ^= 0xFF
    with zipfile.ZipFile(damaged, "w") as z:
        z.writestr("manifest.json", manifest)
        z.writestr("model.pkl", bytes(payload))
    with pytest.raises(ModelFileError, match="damaged"):
        load_model(damaged)
    bad_pickle = tmp_path / "bad_pickle.mgk"
    save_model({"x": 1}, bad_pickle)
    with zipfile.ZipFile(bad_pickle) as z:
        manifest = json.loads(z.read("manifest.json"))
    junk = b"\x80\x05junk"
    manifest["pickle_sha256"] = __import__("hashlib").sha256(junk).hexdigest()
    with zipfile.ZipFile(bad_pickle, "w") as z:
        z.writestr("manifest.json", json.dumps(manifest))
        z.writestr("model.pkl", junk)
    with pytest.raises(ModelFileError, match="cannot be unpickled"):
        load_model(bad_pickle)
    for path in (text, pkl, other_zip, damaged, tmp_path / "missing.mgk"):
        rc, err = _run(["predict", str(path), str(files["candidates"]), "--out", str(tmp_path / "p.csv")])
        assert rc == 1 and err.startswith("mgkflow predict: error:") and "Traceback" not in err, err
        assert "Unpickling" not in err


# ---------------------------------------------------------------------------- resuming
def test_resume_after_a_chunk_limit_is_byte_identical(files: dict[str, Path], tmp_path: Path) -> None:
    whole = tmp_path / "whole.csv"
    res = screen(files["model"], files["candidates"], whole, chunk_size=7, progress=False)
    assert res.complete and res.chunks == 6 and res.computed == 6 and res.failed == 2
    part = tmp_path / "part.csv"
    res = screen(files["model"], files["candidates"], part, chunk_size=7, progress=False, max_chunks=2)
    assert not res.complete and res.computed == 2 and not part.exists()
    assert sorted(p.name for p in parts_dir(part).glob("part-*.csv")) == ["part-0000000.csv", "part-0000001.csv"]
    res = screen(files["model"], files["candidates"], part, chunk_size=7, progress=False)
    assert res.complete and res.resumed == 2 and res.computed == 4 and res.failed == 2
    assert part.read_bytes() == whole.read_bytes()


def test_resume_after_an_exception_is_byte_identical(
    files: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = tmp_path / "whole.csv"
    assert _predict(files, whole, "--chunk-size", "9")[0] == 0
    real = screening._predict_chunk
    calls = []

    def failing(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt  # as Ctrl-C in the third chunk
        return real(*args, **kwargs)

    monkeypatch.setattr(screening, "_predict_chunk", failing)
    out = tmp_path / "out.csv"
    rc, err = _predict(files, out, "--chunk-size", "9")
    assert rc == 130 and not out.exists()
    assert len(list(parts_dir(out).glob("part-*.csv"))) == 2
    assert not list(parts_dir(out).glob(".*tmp"))  # no half-written part left behind
    monkeypatch.setattr(screening, "_predict_chunk", real)
    rc, err = _run(["predict", str(files["model"]), str(files["candidates"]), "--out", str(out),
                    "--chunk-size", "9"])
    assert rc == 0, err
    assert "resuming" in err and "2 of 5 chunks were done by an earlier run" in err
    assert out.read_bytes() == whole.read_bytes()


def test_mismatched_work_directory_is_refused(files: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "out.csv"
    screen(files["model"], files["candidates"], out, chunk_size=7, progress=False, max_chunks=1)
    rc, err = _predict(files, out, "--chunk-size", "8")
    assert rc == 1 and "chunk size 7" in err and "--force" in err and len(err.splitlines()) == 1
    other = tmp_path / "other.csv"
    other.write_text(files["candidates"].read_text() + "CCO,extra\n")
    with pytest.raises(ScreenMismatchError, match="input file changed"):
        screen(files["model"], other, out, chunk_size=7, progress=False)
    model2 = tmp_path / "m2.mgk"
    _rewrite_manifest(files["model"], model2, created="another day")
    with pytest.raises(ScreenMismatchError, match="model changed"):
        screen(model2, files["candidates"], out, chunk_size=7, progress=False)
    res = screen(files["model"], files["candidates"], out, chunk_size=8, progress=False, force=True)
    assert res.complete and res.resumed == 0


def test_resume_after_kill_9_is_byte_identical(files: dict[str, Path], tmp_path: Path) -> None:
    whole = tmp_path / "whole.csv"
    assert _predict(files, whole, "--chunk-size", "4")[0] == 0
    out = tmp_path / "killed.csv"
    argv = [sys.executable, "-m", "mgkflow.cli", "predict", str(files["model"]), str(files["candidates"]),
            "--out", str(out), "--chunk-size", "4", "-q"]
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen(argv, env=env, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    parts = parts_dir(out)
    while time.monotonic() < deadline and proc.poll() is None and len(list(parts.glob("part-*.csv"))) < 2:
        time.sleep(0.05)
    assert proc.poll() is None, proc.stderr.read().decode()[-500:]
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    proc.stderr.close()
    done = len(list(parts.glob("part-*.csv")))
    assert 2 <= done < 11 and not out.exists()
    rc = subprocess.run(argv, env=env, capture_output=True, timeout=300)
    assert rc.returncode == 0, rc.stderr.decode()[-500:]
    assert out.read_bytes() == whole.read_bytes()
    assert not parts.exists()


# ---------------------------------------------------------------------------- input errors
def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_fit_input_errors_are_one_line(tmp_path: Path) -> None:
    model = str(tmp_path / "m.mgk")
    good = "smiles,y\nCCO,1.0\nCCCO,1.5\nc1ccccc1,2.0\n"
    cases = {
        "missing target": (_write(tmp_path / "a.csv", good), ["--target", "logp"], "no column named 'logp'"),
        "missing smiles column": (_write(tmp_path / "b.csv", good), ["--target", "y", "--smiles-col", "smi"],
                                  "no column named 'smi'"),
        "text target": (_write(tmp_path / "c.csv", "smiles,y\nCCO,1.0\nCCCO,high\nCCN,2\n"), ["--target", "y"],
                        "line 3: target 'y': 'high' is not a finite number"),
        "invalid SMILES": (_write(tmp_path / "d.csv", "smiles,y\nCCO,1.0\nC1CC(,1.5\nCCN,2\n"), ["--target", "y"],
                           "line 3: invalid SMILES 'C1CC('"),
        "no SMILES column": (_write(tmp_path / "e.csv", "a,y\n1,2\n3,4\n"), ["--target", "y"], "no SMILES column"),
        "missing file": (tmp_path / "nope.csv", ["--target", "y"], "no such file"),
    }
    for name, (path, opts, message) in cases.items():
        rc, err = _run(["fit", str(path), "--model", model, "-q", *opts])
        assert rc == 1, (name, err)
        assert err.startswith("mgkflow fit: error:") and len(err.strip().splitlines()) == 1, (name, err)
        assert message in err, (name, err)
    assert not Path(model).exists()


def test_fit_skip_invalid_counts_rows(tmp_path: Path) -> None:
    rows = _moses_rows()[:12]
    lines = ["smiles,y"] + [f"{r['smiles']},{r['logp']}" for r in rows]
    lines[3:3] = ["C1CC(,1.0", "CCO,", "CCN,abc"]
    data = _write(tmp_path / "t.csv", "\n".join(lines) + "\n")
    model = tmp_path / "m.mgk"
    rc, err = _run(["fit", str(data), "--target", "y", "--model", str(model), "--restarts", "0",
                    "--no-descriptors", "--backend", "cpu", "--skip-invalid"])
    assert rc == 0, err
    assert "left out 3 invalid rows" in err and "first: line 4" in err
    assert read_model_info(model)["metadata"]["training"]["n_skipped"] == 3


def test_read_training_table_errors_are_mgkflow_errors(tmp_path: Path) -> None:
    from mgkflow.learn.fitting import read_training_table

    data = _write(tmp_path / "t.csv", "smiles,y\nCCO,1\nC1CC(,2\n")
    with pytest.raises(FileFormatError) as exc:
        read_training_table(data, "y")
    assert exc.value.line == 3
    with pytest.raises(FileFormatError, match="1 usable rows"):
        read_training_table(data, "y", skip_invalid=True)
    for bad in (None, 3, "", b"y"):
        with pytest.raises(MgkflowError):
            read_training_table(data, bad)


def test_predict_bad_options(files: dict[str, Path], tmp_path: Path) -> None:
    rc, err = _run(["predict", str(files["model"]), str(files["candidates"]), "--out", str(tmp_path / "p.txt")])
    assert rc == 2 and ".csv or .parquet" in err
    rc, err = _run(["predict", str(files["model"]), str(files["candidates"]), "--out", str(tmp_path / "p.csv"),
                    "--chunk-size", "0"])
    assert rc == 2
    rc, err = _run(["predict", str(files["model"]), str(files["candidates"]), "--out", str(tmp_path / "p.csv"),
                    "--smiles-col", "nope", "-q"])
    assert rc == 1 and "no column named 'nope'" in err
    rc, err = _run(["predict", str(files["model"]), str(tmp_path / "none.smi"), "--out", str(tmp_path / "p.csv")])
    assert rc == 1 and "no such file" in err
    rc, err = _run(["predict", str(files["model"]), str(files["candidates"]), "--out", str(tmp_path)])
    assert rc == 2  # a directory has no .csv suffix


def test_parquet_output(files: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "p.parquet"
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        rc, err = _predict(files, out)
        assert rc == 1 and "pyarrow" in err and "or write .csv" in err and not out.exists()
        return
    csv_out = tmp_path / "p.csv"
    assert _predict(files, out, "--chunk-size", "16")[0] == 0
    assert _predict(files, csv_out, "--chunk-size", "16")[0] == 0
    a = pd.read_parquet(out)
    b = pd.read_csv(csv_out, keep_default_na=False, na_values={"mean": ["nan"], "std": ["nan"]})
    pd.testing.assert_frame_equal(a.reset_index(drop=True), b, check_dtype=False)


def test_headerless_smi_gzip_and_ids(files: dict[str, Path], tmp_path: Path) -> None:
    import gzip

    rows = _moses_rows()[100:105]
    path = tmp_path / "c.smi.gz"
    with gzip.open(path, "wt") as fh:
        fh.write("# candidates\n")
        for r in rows:
            fh.write(f"{r['smiles']} mol{r['moses_index']}\n")
    out = tmp_path / "p.csv"
    res = screen(files["model"], path, out, chunk_size=2, progress=False)
    df = pd.read_csv(out, keep_default_na=False)
    assert res.molecules == 5 and list(df.id) == [f"mol{r['moses_index']}" for r in rows]
    assert list(df.line) == [2, 3, 4, 5, 6]


def test_screen_bad_arguments_raise_mgkflow_errors(files: dict[str, Path], tmp_path: Path) -> None:
    good = {"model": files["model"], "smiles_path": files["candidates"], "out": tmp_path / "p.csv",
            "progress": False}
    bad_values = {
        "model": [None, 3, tmp_path / "missing.mgk", files["candidates"]],
        "smiles_path": [None, 3, tmp_path / "missing.smi", tmp_path],
        "out": [None, 3, tmp_path / "p.txt", tmp_path],
        "chunk_size": [0, -1, 1.5, "10", True, None],
        "max_chunks": [-1, 1.5, "2"],
        "force": ["yes", None],
        "smiles_column": [3.5, "nope", 99],
    }
    for name, values in bad_values.items():
        for value in values:
            with pytest.raises(MgkflowError):
                screen(**{**good, name: value})
    with pytest.raises(OutputPathError):
        screen(**{**good, "out": files["candidates"]})  # exists, a .csv: refused without force


def test_save_model_refuses_what_it_cannot_write(tmp_path: Path) -> None:
    with pytest.raises(MgkflowError):
        save_model(lambda x: x, tmp_path / "m.mgk")  # not picklable
    with pytest.raises(MgkflowError):
        save_model({"a": 1}, tmp_path / "m.mgk", metadata=["not", "a", "dict"])
    with pytest.raises(MgkflowError):
        save_model({"a": 1}, tmp_path)  # a directory
    for bad in (None, 3, tmp_path):
        with pytest.raises(MgkflowError):
            load_model(bad)


def test_fit_low_rank_then_predict(files: dict[str, Path], tmp_path: Path) -> None:
    """--low-rank M fits MolecularGPR(n_landmarks=M): a LowRankGPR on M landmarks."""
    from mgkflow.learn import LowRankGPR

    model = tmp_path / "lr.mgk"
    rc, err = _run(["fit", str(files["train"]), "--target", "logp", "--model", str(model), "--restarts", "0",
                    "--low-rank", "8", "--no-descriptors", "--backend", "cpu", "-q"])
    assert rc == 0, err
    info = read_model_info(model)
    assert info["metadata"]["options"]["low_rank"] == 8
    est = load_model(model)
    assert isinstance(est.gpr_, LowRankGPR) and est.gpr_.n_landmarks_ == 8
    out = tmp_path / "p.csv"
    rc, err = _run(["predict", str(model), str(files["candidates"]), "--out", str(out), "-q"])
    assert rc == 0, err
    df = pd.read_csv(out, keep_default_na=False, na_values={"mean": ["nan"], "std": ["nan"]})
    good = df[df.error == ""]
    assert np.all(np.isfinite(good["mean"])) and np.all(good["std"] > 0)
    rc, err = _run(["fit", str(files["train"]), "--target", "logp", "--model", str(tmp_path / "x.mgk"),
                    "--low-rank", "0"])
    assert rc == 2 and "--low-rank" in err


def test_fit_low_rank_with_neighbors(files: dict[str, Path], tmp_path: Path) -> None:
    """--neighbors K: the low-rank GP's local correction, recorded in the model file; predictions move from the
    plain low-rank ones; without --low-rank it is refused before any work."""
    model = tmp_path / "nn.mgk"
    rc, err = _run(["fit", str(files["train"]), "--target", "logp", "--model", str(model), "--restarts", "0",
                    "--low-rank", "6", "--neighbors", "10", "--no-descriptors", "--backend", "cpu", "-q"])
    assert rc == 0, err
    assert read_model_info(model)["metadata"]["options"]["neighbors"] == 10
    est = load_model(model)
    assert est.gpr_.n_neighbors == 10
    smiles = ["CCOC(=O)c1ccccc1", "CC(C)Cc1ccc(C)cc1"]
    mean, std = est.predict(smiles, return_std=True)
    local, est.gpr_._local = est.gpr_._local, None
    plain, plain_std = est.predict(smiles, return_std=True)
    est.gpr_._local = local
    assert np.all(np.isfinite(mean)) and not np.allclose(mean, plain) and np.all(std <= plain_std + 1e-12)
    rc, err = _run(["fit", str(files["train"]), "--target", "logp", "--model", str(tmp_path / "y.mgk"),
                    "--neighbors", "5"])
    assert rc != 0 and "--low-rank" in err and not (tmp_path / "y.mgk").exists()


def test_fit_low_rank_with_a_hyperparameter_sample(files: dict[str, Path], tmp_path: Path) -> None:
    """--hyper-sample S: the low-rank GP's hyperparameters from the exact GP on S molecules, recorded in the model
    file; without --low-rank, or below 2, it is refused before any work."""
    model = tmp_path / "hs.mgk"
    rc, err = _run(["fit", str(files["train"]), "--target", "logp", "--model", str(model), "--restarts", "0",
                    "--low-rank", "6", "--hyper-sample", "12", "--no-descriptors", "--backend", "cpu", "-q"])
    assert rc == 0, err
    assert read_model_info(model)["metadata"]["options"]["hyper_sample"] == 12
    est = load_model(model)
    assert est.gpr_.hyperparameter_sample == 12 and est.gpr_.sample_seconds_ > 0
    assert np.all(np.isfinite(est.predict(["CCOC(=O)c1ccccc1"])))
    rc, err = _run(["fit", str(files["train"]), "--target", "logp", "--model", str(tmp_path / "y.mgk"),
                    "--hyper-sample", "12"])
    assert rc != 0 and "--low-rank" in err and not (tmp_path / "y.mgk").exists()
    rc, err = _run(["fit", str(files["train"]), "--target", "logp", "--model", str(tmp_path / "z.mgk"),
                    "--low-rank", "6", "--hyper-sample", "1"])
    assert rc == 2 and "--hyper-sample" in err


def test_fit_extensive(files: dict[str, Path], tmp_path: Path) -> None:
    """--extensive adds each view's unnormalized graph kernel: recorded in the model file and in its kernel."""
    model = tmp_path / "x.mgk"
    rc, err = _run(["fit", str(files["train"]), "--target", "logp", "--model", str(model), "--restarts", "0",
                    "--extensive", "--no-descriptors", "--backend", "cpu", "-q"])
    assert rc == 0, err
    info = read_model_info(model)
    assert info["metadata"]["options"]["extensive"] is True
    est = load_model(model)
    assert est.extensive is True and "normalize=True" in info["kernel"]
    assert sum(not k.normalize for k in _graph_kernels(est.kernel_)) == 2  # one unnormalized kernel per view
    assert np.all(np.isfinite(est.predict(["CCOC(=O)c1ccccc1"])))


def _graph_kernels(kernel):
    from mgkflow.mgk import MarginalizedGraphKernel

    return [v for v in kernel.get_params(deep=True).values() if isinstance(v, MarginalizedGraphKernel)]
