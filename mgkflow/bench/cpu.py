"""CPU benchmark: the float64 CPU backend beside GraKeL and a naive scipy CG, on labeled NWS graphs.

Run as ``python -m mgkflow.bench cpu [--n-graphs 20] [--repeats 3] [--out reports/]``.

Workload: the first ``--n-graphs`` labeled NWS graphs (``networkx.newman_watts_strogatz_graph(96, 3,
0.1, seed=i)``, node label ``label`` = degree % 3, edge label ``length`` ~ U(1, 2)), q = 0.05,
``KroneckerDelta(0.5, "label")`` on nodes and ``SquareExponential(1.0, "length")`` on edges; the
symmetric Gram matrix (N(N+1)/2 pairs). Rows:

``mgkflow-cpu``
    :class:`mgkflow.MarginalizedGraphKernel` with ``backend="cpu"`` (Jacobi PCG, rtol 1e-12).
``scipy-cg-naive``
    The same kernel: the product-graph system assembled per pair as one scipy sparse matrix
    (``sp.kron`` of the adjacency matrices, the edge kernel looked up entry by entry), solved with
    unpreconditioned :func:`scipy.sparse.linalg.cg` (rtol 1e-12). Context for the solver's cost.
``grakel-rw-labeled``
    GraKeL's ``RandomWalkLabeled`` (geometric, ``method_type="fast"``: CG with rtol 1e-6 and at most
    20 iterations) on the same graphs, node labels only (it has no edge kernel; a different kernel, so
    only its speed compares). Skipped with a printed reason when GraKeL is not installed.

Each row reports the median over ``--repeats`` runs of the whole Gram matrix, in ms per pair.
Writes ``cpu_bench.csv`` under ``--out`` and prints the table. The machine is shared: pin with
``taskset`` and ``OMP_NUM_THREADS=1`` for stable numbers.

Examples
--------
>>> main(["--n-graphs", "3", "--repeats", "1", "--out", ""])  # doctest: +SKIP
0
"""

from __future__ import annotations

import argparse
import csv
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

__all__ = ["main", "nws_graphs", "run_mgkflow", "run_naive_cg", "run_grakel", "machine_name"]

Q = 0.05
NODE_H = 0.5
EDGE_LS = 1.0


def nws_graphs(n_graphs: int) -> list[Any]:
    """The first ``n_graphs`` labeled NWS graphs (:func:`mgkflow.datasets.nws` when available)."""
    try:
        from ..datasets import nws
    except ImportError:
        nws = None
    if nws is not None:
        return nws(n_graphs=n_graphs, labeled=True)
    import networkx as nx

    from ..graph import Graph

    graphs = []
    for i in range(n_graphs):  # inline fallback with the same convention
        G = nx.newman_watts_strogatz_graph(96, 3, 0.1, seed=i)
        lengths = np.random.default_rng(i).uniform(1, 2, size=G.number_of_edges())
        for (u, v), length in zip(sorted((min(e), max(e)) for e in G.edges()), lengths):
            G.edges[u, v]["length"] = float(length)
        for v in G.nodes:
            G.nodes[v]["label"] = G.degree(v) % 3
        graphs.append(Graph.from_networkx(G, node_labels=["label"], edge_labels=["length"], title=f"nws-{i}"))
    return graphs


def _kernels() -> tuple[Any, Any]:
    from ..kernels import KroneckerDelta, SquareExponential

    return KroneckerDelta(NODE_H, "label"), SquareExponential(EDGE_LS, "length")


def _timed(fn: Callable[[], Any], repeats: int) -> tuple[list[float], Any]:
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return times, out


def run_mgkflow(graphs: list[Any], repeats: int) -> tuple[list[float], np.ndarray, dict]:
    """Gram matrix with the CPU backend; returns run times, K and the last solve's summary."""
    from ..mgk import MarginalizedGraphKernel

    nk, ek = _kernels()
    kern = MarginalizedGraphKernel(node_kernel=nk, edge_kernel=ek, q=Q, backend="cpu")
    times, K = _timed(lambda: kern(graphs), repeats)
    return times, K, kern.last_stats.summary()


def _naive_pair(g1: Any, g2: Any, nk: Any, ek: Any) -> tuple[float, int]:
    n, m = g1.n_nodes, g2.n_nodes
    A1, A2 = g1.adjacency, g2.adjacency
    L1 = sp.csr_array((g1.edge_labels["length"], A1.indices, A1.indptr), shape=(n, n)).toarray()
    L2 = sp.csr_array((g2.edge_labels["length"], A2.indices, A2.indptr), shape=(m, m)).toarray()
    W = sp.kron(A1, A2, format="coo")
    i, ip = np.divmod(W.row, m)
    j, jp = np.divmod(W.col, m)
    W.data = W.data * ek({"length": L1[i, j]}, {"length": L2[ip, jp]})
    q1, q2 = np.full(n, Q), np.full(m, Q)
    s1, s2 = g1.degree_sum(), g2.degree_sum()
    d1 = np.where(s1 > 0, s1, 1.0) / (1 - Q)  # isolated nodes: rowsum taken as 1
    d2 = np.where(s2 > 0, s2, 1.0) / (1 - Q)
    Dx = np.kron(d1, d2)
    V = nk({"label": np.repeat(g1.node_labels["label"], m)}, {"label": np.tile(g2.node_labels["label"], n)})
    M = (sp.diags_array(Dx / V) - W.tocsr()).tocsr()
    b = Dx * np.kron(q1, q2)
    iters = 0

    def count(_x: np.ndarray) -> None:
        nonlocal iters
        iters += 1

    x, info = spla.cg(M, b, rtol=1e-12, atol=0.0, maxiter=10_000, callback=count)
    if info != 0:
        raise RuntimeError(f"naive scipy CG did not converge (info={info})")
    return float(x.sum()), iters


def run_naive_cg(graphs: list[Any], repeats: int) -> tuple[list[float], np.ndarray, dict]:
    """Gram matrix with the assembled kron system and plain scipy CG (same kernel as mgkflow)."""
    nk, ek = _kernels()
    N = len(graphs)
    its: list[int] = []

    def gram() -> np.ndarray:
        its.clear()
        K = np.empty((N, N))
        for a in range(N):
            for b in range(a, N):
                K[a, b], it = _naive_pair(graphs[a], graphs[b], nk, ek)
                K[b, a] = K[a, b]
                its.append(it)
        return K

    times, K = _timed(gram, repeats)
    return times, K, {"cg_iter_median": float(np.median(its))}


def run_grakel(graphs: list[Any], repeats: int) -> tuple[list[float], np.ndarray, dict]:
    """GraKeL ``RandomWalkLabeled`` (geometric, fast) Gram matrix on the same graphs (node labels only).

    Raises ImportError when GraKeL is missing.
    """
    from grakel.kernels import RandomWalkLabeled

    data = [
        [g.adjacency.toarray(), {i: int(v) for i, v in enumerate(g.node_labels["label"])}] for g in graphs
    ]
    lamdas: list[float] = []

    def gram() -> np.ndarray:
        rw = RandomWalkLabeled(lamda=0.1, method_type="fast", kernel_type="geometric")
        K = rw.fit_transform(data)
        lamdas.append(float(getattr(rw, "_lamda", rw.lamda)))
        return np.asarray(K)

    times, K = _timed(gram, repeats)
    return times, K, {"lamda": lamdas[-1]}


def machine_name() -> str:
    """CPU model and core count, e.g. ``"Intel(R) Xeon(R) ... (2 cores)"``."""
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{model} ({os.cpu_count()} cores)"


def _row(method: str, times: list[float], pairs: int, n_graphs: int, machine: str, **extra: Any) -> dict:
    med = statistics.median(times)
    return {
        "method": method,
        "n_graphs": n_graphs,
        "pairs": pairs,
        "repeats": len(times),
        "seconds_median": round(med, 6),
        "seconds_all": " ".join(f"{t:.4f}" for t in times),
        "ms_per_pair": round(1e3 * med / pairs, 4),
        "machine": machine,
        **extra,
    }


def main(argv: list[str] | None = None) -> int:
    """Run the CPU benchmark; returns the process exit status."""
    ap = argparse.ArgumentParser(prog="python -m mgkflow.bench cpu", description=__doc__.split("\n")[0])
    ap.add_argument("--n-graphs", type=int, default=20, help="first N labeled NWS graphs (default 20)")
    ap.add_argument("--repeats", type=int, default=3, help="runs per method; the median is reported")
    ap.add_argument("--out", default="reports", help="directory for cpu_bench.csv ('' to skip writing)")
    ap.add_argument("--no-grakel", action="store_true", help="skip the GraKeL row")
    ap.add_argument("--no-naive", action="store_true", help="skip the naive scipy CG row")
    args = ap.parse_args(argv)
    if args.n_graphs < 1 or args.repeats < 1:
        ap.error("--n-graphs and --repeats must be >= 1")

    graphs = nws_graphs(args.n_graphs)
    N = len(graphs)
    pairs = N * (N + 1) // 2
    machine = machine_name()
    print(f"CPU benchmark: {N} labeled NWS graphs, {pairs} pairs, q={Q}, median of {args.repeats}; {machine}")
    rows = []

    times, K, summ = run_mgkflow(graphs, args.repeats)
    rows.append(
        _row(
            "mgkflow-cpu", times, pairs, N, machine,
            cg_iter_median=summ["cg_iter_median"], max_rel_diff_vs_mgkflow=0.0,
            note="float64 Jacobi PCG rtol 1e-12",
        )
    )  # fmt: skip

    if not args.no_naive:
        t_naive, K_naive, s_naive = run_naive_cg(graphs, args.repeats)
        rows.append(
            _row(
                "scipy-cg-naive", t_naive, pairs, N, machine,
                cg_iter_median=s_naive["cg_iter_median"],
                max_rel_diff_vs_mgkflow=float(np.max(np.abs(K_naive - K) / np.abs(K))),
                note="sp.kron system per pair, scipy cg without preconditioner, rtol 1e-12",
            )
        )  # fmt: skip

    if not args.no_grakel:
        try:
            t_gk, _K_gk, s_gk = run_grakel(graphs, args.repeats)
        except ImportError as exc:
            print(f"grakel-rw-labeled: skipped ({exc}; install with `.venv/bin/pip install grakel`)")
        else:
            rows.append(
                _row(
                    "grakel-rw-labeled", t_gk, pairs, N, machine,
                    cg_iter_median="",
                    max_rel_diff_vs_mgkflow="",
                    note=f"different kernel (node labels only, lamda={s_gk['lamda']:g}); "
                    "CG rtol 1e-6, <=20 iter",
                )
            )  # fmt: skip

    header = f"{'method':<20} {'s median':>10} {'ms/pair':>9} {'CG it':>7} {'max rel diff':>13}"
    print(header)
    print("-" * len(header))
    for r in rows:
        it = r["cg_iter_median"]
        diff = r["max_rel_diff_vs_mgkflow"]
        print(
            f"{r['method']:<20} {r['seconds_median']:>10.4f} {r['ms_per_pair']:>9.3f} "
            f"{it if it == '' else f'{it:g}':>7} {diff if diff == '' else f'{diff:.2e}':>13}"
        )
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        path = out / "cpu_bench.csv"
        with open(path, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
