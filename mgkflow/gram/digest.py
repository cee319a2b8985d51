"""Content hashes of graphs and kernels: store fingerprints and permutation-cache keys."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

import numpy as np

from ..graph import Graph

__all__ = ["graph_digest", "graphs_digest", "kernel_params", "params_digest"]


def _update_array(h: Any, a: np.ndarray) -> None:
    a = np.ascontiguousarray(a)
    h.update(f"{a.dtype.str}{a.shape}".encode())
    h.update(a.data)


def graph_digest(graph: Graph, coords: bool = False) -> str:
    """Hex digest of what a graph's kernel values depend on (BLAKE2b, 128 bits).

    The CSR adjacency (pattern and weights) and every node and edge label field (name,
    dtype, values); with ``coords=True`` the coordinates too (geometric orderings use
    them). The title is not part of it.

    Examples
    --------
    >>> import numpy as np
    >>> a = Graph(np.array([[0, 1], [1, 0]]), node_labels={"x": [1, 2]}, title="a")
    >>> b = Graph(np.array([[0, 1], [1, 0]]), node_labels={"x": [1, 2]}, title="b")
    >>> graph_digest(a) == graph_digest(b), graph_digest(a) == graph_digest(a.permute([1, 0]))
    (True, False)
    """
    from ..errors import ParameterTypeError
    from . import _args

    if not isinstance(graph, Graph):
        raise ParameterTypeError(f"graph_digest needs an mgkflow.Graph, got {type(graph).__name__}")
    coords = _args.flag(coords, "coords")
    h = hashlib.blake2b(digest_size=16)
    adj = graph.adjacency
    h.update(b"n%d" % adj.shape[0])
    for a in (adj.indptr, adj.indices, adj.data):
        _update_array(h, np.asarray(a))
    for kind, labels in ((b"node", graph.node_labels), (b"edge", graph.edge_labels)):
        for name in sorted(labels):
            h.update(kind + b":" + name.encode())
            _update_array(h, labels[name])
    if coords and graph.coords is not None:
        h.update(b"coords")
        _update_array(h, graph.coords)
    return h.hexdigest()


def graphs_digest(graphs: Iterable[Graph]) -> str:
    """Hex digest of a sequence of graphs (their :func:`graph_digest` in order).

    Examples
    --------
    >>> import numpy as np
    >>> g, h = Graph(np.zeros((1, 1))), Graph(np.zeros((2, 2)))
    >>> graphs_digest([g, h]) == graphs_digest([h, g])
    False
    """
    from . import _args

    h = hashlib.blake2b(digest_size=16)
    count = 0
    for g in _args.graph_list(graphs, "graphs", empty=True):
        h.update(graph_digest(g).encode())
        count += 1
    h.update(b"#%d" % count)
    return h.hexdigest()


def _describe(value: Any) -> str:
    """A stable text for a parameter: repr, or module.qualname for functions (no addresses)."""
    if callable(value) and hasattr(value, "__qualname__"):
        return f"{getattr(value, '__module__', '?')}.{value.__qualname__}"
    if isinstance(value, np.ndarray):
        return f"array(sha={hashlib.blake2b(np.ascontiguousarray(value).data, digest_size=8).hexdigest()})"
    return repr(value)


def kernel_params(kernel: Any) -> dict[str, str]:
    """The parameters of a :class:`~mgkflow.MarginalizedGraphKernel` that fix its values, as text.

    Examples
    --------
    >>> from mgkflow import MarginalizedGraphKernel
    >>> kernel_params(MarginalizedGraphKernel(q=0.1, backend="cpu"))["q"]
    '0.1'
    """
    if hasattr(kernel, "get_params"):  # every constructor parameter (scikit-learn convention)
        params = kernel.get_params(deep=False)
        params.pop("progress", None)  # does not change values
        return {k: _describe(sorted(v.items()) if isinstance(v, dict) else v) for k, v in sorted(params.items())}
    return {
        "node_kernel": _describe(kernel.node_kernel),
        "edge_kernel": _describe(kernel.edge_kernel),
        "q": _describe(kernel.q),
        "p": _describe(kernel.p),
        "backend": _describe(kernel.backend),
        "rtol": _describe(kernel.rtol),
        "max_iter": _describe(kernel.max_iter),
        "gpu_options": _describe(sorted((kernel.gpu_options or {}).items())),
    }


def params_digest(params: dict[str, Any]) -> str:
    """Hex digest of a flat dict of texts (sorted by key)."""
    h = hashlib.blake2b(digest_size=16)
    for k in sorted(params):
        h.update(f"{k}={params[k]}\n".encode())
    return h.hexdigest()
