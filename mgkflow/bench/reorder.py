"""Ordering benchmark: non-empty octiles and reordering time per ordering and dataset.

Run as ``python -m mgkflow.bench reorder --datasets nws,ba --orderings natural,rcm,pbr --out reports/``.
Writes ``reorder_totals.csv`` (one row per dataset and ordering: graphs, total
non-empty octiles, total seconds) and, with ``--scaling``, ``reorder_scaling.csv``
(PBR on random geometric graphs of growing size), and prints the tables. Times are
wall-clock seconds of :func:`mgkflow.reorder.reorder` (one process, one core;
pin it with ``taskset -c 0`` and ``OMP_NUM_THREADS=1`` for stable numbers).

Examples
--------
>>> main(["--datasets", "nws", "--orderings", "natural,rcm", "--n-graphs", "2", "--out", ""])  # doctest: +SKIP
0
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from ._csv import write_csv

__all__ = ["main", "run_datasets", "run_scaling", "random_geometric_graph"]

DEFAULT_ORDERINGS = "natural,random,rcm,pbr,tsp,morton,hilbert"


def random_geometric_graph(n: int, degree: float = 12.0, dim: int = 3, seed: int = 0) -> Any:
    """Random geometric graph: n uniform points in the unit cube, joined within a radius giving ~``degree``.

    Returns a :class:`mgkflow.graph.Graph` with coordinates.

    Examples
    --------
    >>> g = random_geometric_graph(500, seed=1)
    >>> g.n_nodes, 8 < g.nnz / g.n_nodes < 14
    (500, True)
    """
    from scipy.spatial import cKDTree

    from ..graph import Graph

    X = np.random.default_rng(seed).random((n, dim))
    unit_ball = {1: 2.0, 2: np.pi, 3: 4.0 * np.pi / 3.0}[dim]
    r = (degree / (unit_ball * n)) ** (1.0 / dim)
    pairs = cKDTree(X).query_pairs(r, output_type="ndarray")
    rows = np.concatenate([pairs[:, 0], pairs[:, 1]])
    cols = np.concatenate([pairs[:, 1], pairs[:, 0]])
    A = sp.csr_array((np.ones(rows.size), (rows, cols)), shape=(n, n))
    return Graph(A, coords=X, title=f"rgg-{n}")


def _load(name: str, n_graphs: int | None) -> list[Any]:
    from .. import datasets

    if name in ("nws", "ba"):
        return datasets.load(name, n_graphs=160 if n_graphs is None else n_graphs)
    graphs = datasets.load(name)
    return graphs if n_graphs is None else graphs[:n_graphs]


def _measure(graphs: list[Any], method: str, seed: int, options: dict[str, Any]) -> tuple[int, float, float]:
    """Total octiles, wall seconds and CPU seconds of one ordering over the graphs."""
    from ..format.count import count_octiles
    from ..reorder import reorder

    total, seconds, cpu = 0, 0.0, 0.0
    for i, g in enumerate(graphs):
        t0, c0 = time.perf_counter(), time.process_time()
        perm = reorder(g, method=method, seed=seed + i, **options)
        seconds += time.perf_counter() - t0
        cpu += time.process_time() - c0
        total += count_octiles(g, perm)
    return total, seconds, cpu


def run_datasets(
    datasets: list[str],
    orderings: list[str],
    n_graphs: int | None = None,
    seed: int = 0,
    options: dict[str, dict[str, Any]] | None = None,
    verbose: bool = True,
) -> list[dict[str, Any]]:
    """Totals of non-empty octiles and reordering seconds per dataset and ordering.

    Parameters
    ----------
    datasets : list of str
        Names for :func:`mgkflow.datasets.load`.
    orderings : list of str
        Names for :func:`mgkflow.reorder.reorder`.
    n_graphs : int, optional
        Graphs per dataset (default: 160 for nws/ba, all for the others).
    seed : int
        Graph i is reordered with seed ``seed + i``.
    options : dict, optional
        Per-ordering keyword options, e.g. ``{"tsp": {"time_limit": 0.1}}``.

    Returns
    -------
    list of dict
        Rows with keys dataset, ordering, graphs, nodes, octiles, octiles_per_graph, seconds
        (wall clock) and cpu_seconds (process CPU time: robust on a shared machine).
    """
    rows = []
    for name in datasets:
        graphs = _load(name, n_graphs)
        nodes = int(sum(g.n_nodes for g in graphs))
        for method in orderings:
            octiles, seconds, cpu = _measure(graphs, method, seed, (options or {}).get(method, {}))
            row = {
                "dataset": name,
                "ordering": method,
                "graphs": len(graphs),
                "nodes": nodes,
                "octiles": octiles,
                "octiles_per_graph": round(octiles / max(1, len(graphs)), 3),
                "seconds": round(seconds, 3),
                "cpu_seconds": round(cpu, 3),
            }
            rows.append(row)
            if verbose:
                print(f"  {name:9s} {method:8s} {octiles:>10,d} octiles {seconds:9.2f} s ({cpu:.2f} s CPU)", flush=True)
    return rows


def run_scaling(
    sizes: list[int], degree: float = 12.0, seed: int = 0, orderings: tuple[str, ...] = ("pbr", "rcm"),
    verbose: bool = True,
) -> list[dict[str, Any]]:
    """PBR (and reference orderings) on one 3-D random geometric graph per size: seconds and octiles."""
    from ..format.count import count_octiles
    from ..reorder import reorder

    rows = []
    for n in sizes:
        g = random_geometric_graph(n, degree=degree, seed=seed)
        row: dict[str, Any] = {"nodes": n, "edges": g.n_edges, "natural_octiles": count_octiles(g)}
        for method in orderings:
            t0, c0 = time.perf_counter(), time.process_time()
            perm = reorder(g, method=method, seed=seed)
            row[f"{method}_seconds"] = round(time.perf_counter() - t0, 3)
            row[f"{method}_cpu_seconds"] = round(time.process_time() - c0, 3)
            row[f"{method}_octiles"] = count_octiles(g, perm)
        rows.append(row)
        if verbose:
            print("  " + "  ".join(f"{k}={v}" for k, v in row.items()), flush=True)
    return rows


def _table(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "(no rows)"
    keys = list(rows[0])
    cells = [[f"{r[k]:,}" if isinstance(r[k], int) else str(r[k]) for k in keys] for r in rows]
    widths = [max(len(k), *(len(c[i]) for c in cells)) for i, k in enumerate(keys)]
    lines = ["  ".join(k.rjust(w) for k, w in zip(keys, widths))]
    lines += ["  ".join(c.rjust(w) for c, w in zip(row, widths)) for row in cells]
    return "\n".join(lines)


def _write(rows: list[dict[str, Any]], path: Path) -> None:
    write_csv(path, rows)


def main(argv: list[str] | None = None) -> int:
    """Command line entry point (``python -m mgkflow.bench reorder --help``)."""
    ap = argparse.ArgumentParser(prog="python -m mgkflow.bench reorder", description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", default="nws,ba", help="comma-separated dataset names ('' for none)")
    ap.add_argument("--orderings", default=DEFAULT_ORDERINGS, help="comma-separated ordering names")
    ap.add_argument("--n-graphs", type=int, default=None, help="graphs per dataset (default 160 / all)")
    ap.add_argument("--seed", type=int, default=0, help="graph i is reordered with seed + i")
    ap.add_argument("--tsp-time-limit", type=float, default=None, help="tsp time_limit per graph (s)")
    ap.add_argument("--scaling", action="store_true", help="also run PBR on random geometric graphs")
    ap.add_argument("--scaling-sizes", default="1000,3000,10000,30000", help="RGG node counts")
    ap.add_argument("--out", default="reports", help="directory for the CSV files ('' to skip writing)")
    args = ap.parse_args(argv)

    from ..reorder import available_methods

    orderings = [s.strip() for s in args.orderings.split(",") if s.strip()]
    unknown = [o for o in orderings if o not in available_methods()]
    if unknown:
        print(f"unknown ordering(s) {unknown}; available: {available_methods()}", file=sys.stderr)
        return 2
    options: dict[str, dict[str, Any]] = {}
    if args.tsp_time_limit is not None:
        options["tsp"] = {"time_limit": args.tsp_time_limit}
    names = [s.strip() for s in args.datasets.split(",") if s.strip()]
    out = Path(args.out) if args.out else None
    if names:
        print(f"reorder benchmark: datasets {names}, orderings {orderings}", flush=True)
        rows = run_datasets(names, orderings, n_graphs=args.n_graphs, seed=args.seed, options=options)
        print(_table(rows))
        if out is not None:
            _write(rows, out / "reorder_totals.csv")
    if args.scaling:
        sizes = [int(s) for s in args.scaling_sizes.split(",") if s.strip()]
        print(f"PBR scaling on 3-D random geometric graphs (mean degree ~12): {sizes}", flush=True)
        srows = run_scaling(sizes, seed=args.seed)
        print(_table(srows))
        if out is not None:
            _write(srows, out / "reorder_scaling.csv")
    return 0


if __name__ == "__main__":
    sys.exit(main())
