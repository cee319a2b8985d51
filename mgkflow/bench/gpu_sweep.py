"""Hyperparameter sweep on the GPU: compiles and time per evaluation (one device call).

``python -m mgkflow.bench.gpu_sweep --out DIR`` (or ``python path/to/gpu_sweep.py`` with
``PYTHONPATH`` pointing at ANY mgkflow checkout: the script imports only public names that
older versions have, so the same file measures an old and a new tree side by side).

On BA labeled (160 graphs, PBR order, ``KroneckerDelta(0.5, "label")`` nodes and
``SquareExponential(l, "length")`` edges) it evaluates the Gram matrix once at l = 1,
q = 0.05 (compile + pack), then ``--warm`` more times (the warm time: median), then 20 new
values, one call each: 10 edge length scales at q = 0.05 and 10 stop probabilities at l = 1,
with the same :class:`~mgkflow.MarginalizedGraphKernel` object (its kernel and q changed in
place, as a hyperparameter optimizer would). Every call to ``pycuda.compiler.compile``
is counted (the CUDA disk cache is a fresh folder unless ``--keep-cache``, so an old tree's
per-value compiles are real ones). Writes ``gpu_sweep.csv`` (one row per evaluation) and
``gpu_sweep.json`` (summary: compiles during the sweep, warm time, per-evaluation ratio to
it) to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

from ._csv import write_csv

if __name__ == "__main__" and sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
    sys.path.pop(0)  # run by path: import mgkflow from PYTHONPATH, not this folder's siblings

import numpy as np  # noqa: E402

#: Edge length scales and stop probabilities of the sweep (10 each).
LENGTH_SCALES = tuple(float(v) for v in np.geomspace(0.5, 2.0, 10))
STOP_PROBABILITIES = tuple(float(v) for v in np.geomspace(0.01, 0.2, 10))


def _count_compiles() -> dict:
    """Wrap ``pycuda.compiler.compile`` so that every call is counted (and timed): ``SourceModule``
    calls it (older trees), and so does mgkflow's concurrent build, from several threads at once
    (``s`` then sums the compiles' own times, not wall time). Without PyCUDA nothing is compiled
    and the counts stay 0."""
    box = {"n": 0, "s": 0.0}
    try:
        import pycuda.compiler as compiler
    except ImportError:
        return box
    real = compiler.compile
    lock = threading.Lock()

    def counted(*a, **kw):
        t0 = time.perf_counter()
        try:
            return real(*a, **kw)
        finally:
            with lock:
                box["n"] += 1
                box["s"] += time.perf_counter() - t0

    compiler.compile = counted
    return box


def sweep(
    n_graphs: int = 160, warm: int = 3, order: str = "pbr", dataset: str = "ba", backend: str = "gpu"
) -> tuple[list[dict], dict]:
    """Run the sweep (see the module docstring; ``backend="cpu"`` only checks the procedure);
    return (rows, summary)."""
    import mgkflow
    from mgkflow import datasets
    from mgkflow.kernels import SquareExponential

    try:
        from mgkflow.bench.gpu import _order

        loaded = getattr(datasets, dataset)(n_graphs=n_graphs, labeled=True)
        graphs, used, _t = _order(loaded, order, (dataset, n_graphs))
    except Exception as exc:  # noqa: BLE001 - any tree: fall back to the natural order
        print(f"note: ordering {order!r} not applied ({exc})", flush=True)
        graphs, used = getattr(datasets, dataset)(n_graphs=n_graphs, labeled=True), "natural"
    nk, ek = datasets.default_kernels(dataset, labeled=True)
    field = ek.fields[0]
    box = _count_compiles()
    kern = mgkflow.MarginalizedGraphKernel(nk, SquareExponential(1.0, field), q=0.05, backend=backend)
    rows: list[dict] = []

    def evaluate(what: str, ls: float, q: float) -> dict:
        kern.edge_kernel = SquareExponential(ls, field)
        kern.q = q
        c0, s0 = box["n"], box["s"]
        t0 = time.perf_counter()
        K = kern(graphs)
        dt = time.perf_counter() - t0
        extra = kern.last_stats.extra if kern.last_stats is not None else {}
        row = {
            "what": what, "length_scale": ls, "q": q, "seconds": dt, "compiles": box["n"] - c0,
            "compile_s": box["s"] - s0, "device_s": extra.get("device_s", float("nan")),
            "pack_s": extra.get("pack_s", float("nan")), "trace": float(np.trace(K)),
            "cg_iter_median": float(np.median(kern.last_stats.iterations)),
        }  # fmt: skip
        rows.append(row)
        print(f"{what:6s} l={ls:.4g} q={q:.4g}: {dt:.4f} s, {row['compiles']} compiles "
              f"({row['compile_s']:.2f} s), device {row['device_s']:.4f} s", flush=True)  # fmt: skip
        return row

    evaluate("first", 1.0, 0.05)
    warm_rows = [evaluate("warm", 1.0, 0.05) for _ in range(max(1, warm))]
    compiles_before = box["n"]
    for ls in LENGTH_SCALES:
        evaluate("ls", ls, 0.05)
    for q in STOP_PROBABILITIES:
        evaluate("q", 1.0, q)
    warm_s = float(np.median([r["seconds"] for r in warm_rows]))
    sweep_rows = [r for r in rows if r["what"] in ("ls", "q")]
    ratios = [r["seconds"] / warm_s for r in sweep_rows]
    summary = {
        "mgkflow": os.path.dirname(mgkflow.__file__),
        "graphs": len(graphs),
        "order": used,
        "evaluations": len(sweep_rows),
        "compiles_first_call": rows[0]["compiles"],
        "compiles_during_sweep": box["n"] - compiles_before,
        "compiles_total": box["n"],
        "compile_s_total": box["s"],
        "warm_s": warm_s,
        "sweep_median_s": float(np.median([r["seconds"] for r in sweep_rows])),
        "ratio_to_warm_median": float(np.median(ratios)),
        "ratio_to_warm_max": float(np.max(ratios)),
        "ratio_to_warm_max_ls": float(np.max(ratios[: len(LENGTH_SCALES)])),
        "ratio_to_warm_max_q": float(np.max(ratios[len(LENGTH_SCALES) :])),
        "gpu": (kern.last_stats.extra or {}).get("device", ""),
    }
    return rows, summary


def main(argv: list[str] | None = None) -> int:
    """Entry point (see the module docstring)."""
    ap = argparse.ArgumentParser(prog="gpu_sweep", description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.environ.get("OUT") or "reports")
    ap.add_argument("--n-graphs", type=int, default=160)
    ap.add_argument("--warm", type=int, default=3, help="warm evaluations at the first value (median)")
    ap.add_argument("--order", default="pbr")
    ap.add_argument("--tag", default="", help="suffix of the output files (e.g. old / new)")
    ap.add_argument("--keep-cache", action="store_true", help="use the usual CUDA disk cache, not a fresh one")
    args = ap.parse_args(argv)
    if not args.keep_cache:
        os.environ["MGKFLOW_CUDA_CACHE"] = tempfile.mkdtemp(prefix="mgkflow-sweep-cache-")
    try:
        import pycuda.driver  # noqa: F401
    except Exception as exc:  # noqa: BLE001
        print(f"no PyCUDA ({exc}): nothing to measure", file=sys.stderr)
        return 1
    rows, summary = sweep(args.n_graphs, args.warm, args.order)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tag = f"_{args.tag}" if args.tag else ""
    write_csv(out / f"gpu_sweep{tag}.csv", rows)
    (out / f"gpu_sweep{tag}.json").write_text(json.dumps(summary, indent=2))
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
