"""The learning commands of the command line: ``mgkflow fit`` and ``mgkflow predict``.

:mod:`mgkflow.cli` registers them (:func:`add_commands`); their work is done by
:mod:`mgkflow.learn.fitting`, :mod:`mgkflow.learn.model_file` and :mod:`mgkflow.learn.screening`,
imported when a command runs (``mgkflow --help`` stays fast). Errors follow the rest of the command
line: one ``mgkflow COMMAND: error: ...`` line and exit code 1; a bad option value exit code 2.

Examples
--------
    mgkflow fit train.csv --smiles-col smiles --target logp --model logp.mgk
    mgkflow predict logp.mgk candidates.smi --out preds.csv
    mgkflow predict logp.mgk candidates.smi --out preds.csv --dask local:4
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["add_commands", "cmd_fit", "cmd_predict"]


def _add_smiles_column(p: argparse.ArgumentParser, more: str) -> None:
    """``--smiles-col`` (alias ``--smiles-column``) of ``fit`` and ``predict``; ``more`` ends its help."""
    p.add_argument(
        "--smiles-col",
        "--smiles-column",
        dest="smiles_column",
        type=_column,
        default=None,
        metavar="COLUMN",
        help="the column of SMILES (default: the column named like smiles, else the first whose values are "
        f"SMILES{more})",
    )


def _count(minimum: int) -> Any:
    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a whole number >= {minimum}, got {text!r}") from None
        if v < minimum:
            raise argparse.ArgumentTypeError(f"must be a whole number >= {minimum}, got {text}")
        return v

    return parse


def _seed(text: str) -> int:
    return _count(0)(text)


def _predictions_path(text: str) -> Path:
    p = Path(text)
    if p.suffix.lower() not in (".csv", ".parquet"):
        raise argparse.ArgumentTypeError(f"must end in .csv or .parquet, got {text!r}")
    return p


def _dask_spec(text: str) -> str:
    from .gram.cluster import parse_spec

    try:
        parse_spec(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--dask ")) from None
    return text.strip()


def _column(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("must name a column, got an empty string")
    return text


def add_commands(sub: Any) -> None:
    """Add ``fit`` and ``predict`` to the command line's subparsers ``sub``."""
    _add_fit(sub)
    _add_predict(sub)


def _add_fit(sub: Any) -> None:
    p = sub.add_parser(
        "fit",
        help="fit a molecular property model (MolecularGPR) to a CSV of SMILES and targets",
        description="Fit a Gaussian-process model of a molecular property (mgkflow.learn.MolecularGPR: the graph "
        "kernel, RDKit descriptors and noise, hyperparameters by marginal likelihood) to the SMILES and "
        "target values of a CSV file, and save it as a model file for `mgkflow predict`. Needs RDKit. The "
        "model file is a zip archive holding a JSON manifest and the estimator as a pickle: load only "
        "model files you trust.",
        epilog="Exit codes: 0 ok, 1 error in input/arguments/files, 2 usage, 3 out of memory, 130 interrupted.",
    )
    p.add_argument(
        "data",
        metavar="DATA",
        type=Path,
        help="CSV (or other SMILES table, plain or gzip) with a header line naming its columns",
    )
    p.add_argument(
        "--target", "-t", required=True, type=_column, metavar="COLUMN", help="the column of target values (numbers)"
    )
    p.add_argument(
        "--model",
        "-m",
        required=True,
        type=Path,
        metavar="PATH",
        help="the model file to write (e.g. model.mgk); an existing file is refused unless --force",
    )
    _add_smiles_column(p, "")
    p.add_argument(
        "--backend",
        choices=["auto", "cpu", "gpu"],
        default="auto",
        help="where the graph kernel runs (default auto: the GPU when present, else the CPU)",
    )
    p.add_argument(
        "--no-descriptors",
        dest="descriptors",
        action="store_false",
        help="the graph kernel alone, without RDKit's 2-D descriptors (faster featurization)",
    )
    p.add_argument(
        "--extensive",
        action="store_true",
        help="add each view's unnormalized graph kernel, a sum over all pairs of atoms, for properties that grow "
        "with the molecule (logP, polar surface area, hydration free energy); twice the graph-kernel work",
    )
    p.add_argument(
        "--restarts",
        type=_count(0),
        default=1,
        metavar="N",
        help="optimizer restarts from random hyperparameters beyond the first run (default 1; 0 for "
        "one run, the fastest)",
    )
    p.add_argument(
        "--low-rank",
        type=_count(1),
        default=None,
        metavar="M",
        help="a low-rank Gaussian process on M landmarks (chosen by pivoted Cholesky) instead of the "
        "exact one: n*M kernel entries instead of n*n, for training sets too large for the exact GP (on "
        "an H100 the exact GP fits 20,000 molecules in about 4 minutes; there M = 2,000 had 1.4x its test "
        "error; default: exact)",
    )
    p.add_argument(
        "--neighbors",
        type=_count(0),
        default=0,
        metavar="K",
        help="with --low-rank: each prediction adds the exact GP of the training residuals on its K nearest "
        "training molecules (one kernel matrix of K+1 molecules per prediction: use a GPU; on an H100, 100,000 "
        "MOSES molecules, M = 2,000, K = 512: logP test error 28%% lower, 15 predictions/s; the model file keeps "
        "the training molecules; default 0: none)",
    )
    p.add_argument(
        "--hyper-sample",
        type=_count(2),
        default=None,
        metavar="S",
        help="with --low-rank: fit the hyperparameters by the exact Gaussian process on S training molecules "
        "drawn at random, then the low-rank model on all of them (the low-rank evidence takes what the "
        "landmarks miss for noise; default: the low-rank evidence on all molecules)",
    )
    p.add_argument("--seed", type=_seed, default=0, help="seed of the restarts (default 0)")
    p.add_argument(
        "--jobs",
        type=_count(1),
        default=None,
        metavar="N",
        help="processes that featurize the molecules (RDKit's descriptors take ~13 ms a molecule on one "
        "core); the model keeps it for mgkflow predict (default 1)",
    )
    p.add_argument(
        "--skip-invalid",
        action="store_true",
        help="leave out rows whose SMILES RDKit cannot parse or whose target is not a number (counted "
        "and reported) instead of stopping at the first with its line number",
    )
    p.add_argument("--force", "-f", action="store_true", help="replace an existing --model file")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress lines or messages")
    p.set_defaults(func=cmd_fit)


def _add_predict(sub: Any) -> None:
    p = sub.add_parser(
        "predict",
        help="predict with a model file over a SMILES file, streamed and resumable",
        description="Predict the mean and standard deviation of the property for every SMILES of a file with a "
        "model file written by `mgkflow fit`. The file is read chunk by chunk (never whole); each chunk is "
        "written to a part file in OUT.parts/ next to the output, and the parts are assembled into --out at "
        "the end. Killed or interrupted, the same command resumes where it stopped (finished chunks are "
        "kept) and gives byte-identical output; another input, model or --chunk-size is refused unless "
        "--force. Output columns: line, id, smiles, mean, std, error; a row that cannot be predicted "
        "(invalid SMILES) gets nan and its reason in error. With --dask the chunks are predicted on Dask "
        "workers and this process writes the same parts, so the output is byte-identical and an interrupted "
        "run resumes with or without --dask. At the end the peak memory (RSS) is reported. Needs RDKit. "
        "Loading a model file unpickles it: use only model files you trust.",
        epilog="Exit codes: 0 ok, 1 error in input/arguments/files, 2 usage, 3 out of memory, 130 interrupted "
        "(rerun the same command to resume).",
    )
    p.add_argument("model", metavar="MODEL", type=Path, help="a model file written by `mgkflow fit`")
    p.add_argument(
        "candidates",
        metavar="SMILES_FILE",
        type=Path,
        help="the molecules: .smi/.csv/.tsv (plain or gzip), one SMILES per line, header optional",
    )
    p.add_argument(
        "--out",
        "-o",
        required=True,
        type=_predictions_path,
        metavar="PATH",
        help="output: .csv, or .parquet (needs pyarrow); an existing file is refused unless --force",
    )
    _add_smiles_column(p, "; the first line is then the header")
    p.add_argument(
        "--id-col",
        "--id-column",
        dest="id_column",
        type=_column,
        default=None,
        metavar="COLUMN",
        help="the column of molecule ids copied to the output's id column (default: a column named "
        "name/id/title/..., or without a header the second column)",
    )
    p.add_argument(
        "--chunk-size",
        type=_count(1),
        default=1000,
        metavar="N",
        help="molecules per chunk and part file (default 1000); a resumed run needs the same",
    )
    p.add_argument(
        "--dask",
        type=_dask_spec,
        default=None,
        metavar="SPEC",
        help="predict the chunks on Dask: local:N (N worker processes here), cuda (one worker per GPU) or "
        "a running scheduler's address tcp://HOST:PORT (it must answer within 10 s; its workers need "
        "mgkflow and RDKit, not the files). Each worker gets the model once; at most two chunks per "
        "worker thread are in flight (default: predict in this process). On a GPU machine use one worker "
        "per core (local:16 on 16 cores screened ~4x faster than in-process on one H100)",
    )
    p.add_argument(
        "--force",
        "-f",
        action="store_true",
        help="replace an existing --out and discard an interrupted run's OUT.parts/ (start anew)",
    )
    p.add_argument(
        "--quiet",
        "-q",
        action="store_true",
        help="no progress bar or messages (nor the closing summary and peak memory)",
    )
    p.set_defaults(func=cmd_predict)


def _say(args: Any, msg: str) -> None:
    if not getattr(args, "quiet", False):
        print(msg, file=sys.stderr, flush=True)


def cmd_fit(args: Any) -> int:
    """``mgkflow fit``: read the table, fit, write the model file."""
    from ._version import __version__
    from .errors import OutputPathError, ParameterError
    from .io import check_writable
    from .learn.fitting import build_model, graph_kernel_progress, read_training_table, training_digest
    from .learn.model_file import file_sha256, save_model

    t0 = time.perf_counter()
    if args.neighbors and args.low_rank is None:
        raise ParameterError(f"--neighbors {args.neighbors} corrects a low-rank GP's predictions: add --low-rank M")
    if args.hyper_sample is not None and args.low_rank is None:
        raise ParameterError(
            f"--hyper-sample {args.hyper_sample} fits a low-rank GP's hyperparameters on a sample: add --low-rank M"
        )
    check_writable(args.model, "--model")
    if args.model.exists() and not args.force:
        raise OutputPathError(f"--model {args.model} exists; add --force to replace it, or choose another path")
    table = read_training_table(args.data, args.target, smiles_column=args.smiles_column,
                                skip_invalid=args.skip_invalid)  # fmt: skip
    if table.skipped:
        line, reason = table.skipped[0]
        _say(args, f"note: left out {len(table.skipped)} invalid rows of {args.data} (first: line {line}: {reason})")
    _say(args, f"fitting on {len(table)} molecules of {args.data} (SMILES {table.smiles_column!r}, target "
               f"{table.target!r})")  # fmt: skip
    model = build_model(backend=args.backend, descriptors=args.descriptors, restarts=args.restarts,
                        seed=args.seed, verbose=0 if args.quiet else 1, low_rank=args.low_rank,
                        jobs=args.jobs, neighbors=args.neighbors, hyper_sample=args.hyper_sample,
                        extensive=args.extensive)  # fmt: skip
    model.fit(table.smiles, table.y)
    for kernel in (getattr(model, "kernel", None), getattr(model, "kernel_", None)):
        graph_kernel_progress(kernel, False)  # predictions run chunk by chunk under mgkflow predict's own bar
    fit_seconds = time.perf_counter() - t0
    metadata = {
        "training": {
            "file": str(args.data),
            "file_sha256": file_sha256(table.path),
            "smiles_column": table.smiles_column,
            "target": table.target,
            "n_molecules": len(table),
            "n_skipped": len(table.skipped),
            "sha256": training_digest(table.smiles, table.y),
            "y_mean": float(table.y.mean()),
            "y_std": float(table.y.std()),
        },
        "options": {
            "backend": args.backend,
            "descriptors": bool(args.descriptors),
            "extensive": bool(args.extensive),
            "restarts": args.restarts,
            "seed": args.seed,
            "low_rank": args.low_rank,
            "neighbors": args.neighbors,
            "hyper_sample": args.hyper_sample,
        },
        "objective": {
            "name": getattr(model, "objective", None),
            "value": getattr(getattr(model, "gpr_", None), "objective_value_", None),
        },
        "fit_seconds": round(fit_seconds, 3),
        "command": f"mgkflow {__version__} fit",
    }
    save_model(model, args.model, metadata)
    _say(args, f"wrote {args.model}: {type(model).__name__} fitted on {len(table)} molecules in {fit_seconds:.1f} s")
    return 0


def cmd_predict(args: Any) -> int:
    """``mgkflow predict``: screen the SMILES file with the model file, resumably."""
    from .learn.screening import parts_dir, screen

    try:
        res = screen(args.model, args.candidates, args.out, chunk_size=args.chunk_size,
                     smiles_column=args.smiles_column, id_column=args.id_column, force=args.force,
                     progress=not args.quiet, log=lambda m: _say(args, f"note: {m}"),
                     dask=getattr(args, "dask", None))  # fmt: skip
    except KeyboardInterrupt:
        if parts_dir(args.out).is_dir():
            _say(args, f"note: the finished chunks are kept in {parts_dir(args.out)}; run the same command again "
                       "to resume")  # fmt: skip
        raise
    resumed = f"; {res.resumed} of {res.chunks} chunks were done by an earlier run" if res.resumed else ""
    failed = f" ({res.failed} without a prediction: see the error column)" if res.failed else ""
    _say(args, f"wrote {args.out}: {res.molecules} molecules{failed} in {res.seconds:.1f} s{resumed}")
    _say(args, _memory_line(res))
    return 0


def _mb(n_bytes: int | None) -> str:
    return "?" if n_bytes is None else f"{n_bytes / 2**20:.0f} MB"


def _memory_line(res: Any) -> str:
    """The closing line of ``mgkflow predict``: peak RSS here and on the Dask workers.

    Examples
    --------
    >>> from types import SimpleNamespace as R
    >>> _memory_line(R(peak_rss=300 * 2**20, workers=0, worker_peak_rss=None))
    'peak memory (RSS): 300 MB'
    >>> _memory_line(R(peak_rss=300 * 2**20, workers=2, worker_peak_rss=420 * 2**20))
    'peak memory (RSS): 300 MB in this process, at most 420 MB in each of 2 Dask workers'
    """
    if not res.workers:
        return f"peak memory (RSS): {_mb(res.peak_rss)}"
    return (f"peak memory (RSS): {_mb(res.peak_rss)} in this process, at most {_mb(res.worker_peak_rss)} in each of "
            f"{res.workers} Dask workers")  # fmt: skip
