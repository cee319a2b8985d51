"""The "wide" GPU path: ONE graph pair solved with the whole device (``mgk_wide.cu``).

:class:`~mgkflow.gpu.backend.GPUBackend` gives each pair one thread block (the whole PCG
in one kernel). A single pair of large graphs (two 2,000-node proteins: a product system
of 4M unknowns) then runs on one SM. This module runs the same Jacobi PCG with the CG loop
on the host instead: per iteration three launches over the whole grid (XMV, update,
direction) and two 16-byte-per-block read-backs of partial sums; all product vectors are
float64 in global memory.

Importing this module does not import PyCUDA (:func:`wide_source` needs none); PyCUDA is
imported by :func:`solve_pair_wide` and :func:`compile_wide` through :mod:`mgkflow.gpu.device`
(compilation, occupancy, typed launches by parameter name). Hyperparameter values travel in
the ``mgk_kpar`` constant array (:func:`mgkflow.gpu.source.kernel_values`), never in the source.

Registry entry ``"wide"`` (rank 1 of :mod:`mgkflow.gpu.solvers`, :class:`WideSolver`); its run path
in a backend, :class:`WidePath`, solves the pairs the launch plan sends wide, largest first.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from string import Template
from typing import Any

import numpy as np

from .. import device, strategies
from ..source import KPAR, KernelConfig, common_placeholders, template_text
from ..strategies.cost import CostModel, load_models
from ..strategies.staged import DEFAULT_SLOTS, STAGED_MIN_Q
from . import Solver, register

__all__ = [
    "WIDE_BLOCK", "WIDE_KERNELS", "WIDE_XMVS", "STAGED_MIN_Q", "N_VECTORS", "wide_source", "compile_wide",
    "wide_pcg", "solve_pair_wide", "staged_macros", "WidePath", "WideSolver",
]  # fmt: skip

#: Default threads per block of the wide kernels.
WIDE_BLOCK = 256
#: N-sized float64 vectors the wide solver keeps on the device: X, R, P, A, DG, DI.
N_VECTORS = 6
#: Kernels of ``mgk_wide.cu`` (launched by parameter name: :class:`mgkflow.gpu.device.Kernel`).
WIDE_KERNELS = ("wide_init", "wide_xmv", "wide_xmv_staged", "wide_update", "wide_direction", "wide_dot")

#: XMV choices of the wide solver: "auto" (the cheapest applicable strategy of
#: :mod:`mgkflow.gpu.strategies` by its calibrated cost model), or a wide strategy by name:
#: "rows" (= "wide_rows": row pairs through L1) and "staged" (G2 nonzeros in registers, P
#: slices in shared memory, float32 products; "auto" considers it for labeled edge kernels at
#: q >= :data:`STAGED_MIN_Q` only).
WIDE_XMVS = ("auto", "rows", "staged", "wide_rows")
#: Short names of wide strategies (stats and options use these).
_ALIASES = {"rows": "wide_rows"}
_SHORT = {"wide_rows": "rows"}

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
    return config.se_edge and len(config.edge_fields) == 1


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
        ``xmv`` and ``adaptive`` do not apply: the wide kernels use ``block``
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
        CUDA C++ source with the extern "C" kernels of :data:`WIDE_KERNELS`.

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
        PRIMITIVES=template_text("octile_primitives.cuh"),
        **common_placeholders(config),
        STAGED_SLOTS=str(int(slots)),
        STAGED_MIN_BLOCKS=str(max(1, min_blocks or (1024 if slots <= 8 else 768) // block)),
        STAGED_NFE=str(max(1, len(config.edge_fields))),
        STAGED_LABELS="1" if config.edge_fields else "0",
        SE_LOGW="1" if se_fast_path(config) else "0",
        SE_SIGMA=f"{KPAR}[{config.n_node_par + config.n_edge_par}]",
        STAGED_EDGE_KERNEL=config.edge_expr,
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
    slots: int = DEFAULT_SLOTS,
) -> device.Module:
    """Compile (or fetch from the process cache of :func:`mgkflow.gpu.device.build_module`) the
    wide solver module for ``config``.

    Parameters
    ----------
    config : KernelConfig
        See :func:`wide_source`.
    block : int
        Threads per block.
    slots : int
        Register slots per thread of the staged XMV.

    Returns
    -------
    mgkflow.gpu.device.Module
    """
    block = _check_block(block)
    return device.build_module(
        lambda: wide_source(config, block, slots=slots), ("wide", config.key, block, int(slots))
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


def _grid_size(n_sm: int, per_sm: int, work_blocks: int) -> int:
    return int(max(1, min(n_sm * max(1, per_sm), work_blocks)))


def solve_pair_wide(
    db: Any,
    g1: int,
    g2: int,
    config: KernelConfig,
    values: np.ndarray,
    rtol: float = 1e-7,
    max_iter: int = 10_000,
    block: int = WIDE_BLOCK,
    blocks_per_sm: int | None = None,
    stats: dict | None = None,
    xmv: str = "auto",
    slots: int = DEFAULT_SLOTS,
    workspace: dict | None = None,
    cost_models: dict[str, CostModel] | None = None,
) -> tuple[float, int, float, bool]:
    """Solve one pair of a device batch with the whole GPU.

    Parameters
    ----------
    db : mgkflow.gpu.core.DeviceBatch
        Batch uploaded by ``GPUBackend._device_batch(systems, config)`` (uses its arrays
        "hdr", "rrowptr", "rcoff", "rweight", "relab", "nlab", "d", "p", "q" and the strides).
    g1, g2 : int
        Graph indices in the batch (as in ``GPUBackend.solve``: ``j + yoff`` for ys).
    config : KernelConfig
        The configuration the batch was built for: its label fields and ``weight_double``
        (the dtype of the uploaded "rweight") must be those of the batch; not checked.
    values : ndarray of float32
        The kernels' run-time values (:func:`mgkflow.gpu.source.kernel_values`).
    rtol : float
        Converged when ||r|| <= rtol ||b|| (recursive residual, float64).
    max_iter : int
        CG iteration limit.
    block : int
        Threads per block of the wide kernels.
    blocks_per_sm : int, optional
        Resident blocks per SM to launch; default from the XMV kernel's registers.
    stats : dict, optional
        Filled with figures of the solve: sizes ("n1", "n2", "unknowns", "tile_pairs"),
        "device_s" (elapsed between events around the whole PCG, host round trips included),
        "host_s", "iterations", grids ("grid_vec", "grid_xmv", "block"),
        "regs_xmv", "launches" (per kernel), "bytes" (device memory of the solve), "xmv"
        (short name of the strategy used), "strategy", "features" (its cost-model features),
        "predicted_s" (per strategy, when a cost model chose), "smem" (dynamic shared memory
        per block) and, for the staged XMV, "staged_groups" and "staged_fill".
    xmv : {"auto", "rows", "staged"}
        XMV strategy (see :data:`WIDE_XMVS`): "auto" takes the applicable wide strategy of
        least predicted cost (:func:`mgkflow.gpu.strategies.choose`; without calibrated cost
        models: "staged" for labeled edge kernels at q >= :data:`STAGED_MIN_Q` where G2's
        rows fit the slots, else "rows"); a named strategy raises where it does not apply.
    slots : int
        Register slots per thread of the staged XMV.
    workspace : dict, optional
        Keeps the device vectors between calls (reused while large enough, else replaced):
        a caller solving many wide pairs passes the same dict; default: allocated per call.
    cost_models : dict, optional
        Strategy name -> :class:`mgkflow.gpu.strategies.cost.CostModel` for "auto"; default:
        the models stored for this GPU model by ``python -m mgkflow.bench.gpu_calibrate``.

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
    if xmv not in WIDE_XMVS:
        raise ValueError(f"xmv must be one of {WIDE_XMVS}, got {xmv!r}")
    mod = compile_wide(config, block, slots)
    return _solve(device.driver(), mod, db, g1, g2, rtol, max_iter, _check_block(block), blocks_per_sm, stats,
                  config, xmv, int(slots), workspace, values, cost_models)  # fmt: skip


def _workspace(cuda: Any, ws: dict, N: int, n_part: int, what: str) -> tuple:
    """The device vectors X, R, P, A, DG, DI, the partial sums and the counter (kept in ``ws``
    while large enough)."""
    vec_bytes = 8 * N
    need = N_VECTORS * vec_bytes + 16 * n_part + 4
    if ws.get("vec_bytes", -1) >= vec_bytes and ws.get("n_part", -1) >= n_part:
        return ws["buffers"], need
    ws.clear()  # give the old buffers back first
    free, _total = cuda.mem_get_info()
    what = f"{what} needs {need / 2**30:.2f} GiB of GPU memory for {N_VECTORS} float64 vectors"
    if need > 0.95 * free:
        raise MemoryError(f"{what}, more than the {free / 2**30:.2f} GiB free")
    oom = getattr(cuda, "MemoryError", MemoryError)
    try:
        buffers = tuple(cuda.mem_alloc(vec_bytes) for _ in range(N_VECTORS)) + (
            cuda.mem_alloc(16 * n_part),
            cuda.mem_alloc(4),
        )
    except oom as exc:
        raise MemoryError(f"{what}; allocation failed: {exc}") from exc
    ws.update(vec_bytes=vec_bytes, n_part=n_part, buffers=buffers)
    return buffers, need


def _pair_context(cuda: Any, db: Any, g1: int, g2: int, config: KernelConfig | None, block: int, slots: int,
                  xmv: str) -> strategies.PairContext:  # fmt: skip
    """Sizes and offsets of pair (g1, g2) from the device graph headers (checked against the batch)."""
    a = db.arrays
    G = int(len(db.nt))
    if not (0 <= g1 < G and 0 <= g2 < G):
        raise IndexError(f"graph indices ({g1}, {g2}) out of range for a batch of {G} graphs")
    hdr = np.empty(5 * G, dtype=np.int32)
    cuda.memcpy_dtoh(hdr, a["hdr"].alloc if isinstance(a["hdr"], device.DeviceArray) else a["hdr"])
    hdr = hdr.reshape(G, 5).astype(np.int64)
    if not np.array_equal(hdr[:, 1], np.asarray(db.nt, dtype=np.int64)):
        raise RuntimeError("internal: device graph headers do not match the batch's tile counts")
    n1, nt1, off1, ro1, rro1 = (int(v) for v in hdr[g1])
    n2, nt2, off2, _, rro2 = (int(v) for v in hdr[g2])
    return strategies.PairContext(cuda, db, g1, g2, config, block, slots, n1, n2, nt1, nt2, off1, off2, ro1, rro1,
                                  rro2, forced=xmv != "auto")  # fmt: skip


class _WideRun:
    """The device side of one wide PCG: kernels, grids and buffers, and the five steps
    :func:`wide_pcg` calls (each counts its launches)."""

    def __init__(self, cuda: Any, mod: device.Module, ctx: strategies.PairContext, strategy: strategies.Strategy,
                 blocks_per_sm: int | None, workspace: dict) -> None:  # fmt: skip
        self.cuda, self.ctx, self.strategy = cuda, ctx, strategy
        self.f_init, self.f_update = mod.function("wide_init"), mod.function("wide_update")
        self.f_dir, self.f_dot = mod.function("wide_direction"), mod.function("wide_dot")
        self.f_xmv = mod.function(strategy.kernel)
        block = ctx.block
        self.N = N = 64 * ctx.nt1 * ctx.nt2
        lim = device.device_limits()
        self.grid_vec = _grid_size(lim.n_sm, max(1, lim.threads_per_sm // block), -(-N // block))
        self.grid_xmv = strategy.grid(ctx, self.f_xmv, lim, blocks_per_sm)
        self.smem = strategy.shared_bytes(ctx)
        if device.needs_smem_optin(self.f_xmv, self.smem):  # the device's largest: shared by concurrent threads
            self.f_xmv.set_attribute(cuda.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                     int(lim.smem_optin) - int(getattr(self.f_xmv, "shared_size_bytes", 0)))
        what = (f"the wide solve of pair ({ctx.g1}, {ctx.g2}) ({ctx.n1} x {ctx.n2} nodes, {N} product unknowns "
                "with padding)")  # fmt: skip
        buffers, self.need = _workspace(cuda, workspace, N, max(self.grid_vec, self.grid_xmv), what)
        X, R, P, Av, DG, DI, part, counter = buffers
        self.vec = {"X": X, "R": R, "P": P, "A": Av, "DG": DG, "DI": DI, "part": part}
        self.xmv_vectors = {"P": P, "DG": DG, "A": Av, "counter": counter, "part": part}
        self.counter = counter
        self.h_vec, self.h_xmv = np.empty(2 * self.grid_vec), np.empty(2 * self.grid_xmv)
        self.launches = {"init": 0, "xmv": 0, "update": 0, "direction": 0, "dot": 0}

    def _partials(self, host: np.ndarray) -> tuple[float, float]:
        self.cuda.memcpy_dtoh(host, self.vec["part"])
        s = host.reshape(-1, 2).sum(axis=0)
        return float(s[0]), float(s[1])

    def _vec_launch(self, fn: device.Kernel, step: str, **args: Any) -> None:
        fn(grid=(self.grid_vec, 1), block=(self.ctx.block, 1, 1), **args)
        self.launches[step] += 1

    def init(self) -> tuple[float, float]:
        c, a, v = self.ctx, self.ctx.db.arrays, self.vec
        self._vec_launch(self.f_init, "init", nlab=a["nlab"], nlab_stride=c.db.nlab_stride, dvec=a["d"], qvec=a["q"],
                         n1=c.n1, n2=c.n2, nt2=c.nt2, node_off1=c.off1, node_off2=c.off2, N=self.N, **v)  # fmt: skip
        return self._partials(self.h_vec)

    def xmv(self) -> float:
        self.cuda.memset_d32(self.counter, 0, 1)
        self.strategy.launch(self.ctx, self.f_xmv, self.grid_xmv, self.xmv_vectors)
        self.launches["xmv"] += 1
        return self._partials(self.h_xmv)[0]

    def update(self, alpha: float) -> tuple[float, float]:
        v = self.vec
        self._vec_launch(self.f_update, "update", N=self.N, alpha=alpha, X=v["X"], R=v["R"], P=v["P"], A=v["A"],
                         DI=v["DI"], part=v["part"])  # fmt: skip
        return self._partials(self.h_vec)

    def direction(self, beta: float) -> None:
        v = self.vec
        self._vec_launch(self.f_dir, "direction", N=self.N, beta=beta, R=v["R"], DI=v["DI"], P=v["P"])

    def dot(self) -> float:
        c = self.ctx
        self._vec_launch(self.f_dot, "dot", pvec=c.db.arrays["p"], n1=c.n1, n2=c.n2, nt2=c.nt2, node_off1=c.off1,
                         node_off2=c.off2, N=self.N, X=self.vec["X"], part=self.vec["part"])  # fmt: skip
        return self._partials(self.h_vec)[0]

    def stats(self) -> dict:
        s = self.strategy
        out = {"grid_vec": self.grid_vec, "grid_xmv": self.grid_xmv, "block": self.ctx.block,
               "regs_xmv": self.f_xmv.num_regs, "launches": dict(self.launches), "bytes": self.need,
               "xmv": _SHORT.get(s.name, s.name), "strategy": s.name, "features": s.features(self.ctx),
               "smem": self.smem}  # fmt: skip
        if s.name == "staged":
            st_host, _ = s.prepare(self.ctx)
            out.update({"staged_groups": st_host.n_groups, "staged_fill": st_host.fill()})
        return out


def _solve(
    cuda: Any,
    mod: device.Module,
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
    values: np.ndarray | None = None,
    cost_models: dict[str, CostModel] | None = None,
) -> tuple[float, int, float, bool]:
    """:func:`solve_pair_wide` on a given driver module and compiled module (tests pass fakes):
    pair context -> kernel values -> strategy -> device run -> PCG on the host."""
    t_start = time.perf_counter()
    if not 0.0 < rtol < 1.0:
        raise ValueError(f"rtol must lie in (0, 1), got {rtol}")
    ctx = _pair_context(cuda, db, int(g1), int(g2), config, block, slots, xmv)
    n_tp = ctx.nt1 * ctx.nt2
    if stats is not None:
        stats.update({"n1": ctx.n1, "n2": ctx.n2, "unknowns": 64 * n_tp, "tile_pairs": n_tp})
    if n_tp == 0 or ctx.n1 == 0 or ctx.n2 == 0:
        return 0.0, 0, 0.0, True
    if n_tp > 2**31 - 2**24:  # tile pairs (and the XMV's tile-pair counter) are int32 on the device
        raise MemoryError(f"pair ({g1}, {g2}) of {ctx.n1} x {ctx.n2} nodes has {n_tp} tile pairs, beyond int32 "
                          "indexing")  # fmt: skip
    if values is not None:
        mod.set_constant(KPAR, values)
    elif config is not None:
        raise ValueError("the kernels' run-time values (mgkflow.gpu.source.kernel_values) are required")
    strategy, predicted = _pick(ctx, xmv, cost_models)
    run = _WideRun(cuda, mod, ctx, strategy, blocks_per_sm, workspace if workspace is not None else {})
    start, stop = cuda.Event(), cuda.Event()
    start.record()
    result = wide_pcg(run.init, run.xmv, run.update, run.direction, run.dot, float(rtol), int(max_iter))
    stop.record()
    stop.synchronize()
    if stats is not None:
        stats.update(run.stats())
        stats.update({"device_s": stop.time_since(start) * 1e-3, "host_s": time.perf_counter() - t_start,
                      "iterations": result[1], "predicted_s": predicted})  # fmt: skip
    return result


_MODELS: dict[str, dict | None] = {}


def _pick(ctx: strategies.PairContext, xmv: str, cost_models: dict | None) -> tuple[strategies.Strategy, dict]:
    """The wide XMV strategy of a pair: the named one (ValueError where it cannot run), or for
    "auto" the cheapest applicable one by the cost models (``cost_models``, else those stored
    for this GPU model, else the strategies' fixed ranks)."""
    if xmv != "auto":
        s = strategies.get(_ALIASES.get(xmv, xmv))
        if s.path != "wide":
            raise ValueError(f"{s.name!r} is not a wide-path strategy")
        why = s.applies(ctx)
        if why:
            raise ValueError(f"the {_SHORT.get(s.name, s.name)} XMV does not apply to pair ({ctx.g1}, {ctx.g2}): {why}")
        return s, {}
    if cost_models is None:
        name = device.device_limits().name
        if name not in _MODELS:
            _MODELS[name] = load_models(name)
        cost_models = _MODELS[name]
    chosen, predicted, _why = strategies.choose(ctx, strategies.available("wide"), cost_models)
    return strategies.get(chosen), predicted


# ---------------------------------------------------------------------------------------- run path
class WidePath:
    """The wide solver's run path for one backend (:class:`mgkflow.gpu.backend.GPUBackend`: ``rtol``,
    ``max_iter``, ``wide_xmv``, its :class:`~mgkflow.gpu.launch.Launcher`).

    Attributes
    ----------
    workspace : dict
        Device vectors of the wide path, kept between solves (:func:`solve_pair_wide`'s ``workspace``).
    """

    def __init__(self, backend: Any) -> None:
        self.be = backend
        self.workspace: dict = {}

    def kept_bytes(self) -> int:
        """Device memory the kept vectors hold (given back when the per-block launches need it)."""
        return self.workspace.get("vec_bytes", 0) * N_VECTORS

    def run(
        self, wide: np.ndarray, g1: np.ndarray, g2: np.ndarray, db: Any, config: KernelConfig,
        values: np.ndarray, out: Any, progress: Callable[[int], Any] | None,
    ) -> tuple[list[dict], float]:  # fmt: skip
        """Solve the wide pairs one at a time with the whole device (largest first) into ``out`` (an
        :class:`mgkflow.gpu.core.Outputs`); their figures and device seconds."""
        be = self.be
        stats_out: list[dict] = []
        seconds = 0.0
        if not wide.size:
            return stats_out, seconds
        be.launcher.drop_scratch()  # give the per-block scratch back first
        products = _SOLVER.job_cost(db, g1[wide], g2[wide])
        for t in wide[np.argsort(-products, kind="stable")]:
            st: dict = {}
            v, itw, rw, cw = solve_pair_wide(
                db, int(g1[t]), int(g2[t]), config, values, rtol=be.rtol, max_iter=be.max_iter,
                stats=st, xmv=be.wide_xmv, workspace=self.workspace,
            )  # fmt: skip
            out.k[t], out.it[t], out.res[t], out.conv[t] = v, itw, rw, bool(cw)
            seconds += float(st.get("device_s", 0.0))
            keep = ("n1", "n2", "unknowns", "device_s", "iterations", "xmv", "strategy", "features", "predicted_s")
            stats_out.append({k: st[k] for k in keep if k in st})
            if progress is not None:
                progress(1)
        return stats_out, seconds


class WideSolver(Solver):
    """Registry entry ``"wide"`` (rank 1): the pairs the launch plan sends to the whole device."""

    name = "wide"
    rank = 1
    source = "mgk_wide.cu"
    kernels = WIDE_KERNELS
    claim = ("wide=True: every pair; 'auto': pairs of at least WIDE_MIN_PRODUCTS nonzero products per XMV when "
             "there are fewer of them than SMs, and any pair whose one-block scratch exceeds the budget "
             "(plan_launches)")  # fmt: skip

    def claims(self, plan: Any) -> np.ndarray:
        """The pairs a :class:`~mgkflow.gpu.plan.LaunchPlan` sends wide (``plan.wide``)."""
        return plan.wide

    def job_cost(self, db: Any, g1: np.ndarray, g2: np.ndarray) -> np.ndarray:
        """Nonzero products per XMV (nnz1 nnz2): the wide pairs are solved largest first."""
        return db.nnz_per_graph[g1].astype(np.float64) * db.nnz_per_graph[g2]

    def path(self, backend: Any) -> WidePath:
        return WidePath(backend)


_SOLVER = register(WideSolver())
