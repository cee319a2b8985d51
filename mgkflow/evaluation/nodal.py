"""Node-pair similarities (``kern(X, Y, nodal=True)``, ``kern.diag(X, nodal=True)``).

The block of a pair (G, G') holds p_a p'_b x_ab (lmin=1: minus the length-0 term
p_a p'_b v_ab q_a q'_b), so it sums to K(G, G'); normalized, each entry is divided by the
square roots of its two nodes' self-similarities. The backend returns the blocks
(:meth:`~mgkflow.backends.base.Backend.solve_nodal`, or the exact oracle's); here they are
scaled and written into one matrix, a row band (the rows of one graph) at a time, by several
threads for a large matrix.

Examples
--------
>>> import networkx as nx
>>> import numpy as np
>>> from mgkflow import Graph, MarginalizedGraphKernel
>>> from mgkflow.evaluation.systems import prepare
>>> kern = MarginalizedGraphKernel(q=0.1, backend="exact")
>>> xs = prepare(kern, [Graph.from_networkx(nx.path_graph(n)) for n in (2, 3)], "X")
>>> R = nodal_matrix(kern, xs, None, normalize=False)
>>> R.shape, bool(np.allclose(R[:2, 2:].sum(), kern([xs[0].graph], [xs[1].graph])[0, 0]))
((5, 5), True)
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..errors import GraphError
from ..system import GraphSystem
from .backend import get_backend, nodal_solver
from .checks import check_convergence
from .solve import LMIN_RESOLUTION
from .spec import KernelSpec
from .stats import SolveStats
from .systems import cross_pairs, gram_pairs, p_exponents, p_scale, self_pairs

__all__ = ["nodal_matrix", "nodal_diagonal", "check_self_similarities"]

#: Threads that assemble a nodal similarity matrix (``nodal=True``) of at least
#: ``_NODAL_PARALLEL_ENTRIES`` entries: filling it is bound by memory traffic, which a few cores saturate.
_NODAL_THREADS = min(8, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
_NODAL_PARALLEL_ENTRIES = 1 << 20


def _solve_blocks(kern: KernelSpec, xs, ys, pairs) -> list:
    """The backend's (n_i, m_j) blocks p_a p'_b x_ab of ``pairs``, in the prepared systems' units."""
    blocks, _its, res, conv = nodal_solver(kern)(xs, ys, pairs, kern.node_kernel, kern.edge_kernel, None)
    check_convergence(kern, np.asarray(conv), np.asarray(res), stacklevel=5)
    return blocks


def _exponents(systems, raw: bool) -> np.ndarray | None:
    """Each system's ``p_exponent`` (its blocks carry 2**e per side), None where none is set
    or the result is normalized (the factors cancel)."""
    if not raw:
        return None
    ex = p_exponents(systems)
    return ex if ex.any() else None


def _overflow(s1, s2) -> GraphError:
    return GraphError(
        f"nodal similarities of ({s1.name}, {s2.name}) overflow float64 (start probabilities p too large?)"
    )


def _diagonals(kern: KernelSpec, xs, blocks, raw: bool) -> np.ndarray:
    """The self-similarities p_a² x_aa (lmin=1: minus p_a² q_a² v_aa) of every node of ``xs``
    (length Σ n) from the blocks of the self-pairs (xs[k], xs[k]), scaled as :func:`nodal_matrix`'s."""
    pscale = p_scale(kern, not raw)
    ex = _exponents(xs, raw)
    out = []
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):  # reported below
        for k, (s, b) in enumerate(zip(xs, blocks, strict=True)):
            d = np.diagonal(np.asarray(b, dtype=np.float64))
            if kern.lmin == 1:
                labels = dict(s.graph.node_labels)
                V = np.broadcast_to(kern.node_kernel(labels, labels), d.shape)
                pq = s.p * s.q
                d = d.copy()
                _minus_length0(d, (pq * pq) * V)
            if ex is not None:
                d = np.ldexp(d, -2 * int(ex[k]))
            if pscale != 1.0:
                d = d * pscale * pscale
            if not np.all(np.isfinite(d)):
                raise _overflow(s, s)
            out.append(d)
    return np.concatenate(out)


def nodal_diagonal(kern: KernelSpec, xs: Sequence[GraphSystem], raw: bool) -> np.ndarray:
    """The self-similarities of every node of ``xs`` (length Σ n), solving its N self-pairs;
    ``raw``: in the units of the raw kernel (else of the prepared systems, as normalization needs)."""
    return _diagonals(kern, xs, _solve_blocks(kern, xs, xs, self_pairs(len(xs))), raw)


def check_self_similarities(r: np.ndarray, what: str, tail: str) -> None:
    """:class:`~mgkflow.errors.GraphError` naming the first node of ``what`` whose self-similarity is not > 0."""
    if not np.all(r > 0):
        k = int(np.flatnonzero(~(r > 0))[0])
        raise GraphError(f"in {what}: node {k} (counted over all graphs) has self-similarity {r[k]}{tail}")


def _columns(kern: KernelSpec, ys) -> tuple[np.ndarray, dict | None]:
    """For lmin=1: p q of every node of ``ys`` (concatenated) and the node kernel's label fields
    concatenated over ``ys`` (None where a field's dtype or shape differs between graphs: then
    the length-0 term is evaluated block by block)."""
    pq = np.concatenate([s.p * s.q for s in ys])
    labels: dict | None = {}
    for f in kern.node_kernel.fields:
        arrs = [np.asarray(s.graph.node_labels[f]) for s in ys]
        if any(a.dtype != arrs[0].dtype or a.shape[1:] != arrs[0].shape[1:] for a in arrs):
            labels = None
            break
        labels[f] = np.concatenate(arrs)
    return pq, labels


def _fill(kern: KernelSpec, R, xs, ys, pairs, blocks, ox, oy, raw: bool, sym: bool, sx=None, sy=None) -> None:
    """Write the blocks of ``pairs`` (grouped by row graph, columns increasing and contiguous)
    into ``R`` one row band (the rows of one graph of xs) at a time, while the band is in cache:
    lmin=1's length-0 term, the start probabilities' scale, the overflow check and, with
    ``sx``/``sy`` (square roots of the self-similarities), the normalization are applied to
    the whole band at once. ``sym``: only the upper block triangle was solved; each band is
    mirrored into the lower one (a graph's block with itself is symmetrized). Bands write
    disjoint parts of ``R``, so a large matrix is filled by several threads (numpy releases
    the GIL while it copies and computes)."""
    pscale = p_scale(kern, not raw)
    ex_x = _exponents(xs, raw)
    ex_y = ex_x if sym else _exponents(ys, raw)
    col_ex = None
    if ex_x is not None or ex_y is not None:
        ny = np.diff(oy)
        col_ex = np.repeat(np.zeros(len(ys), dtype=np.int64) if ex_y is None else ex_y, ny)
        ex_x = np.zeros(len(xs), dtype=np.int64) if ex_x is None else ex_x
    pq_y = labels_y = None
    if kern.lmin == 1:
        pq_y, labels_y = _columns(kern, ys)
    pr = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    rows = np.searchsorted(pr[:, 0], np.arange(len(xs) + 1)).tolist()
    jcol = pr[:, 1].tolist()
    oxl, oyl = ox.tolist(), oy.tolist()

    def band_of(i: int) -> None:
        t_lo, t_hi = rows[i], rows[i + 1]
        if t_lo == t_hi:
            return
        r0, r1 = oxl[i], oxl[i + 1]
        c0, c1 = oyl[jcol[t_lo]], oyl[jcol[t_hi - 1] + 1]
        band = R[r0:r1, c0:c1]
        for t in range(t_lo, t_hi):
            j = jcol[t]
            R[r0:r1, oyl[j] : oyl[j + 1]] = blocks[t]
        with np.errstate(over="ignore", under="ignore", invalid="ignore"):  # overflow is reported below
            if kern.lmin == 1:
                _length0(kern, band, xs[i], ys, jcol[t_lo:t_hi], oyl, c0, pq_y, labels_y)
            if col_ex is not None:
                np.ldexp(band, (-(ex_x[i] + col_ex[c0:c1])).astype(np.intc), out=band)
            if pscale != 1.0:
                band *= pscale
                band *= pscale
            # a sum is finite when every entry is (the exact test only where it is not: a sum of
            # large finite entries may overflow)
            if not np.isfinite(band.sum()):
                bad = ~np.isfinite(band)
                if bad.any():
                    c = int(np.flatnonzero(bad.any(axis=0))[0]) + c0
                    raise _overflow(xs[i], ys[int(np.searchsorted(oy, c, side="right")) - 1])
            if sym:
                d = R[r0:r1, r0:r1]  # this graph with itself: x is symmetric up to rounding
                d[...] = 0.5 * (d + d.T)
            if sx is not None:
                band /= sx[r0:r1, None]
                band /= sy[None, c0:c1]
                if sym:  # exactly symmetric again: the lower triangle from the upper one
                    d[...] = np.triu(d) + np.triu(d, 1).T
        if sym and r1 < R.shape[1]:
            R[r1:, r0:r1] = R[r0:r1, r1:].T

    threads = min(_NODAL_THREADS, len(xs)) if R.size >= _NODAL_PARALLEL_ENTRIES else 1
    if threads <= 1:
        for i in range(len(xs)):
            band_of(i)
        return
    with ThreadPoolExecutor(max_workers=threads) as pool:
        # in band order, so that an overflow is reported for the first pair, as serially
        for fut in [pool.submit(band_of, i) for i in range(len(xs))]:
            fut.result()


def _minus_length0(b, l0) -> None:
    """b -= l0 in place (lmin=1), entries that end at or below LMIN_RESOLUTION |b| set to 0 as in the
    kernel's values: the difference is known to about 1e-16 |b| (a graph without edges, or an
    isolated node, then gets exactly 0)."""
    thr = np.abs(b)
    thr *= LMIN_RESOLUTION
    np.subtract(b, l0, out=b)
    np.copyto(b, 0.0, where=b <= thr)


def _length0(kern: KernelSpec, band, s1, ys, js, oyl, c0, pq_y, labels_y) -> None:
    """Subtract lmin=1's length-0 term p_a p'_b v_ab q_a q'_b from the row band of ``s1``."""
    pq_x = s1.p * s1.q
    c1 = c0 + band.shape[1]
    if labels_y is not None:
        x = {f: np.asarray(s1.graph.node_labels[f])[:, None] for f in kern.node_kernel.fields}
        y = {f: v[None, c0:c1] for f, v in labels_y.items()}
        l0 = np.outer(pq_x, pq_y[c0:c1])
        l0 *= kern.node_kernel(x, y)
        _minus_length0(band, l0)
        return
    x = {k: v[:, None] for k, v in s1.graph.node_labels.items()}
    for j in js:
        s2 = ys[j]
        blk = band[:, oyl[j] - c0 : oyl[j + 1] - c0]
        y = {k: v[None, :] for k, v in s2.graph.node_labels.items()}
        l0 = np.outer(pq_x, s2.p * s2.q)
        l0 *= kern.node_kernel(x, y)
        _minus_length0(blk, l0)


def nodal_matrix(
    kern: KernelSpec, xs: Sequence[GraphSystem], ys: Sequence[GraphSystem] | None, normalize: bool
) -> np.ndarray:
    """The (Σ nodes of xs) x (Σ nodes of ys) node-pair similarities (``ys`` None: the exactly
    symmetric matrix of xs with itself, the upper block triangle solved); sets ``kern.last_stats``."""
    t0 = time.perf_counter()
    sym = ys is None
    ys_ = xs if sym else ys
    N, Mn = len(xs), len(ys_)
    ox = np.concatenate([[0], np.cumsum([s.n for s in xs])]).astype(np.int64)
    oy = ox if sym else np.concatenate([[0], np.cumsum([s.n for s in ys_])]).astype(np.int64)
    pairs = gram_pairs(N) if sym else cross_pairs(N, Mn)
    raw = not normalize
    npairs = len(pairs)
    sx = sy = None
    if normalize and not sym:
        # the self-pairs first: the blocks of the main solve are consumed before any other solve
        rx, ry = nodal_diagonal(kern, xs, raw), nodal_diagonal(kern, ys_, raw)
        npairs += N + Mn
    blocks = _solve_blocks(kern, xs, ys_, pairs)
    if normalize:
        if sym:
            selfs = np.flatnonzero(pairs[:, 0] == pairs[:, 1])
            rx = ry = _diagonals(kern, xs, [blocks[t] for t in selfs.tolist()], raw)
        for r, what in ((rx, "X"), (ry, "Y")):
            check_self_similarities(r, what, ", so the nodal similarities cannot be normalized")
        sx = np.sqrt(rx)
        sy = sx if sym else np.sqrt(ry)
    R = np.empty((int(ox[-1]), int(oy[-1])))
    _fill(kern, R, xs, ys_, pairs, blocks, ox, oy, raw, sym, sx, sy)
    backend = get_backend(kern)
    kern.last_stats = SolveStats(
        backend="cpu" if not hasattr(backend, "solve_nodal") else backend.name,
        shape=R.shape,
        pairs=npairs,
        iterations=np.zeros(0, dtype=np.int64),
        residual=np.zeros(0),
        converged=np.ones(0, dtype=bool),
        seconds=time.perf_counter() - t0,
    )
    return R
