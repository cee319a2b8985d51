"""PyCUDA backend of the marginalized graph kernel (docs/design.md §5).

Imported lazily by :mod:`mgkflow.gpu`; importing this module imports PyCUDA. :class:`GPUBackend`
holds the settings and routes a call's pairs to the solvers of :mod:`mgkflow.gpu.solvers` (compact,
wide, per-block, in that order); the device batch, the launch buffers and each solver's run path
are parts it owns (:mod:`mgkflow.gpu.batch`, :mod:`mgkflow.gpu.launch`, :mod:`mgkflow.gpu.solvers`),
the pieces it shares with the gradient and nodal solves (:mod:`mgkflow.gpu.gradient`) live in
:mod:`mgkflow.gpu.core`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pycuda.driver as cuda  # noqa: F401  (lazy: this module is imported on demand; importing it needs PyCUDA)

from ..kernels import BaseKernel, Constant
from ..system import GraphSystem
from . import device, gradient, solvers, strategies
from .batch import BatchCache, tile_sort
from .core import (
    DEFAULT_MIN_BLOCKS,
    DEFAULT_RTOL,
    SMALL_PAIR_UNKNOWNS,
    SORT_EXACT_MAX,
    WIDE_MIN_PRODUCTS,
    DeviceBatch,
    KeptCall,
    SharedArgs,
    compile_module,
    solver_request,
)  # fmt: skip
from .launch import Launcher
from .pack import HostBatch, pack_host
from .plan import LaunchPlan, waves
from .primitive_map import PRIMITIVES, DeviceMaps
from .solvers.compact import KERNEL as COMPACT_KERNEL
from .solvers.compact import CompactLaunch, CompactPath, compact_request
from .solvers.per_block import KERNEL as SOLVER_KERNEL
from .solvers.per_block import PerBlockPath
from .solvers.wide import WIDE_XMVS, WidePath
from .source import DEFAULT_BLOCK, KernelConfig, kernel_values, make_config

__all__ = ["GPUBackend", "DEFAULT_RTOL", "compile_module"]
#: (re-exported from :mod:`mgkflow.gpu.core`)
__all__ += ["WIDE_MIN_PRODUCTS", "SMALL_PAIR_UNKNOWNS", "SORT_EXACT_MAX", "DEFAULT_MIN_BLOCKS"]


@dataclass
class _ValueCall:
    """What a value call keeps for its repetition (:meth:`GPUBackend.solve`): the compact solver's routing
    (:meth:`~mgkflow.gpu.solvers.compact.CompactPath.run_waves`), the per-block plan and scratch budget, the
    pairs' product sizes and job costs, the per-block launches' job orders by id of the plan's pair selections,
    and 2 nnz1 nnz2 of each pair for the GFLOP/s figure (None beyond ``SORT_EXACT_MAX`` pairs)."""

    routed: tuple
    plan: LaunchPlan
    budget: int
    N: np.ndarray
    cost: np.ndarray | None
    orders: dict
    products: np.ndarray | None


class GPUBackend:
    """Solve many pairs on one CUDA device with PyCUDA (one launch per size class).

    Parameters
    ----------
    rtol : float
        CG stops when ||r|| <= rtol * ||b|| (recursive residual, float64).
    max_iter : int
        CG iteration limit; pairs that reach it are flagged not converged.
    block : int
        Threads per block of the per-block solver's launches, except those of one block per SM (1,024 threads):
        pairs resident in more than half an SM's shared memory, and a value call's pairs whose vectors all stay
        in global memory.
    a_double : bool
        Keep a = M p in float64 between the XMV and the update (more shared memory).
    xmv : {"rows", "octile"}
        XMV work mapping (see :class:`mgkflow.gpu.source.KernelConfig`). Default "rows":
        node rows in CSR order, two outputs per lane, nodes of each tile sorted by degree.
    primitives : {"auto", "ss", "dd", "ds", "sd"} or (65, 65) uint8 array
        Octile mode: the primitive per octile pair. "auto" uses the map measured on this GPU
        model by ``mgkflow bench primitives`` (sparse x sparse everywhere when none was
        measured); a name forces one primitive; an array is a selection map.
    tile_sort : bool
        Row mode: sort the nodes by degree (small graphs as a whole, others within each 8-node tile:
        :func:`mgkflow.gpu.strategies.row_pair.degree_order`; K is permutation invariant).
    wide : {"auto", True, False}
        Solve pairs with the whole device, one at a time (:mod:`mgkflow.gpu.solvers.wide`): True for
        every pair, False never; "auto" for pairs of at least ``WIDE_MIN_PRODUCTS`` nonzero
        products per XMV when there are fewer such pairs than SMs (one block per pair would
        leave the device idle and take one SM's time for each).
    wide_xmv : {"auto", "rows", "staged"}
        XMV kernel of the wide path (:data:`mgkflow.gpu.solvers.wide.WIDE_XMVS`): "staged" keeps G2's
        nonzeros in registers and stages slices of P in shared memory (one shared load and a
        few flops per product; float32 products); "rows" walks row pairs through L1 (float64
        accumulation of each product); "auto" takes the applicable strategy of least cost by
        the models calibrated on this GPU model (``python -m mgkflow.bench.gpu_calibrate``;
        without them "staged" for labeled edge kernels at q >= 0.01, else "rows").
    p_smem : bool
        Launch pairs whose P fits in shared memory with a kernel variant compiled for that
        (shared-memory addressing in the XMV); False uses one generic kernel.
    small_block : int
        Threads per block for pairs of at most 16 tile pairs (small molecules): many such
        blocks share an SM instead of one 512-thread block idling most warps; 0 disables.
    row_ilp : {1, 2}
        Row mode: independent float64 accumulation chains per lane (default 2: measured 8%
        faster on BA labeled, the solver being latency bound).
    max_scratch_bytes : int, optional
        Cap on the global scratch memory (default: 60% of the free device memory).
    min_blocks : int, optional
        Resident blocks per SM the compiler must fit registers for (``__launch_bounds__``);
        default 2 (the 96-node workloads fit two blocks' product vectors in shared memory).
    sort_jobs : bool
        Hand out jobs largest estimated cost first (default); False keeps the pairs' order.
    a_in_shared : bool
        Keep a = M p in shared memory beside p (default); False keeps it in global memory
        so that more blocks fit per SM.
    smem_limit : int, optional
        Cap on the dynamic shared memory per block for P and A (default: the device's
        opt-in limit); 0 keeps every product vector in global memory.

    Attributes
    ----------
    last_extra : dict
        Figures of the last ``solve``: device seconds, launches, GFLOP/s etc.

    Notes
    -----
    The backend's parts (:mod:`mgkflow.gpu` lists the modules): ``batches``
    (:class:`~mgkflow.gpu.batch.BatchCache`, the uploaded batch), ``launcher``
    (:class:`~mgkflow.gpu.launch.Launcher`, stream and reused buffers) and one run path per solver of
    :mod:`mgkflow.gpu.solvers`: ``compact_path``, ``per_block_path``, ``wide_path``.

    ``solve_gradient`` and ``solve_nodal`` (the optional backend interface of docs/gradients.md)
    run the per-pair solver compiled with the ``gradient`` / ``nodal`` flag of
    :class:`~mgkflow.gpu.source.KernelConfig` (:mod:`mgkflow.gpu.gradient`); pairs too large for
    one block are solved by the CPU oracle, unlabeled pairs in closed form where it holds.
    """

    name = "gpu"

    def __init__(
        self,
        rtol: float = DEFAULT_RTOL,
        max_iter: int = 10_000,
        block: int = DEFAULT_BLOCK,
        xmv: str = "rows",
        primitives: str | np.ndarray = "auto",
        tile_sort: bool = True,
        row_ilp: int = 2,
        wide: bool | str = "auto",
        wide_xmv: str = "auto",
        small_block: int = 128,
        p_smem: bool = True,
        a_double: bool = False,
        max_scratch_bytes: int | None = None,
        smem_limit: int | None = None,
        min_blocks: int | None = None,
        a_in_shared: bool = True,
        sort_jobs: bool = True,
    ) -> None:
        if not 0 < rtol < 1:
            raise ValueError(f"rtol must lie in (0, 1), got {rtol}")
        self.rtol = float(rtol)
        self.max_iter = int(max_iter)
        self.block = int(block)
        if xmv not in strategies.available("block"):
            raise ValueError(f"xmv must be one of {sorted(strategies.available('block'))}, got {xmv!r}")
        self.xmv = xmv
        self.primitives = _checked_primitives(primitives)
        self.tile_sort = bool(tile_sort)
        self.row_ilp = int(row_ilp)
        if wide not in (True, False, "auto"):
            raise ValueError(f"wide must be True, False or 'auto', got {wide!r}")
        self.wide = wide
        if wide_xmv not in WIDE_XMVS:
            raise ValueError(f"wide_xmv must be one of {WIDE_XMVS}, got {wide_xmv!r}")
        self.wide_xmv = wide_xmv
        if small_block and (small_block % 32 or not 32 <= small_block <= 1024):
            raise ValueError(f"small_block must be 0 or a multiple of 32 in [32, 1024], got {small_block}")
        self.small_block = int(small_block)
        self.p_smem = bool(p_smem)
        self.a_double = bool(a_double)
        self.max_scratch_bytes = max_scratch_bytes
        self.smem_limit = smem_limit
        self.min_blocks = int(min_blocks) if min_blocks is not None else DEFAULT_MIN_BLOCKS
        self.a_in_shared = bool(a_in_shared)
        self.sort_jobs = bool(sort_jobs)
        self.last_extra: dict = {}
        #: what the last value call keeps for its repetition (:class:`_ValueCall`)
        self._value_kept: KeptCall | None = None
        self.limits = device.device_limits()
        self.device_name = self.limits.name
        self.n_sm = self.limits.n_sm
        self.batches = BatchCache()
        self.launcher = Launcher(self.limits)
        self._maps = DeviceMaps(self.device_name)
        self.compact_path: CompactPath = solvers.get("compact").path(self)
        self.per_block_path: PerBlockPath = solvers.get("per_block").path(self)
        self.wide_path: WidePath = solvers.get("wide").path(self)

    def use_stream(self) -> None:
        """Run this backend's per-block launches (job upload, counter reset, kernel, read-back) in a
        stream of its own, so that its read-backs wait for its own kernels only: two backends in two
        threads (the tiled Gram path's ``overlap``) then overlap one's host work with the other's
        device work. A blocking stream: uploads on the legacy stream stay ordered before it."""
        self.launcher.use_stream()

    @property
    def stream(self) -> Any:
        """CUDA stream of the per-block launches (None: the legacy default stream); see :meth:`use_stream`."""
        return self.launcher.stream

    @property
    def pack_source(self) -> str:
        """Where the last call's batch came from: "packed", "adopted" (pipeline) or "cached"."""
        return self.batches.pack_source

    # ------------------------------------------------------------------ packing
    def adopt(self, packed: HostBatch) -> None:
        """Use a batch packed elsewhere (the pipeline's Pack stage, :func:`mgkflow.gpu.pack.pack_for_kernels`)
        when a call comes with the same graphs and layout: it is uploaded, not packed again."""
        if not isinstance(packed, HostBatch):
            raise TypeError(f"adopt expects a mgkflow.gpu.pack.HostBatch, got {type(packed).__name__}")
        self.batches.adopted = packed

    def host_batch(
        self, xs: Sequence[GraphSystem], ys: Sequence[GraphSystem], node_kernel: BaseKernel, edge_kernel: BaseKernel
    ) -> HostBatch:  # fmt: skip
        """The host batch :meth:`solve` packs for a value-only call on ``xs`` x ``ys`` (the same lists
        as the call's): several backends (the solver threads of a tiled Gram run) pack once and
        :meth:`adopt` it."""
        systems = list(xs) if xs is ys else list(xs) + list(ys)
        config = self._config(systems, node_kernel, edge_kernel)
        return pack_host(systems, config, self._tile_sort(config, self.compact_path.all_compact(systems, config)))

    def _tile_sort(self, config: KernelConfig, all_compact: bool) -> bool:
        """:func:`mgkflow.gpu.batch.tile_sort` with this backend's ``tile_sort``."""
        return tile_sort(config, self.tile_sort, all_compact)

    def _device_batch(
        self, systems: Sequence[GraphSystem], config: KernelConfig, all_compact: bool = False
    ) -> DeviceBatch:
        """The uploaded batch of ``systems`` (:meth:`mgkflow.gpu.batch.BatchCache.device_batch`; ``all_compact``:
        every pair of the call goes to the compact solver, see :func:`mgkflow.gpu.batch.tile_sort`)."""
        return self.batches.device_batch(systems, config, self._tile_sort(config, all_compact))

    # ------------------------------------------------------------------ solve
    def solve(
        self,
        xs: Sequence[GraphSystem],
        ys: Sequence[GraphSystem],
        pairs: Sequence[tuple[int, int]],
        node_kernel: BaseKernel,
        edge_kernel: BaseKernel,
        progress: Callable[[int], Any] | None = None,
        assembly: Any = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
        """Solve ``pairs`` [(i, j), ...] between ``xs[i]`` and ``ys[j]`` on the GPU.

        Steps: configuration (structure only) -> pack and upload (cached while the same graphs
        come back) -> in waves of pairs (:func:`mgkflow.gpu.plan.waves`), each wave routed to the compact solver's
        bins (the modules of its bins built in one round, :func:`call_modules`: missing ones compiled
        concurrently, cached) and launched while the next is routed -> the pairs no bin took:
        launch plan and per-block launches -> wide pairs.
        The kernels' values travel in ``mgk_kpar`` (no recompilation).

        ``assembly`` (:meth:`gram_values`' :class:`~mgkflow.gpu.assemble.GramAssembly`): a call that repeats the
        call before (its kept routing and plan) and sends no pair wide keeps its results on the device, the
        assembly queued behind its launches, and returns None.

        Returns
        -------
        values, iterations, residuals, converged : ndarrays aligned with ``pairs``
        """
        t_start = time.perf_counter()
        self.launcher.first_launch_at = None
        npairs = len(pairs)
        if npairs == 0:
            self.last_extra = {}
            return self.launcher.outputs(0).result()
        same = xs is ys
        systems = xs if same else [*xs, *ys]  # (a Restopped xs stays one: its systems are not made)
        yoff = 0 if same else len(xs)
        config = self._config(systems, node_kernel, edge_kernel)
        values = kernel_values(node_kernel, edge_kernel)
        prim_map = self._maps.device_map(self.primitives, labeled=not isinstance(edge_kernel, Constant))
        t0 = time.perf_counter()
        all_compact = self.compact_path.all_compact(systems, config)
        db = self._device_batch(systems, config, all_compact)
        t_pack = time.perf_counter() - t0

        pr = np.asarray(pairs)
        if pr.dtype != np.int32 or len(systems) >= 2**31:
            pr = pr.astype(np.int64, copy=False)  # (int64 pairs: no copy)
        pr = pr.reshape(-1, 2)
        g1 = pr[:, 0]  # views: a copy of 3.4M pairs' columns took 30 ms before the first launch
        g2 = pr[:, 1] + yoff if yoff else pr[:, 1]
        # a call that repeats the one before (the steps of a hyperparameter search, repeated calls) reuses its
        # routing, plan and job lists (``yoff``: the same pairs of the same batch split otherwise are other pairs;
        # the waves the routing went by)
        key = ("value", config, npairs, yoff, tuple(waves(npairs)))
        held = self._value_kept
        repeat = held is not None and held.matches(key, db, pr)
        kept = held.data if repeat else None
        self._value_kept = None  # (a failing call leaves nothing kept)
        keep = assembly is not None and kept is not None and kept.plan.wide.size == 0
        out = self.launcher.outputs(npairs, keep=keep)
        shared = SharedArgs(db, strategies.get(config.xmv).args(db, prim_map), out, self.rtol, self.max_iter)
        self.launcher.reserve_jobs(2 * npairs)
        # rank 0, the compact solver: its launches queued wave by wave (every launch goes into the stream
        # before the first wait: no gaps between them)
        queued, compact_mods, rest, t_compile, routed = self.compact_path.run_waves(
            db, g1, g2, config, values, shared, all_compact, call_modules, None if kept is None else kept.routed)
        # ranks 1 and 2: the launch plan of the pairs left sends some wide, the others to per-block launches
        # (last: growing their scratch waits for the kernels queued before, which at the end of the call
        # costs no overlap)
        t0 = time.perf_counter()
        solver, _ = call_modules(config, [], per_block=bool(rest.size))
        func = None if solver is None else solver.function(SOLVER_KERNEL)
        t_compile += time.perf_counter() - t0
        if kept is None:
            kept = self._value_call(db, g1, g2, func, rest, routed)
        plan, budget = kept.plan, kept.budget
        shared.N, shared.cost, shared.orders = kept.N, kept.cost, kept.orders
        if len(plan.wide) < npairs:
            self.wide_path.workspace.clear()  # per-block launches: their scratch comes first
        t0 = time.perf_counter()
        classes = self.per_block_path.launch_classes(plan, config, values)  # builds the plan's kernel variants
        t_compile += time.perf_counter() - t0
        for sel, use_smem, fn, blk in classes:
            queued.append(self.per_block_path.run_class(sel, use_smem, fn, blk, g1, g2, db, shared, budget, pairs))
        if keep:  # K, iterations, residuals and flags written on the device behind the launches (no derivatives)
            assembly.queue(out, out.d_k, 0, self.launcher.stream, kept.orders)
        self.launcher.complete(out, queued)
        launches = []
        dev_seconds = 0.0
        for _, info in queued:
            dev_seconds += info["seconds"]
            launches.append(info)
            if progress is not None:
                progress(info["pairs"])
        wide_stats, secs = self.wide_path.run(plan.wide, g1, g2, db, config, values, out, progress)
        dev_seconds += secs
        t_waited = time.perf_counter()
        if keep:  # the results are the assembly's; the figures' iterations from its matrix where they are counted
            # (gathering them for 3.4M drug pairs took 30-40 ms: S33-C)
            values_out = res = conv = None
            iters = None if kept.products is None else assembly.result()[2][pr[:, 0], pr[:, 1] + yoff]
        else:
            values_out, iters, res, conv = out.result()
        if func is not None:
            regs = func.num_regs
        else:  # every pair went to the compact solver
            regs = max((m.function(COMPACT_KERNEL).num_regs for m in compact_mods), default=None)
        self.last_extra = _call_figures(self, kept.products, iters, dev_seconds, t_compile, t_pack, t_start,
                                        launches, wide_stats, regs, config)  # fmt: skip
        self._value_kept = held if repeat else KeptCall.of(key, db, pr, kept)
        first = self.launcher.first_launch_at
        # host time before the first kernel (the device idles; the whole call up to the last wait where only the wide
        # path ran, which queues no jobs), and after the device's work (the last wait)
        self.last_extra["prelaunch_s"] = (first if first is not None else t_waited) - t_start
        self.last_extra["tail_s"] = time.perf_counter() - t_waited
        return None if keep else (values_out, iters, res, conv)

    def _value_call(
        self, db: DeviceBatch, g1: np.ndarray, g2: np.ndarray, func: Any, rest: np.ndarray, routed: tuple
    ) -> _ValueCall:
        """What a value call keeps for its repetition beside the compact solver's ``routed`` launches: the
        per-block launch plan and scratch budget of the pairs ``rest`` the compact solver left
        (:meth:`PerBlockPath.plan_subset`; as the gradient's kept plan, the budget is that of the first call),
        their product sizes and job costs, the per-block launches' job orders (filled by their first run) and the
        products per pair of the call's figures."""
        plan, budget = self.per_block_path.plan_subset(db, g1, g2, func, rest)
        N = np.zeros(0, dtype=np.int64)
        cost = None
        if rest.size:  # product sizes and job costs of the pairs left to the per-block launches
            N = np.zeros(len(g1), dtype=np.int64)
            N[rest] = db.nt[g1[rest]] * db.nt[g2[rest]] * 64
            if self.sort_jobs:
                cost = np.zeros(len(g1))
                cost[rest] = self.per_block_path.cost(db, g1[rest], g2[rest])
        # the GFLOP/s figure's products, counted for calls of up to SORT_EXACT_MAX pairs (beyond, the count
        # itself would cost host time the device then waits for: none)
        products = None
        if len(g1) <= SORT_EXACT_MAX:
            products = 2.0 * db.nnz_per_graph[g1].astype(np.float64) * db.nnz_per_graph[g2]
        return _ValueCall(routed, plan, budget, N, cost, {}, products)

    # ------------------------------------------------------------------ derivatives, nodal
    def solve_gradient(
        self,
        xs: Sequence[GraphSystem],
        ys: Sequence[GraphSystem],
        pairs: Sequence[tuple[int, int]],
        node_kernel: BaseKernel,
        edge_kernel: BaseKernel,
        wrt_q: bool = False,
        progress: Callable[[int], Any] | None = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Values and dK/dh of ``pairs`` (interface: :class:`mgkflow.backends.base.Backend`; the
        device side: :mod:`mgkflow.gpu.gradient`)."""
        return gradient.solve_gradient(self, xs, ys, pairs, node_kernel, edge_kernel, wrt_q, progress)

    def gram_gradient(
        self,
        xs: Sequence[GraphSystem],
        pairs: np.ndarray,
        node_kernel: BaseKernel,
        edge_kernel: BaseKernel,
        wrt_q: bool,
        cols: np.ndarray,
        scale: np.ndarray,
        normalize: bool,
    ) -> tuple[tuple | None, tuple | None]:
        """A gradient Gram call, K and dK assembled on the device where it can be (see
        :func:`mgkflow.gpu.gradient.gram_gradient` and :mod:`mgkflow.gpu.assemble`)."""
        return gradient.gram_gradient(self, xs, pairs, node_kernel, edge_kernel, wrt_q, cols, scale, normalize)

    def gram_values(
        self, xs: Sequence[GraphSystem], pairs: np.ndarray, node_kernel: BaseKernel, edge_kernel: BaseKernel,
        normalize: bool,
    ) -> tuple[tuple | None, tuple | None]:  # fmt: skip
        """A value Gram call over ``pairs`` (the upper triangle of ``xs``, self pairs included), K assembled on
        the device where it can be (:mod:`mgkflow.gpu.assemble`, no derivative columns): a call that repeats
        the call before (a θ loop's steps, repeated calls; :meth:`solve` keeps its routing and plan) and sends
        no pair wide. Returns (assembled, solved) as :meth:`gram_gradient` does, assembled = (K, an empty dK,
        iterations, residuals, flags, K(G, G), counts of non-finite derivatives and values)."""
        from .assemble import MAX_BYTES, GramAssembly, output_bytes

        if output_bytes(len(xs), 0) > MAX_BYTES:
            return None, self.solve(xs, xs, pairs, node_kernel, edge_kernel)
        none = np.zeros(0)
        asm = GramAssembly(self, len(xs), pairs, none.astype(np.int64), none, normalize)
        solved = self.solve(xs, xs, pairs, node_kernel, edge_kernel, assembly=asm)
        if solved is not None:
            return None, solved
        return asm.finished(self.last_extra), None

    def solve_nodal(
        self,
        xs: Sequence[GraphSystem],
        ys: Sequence[GraphSystem],
        pairs: Sequence[tuple[int, int]],
        node_kernel: BaseKernel,
        edge_kernel: BaseKernel,
        progress: Callable[[int], Any] | None = None,
    ) -> tuple[list[np.ndarray], np.ndarray, np.ndarray, np.ndarray]:
        """Node-pair similarity blocks p_i p'_i' x_ii' of ``pairs`` (see :mod:`mgkflow.gpu.gradient`)."""
        return gradient.solve_nodal(self, xs, ys, pairs, node_kernel, edge_kernel, progress)

    def _config(
        self, systems: Sequence[GraphSystem], node_kernel: BaseKernel, edge_kernel: BaseKernel,
        gradient: bool = False, nodal: bool = False,
    ) -> KernelConfig:  # fmt: skip
        """The value-free :class:`KernelConfig` of a call (kernel structure, dtypes, settings);
        ``gradient`` / ``nodal`` solves use the row-pair XMV whatever ``xmv``."""
        special = gradient or nodal
        weight_double = self.batches.weights_double(systems)
        node_dtypes, edge_dtypes = self.batches.label_dtypes(systems, node_kernel.fields, edge_kernel.fields)
        return make_config(
            node_kernel,
            edge_kernel,
            node_dtypes,
            edge_dtypes,
            block=self.block,
            a_double=self.a_double,
            weight_double=weight_double,
            min_blocks=self.min_blocks,
            xmv="rows" if special else self.xmv,
            row_ilp=self.row_ilp,
            adaptive=not special and not (isinstance(self.primitives, str) and self.primitives == "ss"),
            gradient=gradient,
            nodal=nodal,
            unit_weight=not weight_double and self.batches.weights_unit(systems),
        )


def _checked_primitives(primitives: str | np.ndarray) -> str | np.ndarray:
    """``GPUBackend(primitives=...)`` checked: "auto", a primitive's name, or a (65, 65) map (as uint8)."""
    if isinstance(primitives, str):
        if primitives != "auto" and primitives not in PRIMITIVES:
            raise ValueError(f"primitives must be 'auto', one of {PRIMITIVES} or a (65, 65) map, got {primitives!r}")
        return primitives
    primitives = np.asarray(primitives)
    if primitives.shape != (65, 65) or primitives.max(initial=0) >= len(PRIMITIVES):
        raise ValueError("a primitive map is a (65, 65) array of primitive ids")
    return primitives.astype(np.uint8)


def call_modules(
    config: KernelConfig, compact_launches: Sequence[CompactLaunch], per_block: bool
) -> tuple[device.Module | None, list[device.Module]]:
    """The modules a call's routing needs first, built in one :func:`mgkflow.gpu.device.build_modules`
    round (the missing ones compiled concurrently): the per-block solver's for ``config`` when
    ``per_block`` (some pair goes to it; its kernel also sizes the launch plan), else None, and the
    compact solver's of each launch in ``compact_launches``, in order. The per-block kernel variants
    the launch plan then picks (P in shared memory, small blocks) are built by
    :meth:`mgkflow.gpu.solvers.per_block.PerBlockPath.launch_classes`."""
    requests = [compact_request(config, cl.block, cl.ncat > 0) for cl in compact_launches]
    if per_block:
        requests.append(solver_request(config))
    if not requests:
        return None, []
    mods = device.build_modules(requests)
    return (mods.pop() if per_block else None), mods


def _call_figures(
    be: GPUBackend, products: np.ndarray | None, iters: np.ndarray | None, dev_seconds: float, t_compile: float,
    t_pack: float, t_start: float, launches: list, wide_stats: list, regs: int | None, config: KernelConfig,
) -> dict:  # fmt: skip
    """The call's figures (``last_extra``). ``products``: 2 nnz1 nnz2 of each pair (None: not counted, the
    GFLOP/s figure is then 0), ``iters`` their iterations (None where ``products`` is); ``regs``: registers per
    thread of the per-block solver's kernel, or of the compact solver's (the most of its launches) when no pair went
    to the former."""
    # (an elementwise sum, not np.dot: with np.dot here the numba passes after it, the result scatter and the Gram
    # assembly, ran 20-40 times slower on the H100 host, S33-A against S33-B; most likely the BLAS library's threads
    # spinning beside them)
    flops = 0.0 if products is None else float(np.sum(products * iters))
    return {
        "device": be.device_name,
        "device_s": dev_seconds,
        "compile_s": t_compile,
        "pack_s": t_pack,
        "pack": be.pack_source,
        "host_s": time.perf_counter() - t_start,
        "gflops": flops / dev_seconds / 1e9 if dev_seconds > 0 else 0.0,
        "launches": launches,
        "wide": wide_stats,
        "regs": regs,
        "compiles": device.compile_count(),
        "config": f"block={be.block} min_blocks={be.min_blocks} xmv={config.xmv} "
        f"primitives={be._maps.label} tile_sort={be.tile_sort} "
        f"row_ilp={config.row_ilp} p_smem={be.p_smem} wide_xmv={be.wide_xmv} "
        f"a_double={be.a_double} weight_double={config.weight_double} "
        f"a_in_shared={be.a_in_shared}",
    }
