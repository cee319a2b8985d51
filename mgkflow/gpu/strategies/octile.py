"""Per-block strategy "octile": octile pairs with the primitives of ``octile_primitives.cuh``
(``xmv_octile.cuh``): the paper's design and the ablation baseline, kept as an option.

Layout: the octile batch itself (:func:`mgkflow.format.pack_batch`: tile-row pointers, tile
columns, 64-bit bitmaps, compact weights and edge labels) and the primitive selection map
(:mod:`mgkflow.gpu.primitive_map`, measured by ``mgkflow bench primitives``). Numpy
emulation: :func:`mgkflow.gpu.emulate.xmv_blocked`. Job cost: octile pairs visited plus the
per-tile-pair vector work.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import register
from ._block import BlockStrategy

__all__ = ["Octile", "STRATEGY"]


class Octile(BlockStrategy):
    name = "octile"
    kernel = "mgk_solve"
    fragment = "xmv_octile.cuh"
    feature_names = ("products", "unknowns")
    fallback_rank = 1
    params = (
        ("const int* __restrict__", "rowptr", "tile-row pointers (absolute octile ids)"),
        ("const int* __restrict__", "tile_col", "per octile"),
        ("const unsigned long long* __restrict__", "bitmap", ""),
        ("const int* __restrict__", "toff", "per octile: first compact entry"),
        ("const w_t* __restrict__", "weight", "compact (float, or double where float rounds)"),
        ("const unsigned int* __restrict__", "elab", "compact edge labels, field-major, 32-bit words"),
        ("const long long", "elab_stride", ""),
        ("const unsigned char* __restrict__", "prim_map", "primitive per (popc1, popc2), 65 x 65"),
    )

    def args(self, db: Any, prim_map: Any) -> dict[str, Any]:
        a = db.arrays
        return {"rowptr": a["rowptr"], "tile_col": a["tile_col"], "bitmap": a["bitmap"], "toff": a["toff"],
                "weight": a["weight"], "elab": a["elab"], "elab_stride": db.elab_stride,
                "prim_map": prim_map}  # fmt: skip

    def job_cost(self, db: Any, g1: np.ndarray, g2: np.ndarray) -> np.ndarray:
        N = db.nt[g1] * db.nt[g2] * 64
        return db.octiles_per_graph[g1].astype(np.float64) * db.octiles_per_graph[g2] + N / 64.0


STRATEGY = register(Octile())
