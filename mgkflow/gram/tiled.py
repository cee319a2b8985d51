"""Tiled kernel matrices: blocks of pairs solved in this process or on a Dask cluster.

Every block is solved the same way wherever it runs (:func:`compute_block`: the
kernel called on the block's graphs), so the values are bit-identical between an
in-process run, a Dask run and a resumed run.
"""

from __future__ import annotations

import functools
import gc
import os
import pickle
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ParameterTypeError
from ..evaluation.backend import get_backend
from ..evaluation.checks import check_convergence, check_finite
from ..evaluation.solve import record, solve
from ..evaluation.systems import prepare
from ..graph import Graph
from ..mgk import MarginalizedGraphKernel, gpu_available
from . import _args
from .blocks import Block, default_block_size, plan_blocks
from .cluster import device_context
from .digest import graphs_digest, kernel_params, params_digest
from .resources import ResourceEstimate, check_resources, estimate_resources
from .store import GramStore

__all__ = ["GramJob", "BlockReport", "GramResult", "tiled_gram", "compute_block", "run_block", "flush_writes"]

DTYPES = ("float64", "float32")


@dataclass
class GramJob:
    """Everything a block task needs; scattered to Dask once and fetched by each worker before its first block."""

    X: tuple[Graph, ...]
    Y: tuple[Graph, ...] | None
    kernel: MarginalizedGraphKernel
    store: GramStore | None
    run: str = field(default_factory=lambda: uuid.uuid4().hex)
    #: GPU runs: each solver thread (in-process: two; a Dask GPU worker: its task threads) launches in a
    #: stream of its own, so that one block's host work overlaps another's device work
    overlap: bool = False

    def __reduce__(self) -> tuple:
        # the graphs as a few concatenated arrays (Graph.pack_many): one by one, 24,000 molecules pickle
        # as ~240,000 small arrays, and sending them to the workers took 15 s of a 1-minute Gram
        return _rebuild_job, (_packed(self.X), _packed(self.Y), self.kernel, self.store, self.run, self.overlap)


def _packed(graphs: tuple[Graph, ...] | None) -> Any:
    if graphs is None:
        return None
    packed = Graph.pack_many(graphs)
    return graphs if packed is None else ("packed", packed)


def _unpacked(obj: Any) -> tuple[Graph, ...] | None:
    if isinstance(obj, tuple) and len(obj) == 2 and obj[0] == "packed":
        return Graph.unpack_many(obj[1])
    return obj


def _rebuild_job(X: Any, Y: Any, kernel: MarginalizedGraphKernel, store: Any, run: str, overlap: bool) -> GramJob:
    return GramJob(X=_unpacked(X), Y=_unpacked(Y), kernel=kernel, store=store, run=run, overlap=overlap)


@dataclass
class BlockReport:
    """What a block task returns: its figures, and its values when there is no store."""

    key: str
    pairs: int
    seconds: float
    backend: str
    worker: str
    cg_iter_median: float
    not_converged: int
    values: np.ndarray | None = None
    #: device seconds of the block's solve (GPU backend; 0 on the CPU)
    device_s: float = 0.0
    #: host seconds of the GPU solve before its first kernel and after the device's work (0 on the CPU): the parts
    #: of ``seconds`` that the block's thread spends on the host alone (a block's other host work overlaps its kernels)
    host_before_s: float = 0.0
    host_after_s: float = 0.0
    #: seconds the block's Dask task waited, after its solve, for this worker's earlier block writes
    write_wait_s: float = 0.0
    #: when the block's solve started (``time.time()`` of the worker: one host's clock for local clusters)
    started: float = 0.0


_TLS = threading.local()


def _thread_kernel(job: GramJob) -> MarginalizedGraphKernel:
    """This thread's copy of the job's kernel (own backend and caches), made once per job."""
    if getattr(_TLS, "run", None) != job.run:
        _TLS.kernel = pickle.loads(pickle.dumps(job.kernel))  # drops any backend: built here
        _TLS.run = job.run
    return _TLS.kernel


def _release_thread_kernel() -> None:
    """Drop this thread's kernel copy (its backend's device buffers and stream) while the CUDA context is
    current here: left to the thread's exit, PyCUDA cannot free them ('... in out-of-thread context could
    not be cleaned up' warnings at the end of an overlapped run)."""
    with device_context():
        _TLS.__dict__.clear()
        gc.collect()


_SYSTEMS_LOCK = threading.Lock()
_SYSTEMS: dict[str, tuple[list, list]] = {}
_PACKS: dict[str, Any] = {}  # the GPU host batch of a job's systems (under _SYSTEMS_LOCK)


def _thread_systems(job: GramJob, kern: MarginalizedGraphKernel) -> tuple[list, list]:
    """The prepared systems of ALL the job's graphs (X, and Y or X again), made once per process
    and job (shared by this process's solver threads: they depend only on the job's kernel).

    Every block then hands the backend the same two lists and the block's pairs by global
    index: the GPU backend packs and uploads the whole set once and keeps it on the device
    between blocks (its batch cache is keyed by the graphs), instead of packing each block's
    graphs again; the host keeps one system per graph (O(graphs)) and the arrays of one block.
    """
    with _SYSTEMS_LOCK:
        cached = _SYSTEMS.get(job.run)
        if cached is None:
            _SYSTEMS.clear()  # one job at a time per process: drop an earlier job's systems
            _PACKS.clear()
            xs = prepare(kern, job.X, "X")
            ys = xs if job.Y is None else prepare(kern, job.Y, "Y", xs)
            cached = _SYSTEMS[job.run] = (xs, ys)
    return cached


@functools.lru_cache(maxsize=4)
def _triangle(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Row and column of the upper triangle of an n x n block (int32), and the flat positions of its
    entries and of their mirror images (kept for the blocks of equal size that follow)."""
    iu, ju = np.triu_indices(n)
    iu, ju = iu.astype(np.int32), ju.astype(np.int32)
    return iu, ju, iu.astype(np.int64) * n + ju, ju.astype(np.int64) * n + iu


def _block_pairs(block: Block) -> np.ndarray:
    """Global (row, column) pairs a block solves (int32): its upper triangle on the diagonal, all of it elsewhere."""
    nr, nc = block.r1 - block.r0, block.c1 - block.c0
    if block.diagonal:
        iu, ju, _, _ = _triangle(nr)
        out = np.empty((iu.size, 2), dtype=np.int32)
        np.add(iu, block.r0, out=out[:, 0])
        np.add(ju, block.r0, out=out[:, 1])
        return out
    out = np.empty((nr, nc, 2), dtype=np.int32)
    out[:, :, 0] = np.arange(block.r0, block.r1, dtype=np.int32)[:, None]
    out[:, :, 1] = np.arange(block.c0, block.c1, dtype=np.int32)[None, :]
    return out.reshape(-1, 2)


def _adopt_shared_pack(job: GramJob, kern: MarginalizedGraphKernel, xs: list, ys: list) -> None:
    """GPU: pack the job's systems once per process and let this thread's backend adopt the host
    batch (each solver thread has a backend of its own; each packed the whole set before, at the
    same time, at the start of a run)."""
    backend = get_backend(kern)
    if not hasattr(backend, "host_batch"):
        return
    with _SYSTEMS_LOCK:
        hb = _PACKS.get(job.run)
        if hb is None:
            hb = _PACKS[job.run] = backend.host_batch(xs, ys, kern.node_kernel, kern.edge_kernel)
    backend.adopt(hb)


def _solve_in_set(kern: MarginalizedGraphKernel, job: GramJob, block: Block) -> np.ndarray:
    """A block's values solved within the whole prepared set (see :func:`_thread_systems`);
    the same checks as a kernel call (finite values, convergence), ``last_stats`` set."""
    xs, ys = _thread_systems(job, kern)
    _adopt_shared_pack(job, kern, xs, ys)
    t0 = time.perf_counter()
    pairs = _block_pairs(block)
    vals, _, its, res, conv = solve(kern, xs, ys, pairs, raw=True)
    nr, nc = block.r1 - block.r0, block.c1 - block.c0
    if block.diagonal:
        _, _, up, lo = _triangle(nr)
        K = np.empty((nr, nr))
        flat = K.reshape(-1)
        flat[up] = vals
        flat[lo] = vals
    else:
        K = vals.reshape(nr, nc)
    # statistics per solved pair (flat: a diagonal block's mirrored half was not solved)
    record(kern, K.shape, len(pairs), its, res, conv, t0)
    check_finite(K, xs[block.r0 : block.r1], ys[block.c0 : block.c1])
    check_convergence(kern, conv, res)
    return K


def compute_block(job: GramJob, block: Block) -> tuple[np.ndarray, dict]:
    """Solve one block: ``kernel(X[r0:r1])`` on the diagonal, ``kernel(X[r0:r1], Y[c0:c1])`` elsewhere.

    A kernel that does not normalize solves the block's pairs within the whole graph set,
    prepared (and, on the GPU, packed and uploaded) once per worker thread and job
    (:func:`_thread_systems`); the values are those of the kernel call on the block's graphs
    (each pair is solved on its own). Returns the block's float64 values (a diagonal block is
    full and symmetric) and its figures.
    """
    started = time.time()
    kern = _thread_kernel(job)
    xs = job.X[block.r0 : block.r1]
    t0 = time.perf_counter()
    with device_context():
        if job.overlap and kern.backend != "cpu":
            backend = get_backend(kern)
            if hasattr(backend, "use_stream"):  # GPU: this thread's launches in a stream of their own
                backend.use_stream()
        if not kern.normalize:
            values = _solve_in_set(kern, job, block)
        elif block.diagonal:
            values = kern(xs)
        else:
            ys = (job.X if job.Y is None else job.Y)[block.c0 : block.c1]
            values = kern(xs, ys)
    seconds = time.perf_counter() - t0
    st = kern.last_stats
    it = st.iterations
    info = {
        "pairs": block.n_pairs,
        "seconds": seconds,
        "backend": st.backend,
        "cg_iter_median": _median_count(it),
        "not_converged": int((~st.converged).sum()),
        "run": job.run,
        "device_s": float((st.extra or {}).get("device_s", 0.0)),
        "host_before_s": float((st.extra or {}).get("prelaunch_s", 0.0)),
        "host_after_s": float((st.extra or {}).get("tail_s", 0.0)),
        "started": started,
    }
    return values, info


def _median_count(it: np.ndarray) -> float:
    """``np.median`` of non-negative integers (CG iterations) by counting: linear, no partition of the
    block's millions of entries.

    >>> _median_count(np.array([3, 1, 2, 10])), float(np.median([3, 1, 2, 10])), _median_count(np.array([], int))
    (2.5, 2.5, 0.0)
    """
    if not it.size:
        return 0.0
    c = np.cumsum(np.bincount(it))
    n = it.size
    return (int(np.searchsorted(c, (n - 1) // 2, side="right")) + int(np.searchsorted(c, n // 2, side="right"))) / 2


def run_block(job: GramJob, block: Block) -> BlockReport:
    """The block task: compute a block, write it to the store (if any) and report.

    With a store the values go to disk from here (a Dask worker writes its own blocks)
    and the report carries none; without one they travel back in the report.
    """
    values, info = compute_block(job, block)
    return _store_and_report(job, block, values, info)


def _worker_name() -> str:
    return f"{os.uname().nodename}:{os.getpid()}"


def _report(block: Block, info: dict, worker: str, values: np.ndarray | None = None) -> BlockReport:
    """The report of a block from the figures of :func:`compute_block`."""
    return BlockReport(
        key=block.key,
        pairs=info["pairs"],
        seconds=info["seconds"],
        backend=info["backend"],
        worker=worker,
        cg_iter_median=info["cg_iter_median"],
        not_converged=info["not_converged"],
        values=values,
        device_s=info.get("device_s", 0.0),
        host_before_s=info.get("host_before_s", 0.0),
        host_after_s=info.get("host_after_s", 0.0),
        write_wait_s=info.get("write_wait_s", 0.0),
        started=info.get("started", 0.0),
    )


def _store_and_report(job: GramJob, block: Block, values: np.ndarray, info: dict) -> BlockReport:
    worker = _worker_name()
    if job.store is not None:
        job.store.write_block(block, values, {**info, "worker": worker})
        values = None
    return _report(block, info, worker, values)


@dataclass
class GramResult:
    """Outcome of :func:`tiled_gram`.

    Attributes
    ----------
    matrix : ndarray or None
        The kernel matrix (in-memory runs); None when written to ``path``.
    path : Path or None
        The Zarr store (read it with :func:`mgkflow.load_gram`).
    ids, ids_y : list of str
        Graph identifiers of the rows and columns (titles, else indices); ``ids_y`` is
        None for the Gram matrix of one set.
    blocks : int
        Blocks of the whole matrix.
    computed : list of str
        Keys (``"bi.bj"``) of the blocks computed by this run, in completion order.
    skipped : int
        Blocks found done in the store (resumed run).
    pairs : int
        Pairs solved by this run.
    seconds : float
        Wall time of the solving phase.
    estimate : ResourceEstimate
        The memory estimate made before the run.
    workers : dict
        Blocks computed per worker (``"host:pid"``).
    worker_seconds : dict
        Per worker (the names of ``workers``), the sums over its blocks of ``block_s`` (their solves' wall time in
        its threads), ``device_s`` (their device time), ``host_before_s`` and ``host_after_s`` (the GPU solves'
        host time before their first kernel and after the device's work) and ``write_wait_s`` (a Dask task's
        wait for the worker's earlier block writes): a worker whose blocks take longer than their device time
        is host-bound.
    device_seconds : float
        Sum of the blocks' device seconds (GPU backend; 0 on the CPU).
    block_seconds : float
        Sum of the blocks' solve times (wall time in the worker thread, from the block's start to its
        values on the host); beside ``seconds``, it shows what the run spent outside block solves.
    startup_seconds, tail_seconds : float
        From the start of the solving phase to the first block's start (a cluster: sending the
        graphs, the workers' first task), and from the end of the last block solved to the end of
        the phase (the last writes); by the workers' clocks (meaningful for one host).
    """

    matrix: np.ndarray | None
    path: Path | None
    ids: list[str]
    ids_y: list[str] | None
    blocks: int
    computed: list[str]
    skipped: int
    pairs: int
    seconds: float
    estimate: ResourceEstimate
    workers: dict[str, int] = field(default_factory=dict)
    device_seconds: float = 0.0
    block_seconds: float = 0.0
    startup_seconds: float = 0.0
    tail_seconds: float = 0.0
    worker_seconds: dict[str, dict[str, float]] = field(default_factory=dict)

    @property
    def pairs_per_second(self) -> float:
        return self.pairs / self.seconds if self.seconds > 0 else float("inf")


def _ids(graphs: Sequence[Graph]) -> list[str]:
    return [g.title if g.title is not None else str(i) for i, g in enumerate(graphs)]


def _check_graphs(graphs: Any, what: str) -> tuple[Graph, ...]:
    return tuple(_args.graph_list(graphs, what))


def _resolved_backend(kernel: MarginalizedGraphKernel, client: Any) -> str:
    if kernel.backend != "auto":
        return kernel.backend
    if client is not None:
        return "gpu"  # a cluster's workers decide; size blocks for the faster backend
    return "gpu" if gpu_available() else "cpu"


def _run_local_overlapped(job: GramJob, blocks: Sequence[Block], on_report: Callable[[BlockReport], None]) -> None:
    """Two solver threads, each with its own kernel and backend: while the device solves one
    block, the other thread prepares (plans, orders, gathers) the next one and post-processes
    the previous one; one writer thread as in :func:`_run_local`. Reports in block order; at
    most four blocks in memory (two solving, one done, one being written)."""
    from collections import deque
    from concurrent.futures import ThreadPoolExecutor

    def solve(b: Block) -> tuple[np.ndarray, dict]:
        return compute_block(job, b)

    with (
        ThreadPoolExecutor(max_workers=2, thread_name_prefix="mgkflow-gram-solver") as solvers,
        ThreadPoolExecutor(max_workers=1, thread_name_prefix="mgkflow-gram-writer") as writer,
    ):
        inflight: deque = deque()
        pending = None

        def finish_oldest() -> None:
            nonlocal pending
            b0, fut = inflight.popleft()
            values, info = fut.result()
            if job.store is None:
                on_report(_store_and_report(job, b0, values, info))
                return
            if pending is not None:
                on_report(pending.result())
            pending = writer.submit(_store_and_report, job, b0, values, info)

        for b in blocks:
            inflight.append((b, solvers.submit(solve, b)))
            if len(inflight) == 2:
                finish_oldest()
        while inflight:
            finish_oldest()
        if pending is not None:
            on_report(pending.result())
        # one release task per solver thread (the barrier keeps both threads busy until each took one)
        barrier = threading.Barrier(2)

        def release(_: int) -> None:
            try:
                barrier.wait(timeout=60)
            except threading.BrokenBarrierError:  # a pool that ran on one thread only
                pass
            _release_thread_kernel()

        list(solvers.map(release, range(2)))


def _run_local(job: GramJob, blocks: Sequence[Block], on_report: Callable[[BlockReport], None]) -> None:
    if job.overlap and len(blocks) > 1:
        _run_local_overlapped(job, blocks, on_report)
        return
    if job.store is None:
        for b in blocks:
            on_report(run_block(job, b))
        return
    # one writer thread: block k is written (and fsync'ed) while block k + 1 is solved;
    # at most two blocks are held in memory
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="mgkflow-gram-writer") as writer:
        pending = None
        for b in blocks:
            values, info = compute_block(job, b)
            if pending is not None:
                on_report(pending.result())
            pending = writer.submit(_store_and_report, job, b, values, info)
        if pending is not None:
            on_report(pending.result())


# ---------------------------------------------------------------------- Dask workers' writes
# A Dask task with a store hands its block to a writer thread of its worker process and
# returns, so that the worker solves the next block while this one is written (a task waits
# for the writes older than the newest one: with two task threads, up to two writes pending,
# and a thread never waits for the other's latest block). The marker still follows the durable data; the
# client waits for every worker's writes (flush_writes) and recomputes any block whose
# marker is missing (a worker lost with a write pending).
_WRITES_LOCK = threading.Lock()
_WRITER: Any = None
_PENDING: list = []


def _writer() -> Any:
    global _WRITER
    with _WRITES_LOCK:
        if _WRITER is None:
            from concurrent.futures import ThreadPoolExecutor

            _WRITER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mgkflow-gram-writer")
        return _WRITER


def _wait_writes(keep: int = 0) -> None:
    """Wait for this process's pending block writes but the newest ``keep``; re-raise the first failure."""
    with _WRITES_LOCK:
        cut = max(len(_PENDING) - keep, 0)
        pending = _PENDING[:cut]
        del _PENDING[:cut]
    for fut in pending:
        fut.result()


def flush_writes() -> str | None:
    """Wait for this process's pending block writes; the text of a failure, or None (run on Dask workers)."""
    try:
        _wait_writes()
    except Exception as exc:  # noqa: BLE001 - reported to the client, which raises
        return f"{type(exc).__name__}: {exc}"
    return None


def run_block_overlapped(job: GramJob, block: Block) -> BlockReport:
    """Dask task with a store: solve the block, queue its write on this worker's writer thread, report."""
    if job.store is None:
        return run_block(job, block)
    values, info = compute_block(job, block)
    t0 = time.perf_counter()
    _wait_writes(keep=1)  # the older blocks were written while this one was solved
    info["write_wait_s"] = time.perf_counter() - t0
    fut = _writer().submit(_store_and_report, job, block, values, info)
    with _WRITES_LOCK:
        _PENDING.append(fut)
    return _report(block, info, _worker_name())


def _block_task(job: Any, block: Block) -> BlockReport:
    """:func:`run_block_overlapped` as a Dask task: ``job`` is the :class:`~mgkflow.gram.cluster.Pickled` job."""
    return run_block_overlapped(job.get(), block)


def _run_dask(client: Any, job: GramJob, blocks: Sequence[Block], on_report: Callable[[BlockReport], None]) -> None:
    from distributed import as_completed

    from .cluster import scatter_to_all

    # graphs and kernel: scattered once and fetched by every worker before the first block (each task names the job)
    job_future = scatter_to_all(client, job)
    try:
        todo = list(blocks)
        for attempt in range(3):
            futures = [
                client.submit(
                    _block_task, job_future, b, key=f"mgkflow-block-{job.run[:12]}-{attempt}-{b.key}",
                    pure=False,
                )  # fmt: skip
                for b in todo
            ]
            try:
                for fut in as_completed(futures):
                    report = fut.result()
                    fut.release()
                    on_report(report)
            except BaseException:
                client.cancel(futures)
                raise
            if job.store is None:
                return
            failures = {w: e for w, e in client.run(flush_writes).items() if e}
            if failures:
                worker, err = next(iter(failures.items()))
                raise RuntimeError(
                    f"writing blocks to {job.store.path} failed on {len(failures)} worker(s): {worker}: {err}"
                )
            wanted = {b.key for b in todo}
            todo = [b for b in job.store.missing_blocks() if b.key in wanted]
            if not todo:
                return
        raise RuntimeError(f"{len(todo)} blocks could not be written to {job.store.path} (workers lost); run again")
    finally:
        client.cancel([job_future])


# ---------------------------------------------------------------------- the steps of tiled_gram
@dataclass
class _Plan:
    """What :func:`tiled_gram` checked and decided before solving: graphs, kernel, blocks, estimate."""

    X: tuple[Graph, ...]
    Y: tuple[Graph, ...] | None
    kernel: MarginalizedGraphKernel
    backend: str
    block_size: int
    dtype: str
    estimate: ResourceEstimate
    blocks: list[Block]
    ids: list[str]
    ids_y: list[str] | None

    @property
    def shape(self) -> tuple[int, int]:
        return len(self.X), len(self.X if self.Y is None else self.Y)


def _plan(
    X: Any, Y: Any, kernel: Any, *, block_size: Any, dtype: str, client: Any, out: Any, check_memory: bool,
    say: Callable[[str], Any],
) -> _Plan:  # fmt: skip
    """Check the arguments, choose the block size, estimate memory and disk (refusing what cannot fit)."""
    X = _check_graphs(X, "X")
    Yt = None if Y is None else _check_graphs(Y, "Y")
    kernel = MarginalizedGraphKernel() if kernel is None else kernel
    if not isinstance(kernel, MarginalizedGraphKernel):
        raise ParameterTypeError(f"kernel must be a MarginalizedGraphKernel, got {type(kernel).__name__}")
    _args.text(dtype, "dtype", tuple(DTYPES))
    n = len(X)
    m = n if Yt is None else len(Yt)
    backend = _resolved_backend(kernel, client)
    if block_size is None:
        block_size = default_block_size(n, None if Yt is None else m, backend)
    block_size = _args.count(block_size, "block_size", lo=1)

    est = estimate_resources(
        X, Yt, block_size=block_size, dtype=dtype, backend=backend, out=out, device=backend == "gpu" and client is None
    )
    say(f"estimate: {est.summary()}")
    if check_memory:
        check_resources(est, in_memory=out is None)
    return _Plan(
        X=X, Y=Yt, kernel=kernel, backend=backend, block_size=block_size, dtype=dtype, estimate=est,
        blocks=plan_blocks(n, None if Yt is None else m, block_size), ids=_ids(X),
        ids_y=None if Yt is None else _ids(Yt),
    )  # fmt: skip


def _open_store(
    plan: _Plan, out: Any, client: Any, resume: bool, overwrite: bool, say: Callable[[str], Any]
) -> tuple[GramStore | None, list[Block]]:
    """The store at ``out`` (made, or opened to resume: the same computation only) and the blocks still to
    compute; no store and every block for an in-memory run."""
    if out is None:
        return None, plan.blocks
    params = kernel_params(plan.kernel)
    if plan.kernel.backend == "auto" and client is None:
        params["backend"] = repr(plan.backend)  # what "auto" chose here: a resumed run must choose the same
    n, m = plan.shape
    meta = {
        "symmetric": plan.Y is None,
        "shape": [n, m],
        "block_size": plan.block_size,
        "dtype": plan.dtype,
        "ids": plan.ids,
        "ids_y": plan.ids_y,
        "kernel": repr(plan.kernel),
        "params": params,
        "digests": {
            "graphs_x": graphs_digest(plan.X),
            "graphs_y": None if plan.Y is None else graphs_digest(plan.Y),
            "ids": params_digest({"x": plan.ids, "y": plan.ids_y}),
            "params": params_digest(params),
        },
    }
    # absolute: Dask workers (maybe on other hosts, with another working directory) open it too
    store = GramStore.open(Path(out).absolute(), meta, resume=resume, overwrite=overwrite)
    todo = store.missing_blocks()
    if len(todo) < len(plan.blocks):
        say(f"resuming {out}: {len(plan.blocks) - len(todo)} of {len(plan.blocks)} blocks already done")
    return store, todo


#: The sums of :attr:`GramResult.worker_seconds`, in the order :class:`_Collector` adds them.
_WORKER_SECONDS = ("block_s", "device_s", "host_before_s", "host_after_s", "write_wait_s")


class _Collector:
    """Takes the blocks' reports as they come (``collect(report)``): fills the in-memory matrix,
    adds up the figures, advances the progress bar. Its clocks start when it is made."""

    def __init__(self, plan: _Plan, K: np.ndarray | None, bar: Any) -> None:
        self.K = K
        self.bar = bar
        self.by_key = {b.key: b for b in plan.blocks}
        self.computed: list[str] = []
        self.workers: dict[str, int] = {}
        self.worker_seconds: dict[str, dict[str, float]] = {}
        self.pairs = 0
        self.device_seconds = 0.0
        self.block_seconds = 0.0
        self.t0 = time.perf_counter()
        self.wall0 = time.time()
        self.first_start, self.last_end = float("inf"), self.wall0

    def __call__(self, rep: BlockReport) -> None:
        self.computed.append(rep.key)
        if rep.started:
            self.first_start = min(self.first_start, rep.started)
            self.last_end = max(self.last_end, rep.started + rep.seconds)
        self.device_seconds += rep.device_s
        self.block_seconds += rep.seconds
        self.workers[rep.worker] = self.workers.get(rep.worker, 0) + 1
        sums = self.worker_seconds.setdefault(rep.worker, dict.fromkeys(_WORKER_SECONDS, 0.0))
        figures = (rep.seconds, rep.device_s, rep.host_before_s, rep.host_after_s, rep.write_wait_s)
        for name, value in zip(_WORKER_SECONDS, figures, strict=True):
            sums[name] += value
        self.pairs += rep.pairs
        if self.K is not None:
            b = self.by_key[rep.key]
            self.K[b.r0 : b.r1, b.c0 : b.c1] = rep.values
            if b.symmetric and not b.diagonal:
                self.K[b.c0 : b.c1, b.r0 : b.r1] = rep.values.T
        if self.bar is not None:
            self.bar.update(1)
            self.bar.set_postfix(pairs_s=f"{self.pairs / max(time.perf_counter() - self.t0, 1e-9):.3g}", refresh=False)


def _progress_bar(progress: bool, plan: _Plan, todo: Sequence[Block]) -> Any:
    if not progress:
        return None
    from ..progress import progress_bar

    total = len(plan.blocks)
    return progress_bar(total, initial=total - len(todo), unit="block", desc="Gram blocks")


def _run_blocks(job: GramJob, todo: Sequence[Block], client: Any, collect: _Collector) -> None:
    """Solve the blocks here or on the Dask cluster, each report to ``collect``."""
    try:
        if client is None:
            _run_local(job, todo, collect)
        else:
            _run_dask(client, job, todo, collect)
    finally:
        if collect.bar is not None:
            collect.bar.close()


def _finish(plan: _Plan, out: Any, store: GramStore | None, todo: Sequence[Block], collect: _Collector) -> GramResult:
    """Check that every block reported written is marked done; the result and its figures."""
    seconds = time.perf_counter() - collect.t0
    wall1 = collect.wall0 + seconds
    if store is not None:
        lost = store.missing_blocks()
        if lost:  # every task reported its marker written: only a file system fault gets here
            raise RuntimeError(
                f"{out}: {len(lost)} blocks reported written have no done marker (first: {lost[0].key}); "
                "run again to compute them"
            )
    ran = bool(collect.computed)
    startup = max(collect.first_start - collect.wall0, 0.0) if ran else 0.0
    tail = max(wall1 - collect.last_end, 0.0) if ran else 0.0
    return GramResult(
        matrix=collect.K, path=None if out is None else Path(out), ids=plan.ids, ids_y=plan.ids_y,
        blocks=len(plan.blocks), computed=collect.computed, skipped=len(plan.blocks) - len(todo), pairs=collect.pairs,
        seconds=seconds, estimate=plan.estimate, workers=collect.workers, device_seconds=collect.device_seconds,
        block_seconds=collect.block_seconds, startup_seconds=startup, tail_seconds=tail,
        worker_seconds=collect.worker_seconds,
    )  # fmt: skip


def tiled_gram(
    X: Sequence[Graph],
    Y: Sequence[Graph] | None = None,
    kernel: MarginalizedGraphKernel | None = None,
    *,
    out: str | os.PathLike | None = None,
    block_size: int | None = None,
    dtype: str = "float64",
    client: Any = None,
    resume: bool = True,
    overwrite: bool = False,
    progress: bool = False,
    check_memory: bool = True,
    log: Callable[[str], Any] | None = None,
    overlap: bool | None = None,
) -> GramResult:
    """Compute a kernel matrix block by block, in memory or into a resumable Zarr store.

    The matrix is cut into ``block_size x block_size`` blocks of graph pairs (for the
    Gram matrix of X, the blocks on and above the diagonal). Each block is one task: it
    runs here, one after the other, or on the workers of a ``distributed.Client``
    (graphs and kernel are sent to each worker once; workers write their blocks to the
    store themselves). With ``out`` every block is a chunk of a Zarr array, recorded
    as done only once written durably; running the same call again after a crash
    (kill -9 included) computes only the missing blocks and gives the same bits.

    Parameters
    ----------
    X : sequence of Graph
    Y : sequence of Graph, optional
        Columns of a cross matrix; None for the Gram matrix of X.
    kernel : MarginalizedGraphKernel, optional
        The kernel (default ``MarginalizedGraphKernel()``); it pickles without its
        backend, so each worker builds its own.
    out : path-like, optional
        Zarr store to write (``K.zarr``); None keeps the matrix in memory (refused,
        naming the ``out=`` to use, when it would not fit).
    block_size : int, optional
        Graphs per block side (= the chunk side); default 2048 with the GPU backend,
        128 on the CPU.
    dtype : {"float64", "float32"}
        Stored dtype (float32 halves memory and disk; values are solved in float64).
    client : distributed.Client, optional
        Run the blocks on this Dask cluster; None runs them in this process.
    resume : bool
        Resume into an existing store made by the same computation (default). A store
        made for other graphs, ids, kernel parameters, block size or dtype is refused
        (:class:`~mgkflow.gram.store.StoreMismatchError`).
    overwrite : bool
        Delete an existing store at ``out`` first.
    progress : bool
        Progress over blocks (with ETA) on stderr: a tqdm bar on a terminal, plain
        lines elsewhere (:func:`mgkflow.progress.progress_bar`).
    check_memory : bool
        Estimate host and disk memory first and refuse what cannot fit
        (:class:`~mgkflow.gram.resources.ResourceError`).
    log : callable, optional
        Called with one-line messages (estimate, resume state).
    overlap : bool, optional
        Solve blocks in two threads (each with its own kernel, backend and CUDA stream), so
        that one block's host work (planning, gathers, post-processing) overlaps another's
        device work; same values. Host memory: up to four blocks instead of two. On a cluster,
        the workers' task threads (``--dask cuda``: two per GPU worker) do the same.
        Default (None): on for the GPU backend, off for the CPU.

    Returns
    -------
    GramResult

    Examples
    --------
    >>> import numpy as np
    >>> from mgkflow.datasets import molecules, default_kernels
    >>> gs = molecules(7, seed=3, max_atoms=10)
    >>> kern = MarginalizedGraphKernel(*default_kernels("drugs"), q=0.2, backend="cpu")
    >>> res = tiled_gram(gs, kernel=kern, block_size=3)
    >>> res.blocks, len(res.computed), res.pairs
    (6, 6, 28)
    >>> bool(np.array_equal(res.matrix, kern(gs)))
    True
    """
    for name, value in (("resume", resume), ("overwrite", overwrite), ("progress", progress),
                        ("check_memory", check_memory)):
        _args.flag(value, name)
    overlap = _args.flag(overlap, "overlap", none=True)
    out = _args.path(out, "out", none=True)
    if client is not None and not (hasattr(client, "scatter") and hasattr(client, "submit")):
        raise ParameterTypeError(f"client must be a distributed.Client or None, got {type(client).__name__}")
    say = _args.callable_or_none(log, "log") or (lambda _msg: None)
    plan = _plan(
        X, Y, kernel, block_size=block_size, dtype=dtype, client=client, out=out, check_memory=check_memory, say=say
    )
    store, todo = _open_store(plan, out, client, resume, overwrite, say)
    K = None if store is not None else np.full(plan.shape, np.nan, dtype=dtype)
    if overlap is None:
        overlap = plan.backend == "gpu"
    job = GramJob(X=plan.X, Y=plan.Y, kernel=plan.kernel, store=store, overlap=bool(overlap))
    bar = _progress_bar(progress, plan, todo)
    collect = _Collector(plan, K, bar)  # the clocks of the solving phase start here
    _run_blocks(job, todo, client, collect)
    return _finish(plan, out, store, todo, collect)
