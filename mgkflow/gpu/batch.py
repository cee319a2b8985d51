"""The device-batch cache of a backend: the packed graphs of a call on the device.

:class:`BatchCache` keeps the uploaded batch (:class:`mgkflow.gpu.core.DeviceBatch`) of the last
call's graphs while the same graphs come back (its node vectors refreshed when only p, q or d
changed), uploads a host batch adopted from elsewhere (the pipeline's Pack stage) instead of
packing, and remembers what a call derives from its graphs while the very same objects come back.
:func:`tile_sort` says whether a call's layout sorts each tile's nodes by degree. Imports
without PyCUDA.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..system import GraphSystem, system_graphs
from . import device, strategies
from .core import DeviceBatch, vector_key
from .pack import HostBatch, label_dtypes, layout_key, pack_host, weights_all_one, weights_need_double
from .source import KernelConfig

__all__ = ["BatchCache", "tile_sort"]


def tile_sort(config: KernelConfig, tile_sort: bool, all_compact: bool) -> bool:
    """Whether the nodes are sorted by degree (the per-block solver's layout,
    :func:`~mgkflow.gpu.strategies.row_pair.degree_order`; a permuted copy of every graph): the strategy's
    and the backend's choice, but not when every pair of the call goes to the compact solver, which reads
    no tile order."""
    return strategies.get(config.xmv).tile_sort and tile_sort and not all_compact



class BatchCache:
    """The device-batch cache of one backend: the uploaded batch of the last call's graphs (kept while
    the same graphs come back, its node vectors refreshed when only p, q or d changed), a host batch
    adopted from elsewhere (the pipeline's Pack stage), and what a call derives from its graphs, each
    remembered while the very same objects come back.

    Attributes
    ----------
    pack_source : str
        Where the last call's batch came from: "packed", "adopted" (pipeline) or "cached".
    """

    def __init__(self) -> None:
        self.entry: tuple | None = None  # (layout key, DeviceBatch)
        self.adopted: HostBatch | None = None
        self.pack_source = ""
        self._wd: tuple | None = None
        self._wu: tuple | None = None
        self._ld: tuple | None = None
        self._last_graphs: tuple | None = None

    def device_batch(self, systems: Sequence[GraphSystem], config: KernelConfig, sort: bool) -> DeviceBatch:
        """The uploaded batch of ``systems`` in the layout of ``config`` (``sort``: nodes sorted by degree,
        :func:`tile_sort`); its node vectors uploaded again unless they are those of
        the very same systems."""
        key = layout_key(systems, config, sort)
        if self.entry is not None and self.entry[0] == key:
            db = self.entry[1]
            if not db.same_vectors(systems):  # same graphs, other p / q (a hyperparameter sweep)
                db.refresh_vectors(systems)
            self.pack_source = "cached"
            return db
        hb = self.adopted
        if hb is not None and hb.key == key:
            self.pack_source = "adopted"
        else:
            hb = pack_host(systems, config, sort)
            self.pack_source = "packed"
        self.entry = None  # give the previous batch's device memory back first
        # element dtypes are checked against the kernels' declared parameters at launch
        arrays = {k: device.upload(v) for k, v in hb.host.items()}
        batch = hb.batch
        db = DeviceBatch(
            batch=batch,
            arrays=arrays,
            elab_stride=hb.elab_stride,
            nlab_stride=hb.nlab_stride,
            nnz_per_graph=np.diff(batch.nnz_offset),
            octiles_per_graph=batch.octiles_per_graph(),
            nt=batch.n_tiles_side.astype(np.int64),
            keepalive=(hb.graphs, batch.n_graphs),
            relab_stride=hb.relab_stride,
            ncat=hb.ncat,
            perms=hb.perms,
            vectors=hb.vectors,
            vector_ids=vector_key(hb.vectors),
        )
        if not db.same_vectors(systems):
            db.refresh_vectors(systems)
        self.entry = (key, db)
        return db

    def weights_double(self, systems: Sequence[GraphSystem]) -> bool:
        """:func:`weights_need_double` of the systems' graphs, remembered while the same graph
        objects come back (the cache holds them, so their ids stay theirs)."""
        return self._remembered("_wd", self._graphs(systems), lambda: weights_need_double(systems))

    def weights_unit(self, systems: Sequence[GraphSystem]) -> bool:
        """:func:`weights_all_one` of the systems' graphs, remembered like :meth:`weights_double`."""
        return self._remembered("_wu", self._graphs(systems), lambda: weights_all_one(systems))

    def label_dtypes(
        self, systems: Sequence[GraphSystem], node_fields: Sequence[str], edge_fields: Sequence[str]
    ) -> tuple[dict, dict]:
        """:func:`label_dtypes` of the systems' graphs, remembered (per set of fields) while the same
        graph objects come back."""
        known = self._remembered("_ld", self._graphs(systems), dict)
        key = (tuple(node_fields), tuple(edge_fields))
        if key not in known:
            known[key] = label_dtypes(systems, node_fields, edge_fields)
        return known[key]

    def _graphs(self, systems: Sequence[GraphSystem]) -> tuple:
        """The systems' graphs, once per list of systems (a call asks three times for the same list)."""
        last = self._last_graphs
        if last is not None and last[0] is systems:
            return last[1]
        graphs = system_graphs(systems)
        self._last_graphs = (systems, graphs)
        return graphs

    def _remembered(self, slot: str, objs: tuple, compute: Callable[[], Any]) -> Any:
        """``compute()``, kept in ``self.<slot>`` with the graphs it was computed for and returned again
        while the very same graphs come back (a :class:`~mgkflow.graph.Graph` compares by identity, so
        the tuples' ``==`` is a comparison of identities)."""
        c = getattr(self, slot)
        if c is not None and c[0] == objs:
            return c[1]
        value = compute()
        setattr(self, slot, (objs, value))
        return value
