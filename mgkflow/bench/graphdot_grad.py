"""GraphDot 0.8.1's derivatives, diagonal and nodal similarities, for ``mgkflow.bench.gpu_grad`` ratios.

Run on the GPU machine with GraphDot 0.8.1 importable (unpacked into ``/tmp/graphdot`` with only the
numpy-2 import fixes of ``.gpu/anchors/patch.py``)::

    PYTHONPATH=/tmp/graphdot/graphdot-0.8.1:/tmp/site:$PWD \\
        python3 -m mgkflow.bench.graphdot_grad --out $OUT

Same graphs and kernels as :mod:`mgkflow.bench.gpu_grad` (:func:`mgkflow.datasets.nws` / ``ba``, 96
nodes, labeled: KroneckerDelta(0.5) on ``label`` and SquareExponential(1.0) on ``length``;
unlabeled: Constant(1.0) for both, on a dummy attribute GraphDot needs), converted through
networkx in GraphDot's own node order, q = 0.05. Times (median of ``--reps`` calls after a
warm-up) GraphDot's Gram matrix with ``eval_gradient=True`` and without, ``diag`` of the 160
NWS-labeled graphs and ``nodal=True`` on 40 of them. Writes ``graphdot_grad.json``
(``gram`` by workload name with ``grad_pairs_per_s`` / ``value_pairs_per_s``, ``diag``,
``nodal``), after every measurement so that a later failure keeps the earlier ones.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np


def to_graphdot(graphs: list, labeled: bool) -> list:
    """GraphDot graphs of mgkflow graphs (unit weights; labeled: our ``label`` as ``l`` on nodes
    and ``length`` on edges, as in the GraphDot anchor, else one constant attribute ``c`` on each)."""
    import networkx as nx
    from graphdot import Graph as GDGraph

    out = []
    for g in graphs:
        G = nx.Graph()
        labels = np.asarray(g.node_labels["label"]) if labeled else None
        for i in range(g.n_nodes):
            G.add_node(i, **({"l": int(labels[i])} if labeled else {"c": 0}))
        A = g.adjacency.tocoo()
        lengths = np.asarray(g.edge_labels["length"]) if labeled else None
        for k, (r, c) in enumerate(zip(A.row.tolist(), A.col.tolist(), strict=True)):
            if r < c:
                G.add_edge(r, c, **({"length": float(lengths[k])} if labeled else {"c": 0.0}))
        out.append(GDGraph.from_networkx(G))
    return out


def _kernel(labeled: bool, q: float):
    from graphdot.kernel.marginalized import MarginalizedGraphKernel
    from graphdot.microkernel import Constant, KroneckerDelta, SquareExponential, TensorProduct

    if labeled:
        return MarginalizedGraphKernel(
            TensorProduct(l=KroneckerDelta(0.5)), TensorProduct(length=SquareExponential(1.0)), q=q
        )
    return MarginalizedGraphKernel(Constant(1.0), Constant(1.0), q=q)


def _median(fn, reps: int) -> tuple[float, float, object]:
    t0 = time.perf_counter()
    out = fn()
    first = time.perf_counter() - t0
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times)), first, out


def main(argv: list[str] | None = None) -> int:
    """Entry point: time GraphDot and write ``graphdot_grad.json``."""
    ap = argparse.ArgumentParser(prog="python -m mgkflow.bench.graphdot_grad", description=__doc__.split("\n")[0])
    ap.add_argument("--graphs", type=int, default=160)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--q", type=float, default=0.05)
    ap.add_argument("--nodal", type=int, default=40, help="graphs of the nodal benchmark (0: none)")
    ap.add_argument("--out", default=os.environ.get("OUT") or "reports")
    args = ap.parse_args(argv)
    import pycuda.autoinit  # noqa: F401

    from .. import datasets

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    res: dict = {"gram": {}, "q": args.q}

    def save() -> None:
        (out / "graphdot_grad.json").write_text(json.dumps(res, indent=1))

    nws_labeled = None
    for name, labeled in (("nws", True), ("ba", True), ("nws", False), ("ba", False)):
        gd = to_graphdot(getattr(datasets, name)(n_graphs=args.graphs, labeled=labeled), labeled)
        if name == "nws" and labeled:
            nws_labeled = gd
        kern = _kernel(labeled, args.q)
        N = len(gd)
        pairs = N * (N + 1) // 2
        t_val, first_val, _ = _median(lambda: kern(gd), args.reps)  # noqa: B023
        t_grad, first_grad, (_K, dK) = _median(lambda: kern(gd, eval_gradient=True), args.reps)  # noqa: B023
        wl = f"{name}-{'labeled' if labeled else 'unlabeled'} q={args.q:g}"
        res["gram"][wl] = {
            "graphs": N, "pairs": pairs, "theta": int(np.shape(dK)[-1]),
            "grad_median_s": t_grad, "grad_first_s": first_grad, "grad_pairs_per_s": pairs / t_grad,
            "value_median_s": t_val, "value_first_s": first_val, "value_pairs_per_s": pairs / t_val,
        }  # fmt: skip
        print(f"GraphDot {wl:24s} eval_gradient {pairs / t_grad:10,.0f} pairs/s  value {pairs / t_val:10,.0f} "
              f"pairs/s  (theta {np.shape(dK)[-1]})", flush=True)  # fmt: skip
        save()
    kern = _kernel(True, args.q)
    t_diag, first_diag, _ = _median(lambda: kern.diag(nws_labeled), args.reps)
    res["diag"] = {"graphs": len(nws_labeled), "median_s": t_diag, "first_s": first_diag}
    print(f"GraphDot diag nws-labeled N={len(nws_labeled)}: {1e3 * t_diag:.2f} ms", flush=True)
    save()
    if args.nodal <= 0:  # no nodal benchmark (GraphDot's nodal call fails on an empty list)
        return 0
    sub = nws_labeled[: args.nodal]
    t_nod, first_nod, Kn = _median(lambda: kern(sub, nodal=True), args.reps)
    npairs = len(sub) * (len(sub) + 1) // 2
    res["nodal"] = {"graphs": len(sub), "pairs": npairs, "median_s": t_nod, "first_s": first_nod,
                    "pairs_per_s": npairs / t_nod, "shape": list(np.shape(Kn))}  # fmt: skip
    print(f"GraphDot nodal nws-labeled N={len(sub)}: {npairs / t_nod:,.0f} pairs/s", flush=True)
    save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
