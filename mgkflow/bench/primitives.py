"""Octile-pair primitive map and device ceilings: ``python -m mgkflow.bench primitives``.

Measures, on the present GPU, the time per octile pair of the four XMV primitives of
``octile_primitives.cuh`` (sparse x sparse ``ss``, dense x dense ``dd``, dense x sparse
``ds``, sparse x dense ``sd``) for every pair of nonzero counts (k1, k2) in 1..64, with
the unlabeled edge kernel (``Constant(1.0)``) and a labeled one
(``SquareExponential(1.0, "length")`` on a float32 edge label), and derives the selection
maps of the solver (paper Fig. 8). The benchmark kernels (``primitives_bench.cu``) are
built from real :class:`~mgkflow.gpu.source.KernelConfig` objects and splice the solver's
own primitives, so they time the solver's code.

Measurement (throughput of the whole device, per cell): pools of random octiles with
exactly k nonzeros (k = 1..64, ``--samples`` octiles per pool and side; weights uniform in
[0.5, 1.5), labels uniform in [1, 2)) are uploaded once. One launch times one primitive
on one cell (k1, k2): a full wave of warps (``--blocks-per-sm`` blocks of 256 threads on
every SM), each warp processing R octile pairs drawn from the two pools against a
64-entry input tile in shared memory. Time per pair = launch time (CUDA events) /
(warps * R). R is chosen per primitive and cell so that a launch lasts about
``--target-ms`` (from a cost model calibrated on the device for the first row of cells,
then from the previous row's measured times; launches far shorter than that are
measured again with a larger R), or fixed with ``--reps``; a cell's time is the median of
``--repeat`` launches, queued back to back behind a short spin kernel (no host gaps).
Before timing, every primitive's sums on a few cells are checked against a float64 numpy
reference (outputs poisoned with NaN before each check launch); on a mismatch the maps
are not stored in the solver's cache and the exit status is 1.

FLOP convention: 2 FLOPs (one multiply, one add) per nonzero product actually
computed, i.e. 2 * k1 * k2 per octile pair for every primitive (the zeros that the
dense primitives multiply are not counted); GFLOP/s = 2 k1 k2 / (ns per pair).

Ceilings (``roofline.cu``, measured, not datasheet values): FP32 and FP64 FMA peak
(independent FMA chains) and device-memory bandwidth (float4 copy, counting bytes read
plus written, and a float4 read-reduce).

Writes under ``--out`` (default ``reports/``):

* ``primitives.csv``: one row per measured cell and kernel kind: ``labeled, k1, k2,
  ns_ss, ns_dd, ns_ds, ns_sd, best, gflops_ss, gflops_dd, gflops_ds, gflops_sd``;
* ``roofline.csv``: ``name, value, unit, note``: the ceilings, and the dense x dense
  primitive at k1 = k2 = 64 (GFLOP/s counted as 2 * 64 * 64 per pair, and its fraction of
  the FP32 and FP64 peaks), the best primitive there, and the check errors;
* ``primitives_map.png``: the best primitive over the k1 x k2 grid (two panels);
* copies of the selection maps (``<gpu>_unlabeled.npy``, ``<gpu>_labeled.npy``), which are
  also stored in the solver's map cache (:func:`mgkflow.gpu.primitive_map.save_map`).

With ``--step s`` only k in 1, 1+s, ... (and 64) are measured and the map takes each
cell's primitive from the nearest measured cell.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from string import Template
from typing import Any, Protocol

import numpy as np

from ..gpu.primitive_map import PRIMITIVES, map_dir, map_from_timings, save_map
from ..gpu.source import KPAR, KernelConfig, coef_expr, kernel_values, label_macros, make_config, template_text
from ..kernels import BaseKernel, Constant, SquareExponential
from ._csv import write_csv

__all__ = [
    "BENCH_BLOCK",
    "BENCH_MIN_BLOCKS",
    "PRIM_NAMES",
    "OctilePools",
    "bench_kernels",
    "bench_config",
    "bench_source",
    "roofline_source",
    "random_octiles",
    "dense_octiles",
    "make_pools",
    "reference_sums",
    "cost_trips",
    "measured_ks",
    "fill_nearest",
    "selection_from_grid",
    "check_flavour",
    "measure_grid",
    "write_outputs",
    "main",
]

#: Threads per block of the benchmark kernels.
BENCH_BLOCK = 256
#: ``__launch_bounds__`` minimum blocks per SM: 4 x 256 threads caps registers at 64 per
#: thread, as the solver's default (512 threads, 2 blocks per SM) does.
BENCH_MIN_BLOCKS = 4
#: Long names of the primitives (plot legend, summary).
PRIM_NAMES = {"ss": "sparse x sparse", "dd": "dense x dense", "ds": "dense x sparse", "sd": "sparse x dense"}
#: Edge-label field of the labeled kernel.
LABEL_FIELD = "length"
#: Padding words after the compact arrays: a dense loop reads (and discards) the label at a
#: row's first compact index also where the row is empty, which may lie past the last nonzero.
PAD = 64
#: Largest R (octile pairs per warp and launch).
R_MAX = 1 << 16
#: Cells checked against the numpy reference before timing.
CHECK_CELLS = ((1, 1), (1, 64), (64, 1), (5, 37), (37, 5), (13, 22), (64, 64))
#: Relative tolerance of the check (float32 coefficients, float64 sums of positive terms).
CHECK_RTOL = 1e-5
#: Colours of the primitives in the map plot (ss, dd, ds, sd).
COLORS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52")


# ------------------------------------------------------------------------------ sources
def bench_kernels(labeled: bool) -> tuple[BaseKernel, BaseKernel, dict[str, str]]:
    """Node kernel, edge kernel and edge-label dtypes of one kernel kind of the benchmark."""
    if labeled:
        return Constant(1.0), SquareExponential(1.0, LABEL_FIELD), {LABEL_FIELD: "float32"}
    return Constant(1.0), Constant(1.0), {}


def bench_config(labeled: bool) -> KernelConfig:
    """The solver configuration whose edge kernel and label loads the benchmark compiles.

    The octile XMV with adaptive selection (the mode that uses the primitives); float32
    weights; the edge label of the labeled kind is a float32 field.

    Examples
    --------
    >>> bench_config(True).edge_fields
    (('length', 'float'),)
    """
    nk, ek, edt = bench_kernels(labeled)
    return make_config(nk, ek, {}, edt, xmv="octile", adaptive=True)


def bench_source(config: KernelConfig, block: int = BENCH_BLOCK, min_blocks: int = BENCH_MIN_BLOCKS) -> str:
    """The CUDA source of the primitive benchmark for ``config`` (kernels ``bench_ss`` .. ``bench_sd``).

    Examples
    --------
    >>> src = bench_source(bench_config(False))
    >>> "bench_dd" in src and "${" not in src
    True
    """
    return Template(template_text("primitives_bench.cu")).substitute(
        BLOCK=str(int(block)),
        MIN_BLOCKS=str(int(min_blocks)),
        COMMON=template_text("mgk_common.cuh"),
        DEFINES=label_macros(config),
        EDGE_KERNEL=config.edge_expr,
        W_TYPE="double" if config.weight_double else "float",
        COEF=coef_expr(config),
        PRIMITIVES=template_text("octile_primitives.cuh"),
    )


def roofline_source() -> str:
    """The CUDA source of the ceiling kernels (``peak_fp32``, ``peak_fp64``, ``copy_f4``, ...)."""
    return template_text("roofline.cu")


# ------------------------------------------------------------------------------ data
def random_octiles(k: int, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``n`` random 8x8 octiles with exactly ``k`` nonzeros each, in compact storage.

    Parameters
    ----------
    k : int
        Nonzeros per octile, 0..64.
    n : int
        Number of octiles.
    rng : numpy.random.Generator
        Random source.

    Returns
    -------
    bitmaps : (n,) uint64
        Bit ``8 i + j`` set where entry (i, j) is nonzero.
    weights : (n * k,) float32
        Edge weights, uniform in [0.5, 1.5); octile ``o`` owns ``weights[o*k:(o+1)*k]`` in
        bitmap (row-major, ascending bit) order.
    labels : (n * k,) float32
        One edge-label field, uniform in [1, 2), same layout.

    Examples
    --------
    >>> b, w, e = random_octiles(5, 3, np.random.default_rng(0))
    >>> [bin(int(x)).count("1") for x in b], w.shape, e.dtype
    ([5, 5, 5], (15,), dtype('float32'))
    """
    k, n = int(k), int(n)
    if not 0 <= k <= 64:
        raise ValueError(f"k must lie in 0..64, got {k}")
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    pos = np.argsort(rng.random((n, 64)), axis=1)[:, :k].astype(np.uint64)
    bitmaps = np.bitwise_or.reduce(np.left_shift(np.uint64(1), pos), axis=1) if k else np.zeros(n, np.uint64)
    bitmaps = np.asarray(bitmaps, dtype=np.uint64).reshape(n)
    weights = rng.uniform(0.5, 1.5, n * k).astype(np.float32)
    labels = rng.uniform(1.0, 2.0, n * k).astype(np.float32)
    return bitmaps, weights, labels


def dense_octiles(bitmaps: np.ndarray, toff: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Expand compact octiles to (n, 8, 8) float64 arrays (0 where the bitmap has no bit).

    Examples
    --------
    >>> dense_octiles(np.array([0b101], np.uint64), np.array([0]), np.array([2.0, 3.0]))[0, 0, :3]
    array([2., 0., 3.])
    """
    bm = np.asarray(bitmaps, dtype=np.uint64).reshape(-1)
    bits = ((bm[:, None] >> np.arange(64, dtype=np.uint64)[None, :]) & np.uint64(1)).astype(bool)
    rank = np.cumsum(bits, axis=1) - 1
    idx = np.asarray(toff, dtype=np.int64).reshape(-1, 1) + rank
    vals = np.asarray(values, dtype=np.float64)
    out = np.where(bits, vals[np.clip(idx, 0, max(vals.size - 1, 0))] if vals.size else 0.0, 0.0)
    return out.reshape(-1, 8, 8)


@dataclass
class OctilePools:
    """Pools of random octiles: pool (side, k) holds ``n_samples`` octiles with k nonzeros.

    Attributes
    ----------
    n_samples : int
        Octiles per pool.
    bitmap : (128 * n_samples,) uint64
    toff : (128 * n_samples,) int32
        Compact offset of every octile.
    weight : (nnz + PAD,) float32
    labels : (nnz + PAD,) float32
        The one edge-label field (the kernels read it as raw 32-bit words).
    """

    n_samples: int
    bitmap: np.ndarray
    toff: np.ndarray
    weight: np.ndarray
    labels: np.ndarray

    @property
    def elab_stride(self) -> int:
        """Words per label field in the device array."""
        return int(self.labels.size)

    def start(self, side: int, k: int) -> int:
        """Index of the first octile of pool (side, k); side is 0 (G1) or 1 (G2), k in 1..64."""
        if side not in (0, 1) or not 1 <= k <= 64:
            raise ValueError(f"no pool ({side}, {k})")
        return (side * 64 + (k - 1)) * self.n_samples

    def dense(self, side: int, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Dense (n_samples, 8, 8) weights and labels of pool (side, k)."""
        s = slice(self.start(side, k), self.start(side, k) + self.n_samples)
        return (
            dense_octiles(self.bitmap[s], self.toff[s], self.weight),
            dense_octiles(self.bitmap[s], self.toff[s], self.labels),
        )


def make_pools(n_samples: int, seed: int = 0) -> OctilePools:
    """Random octile pools for both sides and k = 1..64 (see :class:`OctilePools`).

    Examples
    --------
    >>> p = make_pools(4)
    >>> p.bitmap.size, int(p.toff[p.start(1, 64)] + 4 * 64 + 64) == p.weight.size
    (512, True)
    """
    n = int(n_samples)
    if n < 1:
        raise ValueError(f"n_samples must be >= 1, got {n}")
    rng = np.random.default_rng(seed)
    bms, ws, es, counts = [], [], [], []
    for _side in (0, 1):
        for k in range(1, 65):
            b, w, e = random_octiles(k, n, rng)
            bms.append(b)
            ws.append(w)
            es.append(e)
            counts.append(np.full(n, k, dtype=np.int64))
    cnt = np.concatenate(counts)
    toff = np.concatenate([[0], np.cumsum(cnt)[:-1]])
    if int(cnt.sum()) + PAD >= 2**31:
        raise ValueError("too many samples for int32 offsets")
    pad = np.zeros(PAD, dtype=np.float32)
    return OctilePools(
        n_samples=n,
        bitmap=np.concatenate(bms).astype(np.uint64),
        toff=toff.astype(np.int32),
        weight=np.concatenate(ws + [pad]).astype(np.float32),
        labels=np.concatenate(es + [pad]).astype(np.float32),
    )


def pair_indices(n_samples: int, n_warps: int, reps: int) -> tuple[np.ndarray, np.ndarray]:
    """Sample indices (i1, i2) of shape (n_warps, reps) that the benchmark kernels visit."""
    w = np.arange(n_warps, dtype=np.int64)[:, None]
    r = np.arange(reps, dtype=np.int64)[None, :]
    return (w + r) % n_samples, (3 * w + 1 + r) % n_samples


def reference_sums(
    pools: OctilePools,
    k1: int,
    k2: int,
    n_warps: int,
    reps: int,
    ptile: np.ndarray,
    edge_kernel: BaseKernel,
) -> np.ndarray:
    """float64 numpy reference of the benchmark kernels' output (acca + accb per thread).

    Thread ``32 w + l`` (warp w, lane l) owns rows i = l // 4 of the G1 octile and
    i2 = l % 4, l % 4 + 4 of the G2 octile, and sums over the warp's ``reps`` pairs
    y(i, i2) = sum_{j, j2} A1(i, j) A2(i2, j2) ke(e1(i, j), e2(i2, j2)) P(j, j2).
    """
    W1, E1 = pools.dense(0, k1)
    W2, E2 = pools.dense(1, k2)
    i1, i2 = pair_indices(pools.n_samples, n_warps, reps)
    a, b = i1.ravel(), i2.ravel()
    P = np.asarray(ptile, dtype=np.float64).reshape(8, 8)
    # axes: pair m, i, j, i2, j2
    ke = np.asarray(
        edge_kernel({LABEL_FIELD: E1[a][:, :, :, None, None]}, {LABEL_FIELD: E2[b][:, None, None, :, :]}),
        dtype=np.float64,
    )
    T = W1[a][:, :, :, None, None] * W2[b][:, None, None, :, :] * ke * P[None, None, :, None, :]
    y = T.sum(axis=(2, 4)).reshape(n_warps, reps, 8, 8).sum(axis=1)  # (warp, i, i2)
    lane = np.arange(32)
    i, i2a = lane // 4, lane % 4
    out = y[:, i, i2a] + y[:, i, i2a + 4]  # (warp, lane)
    return out.reshape(-1)


# ------------------------------------------------------------------------------ model and grid
def cost_trips(prim: str, k1: int, k2: int, overhead: float = 8.0) -> float:
    """Expected inner-loop trips per lane and octile pair, plus a fixed per-pair overhead.

    Only used to choose R (pairs per warp and launch); the times are measured.

    Examples
    --------
    >>> cost_trips("dd", 1, 1, overhead=0.0), cost_trips("ss", 64, 64, overhead=0.0)
    (128.0, 128.0)
    """
    if prim == "ss":
        trips = k1 * k2 / 32.0
    elif prim == "dd":
        trips = 128.0
    elif prim == "ds":
        trips = 2.0 * k2
    elif prim == "sd":
        trips = 2.0 * k1
    else:
        raise ValueError(f"unknown primitive {prim!r}")
    return float(trips) + float(overhead)


def measured_ks(step: int) -> np.ndarray:
    """Nonzero counts measured with ``--step``: 1, 1 + step, ... and always 64.

    Examples
    --------
    >>> measured_ks(16).tolist()
    [1, 17, 33, 49, 64]
    """
    step = int(step)
    if not 1 <= step <= 63:
        raise ValueError(f"step must lie in 1..63, got {step}")
    return np.array(sorted(set(range(1, 65, step)) | {64}), dtype=np.int64)


def fill_nearest(ks: Sequence[int], values: np.ndarray) -> np.ndarray:
    """Extend values on the measured grid ks x ks to all of 1..64 x 1..64 (nearest measured k).

    Parameters
    ----------
    ks : increasing int sequence
        Measured counts.
    values : array of shape (len(ks), len(ks), ...)

    Returns
    -------
    array of shape (64, 64, ...): entry [k1 - 1, k2 - 1].

    Examples
    --------
    >>> fill_nearest([1, 64], np.array([[1.0, 2.0], [3.0, 4.0]]))[[0, 40], :][:, [0, 63]].tolist()
    [[1.0, 2.0], [3.0, 4.0]]
    """
    ks = np.asarray(ks, dtype=np.int64)
    values = np.asarray(values)
    if values.shape[:2] != (ks.size, ks.size):
        raise ValueError(f"values must have shape ({ks.size}, {ks.size}, ...), got {values.shape}")
    near = np.argmin(np.abs(np.arange(1, 65)[:, None] - ks[None, :]), axis=1)
    return values[near][:, near]


def selection_from_grid(ks: Sequence[int], seconds: np.ndarray) -> np.ndarray:
    """The (65, 65) selection map from per-pair times on the grid ks x ks (shape (n, n, 4))."""
    full = fill_nearest(ks, seconds)
    k1, k2 = np.meshgrid(np.arange(1, 65), np.arange(1, 65), indexing="ij")
    return map_from_timings(k1.ravel(), k2.ravel(), full.reshape(-1, len(PRIMITIVES)))


class Runner(Protocol):
    """What the measurement needs from the device (one compiled kernel kind)."""

    def warps(self, prim: int) -> int:
        """Warps of one timed launch of primitive ``prim``."""

    def time_batch(self, jobs: Sequence[tuple[int, int, int, int]]) -> np.ndarray:
        """Seconds of each launch (prim, k1, k2, reps), launched back to back."""

    def check(self, prim: int, k1: int, k2: int, n_blocks: int, reps: int) -> np.ndarray:
        """Output (acca + accb per thread) of one small launch."""


def check_flavour(
    runner: Runner, pools: OctilePools, ptile: np.ndarray, edge_kernel: BaseKernel, reps: int = 5, n_blocks: int = 2
) -> float:
    """Largest relative error (inf-norm) of every primitive's sums against :func:`reference_sums`.

    Returns inf when some output is not finite (outputs are poisoned before each launch).
    """
    worst = 0.0
    n_warps = n_blocks * BENCH_BLOCK // 32
    for k1, k2 in CHECK_CELLS:
        ref = reference_sums(pools, k1, k2, n_warps, reps, ptile, edge_kernel)
        scale = max(float(np.max(np.abs(ref))), 1e-300)
        for p in range(len(PRIMITIVES)):
            got = np.asarray(runner.check(p, k1, k2, n_blocks, reps), dtype=np.float64)
            if got.shape != ref.shape or not np.all(np.isfinite(got)):
                return math.inf
            worst = max(worst, float(np.max(np.abs(got - ref))) / scale)
    return worst


def _calibrate(runner: Runner, target_s: float, log: Callable[[str], None]) -> tuple[float, float]:
    """Seconds per lane trip (per warp, device-wide) and the per-pair overhead in trips.

    From dd at (64, 64) (128 trips + overhead) and ss at (1, 1) (almost only overhead).
    """
    dd, ss = PRIMITIVES.index("dd"), PRIMITIVES.index("ss")
    runner.time_batch([(p, 64, 64, 2) for p in range(len(PRIMITIVES))])  # warm-up

    def per_pair(prim: int, k: int) -> float:
        reps = 8
        for _ in range(5):
            t = float(np.median(runner.time_batch([(prim, k, k, reps)] * 3)))
            if t >= 0.5 * target_s or reps >= R_MAX:
                break
            reps = int(min(R_MAX, max(2 * reps, math.ceil(reps * target_s / max(t, 1e-9)))))
        return t / (runner.warps(prim) * reps)

    t_dd, t_ss = per_pair(dd, 64), per_pair(ss, 1)
    if np.isfinite(t_dd) and np.isfinite(t_ss) and t_dd > 1.5 * t_ss > 0:
        per_trip = (t_dd - t_ss) / 128.0
        overhead = float(np.clip(t_ss / per_trip, 1.0, 256.0))
    else:  # implausible: fall back to an overhead of 8 trips
        per_trip, overhead = t_dd / 136.0, 8.0
    if not (np.isfinite(per_trip) and per_trip > 0):
        raise RuntimeError(f"calibration failed: dd(64,64) {t_dd!r} s, ss(1,1) {t_ss!r} s per pair")
    log(f"  calibration: {per_trip * 1e12:.3f} ps per lane trip (per warp), per-pair overhead ~{overhead:.1f} trips")
    return per_trip, overhead


def measure_grid(
    runner: Runner,
    ks: Sequence[int],
    target_s: float = 2e-4,
    repeat: int = 3,
    fixed_reps: int = 0,
    log: Callable[[str], None] = print,
    quiet: bool = False,
) -> dict[str, np.ndarray]:
    """Time every primitive on every cell of ks x ks.

    Parameters
    ----------
    runner : Runner
        The device side (one kernel kind).
    ks : increasing sequence of int in 1..64
        Measured nonzero counts.
    target_s : float
        Wanted seconds per launch (R chosen from a calibrated cost model; launches much
        shorter than that are measured again with a larger R).
    repeat : int
        Launches per primitive and cell (median taken).
    fixed_reps : int
        When > 0, R for every launch (no calibration).
    log : callable
        Printer.
    quiet : bool
        No progress lines.

    Returns
    -------
    dict with "seconds" (per octile pair), "launch" (median seconds per launch) and "reps",
    each of shape (len(ks), len(ks), 4).
    """
    ks = [int(k) for k in ks]
    n, P = len(ks), len(PRIMITIVES)
    warps = np.array([runner.warps(p) for p in range(P)], dtype=np.float64)
    reps = np.zeros((n, n, P), dtype=np.int64)
    cost = np.ones((n, n, P))
    if fixed_reps > 0:
        runner.time_batch([(p, 64, 64, 2) for p in range(P)])  # warm-up
        reps[:] = int(fixed_reps)
    else:
        per_trip, overhead = _calibrate(runner, target_s, log)
        for a, k1 in enumerate(ks):
            for b, k2 in enumerate(ks):
                for p, name in enumerate(PRIMITIVES):
                    cost[a, b, p] = cost_trips(name, k1, k2, overhead)
        est = warps[None, None, :] * per_trip * cost
        reps[:] = np.clip(np.round(target_s / est), 1, R_MAX).astype(np.int64)
    n_launch = n * n * P * repeat
    if not quiet:
        est = f", about {n_launch * target_s:.0f} s of GPU time" if fixed_reps <= 0 else ""
        log(f"  {n}x{n} cells x {P} primitives x {repeat} launches = {n_launch} launches{est}")
    launch = np.full((n, n, P), np.nan)

    def run_cells(cells: list[tuple[int, int, int]]) -> None:
        jobs = [(p, ks[a], ks[b], int(reps[a, b, p])) for _ in range(repeat) for a, b, p in cells]
        t = np.asarray(runner.time_batch(jobs), dtype=np.float64).reshape(repeat, len(cells))
        med = np.median(t, axis=0)
        for (a, b, p), v in zip(cells, med, strict=True):
            launch[a, b, p] = v

    t0 = time.perf_counter()
    last = t0
    for a in range(n):
        if a > 0 and fixed_reps <= 0:
            # R of this row from the previous row's measured times, scaled by the cost model
            prev = launch[a - 1] / (warps[None, :] * reps[a - 1])
            est = warps[None, :] * prev * cost[a] / cost[a - 1]
            ok = np.isfinite(est) & (est > 0)
            reps[a][ok] = np.clip(np.round(target_s / est[ok]), 1, R_MAX).astype(np.int64)
        run_cells([(a, b, p) for b in range(n) for p in range(P)])
        now = time.perf_counter()
        if not quiet and (now - last > 5.0 or a in (0, n - 1)):
            eta = (now - t0) / (a + 1) * (n - a - 1)
            log(f"  k1 = {ks[a]:2d} ({a + 1}/{n} rows), {now - t0:.1f} s elapsed, ~{eta:.0f} s left")
            last = now
    if fixed_reps <= 0:  # too-short launches again, longer
        short = np.argwhere((launch < 0.25 * target_s) & (reps < R_MAX))
        if short.size:
            for a, b, p in short:
                scale = target_s / max(float(launch[a, b, p]), 1e-7)
                reps[a, b, p] = int(min(R_MAX, math.ceil(reps[a, b, p] * scale)))
            cells = [tuple(int(x) for x in c) for c in short]
            for s in range(0, len(cells), 256):
                run_cells(cells[s : s + 256])
            if not quiet:
                log(f"  re-measured {len(cells)} short launches with a larger R")
    seconds = launch / (warps[None, None, :] * reps)
    return {"seconds": seconds, "launch": launch, "reps": reps}


# ------------------------------------------------------------------------------ outputs
def _flavour(labeled: bool) -> str:
    return "labeled" if labeled else "unlabeled"


def _region(sel: np.ndarray, p: int) -> str:
    k1, k2 = np.nonzero(sel[1:, 1:] == p)
    if k1.size == 0:
        return "wins nowhere"
    k1, k2 = k1 + 1, k2 + 1
    prod = k1 * k2
    return (
        f"wins {k1.size:4d}/4096 cells: k1 {k1.min()}-{k1.max()}, k2 {k2.min()}-{k2.max()}, "
        f"k1*k2 {prod.min()}-{prod.max()}"
    )


def plot_maps(path: Path, maps: dict[bool, np.ndarray], title: str) -> bool:
    """Heat map of the best primitive over the k1 x k2 grid, one panel per kernel kind."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.colors import ListedColormap
        from matplotlib.patches import Patch
    except ImportError:
        print("note: matplotlib missing, no map plot", flush=True)
        return False
    kinds = sorted(maps)
    fig, axes = plt.subplots(1, len(kinds), figsize=(5.2 * len(kinds), 5.0), squeeze=False)
    cmap = ListedColormap(list(COLORS))
    for ax, labeled in zip(axes[0], kinds, strict=True):
        sel = maps[labeled][1:, 1:]
        ax.imshow(sel, origin="lower", cmap=cmap, vmin=-0.5, vmax=len(PRIMITIVES) - 0.5,
                  extent=(0.5, 64.5, 0.5, 64.5), interpolation="nearest")  # fmt: skip
        ax.set_xlabel("nonzeros of the G2 octile (k2)")
        ax.set_ylabel("nonzeros of the G1 octile (k1)")
        ax.set_title(_flavour(labeled))
        ax.set_xticks([1, 16, 32, 48, 64])
        ax.set_yticks([1, 16, 32, 48, 64])
    handles = [Patch(color=COLORS[i], label=PRIM_NAMES[p]) for i, p in enumerate(PRIMITIVES)]
    fig.legend(handles=handles, loc="lower center", ncol=len(PRIMITIVES), fontsize=9, frameon=False)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=(0, 0.07, 1, 0.95))
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def write_outputs(
    out: Path,
    results: dict[bool, dict[str, Any]],
    ceilings: dict[str, tuple[float, str, str]],
    device_name: str,
    ks: Sequence[int],
    step: int = 1,
    save_cache: bool = True,
    log: Callable[[str], None] = print,
) -> dict[bool, np.ndarray]:
    """Write primitives.csv, roofline.csv, primitives_map.png and the maps; print the summary.

    Parameters
    ----------
    out : Path
        Output folder (created).
    results : {labeled: {"seconds": (n, n, 4) array, "check": float, ...}}
        Measurements per kernel kind.
    ceilings : {name: (value, unit, note)}
        Measured ceilings (``fp32_fma_peak`` and ``fp64_fma_peak`` in GFLOP/s, ...).
    device_name : str
        GPU model (names the map files).
    ks : sequence of int
        Measured counts (the axes of every "seconds" array).
    step : int
        The ``--step`` used (plot title).
    save_cache : bool
        Also store the maps in the solver's map cache.
    log : callable
        Printer.

    Returns
    -------
    {labeled: (65, 65) uint8 selection map}
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    ks = [int(k) for k in ks]
    maps: dict[bool, np.ndarray] = {}
    rows = []
    for labeled in sorted(results):
        sec = np.asarray(results[labeled]["seconds"], dtype=np.float64)
        maps[labeled] = selection_from_grid(ks, sec)
        for a, k1 in enumerate(ks):
            for b, k2 in enumerate(ks):
                ns = sec[a, b] * 1e9
                row: dict[str, Any] = {"labeled": int(labeled), "k1": k1, "k2": k2}
                for p, name in enumerate(PRIMITIVES):
                    row[f"ns_{name}"] = f"{ns[p]:.5g}"
                row["best"] = PRIMITIVES[int(np.nanargmin(np.where(np.isnan(ns), np.inf, ns)))]
                for p, name in enumerate(PRIMITIVES):
                    row[f"gflops_{name}"] = f"{2.0 * k1 * k2 / ns[p]:.5g}" if ns[p] > 0 else "nan"
                rows.append(row)
    cols = ["labeled", "k1", "k2"] + [f"ns_{p}" for p in PRIMITIVES] + ["best"] + [f"gflops_{p}" for p in PRIMITIVES]
    write_csv(out / "primitives.csv", rows, cols)

    roof = [(name, v, unit, note) for name, (v, unit, note) in ceilings.items()]
    fp32 = ceilings.get("fp32_fma_peak", (math.nan, "", ""))[0]
    fp64 = ceilings.get("fp64_fma_peak", (math.nan, "", ""))[0]
    i64 = ks.index(64) if 64 in ks else None
    for labeled in sorted(results):
        fl = _flavour(labeled)
        if i64 is not None:
            ns = np.asarray(results[labeled]["seconds"], dtype=np.float64)[i64, i64] * 1e9
            g = 2.0 * 64 * 64 / ns
            dd = PRIMITIVES.index("dd")
            roof.append((f"dd_k64_{fl}", g[dd], "GFLOP/s", "dense x dense at k1=k2=64, 2*64*64 FLOP per pair"))
            roof.append((f"dd_k64_{fl}_frac_fp32_peak", g[dd] / fp32, "1", "of the measured FP32 FMA peak"))
            roof.append((f"dd_k64_{fl}_frac_fp64_peak", g[dd] / fp64, "1", "of the measured FP64 FMA peak"))
            bp = int(np.nanargmax(np.where(np.isnan(g), -np.inf, g)))
            roof.append((f"best_k64_{fl}", g[bp], "GFLOP/s", f"best primitive at k1=k2=64: {PRIMITIVES[bp]}"))
        chk = results[labeled].get("check", math.nan)
        roof.append((f"check_max_rel_err_{fl}", chk, "1", f"sums vs float64 numpy reference (tol {CHECK_RTOL:g})"))
    with open(out / "roofline.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["name", "value", "unit", "note"])
        for name, v, unit, note in roof:
            w.writerow([name, f"{v:.6g}", unit, note])

    title = f"Best octile-pair primitive, {device_name}"
    if step > 1:
        title += f" (measured every {step} k, nearest fill)"
    plotted = plot_maps(out / "primitives_map.png", maps, title)
    saved = []
    for labeled, sel in maps.items():
        saved.append(save_map(sel, device_name, labeled, folder=out))
        if save_cache:
            saved.append(save_map(sel, device_name, labeled))

    log("")
    log(f"GPU: {device_name}")
    for name, v, unit, note in roof:
        log(f"  {name:34s} {v:12.4g} {unit:8s} {note}")
    for labeled, sel in maps.items():
        sec = np.asarray(results[labeled]["seconds"]) * 1e9
        log(f"{_flavour(labeled)}: ns per octile pair at (1,1) / (64,64)")
        a64 = ks.index(64) if 64 in ks else len(ks) - 1
        for p, name in enumerate(PRIMITIVES):
            log(f"  {name} {PRIM_NAMES[name]:16s} {sec[0, 0, p]:8.3f} / {sec[a64, a64, p]:8.3f}   {_region(sel, p)}")
    log(f"CSV: {out / 'primitives.csv'}, {out / 'roofline.csv'}")
    if plotted:
        log(f"map plot: {out / 'primitives_map.png'}")
    log("maps: " + ", ".join(str(s) for s in saved))
    return maps


# ------------------------------------------------------------------------------ PyCUDA side
def _compile(source: str, key: str) -> Any:
    """The raw PyCUDA module of a benchmark source (compiled and cached by :mod:`mgkflow.gpu.device`)."""
    from ..gpu import device

    return device.build_module(lambda: source, ("bench", key, hashlib.sha1(source.encode()).hexdigest()[:16])).raw


def _blocks_fit(func: Any, block: int) -> int:
    """Resident blocks per SM for ``func`` (registers, threads, shared memory)."""
    from ..gpu import device

    return device.kernel_blocks_per_sm(func, block)


class DeviceData:
    """The octile pools and the input tile on the device (shared by both kernel kinds)."""

    def __init__(self, pools: OctilePools, ptile: np.ndarray) -> None:
        import pycuda.driver as cuda

        self.pools = pools
        self.arrays = {
            "bitmap": cuda.to_device(np.ascontiguousarray(pools.bitmap, dtype=np.uint64)),
            "toff": cuda.to_device(np.ascontiguousarray(pools.toff, dtype=np.int32)),
            "weight": cuda.to_device(np.ascontiguousarray(pools.weight, dtype=np.float32)),
            "elab": cuda.to_device(np.ascontiguousarray(pools.labels, dtype=np.float32).view(np.uint32)),
            "ptile": cuda.to_device(np.ascontiguousarray(ptile, dtype=np.float64).reshape(64)),
        }


class PycudaRunner:
    """:class:`Runner` for one compiled benchmark module (PyCUDA, default stream, CUDA events)."""

    #: launches per synchronized batch (events are reused between batches)
    BATCH = 512
    #: the spin kernel in front of each batch keeps the queue ahead of the GPU (ns)
    SPIN_NS = 300_000

    def __init__(self, module: Any, data: DeviceData, blocks_per_sm: int) -> None:
        import pycuda.driver as cuda

        self.cuda = cuda
        self.data = data
        self.funcs = []
        self.grid = []
        n_sm = cuda.Context.get_device().get_attribute(cuda.device_attribute.MULTIPROCESSOR_COUNT)
        self.info = []
        for name in PRIMITIVES:
            f = module.get_function(f"bench_{name}")
            f.prepare("PPPPqPPiiii")
            fit = _blocks_fit(f, BENCH_BLOCK)
            self.funcs.append(f)
            self.grid.append(n_sm * max(1, min(int(blocks_per_sm), fit)))
            try:
                local = int(f.local_size_bytes)
            except Exception:  # noqa: BLE001 - only informative
                local = -1
            self.info.append(f"{name}: {int(f.num_regs)} regs, {local} B local, {self.grid[-1] // n_sm} blocks/SM")
        self.spin = module.get_function("bench_spin")
        self.spin.prepare("q")
        self.out = cuda.mem_alloc(8 * max(self.grid) * BENCH_BLOCK)
        self.events: list[Any] = []
        a = data.arrays
        self.ptrs = (int(a["bitmap"]), int(a["toff"]), int(a["weight"]), int(a["elab"]))
        self.ptile = int(a["ptile"])

    def warps(self, prim: int) -> int:
        return self.grid[prim] * BENCH_BLOCK // 32

    def _launch(self, prim: int, k1: int, k2: int, reps: int, grid: int) -> None:
        pools = self.data.pools
        self.funcs[prim].prepared_call(
            (int(grid), 1, 1), (BENCH_BLOCK, 1, 1), *self.ptrs, int(pools.elab_stride), self.ptile, int(self.out),
            int(pools.start(0, k1)), int(pools.start(1, k2)), int(pools.n_samples), int(reps),
        )  # fmt: skip

    def time_batch(self, jobs: Sequence[tuple[int, int, int, int]]) -> np.ndarray:
        cuda = self.cuda
        out = np.empty(len(jobs), dtype=np.float64)
        for s in range(0, len(jobs), self.BATCH):
            chunk = jobs[s : s + self.BATCH]
            while len(self.events) < 2 * len(chunk):
                self.events.append(cuda.Event())
            self.spin.prepared_call((1, 1, 1), (1, 1, 1), int(self.SPIN_NS))
            for j, (p, k1, k2, reps) in enumerate(chunk):
                self.events[2 * j].record()
                self._launch(p, k1, k2, reps, self.grid[p])
                self.events[2 * j + 1].record()
            self.events[2 * len(chunk) - 1].synchronize()
            for j in range(len(chunk)):
                out[s + j] = self.events[2 * j + 1].time_since(self.events[2 * j]) * 1e-3
        return out

    def check(self, prim: int, k1: int, k2: int, n_blocks: int, reps: int) -> np.ndarray:
        cuda = self.cuda
        n = int(n_blocks) * BENCH_BLOCK
        cuda.memset_d32(int(self.out), 0xFFFFFFFF, 2 * n)  # NaN: every output must be written
        self._launch(prim, k1, k2, reps, n_blocks)
        cuda.Context.synchronize()
        res = np.empty(n, dtype=np.float64)
        cuda.memcpy_dtoh(res, int(self.out))
        return res


def _time_kernel(func: Any, grid: int, block: int, args: Sequence[Any], n: int = 5) -> float:
    """Median seconds of ``n`` launches after one warm-up (CUDA events)."""
    import pycuda.driver as cuda

    func.prepared_call((int(grid), 1, 1), (int(block), 1, 1), *args)
    times = []
    start, end = cuda.Event(), cuda.Event()
    for _ in range(n):
        start.record()
        func.prepared_call((int(grid), 1, 1), (int(block), 1, 1), *args)
        end.record()
        end.synchronize()
        times.append(end.time_since(start) * 1e-3)
    return float(np.median(times))


def measure_ceilings(log: Callable[[str], None] = print) -> dict[str, tuple[float, str, str]]:
    """Measure FP32/FP64 FMA peaks (GFLOP/s) and device-memory bandwidth (GB/s) with ``roofline.cu``."""
    import pycuda.driver as cuda

    mod = _compile(roofline_source(), "roofline")
    dev = cuda.Context.get_device()
    n_sm = dev.get_attribute(cuda.device_attribute.MULTIPROCESSOR_COUNT)
    block, chains, unroll, iters = 256, 8, 16, 4096
    res: dict[str, tuple[float, str, str]] = {}
    f32, f64 = mod.get_function("peak_fp32"), mod.get_function("peak_fp64")
    f32.prepare("Pffi")
    f64.prepare("Pddi")
    g32 = n_sm * min(8, _blocks_fit(f32, block))
    g64 = n_sm * min(8, _blocks_fit(f64, block))
    scratch = cuda.mem_alloc(8 * max(g32, g64) * block)
    try:
        t = _time_kernel(f32, g32, block, (int(scratch), 0.9999, 1e-4, iters))
        flops = 2.0 * chains * unroll * iters * g32 * block
        res["fp32_fma_peak"] = (flops / t / 1e9, "GFLOP/s", f"{chains} FMA chains x {g32 // n_sm} blocks/SM")
        t = _time_kernel(f64, g64, block, (int(scratch), 0.9999, 1e-4, iters))
        flops = 2.0 * chains * unroll * iters * g64 * block
        res["fp64_fma_peak"] = (flops / t / 1e9, "GFLOP/s", f"{chains} FMA chains x {g64 // n_sm} blocks/SM")
    finally:
        scratch.free()
    free, _total = cuda.mem_get_info()
    nbytes = int(min(1 << 30, free // 4)) // (1 << 20) * (1 << 20)
    n = nbytes // 16
    fill, cp, rd = mod.get_function("fill_f4"), mod.get_function("copy_f4"), mod.get_function("read_f4")
    fill.prepare("Pq")
    cp.prepare("PPq")
    rd.prepare("PPq")
    gm = n_sm * min(8, _blocks_fit(cp, block))
    src, dst = cuda.mem_alloc(nbytes), cuda.mem_alloc(nbytes)
    part = cuda.mem_alloc(4 * gm * block)
    try:
        fill.prepared_call((gm, 1, 1), (block, 1, 1), int(src), int(n))
        fill.prepared_call((gm, 1, 1), (block, 1, 1), int(dst), int(n))
        cuda.Context.synchronize()
        t = _time_kernel(cp, gm, block, (int(src), int(dst), int(n)))
        note = f"float4 copy of {nbytes >> 20} MiB, read + write"
        res["dram_copy_bandwidth"] = (2.0 * nbytes / t / 1e9, "GB/s", note)
        t = _time_kernel(rd, gm, block, (int(src), int(part), int(n)))
        res["dram_read_bandwidth"] = (nbytes / t / 1e9, "GB/s", f"float4 read-reduce of {nbytes >> 20} MiB")
    finally:
        src.free()
        dst.free()
        part.free()
    for k, (v, unit, _note) in res.items():
        log(f"  {k:22s} {v:10.1f} {unit}")
    return res


# ------------------------------------------------------------------------------ entry point
def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m mgkflow.bench primitives``."""
    ap = argparse.ArgumentParser(prog="python -m mgkflow.bench primitives", description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.environ.get("OUT") or "reports", help="output folder (default reports/)")
    ap.add_argument("--samples", type=int, default=256, help="random octiles per pool (per k and side)")
    ap.add_argument("--reps", type=int, default=0, help="octile pairs per warp and launch (default: auto)")
    ap.add_argument("--target-ms", type=float, default=0.2, help="wanted ms per launch with automatic R")
    ap.add_argument("--repeat", type=int, default=3, help="launches per primitive and cell (median)")
    ap.add_argument("--step", type=int, default=1, help="measure every STEP-th k (nearest fill between)")
    ap.add_argument("--blocks-per-sm", type=int, default=BENCH_MIN_BLOCKS, help="blocks of 256 threads per SM")
    ap.add_argument("--kinds", default="unlabeled,labeled", help="comma-separated: unlabeled,labeled")
    ap.add_argument("--no-roofline", action="store_true", help="skip the ceiling measurements")
    ap.add_argument("--no-cache", action="store_true", help="do not store the maps in the solver's map cache")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quiet", action="store_true", help="no progress lines")
    args = ap.parse_args(argv)
    if args.samples < 1 or args.repeat < 1 or args.reps < 0 or args.target_ms <= 0 or args.blocks_per_sm < 1:
        ap.error("--samples, --repeat, --blocks-per-sm must be >= 1, --reps >= 0, --target-ms > 0")
    try:
        ks = measured_ks(args.step)
    except ValueError as exc:
        ap.error(str(exc))
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    if not kinds or any(k not in ("unlabeled", "labeled") for k in kinds):
        ap.error("--kinds takes unlabeled and/or labeled")
    flavours = [k == "labeled" for k in dict.fromkeys(kinds)]

    from ..gpu import device_available

    if not device_available():
        print("no CUDA device (or no PyCUDA): nothing to benchmark", file=sys.stderr)
        return 1
    import pycuda.driver as cuda

    def log(msg: str) -> None:
        print(msg, flush=True)

    t_start = time.perf_counter()
    from ..gpu import device

    device.ensure_context()
    dev = cuda.Context.get_device()
    device_name = dev.name()
    log(f"primitive benchmark on {device_name} (sm_{''.join(map(str, dev.compute_capability()))}, "
        f"{dev.get_attribute(cuda.device_attribute.MULTIPROCESSOR_COUNT)} SMs); k in {ks[0]}..{ks[-1]} "
        f"step {args.step} ({ks.size}x{ks.size} cells), {args.samples} samples per pool")  # fmt: skip
    ceilings: dict[str, tuple[float, str, str]] = {}
    if not args.no_roofline:
        log("ceilings:")
        ceilings = measure_ceilings(log)
    pools = make_pools(args.samples, seed=args.seed)
    ptile = np.random.default_rng(args.seed + 1).uniform(0.5, 1.5, 64)
    data = DeviceData(pools, ptile)
    results: dict[bool, dict[str, Any]] = {}
    failed = False
    for labeled in flavours:
        fl = _flavour(labeled)
        t0 = time.perf_counter()
        config = bench_config(labeled)
        module = _compile(bench_source(config), "primitives")
        ptr, _size = module.get_global(KPAR)
        cuda.memcpy_htod(ptr, kernel_values(*bench_kernels(labeled)[:2]))
        runner = PycudaRunner(module, data, args.blocks_per_sm)
        log(f"{fl}: compiled in {time.perf_counter() - t0:.1f} s; " + "; ".join(runner.info))
        err = check_flavour(runner, pools, ptile, bench_kernels(labeled)[1])
        ok = err <= CHECK_RTOL
        failed |= not ok
        log(f"  check against the numpy reference: max rel err {err:.2e} ({'ok' if ok else 'FAILED'})")
        res = measure_grid(runner, ks, args.target_ms * 1e-3, args.repeat, args.reps, log, args.quiet)
        res["check"] = err
        lt, rr = res["launch"] * 1e3, res["reps"]
        log(f"  launches {np.nanmin(lt):.3f}..{np.nanmax(lt):.3f} ms; R {rr.min()}..{rr.max()}")
        results[labeled] = res
    write_outputs(Path(args.out), results, ceilings, device_name, ks, args.step,
                  save_cache=not args.no_cache and not failed, log=log)  # fmt: skip
    if failed:
        log(f"ERROR: a primitive's sums disagree with the reference; maps NOT stored in {map_dir()}")
    log(f"total {time.perf_counter() - t_start:.1f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
