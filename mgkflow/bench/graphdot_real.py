"""GraphDot 0.8.1 on mgkflow's real datasets, for ``mgkflow bench gpu --real`` ratios.

Run on the GPU machine with GraphDot 0.8.1 importable (here unpacked into ``/tmp/graphdot``, with
only numpy-2 import fixes applied)::

    PYTHONPATH=/tmp/graphdot/graphdot-0.8.1:/tmp/site:$PWD \\
        python3 -m mgkflow.bench.graphdot_real --drugs 1000 --out $OUT

Times GraphDot's Gram matrix of the first ``--drugs`` molecules with at least one bond
(:func:`mgkflow.bench.gpu.drug_graphs`; GraphDot rejects edgeless graphs) of :func:`mgkflow.datasets.drugs`
with the dataset's default kernels (KroneckerDelta(0.5) on ``element`` and on ``bond_order``),
of ``--molecules`` synthetic molecule-like graphs (:func:`mgkflow.bench.gpu.molecule_graphs`, same kernels),
and of the ``--proteins`` smallest protein structures (:func:`mgkflow.bench.gpu.protein_graphs`;
KroneckerDelta(0.5) on ``element``, SquareExponential(1.0) on ``distance``, 6 Å contacts),
q = 0.05, median of ``--reps`` (proteins: ``--protein-reps``) runs after a warm-up, in
GraphDot's own node order. Writes
``graphdot_real.json`` (same layout as the anchor's ``graphdot.json``: ``bench`` by workload
name, ``reference`` raw values of the first 8 graphs) so that ``mgkflow bench gpu
--against-graphdot`` can read both files.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np


def _graphdot_graphs(graphs, node_field: str, edge_field: str):
    import networkx as nx
    from graphdot import Graph as GDGraph

    out = []
    for g in graphs:
        G = nx.Graph()
        nl = np.asarray(g.node_labels[node_field])
        for i in range(g.n_nodes):
            G.add_node(i, **{node_field: int(nl[i])})
        A = g.adjacency.tocoo()
        el = np.asarray(g.edge_labels[edge_field])
        # edge labels are aligned with the CSR data; tocoo keeps that order
        for r, c, w, lab in zip(A.row, A.col, A.data, el, strict=True):
            if r < c:
                G.add_edge(int(r), int(c), w=float(w), **{edge_field: float(lab)})
        out.append(GDGraph.from_networkx(G, weight="w"))
    # one dtype per attribute across the set (GraphDot's documented fix for attributes whose
    # inferred types differ between graphs, e.g. element numbers of different ranges)
    GDGraph.unify_datatype(out, inplace=True)
    return out


def _time(kern, gd, reps: int) -> tuple[np.ndarray, float, list[float]]:
    t0 = time.perf_counter()
    K = kern(gd)
    first = time.perf_counter() - t0
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        K = kern(gd)
        times.append(time.perf_counter() - t0)
    return K, first, times


def main(argv: list[str] | None = None) -> int:
    """Entry point: time GraphDot on the drugs (and proteins) sets and write ``graphdot_real.json``."""
    ap = argparse.ArgumentParser(prog="python -m mgkflow.bench.graphdot_real", description=__doc__.split("\n")[0])
    ap.add_argument("--drugs", default="1000", help="drugs: N first bonded, 'all' bonded (0: none)")
    ap.add_argument("--proteins", type=int, default=0, help="smallest structures of the proteins set (0: none)")
    ap.add_argument("--molecules", type=int, default=0,
                    help="synthetic molecule-like graphs (mgkflow.datasets.molecules, seed 0; 0: none)")
    ap.add_argument("--molecule-reps", type=int, default=1,
                    help="timed runs on the molecules after the first (0: the first call is the measurement)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--protein-reps", type=int, default=1, help="timed runs on the proteins (each is slow)")
    ap.add_argument("--q", type=float, default=0.05)
    ap.add_argument("--out", default=os.environ.get("OUT") or "reports")
    args = ap.parse_args(argv)
    import pycuda.autoinit  # noqa: F401
    from graphdot.kernel.marginalized import MarginalizedGraphKernel
    from graphdot.microkernel import KroneckerDelta, SquareExponential, TensorProduct

    from .gpu import drug_graphs, molecule_graphs, protein_graphs

    jobs = []
    drugs = None if args.drugs == "all" else int(args.drugs)  # all: every bonded molecule
    if drugs is None or drugs:
        jobs.append(("drugs", drug_graphs(drugs), "element", "bond_order",
                     TensorProduct(bond_order=KroneckerDelta(0.5)), args.reps))  # fmt: skip
    if args.proteins:
        jobs.append(("proteins", protein_graphs(args.proteins), "element", "distance",
                     TensorProduct(distance=SquareExponential(1.0)), args.protein_reps))  # fmt: skip
    if args.molecules:
        jobs.append(("molecules", molecule_graphs(args.molecules), "element", "bond_order",
                     TensorProduct(bond_order=KroneckerDelta(0.5)), args.molecule_reps))  # fmt: skip
    res, ref = {}, {}
    for label, graphs, node_field, edge_field, edge_kernel, reps in jobs:
        gd = _graphdot_graphs(graphs, node_field, edge_field)
        kern = MarginalizedGraphKernel(TensorProduct(**{node_field: KroneckerDelta(0.5)}), edge_kernel, q=args.q)
        name = f"{label}-labeled q={args.q:g}"
        K, first, times = _time(kern, gd, reps)
        N = len(gd)
        pairs = N * (N + 1) // 2
        med = float(np.median(times)) if times else first  # reps 0: the first call (JIT compile included)
        print(f"GraphDot {name} N={N} first={first:.2f}s median={med:.4f}s pairs/s={pairs / med:,.2f}", flush=True)
        res[name] = dict(N=N, first_s=first, times_s=times, median_s=med, pairs=pairs, pairs_per_s=pairs / med)
        ref[f"{label}_labeled_q{args.q:g}"] = np.asarray(K[:8, :8]).tolist()
        out = Path(args.out)  # written after every dataset: a later failure keeps the earlier results
        out.mkdir(parents=True, exist_ok=True)
        (out / "graphdot_real.json").write_text(json.dumps(dict(bench=res, reference=ref), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
