"""networkx graphs to and from the arrays of :class:`mgkflow.graph.Graph` (a converter; no Graph import).

:func:`graph_arrays_from_networkx` is the work of :meth:`mgkflow.Graph.from_networkx` and
:func:`graph_to_networkx` of :meth:`mgkflow.Graph.to_networkx`. The GraphML and GML readers
(:mod:`mgkflow.io.graphml`, :mod:`mgkflow.io.gml`) build their graphs through them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .._graph_checks import _is_number
from ..errors import GraphError, ParameterTypeError, describe_graph
from ._args import check_attribute_name, check_attribute_names

__all__ = ["graph_arrays_from_networkx", "graph_to_networkx"]


def graph_arrays_from_networkx(
    G: Any, weight: str | None = "weight", node_labels: Sequence[str] = (), edge_labels: Sequence[str] = (),
    title: str | None = None, coords: str | None = None,
) -> dict[str, Any]:
    """The keyword arguments of :meth:`mgkflow.Graph.from_csr` (``title`` included) for a networkx graph.

    Parameters and conventions as :meth:`mgkflow.Graph.from_networkx`: nodes numbered in ``G.nodes``
    order, a missing weight (or None) means 1.0, every node/edge must have the requested label fields.

    Raises
    ------
    mgkflow.errors.GraphError
        Not a networkx graph, directed graph, multigraph, self loop, missing or non-numeric field.
    mgkflow.errors.ParameterTypeError
        ``weight`` or ``coords`` not an attribute name (or None), ``node_labels`` / ``edge_labels``
        not attribute names (one name, a sequence of them, or None for none), ``title`` not text or None.

    Examples
    --------
    >>> import networkx as nx
    >>> a = graph_arrays_from_networkx(nx.path_graph(3), title="path")
    >>> a["indptr"].tolist(), a["indices"].tolist(), a["n_nodes"], a["title"]
    ([0, 1, 3, 4], [1, 0, 2, 1], 3, 'path')
    """
    if not all(hasattr(G, a) for a in ("is_directed", "is_multigraph", "nodes", "edges")):
        raise GraphError(f"from_networkx: expected a networkx.Graph, got {type(G).__name__}")
    weight = check_attribute_name("weight", weight)
    coords = check_attribute_name("coords", coords)
    node_labels = check_attribute_names("node_labels", node_labels)
    edge_labels = check_attribute_names("edge_labels", edge_labels)
    if title is not None and not isinstance(title, str):
        raise ParameterTypeError(f"title must be text or None, got {type(title).__name__} {title!r:.60}")
    if G.is_directed():
        raise GraphError("from_networkx: directed graphs are not supported; call G.to_undirected()")
    if G.is_multigraph():
        raise GraphError("from_networkx: multigraphs are not supported; merge parallel edges first")
    if title is None:
        name = getattr(G, "graph", {}).get("name")
        title = (name if isinstance(name, str) else str(name)) if name is not None else None
        title = title or None
    who = describe_graph(None, title)
    nodes = list(G.nodes)
    n = len(nodes)
    index = {v: i for i, v in enumerate(nodes)}
    nl = {}
    for field in node_labels:
        vals = []
        for v in nodes:
            attrs = G.nodes[v]
            if field not in attrs:
                raise GraphError(f"{who}: node {v!r} has no label field '{field}'")
            vals.append(attrs[field])
        nl[field] = vals
    rows, cols, w = [], [], []
    el = {f: [] for f in edge_labels}
    for u, v, attrs in G.edges(data=True):
        if u == v:
            raise GraphError(f"{who}: self loop at node {u!r}; self loops are not allowed")
        wt = 1.0 if weight is None else attrs.get(weight, 1.0)
        if not (wt is None or _is_number(wt)):
            raise GraphError(
                f"{who}: edge weight '{weight}' is not numeric: edge ({u!r}, {v!r}) has "
                f"{type(wt).__name__} {wt!r}"
            )
        i, j = index[u], index[v]
        rows += [i, j]
        cols += [j, i]
        w += [wt, wt]
        for f in edge_labels:
            if f not in attrs:
                raise GraphError(f"{who}: edge ({u!r}, {v!r}) has no label field '{f}'")
            el[f] += [attrs[f], attrs[f]]
    rows = np.asarray(rows, dtype=np.int64)
    cols = np.asarray(cols, dtype=np.int64)
    try:
        w = np.asarray(w, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise GraphError(f"{who}: edge weight '{weight}' is not numeric") from exc
    order = np.lexsort((cols, rows))
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n), out=indptr[1:])
    xyz = None
    if coords is not None:
        missing = next((v for v in nodes if coords not in G.nodes[v]), None)
        if missing is not None:
            raise GraphError(f"{who}: node without coordinate attribute '{coords}' (node {missing!r})")
        try:
            xyz = np.asarray([G.nodes[v][coords] for v in nodes], dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise GraphError(
                f"{who}: coordinate attribute '{coords}' must hold 2 or 3 numbers on every node ({exc})"
            ) from exc
    return {
        "indptr": indptr,
        "indices": cols[order],
        "data": w[order],
        "n_nodes": n,
        "node_labels": nl,
        "edge_labels": {f: [v[k] for k in order.tolist()] for f, v in el.items()},
        "coords": xyz,
        "title": title,
    }


def graph_to_networkx(graph: Any) -> Any:
    """An equivalent :class:`networkx.Graph` of a :class:`mgkflow.graph.Graph` (weights and labels as attributes).

    Examples
    --------
    >>> import numpy as np
    >>> from mgkflow import Graph
    >>> G = graph_to_networkx(Graph(np.array([[0, 2], [2, 0]]), node_labels={"x": [1, 2]}, title="g"))
    >>> list(G.nodes(data=True)), list(G.edges(data=True))
    ([(0, {'x': 1}), (1, {'x': 2})], [(0, 1, {'weight': 2.0})])
    """
    import networkx as nx

    G = nx.Graph(name=graph.title or "")
    for i in range(graph.n_nodes):
        attrs = {k: v[i].tolist() for k, v in graph.node_labels.items()}
        if graph.coords is not None:
            attrs["coords"] = tuple(graph.coords[i])
        G.add_node(i, **attrs)
    rows, cols = graph.coo()
    for k in np.flatnonzero(rows < cols):
        attrs = {f: v[k].tolist() for f, v in graph.edge_labels.items()}
        G.add_edge(int(rows[k]), int(cols[k]), weight=float(graph.adjacency.data[k]), **attrs)
    return G
