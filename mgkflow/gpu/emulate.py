"""Pure-numpy emulation of the GPU solver's octile XMV and blocked vector layout.

Mirrors ``mgk_solver.cu`` loop for loop (tile-row pointers, bitmaps, compact
offsets, set-bit iteration), so the indexing of the format and of the kernel can be
checked on machines without a GPU. Slow: for tests on small graphs only.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..format.octile import OctileBatch

__all__ = ["blocked_index", "xmv_blocked", "xmv_rows", "to_blocked", "from_blocked"]


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

    ``rows`` is :func:`mgkflow.format.rows.row_arrays` output, ``hdr`` the (G, 5) graph
    headers (n, nt, node_off, rowptr_off, rrow_off); ``edge_labels`` the row-order labels
    by field (concatenated like ``rows``).
    """
    nt1, nt2 = int(hdr[g1, 1]), int(hdr[g2, 1])
    o1, o2 = int(hdr[g1, 4]), int(hdr[g2, 4])
    rp, coff, w = rows["rrowptr"], rows["rcoff"], rows["rweight"]
    y = np.zeros(nt1 * nt2 * 64)

    def ke(t1: int, t2: int) -> float:
        if edge_kernel is None:
            return 1.0
        e1 = {f: v[t1] for f, v in edge_labels.items()}
        return float(edge_kernel(e1, {f: v[t2] for f, v in edge_labels.items()}))

    def row_pair(a0: int, a1: int, b0: int, b1: int) -> float:
        acc = 0.0
        for ka in range(a0, a1):
            ca = int(coff[ka])
            base = (((ca >> 6) * nt2) << 6) + ((ca & 7) << 3)
            for kb in range(b0, b1):
                acc += float(w[ka]) * float(w[kb]) * ke(ka, kb) * p[base + int(coff[kb])]
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
