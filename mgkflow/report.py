"""The ordering comparison report: tile statistics (and solver time) per dataset and ordering.

:func:`compare_orderings` runs ``Load -> Reorder -> Pack [-> Solve]`` for every
(dataset, ordering) and returns tidy tables; :func:`write_report` writes them
as CSV plus PNG plots (octiles per ordering, tile-density histograms, spy plots
of a sample graph under each ordering with the 8x8 tile grid drawn).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .format.count import TILE
from .graph import Graph
from .io._files import atomic_write
from .pipeline import Load, Pack, Pipeline, Reorder, Solve

__all__ = ["ComparisonResult", "compare_orderings", "write_report", "atomic_write"]


@dataclass
class ComparisonResult:
    """Tables of an ordering comparison.

    Attributes
    ----------
    summary : pandas.DataFrame
        One row per (dataset, ordering): graphs, octiles, nnz, nnz_per_octile,
        density figures, the density histogram (65 counts, space separated),
        reorder seconds and, when solved, solver figures.
    histograms : pandas.DataFrame
        Long form: dataset, ordering, nnz_per_octile (1..64), count.
    samples : dict
        ``{dataset: {ordering: Graph}}``: the first graph under each ordering (for spy plots).
    """

    summary: Any
    histograms: Any
    samples: dict[str, dict[str, Graph]] = field(default_factory=dict)


def compare_orderings(
    datasets: Sequence[str],
    orderings: Sequence[str],
    n_graphs: int | None = None,
    labeled: bool = False,
    solve: bool = False,
    backend: str = "auto",
    q: float = 0.05,
    seed: int = 0,
    progress: bool = True,
    log: Callable[[str], Any] | None = None,
) -> ComparisonResult:
    """Compare orderings on datasets by octile count, tile density and (optionally) solver time.

    Parameters
    ----------
    datasets : sequence of str
        Dataset names from :func:`mgkflow.datasets.list_datasets`.
    orderings : sequence of str
        Ordering names from :func:`mgkflow.reorder.available_methods`.
    n_graphs : int, optional
        Take the first ``n_graphs`` graphs of each dataset (default: all).
    labeled : bool
        Labeled variants of the synthetic sets (nws, ba).
    solve : bool
        Also compute the Gram matrix under each ordering and record solver figures.
    backend, q :
        Solver backend and stop probability (when ``solve``).
    seed : int
        Seed of the seeded orderings (random, pbr, tsp).
    progress : bool
        Show a progress bar over graphs.
    log : callable, optional
        Called with one line of text after each (dataset, ordering).

    Returns
    -------
    ComparisonResult

    Examples
    --------
    >>> r = compare_orderings(["nws"], ["natural", "rcm"], n_graphs=3, progress=False)
    >>> list(r.summary["ordering"])
    ['natural', 'rcm']
    """
    import pandas as pd

    from . import datasets as ds
    from .reorder import available_methods

    known = set(available_methods())
    bad = [o for o in orderings if o not in known]
    if bad:
        raise ValueError(f"unknown ordering(s) {bad}; choose from {sorted(known)}")
    known_ds = {d.name if hasattr(d, "name") else d["name"] for d in ds.list_datasets()}
    bad = [d for d in datasets if d not in known_ds]
    if bad:
        raise ValueError(f"unknown dataset(s) {bad}; choose from {sorted(known_ds)}")
    if not orderings or not datasets:
        raise ValueError("need at least one dataset and one ordering")

    bar = None
    rows, hist_rows = [], []
    samples: dict[str, dict[str, Graph]] = {}
    for name in datasets:
        kwargs: dict[str, Any] = {}
        if n_graphs is not None:
            kwargs["n_graphs"] = n_graphs
        if name in ("nws", "ba"):
            kwargs["labeled"] = labeled
        loaded, load_stats = Load(name, **kwargs).run(_empty_state())
        graphs = list(loaded.graphs)
        if progress and bar is None:
            from tqdm.auto import tqdm

            bar = tqdm(total=len(graphs) * len(orderings) * len(datasets), unit="graph", desc="reorder")
        samples[name] = {}
        for ordering in orderings:
            opts = {"seed": seed} if ordering in ("random", "pbr", "tsp") else {}
            stages = [
                Load(graphs),
                Reorder(ordering, progress=bar.update if bar is not None else None, **opts),
                Pack(build=False),
            ]
            if solve:
                # the dataset's recommended kernels (labeled variants where the data are labeled)
                nk, ek = ds.default_kernels(name, labeled=labeled or name not in ("nws", "ba"))
                stages.append(Solve(node_kernel=nk, edge_kernel=ek, q=q, backend=backend))
            res = Pipeline(stages).run()
            by = {st.stage: st for st in res.stage_stats}
            pack, reo = by["pack"].figures, by["reorder"].figures
            hist = pack["density_histogram"]
            row = {
                "dataset": name,
                "ordering": ordering,
                "graphs": len(graphs),
                "nodes": load_stats.figures["nodes_total"],
                "octiles": pack["octiles"],
                "nnz": pack["nnz"],
                "nnz_per_octile": pack["nnz_per_octile"],
                "density_mean": pack["density_mean"],
                "density_median": pack["density_median"],
                "reorder_seconds": reo["reorder_seconds"],
                "density_histogram": " ".join(map(str, hist.tolist())),
            }
            if solve:
                sol = by["solve"].figures
                # gram_trace is the same under every ordering (K is permutation invariant)
                row.update(
                    backend=sol["backend"],
                    solve_seconds=sol["solve_seconds"],
                    pairs=sol["pairs"],
                    pairs_per_s=sol["pairs_per_s"],
                    cg_iter_median=sol["cg_iter_median"],
                    cg_iter_max=sol["cg_iter_max"],
                    gram_trace=float(np.trace(res.gram)),
                )
            rows.append(row)
            for k in range(1, TILE * TILE + 1):
                hist_rows.append({"dataset": name, "ordering": ordering, "nnz_per_octile": k, "count": int(hist[k])})
            samples[name][ordering] = res.state.graphs[0]
            if log is not None:
                msg = f"{name:>9} {ordering:>8}: {row['octiles']:>7} octiles, {row['reorder_seconds']:.2f} s reorder"
                if solve:
                    msg += f", {row['solve_seconds']:.2f} s solve ({row['backend']})"
                if bar is not None:  # print above the progress bar, not through it
                    with bar.external_write_mode():
                        log(msg)
                else:
                    log(msg)
    if bar is not None:
        bar.close()
    return ComparisonResult(pd.DataFrame(rows), pd.DataFrame(hist_rows), samples)


def _empty_state():
    from .pipeline import PipelineState

    return PipelineState()


def write_report(result: ComparisonResult, out_dir: str | Path, plots: bool = True) -> list[Path]:
    """Write ``orderings.csv``, ``density_histograms.csv`` and the PNG plots to ``out_dir``.

    Returns the written paths.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    p = out / "orderings.csv"
    atomic_write(p, lambda t: result.summary.to_csv(t, index=False))
    written.append(p)
    p = out / "density_histograms.csv"
    atomic_write(p, lambda t: result.histograms.to_csv(t, index=False))
    written.append(p)
    if plots:
        written += _plots(result, out)
    return written


def _plots(result: ComparisonResult, out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    df = result.summary
    names = list(dict.fromkeys(df["dataset"]))
    orderings = list(dict.fromkeys(df["ordering"]))

    # 1. octiles per ordering per dataset
    fig, axes = plt.subplots(1, len(names), figsize=(4.2 * len(names), 3.6), squeeze=False)
    for ax, name in zip(axes[0], names):
        sub = df[df["dataset"] == name]
        ax.bar(sub["ordering"], sub["octiles"], color="tab:blue")
        best = sub["octiles"].min()
        ax.axhline(best, color="tab:red", lw=0.8, ls="--")
        ax.set_title(f"{name} ({int(sub['graphs'].iloc[0])} graphs)")
        ax.set_ylabel("non-empty 8x8 octiles (total)")
        ax.tick_params(axis="x", rotation=45)
    fig.tight_layout()
    written.append(_save(fig, out / "octiles.png"))
    plt.close(fig)

    # 2. tile density histograms
    h = result.histograms
    fig, axes = plt.subplots(1, len(names), figsize=(4.2 * len(names), 3.6), squeeze=False)
    for ax, name in zip(axes[0], names):
        for ordering in orderings:
            sub = h[(h["dataset"] == name) & (h["ordering"] == ordering)]
            ax.step(sub["nnz_per_octile"], sub["count"], where="mid", label=ordering, lw=1)
        ax.set_yscale("symlog", linthresh=1)
        ax.set_xlabel("nonzeros per octile")
        ax.set_ylabel("octiles")
        ax.set_title(name)
    axes[0][-1].legend(fontsize=7)
    fig.tight_layout()
    written.append(_save(fig, out / "density.png"))
    plt.close(fig)

    # 2b. solver time per ordering, if solved
    if "solve_seconds" in df.columns:
        fig, axes = plt.subplots(1, len(names), figsize=(4.2 * len(names), 3.6), squeeze=False)
        for ax, name in zip(axes[0], names):
            sub = df[df["dataset"] == name]
            ax.bar(sub["ordering"], sub["solve_seconds"], color="tab:green")
            ax.set_title(f"{name}: solver ({sub['backend'].iloc[0]})")
            ax.set_ylabel("seconds")
            ax.tick_params(axis="x", rotation=45)
        fig.tight_layout()
        written.append(_save(fig, out / "solve_time.png"))
        plt.close(fig)

    # 3. spy plots of a sample graph under each ordering, tile grid drawn
    for name, by_ordering in result.samples.items():
        k = len(by_ordering)
        cols = min(k, 4)
        rows = -(-k // cols)
        fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 3.3 * rows), squeeze=False)
        for ax in axes.ravel():
            ax.set_axis_off()
        for ax, (ordering, g) in zip(axes.ravel(), by_ordering.items()):
            _spy(ax, g)
            ax.set_title(f"{ordering}", fontsize=9)
        fig.suptitle(f"{name}: {by_ordering[next(iter(by_ordering))].title or 'sample graph'}", fontsize=10)
        fig.tight_layout()
        written.append(_save(fig, out / f"spy_{name}.png"))
        plt.close(fig)
    return written


def _spy(ax, g: Graph) -> None:
    from matplotlib.patches import Rectangle

    from .format.count import octile_keys

    n = g.n_nodes
    nt = -(-n // TILE)
    keys, _ = octile_keys(g)
    for key in keys:
        r, c = divmod(int(key), nt)
        ax.add_patch(Rectangle((c * TILE, r * TILE), TILE, TILE, color="tab:orange", alpha=0.35, lw=0))
    rows, cols = g.coo()
    ax.scatter(cols + 0.5, rows + 0.5, s=max(0.5, 40.0 / max(n, 1) * 4), c="k", marker="s", lw=0)
    edge = nt * TILE
    for t in range(nt + 1):
        ax.axhline(t * TILE, color="0.8", lw=0.3)
        ax.axvline(t * TILE, color="0.8", lw=0.3)
    ax.set_xlim(0, edge)
    ax.set_ylim(edge, 0)
    ax.set_aspect("equal")
    ax.set_axis_on()
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_xlabel(f"{len(keys)} octiles", fontsize=8)


def _save(fig, path: Path) -> Path:
    atomic_write(path, lambda t: fig.savefig(t, dpi=110, format="png"))
    return path
