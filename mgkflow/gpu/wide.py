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

from ..format.staged import DEFAULT_SLOTS, StagedG2, staged_g2
from .source import KernelConfig, coef_expr, label_macros, template_text

__all__ = [
    "WIDE_BLOCK", "KERNEL_ARGS", "WIDE_XMVS", "STAGED_MIN_Q", "wide_source", "compile_wide", "wide_pcg",
    "solve_pair_wide", "staged_macros",
]  # fmt: skip

#: Default threads per block of the wide kernels.
WIDE_BLOCK = 256
#: N-sized float64 vectors the wide solver keeps on the device: X, R, P, A, DG, DI.
N_VECTORS = 6
#: Kernels of ``mgk_wide.cu`` and their parameter kinds, in order:
#: "P" pointer, "i" int32, "q" int64 (long long), "d" double.
KERNEL_ARGS: dict[str, str] = {
    "wide_init": "PqPPiiiiiqPPPPPPP",
    "wide_xmv": "PPPPqiiiiPPPPP",
    "wide_xmv_staged": "PPPPPPqiPiPPPPPqiiPPPPP",
    "wide_update": "qdPPPPPP",
    "wide_direction": "qdPPP",
    "wide_dot": "PiiiiiqPP",
}

#: XMV kernels of the wide solver: "rows" (``wide_xmv``: row pairs through L1) and "staged"
#: (``wide_xmv_staged``: G2 nonzeros in registers, P slices in shared memory, float32 products;
#: see :mod:`mgkflow.format.staged`); "auto" picks "staged" for labeled edge kernels at
#: q >= :data:`STAGED_MIN_Q`.
WIDE_XMVS = ("auto", "rows", "staged")
#: Smallest stop probability at which "auto" takes the staged XMV: its float32 products (P,
#: weights and coefficients rounded to float32) cost ~eps32 / q of relative accuracy in K.
STAGED_MIN_Q = 0.01

_modules: dict[tuple, Any] = {}


def _float_literal(x: float) -> str:
    return f"{float(np.float32(x)):.9g}f"


def staged_macros(config: KernelConfig) -> str:
    """``#define`` lines of the staged XMV's label handling for ``config``.

    ``STAGE_E1(r, idx)`` copies the label words of compact G1 entry ``idx`` to shared slot
    ``r``; ``G1_E(k)`` / ``G2_E(sl)`` declare ``e1_<f>`` / ``e2_<f>`` of staged entry ``k`` /
    register slot ``sl``; ``SLOT_LOAD_E2(sl, ix)`` loads slot ``sl`` from the tables;
    ``SE_E1_SCALED(idx)`` / ``SLOT_E2_SCALED(ix)`` (SquareExponential fast path) are a G1 entry's
    / a slot's label times SE_SIGMA.

    Examples
    --------
    >>> from mgkflow.gpu.source import make_config
    >>> from mgkflow.kernels import Constant, SquareExponential
    >>> "SE_SIGMA" in staged_macros(make_config(Constant(1.0), SquareExponential(1.0, "d")))
    True
    """
    fields = config.edge_fields

    def as_value(word: str, ct: str) -> str:
        return f"(float)(int)({word})" if ct == "int" else f"__uint_as_float({word})"

    if se_fast_path(config):
        ct = fields[0][1]
        return "\n".join(
            [
                "#define STAGE_E1(r_, idx_)",
                f"#define SE_E1_SCALED(idx_) ({as_value('elab[(long long)(idx_)]', ct)} * SE_SIGMA)",
                "#define G1_E(k_)",
                "#define SLOT_LOAD_E2(sl_, ix_)",
                "#define G2_E(sl_)",
                f"#define SLOT_E2_SCALED(ix_) ({as_value('slot_lab[(ix_)]', ct)} * SE_SIGMA)",
            ]
        )
    stage, g1, load, g2 = [], [], [], []
    for k, (_, ct) in enumerate(fields):
        stage.append(f"s_e1[{k} * 64 + (r_)] = elab[(long long){k} * elab_stride + (long long)(idx_)];")
        w1 = f"s_e1[{k} * 64 + (k_)]"
        g1.append(f"const int e1_{k} = (int)({w1});" if ct == "int" else f"const float e1_{k} = __uint_as_float({w1});")
        load.append(f"e2w[{k}][sl_] = active ? slot_lab[(long long){k} * STAGED_SLOTS * slot_stride + (ix_)] : 0u;")
        w2 = f"e2w[{k}][sl_]"
        g2.append(f"const int e2_{k} = (int)({w2});" if ct == "int" else f"const float e2_{k} = __uint_as_float({w2});")
    return "\n".join(
        [
            "#define STAGE_E1(r_, idx_) " + " ".join(stage),
            "#define G1_E(k_) " + " ".join(g1),
            "#define SLOT_LOAD_E2(sl_, ix_) " + " ".join(load),
            "#define G2_E(sl_) " + " ".join(g2),
            "#define SE_E1_SCALED(idx_) 0.0f",
            "#define SLOT_E2_SCALED(ix_) 0.0f",
        ]
    )


def se_fast_path(config: KernelConfig) -> bool:
    """Whether the staged XMV folds the weight into exp2 (a lone SquareExponential edge kernel)."""
    return config.edge_se > 0.0 and len(config.edge_fields) == 1


def wide_source(
    config: KernelConfig,
    block: int = WIDE_BLOCK,
    row_ilp: int | None = None,
    slots: int = DEFAULT_SLOTS,
    min_blocks: int | None = None,
) -> str:
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
    slots : int
        Register slots per thread of the staged XMV (``wide_xmv_staged``).
    min_blocks : int, optional
        Resident blocks per SM the staged XMV's registers must allow (``__launch_bounds__``);
        default 1024 // block up to 8 slots (4 blocks of 256 threads: 64 registers, no spills),
        else 768 // block.

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
        STAGED_SLOTS=str(int(slots)),
        STAGED_MIN_BLOCKS=str(max(1, min_blocks or (1024 if slots <= 8 else 768) // block)),
        STAGED_NFE=str(max(1, len(config.edge_fields))),
        STAGED_LABELS="1" if config.edge_fields else "0",
        SE_LOGW="1" if se_fast_path(config) else "0",
        SE_SIGMA=_float_literal(config.edge_se),
        STAGED_EDGE_KERNEL=config.edge_expr.replace("exp2f(", "mgk_ex2("),
        STAGED_DEFINES=staged_macros(config),
    )


def _check_block(block: int) -> int:
    block = int(block)
    if block % 32 or not 32 <= block <= 1024:
        raise ValueError(f"block must be a multiple of 32 in [32, 1024], got {block}")
    return block


def compile_wide(
    config: KernelConfig,
    block: int = WIDE_BLOCK,
    fast_math: bool = False,
    module_cache: dict | None = None,
    slots: int = DEFAULT_SLOTS,
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
        Cache of compiled modules keyed by (config key, arch, block, slots, fast_math); default
        a process-wide cache of this module. (``config.key`` covers ``row_ilp``.)
    slots : int
        Register slots per thread of the staged XMV.

    Returns
    -------
    pycuda.compiler.SourceModule
    """
    from .backend import build_module

    block = _check_block(block)
    return build_module(
        lambda: wide_source(config, block, slots=slots),
        ("wide", config.key, block, int(slots)),
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
    xmv: str = "auto",
    slots: int = DEFAULT_SLOTS,
    workspace: dict | None = None,
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
        "regs_xmv", "launches" (per kernel), "bytes" (device memory of the solve), "xmv"
        (the XMV kernel used) and, for the staged XMV, "staged_groups", "staged_fill" and
        "smem" (dynamic shared memory per block).
    xmv : {"auto", "rows", "staged"}
        XMV kernel (see :data:`WIDE_XMVS`): "auto" uses "staged" for labeled edge kernels at
        q >= :data:`STAGED_MIN_Q` unless a tile row of G2 does not fit one block's slots (then
        "rows"); "staged" raises where it does not apply.
    slots : int
        Register slots per thread of the staged XMV.
    workspace : dict, optional
        Keeps the device vectors between calls (reused while large enough, else replaced):
        a caller solving many wide pairs passes the same dict; default: allocated per call.

    Returns
    -------
    value, iterations, rel_residual, converged : float, int, float, bool
        The same figures as the per-pair solver (``converged`` False on breakdown, at the
        iteration limit or when K is not finite).

    Raises
    ------
    MemoryError
        When the six product vectors do not fit in free device memory.
    ValueError
        ``xmv="staged"`` where the staged XMV does not apply.
    """
    import pycuda.driver as cuda

    if xmv not in WIDE_XMVS:
        raise ValueError(f"xmv must be one of {WIDE_XMVS}, got {xmv!r}")
    mod = compile_wide(config, block, fast_math, module_cache, slots)
    return _solve(cuda, mod, db, g1, g2, rtol, max_iter, _check_block(block), blocks_per_sm, stats, config, xmv,
                  int(slots), workspace)  # fmt: skip


def _staged_tables(cuda: Any, db: Any, g: int, config: KernelConfig, block: int, slots: int) -> tuple[StagedG2, dict]:
    """Host and device staged tables of graph ``g`` of the batch as G2 (cached on ``db``)."""
    cache = db.staged
    key = (int(g), tuple(f for f, _ in config.edge_fields), int(block), int(slots))
    hit = cache.get(key)
    if hit is None:
        t = staged_g2(db.batch.graph(int(g)), [f for f, _ in config.edge_fields], slots=slots, block=block)
        dev = {
            "groups": cuda.to_device(np.ascontiguousarray(t.groups, dtype=np.int32)),
            "colset": cuda.to_device(np.concatenate([t.colset, np.zeros(1, np.int32)])),
            "row_thread": cuda.to_device(np.concatenate([t.row_thread, np.zeros(1, np.int32)])),
            "slot_col": cuda.to_device(np.concatenate([t.slot_col.ravel(), np.zeros(1, np.int32)])),
            "slot_w": cuda.to_device(np.concatenate([t.slot_weight.ravel(), np.zeros(1, np.float32)])),
            "slot_lab": cuda.to_device(np.concatenate([t.slot_labels.ravel(), np.zeros(1, np.uint32)])),
        }
        hit = cache[key] = (t, dev)
    return hit


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
    config: KernelConfig | None = None,
    xmv: str = "rows",
    slots: int = DEFAULT_SLOTS,
    workspace: dict | None = None,
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
    n1, nt1, off1, ro1, rro1 = (int(v) for v in hdr[g1])
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

    # ---- staged XMV: G2 tables, shared memory, grid
    staged = None
    if xmv != "rows":
        qv = np.asarray(db.batch.q)
        q_min = float(min(qv[off1 : off1 + n1].min(), qv[off2 : off2 + n2].min()))
        why = ""
        if config is None:
            why = "no kernel configuration given"
        elif xmv == "auto" and not config.edge_fields:
            # constant edge kernel: the float64 row XMV reaches the exact (constant) solution of the
            # unlabeled system in one iteration; float32 products would not
            why = "the edge kernel reads no label"
        elif xmv == "auto" and q_min < STAGED_MIN_Q:
            why = f"q = {q_min:g} < {STAGED_MIN_Q:g} (float32 products lose ~eps32 / q of accuracy)"
        else:
            try:
                staged = _staged_tables(cuda, db, g2, config, block, slots)
            except ValueError as exc:
                why = str(exc)
        if why and xmv == "staged":
            raise ValueError(f"the staged XMV does not apply to pair ({g1}, {g2}): {why}")
    if staged is not None:
        st_host, st_dev = staged
        f_xmv = mod.get_function("wide_xmv_staged")
        n_groups = st_host.n_groups
        n_tasks = nt1 * n_groups
        # 8 partial sums (double) per thread, then the P slice (8 rows x 8 * ncol floats)
        smem = 64 * block + 256 * max(st_host.max_cols, 1)
        if smem > 48 * 1024:
            f_xmv.set_attribute(cuda.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, smem)
        smem_per_sm = int(dev.get_attribute(A_.MAX_SHARED_MEMORY_PER_MULTIPROCESSOR))
        regs = max(int(f_xmv.num_regs), 1)
        regs_per_block = ((regs * 32 + 255) // 256) * 256 * warps
        per_sm = min(regs_per_sm // max(regs_per_block, 1), threads_per_sm // block,
                     smem_per_sm // (smem + int(getattr(f_xmv, "shared_size_bytes", 0)) + 1024), 32)  # fmt: skip
        grid_xmv = _grid_size(n_sm, max(1, per_sm), n_tasks)

    # ---- device memory
    vec_bytes = 8 * N
    n_part = max(grid_vec, grid_xmv)
    need = N_VECTORS * vec_bytes + 16 * n_part + 4
    ws = workspace if workspace is not None else {}
    if ws.get("vec_bytes", -1) >= vec_bytes and ws.get("n_part", -1) >= n_part:
        X, R, P, Av, DG, DI, part, counter = ws["buffers"]  # the previous solve's, large enough
    else:
        ws.clear()  # give the old buffers back first
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
            part = cuda.mem_alloc(16 * n_part)
            counter = cuda.mem_alloc(4)
        except oom as exc:
            raise MemoryError(f"{what}; allocation failed: {exc}") from exc
        ws.update(vec_bytes=vec_bytes, n_part=n_part, buffers=(X, R, P, Av, DG, DI, part, counter))

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
        if staged is None:
            f_xmv(
                *_args("wide_xmv", (a["rrowptr"], a["rcoff"], a["rweight"], a["relab"], db.relab_stride,
                                    rro1, rro2, nt2, n_tp, P, DG, Av, counter, part)),
                block=blk, grid=(grid_xmv, 1),
            )  # fmt: skip
        else:
            f_xmv(
                *_args("wide_xmv_staged", (a["rowptr"], a["tile_col"], a["bitmap"], a["toff"], a["weight"], a["elab"],
                                           db.elab_stride, ro1, st_dev["groups"], n_groups, st_dev["colset"],
                                           st_dev["row_thread"], st_dev["slot_col"], st_dev["slot_w"],
                                           st_dev["slot_lab"], st_host.n_threads, nt2, n_tasks, P, DG, Av, counter,
                                           part)),
                block=blk, grid=(grid_xmv, 1), shared=smem,
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
                "xmv": "rows" if staged is None else "staged",
            }
        )
        if staged is not None:
            stats.update({"staged_groups": n_groups, "staged_fill": st_host.fill(), "smem": smem})
    return result
