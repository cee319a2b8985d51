"""Wide-path strategy "staged": G2 nonzeros in registers, slices of P in shared memory
(``wide_xmv_staged`` in ``mgk_wide.cu``), with its host tables (:func:`staged_g2`).

A block takes a task (G1 tile row I, group of consecutive G2 rows); the group's nonzeros sit
in ``slots`` register slots per thread; for each octile (I, J) of G1 the block stages
P[J, colset] as float in shared memory and every thread walks the octile's entries against
its slots: one shared load and a few flops per product, products in float32. Numpy
emulation: :func:`mgkflow.gpu.emulate.xmv_staged`.

"auto" takes it only for labeled edge kernels at q >= :data:`STAGED_MIN_Q` (float32 products
cost ~eps32 / q of relative accuracy; the unlabeled case's exact one-iteration solution needs
the float64 row path). Cost per XMV: G1 entries x groups of G2 (every G1 entry of a tile row
meets every thread of every group, full or not), P-slice loads (tile rows x column tiles of
all groups x 64) and unknowns.

How the tables serve the kernel: the staged XMV computes y = (A∘E) p for ONE pair (G1, G2)
of large graphs. A thread block takes a task (G1 tile row I, group of consecutive G2 rows)
and owns the outputs (8I + i, r) of the task, i = 0..7 and r a row of the group:

* the G2 side lives in registers: each nonzero of the group's rows sits in one of
  ``slots`` register slots of one thread; the nonzeros of a row are dealt to the row's
  threads in turn (entry e of a row with T threads goes to thread e % T, slot e // T), so the
  threads of a row read neighbouring columns in the same slot (few shared-memory bank
  conflicts);
* for each octile (I, J) of G1, the block stages the slice P[J, colset] of the search
  direction (8 rows x the group's column tiles, as float) and the octile's compact
  entries in shared memory; every thread then walks the octile's entries (the same for the
  whole block) against its slots: one shared-memory load and a few flops per product.

The G2-side tables are built by :func:`staged_g2`; the G1 side is the octile format itself
(tile-row pointers, bitmaps, compact arrays). The tables need no GPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...format.octile import TILE, OctileGraph
from .. import device
from . import PairContext, Strategy, register

__all__ = [
    "Staged", "STRATEGY", "STAGED_MIN_Q", "StagedG2", "staged_g2", "GROUP_FIELDS", "DEFAULT_SLOTS",
    "DEFAULT_STAGED_BLOCK", "MAX_GROUP_COLS",
]  # fmt: skip

# ---------------------------------------------------------------------------------- host tables

#: Register slots per thread (G2 nonzeros a thread holds).
DEFAULT_SLOTS = 8
#: Threads per block of the staged XMV.
DEFAULT_STAGED_BLOCK = 256
#: Largest column-tile set of one group (its P slice: 8 x 8 * cols floats of shared memory).
MAX_GROUP_COLS = 192
#: Columns of :attr:`StagedG2.groups`.
GROUP_FIELDS = ("row0", "nrows", "thread0", "nthreads", "col0", "ncol", "rt0", "pad")


@dataclass
class StagedG2:
    """One graph as the G2 side of the staged XMV.

    Attributes
    ----------
    slots, block : int
        Register slots per thread and threads per block the tables were built for.
    groups : int32 array (n_groups, 8)
        Per group (see :data:`GROUP_FIELDS`): first row, rows, first thread record, thread
        records (at most ``block``), first entry in ``colset``, column tiles, first entry in
        ``row_thread``, padding. Groups are consecutive rows (padding rows included, with no
        threads) and fill a block with threads as far as whole rows allow.
    colset : int32 array
        The sorted column tiles of every group, concatenated.
    row_thread : int32 array
        Per group, ``nrows + 1`` thread starts (relative to the group's first thread): the
        threads of row ``row0 + k`` are ``row_thread[rt0 + k] : row_thread[rt0 + k + 1]``.
    slot_col : int32 array (slots, n_threads)
        Column of each slot in the group's P slice: ``position of J2 in the colset * 8 + j2 % 8``
        (0 in empty slots).
    slot_weight : float32 array (slots, n_threads)
        Edge weight of each slot (0 in empty slots).
    slot_labels : uint32 array (n_fields, slots, n_threads)
        Edge-label words (int32 or float32 bits) of each slot.
    nnz : int
        Nonzeros of the graph (occupied slots).
    """

    slots: int
    block: int
    groups: np.ndarray
    colset: np.ndarray
    row_thread: np.ndarray
    slot_col: np.ndarray
    slot_weight: np.ndarray
    slot_labels: np.ndarray
    nnz: int = 0

    @property
    def n_groups(self) -> int:
        """Number of groups (tasks per G1 tile row)."""
        return int(self.groups.shape[0])

    @property
    def n_threads(self) -> int:
        """Thread records over all groups."""
        return int(self.slot_col.shape[1])

    @property
    def max_cols(self) -> int:
        """Largest column-tile set of a group."""
        return int(self.groups[:, 5].max(initial=0))

    def fill(self) -> float:
        """Fraction of the register slots that hold a nonzero (work efficiency of the slots)."""
        total = self.slot_weight.size
        return self.nnz / total if total else 1.0


def _label_words(values: np.ndarray) -> np.ndarray:
    v = np.asarray(values)
    v = v.astype(np.int32) if v.dtype.kind in "iub" else v.astype(np.float32)
    return v.view(np.uint32)


def staged_g2(
    og: OctileGraph,
    edge_fields: Sequence[str] = (),
    slots: int = DEFAULT_SLOTS,
    block: int = DEFAULT_STAGED_BLOCK,
    max_cols: int = MAX_GROUP_COLS,
) -> StagedG2:
    """Build the G2-side tables of the staged XMV for one graph in octile format.

    Parameters
    ----------
    og : OctileGraph
        The graph (after reordering), e.g. ``pack_batch(...).graph(k)``.
    edge_fields : sequence of str
        Edge-label fields the edge kernel reads, in the kernel's field order.
    slots : int
        Register slots per thread.
    block : int
        Threads per block: a group never has more thread records than this.
    max_cols : int
        Largest column-tile set of a group (bounds the block's shared memory).

    Returns
    -------
    StagedG2

    Raises
    ------
    ValueError
        When one row alone needs more than ``block`` threads or more than ``max_cols`` column
        tiles (the caller then uses another XMV).

    Examples
    --------
    >>> import numpy as np
    >>> from mgkflow import Graph
    >>> from mgkflow.format import pack_batch
    >>> A = np.zeros((10, 10)); A[0, 1:10] = A[1:10, 0] = 1.0
    >>> t = staged_g2(pack_batch([Graph(A)]).graph(0), slots=4, block=8)
    >>> t.groups[:, :6].tolist()
    [[0, 6, 0, 8, 0, 2], [6, 10, 8, 4, 2, 1]]
    >>> t.row_thread[:4].tolist()
    [0, 3, 4, 5]
    """
    slots, block = int(slots), int(block)
    if slots < 1 or block < 1:
        raise ValueError(f"slots and block must be positive, got {slots}, {block}")
    nt = og.n_tiles_side
    rows, cols = og.entries()
    order = np.lexsort((cols, rows))  # by row, then column
    rows, cols = rows[order], cols[order]
    weight = np.asarray(og.weight)[order]
    labels = [_label_words(np.asarray(og.edge_labels[f])[order]) for f in edge_fields]
    n_rows = nt * TILE
    deg = np.bincount(rows, minlength=n_rows).astype(np.int64)
    thr_row = -(-deg // slots)  # threads per row (0 for empty rows)
    if thr_row.size and thr_row.max() > block:
        r = int(np.argmax(thr_row))
        raise ValueError(f"row {r} needs {int(thr_row[r])} threads of {slots} slots, more than a block of {block}")
    # groups: consecutive rows, at most `block` threads and `max_cols` column tiles each
    bounds = [0]
    used = 0
    for r in range(n_rows):
        if used + thr_row[r] > block:
            bounds.append(r)
            used = 0
        used += int(thr_row[r])
    bounds.append(n_rows)
    row_start = np.concatenate([[0], np.cumsum(deg)])  # entries are sorted by row: a row range is a slice
    groups, colsets, row_threads = [], [], []
    thread0 = col0 = rt0 = 0
    pending = [(a, b) for a, b in zip(bounds[:-1], bounds[1:])]
    while pending:
        a, b = pending.pop(0)
        cset = np.unique(cols[row_start[a] : row_start[b]] // TILE)
        if cset.size > max_cols:
            if b - a == 1:
                raise ValueError(f"row {a} has {cset.size} column tiles, more than {max_cols}")
            mid = (a + b) // 2
            pending[:0] = [(a, mid), (mid, b)]
            continue
        n_thr = int(thr_row[a:b].sum())
        rthr = np.concatenate([[0], np.cumsum(thr_row[a:b])])
        groups.append((a, b - a, thread0, n_thr, col0, cset.size, rt0, 0))
        colsets.append(cset)
        row_threads.append(rthr)
        thread0 += n_thr
        col0 += cset.size
        rt0 += rthr.size
    T = thread0
    slot_col = np.zeros((slots, T), dtype=np.int32)
    slot_weight = np.zeros((slots, T), dtype=np.float32)
    slot_labels = np.zeros((len(labels), slots, T), dtype=np.uint32)
    if rows.size:
        # per entry: its group, thread and slot
        e_in_row = np.arange(rows.size) - row_start[rows]
        t_row = thr_row[rows]
        g_of_row = np.repeat(np.arange(len(groups)), [gr[1] for gr in groups])
        g = g_of_row[rows]
        gthread0 = np.array([gr[2] for gr in groups], dtype=np.int64)
        grow0 = np.array([gr[0] for gr in groups], dtype=np.int64)
        grt0 = np.array([gr[6] for gr in groups], dtype=np.int64)
        rt_all = np.concatenate(row_threads)
        first_thread = rt_all[grt0[g] + rows - grow0[g]]
        thread = gthread0[g] + first_thread + e_in_row % t_row
        slot = e_in_row // t_row
        # column in the group's P slice (a group's entries are one slice of the row-sorted entries)
        pos = np.empty(rows.size, dtype=np.int64)
        for (row0, nrows, *_), cset in zip(groups, colsets):
            e0, e1 = row_start[row0], row_start[row0 + nrows]
            pos[e0:e1] = np.searchsorted(cset, cols[e0:e1] // TILE)
        slot_col[slot, thread] = pos * TILE + cols % TILE
        slot_weight[slot, thread] = weight
        for f, lab in enumerate(labels):
            slot_labels[f, slot, thread] = lab
    return StagedG2(
        slots=slots,
        block=block,
        groups=np.asarray(groups, dtype=np.int32).reshape(-1, len(GROUP_FIELDS)),
        colset=np.concatenate(colsets).astype(np.int32) if colsets else np.zeros(0, np.int32),
        row_thread=np.concatenate(row_threads).astype(np.int32) if row_threads else np.zeros(0, np.int32),
        slot_col=slot_col,
        slot_weight=slot_weight,
        slot_labels=slot_labels,
        nnz=int(rows.size),
    )


# ---------------------------------------------------------------------------------- strategy

#: Smallest stop probability at which "auto" considers the staged XMV.
STAGED_MIN_Q = 0.01


def staged_tables(cuda: Any, db: Any, g: int, edge_fields: tuple, block: int, slots: int) -> tuple[StagedG2, dict]:
    """Host and device staged tables of graph ``g`` of the batch as G2 (cached on ``db.staged``)."""
    cache = db.staged
    key = (int(g), tuple(edge_fields), int(block), int(slots))
    hit = cache.get(key)
    if hit is None:
        t = staged_g2(db.batch.graph(int(g)), list(edge_fields), slots=slots, block=block)
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


class Staged(Strategy):
    name = "staged"
    path = "wide"
    kernel = "wide_xmv_staged"
    feature_names = ("entries_x_groups", "slice_loads", "unknowns")
    fallback_rank = 0

    def applies(self, ctx: PairContext) -> str:
        if ctx.config is None:
            return "no kernel configuration given"
        if not ctx.forced and not ctx.config.edge_fields:
            # constant edge kernel: the float64 row XMV reaches the exact (constant) solution of the
            # unlabeled system in one iteration; float32 products would not
            return "the edge kernel reads no label"
        if not ctx.forced and ctx.q_min < STAGED_MIN_Q:
            return f"q = {ctx.q_min:g} < {STAGED_MIN_Q:g} (float32 products lose ~eps32 / q of accuracy)"
        try:
            self.prepare(ctx)
        except ValueError as exc:
            return str(exc)
        return ""

    def prepare(self, ctx: PairContext) -> tuple[StagedG2, dict]:
        fields = tuple(f for f, _ in ctx.config.edge_fields)
        return staged_tables(ctx.cuda, ctx.db, ctx.g2, fields, ctx.block, ctx.slots)

    def features(self, ctx: PairContext) -> dict[str, float]:
        t, _ = self.prepare(ctx)
        cols = float(np.asarray(t.groups)[:, 5].sum())
        return {"entries_x_groups": float(ctx.nnz1) * t.n_groups, "slice_loads": 64.0 * ctx.nt1 * cols,
                "unknowns": 64.0 * ctx.nt1 * ctx.nt2}  # fmt: skip

    def shared_bytes(self, ctx: PairContext) -> int:
        t, _ = self.prepare(ctx)
        # 8 partial sums (double) per thread, then the P slice (8 rows x 8 * ncol floats)
        return 64 * ctx.block + 256 * max(t.max_cols, 1)

    def grid(self, ctx: PairContext, fn: device.Kernel, limits: device.DeviceLimits, blocks_per_sm: int | None) -> int:
        t, _ = self.prepare(ctx)
        per_sm = device.blocks_per_sm(fn.num_regs, ctx.block, self.shared_bytes(ctx), fn.shared_size_bytes,
                                      limits=limits)  # fmt: skip
        return int(max(1, min(limits.n_sm * per_sm, ctx.nt1 * t.n_groups)))

    def launch(self, ctx: PairContext, fn: Any, grid: int, vectors: dict[str, Any]) -> None:
        t, dev = self.prepare(ctx)
        a, db = ctx.db.arrays, ctx.db
        fn(grid=(grid, 1), block=(ctx.block, 1, 1), shared=self.shared_bytes(ctx), rowptr=a["rowptr"],
           tile_col=a["tile_col"], bitmap=a["bitmap"], toff=a["toff"], weight=a["weight"], elab=a["elab"],
           elab_stride=db.elab_stride, rowptr_off1=ctx.ro1, groups=dev["groups"], n_groups=t.n_groups,
           colset=dev["colset"], row_thread=dev["row_thread"], slot_col=dev["slot_col"], slot_w=dev["slot_w"],
           slot_lab=dev["slot_lab"], slot_stride=t.n_threads, nt2=ctx.nt2, n_tasks=ctx.nt1 * t.n_groups,
           P=vectors["P"], DG=vectors["DG"], A=vectors["A"], task_counter=vectors["counter"],
           part=vectors["part"])  # fmt: skip


STRATEGY = register(Staged())
