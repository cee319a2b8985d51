"""PyCUDA backend of the marginalized graph kernel (docs/design.md §5).

Imported lazily by :mod:`mgkflow.gpu`; importing this module imports PyCUDA.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pycuda.driver as cuda  # noqa: E402  (lazy: this module is imported on demand)

from ..format.octile import OctileBatch
from ..kernels import BaseKernel
from ..system import GraphSystem
from . import compact, device, strategies
from .pack import HostBatch, layout_key, pack_host, vector_digest, weights_need_double
from .plan import LaunchPlan, plan_launches, scratch_doubles
from .plan import waves as plan_waves
from .primitive_map import PRIMITIVES, constant_map, load_map
from .source import DEFAULT_BLOCK, KPAR, KernelConfig, kernel_source, kernel_values, make_config
from .wide import N_VECTORS, solve_pair_wide

__all__ = ["GPUBackend", "DEFAULT_RTOL", "compile_module"]

#: Default relative residual tolerance: K lands within ~1e-8 of float64 at rtol 1e-6
#: on the paper workloads (CG starting from 0); we keep a margin.
DEFAULT_RTOL = 1e-7
#: Nonzero products per XMV (nnz1 * nnz2) from which a pair may go "wide" (whole device).
WIDE_MIN_PRODUCTS = 1e7
#: Pairs with at most this many product unknowns (16 tile pairs) run in ``small_block`` blocks.
SMALL_PAIR_UNKNOWNS = 16 * 64
#: Launches of more pairs than this order their jobs by cost classes, not by an exact sort.
SORT_EXACT_MAX = 1 << 16
#: Default ``__launch_bounds__`` minimum of resident blocks per SM.
DEFAULT_MIN_BLOCKS = 2
#: Bytes per product-vector entry kept in shared memory: P (double) + A (float or double).
_SMEM_PER_ENTRY = {False: 12, True: 16}


_CONFIG_KEYS: dict[KernelConfig, str] = {}


def _config_key(config: KernelConfig) -> str:
    """``config.key`` (the digest of the configuration's repr), computed once per configuration."""
    key = _CONFIG_KEYS.get(config)
    if key is None:
        key = _CONFIG_KEYS[config] = config.key
    return key


def compile_module(config: KernelConfig) -> device.Module:
    """Compile (or fetch from the process cache) the per-pair solver module for ``config``."""
    return device.build_module(*_solver_request(config))


def _solver_request(config: KernelConfig) -> device.ModuleRequest:
    """The :func:`mgkflow.gpu.device.build_modules` request of the per-pair solver module for ``config``."""
    return (lambda: kernel_source(config)), ("solver", _config_key(config))


def _compact_request(config: KernelConfig, block: int) -> device.ModuleRequest:
    """The :func:`mgkflow.gpu.device.build_modules` request of the compact solver module of ``block``-thread
    launches (``__launch_bounds__`` for ``compact.MIN_THREADS`` resident threads per SM)."""
    min_blocks = max(1, compact.MIN_THREADS // block)
    return ((lambda: compact.compact_source(config, block, min_blocks)),
            ("compact", _config_key(config), block, min_blocks, compact.KE))  # fmt: skip


@dataclass
class _DeviceBatch:
    """A packed batch uploaded to the device (kept while the same graphs come back)."""

    batch: OctileBatch
    arrays: dict[str, Any]
    elab_stride: int
    nlab_stride: int
    nnz_per_graph: np.ndarray
    octiles_per_graph: np.ndarray
    nt: np.ndarray
    keepalive: tuple
    relab_stride: int = 1
    #: staged wide-XMV tables of graphs used as G2 (filled by ``mgkflow.gpu.wide``)
    staged: dict = field(default_factory=dict)
    #: node permutation applied to each graph before packing (None: natural order)
    perms: tuple | None = None
    #: digest of the systems' p, q, d the uploaded node vectors hold
    vec_digest: int = 0
    #: the compact solver's routing tables of these graphs, per coefficient size (built on first use)
    routers: dict = field(default_factory=dict)

    def router(self, c_bytes: int, smem_per_sm: int) -> compact.CompactRouter:
        """The :class:`mgkflow.gpu.compact.CompactRouter` of these graphs for ``c_bytes`` coefficients and a
        device's shared memory budget (:func:`mgkflow.gpu.compact.smem_budget`)."""
        key = (int(c_bytes), int(smem_per_sm))
        if key not in self.routers:
            self.routers[key] = compact.CompactRouter(self.batch.n_nodes, self.nnz_per_graph, c_bytes, smem_per_sm)
        return self.routers[key]

    def refresh_vectors(self, systems: Sequence[GraphSystem], digest: int) -> None:
        """Upload new start/stop probabilities and degrees (same graphs, e.g. another q): the
        structure, labels and weights stay on the device."""
        total = int(self.batch.d.size)
        d, p, q = np.ones(total), np.zeros(total), np.zeros(total)
        for k, s in enumerate(systems):
            perm = slice(None) if self.perms is None else self.perms[k]
            o, n = int(self.batch.node_offset[k]), s.n
            d[o : o + n], p[o : o + n], q[o : o + n] = s.d[perm], s.p[perm], s.q[perm]
        self.batch = replace(self.batch, d=d, p=p, q=q)
        self.arrays.update(d=device.upload(d), p=device.upload(p), q=device.upload(q))
        self.vec_digest = digest


class GPUBackend:
    """Solve many pairs on one CUDA device with PyCUDA (one launch per size class).

    Parameters
    ----------
    rtol : float
        CG stops when ||r|| <= rtol * ||b|| (recursive residual, float64).
    max_iter : int
        CG iteration limit; pairs that reach it are flagged not converged.
    block : int
        Threads per block.
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
        Row mode: sort the nodes of each tile by degree (K is permutation invariant).
    wide : {"auto", True, False}
        Solve pairs with the whole device, one at a time (:mod:`mgkflow.gpu.wide`): True for
        every pair, False never; "auto" for pairs of at least ``WIDE_MIN_PRODUCTS`` nonzero
        products per XMV when there are fewer such pairs than SMs (one block per pair would
        leave the device idle and take one SM's time for each).
    wide_xmv : {"auto", "rows", "staged"}
        XMV kernel of the wide path (:data:`mgkflow.gpu.wide.WIDE_XMVS`): "staged" keeps G2's
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
        if isinstance(primitives, str):
            if primitives != "auto" and primitives not in PRIMITIVES:
                raise ValueError(
                    f"primitives must be 'auto', one of {PRIMITIVES} or a (65, 65) map, got {primitives!r}"
                )
        else:
            primitives = np.asarray(primitives)
            if primitives.shape != (65, 65) or primitives.max(initial=0) >= len(PRIMITIVES):
                raise ValueError("a primitive map is a (65, 65) array of primitive ids")
            primitives = primitives.astype(np.uint8)
        self.primitives = primitives
        self.tile_sort = bool(tile_sort)
        self.row_ilp = int(row_ilp)
        if wide not in (True, False, "auto"):
            raise ValueError(f"wide must be True, False or 'auto', got {wide!r}")
        self.wide = wide
        from .wide import WIDE_XMVS

        if wide_xmv not in WIDE_XMVS:
            raise ValueError(f"wide_xmv must be one of {WIDE_XMVS}, got {wide_xmv!r}")
        self.wide_xmv = wide_xmv
        if small_block and (small_block % 32 or not 32 <= small_block <= 1024):
            raise ValueError(f"small_block must be 0 or a multiple of 32 in [32, 1024], got {small_block}")
        self.small_block = int(small_block)
        self.p_smem = bool(p_smem)
        self._wide_workspace: dict = {}  # device vectors of the wide path, kept between solves
        self.a_double = bool(a_double)
        self.max_scratch_bytes = max_scratch_bytes
        self.smem_limit = smem_limit
        self.min_blocks = int(min_blocks) if min_blocks is not None else DEFAULT_MIN_BLOCKS
        self.a_in_shared = bool(a_in_shared)
        self.sort_jobs = bool(sort_jobs)
        self.last_extra: dict = {}
        self._batch_cache: tuple | None = None
        self._wd_cache: tuple | None = None
        self._vd_cache: tuple | None = None
        self._prim_cache: dict = {}
        self._out_dev: tuple | None = None  # output buffers reused between calls: (capacity, buffers)
        self._jobs_dev: tuple | None = None  # job list buffers reused between launches: (capacity, device, host)
        self._jobs_used = 0  # ints of the host job staging taken by this call's queued launches
        self._pinned: tuple | None = None  # page-locked read-back staging reused between calls: (capacity, arrays)
        #: CUDA stream of the per-block launches (None: the legacy default stream); see :meth:`use_stream`
        self.stream: Any = None
        self._adopted: HostBatch | None = None
        # (graph ids, the graphs (kept: their ids stay theirs), node and nonzero counts) of the last call
        self._sizes_of: tuple | None = None
        #: where the last call's batch came from: "packed", "adopted" (pipeline) or "cached"
        self.pack_source = ""
        self._map_cache: tuple | None = None
        self._primitives_label = ""
        self._scratch = None
        self._scratch_bytes = 0
        self.limits = device.device_limits()
        self.device_name = self.limits.name
        self.n_sm = self.limits.n_sm

    def use_stream(self) -> None:
        """Run this backend's per-block launches (job upload, counter reset, kernel, read-back) in a
        stream of its own, so that its read-backs wait for its own kernels only: two backends in two
        threads (the tiled Gram path's ``overlap``) then overlap one's host work with the other's
        device work. A blocking stream: uploads on the legacy stream stay ordered before it."""
        if self.stream is None:
            device.ensure_context()  # current in this thread (a Dask worker's second task thread)
            self.stream = cuda.Stream()

    # ------------------------------------------------------------------ packing
    def adopt(self, packed: HostBatch) -> None:
        """Use a batch packed elsewhere (the pipeline's Pack stage, :func:`mgkflow.gpu.pack.pack_for_kernels`)
        when a call comes with the same graphs and layout: it is uploaded, not packed again."""
        if not isinstance(packed, HostBatch):
            raise TypeError(f"adopt expects a mgkflow.gpu.pack.HostBatch, got {type(packed).__name__}")
        self._adopted = packed

    def host_batch(
        self, xs: Sequence[GraphSystem], ys: Sequence[GraphSystem], node_kernel: BaseKernel, edge_kernel: BaseKernel
    ) -> HostBatch:  # fmt: skip
        """The host batch :meth:`solve` packs for a value-only call on ``xs`` x ``ys`` (the same lists
        as the call's): several backends (the solver threads of a tiled Gram run) pack once and
        :meth:`adopt` it."""
        systems = list(xs) if xs is ys else list(xs) + list(ys)
        config = self._config(systems, node_kernel, edge_kernel)
        return pack_host(systems, config, _tile_sort(config, self.tile_sort, self._all_compact(systems, config)))

    def _device_batch(
        self, systems: Sequence[GraphSystem], config: KernelConfig, digest: int | None = None,
        all_compact: bool = False,
    ) -> _DeviceBatch:  # fmt: skip
        """The uploaded batch of ``systems`` (cached while the same graphs come back; an adopted
        host batch of the same layout is uploaded instead of packing). ``all_compact``: every pair of
        the call goes to the compact solver (see :func:`_tile_sort`)."""
        sort = _tile_sort(config, self.tile_sort, all_compact)
        key = layout_key(systems, config, sort)
        if digest is None:
            digest = vector_digest(systems)
        if self._batch_cache is not None and self._batch_cache[0] == key:
            db = self._batch_cache[1]
            if db.vec_digest != digest:  # same graphs, other p / q (a hyperparameter sweep)
                db.refresh_vectors(systems, digest)
            self.pack_source = "cached"
            return db
        hb = self._adopted
        if hb is not None and hb.key == key:
            self.pack_source = "adopted"
        else:
            hb = pack_host(systems, config, sort)
            self.pack_source = "packed"
        self._batch_cache = None  # give the previous batch's device memory back first
        # element dtypes are checked against the kernels' declared parameters at launch
        arrays = {k: device.upload(v) for k, v in hb.host.items()}
        batch = hb.batch
        db = _DeviceBatch(
            batch=batch,
            arrays=arrays,
            elab_stride=hb.elab_stride,
            nlab_stride=hb.nlab_stride,
            nnz_per_graph=np.diff(batch.nnz_offset),
            octiles_per_graph=batch.octiles_per_graph(),
            nt=batch.n_tiles_side.astype(np.int64),
            keepalive=(hb.graphs, batch.n_graphs),
            relab_stride=hb.relab_stride,
            perms=hb.perms,
            vec_digest=hb.digest,
        )
        if hb.digest != digest:
            db.refresh_vectors(systems, digest)
        self._batch_cache = (key, db)
        return db

    def _primitive_map(self, edge_kernel: BaseKernel) -> Any:
        """Device copy of the primitive selection map for this call (octile mode)."""
        from ..kernels import Constant

        labeled = not isinstance(edge_kernel, Constant)
        if isinstance(self.primitives, np.ndarray):
            sel, label = self.primitives, "map"
        elif self.primitives == "auto":
            if labeled not in self._prim_cache:  # read the measured map once per backend
                self._prim_cache[labeled] = load_map(self.device_name, labeled)
            sel = self._prim_cache[labeled]
            label = "measured" if sel is not None else "ss(no map)"
            if sel is None:
                sel = constant_map("ss")
        else:
            sel, label = constant_map(self.primitives), self.primitives
        self._primitives_label = label
        key = sel.tobytes()
        if self._map_cache is None or self._map_cache[0] != key:
            self._map_cache = (key, device.upload(np.ascontiguousarray(sel, dtype=np.uint8)))
        return self._map_cache[1]

    def _reused(self, attr: str, n: int, alloc: Callable[[int], tuple]) -> tuple:
        """``alloc(capacity)`` kept in ``self.<attr>`` as (capacity, buffers) between calls, grown when a call
        needs more than ``n`` (the old buffers are given back first)."""
        held = getattr(self, attr)
        if held is None or held[0] < n:
            setattr(self, attr, None)
            cap = max(n, 1024)
            held = (cap, alloc(cap))
            setattr(self, attr, held)
        return held[1]

    def _output_buffers(self, n: int) -> tuple:
        """Device output buffers for ``n`` pairs (K, iterations, residuals, flags, job counter)."""
        return self._reused("_out_dev", n, _alloc_outputs)

    def _staging(self, n: int) -> tuple:
        """Page-locked host arrays (K, iterations, residuals, flags) for ``n`` pairs' read-back: the
        launches' copies back then run asynchronously, queued behind their kernels."""
        return self._reused("_pinned", n, _alloc_staging)

    def _reserve_jobs(self, n_ints: int) -> None:
        """Grow the job list buffers (device, and its page-locked host staging) to ``n_ints`` before a
        call's launches, and start the staging over: growing them between queued launches would free
        memory a queued kernel or copy still reads."""
        if self._jobs_dev is None or self._jobs_dev[0] < n_ints:
            if self._jobs_dev is not None:
                self._idle()
            self._jobs_dev = None
            cap = max(int(n_ints), 2048)
            self._jobs_dev = (cap, cuda.mem_alloc(4 * cap), cuda.pagelocked_empty(cap, np.int32))
        self._jobs_used = 0

    def _upload_jobs(self, g1: np.ndarray, g2: np.ndarray) -> device.DeviceArray:
        """The int32 job list (g1, g2 per job) on the device, in a buffer reused between launches (queued
        launches of one stream run in order: a launch's upload runs after the kernels before it). The
        list is written into its own stretch of page-locked staging, so the copy is queued without
        waiting: from pageable memory, the upload of each launch waited for the kernel before it (95 ms
        per launch on 2,048 x 2,048 blocks, measured on the H100 machine)."""
        n = 2 * len(g1)
        if self._jobs_dev is None or self._jobs_dev[0] < n or self._jobs_used + n > self._jobs_dev[0]:
            self._idle()  # the queued copies have read their staging
            self._reserve_jobs(max(n, 0 if self._jobs_dev is None else self._jobs_dev[0]))
        _, buf, host = self._jobs_dev
        stage = host[self._jobs_used : self._jobs_used + n]
        stage[0::2], stage[1::2] = g1, g2
        self._jobs_used += n
        cuda.memcpy_htod_async(buf, stage, self.stream)
        return device.DeviceArray(buf, np.dtype(np.int32), n)

    def _idle(self) -> None:
        """Wait for this backend's queued work (before a buffer a queued kernel may read is freed)."""
        if self.stream is not None:
            self.stream.synchronize()
        elif hasattr(cuda, "Context") and hasattr(cuda.Context, "synchronize"):
            cuda.Context.synchronize()

    def _get_scratch(self, nbytes: int) -> Any:
        if self._scratch is None or self._scratch_bytes < nbytes:
            if self._scratch is not None:
                self._idle()
            self._scratch = None
            self._scratch = cuda.mem_alloc(max(nbytes, 8))
            self._scratch_bytes = nbytes
        return self._scratch

    # ------------------------------------------------------------------ solve
    def solve(
        self,
        xs: Sequence[GraphSystem],
        ys: Sequence[GraphSystem],
        pairs: Sequence[tuple[int, int]],
        node_kernel: BaseKernel,
        edge_kernel: BaseKernel,
        progress: Callable[[int], Any] | None = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Solve ``pairs`` [(i, j), ...] between ``xs[i]`` and ``ys[j]`` on the GPU.

        Steps: configuration (structure only) -> pack and upload (cached while the same graphs
        come back) -> in waves of pairs (:func:`mgkflow.gpu.plan.waves`), each wave routed to the compact solver's
        bins (the modules of its bins built in one round, :meth:`_call_modules`: missing ones compiled
        concurrently, cached) and launched while the next is routed -> the pairs no bin took:
        launch plan and per-block launches -> wide pairs.
        The kernels' values travel in ``mgk_kpar`` (no recompilation).

        Returns
        -------
        values, iterations, residuals, converged : ndarrays aligned with ``pairs``
        """
        t_start = time.perf_counter()
        npairs = len(pairs)
        out = _Outputs(npairs, self._output_buffers, self._staging)
        if npairs == 0:
            self.last_extra = {}
            return out.result()
        same = xs is ys
        systems = list(xs) if same else list(xs) + list(ys)
        yoff = 0 if same else len(xs)
        config = self._config(systems, node_kernel, edge_kernel)
        values = kernel_values(node_kernel, edge_kernel)
        prim_map = self._primitive_map(edge_kernel)
        t0 = time.perf_counter()
        all_compact = self._all_compact(systems, config)
        db = self._device_batch(systems, config, self._vector_digest(systems), all_compact)
        t_pack = time.perf_counter() - t0

        pr = np.asarray(pairs)
        if pr.dtype != np.int32 or len(systems) >= 2**31:
            pr = pr.astype(np.int64, copy=False)  # (int64 pairs: no copy)
        pr = pr.reshape(-1, 2)
        g1 = pr[:, 0]  # views: a copy of 3.4M pairs' columns took 30 ms before the first launch
        g2 = pr[:, 1] + yoff if yoff else pr[:, 1]
        launches = []
        dev_seconds = 0.0
        shared = _SharedArgs(db, strategies.get(config.xmv).args(db, prim_map), out, self.rtol, self.max_iter)
        queued = []  # every launch goes into the stream before the first wait: no gaps between them
        self._reserve_jobs(2 * npairs)
        # the compact launches, wave by wave: the device starts on the first wave's pairs while the
        # host routes the next (routing is a few gathers per pair: ~0.1 s for 3.4M pairs)
        compact_mods, rest_parts, t_compile = [], [], 0.0
        for lo, hi in plan_waves(npairs) if self._compact_on(config) else [(0, npairs)]:
            wave, rest_w = self._compact_split(db, g1[lo:hi], g2[lo:hi], config)
            if lo:
                wave = [compact.CompactLaunch(cl.pairs + lo, cl.block, cl.smem) for cl in wave]
            t0 = time.perf_counter()  # (the per-block module, likely needed, compiles beside the first bins)
            _, mods = self._call_modules(config, wave, per_block=not lo and not all_compact)
            t_compile += time.perf_counter() - t0
            for cl, mod in zip(wave, mods, strict=True):
                queued.append(self._run_compact(cl, mod, config, values, g1, g2, shared))
            compact_mods += mods
            rest_parts.append(rest_w + lo if lo else rest_w)
        rest = np.concatenate(rest_parts) if len(rest_parts) > 1 else rest_parts[0]
        # the per-block launches last (growing their scratch waits for the kernels queued before: at the
        # end of the call that costs no overlap)
        t0 = time.perf_counter()
        solver, _ = self._call_modules(config, [], per_block=bool(rest.size))
        func = None if solver is None else solver.function("mgk_solve")
        t_compile += time.perf_counter() - t0
        plan, budget = self._plan_subset(db, g1, g2, func, rest)
        if len(plan.wide) < npairs:
            self._wide_workspace.clear()  # per-block launches: their scratch comes first
        if rest.size:  # product sizes and job costs of the pairs left to the per-block launches
            shared.N = np.zeros(npairs, dtype=np.int64)
            shared.N[rest] = db.nt[g1[rest]] * db.nt[g2[rest]] * 64
            if self.sort_jobs:
                shared.cost = np.zeros(npairs)
                shared.cost[rest] = self._cost(db, g1[rest], g2[rest])
        t0 = time.perf_counter()
        classes = self._launch_classes(plan, config, values)  # builds the plan's kernel variants
        t_compile += time.perf_counter() - t0
        for sel, use_smem, fn, blk in classes:
            queued.append(self._run_class(sel, use_smem, fn, blk, g1, g2, db, shared, budget, pairs))
        self._complete(out, queued)
        for _, info in queued:
            dev_seconds += info["seconds"]
            launches.append(info)
            if progress is not None:
                progress(info["pairs"])
        wide_stats, secs = self._run_wide(plan.wide, g1, g2, db, config, values, out, progress)
        dev_seconds += secs
        values_out, iters, res, conv = out.result()
        if func is not None:
            regs = func.num_regs
        else:  # every pair went to the compact solver
            regs = max((m.function(compact.KERNEL).num_regs for m in compact_mods), default=None)
        self.last_extra = self._extra(db, g1, g2, iters, dev_seconds, t_compile, t_pack, t_start, launches,
                                      wide_stats, regs, config)  # fmt: skip
        return values_out, iters, res, conv

    def _call_modules(
        self, config: KernelConfig, compact_launches: Sequence[compact.CompactLaunch], per_block: bool
    ) -> tuple[device.Module | None, list[device.Module]]:
        """The modules a call's routing needs first, built in one :func:`mgkflow.gpu.device.build_modules`
        round (the missing ones compiled concurrently): the per-block solver's for ``config`` when
        ``per_block`` (some pair goes to it; its kernel also sizes the launch plan), else None, and the
        compact solver's of each launch in ``compact_launches``, in order. The per-block kernel variants
        the launch plan then picks (P in shared memory, small blocks) are built by :meth:`_launch_classes`."""
        requests = [_compact_request(config, cl.block) for cl in compact_launches]
        if per_block:
            requests.append(_solver_request(config))
        if not requests:
            return None, []
        mods = device.build_modules(requests)
        return (mods.pop() if per_block else None), mods

    def _weights_double(self, systems: Sequence[GraphSystem]) -> bool:
        """:func:`weights_need_double` of the systems' graphs, remembered while the same graph
        objects come back (the cache holds them, so their ids stay theirs)."""
        graphs = tuple(s.graph for s in systems)
        c = self._wd_cache
        if c is not None and len(c[0]) == len(graphs) and all(a is b for a, b in zip(c[0], graphs, strict=True)):
            return c[1]
        wd = weights_need_double(systems)
        self._wd_cache = (graphs, wd)
        return wd

    def _vector_digest(self, systems: Sequence[GraphSystem]) -> int:
        """:func:`vector_digest` of the systems' p, q, d, remembered while the very same arrays come
        back (held by the cache: a hyperparameter sweep or repeated calls on prepared systems)."""
        arrays = tuple(v for s in systems for v in (s.p, s.q, s.d))
        c = self._vd_cache
        if c is not None and len(c[0]) == len(arrays) and all(a is b for a, b in zip(c[0], arrays, strict=True)):
            return c[1]
        digest = vector_digest(systems)
        self._vd_cache = (arrays, digest)
        return digest

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
        """Values and dK/dh of ``pairs`` (interface: :class:`mgkflow.cpu_solver.CPUBackend`; the
        device side: :mod:`mgkflow.gpu.gradient`)."""
        from .gradient import solve_gradient

        return solve_gradient(self, xs, ys, pairs, node_kernel, edge_kernel, wrt_q, progress)

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
        from .gradient import solve_nodal

        return solve_nodal(self, xs, ys, pairs, node_kernel, edge_kernel, progress)

    def _config(
        self, systems: Sequence[GraphSystem], node_kernel: BaseKernel, edge_kernel: BaseKernel,
        gradient: bool = False, nodal: bool = False,
    ) -> KernelConfig:  # fmt: skip
        """The value-free :class:`KernelConfig` of a call (kernel structure, dtypes, settings);
        ``gradient`` / ``nodal`` solves use the row-pair XMV whatever ``xmv``."""
        special = gradient or nodal
        first = systems[0].graph
        weight_double = self._weights_double(systems)
        return make_config(
            node_kernel,
            edge_kernel,
            {f: np.asarray(first.node_labels[f]).dtype for f in node_kernel.fields},
            {f: np.asarray(first.edge_labels[f]).dtype for f in edge_kernel.fields},
            block=self.block,
            a_double=self.a_double,
            weight_double=weight_double,
            min_blocks=self.min_blocks,
            xmv="rows" if special else self.xmv,
            row_ilp=self.row_ilp,
            adaptive=not special and not (isinstance(self.primitives, str) and self.primitives == "ss"),
            gradient=gradient,
            nodal=nodal,
        )

    def _cost(self, db: _DeviceBatch, g1: np.ndarray, g2: np.ndarray) -> np.ndarray:
        """Estimated cost per pair (largest first when ``sort_jobs``): the block strategy's."""
        return strategies.get(self.xmv).job_cost(db, g1, g2)

    def _plan(
        self, db: _DeviceBatch, g1: np.ndarray, g2: np.ndarray, func: device.Kernel, wide: bool | str | None = None,
        wide_min_products: float = WIDE_MIN_PRODUCTS, fit_budget: float = 1.0, smem_vectors: int = 1,
    ) -> tuple[LaunchPlan, int]:  # fmt: skip
        """Launch groups (:mod:`mgkflow.gpu.plan`) and the global scratch budget (bytes); ``wide``
        and ``wide_min_products`` override the backend's settings, ``fit_budget`` scales the budget
        a pair's one-block scratch must fit and ``smem_vectors`` the shared-memory bytes per product
        entry (a gradient block keeps two systems: :mod:`mgkflow.gpu.gradient`)."""
        N = db.nt[g1] * db.nt[g2] * 64
        per_entry = (_SMEM_PER_ENTRY[self.a_double] if self.a_in_shared else 8) * smem_vectors
        smem_cap = self.limits.smem_optin - func.shared_size_bytes - 64
        if self.smem_limit is not None:
            smem_cap = min(smem_cap, int(self.smem_limit))
        products = db.nnz_per_graph[g1].astype(np.float64) * db.nnz_per_graph[g2]
        free, _total = cuda.mem_get_info()
        kept = self._wide_workspace.get("vec_bytes", 0) * N_VECTORS  # the wide path's vectors, given back if needed
        budget = self.max_scratch_bytes or int(0.6 * (free + kept))
        plan = plan_launches(
            N, products, per_entry=per_entry, smem_cap=smem_cap, budget=int(budget * fit_budget), n_sm=self.n_sm,
            wide=self.wide if wide is None else wide,
            wide_min_products=wide_min_products, small_block=self.small_block, tiny_unknowns=SMALL_PAIR_UNKNOWNS,
            a_in_shared=self.a_in_shared, a_bytes=8 if self.a_double else 4,
        )  # fmt: skip
        return plan, budget

    def _allow_smem(self, fn: device.Kernel) -> None:
        """Let ``fn`` take all the dynamic shared memory the device allows. The limit is an attribute of the
        function, shared by every thread using the module: setting it to each launch's own size raced
        between the two solver threads of an overlapped Gram run (one thread's smaller value landing
        before the other's larger launch: 'invalid argument'); the largest value is the same for all."""
        fn.set_attribute(cuda.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES,
                         int(self.limits.smem_optin) - int(getattr(fn, "shared_size_bytes", 0)))  # fmt: skip

    def _compact_on(self, config: KernelConfig) -> bool:
        """Whether the compact solver takes this call's small pairs (row layout, value-only, not forced wide)."""
        forced_off = config.gradient or config.nodal or self.wide is True
        return bool(compact.BINS) and config.xmv == "rows" and not forced_off

    def _all_compact(self, systems: Sequence[GraphSystem], config: KernelConfig) -> bool:
        """Whether every pair between these systems goes to the compact solver (:func:`compact.fits_all`)."""
        if not self._compact_on(config):
            return False
        ids = tuple(id(s.graph) for s in systems)
        if self._sizes_of is None or self._sizes_of[0] != ids:  # once per set of graphs (a tiled run: per run)
            n = np.fromiter((s.graph.n_nodes for s in systems), dtype=np.int64, count=len(systems))
            nnz = np.fromiter((s.graph.nnz for s in systems), dtype=np.int64, count=len(systems))
            self._sizes_of = (ids, tuple(s.graph for s in systems), n, nnz)
        _, _, n, nnz = self._sizes_of
        return compact.fits_all(n, nnz, c_bytes=8 if config.weight_double else 4,
                                smem_per_sm=compact.smem_budget(self.limits.smem_optin))  # fmt: skip

    def _compact_split(
        self, db: _DeviceBatch, g1: np.ndarray, g2: np.ndarray, config: KernelConfig
    ) -> tuple[list[compact.CompactLaunch], np.ndarray]:
        """The compact solver's launches (:mod:`mgkflow.gpu.compact`: small pairs, row layout, value-only)
        and the indices of the pairs left to the other launches."""
        everything = np.arange(len(g1))
        if not self._compact_on(config):
            return [], everything
        bins = db.router(8 if config.weight_double else 4, compact.smem_budget(self.limits.smem_optin)).bins(g1, g2)
        if not bins:
            return [], everything
        taken = sum(c.pairs.size for c in bins)
        if taken == len(g1):
            return bins, everything[:0]
        left = np.ones(len(g1), dtype=bool)
        for c in bins:
            left[c.pairs] = False
        return bins, np.flatnonzero(left)

    def _plan_subset(
        self, db: _DeviceBatch, g1: np.ndarray, g2: np.ndarray, func: device.Kernel | None, rest: np.ndarray
    ) -> tuple[LaunchPlan, int]:
        """:meth:`_plan` of the pairs ``rest`` only, the plan's indices mapped back to the whole call
        (``func``, the per-block solver's kernel, may be None when ``rest`` is empty)."""
        empty = np.zeros(0, dtype=np.int64)
        if not rest.size:
            return LaunchPlan(wide=empty, tiny=empty), 0
        if rest.size == len(g1):
            return self._plan(db, g1, g2, func)
        plan, budget = self._plan(db, g1[rest], g2[rest], func)
        return LaunchPlan(wide=rest[plan.wide], tiny=rest[plan.tiny], shared=[rest[s] for s in plan.shared],
                          global_=rest[plan.global_]), budget  # fmt: skip

    def _run_compact(
        self, cl: compact.CompactLaunch, mod: device.Module, config: KernelConfig, values: np.ndarray,
        g1: np.ndarray, g2: np.ndarray, shared: _SharedArgs,
    ) -> tuple[tuple[Any, Any], dict]:  # fmt: skip
        """Queue one persistent-grid launch of the compact solver (``mgk_compact.cu``, compiled for ``cl.block``
        threads in ``mod``: :func:`_compact_request`) over the pairs of ``cl``: largest first up to
        ``SORT_EXACT_MAX`` pairs; beyond, in the call's order (the tail of a launch of that many small pairs
        balances whatever their order). Its (start, stop) events and figures."""
        blk = cl.block
        mod.set_constant(KPAR, values)
        fn = mod.function(compact.KERNEL)
        order = cl.pairs
        a, b = g1[order], g2[order]
        if self.sort_jobs and order.size <= SORT_EXACT_MAX:
            n = shared.db.batch.n_nodes.astype(np.int64)
            nnz = shared.db.nnz_per_graph
            # cost n1 n2 * 4 + nnz1 nnz2, descending, as a 16-bit key: numpy's stable sort of 16-bit keys is a
            # radix sort (0.5 ms for 65,536 pairs against 4 ms for int64 keys; the larger costs, rare, tie)
            cost = np.minimum(n[a] * n[b] * 4 + nnz[a] * nnz[b], 0xFFFF).astype(np.uint16)
            by = np.argsort(np.uint16(0xFFFF) - cost, kind="stable")
            order, a, b = order[by], a[by], b[by]
        smem = cl.smem
        if device.needs_smem_optin(fn, smem):
            self._allow_smem(fn)
        bps = device.kernel_blocks_per_sm(fn, blk, smem)
        grid = max(1, min(len(order), bps * self.n_sm))
        args = {k: v for k, v in shared.args.items() if k in _COMPACT_SHARED}
        args["dord"], args["dcls"] = shared.db.arrays["dord"], shared.db.arrays["dcls"]  # thread-slot order
        events = self._launch_jobs(fn, order, (a, b), grid, blk, smem, shared.out, args)
        info = {"pairs": len(order), "grid": int(grid), "block": blk, "blocks_per_sm": bps, "smem": smem,
                "shared": True, "kernel": compact.KERNEL}  # fmt: skip
        return events, info

    def _complete(self, out: _Outputs, queued: list[tuple[tuple[Any, Any], dict]]) -> None:
        """Wait for the queued launches and read-backs (one stream), moving each launch's read-back to its
        pairs as it completes (:meth:`_Outputs.drain`), and put each launch's device seconds into its figures."""
        if not queued:
            return
        out.drain()
        for (start, stop), info in queued:
            info["seconds"] = stop.time_since(start) * 1e-3

    def _launch_jobs(
        self, fn: device.Kernel, order: np.ndarray, jobs: tuple[np.ndarray, np.ndarray], grid: int, blk: int, smem: int,
        o: _Outputs, args: dict,
    ) -> tuple[Any, Any]:  # fmt: skip
        """Queue one persistent-grid launch over a job list (``jobs``: the g1 and g2 of job t = pair ``order[t]``):
        upload, counter reset, the launch with ``args``, its read-back into ``o`` (:meth:`_Outputs.queue_read`),
        all in this backend's stream, without waiting; the (start, stop) events around the kernel."""
        d_jobs = self._upload_jobs(*jobs)
        if self.stream is None:
            cuda.memset_d32(o.counter, 0, 1)
        else:
            cuda.memset_d32_async(o.counter, 0, 1, self.stream)
        start, stop = cuda.Event(), cuda.Event()
        _record(start, self.stream)
        fn(
            grid=(int(grid), 1), block=(blk, 1, 1), shared=smem, **args,
            jobs=d_jobs, n_jobs=len(order), job_counter=o.counter,
            out_k=o.d_k, out_iter=o.d_it, out_res=o.d_res, out_conv=o.d_conv, stream=self.stream,
        )  # fmt: skip
        _record(stop, self.stream)
        o.queue_read(order, self.stream)
        return start, stop

    def _launch_classes(
        self, plan: LaunchPlan, config: KernelConfig, values: np.ndarray
    ) -> list[tuple[np.ndarray, bool, device.Kernel, int]]:
        """(pairs, P in shared memory, kernel, threads per block) per launch of the plan's per-block
        pairs; the kernel variants (``config``'s, P in shared memory, small blocks) are built in one
        :func:`mgkflow.gpu.device.build_modules` round and each module gets this call's kernel values."""
        wanted: list[tuple[np.ndarray, bool, KernelConfig, int]] = []
        if plan.tiny.size:
            # pairs of at most 16 tile pairs: a block of `small_block` threads each, many per SM
            cfg = replace(
                config, block=self.small_block, min_blocks=max(1, min(16, 1024 // self.small_block)),
                p_smem=self.p_smem,
            )  # fmt: skip
            wanted.append((plan.tiny, True, cfg, self.small_block))
        if plan.shared:
            cfg = replace(config, p_smem=True) if self.p_smem else config
            wanted.extend((sel, True, cfg, self.block) for sel in plan.shared)
        if plan.global_.size:
            wanted.append((plan.global_, False, config, self.block))
        if not wanted:
            return []
        configs = list(dict.fromkeys(cfg for _, _, cfg, _ in wanted))
        kernels = {}
        for cfg, mod in zip(configs, device.build_modules([_solver_request(c) for c in configs]), strict=True):
            mod.set_constant(KPAR, values)
            kernels[cfg] = mod.function("mgk_solve")
        return [(sel, smem, kernels[cfg], blk) for sel, smem, cfg, blk in wanted]

    def _run_class(
        self, sel: np.ndarray, use_smem: bool, fn: device.Kernel, blk: int, g1: np.ndarray, g2: np.ndarray,
        db: _DeviceBatch, shared: _SharedArgs, budget: int, pairs: Sequence, extra: Any = None,
    ) -> tuple[tuple[Any, Any], dict]:  # fmt: skip
        """Queue one persistent-grid launch of ``mgk_solve`` over the pairs ``sel``: its (start, stop) events
        and figures (see :meth:`_complete`).

        ``extra``: the outputs of a gradient or nodal configuration (:mod:`mgkflow.gpu.gradient`:
        ``extra_doubles(n_max)`` more scratch per block, ``smem_vectors`` times the shared memory,
        ``args(order)``, ``collect(order)``); such a launch is completed before it returns (its
        figures then hold its device ``seconds``)."""
        if shared.N.size != len(g1):  # a caller that built its own _SharedArgs (gradient, nodal)
            shared.N = db.nt[g1] * db.nt[g2] * 64
            shared.cost = self._cost(db, g1, g2) if self.sort_jobs else None
        N = shared.N
        order = self._job_order(sel, shared.cost)
        n_max = int(N[order].max())
        per_entry = _SMEM_PER_ENTRY[self.a_double] if self.a_in_shared else 8
        if extra is not None:
            per_entry *= extra.smem_vectors
        a_bytes = 8 if self.a_double else 4
        smem = (int(n_max * per_entry) + 15) // 16 * 16 if use_smem else 0
        per_block = int(scratch_doubles(np.array([n_max]), np.array([use_smem]), self.a_in_shared, a_bytes)[0])
        if extra is not None:
            per_block += extra.extra_doubles(n_max)
        mode = (1 if self.a_in_shared else 2) if use_smem else 0
        if device.needs_smem_optin(fn, smem):
            self._allow_smem(fn)
        bps = device.kernel_blocks_per_sm(fn, blk, smem)
        grid = min(len(order), bps * self.n_sm)
        per_block_bytes = 8 * per_block
        if per_block_bytes > budget:
            worst = order[int(np.argmax(N[order]))]
            i, j = pairs[worst]
            raise MemoryError(
                f"pair ({i}, {j}) needs {per_block_bytes / 2**30:.2f} GiB of GPU scratch "
                f"({int(N[worst])} product unknowns), more than the {budget / 2**30:.2f} GiB available"
            )
        grid = max(1, min(grid, budget // per_block_bytes))
        scratch = self._get_scratch(per_block_bytes * grid)
        args = {**shared.args, "scratch": scratch, "scratch_per_block": per_block, "use_smem": mode, "n_max": n_max,
                **({} if extra is None else extra.args(order))}  # fmt: skip
        events = self._launch_jobs(fn, order, (g1[order], g2[order]), grid, blk, smem, shared.out, args)
        info = {"pairs": len(order), "grid": int(grid), "block": blk, "blocks_per_sm": bps, "smem": smem,
                "shared": use_smem}  # fmt: skip
        if extra is not None:
            self._complete(shared.out, [(events, info)])
            extra.collect(order)
        return events, info

    def _job_order(self, sel: np.ndarray, cost: np.ndarray | None) -> np.ndarray:
        """The pairs ``sel`` in the order jobs are handed out: largest estimated cost first
        (``sort_jobs``). Up to ``SORT_EXACT_MAX`` pairs by an exact sort (introsort: deterministic);
        beyond, by cost classes 1/512 of an octave wide (a stable radix sort of 16-bit keys, linear
        time: the tail of a launch of millions of tiny pairs balances whatever their order)."""
        if not self.sort_jobs or cost is None:
            return sel
        c = cost[sel]
        if sel.size <= SORT_EXACT_MAX:
            return sel[np.argsort(-c)]
        key = np.minimum(np.log2(c + 1.0) * 512.0, 65535.0).astype(np.uint16)
        return sel[np.argsort(np.uint16(65535) - key, kind="stable")]

    def _run_wide(
        self, wide: np.ndarray, g1: np.ndarray, g2: np.ndarray, db: _DeviceBatch, config: KernelConfig,
        values: np.ndarray, out: _Outputs, progress: Callable[[int], Any] | None,
    ) -> tuple[list[dict], float]:  # fmt: skip
        """Solve the wide pairs one at a time with the whole device (largest first)."""
        stats_out: list[dict] = []
        seconds = 0.0
        if not wide.size:
            return stats_out, seconds
        self._scratch, self._scratch_bytes = None, 0  # give the per-block scratch back first
        products = db.nnz_per_graph[g1[wide]].astype(np.float64) * db.nnz_per_graph[g2[wide]]
        for t in wide[np.argsort(-products, kind="stable")]:
            st: dict = {}
            v, itw, rw, cw = solve_pair_wide(
                db, int(g1[t]), int(g2[t]), config, values, rtol=self.rtol, max_iter=self.max_iter,
                stats=st, xmv=self.wide_xmv, workspace=self._wide_workspace,
            )  # fmt: skip
            out.k[t], out.it[t], out.res[t], out.conv[t] = v, itw, rw, bool(cw)
            seconds += float(st.get("device_s", 0.0))
            keep = ("n1", "n2", "unknowns", "device_s", "iterations", "xmv", "strategy", "features", "predicted_s")
            stats_out.append({k: st[k] for k in keep if k in st})
            if progress is not None:
                progress(1)
        return stats_out, seconds

    def _extra(
        self, db: _DeviceBatch, g1: np.ndarray, g2: np.ndarray, iters: np.ndarray, dev_seconds: float,
        t_compile: float, t_pack: float, t_start: float, launches: list, wide_stats: list, regs: int | None,
        config: KernelConfig,
    ) -> dict:  # fmt: skip
        """The call's figures (``last_extra``). ``regs``: registers per thread of the per-block solver's
        kernel, or of the compact solver's (the most of its launches) when no pair went to the former."""
        # GFLOP/s of the products, counted for calls of up to SORT_EXACT_MAX pairs (beyond, the count
        # itself would cost host time the device then waits for: 0)
        if len(g1) <= SORT_EXACT_MAX:
            products = 2.0 * float(np.sum(db.nnz_per_graph[g1].astype(np.float64) * db.nnz_per_graph[g2] * iters))
        else:
            products = 0.0
        return {
            "device": self.device_name,
            "device_s": dev_seconds,
            "compile_s": t_compile,
            "pack_s": t_pack,
            "pack": self.pack_source,
            "host_s": time.perf_counter() - t_start,
            "gflops": products / dev_seconds / 1e9 if dev_seconds > 0 else 0.0,
            "launches": launches,
            "wide": wide_stats,
            "regs": regs,
            "compiles": device.compile_count(),
            "config": f"block={self.block} min_blocks={self.min_blocks} xmv={config.xmv} "
            f"primitives={self._primitives_label} tile_sort={self.tile_sort} "
            f"row_ilp={config.row_ilp} p_smem={self.p_smem} wide_xmv={self.wide_xmv} "
            f"a_double={self.a_double} weight_double={config.weight_double} "
            f"a_in_shared={self.a_in_shared}",
        }


def _record(event: Any, stream: Any) -> None:
    """Record ``event`` in ``stream`` (None: the legacy default stream)."""
    if stream is None:
        event.record()
    else:
        event.record(stream)


def _wait(event: Any) -> None:
    """Wait for a recorded event, polling it with short sleeps so that other Python threads (the
    tiled Gram path's second solver thread preparing the next block) run meanwhile; a blocking
    ``synchronize`` where the event cannot be polled."""
    query = getattr(event, "query", None)
    if query is None:
        event.synchronize()
        return
    while not query():
        time.sleep(5e-5)
    event.synchronize()


def _tile_sort(config: KernelConfig, tile_sort: bool, all_compact: bool) -> bool:
    """Whether the nodes are sorted by degree within their tiles (the per-block solver's layout; a
    permuted copy of every graph): the strategy's and the backend's choice, but not when every pair
    of the call goes to the compact solver, which reads no tile order."""
    return strategies.get(config.xmv).tile_sort and tile_sort and not all_compact


def _alloc_staging(n: int) -> tuple:
    """Page-locked host arrays for ``n`` pairs' K, iterations, residuals and flags."""
    n = max(n, 1)
    return (cuda.pagelocked_empty(n, np.float64), cuda.pagelocked_empty(n, np.int32),
            cuda.pagelocked_empty(n, np.float64), cuda.pagelocked_empty(n, np.int32))  # fmt: skip


def _alloc_outputs(n: int) -> tuple:
    """Device buffers for ``n`` pairs' K, iterations, residuals, flags, and a job counter."""
    n = max(n, 1)
    return (cuda.mem_alloc(8 * n), cuda.mem_alloc(4 * n), cuda.mem_alloc(8 * n), cuda.mem_alloc(4 * n),
            cuda.mem_alloc(4))  # fmt: skip


class _Outputs:
    """Per-pair results on the host and their device buffers (allocated on first use, or lent by
    ``buffers(n)``: the backend keeps one set between calls)."""

    def __init__(
        self, npairs: int, buffers: Callable[[int], tuple] | None = None, staging: Callable[[int], tuple] | None = None
    ) -> None:
        self.n = npairs
        self.k = np.zeros(npairs)
        self.it = np.zeros(npairs, dtype=np.int64)  # the scatters cast (no pass over the results afterwards)
        self.res = np.zeros(npairs)
        self.conv = np.zeros(npairs, dtype=bool)
        self._dev: tuple | None = None
        self._lend = buffers or _alloc_outputs
        self._lend_staging = staging or _alloc_staging
        self._staging: tuple | None = None
        self._queued: list[tuple[np.ndarray, int]] = []  # (pairs, offset in the staging arrays) per launch
        self._staged = 0

    def _buffers(self) -> tuple:
        if self._dev is None:
            self._dev = self._lend(self.n)
        return self._dev

    d_k = property(lambda self: self._buffers()[0])
    d_it = property(lambda self: self._buffers()[1])
    d_res = property(lambda self: self._buffers()[2])
    d_conv = property(lambda self: self._buffers()[3])
    counter = property(lambda self: self._buffers()[4])

    def queue_read(self, order: np.ndarray, stream: Any = None) -> None:
        """Queue the read-back of a launch over the pairs ``order`` (job t = pair order[t]) in ``stream``
        (None: the legacy stream), behind its kernel, into page-locked staging, and an event behind the
        copy; :meth:`drain` moves the values to their pairs as each copy completes. The device buffers
        are free for the next launch of the stream as soon as the copy ran."""
        m = len(order)
        if self._staging is None:
            self._staging = self._lend_staging(self.n)
        off = self._staged
        for host, dev in zip(self._staging, self._buffers()[:4], strict=True):
            cuda.memcpy_dtoh_async(host[off : off + m], dev, stream)
        copied = cuda.Event()
        _record(copied, stream)
        self._queued.append((order, off, copied))
        self._staged = off + m

    def drain(self) -> None:
        """Scatter the queued read-backs to their pairs, each once its copy is done: the earlier launches'
        results move while the later launches still run. On return the queued work is complete."""
        if not self._queued:
            return
        hk, hi, hr, hc = self._staging
        for order, off, copied in self._queued:
            _wait(copied)
            sl = slice(off, off + len(order))
            self.k[order], self.it[order], self.res[order], self.conv[order] = hk[sl], hi[sl], hr[sl], hc[sl]
        self._queued.clear()
        self._staged = 0

    def result(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(values, iterations, residuals, converged): the call's own arrays, not copies (an
        ``_Outputs`` serves one call)."""
        self.conv &= np.isfinite(self.k)
        return self.k, self.it, self.res, self.conv


#: Arguments of :class:`_SharedArgs` that the compact solver takes too (it reads the row layout).
_COMPACT_SHARED = frozenset(
    ("hdr", "nlab", "nlab_stride", "dvec", "pvec", "qvec", "rtol", "max_iter", "rrowptr", "rcoff", "rweight", "relab",
     "relab_stride")
)  # fmt: skip


class _SharedArgs:
    """The ``mgk_solve`` arguments common to every launch of a call (by parameter name)."""

    def __init__(self, db: _DeviceBatch, xmv_args: dict, out: _Outputs, rtol: float, max_iter: int) -> None:
        a = db.arrays
        self.out = out
        self.db = db
        self.args = {
            "hdr": a["hdr"], "nlab": a["nlab"], "nlab_stride": db.nlab_stride, "dvec": a["d"], "pvec": a["p"],
            "qvec": a["q"], "rtol": rtol, "max_iter": max_iter, **xmv_args,
        }  # fmt: skip
        #: product unknowns and estimated cost of every pair of the call (set by ``solve``)
        self.N: np.ndarray = np.zeros(0, dtype=np.int64)
        self.cost: np.ndarray | None = None
