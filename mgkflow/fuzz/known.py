"""Fixed fuzz cases: the rough inputs found by earlier fuzz runs (issue 12), by name."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .checks import Outcome, check_gram, guarded

__all__ = ["known_cases"]


def _path_graphs(weight: float = 1.0, sizes: tuple[int, ...] = (3, 4)) -> list[Any]:
    import networkx as nx

    from mgkflow import Graph

    out = []
    for n in sizes:
        G = nx.path_graph(n)
        nx.set_node_attributes(G, {i: i % 2 for i in G}, "a")
        nx.set_edge_attributes(G, weight, "weight")
        out.append(Graph.from_networkx(G, node_labels=["a"]))
    return out


def known_cases() -> dict[str, Callable[[], Outcome]]:
    """The rough inputs found by earlier fuzz runs (issue 12), as named fixed cases.

    Each returns an Outcome through :func:`guarded`; ``python -m mgkflow.bench fuzz``
    prints their current status, and ``tests/test_fuzz.py`` runs them.
    """
    from mgkflow import Graph
    from mgkflow import MarginalizedGraphKernel as MGK
    from mgkflow.kernels import Constant, KroneckerDelta, SquareExponential

    def gram(kern: Any, *args: Any, symmetric: bool = True, **kw: Any) -> Callable[[], Outcome]:
        return lambda: check_gram(kern()(*args, **kw), symmetric=symmetric)

    vec = [Graph(np.array([[0, 1], [1, 0]]), node_labels={"x": [[0.0, 1.0], [1.0, 0.0]]})] * 2
    pg = _path_graphs()
    cases = {
        "cross normalized, p=1e150": gram(lambda: MGK(p=1e150, backend="cpu"), pg[:1], pg[1:], normalize=True,
                                          symmetric=False),
        "p=1e200": gram(lambda: MGK(p=1e200, backend="cpu"), pg),
        "Constant(2**1100)": gram(lambda: MGK(node_kernel=Constant(2**1100), backend="cpu"), pg),
        "q=2**1100": gram(lambda: MGK(q=2**1100, backend="cpu"), pg),
        "max_iter=inf": gram(lambda: MGK(max_iter=float("inf"), backend="cpu"), pg),
        "max_iter='10'": gram(lambda: MGK(max_iter="10", backend="cpu"), pg),
        "kern(None)": gram(lambda: MGK(backend="cpu"), None),
        "q=['a']": gram(lambda: MGK(q=["a"], backend="cpu"), pg),
        "gpu_options='x'": gram(lambda: MGK(gpu_options="x"), pg),
        "SquareExponential(1e160)": gram(lambda: MGK(node_kernel=SquareExponential(1e160, "a"), backend="cpu"), pg),
        "Constant(5e-324)": gram(lambda: MGK(node_kernel=Constant(5e-324), backend="cpu"), pg),
        "q=1e-8": gram(lambda: MGK(q=1e-8, backend="cpu"), pg),
        "complex q from a callable": gram(lambda: MGK(q=lambda g: np.full(g.n_nodes, 0.05 + 0.01j), backend="cpu"),
                                          pg),
        "vector label, SquareExponential": gram(lambda: MGK(node_kernel=SquareExponential(1.0, "x"), backend="cpu"),
                                                vec),
        "vector label, KroneckerDelta": gram(lambda: MGK(node_kernel=KroneckerDelta(0.5, "x"), backend="cpu"), vec),
    }
    for w in (1e-150, 1e-80, 1e100, 1e155, 1e300):
        cases[f"all weights {w:g}"] = gram(lambda: MGK(node_kernel=KroneckerDelta(0.5, "a"), backend="cpu"),
                                           _path_graphs(w))
    return {name: (lambda fn=fn: guarded(fn)) for name, fn in cases.items()}

