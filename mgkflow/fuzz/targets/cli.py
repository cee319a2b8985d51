"""Fuzz target: the command line (``mgkflow gram``, ``compare``, ``fit``, ``predict``, ``datasets``, ``bench``)
run in-process.

Property ``cli``: rough sources, outputs and flags (for ``fit`` and ``predict`` also rough training
tables, candidates and model files: damaged, of another version, not model files); an exit code
with a clear message, no traceback, and no half-written or non-finite output file.
"""

from __future__ import annotations

import contextlib
import io
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from ..checks import Outcome, Property, _py, guarded

__all__ = ["run_cli_case", "strategies", "PROPERTIES"]


def run_cli_case(argv: list[str], workdir: str | os.PathLike | None = None) -> Outcome:
    """Run ``mgkflow ARGV`` in-process; ``{W}`` in arguments is replaced by a scratch directory.

    The scratch directory holds ``mols.smi`` (3 molecules), ``TOY/`` (a 3-graph TU
    dataset), ``afile`` (a plain file), ``adir.npz/`` (a directory), and for ``fit`` and
    ``predict``: ``train*.csv`` (a good training table, one with a text target, one with a bad
    SMILES, one with a single row), ``cands.csv`` (candidates with an invalid row), ``empty.smi``
    and model files ``model.mgk`` (good), ``old.mgk`` (another mgkflow version), ``format2.mgk``
    (another format), ``damaged.mgk`` (a flipped byte in the pickle) and ``notmodel.zip``.
    """

    def go(w: Path) -> Outcome:
        from mgkflow.cli import main

        args = [a.replace("{W}", str(w)) for a in argv]
        err, out = io.StringIO(), io.StringIO()
        before = {p.name for p in w.rglob("*")}
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            try:
                rc = main(args)
            except SystemExit as exc:  # argparse usage errors and --help
                rc = exc.code if isinstance(exc.code, int) else 1
        text = err.getvalue()
        if "Traceback" in text:
            return Outcome("bad", "cli-traceback@cli.py", text[-300:])
        if rc not in (0, 1, 2, 3):
            return Outcome("bad", "cli-exit-code@cli.py", f"exit code {rc!r}")
        if rc in (1, 3) and not text.strip().startswith("mgkflow"):
            return Outcome("bad", "cli-unclear-error@cli.py", text[-300:])
        new = [p for p in w.rglob("*") if p.name not in before]
        for p in new:
            if p.is_file() and p.name.startswith("."):
                return Outcome("bad", "half-written@io/_files.py", f"temporary file left: {p.name}")
            if p.suffix == ".csv" and args[0] == "predict" and p.parent == w:
                head = p.read_text(encoding="utf-8").splitlines()[:1]
                if head != ["line,id,smiles,mean,std,error"]:
                    return Outcome("bad", "half-written@learn/screening.py", f"{p.name}: header {head!r}")
            if p.suffix == ".mgk" and args[0] == "fit":
                from mgkflow.learn.model_file import load_model

                if not callable(getattr(load_model(p), "predict", None)):
                    return Outcome("bad", "half-written@cli_learn.py", f"{p.name}: no estimator")
            if p.suffix == ".npz":
                from mgkflow.io import load_gram_npz

                g = load_gram_npz(p)
                if not np.all(np.isfinite(g.gram)) or len(g.ids) != g.gram.shape[0]:
                    return Outcome("bad", "half-written@cli.py", f"{p.name}: bad content")
            elif p.suffix == ".npy":
                if not np.all(np.isfinite(np.load(p))):
                    return Outcome("bad", "nan", f"{p.name} holds non-finite values")
        return Outcome("result" if rc == 0 else "error", f"exit {rc}", text[-200:])

    with tempfile.TemporaryDirectory() as d:
        w = Path(workdir) if workdir is not None else Path(d)
        _cli_fixtures(w)
        return guarded(lambda: go(w))


def _cli_fixtures(w: Path) -> None:
    (w / "mols.smi").write_text("CCO ethanol\nc1ccccc1O phenol\nCC(=O)O acid\n")
    t = w / "TOY"
    t.mkdir(exist_ok=True)
    (t / "TOY_A.txt").write_text("1, 2\n2, 3\n4, 5\n6, 7\n7, 8\n")
    (t / "TOY_graph_indicator.txt").write_text("1\n1\n1\n2\n2\n3\n3\n3\n")
    (t / "TOY_node_labels.txt").write_text("0\n1\n0\n1\n1\n0\n2\n0\n")
    (t / "TOY_graph_labels.txt").write_text("1\n0\n1\n")
    (w / "afile").write_text("x")
    (w / "adir.npz").mkdir(exist_ok=True)
    _learn_fixtures(w)


def _learn_fixtures(w: Path) -> None:
    """Training tables, candidates and model files (good and rough) for ``fit`` and ``predict`` cases."""
    import json
    import zipfile

    from mgkflow.learn import MolecularGPR
    from mgkflow.learn.model_file import save_model

    smiles = ["CCO", "CCCO", "CCCCO", "c1ccccc1", "Cc1ccccc1", "CC(=O)O"]
    y = [0.1, 0.5, 0.9, 2.0, 2.5, -0.2]
    rows = "".join(f"{s},{v}\n" for s, v in zip(smiles, y))
    (w / "train.csv").write_text("smiles,y\n" + rows)
    (w / "train_text.csv").write_text("smiles,y\n" + rows + "CCN,high\n")
    (w / "train_bad.csv").write_text("smiles,y\n" + rows + "C1CC(,1.0\n")
    (w / "train_one.csv").write_text("smiles,y\nCCO,1.0\n")
    (w / "cands.csv").write_text("smiles,name\nCCCCCO,pentanol\nC1CC(,broken\n[H][H],hydrogen\nCc1ccccc1C,xylene\n")
    (w / "empty.smi").write_text("")
    model = MolecularGPR(descriptors=False, n_restarts=0, max_iter=2, backend="cpu", verbose=0).fit(smiles, y)
    save_model(model, w / "model.mgk")
    with zipfile.ZipFile(w / "model.mgk") as z:
        manifest, payload = json.loads(z.read("manifest.json")), z.read("model.pkl")
    for name, change in (("old.mgk", {"mgkflow_version": "0.0.1"}), ("format2.mgk", {"format_version": "2.0"})):
        with zipfile.ZipFile(w / name, "w") as z:
            z.writestr("manifest.json", json.dumps({**manifest, **change}))
            z.writestr("model.pkl", payload)
    damaged = bytearray(payload)
    damaged[len(damaged) // 2] ^= 0xFF
    with zipfile.ZipFile(w / "damaged.mgk", "w") as z:
        z.writestr("manifest.json", json.dumps(manifest))
        z.writestr("model.pkl", bytes(damaged))
    with zipfile.ZipFile(w / "notmodel.zip", "w") as z:
        z.writestr("readme.txt", "hello")


def _learn_cases(st: Any) -> Any:
    """``fit`` and ``predict`` argument lists (part of :func:`strategies`)."""
    data = st.sampled_from(
        [
            "{W}/train.csv",
            "{W}/train.csv",
            "{W}/train.csv",
            "{W}/train_text.csv",
            "{W}/train_bad.csv",
            "{W}/train_one.csv",
            "{W}/mols.smi",
            "{W}/missing.csv",
            "{W}/afile",
            "{W}/adir.npz",
            "{W}/empty.smi",
        ]
    )
    model_file = st.sampled_from(
        [
            "{W}/model.mgk",
            "{W}/model.mgk",
            "{W}/model.mgk",
            "{W}/model.mgk",
            "{W}/old.mgk",
            "{W}/format2.mgk",
            "{W}/damaged.mgk",
            "{W}/notmodel.zip",
            "{W}/mols.smi",
            "{W}/missing.mgk",
            "{W}/adir.npz",
            "{W}",
        ]
    )
    model_out = st.sampled_from(
        [
            "{W}/m.mgk",
            "{W}/m.mgk",
            "{W}/m.mgk",
            "{W}/model.mgk",
            "{W}/afile/m.mgk",
            "{W}/adir.npz",
            "{W}/" + "m" * 300 + ".mgk",
            "{W}/sub/m.mgk",
        ]
    )
    cands = st.sampled_from(
        [
            "{W}/cands.csv",
            "{W}/cands.csv",
            "{W}/cands.csv",
            "{W}/mols.smi",
            "{W}/mols.smi",
            "{W}/empty.smi",
            "{W}/missing.smi",
            "{W}/afile",
            "{W}/adir.npz",
            "{W}/train.csv",
            "{W}/TOY/TOY_A.txt",
        ]
    )
    pred_out = st.sampled_from(
        [
            "{W}/p.csv",
            "{W}/p.csv",
            "{W}/p.csv",
            "{W}/p.parquet",
            "{W}/p.txt",
            "{W}/afile/p.csv",
            "{W}/adir.npz",
            "{W}/sub/p.csv",
            "{W}/" + "p" * 300 + ".csv",
            "{W}/cands.csv",
        ]
    )
    fit_flag = st.one_of(
        st.tuples(st.just("--smiles-col"), st.sampled_from(["smiles", "y", "nope", ""])),
        st.tuples(st.just("--low-rank"), st.sampled_from(["1", "2", "6", "100", "0", "x"])),
        st.tuples(st.just("--seed"), st.sampled_from(["0", "3", "-1", "x"])),
        st.tuples(st.just("--restarts"), st.sampled_from(["0", "1", "-1", "nan"])),
        st.tuples(st.just("--backend"), st.sampled_from(["cpu", "bogus"])),
        st.tuples(st.just("--skip-invalid")),
        st.tuples(st.just("--force")),
    )
    predict_flag = st.one_of(
        st.tuples(st.just("--chunk-size"), st.sampled_from(["1", "2", "1000000", "0", "-3", "x"])),
        st.tuples(st.just("--smiles-col"), st.sampled_from(["smiles", "name", "nope", "", "0"])),
        st.tuples(st.just("--id-col"), st.sampled_from(["name", "smiles", "nope", ""])),
        st.tuples(st.just("--dask"), st.sampled_from(["locl:2", "local:0", "gpu", "tcp://", "tcp://h:x", ""])),
        st.tuples(st.just("--force")),
    )

    @st.composite
    def learn_argv(draw, cmd):
        if cmd == "fit":
            args = [
                "fit",
                draw(data),
                "--target",
                draw(st.sampled_from(["y", "y", "smiles", "nope", ""])),
                "--model",
                draw(model_out),
                "--no-descriptors",
                "--restarts",
                "0",
                "--backend",
                "cpu",
                "-q",
            ]
            return args + [x for f in draw(st.lists(fit_flag, max_size=3)) for x in f]
        args = ["predict", draw(model_file), draw(cands), "--out", draw(pred_out), "-q"]
        return args + [x for f in draw(st.lists(predict_flag, max_size=3)) for x in f]

    return learn_argv


def strategies(st: Any) -> dict[str, Any]:
    """``cli`` cases: argument lists, ``{W}`` standing for the scratch directory."""
    source = st.sampled_from(
        ["nws", "ba", "drugs", "{W}/mols.smi", "{W}/TOY", "{W}/missing.smi", "{W}/afile", "nosuch", "{W}/TOY/TOY_A.txt"]
    )
    out = st.sampled_from(
        [
            "{W}/K.npz",
            "{W}/K.npy",
            "{W}/sub/K.npz",
            "{W}/afile/K.npz",
            "{W}/adir.npz",
            "{W}/" + "k" * 300 + ".npz",
            "{W}/K.txt",
            "{W}/" + "y" * 250 + ".npy",
        ]
    )
    flag = st.one_of(
        st.tuples(st.just("--q"), st.sampled_from(["0.05", "0", "1", "-1", "nan", "x", "1e-8"])),
        st.tuples(st.just("--n-graphs"), st.sampled_from(["1", "2", "3", "0", "-2", "x", "100000"])),
        st.tuples(st.just("--ordering"), st.sampled_from(["pbr", "rcm", "natural", "bogus"])),
        st.tuples(st.just("--stats"), st.sampled_from(["{W}/s.csv", "{W}/afile/s.csv", "{W}/adir.npz"])),
        st.tuples(
            st.just("--node-kernel"),
            st.sampled_from(
                ["delta:element", "const", "sqexp:label:0.5", "delta:label*const:0.5", "bogus:x", "delta", "const:-1"]
            ),
        ),
        st.tuples(st.just("--edge-kernel"), st.sampled_from(["const", "delta:bond_order", "sqexp:nope"])),
        st.tuples(st.just("--normalize")),
        st.tuples(st.just("--format"), st.sampled_from(["smiles", "tu", "sdf", "nope"])),
        st.tuples(st.just("--node-labels"), st.sampled_from(["label", "", "x"])),
    )

    learn_argv = _learn_cases(st)

    @st.composite
    def argv(draw):
        cmd = draw(st.sampled_from(["gram", "gram", "gram", "compare", "fit", "predict", "datasets", "bench"]))
        if cmd in ("fit", "predict"):
            return draw(learn_argv(cmd))
        if cmd == "datasets":
            return ["datasets"]
        if cmd == "bench":
            return ["bench", draw(st.sampled_from(["--help", "nosuch", "cpu --help"]))]
        if cmd == "compare":
            return [
                "compare",
                draw(source),
                "--orderings",
                draw(st.sampled_from(["natural", "rcm,natural", "x"])),
                "--n-graphs",
                "2",
                "--no-plots",
                "--out",
                "{W}/rep",
                "-q",
            ]
        src = draw(source)
        args = ["gram", src, "--out", draw(out), "--backend", "cpu", "-q", "--n-graphs", "3"]
        for f in draw(st.lists(flag, max_size=3)):
            if f[0] == "--n-graphs" and f[1] == "100000" and not src.startswith("{W}"):
                continue  # a built-in set clamps to its full size (160 to 2,622 graphs): minutes, not a fuzz case
            args += list(f)
        return args

    cases = argv().map(lambda a: [x for part in a for x in (part.split(" ") if part.startswith("cpu ") else [part])])
    return {"cli": cases}


PROPERTIES = (Property("cli", "cli", run_cli_case, lambda c: f"run_cli_case({_py(c)})"),)
