"""Derivatives and node-pair similarities on the GPU (host side; docs/gradients.md).

:meth:`mgkflow.gpu.backend.GPUBackend.solve_gradient` and ``solve_nodal`` land here. Both run
the per-pair solver (``mgk_solver.cu``, one thread block per pair: the run path of
:mod:`mgkflow.gpu.solvers.per_block`, with the pieces of :mod:`mgkflow.gpu.core`; never the
backend module) compiled with a structure flag of :class:`~mgkflow.gpu.source.KernelConfig`:

* ``gradient``: one PCG loop with two recurrences in the same block, x (M x = b) and the adjoint y
  (M y = p_x), each with its own step sizes, residual and stop, sharing every XMV pass (each
  product's coefficient, the edge kernel, is formed once for both directions), then one
  contraction pass (``mgk_gradient.cuh``) over the product nodes (node-kernel and q
  terms) and the edge pairs (the row-pair walk with the edge kernel's ``c_grad`` expressions),
  block-reduced in float64 into ``out_grad[job, h]``. The hyperparameter values travel in
  ``mgk_kpar`` as for the values: a θ sweep compiles once.
* ``nodal``: the value PCG, then p_i p'_i' x_ii' of every pair written to ``out_nodal``.

Pairs whose one-block scratch does not fit the device memory (the plan's "wide" group) are
solved by the CPU oracle (:func:`mgkflow.backends.exact.solve_pair_gradient` / ``solve_pair``):
correct, slow, and reported in ``backend.last_extra["cpu_pairs"]``. A host-driven gradient on
the wide path is not implemented.

The unlabeled case has a closed form (:func:`closed_form`): with Constant node and edge kernels
(c_v, c_e), one scalar q per graph and no node without edges in either graph, x is constant,

    x = α 1,   α = q q' c_v / (1 − c_e c_v (1 − q)(1 − q')),   K = α (Σ p)(Σ p'),

(M 1 = deg ⊗ deg' (1 / ((1 − q)(1 − q') c_v) − c_e) and b = deg ⊗ deg' q q' / ((1 − q)(1 − q')),
with deg the weighted degrees), so K and its derivatives need no solve; the value solve converges
in one CG iteration there but the adjoint (right-hand side p_x) does not. The conditions are
checked on the host per pair; other pairs go to the device.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..kernels import BaseKernel, Constant
from ..system import GraphSystem, stop_vectors
from . import device, strategies
from .core import SMEM_PER_ENTRY, KeptCall, SharedArgs, compile_module, record, wait
from .moves import scatter_rows
from .solvers.per_block import KERNEL, RESIDENT
from .source import KPAR, kernel_values

__all__ = [
    "closed_form_ok", "closed_form", "closed_form_pairs", "gram_gradient", "solve_gradient", "solve_nodal",
    "FIT_BUDGET",
]  # fmt: skip

#: Threads per block of the gradient launches whose shared memory (two systems' vectors) lets only one
#: block of the backend's size reside on an SM (e.g. 96-node pairs: 9216 unknowns x 24 bytes): a block
#: of this size (``min_blocks`` 1, the same 64-register bound as 512 x 2) keeps the SM's warps busy.
#: 0 or the backend's block size: no change.
FULL_SMEM_BLOCK = 1024

#: Share of the scratch budget a gradient pair's value-solve scratch may use: the joint PCG's block
#: needs at most twice the value solve's (see ``_GradientOut``).
FIT_BUDGET = 0.5


def closed_form_ok(system: GraphSystem) -> bool:
    """Whether ``system`` meets the graph conditions of :func:`closed_form`: one q at every node
    and no node without edges (weighted degree > 0).

    Examples
    --------
    >>> import numpy as np
    >>> from mgkflow import Graph
    >>> from mgkflow.system import prepare_graph
    >>> A = np.array([[0, 1, 0], [1, 0, 0], [0, 0, 0]])
    >>> closed_form_ok(prepare_graph(Graph(A), 0, Constant(1.0), Constant(1.0), q=0.1))  # node 2 isolated
    False
    """
    q = np.asarray(system.q)
    if q.size == 0 or not np.all(q == q[0]):
        return False
    return bool(np.all(system.graph.degree_sum() > 0))


def closed_form(
    s1: GraphSystem, s2: GraphSystem, node_kernel: BaseKernel, edge_kernel: BaseKernel, wrt_q: bool = False
) -> tuple[float, np.ndarray]:
    """K and dK/d(c_v, c_e[, q]) of a pair in closed form (conditions: module docstring).

    Raises ValueError when the conditions do not hold (Constant kernels, :func:`closed_form_ok`
    for both graphs, and one q for both when ``wrt_q``).

    Examples
    --------
    >>> import numpy as np
    >>> from mgkflow import Graph
    >>> from mgkflow.system import prepare_graph
    >>> g = prepare_graph(Graph(np.array([[0, 1], [1, 0]])), 0, Constant(1.0), Constant(1.0), q=0.5)
    >>> k, grad = closed_form(g, g, Constant(1.0), Constant(1.0), wrt_q=True)
    >>> round(k, 6), round(float(grad[-1]), 6)  # 4 q / (2 - q) and 8 / (2 - q)^2
    (1.333333, 3.555556)
    """
    if type(node_kernel) is not Constant or type(edge_kernel) is not Constant:
        raise ValueError("the closed form needs Constant node and edge kernels")
    if not (closed_form_ok(s1) and closed_form_ok(s2)):
        raise ValueError("the closed form needs one q per graph and no node without edges")
    if wrt_q and float(s1.q[0]) != float(s2.q[0]):
        raise ValueError("dK/dq needs one scalar q for both graphs")
    k, grad = closed_form_pairs(
        np.array([float(s1.q[0])]), np.array([float(s2.q[0])]), np.array([float(np.sum(s1.p))]),
        np.array([float(np.sum(s2.p))]), node_kernel.c, edge_kernel.c, wrt_q,
    )  # fmt: skip
    return float(k[0]), grad[0]


def closed_form_pairs(
    q1: np.ndarray, q2: np.ndarray, sp1: np.ndarray, sp2: np.ndarray, cv: float, ce: float, wrt_q: bool
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`closed_form` for many pairs at once from each side's q and Σ p (no checks).

    Returns K (k,) and the derivatives (k, 2 + wrt_q): d/dc_v, d/dc_e[, d/dq with q = q1 = q2].

    Examples
    --------
    >>> k, g = closed_form_pairs(np.array([0.5]), np.array([0.5]), np.array([2.0]), np.array([2.0]), 1.0, 1.0, True)
    >>> round(float(k[0]), 6), round(float(g[0, 2]), 6)
    (1.333333, 3.555556)
    """
    u = (1.0 - q1) * (1.0 - q2)
    den = 1.0 - ce * cv * u
    s = sp1 * sp2
    qq = q1 * q2
    cols = [qq / den**2 * s, qq * cv * cv * u / den**2 * s]
    if wrt_q:
        cols.append((2.0 * q1 * cv / den - qq * cv * 2.0 * ce * cv * (1.0 - q1) / den**2) * s)
    return qq * cv / den * s, np.stack(cols, axis=1)


class _GradientOut:
    """``out_grad`` of the launches of one call: N_GRAD doubles per job (job order).

    The joint PCG keeps two sets of vectors: shared memory holds the search directions P, P_y (and the
    products A, A_y) of both systems (``smem_vectors`` = 2 times the value solve's bytes per entry),
    global memory X, R, DG, DI, X_y, R_y and what does not fit in shared memory:
    ``extra_doubles`` = 4 n_max more than the value solve's scratch (X_y, R_y and, at most, P_y and
    A_y), so a block needs at most twice the value solve's scratch (``FIT_BUDGET``). Pairs whose vectors take
    more than half of one SM's shared memory run in resident launches instead (the same joint PCG with both
    search directions as float2, A, A_y and both residuals as float32 in shared memory, 24 bytes an unknown:
    :func:`mgkflow.gpu.solvers.per_block.resident_entry_bytes`): DG, DI and the two solutions X, X_y in global
    memory, within the same scratch. Measured against the joint PCG in global memory on eleven graph families
    (S29-B, H100, 96-node labeled graphs): 1.01-1.41 times as fast on every one.
    """

    #: factor on the value solve's shared-memory bytes per product entry
    smem_vectors = 2

    def __init__(
        self, cuda: Any, npairs: int, n_grad: int, buf: Any = None, host: np.ndarray | None = None, keep: bool = False
    ) -> None:
        self.cuda = cuda
        self.n_grad = n_grad
        self.npairs = npairs
        # ``buf``: a device buffer of at least npairs * n_grad doubles kept by the backend between calls
        self.buf = cuda.mem_alloc(8 * max(npairs, 1) * n_grad) if buf is None else buf
        # ``keep``: each launch writes its rows behind the launch before, and they stay on the device
        # (:class:`mgkflow.gpu.assemble.GramAssembly` reads them there)
        self.keep = keep
        if keep:
            self.pinned, self._staged = True, 0
            return
        # the launches' rows, in job order, one launch after another; ``host``: page-locked staging of at least
        # npairs * n_grad doubles kept by the backend, which lets :meth:`queue` copy behind each kernel
        self._jobs = np.empty((npairs, n_grad)) if host is None else host[: npairs * n_grad].reshape(npairs, n_grad)
        self.pinned = host is not None
        self._staged = 0
        self._queued: list[tuple[np.ndarray, int, Any]] = []  # (jobs' pairs, staging offset, copy done) per launch
        # dK/dh per pair, in pair order; rows move in as each launch's copy is done (every pair of the call is
        # launched or marked :meth:`unsolved`: no pass zeroing the whole array)
        self._grad = np.empty((npairs, n_grad))

    def extra_doubles(self, n_max: int) -> int:
        return 4 * int(n_max)

    def args(self, order: np.ndarray) -> dict:
        if self.keep:
            off = 8 * self._staged * self.n_grad
            return {"out_grad": device.offset(self.buf, off, np.float64, len(order) * self.n_grad)}
        return {"out_grad": self.buf}

    def unsolved(self, pairs: np.ndarray) -> None:
        """Zero the rows of ``pairs``, which no launch solves (the plan's pairs for the CPU oracle)."""
        if self.keep:  # (a keeping call has none)
            return
        self._grad[pairs] = 0.0

    def collect(self, order: np.ndarray) -> None:
        """Read a completed launch's rows (jobs ``order``)."""
        rows = self._jobs[: len(order)]
        self.cuda.memcpy_dtoh(rows, self.buf)
        scatter_rows(order, rows, self._grad)

    def queue(self, order: np.ndarray, stream: Any) -> None:
        """Queue the read-back of a launch's rows (jobs ``order``) in ``stream`` behind its kernel, into the
        page-locked staging: the next launch of the stream may then reuse ``buf``, and the launches of a call
        run back to back. The rows move to their pairs in :meth:`drained` (called by
        :meth:`mgkflow.gpu.core.Outputs.drain` after each launch), while the later launches run.
        Keeping, the rows stay on the device and the next launch writes behind them."""
        off = self._staged
        if self.keep:
            self._staged = off + len(order)
            return
        self.cuda.memcpy_dtoh_async(self._jobs[off : off + len(order)], self.buf, stream)
        copied = self.cuda.Event()
        record(copied, stream)
        self._queued.append((order, off, copied))
        self._staged = off + len(order)

    def drained(self) -> None:
        """Move the rows of the oldest queued launch to their pairs, once its copy is done."""
        order, off, copied = self._queued.pop(0)
        wait(copied)
        scatter_rows(order, self._jobs[off : off + len(order)], self._grad)

    @property
    def grad(self) -> np.ndarray:
        """dK/dh per pair (npairs, n_grad), in pair order; pairs marked :meth:`unsolved` hold zeros."""
        while self._queued:
            self.drained()
        return self._grad


class _NodalOut:
    """``out_nodal`` / ``nodal_off`` / ``nodal_perm`` of one call: the (n_i, m_j) blocks in job order.

    The kernel writes each block in the graphs' original node order (``nodal_perm``: packed node a of
    a graph is its node ``nodal_perm[node_off + a]``), so a launch's blocks are read back with one copy
    and handed out as views of it (no per-pair permutation on the host).
    """

    #: factor on the value solve's shared-memory bytes per product entry
    smem_vectors = 1

    def __init__(self, cuda: Any, device: Any, n1: np.ndarray, n2: np.ndarray, perm: Any) -> None:
        self.cuda, self.device = cuda, device
        self.n1, self.n2 = n1, n2
        self.perm = perm  # device array: original index of every packed node (node arrays' layout)
        self.blocks: list = [None] * len(n1)
        self._buf: Any = None
        self._off: np.ndarray | None = None

    @staticmethod
    def node_perm(node_offset: np.ndarray, perms: Sequence[np.ndarray], total: int) -> np.ndarray:
        """``nodal_perm``: at node_offset[k] + a the original index of packed node a of graph k.

        Examples
        --------
        >>> _NodalOut.node_perm(np.array([0, 8]), [np.array([1, 0, 2]), np.array([0, 1])], 16).tolist()[:10]
        [1, 0, 2, 0, 0, 0, 0, 0, 0, 1]
        """
        out = np.zeros(max(int(total), 1), dtype=np.int32)
        for o, p in zip(np.asarray(node_offset, dtype=np.int64).tolist(), perms, strict=True):
            out[o : o + len(p)] = p
        return out

    def extra_doubles(self, n_max: int) -> int:
        return 0

    def args(self, order: np.ndarray) -> dict:
        sizes = self.n1[order].astype(np.int64) * self.n2[order]
        self._off = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self._buf = self.cuda.mem_alloc(8 * max(int(self._off[-1]), 1))
        return {"out_nodal": self._buf, "nodal_off": self.device.upload(self._off[:-1]), "nodal_perm": self.perm}

    def collect(self, order: np.ndarray) -> None:
        host = np.empty(max(int(self._off[-1]), 1))
        self.cuda.memcpy_dtoh(host, self._buf)
        off = self._off.tolist()
        n1, n2 = self.n1[order].tolist(), self.n2[order].tolist()
        for k, t in enumerate(order.tolist()):
            self.blocks[t] = host[off[k] : off[k + 1]].reshape(n1[k], n2[k])
        self._buf = None


def _full_smem_classes(
    backend: Any, plan: Any, classes: list, config: Any, values: np.ndarray, N: np.ndarray
) -> list:  # fmt: skip
    """The gradient's launch classes with :data:`FULL_SMEM_BLOCK`-thread blocks where the shared memory
    of a class leaves room for one block of the backend's size per SM (see :data:`FULL_SMEM_BLOCK`)."""
    from dataclasses import replace

    full = int(FULL_SMEM_BLOCK)
    out = []
    for sel, use_smem, fn, blk in classes:
        if use_smem and use_smem != RESIDENT and sel is not plan.tiny and blk == backend.block and 0 < blk < full:
            per_entry = (SMEM_PER_ENTRY[backend.a_double] if backend.a_in_shared else 8) * _GradientOut.smem_vectors
            smem = (int(N[sel].max()) * per_entry + 15) // 16 * 16
            if device.kernel_blocks_per_sm(fn, blk, smem) * blk < full:
                mod = compile_module(replace(config, block=full, min_blocks=1, p_smem=backend.p_smem))
                mod.set_constant(KPAR, values)
                big = mod.function(KERNEL)
                # the larger block's static shared memory (its reduction buffers) must still leave room
                if smem + int(big.shared_size_bytes) <= backend.limits.smem_optin:
                    fn, blk = big, full
        out.append((sel, use_smem, fn, blk))
    return out


def _per_pair(
    backend: Any, xs: Sequence[GraphSystem], ys: Sequence[GraphSystem], pairs: np.ndarray, node_kernel: BaseKernel,
    edge_kernel: BaseKernel, kind: str, progress: Callable[[int], Any] | None, assembly: Any = None,
) -> tuple[Any, np.ndarray, Any]:  # fmt: skip
    """Run the flagged per-pair solver over ``pairs``; returns (outputs, CPU-routed pair indices, results).

    ``assembly`` (a gradient call's :class:`~mgkflow.gpu.assemble.GramAssembly`): when the plan of these
    pairs is kept from the call before and sends none to the CPU oracle, the results stay on the device
    and the assembly runs behind the launches (``results.keep`` is then True)."""
    cuda = device.driver()
    path = backend.per_block_path  # mgkflow.gpu.solvers.per_block.PerBlockPath
    t_start = time.perf_counter()
    npairs = len(pairs)
    same = xs is ys
    systems = xs if same else [*xs, *ys]  # (a Restopped xs stays one: its systems are not made)
    yoff = 0 if same else len(xs)
    config = backend._config(systems, node_kernel, edge_kernel, gradient=kind == "gradient", nodal=kind == "nodal")
    values = kernel_values(node_kernel, edge_kernel)
    t0 = time.perf_counter()
    func = compile_module(config).function(KERNEL)
    t_compile = time.perf_counter() - t0
    db = backend._device_batch(systems, config)
    g1 = pairs[:, 0]
    g2 = pairs[:, 1] + yoff
    # A hyperparameter search asks for the same pairs of the same batch at every step: the plan, the
    # pairs' sizes and costs are kept (``_plan_kept``) and only θ (``mgk_kpar``) and p, q, d change.
    plan_key = (kind, config, npairs, yoff)  # (yoff: the batch split otherwise, other pairs)
    kept = getattr(backend, "_plan_kept", None)
    repeat = kept is not None and kept.matches(plan_key, db, pairs)
    if repeat:
        plan, budget, N, cost, orders = kept.data
    else:
        # every pair whose one-block scratch fits runs per block (no whole-device "wide" solves); the others
        # are returned for the CPU oracle
        # gradient pairs whose vectors take more than half of one SM's shared memory go to a resident bin (the joint
        # PCG with its vectors in shared memory: mgk_solver.cu), the others to the joint PCG in global memory
        plan, budget = path.plan(db, g1, g2, func, wide="auto", wide_min_products=float("inf"),
                                 fit_budget=FIT_BUDGET if kind == "gradient" else 1.0,
                                 smem_vectors=_GradientOut.smem_vectors if kind == "gradient" else 1,
                                 resident="large" if kind == "gradient" else False)  # fmt: skip
        N = db.nt[g1] * db.nt[g2] * 64
        cost = path.cost(db, g1, g2) if backend.sort_jobs else None
        orders = {}  # the launches' job orders, by id of the plan's pair selections (kept with the plan)
        backend._plan_kept = KeptCall.of(plan_key, db, pairs, (plan, budget, N, cost, orders))
    keep = assembly is not None and repeat and kind == "gradient" and plan.wide.size == 0
    out = backend.launcher.outputs(npairs, keep=keep)  # the backend's kept device buffers and page-locked staging
    if kind == "gradient":
        need = max(npairs, 1) * config.n_grad
        held = getattr(backend, "_grad_buf", None)
        if held is None or held[0] < need:
            backend.launcher.idle()  # a queued copy may still read the old staging
            backend._grad_buf = None
            backend._grad_buf = (need, cuda.mem_alloc(8 * need), cuda.pagelocked_empty(need, np.float64))
        extra: Any = _GradientOut(cuda, npairs, config.n_grad, backend._grad_buf[1], backend._grad_buf[2], keep=keep)
    else:
        n = np.array([s.n for s in systems], dtype=np.int64)
        perms = db.perms if db.perms is not None else [np.arange(s.n) for s in systems]
        perm = device.upload(_NodalOut.node_perm(db.batch.node_offset, perms, db.batch.d.size))
        extra = _NodalOut(cuda, device, n[g1], n[g2], perm)
    shared = SharedArgs(db, strategies.get("rows").args(db, None), out, backend.rtol, backend.max_iter)
    shared.N, shared.cost, shared.orders = N, cost, orders
    classes = path.launch_classes(plan, config, values)
    if kind == "gradient":
        if extra.pinned and not keep:
            out.followers.append(extra)
        classes = _full_smem_classes(backend, plan, classes, config, values, N)
        extra.unsolved(plan.wide)
    backend.launcher.reserve_jobs(2 * npairs)  # every launch's job list staged at once: no wait between launches
    queued = []
    for sel, use_smem, fn, blk in classes:
        events, info = path.run_class(sel, use_smem, fn, blk, g1, g2, db, shared, budget, pairs, extra=extra)
        queued.append((events, info))
        if "seconds" in info and progress is not None:
            progress(info["pairs"])
    if keep:
        assembly.queue(out, extra.buf, config.n_grad, backend.launcher.stream, orders)
    if any("seconds" not in info for _, info in queued):  # launches queued back to back: complete them now
        backend.launcher.complete(out, [q for q in queued if "seconds" not in q[1]])
        if progress is not None:
            progress(sum(info["pairs"] for _, info in queued))
    launches = [info for _, info in queued]
    dev_seconds = float(sum(info["seconds"] for info in launches))
    backend.last_extra = {
        "device": backend.device_name, "device_s": dev_seconds, "compile_s": t_compile,
        "host_s": time.perf_counter() - t_start, "launches": launches, "compiles": device.compile_count(),
        "regs": func.num_regs, "kind": kind, "cpu_pairs": int(plan.wide.size),
    }  # fmt: skip
    return extra, plan.wide, out


def gram_gradient(
    backend: Any, xs: Sequence[GraphSystem], pairs: np.ndarray, node_kernel: BaseKernel, edge_kernel: BaseKernel,
    wrt_q: bool, cols: np.ndarray, scale: np.ndarray, normalize: bool,
) -> tuple[tuple | None, tuple | None]:  # fmt: skip
    """``GPUBackend.gram_gradient``: a gradient Gram call over ``pairs`` (the upper triangle of ``xs``),
    assembled on the device where it can be (:mod:`mgkflow.gpu.assemble`).

    ``cols`` are derivative columns in the backend layout (node kernel's, edge kernel's, then q), ``scale``
    their factors. Returns (assembled, solved): assembled = (K, dK, iterations, residuals, flags, K(G, G),
    counts of non-finite derivatives and values) and solved None, or assembled None and solved the
    :func:`solve_gradient` results of the pairs, for the host to assemble (the first call of a θ loop,
    pairs for the CPU oracle or in closed form, an output over :data:`~mgkflow.gpu.assemble.MAX_BYTES`).
    """
    from .assemble import MAX_BYTES, GramAssembly, output_bytes

    cols = np.asarray(cols, dtype=np.int64)
    closed = type(node_kernel) is Constant and type(edge_kernel) is Constant
    if closed or output_bytes(len(xs), cols.size) > MAX_BYTES:
        return None, solve_gradient(backend, xs, xs, pairs, node_kernel, edge_kernel, wrt_q)
    nh = len(node_kernel.hyperparameters) + len(edge_kernel.hyperparameters)
    asm = GramAssembly(backend, len(xs), pairs, np.where(cols < nh, cols, -1), scale, normalize)  # -1: q, the last
    solved = solve_gradient(backend, xs, xs, pairs, node_kernel, edge_kernel, wrt_q, assembly=asm)
    if solved is not None:
        return None, solved
    return asm.finished(backend.last_extra), None


def solve_gradient(
    backend: Any, xs: Sequence[GraphSystem], ys: Sequence[GraphSystem], pairs: Any, node_kernel: BaseKernel,
    edge_kernel: BaseKernel, wrt_q: bool = False, progress: Callable[[int], Any] | None = None,
    assembly: Any = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:  # fmt: skip
    """``GPUBackend.solve_gradient`` (interface: :class:`mgkflow.backends.base.Backend`).

    With ``assembly`` (:func:`gram_gradient`'s), a call whose results stayed on the device for it
    returns None."""
    from ..backends.exact import solve_pair_gradient

    pr = np.asarray(pairs, dtype=np.int64)
    if pr.ndim != 2 or pr.shape[1:] != (2,):
        pr = pr.reshape(-1, 2)  # (an (n, 2) array stays itself: the kept plan recognizes it)
    k = len(pr)
    nn, ne = len(node_kernel.hyperparameters), len(edge_kernel.hyperparameters)
    nh = nn + ne + int(bool(wrt_q))
    if wrt_q:
        qs = stop_vectors(xs)[0] if ys is xs else np.concatenate([stop_vectors(xs)[0], stop_vectors(ys)[0]])
        if qs.size and not np.all(qs == qs[0]):
            raise ValueError("dK/dq needs one scalar q for every node of both graphs")
    # unlabeled: the closed form where it provably holds
    closed = np.zeros(k, dtype=bool)
    if type(node_kernel) is Constant and type(edge_kernel) is Constant:
        okx = np.array([closed_form_ok(s) for s in xs], dtype=bool)
        oky = okx if ys is xs else np.array([closed_form_ok(s) for s in ys], dtype=bool)
        closed = okx[pr[:, 0]] & oky[pr[:, 1]] if k else closed
    rest = np.flatnonzero(~closed)
    if rest.size < k or k == 0:  # else every result comes from the device's arrays (below)
        values, grads = np.zeros(k), np.zeros((k, nh))
        iters, res, conv = np.zeros(k, dtype=np.int64), np.zeros(k), np.ones(k, dtype=bool)
    if rest.size < k:
        sel = pr[closed]

        def side(systems: Sequence[GraphSystem], idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            q = np.array([float(s.q[0]) for s in systems])
            sp = np.array([float(np.sum(s.p)) for s in systems])
            return q[idx], sp[idx]

        q1, sp1 = side(xs, sel[:, 0])
        q2, sp2 = side(ys, sel[:, 1])
        values[closed], grads[closed] = closed_form_pairs(q1, q2, sp1, sp2, node_kernel.c, edge_kernel.c, wrt_q)
        if progress is not None:
            progress(int(closed.sum()))
    backend.last_extra = {"closed_form_pairs": int(closed.sum())}
    if rest.size:
        todo = pr if rest.size == k else pr[rest]
        gout, cpu, out = _per_pair(backend, xs, ys, todo, node_kernel, edge_kernel, "gradient", progress,
                                   assembly if rest.size == k else None)  # fmt: skip
        if out.keep:
            return None
        v, it, rs, cv = out.result()
        g = gout.grad[:, : nn + ne]
        if wrt_q:
            g = gout.grad if gout.grad.shape[1] == nh else np.concatenate([g, gout.grad[:, -1:]], axis=1)
        if rest.size == k:  # every pair on the device (the common case): its arrays, no scatter
            values, iters, res, conv, grads = v, it.astype(np.int64, copy=False), rs, cv, g
        else:
            values[rest], iters[rest], res[rest], conv[rest] = v, it, rs, cv
            grads[rest] = g
        for t in rest[cpu].tolist():  # too large for one block: the CPU oracle
            i, j = int(pr[t, 0]), int(pr[t, 1])
            sol = solve_pair_gradient(xs[i], ys[j], node_kernel, edge_kernel, wrt_q)
            values[t], grads[t], iters[t], res[t], conv[t] = (
                sol.value,
                sol.gradient,
                sol.iterations,
                sol.residual,
                sol.converged,
            )
            if progress is not None:
                progress(1)
        backend.last_extra["closed_form_pairs"] = int(closed.sum())
    return values, grads, iters, res, conv


def solve_nodal(
    backend: Any, xs: Sequence[GraphSystem], ys: Sequence[GraphSystem], pairs: Any, node_kernel: BaseKernel,
    edge_kernel: BaseKernel, progress: Callable[[int], Any] | None = None,
) -> tuple[list[np.ndarray], np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """``GPUBackend.solve_nodal`` (interface: :class:`mgkflow.backends.base.Backend`)."""
    from ..backends.exact import solve_pair

    pr = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    k = len(pr)
    if k == 0:
        backend.last_extra = {}
        return [], np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros(0, dtype=bool)
    nout, cpu, out = _per_pair(backend, xs, ys, pr, node_kernel, edge_kernel, "nodal", progress)
    _v, iters, res, conv = out.result()
    blocks = nout.blocks
    for t in cpu.tolist():  # too large for one block: the CPU oracle
        i, j = int(pr[t, 0]), int(pr[t, 1])
        sol = solve_pair(xs[i], ys[j], node_kernel, edge_kernel)
        blocks[t] = np.outer(xs[i].p, ys[j].p) * sol.x
        iters[t], res[t], conv[t] = sol.iterations, sol.residual, sol.converged
        if progress is not None:
            progress(1)
    return blocks, iters, res, conv
