"""Reordering many graphs: in parallel (process pool or Dask), with a per-graph permutation cache.

Graphs whose ordering is the identity (``natural``; ``auto`` below 256 nodes) skip all of it
and are returned as they are.
"""

from __future__ import annotations

import multiprocessing
import os
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ParameterTypeError
from ..graph import Graph
from ..reorder import is_identity, resolve_method
from .digest import graph_digest, params_digest

__all__ = ["PermutationCache", "ReorderResult", "reorder_graphs"]


class PermutationCache:
    """Node permutations by graph content and ordering: in memory, optionally in a directory.

    The key is the graph's content digest (adjacency, labels, coordinates) with the
    ordering's name, seed and options; with ``directory`` each permutation is also kept
    as ``KEY.npy`` there (written atomically), so later runs and other processes reuse it.

    Examples
    --------
    >>> import numpy as np
    >>> cache = PermutationCache()
    >>> g = Graph(np.array([[0, 1], [1, 0]]))
    >>> key = cache.key(g, "rcm", 0, {})
    >>> cache.get(key) is None
    True
    >>> cache.put(key, np.array([1, 0]))
    >>> cache.get(key).tolist()
    [1, 0]
    """

    def __init__(self, directory: str | os.PathLike | None = None) -> None:
        from ..errors import OutputPathError
        from . import _args

        self.directory = _args.path(directory, "PermutationCache directory", none=True)
        if self.directory is not None:
            try:
                self.directory.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise OutputPathError(f"PermutationCache: cannot create {self.directory}: {exc.strerror or exc}"
                                      ) from None
        self._mem: dict[str, np.ndarray] = {}

    @staticmethod
    def key(graph: Graph, method: str, seed: int, options: dict) -> str:
        opts = params_digest({k: repr(v) for k, v in options.items()})
        return f"{graph_digest(graph, coords=True)}-{method}-{seed}-{opts[:16]}"

    def get(self, key: str) -> np.ndarray | None:
        perm = self._mem.get(key)
        if perm is None and self.directory is not None:
            path = self.directory / f"{key}.npy"
            try:
                perm = np.load(path, allow_pickle=False)
            except (OSError, ValueError):
                return None
            self._mem[key] = perm
        return perm

    def put(self, key: str, perm: np.ndarray) -> None:
        perm = np.asarray(perm, dtype=np.int64)
        self._mem[key] = perm
        if self.directory is not None:
            tmp = self.directory / f".tmp-{uuid.uuid4().hex}.npy"
            np.save(tmp, perm)
            os.replace(tmp, self.directory / f"{key}.npy")

    def __len__(self) -> int:
        return len(self._mem)


@dataclass
class ReorderResult:
    """Reordered graphs, their permutations (``perm[k]`` = original node at k) and figures.

    Each graph falls in one of three groups: identity ordering (``identity``), found in
    the cache (``cached``), or computed; ``computed`` counts distinct permutations (equal
    graphs once), so ``identity + cached + computed <= len(graphs)``, with equality when no
    two computed graphs are equal.

    Attributes
    ----------
    graphs : list of Graph
        The reordered graphs, in input order; a graph whose ordering is the identity is
        the input object itself (graphs are immutable), not a copy.
    perms : list of numpy.ndarray
        The permutations (int64); an identity graph's is ``arange(n)`` (read-only, shared
        between graphs of equal size).
    methods : list of str
        The ordering asked for each graph (``method``, or its answer for the graph when
        callable), as given: ``"auto"`` stays ``"auto"``.
    cached : int
        Graphs whose permutation was found in the cache (identity graphs excluded).
    computed : int
        Permutations computed (equal graphs once, identity graphs never).
    seconds : float
        Wall time of the call.
    identity : int
        Graphs whose resolved ordering is the identity (:func:`mgkflow.reorder.is_identity`,
        e.g. ``natural``, or ``auto`` on a graph below 256 nodes): no digest, no cache
        entry, no task, no copy.
    """

    graphs: list[Graph]
    perms: list[np.ndarray]
    methods: list[str]
    cached: int
    computed: int
    seconds: float
    identity: int = 0


def _perms_task(items: list[tuple[Graph, str]], seed: int, options: dict) -> list[np.ndarray]:
    from ..reorder import reorder

    return [reorder(g, method=m, seed=seed, **options) for g, m in items]


def _identity_perm(n: int, memo: dict[int, np.ndarray]) -> np.ndarray:
    """``arange(n)`` (int64, read-only), one array per size in ``memo``."""
    perm = memo.get(n)
    if perm is None:
        perm = memo[n] = np.arange(n, dtype=np.int64)
        perm.setflags(write=False)
    return perm


def _pool_context() -> Any:
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")


def reorder_graphs(
    graphs: Sequence[Graph],
    method: str | Callable[[Graph], str] = "pbr",
    seed: int = 0,
    *,
    workers: int | None = None,
    client: Any = None,
    cache: PermutationCache | str | os.PathLike | None = None,
    chunk: int = 256,
    **options: Any,
) -> ReorderResult:
    """Reorder every graph's nodes, computing only the permutations not in ``cache``.

    A graph whose ordering resolves to the identity (:func:`mgkflow.reorder.resolve_method`
    then :func:`mgkflow.reorder.is_identity`: ``natural``, or ``auto`` below 256 nodes) is
    returned as it is, with ``arange(n)`` as its permutation: no content digest, cache
    lookup or entry, task or copy, and ``options`` are not passed to it. So molecule sets
    under ``auto`` or :func:`mgkflow.reorder.default_method` cost about a microsecond a
    graph and start no process pool; the other graphs of the same call go through the
    cache and the workers as before.

    Parameters
    ----------
    graphs : sequence of Graph
    method : str or callable
        An ordering of :mod:`mgkflow.reorder`, or ``f(graph) -> name`` choosing one per
        graph (e.g. :func:`mgkflow.reorder.default_method`).
    seed : int
        Seed of the randomized orderings.
    workers : int, optional
        Process-pool size for the permutations not cached (None or 1: this process).
    client : distributed.Client, optional
        Compute them on this Dask cluster instead (``workers`` ignored).
    cache : PermutationCache, path or None
        A cache (or a directory for one); None: a fresh in-memory cache.
    chunk : int
        Graphs per task.
    **options
        Passed to the ordering.

    Returns
    -------
    ReorderResult

    Examples
    --------
    >>> from mgkflow.datasets import molecules
    >>> gs = molecules(4, seed=0)
    >>> cache = PermutationCache()
    >>> r = reorder_graphs(gs, "rcm", cache=cache)
    >>> r.computed, reorder_graphs(gs, "rcm", cache=cache).cached
    (4, 4)
    >>> r.graphs[0].n_nodes == gs[0].n_nodes
    True

    The identity ordering keeps the graphs themselves:

    >>> n = reorder_graphs(gs, "natural", cache=cache)
    >>> n.identity, n.computed, n.cached, n.graphs[0] is gs[0], n.perms[0].tolist() == list(range(gs[0].n_nodes))
    (4, 0, 0, True, True)
    """
    from . import _args

    t0 = time.perf_counter()
    graphs = _args.graph_list(graphs, "graphs", empty=True)
    if not callable(method):
        _args.text(method, "method")
    seed = _args.count(seed, "seed", lo=-(2**63), hi=2**63 - 1)
    workers = _args.count(workers, "workers", lo=1, hi=4096, none=True)
    chunk = _args.count(chunk, "chunk", lo=1)
    if client is not None and not (hasattr(client, "map") and hasattr(client, "gather")):
        raise ParameterTypeError(f"client must be a distributed.Client or None, got {type(client).__name__}")
    if not isinstance(cache, PermutationCache):
        cache = PermutationCache(cache)
    methods = [method(g) if callable(method) else method for g in graphs]
    out: list[Graph | None] = [None] * len(graphs)
    perms: list[np.ndarray | None] = [None] * len(graphs)
    # identity orderings: the graph itself, arange(n) as permutation; the rest by key
    ident: dict[int, np.ndarray] = {}
    rest: list[int] = []
    for i, (g, m) in enumerate(zip(graphs, methods)):
        if is_identity(resolve_method(m, g)):
            out[i], perms[i] = g, _identity_perm(g.n_nodes, ident)
        else:
            rest.append(i)
    keys = {i: cache.key(graphs[i], methods[i], seed, options) for i in rest}
    for i in rest:
        perms[i] = cache.get(keys[i])
    todo = [i for i in rest if perms[i] is None]
    # one task per `chunk` graphs; equal graphs (same key) are computed once
    first: dict[str, int] = {}
    for i in todo:
        first.setdefault(keys[i], i)
    unique = list(first.values())
    groups = [unique[s : s + chunk] for s in range(0, len(unique), chunk)]
    tasks = [[(graphs[i], methods[i]) for i in grp] for grp in groups]
    if client is not None and tasks:
        futures = client.map(_perms_task, tasks, seed=seed, options=options, pure=False)
        results = client.gather(futures)
    elif workers is not None and workers > 1 and len(tasks) > 1:
        with ProcessPoolExecutor(max_workers=workers, mp_context=_pool_context()) as ex:
            results = list(ex.map(_perms_task, tasks, [seed] * len(tasks), [options] * len(tasks)))
    else:
        results = [_perms_task(t, seed, options) for t in tasks]
    for grp, res in zip(groups, results):
        for i, perm in zip(grp, res):
            cache.put(keys[i], perm)
    for i in rest:
        perms[i] = perm = cache.get(keys[i])
        out[i] = graphs[i].permute(perm)
    n_ident = len(graphs) - len(rest)
    return ReorderResult(out, perms, methods, len(rest) - len(todo), len(unique), time.perf_counter() - t0, n_ident)
