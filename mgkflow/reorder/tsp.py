"""Travelling-salesman ordering: a short Hamiltonian path over hop distances (python-tsp).

The distance between two nodes is their hop distance (shortest path length;
nodes in different components are ``max_finite + 1`` apart). A dummy node at
distance 0 from every node turns the open path into a tour; the tour starts from
the RCM order and is improved by :func:`python_tsp.heuristics.solve_tsp_local_search`
(2-opt, first improvement) or simulated annealing within ``time_limit`` seconds,
then cut open at the dummy node. python-tsp draws from the global :mod:`random`
state; it is seeded with ``seed`` for the call and restored afterwards. By default
(``time_limit=None``) the search runs to a local optimum, so the result is the same
for a given seed on any machine; a time limit bounds the time per graph but makes the
result depend on the machine's speed. Graphs above ``max_nodes`` (default 500: the
dense distance matrix and the 2-opt passes grow as n² and faster) keep the RCM path.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import reverse_cuthill_mckee, shortest_path

from ._common import pattern

__all__ = ["tsp", "hop_distances"]


def hop_distances(graph: Any) -> np.ndarray:
    """Dense hop-distance matrix; pairs in different components get ``max finite + 1``.

    Examples
    --------
    >>> import numpy as np
    >>> hop_distances(np.array([[0, 1, 0], [1, 0, 0], [0, 0, 0]])).tolist()
    [[0.0, 1.0, 2.0], [1.0, 0.0, 2.0], [2.0, 2.0, 0.0]]
    """
    A = pattern(graph)
    D = shortest_path(sp.csr_matrix(A), method="D", directed=False, unweighted=True)
    finite = np.isfinite(D)
    far = (D[finite].max() if finite.any() else 0.0) + 1.0
    D[~finite] = far
    return D


def tsp(
    graph: Any,
    seed: int = 0,
    time_limit: float | None = None,
    solver: str = "local_search",
    max_nodes: int = 500,
) -> np.ndarray:
    """Order the nodes along a short path in hop distance (python-tsp heuristics).

    Parameters
    ----------
    graph : Graph or sparse matrix
    seed : int
        Seed of python-tsp's random neighbourhood order (global :mod:`random` state,
        restored afterwards).
    time_limit : float or None
        Seconds for the heuristic per graph (default None: until a local optimum,
        deterministic; a limit trades determinism for a bounded time).
    solver : {"local_search", "simulated_annealing"}
        The python-tsp heuristic.
    max_nodes : int
        Larger graphs (a dense n x n distance matrix) skip the heuristic and get the
        RCM start path.

    Returns
    -------
    numpy.ndarray of int64
        ``perm[k]`` = original index of the node placed at position k.

    Examples
    --------
    >>> import networkx as nx
    >>> from mgkflow.graph import Graph
    >>> g = Graph.from_networkx(nx.path_graph(6))
    >>> sorted(tsp(g, time_limit=None).tolist())
    [0, 1, 2, 3, 4, 5]
    """
    from python_tsp.heuristics import solve_tsp_local_search, solve_tsp_simulated_annealing

    A = pattern(graph)
    n = A.shape[0]
    if n <= 3:
        return np.arange(n, dtype=np.int64)
    solvers = {"local_search": solve_tsp_local_search, "simulated_annealing": solve_tsp_simulated_annealing}
    if solver not in solvers:
        raise ValueError(f"tsp: solver must be one of {sorted(solvers)}, got {solver!r}")
    start = reverse_cuthill_mckee(sp.csr_matrix(A), symmetric_mode=True)
    if n > max_nodes:
        return np.asarray(start, dtype=np.int64)
    D = np.zeros((n + 1, n + 1))
    D[:n, :n] = hop_distances(A)
    x0 = [n] + [int(v) for v in start]  # python-tsp keeps node x0[0] first
    state = random.getstate()
    np_state = np.random.get_state()  # noqa: NPY002 - python-tsp annealing draws from np.random
    try:
        random.seed(int(seed))
        np.random.seed(int(seed) % (2**32))  # noqa: NPY002
        tour, _ = solvers[solver](D, x0=x0, max_processing_time=time_limit)
    finally:
        random.setstate(state)
        np.random.set_state(np_state)  # noqa: NPY002
    tour = [int(v) for v in tour]
    k = tour.index(n)
    path = tour[k + 1:] + tour[:k]
    return np.asarray(path, dtype=np.int64)
