"""The pickle state of a graph, and many graphs as a few concatenated arrays.

The work of ``Graph.__getstate__`` / ``__setstate__`` (:func:`graph_state`, :func:`restored_parts`)
and of ``Graph.pack_many`` / ``Graph.unpack_many`` (:func:`pack_many`, :func:`unpack_many`), which
work on those states; no import of :mod:`mgkflow.graph` (:meth:`mgkflow.graph.Graph.pack_many`
documents the use).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

from ._graph_checks import _frozen, frozen_csr, frozen_fields

__all__ = ["graph_state", "restored_parts", "restored_features", "pack_many", "unpack_many"]


def graph_state(
    adj: sp.csr_array, node_labels: Any, edge_labels: Any, coords: Any, title: str | None, features: Any = None
) -> dict:
    """The pickle state of a graph: its CSR arrays, node count, label fields, coordinates, title and
    feature vector (None when it has none)."""
    return {
        "indptr": np.asarray(adj.indptr),
        "indices": np.asarray(adj.indices),
        "data": np.asarray(adj.data),
        "n": adj.shape[0],
        "node_labels": dict(node_labels),
        "edge_labels": dict(edge_labels),
        "coords": coords,
        "title": title,
        "features": features,
    }


def restored_parts(state: dict) -> tuple[sp.csr_array, Any, Any, np.ndarray | None]:
    """The read-only (adjacency, node labels, edge labels, coords) of a :func:`graph_state`, not re-checked."""
    n = int(state["n"])
    adj = sp.csr_array((state["data"], state["indices"], state["indptr"]), shape=(n, n))
    coords = None if state["coords"] is None else _frozen(state["coords"])
    return frozen_csr(adj), frozen_fields(state["node_labels"]), frozen_fields(state["edge_labels"]), coords


def restored_features(state: dict) -> np.ndarray | None:
    """The read-only feature vector of a :func:`graph_state`; None for none, and for a state from before
    graphs had features (no ``"features"`` key)."""
    f = state.get("features")
    return None if f is None else _frozen(f)


def pack_many(graphs: Sequence[Any]) -> dict | None:
    """The states of ``graphs`` as concatenated arrays, or None when they do not share their fields."""
    if not graphs:
        return None
    states = [g.__getstate__() for g in graphs]
    first = states[0]
    nkeys, ekeys, xyz = tuple(first["node_labels"]), tuple(first["edge_labels"]), first["coords"] is not None
    feat = first.get("features") is not None
    getters: dict[str, Callable[[dict], np.ndarray]] = {
        "indptr": lambda st: st["indptr"], "indices": lambda st: st["indices"], "data": lambda st: st["data"],
    }  # fmt: skip
    for k in nkeys:
        getters["n:" + k] = lambda st, k=k: st["node_labels"][k]
    for k in ekeys:
        getters["e:" + k] = lambda st, k=k: st["edge_labels"][k]
    if xyz:
        getters["coords"] = lambda st: st["coords"]
    if feat:
        getters["features"] = lambda st: st["features"]  # one vector per graph; their lengths may differ
    for st in states:
        if (tuple(st["node_labels"]) != nkeys or tuple(st["edge_labels"]) != ekeys
                or (st["coords"] is not None) != xyz or (st.get("features") is not None) != feat):  # fmt: skip
            return None
    arrays, lengths = {}, {}
    for name, get in getters.items():
        parts = [np.asarray(get(st)) for st in states]
        a0 = parts[0]
        if any(p.dtype != a0.dtype or p.shape[1:] != a0.shape[1:] for p in parts):
            return None
        arrays[name] = np.concatenate(parts) if len(parts) > 1 else a0.copy()
        lengths[name] = np.array([len(p) for p in parts], dtype=np.int64)
    return {"arrays": arrays, "lengths": lengths, "n": np.array([st["n"] for st in states], dtype=np.int64),
            "titles": [st["title"] for st in states], "node_keys": nkeys, "edge_keys": ekeys}  # fmt: skip


def unpack_many(packed: dict, cls: type) -> tuple[Any, ...]:
    """The graphs (instances of ``cls``, restored with ``__setstate__``) of :func:`pack_many` (a pack
    made before graphs had features has no ``"features"`` array: the graphs have none). The packed arrays are
    made read-only, and each graph's arrays are views of them."""
    arrays, lengths = packed["arrays"], packed["lengths"]
    pieces = {}
    for name, a in arrays.items():
        a.setflags(write=False)  # once here: the views below are read-only, and the graphs need not freeze each
        ends = np.cumsum(lengths[name]).tolist()
        pieces[name] = [a[lo:hi] for lo, hi in zip([0, *ends[:-1]], ends, strict=True)]
    node_keys, edge_keys = packed["node_keys"], packed["edge_keys"]
    nodes = [pieces["n:" + k] for k in node_keys]
    edges = [pieces["e:" + k] for k in edge_keys]
    coords, features = pieces.get("coords"), pieces.get("features")
    indptr, indices, data = pieces["indptr"], pieces["indices"], pieces["data"]
    out = []
    for t, (n, title) in enumerate(zip(packed["n"].tolist(), packed["titles"], strict=True)):
        g = cls.__new__(cls)
        g.__setstate__({
            "indptr": indptr[t], "indices": indices[t], "data": data[t], "n": n,
            "node_labels": {k: v[t] for k, v in zip(node_keys, nodes, strict=True)},
            "edge_labels": {k: v[t] for k, v in zip(edge_keys, edges, strict=True)},
            "coords": None if coords is None else coords[t],
            "title": title,
            "features": None if features is None else features[t],
        })  # fmt: skip
        out.append(g)
    return tuple(out)
