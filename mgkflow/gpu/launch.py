"""One backend's launch machinery: its stream and the device buffers it keeps between calls.

:class:`Launcher` queues a persistent-grid launch over a job list (:meth:`Launcher.launch_jobs`:
job upload from page-locked staging, counter reset, the kernel, its read-back into an
:class:`mgkflow.gpu.core.Outputs`, all in the backend's stream and without waiting) and waits
for the queued launches (:meth:`Launcher.complete`). It keeps, grown on demand and reused
between calls: the output buffers and their page-locked read-back staging, the job list
buffers and the per-block scratch. Every solver of :mod:`mgkflow.gpu.solvers` launches through
it. Imports without PyCUDA (the driver: :func:`mgkflow.gpu.device.driver`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from . import device
from .core import Outputs, alloc_outputs, alloc_staging, record

__all__ = ["Launcher"]


class Launcher:
    """The stream and reusable device buffers of one backend (see the module docstring).

    Parameters
    ----------
    limits : mgkflow.gpu.device.DeviceLimits
        The device's limits (the shared-memory opt-in of :meth:`allow_smem`).

    Attributes
    ----------
    stream : pycuda Stream or None
        Stream of the per-block launches (None: the legacy default stream); see :meth:`use_stream`.
    """

    def __init__(self, limits: device.DeviceLimits) -> None:
        self.limits = limits
        self.stream: Any = None
        self._out_dev: tuple | None = None  # output buffers reused between calls: (capacity, buffers)
        self._jobs_dev: tuple | None = None  # job list buffers reused between launches: (capacity, device, host)
        self._jobs_used = 0  # ints of the host job staging taken by this call's queued launches
        self._pinned: tuple | None = None  # page-locked read-back staging reused between calls: (capacity, arrays)
        self._scratch: Any = None
        self._scratch_bytes = 0
        #: perf_counter() when the first kernel since the caller set it to None was queued (the backend's figures:
        #: host time before the device has work)
        self.first_launch_at: float | None = None

    def use_stream(self) -> None:
        """Run the launches (job upload, counter reset, kernel, read-back) in a stream of their own (see
        :meth:`mgkflow.gpu.backend.GPUBackend.use_stream`)."""
        if self.stream is None:
            device.ensure_context()  # current in this thread (a Dask worker's second task thread)
            self.stream = device.driver().Stream()

    def outputs(self, npairs: int, keep: bool = False) -> Outputs:
        """The :class:`~mgkflow.gpu.core.Outputs` of a call of ``npairs`` pairs, on the kept buffers
        (``keep``: the results stay on the device, :attr:`Outputs.keep <mgkflow.gpu.core.Outputs.keep>`)."""
        return Outputs(npairs, self.output_buffers, self.staging, keep=keep)

    def _reused(self, attr: str, n: int, alloc: Callable[[int], tuple]) -> tuple:
        """``alloc(capacity)`` kept in ``self.<attr>`` as (capacity, buffers) between calls, grown when a call
        needs more than ``n`` (the old buffers are given back first)."""
        held = getattr(self, attr)
        if held is None or held[0] < n:
            setattr(self, attr, None)
            cap = max(n, 1024)
            held = (cap, alloc(cap))
            setattr(self, attr, held)
        return held[1]

    def output_buffers(self, n: int) -> tuple:
        """Device output buffers for ``n`` pairs (K, iterations, residuals, flags, job counter)."""
        return self._reused("_out_dev", n, alloc_outputs)

    def staging(self, n: int) -> tuple:
        """Page-locked host arrays (K, iterations, residuals, flags) for ``n`` pairs' read-back: the
        launches' copies back then run asynchronously, queued behind their kernels."""
        return self._reused("_pinned", n, alloc_staging)

    def reserve_jobs(self, n_ints: int) -> None:
        """Grow the job list buffers (device, and its page-locked host staging) to ``n_ints`` before a
        call's launches, and start the staging over: growing them between queued launches would free
        memory a queued kernel or copy still reads."""
        if self._jobs_dev is None or self._jobs_dev[0] < n_ints:
            if self._jobs_dev is not None:
                self.idle()
            self._jobs_dev = None
            cuda = device.driver()
            cap = max(int(n_ints), 2048)
            self._jobs_dev = (cap, cuda.mem_alloc(4 * cap), cuda.pagelocked_empty(cap, np.int32))
        self._jobs_used = 0

    def upload_jobs(self, jobs: np.ndarray) -> device.DeviceArray:
        """The int32 job list (g1, g2 per job, interleaved: :func:`mgkflow.gpu.core.job_list`) on the device,
        in a buffer reused between launches (queued launches of one stream run in order: a launch's
        upload runs after the kernels before it). The
        list is written into its own stretch of page-locked staging, so the copy is queued without
        waiting: from pageable memory, the upload of each launch waited for the kernel before it (95 ms
        per launch on 2,048 x 2,048 blocks, measured on the H100 machine)."""
        n = len(jobs)
        if self._jobs_dev is None or self._jobs_dev[0] < n or self._jobs_used + n > self._jobs_dev[0]:
            self.idle()  # the queued copies have read their staging
            self.reserve_jobs(max(n, 0 if self._jobs_dev is None else self._jobs_dev[0]))
        _, buf, host = self._jobs_dev
        stage = host[self._jobs_used : self._jobs_used + n]
        stage[:] = jobs
        self._jobs_used += n
        device.driver().memcpy_htod_async(buf, stage, self.stream)
        return device.DeviceArray(buf, np.dtype(np.int32), n)

    def idle(self) -> None:
        """Wait for this backend's queued work (before a buffer a queued kernel may read is freed)."""
        cuda = device.driver()
        if self.stream is not None:
            self.stream.synchronize()
        elif hasattr(cuda, "Context") and hasattr(cuda.Context, "synchronize"):
            cuda.Context.synchronize()

    def scratch(self, nbytes: int) -> Any:
        """The per-block scratch of a launch: at least ``nbytes`` of device memory, kept between launches."""
        if self._scratch is None or self._scratch_bytes < nbytes:
            if self._scratch is not None:
                self.idle()
            self._scratch = None
            self._scratch = device.driver().mem_alloc(max(nbytes, 8))
            self._scratch_bytes = nbytes
        return self._scratch

    def drop_scratch(self) -> None:
        """Give the per-block scratch back (before the wide path takes the device memory)."""
        self._scratch, self._scratch_bytes = None, 0

    def allow_smem(self, fn: device.Kernel) -> None:
        """Let ``fn`` take all the dynamic shared memory the device allows. The limit is an attribute of the
        function, shared by every thread using the module: setting it to each launch's own size raced
        between the two solver threads of an overlapped Gram run (one thread's smaller value landing
        before the other's larger launch: 'invalid argument'); the largest value is the same for all."""
        fn.set_attribute(device.driver().function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES,
                         int(self.limits.smem_optin) - int(getattr(fn, "shared_size_bytes", 0)))  # fmt: skip

    def blocks_per_sm(self, fn: device.Kernel, blk: int, smem: int) -> int:
        """Resident blocks per SM of ``fn`` at ``blk`` threads and ``smem`` bytes of dynamic shared memory, after
        the shared-memory opt-in where the launch needs it (:meth:`allow_smem`)."""
        if device.needs_smem_optin(fn, smem):
            self.allow_smem(fn)
        return device.kernel_blocks_per_sm(fn, blk, smem)

    def launch_jobs(
        self, fn: device.Kernel, order: np.ndarray, jobs: np.ndarray, grid: int, blk: int, smem: int,
        o: Outputs, args: dict,
    ) -> tuple[Any, Any]:  # fmt: skip
        """Queue one persistent-grid launch over a job list (``jobs``: :func:`~mgkflow.gpu.core.job_list`
        of the g1 and g2 of job t = pair ``order[t]``):
        upload, counter reset, the launch with ``args``, its read-back into ``o`` (:meth:`Outputs.queue_read`),
        all in this backend's stream, without waiting; the (start, stop) events around the kernel."""
        cuda = device.driver()
        d_jobs = self.upload_jobs(jobs)
        if self.stream is None:
            cuda.memset_d32(o.counter, 0, 1)
        else:
            cuda.memset_d32_async(o.counter, 0, 1, self.stream)
        start, stop = cuda.Event(), cuda.Event()
        out_k, out_it, out_res, out_conv = o.pointers(len(order))
        record(start, self.stream)
        if self.first_launch_at is None:
            self.first_launch_at = time.perf_counter()
        fn(
            grid=(int(grid), 1), block=(blk, 1, 1), shared=smem, **args,
            jobs=d_jobs, n_jobs=len(order), job_counter=o.counter,
            out_k=out_k, out_iter=out_it, out_res=out_res, out_conv=out_conv, stream=self.stream,
        )  # fmt: skip
        record(stop, self.stream)
        o.queue_read(order, self.stream)
        return start, stop

    @staticmethod
    def complete(out: Outputs, queued: list[tuple[tuple[Any, Any], dict]]) -> None:
        """Wait for the queued launches and read-backs (one stream), moving each launch's read-back to its
        pairs as it completes (:meth:`Outputs.drain`), and put each launch's device seconds into its figures."""
        if not queued:
            return
        out.drain()
        for (start, stop), info in queued:
            info["seconds"] = stop.time_since(start) * 1e-3
