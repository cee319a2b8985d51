"""Calibrate the wide-path strategies' cost models and check the chooser: ``python -m
mgkflow.bench.gpu_calibrate [--out DIR] [--orders rcm,pbr,...]``.

Every registered wide strategy (:func:`mgkflow.gpu.strategies.available`) solves every pair
of two sets, one pair per call with the whole device (``GPUBackend(wide=True,
wide_xmv=name)``), median device time of ``--reps`` solves after a warm-up:

* **geometric**: 3-D random geometric graphs (points uniform in a cube, ~8 neighbours per
  node, 3 random node labels, edge label ``length`` = distance in units where the cutoff is
  4), ``KroneckerDelta(0.5, "label")`` x ``SquareExponential(1.0, "length")``, q = 0.05;
  fitting pairs of 300 to 3,000 nodes and the three evaluation pairs 1,000 x 1,200,
  600 x 2,000 and 2,500 x 3,000 (other seeds);
* **proteins**: pairs of heavy-atom contact graphs (:func:`mgkflow.datasets.proteins`, 6 Å,
  the dataset's kernels, q = 0.05) from ``--protein-sizes`` target atom counts.

The cost model of each strategy (seconds per CG iteration, linear in the strategy's
features, :func:`mgkflow.gpu.strategies.cost.fit`) is fitted on the fitting pairs of both
sets and stored for this GPU model (``auto`` uses it from then on) and in ``--out``. For
each set's evaluation pairs the report gives each strategy's total, the best single
strategy's, the chooser's (the strategy of least predicted cost per pair, its measured
time) and the oracle's (the fastest per pair). With ``--orders`` the evaluation pairs are
also measured per node ordering (names from :func:`mgkflow.reorder.available_methods`).
Writes ``calibrate.csv`` (one row per pair, strategy and ordering), ``calibrate.json``
(models and the summary) to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from ._csv import write_csv

#: (n1, n2, seed) of the geometric fitting pairs and of the evaluation pairs (the issue's sizes).
GEOMETRIC_FIT = [(300, 400, 11), (600, 800, 12), (800, 2400, 13), (1500, 1800, 14), (2000, 2000, 15),
                 (3000, 3000, 16), (1200, 600, 17), (2500, 1000, 18)]  # fmt: skip
GEOMETRIC_EVAL = [(1000, 1200, 1), (600, 2000, 2), (2500, 3000, 3)]
#: Target heavy-atom counts of the protein pairs (the two structures closest to each).
PROTEIN_SIZES = (300, 600, 900, 1200, 1600, 2000)


def geometric_graph(n: int, seed: int, neighbours: float = 8.0, cutoff: float = 4.0):
    """A 3-D random geometric graph of ``n`` nodes in a cube with ~``neighbours`` neighbours per
    node on average (the radius widened for the faces' deficit), unit weights, node label
    ``label`` in {0, 1, 2} and edge label ``length`` (the distance, the cutoff being ``cutoff``)."""
    import scipy.sparse as sp
    from scipy.spatial import cKDTree

    from ..graph import Graph

    rng = np.random.default_rng(seed)
    unit = rng.random((n, 3))
    radius = (3.0 * neighbours / (4.0 * np.pi * n)) ** (1.0 / 3.0)
    tree = cKDTree(unit)
    for _ in range(2):  # widen the radius once for the nodes near the faces (fewer neighbours)
        mean = 2.0 * len(tree.query_pairs(radius)) / n
        radius *= (neighbours / max(mean, 1e-9)) ** (1.0 / 3.0)
    pts = unit * (cutoff / radius)  # units in which the cutoff is `cutoff`
    pairs = np.array(sorted(cKDTree(pts).query_pairs(cutoff)), dtype=np.int64).reshape(-1, 2)
    i, j = np.concatenate([pairs[:, 0], pairs[:, 1]]), np.concatenate([pairs[:, 1], pairs[:, 0]])
    dist = np.linalg.norm(pts[i] - pts[j], axis=1)
    A = sp.csr_array((np.ones(i.size), (i, j)), shape=(n, n))
    L = sp.csr_array((dist, (i, j)), shape=(n, n))
    return Graph(A, node_labels={"label": rng.integers(0, 3, n)}, edge_labels={"length": L}, coords=pts,
                 title=f"rgg3d-{n}-{seed}")  # fmt: skip


def _protein_pairs(sizes, cutoff: float = 6.0) -> list[tuple]:
    from .. import datasets

    prots = datasets.proteins(cutoff=cutoff)
    n = np.array([g.n_nodes for g in prots])
    out = []
    for target in sizes:
        a, b = np.argsort(np.abs(n - target), kind="stable")[:2]
        out.append((prots[a], prots[b]))
    return out


def _ordered(graphs, method: str):
    from ..reorder import reorder

    return [g.permute(reorder(g, method=method, seed=0)) for g in graphs]


def _measure(g1, g2, nk, ek, q: float, strategy: str, reps: int) -> dict:
    """Median device seconds of one pair with one wide strategy, and the strategy's features."""
    from ..gpu import GPUBackend
    from ..system import prepare_graph

    xs = [prepare_graph(g1, 0, nk, ek, q=q)]
    ys = [prepare_graph(g2, 0, nk, ek, q=q)]
    be = GPUBackend(wide=True, wide_xmv=strategy)
    try:
        be.solve(xs, ys, [(0, 0)], nk, ek)  # compile, pack, tables
    except ValueError as exc:  # the strategy does not apply to this pair
        return {"error": str(exc)}
    dev, wall = [], []
    for _ in range(reps):
        t0 = time.perf_counter()
        vals, its, _res, conv = be.solve(xs, ys, [(0, 0)], nk, ek)
        wall.append(time.perf_counter() - t0)
        dev.append(be.last_extra["device_s"])
    w = be.last_extra["wide"][0]
    it = int(its[0])
    return {
        "device_s": float(np.median(dev)), "wall_s": float(np.median(wall)), "iterations": it,
        "seconds": float(np.median(dev)) / max(it, 1), "value": float(vals[0]), "converged": bool(conv[0]),
        "features": json.dumps(w.get("features", {})), **{f"f_{k}": v for k, v in w.get("features", {}).items()},
    }  # fmt: skip


def run(args) -> tuple[list[dict], dict]:
    """Measure, fit, evaluate (see the module docstring)."""
    from .. import datasets
    from ..gpu import device, strategies
    from ..gpu.strategies.cost import fit, save_models
    from ..kernels import KroneckerDelta, SquareExponential

    names = strategies.available("wide")
    rows: list[dict] = []
    q = 0.05
    geo_k = (KroneckerDelta(0.5, "label"), SquareExponential(1.0, "length"))
    prot_k = datasets.default_kernels("proteins")
    jobs = []  # (set, role, g1, g2, kernels)
    for n1, n2, seed in GEOMETRIC_FIT:
        jobs.append(("geometric", "fit", geometric_graph(n1, 100 + seed), geometric_graph(n2, 200 + seed), geo_k))
    for n1, n2, seed in GEOMETRIC_EVAL:
        jobs.append(("geometric", "eval", geometric_graph(n1, seed), geometric_graph(n2, 50 + seed), geo_k))
    ppairs = _protein_pairs(args.protein_sizes)
    for k, (a, b) in enumerate(ppairs):  # every other protein pair fits, the rest evaluate
        jobs.append(("proteins", "fit" if k % 2 == 0 else "eval", a, b, prot_k))
    orders = [o for o in args.orders.split(",") if o] if args.orders else []
    for set_name, role, a, b, (nk, ek) in jobs:
        for order in [args.order] + [o for o in orders if o != args.order and role == "eval"]:
            t0 = time.perf_counter()
            g1, g2 = _ordered([a, b], order)
            t_order = time.perf_counter() - t0
            for name in names:
                r = {"set": set_name, "role": role, "pair": f"{a.title} x {b.title}", "n1": g1.n_nodes,
                     "n2": g2.n_nodes, "nnz1": g1.adjacency.nnz, "nnz2": g2.adjacency.nnz, "order": order,
                     "order_s": t_order, "strategy": name, **_measure(g1, g2, nk, ek, q, name, args.reps)}  # fmt: skip
                rows.append(r)
                print(f"{set_name:9s} {role:4s} {r['pair']:28s} {order:8s} {name:9s} "
                      + (f"{r['device_s'] * 1e3:9.2f} ms, {r['iterations']} it" if "device_s" in r
                         else f"n/a ({r['error']})"), flush=True)  # fmt: skip
    base = [r for r in rows if r["order"] == args.order and "device_s" in r]
    models = {}
    for name in names:
        s = strategies.get(name)
        fit_rows = [{**{f: r[f"f_{f}"] for f in s.feature_names}, "seconds": r["seconds"]}
                    for r in base if r["strategy"] == name and r["role"] == "fit"]  # fmt: skip
        models[name] = fit(name, s.feature_names, fit_rows)
    dev_name = device.device_limits().name
    saved = [str(save_models(models, dev_name))] if not args.no_save else []
    saved.append(str(save_models(models, dev_name, folder=Path(args.out))))
    summary = {"device": dev_name, "order": args.order, "models": {k: vars(m) for k, m in models.items()},
               "saved": saved, "sets": {}}  # fmt: skip
    for set_name in ("geometric", "proteins"):
        for role in ("eval", "fit"):
            summary["sets"][f"{set_name}/{role}"] = _evaluate(base, set_name, role, names, models)
    if orders:
        summary["orders"] = {
            f"{o}/{n}": float(sum(r["device_s"] for r in rows if r["order"] == o and r["strategy"] == n
                                  and r["role"] == "eval" and "device_s" in r))
            for o in [args.order, *orders] for n in names
        }  # fmt: skip
    return rows, summary


def _evaluate(rows: list[dict], set_name: str, role: str, names: list[str], models: dict) -> dict:
    """Totals over the pairs of one set: per strategy, best single, chooser, oracle."""
    from ..gpu import strategies

    by_pair: dict[str, dict[str, dict]] = {}
    for r in rows:
        if r["set"] == set_name and r["role"] == role:
            by_pair.setdefault(r["pair"], {})[r["strategy"]] = r
    pairs = {p: d for p, d in by_pair.items() if all(n in d for n in names)}
    if not pairs:
        return {}
    total = {n: float(sum(d[n]["device_s"] for d in pairs.values())) for n in names}
    chooser = oracle = 0.0
    picks = {}
    for p, d in pairs.items():
        pred = {n: models[n].predict({f: d[n][f"f_{f}"] for f in strategies.get(n).feature_names}) for n in names}
        pick = min(names, key=lambda n: pred[n])
        picks[p] = pick
        chooser += d[pick]["device_s"]
        oracle += min(d[n]["device_s"] for n in names)
    best = min(total, key=total.get)
    return {"pairs": len(pairs), "total_s": total, "best_single": best, "best_single_s": total[best],
            "chooser_s": chooser, "oracle_s": oracle, "chooser_over_best_single": chooser / total[best],
            "picks": picks}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    """Entry point (see the module docstring)."""
    ap = argparse.ArgumentParser(prog="python -m mgkflow.bench.gpu_calibrate", description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.environ.get("OUT") or "reports")
    ap.add_argument("--reps", type=int, default=3, help="solves per pair and strategy after a warm-up (median)")
    ap.add_argument("--order", default="rcm", help="node ordering of the fit (mgkflow.reorder.available_methods())")
    ap.add_argument("--orders", default="", help="comma-separated orderings also measured on the evaluation pairs")
    ap.add_argument("--protein-sizes", type=lambda s: [int(v) for v in s.split(",")], default=list(PROTEIN_SIZES))
    ap.add_argument("--no-save", action="store_true", help="do not store the models in the user cache")
    args = ap.parse_args(argv)
    from ..reorder import available_methods

    bad = [o for o in [args.order, *args.orders.split(",")] if o and o not in available_methods()]
    if bad:
        ap.error(f"unknown ordering(s) {bad}; available: {available_methods()}")
    from ..gpu import device_available

    if not device_available():
        print("no CUDA device (or no PyCUDA): nothing to calibrate", file=sys.stderr)
        return 1
    rows, summary = run(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    fields = sorted({k for r in rows for k in r}, key=lambda k: (k.startswith("f_"), k))
    write_csv(out / "calibrate.csv", rows, fields)
    (out / "calibrate.json").write_text(json.dumps(summary, indent=2, default=str))
    print(json.dumps({k: v for k, v in summary["sets"].items()}, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
