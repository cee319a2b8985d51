"""Node orderings (docs/design.md §3): a registry of named methods behind one function.

Every ordering maps a graph (a :class:`mgkflow.graph.Graph` or a square scipy
sparse / dense matrix) to a permutation ``perm`` (numpy int64) with ``perm[k]`` the
original index of the node placed at position k — the convention of
``numpy.argsort`` and of scipy's ``reverse_cuthill_mckee``; apply it with
``graph.permute(perm)``. The figure of merit is the number of non-empty 8x8 tiles
of the reordered matrix (:func:`mgkflow.format.count.count_octiles`).

Built-in methods: ``natural``, ``random``, ``rcm``, ``pbr``, ``tsp``, ``morton``,
``hilbert``, one submodule each (``mgkflow.reorder.pbr.pbr`` and so on; the
random ordering lives in ``random_order``), and ``auto``, which applies the default
ordering for the graph's size (:func:`default_method`). Register another with :func:`register`.

``natural`` is registered as an *identity* ordering (:func:`is_identity`): its permutation
is always ``0..n-1``, so callers that reorder many graphs
(:func:`mgkflow.gram.reorder_graphs`) skip it and keep the graph as it is;
:func:`resolve_method` names the ordering ``auto`` applies to a given graph.

Examples
--------
>>> import networkx as nx
>>> from mgkflow.graph import Graph
>>> from mgkflow.format.count import count_octiles
>>> g = Graph.from_networkx(nx.newman_watts_strogatz_graph(96, 3, 0.1, seed=1))
>>> perm = reorder(g, method="pbr", seed=0)
>>> count_octiles(g, perm) < count_octiles(g, reorder(g, method="rcm"))
True
>>> "pbr" in available_methods()
True
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..errors import GraphError, ParameterError, ParameterTypeError
from . import hilbert, morton, natural, pbr, random_order, rcm, tsp
from ._common import _matrix, check_perm, pattern
from .pbr import pbr_groups

__all__ = [
    "reorder",
    "default_method",
    "AUTO_PBR_MIN_NODES",
    "register",
    "unregister",
    "available_methods",
    "get_method",
    "is_identity",
    "resolve_method",
    "pbr_groups",
]

#: An ordering: ``fn(graph, seed=0, **options) -> perm``.
Ordering = Callable[..., np.ndarray]

_REGISTRY: dict[str, Ordering] = {}
#: Names of the orderings registered with ``identity=True`` (see :func:`is_identity`).
_IDENTITY: set[str] = set()


def register(
    name: str, fn: Ordering | None = None, *, overwrite: bool = False, identity: bool = False
) -> Any:
    """Register an ordering under ``name`` (usable directly or as a decorator).

    The function is called as ``fn(graph, seed=seed, **options)`` and must return a
    permutation of ``0..n-1`` (``perm[k]`` = original node placed at k); the result
    is checked by :func:`reorder`.

    Parameters
    ----------
    name : str
        Method name (case-insensitive).
    fn : callable, optional
        The ordering; omit to use ``register`` as a decorator.
    overwrite : bool
        Allow replacing an existing method.
    identity : bool
        The ordering returns the identity permutation ``0..n-1`` for every graph, seed
        and options (as ``natural`` does). Callers may then skip calling it and keep the
        graph unpermuted (:func:`is_identity`); leave False unless this holds.

    Examples
    --------
    >>> import numpy as np
    >>> @register("reverse", overwrite=True)
    ... def reverse(graph, seed=0):
    ...     return np.arange(pattern(graph).shape[0])[::-1]
    >>> reorder(np.array([[0, 1, 0], [1, 0, 1], [0, 1, 0]]), method="reverse")
    array([2, 1, 0])
    >>> unregister("reverse")
    """

    key = _key(name)
    for flag, value in (("overwrite", overwrite), ("identity", identity)):
        if not isinstance(value, (bool, np.bool_)):
            raise ParameterTypeError(f"register: {flag} must be True or False, got {type(value).__name__}")
    if not key:
        raise ParameterError("register: an ordering needs a non-empty name")

    def deco(f: Ordering) -> Ordering:
        if key in _REGISTRY and not overwrite:
            raise ParameterError(f"ordering {name!r} is already registered (pass overwrite=True to replace it)")
        if not callable(f):
            raise ParameterTypeError(f"ordering {name!r}: {f!r} is not callable")
        _REGISTRY[key] = f
        if identity:
            _IDENTITY.add(key)
        else:
            _IDENTITY.discard(key)
        return f

    return deco if fn is None else deco(fn)


class UnknownOrderingError(ParameterError, KeyError):
    """An ordering name that is not registered (a :class:`~mgkflow.errors.ParameterError`, and a ``KeyError``
    as :func:`unregister` always raised)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


def _key(name: Any) -> str:
    """The registry key of an ordering name; :class:`~mgkflow.errors.ParameterTypeError` if it is not text."""
    if not isinstance(name, str):
        raise ParameterTypeError(f"an ordering name must be a string, got {type(name).__name__} {name!r:.40}")
    return name.lower()


def unregister(name: str) -> None:
    """Remove a registered ordering (:class:`UnknownOrderingError`, a KeyError, if unknown)."""
    key = _key(name)
    if key not in _REGISTRY:
        raise UnknownOrderingError(f"unknown ordering {name!r}; available: {', '.join(available_methods())}")
    del _REGISTRY[key]
    _IDENTITY.discard(key)


def available_methods() -> list[str]:
    """Names of the registered orderings, built-ins first.

    Examples
    --------
    >>> available_methods()[:8]
    ['natural', 'random', 'rcm', 'pbr', 'tsp', 'morton', 'hilbert', 'auto']
    """
    return list(_REGISTRY)


def get_method(name: str) -> Ordering:
    """The ordering function registered as ``name``."""
    try:
        return _REGISTRY[_key(name)]
    except KeyError:
        raise UnknownOrderingError(
            f"unknown ordering {name!r}; available: {', '.join(available_methods())}"
        ) from None


def is_identity(name: str) -> bool:
    """Whether the ordering ``name`` is registered as the identity (``register(..., identity=True)``).

    Such an ordering leaves every graph in its input order, so a caller can skip it: no
    permutation to compute, cache or apply. ``auto`` is not one (it depends on the
    graph: pass :func:`resolve_method`'s answer); unknown names give False.

    Examples
    --------
    >>> is_identity("natural"), is_identity("NATURAL"), is_identity("rcm"), is_identity("auto")
    (True, True, False, False)
    """
    return _key(name) in _IDENTITY


def resolve_method(name: str, graph: Any) -> str:
    """The ordering that method ``name`` applies to ``graph`` (lower case).

    ``auto`` resolves to :func:`default_method` of the graph (while ``auto`` is the built-in
    one); any other name is returned lower-cased, unchecked (:func:`reorder` raises for an
    unknown one). Cheap: reads the graph's size only.

    Parameters
    ----------
    name : str
        A method name.
    graph : Graph, scipy sparse matrix or array_like

    Examples
    --------
    >>> import numpy as np
    >>> resolve_method("auto", np.eye(20)), resolve_method("auto", np.eye(2000)), resolve_method("RCM", np.eye(2))
    ('natural', 'pbr', 'rcm')
    """
    key = _key(name)
    if key == "auto" and _REGISTRY.get(key) is _auto:
        return default_method(graph)
    return key


def reorder(graph: Any, method: str = "pbr", seed: int = 0, **options: Any) -> np.ndarray:
    """Compute a node ordering of ``graph`` with the named method.

    Parameters
    ----------
    graph : Graph, scipy sparse matrix or array_like
        The graph (only its adjacency pattern, and coordinates where the method
        uses them, matter).
    method : str
        One of :func:`available_methods` (default ``"pbr"``).
    seed : int
        Seed of randomized methods; equal seeds give equal orderings.
    **options
        Method options (e.g. ``time_limit`` for ``tsp``, ``n_kicks`` for ``pbr``).

    Returns
    -------
    numpy.ndarray of int64
        ``perm[k]`` = original index of the node placed at position k.

    Examples
    --------
    >>> import numpy as np
    >>> A = np.array([[0, 0, 1], [0, 0, 0], [1, 0, 0]])
    >>> reorder(A, method="natural")
    array([0, 1, 2])
    >>> sorted(reorder(A, method="random", seed=3).tolist())
    [0, 1, 2]
    """
    fn = get_method(method)
    n = pattern(graph).shape[0]
    return check_perm(fn(graph, seed=seed, **options), n, method)


#: Nodes from which :func:`default_method` picks PBR (below: the natural order).
AUTO_PBR_MIN_NODES = 256


def default_method(graph: Any) -> str:
    """The default ordering of a graph by its size: ``"natural"`` below
    :data:`AUTO_PBR_MIN_NODES` nodes, ``"pbr"`` from there on.

    From GPU measurements on one H100 (mgkflow/gpu/NOTES.md): on 160 graphs of 96 nodes (the
    per-pair path, NWS and BA sets) the ordering changes the solve time by -6 % to +4 %
    (NWS natural 169.7k / RCM 167.1k / PBR 175.6k pairs/s; BA 41.2k / 32.2k / 38.9k), small
    graphs living in L1, while PBR costs seconds of host time per set; on 3-D geometric pairs
    of 1,000-3,000 nodes (staged wide strategy) natural took 0.489 s, RCM 0.099, PBR 0.081,
    Hilbert 0.086 (6x). The threshold between the two measured regimes (96 vs >= 1,000 nodes)
    is set at 256 nodes, where one graph's octiles no longer fit one block's caches; no size in
    between was measured. Molecules (<= ~64 atoms) therefore keep their order.

    Parameters
    ----------
    graph : Graph, scipy sparse matrix or array_like

    Examples
    --------
    >>> import numpy as np
    >>> default_method(np.eye(20)), default_method(np.eye(2000))
    ('natural', 'pbr')
    """
    return "pbr" if _n_nodes(graph) >= AUTO_PBR_MIN_NODES else "natural"


def _n_nodes(graph: Any) -> int:
    """Nodes of a graph or square matrix from its shape alone (:func:`pattern` builds the
    symmetrized pattern, ~0.1 ms a molecule); the same ValueErrors as :func:`pattern`."""
    adj = getattr(graph, "adjacency", graph)
    shape = adj.shape if sp.issparse(adj) else np.shape(adj)
    if not sp.issparse(adj):
        shape = _matrix(adj).shape
    if len(shape) != 2:
        raise GraphError(f"adjacency must be a 2-D matrix, got shape {tuple(shape)}")
    if shape[0] != shape[1]:
        raise GraphError(f"adjacency matrix must be square, got {tuple(shape)}")
    return int(shape[0])


def _auto(graph: Any, seed: int = 0, **options: Any) -> np.ndarray:
    """Ordering ``auto``: :func:`default_method`'s ordering of the graph (options go to it)."""
    return get_method(default_method(graph))(graph, seed=seed, **options)


register("natural", natural.natural, identity=True)
register("random", random_order.random_order)
register("rcm", rcm.rcm)
register("pbr", pbr.pbr)
register("tsp", tsp.tsp)
register("morton", morton.morton)
register("hilbert", hilbert.hilbert)
register("auto", _auto)
