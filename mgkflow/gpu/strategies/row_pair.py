"""Per-block strategy "rows" (default): row pairs in CSR order (``xmv_row_pair.cuh``).

Layout: the row-order arrays of :func:`mgkflow.format.rows.row_arrays` (padded node-row
pointers, blocked column offsets, weights and edge-label words in row order), with the nodes
of each tile sorted by degree (:func:`mgkflow.format.rows.tile_degree_order`; K is
permutation invariant). Numpy emulation: :func:`mgkflow.gpu.emulate.xmv_rows`. Job cost:
nonzero products per XMV plus the per-entry vector work.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import register
from ._block import BlockStrategy

__all__ = ["RowPair", "STRATEGY"]


class RowPair(BlockStrategy):
    name = "rows"
    kernel = "mgk_solve"
    fragment = "xmv_row_pair.cuh"
    feature_names = ("products", "unknowns")
    tile_sort = True
    fallback_rank = 0
    params = (
        ("const int* __restrict__", "rrowptr", "node-row pointers (padded rows empty)"),
        ("const int* __restrict__", "rcoff", "blocked column offset per nonzero"),
        ("const w_t* __restrict__", "rweight", "weights in row order"),
        ("const unsigned int* __restrict__", "relab", "edge labels in row order, field-major words"),
        ("const long long", "relab_stride", ""),
    )

    def args(self, db: Any, prim_map: Any) -> dict[str, Any]:
        a = db.arrays
        return {"rrowptr": a["rrowptr"], "rcoff": a["rcoff"], "rweight": a["rweight"], "relab": a["relab"],
                "relab_stride": db.relab_stride}  # fmt: skip

    def job_cost(self, db: Any, g1: np.ndarray, g2: np.ndarray) -> np.ndarray:
        N = db.nt[g1] * db.nt[g2] * 64
        return db.nnz_per_graph[g1].astype(np.float64) * db.nnz_per_graph[g2] + 4.0 * N


STRATEGY = register(RowPair())
