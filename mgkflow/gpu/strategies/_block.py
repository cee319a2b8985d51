"""Shared part of the per-block strategies (one thread block solves a whole pair, ``mgk_solver.cu``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import PairContext, Strategy

__all__ = ["BlockStrategy"]


class BlockStrategy(Strategy):
    """A per-block XMV: a CUDA fragment (``XMV_LANE_SETUP``, ``XMV_TILE_PAIR``; see
    ``xmv_row_pair.cuh``) and the kernel parameters it reads.

    Attributes
    ----------
    fragment : str
        File of :mod:`mgkflow.gpu` spliced into ``mgk_solver.cu`` as ``XMV_FRAGMENT``.
    params : tuple of (C type, name, comment)
        The fragment's kernel parameters (become part of ``mgk_solve``'s signature).
    tile_sort : bool
        The layout sorts each tile's nodes by degree (``GPUBackend(tile_sort=True)``).
    """

    path = "block"
    fragment = ""
    params: tuple[tuple[str, str, str], ...] = ()
    tile_sort = False

    def c_params(self) -> str:
        """The parameters as they appear in the kernel signature (one per line; the comments
        stay in the module)."""
        return ",\n    ".join(f"{t} {n}" for t, n, _ in self.params)

    def args(self, db: Any, prim_map: Any) -> dict[str, Any]:
        """The fragment's launch arguments by name, from an uploaded batch."""
        raise NotImplementedError

    def job_cost(self, db: Any, g1: np.ndarray, g2: np.ndarray) -> np.ndarray:
        """Estimated relative cost of each pair (jobs are handed out largest first)."""
        raise NotImplementedError

    def features(self, ctx: PairContext) -> dict[str, float]:
        n_tp = float(ctx.nt1 * ctx.nt2)
        return {"products": float(ctx.nnz1) * ctx.nnz2, "unknowns": 64.0 * n_tp}
