"""Warp-per-pair solver for tiny pairs (``mgk_tiny.cu``): molecules of up to ~64 atoms.

Not an XMV strategy of its own (it is not registered: ``xmv`` still names the XMV fragment,
"rows" or "octile", spliced in unchanged) but a launch variant of the per-block path: every
WARP of a block solves its own pair, with warp-shuffle reductions and no block barrier,
where the per-block kernel spends a whole block (and ``__syncthreads`` per CG step) on a
few hundred product unknowns. The float64 Jacobi-preconditioned CG, the blocked layout and
the stopping rule are those of ``mgk_solver.cu``; the search direction P of each warp lives
in shared memory, the lane-private W, R, DG, DI and A in global scratch. No solution vector is
kept: K = w^T x = sum_k alpha_k (w^T p_k) with w the products of start probabilities, the dot
product w^T p_k reduced with p^T A p in each iteration.

:class:`mgkflow.gpu.backend.GPUBackend` routes pairs to it with ``tiny="warp"``: the
planner (:func:`mgkflow.gpu.plan.plan_launches`, ``warp_bins``) puts the pairs of at most
``tiny_max_unknowns`` (<= ``TINY_WARP_UNKNOWNS``) product unknowns into size bins
(:func:`warp_bins`), one launch each, so that a bin's shared memory per warp follows its
largest pair.

:func:`tiny_source` generates the CUDA source, :func:`launch_layout` the shared memory and
scratch of a launch, :func:`emulate_launch` runs a launch in numpy (the fake-driver tests'
reference: same algorithm, same float32 storage of A and of the coefficients).

Examples
--------
>>> from mgkflow.kernels import Constant
>>> from mgkflow.gpu.source import make_config
>>> src = tiny_source(make_config(Constant(1.0), Constant(1.0)), warps=4)
>>> "mgk_solve_tiny" in src and "${" not in src and "#define WARPS 4" in src
True
>>> launch_layout(1024, warps=4, a_bytes=4)
(32768, 4608)
"""

from __future__ import annotations

from string import Template
from typing import Any

import numpy as np

__all__ = [
    "TINY_WARP_UNKNOWNS", "WARP_BINS", "DEFAULT_WARPS", "KERNEL", "warp_bins", "tiny_source", "launch_layout",
    "emulate_launch",
]  # fmt: skip

#: Kernel name in ``mgk_tiny.cu``.
KERNEL = "mgk_solve_tiny"
#: Largest product size (unknowns) routed to the warp-per-pair kernel: 64 tile pairs, i.e.
#: two graphs of 64 nodes (P: 32 KiB of shared memory per warp).
TINY_WARP_UNKNOWNS = 64 * 64
#: Upper bounds (unknowns) of the launch bins of the warp-per-pair kernel.
WARP_BINS = (256, 1024, 2048, TINY_WARP_UNKNOWNS)
#: Warps (pairs in flight) per block.
DEFAULT_WARPS = 4


def warp_bins(max_unknowns: int = TINY_WARP_UNKNOWNS) -> tuple[int, ...]:
    """The launch bins (upper bounds in unknowns) for pairs of at most ``max_unknowns`` unknowns.

    Examples
    --------
    >>> warp_bins(2048), warp_bins(1536)
    ((256, 1024, 2048), (256, 1024, 1536))
    """
    return tuple(b for b in WARP_BINS if b < max_unknowns) + (int(max_unknowns),)


def tiny_source(config: Any, warps: int = DEFAULT_WARPS, min_blocks: int = 1) -> str:
    """CUDA source of the warp-per-pair solver for a :class:`mgkflow.gpu.source.KernelConfig`
    (its XMV fragment, label fields, kernels, storage types; ``block`` and ``p_smem`` are not used)."""
    from ..source import coef_expr, label_macros, template_text
    from . import get

    if not 1 <= int(warps) <= 32:
        raise ValueError(f"warps must lie in [1, 32], got {warps}")
    strategy = get(config.xmv)
    return Template(template_text("mgk_tiny.cu")).substitute(
        XMV_FRAGMENT=template_text(strategy.fragment),
        XMV_PARAMS=strategy.c_params(),
        WARPS=str(int(warps)),
        DEFINES=label_macros(config),
        PRIMITIVES=template_text("octile_primitives.cuh"),
        NODE_KERNEL=config.node_expr,
        EDGE_KERNEL=config.edge_expr,
        A_TYPE="double" if config.a_double else "float",
        W_TYPE="double" if config.weight_double else "float",
        MIN_BLOCKS=str(int(min_blocks)),
        ADAPTIVE="1" if config.adaptive else "0",
        ROW_ILP=str(config.row_ilp),
        COEF=coef_expr(config),
    )


def launch_layout(n_max: int, warps: int = DEFAULT_WARPS, a_bytes: int = 4) -> tuple[int, int]:
    """(dynamic shared memory bytes per block, global scratch doubles per warp) of a launch whose
    largest pair has ``n_max`` product unknowns (P per warp in shared memory; W, R, DG, DI and A
    per warp in global memory)."""
    n_max = int(n_max)
    return warps * n_max * 8, 4 * n_max + (n_max * int(a_bytes) + 7) // 8


# ---------------------------------------------------------------------------------------- emulation
def _decode(words: np.ndarray, fields: tuple, stride: int) -> dict[str, np.ndarray]:
    out = {}
    for k, (f, ct) in enumerate(fields):
        w = np.asarray(words[k * stride : (k + 1) * stride])
        out[f] = w.view(np.int32).astype(np.int64) if ct == "int" else w.view(np.float32).astype(np.float64)
    return out


def _product_matrix(kw: dict, g1: int, g2: int, config: Any, edge_kernel: Any) -> tuple[Any, int, tuple]:
    """Sparse (A1 ∘ A2 ∘ E) in the blocked layout of a pair, coefficients rounded like COEF."""
    import scipy.sparse as sp

    hdr = kw["hdr"].reshape(-1, 5)
    rp, coff, w = kw["rrowptr"], kw["rcoff"], kw["rweight"]
    elab = _decode(kw["relab"], config.edge_fields, int(kw["relab_stride"]))

    def nonzeros(g: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        nt, off = int(hdr[g, 1]), int(hdr[g, 4])
        ptr = rp[off : off + nt * 8 + 1].astype(np.int64)
        ks = np.arange(ptr[0], ptr[-1])
        rows = np.repeat(np.arange(nt * 8), np.diff(ptr))
        c = coff[ks].astype(np.int64)
        cols = (c >> 6) * 8 + (c & 7)  # blocked column offset -> node index
        return ks, rows, cols

    nt1, nt2 = int(hdr[g1, 1]), int(hdr[g2, 1])
    ka, ra, ca = nonzeros(g1)
    kb, rb, cb = nonzeros(g2)
    N = nt1 * nt2 * 64
    if ka.size == 0 or kb.size == 0:
        return sp.csr_matrix((N, N)), N, (nt1, nt2)
    e1 = {f: v[ka][:, None] for f, v in elab.items()}
    e2 = {f: v[kb][None, :] for f, v in elab.items()}
    ke = np.broadcast_to(np.asarray(edge_kernel(e1, e2)), (ka.size, kb.size))
    w1, w2 = w[ka][:, None], w[kb][None, :]
    if config.weight_double:
        coef = w1.astype(np.float64) * w2 * ke.astype(np.float32).astype(np.float64)
    else:
        coef = (w1.astype(np.float32) * w2.astype(np.float32) * ke.astype(np.float32)).astype(np.float64)

    def blocked(i: np.ndarray, i2: np.ndarray) -> np.ndarray:
        return (((i // 8) * nt2 + i2 // 8) << 6) + (i % 8) * 8 + i2 % 8

    rows = blocked(ra[:, None], rb[None, :]).ravel()
    cols = blocked(ca[:, None], cb[None, :]).ravel()
    return sp.csr_matrix((coef.ravel(), (rows, cols)), shape=(N, N)), N, (nt1, nt2)


def emulate_launch(kw: dict, config: Any, node_kernel: Any, edge_kernel: Any) -> None:
    """Run one ``mgk_solve_tiny`` launch in numpy on the bound arguments ``kw`` (parameter name ->
    numpy view of the device array or scalar): every job's K, iterations, residual and flag are
    written to ``out_k``, ``out_iter``, ``out_res``, ``out_conv`` (job order), like the kernel
    (K accumulated as the sum of alpha_k w^T p_k, no solution vector)."""
    hdr = kw["hdr"].reshape(-1, 5)
    nlab = _decode(kw["nlab"], config.node_fields, int(kw["nlab_stride"]))
    d, q, pv = kw["dvec"], kw["qvec"], kw["pvec"]
    a_dt = np.float64 if config.a_double else np.float32
    rtol, max_iter = float(kw["rtol"]), int(kw["max_iter"])
    jobs = kw["jobs"][: 2 * int(kw["n_jobs"])].reshape(-1, 2)
    for jb, (g1, g2) in enumerate(jobs):
        M, N, (nt1, nt2) = _product_matrix(kw, int(g1), int(g2), config, edge_kernel)
        idx = np.arange(N)
        tp, e = idx >> 6, idx & 63
        i, i2 = (tp // nt2) * 8 + (e >> 3), (tp % nt2) * 8 + (e & 7)
        n1, n2 = int(hdr[g1, 0]), int(hdr[g2, 0])
        real = (i < n1) & (i2 < n2)
        u1, u2 = int(hdr[g1, 2]) + i, int(hdr[g2, 2]) + i2
        dg, b = np.ones(N), np.zeros(N)
        if real.any():
            kv = np.broadcast_to(
                np.asarray(node_kernel({f: v[u1[real]] for f, v in nlab.items()},
                                       {f: v[u2[real]] for f, v in nlab.items()})), (int(real.sum()),)
            ).astype(np.float32)  # fmt: skip
            kv = np.maximum(kv, np.float32(1e-30)).astype(np.float64)
            dd = d[u1[real]] * d[u2[real]]
            dg[real] = dd / kv
            b[real] = dd * q[u1[real]] * q[u2[real]]
        di = 1.0 / dg
        w = pv[u1] * pv[u2]  # padding has p = 0
        k, r, p = 0.0, b.copy(), b * di
        rz, bb = float(b @ (b * di)), float(b @ b)
        thr, rr, it, conv, broke = rtol * rtol * bb, bb, 0, bb <= rtol * rtol * bb, False
        while not conv and it < max_iter:
            a = (dg * p - M @ p).astype(a_dt).astype(np.float64)
            pa = float(p @ (dg * p - M @ p))
            if not (pa > 0.0) or not np.isfinite(pa):
                broke = True
                break
            alpha = rz / pa
            k += alpha * float(w @ p)
            r = r - alpha * a
            z = r * di
            rz_new, rr = float(r @ z), float(r @ r)
            it += 1
            if rr <= thr:
                conv = True
                break
            if not np.isfinite(rr):
                broke = True
                break
            p = z + (rz_new / rz) * p
            rz = rz_new
        kw["out_k"][jb] = k
        kw["out_iter"][jb] = it
        kw["out_res"][jb] = np.sqrt(rr / bb) if bb > 0 else 0.0
        kw["out_conv"][jb] = int(conv and not broke and np.isfinite(k))
    kw["job_counter"][0] = len(jobs)
