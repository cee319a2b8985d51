"""Learning and screening at scale: ``python -m mgkflow.bench scale``.

A low-rank Gaussian process (:class:`~mgkflow.learn.MolecularGPR` with ``n_landmarks=m``, its
hyperparameters fitted by the low-rank evidence and its contracted gradient) is trained on MOSES
molecules with an RDKit stand-in label (:mod:`mgkflow.datasets.moses_set`) and then screens
further molecules with :func:`mgkflow.learn.screen`, as ``mgkflow fit`` and ``mgkflow predict`` do.
Phases, each timed on its own (wall seconds) and reported as one line on stdout and one row of
``scale.csv`` under ``--out``:

``data``
    The molecules (``--source``: the shipped 10,000-molecule subset, a full split of an installed
    ``molsets``, or a SMILES CSV file), a seeded split into ``--n-test``, ``--n-train`` and
    ``--n-screen`` disjoint molecules, their stand-in labels, and the backend's warm-up (compiled
    CPU kernels; the GPU's name). The test molecules come first in the seeded order, so runs with
    the same seed and ``--n-test`` score every N on the same molecules.
``featurize``
    The training molecules to graphs with standardized RDKit descriptors (the part of
    ``MolecularGPR.fit`` before its Gaussian process: the fit's wall time less ``gpr_.fit_seconds_``).
``fit``
    The low-rank fit: landmarks (pivoted Cholesky), hyperparameters, posterior; the objective
    evaluations (``kernel_evals``) and the n·m kernel entries of K(X, Z) (``pairs``). With
    ``--hyper-sample S`` the hyperparameters come from the exact GP on S training molecules
    (``sample_s``), before the landmarks.
``predict``
    Mean and standard deviation of the test molecules (featurization included); RMSE, MAE, R². With
    ``--neighbors k`` the low-rank GP's local correction (``MolecularGPR(n_neighbors=k)``), its plain
    prediction's RMSE beside (``rmse_lowrank``) and the noise it added (``local_noise``; inf: the correction
    switched off at the fit); ``pairs_per_s`` counts the n·m landmark pairs only.
``exact``, ``lowrank_at_exact_n``
    With ``--exact-n E``: the exact GP and the low-rank GP fitted on the first E training
    molecules, both scored on the same test set: how well the approximation does at N = E
    (``rmse_vs_exact`` is the low-rank RMSE over the exact one).
``screen``
    The fitted model saved as a model file and ``screen`` of the ``--n-screen`` molecules, chunk by
    chunk (featurization and the model file's loading included); molecules/s, pairs/s (S·m / s)
    and the process's peak RSS (``getrusage``) after the screen; ``featurize_s``, ``predict_s`` and
    ``wait_s``: the screen's stages (:class:`~mgkflow.learn.screening.ScreenResult`), featurization in a
    helper thread overlapping prediction, ``wait_s`` what the overlap did not hide (in-process;
    ``--dask SPEC`` screens on Dask workers instead, ``workers`` of them).
``resume``
    With ``--resume-check``: the screen again into a second output, stopped after some chunks
    (``max_chunks``) with its last part file taken back to the torn temporary file a kill during
    its write leaves, then resumed; ``identical`` says whether the output equals the
    uninterrupted one byte for byte.

Every row has the hardware (the GPU's name, or ``cpu``), the backend, the source and the seed.
Progress lines go to stderr (``--quiet``: none). Needs RDKit.

Examples
--------
    python -m mgkflow.bench scale --n-train 300 --n-test 100 --landmarks 50 --n-screen 200 --backend cpu
    python -m mgkflow.bench scale --n-train 8000 --n-test 1000 --n-screen 1000 --exact-n 2000 --backend gpu
    python -m mgkflow.bench scale --source train --n-train 100000 --n-test 2000 --n-screen 100000 \\
        --landmarks 2000 --chunk-size 5000 --resume-check --backend gpu --out reports/scale
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..cli_learn import _count, _dask_spec

__all__ = ["main"]

#: Columns every row of ``scale.csv`` starts with (the rest depend on the phase).
_COMMON = ("phase", "hardware", "backend", "source", "target", "seed")


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m mgkflow.bench scale", description=__doc__.split("\n")[0])
    ap.add_argument(
        "--source",
        default="subset",
        help="subset (the shipped 10,000 MOSES molecules), train or test (an installed molsets' "
        "split), or the path of a SMILES CSV such as MOSES's train.csv.gz; never downloads",
    )
    ap.add_argument("--target", default="logp", choices=("logp", "tpsa", "qed"), help="the stand-in label")
    ap.add_argument("--n-train", type=_count(2), default=1000, help="training molecules (N)")
    ap.add_argument("--n-test", type=_count(1), default=500, help="test molecules, apart from the training ones")
    ap.add_argument("--n-screen", type=_count(0), default=1000, help="molecules to screen (S; 0: no screen)")
    ap.add_argument("--landmarks", type=_count(1), default=2000, help="m, at most N (default 2000, capped at N)")
    ap.add_argument(
        "--neighbors", type=_count(0), default=0,
        help="the low-rank GP's local correction on k nearest training molecules (default 0: none)",
    )  # fmt: skip
    ap.add_argument(
        "--hyper-sample", type=_count(2), default=None,
        help="the low-rank GP's hyperparameters from the exact GP on S training molecules (default: the low-rank "
        "evidence on all)",
    )  # fmt: skip
    ap.add_argument(
        "--exact-n",
        type=_count(0),
        default=0,
        help="also fit the exact GP and the low-rank one on the first E training molecules (0: skip)",
    )
    ap.add_argument("--backend", default="auto", choices=("auto", "cpu", "gpu"))
    ap.add_argument("--max-iter", type=_count(1), default=100, help="L-BFGS-B iterations per search")
    ap.add_argument("--restarts", type=_count(0), default=0, help="further searches from random starts")
    ap.add_argument("--no-descriptors", action="store_true", help="the graph kernel alone, no RDKit descriptors")
    ap.add_argument("--extensive", action="store_true",
                    help="add each view's unnormalized graph kernel (MolecularGPR(extensive=True))")  # fmt: skip
    ap.add_argument("--chunk-size", type=_count(1), default=1000, help="molecules per screening chunk")
    ap.add_argument("--jobs", type=_count(1), default=None,
                    help="processes that featurize (MolecularGPR(n_jobs=...); default 1)")  # fmt: skip
    ap.add_argument(
        "--dask",
        type=_dask_spec,
        default=None,
        metavar="SPEC",
        help="screen on Dask (local:N, cuda or tcp://HOST:PORT), as mgkflow predict --dask; default in-process",
    )
    ap.add_argument(
        "--resume-check",
        action="store_true",
        help="screen again, interrupted and resumed, and compare the outputs byte for byte",
    )
    ap.add_argument("--seed", type=_count(0), default=0, help="seed of the split, the landmarks and the restarts")
    ap.add_argument(
        "--keep-files",
        action="store_true",
        help="keep the model file, the screening input and outputs (under OUT/scale_files)",
    )
    ap.add_argument("-v", "--verbose", action="store_true", help="a line per optimizer step on stderr")
    ap.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr")
    ap.add_argument("--out", type=Path, default=Path("reports/scale"))
    return ap


def _check_args(ap: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse option combinations that cannot run (argparse's error: exit status 2)."""
    if args.exact_n > args.n_train:
        ap.error(f"--exact-n ({args.exact_n}) is more than --n-train ({args.n_train})")
    if args.exact_n == 1:
        ap.error("--exact-n must be 0 (skip) or at least 2")
    if args.resume_check:
        chunks = -(-args.n_screen // args.chunk_size)
        if chunks < 3:
            ap.error(
                f"--resume-check needs at least 3 screening chunks, got {chunks} "
                f"({args.n_screen} molecules in chunks of {args.chunk_size}): lower --chunk-size"
            )


def _require_rdkit() -> None:
    from ..errors import BackendUnavailableError
    from ..io.rdkit import require_rdkit

    try:
        require_rdkit()
    except ImportError as exc:
        raise BackendUnavailableError(
            "the scale suite needs RDKit (featurization, stand-in labels, screening): pip install mgkflow[chem] "
            "(or pip install rdkit)"
        ) from exc


def _hardware(backend: str) -> tuple[str, str, float]:
    """(resolved backend, hardware name, warm-up seconds): the GPU's name from mgkflow's GPU backend, or ``cpu``."""
    from ..backends import make_backend, resolve_backend
    from ..errors import BackendUnavailableError
    from ..evaluation.backend import gpu_available

    name = resolve_backend(backend)
    if name == "gpu" and not gpu_available():
        raise BackendUnavailableError("--backend gpu: no CUDA device (or no PyCUDA) here; use --backend cpu")
    t0 = time.perf_counter()
    be = make_backend(name)
    warm = getattr(be, "warm_up", None)
    if warm is not None:  # the CPU backend compiles its kernels once per process: not inside a timed phase
        warm()
    hardware = str(getattr(be, "device_name", "gpu")) if name == "gpu" else "cpu"
    return name, hardware, time.perf_counter() - t0


def _read_source(source: str, target: str) -> tuple[list[str], np.ndarray | None, str]:
    """(SMILES, labels or None, what was read) of ``--source``; labels only for the shipped subset."""
    from ..datasets import data_dir
    from ..datasets.moses_set import moses_file

    if source == "subset":  # the CSV that moses(split="subset") reads, without building its 10,000 graphs
        frame = pd.read_csv(data_dir() / "moses.csv", dtype={"smiles": str}, keep_default_na=False)
        return frame["smiles"].tolist(), frame[target].to_numpy(np.float64), "the MOSES subset (shipped)"
    path = moses_file(source) if source in ("train", "test") else moses_file(path=source)
    with open(path, "rb") as fh:
        gz = fh.read(2) == b"\x1f\x8b"
    frame = pd.read_csv(path, dtype=str, keep_default_na=False, compression="gzip" if gz else None)
    if frame.empty:
        from ..errors import FileFormatError

        raise FileFormatError("no molecule in the file", path=path)
    column = next((c for c in ("SMILES", "smiles") if c in frame.columns), frame.columns[0])
    smiles = [s.strip() for s in frame[column].tolist() if s.strip()]
    return smiles, None, str(path)


def _label(smiles: str, target: str) -> float | None:
    """The stand-in label of one molecule, None where RDKit cannot parse it."""
    from ..datasets.moses_set import stand_in_labels
    from ..errors import GraphError

    try:
        return stand_in_labels(smiles)[target]
    except GraphError:
        return None


def _label_part(smiles: Sequence[str], target: str) -> list[float | None]:
    return [_label(s, target) for s in smiles]


def _labels(smiles: Sequence[str], target: str, jobs: int | None) -> list[float | None]:
    """The stand-in labels of ``smiles`` (None where RDKit cannot parse one), in ``jobs`` processes
    (joblib) when there are many: RDKit's QED takes milliseconds a molecule."""
    if not jobs or jobs < 2 or len(smiles) < 2000:
        return _label_part(smiles, target)
    from joblib import Parallel, delayed

    cuts = np.linspace(0, len(smiles), 4 * jobs + 1).astype(int)
    parts = Parallel(n_jobs=jobs)(delayed(_label_part)(smiles[a:b], target) for a, b in zip(cuts[:-1], cuts[1:]))
    return [v for part in parts for v in part]


def _load(args: argparse.Namespace) -> dict[str, Any]:
    """The seeded split: train/test SMILES with labels and the screening SMILES, and the data row."""
    from ..errors import ParameterError

    t0 = time.perf_counter()
    smiles, y, what = _read_source(args.source, args.target)
    need = args.n_train + args.n_test + args.n_screen
    if need > len(smiles):
        raise ParameterError(
            f"{what} holds {len(smiles)} molecules: fewer than --n-train + --n-test + --n-screen = {need}"
        )
    order = np.random.default_rng(args.seed).permutation(len(smiles))
    labelled, labels, dropped, pos = [], [], 0, 0
    while len(labelled) < args.n_train + args.n_test and pos < len(order):
        want = args.n_train + args.n_test - len(labelled)
        batch = [int(i) for i in order[pos : pos + want + want // 50 + 10]]  # a few spare for unparsable ones
        values = [float(y[i]) for i in batch] if y is not None else _labels([smiles[i] for i in batch], args.target,
                                                                            getattr(args, "jobs", None))  # fmt: skip
        for i, value in zip(batch, values, strict=True):
            if len(labelled) == args.n_train + args.n_test:
                break
            pos += 1
            if value is None:
                dropped += 1  # a SMILES RDKit cannot parse: no label, left out
                continue
            labelled.append(smiles[i])
            labels.append(value)
    screen = [smiles[int(i)] for i in order[pos : pos + args.n_screen]]
    if len(labelled) < args.n_train + args.n_test or len(screen) < args.n_screen:
        raise ParameterError(f"{what}: {dropped} SMILES RDKit cannot parse leave too few molecules for {need}")
    n, t = args.n_train, args.n_test
    seconds = time.perf_counter() - t0
    row = {
        "phase": "data",
        "source_molecules": len(smiles),
        "n_train": n,
        "n_test": args.n_test,
        "n_screen": args.n_screen,
        "dropped": dropped,
        "seconds": seconds,
    }
    return {
        "train": labelled[t:],
        "y_train": np.asarray(labels[t:]),
        "test": labelled[:t],  # first: the same test molecules whatever n is
        "y_test": np.asarray(labels[:t]),
        "screen": screen,
        "row": row,
        "what": what,
    }


def _fit(smiles: Sequence[str], y: np.ndarray, n_landmarks: int | None, args: argparse.Namespace) -> tuple[Any, float]:
    """A fitted MolecularGPR (exact for ``n_landmarks=None``) and the fit's whole wall seconds."""
    from ..learn import MolecularGPR

    model = MolecularGPR(
        descriptors=not args.no_descriptors,
        extensive=bool(getattr(args, "extensive", False)),
        n_landmarks=n_landmarks,
        n_neighbors=args.neighbors if n_landmarks is not None else 0,
        hyperparameter_sample=getattr(args, "hyper_sample", None) if n_landmarks is not None else None,
        n_restarts=args.restarts,
        max_iter=args.max_iter,
        backend=args.backend,
        random_state=args.seed,
        verbose=int(args.verbose),
        n_jobs=args.jobs,
    )
    t0 = time.perf_counter()
    model.fit(list(smiles), y)
    return model, time.perf_counter() - t0


def _fit_rows(phase: str, model: Any, wall: float, n: int) -> list[dict[str, Any]]:
    """The featurize and fit rows of a fit: the fit's wall time less its Gaussian process's is featurization."""
    gpr = model.gpr_
    fit_s = float(gpr.fit_seconds_)
    featurize_s = max(wall - fit_s, 0.0)
    m = getattr(gpr, "n_landmarks_", None)
    fit = {
        "phase": phase,
        "n": n,
        "m": m,
        "seconds": fit_s,
        "landmark_s": getattr(gpr, "landmark_seconds_", None),
        "sample_s": getattr(gpr, "sample_seconds_", None),
        "kernel_evals": int(gpr.n_evaluations_),
        "pairs": n * m if m is not None else n * (n + 1) // 2,
        "objective": float(gpr.objective_value_),
    }
    if phase != "fit":
        fit["featurize_s"] = featurize_s
        return [fit]
    feat = {
        "phase": "featurize",
        "n": n,
        "seconds": featurize_s,
        "molecules_per_s": n / featurize_s if featurize_s > 0 else np.nan,
    }
    return [feat, fit]


def _predict_row(phase: str, model: Any, smiles: Sequence[str], y: np.ndarray, m: int) -> dict[str, Any]:
    """Mean and std of the test molecules (featurization included), timed, and the scores."""
    from ..learn import regression_metrics

    t0 = time.perf_counter()
    mean, std = model.predict(list(smiles), return_std=True)
    seconds = time.perf_counter() - t0
    scores = regression_metrics(y, np.asarray(mean, dtype=np.float64))
    extra = {}
    gpr = getattr(model, "gpr_", None)
    if getattr(gpr, "_local", None) is not None:  # the same model without its local correction, beside
        local, gpr._local = gpr._local, None
        try:
            plain = model.predict(list(smiles))
        finally:
            gpr._local = local
        extra["rmse_lowrank"] = regression_metrics(y, np.asarray(plain, dtype=np.float64))["rmse"]
        extra["local_noise"] = float(getattr(gpr, "local_noise_", 0.0))  # added to the fitted noise; inf: off
    return {
        "phase": phase,
        "n": len(smiles),
        "m": m,
        "neighbors": int(getattr(gpr, "n_neighbors", 0) or 0),
        "seconds": seconds,
        "molecules_per_s": len(smiles) / seconds,
        "pairs_per_s": len(smiles) * m / seconds,
        "rmse": scores["rmse"],
        "mae": scores["mae"],
        "r2": scores["r2"],
        "mean_std": float(np.mean(std)),
        **extra,
    }


def _exact_rows(
    data: dict[str, Any], args: argparse.Namespace, say: Callable[[str], None], fitted: tuple[Any, float]
) -> list[dict[str, Any]]:
    """The exact GP and the low-rank GP on the first E training molecules, scored on the test set.

    ``fitted``: the low-rank model on all N training molecules, its wall seconds and its prediction row,
    taken as they are when E = N (the same molecules, landmarks and seed: a refit would repeat it).
    """
    E = args.exact_n
    smiles, y = data["train"][:E], data["y_train"][:E]
    say(f"exact GP on {E} molecules")
    exact, wall = _fit(smiles, y, None, args)
    row = _fit_rows("exact", exact, wall, E)[0]
    pred = _predict_row("exact", exact, data["test"], data["y_test"], E)
    row.update({k: pred[k] for k in ("rmse", "mae", "r2")}, predict_s=pred["seconds"])
    m = min(args.landmarks, E)
    if E == args.n_train:
        low, wall, pred = fitted
    else:
        say(f"low-rank GP on the same {E} molecules, {m} landmarks")
        low, wall = _fit(smiles, y, m, args)
        pred = None
    lrow = _fit_rows("lowrank_at_exact_n", low, wall, E)[0]
    pred = pred or _predict_row("lowrank_at_exact_n", low, data["test"], data["y_test"], lrow["m"])
    lrow.update({k: pred[k] for k in ("rmse", "mae", "r2")}, predict_s=pred["seconds"])
    lrow["rmse_vs_exact"] = lrow["rmse"] / row["rmse"] if row["rmse"] > 0 else np.nan
    return [row, lrow]


def _screen_row(
    model_path: Path, smiles_path: Path, out: Path, n: int, m: int, args: argparse.Namespace, say: Callable[[str], None]
) -> dict[str, Any]:
    """Screen the file with the model file end to end; molecules/s, pairs/s (S·m / s) and the peak RSS after."""
    from ..learn import screen

    t0 = time.perf_counter()
    res = screen(
        model_path,
        smiles_path,
        out,
        chunk_size=args.chunk_size,
        smiles_column="smiles",
        id_column="id",
        force=True,
        progress=not args.quiet,
        log=say,
        dask=args.dask,
    )
    seconds = time.perf_counter() - t0
    return {
        "phase": "screen",
        "n": n,
        "m": m,
        "seconds": seconds,
        "molecules_per_s": n / seconds,
        "pairs_per_s": n * m / seconds,
        "chunks": res.chunks,
        "failed": res.failed,
        "peak_rss_bytes": res.peak_rss,
        "workers": res.workers,
        "featurize_s": res.featurize_seconds,
        "predict_s": res.predict_seconds,
        "wait_s": res.wait_seconds,
    }


def _resume_row(
    model_path: Path,
    smiles_path: Path,
    reference: Path,
    out: Path,
    args: argparse.Namespace,
    say: Callable[[str], None],
) -> dict[str, Any]:
    """Screen into ``out`` interrupted as a kill leaves it, resume, and compare with ``reference`` byte for byte.

    The first call stops after ``k`` chunks (``max_chunks``); its last part file is then turned
    into the torn temporary file a kill during that part's write leaves (half its bytes, never
    renamed into place), so the resumed call finds k - 1 parts done and predicts the rest.
    """
    from ..errors import MgkflowError
    from ..learn import screen
    from ..learn.screening import parts_dir

    kw = {"chunk_size": args.chunk_size, "smiles_column": "smiles", "id_column": "id", "log": say}
    chunks = -(-args.n_screen // args.chunk_size)
    k = min(max(2, chunks // 2), chunks - 1)
    t0 = time.perf_counter()
    first = screen(model_path, smiles_path, out, force=True, progress=False, max_chunks=k, **kw)
    parts = sorted(parts_dir(out).glob("part-*.csv"))
    if first.complete or len(parts) != k:
        raise MgkflowError(
            f"resume check: the stopped run left {len(parts)} part files in {parts_dir(out)}, expected {k}"
        )
    torn = parts[-1].read_bytes()
    parts[-1].with_name(f".{parts[-1].name}.tmp").write_bytes(torn[: len(torn) // 2])
    parts[-1].unlink()
    say(f"resume check: stopped after {k} of {chunks} chunks, the last one torn; resuming")
    second = screen(model_path, smiles_path, out, force=False, progress=not args.quiet, **kw)
    seconds = time.perf_counter() - t0
    identical = second.complete and out.read_bytes() == reference.read_bytes()
    return {
        "phase": "resume",
        "n": args.n_screen,
        "seconds": seconds,
        "chunks": chunks,
        "stopped_after": k,
        "resumed": second.resumed,
        "computed": second.computed,
        "identical": bool(identical),
    }


def _screen_rows(
    model: Any, data: dict[str, Any], files: Path, m: int, args: argparse.Namespace, say: Callable[[str], None]
) -> list[dict[str, Any]]:
    """Save the model file, write the screening input, screen it (and the resume check)."""
    from ..learn import save_model

    files.mkdir(parents=True, exist_ok=True)
    smiles_path = files / "screen_input.csv"
    ids = [f"s{i}" for i in range(len(data["screen"]))]
    pd.DataFrame({"id": ids, "smiles": data["screen"]}).to_csv(smiles_path, index=False)
    t0 = time.perf_counter()
    model_path = save_model(model, files / "scale_model.mgk", {"suite": "scale", "target": args.target})
    save_s = time.perf_counter() - t0
    say(f"screening {len(ids)} molecules in chunks of {args.chunk_size}")
    rows = [_screen_row(model_path, smiles_path, files / "screen.csv", len(ids), m, args, say)]
    rows[0]["model_save_s"] = save_s
    rows[0]["model_bytes"] = model_path.stat().st_size
    if args.resume_check:
        rows.append(_resume_row(model_path, smiles_path, files / "screen.csv", files / "screen_resumed.csv", args, say))
    return rows


def _stamp(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` with the process's peak RSS so far (``getrusage``, bytes) where a row has none."""
    from ..learn.screening import peak_rss

    peak = peak_rss()
    for row in rows:
        if row.get("peak_rss_bytes") is None:
            row["peak_rss_bytes"] = peak
    return rows


def _summary(row: dict[str, Any]) -> str:
    """One line of a row: phase, hardware, then its figures."""

    def fmt(v: Any) -> str:
        if isinstance(v, bool | np.bool_):
            return "yes" if v else "no"
        if isinstance(v, float | np.floating):
            return f"{v:.4g}"
        return str(v)

    figures = ", ".join(f"{k} {fmt(v)}" for k, v in row.items() if k not in _COMMON and v is not None)
    return f"scale {row['phase']:<18s} [{row['hardware']}] {figures}"


def main(argv: list[str] | None = None) -> int:
    """Run the suite (see the module docstring): a line per phase on stdout, ``scale.csv`` under ``--out``.

    Parameters
    ----------
    argv : list of str, optional
        The options (default: ``sys.argv[1:]``); ``--help`` lists them.

    Returns
    -------
    int
        0; 1 when ``--resume-check`` found the resumed output different (bad options exit through
        argparse with status 2).

    Raises
    ------
    mgkflow.errors.BackendUnavailableError
        RDKit is not installed, or ``--backend gpu`` without a CUDA device.
    mgkflow.errors.ParameterError
        The source holds fewer molecules than the split asks for.
    mgkflow.io.PathNotFoundError
        ``--source train|test`` without an installed ``molsets``, or no such file.
    """
    ap = _parser()
    args = ap.parse_args(argv)
    _check_args(ap, args)

    def say(text: str) -> None:
        if not args.quiet:
            print(f"scale: {text}", file=sys.stderr, flush=True)

    _require_rdkit()
    args.out.mkdir(parents=True, exist_ok=True)
    backend, hardware, warm_s = _hardware(args.backend)
    common = {"hardware": hardware, "backend": backend, "source": args.source, "target": args.target, "seed": args.seed}
    rows: list[dict[str, Any]] = []

    def emit(new: list[dict[str, Any]]) -> None:
        """Print the phases just done and rewrite ``scale.csv`` with every row so far (a long run keeps them)."""
        for r in _stamp(new):
            rows.append({"phase": r["phase"], **common, **{k: v for k, v in r.items() if k != "phase"}})
            print(_summary(rows[-1]), flush=True)
        pd.DataFrame(rows).convert_dtypes().to_csv(args.out / "scale.csv", index=False)  # whole numbers stay whole

    say(f"loading {args.source} ({args.target}); backend {backend} on {hardware}")
    data = _load(args)
    emit([{**data["row"], "warmup_s": warm_s}])
    m = min(args.landmarks, args.n_train)
    say(f"low-rank GP on {args.n_train} molecules, {m} landmarks")
    model, wall = _fit(data["train"], data["y_train"], m, args)
    emit(_fit_rows("fit", model, wall, args.n_train))
    pred = _predict_row("predict", model, data["test"], data["y_test"], m)
    emit([pred])
    if args.exact_n:
        emit(_exact_rows(data, args, say, (model, wall, pred)))
    files = args.out / "scale_files"
    try:
        if args.n_screen:
            emit(_screen_rows(model, data, files, m, args, say))
        elif args.keep_files:  # no screen, but the model file was asked for (to screen with `mgkflow predict`)
            from ..learn import save_model

            files.mkdir(parents=True, exist_ok=True)
            kept = save_model(model, files / "scale_model.mgk", {"suite": "scale", "target": args.target})
            say(f"kept the model file {kept}")
    finally:
        if not args.keep_files:
            shutil.rmtree(files, ignore_errors=True)
    say(f"wrote {args.out / 'scale.csv'} ({os.cpu_count()} CPUs)")
    return 1 if any(r.get("identical") is False for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
