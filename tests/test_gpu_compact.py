"""Compact solver of small pairs (mgkflow/gpu/solvers/compact.py, mgk_compact.cu), no GPU needed: the numpy
emulation against the CPU solver, GPUBackend end to end on the fake driver of test_wide.py (arguments
bound by the names and C types parsed from the generated source), nvcc compiles of the generated sources
without spills; on a GPU, against the CPU solver and the per-block kernel."""

from __future__ import annotations

import itertools
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_wide import FakeAlloc, fake_backend  # noqa: F401  (fixture)

from mgkflow.backends.exact import solve_pair
from mgkflow.gpu import batch, device
from mgkflow.gpu.solvers import compact
from mgkflow.gpu.source import KPAR, kernel_values, make_config
from mgkflow.graph import Graph
from mgkflow.kernels import Constant, KroneckerDelta, SquareExponential, tensor_product
from mgkflow.system import prepare_graph

NVCC = shutil.which("nvcc")


def _molecule(n: int, seed: int) -> Graph:
    """A small labeled tree with a ring closed (molecule-like), float32-exact weights."""
    rng = np.random.default_rng(seed)
    G = nx.random_labeled_tree(n, seed=seed) if hasattr(nx, "random_labeled_tree") else nx.random_tree(n, seed=seed)
    if n > 6:
        G.add_edge(0, 5)
    for u, v in G.edges:
        G.edges[u, v]["length"] = float(np.float32(rng.uniform(1.0, 1.6)))
        G.edges[u, v]["weight"] = float(np.float32(rng.choice([1.0, 1.5, 2.0])))
    for v in G.nodes:
        G.nodes[v]["label"] = int(rng.integers(0, 4))
    return Graph.from_networkx(G, node_labels=["label"], edge_labels=["length"])


class CompactModule(device.Module):
    """``mgk_compact.cu`` on the fake driver: launches bind their arguments by the parsed signature and
    run :func:`mgkflow.gpu.solvers.compact.emulate_launch`."""

    def __init__(self, src: str, nk: Any, ek: Any, config: Any, log: list, static: int = 0) -> None:
        super().__init__(self, src)
        self.src, self.nk, self.ek, self.config, self.log = src, nk, ek, config, log
        self.static = static  # the function's static shared memory (bytes)
        self.kpar = FakeAlloc(4 * int(re.search(r"__constant__ float mgk_kpar\[(\d+)\]", src).group(1)))
        self.block = int(re.search(r"#define BLOCK (\d+)", src).group(1))

    def get_global(self, name: str) -> tuple[FakeAlloc, int]:
        assert name == KPAR
        return self.kpar, self.kpar.nbytes

    def get_function(self, name: str) -> Any:
        assert name == compact.KERNEL
        mod, params = self, device.parse_signatures(self.src)[name]

        class Func:
            num_regs = 96
            shared_size_bytes = mod.static
            max_dyn = device.SMEM_DEFAULT_LIMIT - mod.static  # the driver's rule: static + dynamic <= 48 KiB

            def set_attribute(self, attr: Any, value: int) -> None:
                assert attr == "max_dyn"
                self.max_dyn = value

            def __call__(self, *args: Any, block: tuple, grid: tuple, shared: int = 0, stream: Any = None) -> None:
                assert len(args) == len(params) and block == (mod.block, 1, 1)
                assert shared <= self.max_dyn, (shared, self.max_dyn, "cuLaunchKernel: invalid argument")
                assert np.array_equal(mod.kpar.view(np.float32), kernel_values(mod.nk, mod.ek)), "values not set"
                kw = {}
                for p, v in zip(params, args, strict=True):
                    if p.kind == "P":  # an allocation, or a pointer into one (results kept on the device)
                        assert isinstance(v, FakeAlloc | np.uintp), p
                        kw[p.name] = v.buf[: v.nbytes].view(p.dtype) if isinstance(v, FakeAlloc) else FakeAlloc.at(
                            v, p.dtype)
                    else:
                        assert type(v) is p.dtype.type, (p, type(v))
                        kw[p.name] = v.item()
                # every job's tables fit the launch's shared memory, its product space the block's entries
                jobs = kw["jobs"][: 2 * kw["n_jobs"]].reshape(-1, 2)
                hdr = kw["hdr"].reshape(-1, 5)
                n = hdr[:, 0].astype(np.int64)
                nnz = kw["rrowptr"][hdr[:, 4] + hdr[:, 0]] - kw["rrowptr"][hdr[:, 4]]
                a, b = jobs[:, 0], jobs[:, 1]
                assert (compact.shared_bytes(n[a], n[b], nnz[a], nnz[b], ncat=kw["ncat"]) <= shared).all()
                assert (kw["ncat"] > 0) == ("#define CAT 1" in mod.src)
                n_max = int((n[a] * n[b]).max())
                assert n_max <= compact.KE * mod.block
                compact.emulate_launch(kw, mod.config, mod.nk, mod.ek)
                mod.log.append({"jobs": kw["n_jobs"], "n_max": n_max, "block": mod.block})

        return Func()


class BlockStub:
    """The per-block solver module: records which pairs it was launched for (K = NaN)."""

    def __init__(self, src: str, log: list) -> None:
        self.src, self.log = src, log
        self.kpar = FakeAlloc(4 * int(re.search(r"__constant__ float mgk_kpar\[(\d+)\]", src).group(1)))

    def get_global(self, name: str) -> tuple[FakeAlloc, int]:
        return self.kpar, self.kpar.nbytes

    def get_function(self, name: str) -> Any:
        stub = self

        class Func:
            num_regs = 64
            shared_size_bytes = 272

            def set_attribute(self, *a: Any) -> None:
                pass

            def __call__(self, *args: Any, block: tuple, grid: tuple, shared: int = 0) -> None:
                stub.log.append(block[0])

        return Func()


CASES = {
    "labeled": (KroneckerDelta(0.5, "label"), SquareExponential(1.0, "length")),
    "unlabeled": (Constant(1.0), Constant(1.0)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_emulation_matches_cpu(case: str) -> None:
    """The numpy emulation of one launch (the algorithm of mgk_compact.cu) against the float64 CPU solver,
    an edgeless graph and a single-node graph included."""
    from mgkflow.gpu.pack import pack_host

    nk, ek = CASES[case]
    graphs = [_molecule(n, s) for s, n in enumerate((5, 12, 23, 31))]
    edgeless = nx.empty_graph(3)
    nx.set_node_attributes(edgeless, 1, "label")
    graphs += [Graph.from_networkx(edgeless, node_labels=["label"], edge_labels=["length"]), _molecule(1, 9)]
    systems = [prepare_graph(g, k, nk, ek, q=0.05) for k, g in enumerate(graphs)]
    config = make_config(nk, ek, {"label": "int64"}, {"length": "float64"}, row_ilp=2)
    hb = pack_host(systems, config, sort=True)
    n = len(graphs)
    pairs = [(i, j) for i in range(n) for j in range(i, n)]
    kw = {k: v for k, v in hb.host.items()}
    kw.update(nlab_stride=hb.nlab_stride, relab_stride=hb.relab_stride, dvec=hb.host["d"], pvec=hb.host["p"],
              qvec=hb.host["q"], rtol=1e-10, max_iter=500, n_jobs=len(pairs),
              jobs=np.array(pairs, dtype=np.int32).ravel(), job_counter=np.zeros(1, np.int32),
              out_k=np.zeros(len(pairs)), out_iter=np.zeros(len(pairs), np.int32), out_res=np.zeros(len(pairs)),
              out_conv=np.zeros(len(pairs), np.int32))  # fmt: skip
    compact.emulate_launch(kw, config, nk, ek)
    assert kw["out_conv"].all() and kw["job_counter"][0] == len(pairs)
    for t, (i, j) in enumerate(pairs):
        ref = solve_pair(systems[i], systems[j], nk, ek, rtol=1e-12).value
        assert abs(kw["out_k"][t] - ref) <= 1e-7 * abs(ref), (case, i, j)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_edge_categories_are_the_distinct_label_tuples(seed: int) -> None:
    """edge_categories numbers the distinct label tuples of the edges densely: a nonzero's category holds its
    labels, word for word, and two categories never the same tuple; over max_cat, none (ncat 0)."""
    rng = np.random.default_rng(seed)
    n_fields, total = int(rng.integers(1, 4)), int(rng.integers(1, 400))
    distinct = rng.integers(1, 7, n_fields)
    words = np.zeros((n_fields, total + 1), dtype=np.uint32)
    for f in range(n_fields):
        vals = rng.choice(2**32, size=int(distinct[f]), replace=False).astype(np.uint32)
        words[f, :total] = vals[rng.integers(0, distinct[f], total)]
    max_cat = int(rng.integers(1, 20))
    rcat, ecat, ncat = compact.edge_categories(words.ravel(), n_fields, total + 1, max_cat=max_cat)
    tuples = {tuple(col) for col in words[:, :total].T}
    if len(tuples) > max_cat:
        assert ncat == 0 and rcat.size == 1 and ecat.size == 1
        return
    assert ncat == len(tuples) and rcat.shape == (total + 1,) and rcat.dtype == np.int32 and rcat[-1] == 0
    table = ecat.reshape(n_fields, ncat)
    assert np.array_equal(table[:, rcat[:total]], words[:, :total])
    assert len({tuple(col) for col in table.T}) == ncat
    assert compact.edge_categories(np.zeros(1, np.uint32), 0, total + 1)[2] == 1  # no label field: one category


CAT_KERNELS = {
    "kd": (KroneckerDelta(0.5, "element"), KroneckerDelta(0.5, "bond_order")),
    "kd2": (
        KroneckerDelta(0.5, "element"),
        tensor_product(KroneckerDelta(0.4, "bond_order"), KroneckerDelta(0.7, "in_ring")),
    ),  # fmt: skip
    "se": (KroneckerDelta(0.5, "element"), SquareExponential(0.8, "bond_order")),
    "unlabeled": (Constant(1.0), Constant(1.0)),
}


@pytest.mark.parametrize("case", sorted(CAT_KERNELS))
def test_emulation_of_the_category_build(case: str) -> None:
    """The category build's launch (coefficients from the edge categories' table) gives the per-pair
    coefficient build's K bit for bit, and the CPU solver's (1e-7), on unit-weight molecules."""
    from mgkflow.datasets import molecules
    from mgkflow.gpu.pack import label_dtypes, pack_host

    nk, ek = CAT_KERNELS[case]
    lone = nx.Graph()
    lone.add_node(0, element=6)
    graphs = molecules(6, seed=2, min_atoms=3, max_atoms=30)
    graphs.append(Graph.from_networkx(lone, node_labels=["element"], edge_labels=["bond_order", "in_ring"]))
    systems = [prepare_graph(g, k, nk, ek, q=0.05) for k, g in enumerate(graphs)]
    config = make_config(nk, ek, *label_dtypes(systems, nk.fields, ek.fields), row_ilp=2, unit_weight=True)
    hb = pack_host(systems, config, sort=True)
    assert hb.ncat == (1 if case == "unlabeled" else len({tuple(r) for r in hb.host["ecat"].reshape(-1, hb.ncat).T}))
    n = len(graphs)
    pairs = [(i, j) for i in range(n) for j in range(i, n)]
    out = []
    for ncat in (hb.ncat, 0):
        kw = {k: v for k, v in hb.host.items()}
        kw.update(nlab_stride=hb.nlab_stride, relab_stride=hb.relab_stride, dvec=hb.host["d"], pvec=hb.host["p"],
                  qvec=hb.host["q"], rtol=1e-10, max_iter=500, n_jobs=len(pairs), ncat=ncat,
                  jobs=np.array(pairs, dtype=np.int32).ravel(), job_counter=np.zeros(1, np.int32),
                  out_k=np.zeros(len(pairs)), out_iter=np.zeros(len(pairs), np.int32), out_res=np.zeros(len(pairs)),
                  out_conv=np.zeros(len(pairs), np.int32))  # fmt: skip
        compact.emulate_launch(kw, config, nk, ek)
        assert kw["out_conv"].all()
        out.append(kw["out_k"])
    assert np.array_equal(out[0], out[1])
    for t, (i, j) in enumerate(pairs):
        ref = solve_pair(systems[i], systems[j], nk, ek, rtol=1e-12).value
        assert abs(out[0][t] - ref) <= 1e-7 * abs(ref), (case, i, j)


def test_bins() -> None:
    """Pairs go to the bin of their unpadded product size; pairs over the largest bin or over the shared
    memory of one pair stay with the per-block solver."""
    n = np.array([8, 16, 30, 33, 300, 31])
    nnz = np.array([14, 30, 62, 70, 600, 930])
    g1 = np.array([0, 1, 2, 3, 4, 5, 0])
    g2 = np.array([0, 1, 2, 3, 0, 5, 5])
    bins = compact.compact_bins(n, nnz, g1, g2)
    # 3: 1,089 unknowns (320 threads); 4: 2,400 unknowns (768 threads); 5: a coefficient table of 3.5 MB;
    # 6: 248 unknowns, but a coefficient table of 52 KB, over the share of the bins of 64 to 256 threads
    assert [(c.pairs.tolist(), c.block) for c in bins] == [([0, 1], 64), ([2], 256), ([3, 6], 320), ([4], 768)]
    for c in bins:  # a launch's shared memory: its largest pair's tables, within the bin's share
        a, b = g1[c.pairs], g2[c.pairs]
        assert c.smem == compact.shared_bytes(n[a], n[b], nnz[a], nnz[b]).max()
        assert c.smem <= compact.SMEM_PER_SM * c.block // compact.MIN_THREADS
    assert compact.compact_bins(n, nnz, g1[5:6], g2[5:6]) == []
    # launch sizes from the pairs present only: (2, 2) alone in its bin
    [c] = [c for c in compact.compact_bins(n, nnz, g1[2:3], g2[2:3])]
    assert c.smem == 16 * 900 + 4 * 62 * 62 + 4 * (30 + 30 + 2 + 62 + 62)
    # graphs that cannot pair compactly even with the set's smallest graph share one class (K x K tables stay small)
    big = np.arange(100, 5000, 7)
    assert compact.CompactRouter(big, 3 * big).K == 1
    with_one = compact.CompactRouter(np.append(big, 1), np.append(3 * big, 0))
    assert with_one.K == (big <= 4096).sum() + 2  # and the 1-node graph, and the class of those over 4,096 nodes
    # a router keeps the tables of the graphs: the same launches for every slice (a call's waves), strided too
    router = compact.CompactRouter(n, nnz)
    pairs = np.stack([g1, g2], axis=1)
    for lo, hi in ((0, 7), (0, 3), (2, 7), (5, 6)):
        want = compact.compact_bins(n, nnz, g1[lo:hi], g2[lo:hi])
        got = router.bins(pairs[lo:hi, 0], pairs[lo:hi, 1])
        assert [(c.pairs.tolist(), c.block, c.smem) for c in got] == [(c.pairs.tolist(), c.block, c.smem) for c in want]


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_router_puts_each_pair_in_its_smallest_bin(seed: int) -> None:
    """Each pair goes to the launch of the smallest bin that holds its class pair (the router's table), in
    ascending order, once; pairs no bin holds are left out; int32, int64 and strided pair arrays alike."""
    rng = np.random.default_rng(seed)
    ng = int(rng.integers(1, 40))
    n = rng.integers(1, int(rng.choice([12, 40, 90])), ng)
    nnz = n * rng.integers(1, 4, ng)
    router = compact.CompactRouter(n, nnz, c_bytes=int(rng.choice([4, 8])))
    pairs = rng.integers(0, ng, (int(rng.integers(1, 300)), 2))
    g1, g2 = pairs[:, 0], pairs[:, 1]  # strided views
    launches = router.bins(g1, g2)
    blocks = [block for _, block in compact.BINS]
    want_bin = router.table[router.cls[g1].astype(np.int64) * router.K + router.cls[g2]]
    seen = np.full(len(g1), -1)
    for c in launches:
        b = blocks.index(c.block)
        assert c.pairs.dtype == np.int64 and np.all(np.diff(c.pairs) > 0)
        assert np.all(want_bin[c.pairs] == b) and np.all(seen[c.pairs] == -1)
        seen[c.pairs] = b
    assert np.array_equal(seen >= 0, want_bin < len(compact.BINS))
    again = router.bins(g1.astype(np.int32), np.ascontiguousarray(g2))
    rows = [(c.pairs.tolist(), c.block, c.smem) for c in launches]
    assert [(c.pairs.tolist(), c.block, c.smem) for c in again] == rows


def test_row_arrays_sorts_rows_that_are_not_canonical() -> None:
    """row_arrays takes a Graph's canonical CSR as it is and sorts the columns of a row that does not
    ascend (labels and weights carried along): both give the same arrays."""
    import types

    import scipy.sparse as sp

    from mgkflow.gpu.strategies.row_pair import row_arrays

    rng = np.random.default_rng(5)
    canon, shuffled = [], []
    for n in (5, 11, 17):
        A = sp.random(n, n, density=0.4, random_state=int(rng.integers(1 << 30)), format="csr")
        A = (A + A.T).tocsr()
        A.sort_indices()
        lab = rng.random(A.nnz)
        canon.append(types.SimpleNamespace(graph=types.SimpleNamespace(adjacency=A, edge_labels={"x": lab})))
        order = np.concatenate([lo + rng.permutation(hi - lo) for lo, hi in zip(A.indptr[:-1], A.indptr[1:])])
        B = sp.csr_array((A.data[order], A.indices[order], A.indptr), shape=A.shape)
        shuffled.append(types.SimpleNamespace(graph=types.SimpleNamespace(adjacency=B, edge_labels={"x": lab[order]})))
    a, b = row_arrays(canon, ["x"], np.float32), row_arrays(shuffled, ["x"], np.float32)
    assert a.keys() == b.keys()
    for k in a:
        assert np.array_equal(a[k], b[k]), k


def _slot_product(s: int, n1: int, n2: int, c1: np.ndarray, c2: np.ndarray, o1: np.ndarray, o2: np.ndarray):
    """(i, i2) of thread slot s: mgk_compact.cu's decoding, line for line (c: class starts, o: dord)."""
    q1, base1, end1 = s // n2, 0, n1
    for c in range(compact.NCLS):
        if q1 >= c1[c]:
            base1, end1 = c1[c], c1[c + 1]
    len1, t = end1 - base1, s - base1 * n2
    base2, end2 = 0, n2
    for c in range(compact.NCLS):
        if t >= len1 * c2[c]:
            base2, end2 = c2[c], c2[c + 1]
    len2, t2 = end2 - base2, t - len1 * base2
    x = t2 // len2
    return int(o1[base1 + x]), int(o2[base2 + t2 - x * len2])


def test_slot_order_covers_every_product_by_degree_class() -> None:
    """degree_classes + the kernel's slot decoding: the slots of a pair take every product (i, i2) once,
    in the order (degree class of i, degree class of i2), highest degrees first; padding nodes never."""
    rng = np.random.default_rng(3)
    ncls = compact.NCLS
    for _ in range(60):
        n = rng.integers(1, 40, size=2)
        deg = [rng.integers(0, 8, size=int(k)) for k in n]
        nt = -(-n // 8)
        ptrs = []
        base = 0
        for d, t in zip(deg, nt, strict=True):
            p = base + np.concatenate([[0], np.cumsum(d)])
            ptrs.append(np.concatenate([p, np.full(8 * t - d.size, p[-1])]))
            base = int(p[-1])
        dord, dcls = compact.degree_classes(np.concatenate(ptrs), n, nt)
        assert dord.size == 8 * nt.sum() and dcls.shape == (2 * (ncls + 1),)
        c1, c2 = dcls[: ncls + 1], dcls[ncls + 1 :]
        o1, o2 = dord[: 8 * nt[0]], dord[8 * nt[0] :]
        assert c1[-1] == n[0] and c2[-1] == n[1]
        for c, o in ((c1, o1), (c2, o2)):  # input order within a class (the slots' order, hence the sums', rests on it)
            assert all(np.all(np.diff(o[c[k] : c[k + 1]]) > 0) for k in range(ncls))
        got = [_slot_product(s, int(n[0]), int(n[1]), c1, c2, o1, o2) for s in range(int(n[0] * n[1]))]
        assert sorted(got) == [(i, j) for i in range(n[0]) for j in range(n[1])]
        cls = [(ncls - 1 - min(deg[0][i], ncls - 1), ncls - 1 - min(deg[1][j], ncls - 1)) for i, j in got]
        assert cls == sorted(cls)


def _routed_compact(graphs: list, pairs: np.ndarray) -> np.ndarray:
    """Which pairs the compact bins take on the current (fake) device: by product size and by the shared memory
    the device's opt-in limit leaves (the fake device allows 100 KiB: less than an H100's 227)."""
    n = np.array([g.n_nodes for g in graphs])
    nnz = np.array([g.adjacency.nnz for g in graphs])
    budget = compact.smem_budget(device.device_limits().smem_optin)
    taken = np.zeros(len(pairs), dtype=bool)
    for c in compact.compact_bins(n, nnz, pairs[:, 0], pairs[:, 1], smem_per_sm=budget):
        taken[c.pairs] = True
    return taken


@pytest.mark.parametrize("case", sorted(CASES))
def test_fake_backend_compact_path(fake_backend, case: str) -> None:  # noqa: F811
    """GPUBackend end to end on the fake driver: small pairs go to mgk_solve_compact in size bins (values vs
    the CPU solver), the larger pairs to the per-block kernel; a second call (another q) compiles nothing."""
    drv, backend = fake_backend
    drv.function_attribute = type("FA", (), {"MAX_DYNAMIC_SHARED_SIZE_BYTES": "max_dyn"})
    nk, ek = CASES[case]
    graphs = [_molecule(n, 10 + s) for s, n in enumerate((7, 15, 30, 44, 80))]
    compact_log: list = []
    block_log: list = []
    current: dict = {}

    def factory(src: str) -> Any:
        if compact.KERNEL in src:
            return CompactModule(src, nk, ek, current["config"], compact_log)
        return BlockStub(src, block_log)

    sys.modules["pycuda.compiler"].factory = factory
    be = backend.GPUBackend(rtol=1e-10)
    pairs = np.array([(i, j) for i in range(5) for j in range(i, 5)])
    compiles = []
    for q in (0.05, 0.2):
        systems = [prepare_graph(g, k, nk, ek, q=q) for k, g in enumerate(graphs)]
        current["config"] = be._config(systems, nk, ek)
        vals, its, res, conv = be.solve(systems, systems, pairs, nk, ek)
        small = _routed_compact(graphs, pairs)
        assert 0 < small.sum() < len(pairs) and conv[small].all()
        for t in np.flatnonzero(small):
            i, j = pairs[t]
            ref = solve_pair(systems[i], systems[j], nk, ek, rtol=1e-12).value
            assert abs(vals[t] - ref) <= 1e-7 * abs(ref), (case, q, i, j)
        kernels = [la.get("kernel", "mgk_solve") for la in be.last_extra["launches"]]
        assert kernels.count(compact.KERNEL) >= 2 and "mgk_solve" in kernels
        compiles.append(device.compile_count())
    assert sum(e["jobs"] for e in compact_log) == 2 * int(small.sum())
    assert compiles[1] == compiles[0]  # another q: no compilation


def test_fake_backend_category_build(fake_backend, monkeypatch) -> None:  # noqa: F811
    """GPUBackend on the fake driver, unit-weight molecules with bond orders: the compact launches use the category
    build (their modules CAT, the batch's categories passed), K bit for bit that of the per-pair coefficient
    build (the batch packed without categories) and the CPU solver's; weighted graphs keep the per-pair build."""
    from mgkflow.datasets import default_kernels, molecules
    from mgkflow.gpu import pack


    drv, backend = fake_backend
    drv.function_attribute = type("FA", (), {"MAX_DYNAMIC_SHARED_SIZE_BYTES": "max_dyn"})
    nk, ek = default_kernels("drugs")
    graphs = molecules(8, seed=4, min_atoms=5, max_atoms=40)
    pairs = np.array([(i, j) for i in range(len(graphs)) for j in range(i, len(graphs))])
    systems = [prepare_graph(g, k, nk, ek, q=0.05) for k, g in enumerate(graphs)]
    current: dict = {}
    sys.modules["pycuda.compiler"].factory = lambda src: CompactModule(src, nk, ek, current["config"], [])
    out = []
    for cats in (True, False):
        with monkeypatch.context() as m:
            if not cats:
                m.setattr(pack, "edge_categories", lambda *a: (np.zeros(1, np.int32), np.zeros(1, np.uint32), 0))
            be = backend.GPUBackend(rtol=1e-10)
            current["config"] = be._config(systems, nk, ek)
            vals, _, _, conv = be.solve(systems, systems, pairs, nk, ek)
        launches = be.last_extra["launches"]
        assert conv.all() and launches and all(la.get("kernel") == compact.KERNEL for la in launches)
        assert all((la["ncat"] > 0) == cats for la in launches), launches
        out.append(vals)
    assert np.array_equal(out[0], out[1])
    for t in range(0, len(pairs), 5):
        i, j = pairs[t]
        ref = solve_pair(systems[i], systems[j], nk, ek, rtol=1e-12).value
        assert abs(out[0][t] - ref) <= 1e-7 * abs(ref), (i, j)
    weighted = [_molecule(n, s) for s, n in enumerate((6, 9, 14))]  # weights 1, 1.5, 2: no categories
    nk2, ek2 = CASES["labeled"]
    sys.modules["pycuda.compiler"].factory = lambda src: CompactModule(src, nk2, ek2, current["config"], [])
    ws = [prepare_graph(g, k, nk2, ek2, q=0.05) for k, g in enumerate(weighted)]
    be = backend.GPUBackend(rtol=1e-10)
    current["config"] = be._config(ws, nk2, ek2)
    be.solve(ws, ws, np.array([(0, 1), (1, 2)]), nk2, ek2)
    assert [la["ncat"] for la in be.last_extra["launches"]] == [0]

def test_fake_backend_raises_shared_limit_with_static_memory(fake_backend, monkeypatch) -> None:  # noqa: F811
    """A launch whose dynamic shared memory is under the default limit but over it with the function's static
    shared memory raises the function's limit first (the driver refuses it otherwise: 48,936 dynamic bytes beside
    336 static ones failed on an H100). The default limit is lowered here to just above the smallest launch."""
    drv, backend = fake_backend
    drv.function_attribute = type("FA", (), {"MAX_DYNAMIC_SHARED_SIZE_BYTES": "max_dyn"})
    nk, ek = CASES["labeled"]
    graphs = [_molecule(n, 20 + s) for s, n in enumerate((7, 15, 30, 44))]
    pairs = np.array([(i, j) for i in range(4) for j in range(i, 4)])
    n = np.array([g.n_nodes for g in graphs])
    nnz = np.array([g.adjacency.nnz for g in graphs])
    budget = compact.smem_budget(device.device_limits().smem_optin)
    smallest = min(c.smem for c in compact.compact_bins(n, nnz, pairs[:, 0], pairs[:, 1], smem_per_sm=budget))
    monkeypatch.setattr(device, "SMEM_DEFAULT_LIMIT", smallest + 500)  # static 1,000: that launch needs the raise
    log: list = []
    current: dict = {}

    def factory(src: str) -> Any:
        if compact.KERNEL in src:
            return CompactModule(src, nk, ek, current["config"], log, static=1000)
        return BlockStub(src, [])

    sys.modules["pycuda.compiler"].factory = factory
    be = backend.GPUBackend(rtol=1e-10)
    systems = [prepare_graph(g, k, nk, ek, q=0.05) for k, g in enumerate(graphs)]
    current["config"] = be._config(systems, nk, ek)
    _, _, _, conv = be.solve(systems, systems, pairs, nk, ek)
    assert smallest in [la["smem"] for la in be.last_extra["launches"] if la.get("kernel") == compact.KERNEL]
    assert conv[_routed_compact(graphs, pairs)].all() and log


def _fake_modules(drv: Any, nk: Any, ek: Any) -> dict:
    """Install the fake driver's module factory: the compact solver's modules emulated (CompactModule, with the
    kernel configuration the caller puts under "config" of the returned dict), the per-block ones stubbed."""
    drv.function_attribute = type("FA", (), {"MAX_DYNAMIC_SHARED_SIZE_BYTES": "max_dyn"})
    current: dict = {}

    def factory(src: str) -> Any:
        if compact.KERNEL in src:
            return CompactModule(src, nk, ek, current["config"], [])
        return BlockStub(src, [])

    sys.modules["pycuda.compiler"].factory = factory
    return current


def _global_backend(drv: Any, backend: Any, sizes: tuple, seed: int) -> tuple:
    """(fake backend, prepared systems, node kernel, edge kernel): molecules of ``sizes`` nodes under the labeled
    case's kernels, on a backend whose per-block pairs keep their vectors in global memory (no shared memory)."""
    nk, ek = CASES["labeled"]
    current = _fake_modules(drv, nk, ek)
    graphs = [_molecule(n, seed + s) for s, n in enumerate(sizes)]
    be = backend.GPUBackend(rtol=1e-10, smem_limit=0, wide=False)
    systems = [prepare_graph(g, k, nk, ek, q=0.05) for k, g in enumerate(graphs)]
    current["config"] = be._config(systems, nk, ek)
    return be, systems, nk, ek


def test_fake_backend_skips_tile_sort_when_all_compact(fake_backend) -> None:  # noqa: F811
    """A call whose every pair goes to the compact solver packs the graphs in their own order (no tile
    sort: nothing reads it); with a graph too large for the compact bins the tiles are sorted again.
    The values do not depend on it."""
    drv, backend = fake_backend
    nk, ek = CASES["labeled"]
    current = _fake_modules(drv, nk, ek)
    graphs = [_molecule(n, 20 + s) for s, n in enumerate((7, 15, 30, 90))]
    be = backend.GPUBackend(rtol=1e-10)
    for k, expect_sorted in ((3, False), (4, True)):
        systems = [prepare_graph(g, i, nk, ek, q=0.05) for i, g in enumerate(graphs[:k])]
        current["config"] = be._config(systems, nk, ek)
        pairs = np.array([(i, j) for i in range(3) for j in range(i, 3)])
        vals, _, _, conv = be.solve(systems, systems, pairs, nk, ek)
        assert (be.batches.entry[1].perms is not None) == expect_sorted
        assert conv.all()
        for t, (i, j) in enumerate(pairs):
            ref = solve_pair(systems[i], systems[j], nk, ek, rtol=1e-12).value
            assert abs(vals[t] - ref) <= 1e-7 * abs(ref)


def test_fake_backend_routes_and_launches_in_waves(fake_backend, monkeypatch) -> None:  # noqa: F811
    """A call of many pairs is routed and launched in waves (plan.waves; the threshold lowered here): the
    compact launches of every wave come first, the per-block launches of all waves' large pairs last,
    every pair is solved once, and the values equal those of the same call in one wave."""
    from mgkflow.gpu import plan

    drv, backend = fake_backend
    drv.function_attribute = type("FA", (), {"MAX_DYNAMIC_SHARED_SIZE_BYTES": "max_dyn"})
    nk, ek = CASES["labeled"]
    graphs = [_molecule(n, 40 + s) for s, n in enumerate((7, 15, 30, 44, 80))]
    current: dict = {}
    compact_log: list = []

    def factory(src: str) -> Any:
        if compact.KERNEL in src:
            return CompactModule(src, nk, ek, current["config"], compact_log)
        return BlockStub(src, [])

    sys.modules["pycuda.compiler"].factory = factory
    be = backend.GPUBackend(rtol=1e-10)
    systems = [prepare_graph(g, k, nk, ek, q=0.05) for k, g in enumerate(graphs)]
    current["config"] = be._config(systems, nk, ek)
    pairs = np.array([(i, j) for i in range(5) for j in range(i, 5)])
    small = _routed_compact(graphs, pairs)
    got = {}
    for threshold in (1 << 30, 4):
        monkeypatch.setattr(plan, "WAVE_MIN_PAIRS", threshold)
        compact_log.clear()
        vals, _, _, conv = be.solve(systems, systems, pairs, nk, ek)
        kinds = [la.get("kernel", "mgk_solve") for la in be.last_extra["launches"]]
        assert sum(la["pairs"] for la in be.last_extra["launches"]) == len(pairs)
        assert sum(e["jobs"] for e in compact_log) == int(small.sum()) and conv[small].all()
        last_compact = max(t for t, k in enumerate(kinds) if k == compact.KERNEL)
        assert "mgk_solve" in kinds and all(k == "mgk_solve" for k in kinds[last_compact + 1 :])
        got[threshold] = (vals[small], kinds.count(compact.KERNEL))
    assert len(plan.waves(len(pairs))) >= 2
    assert got[4][1] > got[1 << 30][1]  # the bins of each wave have their own launches
    assert np.array_equal(got[4][0], got[1 << 30][0])
    for t in np.flatnonzero(small):
        i, j = pairs[t]
        ref = solve_pair(systems[i], systems[j], nk, ek, rtol=1e-12).value
        assert abs(vals[t] - ref) <= 1e-7 * abs(ref)


def test_fake_backend_global_pairs_run_one_block_per_sm(fake_backend) -> None:  # noqa: F811
    """A value call's pairs whose vectors all stay in global memory (no shared memory allowed here) run in
    blocks of RESIDENT_BLOCK threads built for one block per SM (their largest pairs finish a launch last:
    gpu/NOTES.md, session 30); the compact pairs keep their bins."""
    from mgkflow.gpu.solvers.per_block import RESIDENT_BLOCK

    drv, backend = fake_backend
    drv.function_attribute = type("FA", (), {"MAX_DYNAMIC_SHARED_SIZE_BYTES": "max_dyn"})
    nk, ek = CASES["labeled"]
    graphs = [_molecule(n, 60 + s) for s, n in enumerate((7, 80, 90))]
    current: dict = {}
    block_log: list = []
    sources: list = []

    def factory(src: str) -> Any:
        if compact.KERNEL in src:
            return CompactModule(src, nk, ek, current["config"], [])
        sources.append(src)
        return BlockStub(src, block_log)

    sys.modules["pycuda.compiler"].factory = factory
    be = backend.GPUBackend(rtol=1e-10, smem_limit=0, wide=False)
    systems = [prepare_graph(g, k, nk, ek, q=0.05) for k, g in enumerate(graphs)]
    current["config"] = be._config(systems, nk, ek)
    pairs = np.array([(i, j) for i in range(3) for j in range(i, 3)])
    be.solve(systems, systems, pairs, nk, ek)
    per_block = [la for la in be.last_extra["launches"] if la.get("kernel") != compact.KERNEL]
    assert block_log == [RESIDENT_BLOCK] and [la["block"] for la in per_block] == [RESIDENT_BLOCK]
    assert not per_block[0]["shared"] and per_block[0]["pairs"] == 3  # 80 x 80, 80 x 90, 90 x 90 nodes
    built = [src for src in sources if f"#define BLOCK {RESIDENT_BLOCK}" in src]
    assert built and all(re.search(r"#define MIN_BLOCKS 1\b", src) for src in built)


def test_fake_backend_call_figures_split_the_host_time(fake_backend) -> None:  # noqa: F811
    """A call's figures split its host time: before the first kernel was queued (``prelaunch_s``, the device idle)
    and after the device's work (``tail_s``), both within the call's ``host_s``; every call measures its own."""
    import time

    drv, backend = fake_backend
    be, systems, nk, ek = _global_backend(drv, backend, (7, 80, 90), 70)
    pairs = np.array([(i, j) for i in range(3) for j in range(i, 3)])
    firsts = []
    for _ in range(2):
        t0 = time.perf_counter()
        be.solve(systems, systems, pairs, nk, ek)
        ex = be.last_extra
        assert 0 < ex["prelaunch_s"] and 0 < ex["tail_s"] and ex["prelaunch_s"] + ex["tail_s"] <= ex["host_s"]
        first = be.launcher.first_launch_at
        assert first is not None and abs(first - (t0 + ex["prelaunch_s"])) < 0.05
        firsts.append(first)
    assert firsts[1] > firsts[0]


def test_fake_backend_keeps_the_value_plan_of_a_repeated_call(fake_backend) -> None:  # noqa: F811
    """A value call that repeats the pairs of the call before on the same batch (the steps of a hyperparameter
    search, repeated calls) reuses its compact routing with the launches' job lists, its per-block plan, the pairs'
    sizes and costs and the per-block launches' job orders, whether the pairs come as the same array or an equal
    one, and gets the same values (the compact solver's, emulated); other pairs are planned anew, with their own
    sizes."""
    drv, backend = fake_backend
    be, systems, nk, ek = _global_backend(drv, backend, (7, 80, 90), 80)
    splits = []
    split = be.compact_path.split
    be.compact_path.split = lambda *a: splits.append(1) or split(*a)
    pairs = np.array([(i, j) for i in range(3) for j in range(i, 3)])
    vals = be.solve(systems, systems, pairs, nk, ek)[0]
    first = be._value_kept
    plan, orders = first.data.plan, first.data.orders
    assert len(orders) == 1 and plan.global_.size == 3  # the three pairs of 80- and 90-node graphs
    compact_jobs = [jobs for _, wave in first.data.routed[0] for _, jobs in wave]
    assert splits == [1] and len(compact_jobs) >= 1 and all(j is not None for j in compact_jobs)
    small = np.flatnonzero((pairs == 0).any(axis=1))  # the 7-node molecule's pairs: the compact solver's
    for again in (pairs, pairs.copy()):
        np.testing.assert_array_equal(be.solve(systems, systems, again, nk, ek)[0][small], vals[small])
        assert be._value_kept is first and len(orders) == 1 and next(iter(orders.values()))[0] is not None
        assert splits == [1] and [j for _, w in first.data.routed[0] for _, j in w] == compact_jobs
    swapped = pairs[::-1].copy()
    be.solve(systems, systems, swapped, nk, ek)
    second = be._value_kept
    assert second is not first and second.data.plan is not plan
    db = second.db
    N = db.nt[swapped[:, 0]] * db.nt[swapped[:, 1]] * 64
    rest = second.data.routed[1]
    assert np.array_equal(second.data.N[rest], N[rest]) and not second.data.N[np.setdiff1d(np.arange(6), rest)].any()
    assert sorted(rest.tolist()) == sorted(np.flatnonzero((swapped > 0).all(axis=1)).tolist())


def test_fake_backend_plans_anew_where_the_batch_is_split_otherwise(fake_backend) -> None:  # noqa: F811
    """The same pairs of the same three graphs are other pairs where ``xs`` and ``ys`` split them otherwise:
    (0, 0) of xs = [A, B], ys = [C] is (A, C), of xs = [A], ys = [B, C] it is (A, B). The second call is
    planned with its own sizes and job list, not the kept ones of the first."""
    drv, backend = fake_backend
    be, (a, b, c), nk, ek = _global_backend(drv, backend, (80, 90, 130), 90)
    pairs = np.array([[0, 0]])
    sizes = []
    for xs, ys in (([a, b], [c]), ([a], [b, c])):
        be.solve(xs, ys, pairs, nk, ek)
        kept = be._value_kept
        sizes.append((kept.db, int(kept.data.N[0])))
    (db1, n1), (db2, n2) = sizes
    assert db1 is db2  # one batch of A, B, C
    assert n1 == db1.nt[0] * db1.nt[2] * 64 and n2 == db1.nt[0] * db1.nt[1] * 64 and n1 != n2


@pytest.mark.parametrize("normalize", [True, False])
def test_fake_value_gram_assembled_on_the_device(fake_backend, normalize: bool) -> None:  # noqa: F811
    """A value Gram call that repeats the call before (a θ loop's steps) keeps its results on the (fake) device
    and assembles K there (``mgk_assemble.cu`` without derivative columns, emulated): bit for bit the host
    assembly of a fresh backend at the same hyperparameters; the first call assembles on the host."""
    from test_gpu_gradient import _AssembleModule

    from mgkflow.mgk import MarginalizedGraphKernel

    drv, backend = fake_backend
    drv.function_attribute = type("FA", (), {"MAX_DYNAMIC_SHARED_SIZE_BYTES": "max_dyn"})
    nk, ek = CASES["labeled"]
    graphs = [_molecule(n, 110 + s) for s, n in enumerate((7, 9, 12, 15, 11))]
    current: dict = {}
    made: list = []  # the compact modules (kept between calls: each takes the current node kernel)

    def factory(src: str) -> Any:
        if "gram_assemble" in src:
            return _AssembleModule(src)
        if compact.KERNEL in src:
            made.append(CompactModule(src, current["nk"], current["ek"], current["config"], []))
            return made[-1]
        return BlockStub(src, [])

    def node_kernel(h: float) -> KroneckerDelta:
        current["nk"] = KroneckerDelta(h, "label")
        for m in made:
            m.nk = current["nk"]
        return current["nk"]

    sys.modules["pycuda.compiler"].factory = factory

    def kernel(be: Any, h: float) -> MarginalizedGraphKernel:
        kn = KroneckerDelta(h, "label")
        kern = MarginalizedGraphKernel(kn, ek, q=0.05, normalize=normalize)
        kern._backend_obj = be
        systems = [prepare_graph(g, k, kn, ek, q=0.05) for k, g in enumerate(graphs)]
        current.update(nk=kn, ek=ek, config=be._config(systems, kn, ek))
        return kern

    be = backend.GPUBackend(rtol=1e-10)
    kg = kernel(be, 0.5)
    first = kg(graphs)
    assert "assembly_s" not in kg.last_stats.extra and np.isfinite(first).all()
    for h in (0.5, 0.3):
        kg.node_kernel = node_kernel(h)  # the same kernel object: its systems are kept
        _AssembleModule.log.clear()
        K = kg(graphs)
        assert _AssembleModule.log == ["gram_diagonal", "gram_assemble"] and "assembly_s" in kg.last_stats.extra
        ref = kernel(backend.GPUBackend(rtol=1e-10), h)
        node_kernel(h)
        K0 = ref(graphs)
        assert "assembly_s" not in ref.last_stats.extra
        np.testing.assert_array_equal(K, K0)
        np.testing.assert_array_equal(kg.last_stats.iterations, ref.last_stats.iterations)
        assert kg.last_stats.converged.all()
    kg.node_kernel = node_kernel(0.5)
    np.testing.assert_array_equal(kg(graphs), first)


@pytest.mark.skipif(NVCC is None, reason="nvcc not on PATH")
def test_nvcc_compiles_without_spills(tmp_path: Path) -> None:
    """The compact solver's launch configurations (64 to 512 threads) compile for sm_90 with the
    solver's options, no warning, no spill at 512 threads per SM, for labeled, unlabeled and double-weight
    kernels, with per-pair coefficients and in the category build (unit weights); the other bins (96 to 1,024
    threads, with production's blocks per SM) without a warning, in both builds."""
    configs = {
        "kd-kd": (KroneckerDelta(0.5, "element"), KroneckerDelta(0.5, "bond"), {"element": "int64"},
                  {"bond": "float64"}, "rows"),  # fmt: skip
        "unlabeled": (Constant(1.0), Constant(1.0), {}, {}, "rows"),
        "kd-se": (KroneckerDelta(0.5, "label"), SquareExponential(1.0, "length"), {"label": "int64"}, {}, "rows"),
        "kd-kd-512": (KroneckerDelta(0.5, "element"), KroneckerDelta(0.5, "bond"), {"element": "int64"},
                      {"bond": "int64"}, "rows"),  # fmt: skip
    }
    builds = [(name, spec, block, False) for (name, spec), block in zip(configs.items(), (64, 128, 256, 512))]
    builds += [(f"{name}-cat", spec, block, True) for (name, spec), block in zip(configs.items(), (512, 256, 128, 64))]
    for name, (nk, ek, nd, ed, xmv), block, cat in builds:
        cfg = make_config(nk, ek, nd, ed, row_ilp=2, xmv=xmv, weight_double=name == "unlabeled", unit_weight=cat)
        path = tmp_path / f"{name}.cu"
        path.write_text(compact.compact_source(cfg, block, max(1, 512 // block), cat))
        cubin = str(path.with_suffix(".cubin"))
        cmd = [NVCC, "-arch=sm_90", "-cubin", "-O3", "-std=c++17", "-Xptxas", "-v", "-o", cubin, str(path)]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, f"{name}:\n{proc.stderr}"
        assert "warning" not in proc.stderr.lower(), f"{name}:\n{proc.stderr}"
        spills = [int(v) for v in re.findall(r"(\d+) bytes spill stores", proc.stderr)]
        assert spills and max(spills) == 0, f"{name}:\n{proc.stderr}"
    nk, ek = KroneckerDelta(0.5, "element"), KroneckerDelta(0.5, "bond")
    for block, cat in itertools.product({b for _, b in compact.BINS} - {64, 128, 256, 512}, (False, True)):
        cfg = make_config(nk, ek, {"element": "int64"}, {"bond": "int64"}, row_ilp=2, xmv="rows", unit_weight=cat)
        path = tmp_path / f"kd-kd-{block}-{int(cat)}.cu"  # the other bins, as in production
        path.write_text(compact.compact_source(cfg, block, max(1, compact.MIN_THREADS // block), cat))
        cmd = [NVCC, "-arch=sm_90", "-cubin", "-O3", "-std=c++17", "-o", str(path.with_suffix(".cubin")), str(path)]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0 and "warning" not in proc.stderr.lower(), f"{block}:\n{proc.stderr}"


@pytest.mark.parametrize("overlap", [False, True])
def test_fake_tiled_gram_packs_once(fake_backend, overlap: bool, monkeypatch) -> None:  # noqa: F811
    """The tiled Gram path on the fake GPU: every block's pairs are solved within the whole set,
    packed once for all blocks and solver threads (each thread's backend uploads that host batch);
    the molecules' pairs run in the compact kernel; values as the CPU backend, bit for bit the same
    with and without overlap."""
    from mgkflow.datasets import default_kernels, molecules
    from mgkflow.gram import tiled
    from mgkflow.mgk import MarginalizedGraphKernel

    drv, backend = fake_backend
    drv.function_attribute = type("FA", (), {"MAX_DYNAMIC_SHARED_SIZE_BYTES": "max_dyn"})
    streams: list = []

    class Stream:  # the overlapped path's per-thread streams: every async call must name one
        def __init__(self) -> None:
            streams.append(self)

        def synchronize(self) -> None:
            pass

    def in_stream(fn: Any, legacy: bool = False) -> Any:  # legacy: the legacy stream (None) is fine too
        def call(*a: Any) -> None:
            assert isinstance(a[-1], Stream) or (legacy and a[-1] is None), a[-1]
            fn(*a[:-1])

        return call

    class Event:
        def record(self, stream: Any = None) -> None:
            assert stream is None or isinstance(stream, Stream)

        def query(self) -> bool:
            return True

        def synchronize(self) -> None:
            pass

        def time_since(self, other: Any) -> float:
            return 1.0

    drv.Stream, drv.Event = Stream, Event
    drv.memset_d32_async = in_stream(drv.memset_d32)
    drv.memcpy_htod_async = in_stream(drv.memcpy_htod, legacy=not overlap)
    drv.memcpy_dtoh_async = in_stream(drv.memcpy_dtoh, legacy=not overlap)  # read-backs queued behind kernels
    nk, ek = default_kernels("drugs")
    graphs = molecules(9, seed=4, max_atoms=30)
    compact_log: list = []
    block_log: list = []
    cfg: dict = {}

    def factory(src: str) -> Any:
        if compact.KERNEL in src:
            return CompactModule(src, nk, ek, cfg["config"], compact_log)
        return BlockStub(src, block_log)

    sys.modules["pycuda.compiler"].factory = factory
    packs: list[int] = []
    real_pack = backend.pack_host

    def counting_pack(systems, config, sort):
        packs.append(len(systems))
        cfg["config"] = config
        return real_pack(systems, config, sort)

    monkeypatch.setattr(backend, "pack_host", counting_pack)  # GPUBackend.host_batch
    monkeypatch.setattr(batch, "pack_host", counting_pack)  # BatchCache.device_batch
    kern = MarginalizedGraphKernel(nk, ek, q=0.05, backend="gpu", rtol=1e-10, )
    res = tiled.tiled_gram(graphs, kernel=kern, block_size=4, check_memory=False, overlap=overlap)
    assert res.blocks == 6 and packs == [len(graphs)] and not block_log
    # one stream per solver thread (the pool may start its second thread or not)
    assert len(streams) in (1, 2) if overlap else not streams
    assert res.computed == [b.key for b in tiled.plan_blocks(len(graphs), None, 4)]  # reported in block order
    assert sum(e["jobs"] for e in compact_log) == len(graphs) * (len(graphs) + 1) // 2
    ref = MarginalizedGraphKernel(nk, ek, q=0.05, backend="cpu")(graphs)
    assert np.allclose(res.matrix, ref, rtol=1e-7, atol=0)
    if overlap:
        compact_log.clear()
        serial = tiled.tiled_gram(graphs, kernel=kern, block_size=4, check_memory=False)
        assert np.array_equal(serial.matrix, res.matrix)


def test_job_order_large_launches(fake_backend) -> None:  # noqa: F811
    """Jobs go largest cost first: exactly up to SORT_EXACT_MAX pairs, by cost classes beyond (a permutation
    whose costs never rise by more than one class, 2**(1/512)); unsorted with sort_jobs=False."""
    drv, backend = fake_backend
    rng = np.random.default_rng(0)
    be = backend.GPUBackend()
    for n in (1000, backend.SORT_EXACT_MAX + 5000):
        cost = rng.integers(1, 10**6, n).astype(np.float64)
        sel = np.arange(n)[::-1].copy()
        order = be.per_block_path.job_order(sel, cost)
        assert sorted(order.tolist()) == list(range(n))
        c = cost[order]
        if n <= backend.SORT_EXACT_MAX:
            assert np.all(np.diff(c) <= 0)
        else:
            assert np.all(c[1:] <= c[:-1] * 2 ** (1 / 512) * (1 + 1e-9) + 1)
    be.sort_jobs = False
    assert be.per_block_path.job_order(np.arange(5), np.ones(5)).tolist() == [0, 1, 2, 3, 4]


# ---------------------------------------------------------------------------------------- device
@pytest.mark.gpu
@pytest.mark.parametrize("case", sorted(CASES))
def test_gpu_compact_matches_cpu_and_block(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a GPU: the compact kernel gives the CPU values (1e-7) and the per-block kernel's (2e-7) on
    molecule-like graphs of 10-64 atoms (every bin), labeled and unlabeled, q = 0.05 and 0.0005; its category
    build (these unit-weight molecules' default) the values of the per-pair coefficient build, bit for bit."""
    from mgkflow.datasets import molecules
    from mgkflow.gpu import GPUBackend, pack

    nk, ek = CASES[case]
    if case == "labeled":
        from mgkflow.datasets import default_kernels

        nk, ek = default_kernels("drugs")
    graphs = molecules(24, seed=7, min_atoms=8, max_atoms=60) + molecules(2, seed=3, min_atoms=56, max_atoms=64)
    pairs = np.array([(i, j) for i in range(len(graphs)) for j in range(i, len(graphs))])
    for q in (0.05, 0.0005):
        systems = [prepare_graph(g, k, nk, ek, q=q) for k, g in enumerate(graphs)]
        be = GPUBackend()
        vc, itc, _, cc = be.solve(systems, systems, pairs, nk, ek)
        used = [la["block"] for la in be.last_extra["launches"] if la.get("kernel") == compact.KERNEL]
        assert sorted(used) == sorted(b for _, b in compact.BINS)  # one launch per bin
        assert all(la["ncat"] > 0 for la in be.last_extra["launches"] if la.get("kernel") == compact.KERNEL)
        with monkeypatch.context() as m:
            m.setattr(pack, "edge_categories", lambda *a: (np.zeros(1, np.int32), np.zeros(1, np.uint32), 0))
            per_pair = GPUBackend()
            vp, itp, _, cp = per_pair.solve(systems, systems, pairs, nk, ek)
            assert not any(la.get("ncat") for la in per_pair.last_extra["launches"])
        assert np.array_equal(vc, vp) and np.array_equal(itc, itp) and cp.all()
        with monkeypatch.context() as m:
            m.setattr(compact, "BINS", ())
            blk = GPUBackend()
            vb, itb, _, cb = blk.solve(systems, systems, pairs, nk, ek)
            assert not any(la.get("kernel") == compact.KERNEL for la in blk.last_extra["launches"])
        assert cc.all() and cb.all()
        assert np.max(np.abs(vc - vb) / np.abs(vb)) <= 2e-7
        for t in range(0, len(pairs), 37):
            i, j = pairs[t]
            ref = solve_pair(systems[i], systems[j], nk, ek, rtol=1e-12).value
            assert abs(vc[t] - ref) <= 1e-7 * abs(ref), (case, q, i, j)
