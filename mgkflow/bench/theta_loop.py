"""One step of a GP fit's graph kernel, warm: ``python -m mgkflow.bench theta``.

A Gaussian-process fit with free graph-kernel hyperparameters (``MolecularGPR(fit_graph_kernel=True)``)
asks, at every optimizer step, for K and dK of its training graphs at a new θ. This suite times that
step the way a fit meets it: the same graphs, θ changed before each call, warm (compiled, packed,
uploaded); and the step a fit makes instead (``K+W·dK``: K and the gradient contracted with a weight
matrix, no N × N × H array). It reports per call the wall time, the backend's device time
(``last_extra["device_s"]``, the launches' event intervals) and the host time not overlapped by
the device (wall − device), and, with ``--profile``, the host functions that cost the most.

Graphs come from a ``property_benchmark --prepare`` file (``--prepared``, no RDKit needed) or are
featurized from the shipped data (RDKit). Writes ``theta_loop.csv`` under ``--out``.

Examples
--------
    python -m mgkflow.bench theta --prepared prepared.pkl.gz --dataset freesolv --n 514 --backend gpu
"""

from __future__ import annotations

import argparse
import cProfile
import gzip
import io
import pickle
import pstats
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["main", "time_steps"]


def _graphs(prepared: Path | None, dataset: str, n: int) -> list:
    if prepared is not None:
        with gzip.open(prepared, "rb") as fh:
            sets = {d["name"]: d for d in pickle.load(fh)}
        if dataset not in sets:
            raise SystemExit(f"{prepared} holds no set {dataset!r} (it has {', '.join(sets)})")
        graphs = sets[dataset]["graphs"]
    else:
        from mgkflow.examples.property_benchmark import prepare

        graphs = prepare(dataset).graphs
    return list(graphs[:n])


def time_steps(
    kern: Any, graphs: list, reps: int, gradient: bool = True, profile: bool = False, contract: bool = False
) -> tuple[list, str]:
    """Time ``reps`` warm calls of ``kern(graphs, eval_gradient=gradient)``, θ moved before each.

    Every hyperparameter (q included) moves before each call, as an optimizer's step moves them.
    With ``contract``, a call is what a Gaussian process's fit asks instead (K and the gradient
    contracted with one weight matrix, :meth:`~mgkflow.MarginalizedGraphKernel.gram_contraction`).
    Returns one dict per call (wall, device and host seconds) and the profile's text ("" without
    ``profile``). The first, cold call (compile, pack, upload) is made and not counted.
    """
    W = np.random.default_rng(0).normal(size=(len(graphs), len(graphs)))

    def call() -> None:
        if contract:
            kern.gram_contraction(graphs)[1](W)
        else:
            kern(graphs, eval_gradient=gradient)

    call()
    rows, prof = [], cProfile.Profile() if profile else None
    theta0 = kern.theta.copy()
    for r in range(reps):
        theta = theta0 + 1e-3 * (r + 1)  # every hyperparameter moves, as in an optimizer's step
        kern.theta = theta
        if prof is not None:
            prof.enable()
        t0 = time.perf_counter()
        call()
        wall = time.perf_counter() - t0
        if prof is not None:
            prof.disable()
        extra = getattr(getattr(kern, "_backend_obj", None), "last_extra", None) or {}
        device = float(extra.get("device_s", np.nan))
        rows.append({"wall_s": wall, "device_s": device, "host_s": wall - device if np.isfinite(device) else np.nan})
    kern.theta = theta0
    text = ""
    if prof is not None:
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(25)
        text = buf.getvalue()
    return rows, text


def _median(values: list[float]) -> float:
    finite = [v for v in values if np.isfinite(v)]
    return float(np.median(finite)) if finite else float("nan")


def _kernel(view: str, free: bool, backend: str) -> Any:
    from mgkflow.learn.molecular import DEFAULT_VIEWS, _deltas
    from mgkflow.mgk import MarginalizedGraphKernel

    atom, bond = DEFAULT_VIEWS[0 if view == "coarse" else 1]
    bounds = (0.05, 0.95) if free else "fixed"
    return MarginalizedGraphKernel(
        _deltas(atom, 0.5, bounds),
        _deltas(bond, 0.5, bounds),
        q=0.2,
        q_bounds=(0.01, 0.9) if free else "fixed",
        normalize=True,
        backend=backend,
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mgkflow.bench theta", description=__doc__.split("\n")[0])
    ap.add_argument("--prepared", type=Path, help="a property_benchmark --prepare file (else featurize with RDKit)")
    ap.add_argument("--dataset", default="freesolv")
    ap.add_argument("--n", type=int, default=514, help="graphs (a FreeSolv training fold has 514)")
    ap.add_argument("--backend", default="auto")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--views", default="coarse,fine", help="which default views to time (coarse, fine)")
    ap.add_argument("--profile", action="store_true", help="cProfile of the timed gradient calls (top 25)")
    ap.add_argument("--out", type=Path, default=Path("reports/bench"))
    args = ap.parse_args(argv)
    graphs = _graphs(args.prepared, args.dataset, args.n)
    rows = []
    for view in args.views.split(","):
        for what, free, gradient in (("K", False, False), ("K+dK", True, True), ("K+W·dK", True, True)):
            kern = _kernel(view, free, args.backend)
            calls, text = time_steps(kern, graphs, args.reps, gradient, args.profile and gradient, what == "K+W·dK")
            med = {k: _median([c[k] for c in calls]) for k in calls[0]}
            rows.append({"dataset": args.dataset, "graphs": len(graphs), "view": view, "what": what,
                         "free_theta": int(kern.theta.size), "reps": args.reps, **med,
                         "wall_over_device": med["wall_s"] / med["device_s"]})  # fmt: skip
            ms = {k: v * 1e3 for k, v in med.items()}
            head = f"{args.dataset} {len(graphs)} {view:6s} {what:5s} {kern.theta.size:2d} θ"
            print(f"{head}: wall {ms['wall_s']:8.1f} ms"
                  f"  device {ms['device_s']:8.1f} ms  host {ms['host_s']:8.1f} ms", flush=True)  # fmt: skip
            if text:
                print(text, flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(args.out / "theta_loop.csv", index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
