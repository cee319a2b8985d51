"""Benchmark of :class:`~mgkflow.learn.MolecularGPR` against fingerprint and descriptor GPs on public sets.

Every molecular regression set that :mod:`mgkflow.datasets` ships (FreeSolv, solubility,
Lombardo's pharmacokinetics, photoswitch wavelengths, lipophilicity), each model fitted on the
same training folds in the same run:

``molecular``    the default :class:`~mgkflow.learn.MolecularGPR` (graph kernel + descriptors)
``graph``        ``MolecularGPR(descriptors=False)``: the graph kernel alone
``molecular_p``  ``MolecularGPR(start_probabilities=True)``: a start probability per element, fitted
``molecular_size`` ``MolecularGPR(size_kernel=True)``: each graph term times an RBF on the atom count
``graph_p``      ``MolecularGPR(descriptors=False, start_probabilities=True)``
``molecular_ext`` ``MolecularGPR(extensive=True)``: each view's unnormalized graph kernel added
``graph_ext``    ``MolecularGPR(descriptors=False, extensive=True)``

The last five are studies (``--models molecular,molecular_p,molecular_size``); a run without
``--models`` fits the first five (:data:`DEFAULT_MODELS`).
``descriptors``  a GP with an RBF kernel on the standardized RDKit descriptors alone
``tanimoto``     a GP with the Tanimoto kernel on Morgan fingerprints (radius 2, 2048 bits)
``mean``         the mean of the training targets

Splits: shuffled 5-fold cross-validation over seeds 0, 1, 2 (``--folds``, ``--seeds``), or the
set's own train/test split where it has one (solubility). Descriptors are standardized on
each training fold. Writes, under ``--out``: ``folds.csv`` (one row per model and fold),
``summary.csv`` and ``summary.md`` (mean ± sd of RMSE, MAE, R² and fit seconds), and a parity
plot per set (``parity_<set>.png``, the first seed's test predictions).

Featurizing needs RDKit. ``--prepare FILE`` only featurizes (graphs, raw descriptors,
fingerprints) into FILE; ``--prepared FILE`` benchmarks from such a file where RDKit is
missing (a GPU machine, say).

Usage::

    python -m mgkflow.examples.property_benchmark --out reports/property
    python -m mgkflow.examples.property_benchmark --datasets freesolv --models molecular,tanimoto --out /tmp/fs
    python -m mgkflow.examples.property_benchmark --datasets lombardo --n-molecules 60 --seeds 0 --out /tmp/lb

Examples
--------
>>> [m for m in MODELS]  # doctest: +NORMALIZE_WHITESPACE
['molecular', 'graph', 'descriptors', 'tanimoto', 'mean', 'molecular_p', 'molecular_size', 'graph_p',
 'molecular_ext', 'graph_ext']
"""

from __future__ import annotations

import argparse
import gzip
import pickle
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.gaussian_process.kernels import ConstantKernel, WhiteKernel

from .. import datasets
from ..errors import MgkflowError
from ..io import atomic_write
from ..learn import (
    FeatureKernel,
    GraphGPR,
    MolecularFeaturizer,
    MolecularGPR,
    Tanimoto,
    kfold_splits,
    molecular_descriptors,
    morgan_fingerprints,
    regression_metrics,
)

__all__ = ["MODELS", "DEFAULT_MODELS", "DATASETS", "PreparedSet", "prepare", "benchmark", "main"]

#: The benchmark's sets, all shipped by :mod:`mgkflow.datasets`.
DATASETS = ("freesolv", "solubility", "lombardo", "photoswitch", "lipophilicity")


@dataclass
class PreparedSet:
    """A featurized set: graphs without features, raw descriptors and fingerprints (bits packed by row)."""

    name: str
    target: str
    smiles: list[str]
    y: np.ndarray
    split: list[str]
    graphs: list
    descriptors: np.ndarray
    descriptor_names: tuple[str, ...]
    fingerprints: np.ndarray


def prepare(name: str, n_molecules: int | None = None) -> PreparedSet:
    """Featurize one set (needs RDKit): graphs of the default fields, descriptors, fingerprints."""
    ds = getattr(datasets, name)() if name != "solubility" else datasets.solubility(split="all")
    idx = np.arange(len(ds))
    if n_molecules is not None and n_molecules < len(ds):
        idx = np.sort(np.random.default_rng(0).choice(len(ds), n_molecules, replace=False))
    smiles = [ds.smiles[i] for i in idx]
    graphs = MolecularFeaturizer(descriptors=False).fit(smiles[:1]).transform(smiles)
    D, names = molecular_descriptors(smiles)
    return PreparedSet(
        name,
        ds.target,
        smiles,
        np.asarray(ds.y)[idx],
        [ds.split[i] for i in idx],
        graphs,
        D,
        names,
        np.packbits(morgan_fingerprints(smiles) > 0, axis=1),
    )


def _splits(p: PreparedSet, folds: int, seeds: Sequence[int]) -> list[tuple[int, int, np.ndarray, np.ndarray]]:
    split = np.asarray(p.split)
    if {"train", "test"} <= set(split):
        return [(0, 0, np.flatnonzero(split == "train"), np.flatnonzero(split == "test"))]
    return kfold_splits(len(p.y), folds, seeds)


def _with_features(p: PreparedSet, tr: np.ndarray, te: np.ndarray) -> tuple[list, list]:
    f = MolecularFeaturizer().fit_descriptors(p.descriptors[tr], p.descriptor_names)
    Z = f.scale_descriptors(p.descriptors)
    return [p.graphs[i].with_features(Z[i]) for i in tr], [p.graphs[i].with_features(Z[i]) for i in te]


def _model_molecular(p, tr, te, backend, descriptors=True, **options):
    Xtr, Xte = _with_features(p, tr, te) if descriptors else ([p.graphs[i] for i in tr], [p.graphs[i] for i in te])
    m = MolecularGPR(descriptors=descriptors, backend=backend, verbose=0, **options).fit(Xtr, p.y[tr])
    return m.predict(Xte), str(m.kernel_)


def _model_graph(p, tr, te, backend):
    return _model_molecular(p, tr, te, backend, descriptors=False)


def _model_molecular_p(p, tr, te, backend):
    return _model_molecular(p, tr, te, backend, start_probabilities=True)


def _model_molecular_size(p, tr, te, backend):
    return _model_molecular(p, tr, te, backend, size_kernel=True)


def _model_graph_p(p, tr, te, backend):
    return _model_molecular(p, tr, te, backend, descriptors=False, start_probabilities=True)


def _model_molecular_ext(p, tr, te, backend):
    return _model_molecular(p, tr, te, backend, extensive=True)


def _model_graph_ext(p, tr, te, backend):
    return _model_molecular(p, tr, te, backend, descriptors=False, extensive=True)


def _gp(kernel, Xtr, ytr, Xte):
    gp = GraphGPR(kernel, n_restarts=1, random_state=0, verbose=0).fit(Xtr, ytr)
    return gp.predict(Xte), str(gp.kernel_)


def _model_descriptors(p, tr, te, backend):
    Xtr, Xte = _with_features(p, tr, te)
    return _gp(ConstantKernel(1.0, (1e-3, 1e3)) * FeatureKernel() + WhiteKernel(0.1, (1e-6, 10.0)), Xtr, p.y[tr], Xte)


def _model_tanimoto(p, tr, te, backend):
    F = np.unpackbits(p.fingerprints, axis=1).astype(np.float64)
    kernel = ConstantKernel(1.0, (1e-3, 1e3)) * Tanimoto() + WhiteKernel(0.1, (1e-6, 10.0))
    return _gp(kernel, F[tr], p.y[tr], F[te])


def _model_mean(p, tr, te, backend):
    return np.full(len(te), p.y[tr].mean()), "mean"


#: Model name -> f(prepared set, train indices, test indices, backend) -> (predictions, fitted kernel).
MODELS: dict[str, Callable[..., tuple[np.ndarray, str]]] = {
    "molecular": _model_molecular,
    "graph": _model_graph,
    "descriptors": _model_descriptors,
    "tanimoto": _model_tanimoto,
    "mean": _model_mean,
    "molecular_p": _model_molecular_p,
    "molecular_size": _model_molecular_size,
    "graph_p": _model_graph_p,
    "molecular_ext": _model_molecular_ext,
    "graph_ext": _model_graph_ext,
}

#: The models a run fits unless told otherwise.
DEFAULT_MODELS = ("molecular", "graph", "descriptors", "tanimoto", "mean")


def benchmark(
    prepared: Sequence[PreparedSet],
    models: Sequence[str] = DEFAULT_MODELS,
    folds: int = 5,
    seeds: Sequence[int] = (0, 1, 2),
    backend: str = "auto",
    log: Callable[[str], None] | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Fit every model on every fold of every set: (one row per fold, predictions) data frames."""
    rows, preds = [], []
    for p in prepared:
        for seed, fold, tr, te in _splits(p, folds, seeds):
            for model in models:
                t0 = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    pred, kernel = MODELS[model](p, tr, te, backend)
                seconds = time.perf_counter() - t0
                metrics = regression_metrics(p.y[te], pred)
                rows.append(
                    dict(
                        dataset=p.name,
                        model=model,
                        seed=seed,
                        fold=fold,
                        n_train=len(tr),
                        n_test=len(te),
                        **metrics,
                        fit_seconds=seconds,
                        kernel=kernel,
                    )
                )
                preds += [
                    dict(
                        dataset=p.name,
                        model=model,
                        seed=seed,
                        fold=fold,
                        index=int(i),
                        y=float(p.y[i]),
                        prediction=float(v),
                    )
                    for i, v in zip(te, pred)
                ]
                if log:
                    log(f"{p.name} seed {seed} fold {fold} {model}: RMSE {metrics['rmse']:.4g} ({seconds:.1f} s)")
    return pd.DataFrame(rows), pd.DataFrame(preds)


def summarize(folds: pd.DataFrame) -> pd.DataFrame:
    """Mean and deviation of each metric per set and model, and the total fit seconds."""
    g = folds.groupby(["dataset", "model"], sort=False)
    out = g[["rmse", "mae", "r2"]].agg(["mean", "std"])
    out.columns = [f"{a}_{b}" for a, b in out.columns]
    out["fit_seconds_total"] = g["fit_seconds"].sum()
    out["n_fits"] = g.size()
    return out.reset_index()


def _markdown(summary: pd.DataFrame, targets: dict[str, str]) -> str:
    lines = ["| set | model | RMSE | MAE | R² | fits, seconds |", "|---|---|---|---|---|---|"]
    for r in summary.itertuples():
        lines.append(
            f"| {r.dataset} | {r.model} | {r.rmse_mean:.3f} ± {np.nan_to_num(r.rmse_std):.3f} | "
            f"{r.mae_mean:.3f} | {r.r2_mean:.3f} | {r.n_fits} in {r.fit_seconds_total:.1f} |"
        )
    lines += ["", *(f"- {k}: {v}" for k, v in targets.items())]
    return "\n".join(lines) + "\n"


def _parity(preds: pd.DataFrame, name: str, target: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    d = preds[(preds.dataset == name) & (preds.seed == preds.seed.min())]
    models = [m for m in ("molecular", "graph", "descriptors", "tanimoto") if m in set(d.model)]
    fig, axes = plt.subplots(1, len(models), figsize=(3.6 * len(models), 3.6), squeeze=False)
    lo, hi = d.y.min(), d.y.max()
    for ax, m in zip(axes[0], models):
        e = d[d.model == m]
        rmse = float(np.sqrt(np.mean((e.prediction - e.y) ** 2)))
        ax.scatter(e.y, e.prediction, s=6, alpha=0.6)
        ax.plot([lo, hi], [lo, hi], "k--", lw=0.8)
        ax.set_title(f"{m}: RMSE {rmse:.3g}", fontsize=9)
        ax.set_xlabel(f"measured {target}"[:60], fontsize=7)
        ax.set_ylabel("predicted", fontsize=8)
    fig.suptitle(name, fontsize=10)
    fig.tight_layout()
    atomic_write(path, lambda tmp: fig.savefig(tmp, format="png", dpi=110))
    plt.close(fig)


def _csv_list(text: str, allowed: Sequence[str], what: str) -> list[str]:
    items = [s.strip() for s in text.split(",") if s.strip()]
    bad = [s for s in items if s not in allowed]
    if bad or not items:
        raise argparse.ArgumentTypeError(f"unknown {what} {', '.join(bad) or '(none)'}; known: {', '.join(allowed)}")
    return items


def _seeds(text: str) -> list[int]:
    try:
        seeds = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"seeds must be integers separated by commas, got {text!r}") from None
    if not seeds:
        raise argparse.ArgumentTypeError("give at least one seed")
    return seeds


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m mgkflow.examples.property_benchmark", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--datasets", type=lambda s: _csv_list(s, DATASETS, "dataset"), default=list(DATASETS))
    ap.add_argument("--models", type=lambda s: _csv_list(s, tuple(MODELS), "model"), default=list(DEFAULT_MODELS))
    ap.add_argument("--folds", type=int, default=5, help="K of the K-fold splits (default 5)")
    ap.add_argument("--seeds", type=_seeds, default=[0, 1, 2], help="shuffling seeds, e.g. 0,1,2 (default)")
    ap.add_argument("--n-molecules", type=int, default=None, help="a random subset of each set (for a quick run)")
    ap.add_argument("--backend", default="auto", help="graph kernel backend: auto (default), cpu, gpu")
    ap.add_argument("--out", type=Path, help="output folder (created)")
    ap.add_argument("--prepare", type=Path, metavar="FILE", help="only featurize the sets into FILE (needs RDKit)")
    ap.add_argument("--prepared", type=Path, metavar="FILE", help="benchmark from a --prepare file (no RDKit)")
    ap.add_argument("--quiet", action="store_true", help="no progress lines")
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    ap = _parser()
    args = ap.parse_args(argv)
    if args.folds < 2:
        ap.error("--folds must be at least 2")
    if args.n_molecules is not None and args.n_molecules < 2 * args.folds:
        ap.error(f"--n-molecules must be at least {2 * args.folds}")
    if args.prepare is None and args.out is None:
        ap.error("give --out (or --prepare FILE)")
    if args.prepare is not None and args.prepared is not None:
        ap.error("--prepare and --prepared exclude each other")

    def log(text: str) -> None:
        if not args.quiet:
            print(f"mgkflow: {text}", file=sys.stderr, flush=True)

    try:
        if args.prepared is not None:
            with gzip.open(args.prepared, "rb") as fh:
                prepared = [PreparedSet(**d) for d in pickle.load(fh) if d["name"] in args.datasets]
        else:
            prepared = []
            for name in args.datasets:
                log(f"featurizing {name}")
                prepared.append(prepare(name, args.n_molecules))
        if args.prepare is not None:
            blob = gzip.compress(pickle.dumps([vars(p) for p in prepared]))
            atomic_write(args.prepare, lambda tmp: Path(tmp).write_bytes(blob))
            log(f"wrote {args.prepare}")
            return 0
        folds, preds = benchmark(prepared, args.models, args.folds, args.seeds, args.backend, log)
    except (MgkflowError, ImportError, OSError, EOFError, pickle.UnpicklingError, KeyError, TypeError) as exc:
        print(f"mgkflow: error: {exc}", file=sys.stderr)
        return 1
    summary = summarize(folds)
    args.out.mkdir(parents=True, exist_ok=True)
    for name, frame in (("folds.csv", folds), ("predictions.csv", preds), ("summary.csv", summary)):
        atomic_write(args.out / name, lambda tmp, frame=frame: frame.to_csv(tmp, index=False))
    text = _markdown(summary, {p.name: p.target for p in prepared})
    atomic_write(args.out / "summary.md", lambda tmp: Path(tmp).write_text(text))
    for p in prepared:
        _parity(preds, p.name, p.target, args.out / f"parity_{p.name}.png")
    print(_markdown(summary, {}), end="")
    log(f"wrote {args.out}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
