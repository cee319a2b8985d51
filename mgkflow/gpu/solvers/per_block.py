"""The per-block solver (``mgk_solver.cu``): one thread block solves a whole pair.

Registry entry ``"per_block"`` (rank 2 of :mod:`mgkflow.gpu.solvers`): it takes every pair the
compact and the wide solver leave. Its pairs go to launch groups by size
(:func:`mgkflow.gpu.plan.plan_launches`: tiny pairs in ``small_block``-thread blocks, shared-memory
size bins, global memory); each group is one persistent-grid launch of ``mgk_solve`` whose jobs
are handed out largest estimated cost first (the XMV strategy's ``job_cost``). The source comes
from :func:`mgkflow.gpu.source.kernel_source` (the XMV strategy's fragment spliced in); the value,
gradient and nodal solves all run it (:mod:`mgkflow.gpu.gradient`).

:class:`PerBlockPath` is the run path of one backend: the launch plan (:meth:`PerBlockPath.plan`),
the kernel variants of its groups (:meth:`PerBlockPath.launch_classes`) and one launch per group
(:meth:`PerBlockPath.run_class`). Imports without PyCUDA.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from .. import device, strategies
from ..core import (
    SMALL_PAIR_UNKNOWNS,
    SMEM_PER_ENTRY,
    SORT_EXACT_MAX,
    WIDE_MIN_PRODUCTS,
    DeviceBatch,
    SharedArgs,
    job_list,
    solver_request,
)  # fmt: skip
from ..plan import LaunchPlan, plan_launches, scratch_doubles
from ..source import KPAR, KernelConfig
from . import Solver, register

__all__ = [
    "KERNEL", "RESIDENT", "RESIDENT_BLOCK", "PerBlockPath", "PerBlockSolver", "job_order", "resident_entry_bytes",
]  # fmt: skip

#: Kernel name in ``mgk_solver.cu``.
KERNEL = "mgk_solve"
#: ``use_smem`` of a resident launch (value solves: P, R and A in shared memory, no solution vector).
RESIDENT = 3
#: Threads per block of the resident launches that take more than half an SM's shared memory, and of the value
#: solves' launch of pairs whose vectors all stay in global memory (one block per SM: as many resident warps as two
#: blocks of the default 512 threads). In the latter a pair's time halves, which is what such a launch waits for: its
#: largest pairs alone can outlast an even share of its work several times (session 30, S30-E: issue 24's mixed set
#: 0.1199 -> 0.0735 s device time, 40 NWS graphs of 200-400 nodes 0.0864 -> 0.0837 s).
RESIDENT_BLOCK = 1024
#: Static shared memory of a resident kernel beyond the default kernel's, kept back from the resident bins'
#: capacity: the 1,024-thread block's reduction buffers and schedule (448 bytes with nvcc 13.0;
#: tests/test_cuda_compile.py checks the bound).
RESIDENT_STATIC = 1024


def resident_entry_bytes(a_bytes: int, gradient: bool = False) -> int:
    """Shared-memory bytes per product unknown of a resident launch: the value PCG's P, R (double; a float32
    P of an F32_SUMS build keeps the double's slot) and A (``a_bytes``), or the gradient's joint PCG: both search
    directions as a float2, A and A_y, and both residuals as float32 (``mgk_solver.cu``).

    Examples
    --------
    >>> resident_entry_bytes(4), resident_entry_bytes(4, gradient=True)
    (20, 24)
    """
    return 8 + 2 * a_bytes + 8 if gradient else 16 + a_bytes


def job_order(sel: np.ndarray, cost: np.ndarray | None, sort_jobs: bool = True) -> np.ndarray:
    """The pairs ``sel`` in the order jobs are handed out: largest estimated cost first
    (``sort_jobs``). Up to ``SORT_EXACT_MAX`` pairs by an exact sort (introsort: deterministic);
    beyond, by cost classes 1/512 of an octave wide (a stable radix sort of 16-bit keys, linear
    time: the tail of a launch of millions of tiny pairs balances whatever their order).

    Examples
    --------
    >>> job_order(np.arange(4), np.array([1.0, 4.0, 2.0, 3.0])).tolist()
    [1, 3, 2, 0]
    """
    if not sort_jobs or cost is None:
        return sel
    c = cost[sel]
    if sel.size <= SORT_EXACT_MAX:
        return sel[np.argsort(-c)]
    key = np.minimum(np.log2(c + 1.0) * 512.0, 65535.0).astype(np.uint16)
    return sel[np.argsort(np.uint16(65535) - key, kind="stable")]


class PerBlockPath:
    """The per-block solver's run path for one backend (:class:`mgkflow.gpu.backend.GPUBackend`: its
    settings, device limits, :class:`~mgkflow.gpu.launch.Launcher` and the wide path's kept vectors)."""

    def __init__(self, backend: Any) -> None:
        self.be = backend

    def cost(self, db: DeviceBatch, g1: np.ndarray, g2: np.ndarray) -> np.ndarray:
        """Estimated cost per pair (largest first when ``sort_jobs``): the block strategy's."""
        return strategies.get(self.be.xmv).job_cost(db, g1, g2)

    def job_order(self, sel: np.ndarray, cost: np.ndarray | None) -> np.ndarray:
        """:func:`job_order` with the backend's ``sort_jobs``."""
        return job_order(sel, cost, self.be.sort_jobs)

    def plan(
        self, db: DeviceBatch, g1: np.ndarray, g2: np.ndarray, func: device.Kernel, wide: bool | str | None = None,
        wide_min_products: float = WIDE_MIN_PRODUCTS, fit_budget: float = 1.0, smem_vectors: int = 1,
        resident: bool | str = False,
    ) -> tuple[LaunchPlan, int]:  # fmt: skip
        """Launch groups (:mod:`mgkflow.gpu.plan`) and the global scratch budget (bytes); ``wide``
        and ``wide_min_products`` override the backend's settings, ``fit_budget`` scales the budget
        a pair's one-block scratch must fit and ``smem_vectors`` the shared-memory bytes per product
        entry (a gradient block keeps two systems: :mod:`mgkflow.gpu.gradient`); ``resident``: a value
        solve, whose pairs go to resident bins where P, R and A fit the shared memory; ``"large"``: a
        gradient solve, whose pairs go there only where their vectors (:func:`resident_entry_bytes`) take more
        than half of it; the others keep the joint PCG of both systems in global memory."""
        be = self.be
        N = db.nt[g1] * db.nt[g2] * 64
        per_entry = (SMEM_PER_ENTRY[be.a_double] if be.a_in_shared else 8) * smem_vectors
        smem_cap = be.limits.smem_optin - func.shared_size_bytes - 64
        if resident:  # room for the reduction buffers of a RESIDENT_BLOCK-thread block
            smem_cap -= RESIDENT_STATIC
        if be.smem_limit is not None:
            smem_cap = min(smem_cap, int(be.smem_limit))
        products = db.nnz_per_graph[g1].astype(np.float64) * db.nnz_per_graph[g2]
        free, _total = device.driver().mem_get_info()
        kept = be.wide_path.kept_bytes()  # the wide path's vectors, given back if needed
        budget = be.max_scratch_bytes or int(0.6 * (free + kept))
        a_bytes = 8 if be.a_double else 4
        resident_entry = (
            resident_entry_bytes(a_bytes, gradient=resident == "large")
            if resident and be.a_in_shared and be.p_smem and be.xmv == "rows" else 0
        )  # fmt: skip
        plan = plan_launches(
            N, products, per_entry=per_entry, smem_cap=smem_cap, budget=int(budget * fit_budget), n_sm=be.n_sm,
            wide=be.wide if wide is None else wide,
            wide_min_products=wide_min_products, small_block=be.small_block, tiny_unknowns=SMALL_PAIR_UNKNOWNS,
            a_in_shared=be.a_in_shared, a_bytes=a_bytes,
            resident_per_entry=resident_entry,
            resident_min_unknowns=smem_cap // 2 // resident_entry + 1 if resident == "large" and resident_entry else 0,
        )  # fmt: skip
        return plan, budget

    def plan_subset(
        self, db: DeviceBatch, g1: np.ndarray, g2: np.ndarray, func: device.Kernel | None, rest: np.ndarray
    ) -> tuple[LaunchPlan, int]:
        """:meth:`plan` of a value solve's pairs ``rest`` only (resident bins), the plan's indices mapped back
        to the whole call (``func``, the per-block solver's kernel, may be None when ``rest`` is empty)."""
        empty = np.zeros(0, dtype=np.int64)
        if not rest.size:
            return LaunchPlan(wide=empty, tiny=empty), 0
        if rest.size == len(g1):
            return self.plan(db, g1, g2, func, resident=True)
        plan, budget = self.plan(db, g1[rest], g2[rest], func, resident=True)
        return plan.subset(rest), budget

    def launch_classes(
        self, plan: LaunchPlan, config: KernelConfig, values: np.ndarray
    ) -> list[tuple[np.ndarray, bool | int, device.Kernel, int]]:
        """(pairs, P in shared memory (True, or :data:`RESIDENT`), kernel, threads per block) per launch of the
        plan's per-block pairs; the kernel variants (``config``'s, P in shared memory, resident, small blocks) are
        built in one
        :func:`mgkflow.gpu.device.build_modules` round and each module gets this call's kernel values."""
        be = self.be
        wanted: list[tuple[np.ndarray, bool, KernelConfig, int]] = []
        if plan.tiny.size:
            # pairs of at most 16 tile pairs: a block of `small_block` threads each, many per SM
            cfg = replace(
                config, block=be.small_block, min_blocks=max(1, min(16, 1024 // be.small_block)),
                p_smem=be.p_smem,
            )  # fmt: skip
            wanted.append((plan.tiny, True, cfg, be.small_block))
        for k, sel in enumerate(plan.resident):
            if not sel.size:
                continue
            # the second bin takes more than half an SM's shared memory: one RESIDENT_BLOCK-thread block per SM
            blk, mb = (RESIDENT_BLOCK, 1) if k else (be.block, config.min_blocks)
            wanted.append((sel, RESIDENT, replace(config, p_smem=True, resident=True, block=blk, min_blocks=mb), blk))
        if plan.shared:
            cfg = replace(config, p_smem=True) if be.p_smem else config
            wanted.extend((sel, True, cfg, be.block) for sel in plan.shared)
        if plan.global_.size:
            if config.gradient or config.nodal:
                wanted.append((plan.global_, False, config, be.block))
            else:  # one RESIDENT_BLOCK-thread block per SM: the largest pairs, which finish last, get every warp
                cfg = replace(config, block=RESIDENT_BLOCK, min_blocks=1)
                wanted.append((plan.global_, False, cfg, RESIDENT_BLOCK))
        if not wanted:
            return []
        configs = list(dict.fromkeys(cfg for _, _, cfg, _ in wanted))
        kernels = {}
        for cfg, mod in zip(configs, device.build_modules([solver_request(c) for c in configs]), strict=True):
            mod.set_constant(KPAR, values)
            kernels[cfg] = mod.function(KERNEL)
        return [(sel, smem, kernels[cfg], blk) for sel, smem, cfg, blk in wanted]

    def run_class(
        self, sel: np.ndarray, use_smem: bool | int, fn: device.Kernel, blk: int, g1: np.ndarray, g2: np.ndarray,
        db: DeviceBatch, shared: SharedArgs, budget: int, pairs: Sequence, extra: Any = None,
    ) -> tuple[tuple[Any, Any], dict]:  # fmt: skip
        """Queue one persistent-grid launch of ``mgk_solve`` over the pairs ``sel``: its (start, stop) events
        and figures (see :meth:`mgkflow.gpu.launch.Launcher.complete`).

        ``extra``: the outputs of a gradient or nodal configuration (:mod:`mgkflow.gpu.gradient`:
        ``extra_doubles(n_max)`` more scratch per block, ``smem_vectors`` times the shared memory,
        ``args(order)``, ``collect(order)``); such a launch is completed before it returns (its
        figures then hold its device ``seconds``), unless ``extra`` reads back into page-locked
        staging (``extra.pinned``: ``queue(order, stream)`` behind the kernel), which leaves the
        completion to the caller, so that a call's launches run back to back."""
        be, launcher = self.be, self.be.launcher
        if shared.N.size != len(g1):  # a caller that built its own SharedArgs (gradient, nodal)
            shared.N = db.nt[g1] * db.nt[g2] * 64
            shared.cost = self.cost(db, g1, g2) if be.sort_jobs else None
        N = shared.N
        orders = getattr(shared, "orders", None)  # job orders and lists kept between the steps of a θ loop
        kept = None if orders is None else orders.get(id(sel))
        if kept is None:
            order = self.job_order(sel, shared.cost)
            kept = (order, int(N[order].max()), job_list(g1[order], g2[order]))
            if orders is not None:
                orders[id(sel)] = kept
        order, n_max, jobs = kept
        a_bytes = 8 if be.a_double else 4
        if use_smem == RESIDENT:  # P, R, A in shared memory, DG and DI (a gradient's X, XY too) in global memory
            entry = resident_entry_bytes(a_bytes, gradient=extra is not None and extra.smem_vectors == 2)
            smem = (int(n_max * entry) + 15) // 16 * 16
            # DG and DI; a value solve's W too (w^T p summed in the direction update)
            per_block, mode = (2 if extra is not None else 3) * n_max, RESIDENT
            if extra is not None:
                per_block += extra.extra_doubles(n_max)
        else:
            per_entry = SMEM_PER_ENTRY[be.a_double] if be.a_in_shared else 8
            if extra is not None:
                per_entry *= extra.smem_vectors
            smem = (int(n_max * per_entry) + 15) // 16 * 16 if use_smem else 0
            per_block = int(scratch_doubles(np.array([n_max]), np.array([use_smem]), be.a_in_shared, a_bytes)[0])
            if extra is not None:
                per_block += extra.extra_doubles(n_max)
            mode = (1 if be.a_in_shared else 2) if use_smem else 0
        bps = launcher.blocks_per_sm(fn, blk, smem)
        grid = min(len(order), bps * be.n_sm)
        per_block_bytes = 8 * per_block
        if per_block_bytes > budget:
            worst = order[int(np.argmax(N[order]))]
            i, j = pairs[worst]
            raise MemoryError(
                f"pair ({i}, {j}) needs {per_block_bytes / 2**30:.2f} GiB of GPU scratch "
                f"({int(N[worst])} product unknowns), more than the {budget / 2**30:.2f} GiB available"
            )
        grid = max(1, min(grid, budget // per_block_bytes))
        scratch = launcher.scratch(per_block_bytes * grid)
        args = {**shared.args, "scratch": scratch, "scratch_per_block": per_block, "use_smem": mode, "n_max": n_max,
                **({} if extra is None else extra.args(order))}  # fmt: skip
        events = launcher.launch_jobs(fn, order, jobs, grid, blk, smem, shared.out, args)
        info = {"pairs": len(order), "grid": int(grid), "block": blk, "blocks_per_sm": bps, "smem": smem,
                "shared": use_smem}  # fmt: skip
        if extra is not None and getattr(extra, "pinned", False):
            extra.queue(order, launcher.stream)  # behind the kernel; the caller completes the launches
        elif extra is not None:
            launcher.complete(shared.out, [(events, info)])
            extra.collect(order)
        return events, info


class PerBlockSolver(Solver):
    """Registry entry ``"per_block"`` (rank 2): every pair the solvers before it leave."""

    name = "per_block"
    rank = 2
    source = "mgk_solver.cu"
    kernels = (KERNEL,)
    claim = ("every pair the compact and wide solvers leave; launch groups by size: tiny (small_block threads), "
             "resident bins (value solves), shared-memory bins, global memory (plan_launches)")  # fmt: skip

    def claims(self, plan: LaunchPlan) -> list[np.ndarray]:
        """The launch groups of the pairs a :class:`~mgkflow.gpu.plan.LaunchPlan` does not send wide."""
        return plan.groups()

    def job_cost(self, db: Any, g1: np.ndarray, g2: np.ndarray, xmv: str = "rows") -> np.ndarray:
        """The XMV strategy's ``job_cost`` (:class:`mgkflow.gpu.strategies._block.BlockStrategy`)."""
        return strategies.get(xmv).job_cost(db, g1, g2)

    def path(self, backend: Any) -> PerBlockPath:
        return PerBlockPath(backend)


register(PerBlockSolver())
