"""Graphs to prepared systems, the pairs a call solves, and the scaling of a scalar start probability.

:func:`prepare` turns a call's graphs into :class:`~mgkflow.system.GraphSystem` objects and keeps
them on the kernel object (``_systems``, one entry per argument "X", "Y"): graphs are immutable,
so the next call on the same graphs with the same label fields, p and q (a hyperparameter search
calls the kernel ~100 times on the same graphs) reuses them. :func:`gram_pairs`,
:func:`cross_pairs` and :func:`self_pairs` are the (k, 2) pair lists a Gram matrix, a cross
matrix and a diagonal solve.

Examples
--------
>>> gram_pairs(3).tolist()
[[0, 0], [0, 1], [0, 2], [1, 1], [1, 2], [2, 2]]
>>> cross_pairs(2, 2).tolist(), self_pairs(2).tolist()
([[0, 0], [0, 1], [1, 0], [1, 1]], [[0, 0], [1, 1]])
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import numpy as np

from ..errors import GraphError, ParameterError, ParameterTypeError
from ..graph import Graph
from ..system import (
    GraphSystem,
    Restopped,
    check_label_kinds,
    kernel_reads,
    prepare_graph,
    scale_start,
    with_stop_many,
)
from .checks import is_scalar
from .spec import KernelSpec

__all__ = ["prepare", "gram_pairs", "diagonal_positions", "cross_pairs", "self_pairs", "p_scale", "p_factor"]


#: Gram pair lists up to this many graphs are kept (read-only) for the next call on as many graphs
GRAM_PAIRS_KEPT = 4096


def gram_pairs(n: int) -> np.ndarray:
    """The (i, j), i <= j, of an n x n symmetric matrix (upper triangle, row by row).

    Read-only for n <= :data:`GRAM_PAIRS_KEPT`: the same array serves every call on n graphs (the
    steps of a hyperparameter search), so a backend can keep its launch plan for it.
    """
    if n <= GRAM_PAIRS_KEPT:
        return _kept_gram_pairs(int(n))
    iu, ju = np.triu_indices(n)
    return np.stack([iu, ju], axis=1)


def diagonal_positions(pairs: np.ndarray, n: int) -> np.ndarray:
    """The position in ``pairs`` of the pair (i, i), for every i < n (``pairs``: a list holding each
    self-pair once, e.g. :func:`gram_pairs`; closed form for :func:`gram_pairs`'s own array).

    Examples
    --------
    >>> diagonal_positions(gram_pairs(3), 3).tolist()
    [0, 3, 5]
    >>> diagonal_positions(np.array([[1, 1], [0, 1], [0, 0]]), 2).tolist()
    [2, 0]
    """
    full = n <= GRAM_PAIRS_KEPT and pairs.shape == (n * (n + 1) // 2, 2) and not pairs.flags.writeable
    if full and pairs is gram_pairs(n):  # (a read-only full triangle: no other list is built for the test)
        i = np.arange(n, dtype=np.int64)
        return i * n - i * (i - 1) // 2
    self_ = np.flatnonzero(pairs[:, 0] == pairs[:, 1])
    out = np.zeros(n, dtype=np.int64)
    out[pairs[self_, 0]] = self_
    return out


@lru_cache(maxsize=2)
def _kept_gram_pairs(n: int) -> np.ndarray:
    iu, ju = np.triu_indices(n)
    out = np.stack([iu, ju], axis=1)
    out.flags.writeable = False
    return out


def cross_pairs(n: int, m: int, out: np.ndarray | None = None, offset: int = 0) -> np.ndarray:
    """Every (i, j + ``offset``) of an n x m matrix, row by row, written into ``out`` (n·m × 2 int64) if given:
    a caller that needs the pairs inside a larger array (a normalized K(X, Y)'s cross and self pairs) writes
    them there, without a further n·m × 2 array (160 MB for a screen chunk of 5,000 × 2,000, whose fresh pages
    cost more than the writes)."""
    if out is None:
        out = np.empty((n * m, 2), dtype=np.int64)
    if not out.flags.c_contiguous:  # (reshape would copy, and the writes would not reach out)
        raise ValueError("cross_pairs writes into a C-contiguous array only")
    grid = out.reshape(n, m, 2)
    grid[:, :, 0] = np.arange(n)[:, None]
    grid[:, :, 1] = np.arange(offset, offset + m)[None, :]
    return out


def self_pairs(n: int) -> np.ndarray:
    """The pairs (i, i) of n graphs with themselves."""
    return np.repeat(np.arange(n)[:, None], 2, axis=1)


def prepare(
    kern: KernelSpec, graphs: Sequence[Graph], what: str, others: Sequence[GraphSystem] | None = None
) -> list[GraphSystem]:
    """The prepared systems of ``graphs`` (argument ``what``: "X" or "Y"), reusing those of the
    previous call where the graph, the kernels' label fields, p and q are the same.

    ``others``: the prepared X of a call whose ``graphs`` are its Y. A label field held as floats in
    one graph and as integers beyond ±2**53 in another (of ``graphs``, or of ``graphs`` and ``others``)
    is refused (:func:`~mgkflow.system.check_label_kinds`)."""
    if isinstance(graphs, Graph):
        raise ParameterTypeError(f"{what} must be a sequence of Graph objects, not a single Graph")
    if graphs is None or isinstance(graphs, str | bytes) or not hasattr(graphs, "__iter__"):
        raise ParameterTypeError(f"{what} must be a sequence of mgkflow.Graph objects, got {graphs!r:.60}")
    graphs = list(graphs)
    if not graphs:
        raise ParameterError(f"{what} is empty")
    # Graphs are immutable, so a graph's system depends only on the label fields the
    # kernels read, p and q: reuse the previous call's systems (repeated calls on the
    # same graphs, hyperparameter searches, benchmarks) unless p or q is a callable or a vector.
    p = 1.0 if is_scalar(kern.p) else kern.p  # a scalar p is applied to the results (p_scale)
    cacheable = all(isinstance(v, int | float | str) for v in (p, kern.q))
    # a scalar q moves at every step of a hyperparameter search: a system prepared for another scalar q
    # only needs its q and d again (with_stop), not the graph's validation
    q_number = isinstance(kern.q, int | float) and not isinstance(kern.q, bool)
    key = (kern.node_kernel.fields, kern.edge_kernel.fields, repr(p), repr(kern.q))
    if cacheable and others is None:
        again = _same_list(kern, what, graphs, key, q_number)
        if again is not None:
            return again
    old = _per_graph(kern, what) if cacheable else {}
    new: dict = {}
    out: list = []
    hits = 0
    stale: list[tuple[int, GraphSystem]] = []
    pool: dict | None = None if cacheable else {}
    reads = None
    for i, g in enumerate(graphs):
        hit = old.get((id(g), i))
        if hit is not None and hit[0] is g and hit[1] == key:
            sys_ = hit[2]
            hits += 1
        elif hit is not None and hit[0] is g and q_number and hit[1][:3] == key[:3] and hit[3]:
            sys_ = None  # another q: refreshed below, all at once
            stale.append((i, hit[2]))
            hits += 1
        elif (cand := (pool := _pool(kern) if pool is None else pool).get(id(g))) is not None and (
            cand[0] is g and cand[1] == key
        ):
            sys_ = _at_position(cand[2], i)  # prepared in another argument or position (not a hit: checked below)
        else:
            if reads is None:
                reads = kernel_reads(kern.node_kernel, kern.edge_kernel)
            try:
                sys_ = scale_start(prepare_graph(g, i, kern.node_kernel, kern.edge_kernel, p=p, q=kern.q, reads=reads))
            except (GraphError, TypeError) as exc:
                # name the argument too: "graph 3" alone is ambiguous in kern(X, Y)
                raise type(exc)(f"in {what}: {exc}") from exc
        new[(id(g), i)] = (g, key, sys_, q_number)
        out.append(sys_)
    if stale:
        try:
            fresh = with_stop_many([s for _, s in stale], kern.q)
        except GraphError as exc:
            raise type(exc)(f"in {what}: {exc}") from exc
        for (i, _), sys_ in zip(stale, fresh, strict=True):
            out[i] = sys_
            g = graphs[i]
            new[(id(g), i)] = (g, key, sys_, q_number)
    # the label kinds depend on the graphs and the fields only: checked already when every system is the
    # previous call's graph again (with its fields) and that call checked this argument alone
    checked = what + "#checked"
    again = cacheable and others is None and hits == len(out) == len(old) and kern._systems.get(checked, False)
    if cacheable:
        if what == "X":  # the X before this one: a prediction's K(test, train) finds the fit's training graphs
            kern._systems["#prev"] = _per_graph(kern, "X")
        kern._systems[what] = new
        kern._systems[checked] = False
    if not again:
        check_label_kinds(([("X", others)] if others is not None else []) + [(what, out)])
    if cacheable and others is None:
        kern._systems[checked] = True
        kern._systems[what + "#list"] = (graphs, key, q_number, out)
    else:
        kern._systems.pop(what + "#list", None)
    return out


def _pool(kern: KernelSpec) -> dict:
    """Every system the kernel keeps (its last X and Y, the X before them) by graph id."""
    out = {}
    for name in ("#prev", "Y", "X"):
        out.update((gid, entry) for (gid, _), entry in _per_graph(kern, name).items())
    return out


def _at_position(system: GraphSystem, index: int) -> GraphSystem:
    """``system`` of the graph at position ``index`` (its other fields as they are: same graph, kernels, p, q)."""
    if system.index == index:
        return system
    fields = system.__dict__.copy()  # a frozen dataclass: its fields copied, the position new
    fields["index"] = index
    new = object.__new__(GraphSystem)
    object.__setattr__(new, "__dict__", fields)
    return new


def _per_graph(kern: KernelSpec, what: str) -> dict:
    """The previous call's systems of argument ``what`` by (graph id, position)."""
    old = kern._systems.get(what)
    if old is None and what + "#list" in kern._systems:
        graphs, key, q_number, systems = kern._systems[what + "#list"]
        old = {(id(g), i): (g, key, s, q_number) for i, (g, s) in enumerate(zip(graphs, systems, strict=True))}
    return old or {}


def _same_list(kern: KernelSpec, what: str, graphs: list, key: tuple, q_number: bool) -> list | None:
    """:func:`prepare`'s short cut for the steps of a hyperparameter search: the previous call's
    systems of argument ``what`` when the very same graphs come back in the same order (refreshed
    by :func:`~mgkflow.system.with_stop_many` when only a scalar q moved), else None. Those graphs
    were checked (label kinds included) by that call."""
    last = kern._systems.get(what + "#list")
    if last is None or kern._systems.get(what + "#checked") is not True:
        return None
    prev, prev_key, prev_q, systems = last
    if len(prev) != len(graphs) or not all(a is b for a, b in zip(prev, graphs, strict=True)):
        return None
    if prev_key == key:
        return systems if isinstance(systems, Restopped) else list(systems)
    if not (q_number and prev_q and prev_key[:3] == key[:3]):
        return None
    try:
        fresh = with_stop_many(systems, kern.q)
    except GraphError as exc:
        raise type(exc)(f"in {what}: {exc}") from exc
    kern._systems.pop(what, None)  # the per-graph entries follow from the list when a call needs them
    kern._systems[what + "#list"] = (graphs, key, q_number, fresh)
    return fresh


def p_scale(kern: KernelSpec, normalize: bool) -> float:
    """The factor p of a scalar start probability p (K = p² K with p = 1).

    Graphs are prepared with p = 1 and K, dK are multiplied by p twice at the end, so a
    tiny or huge p never enters the solver; normalized, p cancels (unless it is 0).
    """
    if not is_scalar(kern.p):
        return 1.0
    p = float(kern.p)
    if normalize:
        return 1.0 if p > 0 else 0.0
    return p


def p_exponents(systems: Sequence[GraphSystem]) -> np.ndarray:
    """Each system's ``p_exponent`` (its values carry 2**e per side)."""
    if isinstance(systems, Restopped):
        systems = systems.base  # another q keeps every p
    return np.fromiter((s.p_exponent for s in systems), dtype=np.int64, count=len(systems))


def p_factor(
    kern: KernelSpec, xs: Sequence[GraphSystem], ys: Sequence[GraphSystem], pairs: Any, raw: bool
) -> tuple[float, np.ndarray | None]:
    """(p, exponents): K = p² · 2**-exponent · (K of the prepared systems), per pair.

    A scalar p is left out of the systems (p = 1) and each graph's vector p is stored times
    a power of two (:class:`~mgkflow.system.GraphSystem`); a raw result is scaled back, a
    normalized one needs no scaling (every factor cancels).
    """
    scale = p_scale(kern, not raw)
    if not raw:
        return scale, None
    ex_x = p_exponents(xs)
    ex_y = ex_x if ys is xs else p_exponents(ys)
    if not (ex_x.any() or ex_y.any()):  # the usual case: no copy of the pairs
        return scale, None
    pr = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    ex = ex_x[pr[:, 0]] + ex_y[pr[:, 1]]
    return scale, (ex if np.any(ex) else None)
