"""Compact per-pair solver for small pairs (``mgk_compact.cu``): molecules and other small graphs.

The per-block solver (``mgk_solver.cu``) pads both graphs to whole 8-node tiles and evaluates
the edge kernel on every product of every XMV; on molecule-sized pairs that is most of its
work. The compact solver runs the same float64 Jacobi-preconditioned CG (in the Chronopoulos-Gear
form: one block reduction per step) on the unpadded product space (u = i * n2 + i2), forms the
pair's product coefficients once per pair in shared memory (every nonzero of G1 against every
nonzero of G2) and keeps each thread's entries of r, a = M p and the inverse diagonal in registers
(``KE`` entries per thread). It reads the row
layout of the per-block strategy "rows" (:mod:`mgkflow.gpu.strategies.row_pair`), so it is used
when the call's batch has it (the default ``xmv="rows"``), for value-only solves. A unit-weight call whose
edges carry at most :data:`MAX_CAT` distinct label tuples (:func:`edge_categories`, molecules' bond orders)
uses the category build: no per-pair coefficients, a table of the categories' edge kernel values instead.

:func:`compact_bins` (or a :class:`CompactRouter`, its tables kept for a set of graphs) routes pairs:
those with ``n1 * n2 <= max(BINS)`` product unknowns whose tables fit their launch's share of
:data:`SMEM_PER_SM`, in launches of 64 to 1,024 threads by size.
:func:`compact_source` generates the CUDA source, :func:`shared_bytes` a pair's shared memory
and :func:`emulate_launch` runs a launch in numpy (the fake-driver tests' reference).
The registry entry :class:`CompactSolver` (``"compact"``, rank 0 of :mod:`mgkflow.gpu.solvers`) and its
run path :class:`CompactPath` (routing a call's pairs, building the bins' modules, queuing their
launches) close the module.

Examples
--------
>>> from mgkflow.kernels import Constant
>>> from mgkflow.gpu.source import make_config
>>> src = compact_source(make_config(Constant(1.0), Constant(1.0)), block=128)
>>> "mgk_solve_compact" in src and "${" not in src and "#define BLOCK 128" in src
True
>>> shared_bytes(24, 24, 52, 52, c_bytes=4)
20648
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from string import Template
from typing import Any

import numpy as np

from ...system import GraphSystem, system_graphs
from .. import device
from ..core import SORT_EXACT_MAX, DeviceBatch, SharedArgs, config_key, job_list
from ..plan import waves
from ..source import KPAR, KernelConfig, common_placeholders, template_text
from . import Solver, register

__all__ = ["KERNEL", "KE", "NCLS", "BINS", "MIN_THREADS", "SMEM_PER_SM", "STATIC_SMEM_MAX", "MAX_CAT", "smem_budget",
           "CompactLaunch", "compact_source", "shared_bytes", "fits_all", "degree_classes", "edge_categories",
           "call_categories", "CompactRouter",
           "compact_bins", "emulate_launch", "router_of", "compact_request", "COMPACT_SHARED", "CompactPath",
           "CompactSolver"]  # fmt: skip

#: Kernel name in ``mgk_compact.cu``.
KERNEL = "mgk_solve_compact"
#: Product entries each thread owns (registers per entry: r, a = M p, the inverse diagonal, the slot's node pair).
KE = 4
#: Degree classes of the thread-slot order: degrees ``NCLS - 1`` and up, ..., 1, 0 (:func:`degree_classes`).
NCLS = 5
#: (largest product unknowns, threads per block) of the launch bins, ascending: threads in steps of 32 up to
#: 256, then of 64 to 512, then 768 and 1,024, so a pair fills most of its block's KE entries per thread.
#: Measured on drugs against bins twice as large each (64 to 1,024 threads, filled 50-100%): -8% device time
#: with nine bins (steps of 1.5x and 1.33x), -10% with these thirteen (gpu/NOTES.md, calls C9 and H9).
BINS: tuple[tuple[int, int], ...] = (
    (4 * 64, 64), (4 * 96, 96), (4 * 128, 128), (4 * 160, 160), (4 * 192, 192), (4 * 224, 224), (4 * 256, 256),
    (4 * 320, 320), (4 * 384, 384), (4 * 448, 448), (4 * 512, 512), (4 * 768, 768), (4 * 1024, 1024),
)  # fmt: skip
#: Resident threads per SM the compiler must fit registers for (``__launch_bounds__``): 1,024 gives
#: 64 registers with small spills and was the fastest measured (512, 768, 1,280, 1,536: gpu/NOTES.md). A bin
#: whose block does not divide it gets ``MIN_THREADS // block`` blocks (896 or 960 threads, 768 at 384 and 768).
MIN_THREADS = 1024
#: Shared memory (bytes) of one SM that the pairs' tables (P, W, coefficients, rows, columns) of a launch
#: may fill at full occupancy (``MIN_THREADS // block`` blocks per SM): a bin of ``block`` threads takes
#: the pairs whose tables need at most ``SMEM_PER_SM * block // MIN_THREADS`` bytes (48 KiB at 256
#: threads, 96 KiB at 512 on an H100's 227 KiB); a pair over its size bin's share goes to the next bin.
SMEM_PER_SM = 192 * 1024
#: Static shared memory of ``mgk_compact.cu`` at most (bytes): the block reduction's four doubles per warp
#: and two scalars.
STATIC_SMEM_MAX = 4 * 8 * 32 + 16
#: Edge categories (distinct label tuples of a batch's edges, :func:`edge_categories`) at most for the
#: category build of a unit-weight call: its table of ``ncat**2`` doubles (2 KiB at 16) replaces the per-pair
#: coefficients. Molecules' bond orders make 4 or 5.
MAX_CAT = 16


def smem_budget(smem_optin: int) -> int:
    """The shared memory per SM the bins share out on a device whose blocks may take ``smem_optin`` bytes
    at most (its opt-in limit): :data:`SMEM_PER_SM`, or less where one block of the largest bin could not
    take it beside the kernel's static shared memory (an A100 allows 163 KiB).

    Examples
    --------
    >>> smem_budget(227 * 1024) == SMEM_PER_SM, smem_budget(163 * 1024)
    (True, 165872)
    """
    return min(SMEM_PER_SM, int(smem_optin) - STATIC_SMEM_MAX)


def compact_source(config: Any, block: int, min_blocks: int = 1, cat: bool = False) -> str:
    """CUDA source of the compact solver for a :class:`mgkflow.gpu.source.KernelConfig` (its label
    fields, kernels and weight type; the XMV strategy, ``block`` and ``p_smem`` are not used); ``cat``:
    the build of a batch with edge categories (:func:`edge_categories`; unit weights only), whose
    coefficients come from the category table instead of a per-pair table."""
    if block % 32 or not 32 <= block <= 1024:
        raise ValueError(f"block must be a multiple of 32 in [32, 1024], got {block}")
    if cat and not config.unit_weight:
        raise ValueError("the edge-category build needs unit weights (config.unit_weight)")
    return Template(template_text("mgk_compact.cu")).substitute(
        BLOCK=str(int(block)),
        KE=str(KE),
        NCLS=str(NCLS),
        CAT=str(int(bool(cat))),
        MIN_BLOCKS=str(int(min_blocks)),
        C_TYPE="double" if config.weight_double else "float",
        **common_placeholders(config),
    )


def shared_bytes(n1: Any, n2: Any, nnz1: Any, nnz2: Any, c_bytes: int = 4, ncat: int = 0) -> Any:
    """Dynamic shared memory of a pair's tables, as ``mgk_compact.cu`` lays them out for each pair: P
    and W (``n1 * n2`` doubles each), the coefficients (``nnz1 * nnz2`` entries of ``c_bytes``, to 8
    bytes), then the row pointers of both graphs (``n + 1`` ints each) and their columns (``nnz`` ints
    each). The category build (``ncat`` > 0, :func:`edge_categories`) has no coefficients but the category
    table (``ncat**2`` doubles) before them. Integers or broadcastable integer arrays; a launch takes the
    largest of its pairs.

    Examples
    --------
    >>> shared_bytes(24, 24, 52, 52), shared_bytes(24, 24, 52, 52, ncat=4)
    (20648, 9960)
    """
    n1, n2, nnz1, nnz2 = (np.asarray(v, dtype=np.int64) for v in (n1, n2, nnz1, nnz2))
    coef = 8 * int(ncat) ** 2 if ncat else (nnz1 * nnz2 * int(c_bytes) + 7) // 8 * 8
    out = 16 * n1 * n2 + coef + 4 * (n1 + n2 + 2 + nnz1 + nnz2)
    return int(out) if out.ndim == 0 else out


def _need(n: np.ndarray, nnz: np.ndarray, c_bytes: int, ncat: int = 0) -> np.ndarray:
    """Shared memory of the pairs (n[a], nnz[a]) x (n[b], nnz[b]) (:func:`shared_bytes`), broadcast."""
    return shared_bytes(n[:, None], n[None, :], nnz[:, None], nnz[None, :], c_bytes, ncat)


def fits_all(n: np.ndarray, nnz: np.ndarray, c_bytes: int = 4, smem_per_sm: int | None = None) -> bool:
    """Whether :func:`compact_bins` takes every pair between graphs of ``n`` nodes and ``nnz`` nonzeros:
    the pair of the largest node count and the largest nonzero count with itself fits the largest bin
    (product size and shared memory grow with both).

    Examples
    --------
    >>> fits_all(np.array([12, 48]), np.array([24, 104])), fits_all(np.array([12, 300]), np.array([24, 600]))
    (True, False)
    """
    n = np.asarray(n, dtype=np.int64)
    nnz = np.asarray(nnz, dtype=np.int64)
    if not BINS or not n.size or n.min() < 1:
        return not n.size
    hi, block = BINS[-1]
    budget = SMEM_PER_SM if smem_per_sm is None else int(smem_per_sm)
    top_n, top_e = np.array([n.max()]), np.array([nnz.max()])
    return bool(top_n[0] ** 2 <= hi and _need(top_n, top_e, c_bytes)[0, 0] <= budget * block // MIN_THREADS)


def degree_classes(
    rrowptr: np.ndarray, n_nodes: np.ndarray, n_tiles_side: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """The thread-slot order tables of ``mgk_compact.cu`` from a batch's row layout (row pointers of
    ``8 * n_tiles_side[k] + 1`` entries per graph, concatenated; nodes of graph ``k`` from
    ``8 * sum(n_tiles_side[:k])``): ``dord``, per node position, the graph's nodes by degree class
    (degrees :data:`NCLS` - 1 and up first, then each lower degree; input order within a class;
    padding nodes last), and ``dcls``, per graph, the :data:`NCLS` class starts in that order and
    the node count.

    Examples
    --------
    >>> rp = np.array([0, 1, 4, 5, 7, 7, 7, 7, 7])  # one graph of 4 nodes (degrees 1, 3, 1, 2)
    >>> dord, dcls = degree_classes(rp, np.array([4]), np.array([1]))
    >>> dord[:4].tolist(), dcls.tolist()
    ([1, 3, 0, 2], [0, 0, 1, 2, 4, 4])
    """
    n_nodes = np.asarray(n_nodes, dtype=np.int64)
    side = 8 * np.asarray(n_tiles_side, dtype=np.int64)
    K, total = n_nodes.size, int(side.sum())
    g = np.repeat(np.arange(K), side)
    start = np.cumsum(side) - side
    j = np.arange(total)
    local = j - start[g]
    rp = np.asarray(rrowptr, dtype=np.int64)
    deg = rp[j + g + 1] - rp[j + g]
    real = local < n_nodes[g]
    cls = np.where(real, NCLS - 1 - np.minimum(deg, NCLS - 1), NCLS)
    # by graph, class, then position: one stable sort of g * (NCLS + 1) + cls (positions ascend within a graph)
    dord = local[np.argsort(g * (NCLS + 1) + cls, kind="stable")].astype(np.int32)
    counts = np.bincount(g[real] * NCLS + cls[real], minlength=K * NCLS).reshape(K, NCLS)
    dcls = np.zeros((K, NCLS + 1), dtype=np.int64)
    np.cumsum(counts, axis=1, out=dcls[:, 1:])
    return dord, dcls.astype(np.int32).ravel()


def edge_categories(
    words: np.ndarray, n_fields: int, stride: int, max_cat: int = MAX_CAT
) -> tuple[np.ndarray, np.ndarray, int]:  # fmt: skip
    """The edge categories of a batch's row layout: its edges' distinct label tuples (as raw 32-bit words),
    for the category build of the compact solver (``mgk_compact.cu``, CAT).

    Parameters
    ----------
    words : ndarray of uint32
        The edge labels in row order, field-major, ``stride`` words a field (``relab``; the last word of a
        field is padding).
    n_fields : int
        Label fields.
    stride : int
        Words a field: nonzeros + 1.
    max_cat : int
        Categories at most.

    Returns
    -------
    rcat : ndarray of int32
        The category of each nonzero (``stride`` entries; 0 in the padding slot).
    ecat : ndarray of uint32
        The label words of each category, field-major (``n_fields * ncat`` words; one word at least).
    ncat : int
        Categories: 1 for edges without label fields, 0 (and ``rcat``, ``ecat`` one zero each) where there
        would be more than ``max_cat``.

    Examples
    --------
    >>> words = np.array([3, 5, 3, 3, 0, 1, 1, 1, 2, 0], dtype=np.uint32)  # two fields of 4 nonzeros
    >>> rcat, ecat, ncat = edge_categories(words, 2, 5)
    >>> rcat.tolist(), ecat.reshape(2, ncat).tolist(), ncat
    ([0, 2, 0, 1, 0], [[3, 3, 5], [1, 2, 1]], 3)
    >>> edge_categories(words, 2, 5, max_cat=2)[2]
    0
    """
    total = int(stride) - 1
    none = np.zeros(1, dtype=np.int32), np.zeros(1, dtype=np.uint32), 0
    if n_fields == 0 or total <= 0:
        return np.zeros(max(int(stride), 1), dtype=np.int32), np.zeros(1, dtype=np.uint32), 1
    w = np.asarray(words, dtype=np.uint32).reshape(n_fields, stride)[:, :total]
    code = np.zeros(total, dtype=np.int64)
    size = 1
    if any(np.unique(w[f, :4096]).size > max_cat for f in range(n_fields)):  # (a continuous label: no sort of all)
        return none
    for f in range(n_fields):  # a mixed-radix code of each field's rank among its distinct words
        u = np.unique(w[f])
        if u.size > max_cat:
            return none
        code = code * u.size + np.searchsorted(u, w[f])
        size *= u.size
    if n_fields > 1:  # the codes present, renumbered densely
        if size <= 1 << 24:
            present = np.bincount(code, minlength=size) > 0
            if int(present.sum()) > max_cat:
                return none
            code = (np.cumsum(present) - 1)[code]
        else:
            u = np.unique(code)
            if u.size > max_cat:
                return none
            code = np.searchsorted(u, code)
    ncat = int(code.max()) + 1
    first = np.empty(ncat, dtype=np.int64)
    first[code[::-1]] = np.arange(total - 1, -1, -1)  # each category's first nonzero
    rcat = np.zeros(stride, dtype=np.int32)
    rcat[:total] = code
    return rcat, np.ascontiguousarray(w[:, first]).ravel(), ncat


@dataclass
class CompactLaunch:
    """One launch of the compact solver: its pairs (indices into the call's pair list), threads per
    block, dynamic shared memory (bytes: the largest of its pairs' tables, :func:`shared_bytes`) and
    edge categories (> 0: the category build, :func:`edge_categories`)."""

    pairs: np.ndarray
    block: int
    smem: int
    ncat: int = 0


class CompactRouter:
    """Routing tables of one set of graphs for the compact solver: the graphs fall into classes of
    equal (n, nnz), and a table over pairs of classes holds each class pair's bin. Built once per set
    (:func:`router_of` keeps one per uploaded batch); :meth:`bins` routes a list
    of pairs with a few gathers per pair (a call's pairs, wave by wave).

    Parameters
    ----------
    n, nnz : ndarray
        Nodes and nonzeros per graph.
    c_bytes : int
        Bytes per coefficient (4: float, 8: double weights).
    smem_per_sm : int, optional
        Shared memory of one SM the launches may fill (default :data:`SMEM_PER_SM`).
    ncat : int
        Edge categories of the category build (:func:`edge_categories`; 0: per-pair coefficients), which
        its launches carry.

    Examples
    --------
    >>> router = CompactRouter(np.array([12, 20, 200]), np.array([24, 40, 400]))
    >>> [(c.pairs.tolist(), c.block) for c in router.bins(np.array([0, 1, 2, 0]), np.array([0, 1, 0, 2]))]
    [([0], 64), ([1], 128), ([2, 3], 768)]
    """

    def __init__(
        self, n: np.ndarray, nnz: np.ndarray, c_bytes: int = 4, smem_per_sm: int | None = None, ncat: int = 0
    ) -> None:  # fmt: skip
        n = np.asarray(n, dtype=np.int64)
        nnz = np.asarray(nnz, dtype=np.int64)
        self.ncat = int(ncat)
        if not n.size or not BINS:
            self.K = 0
            return
        # classes of graphs with the same (n, nnz) that can take part in a compact pair at all (with the
        # smallest graph of the set: the tables are K x K, and a set of large graphs has few such classes)
        small = (n * max(int(n.min()), 1) <= BINS[-1][0]) & (n >= 1)
        key = np.where(small, n * (int(nnz.max()) + 1) + nnz, -1)
        uniq, first, cls = np.unique(key, return_index=True, return_inverse=True)
        un, unz = n[first], nnz[first]
        un[uniq < 0], unz[uniq < 0] = BINS[-1][0] + 1, 0  # the class of graphs too large for any bin
        K = self.K = uniq.size
        Nt = un[:, None] * un[None, :]
        need = _need(un, unz, c_bytes, self.ncat)
        budget = SMEM_PER_SM if smem_per_sm is None else int(smem_per_sm)
        table = np.full(Nt.shape, len(BINS), dtype=np.uint8)  # bin index; len(BINS): none
        for b in range(len(BINS) - 1, -1, -1):  # the smallest bin that holds the pair wins
            hi, block = BINS[b]
            table[(Nt <= hi) & (need <= budget * block // MIN_THREADS)] = b
        self.table = table.ravel()
        # per bin: its class pairs (flat indices) and their shared memory
        self.bin_cps = [np.flatnonzero(self.table == b) for b in range(len(BINS))]
        self.bin_need = [need.ravel()[cp] for cp in self.bin_cps]
        self.cls = cls.reshape(-1).astype(np.int32 if K * K < 2**31 else np.int64)

    def bins(self, g1: np.ndarray, g2: np.ndarray) -> list[CompactLaunch]:
        """The pairs (``g1[t]``, ``g2[t]``) for the compact solver, one :class:`CompactLaunch` per
        non-empty bin of :data:`BINS` (pair indices ascending; shared memory: the largest need of the
        pairs present); a pair goes to the smallest bin that holds its product unknowns and whose share
        of the shared memory holds its tables. Pairs that no bin holds are left out."""
        if not len(g1) or not self.K:
            return []
        order, starts, present = _route()(self.cls, np.asarray(g1), np.asarray(g2), self.K, self.table, len(BINS))
        out = []
        for b, (_, block) in enumerate(BINS):
            here = present[self.bin_cps[b]]
            if here.any():
                out.append(CompactLaunch(order[starts[b] : starts[b + 1]], block, int(self.bin_need[b][here].max()),
                                         self.ncat))  # fmt: skip
        return out


@cache
def _route() -> Callable[..., tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """:meth:`CompactRouter.bins`' pass over the pairs (numba): (the pairs' indices grouped by bin, ascending
    within a bin; where each bin's start; which class pairs are present). A counting sort in two passes:
    numpy took a gather, a bincount and a comparison and nonzero per bin, each over every pair."""
    from numba import njit

    @njit(cache=True)
    def route(cls, g1, g2, K, table, nbins):  # pragma: no cover - compiled
        n = g1.shape[0]
        present = np.zeros(K * K, dtype=np.bool_)
        pair_bin = np.empty(n, dtype=np.uint8)
        counts = np.zeros(nbins + 1, dtype=np.int64)
        for t in range(n):
            i = np.int64(cls[g1[t]]) * K + cls[g2[t]]
            present[i] = True
            b = table[i]
            pair_bin[t] = b
            counts[b] += 1
        starts = np.zeros(nbins + 2, dtype=np.int64)
        for b in range(nbins + 1):
            starts[b + 1] = starts[b] + counts[b]
        order = np.empty(starts[nbins], dtype=np.int64)  # the pairs no bin holds (bin nbins) are left out
        pos = starts[:nbins].copy()
        for t in range(n):
            b = pair_bin[t]
            if b < nbins:
                order[pos[b]] = t
                pos[b] += 1
        return order, starts, present

    return route


def compact_bins(
    n: np.ndarray, nnz: np.ndarray, g1: np.ndarray, g2: np.ndarray, c_bytes: int = 4,
    smem_per_sm: int | None = None,
) -> list[CompactLaunch]:  # fmt: skip
    """The pairs (``g1[t]``, ``g2[t]``) for the compact solver, one :class:`CompactLaunch` per
    non-empty bin of :data:`BINS`; ``n``, ``nnz``: nodes and nonzeros per graph. A pair goes to the
    smallest bin that holds its product unknowns and whose share of ``smem_per_sm`` (default
    :data:`SMEM_PER_SM`) holds its tables; pairs that no bin holds are left out. The tables of a set
    of graphs routed more than once belong in a :class:`CompactRouter`.

    Examples
    --------
    >>> n, nnz = np.array([12, 20, 200]), np.array([24, 40, 400])
    >>> g = np.array([0, 1, 2, 0])
    >>> [(c.pairs.tolist(), c.block) for c in compact_bins(n, nnz, g, np.array([0, 1, 0, 2]))]
    [([0], 64), ([1], 128), ([2, 3], 768)]
    """
    return CompactRouter(n, nnz, c_bytes, smem_per_sm).bins(g1, g2)


# ---------------------------------------------------------------------------------------- emulation
def _decode(words: np.ndarray, fields: tuple, stride: int) -> dict[str, np.ndarray]:
    out = {}
    for k, (f, ct) in enumerate(fields):
        w = np.asarray(words[k * stride : (k + 1) * stride])
        out[f] = w.view(np.int32).astype(np.int64) if ct == "int" else w.view(np.float32).astype(np.float64)
    return out


def _rows(kw: dict, g: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(global nonzero indices, row, column) of graph ``g`` in the row layout."""
    hdr = kw["hdr"].reshape(-1, 5)
    n, off = int(hdr[g, 0]), int(hdr[g, 4])
    ptr = kw["rrowptr"][off : off + n + 1].astype(np.int64)
    ks = np.arange(ptr[0], ptr[-1])
    rows = np.repeat(np.arange(n), np.diff(ptr))
    c = kw["rcoff"][ks].astype(np.int64)
    return ks, rows, (c >> 6) * 8 + (c & 7)


def emulate_launch(kw: dict, config: Any, node_kernel: Any, edge_kernel: Any) -> None:
    """Run one ``mgk_solve_compact`` launch in numpy on the bound arguments ``kw`` (parameter name
    -> numpy view of the device array or scalar): every job's K, iterations, residual and flag go
    to ``out_k``, ``out_iter``, ``out_res``, ``out_conv`` (job order), with the kernel's algorithm
    (the Chronopoulos-Gear form of PCG, K accumulated as the sum of alpha_k w^T p_k, no solution
    vector) and its float32 storage of the coefficients. With ``ncat`` > 0 (the category build) the
    edges' labels are read through their categories (``rcat``, ``ecat``), as the kernel's table does."""
    import scipy.sparse as sp

    hdr = kw["hdr"].reshape(-1, 5)
    nlab = _decode(kw["nlab"], config.node_fields, int(kw["nlab_stride"]))
    elab = _decode(kw["relab"], config.edge_fields, int(kw["relab_stride"]))
    ncat = int(kw.get("ncat", 0))
    if ncat:  # the category build: every nonzero's labels are its category's (the kernel's table T)
        cats = _decode(kw["ecat"], config.edge_fields, ncat)
        rcat = kw["rcat"].astype(np.int64)
        elab = {f: v[rcat] for f, v in cats.items()}
    d, q, pv, w = kw["dvec"], kw["qvec"], kw["pvec"], kw["rweight"]
    rtol, max_iter = float(kw["rtol"]), int(kw["max_iter"])
    jobs = kw["jobs"][: 2 * int(kw["n_jobs"])].reshape(-1, 2)
    for jb, (g1, g2) in enumerate(jobs):
        n1, n2 = int(hdr[g1, 0]), int(hdr[g2, 0])
        N = n1 * n2
        ka, ra, ca = _rows(kw, int(g1))
        kb, rb, cb = _rows(kw, int(g2))
        if ka.size and kb.size:
            e1 = {f: v[ka][:, None] for f, v in elab.items()}
            e2 = {f: v[kb][None, :] for f, v in elab.items()}
            ke = np.broadcast_to(np.asarray(edge_kernel(e1, e2)), (ka.size, kb.size)).astype(np.float32)
            if config.weight_double:
                coef = w[ka][:, None].astype(np.float64) * w[kb][None, :] * ke.astype(np.float64)
            else:
                coef = (w[ka][:, None].astype(np.float32) * w[kb][None, :].astype(np.float32) * ke).astype(np.float64)
            rows = (ra[:, None] * n2 + rb[None, :]).ravel()
            cols = (ca[:, None] * n2 + cb[None, :]).ravel()
            M = sp.csr_matrix((coef.ravel(), (rows, cols)), shape=(N, N))
        else:
            M = sp.csr_matrix((N, N))
        i, i2 = np.divmod(np.arange(N), n2)
        u1, u2 = int(hdr[g1, 2]) + i, int(hdr[g2, 2]) + i2
        kv = np.broadcast_to(
            np.asarray(node_kernel({f: v[u1] for f, v in nlab.items()}, {f: v[u2] for f, v in nlab.items()})), (N,)
        ).astype(np.float32)
        kv = np.maximum(kv, np.float32(1e-30)).astype(np.float64)  # fmt: skip
        dd = d[u1] * d[u2]
        di = kv / dd
        ws = pv[u1] * pv[u2]
        # Chronopoulos-Gear PCG as in the kernel: XMV of z = D^-1 r, a = M p by recurrence, M z = r - A z
        k, r, a = 0.0, dd * q[u1] * q[u2], np.zeros(N)
        thr, rr, it, conv, broke = 0.0, 0.0, 0, False, False
        g_old, den_old, wp = 1.0, 0.0, 0.0
        while True:
            z = r * di
            mz = r - M @ z
            gm, dl, rr, wz = float(r @ z), float(z @ mz), float(r @ r), float(ws @ z)
            if it == 0:
                bb, thr = rr, rtol * rtol * rr
            if rr <= thr:
                conv = True
                break
            if not np.isfinite(rr):
                broke = True
                break
            if it >= max_iter:
                break
            beta = gm / g_old if it else 0.0
            den = dl - beta * beta * den_old
            if not (den > 0.0) or not np.isfinite(den):
                broke = True
                break
            alpha = gm / den
            wp = wz + beta * wp
            k += alpha * wp
            a = mz + beta * a
            r = r - alpha * a
            it += 1
            g_old, den_old = gm, den
        kw["out_k"][jb] = k
        kw["out_iter"][jb] = it
        kw["out_res"][jb] = np.sqrt(rr / bb) if bb > 0 else 0.0
        kw["out_conv"][jb] = int(conv and not broke and np.isfinite(k))
    kw["job_counter"][0] = len(jobs)


# ---------------------------------------------------------------------------------------- run path
#: Arguments of :class:`mgkflow.gpu.core.SharedArgs` that the compact solver takes too (it reads the row layout).
COMPACT_SHARED = frozenset(
    ("hdr", "nlab", "nlab_stride", "dvec", "pvec", "qvec", "rtol", "max_iter", "rrowptr", "rcoff", "rweight", "relab",
     "relab_stride")
)  # fmt: skip


def router_of(db: DeviceBatch, c_bytes: int, smem_per_sm: int, ncat: int = 0) -> CompactRouter:
    """The :class:`CompactRouter` of an uploaded batch's graphs for ``c_bytes`` coefficients (or the category
    build of ``ncat`` categories) and a device's shared memory budget (:func:`smem_budget`), built once per
    batch (kept in ``db.routers``)."""
    key = (int(c_bytes), int(smem_per_sm), int(ncat))
    if key not in db.routers:
        db.routers[key] = CompactRouter(db.batch.n_nodes, db.nnz_per_graph, c_bytes, smem_per_sm, ncat)
    return db.routers[key]


def call_categories(db: DeviceBatch, config: KernelConfig) -> int:
    """The edge categories a call's compact launches use: the batch's (``db.ncat``, :func:`edge_categories`)
    where every weight is 1, else 0 (per-pair coefficients)."""
    return int(db.ncat) if config.unit_weight and not config.weight_double else 0


def compact_request(config: KernelConfig, block: int, cat: bool = False) -> device.ModuleRequest:
    """The :func:`mgkflow.gpu.device.build_modules` request of the compact solver module of ``block``-thread
    launches (``__launch_bounds__`` for :data:`MIN_THREADS` resident threads per SM); ``cat``: the category
    build."""
    min_blocks = max(1, MIN_THREADS // block)
    return ((lambda: compact_source(config, block, min_blocks, cat)),
            ("compact", config_key(config), block, min_blocks, KE, bool(cat)))  # fmt: skip


def job_order_key(n: np.ndarray, nnz: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The compact solver's job cost of the pairs (a[t], b[t]) of graphs with ``n`` nodes and ``nnz``
    nonzeros: n1 n2 * 4 + nnz1 nnz2, as a 16-bit key (the larger costs, rare, tie).

    Examples
    --------
    >>> job_order_key(np.array([3, 300]), np.array([4, 900]), np.array([0, 1]), np.array([0, 1])).tolist()
    [52, 65535]
    """
    return np.minimum(n[a] * n[b] * 4 + nnz[a] * nnz[b], 0xFFFF).astype(np.uint16)


class CompactPath:
    """The compact solver's run path for one backend (:class:`mgkflow.gpu.backend.GPUBackend`: its
    settings, device limits and :class:`~mgkflow.gpu.launch.Launcher`)."""

    def __init__(self, backend: Any) -> None:
        self.be = backend
        # (graph ids, the graphs (kept: their ids stay theirs), node and nonzero counts) of the last call
        self._sizes_of: tuple | None = None

    def on(self, config: KernelConfig) -> bool:
        """Whether the compact solver takes this call's small pairs (row layout, value-only, not forced wide)."""
        forced_off = config.gradient or config.nodal or self.be.wide is True
        return bool(BINS) and config.xmv == "rows" and not forced_off

    def all_compact(self, systems: Sequence[GraphSystem], config: KernelConfig) -> bool:
        """Whether every pair between these systems goes to the compact solver (:func:`fits_all`)."""
        if not self.on(config):
            return False
        graphs = system_graphs(systems)
        ids = tuple(map(id, graphs))
        if self._sizes_of is None or self._sizes_of[0] != ids:  # once per set of graphs (a tiled run: per run)
            n = np.fromiter((g.n_nodes for g in graphs), dtype=np.int64, count=len(graphs))
            nnz = np.fromiter((g.nnz for g in graphs), dtype=np.int64, count=len(graphs))
            self._sizes_of = (ids, graphs, n, nnz)
        _, _, n, nnz = self._sizes_of
        return fits_all(n, nnz, c_bytes=8 if config.weight_double else 4,
                        smem_per_sm=smem_budget(self.be.limits.smem_optin))  # fmt: skip

    def split(
        self, db: DeviceBatch, g1: np.ndarray, g2: np.ndarray, config: KernelConfig
    ) -> tuple[list[CompactLaunch], np.ndarray]:
        """The compact solver's launches (small pairs, row layout, value-only) and the indices of the pairs
        left to the other solvers."""
        if not self.on(config):
            return [], np.arange(len(g1))
        router = router_of(db, 8 if config.weight_double else 4, smem_budget(self.be.limits.smem_optin),
                           call_categories(db, config))  # fmt: skip
        bins = router.bins(g1, g2)
        if not bins:
            return [], np.arange(len(g1))
        taken = sum(c.pairs.size for c in bins)
        if taken == len(g1):
            return bins, np.zeros(0, dtype=np.int64)
        left = np.ones(len(g1), dtype=bool)
        for c in bins:
            left[c.pairs] = False
        return bins, np.flatnonzero(left)

    def run_waves(
        self, db: DeviceBatch, g1: np.ndarray, g2: np.ndarray, config: KernelConfig, values: np.ndarray,
        shared: SharedArgs, all_compact: bool, build: Callable[..., tuple], kept: tuple | None = None,
    ) -> tuple[list, list[device.Module], np.ndarray, float, tuple]:  # fmt: skip
        """Route a call's pairs to the compact solver and queue its launches, wave by wave
        (:func:`mgkflow.gpu.plan.waves`): the device starts on the first wave's pairs while the host routes
        the next (routing is a few gathers per pair: ~0.1 s for 3.4M pairs). ``build(config, launches,
        per_block)`` builds the modules of a wave's launches in one round, with the per-block solver's
        beside the first wave's (:func:`mgkflow.gpu.backend.call_modules`). Returns the queued launches,
        the compact modules used, the indices of the pairs left to the other solvers, the seconds
        spent building modules and the routing (by wave, each launch with its job order and list, and the pairs
        left) for the call's repetition: given back as ``kept``, it is queued as it was, without routing or
        sorting again."""
        npairs = len(g1)
        queued, compact_mods, t_compile = [], [], 0.0
        if kept is None:
            routed, rest_parts = [], []
            for lo, hi in waves(npairs) if self.on(config) else [(0, npairs)]:
                wave, rest_w = self.split(db, g1[lo:hi], g2[lo:hi], config)
                if lo:
                    wave = [CompactLaunch(cl.pairs + lo, cl.block, cl.smem, cl.ncat) for cl in wave]
                routed.append((lo, [(cl, None) for cl in wave]))
                rest_parts.append(rest_w + lo if lo else rest_w)
                t_compile += self._queue_wave(routed[-1], config, values, g1, g2, shared, all_compact, build,
                                              queued, compact_mods)  # fmt: skip
            rest = np.concatenate(rest_parts) if len(rest_parts) > 1 else rest_parts[0]
            kept = (routed, rest)
        else:
            for wave in kept[0]:
                t_compile += self._queue_wave(wave, config, values, g1, g2, shared, all_compact, build, queued,
                                              compact_mods)  # fmt: skip
        return queued, compact_mods, kept[1], t_compile, kept

    def _queue_wave(
        self, wave: tuple, config: KernelConfig, values: np.ndarray, g1: np.ndarray, g2: np.ndarray,
        shared: SharedArgs, all_compact: bool, build: Callable[..., tuple], queued: list, compact_mods: list,
    ) -> float:  # fmt: skip
        """Build the modules of one routed wave ``(lo, [(launch, (order, jobs) or None), ...])`` and queue its
        launches (into ``queued``, their modules into ``compact_mods``); a launch's job order and list, made by
        its first run, are put into the wave for the next. Returns the seconds spent building modules."""
        lo, launches = wave
        t0 = time.perf_counter()  # (the per-block module, likely needed, compiles beside the first bins)
        _, mods = build(config, [cl for cl, _ in launches], per_block=not lo and not all_compact)
        t_build = time.perf_counter() - t0
        for k, ((cl, jobs), mod) in enumerate(zip(launches, mods, strict=True)):
            events, info, jobs = self.run(cl, mod, values, g1, g2, shared, jobs)
            launches[k] = (cl, jobs)
            queued.append((events, info))
        compact_mods += mods
        return t_build

    def run(
        self, cl: CompactLaunch, mod: device.Module, values: np.ndarray, g1: np.ndarray, g2: np.ndarray,
        shared: SharedArgs, jobs: tuple | None = None,
    ) -> tuple[tuple[Any, Any], dict, tuple]:  # fmt: skip
        """Queue one persistent-grid launch of the compact solver (``mgk_compact.cu``, compiled for ``cl.block``
        threads in ``mod``: :func:`compact_request`) over the pairs of ``cl``: largest first up to
        ``SORT_EXACT_MAX`` pairs; beyond, in the call's order (the tail of a launch of that many small pairs
        balances whatever their order). Its (start, stop) events, figures and (job order, job list): ``jobs``,
        those of a call it repeats, are used as they are."""
        be, launcher = self.be, self.be.launcher
        blk = cl.block
        mod.set_constant(KPAR, values)
        fn = mod.function(KERNEL)
        if jobs is None:
            order = cl.pairs
            a, b = g1[order], g2[order]
            if be.sort_jobs and order.size <= SORT_EXACT_MAX:
                # cost n1 n2 * 4 + nnz1 nnz2, descending, as a 16-bit key: numpy's stable sort of 16-bit keys is a
                # radix sort (0.5 ms for 65,536 pairs against 4 ms for int64 keys; the larger costs, rare, tie)
                cost = job_order_key(shared.db.batch.n_nodes.astype(np.int64), shared.db.nnz_per_graph, a, b)
                by = np.argsort(np.uint16(0xFFFF) - cost, kind="stable")
                order, a, b = order[by], a[by], b[by]
            jobs = (order, job_list(a, b))
        order = jobs[0]
        smem = cl.smem
        bps = launcher.blocks_per_sm(fn, blk, smem)
        grid = max(1, min(len(order), bps * be.n_sm))
        args = {k: v for k, v in shared.args.items() if k in COMPACT_SHARED}
        args["dord"], args["dcls"] = shared.db.arrays["dord"], shared.db.arrays["dcls"]  # thread-slot order
        args["rcat"], args["ecat"], args["ncat"] = shared.db.arrays["rcat"], shared.db.arrays["ecat"], cl.ncat
        events = launcher.launch_jobs(fn, order, jobs[1], grid, blk, smem, shared.out, args)
        info = {"pairs": len(order), "grid": int(grid), "block": blk, "blocks_per_sm": bps, "smem": smem,
                "shared": True, "kernel": KERNEL, "ncat": cl.ncat}  # fmt: skip
        return events, info, jobs


class CompactSolver(Solver):
    """Registry entry ``"compact"`` (rank 0): the pairs of at most ``max(BINS)`` product unknowns whose
    tables fit their bin's share of the shared memory, in a value-only call with the row layout."""

    name = "compact"
    rank = 0
    source = "mgk_compact.cu"
    kernels = (KERNEL,)
    claim = ("value-only calls in the row layout (xmv='rows', not wide=True): pairs with n1 n2 <= max(BINS) "
             "whose tables fit their bin's share of SMEM_PER_SM, by CompactRouter")  # fmt: skip

    def claims(self, db: DeviceBatch, g1: np.ndarray, g2: np.ndarray, c_bytes: int,
               smem_per_sm: int, ncat: int = 0) -> list[CompactLaunch]:  # fmt: skip
        """The launches of the pairs (g1[t], g2[t]) this solver takes (:meth:`CompactRouter.bins`; ``ncat``:
        the category build's categories, :func:`call_categories`)."""
        return router_of(db, c_bytes, smem_per_sm, ncat).bins(g1, g2)

    def job_cost(self, db: Any, g1: np.ndarray, g2: np.ndarray) -> np.ndarray:
        """:func:`job_order_key` (n1 n2 * 4 + nnz1 nnz2, 16 bits)."""
        return job_order_key(db.batch.n_nodes.astype(np.int64), db.nnz_per_graph, g1, g2)

    def path(self, backend: Any) -> CompactPath:
        return CompactPath(backend)


register(CompactSolver())
