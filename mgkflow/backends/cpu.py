"""Registry entry ``cpu``: float64 numba-compiled Jacobi PCG on every core, without a size cap.

(Formerly ``mgkflow.cpu_engine``.) For a pair (G, G') with n and m nodes it solves the same
system as the exact scipy oracle (:mod:`mgkflow.backends.exact`),

    (D_x V_x^-1 - A_x ∘ E_x) x = D_x q_x,    K = p_x^T x,

with Jacobi-preconditioned CG in float64 to a relative residual ``rtol``, the
unknowns held as an (n, m) array. The off-diagonal product ``(A_x ∘ E_x) x`` is
applied in one of three ways, chosen per pair:

``cached``
    The nnz(G) x nnz(G') edge-pair products ``w_e w_e' k_e(e, e')`` are computed once
    and kept, when they fit the memory budget ``cache_bytes`` (default 256 MiB, shared by
    the pairs solved at once).
``matrix-free``
    Otherwise the edge kernel is recomputed on every product, one edge of G against
    all edges of G' at a time: memory O(n·m + nnz(G')) per thread.
``constant``
    A :class:`~mgkflow.kernels.Constant` edge kernel factorizes:
    ``c · A X A'^T`` in O(n·nnz(G') + m·nnz(G)) per product, no edge-pair storage.

Edge kernels built from :class:`~mgkflow.kernels.Constant`,
:class:`~mgkflow.kernels.KroneckerDelta` and :class:`~mgkflow.kernels.SquareExponential`
(products and sums of them) on 1-D label fields are evaluated inside the compiled code
(a small postfix program with run-time parameters); any other kernel or label layout is
evaluated through the kernel's numpy ``__call__`` on blocks of edge pairs (the generic
path, same results). The node kernel is always evaluated through ``__call__``.

Layout: each product accumulates, for every node i of G, one value per edge of G'
(a contiguous vector loop over G''s edges, with x gathered once per product); G' is
taken with its nodes sorted by degree and its edges grouped in degree buckets, so the
sums over each node's edges are contiguous vector adds too. The PCG vector steps are
fused into two passes per iteration.

Gradients (:meth:`NumbaCPUBackend.solve_gradient`) take the adjoint form of
docs/gradients.md: a second PCG solve M y = p_x with the same operator (and the same cached
edge-pair products), then dK/dh = yᵀ (db/dh − (dM/dh) x), the edge-kernel derivatives
evaluated through the kernel's numpy ``gradient`` on blocks of edge pairs.

Parallelism: small pairs are spread over ``threads`` worker threads in tasks of many pairs,
each task solved in one compiled call that releases the GIL (:func:`_solve_batch`: the node
kernel run as a program on node features, setup, products and PCG of every pair, no Python
per pair, so the threads scale); a pair the batch cannot finish (a node-kernel value not > 0,
an overflow, a diagonal that needs rescaling) and every pair of a call the batch does not
compile (gradients, kernels evaluated through numpy) take the per-pair path, a few compiled
calls per pair with Python between them that holds the GIL. A large pair is solved one at a
time with its rows split over the threads. The threads come from :mod:`concurrent.futures`.

Compiled code is cached on disk (numba ``cache=True``): only the first process on a machine
pays the compile time (10–20 s). :func:`warm_up` compiles or loads every kernel once per
process before the first solve (a kernel call does it before its clock starts, so
``last_stats`` never counts it) and says so on stderr when numba actually compiles.

Examples
--------
>>> import networkx as nx
>>> from mgkflow import Graph, MarginalizedGraphKernel
>>> K = MarginalizedGraphKernel(q=0.5, backend="cpu")([Graph.from_networkx(nx.path_graph(2))])
>>> round(float(K[0, 0]), 6), type(MarginalizedGraphKernel(backend="cpu")._get_backend())  # 4 q^2 / (1 - (1-q)^2)
(1.333333, <class 'mgkflow.backends.cpu.NumbaCPUBackend'>)
"""

from __future__ import annotations

import math
import os
import sys
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import scipy.sparse as sp
from numba import njit

from ..errors import ConvergenceError, GraphError, ProblemTooLargeError
from ..graph import Graph
from ..kernels import BaseKernel, Constant, KroneckerDelta, Product, SquareExponential, Sum
from ..system import GraphSystem, prepare_graph
from .base import GradientSolution, NodalSolution, Pairs, Progress, Solution

__all__ = ["NumbaCPUBackend", "EdgeProgram", "compile_edge_program", "DEFAULT_CACHE_BYTES", "make", "warm_up"]

#: Default memory budget for cached edge-pair products (all concurrently solved pairs together).
DEFAULT_CACHE_BYTES = 256 << 20
#: Pairs with more edge pairs than this (or more unknowns than ``_BIG_UNKNOWNS``) are solved
#: one at a time with their rows spread over the threads.
_BIG_EDGE_PAIRS = 4_000_000
_BIG_UNKNOWNS = 1_000_000

# opcodes of the compiled edge-kernel program
_OP_CONST, _OP_DELTA, _OP_SQEXP, _OP_MUL, _OP_ADD = 0, 1, 2, 3, 4
# matrix-vector product modes
_MODE_CACHED, _MODE_FREE, _MODE_CONST = 0, 1, 2
_MODE_CODES = {"cached": _MODE_CACHED, "matrix-free": _MODE_FREE, "constant": _MODE_CONST}
#: Most small pairs one compiled call of a batch solves (:class:`_Batch`; tasks are smaller when
#: there are too few pairs to give every thread several).
_BATCH_PAIRS = 256


# ====================================================================== compiled kernels
_LOG2E = 1.4426950408889634
_LN2_HI = 6.93147180369123816490e-01  # ln 2 split in two (Cody-Waite range reduction)
_LN2_LO = 1.90821492927058770002e-10
#: exp(x) is taken as 0 below this (where it is subnormal, < 2.3e-308)
_EXP_MIN = -708.0


@njit(cache=True, nogil=True, error_model="numpy")
def _exp_inplace(v, kbits):  # pragma: no cover - compiled
    """v = exp(v) elementwise, to about 1 ulp, in loops the compiler vectorizes.

    numba's ``math.exp`` is a scalar libm call (several ns each); this is exp(r) 2^k with
    k = round(x / ln 2), |r| <= ln(2) / 2, exp(r) by its Taylor series to r^13 (truncation
    error below 1e-17) and 2^k built in the exponent bits (``kbits``: int64 scratch, len(v))."""
    for e in range(v.shape[0]):
        x = max(v[e], _EXP_MIN)
        k = math.floor(x * _LOG2E + 0.5)
        r = (x - k * _LN2_HI) - k * _LN2_LO
        p = 1.0 / 6227020800.0
        p = p * r + 1.0 / 479001600.0
        p = p * r + 1.0 / 39916800.0
        p = p * r + 1.0 / 3628800.0
        p = p * r + 1.0 / 362880.0
        p = p * r + 1.0 / 40320.0
        p = p * r + 1.0 / 5040.0
        p = p * r + 1.0 / 720.0
        p = p * r + 1.0 / 120.0
        p = p * r + 1.0 / 24.0
        p = p * r + 1.0 / 6.0
        p = p * r + 0.5
        p = p * r + 1.0
        p = p * r + 1.0
        kbits[e] = (np.int64(k) + 1023) << 52
        v[e] = p if v[e] >= _EXP_MIN else (0.0 if v[e] < _EXP_MIN else v[e])  # NaN stays NaN
    scale = kbits.view(np.float64)
    for e in range(v.shape[0]):
        v[e] *= scale[e]


@njit(cache=True, nogil=True, error_model="numpy")
def _eval_edge_row(prog, par, f1, e1, F2, stack):  # pragma: no cover - compiled
    """Edge kernel between edge ``e1`` of G (features ``f1[:, e1]``) and every edge of G'.

    Runs the postfix program on ``stack`` (depth + 1 rows, the last one scratch); the
    result is left in ``stack[0]``."""
    L = F2.shape[1]
    kbits = stack[stack.shape[0] - 1].view(np.int64)
    sp = 0
    for t in range(prog.shape[0]):
        op = prog[t, 0]
        s = prog[t, 1]
        k = prog[t, 2]
        if op == 0:  # constant
            v = par[k]
            for e in range(L):
                stack[sp, e] = v
            sp += 1
        elif op == 1:  # Kronecker delta on label codes
            a = f1[s, e1]
            h = par[k]
            for e in range(L):
                stack[sp, e] = 1.0 if F2[s, e] == a else h
            sp += 1
        elif op == 2:  # square exponential, par = -1 / (2 l^2)
            a = f1[s, e1]
            g = par[k]
            row = stack[sp]
            for e in range(L):
                d = a - F2[s, e]
                row[e] = g * (d * d)
            _exp_inplace(row, kbits)
            sp += 1
        elif op == 3:  # product of the two top entries
            sp -= 1
            for e in range(L):
                stack[sp - 1, e] *= stack[sp, e]
        else:  # sum of the two top entries
            sp -= 1
            for e in range(L):
                stack[sp - 1, e] += stack[sp, e]


@njit(cache=True, nogil=True, error_model="numpy")
def _build_cache(e0, e1, w1, w2, prog, par, F1, F2, depth, C):  # pragma: no cover - compiled
    """C[e - e0, :] = w1[e] * w2 * k_e(e, :) for edges e0 <= e < e1 of G."""
    L = w2.shape[0]
    stack = np.empty((depth + 1, L))
    for e in range(e0, e1):
        _eval_edge_row(prog, par, F1, e, F2, stack)
        we = w1[e]
        row = C[e - e0]
        for f in range(L):
            row[f] = we * w2[f] * stack[0, f]


_FM = {"reassoc", "contract", "arcp", "nsz"}  # reductions may vectorize; results move by ulps only


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM)
def _finish_row(i, bk2, accp, diag, x, y):  # pragma: no cover - compiled
    """y[i, a] = diag[i, a] x[i, a] - sum of accp over the edges of node a of G'; returns x[i]·y[i].

    G' comes in degree buckets ``bk2`` rows (a0, a1, d, off): nodes a0..a1 have d edges each, stored
    slot-major from ``off`` (edge k of node a at off + k (a1 - a0) + a - a0), so the sums run as
    contiguous vector adds."""
    xi = x[i]
    yi = y[i]
    di = diag[i]
    for a in range(xi.shape[0]):
        yi[a] = di[a] * xi[a]
    for b in range(bk2.shape[0]):
        a0, a1, d, off = bk2[b, 0], bk2[b, 1], bk2[b, 2], bk2[b, 3]
        nb = a1 - a0
        yb = yi[a0:a1]
        for k in range(d):
            ak = accp[off + k * nb : off + (k + 1) * nb]
            for t in range(nb):
                yb[t] -= ak[t]
    dot = 0.0
    for a in range(xi.shape[0]):
        dot += xi[a] * yi[a]
    return dot


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM)
def _mv_gathered_rows(i0, i1, ip1, ix1, bk2, C, ebase, X2, diag, x, y):  # pragma: no cover - compiled
    """Rows i0..i1 of y = diag x - W x from cached products ``C[e - ebase]`` and the gathered
    ``X2 = x[:, ix2]``, accumulated straight into y bucket by bucket. Returns the partial x·y."""
    dot = 0.0
    for i in range(i0, i1):
        xi = x[i]
        yi = y[i]
        di = diag[i]
        for a in range(xi.shape[0]):
            yi[a] = di[a] * xi[a]
        for e1 in range(ip1[i], ip1[i + 1]):
            ce = C[e1 - ebase]
            gj = X2[ix1[e1]]
            for b in range(bk2.shape[0]):
                a0, a1, d, off = bk2[b, 0], bk2[b, 1], bk2[b, 2], bk2[b, 3]
                nb = a1 - a0
                yb = yi[a0:a1]
                for k in range(d):
                    cb = ce[off + k * nb : off + (k + 1) * nb]
                    gb = gj[off + k * nb : off + (k + 1) * nb]
                    for t in range(nb):
                        yb[t] -= cb[t] * gb[t]
        for a in range(xi.shape[0]):
            dot += xi[a] * yi[a]
    return dot


@njit(cache=True, nogil=True, error_model="numpy")
def _mv_cached_rows(i0, i1, ip1, ix1, bk2, ix2, C, ebase, X2, diag, x, y):  # pragma: no cover - compiled
    """Rows i0..i1 of y = diag x - W x from cached products ``C[e - ebase]``; ``X2`` is the
    gathered x[:, ix2] (or an empty array: gather on the fly). Returns the partial x·y."""
    if X2.shape[0] > 0:
        return _mv_gathered_rows(i0, i1, ip1, ix1, bk2, C, ebase, X2, diag, x, y)
    L = ix2.shape[0]
    accp = np.empty(L)
    dot = 0.0
    for i in range(i0, i1):
        accp[:] = 0.0
        for e1 in range(ip1[i], ip1[i + 1]):
            ce = C[e1 - ebase]
            xj = x[ix1[e1]]
            for f in range(L):
                accp[f] += ce[f] * xj[ix2[f]]
        dot += _finish_row(i, bk2, accp, diag, x, y)
    return dot


@njit(cache=True, nogil=True, error_model="numpy")
def _mv_free_rows(i0, i1, ip1, ix1, w1, bk2, ix2, w2, prog, par, F1, F2, depth, diag, x, y):  # pragma: no cover
    """Rows i0..i1 of y = diag x - W x, the edge kernel evaluated by the program (matrix-free)."""
    L = ix2.shape[0]
    accp = np.empty(L)
    stack = np.empty((depth + 1, L))
    dot = 0.0
    for i in range(i0, i1):
        accp[:] = 0.0
        for e1 in range(ip1[i], ip1[i + 1]):
            _eval_edge_row(prog, par, F1, e1, F2, stack)
            we = w1[e1]
            ke = stack[0]
            xj = x[ix1[e1]]
            for f in range(L):
                accp[f] += (we * w2[f] * ke[f]) * xj[ix2[f]]
        dot += _finish_row(i, bk2, accp, diag, x, y)
    return dot


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM)
def _mv_const_rows(i0, i1, ip1, ix1, w1, cconst, T, diag, x, y):  # pragma: no cover - compiled
    """Rows i0..i1 of y = diag x - c A X A'^T with T = X A'^T precomputed."""
    m = x.shape[1]
    acc = np.empty(m)
    dot = 0.0
    for i in range(i0, i1):
        acc[:] = 0.0
        for e1 in range(ip1[i], ip1[i + 1]):
            c = cconst * w1[e1]
            tj = T[ix1[e1]]
            for a in range(m):
                acc[a] += c * tj[a]
        xi = x[i]
        yi = y[i]
        di = diag[i]
        for a in range(m):
            v = di[a] * xi[a] - acc[a]
            yi[a] = v
            dot += xi[a] * v
    return dot


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM)
def _xa2t(j0, j1, bk2, ix2, w2, x, T):  # pragma: no cover - compiled
    """T[j, a] = sum over the edges f of node a of G' of w2[f] x[j, ix2[f]] (T = X A'^T), rows j0..j1."""
    for j in range(j0, j1):
        xj = x[j]
        tj = T[j]
        tj[:] = 0.0
        for b in range(bk2.shape[0]):
            a0, a1, d, off = bk2[b, 0], bk2[b, 1], bk2[b, 2], bk2[b, 3]
            nb = a1 - a0
            tb = tj[a0:a1]
            for k in range(d):
                base = off + k * nb
                for t in range(nb):
                    tb[t] += w2[base + t] * xj[ix2[base + t]]


@njit(cache=True, nogil=True, error_model="numpy")
def _prepare_rows(mode, j0, j1, bk2, ix2, w2, v, X2):  # pragma: no cover - compiled
    """What the product needs of rows j0..j1 of v: the gathered v[j, ix2] (cached mode with a
    gather buffer) or (v A'^T)[j] (constant mode)."""
    if mode == 0 and X2.shape[0] > 0:
        for j in range(j0, j1):
            vj = v[j]
            gj = X2[j]
            for f in range(ix2.shape[0]):
                gj[f] = vj[ix2[f]]
    elif mode == 2:
        _xa2t(j0, j1, bk2, ix2, w2, v, X2)


@njit(cache=True, nogil=True, error_model="numpy")
def _mv_rows(mode, i0, i1, ip1, ix1, w1, bk2, ix2, w2, C, prog, par, F1, F2, depth, cconst, X2, diag, v, y):
    """Rows i0..i1 of y = diag v - W v (mode 0 cached, 1 matrix-free, 2 constant), with the rows of
    v prepared by :func:`_prepare_rows`; returns the partial v·y."""  # pragma: no cover - compiled
    if mode == 0:
        return _mv_cached_rows(i0, i1, ip1, ix1, bk2, ix2, C, 0, X2, diag, v, y)
    if mode == 1:
        return _mv_free_rows(i0, i1, ip1, ix1, w1, bk2, ix2, w2, prog, par, F1, F2, depth, diag, v, y)
    return _mv_const_rows(i0, i1, ip1, ix1, w1, cconst, X2, diag, v, y)


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM)
def _residual_rows(i0, i1, alpha, r, y, diag):  # pragma: no cover - compiled
    """r -= alpha y on rows i0..i1; returns (r·r, r·z) with z = r / diag."""
    m = r.shape[1]
    # flat slices (a loop over range(i0 * m, i1 * m) does not vectorize)
    rf = r.reshape(-1)[i0 * m : i1 * m]
    yf = y.reshape(-1)[i0 * m : i1 * m]
    df = diag.reshape(-1)[i0 * m : i1 * m]
    rr = 0.0
    rz = 0.0
    for k in range(rf.shape[0]):
        v = rf[k] - alpha * yf[k]
        rf[k] = v
        rr += v * v
        rz += v * v / df[k]
    return rr, rz


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM)
def _direction_rows(mode, i0, i1, alpha, beta, x, p, r, diag, bk2, ix2, w2, X2):  # pragma: no cover - compiled
    """x += alpha p, then p = r / diag + beta p and its rows prepared for the next product."""
    m = r.shape[1]
    xf = x.reshape(-1)[i0 * m : i1 * m]
    pf = p.reshape(-1)[i0 * m : i1 * m]
    rf = r.reshape(-1)[i0 * m : i1 * m]
    df = diag.reshape(-1)[i0 * m : i1 * m]
    for k in range(xf.shape[0]):
        pk = pf[k]  # read once: the loop then vectorizes
        xf[k] += alpha * pk
        pf[k] = rf[k] / df[k] + beta * pk
    if mode == 2 or (mode == 0 and X2.shape[0] > 0):
        _prepare_rows(mode, i0, i1, bk2, ix2, w2, p, X2)


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM)
def _axpy_rows(i0, i1, alpha, x, p):  # pragma: no cover - compiled
    """x += alpha p on rows i0..i1."""
    m = x.shape[1]
    xf = x.reshape(-1)[i0 * m : i1 * m]
    pf = p.reshape(-1)[i0 * m : i1 * m]
    for k in range(xf.shape[0]):
        xf[k] += alpha * pf[k]


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM)
def _sum_sq_rows(i0, i1, r):  # pragma: no cover - compiled
    """sum of r^2 over rows i0..i1."""
    m = r.shape[1]
    rf = r.reshape(-1)[i0 * m : i1 * m]
    out = 0.0
    for k in range(rf.shape[0]):
        out += rf[k] * rf[k]
    return out


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM)
def _bilinear(i0, i1, p1, x, p2):  # pragma: no cover - compiled
    """sum over rows i0..i1 of p1[i] (x[i] · p2)."""
    out = 0.0
    for i in range(i0, i1):
        xi = x[i]
        s = 0.0
        for a in range(xi.shape[0]):
            s += xi[a] * p2[a]
        out += p1[i] * s
    return out


@njit(cache=True, nogil=True, error_model="numpy")
def _setup_pair(d1, d2, q1, q2, p1, p2, V, diag, r):  # pragma: no cover - compiled
    """diag = (d1 d2ᵀ) / V and r = (d1 d2ᵀ)(q1 q2ᵀ) of a whole pair in one call (what
    :meth:`_Context._setup_rows` computes with numpy, the same operations in the same order).

    Returns (flat index of the first V not > 0 or -1, whether a product overflowed (p1 p2ᵀ included),
    max |r|, max diag, min diag)."""
    n, m = diag.shape
    for i in range(n):
        for j in range(m):
            if not V[i, j] > 0:
                return i * m + j, False, 0.0, 0.0, 0.0
    over = False
    top = 0.0
    dtop = 0.0
    dmin = np.inf
    for i in range(n):
        for j in range(m):
            dx = d1[i] * d2[j]
            dg = dx / V[i, j]
            rr = dx * (q1[i] * q2[j])
            if np.isinf(dx) or np.isinf(dg) or np.isinf(rr) or np.isinf(p1[i] * p2[j]):
                over = True
            diag[i, j] = dg
            r[i, j] = rr
            top = max(top, abs(rr))
            dtop = max(dtop, dg)
            dmin = min(dmin, dg)
    return -1, over, top, dtop, dmin


@njit(cache=True, nogil=True, error_model="numpy")
def _scale_pair(shift, mshift, diag, r, x):  # pragma: no cover - compiled
    """r = 2^shift r, diag = 2^mshift diag (exact), x = r / diag; returns sum r^2 (:func:`_sum_sq_rows`)."""
    n, m = r.shape
    for i in range(n):
        for j in range(m):
            if shift:
                r[i, j] = math.ldexp(r[i, j], shift)
            if mshift:
                diag[i, j] = math.ldexp(diag[i, j], mshift)
            x[i, j] = r[i, j] / diag[i, j]
    return _sum_sq_rows(0, n, r)


@njit(cache=True, nogil=True, error_model="numpy")
def _pcg_serial(mode, ip1, ix1, w1, bk2, ix2, w2, C, prog, par, F1, F2, depth, cconst, X2, diag, r, x, y, p, bb,
                rtol, max_iter):  # fmt: skip
    """Whole Jacobi PCG of one pair on the calling thread; r holds b on entry, x the start,
    y and p are work arrays of the same shape.

    The update x += alpha p is carried into the next direction pass (one pass less per step).
    Returns (iterations, relative residual)."""  # pragma: no cover - compiled
    n, m = diag.shape
    p[:, :] = 0.0
    bnorm = math.sqrt(bb)
    _prepare_rows(mode, 0, n, bk2, ix2, w2, x, X2)
    _mv_rows(mode, 0, n, ip1, ix1, w1, bk2, ix2, w2, C, prog, par, F1, F2, depth, cconst, X2, diag, x, y)
    rr, rz = _residual_rows(0, n, 1.0, r, y, diag)
    _direction_rows(mode, 0, n, 0.0, 0.0, x, p, r, diag, bk2, ix2, w2, X2)
    res = math.sqrt(rr) / bnorm
    it = 0
    while res > rtol and it < max_iter:
        pap = _mv_rows(mode, 0, n, ip1, ix1, w1, bk2, ix2, w2, C, prog, par, F1, F2, depth, cconst, X2, diag, p, y)
        alpha = rz / pap
        rr, rz_new = _residual_rows(0, n, alpha, r, y, diag)
        it += 1
        res = math.sqrt(rr) / bnorm
        if res <= rtol or it >= max_iter:
            _axpy_rows(0, n, alpha, x, p)
            break
        _direction_rows(mode, 0, n, alpha, rz_new / rz, x, p, r, diag, bk2, ix2, w2, X2)
        rz = rz_new
    return it, res


@njit(cache=True, nogil=True, error_model="numpy")
def _forward_row(prog, par, hp, F1, e1, F2, val, der):  # pragma: no cover - compiled
    """The program between item ``e1`` of G and every item of G' in forward mode: every stack
    entry carries its value and its derivative with respect to each program parameter
    (parameter k is hyperparameter k, value ``hp[k]``). Leaves k in val[0], dk/dh in der[0]."""
    L = F2.shape[1]
    P = der.shape[1]
    sp = 0
    for t in range(prog.shape[0]):
        op = prog[t, 0]
        s = prog[t, 1]
        k = prog[t, 2]
        if op <= 2:
            der[sp, :, :] = 0.0
        if op == 0:  # constant: dk/dc = 1
            for f in range(L):
                val[sp, f] = par[k]
                der[sp, k, f] = 1.0
            sp += 1
        elif op == 1:  # Kronecker delta: dk/dh = 0 where the labels agree, 1 elsewhere
            a = F1[s, e1]
            for f in range(L):
                if F2[s, f] == a:
                    val[sp, f] = 1.0
                else:
                    val[sp, f] = par[k]
                    der[sp, k, f] = 1.0
            sp += 1
        elif op == 2:  # square exponential: dk/dl = k d^2 / l^3
            a = F1[s, e1]
            g = par[k]
            l3 = hp[k] * hp[k] * hp[k]
            for f in range(L):
                d = a - F2[s, f]
                v = math.exp(g * (d * d))
                val[sp, f] = v
                der[sp, k, f] = v * (d * d) / l3
            sp += 1
        elif op == 3:  # product rule
            sp -= 1
            for c in range(P):
                for f in range(L):
                    der[sp - 1, c, f] = der[sp - 1, c, f] * val[sp, f] + val[sp - 1, f] * der[sp, c, f]
            for f in range(L):
                val[sp - 1, f] *= val[sp, f]
        else:
            sp -= 1
            for c in range(P):
                for f in range(L):
                    der[sp - 1, c, f] += der[sp, c, f]
            for f in range(L):
                val[sp - 1, f] += val[sp, f]


@njit(cache=True, nogil=True, error_model="numpy")
def _edge_gradient_sums(prog, par, hp, F1, F2, depth, src1, ix1, w1, src2, ix2, w2, x, y, out):  # pragma: no cover
    """out[k] += Σ over edge pairs (e = i→j of G, f = i'→j' of G') of w_e w_f (dk_e/dh_k)(e, f) y[i, i'] x[j, j']."""
    L = F2.shape[1]
    P = out.shape[0]
    val = np.empty((depth + 1, L))
    der = np.empty((depth + 1, P, L))
    for e1 in range(src1.shape[0]):
        _forward_row(prog, par, hp, F1, e1, F2, val, der)
        yi = y[src1[e1]]
        xj = x[ix1[e1]]
        we = w1[e1]
        for f in range(L):
            base = we * w2[f] * yi[src2[f]] * xj[ix2[f]]
            for c in range(P):
                out[c] += base * der[0, c, f]


@njit(cache=True, nogil=True, error_model="numpy")
def _node_gradient_sums(prog, par, hp, N1, N2, depth, w, out):  # pragma: no cover - compiled
    """out[k] += Σ_ab w[a, b] (dv/dh_k)(a, b), the node kernel's program between nodes a of G and b of G'."""
    m = N2.shape[1]
    P = out.shape[0]
    val = np.empty((depth + 1, m))
    der = np.empty((depth + 1, P, m))
    for a in range(w.shape[0]):
        _forward_row(prog, par, hp, N1, a, N2, val, der)
        wa = w[a]
        for c in range(P):
            s = 0.0
            for b in range(m):
                s += wa[b] * der[0, c, b]
            out[c] += s


# ====================================================================== batches of small pairs
#: columns of the ``offs`` table of a packed side of a call (:func:`_pack_side`)
_O_N, _O_NNZ, _O_NODE, _O_PTR, _O_PTRLEN, _O_EDGE, _O_FEAT, _O_NFEAT = range(8)


@njit(cache=True, nogil=True, error_model="numpy")
def _solve_batch(ts, pi, pj, X, Y, ns_e, ns_n, const_mode, prog, par, depth, nprog, npar, ndepth, cconst, budget,
                 rtol, max_iter, nodal_off, nodal_out, values, iters, res, modes):  # fmt: skip
    """Pairs ``ts`` (pair t: row graph ``pi[t]`` of ``X``, column graph ``pj[t]`` of ``Y``) solved in one
    call, each as :meth:`_Context._solve_pair` solves a small pair on one thread (the same compiled
    steps in the same order), with the node kernel run as a program (``nprog``) on node features.

    ``X`` and ``Y`` are the packed sides of :func:`_pack_side`; ``const_mode`` selects the constant
    product, else a pair's products are cached when they fit ``budget`` bytes and matrix-free when not.
    Writes values[t], iters[t], res[t] and modes[t] (0 cached, 1 matrix-free, 2 constant; -1: the pair
    needs the per-pair path, which raises or rescales: a node-kernel value not > 0, an overflow, a
    degree product that underflows, or a diagonal far from 1); with a non-empty ``nodal_out``, the
    pair's block p_a p'_b x_ab (columns in G''s own node order) at ``nodal_out[nodal_off[t]:]``."""  # pragma: no cover
    xo, xptr, xix, xw, xfeat, xd, xq, xp, xnfeat, _ = X
    yo, ybk, yix, yw, yfeat, yd, yq, yp, ynfeat, yperm = Y
    # work arrays for the largest pair of the batch, carved per pair
    nm_max = m_max = c_max = g_max = 0
    for k in range(ts.shape[0]):
        a, b = pi[ts[k]], pj[ts[k]]
        n, nnz1, m, nnz2 = xo[a, _O_N], xo[a, _O_NNZ], yo[b, _O_N], yo[b, _O_NNZ]
        nm_max = max(nm_max, n * m)
        m_max = max(m_max, m)
        if const_mode:
            g_max = max(g_max, n * m)
        elif nnz1 * nnz2 * 8 <= budget:
            c_max = max(c_max, nnz1 * nnz2)
            if (nnz1 + n) * nnz2 * 8 <= budget:
                g_max = max(g_max, n * nnz2)
    work = np.empty(6 * nm_max)
    cbuf = np.empty(c_max)
    gbuf = np.empty(g_max)
    sbuf = np.empty((ndepth + 1) * m_max)
    empty2 = np.empty((0, 0))
    for k in range(ts.shape[0]):
        t = ts[k]
        a, b = pi[t], pj[t]
        n, nnz1, m, nnz2 = xo[a, _O_N], xo[a, _O_NNZ], yo[b, _O_N], yo[b, _O_NNZ]
        nm = n * m
        v0, p0, e0, f0, h0 = xo[a, _O_NODE], xo[a, _O_PTR], xo[a, _O_EDGE], xo[a, _O_FEAT], xo[a, _O_NFEAT]
        ip1 = xptr[p0 : p0 + n + 1]
        ix1, w1 = xix[e0 : e0 + nnz1], xw[e0 : e0 + nnz1]
        F1 = xfeat[f0 : f0 + ns_e * nnz1].reshape((ns_e, nnz1))
        d1, q1, p1 = xd[v0 : v0 + n], xq[v0 : v0 + n], xp[v0 : v0 + n]
        N1 = xnfeat[h0 : h0 + ns_n * n].reshape((ns_n, n))
        v0, p0, e0, f0, h0 = yo[b, _O_NODE], yo[b, _O_PTR], yo[b, _O_EDGE], yo[b, _O_FEAT], yo[b, _O_NFEAT]
        bk2 = ybk[p0 : p0 + 4 * yo[b, _O_PTRLEN]].reshape((yo[b, _O_PTRLEN], 4))
        ix2, w2 = yix[e0 : e0 + nnz2], yw[e0 : e0 + nnz2]
        F2 = yfeat[f0 : f0 + ns_e * nnz2].reshape((ns_e, nnz2))
        d2, q2, p2, perm2 = yd[v0 : v0 + m], yq[v0 : v0 + m], yp[v0 : v0 + m], yperm[v0 : v0 + m]
        N2 = ynfeat[h0 : h0 + ns_n * m].reshape((ns_n, m))
        V = work[0:nm].reshape((n, m))
        diag = work[nm : 2 * nm].reshape((n, m))
        r = work[2 * nm : 3 * nm].reshape((n, m))
        x = work[3 * nm : 4 * nm].reshape((n, m))
        y = work[4 * nm : 5 * nm].reshape((n, m))
        p = work[5 * nm : 6 * nm].reshape((n, m))
        stack = sbuf[: (ndepth + 1) * m].reshape((ndepth + 1, m))
        for i in range(n):  # the node kernel
            _eval_edge_row(nprog, npar, N1, i, N2, stack)
            V[i, :] = stack[0]
        bad, over, top, dtop, dmin = _setup_pair(d1, d2, q1, q2, p1, p2, V, diag, r)
        if bad >= 0 or over or not dmin > 0 or (dtop > 0 and not (2.0**-100 <= dtop <= 2.0**100)):
            modes[t] = -1
            continue
        shift = 0 if top == 0 else 1 - math.frexp(top)[1]
        bb = _scale_pair(shift, 0, diag, r, x)
        C, X2 = empty2, empty2
        if const_mode:
            mode = 2
            X2 = gbuf[:nm].reshape((n, m))  # T = X A'^T
        elif nnz1 * nnz2 * 8 <= budget:
            mode = 0
            if (nnz1 + n) * nnz2 * 8 <= budget:
                X2 = gbuf[: n * nnz2].reshape((n, nnz2))
            C = cbuf[: nnz1 * nnz2].reshape((nnz1, nnz2))
            _build_cache(0, nnz1, w1, w2, prog, par, F1, F2, depth, C)
        else:
            mode = 1
        it, rs = _pcg_serial(mode, ip1, ix1, w1, bk2, ix2, w2, C, prog, par, F1, F2, depth, cconst, X2, diag, r,
                             x, y, p, bb, rtol, max_iter)  # fmt: skip
        if shift != 0:
            for i in range(n):
                for c in range(m):
                    x[i, c] = math.ldexp(x[i, c], -shift)
        values[t] = _bilinear(0, n, p1, x, p2)
        iters[t] = it
        res[t] = rs
        modes[t] = mode
        if nodal_out.shape[0] > 0:  # p_a p'_b x_ab with the columns back in G''s own node order
            o = nodal_off[t]
            for i in range(n):
                for c in range(m):
                    nodal_out[o + i * m + perm2[c]] = (p1[i] * p2[c]) * x[i, c]


# ====================================================================== edge-kernel programs
@dataclass(frozen=True)
class EdgeProgram:
    """An edge kernel compiled to a postfix program for the numba engine.

    Attributes
    ----------
    code : ndarray of int64, shape (k, 3)
        (opcode, feature slot, parameter index) per instruction.
    par : ndarray of float64
        Run-time parameters (``h`` of a Kronecker delta, ``-1/(2 l^2)`` of a square exponential,
        ``c`` of a constant).
    slots : tuple of (field, kind)
        Feature rows: ``kind`` is ``"code"`` (labels as integer codes, for equality) or
        ``"value"`` (labels as float64).
    depth : int
        Stack depth the program needs.
    """

    code: np.ndarray
    par: np.ndarray
    slots: tuple[tuple[str, str], ...]
    depth: int


def compile_edge_program(kernel: BaseKernel) -> EdgeProgram | None:
    """Compile ``kernel`` for the numba engine, or None when it holds a kernel type the
    engine does not know (the backend then evaluates it through ``kernel(x, y)``).

    Examples
    --------
    >>> from mgkflow.kernels import KroneckerDelta, SquareExponential
    >>> prog = compile_edge_program(KroneckerDelta(0.5, "order") * SquareExponential(2.0, "length"))
    >>> prog.code.tolist(), prog.slots, prog.depth
    ([[1, 0, 0], [2, 1, 1], [3, -1, -1]], (('order', 'code'), ('length', 'value')), 2)
    >>> compile_edge_program(object.__new__(BaseKernel)) is None
    True
    """
    code: list[tuple[int, int, int]] = []
    par: list[float] = []
    slots: list[tuple[str, str]] = []

    def slot(field: str, kind: str) -> int:
        if (field, kind) not in slots:
            slots.append((field, kind))
        return slots.index((field, kind))

    def emit(k: BaseKernel) -> tuple[int, int]:
        """Append k's code; returns (stack depth needed, stack entries pushed = 1)."""
        t = type(k)
        if t is Constant:
            par.append(k.c)
            code.append((_OP_CONST, -1, len(par) - 1))
            return 1, 1
        if t is KroneckerDelta:
            par.append(k.h)
            code.append((_OP_DELTA, slot(k.field, "code"), len(par) - 1))
            return 1, 1
        if t is SquareExponential:
            par.append(-0.5 / k.length_scale**2)
            code.append((_OP_SQEXP, slot(k.field, "value"), len(par) - 1))
            return 1, 1
        if t is Product or t is Sum:
            op = _OP_MUL if t is Product else _OP_ADD
            depth = 0
            for idx, child in enumerate(k.kernels):
                d, _ = emit(child)
                depth = max(depth, d + (1 if idx > 0 else 0))
                if idx > 0:
                    code.append((op, -1, -1))
            return depth, 1
        raise _Unsupported

    try:
        depth, _ = emit(kernel)
    except _Unsupported:
        return None
    return EdgeProgram(
        code=np.asarray(code, dtype=np.int64).reshape(-1, 3),
        par=np.asarray(par, dtype=np.float64),
        slots=tuple(slots),
        depth=int(depth),
    )


class _Unsupported(Exception):
    pass


def _edge_features(program: EdgeProgram, graphs: Sequence[GraphSystem], nodes: bool = False) -> list[np.ndarray] | None:
    """Feature matrices (len(slots), nnz) per graph (with ``nodes``: (len(slots), n) from the node
    labels), or None when a field is not 1-D numeric (codes: shared integer codes over all
    ``graphs``, so equality is preserved)."""
    feats = [np.empty((len(program.slots), g.n if nodes else g.graph.nnz)) for g in graphs]
    for s, (field, kind) in enumerate(program.slots):
        labels = [g.graph.node_labels if nodes else g.graph.edge_labels for g in graphs]
        if any(field not in lab for lab in labels):
            return None
        arrays = [np.asarray(lab[field]) for lab in labels]
        if any(a.ndim != 1 for a in arrays):
            return None
        if kind == "value":
            if any(not (np.issubdtype(a.dtype, np.number) or a.dtype == bool) for a in arrays):
                return None
            if any(np.iscomplexobj(a) or not np.isfinite(a).all() for a in arrays):
                return None  # NaN / inf: numpy's semantics through the generic path
            for f, a in zip(feats, arrays):
                f[s] = a.astype(np.float64)
        else:
            if any(a.dtype == object for a in arrays):
                return None
            dtypes = {a.dtype.kind for a in arrays if a.size}
            if len(dtypes) > 1:
                return None  # mixed kinds (ints and floats): numpy's == semantics, use the generic path
            try:
                allv = np.concatenate(arrays) if arrays else np.empty(0)
                _, inv = np.unique(allv, return_inverse=True)
            except TypeError:
                return None
            if allv.dtype.kind == "f" and np.isnan(allv).any():
                return None  # NaN != NaN: keep numpy's semantics through the generic path
            off = 0
            for f, a in zip(feats, arrays):
                f[s] = inv[off : off + a.size]
                off += a.size
    return feats


# ====================================================================== the backend
@dataclass
class _GraphArrays:
    """A graph's arrays for the engine, in the role of G (rows, the graph's own order) or of G'
    (columns: nodes sorted by degree, edges in degree buckets ``bk``, see :func:`_finish_row`)."""

    ip: np.ndarray
    ix: np.ndarray
    w: np.ndarray
    feat: np.ndarray
    node_labels: dict
    edge_labels: dict
    d: np.ndarray
    q: np.ndarray
    p: np.ndarray
    perm: np.ndarray
    bk: np.ndarray
    src: np.ndarray  # source node of every stored edge (the row in G, the bucketed node in G')
    nfeat: np.ndarray | None = None  # node features of the compiled node kernel (gradients), in node order


def _graph_arrays(s: GraphSystem, feat: np.ndarray | None, columns: bool = False) -> _GraphArrays:
    A = s.graph.adjacency
    ip = np.ascontiguousarray(A.indptr, dtype=np.int64)
    ix = np.ascontiguousarray(A.indices, dtype=np.int64)
    w = np.ascontiguousarray(A.data, dtype=np.float64)
    feat = feat if feat is not None else np.empty((0, s.graph.nnz))
    n = s.n
    perm = np.arange(n)
    bk = np.empty((0, 4), dtype=np.int64)
    eperm = None
    src = np.repeat(np.arange(n, dtype=np.int64), np.diff(ip))
    if columns:
        deg = np.diff(ip)
        perm = np.argsort(deg, kind="stable")
        inv = np.empty(n, dtype=np.int64)
        inv[perm] = np.arange(n)
        sdeg = deg[perm]
        cuts = np.flatnonzero(np.diff(sdeg)) + 1
        a0s = np.concatenate([[0], cuts])
        a1s = np.concatenate([cuts, [n]])
        rows, blocks, off = [], [], 0
        for a0, a1 in zip(a0s.tolist(), a1s.tolist()):
            d = int(sdeg[a0])
            rows.append((a0, a1, d, off))
            # edge k of node a at off + k * (a1 - a0) + (a - a0): slot-major
            blocks.append((ip[perm[a0:a1]][None, :] + np.arange(d)[:, None]).ravel())
            off += d * (a1 - a0)
        bk = np.asarray(rows, dtype=np.int64).reshape(-1, 4)
        eperm = np.concatenate(blocks).astype(np.int64) if blocks else np.empty(0, dtype=np.int64)
        ix = np.ascontiguousarray(inv[ix[eperm]])
        w = np.ascontiguousarray(w[eperm])
        feat = np.ascontiguousarray(feat[:, eperm])
        src = np.concatenate(
            [np.tile(np.arange(a0, a1, dtype=np.int64), d) for a0, a1, d, _ in rows] or [np.empty(0, dtype=np.int64)]
        )
    return _GraphArrays(
        ip=ip,
        ix=ix,
        w=w,
        feat=feat,
        node_labels={k: v[perm] for k, v in s.graph.node_labels.items()},
        edge_labels={k: v[eperm] if eperm is not None else v for k, v in s.graph.edge_labels.items()},
        d=s.d[perm],
        q=s.q[perm],
        p=s.p[perm],
        perm=perm,
        bk=bk,
        src=src,
    )


def _row_chunks(ip: np.ndarray, n_chunks: int, weight_edges: bool = True) -> list[tuple[int, int]]:
    """Split rows 0..n into about ``n_chunks`` contiguous ranges of similar work."""
    n = len(ip) - 1
    if n == 0:
        return []
    work = np.diff(ip).astype(np.float64) + 1.0 if weight_edges else np.ones(n)
    cum = np.concatenate([[0.0], np.cumsum(work)])
    cuts = np.searchsorted(cum, np.linspace(0, cum[-1], n_chunks + 1)[1:-1])
    bounds = np.unique(np.concatenate([[0], np.clip(cuts, 0, n), [n]]))
    return [(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:]) if b > a]


def _pack_side(arrays: Sequence[_GraphArrays], nfeats: Sequence[np.ndarray], columns: bool) -> tuple:
    """The graphs of one side of a call in a few concatenated arrays, as :func:`_solve_batch` reads them.

    Returns ``(offs, ptr, ix, w, feat, d, q, p, nfeat, perm)``: ``offs`` (G, 8) holds per graph its node
    and edge counts and its offsets (columns ``_O_*``); ``ptr`` the row pointers ``ip`` (rows, G) or
    the flattened degree buckets ``bk`` (``columns``, G'), then the edges, the flattened edge features
    (slots, nnz), the node arrays, the flattened node features (node slots, n) and the column order."""
    offs = np.zeros((len(arrays), 8), dtype=np.int64)
    ptrs = [g.bk.ravel() if columns else g.ip for g in arrays]
    offs[:, _O_N] = [len(g.d) for g in arrays]
    offs[:, _O_NNZ] = [len(g.w) for g in arrays]
    offs[:, _O_PTRLEN] = [len(g.bk) if columns else len(g.ip) for g in arrays]
    for col, sizes in ((_O_NODE, offs[:, _O_N]), (_O_PTR, [len(a) for a in ptrs]), (_O_EDGE, offs[:, _O_NNZ]),
                       (_O_FEAT, [g.feat.size for g in arrays]), (_O_NFEAT, [f.size for f in nfeats])):  # fmt: skip
        offs[1:, col] = np.cumsum(sizes)[:-1]

    def cat(parts: Sequence[np.ndarray], dtype: Any) -> np.ndarray:
        return np.ascontiguousarray(np.concatenate([np.asarray(a).ravel() for a in parts]), dtype=dtype)

    i8, f8 = np.int64, np.float64
    return (offs, cat(ptrs, i8), cat([g.ix for g in arrays], i8), cat([g.w for g in arrays], f8),
            cat([g.feat for g in arrays], f8), cat([g.d for g in arrays], f8), cat([g.q for g in arrays], f8),
            cat([g.p for g in arrays], f8), cat(nfeats, f8), cat([g.perm for g in arrays], i8))  # fmt: skip


class _Batch:
    """The small pairs of one call solved many at a time, each task of pairs in one compiled call
    (:func:`_solve_batch`) that holds no GIL: no Python runs per pair, so the threads scale.

    Built by :meth:`build` where it applies (values and nodal blocks of compiled edge kernels or a
    constant one, with a node kernel the engine compiles on 1-D numeric node labels); a pair it
    cannot finish goes back to the per-pair path (:meth:`_Context.solve_pair`)."""

    def __init__(self, ctx: _Context, pairs: np.ndarray, X: tuple, Y: tuple, pi: np.ndarray, pj: np.ndarray,
                 nprog: EdgeProgram, small: np.ndarray, budget: int, nodal: bool) -> None:  # fmt: skip
        self.X, self.Y, self.pi, self.pj, self.nprog, self.budget = X, Y, pi, pj, nprog, int(budget)
        prog = ctx.program
        self.prog = (prog.code, prog.par, prog.depth) if prog is not None else (_EMPTY_PROG, _EMPTY1, 1)
        self.const_c, self.rtol, self.max_iter = ctx.const_c, ctx.rtol, ctx.max_iter
        self.ns_e = 0 if ctx.const_c is not None else len(prog.slots)  # edge features: none for a constant
        self.ns_n = len(nprog.slots)
        self.nodal_off, self.nodal_out = _EMPTY1.astype(np.int64), _EMPTY1
        if nodal:  # one flat array for the blocks of all small pairs
            sizes = np.zeros(len(pairs), dtype=np.int64)
            sizes[small] = X[0][pi[small], _O_N] * Y[0][pj[small], _O_N]
            self.nodal_off = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
            self.nodal_out = np.empty(int(sizes.sum()))

    @classmethod
    def build(cls, ctx: _Context, xs: Sequence[GraphSystem], ys: Sequence[GraphSystem], pairs: np.ndarray,
              used_x: np.ndarray, used_y: np.ndarray, gx: Mapping[int, _GraphArrays], gy: Mapping[int, _GraphArrays],
              small: np.ndarray, budget: int) -> _Batch | None:  # fmt: skip
        """The batch of a call, or None where it does not apply (gradients, edge kernels evaluated
        through numpy, node kernels the engine does not compile or labels it cannot read)."""
        if ctx.gradient or (ctx.program is None and ctx.const_c is None) or not len(small):
            return None
        nprog = compile_edge_program(ctx.node_kernel)
        if nprog is None:
            return None
        nfeats = _edge_features(nprog, [xs[i] for i in used_x] + [ys[j] for j in used_y], nodes=True)
        if nfeats is None:
            return None
        nx = len(used_x)
        X = _pack_side([gx[i] for i in used_x], nfeats[:nx], columns=False)
        Y = _pack_side([gy[j] for j in used_y], [f[:, gy[j].perm] for f, j in zip(nfeats[nx:], used_y)], columns=True)
        pi = np.searchsorted(used_x, pairs[:, 0]).astype(np.int64)
        pj = np.searchsorted(used_y, pairs[:, 1]).astype(np.int64)
        return cls(ctx, pairs, X, Y, pi, pj, nprog, small, budget, ctx.nodal)

    def solve(self, ts: np.ndarray, values: np.ndarray, iters: np.ndarray, res: np.ndarray, modes: np.ndarray,
              blocks: list) -> np.ndarray:  # fmt: skip
        """Solve pairs ``ts`` (int64) into the call's arrays; returns those left to the per-pair path."""
        code, par, depth = self.prog
        nprog = self.nprog
        const = self.const_c is not None
        cconst = float(self.const_c) if const else 0.0
        try:
            _solve_batch(ts, self.pi, self.pj, self.X, self.Y, self.ns_e, self.ns_n, const, code, par, depth,
                         nprog.code, nprog.par, nprog.depth, cconst, self.budget, self.rtol, self.max_iter,
                         self.nodal_off, self.nodal_out, values, iters, res, modes)  # fmt: skip
        except MemoryError:  # the per-pair path says which pair did not fit
            modes[ts] = -1
        if self.nodal_out.size:
            done = ts[modes[ts] >= 0]
            sizes = zip(done.tolist(), self.X[0][self.pi[done], _O_N].tolist(), self.Y[0][self.pj[done], _O_N].tolist())
            for t, n, m in sizes:
                o = int(self.nodal_off[t])
                blocks[t] = self.nodal_out[o : o + n * m].reshape(n, m)
        return ts[modes[ts] < 0]


def default_threads() -> int:
    """The threads a :class:`NumbaCPUBackend` uses unless told: in a Dask worker, the worker's task threads
    (its tasks are the parallelism: ``local:N`` starts N one-thread workers, and each taking every core
    would run N × cores threads); elsewhere the cores this process may run on."""
    dist = sys.modules.get("distributed")  # (only where Dask is in use: never imported for this)
    if dist is not None:
        try:
            return max(1, int(dist.get_worker().state.nthreads))
        except (ValueError, AttributeError):  # not in a worker ("No worker found"), or another Dask
            pass
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


class NumbaCPUBackend:
    """Float64 CPU backend without a size cap, on every core (numba-compiled Jacobi PCG).

    Same interface (:class:`~mgkflow.backends.base.Backend`) and results (to the CG tolerance) as
    :class:`mgkflow.backends.exact.ExactBackend`, the exact scipy oracle; no limit on the number
    of edge pairs.

    Parameters
    ----------
    rtol : float
        CG stops when ||b - A x|| <= rtol ||b||.
    max_iter : int
        CG iteration limit per pair.
    threads : int, optional
        Worker threads (default :func:`default_threads`: all cores available to the process, or in a
        Dask worker its task threads).
    cache_bytes : int
        Memory budget for cached edge-pair products, shared by the pairs solved at once;
        a pair whose products do not fit is solved matrix-free (memory O(n·m)).
    compiled_kernels : bool
        Evaluate known edge kernels inside the compiled code (default); False always uses
        the kernel's numpy ``__call__`` (the generic path, for testing).

    Examples
    --------
    >>> import numpy as np
    >>> from mgkflow import Graph
    >>> from mgkflow.kernels import Constant
    >>> from mgkflow.system import prepare_graph
    >>> g = prepare_graph(Graph(np.array([[0, 1, 1], [1, 0, 0], [1, 0, 0]])), 0, Constant(1.0), Constant(1.0))
    >>> from mgkflow.backends.exact import ExactBackend
    >>> v, it, res, ok = NumbaCPUBackend(threads=2).solve([g], [g], np.array([[0, 0]]), Constant(1.0), Constant(0.5))
    >>> ref = ExactBackend().solve([g], [g], np.array([[0, 0]]), Constant(1.0), Constant(0.5)).values
    >>> bool(ok[0]), bool(abs(v[0] - ref[0]) <= 1e-12 * ref[0])
    (True, True)
    """

    name = "cpu"

    def __init__(
        self,
        rtol: float = 1e-12,
        max_iter: int = 10_000,
        threads: int | None = None,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
        compiled_kernels: bool = True,
    ) -> None:
        if threads is None:
            threads = default_threads()
        if isinstance(threads, bool) or not isinstance(threads, int | np.integer) or threads < 1:
            raise ValueError(f"threads must be a positive integer, got {threads!r}")
        if isinstance(cache_bytes, bool) or not isinstance(cache_bytes, int | np.integer) or cache_bytes < 0:
            raise ValueError(f"cache_bytes must be a non-negative integer, got {cache_bytes!r}")
        self.rtol = float(rtol)
        self.max_iter = int(max_iter)
        self.threads = int(threads)
        self.cache_bytes = int(cache_bytes)
        self.compiled_kernels = bool(compiled_kernels)
        self.last_extra: dict[str, Any] = {}

    # ------------------------------------------------------------------ public
    def warm_up(self) -> bool:
        """Compile (or load from numba's cache) the compiled kernels now, once per process (:func:`warm_up`);
        True when a compile happened."""
        return warm_up()

    def solve(
        self,
        xs: Sequence[GraphSystem],
        ys: Sequence[GraphSystem],
        pairs: Pairs,
        node_kernel: BaseKernel,
        edge_kernel: BaseKernel,
        progress: Progress | None = None,
    ) -> Solution:
        """Solve ``pairs`` ((n, 2) int array or [(i, j), ...]) between ``xs[i]`` and ``ys[j]``.

        Returns values, CG iterations, final relative residuals and converged flags aligned
        with the pairs; ``progress(k)`` is called as pairs finish (k of them each time).
        """
        values, iters, res, conv, _ = self._run(xs, ys, pairs, node_kernel, edge_kernel, progress, False)
        return Solution(values, iters, res, conv)

    def solve_nodal(
        self,
        xs: Sequence[GraphSystem],
        ys: Sequence[GraphSystem],
        pairs: Pairs,
        node_kernel: BaseKernel,
        edge_kernel: BaseKernel,
        progress: Progress | None = None,
    ) -> NodalSolution:
        """Node-pair similarity blocks of ``pairs``: ``blocks[t]`` is the (n_i, m_j) array
        p_a p'_b x_ab of pair t (it sums to the kernel value); then iterations, residuals and
        converged flags as :meth:`solve`."""
        _, iters, res, conv, blocks = self._run(xs, ys, pairs, node_kernel, edge_kernel, progress, True)
        return NodalSolution(blocks, iters, res, conv)

    def solve_gradient(
        self,
        xs: Sequence[GraphSystem],
        ys: Sequence[GraphSystem],
        pairs: Pairs,
        node_kernel: BaseKernel,
        edge_kernel: BaseKernel,
        wrt_q: bool = False,
        progress: Progress | None = None,
    ) -> GradientSolution:
        """Values and derivatives dK/dh of ``pairs``, the layout of
        :class:`~mgkflow.backends.base.GradientSolution`.

        Adjoint form (docs/gradients.md): with M x = b and M y = p_x (the same operator, a
        second PCG solve), dK/dh = yᵀ (db/dh − (dM/dh) x). ``gradient`` has shape (k, H): the
        node kernel's hyperparameters, then the edge kernel's, then q when ``wrt_q`` (one
        scalar q for every node of both graphs), in linear space. Iterations and residuals are
        the worse of the two solves; a pair is converged when both are.

        Examples
        --------
        >>> import numpy as np
        >>> from mgkflow import Graph
        >>> from mgkflow.kernels import Constant
        >>> from mgkflow.system import prepare_graph
        >>> g = prepare_graph(Graph(np.array([[0, 1], [1, 0]])), 0, Constant(1.0), Constant(1.0), q=0.5)
        >>> be = NumbaCPUBackend(threads=1)
        >>> v, dk, its, res, ok = be.solve_gradient([g], [g], [(0, 0)], Constant(1.0), Constant(1.0), wrt_q=True)
        >>> # K = 4 q / (2 - q): dK/dq = 8 / (2 - q)^2; the constants' c are columns 0 and 1
        >>> dk.shape, round(float(v[0]), 6), round(float(dk[0, -1]), 6)
        ((1, 3), 1.333333, 3.555556)
        """
        nh = len(node_kernel.hyperparameters) + len(edge_kernel.hyperparameters) + int(bool(wrt_q))
        values, iters, res, conv, blocks = self._run(
            xs, ys, pairs, node_kernel, edge_kernel, progress, False, gradient=True, wrt_q=bool(wrt_q)
        )
        grads = np.empty((len(values), nh))
        for t, g in enumerate(blocks):
            grads[t] = g
        return GradientSolution(values, grads, iters, res, conv)

    def _run(self, xs, ys, pairs, node_kernel, edge_kernel, progress, nodal, gradient=False, wrt_q=False,
             split_all=False):  # fmt: skip
        """The work of :meth:`solve` and its siblings; ``split_all`` spreads every pair's rows over the
        threads (as for large pairs; the warm-up uses it to compile that path on a tiny pair)."""
        warm_up()
        pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
        k = len(pairs)
        values = np.empty(k)
        iters = np.zeros(k, dtype=np.int64)
        res = np.empty(k)
        modes = np.full(k, -1, dtype=np.int64)  # 0 cached, 1 matrix-free, 2 constant
        blocks: list[Any] = [None] * k
        if k == 0:
            return values, iters, res, np.empty(0, dtype=bool), blocks
        used_x, used_y = np.unique(pairs[:, 0]), np.unique(pairs[:, 1])
        ctx, gx, gy = self._context(xs, ys, used_x, used_y, node_kernel, edge_kernel, nodal, gradient, wrt_q)
        sizes = [np.zeros((2, len(zs)), dtype=np.int64) for zs in (xs, ys)]  # nodes and edges per graph
        for sz, used, gs in zip(sizes, (used_x, used_y), (gx, gy)):
            sz[:, used] = [[len(gs[i].d) for i in used.tolist()], [len(gs[i].w) for i in used.tolist()]]
        nm = sizes[0][0, pairs[:, 0]] * sizes[1][0, pairs[:, 1]]
        ep = sizes[0][1, pairs[:, 0]] * sizes[1][1, pairs[:, 1]]
        big = (ep > _BIG_EDGE_PAIRS) | (nm > _BIG_UNKNOWNS) | bool(split_all)
        small, large = np.flatnonzero(~big), np.flatnonzero(big)
        budget = self.cache_bytes // max(1, min(self.threads, len(small)))
        batch = _Batch.build(ctx, xs, ys, pairs, used_x, used_y, gx, gy, small, budget)

        def solve_one(t: int, budget: int, pool: Any) -> None:
            i, j = pairs[t].tolist()
            values[t], iters[t], res[t], mode, blocks[t] = ctx.solve_pair(xs[i], ys[j], gx[i], gy[j], budget, pool)
            modes[t] = _MODE_CODES[mode]

        def task(ts: np.ndarray) -> int:
            rest = ts if batch is None else batch.solve(ts, values, iters, res, modes, blocks)
            for t in rest.tolist():
                solve_one(t, budget, None)
            return len(ts)

        # tasks of several pairs: a future per pair costs the GIL more than a small pair's solve; a
        # batch's compiled call costs one dispatch for all its pairs
        per_task = 16 if batch is None else 8
        size = max(1, min(32 if batch is None else _BATCH_PAIRS, len(small) // (per_task * self.threads)))
        tasks = [small[a : a + size] for a in range(0, len(small), size)]
        with ThreadPoolExecutor(max_workers=self.threads) as executor:
            pool = executor if self.threads > 1 else None
            if pool is None:
                for ts in tasks:
                    _report(progress, task(ts))
            else:
                futs = [executor.submit(task, ts) for ts in tasks]
                try:
                    for f in as_completed(futs):
                        _report(progress, f.result())
                except BaseException:
                    for f in futs:
                        f.cancel()
                    raise
            for t in large.tolist():
                solve_one(t, self.cache_bytes, pool)
                _report(progress, 1)
        counts = np.bincount(modes[modes >= 0], minlength=3)
        self.last_extra = {"threads": self.threads, **{f"pairs_{name.replace('-', '_')}": int(counts[code])
                                                       for name, code in _MODE_CODES.items()}}  # fmt: skip
        return values, iters, res, res <= self.rtol, blocks

    def _context(self, xs, ys, used_x, used_y, node_kernel, edge_kernel, nodal, gradient, wrt_q) -> tuple:
        """The call's :class:`_Context` and the engine's arrays of the graphs it uses (rows ``gx``, columns
        ``gy``, by index into ``xs`` and ``ys``)."""
        used_x, used_y = used_x.tolist(), used_y.tolist()
        program = compile_edge_program(edge_kernel) if self.compiled_kernels else None
        const_c = edge_kernel.c if type(edge_kernel) is Constant else None
        gx: dict[int, _GraphArrays] = {}
        gy: dict[int, _GraphArrays] = {}
        feats = None
        if program is not None and const_c is None:
            feats = _edge_features(program, [xs[i] for i in used_x] + [ys[j] for j in used_y])
            if feats is None:
                program = None
        for t, i in enumerate(used_x):
            gx[i] = _graph_arrays(xs[i], feats[t] if feats else None)
        for t, j in enumerate(used_y):
            gy[j] = _graph_arrays(ys[j], feats[len(used_x) + t] if feats else None, columns=True)
        ctx = _Context(self, node_kernel, edge_kernel, program, const_c)
        if gradient and self.compiled_kernels and node_kernel.hyperparameters:
            nprog = compile_edge_program(node_kernel)
            if nprog is not None and len(nprog.par) == len(node_kernel.hyperparameters):
                nfeats = _edge_features(nprog, [xs[i] for i in used_x] + [ys[j] for j in used_y], nodes=True)
                if nfeats is not None:
                    ctx.node_program = nprog
                    for t, i in enumerate(used_x):
                        gx[i] = replace(gx[i], nfeat=nfeats[t])
                    for t, j in enumerate(used_y):
                        gy[j] = replace(gy[j], nfeat=np.ascontiguousarray(nfeats[len(used_x) + t][:, gy[j].perm]))
        ctx.nodal = nodal
        ctx.gradient = gradient
        if gradient:
            ctx.node_hp = np.array([h.value for h in node_kernel.hyperparameters], dtype=np.float64)
            ctx.edge_hp = np.array([h.value for h in edge_kernel.hyperparameters], dtype=np.float64)
        ctx.wrt_q = wrt_q
        return ctx, gx, gy

    def __repr__(self) -> str:
        return (
            f"NumbaCPUBackend(rtol={self.rtol!r}, max_iter={self.max_iter!r}, threads={self.threads!r}, "
            f"cache_bytes={self.cache_bytes!r})"
        )


def make(rtol: float | None, max_iter: int, options: Mapping[str, Any]) -> NumbaCPUBackend:
    """Registry factory: a :class:`NumbaCPUBackend` (``rtol=None``: 1e-12; ``options``: its other
    keyword arguments, ``threads``, ``cache_bytes``, ``compiled_kernels``).

    Examples
    --------
    >>> be = make(None, 100, {"threads": 1})
    >>> be.name, be.rtol, be.threads
    ('cpu', 1e-12, 1)
    """
    return NumbaCPUBackend(rtol=1e-12 if rtol is None else rtol, max_iter=max_iter, **dict(options))


_EMPTY2 = np.empty((0, 0))
_EMPTY_PROG = np.empty((0, 3), dtype=np.int64)
_EMPTY1 = np.empty(0)


class _Workspace:
    """Hands out float64 arrays carved from one flat buffer per thread, kept between pairs
    (``local``: a ``threading.local``; None: fresh arrays)."""

    def __init__(self, local: threading.local | None) -> None:
        self.local = local
        self.used = 0
        self.parts: list[tuple[int, tuple[int, ...]]] = []

    def take(self, shape: tuple[int, ...]) -> np.ndarray:
        size = math.prod(shape)
        if self.local is None:
            return np.empty(shape)
        buf = getattr(self.local, "buf", None)
        if buf is None or self.used + size > buf.size:
            # grow: arrays already handed out keep the old buffer alive and stay valid
            buf = np.empty(max(2 * (self.used + size), 1 << 16))
            self.local.buf = buf
            self.used = 0
        out = buf[self.used : self.used + size].reshape(shape)
        self.used += size
        return out


class _Context:
    """Everything one ``solve`` call shares between its pairs."""

    def __init__(self, backend: NumbaCPUBackend, node_kernel, edge_kernel, program, const_c) -> None:
        self.rtol = backend.rtol
        self.max_iter = backend.max_iter
        self.threads = backend.threads
        self.node_kernel = node_kernel
        self.edge_kernel = edge_kernel
        self.program = program
        self.const_c = const_c
        self.nodal = False
        self.gradient = False
        self.node_program = None
        # hyperparameter values of a gradient call, read once (a composite kernel builds them on every access)
        self.node_hp = self.edge_hp = _EMPTY1
        self.wrt_q = False
        self._local = threading.local()  # per-thread work buffers of the small pairs

    # -------------------------------------------------------------- per-pair pieces
    def _setup_rows(self, s1, s2, g1, g2, i0, i1, diag, r) -> tuple[float, float]:
        """diag = D_x / V_x and r = b = D_x q_x on rows i0..i1; returns (max |b|, max diag) there."""
        nl1 = {k: v[i0:i1, None] for k, v in g1.node_labels.items()}
        nl2 = {k: v[None, :] for k, v in g2.node_labels.items()}
        with np.errstate(all="ignore"):
            V = np.broadcast_to(np.asarray(self.node_kernel(nl1, nl2), dtype=np.float64), (i1 - i0, s2.n))
        ok = V > 0
        if not ok.all():
            a, c = np.argwhere(~ok)[0]
            hint = ""
            if V[a, c] == 0 and self.node_kernel.range.lo_open:
                hint = " (the kernel underflows float64 here: a length scale too small for these labels?)"
            raise GraphError(
                f"node kernel is {V[a, c]} (not > 0) between node {i0 + a} of {s1.name} and node "
                f"{g2.perm[c]} of {s2.name}; node kernel values must lie in (0, 1]{hint}"
            )
        with np.errstate(over="raise", under="ignore"):
            try:
                Dx = np.outer(g1.d[i0:i1], g2.d)
                np.divide(Dx, V, out=diag[i0:i1])
                np.multiply(Dx, np.outer(g1.q[i0:i1], g2.q), out=r[i0:i1])
                np.outer(g1.p[i0:i1], g2.p)  # p_x itself is never stored: only its overflow matters
            except FloatingPointError as exc:
                raise GraphError(
                    f"pair ({s1.name}, {s2.name}): the degree or start-probability products overflow float64 "
                    "(start probabilities p too large?)"
                ) from exc
        if i1 == i0:
            return 0.0, 0.0
        return float(np.max(np.abs(r[i0:i1]))), float(np.max(diag[i0:i1]))

    def _setup_pair(self, s1, s2, g1, g2, diag, r) -> tuple[float, float, float]:
        """:meth:`_setup_rows` on the whole pair, its arithmetic in one compiled call
        (:func:`_setup_pair`); returns (max |b|, max diag, min diag)."""
        nl1 = {k: v[:, None] for k, v in g1.node_labels.items()}
        nl2 = {k: v[None, :] for k, v in g2.node_labels.items()}
        with np.errstate(all="ignore"):
            V = np.broadcast_to(np.asarray(self.node_kernel(nl1, nl2), dtype=np.float64), diag.shape)
        bad, over, top, dtop, dmin = _setup_pair(g1.d, g2.d, g1.q, g2.q, g1.p, g2.p, V, diag, r)
        if bad >= 0 or over:  # the errors of _setup_rows, from its numpy path
            self._setup_rows(s1, s2, g1, g2, 0, s1.n, diag, r)
        return top, dtop, dmin

    @staticmethod
    def _scale_rows(i0, i1, shift, mshift, diag, r, x) -> float:
        """r = 2^shift b, diag = 2^mshift diag (exact), x = r / diag on rows i0..i1; returns sum r^2."""
        if shift:
            np.ldexp(r[i0:i1], shift, out=r[i0:i1])
        if mshift:
            np.ldexp(diag[i0:i1], mshift, out=diag[i0:i1])
        np.divide(r[i0:i1], diag[i0:i1], out=x[i0:i1])
        # not np.vdot: once OpenBLAS has run its threads, BLAS calls from our worker threads
        # serialize them (measured: two threads then run at the speed of one)
        return _sum_sq_rows(i0, i1, r)

    def _generic_block(self, g1, g2, e0, e1) -> np.ndarray:
        """Products w_e w_e' k_e(e, e') for edges e0..e1 of G, through the kernel's numpy __call__."""
        el1 = {k: v[e0:e1, None] for k, v in g1.edge_labels.items()}
        el2 = {k: v[None, :] for k, v in g2.edge_labels.items()}
        with np.errstate(over="ignore", under="ignore", invalid="ignore"):
            ke = np.asarray(self.edge_kernel(el1, el2), dtype=np.float64)
            ke = np.broadcast_to(ke, (e1 - e0, len(g2.w)))
            return np.ascontiguousarray(g1.w[e0:e1, None] * g2.w[None, :] * ke)

    def solve_pair(self, s1, s2, g1, g2, budget, pool) -> tuple[float, int, float, str, Any]:
        """Solve one pair; with a pool, every row-wise step is spread over its threads."""
        try:
            return self._solve_pair(s1, s2, g1, g2, budget, pool)
        except MemoryError as exc:
            n, m = s1.n, s2.n
            need = 6 * 8 * n * m
            raise ProblemTooLargeError(
                f"pair ({s1.name}, {s2.name}) has {n} x {m} = {n * m} unknowns: its float64 CG vectors "
                f"need about {need / 2**30:.1f} GiB (matrix-free, the least this backend uses), "
                "more than this machine could allocate"
            ) from exc

    def _solve_pair(self, s1, s2, g1, g2, budget, pool) -> tuple[float, int, float, str, Any]:
        n, m = s1.n, s2.n
        g1_orig, g2_orig = g1, g2
        nnz1, nnz2 = len(g1.w), len(g2.w)
        # small pairs (one per thread) reuse the thread's buffers: fresh pages cost page faults
        ws = _Workspace(self._local) if pool is None else _Workspace(None)
        diag, r, x = (ws.take((n, m)) for _ in range(3))
        prog = self.program
        chunks = [(0, n)] if pool is None else _row_chunks(g1.ip, 4 * self.threads)
        if pool is None:  # one compiled call (small pairs: Python between the calls holds the GIL)
            top, dtop, dmin = self._setup_pair(s1, s2, g1, g2, diag, r)
        else:
            tops = _map(pool, lambda c: self._setup_rows(s1, s2, g1, g2, c[0], c[1], diag, r), chunks)
            top = max((t[0] for t in tops), default=0.0)
            dtop = max((t[1] for t in tops), default=0.0)
            dmin = diag.min() if n * m else 1.0
        if n * m and not dmin > 0:
            # d_i d'_i' / v underflowed: weights within one graph span more than float64 can
            # multiply (K is invariant under scaling a whole graph's weights, not one edge's)
            raise ConvergenceError(
                f"pair ({s1.name}, {s2.name}): the product of two node degrees underflows float64 "
                "(edge weights within a graph span too many orders of magnitude); the system is "
                "singular to float64 precision"
            )
        # Powers of two (exact): b is scaled to put its largest entry in [1, 2); where the diagonal
        # is extreme (edge weights near the float64 limits, as K is invariant under A -> c A) the
        # whole matrix is scaled too (the diagonal and both graphs' weights), so that no CG
        # quantity under- or overflows. x is scaled back at the end.
        shift = 0 if top == 0 else 1 - int(np.frexp(top)[1])
        mshift = 0
        if dtop > 0 and not (2.0**-100 <= dtop <= 2.0**100):
            mshift = 1 - int(np.frexp(dtop)[1])
            g1 = replace(g1, w=np.ldexp(g1.w, mshift // 2))
            g2 = replace(g2, w=np.ldexp(g2.w, mshift - mshift // 2))
        if pool is None:
            bb = _scale_pair(shift, mshift, diag, r, x)
        else:
            bb = sum(_map(pool, lambda c: self._scale_rows(c[0], c[1], shift, mshift, diag, r, x), chunks))
        C, X2, cconst = _EMPTY2, _EMPTY2, 0.0
        code, par, depth = (prog.code, prog.par, prog.depth) if prog is not None else (_EMPTY_PROG, _EMPTY1, 1)
        F1, F2 = g1.feat, g2.feat
        generic = prog is None
        if self.const_c is not None:
            mode, label, cconst, generic = _MODE_CONST, "constant", float(self.const_c), False
            X2 = ws.take((n, m))  # T = X A'^T
        elif nnz1 * nnz2 * 8 <= budget:
            mode, label, generic = _MODE_CACHED, "cached", False
            if (nnz1 + n) * nnz2 * 8 <= budget:
                X2 = ws.take((n, nnz2))
            C = ws.take((nnz1, nnz2))
            echunks = [(int(g1.ip[a]), int(g1.ip[b])) for a, b in chunks]
            if prog is not None:
                _map(pool, lambda c: _build_cache(c[0], c[1], g1.w, g2.w, code, par, F1, F2, depth,
                                                  C[c[0]:c[1]]), echunks)  # fmt: skip
            else:
                step = max(1, (1 << 22) // max(1, nnz2))

                def fill(c):
                    for e in range(c[0], c[1], step):
                        C[e : min(e + step, c[1])] = self._generic_block(g1, g2, e, min(e + step, c[1]))

                _map(pool, fill, echunks)
        else:
            mode, label = _MODE_FREE, "matrix-free"
            if generic and n * nnz2 * 8 <= budget // 2:
                X2 = np.empty((n, nnz2))

        def pcg(r, x, bb):
            if pool is None and not generic:
                return _pcg_serial(mode, g1.ip, g1.ix, g1.w, g2.bk, g2.ix, g2.w, C, code, par, F1, F2, depth,
                                   cconst, X2, diag, r, x, ws.take((n, m)), ws.take((n, m)), bb, self.rtol,
                                   self.max_iter)  # fmt: skip
            return self._pcg_chunked(pool, chunks, mode, generic, g1, g2, C, code, par, F1, F2, depth,
                                     cconst, X2, diag, r, x, bb, budget)  # fmt: skip

        it, res = pcg(r, x, bb)
        with np.errstate(over="ignore", under="ignore", invalid="ignore"):  # the caller reports overflows
            if shift != mshift:  # M' = 2^mshift M, b' = 2^shift b: x = 2^(mshift - shift) x'
                _map(pool, lambda c: np.ldexp(x[c[0] : c[1]], mshift - shift, out=x[c[0] : c[1]]), chunks)
            value = float(sum(_map(pool, lambda c: _bilinear(c[0], c[1], g1.p, x, g2.p), chunks)))
            block = None
            if self.nodal:  # p_a p'_b x_ab with the columns back in G''s own node order
                block = np.empty((n, m))
                block[:, g2.perm] = np.outer(g1.p, g2.p) * x
        if self.gradient:
            # adjoint: M y = p_x with the same (scaled) operator; y = 2^(mshift - shift) y'
            y = ws.take((n, m))
            with np.errstate(over="ignore", under="ignore"):
                px = np.outer(g1.p, g2.p)
            top = float(np.max(np.abs(px))) if px.size else 0.0
            if top == 0 or not math.isfinite(top):
                y[:] = 0.0 if top == 0 else np.nan
                it2, res2 = 0, 0.0 if top == 0 else math.inf
            else:
                shift = 1 - int(np.frexp(top)[1])
                r = ws.take((n, m))
                np.ldexp(px, shift, out=r)
                np.divide(r, diag, out=y)
                it2, res2 = pcg(r, y, _sum_sq_rows(0, n, r))
                if shift != mshift:
                    np.ldexp(y, mshift - shift, out=y)
            it, res = max(it, it2), max(res, res2)
            with np.errstate(over="ignore", under="ignore", invalid="ignore"):  # the caller reports overflows
                V = np.outer(g1_orig.d, g2_orig.d) / np.ldexp(diag, -mshift)  # the node kernel, from D_x / V
                block = self._gradient_sums(s1, s2, g1_orig, g2_orig, x, y, V)
        return value, int(it), float(res), label, block

    def _gradient_sums(self, s1, s2, g1, g2, x, y, V) -> np.ndarray:
        """dK/dh = yᵀ (db/dh − (dM/dh) x) for every hyperparameter (columns: node kernel, edge
        kernel, q), x and y in the engine's layout (G''s nodes sorted by degree)."""
        nk, ek = self.node_kernel, self.edge_kernel
        n, m = x.shape
        out: list[float] = []
        Dx = np.outer(g1.d, g2.d)
        # node kernel: dM/dh = -D_x V^-2 dV/dh (diagonal), db/dh = 0
        nprog = self.node_program
        if len(self.node_hp) and nprog is not None:
            w = y * x * Dx / (V * V)
            sums = np.zeros(len(self.node_hp))
            _node_gradient_sums(nprog.code, nprog.par, self.node_hp, g1.nfeat, g2.nfeat, nprog.depth, w, sums)
            out.extend(sums.tolist())
        elif len(self.node_hp):
            nl1 = {k: v[:, None] for k, v in g1.node_labels.items()}
            nl2 = {k: v[None, :] for k, v in g2.node_labels.items()}
            w = y * x * Dx / (V * V)
            for dv in nk.gradient(nl1, nl2):
                dv = np.asarray(dv, dtype=np.float64)
                out.append(float((w * dv).sum() if dv.shape == w.shape else (w * np.broadcast_to(dv, w.shape)).sum()))
        # edge kernel: dM/dh = -(A_x ∘ dE_x/dh), db/dh = 0
        nh = len(self.edge_hp)
        if nh and isinstance(ek, Constant):  # dk/dc = 1: yᵀ (A ⊗ A') x = Σ y ∘ (A X A'ᵀ)
            A1 = sp.csr_array((g1.w, g1.ix, g1.ip), shape=(n, n))
            A2 = sp.csr_array((g2.w, (g2.src, g2.ix)), shape=(m, m))
            out.append(float(np.sum(y * (A1 @ (A2 @ x.T).T))))
        elif nh and self.program is not None and len(self.program.par) == nh:
            sums = np.zeros(nh)
            prog = self.program
            _edge_gradient_sums(prog.code, prog.par, self.edge_hp, g1.feat, g2.feat, prog.depth, g1.src, g1.ix, g1.w,
                                g2.src, g2.ix, g2.w, x, y, sums)  # fmt: skip
            out.extend(sums.tolist())
        elif nh:
            sums = [0.0] * nh
            nnz2 = len(g2.w)
            step = max(1, (1 << 20) // max(1, nnz2))
            el2 = {k: v[None, :] for k, v in g2.edge_labels.items()}
            for e0 in range(0, len(g1.w), step):
                e1 = min(e0 + step, len(g1.w))
                el1 = {k: v[e0:e1, None] for k, v in g1.edge_labels.items()}
                # w_e w_f y[i, i'] x[j, j'] over edge pairs e = (i, j) of G, f = (i', j') of G'
                yb = y[np.ix_(g1.src[e0:e1], g2.src)]
                xb = x[np.ix_(g1.ix[e0:e1], g2.ix)]
                base = g1.w[e0:e1, None] * g2.w[None, :] * yb * xb
                for h, g in enumerate(ek.gradient(el1, el2)):
                    sums[h] += float(np.sum(base * np.broadcast_to(g, base.shape)))
            out.extend(sums)
        if self.wrt_q:
            q = float(s1.q[0])
            if not (np.all(s1.q == q) and np.all(s2.q == q)):
                raise ValueError("dK/dq needs one scalar q for every node of both graphs")
            # d = deg / (1 - q) on both sides: dD_x/dq = 2 D_x / (1 - q); b = D_x q^2
            dDx = 2.0 * Dx / (1.0 - q)
            db = dDx * q * q + 2.0 * q * Dx
            out.append(float(np.sum(y * (db - dDx / V * x))))
        return np.asarray(out, dtype=np.float64)

    def _pcg_chunked(self, pool, chunks, mode, generic, g1, g2, C, code, par, F1, F2, depth, cconst, X2,
                     diag, r, x, bb, budget):  # fmt: skip
        """Jacobi PCG (the steps of :func:`_pcg_serial`) with every row-wise step spread over the pool."""
        n, m = diag.shape
        y = np.empty((n, m))
        p = np.zeros((n, m))
        tchunks = _row_chunks(np.arange(n + 1), len(chunks), weight_edges=False)
        nnz2 = len(g2.w)
        pmode = _MODE_CACHED if generic else mode  # how rows are prepared for the product
        ip1, ix1, w1, ip2, ix2, w2 = g1.ip, g1.ix, g1.w, g2.bk, g2.ix, g2.w
        # generic matrix-free: blocks of at most `step` edges of G per thread
        step = max(1, min(1 << 22, (budget // 2) // max(1, 8 * nnz2 * min(self.threads, len(chunks)))))

        def generic_rows(i0, i1, v):
            dot, a = 0.0, i0
            while a < i1:
                b = a + 1
                while b < i1 and ip1[b + 1] - ip1[a] <= step:
                    b += 1
                e0, e1 = int(ip1[a]), int(ip1[b])
                blk = self._generic_block(g1, g2, e0, e1)
                dot += _mv_cached_rows(a, b, ip1, ix1, ip2, ix2, blk, e0, X2, diag, v, y)
                a = b
            return dot

        def matvec(v):
            if generic:
                return sum(_map(pool, lambda c: generic_rows(c[0], c[1], v), chunks))
            return sum(
                _map(pool, lambda c: _mv_rows(mode, c[0], c[1], ip1, ix1, w1, ip2, ix2, w2, C, code, par, F1, F2,
                                              depth, cconst, X2, diag, v, y), chunks)
            )  # fmt: skip

        def direction(alpha, beta):
            _map(pool, lambda c: _direction_rows(pmode, c[0], c[1], alpha, beta, x, p, r, diag, ip2, ix2, w2, X2),
                 tchunks)  # fmt: skip

        def residual(alpha):
            return _sum2(_map(pool, lambda c: _residual_rows(c[0], c[1], alpha, r, y, diag), tchunks))

        bnorm = math.sqrt(bb)
        _map(pool, lambda c: _prepare_rows(pmode, c[0], c[1], ip2, ix2, w2, x, X2), tchunks)
        matvec(x)
        rr, rz = residual(1.0)
        direction(0.0, 0.0)
        res = math.sqrt(rr) / bnorm
        it = 0
        while res > self.rtol and it < self.max_iter:
            alpha = rz / matvec(p)
            rr, rz_new = residual(alpha)
            it += 1
            res = math.sqrt(rr) / bnorm
            if res <= self.rtol or it >= self.max_iter:
                _map(pool, lambda c, a=alpha: _axpy_rows(c[0], c[1], a, x, p), tchunks)
                break
            direction(alpha, rz_new / rz)
            rz = rz_new
        return it, res


def _map(pool, fn, items) -> list:
    """fn over items, on the pool's threads when there is a pool and more than one item."""
    if pool is None or len(items) <= 1:
        return [fn(c) for c in items]
    return list(pool.map(fn, items))


def _report(progress: Progress | None, done: int) -> None:
    """``progress(done)`` when there is a progress callback."""
    if progress is not None:
        progress(done)


def _sum2(parts) -> tuple[float, float]:
    a = b = 0.0
    for u, v in parts:
        a += u
        b += v
    return a, b


# ====================================================================== warm-up
#: Printed to stderr when the warm-up finds numba's on-disk cache cold (a compile actually happens).
COMPILE_MESSAGE = "mgkflow: compiling the CPU kernels (once per installation, ~10\u201320 s)\u2026"
_WARM_LOCK = threading.Lock()
_warm_done = False


def _cache_misses() -> int:
    """How many compiled signatures of this module's numba functions missed numba's on-disk cache."""
    funcs = [v for v in list(globals().values()) if hasattr(v, "stats") and hasattr(v, "py_func")]
    return sum(sum(f.stats.cache_misses.values()) for f in funcs)


def _warm_up_solves() -> list:
    """Tiny solves through every compiled path (serial and row-split, cached, matrix-free and constant
    products, compiled and generic edge kernels, gradients), as callables."""
    A = np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 2.0], [0.0, 2.0, 0.0]])
    g = Graph(A, node_labels={"l": np.array([0, 1, 0])}, edge_labels={"e": A * 0.5}, title="warm-up")
    nk, ek = KroneckerDelta(0.5, "l"), KroneckerDelta(0.5, "e") * SquareExponential(1.0, "e")
    ss = [prepare_graph(g, 0, nk, ek, q=0.5)]
    pairs = np.zeros((1, 2), dtype=np.int64)

    def run(be: NumbaCPUBackend, edge_kernel: BaseKernel, gradient: bool = False, split_all: bool = False,
            node_kernel: BaseKernel = nk):  # fmt: skip
        return lambda: be._run(ss, ss, pairs, node_kernel, edge_kernel, None, False, gradient=gradient,
                               wrt_q=gradient, split_all=split_all)  # fmt: skip

    serial, free = NumbaCPUBackend(threads=1), NumbaCPUBackend(threads=1, cache_bytes=0)
    two, generic = NumbaCPUBackend(threads=2), NumbaCPUBackend(threads=1, compiled_kernels=False)
    return [
        lambda: _sum_sq_rows(0, 1, np.zeros((1, 1))),  # one small function first: a cold cache shows at once
        run(serial, ek), run(serial, Constant(1.0)), run(free, ek), run(generic, ek),
        run(serial, ek, node_kernel=Constant(1.0)),
        run(serial, ek, gradient=True), run(serial, Constant(1.0), gradient=True), run(free, ek, gradient=True),
        run(two, ek, split_all=True), run(two, Constant(1.0), split_all=True), run(free, ek, split_all=True),
        run(generic, ek, split_all=True),
    ]


def warm_up(stream: Any = None) -> bool:
    """Compile this backend's numba kernels, or load them from numba's on-disk cache, once per process.

    Called before the first solve (and by :func:`mgkflow.evaluation.backend.get_backend` before a
    kernel call starts its clock, so compile time stays out of ``last_stats``). When numba's cache
    misses (a fresh installation, a new numba or Python), :data:`COMPILE_MESSAGE` goes to ``stream``
    (default ``sys.stderr``) first: the compile takes 10–20 s and would look like a hang.

    Returns
    -------
    bool
        True when this call compiled something (the message was printed).

    Examples
    --------
    >>> warm_up() in (True, False) and warm_up() is False  # the second call does nothing
    True
    """
    global _warm_done
    if _warm_done:
        return False
    with _WARM_LOCK:
        if _warm_done:
            return False
        _warm_done = True  # first: the warm-up's own solves call this again
        compiled = False
        for solve in _warm_up_solves():
            solve()
            if not compiled and _cache_misses():
                compiled = True
                print(COMPILE_MESSAGE, file=stream or sys.stderr, flush=True)
    return compiled
