"""Device benchmark of the kernel's derivatives, diagonal and nodal similarities (GPU backend).

Run on the GPU machine::

    PYTHONPATH=/tmp/site:$PWD python3 -m mgkflow.bench.gpu_grad --out $OUT \\
        [--against-graphdot $OUT/graphdot_grad.json] [--gram-only] [--workloads nws-labeled,ba-labeled] \\
        [--full-block 1024]

Measures, with the graphs and kernels of :mod:`mgkflow.bench.gpu`'s workloads (NWS/BA, 96 nodes,
labeled and unlabeled, PBR node order, q = 0.05):

* the Gram matrix of ``--graphs`` (160) graphs with ``eval_gradient=True`` and value-only
  (pairs/s, median of ``--reps`` calls after a warm-up; the ratio of the two times), and the
  largest normwise error of dK against the CPU oracle on the first ``--check`` graphs;
* ``diag`` of 160 NWS-labeled graphs (ms);
* the nodal similarity matrix (``nodal=True``) of 40 NWS-labeled graphs (pairs/s, N(N+1)/2 pairs);
* a θ sweep: ``eval_gradient=True`` at 50 values of θ (``clone_with_theta``) on 40 NWS-labeled
  graphs, counting the CUDA compilations (:func:`mgkflow.gpu.device.compile_count`) after the first.

With ``--against-graphdot`` (the JSON of :mod:`mgkflow.bench.graphdot_grad`, measured on the same
machine) it prints our throughput over GraphDot's. Writes ``gpu_grad.json`` to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

WORKLOADS = [("nws", True), ("ba", True), ("nws", False), ("ba", False)]


def _graphs(name: str, labeled: bool, n: int) -> list:
    from .. import datasets
    from .gpu import _order

    graphs = getattr(datasets, name)(n_graphs=n, labeled=labeled)
    graphs, _used, _dt = _order(graphs, "pbr", key=(name, n))
    return graphs


def _median_time(fn, reps: int) -> tuple[float, float, object]:
    t0 = time.perf_counter()
    out = fn()
    first = time.perf_counter() - t0
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times)), first, out


def _grad_error(graphs: list, nk, ek, q: float) -> float:
    """max over θ of (max |dK_gpu - dK_cpu|) / max |dK_cpu| on ``graphs``."""
    from ..mgk import MarginalizedGraphKernel

    _, dg = MarginalizedGraphKernel(nk, ek, q=q, backend="gpu")(graphs, eval_gradient=True)
    _, dc = MarginalizedGraphKernel(nk, ek, q=q, backend="cpu")(graphs, eval_gradient=True)
    scale = np.maximum(np.abs(dc).max(axis=(0, 1)), 1e-300)
    return float((np.abs(dg - dc).max(axis=(0, 1)) / scale).max())


def run(
    n_graphs: int, reps: int, q: float, n_check: int, n_nodal: int, n_sweep: int, backend: str = "gpu",
    workloads: list | None = None, gram_only: bool = False,
) -> dict:  # fmt: skip
    from .. import datasets
    from ..gpu import device
    from ..mgk import MarginalizedGraphKernel

    res: dict = {"gram": {}, "q": q, "backend": backend}
    for name, labeled in WORKLOADS if workloads is None else workloads:
        graphs = _graphs(name, labeled, n_graphs)
        nk, ek = datasets.default_kernels(name, labeled=labeled)
        kern = MarginalizedGraphKernel(nk, ek, q=q, backend=backend)
        N = len(graphs)
        pairs = N * (N + 1) // 2
        t_val, first_val, _ = _median_time(lambda: kern(graphs), reps)  # noqa: B023
        t_grad, first_grad, (_K, dK) = _median_time(lambda: kern(graphs, eval_gradient=True), reps)  # noqa: B023
        extra = kern.last_stats.extra if kern.last_stats is not None else {}
        err = _grad_error(graphs[:n_check], nk, ek, q) if n_check else float("nan")
        wl = f"{name}-{'labeled' if labeled else 'unlabeled'} q={q:g}"
        row = {
            "graphs": N, "pairs": pairs, "theta": int(dK.shape[-1]),
            "grad_median_s": t_grad, "grad_first_s": first_grad, "grad_pairs_per_s": pairs / t_grad,
            "value_median_s": t_val, "value_first_s": first_val, "value_pairs_per_s": pairs / t_val,
            "grad_over_value_time": t_grad / t_val, "max_normwise_err_vs_cpu": err,
            "closed_form_pairs": int(extra.get("closed_form_pairs", 0)), "cpu_pairs": int(extra.get("cpu_pairs", 0)),
            "launches": [{k: v for k, v in la.items() if k in ("pairs", "block", "blocks_per_sm", "smem")}
                         for la in extra.get("launches", [])],
        }  # fmt: skip
        res["gram"][wl] = row
        print(f"{wl:24s} grad {pairs / t_grad:12,.0f} pairs/s  value {pairs / t_val:12,.0f} pairs/s  "
              f"grad/value time {t_grad / t_val:5.2f}  dK err vs CPU {err:.2e}  "
              f"(closed form {row['closed_form_pairs']}, CPU {row['cpu_pairs']})", flush=True)  # fmt: skip
    if gram_only:
        return res

    graphs = _graphs("nws", True, n_graphs)
    nk, ek = datasets.default_kernels("nws", labeled=True)
    kern = MarginalizedGraphKernel(nk, ek, q=q, backend=backend)
    t_diag, first_diag, _ = _median_time(lambda: kern.diag(graphs), reps)
    res["diag"] = {"graphs": len(graphs), "median_s": t_diag, "first_s": first_diag}
    print(f"diag nws-labeled N={len(graphs)}: {1e3 * t_diag:.2f} ms (first {first_diag:.2f} s)", flush=True)

    sub = graphs[:n_nodal]
    t_nod, first_nod, Kn = _median_time(lambda: kern(sub, nodal=True), reps)
    npairs = len(sub) * (len(sub) + 1) // 2
    # where the time goes (last call): the backend's launches (device) and its whole solve_nodal (host_s,
    # read-back included); the rest is the kernel object's assembly of the (Σn, Σm) matrix
    be_extra = getattr(getattr(kern, "_backend_obj", None), "last_extra", None) or {}
    res["nodal"] = {"graphs": len(sub), "pairs": npairs, "median_s": t_nod, "first_s": first_nod,
                    "pairs_per_s": npairs / t_nod, "shape": list(np.shape(Kn)),
                    "backend_device_s": be_extra.get("device_s"), "backend_s": be_extra.get("host_s")}  # fmt: skip
    print(f"nodal nws-labeled N={len(sub)}: {npairs / t_nod:,.0f} pairs/s ({1e3 * t_nod:.1f} ms; backend "
          f"{1e3 * float(be_extra.get('host_s', float('nan'))):.1f} ms of which device "
          f"{1e3 * float(be_extra.get('device_s', float('nan'))):.1f} ms)", flush=True)  # fmt: skip

    sweep = graphs[:n_nodal]
    base = MarginalizedGraphKernel(nk, ek, q=q, backend=backend)
    theta0 = base.theta
    rng = np.random.default_rng(0)
    lo, hi = base.bounds[:, 0], base.bounds[:, 1]
    thetas = [np.clip(theta0 + rng.uniform(-0.5, 0.5, theta0.size), lo, hi) for _ in range(n_sweep)]
    base(sweep, eval_gradient=True)
    c0 = device.compile_count()
    t0 = time.perf_counter()
    for th in thetas:
        base.clone_with_theta(th)(sweep, eval_gradient=True)
    dt = time.perf_counter() - t0
    res["sweep"] = {"values": n_sweep, "graphs": len(sweep), "compiles_after_first": device.compile_count() - c0,
                    "total_s": dt, "theta_dims": int(theta0.size)}  # fmt: skip
    print(f"theta sweep: {n_sweep} values of {theta0.size}-dim theta on {len(sweep)} graphs in {dt:.2f} s, "
          f"{res['sweep']['compiles_after_first']} compiles after the first call", flush=True)  # fmt: skip
    return res


def compare(ours: dict, graphdot: dict) -> list[str]:
    """Lines of ratios ours / GraphDot (throughput) and GraphDot / ours (times)."""
    lines = []
    gd = graphdot.get("gram", {})
    for wl, row in ours["gram"].items():
        g = gd.get(wl)
        if not g:
            continue
        r = row["grad_pairs_per_s"] / g["grad_pairs_per_s"]
        rv = row["value_pairs_per_s"] / g["value_pairs_per_s"] if g.get("value_pairs_per_s") else float("nan")
        lines.append(f"{wl:24s} eval_gradient: ours {row['grad_pairs_per_s']:12,.0f} / GraphDot "
                     f"{g['grad_pairs_per_s']:10,.0f} = {r:6.2f}x   value-only {rv:6.2f}x")  # fmt: skip
    if "diag" in graphdot and "diag" in ours:
        a, b = ours["diag"]["median_s"], graphdot["diag"]["median_s"]
        lines.append(f"diag nws-labeled: ours {1e3 * a:.2f} ms, GraphDot {1e3 * b:.2f} ms = {b / a:.2f}x")
    if "nodal" in graphdot and "nodal" in ours:
        a, b = ours["nodal"]["pairs_per_s"], graphdot["nodal"]["pairs_per_s"]
        lines.append(f"nodal nws-labeled: ours {a:,.0f}, GraphDot {b:,.0f} pairs/s = {a / b:.2f}x")
    return lines


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m mgkflow.bench.gpu_grad``."""
    ap = argparse.ArgumentParser(prog="python -m mgkflow.bench.gpu_grad", description=__doc__.split("\n")[0])
    ap.add_argument("--graphs", type=int, default=160)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--q", type=float, default=0.05)
    ap.add_argument("--check", type=int, default=6, help="graphs whose dK is compared with the CPU (0: none)")
    ap.add_argument("--nodal", type=int, default=40, help="graphs of the nodal benchmark and the θ sweep")
    ap.add_argument("--sweep", type=int, default=50, help="θ values of the sweep")
    ap.add_argument("--backend", default="gpu", help="gpu (the benchmark) or cpu (a smoke run of the script)")
    ap.add_argument("--against-graphdot", default=None, help="graphdot_grad.json of mgkflow.bench.graphdot_grad")
    ap.add_argument("--full-block", type=int, default=None,
                    help="threads per block of the gradient launches that fill an SM's shared memory "
                    "(mgkflow.gpu.gradient.FULL_SMEM_BLOCK; 0: the backend's block)")  # fmt: skip
    ap.add_argument("--gram-only", action="store_true", help="only the Gram matrices (no diag, nodal, sweep)")
    ap.add_argument("--workloads", default=None, help="comma-separated, e.g. nws-labeled,ba-labeled (default all)")
    ap.add_argument("--out", default=os.environ.get("OUT") or "reports")
    args = ap.parse_args(argv)
    if args.full_block is not None:
        from ..gpu import gradient

        gradient.FULL_SMEM_BLOCK = int(args.full_block)
    workloads = None
    if args.workloads:
        names = {f"{n}-{'labeled' if lab else 'unlabeled'}": (n, lab) for n, lab in WORKLOADS}
        workloads = [names[w] for w in args.workloads.split(",")]
    res = run(args.graphs, args.reps, args.q, args.check, args.nodal, args.sweep, args.backend, workloads,
              args.gram_only)  # fmt: skip
    res["full_block"] = args.full_block
    if res["backend"] == "gpu":
        from ..gpu import GPUBackend

        res["device"] = GPUBackend().device_name
    if args.against_graphdot:
        gd = json.loads(Path(args.against_graphdot).read_text())
        res["graphdot"] = gd
        for line in compare(res, gd):
            print(line, flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_grad.json").write_text(json.dumps(res, indent=1, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
