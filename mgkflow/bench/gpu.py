"""GPU benchmark of the paper workloads: ``python -m mgkflow.bench gpu [options]``.

Times the full Gram matrix (upper triangle, 12,880 pairs for 160 graphs) of the six
workloads of docs/design.md §6.1 with the GPU backend, end to end after compilation (median
of ``--reps`` runs of ``MarginalizedGraphKernel(...)(graphs)``), on graphs reordered
with PBR (RCM when PBR is not available, with a note). Load, reorder and pack are
timed separately. Reports pairs/s, CG iterations, device time, effective GFLOP/s
(2 x nonzero products evaluated / device time), the largest relative error against
the float64 CPU backend on a sample of pairs and, with ``--against-graphdot``, the
ratio to GraphDot's pairs/s measured in the same device call (and the agreement of
the values: K_mgkflow = q^2 K_GraphDot).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import sys
import time
from pathlib import Path

import numpy as np

from ._csv import write_csv

WORKLOADS = [
    ("nws", False, 0.05),
    ("ba", False, 0.05),
    ("nws", False, 0.0005),
    ("ba", False, 0.0005),
    ("nws", True, 0.05),
    ("ba", True, 0.05),
]
EXTRA_WORKLOADS = [("nws", True, 0.0005), ("ba", True, 0.0005)]
#: Real datasets (``--real``): graphs taken from each (None: all).
REAL_WORKLOADS = [("drugs", True, 0.05), ("proteins", True, 0.05)]
#: Synthetic molecule-like set (``--molecules N``): :func:`mgkflow.datasets.molecules`, drugs' kernels.
MOLECULE_WORKLOAD = ("molecules", True, 0.05)
#: Graphs of mixed sizes (``--mixed N``): :func:`mixed_graphs`, the labeled NWS kernels.
MIXED_WORKLOAD = ("mixed", True, 0.05)


def workload_name(name: str, labeled: bool, q: float) -> str:
    """GraphDot anchor's name of a workload, e.g. ``"nws-unlabeled q=0.05"``."""
    return f"{name}-{'labeled' if labeled else 'unlabeled'} q={q:g}"


def _ref_key(name: str, labeled: bool, q: float) -> str:
    return f"{name}_{'labeled' if labeled else 'unlabeled'}_q{q:g}"


_PERMS: dict = {}


def _order(graphs: list, method: str, key: tuple | None = None) -> tuple[list, str, float]:
    """Reorder every graph; permutations are cached under ``key`` (same structure, other labels)."""
    if key is not None:  # the key names the set; the fingerprint guards against stale caches
        sizes = np.array([[g.n_nodes, g.adjacency.nnz] for g in graphs], dtype=np.int64)
        key = (*key, hashlib.sha1(sizes.tobytes()).hexdigest()[:12])
    if key is not None and (key, method) in _PERMS:
        perms, used, dt = _PERMS[(key, method)]
        return [g.permute(p) for g, p in zip(graphs, perms, strict=True)], used, dt
    disk = os.environ.get("MGKFLOW_PERM_CACHE")
    fname = Path(disk) / f"perm_{key[0]}_{key[1]}_{key[2]}_{method}.npz" if disk and key is not None else None
    if fname is not None and fname.is_file():
        z = np.load(fname)
        perms = [z[f"p{k}"] for k in range(len(graphs))]
        used, dt = str(z["used"]), float(z["dt"])
        _PERMS[(key, method)] = (perms, used, dt)
        return [g.permute(p) for g, p in zip(graphs, perms, strict=True)], used, dt
    t0 = time.perf_counter()
    try:
        from ..reorder import available_methods, reorder

        if method not in available_methods():
            raise ImportError(method)
        perms = [reorder(g, method=method, seed=0) for g in graphs]
        used = method
    except Exception as exc:  # noqa: BLE001
        from scipy.sparse.csgraph import reverse_cuthill_mckee

        print(f"note: ordering {method!r} unavailable ({exc}); using RCM", flush=True)
        perms = [reverse_cuthill_mckee(g.adjacency, symmetric_mode=True) for g in graphs]
        used = "rcm"
    dt = time.perf_counter() - t0
    if key is not None:
        _PERMS[(key, method)] = (perms, used, dt)
    if fname is not None:
        fname.parent.mkdir(parents=True, exist_ok=True)
        np.savez(fname, used=used, dt=dt, **{f"p{k}": p for k, p in enumerate(perms)})
    return [g.permute(p) for g, p in zip(graphs, perms, strict=True)], used, dt


def _cpu_sample_error(graphs, K, nk, ek, q, n_sample, seed=0):
    from ..backends.exact import solve_pair
    from ..system import prepare_graph

    rng = np.random.default_rng(seed)
    N = len(graphs)
    pairs = {(0, 0), (N - 1, N - 1)}
    while len(pairs) < min(n_sample, N * (N + 1) // 2):
        i, j = sorted(rng.integers(0, N, 2).tolist())
        pairs.add((i, j))
    systems = {}
    worst, checked = 0.0, 0
    for i, j in sorted(pairs):
        for k in (i, j):
            if k not in systems:
                systems[k] = prepare_graph(graphs[k], k, nk, ek, q=q)
        try:
            ref = solve_pair(systems[i], systems[j], nk, ek, rtol=1e-12).value
        except MemoryError:  # beyond the CPU backend's size limit: not checked
            continue
        checked += 1
        worst = max(worst, abs(K[i, j] - ref) / abs(ref))
    return worst if checked else float("nan")


def drug_graphs(n_graphs: int | str | None = None) -> list:
    """The benchmark's drugs workload: the first ``n_graphs`` molecules with at least one bond
    (GraphDot cannot load edgeless graphs; both sides time the same molecules); ``"all"``:
    every molecule of the set, edgeless ones included."""
    from .. import datasets

    if n_graphs == "all":
        return list(datasets.drugs())
    graphs = [g for g in datasets.drugs() if g.adjacency.nnz > 0]
    return graphs[: int(n_graphs)] if n_graphs is not None else graphs


def molecule_graphs(n_graphs: int, seed: int = 0) -> list:
    """The synthetic molecule-like set of the scale runs (:func:`mgkflow.datasets.molecules`, default sizes)."""
    from .. import datasets

    return datasets.molecules(int(n_graphs), seed=seed)


def mixed_graphs(n_graphs: int = 48, seed: int = 17) -> list:
    """Issue 24's mixed set: ``n_graphs`` Newman-Watts-Strogatz graphs (k = 3, p = 0.05) of 20-800 nodes,
    log-uniform, node labels ``label`` = degree mod 3, edge ``length`` uniform in [1, 2] and edge weights
    uniform in [0.5, 2]; the labeled NWS kernels apply (KroneckerDelta on ``label``, SquareExponential on
    ``length``). Pairs of every solver route: small pairs, 96-node-like pairs, pairs of ~600k unknowns.

    Examples
    --------
    >>> gs = mixed_graphs(6)
    >>> [g.n_nodes for g in gs]
    [451, 36, 156, 77, 44, 83]
    >>> sorted(gs[1].edge_labels), float(gs[1].adjacency.data.min()) >= 0.5
    (['length'], True)
    """
    import networkx as nx

    from ..graph import Graph
    from ..io.csr import csr_from_edges

    rng = np.random.default_rng(seed)
    sizes = np.exp(rng.uniform(np.log(20), np.log(800), int(n_graphs))).astype(int)
    graphs = []
    for i, n in enumerate(sizes):
        G = nx.newman_watts_strogatz_graph(int(n), 3, 0.05, seed=int(rng.integers(1 << 30)))
        e = np.asarray(sorted((min(u, v), max(u, v)) for u, v in G.edges()), dtype=np.int64).reshape(-1, 2)
        deg = np.bincount(e.ravel(), minlength=n)
        values, weights = {"length": rng.uniform(1, 2, len(e))}, rng.uniform(0.5, 2, len(e))
        indptr, indices, data, el = csr_from_edges(int(n), e[:, 0], e[:, 1], values, weights=weights)
        graphs.append(Graph.from_csr(indptr, indices, data, int(n), {"label": deg % 3}, el, title=f"mixed-{i}"))
    return graphs


def protein_graphs(n_graphs: int | None = None) -> list:
    """The benchmark's proteins workload: the ``n_graphs`` smallest structures (fewest heavy atoms,
    then title) of :func:`mgkflow.datasets.proteins`, smallest first (GraphDot gives each pair one
    thread block, so both sides time a set it can finish)."""
    from .. import datasets

    graphs = datasets.proteins()
    order = sorted(range(len(graphs)), key=lambda k: (graphs[k].n_nodes, graphs[k].title))
    return [graphs[k] for k in order[:n_graphs]] if n_graphs is not None else [graphs[k] for k in order]


def run_workload(name, labeled, q, n_graphs, reps, order, n_sample, backend_kw=None):
    """Benchmark one workload; return a dict of figures."""
    from .. import datasets
    from ..format import pack_batch
    from ..mgk import MarginalizedGraphKernel
    from ..system import prepare_graph

    t0 = time.perf_counter()
    if name == "drugs":
        graphs = drug_graphs(n_graphs)
    elif name == "molecules":
        graphs = molecule_graphs(n_graphs)
    elif name == "mixed":
        graphs = mixed_graphs(n_graphs)
    elif name == "proteins":
        graphs = protein_graphs(n_graphs)
    else:
        kw = {"labeled": labeled} if name in ("nws", "ba") else {}
        graphs = getattr(datasets, name)(n_graphs=n_graphs, **kw)
    t_load = time.perf_counter() - t0
    graphs, used, t_order = _order(graphs, order, key=(name, n_graphs))
    nk, ek = datasets.default_kernels({"molecules": "drugs", "mixed": "nws"}.get(name, name), labeled=labeled)
    systems = [prepare_graph(g, i, nk, ek, q=q) for i, g in enumerate(graphs)]
    t0 = time.perf_counter()
    batch = pack_batch(systems, node_fields=list(nk.fields), edge_fields=list(ek.fields))
    t_pack = time.perf_counter() - t0
    kern = MarginalizedGraphKernel(nk, ek, q=q, backend="gpu")
    if backend_kw:
        from ..gpu import GPUBackend

        kern._backend_obj = GPUBackend(**backend_kw)
    t0 = time.perf_counter()
    K = kern(graphs)  # compiles, packs, uploads
    t_first = time.perf_counter() - t0
    times, dev, phases = [], [], []
    from .gram import _DeviceMemory

    for _ in range(reps):
        t0 = time.perf_counter()
        K = kern(graphs)
        times.append(time.perf_counter() - t0)
        ex = kern.last_stats.extra
        dev.append(ex.get("device_s", float("nan")))
        # the host's share by phase: before the first kernel, after the device's work (both in the backend's
        # solve), and the kernel object's work around the solve (wall minus the backend's solve)
        phases.append([ex.get("prelaunch_s", float("nan")), ex.get("tail_s", float("nan")),
                       times[-1] - ex.get("host_s", float("nan"))])  # fmt: skip
    st = kern.last_stats
    # the peak device memory from one more call, untimed: nvidia-smi every 0.2 s beside the timed calls added
    # 1.2 ms to a 41 ms call on an H100 (labeled NWS; gpu/NOTES.md, session 31)
    with _DeviceMemory() as devmem:
        kern(graphs)
    iu = np.triu_indices(len(graphs))
    it = st.iterations[iu]
    med = float(np.median(times))
    pairs = len(graphs) * (len(graphs) + 1) // 2
    err = _cpu_sample_error(graphs, K, nk, ek, q, n_sample) if n_sample > 0 else float("nan")
    extra = st.extra
    dev_med = float(np.median(dev))
    gflops = extra.get("gflops", 0.0) * extra.get("device_s", 0.0) / dev_med if dev_med > 0 else 0.0
    return {
        "workload": workload_name(name, labeled, q),
        "graphs": len(graphs),
        "pairs": pairs,
        "order": used,
        "octiles": batch.n_octiles,
        "nnz": batch.nnz,
        "load_s": t_load,
        "reorder_s": t_order,
        "pack_s": t_pack,
        "first_call_s": t_first,
        "median_s": med,
        "times_s": " ".join(f"{t:.4f}" for t in times),
        "device_median_s": dev_med,
        "pairs_per_s": pairs / med,
        "pairs_per_s_device": pairs / dev_med if dev_med > 0 else float("nan"),
        "host_median_s": med - dev_med,
        "prelaunch_median_s": float(np.median([p[0] for p in phases])),
        "solve_tail_median_s": float(np.median([p[1] for p in phases])),
        "outside_solve_median_s": float(np.median([p[2] for p in phases])),
        "peak_rss_bytes": int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024,
        "peak_device_mib": devmem.peak_mib,
        "cg_iter_median": float(np.median(it)),
        "cg_iter_max": int(it.max()),
        "not_converged": int((~st.converged).sum()),
        "gflops": gflops,
        "max_rel_err_cpu": err,
        "gpu": extra.get("device", ""),
        "regs": extra.get("regs", 0),
        "launches": json.dumps(extra.get("launches", [])),
        "_K": K,
        "_graphs_n": len(graphs),
    }


def _graphdot_value_check(row, gd_ref, name, labeled, q, reps_graphs=8):
    """Max relative difference to GraphDot's raw values (times q^2) on its first 8 graphs."""
    key = _ref_key(name, labeled, q)
    if key not in gd_ref:
        return float("nan")
    ref = np.asarray(gd_ref[key]) * q * q
    k = ref.shape[0]
    K = row["_K"][:k, :k] if row["_graphs_n"] >= k else None
    if K is None:
        return float("nan")
    return float(np.max(np.abs(K - ref) / np.abs(ref)))


def run_protein_pair(
    target_nodes: int = 2000,
    cutoff: float = 6.0,
    reps: int = 3,
    order: str = "pbr",
    gpu_options: dict | None = None,
) -> dict:
    """Time one pair of the two proteins closest to ``target_nodes`` heavy atoms.

    Distance-labeled (the dataset's default kernels), q = 0.05, median of ``reps`` calls after
    a warm-up; the GPU backend decides the path (one pair: the whole-device solver);
    ``gpu_options`` go to :class:`mgkflow.gpu.GPUBackend` (e.g. ``{"wide_xmv": "rows"}``).
    """
    from .. import datasets
    from ..mgk import MarginalizedGraphKernel

    prots = datasets.proteins(cutoff=cutoff)
    sizes = np.array([g.n_nodes for g in prots])
    pick = np.argsort(np.abs(sizes - target_nodes), kind="stable")[:2]
    graphs, used, t_order = _order([prots[k] for k in pick], order, key=None)
    nk, ek = datasets.default_kernels("proteins")
    kern = MarginalizedGraphKernel(nk, ek, q=0.05, backend="gpu", gpu_options=dict(gpu_options or {}))
    x, y = [graphs[0]], [graphs[1]]
    t0 = time.perf_counter()
    K = kern(x, y)
    first = time.perf_counter() - t0
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        K = kern(x, y)
        times.append(time.perf_counter() - t0)
    st = kern.last_stats
    extra = st.extra
    nnz = [g.adjacency.nnz for g in graphs]
    return {
        "pair": f"{graphs[0].title} x {graphs[1].title}",
        "nodes": f"{graphs[0].n_nodes} x {graphs[1].n_nodes}",
        "nnz": f"{nnz[0]} x {nnz[1]}",
        "cutoff_A": cutoff,
        "order": used,
        "first_call_s": first,
        "median_s": float(np.median(times)),
        "times_s": " ".join(f"{t:.4f}" for t in times),
        "cg_iter": int(st.iterations.ravel()[0]),
        "converged": bool(st.converged.all()),
        "value": float(K[0, 0]),
        "path": "wide" if extra.get("wide") else "per-block",
        "xmv": ",".join(str(w.get("xmv", "")) for w in extra.get("wide", [])),
        "device_s": extra.get("device_s", float("nan")),
        "gflops": extra.get("gflops", 0.0),
        "gpu": extra.get("device", ""),
    }


def _parser() -> argparse.ArgumentParser:
    """The command line of :func:`main`."""
    ap = argparse.ArgumentParser(prog="python -m mgkflow.bench gpu", description=__doc__.split("\n")[0])
    ap.add_argument("--n-graphs", type=int, default=160)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--order", default="pbr")
    ap.add_argument("--sample", type=int, default=10, help="pairs checked against the CPU backend")
    ap.add_argument("--out", default=os.environ.get("OUT") or "reports")
    default_gd = os.path.join(os.environ["OUT"], "graphdot.json") if os.environ.get("OUT") else None
    ap.add_argument(
        "--against-graphdot", default=default_gd, help="GraphDot results JSON (comma-separated for several)"
    )
    ap.add_argument("--extra", action="store_true", help="also the labeled q=0.0005 workloads")
    ap.add_argument("--real", action="store_true", help="also the drugs and proteins datasets")
    ap.add_argument("--drugs", default=None,
                    help="graphs of the drugs set with --real: N first bonded ones (default: all bonded), 'all'")
    ap.add_argument("--molecules", type=int, default=0, help="also a synthetic molecule-like set of N graphs")
    ap.add_argument("--mixed", type=int, default=0,
                    help="also the mixed set of N graphs of 20-800 nodes (issue 24's: 48)")
    ap.add_argument("--proteins", type=int, default=8, help="smallest structures of the proteins set with --real")
    ap.add_argument("--only", default=None, help="comma-separated substrings of workload names")
    ap.add_argument(
        "--protein-pair", default=None, help="only time one protein pair: comma-separated cutoffs in Å, e.g. 6,4"
    )
    ap.add_argument("--block", type=int, default=None, help="threads per block")
    ap.add_argument("--min-blocks", type=int, default=None, help="__launch_bounds__ blocks per SM")
    ap.add_argument("--xmv", choices=["rows", "octile"], default=None, help="XMV work mapping")
    ap.add_argument("--row-ilp", type=int, choices=[1, 2], default=None, help="row mode: float64 chains per lane")
    ap.add_argument("--primitives", default=None, help="octile mode: auto (measured map) or ss/dd/ds/sd")
    ap.add_argument("--no-tile-sort", action="store_true", help="row mode: keep the node order within tiles")
    ap.add_argument("--no-p-smem", action="store_true", help="one generic kernel (no shared-memory P variant)")
    ap.add_argument("--rtol", type=float, default=None, help="CG relative residual tolerance")
    ap.add_argument("--a-global", action="store_true", help="keep a = M p in global memory")
    ap.add_argument(
        "--wide-xmv", default=None, help="XMV of the wide path: auto, rows or staged (--protein-pair: comma-separated)"
    )
    ap.add_argument("--tag", default="", help="label of this configuration in the CSV")
    ap.add_argument("--calibrate", action="store_true", help="run mgkflow.bench.gpu_calibrate instead (its options)")
    ap.add_argument("--sweep", action="store_true", help="run mgkflow.bench.gpu_sweep instead (its options)")
    return ap


def _backend_options(args: argparse.Namespace) -> dict:
    """The :class:`mgkflow.gpu.GPUBackend` options of the command line."""
    backend_kw = {
        k: v
        for k, v in (
            ("block", args.block), ("min_blocks", args.min_blocks), ("xmv", args.xmv),
            ("primitives", args.primitives), ("rtol", args.rtol), ("row_ilp", args.row_ilp),
        )
        if v is not None
    }  # fmt: skip
    if args.no_tile_sort:
        backend_kw["tile_sort"] = False
    if args.no_p_smem:
        backend_kw["p_smem"] = False
    if args.a_global:
        backend_kw["a_in_shared"] = False
    if args.wide_xmv and "," not in args.wide_xmv:
        backend_kw["wide_xmv"] = args.wide_xmv

    return backend_kw


def _protein_pair_main(args: argparse.Namespace, backend_kw: dict) -> int:
    """``--protein-pair``: time one protein pair per cutoff and wide XMV, write ``gpu_protein_pair.csv``."""
    prow = []
    for c in args.protein_pair.split(","):
        first = None
        for wx in (args.wide_xmv or "auto").split(","):
            r = run_protein_pair(cutoff=float(c), reps=args.reps, gpu_options={**backend_kw, "wide_xmv": wx})
            first = r["value"] if first is None else first
            r["rel_diff_first"] = abs(r["value"] - first) / abs(first)
            prow.append(r)
            print(
                f"protein pair {r['pair']} ({r['nodes']} nodes, {r['nnz']} nonzeros, cutoff {c} Å): "
                f"{r['median_s'] * 1e3:.1f} ms median (device {r['device_s'] * 1e3:.1f} ms), "
                f"{r['cg_iter']} CG iterations, path {r['path']} xmv {r['xmv']}, {r['gflops']:.0f} GFLOP/s, "
                f"K {r['value']:.10g} (rel. diff to the first {r['rel_diff_first']:.1e})",
                flush=True,
            )
    write_csv(Path(args.out) / "gpu_protein_pair.csv", prow)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m mgkflow.bench gpu``.

    ``--calibrate`` runs :mod:`mgkflow.bench.gpu_calibrate` (strategy cost models) and
    ``--sweep`` :mod:`mgkflow.bench.gpu_sweep` (hyperparameter sweep) with the other arguments.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    for flag, module in (("--calibrate", "gpu_calibrate"), ("--sweep", "gpu_sweep")):
        if flag in argv:
            import importlib

            return int(importlib.import_module(f"{__package__}.{module}").main([a for a in argv if a != flag]) or 0)
    args = _parser().parse_args(argv)
    backend_kw = _backend_options(args)

    from ..gpu import device_available

    if not device_available():
        print("no CUDA device (or no PyCUDA): nothing to benchmark", file=sys.stderr)
        return 1
    if args.protein_pair:
        return _protein_pair_main(args, backend_kw)
    gd_bench, gd_ref = {}, {}
    for path in (args.against_graphdot or "").split(","):
        if not path:
            continue
        if Path(path).is_file():
            data = json.loads(Path(path).read_text())
            gd_bench.update(data.get("bench", {}))
            gd_ref.update(data.get("reference", {}))
        else:
            print(f"note: no GraphDot results at {path}", flush=True)
    wl = WORKLOADS + (EXTRA_WORKLOADS if args.extra else []) + (REAL_WORKLOADS if args.real else [])
    wl += [MOLECULE_WORKLOAD] if args.molecules else []
    wl += [MIXED_WORKLOAD] if args.mixed else []
    drugs = None if args.drugs is None else (args.drugs if args.drugs == "all" else int(args.drugs))
    n_real = {"drugs": drugs, "proteins": args.proteins, "molecules": args.molecules, "mixed": args.mixed}
    if args.only:
        keys = args.only.split(",")
        wl = [w for w in wl if any(k in workload_name(*w) for k in keys)]
    rows = []
    for name, labeled, q in wl:
        n_graphs = n_real[name] if name in n_real else args.n_graphs
        row = run_workload(name, labeled, q, n_graphs, args.reps, args.order, args.sample, backend_kw)
        row["config"] = args.tag or json.dumps(backend_kw)
        gd = gd_bench.get(row["workload"])
        row["graphdot_pairs_per_s"] = gd["pairs_per_s"] if gd else float("nan")
        row["ratio_vs_graphdot"] = row["pairs_per_s"] / gd["pairs_per_s"] if gd else float("nan")
        row["max_rel_diff_graphdot"] = _graphdot_value_check(row, gd_ref, name, labeled, q)
        rows.append(row)
        print(
            f"{row['workload']:24s} {row['median_s']:.4f}s {row['pairs_per_s']:>10,.0f} pairs/s "
            f"(device {row['device_median_s']:.4f}s) iters med {row['cg_iter_median']:.0f} "
            f"max {row['cg_iter_max']} err {row['max_rel_err_cpu']:.1e} "
            f"x{row['ratio_vs_graphdot']:.2f} vs GraphDot; host {row['host_median_s']:.4f}s (before the first "
            f"kernel {row['prelaunch_median_s']:.4f}, after the device {row['solve_tail_median_s']:.4f}, outside the "
            f"solve {row['outside_solve_median_s']:.4f}), "
            f"peak RSS {row['peak_rss_bytes'] / 2**30:.2f} GiB, device memory {row['peak_device_mib']} MiB",
            flush=True,
        )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cols = [k for k in rows[0] if not k.startswith("_")]
    csv_name = f"gpu_bench{'_' + args.tag if args.tag else ''}.csv"
    write_csv(out / csv_name, rows, cols)
    gpu = rows[0]["gpu"]
    print(f"\nGPU: {gpu}; ordering {rows[0]['order']}; {rows[0]['graphs']} graphs, {rows[0]['pairs']} pairs")
    hdr = (
        f"{'workload':24s} {'median s':>9s} {'pairs/s':>10s} {'GraphDot':>10s} {'ratio':>6s} "
        f"{'it med/max':>10s} {'GFLOP/s':>8s} {'err CPU':>8s} {'err GD':>8s} {'pack s':>7s} {'order s':>7s}"
    )
    print(hdr)
    for r in rows:
        print(
            f"{r['workload']:24s} {r['median_s']:9.4f} {r['pairs_per_s']:10,.0f} "
            f"{r['graphdot_pairs_per_s']:10,.0f} {r['ratio_vs_graphdot']:6.2f} "
            f"{r['cg_iter_median']:4.0f}/{r['cg_iter_max']:<5d} {r['gflops']:8.1f} "
            f"{r['max_rel_err_cpu']:8.1e} {r['max_rel_diff_graphdot']:8.1e} {r['pack_s']:7.3f} {r['reorder_s']:7.2f}"
        )
    print(f"CSV: {out / csv_name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
