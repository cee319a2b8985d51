"""What the value, gradient and nodal solves share (host side; imports without PyCUDA).

:class:`~mgkflow.gpu.backend.GPUBackend` (the value solve) and :mod:`mgkflow.gpu.gradient` (the
gradient and nodal solves) both run the per-pair solver ``mgk_solver.cu`` over an uploaded batch;
this module holds the pieces they have in common, so that neither imports the other:

* the tunables of the launches (:data:`SORT_EXACT_MAX`, :data:`SMALL_PAIR_UNKNOWNS`, ...) and the
  bytes per product entry kept in shared memory (:data:`SMEM_PER_ENTRY`);
* the per-pair solver's module for a :class:`~mgkflow.gpu.source.KernelConfig`
  (:func:`compile_module`, :func:`solver_request`; compiled once per process);
* :class:`DeviceBatch` (a packed batch on the device; the backend's cache of it:
  :class:`mgkflow.gpu.batch.BatchCache`);
* :class:`Outputs` (per-pair results and their device buffers, read back asynchronously) and
  :class:`SharedArgs` (the launch arguments common to every launch of a call).

The driver is reached through :func:`mgkflow.gpu.device.driver` when a buffer is allocated or a
copy queued (tests substitute a fake ``pycuda.driver`` in ``sys.modules``).

Examples
--------
>>> SMEM_PER_ENTRY[False], SMEM_PER_ENTRY[True]  # P (double) + A (float or double)
(12, 16)
>>> DeviceBatch.__dataclass_fields__["routers"].default_factory()
{}
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..format.octile import OctileBatch
from ..system import GraphSystem, Restopped, stop_vectors
from . import device
from .moves import scatter_results
from .source import KernelConfig, kernel_source

__all__ = [
    "DEFAULT_RTOL", "WIDE_MIN_PRODUCTS", "SMALL_PAIR_UNKNOWNS", "SORT_EXACT_MAX", "DEFAULT_MIN_BLOCKS",
    "SMEM_PER_ENTRY", "config_key", "compile_module", "solver_request", "DeviceBatch", "Outputs", "SharedArgs",
    "alloc_outputs", "alloc_staging", "record", "wait", "job_list", "KeptCall",
]  # fmt: skip

#: Default relative residual tolerance: K lands within ~1e-8 of float64 at rtol 1e-6
#: on the paper workloads (CG starting from 0); we keep a margin.
DEFAULT_RTOL = 1e-7
#: Nonzero products per XMV (nnz1 * nnz2) from which a pair may go "wide" (whole device).
WIDE_MIN_PRODUCTS = 1e7
#: Pairs with at most this many product unknowns (16 tile pairs) run in ``small_block`` blocks.
SMALL_PAIR_UNKNOWNS = 16 * 64
#: Launches of more pairs than this order their jobs by cost classes, not by an exact sort.
SORT_EXACT_MAX = 1 << 16
#: Default ``__launch_bounds__`` minimum of resident blocks per SM.
DEFAULT_MIN_BLOCKS = 2
#: Bytes per product-vector entry kept in shared memory: P (double) + A (float or double).
SMEM_PER_ENTRY = {False: 12, True: 16}


_CONFIG_KEYS: dict[KernelConfig, str] = {}


def config_key(config: KernelConfig) -> str:
    """``config.key`` (the digest of the configuration's repr), computed once per configuration."""
    key = _CONFIG_KEYS.get(config)
    if key is None:
        key = _CONFIG_KEYS[config] = config.key
    return key


def compile_module(config: KernelConfig) -> device.Module:
    """Compile (or fetch from the process cache) the per-pair solver module for ``config``."""
    return device.build_module(*solver_request(config))


def solver_request(config: KernelConfig) -> device.ModuleRequest:
    """The :func:`mgkflow.gpu.device.build_modules` request of the per-pair solver module for ``config``."""
    return (lambda: kernel_source(config)), ("solver", config_key(config))


def vector_key(systems: Sequence[GraphSystem]) -> tuple:
    """What identifies the node vectors of ``systems``: the systems' ids, or a :class:`Restopped`
    sequence's own (its systems are not made for it)."""
    return ("restopped", id(systems)) if isinstance(systems, Restopped) else tuple(map(id, systems))


def _start_systems(systems: Sequence[GraphSystem]) -> Sequence[GraphSystem]:
    """Systems with the start probabilities of ``systems`` (a :class:`Restopped` sequence's base)."""
    return systems.base if isinstance(systems, Restopped) else systems


@dataclass
class DeviceBatch:
    """A packed batch uploaded to the device (kept while the same graphs come back)."""

    batch: OctileBatch
    arrays: dict[str, Any]
    elab_stride: int
    nlab_stride: int
    nnz_per_graph: np.ndarray
    octiles_per_graph: np.ndarray
    nt: np.ndarray
    keepalive: tuple
    relab_stride: int = 1
    #: edge categories of the compact solver's category build (:func:`mgkflow.gpu.solvers.compact.edge_categories`;
    #: 0: too many, per-pair coefficients)
    ncat: int = 0
    #: staged wide-XMV tables of graphs used as G2 (filled by ``mgkflow.gpu.solvers.wide``)
    staged: dict = field(default_factory=dict)
    #: node permutation applied to each graph before packing (None: natural order)
    perms: tuple | None = None
    #: the systems whose p, q, d the uploaded node vectors hold (compared by identity)
    vectors: tuple = ()
    #: their ids (compared at each call)
    vector_ids: tuple = ()
    #: the compact solver's routing tables of these graphs, per coefficient size and shared memory budget
    #: (built on first use by :func:`mgkflow.gpu.solvers.compact.router_of`)
    routers: dict = field(default_factory=dict)
    def same_vectors(self, systems: Sequence[GraphSystem]) -> bool:
        """Whether the uploaded node vectors are those of ``systems`` (the very same system objects:
        systems are immutable, and another p or q makes new ones)."""
        return self.vector_ids == vector_key(systems)  # (the held systems are alive: their ids are theirs)

    def refresh_vectors(self, systems: Sequence[GraphSystem]) -> None:
        """Upload new start/stop probabilities and degrees (same graphs, e.g. another q): the
        structure, labels and weights stay on the device."""
        src = self.vector_source(systems)
        # another q (a θ step) keeps every p: the same arrays as uploaded need no new upload
        held, starts = _start_systems(self.vectors), _start_systems(systems)
        same_p = held is starts or (
            len(held) == len(starts) and all(a.p is b.p for a, b in zip(held, starts, strict=True))
        )
        q, d = stop_vectors(systems)
        new = {"d": np.concatenate([np.ones(1), d])[src], "q": np.concatenate([np.zeros(1), q])[src]}
        if not same_p:
            new["p"] = np.concatenate([np.zeros(1), *[s.p for s in starts]])[src]
        self.batch = replace(self.batch, **new)
        self.arrays.update({name: device.upload(v) for name, v in new.items()})
        self.vectors = systems if isinstance(systems, Restopped) else tuple(systems)
        self.vector_ids = vector_key(systems)

    def vector_source(self, systems: Sequence[GraphSystem]) -> np.ndarray:
        """For every packed node slot, its index into [pad, the systems' node vectors concatenated] (0: a
        padding slot, d = 1, p = q = 0), in the packed order (``perms``); built once per batch."""
        src = getattr(self, "_vector_source", None)
        if src is None:
            src = np.zeros(int(self.batch.d.size), dtype=np.int64)
            start = 1
            for k, s in enumerate(systems):
                perm = np.arange(s.n) if self.perms is None else np.asarray(self.perms[k])
                o = int(self.batch.node_offset[k])
                src[o : o + s.n] = start + perm
                start += s.n
            self._vector_source = src
        return src


@dataclass
class KeptCall:
    """Host work of a call kept for its repetition (the steps of a hyperparameter search, repeated calls): valid
    while the same pairs of the same uploaded batch come back under the same ``key`` (the kernel structure and
    whatever else the work depends on). ``pairs`` holds the call's pair array itself when it is read-only (the
    kept Gram pair lists of :func:`mgkflow.evaluation.systems.gram_pairs`), else a copy.

    Examples
    --------
    >>> pairs = np.array([[0, 0], [0, 1]])
    >>> kept = KeptCall.of(("value",), None, pairs, data="plan")
    >>> kept.matches(("value",), None, pairs.copy()), kept.matches(("value",), None, pairs[::-1])
    (True, False)
    """

    key: tuple
    db: Any
    pairs: np.ndarray
    data: Any = None

    @classmethod
    def of(cls, key: tuple, db: Any, pairs: np.ndarray, data: Any = None) -> KeptCall:
        """What a call keeps of ``pairs`` (see the class) with its ``data``."""
        return cls(key, db, pairs if not pairs.flags.writeable else pairs.copy(), data)

    def matches(self, key: tuple, db: Any, pairs: np.ndarray) -> bool:
        """Whether a call of ``pairs`` on ``db`` under ``key`` repeats the kept one: the same key and batch, and
        the same read-only array (no other view can change it), a view of it with the same layout (a call's
        ``reshape`` of the kept Gram pair list makes a new view each time: comparing 3.4M pairs element by
        element took 7 ms before the first launch of a drugs call, S37-B), or one equal element by element."""
        if self.key != key or self.db is not db:
            return False
        if self.pairs is pairs and not pairs.flags.writeable:
            return True
        if _same_readonly(self.pairs, pairs):
            return True
        return self.pairs.shape == pairs.shape and bool(np.array_equal(self.pairs, pairs))


def _root(a: np.ndarray) -> np.ndarray:
    """The array whose memory ``a`` views (``a`` itself if it owns its memory)."""
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


def _same_readonly(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether ``a`` and ``b`` are views of one read-only array with the same layout (so the same elements).

    Examples
    --------
    >>> base = np.zeros((3, 2))  # owns its memory
    >>> base.flags.writeable = False
    >>> _same_readonly(base.reshape(-1, 2), base.reshape(-1, 2)), _same_readonly(base[1:], base[:2])
    (True, False)
    """
    ra, rb = _root(a), _root(b)
    return (
        ra is rb and not ra.flags.writeable and not a.flags.writeable and not b.flags.writeable
        and a.dtype == b.dtype and a.shape == b.shape and a.strides == b.strides
        and a.__array_interface__["data"][0] == b.__array_interface__["data"][0]
    )  # fmt: skip


def job_list(g1: np.ndarray, g2: np.ndarray) -> np.ndarray:
    """The int32 job list of a launch: g1 and g2 of each job, interleaved (what ``mgk_solve`` reads).

    Examples
    --------
    >>> job_list(np.array([0, 1]), np.array([2, 3])).tolist()
    [0, 2, 1, 3]
    """
    out = np.empty(2 * len(g1), dtype=np.int32)
    out[0::2], out[1::2] = g1, g2
    return out


def record(event: Any, stream: Any) -> None:
    """Record ``event`` in ``stream`` (None: the legacy default stream)."""
    if stream is None:
        event.record()
    else:
        event.record(stream)


def wait(event: Any) -> None:
    """Wait for a recorded event: the driver's ``synchronize``, which releases the GIL while it waits (PyCUDA
    guards its blocking calls so), so that other Python threads (the tiled Gram path's second solver thread
    preparing the next block) run meanwhile. It returns as the event completes; the former polling with 50 µs
    sleeps overshot by ~100 µs a wait (gpu/NOTES.md, session 32)."""
    event.synchronize()


def alloc_staging(n: int) -> tuple:
    """Page-locked host arrays for ``n`` pairs' K, iterations, residuals and flags."""
    cuda = device.driver()
    n = max(n, 1)
    return (cuda.pagelocked_empty(n, np.float64), cuda.pagelocked_empty(n, np.int32),
            cuda.pagelocked_empty(n, np.float64), cuda.pagelocked_empty(n, np.int32))  # fmt: skip


#: Element types of the K, iterations, residuals and flags buffers (``out_k``, ``out_iter``, ``out_res``, ``out_conv``).
_OUT_DTYPES = (np.dtype(np.float64), np.dtype(np.int32), np.dtype(np.float64), np.dtype(np.int32))


def alloc_outputs(n: int) -> tuple:
    """Device buffers for ``n`` pairs' K, iterations, residuals, flags, and a job counter."""
    cuda = device.driver()
    n = max(n, 1)
    return (cuda.mem_alloc(8 * n), cuda.mem_alloc(4 * n), cuda.mem_alloc(8 * n), cuda.mem_alloc(4 * n),
            cuda.mem_alloc(4))  # fmt: skip


class Outputs:
    """Per-pair results on the host and their device buffers (allocated on first use, or lent by
    ``buffers(n)``: the backend keeps one set between calls)."""

    def __init__(
        self,
        npairs: int,
        buffers: Callable[[int], tuple] | None = None,
        staging: Callable[[int], tuple] | None = None,
        keep: bool = False,
    ) -> None:
        self.n = npairs
        #: keep the results on the device: each launch writes behind the one before (job slots, no
        #: read-back); ``slots`` holds the launches' job orders and ``done`` the event after the work that
        #: reads them (:class:`mgkflow.gpu.assemble.GramAssembly`)
        self.keep = keep
        self.slots: list[np.ndarray] = []
        self.done: Any = None
        # written through once here (np.full, not np.zeros' untouched pages): the scatters then write to
        # mapped memory, not page by page into fresh memory in the jobs' order; a keeping call has no host
        # results (85 MB written for nothing on 3.4M pairs)
        m = 0 if keep else npairs
        self.k = np.full(m, 0.0)
        self.it = np.full(m, 0, dtype=np.int64)  # the scatters cast (no pass over the results afterwards)
        self.res = np.full(m, 0.0)
        self.conv = np.full(m, False)
        self._dev: tuple | None = None
        self._lend = buffers or alloc_outputs
        self._lend_staging = staging or alloc_staging
        self._staging: tuple | None = None
        self._queued: list[tuple[np.ndarray, int]] = []  # (pairs, offset in the staging arrays) per launch
        self._staged = 0
        #: per-launch outputs of the same launches (a gradient's rows): ``drained()`` is called after each
        #: launch's results moved, so theirs move behind the same launch too
        self.followers: list = []

    def _buffers(self) -> tuple:
        if self._dev is None:
            self._dev = self._lend(self.n)
        return self._dev

    d_k = property(lambda self: self._buffers()[0])
    d_it = property(lambda self: self._buffers()[1])
    d_res = property(lambda self: self._buffers()[2])
    d_conv = property(lambda self: self._buffers()[3])
    counter = property(lambda self: self._buffers()[4])

    def pointers(self, m: int) -> tuple:
        """The K, iterations, residuals and flags buffers of the next launch (``m`` jobs): the buffers
        themselves, or, keeping, their stretch behind the launches before."""
        bufs = self._buffers()[:4]
        if not self.keep:
            return bufs
        off = self._staged
        return tuple(device.offset(b, off * dt.itemsize, dt, m) for b, dt in zip(bufs, _OUT_DTYPES, strict=True))

    def queue_read(self, order: np.ndarray, stream: Any = None) -> None:
        """Queue the read-back of a launch over the pairs ``order`` (job t = pair order[t]) in ``stream``
        (None: the legacy stream), behind its kernel, into page-locked staging, and an event behind the
        copy; :meth:`drain` moves the values to their pairs as each copy completes. The device buffers
        are free for the next launch of the stream as soon as the copy ran."""
        m = len(order)
        if self.keep:  # the results stay where the launch wrote them
            self.slots.append(order)
            self._staged += m
            return
        cuda = device.driver()
        if self._staging is None:
            self._staging = self._lend_staging(self.n)
        off = self._staged
        for host, dev in zip(self._staging, self._buffers()[:4], strict=True):
            cuda.memcpy_dtoh_async(host[off : off + m], dev, stream)
        copied = cuda.Event()
        record(copied, stream)
        self._queued.append((order, off, copied))
        self._staged = off + m

    def drain(self) -> None:
        """Scatter the queued read-backs to their pairs, each once its copy is done: the earlier launches'
        results move while the later launches still run. On return the queued work is complete."""
        if self.keep:
            if self.done is not None:
                wait(self.done)
            return
        if not self._queued:
            return
        hk, hi, hr, hc = self._staging
        for order, off, copied in self._queued:
            wait(copied)
            sl = slice(off, off + len(order))
            scatter_results(order, (self.k, self.it, self.res, self.conv), (hk[sl], hi[sl], hr[sl], hc[sl]))
            for f in self.followers:
                f.drained()
        self._queued.clear()
        self._staged = 0

    def result(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(values, iterations, residuals, converged): the call's own arrays, not copies (an
        ``Outputs`` serves one call)."""
        self.conv &= np.isfinite(self.k)
        return self.k, self.it, self.res, self.conv


class SharedArgs:
    """The ``mgk_solve`` arguments common to every launch of a call (by parameter name)."""

    def __init__(self, db: DeviceBatch, xmv_args: dict, out: Outputs, rtol: float, max_iter: int) -> None:
        a = db.arrays
        self.out = out
        self.db = db
        self.args = {
            "hdr": a["hdr"], "nlab": a["nlab"], "nlab_stride": db.nlab_stride, "dvec": a["d"], "pvec": a["p"],
            "qvec": a["q"], "rtol": rtol, "max_iter": max_iter, **xmv_args,
        }  # fmt: skip
        #: product unknowns and estimated cost of every pair of the call (set by ``solve``)
        self.N: np.ndarray = np.zeros(0, dtype=np.int64)
        self.cost: np.ndarray | None = None
        #: job order of each launch's pair selection (by id), kept by a caller that repeats its launches
        self.orders: dict | None = None
