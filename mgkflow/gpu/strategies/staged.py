"""Wide-path strategy "staged": G2 nonzeros in registers, slices of P in shared memory
(``wide_xmv_staged`` in ``mgk_wide.cu``; tables: :mod:`mgkflow.format.staged`).

A block takes a task (G1 tile row I, group of consecutive G2 rows); the group's nonzeros sit
in ``slots`` register slots per thread; for each octile (I, J) of G1 the block stages
P[J, colset] as float in shared memory and every thread walks the octile's entries against
its slots: one shared load and a few flops per product, products in float32. Numpy
emulation: :func:`mgkflow.gpu.emulate.xmv_staged`.

"auto" takes it only for labeled edge kernels at q >= :data:`STAGED_MIN_Q` (float32 products
cost ~eps32 / q of relative accuracy; the unlabeled case's exact one-iteration solution needs
the float64 row path). Cost per XMV: G1 entries x groups of G2 (every G1 entry of a tile row
meets every thread of every group, full or not), P-slice loads (tile rows x column tiles of
all groups x 64) and unknowns.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...format.staged import StagedG2, staged_g2
from .. import device
from . import PairContext, Strategy, register

__all__ = ["Staged", "STRATEGY", "STAGED_MIN_Q"]

#: Smallest stop probability at which "auto" considers the staged XMV.
STAGED_MIN_Q = 0.01


def staged_tables(cuda: Any, db: Any, g: int, edge_fields: tuple, block: int, slots: int) -> tuple[StagedG2, dict]:
    """Host and device staged tables of graph ``g`` of the batch as G2 (cached on ``db.staged``)."""
    cache = db.staged
    key = (int(g), tuple(edge_fields), int(block), int(slots))
    hit = cache.get(key)
    if hit is None:
        t = staged_g2(db.batch.graph(int(g)), list(edge_fields), slots=slots, block=block)
        dev = {
            "groups": cuda.to_device(np.ascontiguousarray(t.groups, dtype=np.int32)),
            "colset": cuda.to_device(np.concatenate([t.colset, np.zeros(1, np.int32)])),
            "row_thread": cuda.to_device(np.concatenate([t.row_thread, np.zeros(1, np.int32)])),
            "slot_col": cuda.to_device(np.concatenate([t.slot_col.ravel(), np.zeros(1, np.int32)])),
            "slot_w": cuda.to_device(np.concatenate([t.slot_weight.ravel(), np.zeros(1, np.float32)])),
            "slot_lab": cuda.to_device(np.concatenate([t.slot_labels.ravel(), np.zeros(1, np.uint32)])),
        }
        hit = cache[key] = (t, dev)
    return hit


class Staged(Strategy):
    name = "staged"
    path = "wide"
    kernel = "wide_xmv_staged"
    feature_names = ("entries_x_groups", "slice_loads", "unknowns")
    fallback_rank = 0

    def applies(self, ctx: PairContext) -> str:
        if ctx.config is None:
            return "no kernel configuration given"
        if not ctx.forced and not ctx.config.edge_fields:
            # constant edge kernel: the float64 row XMV reaches the exact (constant) solution of the
            # unlabeled system in one iteration; float32 products would not
            return "the edge kernel reads no label"
        if not ctx.forced and ctx.q_min < STAGED_MIN_Q:
            return f"q = {ctx.q_min:g} < {STAGED_MIN_Q:g} (float32 products lose ~eps32 / q of accuracy)"
        try:
            self.prepare(ctx)
        except ValueError as exc:
            return str(exc)
        return ""

    def prepare(self, ctx: PairContext) -> tuple[StagedG2, dict]:
        fields = tuple(f for f, _ in ctx.config.edge_fields)
        return staged_tables(ctx.cuda, ctx.db, ctx.g2, fields, ctx.block, ctx.slots)

    def features(self, ctx: PairContext) -> dict[str, float]:
        t, _ = self.prepare(ctx)
        cols = float(np.asarray(t.groups)[:, 5].sum())
        return {"entries_x_groups": float(ctx.nnz1) * t.n_groups, "slice_loads": 64.0 * ctx.nt1 * cols,
                "unknowns": 64.0 * ctx.nt1 * ctx.nt2}  # fmt: skip

    def shared_bytes(self, ctx: PairContext) -> int:
        t, _ = self.prepare(ctx)
        # 8 partial sums (double) per thread, then the P slice (8 rows x 8 * ncol floats)
        return 64 * ctx.block + 256 * max(t.max_cols, 1)

    def grid(self, ctx: PairContext, fn: device.Kernel, limits: device.DeviceLimits, blocks_per_sm: int | None) -> int:
        t, _ = self.prepare(ctx)
        per_sm = device.blocks_per_sm(fn.num_regs, ctx.block, self.shared_bytes(ctx), fn.shared_size_bytes,
                                      limits=limits)  # fmt: skip
        return int(max(1, min(limits.n_sm * per_sm, ctx.nt1 * t.n_groups)))

    def launch(self, ctx: PairContext, fn: Any, grid: int, vectors: dict[str, Any]) -> None:
        t, dev = self.prepare(ctx)
        a, db = ctx.db.arrays, ctx.db
        fn(grid=(grid, 1), block=(ctx.block, 1, 1), shared=self.shared_bytes(ctx), rowptr=a["rowptr"],
           tile_col=a["tile_col"], bitmap=a["bitmap"], toff=a["toff"], weight=a["weight"], elab=a["elab"],
           elab_stride=db.elab_stride, rowptr_off1=ctx.ro1, groups=dev["groups"], n_groups=t.n_groups,
           colset=dev["colset"], row_thread=dev["row_thread"], slot_col=dev["slot_col"], slot_w=dev["slot_w"],
           slot_lab=dev["slot_lab"], slot_stride=t.n_threads, nt2=ctx.nt2, n_tasks=ctx.nt1 * t.n_groups,
           P=vectors["P"], DG=vectors["DG"], A=vectors["A"], task_counter=vectors["counter"],
           part=vectors["part"])  # fmt: skip


STRATEGY = register(Staged())
