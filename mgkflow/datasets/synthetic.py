"""The synthetic graph families of the paper (§VII): Newman–Watts–Strogatz and Barabási–Albert graphs (networkx)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import GraphError, ParameterError
from ..graph import Graph
from ..io.csr import csr_from_edges
from . import _args

__all__ = ["nws", "ba"]


def _from_nx(G: Any, i: int, seed: int, labeled: bool, title: str) -> Graph:
    """Convert a synthetic networkx graph with nodes 0..n-1, applying the label convention."""
    n = G.number_of_nodes()
    if set(G.nodes) != set(range(n)):
        raise GraphError(f"graph '{title}': expected nodes 0..{n - 1}")
    edges = sorted((min(u, v), max(u, v)) for u, v in G.edges())
    e = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    values: dict[str, np.ndarray] = {}
    node_labels: dict[str, np.ndarray] = {}
    if labeled:
        deg = np.zeros(n, dtype=np.int64)
        for v, d in G.degree():
            deg[v] = d
        node_labels["label"] = deg % 3
        values["length"] = np.random.default_rng(seed + i).uniform(1, 2, size=len(edges))
    indptr, indices, data, edge_labels = csr_from_edges(n, e[:, 0], e[:, 1], values)
    return Graph.from_csr(indptr, indices, data, n, node_labels, edge_labels, title=title)


def _synthetic(
    prefix: str, make: Callable[[int], Any], n_graphs: Any, seed: Any, labeled: Any
) -> list[Graph]:
    import networkx as nx

    n_graphs = _args.count(prefix, "n_graphs", n_graphs, minimum=0, maximum=_args.MAX_GRAPHS)
    seed = _args.seed(prefix, seed)
    labeled = _args.flag(prefix, "labeled", labeled)
    graphs = []
    for i in range(n_graphs):
        try:
            G = make(seed + i)
        except nx.NetworkXError as exc:  # a combination of sizes networkx refuses
            raise ParameterError(f"{prefix}: {exc}") from exc
        graphs.append(_from_nx(G, i, seed, labeled, f"{prefix}-{i}"))
    return graphs


def nws(
    n_graphs: int = 160, n: int = 96, k: int = 3, p: float = 0.1, seed: int = 0, labeled: bool = False
) -> list[Graph]:
    """Newman–Watts–Strogatz small-world graphs (the paper's NWS workload).

    Graph ``i`` is ``networkx.newman_watts_strogatz_graph(n, k, p, seed=seed + i)``
    with nodes in networkx numbering and unit edge weights, titled ``"nws-i"``.

    Parameters
    ----------
    n_graphs : int
        Number of graphs.
    n, k, p : int, int, float
        Nodes, ring neighbours, shortcut probability (passed to networkx).
    seed : int
        Seed of the first graph; graph ``i`` uses ``seed + i``.
    labeled : bool
        If True, add node label ``label`` = degree % 3 (int) and edge label
        ``length`` drawn from ``numpy.random.default_rng(seed + i).uniform(1, 2, n_edges)``,
        assigned to the edges (u < v) in sorted order.

    Returns
    -------
    list of Graph

    Examples
    --------
    >>> gs = nws(n_graphs=3, labeled=True)
    >>> [g.title for g in gs]
    ['nws-0', 'nws-1', 'nws-2']
    >>> sorted(gs[0].node_labels), sorted(gs[0].edge_labels)
    (['label'], ['length'])
    """
    import networkx as nx

    n = _args.count("nws", "n", n, minimum=1, maximum=_args.MAX_NODES)
    k = _args.count("nws", "k", k, minimum=0)
    if k > n:
        raise ParameterError(f"nws: k (ring neighbours) must be <= n, got k={k}, n={n}")
    p = _args.probability("nws", "p", p)

    def make(s: int) -> Any:
        return nx.newman_watts_strogatz_graph(n, k, p, seed=s)

    return _synthetic("nws", make, n_graphs, seed, labeled)


def ba(n_graphs: int = 160, n: int = 96, m: int = 6, seed: int = 0, labeled: bool = False) -> list[Graph]:
    """Barabási–Albert scale-free graphs (the paper's BA workload).

    Graph ``i`` is ``networkx.barabasi_albert_graph(n, m, seed=seed + i)``, titled
    ``"ba-i"``; ``labeled`` follows the convention of :func:`nws`.

    Parameters
    ----------
    n_graphs : int
        Number of graphs.
    n, m : int
        Nodes and edges attached from each new node (passed to networkx).
    seed : int
        Seed of the first graph; graph ``i`` uses ``seed + i``.
    labeled : bool
        Add ``label`` (degree % 3) node labels and ``length`` edge labels (see :func:`nws`).

    Returns
    -------
    list of Graph

    Examples
    --------
    >>> g = ba(n_graphs=1)[0]
    >>> g.title, g.n_nodes, g.n_edges
    ('ba-0', 96, 540)
    """
    import networkx as nx

    n = _args.count("ba", "n", n, minimum=2, maximum=_args.MAX_NODES)
    m = _args.count("ba", "m", m, minimum=1)
    if m >= n:
        raise ParameterError(f"ba: need 1 <= m < n, got m={m}, n={n}")

    return _synthetic("ba", lambda s: nx.barabasi_albert_graph(n, m, seed=s), n_graphs, seed, labeled)
