"""S28-C/D: resident gradient route (RULE: gradient.RESIDENT_MAX_PASS_COST) against none (0), by graph family.
Each set: gradients with every large pair resident (RMP=inf) and none (RMP=0), alternated in one process."""
import sys
import time

import numpy as np

import mgkflow.gpu.gradient as G
from mgkflow import datasets
from mgkflow.bench.gpu import _order
from mgkflow.mgk import MarginalizedGraphKernel

nk, ek = datasets.default_kernels("nws", labeled=True)
RULE = G.RESIDENT_MAX_PASS_COST


def sets():
    yield "nws k3 pbr 160", _order(datasets.nws(n_graphs=160, labeled=True), "pbr")[0]
    yield "nws k3 pbr 40", _order(datasets.nws(n_graphs=40, labeled=True), "pbr")[0]
    yield "nws k3 raw 40", datasets.nws(n_graphs=40, labeled=True)
    for k in (4, 6, 8):
        yield f"nws k{k} pbr 40", _order(datasets.nws(n_graphs=40, k=k, labeled=True), "pbr")[0]
    yield "nws k3 p0.5 pbr 40", _order(datasets.nws(n_graphs=40, p=0.5, labeled=True), "pbr")[0]
    for m in (1, 2):
        yield f"ba m{m} pbr 40", _order(datasets.ba(n_graphs=40, m=m, labeled=True), "pbr")[0]
    yield "ba m1 pbr 160", _order(datasets.ba(n_graphs=160, m=1, labeled=True), "pbr")[0]
    rng = np.random.default_rng(0)
    mixed = []
    for i in range(60):
        n = int(rng.integers(20, 161))
        if i % 2:
            mixed += datasets.nws(n_graphs=1, n=n, k=int(rng.integers(3, 6)), seed=100 + i, labeled=True)
        else:
            mixed += datasets.ba(n_graphs=1, n=n, m=int(rng.integers(1, 4)), seed=100 + i, labeled=True)
    yield "mixed 20-160 (60)", mixed


def timeit(gs, rmp, reps=3):
    G.RESIDENT_MAX_PASS_COST = rmp
    k = MarginalizedGraphKernel(nk, ek, q=0.05, backend="gpu")
    k(gs, eval_gradient=True)
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        K, dK = k(gs, eval_gradient=True)
        ts.append(time.perf_counter() - t)
    return float(np.median(ts)), K, dK


for name, gs in sets():
    npairs = len(gs) * (len(gs) + 1) // 2
    nnz = float(np.mean([2 * g.n_edges for g in gs]))
    n = float(np.mean([g.n_nodes for g in gs]))
    res = {}
    for rmp in (RULE, 0.0, RULE, 0.0):
        t, K, dK = timeit(gs, rmp)
        res.setdefault(rmp, []).append(t)
        res.setdefault(("K", rmp), (K, dK))
    (Ka, da), (Kb, db) = res[("K", RULE)], res[("K", 0.0)]
    rel = float(np.max(np.abs(da - db)) / np.max(np.abs(db)))
    ti, t0 = min(res[RULE]), min(res[0.0])
    print(f"{name:22s} n {n:5.1f} nnz/n {nnz / n:4.2f} prod/unk {nnz * nnz / n / n:6.1f}  rule {npairs / ti:9,.0f}  "
          f"joint {npairs / t0:9,.0f} pairs/s  ratio {t0 / ti:5.3f}  dK diff {rel:.1e}", flush=True)
    sys.stdout.flush()
