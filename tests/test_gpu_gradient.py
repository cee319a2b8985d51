"""GPU derivatives and node-pair similarities (mgkflow.gpu.gradient, mgk_gradient.cuh).

CPU part: the numpy emulation of the gradient kernel (mgkflow.gpu.emulate) against the float64
oracle (backends.exact.solve_pair_gradient), the unlabeled closed form against the oracle, and
GPUBackend.solve_gradient / solve_nodal end to end on a fake PyCUDA driver whose ``mgk_solve``
is the emulation, bound to the parameters declared in the generated source. GPU part (marked
gpu, skipped without a device): analytic dK on the device vs the CPU's.
"""

from __future__ import annotations

import re
import sys
from types import SimpleNamespace
from typing import Any

import networkx as nx
import numpy as np
import pytest
from test_wide import FakeAlloc, _decode_labels, fake_backend  # noqa: F401 (fixture)

from mgkflow.backends.exact import ExactBackend, solve_pair_gradient
from mgkflow.gpu import device, emulate
from mgkflow.gpu.emulate import pcg2_blocked, pcg_blocked, solve_pair_blocked, system_blocked, xmv_rows
from mgkflow.gpu.gradient import closed_form, closed_form_ok
from mgkflow.gpu.pack import pack_host, weights_need_double
from mgkflow.gpu.source import KPAR, kernel_source, kernel_values, make_config
from mgkflow.graph import Graph
from mgkflow.kernels import BaseKernel, Constant, KroneckerDelta, SquareExponential
from mgkflow.system import GraphSystem, prepare_graph


def _graph(n: int, p: float, seed: int, isolated: bool = False, weights: str = "float32") -> Graph:
    G = nx.gnp_random_graph(n, p, seed=seed)
    if isolated:
        G.add_node(n)  # a node without edges
    return _labeled(G, seed, weights)


def _ring(n: int, seed: int) -> Graph:
    """A ring with a few chords (the paper's NWS shape): ~2 entries a row, a light XMV pass."""
    return _labeled(nx.newman_watts_strogatz_graph(n, 2, 0.05, seed=seed), seed)


def _labeled(G: nx.Graph, seed: int, weights: str = "float32") -> Graph:
    rng = np.random.default_rng(seed)
    for e in G.edges:
        G.edges[e]["length"] = float(np.float32(rng.uniform(1, 2)))
        G.edges[e]["order"] = int(rng.integers(1, 3))
        w = rng.uniform(0.5, 2.0)
        G.edges[e]["weight"] = float(w) if weights == "float64" else float(np.float32(w))
    for v in G.nodes:
        G.nodes[v]["label"] = int(rng.integers(0, 3))
    return Graph.from_networkx(G, node_labels=["label"], edge_labels=["length", "order"])


KERNELS = {
    "kd-se": (KroneckerDelta(0.5, "label"), SquareExponential(1.3, "length")),
    "products": (
        KroneckerDelta(0.4, "label") * Constant(0.9),
        KroneckerDelta(0.7, "order") * SquareExponential(0.8, "length"),
    ),
    "sum-node": (0.5 * KroneckerDelta(0.5, "label") + 0.5 * Constant(1.0), Constant(0.8)),
    "unlabeled": (Constant(1.0), Constant(1.0)),
}


def _normwise(G: np.ndarray, R: np.ndarray) -> float:
    """max over entries of |error| / max over entries of |R|, per column; the worst column."""
    scale = np.maximum(np.abs(R).max(axis=0), 1e-300)
    return float((np.abs(G - R).max(axis=0) / scale).max())


def _config(systems: list[GraphSystem], nk: BaseKernel, ek: BaseKernel, **kw: Any):
    first = systems[0].graph
    return make_config(
        nk, ek,
        {f: np.asarray(first.node_labels[f]).dtype for f in nk.fields},
        {f: np.asarray(first.edge_labels[f]).dtype for f in ek.fields},
        weight_double=weights_need_double(systems), **kw,
    )  # fmt: skip


# ------------------------------------------------------------------------------------- emulation
@pytest.mark.parametrize("case", list(KERNELS))
@pytest.mark.parametrize("q", [0.05, 0.002])
def test_emulated_gradient_matches_cpu(case: str, q: float) -> None:
    nk, ek = KERNELS[case]
    graphs = [_graph(11, 0.35, 1), _graph(17, 0.2, 2, isolated=True, weights="float64"), _graph(6, 0.6, 3)]
    systems = [prepare_graph(g, k, nk, ek, q=q) for k, g in enumerate(graphs)]
    config = _config(systems, nk, ek, gradient=True)
    hb = pack_host(systems, config, sort=True)  # the backend's layout: nodes sorted by degree per tile
    h = hb.host
    hdr = h["hdr"].reshape(-1, 5)
    nlab = _decode_labels(h["nlab"], config.node_fields, hb.nlab_stride)
    elab = _decode_labels(h["relab"], config.edge_fields, hb.relab_stride)
    rows = {k: h[k] for k in ("rrowptr", "rcoff", "rweight")}
    for g1, g2 in ((0, 1), (1, 1), (2, 0), (1, 2)):
        got = solve_pair_blocked(rows, hdr, g1, g2, nlab, elab, nk, ek, h["d"], h["p"], h["q"], rtol=1e-13)
        ref = solve_pair_gradient(systems[g1], systems[g2], nk, ek, wrt_q=True)
        assert got["converged"]
        assert abs(got["k"] - ref.value) <= 1e-9 * abs(ref.value)
        n_nh = len(nk.hyperparameters) + len(ek.hyperparameters)
        grad = np.concatenate([got["grad"][:n_nh], got["grad"][-1:]])
        assert _normwise(grad[None], ref.gradient[None]) <= 1e-8, (case, g1, g2, grad, ref.gradient)


def _emulation_inputs(systems: list[GraphSystem], nk: BaseKernel, ek: BaseKernel) -> tuple:
    config = _config(systems, nk, ek, gradient=True)
    hb = pack_host(systems, config, sort=True)
    h = hb.host
    hdr = h["hdr"].reshape(-1, 5)
    nlab = _decode_labels(h["nlab"], config.node_fields, hb.nlab_stride)
    elab = _decode_labels(h["relab"], config.edge_fields, hb.relab_stride)
    rows = {k: h[k] for k in ("rrowptr", "rcoff", "rweight")}
    return h, hdr, nlab, elab, rows


def test_emulated_joint_pcg_follows_two_separate_solves() -> None:
    """The joint PCG (two recurrences sharing each XMV pass) gives each system the iterates of its own
    PCG: here x converges in one iteration (regular graphs, constant kernels, x is constant) while the
    adjoint (a non-uniform p) goes on alone; the two-vector XMV equals two one-vector ones."""
    nk, ek = Constant(1.0), Constant(0.8)
    p1 = np.linspace(0.5, 1.5, 8)
    systems = [prepare_graph(Graph.from_networkx(nx.cycle_graph(8)), 0, nk, ek, q=0.1, p=p1),
               prepare_graph(Graph.from_networkx(nx.circulant_graph(10, [1, 3])), 1, nk, ek, q=0.1)]  # fmt: skip
    h, hdr, nlab, elab, rows = _emulation_inputs(systems, nk, ek)
    rng = np.random.default_rng(0)
    for g1, g2 in ((0, 1), (0, 0)):
        DG, b, px, _ = system_blocked(hdr, g1, g2, nlab, nk, h["d"], h["p"], h["q"])
        calls: list[tuple] = []

        def xmv(P: np.ndarray, g1: int = g1, g2: int = g2, calls: list = calls) -> np.ndarray:
            calls.append(np.shape(P))
            return xmv_rows(rows, hdr, g1, g2, P, elab, ek)

        two = rng.standard_normal((b.size, 2))
        both = xmv(two)
        assert np.array_equal(both[:, 0], xmv(two[:, 0])) and np.array_equal(both[:, 1], xmv(two[:, 1]))
        calls.clear()
        X, Y, its, res, conv, passes = pcg2_blocked(DG, b, px, xmv, 1e-12, 500)
        joint = list(calls)
        X1, it1, r1, c1 = pcg_blocked(DG, b, xmv, 1e-12, 500)
        Y1, it2, r2, c2 = pcg_blocked(DG, px, xmv, 1e-12, 500)
        assert its == [it1, it2] and conv == [c1, c2] == [True, True]
        assert its[0] == 1 < its[1] and passes == its[1]
        # one pass on both directions, then the adjoint alone
        assert joint[0] == (b.size, 2) and all(c == (b.size,) for c in joint[1:]) and len(joint) == passes
        assert np.allclose(X, X1, rtol=1e-13, atol=0) and np.allclose(Y, Y1, rtol=1e-13, atol=0)
        assert max(res) <= 1e-12 and max(r1, r2) <= 1e-12
        ref = solve_pair_gradient(systems[g1], systems[g2], nk, ek, wrt_q=True)
        got = solve_pair_blocked(rows, hdr, g1, g2, nlab, elab, nk, ek, h["d"], h["p"], h["q"], rtol=1e-13)
        assert got["converged"] and abs(got["k"] - ref.value) <= 1e-9 * abs(ref.value)
        assert got["iterations"] == max(got["iterations_xy"])
        assert _normwise(got["grad"][None, [0, 1, 2]], ref.gradient[None]) <= 1e-8


def test_emulated_joint_pcg_stops_each_system_at_max_iter() -> None:
    nk, ek = KERNELS["kd-se"]
    systems = [prepare_graph(_graph(n, p, 7 + k), k, nk, ek, q=0.01) for k, (n, p) in enumerate(((13, 0.3), (9, 0.4)))]
    h, hdr, nlab, elab, rows = _emulation_inputs(systems, nk, ek)
    got = solve_pair_blocked(rows, hdr, 0, 1, nlab, elab, nk, ek, h["d"], h["p"], h["q"], rtol=1e-13, max_iter=3)
    assert got["iterations_xy"] == [3, 3] and got["passes"] == 3 and not got["converged"]
    assert got["residual"] > 1e-13
    full = solve_pair_blocked(rows, hdr, 0, 1, nlab, elab, nk, ek, h["d"], h["p"], h["q"], rtol=1e-13)
    assert full["converged"] and min(full["iterations_xy"]) > 3


# ------------------------------------------------------------------------------------- closed form
@pytest.mark.parametrize("cv,ce", [(1.0, 1.0), (0.7, 0.4), (0.9, 0.0)])
@pytest.mark.parametrize("q", [0.05, 0.5, 0.0005])
def test_closed_form_matches_oracle(cv: float, ce: float, q: float) -> None:
    nk, ek = Constant(cv), Constant(ce)
    a = prepare_graph(_graph(9, 0.5, 4, weights="float64"), 0, nk, ek, q=q, p=0.3)
    b = prepare_graph(Graph.from_networkx(nx.cycle_graph(5)), 1, nk, ek, q=q)
    assert closed_form_ok(a) and closed_form_ok(b)
    for s1, s2 in ((a, b), (a, a), (b, b)):
        k, grad = closed_form(s1, s2, nk, ek, wrt_q=True)
        ref = solve_pair_gradient(s1, s2, nk, ek, wrt_q=True)
        assert abs(k - ref.value) <= 1e-9 * abs(ref.value)
        assert np.allclose(grad, ref.gradient, rtol=1e-7, atol=0), (grad, ref.gradient)


def test_closed_form_refuses_where_it_does_not_hold() -> None:
    nk, ek = Constant(1.0), Constant(1.0)
    iso = prepare_graph(_graph(7, 0.5, 5, isolated=True), 0, nk, ek, q=0.1)
    assert not closed_form_ok(iso)
    ok = prepare_graph(Graph.from_networkx(nx.cycle_graph(4)), 1, nk, ek, q=0.1)
    qvec = prepare_graph(Graph.from_networkx(nx.cycle_graph(4)), 2, nk, ek, q=np.array([0.1, 0.2, 0.1, 0.1]))
    assert not closed_form_ok(qvec)
    with pytest.raises(ValueError, match="no node without edges"):
        closed_form(iso, ok, nk, ek)
    with pytest.raises(ValueError, match="Constant"):
        closed_form(ok, ok, KroneckerDelta(0.5, "label"), ek)
    other_q = prepare_graph(Graph.from_networkx(nx.cycle_graph(4)), 3, nk, ek, q=0.2)
    with pytest.raises(ValueError, match="one scalar q"):
        closed_form(ok, other_q, nk, ek, wrt_q=True)


# ------------------------------------------------------------------------------------- fake driver
class _SolverModule(device.Module):
    """``mgk_solve`` (gradient / nodal configurations) on the fake driver: arguments bound by the
    declared parameters (count, order, pointer or scalar, scalar width) and emulated in numpy."""

    log: list[dict] = []

    #: kernels and configurations of the current call (a compiled module outlives a call: new values
    #: of the hyperparameters reach it through mgk_kpar only)
    current: dict = {}

    def __init__(self, source: str) -> None:
        super().__init__(self, source)
        self.src = source
        self.gradient = "#define GRADIENT 1" in source
        self.nodal = "#define NODAL 1" in source
        self.block = int(re.search(r"#define BLOCK (\d+)", source).group(1))
        self.kpar = FakeAlloc(4 * int(re.search(rf"__constant__ float {KPAR}\[(\d+)\]", source).group(1)))

    def get_global(self, name: str) -> tuple[FakeAlloc, int]:
        assert name == KPAR
        return self.kpar, self.kpar.nbytes

    def get_function(self, name: str) -> Any:
        assert name == "mgk_solve"
        mod = self

        class Func:
            num_regs = 64
            shared_size_bytes = 320

            def set_attribute(self, *a: Any) -> None:
                pass

            def __call__(self, *args: Any, block: tuple, grid: tuple, shared: int = 0) -> None:
                mod.launch(args, block, grid, shared)

        return Func()

    def launch(self, args: tuple, block: tuple, grid: tuple, shared: int) -> None:
        params = self.signatures["mgk_solve"]
        assert len(args) == len(params), (len(args), [p.name for p in params])
        assert block == (self.block, 1, 1) and grid[0] >= 1
        self.nk, self.ek = _SolverModule.current["nk"], _SolverModule.current["ek"]
        self.config = _SolverModule.current["configs"]["#define GRADIENT 1" in self.src]
        assert np.array_equal(self.kpar.view(np.float32), kernel_values(self.nk, self.ek)), "kernel values not set"
        kw = {}
        for p, v in zip(params, args, strict=True):
            if p.kind == "P":  # an allocation, or a pointer into one (results kept on the device)
                assert isinstance(v, FakeAlloc | np.uintp), p
                kw[p.name] = v.view(p.dtype) if isinstance(v, FakeAlloc) else FakeAlloc.at(v, p.dtype)
            else:
                assert type(v) is p.dtype.type, (p, type(v))
                kw[p.name] = v.item()
        names = {p.name for p in params}
        assert ("out_grad" in names) == self.gradient and ("out_nodal" in names) == self.nodal
        cfg = self.config
        n_max = kw["n_max"]
        # the kernel's layout: X, R, DG, DI (and X_y, R_y for the gradient) in global memory, then the search
        # directions and products (two systems' for the gradient) unless they are in shared memory
        nsys = 2 if self.gradient else 1
        a_words = -(-n_max * 4 // 8)  # float32 A
        need = {1: (4 + 2 * (nsys - 1)) * n_max, 0: (4 + 2 * (nsys - 1) + nsys) * n_max + nsys * a_words}
        if kw["use_smem"] == 3:  # resident: DG, DI, X, X_y in global memory, both systems' P, A, R shared
            assert self.gradient and "#define RESIDENT 1" in self.src
            assert kw["scratch_per_block"] >= 4 * n_max and shared >= 24 * n_max, (kw["scratch_per_block"], shared)
        else:
            assert kw["scratch_per_block"] >= need[1 if kw["use_smem"] else 0]
        assert 8 * kw["scratch_per_block"] * grid[0] <= args[[p.name for p in params].index("scratch")].nbytes
        if kw["use_smem"] in (1, 2):  # P, A (and P_y, A_y) in shared memory: 12 bytes per entry per system
            assert shared >= 12 * nsys * n_max, (shared, n_max)
        hdr = kw["hdr"].reshape(-1, 5)
        nlab = _decode_labels(kw["nlab"], cfg.node_fields, kw["nlab_stride"])
        elab = _decode_labels(kw["relab"], cfg.edge_fields, kw["relab_stride"])
        rows = {"rrowptr": kw["rrowptr"], "rcoff": kw["rcoff"], "rweight": kw["rweight"]}
        jobs = kw["jobs"].reshape(-1, 2)
        for jb in range(kw["n_jobs"]):
            g1, g2 = (int(v) for v in jobs[jb])
            r = solve_pair_blocked(rows, hdr, g1, g2, nlab, elab, self.nk, self.ek, kw["dvec"], kw["pvec"],
                                   kw["qvec"], kw["rtol"], kw["max_iter"], gradient=self.gradient)  # fmt: skip
            kw["out_k"][jb], kw["out_iter"][jb] = r["k"], r["iterations"]
            kw["out_res"][jb], kw["out_conv"][jb] = r["residual"], int(r["converged"])
            if self.gradient:
                kw["out_grad"][jb * cfg.n_grad : (jb + 1) * cfg.n_grad] = r["grad"]
            if self.nodal:
                n1, nt1, o1 = (int(v) for v in hdr[g1, :3])
                n2, nt2, o2 = (int(v) for v in hdr[g2, :3])
                from mgkflow.gpu.emulate import from_blocked

                X = from_blocked(r["x"], n1, n2, nt2)
                blk = np.outer(kw["pvec"][o1 : o1 + n1], kw["pvec"][o2 : o2 + n2]) * X
                # written at the original node order: packed node a is node nodal_perm[node_off + a]
                perm1, perm2 = kw["nodal_perm"][o1 : o1 + n1], kw["nodal_perm"][o2 : o2 + n2]
                assert sorted(perm1) == list(range(n1)) and sorted(perm2) == list(range(n2))
                out = np.full((n1, n2), np.nan)
                out[np.ix_(perm1, perm2)] = blk
                off = int(kw["nodal_off"][jb])
                kw["out_nodal"][off : off + n1 * n2] = out.ravel()
        _SolverModule.log.append({"gradient": self.gradient, "nodal": self.nodal, "jobs": kw["n_jobs"],
                                  "block": self.block, "shared": shared, "resident": kw["use_smem"] == 3})  # fmt: skip


class _AssembleModule(device.Module):
    """``mgk_assemble.cu`` on the fake driver: its two kernels emulated (:mod:`mgkflow.gpu.emulate`),
    arguments bound by the declared parameters."""

    log: list[str] = []

    def __init__(self, source: str) -> None:
        super().__init__(self, source)

    def get_function(self, name: str) -> Any:
        params, fn = self.signatures[name], getattr(emulate, name)

        class Func:
            num_regs, shared_size_bytes = 40, 0

            def __call__(self, *args: Any, block: tuple, grid: tuple, shared: int = 0) -> None:
                kw = {}
                for p, v in zip(params, args, strict=True):
                    if p.kind == "P":
                        kw[p.name] = v.view(p.dtype) if isinstance(v, FakeAlloc) else FakeAlloc.at(v, p.dtype)
                    else:
                        assert type(v) is p.dtype.type, (p, type(v))
                        kw[p.name] = v.item()
                _AssembleModule.log.append(name)
                fn(**kw)

        return Func()


def _install(nk: BaseKernel, ek: BaseKernel, systems: list[GraphSystem], backend_obj: Any) -> None:
    # label storage and gradient columns of the configurations the backend builds
    configs = {k == "gradient": backend_obj._config(systems, nk, ek, **{k: True}) for k in ("gradient", "nodal")}
    _SolverModule.current.update(nk=nk, ek=ek, configs=configs)
    sys.modules["pycuda.compiler"].factory = lambda src: (
        _AssembleModule(src) if "gram_assemble" in src else _SolverModule(src)
    )


FAKE_CASES = {
    "kd-se": (KroneckerDelta(0.5, "label"), SquareExponential(1.3, "length"), (9, 21, 14)),
    "sum-node": (0.5 * KroneckerDelta(0.5, "label") + 0.5 * Constant(1.0), Constant(0.8), (12, 7, 18)),
    "unlabeled": (Constant(1.0), Constant(0.9), (10, 16, 8)),
}


@pytest.mark.parametrize("case", list(FAKE_CASES))
def test_fake_solve_gradient_matches_cpu(fake_backend, case: str) -> None:  # noqa: F811
    _drv, backend = fake_backend
    nk, ek, sizes = FAKE_CASES[case]
    graphs = [_graph(n, min(1.0, 4.0 / n), 20 + k, isolated=(k == 1)) for k, n in enumerate(sizes)]
    systems = [prepare_graph(g, k, nk, ek, q=0.05) for k, g in enumerate(graphs)]
    be = backend.GPUBackend(wide=False, rtol=1e-12)
    _install(nk, ek, systems, be)
    _SolverModule.log.clear()
    pairs = np.array([(i, j) for i in range(3) for j in range(i, 3)])
    vals, grads, its, res, conv = be.solve_gradient(systems, systems, pairs, nk, ek, wrt_q=True)
    rv, rg, *_ = ExactBackend().solve_gradient(systems, systems, pairs, nk, ek, wrt_q=True)
    assert conv.all()
    assert np.allclose(vals, rv, rtol=1e-6, atol=0)
    assert grads.shape == rg.shape
    assert _normwise(grads, rg) <= 1e-6, (grads, rg)
    n_closed = be.last_extra["closed_form_pairs"]
    if case == "unlabeled":  # graph 1 has an isolated node: its pairs go to the device, the others are closed-form
        assert n_closed == 3 and sum(e["jobs"] for e in _SolverModule.log) == 3
    else:
        assert n_closed == 0 and sum(e["jobs"] for e in _SolverModule.log) == len(pairs)
    assert all(e["gradient"] for e in _SolverModule.log)
    # without wrt_q the q column is dropped
    _, g2, *_ = be.solve_gradient(systems, systems, pairs, nk, ek, wrt_q=False)
    assert np.array_equal(g2, grads[:, :-1])


def test_fake_pairs_too_large_for_a_block_go_to_the_cpu_oracle(fake_backend) -> None:  # noqa: F811
    _drv, backend = fake_backend
    nk, ek, sizes = FAKE_CASES["kd-se"]  # 9, 21, 14 nodes: 2, 3, 2 tiles per side
    graphs = [_graph(n, min(1.0, 4.0 / n), 20 + k) for k, n in enumerate(sizes)]
    systems = [prepare_graph(g, k, nk, ek, q=0.05) for k, g in enumerate(graphs)]
    # 30,000 bytes of scratch: 384 unknowns fit (8 vectors: X, R, DG, DI, X_y, R_y and the 4 n_max doubles the
    # host reserves beyond the value solve's 4), the (1, 1) pair's 576 do not
    be = backend.GPUBackend(wide=False, rtol=1e-12, max_scratch_bytes=30_000)
    _install(nk, ek, systems, be)
    _SolverModule.log.clear()
    pairs = np.array([(i, j) for i in range(3) for j in range(i, 3)])
    vals, grads, _its, _res, conv = be.solve_gradient(systems, systems, pairs, nk, ek, wrt_q=True)
    rv, rg, *_ = ExactBackend().solve_gradient(systems, systems, pairs, nk, ek, wrt_q=True)
    assert be.last_extra["cpu_pairs"] == 1 and sum(e["jobs"] for e in _SolverModule.log) == len(pairs) - 1
    assert conv.all() and np.allclose(vals, rv, rtol=1e-6, atol=0) and _normwise(grads, rg) <= 1e-6


def test_fake_full_shared_memory_pairs_run_in_larger_blocks(fake_backend) -> None:  # noqa: F811
    """A pair whose two systems' shared memory lets one 512-thread block reside per SM (the fake device:
    100 KiB per SM; 44 x 46 nodes: 2304 unknowns x 24 bytes) runs in FULL_SMEM_BLOCK-thread blocks; the
    small pair keeps the backend's 512."""
    from mgkflow.gpu import gradient

    _drv, backend = fake_backend
    # more than 48 KiB of dynamic shared memory: the backend raises the kernel's limit
    backend.cuda.function_attribute = SimpleNamespace(MAX_DYNAMIC_SHARED_SIZE_BYTES="max_dynamic_smem")
    nk, ek = KERNELS["kd-se"]
    graphs = [_graph(44, 2.2 / 44, 70), _graph(46, 2.2 / 46, 71), _graph(20, 0.2, 72)]
    systems = [prepare_graph(g, k, nk, ek, q=0.05) for k, g in enumerate(graphs)]
    be = backend.GPUBackend(wide=False, rtol=1e-10, small_block=0)
    _install(nk, ek, systems, be)
    _SolverModule.log.clear()
    pairs = np.array([(0, 1), (2, 2)])
    vals, grads, _its, _res, conv = be.solve_gradient(systems, systems, pairs, nk, ek, wrt_q=True)
    rv, rg, *_ = ExactBackend().solve_gradient(systems, systems, pairs, nk, ek, wrt_q=True)
    assert conv.all() and np.allclose(vals, rv, rtol=1e-6, atol=0) and _normwise(grads, rg) <= 1e-6
    blocks = sorted((e["block"], e["jobs"]) for e in _SolverModule.log)
    assert blocks == [(be.block, 1), (gradient.FULL_SMEM_BLOCK, 1)], _SolverModule.log


def test_fake_pairs_over_half_the_shared_memory_run_resident(fake_backend) -> None:  # noqa: F811
    """Pairs whose two systems' vectors take more than half of an SM's shared memory (the fake device: 100 KiB,
    3 SMs; 56 x 55 nodes: 3,136 unknowns x 24 bytes) run in one resident launch of RESIDENT_BLOCK threads (its
    scratch: DG, DI, X, X_y), rings and denser graphs alike and however few; a small pair keeps the backend's
    blocks. All agree with the CPU."""
    from mgkflow.gpu.solvers.per_block import RESIDENT_BLOCK, resident_entry_bytes

    _drv, backend = fake_backend
    backend.cuda.function_attribute = SimpleNamespace(MAX_DYNAMIC_SHARED_SIZE_BYTES="max_dynamic_smem")
    nk, ek = KERNELS["kd-se"]
    graphs = [_ring(56, 80), _ring(55, 81), _graph(20, 0.2, 82), _graph(56, 0.15, 83), _graph(54, 0.15, 84)]
    systems = [prepare_graph(g, k, nk, ek, q=0.05) for k, g in enumerate(graphs)]
    be = backend.GPUBackend(wide=False, rtol=1e-10, small_block=0)
    _install(nk, ek, systems, be)
    assert 3136 * resident_entry_bytes(4, gradient=True) > 100 * 1024 // 2
    for pairs, want in (
        ([(0, 1), (0, 0), (1, 1), (2, 2), (3, 4)], [(be.block, False, 1), (RESIDENT_BLOCK, True, 4)]),
        ([(0, 1), (2, 2)], [(be.block, False, 1), (RESIDENT_BLOCK, True, 1)]),
    ):  # fmt: skip
        pairs = np.array(pairs)
        _SolverModule.log.clear()
        vals, grads, _its, _res, conv = be.solve_gradient(systems, systems, pairs, nk, ek, wrt_q=True)
        rv, rg, *_ = ExactBackend().solve_gradient(systems, systems, pairs, nk, ek, wrt_q=True)
        assert conv.all() and np.allclose(vals, rv, rtol=1e-6, atol=0) and _normwise(grads, rg) <= 1e-6
        runs = sorted((e["block"], e["resident"], e["jobs"]) for e in _SolverModule.log)
        assert runs == sorted(want), runs


def test_fake_theta_sweep_compiles_once(fake_backend) -> None:  # noqa: F811
    """Other hyperparameter values (node h, edge length scale, q) reuse the compiled gradient modules:
    the values travel in mgk_kpar (the fake module checks it holds this call's values)."""
    _drv, backend = fake_backend
    graphs = [_graph(n, min(1.0, 4.0 / n), 60 + k) for k, n in enumerate((9, 12))]
    be = backend.GPUBackend(wide=False, rtol=1e-10)
    pairs = np.array([(0, 0), (0, 1), (1, 1)])
    counts = []
    for h, ls, q in ((0.5, 1.0, 0.05), (0.3, 0.7, 0.05), (0.8, 2.0, 0.2), (0.6, 1.5, 0.01)):
        nk, ek = KroneckerDelta(h, "label"), SquareExponential(ls, "length")
        systems = [prepare_graph(g, k, nk, ek, q=q) for k, g in enumerate(graphs)]
        _install(nk, ek, systems, be)
        vals, grads, *_ = be.solve_gradient(systems, systems, pairs, nk, ek, wrt_q=True)
        rv, rg, *_ = ExactBackend().solve_gradient(systems, systems, pairs, nk, ek, wrt_q=True)
        assert np.allclose(vals, rv, rtol=1e-6, atol=0) and _normwise(grads, rg) <= 1e-6
        counts.append(device.compile_count())
    assert counts[0] >= 1 and len(set(counts)) == 1, counts


def test_fake_kept_plan_is_not_reused_where_the_batch_is_split_otherwise(fake_backend) -> None:  # noqa: F811
    """(0, 0) of xs = [A, B], ys = [C] is (A, C); of xs = [A], ys = [B, C], on the same batch of A, B, C, it is
    (A, B): the second call does not reuse the first's kept plan and job list, and both agree with the CPU."""
    _drv, backend = fake_backend
    nk, ek, sizes = FAKE_CASES["kd-se"]
    graphs = [_graph(n, min(1.0, 4.0 / n), 40 + k) for k, n in enumerate(sizes)]
    a, b, c = (prepare_graph(g, k, nk, ek, q=0.05) for k, g in enumerate(graphs))
    be = backend.GPUBackend(wide=False, rtol=1e-12)
    _install(nk, ek, [a, b, c], be)
    pairs = np.array([(0, 0)])
    for xs, ys in (([a, b], [c]), ([a], [b, c]), ([a, b], [c])):
        vals, grads, *_ = be.solve_gradient(xs, ys, pairs, nk, ek, wrt_q=True)
        rv, rg, *_ = ExactBackend().solve_gradient(xs, ys, pairs, nk, ek, wrt_q=True)
        assert np.allclose(vals, rv, rtol=1e-6, atol=0) and _normwise(grads, rg) <= 1e-6, (len(xs), vals, rv)


def test_fake_solve_nodal_matches_cpu(fake_backend) -> None:  # noqa: F811
    _drv, backend = fake_backend
    nk, ek, sizes = FAKE_CASES["kd-se"]
    graphs = [_graph(n, min(1.0, 4.0 / n), 30 + k, isolated=(k == 2)) for k, n in enumerate(sizes)]
    xs = [prepare_graph(g, k, nk, ek, q=0.05) for k, g in enumerate(graphs)]
    ys = xs[1:]
    be = backend.GPUBackend(wide=False, rtol=1e-12)
    _install(nk, ek, xs + ys, be)
    pairs = np.array([(0, 0), (2, 1), (1, 0)])
    blocks, its, res, conv = be.solve_nodal(xs, ys, pairs, nk, ek)
    ref, *_ = ExactBackend().solve_nodal(xs, ys, pairs, nk, ek)
    assert conv.all()
    for b, r in zip(blocks, ref, strict=True):
        assert b.shape == r.shape
        assert np.allclose(b, r, rtol=1e-6, atol=1e-12 * np.abs(r).max())


def test_value_only_source_has_no_gradient_code() -> None:
    nk, ek = KERNELS["kd-se"]
    src = kernel_source(make_config(nk, ek, {"label": "int64"}, {"length": "float64"}))
    assert "void grad_contraction" not in src and "#define GRADIENT 0" in src
    assert "double* __restrict__ out_grad" not in src
    g = kernel_source(make_config(nk, ek, {"label": "int64"}, {"length": "float64"}, gradient=True))
    assert "void grad_contraction" in g and "${" not in g
    with pytest.raises(ValueError, match="row-pair"):
        make_config(nk, ek, {"label": "int64"}, {"length": "float64"}, gradient=True, xmv="octile")


# ------------------------------------------------------------------------------------- device
def _gpu_vs_cpu(graphs: list[Graph], nk: BaseKernel, ek: BaseKernel, q: float) -> float:
    from mgkflow.gpu import GPUBackend

    systems = [prepare_graph(g, k, nk, ek, q=q) for k, g in enumerate(graphs)]
    n = len(systems)
    pairs = np.array([(i, j) for i in range(n) for j in range(i, n)])
    be = GPUBackend()
    vals, grads, _its, _res, conv = be.solve_gradient(systems, systems, pairs, nk, ek, wrt_q=True)
    rv, rg, *_ = ExactBackend().solve_gradient(systems, systems, pairs, nk, ek, wrt_q=True)
    assert conv.all()
    assert np.max(np.abs(vals - rv) / np.abs(rv)) <= 1e-5
    return _normwise(grads, rg)


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["nws", "ba"])
@pytest.mark.parametrize("labeled", [True, False])
@pytest.mark.parametrize("q", [0.05, 0.0005])
def test_gpu_gradient_synthetic(name: str, labeled: bool, q: float) -> None:
    from mgkflow import datasets

    graphs = getattr(datasets, name)(n_graphs=5, labeled=labeled)
    nk, ek = datasets.default_kernels(name, labeled=labeled)
    err = _gpu_vs_cpu(graphs, nk, ek, q)
    print(f"\nGPUGRADERR {name} labeled={labeled} q={q}: {err:.3e}")
    assert err <= (1e-4 if q < 0.01 else 1e-5)


@pytest.mark.gpu
def test_gpu_gradient_drugs() -> None:
    from mgkflow import datasets

    graphs = datasets.drugs(n_graphs=12)
    nk, ek = datasets.default_kernels("drugs")
    err = _gpu_vs_cpu(graphs, nk, ek, 0.05)
    print(f"\nGPUGRADERR drugs: {err:.3e}")
    assert err <= 1e-5


@pytest.mark.gpu
@pytest.mark.parametrize("case", ["kd-se", "products", "sum-node", "unlabeled"])
def test_gpu_gradient_weighted_isolated(case: str) -> None:
    nk, ek = KERNELS[case]
    graphs = [_graph(30, 0.15, 40, isolated=True, weights="float64"), _graph(45, 0.1, 41), _graph(12, 0.4, 42)]
    err = _gpu_vs_cpu(graphs, nk, ek, 0.05)
    print(f"\nGPUGRADERR weighted {case}: {err:.3e}")
    assert err <= 1e-5


@pytest.mark.gpu
def test_gpu_nodal_matches_cpu() -> None:
    from mgkflow import datasets
    from mgkflow.gpu import GPUBackend

    graphs = datasets.nws(n_graphs=6, labeled=True)
    nk, ek = datasets.default_kernels("nws", labeled=True)
    systems = [prepare_graph(g, k, nk, ek, q=0.05) for k, g in enumerate(graphs)]
    pairs = np.array([(i, j) for i in range(6) for j in range(i, 6)])
    blocks, _its, _res, conv = GPUBackend().solve_nodal(systems, systems, pairs, nk, ek)
    ref, *_ = ExactBackend().solve_nodal(systems, systems, pairs, nk, ek)
    assert conv.all()
    err = max(float(np.abs(b - r).max() / np.abs(r).max()) for b, r in zip(blocks, ref, strict=True))
    print(f"\nGPUNODALERR nws-labeled: {err:.3e}")
    assert err <= 1e-5


@pytest.mark.gpu
def test_gpu_theta_sweep_compiles_once() -> None:
    from mgkflow import datasets
    from mgkflow.gpu import GPUBackend

    graphs = datasets.nws(n_graphs=4, labeled=True)
    be = GPUBackend()
    pairs = np.array([(i, j) for i in range(4) for j in range(i, 4)])
    counts = []
    nk0, ek0 = datasets.default_kernels("nws", labeled=True)
    for h in np.linspace(0.2, 0.9, 5):
        nk, ek = nk0.with_values([float(h)] * len(nk0.hyperparameters)), ek0
        systems = [prepare_graph(g, k, nk, ek, q=0.05) for k, g in enumerate(graphs)]
        be.solve_gradient(systems, systems, pairs, nk, ek, wrt_q=True)
        counts.append(device.compile_count())
    assert len(set(counts[1:])) == 1


def test_fake_backend_through_the_sklearn_kernel(fake_backend) -> None:  # noqa: F811
    """``MarginalizedGraphKernel`` takes the GPU backend's solve_gradient / solve_nodal (normalized
    gradients use its diagonal too) and agrees with the CPU backend."""
    from mgkflow.mgk import MarginalizedGraphKernel

    _drv, backend = fake_backend
    nk, ek, sizes = FAKE_CASES["kd-se"]
    graphs = [_graph(n, min(1.0, 4.0 / n), 50 + k, isolated=(k == 0)) for k, n in enumerate(sizes)]
    be = backend.GPUBackend(wide=False, rtol=1e-12)
    systems = [prepare_graph(g, k, nk, ek, q=0.05) for k, g in enumerate(graphs)]
    _install(nk, ek, systems, be)
    for normalize in (False, True):
        kg = MarginalizedGraphKernel(nk, ek, q=0.05, normalize=normalize)
        kg._backend_obj = be
        kc = MarginalizedGraphKernel(nk, ek, q=0.05, normalize=normalize, backend="cpu")
        K, dK = kg(graphs, eval_gradient=True)
        R, dR = kc(graphs, eval_gradient=True)
        assert kg.last_stats.backend == "gpu"
        assert np.allclose(K, R, rtol=1e-6, atol=1e-12)
        assert _normwise(dK.reshape(-1, dK.shape[-1]), dR.reshape(-1, dR.shape[-1])) <= 1e-6
    kg = MarginalizedGraphKernel(nk, ek, q=0.05)
    kg._backend_obj = be
    Kn = kg(graphs, nodal=True)
    Rn = MarginalizedGraphKernel(nk, ek, q=0.05, backend="cpu")(graphs, nodal=True)
    assert Kn.shape == Rn.shape and np.allclose(Kn, Rn, rtol=1e-6, atol=1e-12 * np.abs(Rn).max())


def test_bench_gpu_grad_runs_on_the_cpu_backend(tmp_path) -> None:
    """The benchmark script end to end on a few graphs with the CPU backend (what the device run does)."""
    import json

    from mgkflow.bench import gpu_grad

    assert gpu_grad.main(["--backend", "cpu", "--graphs", "3", "--reps", "1", "--check", "0", "--nodal", "2",
                          "--sweep", "2", "--out", str(tmp_path)]) == 0  # fmt: skip
    res = json.loads((tmp_path / "gpu_grad.json").read_text())
    assert set(res["gram"]) == {"nws-labeled q=0.05", "ba-labeled q=0.05", "nws-unlabeled q=0.05",
                                "ba-unlabeled q=0.05"}  # fmt: skip
    row = res["gram"]["nws-labeled q=0.05"]
    assert row["pairs"] == 6 and row["theta"] >= 2 and row["grad_pairs_per_s"] > 0
    assert res["nodal"]["shape"][0] == res["nodal"]["shape"][1] > 0 and res["sweep"]["compiles_after_first"] == 0
    lines = gpu_grad.compare(res, res)  # against itself: every ratio is 1
    assert len(lines) == 6 and all("1.00x" in line for line in lines)


@pytest.mark.parametrize("normalize", [True, False])
def test_fake_gram_assembled_on_the_device_equals_the_host_assembly(fake_backend, normalize: bool) -> None:  # noqa: F811
    """A θ loop's second call keeps its results on the (fake) device and assembles K and dK there
    (``mgk_assemble.cu``, emulated): bit for bit what a fresh backend's host assembly gives at that θ,
    q's column included, and a caller that holds a step's arrays keeps them."""
    from mgkflow.mgk import MarginalizedGraphKernel

    _drv, backend = fake_backend
    nk, ek, sizes = FAKE_CASES["kd-se"]
    nk = KroneckerDelta(0.5, "label", h_bounds=(0.05, 0.95))
    graphs = [_graph(n, min(1.0, 4.0 / n), 70 + k) for k, n in enumerate((*sizes, 6))]
    systems = [prepare_graph(g, k, nk, ek, q=0.05) for k, g in enumerate(graphs)]

    def kernel(be: Any) -> MarginalizedGraphKernel:
        k = MarginalizedGraphKernel(nk, ek, q=0.05, q_bounds=(0.01, 0.9), normalize=normalize)
        k._backend_obj = be
        return k

    be = backend.GPUBackend(wide=False, rtol=1e-12)
    _install(nk, ek, systems, be)
    kg = kernel(be)
    kg(graphs, eval_gradient=True)  # the first call: the host assembles
    assert "assembly_s" not in kg.last_stats.extra
    held = []
    for step in (0.1, 0.2):
        kg.theta = kg.theta + step
        _SolverModule.current.update(nk=kg.node_kernel, ek=kg.edge_kernel)  # what the fake solver checks
        _AssembleModule.log.clear()
        K, dK = kg(graphs, eval_gradient=True)
        assert _AssembleModule.log == ["gram_diagonal", "gram_assemble"]
        assert kg.last_stats.extra["assembly_s"] > 0 and kg.last_stats.converged.dtype == bool
        ref = kernel(backend.GPUBackend(wide=False, rtol=1e-12))
        ref.theta = kg.theta
        K0, dK0 = ref(graphs, eval_gradient=True)
        assert "assembly_s" not in ref.last_stats.extra
        assert dK.shape == dK0.shape == (len(graphs), len(graphs), kg.theta.size)
        np.testing.assert_array_equal(K, K0)
        np.testing.assert_array_equal(dK, dK0)
        np.testing.assert_array_equal(kg.last_stats.iterations, ref.last_stats.iterations)
        held.append((K, K.copy()))  # held by the caller: the next steps must not write into it
    for K, copy in held:
        np.testing.assert_array_equal(K, copy)


@pytest.mark.gpu
@pytest.mark.parametrize("normalize", [True, False])
def test_gpu_gram_assembled_on_the_device(normalize: bool) -> None:
    """A θ loop's later calls assemble K and dK on the device (``mgk_assemble.cu``): bit for bit what a
    fresh backend's host assembly gives at the same θ, within the GPU tolerance of the CPU oracle, and a
    step's arrays stay the caller's."""
    from mgkflow import datasets
    from mgkflow.mgk import MarginalizedGraphKernel

    graphs = [g for g in datasets.drugs(n_graphs=80) if g.adjacency.nnz > 0][:48]
    nk, ek = datasets.default_kernels("drugs")

    def kernel(backend: str = "gpu") -> MarginalizedGraphKernel:
        return MarginalizedGraphKernel(nk, ek, q=0.05, q_bounds=(0.01, 0.9), normalize=normalize, backend=backend)

    kg = kernel()
    kg(graphs, eval_gradient=True)
    held = []
    for step in (0.05, 0.1):
        kg.theta = kg.theta - step
        K, dK = kg(graphs, eval_gradient=True)
        assert "assembly_s" in kg.last_stats.extra
        ref = kernel()
        ref.theta = kg.theta
        K0, dK0 = ref(graphs, eval_gradient=True)  # a fresh backend's first call: the host assembles
        assert "assembly_s" not in ref.last_stats.extra
        np.testing.assert_array_equal(K, K0)
        np.testing.assert_array_equal(dK, dK0)
        np.testing.assert_array_equal(kg.last_stats.converged, ref.last_stats.converged)
        cpu = kernel("cpu")
        cpu.theta = kg.theta
        Kc, dKc = cpu(graphs, eval_gradient=True)
        assert np.max(np.abs(K - Kc) / np.abs(Kc).max()) <= 1e-5
        err = _normwise(dK.reshape(-1, dK.shape[-1]), dKc.reshape(-1, dKc.shape[-1]))
        print(f"\nGPUASSEMBLYERR normalize={normalize}: {err:.3e}")
        assert err <= 1e-5
        held.append((K, dK, K.copy(), dK.copy()))
    for K, dK, K1, dK1 in held:  # later steps wrote elsewhere
        np.testing.assert_array_equal(K, K1)
        np.testing.assert_array_equal(dK, dK1)


def test_pinned_pool_hands_an_array_out_again_once_dropped():
    """Page-locked arrays are views of a host allocation (pycuda: ``base`` is the allocation), as here; the
    pool gives one out again only when no caller holds it or a view of it."""
    from mgkflow.gpu.assemble import PinnedPool

    def alloc(shape, dtype):
        return np.frombuffer(bytearray(int(np.prod(shape)) * np.dtype(dtype).itemsize), dtype=dtype).reshape(shape)

    pool = PinnedPool(alloc=alloc, per_key=2)
    a = pool.take((3, 4), np.float64)
    first = id(a)
    view = a[:, 1]  # a caller's view keeps it
    del a
    b = pool.take((3, 4), np.float64)
    assert id(b) != first
    del view, b
    assert id(pool.take((3, 4), np.float64)) == first  # both free again: the first one
    held = [pool.take((3, 4), np.float64) for _ in range(3)]  # two pooled, then a plain array
    assert len({id(h) for h in held}) == 3 and all(h.shape == (3, 4) for h in held)
    # another role of the same shape and dtype has arrays of its own
    other = [pool.take((3, 4), np.float64, "R") for _ in range(2)]
    assert not {id(h) for h in other} & {id(h) for h in held}
    del other
    assert id(pool.take((3, 4), np.float64, "R")) in {id(h) for h in pool._held[("R", (3, 4), "<f8")][0][:1]}
