"""Pure-numpy emulation of the GPU solver's octile XMV and blocked vector layout.

Mirrors ``mgk_solver.cu`` loop for loop (tile-row pointers, bitmaps, compact
offsets, set-bit iteration), so the indexing of the format and of the kernel can be
checked on machines without a GPU, and ``mgk_assemble.cu``'s Gram assembly (:func:`gram_diagonal`,
:func:`gram_assemble`). Slow: for tests on small graphs only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..format.octile import OctileBatch

__all__ = [
    "blocked_index", "xmv_blocked", "xmv_rows", "xmv_staged", "to_blocked", "from_blocked", "system_blocked",
    "pcg_blocked", "pcg2_blocked", "gradient_rows", "solve_pair_blocked", "gram_diagonal", "gram_assemble",
]  # fmt: skip


def blocked_index(nt2: int, i: np.ndarray, i2: np.ndarray) -> np.ndarray:
    """Position of product entry (i, i2) in the blocked layout of the GPU solver."""
    i, i2 = np.asarray(i), np.asarray(i2)
    return (((i // 8) * nt2 + i2 // 8) << 6) + (i % 8) * 8 + i2 % 8


def to_blocked(X: np.ndarray, nt1: int, nt2: int) -> np.ndarray:
    """(n, m) array -> blocked vector of length nt1*nt2*64 (padding 0)."""
    n, m = X.shape
    out = np.zeros(nt1 * nt2 * 64, dtype=X.dtype)
    ii, jj = np.meshgrid(np.arange(n), np.arange(m), indexing="ij")
    out[blocked_index(nt2, ii, jj)] = X
    return out


def from_blocked(v: np.ndarray, n: int, m: int, nt2: int) -> np.ndarray:
    """Blocked vector -> (n, m) array."""
    ii, jj = np.meshgrid(np.arange(n), np.arange(m), indexing="ij")
    return v[blocked_index(nt2, ii, jj)]


def xmv_blocked(
    batch: OctileBatch,
    g1: int,
    g2: int,
    p: np.ndarray,
    edge_kernel: Callable[[dict, dict], np.ndarray] | None = None,
) -> np.ndarray:
    """y = (A_x ∘ E_x) p in the blocked layout, computed like the CUDA kernel."""
    nt1, nt2 = int(batch.n_tiles_side[g1]), int(batch.n_tiles_side[g2])
    r1, r2 = int(batch.rowptr_offset[g1]), int(batch.rowptr_offset[g2])
    y = np.zeros(nt1 * nt2 * 64)
    labels = batch.edge_labels

    def ke(t1: int, t2: int) -> float:
        if edge_kernel is None:
            return 1.0
        return float(edge_kernel({f: v[t1] for f, v in labels.items()}, {f: v[t2] for f, v in labels.items()}))

    for tp in range(nt1 * nt2):
        I, I2 = divmod(tp, nt2)
        for lane in range(32):
            i, i2a = lane >> 2, lane & 3
            for i2 in (i2a, i2a + 4):
                acc = 0.0
                for ta in range(batch.rowptr[r1 + I], batch.rowptr[r1 + I + 1]):
                    J = int(batch.tile_col[ta])
                    bm1 = int(batch.bitmap[ta])
                    ra = (bm1 >> (8 * i)) & 0xFF
                    t1 = int(batch.offset[ta]) + bin(bm1 & ((1 << (8 * i)) - 1)).count("1")
                    for j in range(8):
                        if not (ra >> j) & 1:
                            continue
                        for tb in range(batch.rowptr[r2 + I2], batch.rowptr[r2 + I2 + 1]):
                            J2 = int(batch.tile_col[tb])
                            bm2 = int(batch.bitmap[tb])
                            rb = (bm2 >> (8 * i2)) & 0xFF
                            t2 = int(batch.offset[tb]) + bin(bm2 & ((1 << (8 * i2)) - 1)).count("1")
                            for j2 in range(8):
                                if not (rb >> j2) & 1:
                                    continue
                                w = float(batch.weight[t1]) * float(batch.weight[t2]) * ke(t1, t2)
                                acc += w * p[((J * nt2 + J2) << 6) + j * 8 + j2]
                                t2 += 1
                        t1 += 1
                y[(tp << 6) + i * 8 + i2] = acc
    return y


def xmv_rows(
    rows: dict,
    hdr: np.ndarray,
    g1: int,
    g2: int,
    p: np.ndarray,
    edge_labels: dict | None = None,
    edge_kernel: Callable[[dict, dict], np.ndarray] | None = None,
) -> np.ndarray:
    """y = (A_x ∘ E_x) p in the blocked layout, computed like the row-pair XMV (XMV_MODE 2).

    ``rows`` is :func:`mgkflow.gpu.strategies.row_pair.row_arrays` output, ``hdr`` the (G, 5) graph
    headers (n, nt, node_off, rowptr_off, rrow_off); ``edge_labels`` the row-order labels
    by field (concatenated like ``rows``). ``p`` of shape (N, 2) holds two vectors multiplied at
    once like ``XMV_TILE_PAIR2`` (the gradient's joint PCG): each product's coefficient is formed
    once and applied to both columns.
    """
    nt1, nt2 = int(hdr[g1, 1]), int(hdr[g2, 1])
    o1, o2 = int(hdr[g1, 4]), int(hdr[g2, 4])
    rp, coff, w = rows["rrowptr"], rows["rcoff"], rows["rweight"]
    p = np.asarray(p, dtype=np.float64)
    y = np.zeros((nt1 * nt2 * 64,) + p.shape[1:])

    def ke(t1: int, t2: int) -> float:
        if edge_kernel is None:
            return 1.0
        e1 = {f: v[t1] for f, v in edge_labels.items()}
        return float(edge_kernel(e1, {f: v[t2] for f, v in edge_labels.items()}))

    def row_pair(a0: int, a1: int, b0: int, b1: int) -> Any:
        acc = np.zeros(p.shape[1:])
        for ka in range(a0, a1):
            ca = int(coff[ka])
            base = (((ca >> 6) * nt2) << 6) + ((ca & 7) << 3)
            for kb in range(b0, b1):
                coef = float(w[ka]) * float(w[kb]) * ke(ka, kb)  # once for every vector of p
                acc += coef * p[base + int(coff[kb])]
        return acc

    for tp in range(nt1 * nt2):
        I, I2 = divmod(tp, nt2)
        ra, rb = o1 + I * 8, o2 + I2 * 8
        for lane in range(32):
            x, u = lane >> 3, lane & 7
            y[(tp << 6) + x * 8 + u] = row_pair(rp[ra + x], rp[ra + x + 1], rp[rb + u], rp[rb + u + 1])
            y[(tp << 6) + (7 - x) * 8 + 7 - u] = row_pair(
                rp[ra + 7 - x], rp[ra + 8 - x], rp[rb + 7 - u], rp[rb + 8 - u]
            )
    return y


def xmv_staged(
    g1: dict,
    rowptr_off1: int,
    nt1: int,
    g2: dict,
    nt2: int,
    p: np.ndarray,
    edge_kernel: Callable[[dict, dict], np.ndarray] | None = None,
    single: bool = True,
) -> np.ndarray:
    """y = (A_x ∘ E_x) p in the blocked layout, computed like ``wide_xmv_staged``.

    Task by task (G1 tile row x G2 group of rows), octile by octile of the G1 tile row, every G1
    entry against every register slot of the group's threads, with the P slice gathered
    through the group's column set, and the threads of each G2 row summed through
    ``row_thread``: the tables' indexing is used exactly as the kernel uses it.

    Parameters
    ----------
    g1 : dict
        G1 side, the batch's octile arrays: "rowptr" (absolute octile ids), "tile_col",
        "bitmap", "toff", "weight" and "labels" (field -> values by compact index).
    rowptr_off1, nt1 : int
        G1's first tile-row pointer and tiles per side.
    g2 : dict
        G2 side, :class:`mgkflow.gpu.strategies.staged.StagedG2` arrays: "groups" (n, 8), "colset",
        "row_thread", "slot_col" and "slot_w" (slots, threads), "labels" (field -> values
        shaped like "slot_col").
    nt2 : int
        G2's tiles per side.
    p : ndarray
        Input vector in the blocked layout.
    edge_kernel : callable, optional
        ``k(labels1, labels2)`` on label dicts (broadcasting); None means 1.
    single : bool
        Round P and each product's coefficient to float32, as the kernel does.
    """
    y = np.zeros(nt1 * nt2 * 64)
    groups = np.asarray(g2["groups"]).reshape(-1, 8)
    pv = p.astype(np.float32).astype(np.float64) if single else np.asarray(p, dtype=np.float64)
    rp = np.asarray(g1["rowptr"])
    for I in range(nt1):
        ent_i, ent_J, ent_jj, ent_t = [], [], [], []
        for ta in range(int(rp[rowptr_off1 + I]), int(rp[rowptr_off1 + I + 1])):
            bm, base, J = int(g1["bitmap"][ta]), int(g1["toff"][ta]), int(g1["tile_col"][ta])
            for r, b in enumerate(b for b in range(64) if (bm >> b) & 1):
                ent_i.append(b >> 3)
                ent_jj.append(b & 7)
                ent_J.append(J)
                ent_t.append(base + r)
        ei, eJ, ejj, et = (np.asarray(v, dtype=np.int64) for v in (ent_i, ent_J, ent_jj, ent_t))
        w1 = np.asarray(g1["weight"], dtype=np.float64)[et]
        lab1 = {f: np.asarray(v)[et][:, None, None] for f, v in g1.get("labels", {}).items()}
        for row0, nrows, thread0, nthreads, col0, ncol, rt0, _ in groups.tolist():
            acc = np.zeros((8, nthreads))
            if nthreads and et.size:
                th = np.arange(thread0, thread0 + nthreads)
                cols = np.asarray(g2["slot_col"])[:, th].astype(np.int64)
                w2 = np.asarray(g2["slot_w"], dtype=np.float64)[:, th]
                cset = np.asarray(g2["colset"])[col0 : col0 + ncol].astype(np.int64)
                src = (((eJ[:, None, None] * nt2 + cset[cols >> 3][None]) << 6) + (ejj * 8)[:, None, None]
                       + (cols & 7)[None])  # fmt: skip
                ke = 1.0
                if edge_kernel is not None:
                    lab2 = {f: np.asarray(v)[:, th][None] for f, v in g2.get("labels", {}).items()}
                    ke = np.asarray(edge_kernel(lab1, lab2), dtype=np.float64)
                coef = w1[:, None, None] * w2[None] * ke
                if single:
                    coef = coef.astype(np.float32).astype(np.float64)
                np.add.at(acc, ei, (coef * pv[src]).sum(axis=1))
            rt = np.asarray(g2["row_thread"])[rt0 : rt0 + nrows + 1]
            for k in range(nrows):
                row = row0 + k
                yv = acc[:, rt[k] : rt[k + 1]].sum(axis=1)
                y[((I * nt2 + (row >> 3)) << 6) + np.arange(8) * 8 + (row & 7)] = yv
    return y


# ------------------------------------------------------------------------------ per-pair solver
def _entries(nt1: int, nt2: int, n1: int, n2: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(i, i2, real) of every entry of the blocked layout (padding: real False)."""
    idx = np.arange(nt1 * nt2 * 64)
    tp, e = idx >> 6, idx & 63
    i, i2 = (tp // nt2) * 8 + (e >> 3), (tp % nt2) * 8 + (e & 7)
    return i, i2, (i < n1) & (i2 < n2)


def system_blocked(
    hdr: np.ndarray, g1: int, g2: int, node_labels: dict, node_kernel: Callable[[dict, dict], np.ndarray] | None,
    d: np.ndarray, p: np.ndarray, q: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """(DG, b, p_x, v) of a pair in the blocked layout, like ``system_entry`` and ``start_weight``:
    DG = d d' / v (v floored at 1e-30), b = d d' q q', p_x = p p'; padding DG = 1, v = 1, b = p_x = 0.
    ``node_labels`` by field over the batch's nodes, ``hdr`` the (G, 5) graph headers."""
    n1, nt1, o1 = (int(v) for v in hdr[g1, :3])
    n2, nt2, o2 = (int(v) for v in hdr[g2, :3])
    i, i2, real = _entries(nt1, nt2, n1, n2)
    u1, u2 = o1 + i[real], o2 + i2[real]
    v = np.ones(i.size)
    if node_kernel is not None:
        kv = node_kernel({f: a[u1] for f, a in node_labels.items()}, {f: a[u2] for f, a in node_labels.items()})
        v[real] = np.maximum(np.broadcast_to(kv, u1.shape), 1e-30)
    dd = np.zeros(i.size)
    dd[real] = d[u1] * d[u2]
    DG = np.where(real, dd / v, 1.0)
    b = np.zeros(i.size)
    b[real] = dd[real] * q[u1] * q[u2]
    px = np.zeros(i.size)
    px[real] = p[u1] * p[u2]
    return DG, b, px, v


def pcg_blocked(
    DG: np.ndarray, b: np.ndarray, xmv: Callable[[np.ndarray], np.ndarray], rtol: float, max_iter: int
) -> tuple[np.ndarray, int, float, bool]:
    """The solver's Jacobi PCG (X = 0 start, recursive residual, stop at ||r|| <= rtol ||b||)."""
    X = np.zeros_like(b)
    R = b.copy()
    DI = 1.0 / DG
    P = b * DI
    rz, bb = float(R @ P), float(b @ b)
    rr, it, conv = bb, 0, bb <= rtol * rtol * bb
    while not conv and it < max_iter:
        A = DG * P - xmv(P)
        pa = float(P @ A)
        if not pa > 0:
            break
        alpha = rz / pa
        X += alpha * P
        R -= alpha * A
        it += 1
        rr = float(R @ R)
        if rr <= rtol * rtol * bb:
            conv = True
            break
        rz_new = float(R @ (R * DI))
        P = R * DI + rz_new / rz * P
        rz = rz_new
    return X, it, (float(np.sqrt(rr / bb)) if bb > 0 else 0.0), bool(conv)


def pcg_cg_blocked(
    DG: np.ndarray, b: np.ndarray, w: np.ndarray, xmv: Callable[[np.ndarray], np.ndarray], rtol: float,
    max_iter: int,
) -> tuple[float, int, float, bool]:  # fmt: skip
    """The resident F32_SUMS value builds' PCG (``VALUE_CG`` of ``mgk_solver.cu``): the Chronopoulos-Gear form
    with z = fl32(D^-1 r), q = M z and a = M p stored as float32, r in float64, no solution vector and K = w^T x
    accumulated from the steps (the sum of alpha_k w^T p_k, w^T p = w^T z + beta w^T p_old). Each step's r.z, r.r
    and w.z are summed before its XMV, so the residual test comes first and a solve makes one XMV a step, as
    :func:`pcg_blocked`.

    Returns
    -------
    k : float
        w^T x.
    iterations : int
        Steps taken (XMV passes and updates of r).
    residual : float
        ||r|| / ||b|| of the last residual.
    converged : bool

    Examples
    --------
    >>> M = np.array([[4.0, 1.0], [1.0, 3.0]])
    >>> DG = np.diag(M).copy()
    >>> k, it, res, conv = pcg_cg_blocked(DG, np.array([1.0, 2.0]), np.array([1.0, 1.0]),
    ...                                   lambda p: np.diag(DG) @ p - M @ p, 1e-6, 10)
    >>> round(k, 6), it, conv  # x = (1, 7) / 11
    (0.727273, 2, True)
    """

    def f32(v: np.ndarray) -> np.ndarray:
        return np.asarray(v, dtype=np.float64).astype(np.float32).astype(np.float64)

    DI = 1.0 / DG
    R = b.astype(np.float64).copy()
    A = np.zeros_like(R)
    g_old, den_old, wp, kk, it = 1.0, 0.0, 0.0, 0.0, 0
    bb = float(R @ R)
    thr, rr, conv = rtol * rtol * bb, bb, False
    while True:
        Z = f32(R * DI)
        gm, rr, wz = float(R @ Z), float(R @ R), float(w @ Z)
        if rr <= thr:
            conv = True
            break
        if not np.isfinite(rr) or it >= max_iter:
            break
        Qd = DG * Z - xmv(Z)
        beta = gm / g_old if it else 0.0
        den = float(Z @ Qd) - beta * beta * den_old
        if not (den > 0 and np.isfinite(den)):
            break
        alpha = gm / den
        wp = wz + beta * wp
        kk += alpha * wp
        A = f32(f32(Qd) + beta * A)
        R = R - alpha * A
        it += 1
        g_old, den_old = gm, den
    return kk, it, (float(np.sqrt(rr / bb)) if bb > 0 else 0.0), conv


def pcg2_blocked(
    DG: np.ndarray, b: np.ndarray, c: np.ndarray, xmv: Callable[[np.ndarray], np.ndarray], rtol: float,
    max_iter: int,
) -> tuple[np.ndarray, np.ndarray, list[int], list[float], list[bool], int]:  # fmt: skip
    """The gradient kernel's joint PCG: M x = b and M y = c in one loop, like the GRADIENT section of
    ``mgk_solver.cu``.

    Two independent Jacobi-PCG recurrences (own alpha, beta, residual norms and stop) share the
    diagonal and every XMV pass: while both run, ``xmv`` gets the (N, 2) array [p_x, p_y] (one
    coefficient per product for both); once one has converged or broken down it stops updating and
    ``xmv`` gets the other's direction alone. Each system follows exactly the iterates of
    :func:`pcg_blocked` on its right-hand side.

    Returns
    -------
    X, Y : ndarray
        The two solutions.
    iterations, residuals, converged : list of two
        Per system (x, y): iterations done, ||r|| / ||rhs||, converged.
    passes : int
        XMV passes (loop trips) of the joint loop, ``max(iterations)`` unless a breakdown ended it.

    Examples
    --------
    >>> M = np.array([[4.0, 1.0], [1.0, 3.0]])
    >>> DG = np.diag(M).copy()
    >>> X, Y, its, res, conv, passes = pcg2_blocked(DG, np.array([1.0, 2.0]), np.array([1.0, 0.0]),
    ...                                             lambda p: np.diag(DG) @ p - M @ p, 1e-12, 10)
    >>> np.allclose(M @ X, [1, 2]) and np.allclose(M @ Y, [1, 0]), its, conv, passes
    (True, [2, 2], [True, True], 2)
    """
    rhs = np.stack([b, c], axis=1)
    DI = 1.0 / DG
    X = np.zeros_like(rhs)
    R = rhs.copy()
    P = rhs * DI[:, None]
    rz = np.einsum("ij,ij->j", R, P)
    bb = np.einsum("ij,ij->j", rhs, rhs)
    thr = rtol * rtol * bb
    rr = bb.copy()
    its = [0, 0]
    conv = [bool(bb[s] <= thr[s]) for s in range(2)]
    act = [not conv[0], not conv[1]]
    it = passes = 0
    while any(act) and it < max_iter:
        run = [s for s in range(2) if act[s]]
        if len(run) == 2:
            A = DG[:, None] * P - xmv(P)  # XMV_TILE_PAIR2: both directions in one pass
        else:
            A = np.zeros_like(P)
            A[:, run[0]] = DG * P[:, run[0]] - xmv(P[:, run[0]])
        passes += 1
        pa = np.einsum("ij,ij->j", P, A)
        alpha = np.zeros(2)
        for s in run:
            if not (pa[s] > 0 and np.isfinite(pa[s])):  # breakdown: this system stops, not counted
                act[s] = False
                its[s] = it
            else:
                alpha[s] = rz[s] / pa[s]
        run = [s for s in range(2) if act[s]]
        if not run:
            break
        for s in run:
            X[:, s] += alpha[s] * P[:, s]
            R[:, s] -= alpha[s] * A[:, s]
        it += 1
        beta = np.zeros(2)
        for s in run:
            rz_new = float(R[:, s] @ (R[:, s] * DI))
            rr[s] = float(R[:, s] @ R[:, s])
            if rr[s] <= thr[s] or not np.isfinite(rr[s]):
                conv[s] = bool(rr[s] <= thr[s])
                act[s] = False
                its[s] = it
            else:
                beta[s] = rz_new / rz[s]
                rz[s] = rz_new
        for s in range(2):
            if act[s]:
                P[:, s] = R[:, s] * DI + beta[s] * P[:, s]
    for s in range(2):
        if act[s]:  # stopped by max_iter
            its[s] = it
    res = [float(np.sqrt(rr[s] / bb[s])) if bb[s] > 0 else 0.0 for s in range(2)]
    return X[:, 0].copy(), X[:, 1].copy(), its, res, conv, passes


def gradient_rows(
    rows: dict, hdr: np.ndarray, g1: int, g2: int, X: np.ndarray, Y: np.ndarray, node_labels: dict,
    edge_labels: dict, node_kernel: Any, edge_kernel: Any, d: np.ndarray, q: np.ndarray,
) -> np.ndarray:  # fmt: skip
    """dK/dh of a pair from x (``X``) and y (``Y``) in the blocked layout, computed like
    ``grad_contraction`` (mgk_gradient.cuh): node and q terms entry by entry, edge terms along
    the row-pair walk of every output (lane mapping (x, u), (7 - x, 7 - u)). Columns: node
    hyperparameters, edge hyperparameters, q (from the per-node q of both graphs)."""
    n1, nt1, o1 = (int(v) for v in hdr[g1, :3])
    n2, nt2, o2 = (int(v) for v in hdr[g2, :3])
    r1, r2 = int(hdr[g1, 4]), int(hdr[g2, 4])
    nn, ne = len(node_kernel.hyperparameters), len(edge_kernel.hyperparameters)
    g = np.zeros(nn + ne + 1)
    i, i2, real = _entries(nt1, nt2, n1, n2)
    u1, u2 = o1 + i[real], o2 + i2[real]
    la = {f: a[u1] for f, a in node_labels.items()}
    lb = {f: a[u2] for f, a in node_labels.items()}
    v = np.maximum(np.broadcast_to(node_kernel(la, lb), u1.shape), 1e-30)
    dd = d[u1] * d[u2]
    xv, yv = X[real], Y[real]
    w = yv * xv * dd / (v * v)
    for h, dv in enumerate(node_kernel.gradient(la, lb) if nn else []):
        g[h] = float(np.sum(w * np.broadcast_to(dv, w.shape)))
    q1, q2 = q[u1], q[u2]
    dD = dd * (1.0 / (1.0 - q1) + 1.0 / (1.0 - q2))
    g[-1] = float(np.sum(yv * (dD * q1 * q2 + dd * (q1 + q2) - dD / v * xv)))
    rp, coff, wt = rows["rrowptr"], rows["rcoff"], rows["rweight"]
    for tp in range(nt1 * nt2):
        I, I2 = divmod(tp, nt2)
        for lane in range(32):
            rx, ru = lane >> 3, lane & 7
            for x, u in ((rx, ru), (7 - rx, 7 - ru)):
                a0, a1 = int(rp[r1 + I * 8 + x]), int(rp[r1 + I * 8 + x + 1])
                b0, b1 = int(rp[r2 + I2 * 8 + u]), int(rp[r2 + I2 * 8 + u + 1])
                if a0 == a1 or b0 == b1:
                    continue
                ka, kb = np.arange(a0, a1)[:, None], np.arange(b0, b1)[None, :]
                ca, cb = coff[ka].astype(np.int64), coff[kb].astype(np.int64)
                col = (((ca >> 6) * nt2) << 6) + ((ca & 7) << 3) + cb
                cx = wt[ka].astype(np.float64) * wt[kb].astype(np.float64) * X[col]
                e1 = {f: a[ka] for f, a in edge_labels.items()}
                e2 = {f: a[kb] for f, a in edge_labels.items()}
                yo = Y[(tp << 6) + x * 8 + u]
                for h, de in enumerate(edge_kernel.gradient(e1, e2)):
                    g[nn + h] += yo * float(np.sum(cx * np.broadcast_to(de, cx.shape)))
    return g


def solve_pair_blocked(
    rows: dict, hdr: np.ndarray, g1: int, g2: int, node_labels: dict, edge_labels: dict, node_kernel: Any,
    edge_kernel: Any, d: np.ndarray, p: np.ndarray, q: np.ndarray, rtol: float = 1e-12, max_iter: int = 10_000,
    gradient: bool = True,
) -> dict:  # fmt: skip
    """One job of ``mgk_solve`` (gradient or nodal configuration) in numpy: the value PCG (nodal), or
    the joint PCG of x and the adjoint y (:func:`pcg2_blocked`) and :func:`gradient_rows`. Returns k,
    x (blocked), iterations, residual, converged (the worse of the two solves) and, with
    ``gradient``, y, grad, ``iterations_xy`` (per system) and ``passes`` (XMV passes)."""

    def ke(e1: dict, e2: dict) -> np.ndarray:
        return edge_kernel(e1, e2)

    def xmv(P: np.ndarray) -> np.ndarray:
        return xmv_rows(rows, hdr, g1, g2, P, edge_labels, ke)

    DG, b, px, _ = system_blocked(hdr, g1, g2, node_labels, node_kernel, d, p, q)
    if not gradient:
        X, it, res, conv = pcg_blocked(DG, b, xmv, rtol, max_iter)
        return {"k": float(px @ X), "x": X, "iterations": it, "residual": res, "converged": conv}
    X, Y, its, res2, conv2, passes = pcg2_blocked(DG, b, px, xmv, rtol, max_iter)
    out = {"k": float(px @ X), "x": X, "y": Y, "iterations": max(its), "residual": max(res2),
           "converged": all(conv2), "iterations_xy": its, "passes": passes}  # fmt: skip
    out["grad"] = gradient_rows(rows, hdr, g1, g2, X, Y, node_labels, edge_labels, node_kernel, edge_kernel, d, q)
    return out


def _columns(cols: np.ndarray, h_out: int, n_grad: int) -> np.ndarray:
    """``mgk_assemble.cu``'s column(): cols[h], or the last of the n_grad columns where cols[h] < 0."""
    c = np.asarray(cols[:h_out], dtype=np.int64)
    return np.where(c < 0, n_grad - 1, c)


def gram_diagonal(
    vals: np.ndarray, grads: np.ndarray, dslot: np.ndarray, cols: np.ndarray, n: int, n_grad: int, h_out: int,
    normalize: int, kdiag: np.ndarray, root: np.ndarray, ratio: np.ndarray,
) -> None:  # fmt: skip
    """``gram_diagonal`` of ``mgk_assemble.cu`` in numpy (same arguments; writes kdiag, root, ratio)."""
    t = np.asarray(dslot[:n], dtype=np.int64)
    kd = vals[t]
    kdiag[:n] = kd
    root[:n] = np.sqrt(kd) if normalize else 1.0
    if h_out:
        rows = grads[: (int(t.max(initial=0)) + 1) * n_grad].reshape(-1, n_grad)[t][:, _columns(cols, h_out, n_grad)]
        ratio[: n * h_out] = (rows / kd[:, None] if normalize else np.zeros_like(rows)).reshape(-1)


def gram_assemble(
    vals: np.ndarray, iters: np.ndarray, res: np.ndarray, conv: np.ndarray, grads: np.ndarray, slot_i: np.ndarray,
    slot_j: np.ndarray, cols: np.ndarray, scale: np.ndarray, root: np.ndarray, ratio: np.ndarray, n_slots: int,
    n: int, n_grad: int, h_out: int, normalize: int, K: np.ndarray, dK: np.ndarray, I: np.ndarray, R: np.ndarray,
    C: np.ndarray, counts: np.ndarray,
) -> None:  # fmt: skip
    """``gram_assemble`` of ``mgk_assemble.cu`` in numpy, the same operations per slot (no contraction of a
    multiply-add: IEEE results equal to the kernel's); writes K, dK, I, R, C (flat, n × n [× h_out]) and
    adds to counts."""
    S = int(n_slots)
    i, j = np.asarray(slot_i[:S], dtype=np.int64), np.asarray(slot_j[:S], dtype=np.int64)
    ij, ji = i * n + j, j * n + i
    v = vals[:S]
    s = root[i] * root[j]
    kn = v / s if normalize else v.copy()
    finite = np.isfinite(v)
    for a, x in ((K, kn), (I, iters[:S]), (R, res[:S]), (C, ((conv[:S] != 0) & finite).astype(np.uint8))):
        a[ij] = x
        a[ji] = x
    g = grads[: S * n_grad].reshape(S, n_grad)[:, _columns(cols, h_out, n_grad)]
    bad = int(np.count_nonzero(~np.isfinite(g)))
    if normalize:
        rt = ratio[: n * h_out].reshape(n, h_out)
        g = g / s[:, None] - (0.5 * kn)[:, None] * (rt[i] + rt[j])
    g = g * scale[:h_out]
    out = dK[: n * n * h_out].reshape(n * n, h_out)
    out[ij] = g
    out[ji] = g
    counts[0] += bad
    counts[1] += int(np.count_nonzero(~finite))
