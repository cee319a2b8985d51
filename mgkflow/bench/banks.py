"""Shared-memory wavefronts of the row-pair XMV's loads of P, modelled on the host: ``python -m mgkflow.bench banks``.

For random pairs of a paper workload's labeled graphs, packed as the GPU backend packs them (PBR order,
then :func:`~mgkflow.gpu.strategies.row_pair.degree_order`), it counts the warp requests and wavefronts
of the XMV's 64-bit loads of P (:func:`mgkflow.gpu.banks.load_wavefronts`; 2 per request is the least
for 32 distinct doubles) in two row layouts, and prints and writes them (``banks.csv`` under ``--out``):

- ``columns``: each row's columns ascending (the graph's CSR);
- ``spread``: the order :func:`~mgkflow.gpu.strategies.row_pair.row_arrays` gives the kernel
  (:func:`~mgkflow.gpu.strategies.row_pair.spread_order`).

No GPU is needed; ncu's shared-memory bank conflicts of the per-block kernel are what it models
(mgkflow/gpu/NOTES.md, sessions 22 and 24).

Examples
--------
>>> main(["--workloads", "nws", "--graphs", "4", "--pairs", "2", "--tile-pairs", "4", "--out", ""])  # doctest: +SKIP
0
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from ..gpu.banks import layout_rows, load_wavefronts
from ._csv import write_csv

__all__ = ["main", "workload_rows", "LAYOUTS"]

LAYOUTS = ("columns", "spread")


def workload_rows(name: str, n_graphs: int) -> dict[str, list[list[np.ndarray]]]:
    """Per layout of :data:`LAYOUTS`, the rows (columns in the kernel's walking order) of the first
    ``n_graphs`` labeled graphs of workload ``name`` (``nws`` or ``ba``), in the GPU backend's packed node order."""
    from .. import datasets
    from ..gpu.strategies.row_pair import degree_order, permute_system, row_arrays
    from ..reorder import reorder
    from ..system import prepare_graph

    graphs = datasets.load(name, n_graphs=n_graphs, labeled=True)
    nk, ek = datasets.default_kernels(name, labeled=True)
    systems = []
    for i, g in enumerate(graphs):
        s = prepare_graph(g.permute(reorder(g, method="pbr", seed=0)), i, nk, ek)
        systems.append(permute_system(s, degree_order(s.graph)))
    arrays = row_arrays(systems, [], np.float32)
    out: dict[str, list[list[np.ndarray]]] = {"columns": [], "spread": []}
    for g, s in enumerate(systems):
        adj = s.graph.adjacency
        n = adj.shape[0]
        side = 8 * (-(-n // 8))
        csr = [np.sort(adj.indices[adj.indptr[i] : adj.indptr[i + 1]]).astype(np.int64) for i in range(n)]
        out["columns"].append(csr + [np.zeros(0, np.int64)] * (side - n))
        out["spread"].append(layout_rows(arrays, g, n))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mgkflow.bench banks", description=__doc__.split("\n\n")[0])
    ap.add_argument("--workloads", default="nws,ba", help="comma-separated paper workloads (labeled graphs)")
    ap.add_argument("--graphs", type=int, default=40, help="graphs per workload")
    ap.add_argument("--pairs", type=int, default=6, help="random pairs per workload")
    ap.add_argument("--tile-pairs", type=int, default=40, help="first tile pairs of each pair (0: all)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="reports", help="folder of banks.csv ('' : print only)")
    args = ap.parse_args(argv)
    if args.graphs < 1 or args.pairs < 1 or args.tile_pairs < 0:
        ap.error("--graphs and --pairs must be positive, --tile-pairs not negative")
    cap = args.tile_pairs or None
    rows = []
    for name in args.workloads.split(","):
        layouts = workload_rows(name, args.graphs)
        rng = np.random.default_rng(args.seed)
        picks = [tuple(rng.integers(0, args.graphs, 2)) for _ in range(args.pairs)]
        line = []
        for layout in LAYOUTS:
            graphs = layouts[layout]
            req = waves = 0
            for i, j in picks:
                r, w = load_wavefronts(graphs[i], graphs[j], cap)
                req, waves = req + r, waves + w
            per = waves / req if req else 0.0
            rows.append({"workload": name, "layout": layout, "requests": req, "wavefronts": waves,
                         "wavefronts_per_request": round(per, 3)})  # fmt: skip
            line.append(f"{layout} {per:.2f}")
        print(f"{name:4s} wavefronts per request  " + "  ".join(line))
    if args.out:
        print(f"wrote {write_csv(Path(args.out) / 'banks.csv', rows)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
