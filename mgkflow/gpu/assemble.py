"""K and dK of a gradient Gram call assembled on the device (``mgk_assemble.cu``).

A Gaussian process's θ loop asks for K and dK of the same graphs at every step. The host path reads
each pair's value and derivatives back in job order, moves them to pair order and writes the dense
symmetric N × N and N × N × H arrays (:func:`mgkflow.evaluation.assemble.gram_with_gradient`): some
4 ms of host time per step for 514 molecules, about half the device's time for the solves
(``mgkflow/gpu/NOTES.md``, S15-5/6). Here the launches of a call write their results one after
another into the device buffers (no read-back per launch), two small kernels write the finished
matrices on the device, and only those cross the bus, into page-locked host arrays
(:class:`PinnedPool`). The arithmetic is the host pass's, operation for operation, so the results
are bit for bit the host path's.

This path serves the repeated calls of a θ loop: :func:`mgkflow.gpu.gradient.gram_gradient` takes it
when the plan of the same pairs is kept from the call before and no pair goes to the CPU oracle, and
the output is at most :data:`MAX_BYTES`; other calls assemble on the host.

Examples
--------
>>> pool = PinnedPool(alloc=lambda shape, dtype: np.empty(shape, dtype), per_key=1)
>>> a = pool.take((2, 2), np.float64)
>>> pool.take((2, 2), np.float64) is a          # held by the caller: another array
False
>>> del a
>>> b = pool.take((2, 2), np.float64)           # given back: the pooled array again
>>> b is pool.take((2, 2), np.float64)
False
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from . import device
from .core import record, wait
from .source import template_text

__all__ = ["SOURCE", "KERNELS", "MAX_BYTES", "PinnedPool", "GramAssembly", "module"]

#: The CUDA source of the assembly kernels.
SOURCE = "mgk_assemble.cu"
KERNELS = ("gram_diagonal", "gram_assemble")
#: Largest output (K, dK, iterations, residuals, flags, in bytes) assembled on the device; the page-locked
#: host arrays of larger calls would take too much of the host's memory.
MAX_BYTES = 1 << 28
#: Threads per block of the assembly kernels.
BLOCK = 256


def module() -> device.Module:
    """The compiled assembly module (once per process)."""
    return device.build_module(lambda: template_text(SOURCE), ("assemble", SOURCE))


def output_bytes(n: int, h_out: int) -> int:
    """Bytes of the assembled K, dK (h_out columns), iterations, residuals and flags of n graphs."""
    return n * n * (8 * (3 + h_out) + 1)


class PinnedPool:
    """Page-locked host arrays handed out as a call's results and taken back once nobody holds them.

    A copy from the device into page-locked memory runs at the bus's speed; into fresh pageable
    memory it is staged by the driver and the pages fault in as they are written. A θ loop's caller
    drops each step's K and dK before the next step, so the same arrays serve every step: an array is
    free again when only the pool refers to it and to the array its views point to (numpy's views of
    a view point to the first array of the chain, not to the view).
    At most ``per_key`` arrays of one role, shape and dtype are kept; beyond that a call gets pageable
    memory. The role keeps a call's arrays of one shape and dtype apart (K and the residuals are both
    n × n float64): a caller holding the previous call's K and its figures' residuals while the next call
    runs needs two of each, which two arrays shared by both roles did not give (every other call of a
    repeated drugs Gram then copied K and the residuals into fresh pageable memory).
    """

    def __init__(self, alloc: Callable[[tuple, Any], np.ndarray] | None = None, per_key: int = 2) -> None:
        self._alloc = alloc
        self.per_key = per_key
        self._held: dict[tuple, list[tuple[np.ndarray, np.ndarray]]] = {}
        self._refs: tuple[int, int] | None = None

    @staticmethod
    def _counts(entry: tuple[np.ndarray, np.ndarray]) -> tuple[int, int]:
        a, root = entry
        return sys.getrefcount(a), sys.getrefcount(root)

    def take(self, shape: tuple, dtype: Any, role: str = "") -> np.ndarray:
        """An array of ``shape`` and ``dtype`` for ``role`` that nobody else holds (contents undefined)."""
        shape = tuple(int(s) for s in shape)
        key = (role, shape, np.dtype(dtype).str)
        held = self._held.setdefault(key, [])
        for entry in held:
            counts = self._counts(entry)
            if counts[0] <= self._refs[0] and counts[1] <= self._refs[1]:
                return entry[0]
        if len(held) >= self.per_key:
            return np.empty(shape, dtype)
        alloc = self._alloc or device.driver().pagelocked_empty
        new = alloc(shape, np.dtype(dtype))
        root = new
        while isinstance(root.base, np.ndarray):
            root = root.base
        entry = (new, root)
        del new, root
        held.append(entry)
        if self._refs is None:
            self._refs = self._counts(entry)  # the same references as in the loop above
        return entry[0]


class GramAssembly:
    """One gradient Gram call's assembly on the device (see the module docstring).

    Made before the call's launches (its small uploads and buffers then wait for nothing);
    :meth:`queue` runs behind the launches (:func:`mgkflow.gpu.gradient._per_pair` calls it), and
    :meth:`result` hands out the host arrays once the call completed.

    Parameters
    ----------
    backend : GPUBackend
        Keeps the device buffers and the page-locked pool between calls.
    n : int
        Graphs (K is n × n).
    pairs : (P, 2) int array
        The pairs of the call (the upper triangle, self pairs included).
    cols : (h_out,) int array
        The device's derivative columns to assemble, in dK's order.
    scale : (h_out,) float array
        Factors on those columns (the hyperparameters' values: log space).
    normalize : bool
        Assemble K(G, G') / sqrt(K(G, G) K(G', G')) and its derivatives.
    """

    def __init__(
        self, backend: Any, n: int, pairs: np.ndarray, cols: np.ndarray, scale: np.ndarray, normalize: bool
    ) -> None:
        self.backend, self.n, self.pairs, self.normalize = backend, int(n), pairs, bool(normalize)
        self.h_out = int(len(cols))
        self._cols, self._scale = cols, scale
        self.host: tuple | None = None
        self.seconds = 0.0

    def _device(self) -> None:
        """The module, the device's columns and factors and the output buffers: made when the assembly is
        queued (a call that does not queue it, its solver's first, compiles and allocates nothing)."""
        pad = max(self.h_out, 1) - self.h_out  # (no empty allocation where no column is free)
        cols = np.concatenate([np.asarray(self._cols, dtype=np.int32), np.zeros(pad, np.int32)])
        scale = np.concatenate([np.asarray(self._scale, dtype=np.float64), np.zeros(pad)])
        # kept by the backend while they repeat (a value call's, always): an upload is a synchronous copy, which
        # would wait here for the launches queued before the assembly
        key = (cols.tobytes(), scale.tobytes())
        held = getattr(self.backend, "_assembly_cols", None)
        if held is None or held[0] != key:
            held = (key, device.upload(cols), device.upload(scale))
            self.backend._assembly_cols = held
        self.cols, self.scale = held[1], held[2]
        self.mod = module()
        self.dev = self._buffers()

    def _buffers(self) -> dict:
        """The device arrays of an n-graph, h_out-column assembly, kept by the backend between calls."""
        n, h = self.n, self.h_out
        key = (n, h)
        held = getattr(self.backend, "_assembly_dev", None)
        if held is None or held[0] != key:
            self.backend.launcher.idle()  # a queued kernel may still write the old ones
            self.backend._assembly_dev = None
            cuda = device.driver()
            sizes = {"K": 8 * n * n, "dK": 8 * n * n * max(h, 1), "I": 8 * n * n, "R": 8 * n * n, "C": n * n,
                     "kdiag": 8 * n, "root": 8 * n, "ratio": 8 * n * max(h, 1), "counts": 16}  # fmt: skip
            held = (key, {name: cuda.mem_alloc(max(b, 8)) for name, b in sizes.items()})
            self.backend._assembly_dev = held
        return held[1]

    def _slots(self, orders: list[np.ndarray], kept: dict | None) -> tuple:
        """slot_i, slot_j (device) of the call's job slots and dslot (each graph's self pair's slot),
        kept with the plan's job orders (``kept``) while the launches repeat."""
        sig = tuple(id(o) for o in orders)
        hit = None if kept is None else kept.get("#assembly")
        if hit is not None and hit[0] == sig:
            return hit[1]
        order = np.concatenate(orders) if orders else np.zeros(0, dtype=np.int64)
        pr = np.asarray(self.pairs, dtype=np.int64)[order]
        dslot = np.zeros(self.n, dtype=np.int32)
        self_pair = np.flatnonzero(pr[:, 0] == pr[:, 1])
        dslot[pr[self_pair, 0]] = self_pair
        arrays = tuple(device.upload(a) for a in (pr[:, 0].astype(np.int32), pr[:, 1].astype(np.int32), dslot))
        if kept is not None:
            kept["#assembly"] = (sig, arrays, orders)  # (the orders held: their ids stay theirs)
        return arrays

    def queue(self, out: Any, grad_buf: Any, n_grad: int, stream: Any, kept: dict | None) -> None:
        """Queue the assembly behind the launches of ``out`` (a keeping :class:`~mgkflow.gpu.core.Outputs`:
        its launches' job orders in ``out.slots``) and the copies of the finished arrays into page-locked
        host arrays; ``out.done`` is the event behind them."""
        cuda = device.driver()
        self._device()
        n, h, d = self.n, self.h_out, self.dev
        slot_i, slot_j, dslot = self._slots(out.slots, kept)
        k, it, res, conv, _ = out._buffers()
        start, stop = cuda.Event(), cuda.Event()
        record(start, stream)
        self.mod.function(KERNELS[0])(
            grid=((n + BLOCK - 1) // BLOCK, 1), block=(BLOCK, 1, 1), stream=stream, vals=k, grads=grad_buf,
            dslot=dslot, cols=self.cols, n=n, n_grad=n_grad, h_out=h, normalize=int(self.normalize),
            kdiag=d["kdiag"], root=d["root"], ratio=d["ratio"],
        )  # fmt: skip
        if stream is None:
            cuda.memset_d32(d["counts"], 0, 4)
        else:
            cuda.memset_d32_async(d["counts"], 0, 4, stream)
        slots = int(slot_i.size)
        grid = max(1, min((slots + BLOCK - 1) // BLOCK, 4 * self.backend.n_sm))
        self.mod.function(KERNELS[1])(
            grid=(grid, 1), block=(BLOCK, 1, 1), stream=stream, vals=k, iters=it, res=res, conv=conv,
            grads=grad_buf, slot_i=slot_i, slot_j=slot_j, cols=self.cols, scale=self.scale, root=d["root"],
            ratio=d["ratio"], n_slots=slots, n=n, n_grad=n_grad, h_out=h, normalize=int(self.normalize),
            K=d["K"], dK=d["dK"], I=d["I"], R=d["R"], C=d["C"], counts=d["counts"],
        )  # fmt: skip
        record(stop, stream)
        pool = _pool(self.backend)
        names = ("K", "dK", "I", "R", "C", "kdiag", "counts")
        shapes = ((n, n), (n, n, h), (n, n), (n, n), (n, n), (n,), (2,))
        dtypes = (np.float64, np.float64, np.int64, np.float64, np.uint8, np.float64, np.uint64)
        host = tuple(pool.take(s, t, role) for s, t, role in zip(shapes, dtypes, names, strict=True))
        for a, name in zip(host, names, strict=True):
            if a.size:
                cuda.memcpy_dtoh_async(a, d[name], stream)
        done = cuda.Event()
        record(done, stream)
        out.done = done
        self.host = host
        self._events = (start, stop)

    def result(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """K, dK, iterations, residuals, flags (bool view), the raw self similarities and the counts of
        non-finite derivatives and values, once the call completed (its launches' completion waited)."""
        if self.host is None:
            raise RuntimeError("internal: the assembly was not queued")
        start, stop = self._events
        wait(stop)
        self.seconds = stop.time_since(start) * 1e-3
        K, dK, I, R, C, kd, counts = self.host
        return K, dK, I, R, C.view(np.bool_), kd, counts

    def finished(self, figures: dict) -> tuple:
        """:meth:`result`, with the assembly's device seconds put into the call's ``figures`` (a backend's
        ``last_extra``: ``assembly_s``, and added to ``device_s``)."""
        out = self.result()
        figures["assembly_s"] = self.seconds
        figures["device_s"] = figures.get("device_s", 0.0) + self.seconds
        return out


def _pool(backend: Any) -> PinnedPool:
    pool = getattr(backend, "_pinned_pool", None)
    if pool is None:
        pool = backend._pinned_pool = PinnedPool()
    return pool

