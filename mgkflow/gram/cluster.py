"""Dask clusters from a command-line spec: ``local:N``, ``cuda`` or a scheduler address."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from ..errors import BackendUnavailableError, ParameterError, ParameterTypeError

__all__ = ["client_from_spec", "backend_for_spec", "parse_spec", "scatter_to_all", "Pickled", "FETCH_TIMEOUT_S"]

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
    if kind == "local":
        if count is not None:
            opts["n_workers"] = count
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
        if blob is None:  # unpickled here, its bytes let go
            import pickle

            blob = pickle.dumps(self._obj, protocol=pickle.HIGHEST_PROTOCOL)
        return Pickled._from_blob, (blob,)

    def get(self) -> Any:
        """The object, unpickled on the first call here (once per process that holds this copy)."""
        import pickle

        with self._lock:  # a worker's task threads unpickle it once
            if self._blob is not None:
                self._obj = pickle.loads(self._blob)
                self._blob = None  # (the object and its bytes are not both held)
            return self._obj


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
