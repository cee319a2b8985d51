"""The "wide" GPU path: ONE graph pair solved with the whole device (``mgk_wide.cu``).

:class:`~mgkflow.gpu.backend.GPUBackend` gives each pair one thread block (the whole PCG
in one kernel). A single pair of large graphs (two 2,000-node proteins: a product system
of 4M unknowns) then runs on one SM. This module runs the same Jacobi PCG with the CG loop
on the host instead: per iteration three launches over the whole grid (XMV, update,
direction) and two 16-byte-per-block read-backs of partial sums; all product vectors are
float64 in global memory.

Importing this module does not import PyCUDA (:func:`wide_source` needs none); PyCUDA is
imported by :func:`solve_pair_wide` and :func:`compile_wide`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from string import Template
from typing import Any

import numpy as np

from .source import KernelConfig, coef_expr, label_macros, template_text

__all__ = ["WIDE_BLOCK", "KERNEL_ARGS", "wide_source", "compile_wide", "wide_pcg", "solve_pair_wide"]

#: Default threads per block of the wide kernels.
WIDE_BLOCK = 256
#: N-sized float64 vectors the wide solver keeps on the device: X, R, P, A, DG, DI.
N_VECTORS = 6
#: Kernels of ``mgk_wide.cu`` and their parameter kinds, in order:
#: "P" pointer, "i" int32, "q" int64 (long long), "d" double.
KERNEL_ARGS: dict[str, str] = {
    "wide_init": "PqPPiiiiiqPPPPPPP",
    "wide_xmv": "PPPPqiiiiPPPPP",
    "wide_update": "qdPPPPPP",
    "wide_direction": "qdPPP",
    "wide_dot": "PiiiiiqPP",
}

_modules: dict[tuple, Any] = {}


def wide_source(config: KernelConfig, block: int = WIDE_BLOCK, row_ilp: int | None = None) -> str:
    """The complete CUDA source of the wide solver for ``config``.

    Parameters
    ----------
    config : KernelConfig
        Base kernels, label fields and ``weight_double`` (``config.block``, ``a_double``,
        ``xmv``, ``adaptive`` and ``row_pack`` do not apply: the wide kernels use ``block``
        threads, keep every vector in float64 and always use the unpacked row-pair XMV).
    block : int
        Threads per block (a multiple of 32 in [32, 1024]).
    row_ilp : {1, 2}, optional
        Float64 accumulation chains per lane in ``row_pair``; default ``config.row_ilp``.

    Returns
    -------
    str
        CUDA C++ source with the extern "C" kernels of :data:`KERNEL_ARGS`.

    Examples
    --------
    >>> from mgkflow.kernels import Constant
    >>> from mgkflow.gpu.source import make_config
    >>> src = wide_source(make_config(Constant(1.0), Constant(1.0)))
    >>> "wide_xmv" in src and "${" not in src
    True
    """
    block = _check_block(block)
    ilp = int(getattr(config, "row_ilp", 1) if row_ilp is None else row_ilp)
    if ilp not in (1, 2):
        raise ValueError(f"row_ilp must be 1 or 2, got {ilp}")
    return Template(template_text("mgk_wide.cu")).substitute(
        BLOCK=str(block),
        ROW_ILP=str(ilp),
        DEFINES=label_macros(config),
        PRIMITIVES=template_text("octile_primitives.cuh"),
        NODE_KERNEL=config.node_expr,
        EDGE_KERNEL=config.edge_expr,
        W_TYPE="double" if config.weight_double else "float",
        COEF=coef_expr(config),
    )


def _check_block(block: int) -> int:
    block = int(block)
    if block % 32 or not 32 <= block <= 1024:
        raise ValueError(f"block must be a multiple of 32 in [32, 1024], got {block}")
    return block


def compile_wide(
    config: KernelConfig, block: int = WIDE_BLOCK, fast_math: bool = False, module_cache: dict | None = None
) -> Any:
    """Compile (or fetch from the cache) the wide solver module for ``config``.

    Parameters
    ----------
    config : KernelConfig
        See :func:`wide_source`.
    block : int
        Threads per block.
    fast_math : bool
        Compile with ``-use_fast_math``.
    module_cache : dict, optional
        Cache of compiled modules keyed by (config key, arch, block, fast_math); default a
        process-wide cache of this module. (``config.key`` covers ``row_ilp``.)

    Returns
    -------
    pycuda.compiler.SourceModule
    """
    from .backend import build_module

    block = _check_block(block)
    return build_module(
        lambda: wide_source(config, block),
        ("wide", config.key, block),
        fast_math,
        _modules if module_cache is None else module_cache,
    )


def wide_pcg(
    init: Callable[[], tuple[float, float]],
    xmv: Callable[[], float],
    update: Callable[[float], tuple[float, float]],
    direction: Callable[[float], None],
    dot: Callable[[], float],
    rtol: float,
    max_iter: int,
) -> tuple[float, int, float, bool]:
    """The host side of the wide PCG, step for step the loop of ``mgk_solver.cu``.

    Parameters
    ----------
    init : callable () -> (r.z, b.b)
        Set up DG, DI, X = 0, R = b, P = DI b.
    xmv : callable () -> p.a
        A = DG P - (A∘E) P.
    update : callable (alpha) -> (r.z, r.r)
        X += alpha P, R -= alpha A.
    direction : callable (beta) -> None
        P = DI R + beta P.
    dot : callable () -> K
        sum p1 p2 X over real entries.
    rtol : float
        Converged when r.r <= rtol^2 b.b (recursive residual).
    max_iter : int
        Iteration limit.

    Returns
    -------
    value, iterations, rel_residual, converged : float, int, float, bool
        ``converged`` is False on breakdown (p.a <= 0 or not finite, r.r not finite), at the
        iteration limit, and when K is not finite.
    """
    rz, bb = init()
    thr = rtol * rtol * bb
    rr = bb
    it = 0
    conv = rr <= thr
    broke = not math.isfinite(bb)
    while not conv and not broke and it < max_iter:
        pa = xmv()
        if not (pa > 0.0) or not math.isfinite(pa):  # breakdown: not SPD in finite precision
            broke = True
            break
        alpha = rz / pa
        rz_new, rr_new = update(alpha)
        it += 1
        rr = rr_new
        if rr <= thr:
            conv = True
            break
        if not math.isfinite(rr):
            broke = True
            break
        if not (rz > 0.0):  # cannot happen with DI > 0 and rr > thr; CUDA would divide by zero here
            broke = True
            break
        beta = rz_new / rz
        rz = rz_new
        direction(beta)
    k = dot()
    res = math.sqrt(rr / bb) if bb > 0.0 else 0.0
    return float(k), int(it), float(res), bool(conv and not broke and math.isfinite(k))


def _args(name: str, values: tuple) -> tuple:
    """Cast launch arguments to the kinds of :data:`KERNEL_ARGS` (PyCUDA packs numpy scalars by dtype)."""
    kinds = KERNEL_ARGS[name]
    if len(values) != len(kinds):
        raise TypeError(f"internal: {name} takes {len(kinds)} arguments, got {len(values)}")
    out = []
    for k, v in zip(kinds, values):
        if k == "i":
            if not -(2**31) <= int(v) < 2**31:
                raise OverflowError(f"internal: {name} int argument {v} out of int32 range")
            out.append(np.int32(v))
        elif k == "q":
            out.append(np.int64(v))
        elif k == "d":
            out.append(np.float64(v))
        else:
            if isinstance(v, int | float | np.number):
                raise TypeError(f"internal: {name} expects a device allocation, got {v!r}")
            out.append(v)
    return tuple(out)


def _grid_size(n_sm: int, per_sm: int, work_blocks: int) -> int:
    return int(max(1, min(n_sm * max(1, per_sm), work_blocks)))


def solve_pair_wide(
    db: Any,
    g1: int,
    g2: int,
    config: KernelConfig,
    rtol: float = 1e-7,
    max_iter: int = 10_000,
    block: int = WIDE_BLOCK,
    blocks_per_sm: int | None = None,
    module_cache: dict | None = None,
    fast_math: bool = False,
    stats: dict | None = None,
) -> tuple[float, int, float, bool]:
    """Solve one pair of a device batch with the whole GPU.

    Parameters
    ----------
    db : mgkflow.gpu.backend._DeviceBatch
        Batch uploaded by ``GPUBackend._device_batch(systems, config)`` (uses its arrays
        "hdr", "rrowptr", "rcoff", "rweight", "relab", "nlab", "d", "p", "q" and the strides).
    g1, g2 : int
        Graph indices in the batch (as in ``GPUBackend.solve``: ``j + yoff`` for ys).
    config : KernelConfig
        The configuration the batch was built for: its label fields and ``weight_double``
        (the dtype of the uploaded "rweight") must be those of the batch; not checked.
    rtol : float
        Converged when ||r|| <= rtol ||b|| (recursive residual, float64).
    max_iter : int
        CG iteration limit.
    block : int
        Threads per block of the wide kernels.
    blocks_per_sm : int, optional
        Resident blocks per SM to launch; default from the XMV kernel's registers.
    module_cache : dict, optional
        Cache of compiled modules (see :func:`compile_wide`).
    fast_math : bool
        Compile with ``-use_fast_math``.
    stats : dict, optional
        Filled with figures of the solve: sizes ("n1", "n2", "unknowns", "tile_pairs"),
        "device_s" (elapsed between events around the whole PCG, host round trips included),
        "host_s", "iterations", grids ("grid_vec", "grid_xmv", "block", "blocks_per_sm"),
        "regs_xmv", "launches" (per kernel) and "bytes" (device memory of the solve).

    Returns
    -------
    value, iterations, rel_residual, converged : float, int, float, bool
        The same figures as the per-pair solver (``converged`` False on breakdown, at the
        iteration limit or when K is not finite).

    Raises
    ------
    MemoryError
        When the six product vectors do not fit in free device memory.
    """
    import pycuda.driver as cuda

    mod = compile_wide(config, block, fast_math, module_cache)
    return _solve(cuda, mod, db, g1, g2, rtol, max_iter, _check_block(block), blocks_per_sm, stats)


def _solve(
    cuda: Any,
    mod: Any,
    db: Any,
    g1: int,
    g2: int,
    rtol: float,
    max_iter: int,
    block: int,
    blocks_per_sm: int | None,
    stats: dict | None,
) -> tuple[float, int, float, bool]:
    """:func:`solve_pair_wide` on a given driver module and compiled module (tests pass fakes)."""
    t_start = time.perf_counter()
    if not 0.0 < rtol < 1.0:
        raise ValueError(f"rtol must lie in (0, 1), got {rtol}")
    a = db.arrays
    G = int(len(db.nt))
    g1, g2 = int(g1), int(g2)
    if not (0 <= g1 < G and 0 <= g2 < G):
        raise IndexError(f"graph indices ({g1}, {g2}) out of range for a batch of {G} graphs")
    hdr = np.empty(5 * G, dtype=np.int32)
    cuda.memcpy_dtoh(hdr, a["hdr"])
    hdr = hdr.reshape(G, 5).astype(np.int64)
    if not np.array_equal(hdr[:, 1], np.asarray(db.nt, dtype=np.int64)):
        raise RuntimeError("internal: device graph headers do not match the batch's tile counts")
    n1, nt1, off1, _, rro1 = (int(v) for v in hdr[g1])
    n2, nt2, off2, _, rro2 = (int(v) for v in hdr[g2])
    n_tp = nt1 * nt2
    N = 64 * n_tp
    if stats is not None:
        stats.update({"n1": n1, "n2": n2, "unknowns": N, "tile_pairs": n_tp})
    if N == 0 or n1 == 0 or n2 == 0:
        return 0.0, 0, 0.0, True
    if n_tp > 2**31 - 2**24:  # tile pairs (and the XMV's tile-pair counter) are int32 on the device
        raise MemoryError(f"pair ({g1}, {g2}) of {n1} x {n2} nodes has {n_tp} tile pairs, beyond int32 indexing")

    f_init = mod.get_function("wide_init")
    f_xmv = mod.get_function("wide_xmv")
    f_update = mod.get_function("wide_update")
    f_dir = mod.get_function("wide_direction")
    f_dot = mod.get_function("wide_dot")

    # ---- launch geometry
    dev = cuda.Context.get_device()
    A_ = cuda.device_attribute
    n_sm = int(dev.get_attribute(A_.MULTIPROCESSOR_COUNT))
    threads_per_sm = int(dev.get_attribute(A_.MAX_THREADS_PER_MULTIPROCESSOR))
    regs_per_sm = int(dev.get_attribute(A_.MAX_REGISTERS_PER_MULTIPROCESSOR))
    warps = block // 32
    if blocks_per_sm is None:
        regs = max(int(f_xmv.num_regs), 1)
        regs_per_block = ((regs * 32 + 255) // 256) * 256 * warps
        blocks_per_sm = max(1, min(regs_per_sm // max(regs_per_block, 1), threads_per_sm // block, 32))
    blocks_per_sm = max(1, int(blocks_per_sm))
    vec_per_sm = max(1, threads_per_sm // block)
    grid_vec = _grid_size(n_sm, vec_per_sm, -(-N // block))
    grid_xmv = _grid_size(n_sm, blocks_per_sm, -(-n_tp // warps))

    # ---- device memory
    vec_bytes = 8 * N
    need = N_VECTORS * vec_bytes + 16 * max(grid_vec, grid_xmv) + 4
    free, _total = cuda.mem_get_info()
    what = (
        f"the wide solve of pair ({g1}, {g2}) ({n1} x {n2} nodes, {N} product unknowns with padding) needs "
        f"{need / 2**30:.2f} GiB of GPU memory for {N_VECTORS} float64 vectors"
    )
    if need > 0.95 * free:
        raise MemoryError(f"{what}, more than the {free / 2**30:.2f} GiB free")
    oom = getattr(cuda, "MemoryError", MemoryError)
    try:
        X, R, P, Av, DG, DI = (cuda.mem_alloc(vec_bytes) for _ in range(N_VECTORS))
        part = cuda.mem_alloc(16 * max(grid_vec, grid_xmv))
        counter = cuda.mem_alloc(4)
    except oom as exc:
        raise MemoryError(f"{what}; allocation failed: {exc}") from exc

    h_vec = np.empty(2 * grid_vec)
    h_xmv = np.empty(2 * grid_xmv)
    blk = (block, 1, 1)
    launches = {"init": 0, "xmv": 0, "update": 0, "direction": 0, "dot": 0}

    def partials(host: np.ndarray) -> tuple[float, float]:
        cuda.memcpy_dtoh(host, part)
        s = host.reshape(-1, 2).sum(axis=0)
        return float(s[0]), float(s[1])

    def init() -> tuple[float, float]:
        f_init(
            *_args("wide_init", (a["nlab"], db.nlab_stride, a["d"], a["q"], n1, n2, nt2, off1, off2, N,
                                 X, R, P, Av, DG, DI, part)),
            block=blk, grid=(grid_vec, 1),
        )  # fmt: skip
        launches["init"] += 1
        return partials(h_vec)

    def xmv() -> float:
        cuda.memset_d32(counter, 0, 1)
        f_xmv(
            *_args("wide_xmv", (a["rrowptr"], a["rcoff"], a["rweight"], a["relab"], db.relab_stride,
                                rro1, rro2, nt2, n_tp, P, DG, Av, counter, part)),
            block=blk, grid=(grid_xmv, 1),
        )  # fmt: skip
        launches["xmv"] += 1
        return partials(h_xmv)[0]

    def update(alpha: float) -> tuple[float, float]:
        f_update(*_args("wide_update", (N, alpha, X, R, P, Av, DI, part)), block=blk, grid=(grid_vec, 1))
        launches["update"] += 1
        return partials(h_vec)

    def direction(beta: float) -> None:
        f_dir(*_args("wide_direction", (N, beta, R, DI, P)), block=blk, grid=(grid_vec, 1))
        launches["direction"] += 1

    def dot() -> float:
        f_dot(
            *_args("wide_dot", (a["p"], n1, n2, nt2, off1, off2, N, X, part)),
            block=blk, grid=(grid_vec, 1),
        )  # fmt: skip
        launches["dot"] += 1
        return partials(h_vec)[0]

    start, stop = cuda.Event(), cuda.Event()
    start.record()
    result = wide_pcg(init, xmv, update, direction, dot, float(rtol), int(max_iter))
    stop.record()
    stop.synchronize()
    device_s = stop.time_since(start) * 1e-3
    if stats is not None:
        stats.update(
            {
                "device_s": device_s,
                "host_s": time.perf_counter() - t_start,
                "iterations": result[1],
                "grid_vec": grid_vec,
                "grid_xmv": grid_xmv,
                "block": block,
                "blocks_per_sm": blocks_per_sm,
                "regs_xmv": int(f_xmv.num_regs),
                "launches": dict(launches),
                "bytes": need,
            }
        )
    return result
