"""Kernel matrices of many graphs: tiled, on disk (Zarr), resumable, on Dask clusters.

:func:`tiled_gram` cuts the matrix into blocks of graph pairs and solves each block
with :class:`~mgkflow.MarginalizedGraphKernel`, in this process or on the workers of
a ``distributed.Client``; with ``out="K.zarr"`` the blocks go to a Zarr array as they
finish, and a killed run resumes where it stopped. :func:`load_gram` reads the result
back (the symmetric matrix, or a lazy Dask array, with the graph ids).
:func:`client_from_spec` starts the clusters of the command line (``local:N``,
``cuda``, ``tcp://HOST:PORT``); :func:`reorder_graphs` reorders many graphs in
parallel with a per-graph permutation cache.
"""

from .blocks import Block, default_block_size, plan_blocks
from .cluster import client_from_spec
from .digest import graph_digest, graphs_digest
from .load import GramMatrix, load_gram
from .reorder import PermutationCache, reorder_graphs
from .resources import ResourceError, ResourceEstimate, estimate_resources
from .store import GramStore, IncompleteStoreError, StoreExistsError, StoreMismatchError
from .tiled import GramResult, tiled_gram

__all__ = [
    "tiled_gram",
    "load_gram",
    "GramResult",
    "GramMatrix",
    "GramStore",
    "Block",
    "plan_blocks",
    "default_block_size",
    "estimate_resources",
    "ResourceEstimate",
    "ResourceError",
    "StoreMismatchError",
    "IncompleteStoreError",
    "StoreExistsError",
    "client_from_spec",
    "reorder_graphs",
    "PermutationCache",
    "graph_digest",
    "graphs_digest",
]
