"""Gaussian-process regression on molecules with the normalized marginalized graph kernel.

Fits scikit-learn's :class:`~sklearn.gaussian_process.GaussianProcessRegressor` with
``ConstantKernel() * normalized MGK + ConstantKernel() + WhiteKernel()`` on FreeSolv hydration free energies
(5 shuffled outer folds x seeds 0, 1, 2; hyperparameters fitted on each training fold) or on
the solubility set (its own 1,025/257 train/test split), and in the same run two baselines:
a GPR on RDKit Morgan fingerprints (radius 2, 2048 bits) with a Tanimoto kernel (where RDKit
is installed) and the mean of the training targets. Reports RMSE, MAE and R² (mean ± sd over
the test folds), writes CSV files and a parity plot (PNG) to ``--out``.

The graph kernel: nodes compared by ``KroneckerDelta`` on element, aromatic, charge,
hybridization and hydrogen count (hydrogens are not nodes; the dataset graphs carry the count
of each heavy atom); edges by ``KroneckerDelta`` on bond order and ring membership; normalized
to K(G, G) = 1 (:func:`normalized_mgk`). The added constant kernel (a bias, ``--no-bias``
drops it) lets the GP take the common offset of the targets as a free intercept: without it
the marginal likelihood raises every delta value towards 1 (all molecules alike) to get one.

The scikit-learn kernels, scores, splits and fingerprints it uses (:class:`~mgkflow.learn.Normalized`,
:class:`~mgkflow.learn.Tanimoto`, :func:`~mgkflow.learn.regression_metrics`, ...) come from
:mod:`mgkflow.learn` (importable from here too, as before).

Two modes:

``gpr``
    The marginalized graph kernel is a scikit-learn kernel (``MarginalizedGraphKernel`` has
    ``theta``): its hyperparameters (the delta values, q) are fitted with the GP's marginal
    likelihood and analytic gradients, together with the amplitude and the noise level.
``grid`` (the comparison the hyperparameter fit has to beat)
    Kernel ridge regression on precomputed normalized Gram matrices, hyperparameters chosen
    from a grid (:data:`GRID`: node delta, edge delta, q; ridge alpha) by 5-fold CV inside
    each training fold (nested CV). Labelled ``mgk-krr-grid`` in every output.

Usage::

    python -m mgkflow.examples.gpr_freesolv --out results/freesolv
    python -m mgkflow.examples.gpr_freesolv --dataset solubility --out results/solubility
    python -m mgkflow.examples.gpr_freesolv --n-molecules 100 --seeds 0 --backend cpu --out /tmp/fs

Examples
--------
>>> from mgkflow import datasets
>>> K = normalized_mgk(backend="cpu")
>>> graphs = datasets.freesolv(n_graphs=3).graphs
>>> G = K(graphs)
>>> bool(np.allclose(np.diag(G), 1.0))
True
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import ConstantKernel, Kernel, WhiteKernel
from sklearn.kernel_ridge import KernelRidge
from sklearn.model_selection import KFold

from .. import datasets
from ..io import atomic_write
from ..kernels import BaseKernel, KroneckerDelta
from ..learn import Normalized, Tanimoto, kfold_splits, labelled_split, morgan_fingerprints, regression_metrics
from ..mgk import MarginalizedGraphKernel

__all__ = [
    "GRID",
    "ALPHAS",
    "molecular_kernels",
    "normalized_mgk",
    "Normalized",
    "Tanimoto",
    "morgan_fingerprints",
    "run",
    "main",
]

NODE_FIELDS = ("element", "aromatic", "charge", "hybridization", "hydrogens")
EDGE_FIELDS = ("bond_order", "in_ring")

#: Grid of the fallback mode: (node delta h, edge delta h, stop probability q), 18 points.
GRID: tuple[tuple[float, float, float], ...] = tuple(
    (hn, he, q) for hn in (0.2, 0.5, 0.8) for he in (0.5, 0.9) for q in (0.01, 0.05, 0.2)
)
#: Ridge penalties of the fallback mode (on normalized kernels, targets centred).
ALPHAS: tuple[float, ...] = (1e-4, 1e-3, 1e-2, 1e-1, 1.0)


# ---------------------------------------------------------------------- kernels
def molecular_kernels(h_node: float = 0.5, h_edge: float = 0.5) -> tuple[BaseKernel, BaseKernel]:
    """(node_kernel, edge_kernel): Kronecker deltas on the molecular label fields.

    One ``KroneckerDelta(h, field)`` per field (each its own hyperparameter): nodes on
    element, aromatic, charge, hybridization and hydrogen count; edges on bond order and
    ring membership.

    Examples
    --------
    >>> node, edge = molecular_kernels()
    >>> node.fields, edge.fields
    (('element', 'aromatic', 'charge', 'hybridization', 'hydrogens'), ('bond_order', 'in_ring'))
    """
    node = KroneckerDelta(h_node, NODE_FIELDS[0])
    for f in NODE_FIELDS[1:]:
        node = node * KroneckerDelta(h_node, f)
    edge = KroneckerDelta(h_edge, EDGE_FIELDS[0])
    for f in EDGE_FIELDS[1:]:
        edge = edge * KroneckerDelta(h_edge, f)
    return node, edge


def normalized_mgk(
    h_node: float = 0.5, h_edge: float = 0.5, q: float = 0.05, backend: str = "auto"
) -> Kernel | MarginalizedGraphKernel:
    """The normalized marginalized graph kernel of this example (the one place it is built).

    ``MarginalizedGraphKernel(..., normalize=True)``: a scikit-learn kernel with K(G, G) = 1
    whose θ-gradient comes from the kernel's and the diagonal's analytic gradients.
    """
    node, edge = molecular_kernels(h_node, h_edge)
    return MarginalizedGraphKernel(node_kernel=node, edge_kernel=edge, q=q, backend=backend, normalize=True)


# ---------------------------------------------------------------------- models
@dataclass
class Prediction:
    """Predictions of one model on one test set, with what was fitted."""

    y_pred: np.ndarray
    seconds: float
    params: str


def _lbfgs(maxiter: int | None) -> Any:
    if maxiter is None:
        return "fmin_l_bfgs_b"
    from scipy.optimize import minimize

    def optimizer(obj_func, initial_theta, bounds):
        opts = {"maxiter": maxiter}
        res = minimize(obj_func, initial_theta, method="L-BFGS-B", jac=True, bounds=bounds, options=opts)
        return res.x, res.fun

    return optimizer


def _gpr(kernel: Kernel, X_tr, y_tr, X_te, seed: int, maxiter: int | None, bias: bool = False) -> Prediction:
    full = ConstantKernel(1.0, (1e-3, 1e3)) * kernel + WhiteKernel(1e-2, (1e-6, 1e1))
    if bias:
        full = full + ConstantKernel(1.0, (1e-3, 1e4))
    gpr = GaussianProcessRegressor(kernel=full, normalize_y=True, optimizer=_lbfgs(maxiter), random_state=seed)
    t0 = time.perf_counter()
    gpr.fit(X_tr, y_tr)
    y_pred = gpr.predict(X_te)
    return Prediction(y_pred, time.perf_counter() - t0, repr(gpr.kernel_))


def _mean(y_tr, n_te: int) -> Prediction:
    return Prediction(np.full(n_te, float(np.mean(y_tr))), 0.0, f"mean={np.mean(y_tr):.4g}")


def _krr_grid(
    grams: list[np.ndarray], grid: Sequence[tuple[float, float, float]], y: np.ndarray, tr, te, seed: int
) -> Prediction:
    """Kernel ridge on precomputed Grams; grid point and alpha chosen by 5-fold CV within ``tr``."""
    t0 = time.perf_counter()
    inner = KFold(n_splits=min(5, len(tr)), shuffle=True, random_state=seed)
    best, best_rmse = (0, ALPHAS[0]), np.inf
    for g, K in enumerate(grams):
        for alpha in ALPHAS:
            se = 0.0
            for itr, iva in inner.split(tr):
                a, b = tr[itr], tr[iva]
                mu = y[a].mean()
                m = KernelRidge(alpha=alpha, kernel="precomputed").fit(K[np.ix_(a, a)], y[a] - mu)
                se += float(((m.predict(K[np.ix_(b, a)]) + mu - y[b]) ** 2).sum())
            rmse = np.sqrt(se / len(tr))
            if rmse < best_rmse:
                best, best_rmse = (g, alpha), rmse
    g, alpha = best
    K = grams[g]
    mu = y[tr].mean()
    m = KernelRidge(alpha=alpha, kernel="precomputed").fit(K[np.ix_(tr, tr)], y[tr] - mu)
    y_pred = m.predict(K[np.ix_(te, tr)]) + mu
    hn, he, q = grid[g]
    params = f"h_node={hn} h_edge={he} q={q} alpha={alpha} inner_rmse={best_rmse:.4g}"
    return Prediction(y_pred, time.perf_counter() - t0, params)


# ---------------------------------------------------------------------- run
@dataclass
class RunConfig:
    """Settings of one run (see :func:`main` for the command-line flags)."""

    dataset: str = "freesolv"
    out: Path = Path("gpr_results")
    n_molecules: int | None = None
    seeds: tuple[int, ...] = (0, 1, 2)
    folds: int = 5
    backend: str = "auto"
    mode: str = "auto"
    grid: tuple[tuple[float, float, float], ...] = GRID
    maxiter: int | None = None
    models: tuple[str, ...] = ("mgk", "morgan", "mean")
    bias: bool = True
    mgk_factory: Callable[[], Kernel] | None = None
    log: Callable[[str], None] = field(default=print, repr=False)


def _load(cfg: RunConfig) -> datasets.MoleculeSet:
    if cfg.dataset == "freesolv":
        data = datasets.freesolv()
    elif cfg.dataset == "solubility":
        data = datasets.solubility()
    else:
        raise ValueError(f"dataset must be 'freesolv' or 'solubility', got {cfg.dataset!r}")
    if cfg.n_molecules is not None:
        if not 4 <= cfg.n_molecules:
            raise ValueError(f"n_molecules must be at least 4, got {cfg.n_molecules}")
        n = min(cfg.n_molecules, len(data))
        keep = np.sort(np.random.default_rng(12345).choice(len(data), size=n, replace=False))
        data = datasets.MoleculeSet(
            graphs=[data.graphs[i] for i in keep],
            y=data.y[keep],
            smiles=tuple(data.smiles[i] for i in keep),
            names=tuple(data.names[i] for i in keep),
            split=tuple(data.split[i] for i in keep),
            target=data.target,
        )
    return data


def _splits(cfg: RunConfig, data: datasets.MoleculeSet) -> list[tuple[int, int, np.ndarray, np.ndarray]]:
    """(seed, fold, train indices, test indices) of the run."""
    if cfg.dataset == "solubility":
        tr, te = labelled_split(data.split)
        if len(tr) < 2 or len(te) < 1:
            raise ValueError("solubility: the subset needs training and test molecules; raise --n-molecules")
        return [(0, 0, tr, te)]
    return kfold_splits(len(data), cfg.folds, cfg.seeds)


def _parity_plot(pred: pd.DataFrame, path: Path, title: str, unit: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = list(dict.fromkeys(pred["model"]))
    fig, axes = plt.subplots(1, len(models), figsize=(4.2 * len(models), 4.2), squeeze=False)
    lo = float(min(pred["y_true"].min(), pred["y_pred"].min()))
    hi = float(max(pred["y_true"].max(), pred["y_pred"].max()))
    pad = 0.05 * (hi - lo or 1.0)
    for ax, m in zip(axes[0], models):
        sub = pred[pred["model"] == m]
        met = regression_metrics(sub["y_true"].to_numpy(), sub["y_pred"].to_numpy())
        ax.scatter(sub["y_true"], sub["y_pred"], s=8, alpha=0.6)
        ax.plot([lo - pad, hi + pad], [lo - pad, hi + pad], "k--", lw=0.8)
        ax.set_xlim(lo - pad, hi + pad)
        ax.set_ylim(lo - pad, hi + pad)
        ax.set_aspect("equal")
        ax.set_xlabel(f"measured {unit}")
        ax.set_ylabel(f"predicted {unit}")
        ax.set_title(f"{m}\nRMSE {met['rmse']:.2f}  MAE {met['mae']:.2f}  R² {met['r2']:.2f}", fontsize=9)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    atomic_write(path, lambda tmp: fig.savefig(tmp, dpi=120, format="png"))
    plt.close(fig)


def _check_mode(cfg: RunConfig) -> str:
    """The mode ``auto`` stands for (``gpr``); refuses unknown modes and models."""
    mode = "gpr" if cfg.mode == "auto" else cfg.mode
    if mode not in ("gpr", "grid"):
        raise ValueError(f"mode must be 'auto', 'gpr' or 'grid', got {cfg.mode!r}")
    bad = set(cfg.models) - {"mgk", "morgan", "mean"}
    if bad:
        raise ValueError(f"unknown models {sorted(bad)}; choose from mgk, morgan, mean")
    return mode


def _grid_grams(cfg: RunConfig, data: datasets.MoleculeSet) -> tuple[list[np.ndarray], float]:
    """The normalized MGK Gram matrix of every point of ``cfg.grid`` (grid mode), and the seconds they took."""
    grams: list[np.ndarray] = []
    t0 = time.perf_counter()
    for i, (hn, he, q) in enumerate(cfg.grid):
        kern = normalized_mgk(hn, he, q, backend=cfg.backend)
        X_all = np.empty(len(data), dtype=object)
        X_all[:] = data.graphs
        grams.append(kern(X_all))
        cfg.log(f"  Gram {i + 1}/{len(cfg.grid)} (h_node={hn}, h_edge={he}, q={q}): {time.perf_counter() - t0:.1f} s")
    return grams, time.perf_counter() - t0


def _summary(folds: pd.DataFrame, cfg: RunConfig, n_molecules: int, gram_seconds: float) -> pd.DataFrame:
    """Mean and sd of the scores over the test folds, one row per model."""
    summary = (
        folds.groupby("model", sort=False)
        .agg(
            rmse_mean=("rmse", "mean"), rmse_sd=("rmse", "std"), mae_mean=("mae", "mean"), mae_sd=("mae", "std"),
            r2_mean=("r2", "mean"), r2_sd=("r2", "std"), n_folds=("rmse", "size"), fit_seconds=("fit_seconds", "sum"),
        )
        .reset_index()
    )  # fmt: skip
    summary.insert(0, "dataset", cfg.dataset)
    summary.insert(2, "n_molecules", n_molecules)
    summary.loc[summary["model"] == "mgk-krr-grid", "fit_seconds"] += gram_seconds
    return summary


def _log_summary(log: Callable[[str], None], summary: pd.DataFrame) -> None:
    log("")
    log(f"{'model':22s} {'RMSE':>16s} {'MAE':>16s} {'R2':>14s}  fit s")

    def pm(mean: float, sd: float, width: int) -> str:
        return f"{mean:{width}.3f} ± {sd:5.3f}" if np.isfinite(sd) else f"{mean:{width}.3f}        "

    for r in summary.itertuples():
        log(
            f"{r.model:22s} {pm(r.rmse_mean, r.rmse_sd, 8)} {pm(r.mae_mean, r.mae_sd, 8)} "
            f"{pm(r.r2_mean, r.r2_sd, 6)}  {r.fit_seconds:.1f}"
        )


def run(cfg: RunConfig) -> pd.DataFrame:
    """Run the comparison; write CSV files and the parity plot to ``cfg.out``; return the summary.

    Files (``NAME`` = the dataset): ``NAME_folds.csv`` (one row per model and test fold:
    metrics, fit seconds, fitted hyperparameters; rewritten after every train/test split, so
    a run stopped part-way leaves the folds it finished), ``NAME_predictions.csv`` (every test
    prediction), ``NAME_summary.csv`` (mean ± sd over the test folds) and ``NAME_parity.png``
    (seed 0: out-of-fold predictions of every molecule, or the test split).
    """
    log = cfg.log
    mode = _check_mode(cfg)
    data = _load(cfg)
    y = data.y
    splits = _splits(cfg, data)
    cfg.out.mkdir(parents=True, exist_ok=True)
    mgk_name = "mgk-gpr" if mode == "gpr" else "mgk-krr-grid"
    log(f"{cfg.dataset}: {len(data)} molecules, {data.target}; {len(splits)} train/test splits")
    if "mgk" in cfg.models:
        if mode == "gpr":
            form = "C * normalized MGK + C0 + White" if cfg.bias else "C * normalized MGK + White"
            log(f"mgk: GaussianProcessRegressor, {form}, theta fitted by marginal likelihood")
        else:
            log(
                "mgk: FALLBACK (MarginalizedGraphKernel has no scikit-learn kernel interface here): kernel ridge "
                f"on normalized MGK Grams, {len(cfg.grid)}-point grid x {len(ALPHAS)} alphas by nested 5-fold CV"
            )

    fps = None
    if "morgan" in cfg.models:
        fps = morgan_fingerprints(data.smiles)
        if fps is None:
            log("morgan: skipped (RDKit is not installed)")

    grams, gram_seconds = _grid_grams(cfg, data) if "mgk" in cfg.models and mode == "grid" else ([], 0.0)

    rows, preds = [], []
    X = np.empty(len(data), dtype=object)
    X[:] = data.graphs
    for seed, fold, tr, te in splits:
        results: dict[str, Prediction] = {}
        if "mgk" in cfg.models:
            if mode == "gpr":
                kernel = cfg.mgk_factory() if cfg.mgk_factory is not None else normalized_mgk(backend=cfg.backend)
                results[mgk_name] = _gpr(kernel, X[tr], y[tr], X[te], seed, cfg.maxiter, bias=cfg.bias)
            else:
                results[mgk_name] = _krr_grid(grams, cfg.grid, y, tr, te, seed)
        if fps is not None:
            results["morgan-tanimoto-gpr"] = _gpr(Tanimoto(), fps[tr], y[tr], fps[te], seed, cfg.maxiter)
        if "mean" in cfg.models:
            results["mean"] = _mean(y[tr], len(te))
        for name, p in results.items():
            met = regression_metrics(y[te], p.y_pred)
            rows.append(
                {
                    "dataset": cfg.dataset, "model": name, "seed": seed, "fold": fold, "n_train": len(tr),
                    "n_test": len(te), **met, "fit_seconds": p.seconds, "params": p.params,
                }
            )  # fmt: skip
            preds.extend(
                {"model": name, "seed": seed, "fold": fold, "index": int(i), "name": data.names[i],
                 "y_true": float(y[i]), "y_pred": float(v)}
                for i, v in zip(te, p.y_pred)
            )  # fmt: skip
            log(f"  seed {seed} fold {fold} {name:22s} RMSE {met['rmse']:.3f}  ({p.seconds:.1f} s)")
        # the folds so far, rewritten after every split: a run stopped part-way keeps what it finished
        partial = pd.DataFrame(rows)
        atomic_write(cfg.out / f"{cfg.dataset}_folds.csv", lambda tmp, df=partial: df.to_csv(tmp, index=False))

    folds = pd.DataFrame(rows)
    summary = _summary(folds, cfg, len(data), gram_seconds)
    pred = pd.DataFrame(preds)
    name = cfg.dataset
    files = ((folds, f"{name}_folds.csv"), (pred, f"{name}_predictions.csv"), (summary, f"{name}_summary.csv"))
    for frame, fname in files:
        atomic_write(cfg.out / fname, lambda tmp, frame=frame: frame.to_csv(tmp, index=False))
    unit = "(kcal/mol)" if name == "freesolv" else "(log mol/L)"
    first = pred[pred["seed"] == splits[0][0]]
    subset = "" if cfg.n_molecules is None else f", subset of {len(data)}"
    _parity_plot(first, cfg.out / f"{name}_parity.png", f"{name}{subset}, seed {splits[0][0]} test predictions", unit)
    _log_summary(log, summary)
    log(f"wrote {cfg.out}/{name}_{{folds,predictions,summary}}.csv and {name}_parity.png")
    return summary


def main(argv: list[str] | None = None) -> int:
    """Command line: ``python -m mgkflow.examples.gpr_freesolv --help``."""
    ap = argparse.ArgumentParser(
        prog="python -m mgkflow.examples.gpr_freesolv", description=__doc__.split("\n\n")[0].replace("\n", " ")
    )
    ap.add_argument("--dataset", choices=("freesolv", "solubility"), default="freesolv")
    ap.add_argument("--out", type=Path, default=Path("gpr_results"), help="folder for the CSV files and the PNG")
    ap.add_argument("--n-molecules", type=int, help="a random subset of this many molecules (seeded)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="CV shuffling seeds (FreeSolv)")
    ap.add_argument("--folds", type=int, default=5, help="outer CV folds (FreeSolv)")
    ap.add_argument("--backend", choices=("auto", "cpu", "gpu"), default="auto")
    ap.add_argument("--mode", choices=("auto", "gpr", "grid"), default="auto", help="see the module docstring")
    ap.add_argument("--grid-points", type=int, help="use only the first N points of the fallback grid")
    ap.add_argument("--maxiter", type=int, help="L-BFGS-B iteration limit of the GP fits (default scipy's)")
    ap.add_argument("--models", default="mgk,morgan,mean", help="comma-separated subset of mgk,morgan,mean")
    ap.add_argument("--no-bias", action="store_true", help="mgk GPR without the constant (intercept) kernel")
    args = ap.parse_args(argv)
    grid = GRID if args.grid_points is None else GRID[: max(1, args.grid_points)]
    cfg = RunConfig(
        dataset=args.dataset, out=args.out, n_molecules=args.n_molecules, seeds=tuple(args.seeds),
        folds=args.folds, backend=args.backend, mode=args.mode, grid=grid, maxiter=args.maxiter,
        models=tuple(m.strip() for m in args.models.split(",") if m.strip()), bias=not args.no_bias,
    )  # fmt: skip
    try:
        run(cfg)
    except (ValueError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
