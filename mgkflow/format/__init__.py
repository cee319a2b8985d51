"""Octile format (docs/design.md §4) and octile counting.

``count`` holds the figure of merit of orderings (non-empty 8x8 tiles);
``octile`` packs reordered graphs into non-empty 8x8 tiles for the GPU solver.
"""

from .count import TILE, count_octiles, octile_keys, octile_nnz_histogram
from .octile import OctileBatch, OctileGraph, label_dtype, pack_batch, pack_graph

__all__ = [
    "TILE",
    "count_octiles",
    "octile_keys",
    "octile_nnz_histogram",
    "OctileBatch",
    "OctileGraph",
    "label_dtype",
    "pack_batch",
    "pack_graph",
]
