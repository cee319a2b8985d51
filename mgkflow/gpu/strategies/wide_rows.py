"""Wide-path strategy "wide_rows": row pairs through L1 (``wide_xmv`` in ``mgk_wide.cu``).

A warp takes output tile pairs (I, I2) from a counter; lane (x, u) owns outputs (x, u) and
(7 - x, 7 - u) and walks the CSR rows 8I + x of G1 and 8I2 + u of G2 (the row layout of
:mod:`mgkflow.gpu.strategies.row_pair`, uploaded with every batch): every trip is one product,
accumulated in float64 on float64 P. Numpy emulation: :func:`mgkflow.gpu.emulate.xmv_rows`.
Exact in the unlabeled case (one CG iteration), any q.

Cost per XMV: products (nnz1 x nnz2, each read through L1), unknowns (the A = DG P - y
update) and tile pairs (one counter trip per warp and tile pair).
"""

from __future__ import annotations

from typing import Any

from .. import device
from . import PairContext, Strategy, register

__all__ = ["WideRows", "STRATEGY"]


class WideRows(Strategy):
    name = "wide_rows"
    path = "wide"
    kernel = "wide_xmv"
    feature_names = ("products", "unknowns", "tile_pairs")
    fallback_rank = 1

    def features(self, ctx: PairContext) -> dict[str, float]:
        n_tp = float(ctx.nt1 * ctx.nt2)
        return {"products": float(ctx.nnz1) * ctx.nnz2, "unknowns": 64.0 * n_tp, "tile_pairs": n_tp}

    def shared_bytes(self, ctx: PairContext) -> int:
        return 0

    def grid(self, ctx: PairContext, fn: device.Kernel, limits: device.DeviceLimits, blocks_per_sm: int | None) -> int:
        bps = blocks_per_sm or device.blocks_per_sm(fn.num_regs, ctx.block, limits=limits)
        return int(max(1, min(limits.n_sm * max(1, bps), -(-(ctx.nt1 * ctx.nt2) // (ctx.block // 32)))))

    def launch(self, ctx: PairContext, fn: Any, grid: int, vectors: dict[str, Any]) -> None:
        a, db = ctx.db.arrays, ctx.db
        fn(grid=(grid, 1), block=(ctx.block, 1, 1), rrowptr=a["rrowptr"], rcoff=a["rcoff"], rweight=a["rweight"],
           relab=a["relab"], relab_stride=db.relab_stride, rrow_off1=ctx.rro1, rrow_off2=ctx.rro2, nt2=ctx.nt2,
           n_tp=ctx.nt1 * ctx.nt2, P=vectors["P"], DG=vectors["DG"], A=vectors["A"], tp_counter=vectors["counter"],
           part=vectors["part"])  # fmt: skip


STRATEGY = register(WideRows())
