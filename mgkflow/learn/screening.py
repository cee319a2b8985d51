"""Streamed, resumable screening of a SMILES file with a fitted model: :func:`screen` (``mgkflow predict``).

The candidates are read chunk by chunk (:func:`mgkflow.io.smiles_stream.open_smiles_table`; the
file is never held whole), each chunk is predicted (mean and standard deviation) and written as a
*part file* in a work directory next to the output, ``<out>.parts/``; when every chunk is done the
parts are assembled into the output (CSV, or Parquet where pyarrow is installed) and the work
directory is removed.

Resuming. A part file is written to a temporary name and renamed into place, so it exists whole or
not at all, whatever kills the run (``kill -9`` included). The work directory's ``manifest.json``
records the input's SHA-256, the model's SHA-256, the chunk size and the columns; a rerun with the
same input, model and chunk size predicts only the chunks whose part is missing, and the output is
byte-identical to that of an uninterrupted run. A rerun that differs in any of them is refused
(:class:`ScreenMismatchError`, naming what differs) unless ``force=True``, which starts anew.

On Dask. With ``dask="local:N"``, ``"cuda"``, ``"tcp://HOST:PORT"`` (the cluster specs of
:func:`mgkflow.gram.client_from_spec`) or a ``distributed.Client``, the chunks are predicted on the
workers: the estimator is pickled once, scattered, and fetched by every worker before the first chunk, a
task gets a chunk's records and returns its part file's bytes, and this process writes the parts
and assembles the output as above, so the output is byte-identical to an in-process run and an
interrupted Dask run resumes in-process or on Dask alike. At most a few chunks per worker thread
are in flight (read ahead of the workers), so this process holds O(workers x chunk) molecules,
never the file.

Output columns: ``line`` (the input line, 1-based), ``id`` (the input's id column, empty when it
has none), ``smiles``, ``mean``, ``std`` and ``error``. A row that cannot be predicted (a SMILES
RDKit cannot parse, a molecule without heavy atoms, a malformed line) keeps its place with ``nan``
for ``mean`` and ``std`` and the reason in ``error`` (empty for every other row), so that the output
lines up with the input.

Any fitted estimator whose ``predict(smiles_list, return_std=True)`` takes SMILES strings and
featurizes them itself works (:class:`~mgkflow.learn.MolecularGPR`, or a model file holding one).
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import itertools
import json
import os
import pickle
import shutil
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import BackendUnavailableError, MgkflowError, OutputPathError, ParameterError, ParameterTypeError
from .featurize import molecule_problem
from .model_file import file_sha256, load_model

__all__ = [
    "screen",
    "ScreenResult",
    "ScreenMismatchError",
    "OUTPUT_COLUMNS",
    "OUTPUT_SUFFIXES",
    "CONNECT_TIMEOUT_S",
    "parts_dir",
    "peak_rss",
]

#: Columns of a screening output, in order.
OUTPUT_COLUMNS = ("line", "id", "smiles", "mean", "std", "error")
#: Output formats by suffix.
OUTPUT_SUFFIXES = (".csv", ".parquet")
_MANIFEST_FORMAT = "mgkflow-screen-parts"
_MANIFEST_VERSION = 1
#: Seconds to wait for a Dask scheduler address to answer before giving up (``dask="tcp://..."``).
CONNECT_TIMEOUT_S = 10.0
#: Chunks in flight per Dask worker thread: one being predicted, one queued behind it.
CHUNKS_PER_THREAD = 2


class ScreenMismatchError(MgkflowError, ValueError):
    """The work directory of an interrupted screening run was made with another input, model or chunk size."""


@dataclass(frozen=True)
class ScreenResult:
    """What :func:`screen` did.

    Attributes
    ----------
    out : Path
        The output file (written only once ``complete``).
    molecules : int
        Rows of the input (predicted or not).
    failed : int
        Rows without a prediction (their ``error`` is set), in the chunks done.
    chunks : int
        Chunks of the input.
    resumed : int
        Chunks found done by an earlier run.
    computed : int
        Chunks predicted by this call.
    complete : bool
        False when ``max_chunks`` stopped the run early (the work directory stays, to resume).
    seconds : float
        Wall time of the call.
    peak_rss : int or None
        Peak resident memory of this process in bytes (``getrusage``'s ``ru_maxrss``: the process's
        high-water mark since it started, so it includes whatever ran before the call); None where
        the platform has no :mod:`resource` module.
    workers : int
        Dask workers that predicted (0: in-process).
    worker_peak_rss : int or None
        The largest peak resident memory of those workers in bytes (each worker process's
        high-water mark since it started); None in-process.
    featurize_seconds, predict_seconds, wait_seconds : float or None
        In-process runs: seconds the helper thread spent checking and featurizing chunks, seconds
        spent predicting them (the kernel against the model's landmarks or training set, and the
        algebra), and seconds the prediction waited for a chunk's featurization (what the overlap
        did not hide: featurization binds the run where this is large); None on Dask.
    """

    out: Path
    molecules: int
    failed: int
    chunks: int
    resumed: int
    computed: int
    complete: bool
    seconds: float
    peak_rss: int | None = None
    workers: int = 0
    worker_peak_rss: int | None = None
    featurize_seconds: float | None = None
    predict_seconds: float | None = None
    wait_seconds: float | None = None


def peak_rss() -> int | None:
    """Peak resident memory of this process in bytes (``ru_maxrss``), or None where it is not available.

    Examples
    --------
    >>> peak_rss() > 1_000_000  # doctest: +SKIP
    True
    """
    try:
        import resource
    except ImportError:  # pragma: no cover - Windows
        return None
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(rss) if sys.platform == "darwin" else int(rss) * 1024  # bytes on macOS, KiB on Linux


def parts_dir(out: str | os.PathLike) -> Path:
    """The work directory of a screening run writing ``out``: ``<out>.parts`` beside it.

    Examples
    --------
    >>> parts_dir("runs/preds.csv").as_posix()
    'runs/preds.csv.parts'
    """
    p = Path(out)
    return p.with_name(p.name + ".parts")


def _model_and_digest(model: Any) -> tuple[Any, str, str]:
    """(estimator, SHA-256 identifying it, how it was given) for a model file path or a fitted estimator."""
    if isinstance(model, str | bytes | os.PathLike):
        from ..io import as_path

        path = as_path(model, "model")
        est = load_model(path)
        return est, file_sha256(path), str(path)
    if not callable(getattr(model, "predict", None)):
        raise ParameterTypeError(
            f"model must be a model file (a path) or a fitted estimator with predict(X, return_std=True), "
            f"got {type(model).__name__}"
        )
    try:  # identifies the estimator as given: a resumed run needs an estimator that pickles the same
        digest = hashlib.sha256(pickle.dumps(model, protocol=4)).hexdigest()
    except (pickle.PicklingError, TypeError, AttributeError) as exc:
        raise ParameterTypeError(f"model cannot be pickled to identify it for resuming: {exc}") from None
    return model, digest, f"<{type(model).__name__}>"


def _check_args(out: Any, chunk_size: Any, max_chunks: Any) -> Path:
    from ..io import as_path, check_writable

    out = as_path(out, "out")
    if out.suffix.lower() not in OUTPUT_SUFFIXES:
        raise ParameterError(f"out must end in {' or '.join(OUTPUT_SUFFIXES)}, got {out.name!r}")
    if out.suffix.lower() == ".parquet":
        try:
            import pyarrow  # noqa: F401
            import pyarrow.parquet  # noqa: F401
        except ImportError:
            raise ParameterError(
                f"{out.name}: Parquet output needs pyarrow, which is not installed (pip install pyarrow); or write .csv"
            ) from None
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int | np.integer) or chunk_size < 1:
        raise ParameterError(f"chunk_size must be a whole number >= 1, got {chunk_size!r:.60}")
    if max_chunks is not None and (
        isinstance(max_chunks, bool) or not isinstance(max_chunks, int | np.integer) or max_chunks < 0
    ):
        raise ParameterError(f"max_chunks must be None or a whole number >= 0, got {max_chunks!r:.60}")
    return check_writable(out, "out")


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory handles
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def _write_durably(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file, fsync and rename: it exists whole or not at all."""
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def _start_workdir(work: Path, manifest: dict[str, Any], force: bool) -> None:
    """Create the work directory with ``manifest``, or check an existing one against it."""
    if work.exists() and force:
        shutil.rmtree(work)
    mpath = work / "manifest.json"
    if work.exists():
        if not work.is_dir():
            raise OutputPathError(f"{work} exists and is not a screening work directory")
        try:
            old = json.loads(mpath.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            raise ScreenMismatchError(
                f"{work} holds no readable manifest.json: not the work of a screening run; remove it or use --force"
            ) from None
        hints = {
            "input_sha256": "the input file changed",
            "model_sha256": "the model changed",
            "chunk_size": f"it was made with chunk size {old.get('chunk_size')} (rerun with that --chunk-size)",
            "smiles_column": f"it read the SMILES from column {old.get('smiles_column')!r}",
            "id_column": f"it read the ids from column {old.get('id_column')!r}",
            "format": "it is not a screening work directory",
            "version": "it was made by another version of mgkflow",
        }
        for key, why in hints.items():
            if old.get(key) != manifest.get(key):
                raise ScreenMismatchError(
                    f"{work} belongs to an interrupted run that cannot be resumed with these arguments: {why}; "
                    "use --force (force=True) to start anew"
                )
        return
    work.mkdir(parents=True)
    _write_durably(mpath, json.dumps(manifest, indent=2, sort_keys=True).encode("utf-8"))


#: What :func:`_prepare_chunk` gives :func:`_predict_chunk`: the valid records' positions, every record's error
#: so far, and the valid records' inputs for the model's predict (their graphs where the model featurizes on
#: its own, else their SMILES).
_Prepared = tuple[list[int], list[str], Sequence[Any]]


def _prepare_chunk(model: Any, records: Sequence[Any], Chem: Any) -> _Prepared:
    """The records' checks and, for a model with ``featurize`` (:class:`~mgkflow.learn.MolecularGPR`), the
    valid ones' graphs; runs in a helper thread for the chunk after the one being predicted (:func:`_run_here`).
    A model with ``featurize_checked`` (:class:`~mgkflow.learn.MolecularGPR`) parses each SMILES once, in its
    featurizing processes, for both; otherwise RDKit parses them here to check them, and a featurizer that
    refuses the chunk leaves the SMILES: :func:`_predict_chunk` then finds the culprit."""
    errors = [rec.error or "" for rec in records]
    readable = [i for i, rec in enumerate(records) if not rec.error]
    smiles = [records[i].smiles for i in readable]
    checked = getattr(model, "featurize_checked", None)
    if callable(checked) and smiles:
        with contextlib.suppress(MgkflowError):  # (a model fitted on Graphs: the checks below, then one by one)
            inputs, found = checked(smiles)
            for i, e in zip(readable, found):
                errors[i] = e
            return [i for i, e in zip(readable, found) if not e], errors, inputs
    valid = []
    for i, s in zip(readable, smiles):
        errors[i] = molecule_problem(Chem.MolFromSmiles(s))
        if not errors[i]:
            valid.append(i)
    inputs: Sequence[Any] = [records[i].smiles for i in valid]
    featurize = getattr(model, "featurize", None)
    if valid and callable(featurize):
        with contextlib.suppress(MgkflowError):
            inputs = featurize(inputs)
    return valid, errors, inputs


def _predict_chunk(
    model: Any, records: Sequence[Any], Chem: Any, prepared: _Prepared | None = None
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """(mean, std, error) per record: NaN and the reason where a record cannot be predicted. ``prepared``:
    :func:`_prepare_chunk`'s result for these records (made here when None)."""
    valid, errors, inputs = _prepare_chunk(model, records, Chem) if prepared is None else prepared
    n = len(records)
    mean, std = np.full(n, np.nan), np.full(n, np.nan)

    def predict(idx: list[int], X: Sequence[Any]) -> None:
        m, s = model.predict(X, return_std=True)
        mean[idx], std[idx] = np.asarray(m, dtype=np.float64), np.asarray(s, dtype=np.float64)

    if valid:
        try:
            predict(valid, inputs)
        except MgkflowError:  # some molecule the model's featurizer refuses: find it, one by one
            for i in valid:
                try:
                    predict([i], [records[i].smiles])
                except MgkflowError as exc:
                    errors[i] = " ".join(str(exc).split())
    return mean, std, errors


def _part_bytes(records: Sequence[Any], mean: np.ndarray, std: np.ndarray, errors: list[str]) -> bytes:
    """The CSV rows (no header) of one chunk; floats as Python's shortest round-trip repr."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    for rec, m, s, e in zip(records, mean, std, errors):
        w.writerow([rec.line, rec.id or "", rec.smiles, repr(float(m)), repr(float(s)), e])
    return buf.getvalue().encode("utf-8")


def _predict_part(model: Any, records: Sequence[Any]) -> tuple[bytes, int]:
    """(the part file's bytes, rows without a prediction) of one chunk: the task, in-process or on a Dask worker."""
    from ..io.rdkit import require_rdkit

    mean, std, errors = _predict_chunk(model, records, require_rdkit())
    return _part_bytes(records, mean, std, errors), sum(1 for e in errors if e)


def _predict_shared(model: Any, records: Sequence[Any]) -> tuple[bytes, int]:
    """:func:`_predict_part` as a Dask task: ``model`` is the :class:`~mgkflow.gram.cluster.Pickled` estimator."""
    return _predict_part(model.get(), records)


#: What the chunk runners call with each finished chunk: (chunk index, molecules, part bytes, rows failed).
_OnPart = Callable[[int, int, bytes, int], None]


#: The stages an in-process screen times (:class:`ScreenResult`'s ``featurize_seconds`` ... ``wait_seconds``).
_STAGES = ("featurize", "predict", "wait")


def _run_here(
    model: Any, todo: Iterable[tuple[int, list[Any]]], on_part: _OnPart, seconds: dict[str, float] | None = None
) -> None:
    """Predict the chunks of ``todo`` in this process, in order, each chunk's checks and featurization
    (:func:`_prepare_chunk`) in a helper thread while the chunk before is predicted: RDKit's descriptors and
    the kernel's evaluation overlap (featurizing processes, the GPU and BLAS release the interpreter).
    At most two chunks are held. ``seconds`` (optional) gathers the wall seconds of the stages:
    ``featurize`` (the helper's), ``predict`` and ``wait`` (for the helper's chunk)."""
    from concurrent.futures import ThreadPoolExecutor

    from ..io.rdkit import require_rdkit

    Chem = require_rdkit()
    spent = {} if seconds is None else seconds
    spent.update(dict.fromkeys(_STAGES, 0.0))

    def prepare(records: list[Any]) -> _Prepared:
        t = time.perf_counter()
        try:
            return _prepare_chunk(model, records, Chem)
        finally:
            spent["featurize"] += time.perf_counter() - t

    chunks = iter(todo)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="mgkflow-featurize") as pool:
        nxt = next(chunks, None)
        ahead = None if nxt is None else pool.submit(prepare, nxt[1])
        while nxt is not None:
            k, chunk = nxt
            t = time.perf_counter()
            prepared = ahead.result()
            t1 = time.perf_counter()
            nxt = next(chunks, None)
            ahead = None if nxt is None else pool.submit(prepare, nxt[1])
            mean, std, errors = _predict_chunk(model, chunk, Chem, prepared)
            spent["wait"] += t1 - t
            spent["predict"] += time.perf_counter() - t1
            on_part(k, len(chunk), _part_bytes(chunk, mean, std, errors), sum(1 for e in errors if e))


def _run_dask(client: Any, model: Any, todo: Iterable[tuple[int, list[Any]]], on_part: _OnPart) -> None:
    """Predict the chunks of ``todo`` on the workers of ``client``, a bounded number in flight.

    The estimator is scattered once and fetched by every worker before the first chunk
    (:func:`~mgkflow.gram.cluster.scatter_to_all`; each task names it); ``todo`` is read only
    as fast as chunks finish (at most :data:`CHUNKS_PER_THREAD` per worker thread in flight), and
    ``on_part`` is called in this process as each finishes, in the order they finish.
    """
    from distributed import as_completed

    from ..gram.cluster import release_from_all, scatter_to_all

    threads = sum(int(w.get("nthreads", 1)) for w in client.scheduler_info().get("workers", {}).values())
    window = max(2, CHUNKS_PER_THREAD * threads)
    model_future = scatter_to_all(client, model)
    chunks = iter(todo)
    inflight: dict[str, tuple[Any, int, int]] = {}  # task key: (future, chunk index, molecules)
    running = as_completed()

    def submit_next() -> None:
        item = next(chunks, None)
        if item is not None:
            k, chunk = item
            fut = client.submit(_predict_shared, model_future, chunk, key=f"mgkflow-screen-{k}-{os.urandom(6).hex()}",
                                pure=False)  # fmt: skip
            inflight[fut.key] = (fut, k, len(chunk))
            running.add(fut)

    try:
        for _ in range(window):
            submit_next()
        for fut in running:
            data, failed = _result(fut)
            _, k, n = inflight.pop(fut.key)
            fut.release()
            on_part(k, n, data, failed)
            submit_next()
        release_from_all(client, model_future)  # each worker frees its GPU state with the CUDA context current
    except BaseException:
        client.cancel([f for f, _, _ in inflight.values()])
        raise
    finally:
        client.cancel([model_future])


def _result(fut: Any) -> Any:
    """A chunk task's result; a worker or scheduler lost on the way as an mgkflow error (the work done is kept)."""
    from distributed.client import FutureCancelledError

    try:
        return fut.result()
    except MgkflowError:
        raise
    except (FutureCancelledError, OSError, TimeoutError) as exc:
        raise BackendUnavailableError(
            f"the Dask cluster stopped answering ({type(exc).__name__}: {' '.join(str(exc).split())[:200]}); the "
            "finished chunks are kept: run the same command again to resume"
        ) from None
    except Exception as exc:
        if type(exc).__name__ == "KilledWorker":  # distributed.scheduler.KilledWorker: a task that kept killing
            raise BackendUnavailableError(
                f"Dask workers died predicting a chunk ({' '.join(str(exc).split())[:200]}); out of memory? "
                "Try a smaller --chunk-size; the finished chunks are kept: run the same command again to resume"
            ) from None
        raise


def _worker_peak_rss(client: Any) -> int | None:
    """The largest peak RSS of the workers of ``client`` (None when they do not say)."""
    try:
        peaks = [v for v in client.run(peak_rss).values() if v is not None]
    except Exception:  # noqa: BLE001 - a report, not worth failing a finished run
        return None
    return max(peaks) if peaks else None


def _dask_client(dask: Any, stack: contextlib.ExitStack) -> Any:
    """The ``distributed.Client`` of ``dask`` (a spec, entered on ``stack``, or a client as is), or None."""
    if dask is None:
        return None
    if isinstance(dask, str):
        from ..gram.cluster import client_from_spec

        return stack.enter_context(client_from_spec(dask, timeout=CONNECT_TIMEOUT_S))
    return dask


def _wait_for_workers(client: Any, dask: Any) -> int:
    """The number of workers of ``client``, after waiting up to :data:`CONNECT_TIMEOUT_S` for a first one."""
    try:
        client.wait_for_workers(1, timeout=CONNECT_TIMEOUT_S)
    except Exception:  # noqa: BLE001 - dask's TimeoutError, or the scheduler gone meanwhile
        where = dask if isinstance(dask, str) else "the client's scheduler"
        raise BackendUnavailableError(
            f"--dask {where}: the scheduler has no workers (none joined within {CONNECT_TIMEOUT_S:g} s); start some "
            "(dask worker ADDRESS) or use local:N"
        ) from None
    return len(client.scheduler_info().get("workers", {}))


def _check_dask(dask: Any) -> None:
    """Refuse a bad ``dask`` argument before any work (the spec is parsed, nothing is started)."""
    if dask is None:
        return
    if isinstance(dask, str):
        from ..gram.cluster import parse_spec

        parse_spec(dask)
        return
    if not (hasattr(dask, "scatter") and hasattr(dask, "submit") and hasattr(dask, "scheduler_info")):
        raise ParameterTypeError(
            f"dask must be None, a cluster spec (local:N, cuda, tcp://HOST:PORT) or a distributed.Client, got "
            f"{type(dask).__name__}"
        )


def _assemble_csv(parts: list[Path], out: Path) -> None:
    from ..io import atomic_write

    def write(tmp: str) -> None:
        with open(tmp, "wb") as fh:
            fh.write((",".join(OUTPUT_COLUMNS) + "\n").encode("utf-8"))
            for part in parts:
                with open(part, "rb") as src:
                    shutil.copyfileobj(src, fh)
            fh.flush()
            os.fsync(fh.fileno())

    atomic_write(out, write)


def _assemble_parquet(parts: list[Path], out: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ..io import atomic_write

    schema = pa.schema([("line", pa.int64()), ("id", pa.string()), ("smiles", pa.string()),
                        ("mean", pa.float64()), ("std", pa.float64()), ("error", pa.string())])  # fmt: skip

    def write(tmp: str) -> None:
        with pq.ParquetWriter(tmp, schema) as writer:
            for part in parts:  # one row group per chunk: constant memory
                with open(part, newline="", encoding="utf-8") as fh:
                    rows = list(csv.reader(fh))
                cols = list(zip(*rows)) if rows else [()] * len(OUTPUT_COLUMNS)
                writer.write_table(pa.table({
                    "line": pa.array([int(v) for v in cols[0]], pa.int64()),
                    "id": pa.array(list(cols[1]), pa.string()),
                    "smiles": pa.array(list(cols[2]), pa.string()),
                    "mean": pa.array([float(v) for v in cols[3]], pa.float64()),
                    "std": pa.array([float(v) for v in cols[4]], pa.float64()),
                    "error": pa.array(list(cols[5]), pa.string()),
                }, schema=schema))  # fmt: skip

    atomic_write(out, write)


def screen(
    model: Any,
    smiles_path: str | os.PathLike,
    out: str | os.PathLike,
    chunk_size: int = 1000,
    smiles_column: str | int | None = None,
    id_column: str | int | None = None,
    force: bool = False,
    progress: bool = True,
    max_chunks: int | None = None,
    log: Callable[[str], Any] | None = None,
    dask: Any = None,
) -> ScreenResult:
    """Predict mean and standard deviation for every SMILES of a file, chunk by chunk, resumably.

    Parameters
    ----------
    model : path or estimator
        A model file (:func:`~mgkflow.learn.model_file.save_model`, ``mgkflow fit``; its SHA-256
        identifies it for resuming) or a fitted estimator with ``predict(smiles, return_std=True)``
        (identified by the SHA-256 of its pickle; a resumed run needs one that pickles the same, so
        prefer a model file for long runs).
    smiles_path : path
        The candidates: a SMILES or CSV file, plain or gzip (layout as :mod:`mgkflow.io.smiles`).
    out : path
        ``.csv``, or ``.parquet`` where pyarrow is installed. An existing file is refused unless ``force``.
    chunk_size : int
        Molecules per chunk (per part file); a resumed run must use the same.
    smiles_column, id_column : str or int, optional
        Column (name or 0-based index) of the SMILES and of the ids; default as the SMILES reader decides.
    force : bool
        Replace an existing output and discard an interrupted run's work directory.
    progress : bool
        A progress bar on stderr (molecules, rate, time left; plain lines when stderr is not a terminal).
    max_chunks : int, optional
        Predict at most this many chunks in this call, then stop with the work directory kept
        (``complete`` False): a run in several sittings.
    log : callable, optional
        Called with a line of text when an interrupted run is resumed or a Dask cluster is used.
    dask : str or distributed.Client, optional
        Predict the chunks on Dask: a cluster spec of :func:`mgkflow.gram.client_from_spec`
        (``"local:N"``, ``"cuda"`` or a scheduler address ``"tcp://HOST:PORT"``, given
        :data:`CONNECT_TIMEOUT_S` seconds to answer; a local cluster is started and stopped
        here) or a running ``distributed.Client`` (left open). The output is byte-identical to
        an in-process run (None, the default), and either resumes the other's interrupted run.

    Returns
    -------
    ScreenResult

    Raises
    ------
    mgkflow.errors.OutputPathError
        ``out`` exists (without ``force``) or cannot be written.
    ScreenMismatchError
        An interrupted run's work directory was made with another input, model or chunk size.
    mgkflow.errors.FileFormatError
        The SMILES file cannot be read.
    mgkflow.errors.ModelFileError
        The model file is not one, or of another version.
    mgkflow.errors.ParameterError
        ``dask`` is not a cluster spec.
    mgkflow.errors.BackendUnavailableError
        No Dask scheduler answered at the address, or the cluster was lost during the run.

    Examples
    --------
    >>> import pytest; _ = pytest.importorskip("rdkit")  # MolecularGPR and the SMILES reader need RDKit
    >>> import tempfile, pathlib
    >>> from mgkflow.learn import MolecularGPR
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> model = MolecularGPR(descriptors=False, n_restarts=0, max_iter=5, backend="cpu", verbose=0)
    >>> model = model.fit(["CCO", "CCCO", "CCCCO", "c1ccccc1", "Cc1ccccc1"], [1.0, 1.5, 2.0, 3.0, 3.4])
    >>> _ = (d / "cands.smi").write_text("CCCCCO pentanol\\nnot_a_smiles bad\\nCc1ccccc1C xylene\\n")
    >>> res = screen(model, d / "cands.smi", d / "preds.csv", chunk_size=2, progress=False)
    >>> res.molecules, res.failed, res.chunks, res.complete
    (3, 1, 2, True)
    >>> import pandas as pd
    >>> pd.read_csv(d / "preds.csv", keep_default_na=False)[["line", "id", "error"]].values.tolist()
    [[1, 'pentanol', ''], [2, 'bad', 'invalid SMILES: RDKit could not parse it'], [3, 'xylene', '']]
    """
    from ..io.rdkit import require_rdkit
    from ..io.smiles_stream import open_smiles_table
    from ..progress import progress_bar

    t0 = time.perf_counter()
    out = _check_args(out, chunk_size, max_chunks)
    chunk_size = int(chunk_size)
    if not isinstance(force, bool | np.bool_) or not isinstance(progress, bool | np.bool_):
        raise ParameterTypeError("force and progress must be True or False")
    _check_dask(dask)
    if out.exists() and not force:
        raise OutputPathError(f"{out} exists; add --force (force=True) to replace it, or choose another path")
    table = open_smiles_table(smiles_path, smiles_column=smiles_column, id_column=id_column)
    est, model_digest, model_name = _model_and_digest(model)
    n_records = table.count()
    manifest = _manifest(table, model_name, model_digest, chunk_size, n_records)
    work = parts_dir(out)
    n_workers, worker_rss = 0, None
    with contextlib.ExitStack() as stack:
        client = _dask_client(dask, stack)  # before the work directory: a cluster that fails leaves nothing
        if client is not None:
            n_workers = _wait_for_workers(client, dask)
            if log is not None:
                log(f"predicting on Dask ({dask if isinstance(dask, str) else 'a client'}): {n_workers} workers")
        _start_workdir(work, manifest, bool(force))
        require_rdkit()
        n_chunks = -(-n_records // chunk_size)
        parts = [work / f"part-{k:07d}.csv" for k in range(n_chunks)]
        done = resumed = sum(1 for p in parts if p.exists())
        if done and log is not None:
            log(f"resuming the interrupted run in {work}: {done} of {n_chunks} chunks are done")
        missing: Iterator[tuple[int, list[Any]]] = (
            (k, chunk) for k, chunk in enumerate(table.chunks(chunk_size)) if not parts[k].exists()
        )
        todo = missing if max_chunks is None else itertools.islice(missing, int(max_chunks))
        counts = {"computed": 0, "failed": 0}
        bar = None
        if progress:
            bar = stack.enter_context(contextlib.closing(progress_bar(
                n_records, desc="predict", unit="molecule", initial=min(done * chunk_size, n_records))))  # fmt: skip

        def on_part(k: int, n: int, data: bytes, n_failed: int) -> None:
            _write_durably(parts[k], data)
            counts["computed"] += 1
            counts["failed"] += n_failed
            if bar is not None:
                bar.update(n)

        stages: dict[str, float] = {}  # (in-process: the stages' seconds; on Dask: none)
        if client is None:
            _run_here(est, todo, on_part, stages)
        else:
            _run_dask(client, est, todo, on_part)
            worker_rss = _worker_peak_rss(client)
    computed, failed = counts["computed"], counts["failed"]
    stopped = max_chunks is not None and next(missing, None) is not None
    if not stopped:
        absent = [p.name for p in parts if not p.exists()]
        if absent:  # the file changed under us (its hash was taken at the start)
            raise ScreenMismatchError(f"{table.path} has fewer molecules than when the run started; use --force")
        failed = _count_failed(parts) if resumed else failed
        if out.suffix.lower() == ".parquet":
            _assemble_parquet(parts, out)
        else:
            _assemble_csv(parts, out)
        shutil.rmtree(work)
    return ScreenResult(out, n_records, failed, n_chunks, resumed, computed, not stopped, time.perf_counter() - t0,
                        peak_rss(), n_workers, worker_rss, *map(stages.get, _STAGES))  # fmt: skip


def _manifest(table: Any, model_name: str, model_digest: str, chunk_size: int, n_records: int) -> dict[str, Any]:
    """What identifies a screening run (a resumed run must match it): input, model, chunking, columns."""
    return {
        "format": _MANIFEST_FORMAT,
        "version": _MANIFEST_VERSION,
        "input": str(table.path.resolve()),
        "input_sha256": file_sha256(table.path),
        "model": model_name,
        "model_sha256": model_digest,
        "chunk_size": chunk_size,
        "smiles_column": table.smiles_name,
        "id_column": table.id_name,
        "records": n_records,
        "columns": list(OUTPUT_COLUMNS),
    }


def _count_failed(parts: list[Path]) -> int:
    """Rows with an error in the part files (a resumed run counts the earlier chunks' too)."""
    n = 0
    for part in parts:
        with open(part, newline="", encoding="utf-8") as fh:
            n += sum(1 for row in csv.reader(fh) if row and row[-1])
    return n
