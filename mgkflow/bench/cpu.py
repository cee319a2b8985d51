"""CPU benchmark: the numba CPU backend (1 core, all cores) beside the exact scipy backend, a naive
scipy CG and GraKeL, on labeled NWS graphs; optionally large single pairs.

Run as ``python -m mgkflow.bench cpu [--n-graphs 20] [--repeats 3] [--out reports/] [--large]``.

Workload: the first ``--n-graphs`` labeled NWS graphs (``networkx.newman_watts_strogatz_graph(96, 3,
0.1, seed=i)``, node label ``label`` = degree % 3, edge label ``length`` ~ U(1, 2)), q = 0.05,
``KroneckerDelta(0.5, "label")`` on nodes and ``SquareExponential(1.0, "length")`` on edges; the
symmetric Gram matrix (N(N+1)/2 pairs). Rows:

``numba-cpu-1t`` / ``numba-cpu-<N>t``
    :class:`mgkflow.backends.cpu.NumbaCPUBackend` (float64 Jacobi PCG, rtol 1e-12) on one thread and
    on all N cores. Its first call (JIT compile, or loading numba's on-disk cache) is timed apart
    as ``first_call_s`` and not counted in the repeats.
``scipy-exact``
    :class:`mgkflow.backends.exact.ExactBackend`, the exact scipy backend (the test oracle; sparse LU up to
    2,500 unknowns, scipy-assembled Jacobi PCG above).
``scipy-cg-naive``
    The same kernel: the product-graph system assembled per pair as one scipy sparse matrix
    (``sp.kron`` of the adjacency matrices, the edge kernel looked up entry by entry), solved with
    unpreconditioned :func:`scipy.sparse.linalg.cg` (rtol 1e-12). Context for the solver's cost.
``grakel-rw-labeled``
    GraKeL's ``RandomWalkLabeled`` (geometric, ``method_type="fast"``: CG with rtol 1e-6 and at most
    20 iterations) on the same graphs, node labels only (it has no edge kernel; a different kernel, so
    only its speed compares). Skipped with a printed reason when GraKeL is not installed.

Every method runs ``--repeats`` times on the whole Gram matrix (graph preparation included);
``ms_per_pair`` is the fastest run (the machine may be shared: the minimum is the least disturbed),
``seconds_median`` and ``seconds_all`` show the spread. Writes ``cpu_bench.csv`` under ``--out``.

``--large`` adds single pairs, each solved in a fresh process by the numba backend on all cores
(``seconds`` of ``solve``; ``peak_rss_mb`` the process's peak resident memory during the solve,
``base_rss_mb`` its resident memory before): the two smallest bundled proteins (heavy-atom contact graphs at 6 Å,
``KroneckerDelta(0.5, "element")`` / ``SquareExponential(1.0, "distance")``) with the default cache
budget (their 1.1e8 edge-pair products do not fit it: matrix-free) and with a 1 GiB budget (cached),
and two unlabeled NWS graphs of ``--large-n`` nodes
(10,000) under ``Constant(1.0)`` kernels. Written to ``cpu_large.csv``.

Examples
--------
>>> main(["--n-graphs", "3", "--repeats", "1", "--out", ""])  # doctest: +SKIP
0
"""

from __future__ import annotations

import argparse
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

from ._csv import write_csv

__all__ = [
    "main",
    "nws_graphs",
    "run_backend",
    "run_mgkflow",
    "run_exact",
    "run_naive_cg",
    "run_grakel",
    "run_large_pair",
    "machine_name",
]

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


def _systems(graphs: list[Any], nk: Any, ek: Any) -> list[Any]:
    from ..system import prepare_graph

    return [prepare_graph(g, i, nk, ek, q=Q) for i, g in enumerate(graphs)]


def _gram(backend: Any, graphs: list[Any], nk: Any, ek: Any) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric Gram matrix through ``backend.solve`` (as ``MarginalizedGraphKernel`` does)."""
    xs = _systems(graphs, nk, ek)
    N = len(xs)
    iu, ju = np.triu_indices(N)
    vals, its, _res, conv = backend.solve(xs, xs, np.stack([iu, ju], axis=1), nk, ek)
    if not conv.all():
        raise RuntimeError(f"{backend.name}: {int((~conv).sum())} pairs did not converge")
    K = np.empty((N, N))
    K[iu, ju] = vals
    K[ju, iu] = vals
    return K, its


def run_backend(graphs: list[Any], backend: Any, repeats: int) -> tuple[list[float], np.ndarray, dict]:
    """Gram matrix with a CPU backend object; returns run times, K and a summary
    (median CG iterations, seconds of a first untimed call)."""
    nk, ek = _kernels()
    t0 = time.perf_counter()
    _gram(backend, graphs[:2], nk, ek)  # first call: JIT compile or load of the on-disk cache
    first = time.perf_counter() - t0
    its: list[np.ndarray] = []

    def run() -> np.ndarray:
        K, it = _gram(backend, graphs, nk, ek)
        its.append(it)
        return K

    times, K = _timed(run, repeats)
    return times, K, {"cg_iter_median": float(np.median(its[-1])), "first_call_s": round(first, 3)}


def run_mgkflow(graphs: list[Any], repeats: int, threads: int | None = None) -> tuple[list[float], np.ndarray, dict]:
    """Gram matrix with :class:`mgkflow.backends.cpu.NumbaCPUBackend` on ``threads`` threads (default all cores)."""
    from ..backends.cpu import NumbaCPUBackend

    return run_backend(graphs, NumbaCPUBackend(threads=threads), repeats)


def run_exact(graphs: list[Any], repeats: int) -> tuple[list[float], np.ndarray, dict]:
    """Gram matrix with the exact scipy backend :class:`mgkflow.backends.exact.ExactBackend`."""
    from ..backends.exact import ExactBackend

    return run_backend(graphs, ExactBackend(), repeats)


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

    data = [[g.adjacency.toarray(), {i: int(v) for i, v in enumerate(g.node_labels["label"])}] for g in graphs]
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
    return {
        "method": method,
        "n_graphs": n_graphs,
        "pairs": pairs,
        "repeats": len(times),
        "seconds_min": round(min(times), 6),
        "seconds_median": round(statistics.median(times), 6),
        "seconds_all": " ".join(f"{t:.4f}" for t in times),
        "ms_per_pair": round(1e3 * min(times) / pairs, 4),
        "machine": machine,
        **extra,
    }


def run_large_pair(case: str, large_n: int = 10_000, cache_bytes: int | None = None) -> dict:
    """Solve one large pair with the numba backend on all cores (meant for a fresh process).

    ``case`` is ``"proteins"`` (the two smallest bundled proteins, 6 Å) or ``"unlabeled"`` (two
    unlabeled NWS graphs of ``large_n`` nodes, ``Constant(1.0)`` kernels). Returns seconds, CG
    iterations, the value, the resident memory before and at the peak (MB) and the product mode.
    """
    from ..backends.cpu import DEFAULT_CACHE_BYTES, NumbaCPUBackend
    from ..datasets import default_kernels, nws, proteins
    from ..kernels import Constant

    if case == "proteins":
        graphs = sorted(proteins(cutoff=6.0), key=lambda g: g.n_nodes)[:2]
        nk, ek = default_kernels("proteins")
    elif case == "unlabeled":
        graphs = nws(n_graphs=2, n=large_n)
        nk = ek = Constant(1.0)
    else:
        raise ValueError(f"unknown case {case!r}")
    from ..system import prepare_graph

    xs = [prepare_graph(g, i, nk, ek, q=Q) for i, g in enumerate(graphs)]
    be = NumbaCPUBackend(cache_bytes=DEFAULT_CACHE_BYTES if cache_bytes is None else cache_bytes)
    base = _reset_peak_rss()
    t0 = time.perf_counter()
    vals, its, res, conv = be.solve(xs, xs, np.array([[0, 1]]), nk, ek)
    seconds = time.perf_counter() - t0
    mode = [k[6:] for k, v in be.last_extra.items() if k.startswith("pairs_") and v][0]
    return {
        "case": case,
        "graphs": " x ".join(f"{g.title} ({g.n_nodes} nodes, {g.nnz} nnz)" for g in graphs),
        "edge_pairs": graphs[0].nnz * graphs[1].nnz,
        "mode": mode,
        "cache_bytes": be.cache_bytes,
        "threads": be.threads,
        "seconds": round(seconds, 3),
        "cg_iter": int(its[0]),
        "converged": bool(conv[0]),
        "value": float(vals[0]),
        "base_rss_mb": round(base, 1),
        "peak_rss_mb": round(_peak_rss(), 1),
    }


def _status_mb(key: str) -> float | None:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def _reset_peak_rss() -> float:
    """Reset the peak resident memory where Linux allows it; returns the current resident MB."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        pass
    return _status_mb("VmRSS") or _peak_rss()


def _peak_rss() -> float:
    """Peak resident memory (MB) since the last reset (since the start where it cannot be reset)."""
    import resource

    hwm = _status_mb("VmHWM")
    return hwm if hwm is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _in_fresh_process(fn: Callable[..., dict], *args: Any) -> dict:
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=1, mp_context=mp.get_context("spawn")) as ex:
        return ex.submit(fn, *args).result()


def _write_csv(path: Path, rows: list[dict]) -> None:
    print(f"wrote {write_csv(path, rows)}")


def main(argv: list[str] | None = None) -> int:
    """Run the CPU benchmark; returns the process exit status."""
    summary = " ".join(__doc__.split("\n\n")[0].split())  # the whole first paragraph, not its first line
    ap = argparse.ArgumentParser(prog="python -m mgkflow.bench cpu", description=summary)
    ap.add_argument("--n-graphs", type=int, default=20, help="first N labeled NWS graphs (default 20)")
    ap.add_argument("--repeats", type=int, default=3, help="timed runs per method; the fastest is reported")
    ap.add_argument("--out", default="reports", help="directory for the CSV files ('' to skip writing)")
    ap.add_argument("--no-grakel", action="store_true", help="skip the GraKeL row")
    ap.add_argument("--no-naive", action="store_true", help="skip the naive scipy CG row")
    ap.add_argument("--no-exact", action="store_true", help="skip the exact scipy backend row")
    ap.add_argument("--large", action="store_true", help="also solve the large single pairs (cpu_large.csv)")
    ap.add_argument("--large-n", type=int, default=10_000, help="nodes per graph of the unlabeled large pair")
    args = ap.parse_args(argv)
    if args.n_graphs < 1 or args.repeats < 1 or args.large_n < 1:
        ap.error("--n-graphs, --repeats and --large-n must be >= 1")

    graphs = nws_graphs(args.n_graphs)
    N = len(graphs)
    pairs = N * (N + 1) // 2
    machine = machine_name()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    print(f"CPU benchmark: {N} labeled NWS graphs, {pairs} pairs, q={Q}, best of {args.repeats}; {machine}")
    rows = []
    K_ref = None

    def add(method: str, times: list[float], K: np.ndarray | None, note: str, **extra: Any) -> None:
        diff = "" if K is None or K_ref is None else float(np.max(np.abs(K - K_ref) / np.abs(K_ref)))
        rows.append(_row(method, times, pairs, N, machine, **extra, max_rel_diff_vs_exact=diff, note=note))

    if not args.no_exact:
        t, K_ref, s = run_exact(graphs, args.repeats)
        add("scipy-exact", t, K_ref, "float64 exact scipy backend (sparse LU / PCG rtol 1e-12)", **s)
    for threads in dict.fromkeys([1, cores]):
        t, K, s = run_mgkflow(graphs, args.repeats, threads=threads)
        add(f"numba-cpu-{threads}t", t, K, f"float64 Jacobi PCG rtol 1e-12, {threads} thread(s)", **s)
    if not args.no_naive:
        t, K, s = run_naive_cg(graphs, args.repeats)
        add("scipy-cg-naive", t, K, "sp.kron system per pair, scipy cg without preconditioner, rtol 1e-12", **s)
    if not args.no_grakel:
        try:
            t, _K, s = run_grakel(graphs, args.repeats)
        except ImportError as exc:
            print(f"grakel-rw-labeled: skipped ({exc}; install with `.venv/bin/pip install grakel`)")
        else:
            note = f"different kernel (node labels only, lamda={s['lamda']:g}); CG rtol 1e-6, <=20 iter"
            add("grakel-rw-labeled", t, None, note, cg_iter_median="", first_call_s="")

    header = (
        f"{'method':<20} {'s best':>9} {'s median':>9} {'ms/pair':>9} {'CG it':>6} {'1st call s':>10} {'rel diff':>9}"
    )
    print(header)
    print("-" * len(header))
    for r in rows:
        it, first, diff = r.get("cg_iter_median", ""), r.get("first_call_s", ""), r["max_rel_diff_vs_exact"]
        print(
            f"{r['method']:<20} {r['seconds_min']:>9.4f} {r['seconds_median']:>9.4f} {r['ms_per_pair']:>9.3f} "
            f"{it if it == '' else f'{it:g}':>6} {first if first == '' else f'{first:.2f}':>10} "
            f"{diff if diff == '' else f'{diff:.1e}':>9}"
        )
    out = Path(args.out) if args.out else None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        _write_csv(out / "cpu_bench.csv", rows)

    if args.large:
        large = []
        for case, cache in (("proteins", None), ("proteins", 1 << 30), ("unlabeled", None)):
            r = _in_fresh_process(run_large_pair, case, args.large_n, cache)
            large.append({**r, "machine": machine})
            print(
                f"{case:<10} {r['mode']:<12} {r['seconds']:>8.2f} s  {r['cg_iter']:>3} it  "
                f"peak {r['peak_rss_mb']:.0f} MB "
                f"(base {r['base_rss_mb']:.0f} MB)  {r['graphs']}"
            )
        if out is not None:
            _write_csv(out / "cpu_large.csv", large)
    return 0


if __name__ == "__main__":
    sys.exit(main())
