"""Dask clusters from a command-line spec: ``local:N``, ``cuda`` or a scheduler address."""

from __future__ import annotations

import contextlib
import gc
import sys
from collections.abc import Iterator
from typing import Any

from ..errors import BackendUnavailableError, ParameterError, ParameterTypeError

__all__ = [
    "client_from_spec",
    "backend_for_spec",
    "parse_spec",
    "scatter_to_all",
    "release_from_all",
    "device_context",
    "Pickled",
    "FETCH_TIMEOUT_S",
]

#: Seconds :func:`scatter_to_all` waits for every worker to hold the object before going on without.
FETCH_TIMEOUT_S = 60.0


def parse_spec(spec: str) -> tuple[str, int | None]:
    """Split a cluster spec into its kind and worker count.

    Examples
    --------
    >>> parse_spec("local:4"), parse_spec("cuda"), parse_spec("tcp://10.0.0.1:8786")
    (('local', 4), ('cuda', None), ('address', None))
    """
    if not isinstance(spec, str):
        raise ParameterTypeError(
            f"a cluster spec must be a string (local:N, cuda or tcp://HOST:PORT), got {spec!r:.40}"
        )
    text = spec.strip()
    if "://" in text:
        return "address", None
    kind, _, count = text.partition(":")
    kind = kind.lower()
    if kind not in ("local", "cuda"):
        raise ParameterError(
            f"--dask must be local:N, cuda or a scheduler address such as tcp://HOST:PORT, got {spec!r}"
        )
    if not count:
        return kind, None
    try:
        n = int(count)
    except ValueError:
        n = 0
    if n < 1:
        raise ParameterError(f"--dask {spec!r}: the worker count must be a positive integer")
    return kind, n


def backend_for_spec(spec: str) -> str | None:
    """The kernel backend a cluster kind implies: "cpu" for local, "gpu" for cuda, None for an address.

    Examples
    --------
    >>> backend_for_spec("local:2"), backend_for_spec("cuda"), backend_for_spec("tcp://h:1")
    ('cpu', 'gpu', None)
    """
    return {"local": "cpu", "cuda": "gpu", "address": None}[parse_spec(spec)[0]]


@contextlib.contextmanager
def client_from_spec(
    spec: str, processes: bool = True, timeout: float | None = None, **cluster_options: Any
) -> Iterator[Any]:
    """A ``distributed.Client`` for a cluster spec, closed (with its cluster) on exit.

    Parameters
    ----------
    spec : str
        ``local:N`` (N CPU workers of one thread each; ``local`` = one per core),
        ``cuda`` (``dask_cuda.LocalCUDACluster``: one worker per visible GPU, which
        sets each worker's ``CUDA_VISIBLE_DEVICES``, with two task threads; ``cuda:N`` = the first N), or the
        address of a running scheduler (``tcp://HOST:PORT``), left running on exit.
    processes : bool
        ``local``: workers in processes (True) or threads of this process.
    timeout : float, optional
        Seconds to wait for a scheduler address to answer (default: Dask's ``distributed.comm.timeouts.connect``).
    **cluster_options
        Passed to ``LocalCluster`` / ``LocalCUDACluster``.

    Raises
    ------
    mgkflow.errors.ParameterError
        A malformed spec or address (``tcp://`` without a port, an unknown scheme).
    mgkflow.errors.BackendUnavailableError
        ``distributed`` (or, for ``cuda``, ``dask-cuda``) is not installed, or no scheduler answered at
        the address within ``timeout``.

    Examples
    --------
    >>> with client_from_spec("tcp://127.0.0.1:1", timeout=0.5):  # doctest: +ELLIPSIS
    ...     pass
    Traceback (most recent call last):
    ...
    mgkflow.errors.BackendUnavailableError: --dask tcp://127.0.0.1:1: no Dask scheduler answered ...
    >>> with client_from_spec("local:1", processes=False) as client:  # doctest: +SKIP
    ...     client.submit(sum, [1, 2]).result()
    3
    """
    kind, count = parse_spec(spec)
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise BackendUnavailableError(
            f"--dask {spec}: Dask's distributed scheduler is not installed (pip install 'dask[distributed]')"
        ) from None
    if kind == "address":
        client = _connect(Client, str(spec).strip(), timeout)
        try:
            yield client
        finally:
            client.close()
        return
    # no dashboard; the scheduler's HTTP endpoints on a free port (not 8787, maybe taken)
    opts: dict[str, Any] = {
        "dashboard_address": None,
        "threads_per_worker": 1,
        "scheduler_kwargs": {"dashboard_address": ":0"},
    }
    opts.update(cluster_options)
    import dask

    # no active memory manager in the clusters made here: its ReduceReplicas policy drops, within
    # seconds, the copies that scatter_to_all gives every worker (a job's model or graphs), and a worker
    # that lost its copy fetches it again, or frees it on its event loop, away from the CUDA context
    # (NOTES, session 24). The scheduler reads the setting when it starts.
    no_amm = {"distributed.scheduler.active-memory-manager.start": False}
    if kind == "local":
        if count is not None:
            opts["n_workers"] = count
        with dask.config.set(no_amm):
            cluster = LocalCluster(processes=processes, **opts)
    else:
        try:
            from dask_cuda import LocalCUDACluster
        except ImportError:
            raise BackendUnavailableError(
                "--dask cuda needs dask-cuda (pip install mgkflow[gpu-dask], or pip install dask-cuda)"
            ) from None
        if count is not None:
            import os

            visible = os.environ.get("CUDA_VISIBLE_DEVICES")
            devices = visible.split(",") if visible else [str(i) for i in range(count)]
            opts["CUDA_VISIBLE_DEVICES"] = ",".join(devices[:count])
        # two task threads per GPU worker: one block's host work overlaps another's device work (each
        # thread has its own kernel copy, backend and stream, as the in-process run's two solver threads)
        opts["threads_per_worker"] = cluster_options.get("threads_per_worker", 2)
        with dask.config.set(no_amm):
            cluster = LocalCUDACluster(**opts)
    try:
        client = Client(cluster)
        try:
            yield client
        finally:
            client.close()
    finally:
        cluster.close()


class Pickled:
    """An object pickled once, that travels as its pickle's bytes and is unpickled once where it is used.

    Dask pickles a scattered object afresh for every worker that fetches it from a peer, in the
    peer's event loop: a screening model of 2,000 landmarks (73 MB, 0.33 s a pickle) fetched by
    15 workers from one took 12 s (NOTES, S20-2). Wrapped, a fetch copies bytes, and each worker
    unpickles the object once, in the first task that asks for it (:meth:`get`), and then lets the
    bytes go (a worker asked for it later pickles the object again, as Dask would).

    Examples
    --------
    >>> shared = Pickled({"a": 1})
    >>> import pickle; copy = pickle.loads(pickle.dumps(shared))
    >>> copy.get()["a"], copy.get() is copy.get()
    (1, True)
    """

    __slots__ = ("_blob", "_obj", "_lock")

    def __init__(self, obj: Any) -> None:
        import pickle

        self._set(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))

    def _set(self, blob: bytes) -> None:
        import threading

        self._blob, self._obj, self._lock = blob, None, threading.Lock()

    @classmethod
    def _from_blob(cls, blob: bytes) -> Pickled:
        new = cls.__new__(cls)
        new._set(blob)
        return new

    def __reduce__(self) -> tuple:
        blob = self._blob
        if self._obj is _RELEASED:
            raise RuntimeError("a released mgkflow.gram.cluster.Pickled cannot be sent again")
        if blob is None:  # unpickled here, its bytes let go
            import pickle

            blob = pickle.dumps(self._obj, protocol=pickle.HIGHEST_PROTOCOL)
        return Pickled._from_blob, (blob,)

    def get(self) -> Any:
        """The object, unpickled on the first call here (once per process that holds this copy)."""
        import pickle

        with self._lock:  # a worker's task threads unpickle it once
            if self._obj is _RELEASED:
                raise RuntimeError("this mgkflow.gram.cluster.Pickled was released (release_from_all)")
            if self._blob is not None:
                self._obj = pickle.loads(self._blob)
                self._blob = None  # (the object and its bytes are not both held)
            return self._obj

    def release(self) -> None:
        """Let go of the object and its bytes in this process (:meth:`get` fails after): the end of a job,
        on the thread that should free what the object holds (see :func:`release_from_all`)."""
        with self._lock:
            self._blob, self._obj = None, _RELEASED


#: What a released :class:`Pickled` holds.
_RELEASED = object()


@contextlib.contextmanager
def device_context() -> Iterator[None]:
    """Make the GPU backend's CUDA context current in this thread, if it has one elsewhere.

    PyCUDA contexts are per thread; a Dask worker may run tasks on another thread than
    the one that created it. A no-op unless the GPU backend was loaded in this process.

    Examples
    --------
    >>> with device_context():  # no GPU backend loaded here: nothing to do
    ...     pass
    """
    dev = sys.modules.get("mgkflow.gpu.device")
    ctx = dev._state.get("context") if dev is not None else None
    if ctx is None or not hasattr(ctx, "push"):
        yield
        return
    cuda = dev.driver()

    pushed = False
    if cuda.Context.get_current() is None:
        ctx.push()
        pushed = True
    try:
        yield
    finally:
        if pushed:
            cuda.Context.pop()


def _fetched(obj: Any) -> None:
    """A task that only makes its worker hold ``obj`` (its argument, a scattered future)."""


def scatter_to_all(client: Any, obj: Any, timeout: float = FETCH_TIMEOUT_S) -> Any:
    """Scatter ``obj`` once, as a :class:`Pickled`; let every worker of ``client`` fetch it before any task.

    A job's shared input (a model, or a Gram job's graphs and kernel) is pickled once here and
    sent to one worker; each worker then fetches the bytes from a worker that has them, by Dask's
    own transfer of a dependency, through a small task placed on it, while no work runs yet. The
    tasks receive the :class:`Pickled` and call its ``get()``. Fetched with each worker's first
    real task instead, the object waited for the holder to finish its own first task (a worker
    busy with a task of Python host work answers its peers late): on one H100 with 8 or 16
    workers, the other workers started 15-22 s into a 45 s screen (NOTES, S19-5).
    ``scatter(..., broadcast=True)`` (Dask's ``replicate``) stalled before the first task
    (S19-3/4). Workers that join later fetch the object with their first task.

    Parameters
    ----------
    client : distributed.Client
        The cluster's client.
    obj : object
        What every task needs (pickled once here).
    timeout : float
        Seconds to wait for the workers' fetches; the work goes on without the late ones (each
        then fetches ``obj`` with its first task).

    Returns
    -------
    distributed.Future
        The scattered :class:`Pickled`, for the tasks to name (a task calls ``get()`` on it).

    Examples
    --------
    >>> with client_from_spec("local:2", processes=False) as client:
    ...     shared = scatter_to_all(client, {"a": 1})
    ...     client.submit(lambda d: d.get()["a"] + 1, shared).result()
    2
    """
    from distributed import wait

    [fut] = client.scatter([Pickled(obj)], hash=False)
    workers = list(client.scheduler_info().get("workers", {}))
    fetches = [
        client.submit(
            _fetched, fut, workers=[w], allow_other_workers=False, pure=False, key=f"mgkflow-fetch-{i}-{fut.key}"
        )
        for i, w in enumerate(workers)
    ]
    with contextlib.suppress(Exception):  # late or lost workers: they fetch it with their first task
        wait(fetches, timeout=timeout)
    client.cancel([f for f in fetches if not f.done()])
    for f in fetches:
        f.release()
    return fut


def _release_here(key: str, dask_worker: Any = None) -> bool:
    """Run by ``client.run`` on a worker: release its copy of ``key`` (a :class:`Pickled`) with the CUDA
    context current, then collect it; whether the worker held one."""
    data = dask_worker.data
    obj = data[key] if key in data else None
    if not isinstance(obj, Pickled):
        return False
    with device_context():
        obj.release()
        del obj
        gc.collect()
    return True


def release_from_all(client: Any, future: Any) -> int:
    """Let every worker of ``client`` drop its copy of a :func:`scatter_to_all` object now.

    A screening model unpickled on a worker holds what its task thread made: on a GPU, the kernel
    backend's compiled modules and device buffers, under a CUDA context that PyCUDA makes current
    per thread. Freed later, by the worker's event loop or at its exit, without that context, PyCUDA
    cannot clean them up and warns for each ("... in out-of-thread context could not be cleaned up":
    some 50 lines after a 16-worker screen, NOTES S24-C). Here each worker releases the copy it
    holds with the context made current and collects it (``client.run``: no task, so a worker that
    holds no copy fetches none). Best effort: returns how many workers released one.

    Examples
    --------
    >>> with client_from_spec("local:2", processes=False) as client:
    ...     shared = scatter_to_all(client, {"a": 1})
    ...     n = release_from_all(client, shared)
    ...     try:
    ...         client.submit(lambda d: d.get(), shared).result()
    ...     except RuntimeError as exc:
    ...         print(n, exc)
    2 this mgkflow.gram.cluster.Pickled was released (release_from_all)
    """
    try:
        done = client.run(_release_here, future.key)
    except Exception:  # noqa: BLE001 - a cluster that stopped answering: nothing to release there
        return 0
    return sum(bool(v) for v in done.values())


def _connect(client_class: Any, address: str, timeout: float | None) -> Any:
    """A client of the scheduler at ``address``; what Dask raises when it cannot connect, as an mgkflow error."""
    kwargs = {} if timeout is None else {"timeout": timeout}
    try:
        return client_class(address, **kwargs)
    except ValueError as exc:  # a malformed address: no port, an unknown scheme
        raise ParameterError(f"--dask {address}: not a scheduler address ({exc})") from None
    except Exception as exc:  # noqa: BLE001 - refused, timed out, or garbage from whatever listens there
        detail = " ".join(str(exc).split())[:200] or type(exc).__name__
        raise BackendUnavailableError(
            f"--dask {address}: no Dask scheduler answered ({detail}); start one (dask scheduler) or check the address"
        ) from None
