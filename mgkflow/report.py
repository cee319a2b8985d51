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


def _load_for_compare(
    name: str, n_graphs: int | None, labeled: bool
) -> tuple[list[Graph], Any, Any]:
    """Graphs and default (node, edge) kernels of a built-in dataset or a file/directory."""
    from pathlib import Path

    from . import datasets as ds

    known = {d.name: d for d in ds.list_datasets()}
    key = name.strip().lower()
    if key in known:
        kwargs: dict[str, Any] = {}
        if n_graphs is not None:
            kwargs["n_graphs"] = min(n_graphs, known[key].n_graphs)
        if key in ("nws", "ba"):
            kwargs["labeled"] = labeled
        nk, ek = ds.default_kernels(key, labeled=labeled or key not in ("nws", "ba"))
        return ds.load(key, **kwargs), nk, ek
    if not (Path(name).exists() or any(c in name for c in "/\\.")):
        raise ValueError(f"unknown dataset(s) [{name!r}]; choose from {sorted(known)} or give a file/directory")
    from .io import default_kernels, read_graphs

    gs = read_graphs(name, **({"n_graphs": n_graphs} if n_graphs is not None else {}))
    nk, ek = default_kernels(gs)
    return gs.graphs, nk, ek


def compare_orderings(
    datasets: Sequence[str],
    orderings: Sequence[str],
    n_graphs: int | None = None,
    labeled: bool = False,
    solve: bool = False,
    backend: str = "auto",
    q: float = 0.05,
    seed: int = 0,
    repeat: int = 1,
    progress: bool = True,
    log: Callable[[str], Any] | None = None,
) -> ComparisonResult:
    """Compare orderings on datasets by octile count, tile density and (optionally) solver time.

    Parameters
    ----------
    datasets : sequence of str
        Dataset names from :func:`mgkflow.datasets.list_datasets`, or files/directories
        read with :func:`mgkflow.io.read_graphs` (their default kernels:
        :func:`mgkflow.io.default_kernels`).
    orderings : sequence of str
        Ordering names from :func:`mgkflow.reorder.available_methods`.
    n_graphs : int, optional
        Take the first ``n_graphs`` graphs of each dataset (default: all; at most the dataset's size).
    labeled : bool
        Labeled variants of the synthetic sets (nws, ba).
    solve : bool
        Also compute the Gram matrix under each ordering and record solver figures.
    backend, q :
        Solver backend and stop probability (when ``solve``).
    seed : int
        Seed of the seeded orderings (random, pbr, tsp).
    repeat : int
        Solves per (dataset, ordering) when ``solve``: ``solve_seconds`` is their
        median, ``solve_seconds_min``/``_max`` the spread (single solves are noisy).
    progress : bool
        Show a progress bar (on stderr) over reorder steps and solves.
    log : callable, optional
        Called with one line of text after each (dataset, ordering), printed above the bar.

    Returns
    -------
    ComparisonResult
        With ``solve``, ``summary`` also has ``cg_iter_same_all_orderings``: True
        where every ordering of the dataset needed exactly the same CG iterations
        for every pair (always so on the CPU, whose solver does not see the
        ordering): solver-time differences are then timing noise.

    Examples
    --------
    >>> r = compare_orderings(["nws"], ["natural", "rcm"], n_graphs=3, progress=False)
    >>> list(r.summary["ordering"])
    ['natural', 'rcm']
    """
    import pandas as pd

    from .reorder import available_methods

    known = set(available_methods())
    bad = [o for o in orderings if o not in known]
    if bad:
        raise ValueError(f"unknown ordering(s) {bad}; choose from {sorted(known)}")
    if not orderings or not datasets:
        raise ValueError("need at least one dataset and one ordering")
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
        raise ValueError(f"repeat must be a positive integer, got {repeat!r}")
    loaded = {name: _load_for_compare(name, n_graphs, labeled) for name in datasets}
    solves = len(datasets) * len(orderings) * repeat if solve else 0
    bar = _progress_bar(loaded, len(orderings), solves) if progress else None
    rows, hist_rows = [], []
    iterations: dict[tuple[str, str], np.ndarray] = {}
    samples: dict[str, dict[str, Graph]] = {}
    for name in datasets:
        graphs, nk, ek = loaded[name]
        nodes_total = int(sum(g.n_nodes for g in graphs))
        samples[name] = {}
        for ordering in orderings:
            res, hist, row = _reorder_and_pack(name, ordering, graphs, nodes_total, seed, bar)
            if solve:
                figures, iterations[(name, ordering)] = _solve_repeatedly(
                    name, ordering, res.state, (nk, ek), q, backend, repeat, bar
                )
                row.update(figures)
            rows.append(row)
            for k in range(1, TILE * TILE + 1):
                hist_rows.append({"dataset": name, "ordering": ordering, "nnz_per_octile": k, "count": int(hist[k])})
            samples[name][ordering] = res.state.graphs[0]
            if log is not None:
                _log_row(log, bar, row, solve, repeat)
    if bar is not None:
        bar.close()
    summary = pd.DataFrame(rows)
    if solve:
        same = {}
        for name in datasets:
            its = [iterations[(name, o)] for o in orderings]
            same[name] = all(a.shape == its[0].shape and np.array_equal(a, its[0]) for a in its)
        summary["cg_iter_same_all_orderings"] = summary["dataset"].map(same)
    return ComparisonResult(summary, pd.DataFrame(hist_rows), samples)


def _progress_bar(loaded: dict[str, tuple[list[Graph], Any, Any]], n_orderings: int, solves: int) -> Any:
    """A progress bar (on stderr: tqdm on a terminal, plain lines elsewhere) over the reorder step of every
    graph under every ordering, and ``solves`` solves."""
    from .progress import progress_bar

    steps = sum(len(g) for g, _, _ in loaded.values()) * n_orderings
    steps += solves
    return progress_bar(steps, unit="step", desc="compare")


def _stage(bar: Any, text: str) -> None:
    if bar is not None:
        bar.set_description(text, refresh=True)


def _reorder_and_pack(
    name: str, ordering: str, graphs: list[Graph], nodes_total: int, seed: int, bar: Any
) -> tuple[Any, np.ndarray, dict[str, Any]]:
    """Reorder and pack ``graphs``: the pipeline result, the density histogram and the summary row's tile figures."""
    opts = {"seed": seed} if ordering in ("random", "pbr", "tsp") else {}
    _stage(bar, f"{name} {ordering}: reorder")
    stages = [
        Load(graphs),
        Reorder(ordering, progress=bar.update if bar is not None else None, **opts),
        Pack(build=False),
    ]
    res = Pipeline(stages).run()
    by = {st.stage: st for st in res.stage_stats}
    pack, reo = by["pack"].figures, by["reorder"].figures
    hist = pack["density_histogram"]
    row = {
        "dataset": name,
        "ordering": ordering,
        "graphs": len(graphs),
        "nodes": nodes_total,
        "octiles": pack["octiles"],
        "nnz": pack["nnz"],
        "nnz_per_octile": pack["nnz_per_octile"],
        "density_mean": pack["density_mean"],
        "density_median": pack["density_median"],
        "reorder_seconds": reo["reorder_seconds"],
        "density_histogram": " ".join(map(str, hist.tolist())),
    }
    return res, hist, row


def _solve_repeatedly(
    name: str, ordering: str, state: Any, kernels: tuple[Any, Any], q: float, backend: str, repeat: int, bar: Any
) -> tuple[dict[str, Any], np.ndarray]:
    """Solve ``repeat`` times: the summary row's solver figures and the CG iterations of the last solve."""
    nk, ek = kernels
    times, sol, gram, iterations = [], None, None, None
    for r in range(repeat):
        _stage(bar, f"{name} {ordering}: solve {r + 1}/{repeat}")
        step = Solve(node_kernel=nk, edge_kernel=ek, q=q, backend=backend)
        solved, st = step.run(state)
        sol, gram = st.figures, solved.gram
        times.append(sol["solve_seconds"])
        iterations = np.asarray(step.kernel.last_stats.iterations)
        if bar is not None:
            bar.update(1)
    # gram_trace is the same under every ordering (K is permutation invariant)
    figures = dict(
        backend=sol["backend"],
        solve_seconds=float(np.median(times)),
        solve_seconds_min=float(np.min(times)),
        solve_seconds_max=float(np.max(times)),
        solve_repeats=repeat,
        pairs=sol["pairs"],
        pairs_per_s=sol["pairs"] / float(np.median(times)) if np.median(times) > 0 else float("inf"),
        cg_iter_median=sol["cg_iter_median"],
        cg_iter_max=sol["cg_iter_max"],
        gram_trace=float(np.trace(gram)),
    )
    return figures, iterations


def _log_row(log: Callable[[str], Any], bar: Any, row: dict[str, Any], solve: bool, repeat: int) -> None:
    """Call ``log`` with one line about ``row``, printed above the progress bar (on stderr), not through it."""
    import sys

    name, ordering = row["dataset"], row["ordering"]
    msg = f"{name:>9} {ordering:>8}: {row['octiles']:>7} octiles, {row['reorder_seconds']:.2f} s reorder"
    if solve:
        msg += f", {row['solve_seconds']:.2f} s solve (median of {repeat}, {row['backend']})"
    if bar is not None:
        with bar.external_write_mode(file=sys.stderr):
            log(msg)
    else:
        log(msg)


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
            err = None
            if "solve_seconds_min" in sub.columns:
                err = np.vstack([sub["solve_seconds"] - sub["solve_seconds_min"],
                                 sub["solve_seconds_max"] - sub["solve_seconds"]])
            ax.bar(sub["ordering"], sub["solve_seconds"], yerr=err, capsize=3, color="tab:green")
            reps = int(sub["solve_repeats"].iloc[0]) if "solve_repeats" in sub.columns else 1
            ax.set_title(f"{name}: solver ({sub['backend'].iloc[0]}), median of {reps}", fontsize=9)
            if "cg_iter_same_all_orderings" in sub.columns and bool(sub["cg_iter_same_all_orderings"].iloc[0]):
                ax.text(0.5, 0.98, "CG iterations identical across orderings:\ndifferences are timing noise",
                        transform=ax.transAxes, ha="center", va="top", fontsize=7, color="0.3")
            ax.set_ylabel("seconds (bars: min-max)")
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
