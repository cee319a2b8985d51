"""Warp balance of the per-block solver's XMV pass, modelled on the host: ``python -m mgkflow.bench balance``.

The lane-work model of ``mgkflow/gpu/NOTES.md`` (sessions 17, 22, 23): a warp's time for a work unit
is its busiest lane's products plus a fixed cost an output (:func:`mgkflow.gpu.schedule.unit_costs`),
the pass lasts as long as its busiest warp, and the even share (the tile pairs' summed cost over the
warps; a half tile pair's cost counts its busiest lane on one output, so halves sum to more) is the
bound the schedules are measured against. For random pairs of a paper workload's labeled graphs, packed as the GPU
backend packs them (PBR order, then :func:`~mgkflow.gpu.strategies.row_pair.degree_order`), it
prints and writes (``balance.csv`` under ``--out``) the efficiency, even share over the busiest
warp's load summed over the pairs, of the schedules the kernel uses:

- ``ranges-halves``: half tile pairs cut into contiguous ranges (resident launches);
- ``optimal-halves``: the same units in the contiguous ranges of least busiest warp
  (:func:`~mgkflow.gpu.schedule.optimal_ranges`, a binary search per pair the kernel does not run): the bound
  of any schedule of contiguous ranges;
- ``ranges-tiles``: tile pairs cut into contiguous ranges (launches with P in shared memory, the
  gradient's joint pass);
- ``round-robin``: tile pairs w, w + nwarp, ... (launches with P in global memory).

No GPU is needed; the model ignores the memory system (measure with ``python -m mgkflow.bench gpu``).

Examples
--------
>>> main(["--workloads", "nws", "--graphs", "4", "--pairs", "3", "--warps", "16", "--out", ""])  # doctest: +SKIP
0
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from ..gpu.schedule import optimal_ranges, padded_degrees, round_robin_loads, schedule_ranges, unit_costs, warp_loads
from ._csv import write_csv

__all__ = ["main", "workload_degrees", "efficiencies"]

SCHEDULES = ("ranges-halves", "optimal-halves", "ranges-tiles", "round-robin")


def workload_degrees(name: str, n_graphs: int) -> list[np.ndarray]:
    """:func:`~mgkflow.gpu.schedule.padded_degrees` of the first ``n_graphs`` labeled graphs of workload
    ``name`` (``nws`` or ``ba``), in the GPU backend's packed node order."""
    from .. import datasets
    from ..gpu.strategies.row_pair import degree_order
    from ..reorder import reorder

    graphs = datasets.load(name, n_graphs=n_graphs, labeled=True)
    out = []
    for g in graphs:
        g = g.permute(reorder(g, method="pbr", seed=0))
        out.append(padded_degrees(g.permute(degree_order(g))))
    return out


def efficiencies(degrees: list[np.ndarray], n_pairs: int, nwarp: int, seed: int = 0) -> dict[str, float]:
    """Each schedule's efficiency (the tile pairs' even share over the busiest warp's load, both summed over
    the pairs) on ``n_pairs`` random pairs of ``degrees`` (:func:`workload_degrees`) with ``nwarp`` warps.

    Examples
    --------
    >>> import numpy as np
    >>> d = [np.array([8, 1, 1, 1, 1, 1, 1, 1] * 4), np.array([1] * 32)]
    >>> e = efficiencies(d, 4, 8)
    >>> sorted(e) == sorted(SCHEDULES) and all(0 < v <= 1 for v in e.values())
    True
    """
    rng = np.random.default_rng(seed)
    even = {s: 0.0 for s in SCHEDULES}
    busiest = {s: 0.0 for s in SCHEDULES}
    for _ in range(n_pairs):
        i, j = rng.integers(0, len(degrees), 2)
        halves = unit_costs(degrees[i], degrees[j], halves=True)
        tiles = unit_costs(degrees[i], degrees[j])
        loads = {
            "ranges-halves": warp_loads(halves, schedule_ranges(halves, nwarp)),
            "optimal-halves": warp_loads(halves, optimal_ranges(halves, nwarp)),
            "ranges-tiles": warp_loads(tiles, schedule_ranges(tiles, nwarp)),
            "round-robin": round_robin_loads(tiles, nwarp),
        }
        for s, ld in loads.items():
            even[s] += tiles.sum() / nwarp
            busiest[s] += ld.max()
    return {s: even[s] / busiest[s] for s in SCHEDULES}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mgkflow.bench balance", description=__doc__.split("\n\n")[0])
    ap.add_argument("--workloads", default="nws,ba", help="comma-separated paper workloads (labeled graphs)")
    ap.add_argument("--graphs", type=int, default=30, help="graphs per workload")
    ap.add_argument("--pairs", type=int, default=40, help="random pairs per workload")
    ap.add_argument("--warps", default="32,16", help="warps per block (1,024 and 512 threads)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default="reports", help="folder of balance.csv ('' : print only)")
    args = ap.parse_args(argv)
    try:
        warps = [int(w) for w in args.warps.split(",")]
    except ValueError:
        ap.error(f"--warps takes comma-separated integers, got {args.warps!r}")
    if min(warps) < 1 or args.graphs < 1 or args.pairs < 1:
        ap.error("--warps, --graphs and --pairs must be positive")
    rows = []
    for name in args.workloads.split(","):
        degrees = workload_degrees(name, args.graphs)
        for w in warps:
            eff = efficiencies(degrees, args.pairs, w, seed=args.seed)
            for s, e in eff.items():
                rows.append({"workload": name, "warps": w, "schedule": s, "efficiency": round(e, 4)})
            print(f"{name:4s} {w:3d} warps  " + "  ".join(f"{s} {e:.3f}" for s, e in eff.items()))
    if args.out:
        print(f"wrote {write_csv(Path(args.out) / 'balance.csv', rows)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
