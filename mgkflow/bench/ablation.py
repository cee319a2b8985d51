"""Ablation of the GPU solver's optimizations: ``python -m mgkflow.bench ablation``.

Each step is a real code path of :class:`mgkflow.gpu.GPUBackend`, selected by option,
adding one technique to the previous step (Gram matrix of ``--n-graphs`` graphs of
each workload, median of ``--reps`` runs after a warm-up):

1. ``dense``      natural order, octile mapping, dense x dense on every octile pair,
                  256 threads/block, jobs in the pairs' order (static order);
2. ``+sparse``    sparse x sparse (set bits only) on every octile pair;
3. ``+reorder``   PBR ordering;
4. ``+adaptive``  primitive per octile pair from the map measured by ``mgkflow bench
                  primitives`` on this GPU (sparse x sparse where no map was measured);
5. ``+rowpair``   row-pair XMV (CSR rows, two outputs per lane, nodes sorted by degree
                  within tiles) in place of the octile-pair loop;
6. ``+block``     512-thread blocks sized for two resident blocks per SM (16 warps per
                  block share the pair's p vector in shared memory; occupancy);
7. ``+dynsched``  jobs handed out largest estimated cost first (persistent grid, atomic counter);
8. ``+staged``    large pairs solved by the whole device (wide path) with the staged XMV: the
                  warps of a block share staged slices of p and G1's compact octiles in shared
                  memory, G2's nonzeros in registers (steps 1-7 use the row-pair XMV there).

Compact tile storage (bitmap + compact arrays) is used by every step: the solver has no
uncompressed path. Writes ``ablation.csv`` and ``ablation.png`` (bar chart) under ``--out``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ._csv import write_csv
from .gpu import run_workload, workload_name

_SMALL = {"block": 256, "min_blocks": 1, "sort_jobs": False, "wide_xmv": "rows"}
_BLOCK = {"xmv": "rows", "block": 512, "min_blocks": 2}
STEPS = [
    ("dense", "natural", {"xmv": "octile", "primitives": "dd", **_SMALL}),
    ("+sparse", "natural", {"xmv": "octile", "primitives": "ss", **_SMALL}),
    ("+reorder", "pbr", {"xmv": "octile", "primitives": "ss", **_SMALL}),
    ("+adaptive", "pbr", {"xmv": "octile", "primitives": "auto", **_SMALL}),
    ("+rowpair", "pbr", {"xmv": "rows", **_SMALL}),
    ("+block", "pbr", {**_BLOCK, "sort_jobs": False, "wide_xmv": "rows"}),
    ("+dynsched", "pbr", {**_BLOCK, "sort_jobs": True, "wide_xmv": "rows"}),
    ("+staged", "pbr", {**_BLOCK, "sort_jobs": True, "wide_xmv": "staged"}),
]
WORKLOADS = [
    ("nws", False, 0.05), ("ba", False, 0.05), ("nws", True, 0.05), ("ba", True, 0.05),
    ("drugs", True, 0.05), ("proteins", True, 0.05),
]  # fmt: skip
#: Run by default (their pairs are large, so proteins run the wide path in every step).
DEFAULT_WORKLOADS = ("nws", "ba", "drugs", "proteins")
#: Graphs per dataset for the real sets (proteins: the smallest structures, all pairs wide).
REAL_N_GRAPHS = {"drugs": 256, "proteins": 6}


def _plot(rows: list[dict], path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("note: matplotlib missing, no chart", flush=True)
        return
    wls = list(dict.fromkeys(r["workload"] for r in rows))
    steps = list(dict.fromkeys(r["step"] for r in rows))
    fig, ax = plt.subplots(figsize=(9, 4))
    width = 0.8 / len(steps)
    for k, st in enumerate(steps):
        vals = [next(r["pairs_per_s"] for r in rows if r["workload"] == w and r["step"] == st) for w in wls]
        ax.bar([i + k * width for i in range(len(wls))], vals, width, label=st)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(wls))], wls, fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("pairs / s")
    ax.legend(fontsize=7, ncol=3)
    ax.set_title("GPU solver ablation")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m mgkflow.bench ablation``."""
    ap = argparse.ArgumentParser(prog="python -m mgkflow.bench ablation", description=__doc__.split("\n")[0])
    ap.add_argument("--n-graphs", type=int, default=64)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--out", default=os.environ.get("OUT") or "reports")
    ap.add_argument("--steps", default=None, help="comma-separated step names")
    ap.add_argument("--workloads", default=None, help="comma-separated dataset names (nws,ba,drugs,proteins)")
    args = ap.parse_args(argv)
    from ..gpu import device_available

    if not device_available():
        print("no CUDA device (or no PyCUDA): nothing to benchmark", file=sys.stderr)
        return 1
    steps = STEPS if not args.steps else [s for s in STEPS if s[0] in args.steps.split(",")]
    rows = []
    names = args.workloads.split(",") if args.workloads else DEFAULT_WORKLOADS
    wls = [w for w in WORKLOADS if w[0] in names]
    for name, labeled, q in wls:
        for step, order, kw in steps:
            n_graphs = REAL_N_GRAPHS.get(name, args.n_graphs)
            r = run_workload(name, labeled, q, n_graphs, args.reps, order, 0, dict(kw))
            rows.append(
                {
                    "workload": workload_name(name, labeled, q),
                    "step": step,
                    "order": r["order"],
                    "options": " ".join(f"{k}={v}" for k, v in kw.items()),
                    "median_s": r["median_s"],
                    "device_median_s": r["device_median_s"],
                    "pairs_per_s": r["pairs_per_s"],
                    "octiles": r["octiles"],
                    "gflops": r["gflops"],
                    "cg_iter_median": r["cg_iter_median"],
                }
            )
            print(
                f"{rows[-1]['workload']:24s} {step:10s} {r['median_s']:8.4f}s {r['pairs_per_s']:>10,.0f} pairs/s "
                f"{r['gflops']:7.1f} GFLOP/s octiles {r['octiles']}",
                flush=True,
            )
    out = Path(args.out)
    write_csv(out / "ablation.csv", rows)
    _plot(rows, out / "ablation.png")
    print(f"CSV: {out / 'ablation.csv'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
