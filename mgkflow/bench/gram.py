"""Scale benchmark of the tiled Gram path: ``python -m mgkflow.bench gram``.

On a synthetic molecule-like set (:func:`mgkflow.datasets.molecules`) it times, in one call:

1. reordering (process pool, permutation cache) and an in-process tiled run into a Zarr store;
2. optionally (``--dask SPEC``, which may be given several times) the same run on each Dask cluster in
   turn, checked bit for bit against 1 (or, with ``--no-inprocess``, against the first cluster's run):
   blocks, GPU and seconds of each worker (its blocks' solves, device time, host time before the first kernel
   and after the device's), each GPU's mean utilization (``nvidia-smi``), and the
   speedup over the first cluster (``--dask cuda:1 --dask cuda:2 --dask cuda:4`` measures multi-GPU scaling);
3. optionally (``--kill-at F``) the same run in a child process killed with SIGKILL once a
   fraction F of the blocks is done, then resumed here: blocks recomputed, bits checked;
4. optionally (``--spot-check K``) K random entries against the CPU backend.

Prints one JSON record (and writes it with ``--json PATH``).

Examples
--------
    python -m mgkflow.bench gram --n-graphs 2000 --backend cpu --block-size 200 --dask local:2
    python -m mgkflow.bench gram --n-graphs 50000 --backend gpu --kill-at 0.4 --spot-check 1000 --dask cuda
    python -m mgkflow.bench gram --n-graphs 20000 --backend gpu --gpu-options '{"rtol": 1e-8}' --overlap off
    python -m mgkflow.bench gram --n-graphs 40000 --backend gpu --no-inprocess --digest \
        --dask cuda:1 --dask cuda:2 --dask cuda:4

The record has the solve's device seconds (sum over blocks), the host time not overlapped
with them, end-to-end pairs/s (reordering included), peak host RSS and peak device memory
(``nvidia-smi``, all processes). ``python -m mgkflow.gram.bench`` is the deprecated old name.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["main"]

_OVERLAP = {"auto": None, "on": True, "off": False}


def _graphs(args: argparse.Namespace) -> list:
    from ..datasets import drugs, molecules

    if args.dataset == "drugs":  # the shipped drugs with at least one bond, the first --n-graphs of them
        bonded = [g for g in drugs() if g.adjacency.nnz > 0]
        return bonded if args.n_graphs is None else bonded[: args.n_graphs]
    return molecules(args.n_graphs, seed=args.seed, min_atoms=args.min_atoms, max_atoms=args.max_atoms,
                     mean_atoms=args.mean_atoms)  # fmt: skip


def _kernel(args: argparse.Namespace, backend: str | None = None):
    from ..datasets import default_kernels
    from ..mgk import MarginalizedGraphKernel

    gpu_options = json.loads(args.gpu_options) if args.gpu_options and (backend or args.backend) != "cpu" else None
    return MarginalizedGraphKernel(*default_kernels("drugs"), q=args.q, backend=backend or args.backend,
                                   gpu_options=gpu_options)  # fmt: skip


class _Sampler:
    """``nvidia-smi --query-gpu=QUERY`` sampled every ``period`` seconds in a thread while the ``with`` block
    runs (nothing without nvidia-smi); each sample's lines go to :meth:`_take`. ``edges``: also one sample as the
    block starts and one as it ends (a run shorter than the period is then sampled before and after)."""

    query = ""
    edges = False

    def __init__(self, period: float) -> None:
        self.period = period
        self._stop = None
        self._thread = None

    def _take(self, lines: list[str]) -> None:
        raise NotImplementedError

    def _sample(self) -> None:
        try:
            out = subprocess.run(["nvidia-smi", f"--query-gpu={self.query}", "--format=csv,noheader,nounits"],
                                 capture_output=True, text=True, timeout=10)  # fmt: skip
        except (OSError, subprocess.SubprocessError):
            return
        if out.returncode == 0 and out.stdout.strip():
            self._take(out.stdout.splitlines())

    def __enter__(self) -> _Sampler:
        import threading

        if shutil.which("nvidia-smi") is None:
            return self
        self._stop = threading.Event()

        def loop() -> None:
            if self.edges:
                self._sample()
            while not self._stop.wait(self.period):
                self._sample()

        self._thread = threading.Thread(target=loop, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            if self.edges:
                self._sample()


class _DeviceMemory(_Sampler):
    """Peak device memory in use (MiB, all processes) sampled with ``nvidia-smi`` every ``period``
    seconds in a thread (None without nvidia-smi): the peak of a run, its allocator pools included."""

    query = "memory.used"
    edges = True

    def __init__(self, period: float = 0.2) -> None:
        super().__init__(period)
        self.peak_mib: int | None = None

    def _take(self, lines: list[str]) -> None:
        try:
            v = max(int(x) for line in lines for x in line.split())
        except ValueError:
            return
        self.peak_mib = v if self.peak_mib is None else max(self.peak_mib, v)


class _GPULoad(_Sampler):
    """Each GPU's utilization (``nvidia-smi``'s ``utilization.gpu``: the share of its last sample period in which
    a kernel ran), sampled every ``period`` seconds in a thread; :attr:`mean` by GPU index after the run (empty
    without nvidia-smi)."""

    query = "index,utilization.gpu"

    def __init__(self, period: float = 0.5) -> None:
        super().__init__(period)
        self.samples: dict[str, list[float]] = {}

    def _take(self, lines: list[str]) -> None:
        for line in lines:
            idx, _, util = line.partition(",")
            try:
                self.samples.setdefault(idx.strip(), []).append(float(util))
            except ValueError:
                continue

    @property
    def mean(self) -> dict[str, float]:
        return {k: float(np.mean(v)) for k, v in sorted(self.samples.items()) if v}


def _worker_environ(env: dict[str, str]) -> Any:
    """Dask's configuration that sets ``env`` in the worker processes of the clusters made under it, before they
    start (Dask's nannies set their own defaults there, e.g. ``MALLOC_TRIM_THRESHOLD_`` and ``OMP_NUM_THREADS``:
    ``env`` overrides them)."""
    import contextlib

    if not env:
        return contextlib.nullcontext()
    import dask
    import distributed  # noqa: F401  (loads Dask's distributed defaults, which env then overrides)

    key = "distributed.nanny.pre-spawn-environ"
    return dask.config.set({key: {**dask.config.get(key, {}), **env}})


def _env_pair(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"--worker-env takes NAME=VALUE, got {text!r}")
    return name, value


def _worker_gpus(client: Any) -> dict[str, str]:
    """The GPU of each worker (the first of its ``CUDA_VISIBLE_DEVICES``; "" where unset), keyed as the
    Gram's reports name workers (``host:pid``)."""

    def where() -> tuple[str, str]:
        return f"{os.uname().nodename}:{os.getpid()}", os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0]

    return dict(client.run(where).values())


def _worker_hosts(client: Any, env_keys: tuple[str, ...] = ()) -> dict[str, dict]:
    """What each worker's host passes ran on, read after a run: numba's threading layer (the one its parallel
    passes loaded; "none" before any ran), numba's thread count, the CPUs the worker may use and the values of
    the environment variables ``env_keys`` there."""

    def host() -> tuple[str, dict]:
        import numba

        try:
            layer = numba.threading_layer()
        except ValueError:  # no parallel region has run in this process
            layer = "none"
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        return f"{os.uname().nodename}:{os.getpid()}", {"numba_layer": layer,
                                                        "numba_threads": numba.config.NUMBA_NUM_THREADS, "cpus": cpus,
                                                        "env": {k: os.environ.get(k) for k in env_keys}}

    return dict(client.run(host).values())


def _ordered(args: argparse.Namespace, graphs: list, client: Any = None):
    """The graphs in ``--ordering`` (identity orderings, e.g. ``auto`` on molecules, cost nothing:
    :func:`mgkflow.gram.reorder_graphs` returns those graphs as they are)."""
    from ..gram.reorder import reorder_graphs

    cache = None if args.perm_cache is None else args.perm_cache
    return reorder_graphs(graphs, args.ordering, workers=args.reorder_workers, client=client, cache=cache)


def _run(args: argparse.Namespace, graphs: list, store: Path, client: Any = None, progress: bool = False):
    from ..gram.tiled import tiled_gram

    return tiled_gram(graphs, kernel=_kernel(args), out=store, block_size=args.block_size, dtype=args.dtype,
                      client=client, progress=progress,
                      overlap=_OVERLAP[args.overlap])  # fmt: skip


def _same_chunks(a: Path, b: Path) -> bool:
    fa = {p.relative_to(a).as_posix(): p for p in (a / "c").rglob("*") if p.is_file()}
    fb = {p.relative_to(b).as_posix(): p for p in (b / "c").rglob("*") if p.is_file()}
    if fa.keys() != fb.keys():
        return False
    return all(fa[k].read_bytes() == fb[k].read_bytes() for k in fa)


def _store_digest(path: Path) -> str:
    """SHA-256 over a store's chunk files (names and bytes, in name order): equal digests, equal arrays
    (runs in different processes or device calls compare by it)."""
    import hashlib

    h = hashlib.sha256()
    for f in sorted((p for p in (path / "c").rglob("*") if p.is_file()), key=lambda p: p.relative_to(path).as_posix()):
        h.update(f.relative_to(path).as_posix().encode())
        h.update(f.read_bytes())
    return h.hexdigest()


def _child(args: argparse.Namespace) -> int:
    graphs = _ordered(args, _graphs(args)).graphs
    _run(args, graphs, Path(args.store))
    return 0


def _peak_rss_bytes() -> int:
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def _kill_resume(
    args: argparse.Namespace, graphs: list, work: Path, reference: Path | None, n_blocks: int | None
) -> dict:
    from ..gram.blocks import plan_blocks

    store = work / "killed.zarr"
    if store.exists():
        shutil.rmtree(store)
    cmd = [sys.executable, "-m", "mgkflow.bench.gram", *args.argv, "--child", "--store", str(store)]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    done = store / "done"
    while n_blocks is None and proc.poll() is None:  # the child's block size, once its store exists
        meta = store / "zarr.json"
        if meta.is_file():
            try:
                bs = int(json.loads(meta.read_text())["attributes"]["mgkflow"]["block_size"])
                n_blocks = len(plan_blocks(len(graphs), None, bs))
            except (ValueError, KeyError):
                pass
        time.sleep(0.05)
    target = max(1, int(args.kill_at * (n_blocks or 1)))
    while proc.poll() is None:
        if done.is_dir() and sum(1 for _ in done.glob("[!.]*.json")) >= target:
            break
        time.sleep(0.05)
    if proc.poll() is not None:
        err = proc.stderr.read().decode()[-2000:]
        raise RuntimeError(f"the child run ended before it was killed (rc {proc.returncode}): {err}")
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stderr.close()
    killed_after = time.perf_counter() - t0
    done_before = {p.stem for p in done.glob("[!.]*.json")}
    t0 = time.perf_counter()
    res = _run(args, graphs, store)
    resumed = time.perf_counter() - t0
    recomputed_done = sorted(set(res.computed) & done_before)
    return {
        "killed_after_s": killed_after,
        "blocks_done_at_kill": len(done_before),
        "blocks_resumed": len(res.computed),
        "resume_s": resumed,
        "finished_blocks_recomputed": len(recomputed_done),
        "bit_identical_to_uninterrupted": None if reference is None else _same_chunks(store, reference),
        "digest": _store_digest(store),
    }


def _worker_record(gpu: str, blocks: int, seconds: dict, wall: float) -> dict:
    """One worker's figures in a cluster run's record: its GPU and blocks, its sums of block, device and GPU host
    seconds (:attr:`mgkflow.gram.GramResult.worker_seconds`), and its device seconds per second of the run (two
    task threads' streams overlap, so this can pass 1; nvidia-smi's utilization is the busy share)."""
    return {"gpu": gpu, "blocks": blocks, **seconds,
            "device_s_per_wall": seconds.get("device_s", 0.0) / wall if wall > 0 else 0.0}  # fmt: skip


def _dask_runs(args: argparse.Namespace, graphs: list, work: Path, ref: Path | None, rec: dict) -> list[dict]:
    """The Gram on each ``--dask`` cluster in turn (stores ``dask0.zarr``, ``dask1.zarr``, ...), each checked bit
    for bit against ``ref`` (the in-process store) or, without one, against the first cluster's store."""
    from ..gram.cluster import client_from_spec

    runs: list[dict] = []
    rec["dask"] = runs
    for k, spec in enumerate(args.dask):
        dst = work / f"dask{k}.zarr"
        if dst.exists():
            shutil.rmtree(dst)
        t0 = time.perf_counter()
        opts = {} if args.dask_threads is None else {"threads_per_worker": args.dask_threads}
        with _worker_environ(args.worker_env), client_from_spec(spec, **opts) as client:
            gpus = _worker_gpus(client)
            t1 = time.perf_counter()
            with _GPULoad() as load:
                dres = _run(args, graphs, dst, client=client, progress=args.progress)
            t2 = time.perf_counter()
            hosts = _worker_hosts(client, tuple(args.worker_env))
        wall = t2 - t1
        run = {
            "spec": spec,
            "threads_per_worker": args.dask_threads,
            "worker_env": args.worker_env,
            "cluster_start_s": t1 - t0,
            "seconds": wall,
            "pairs": dres.pairs,
            "pairs_per_s": dres.pairs_per_second,
            "device_s": dres.device_seconds,
            "block_s": dres.block_seconds,
            "startup_s": dres.startup_seconds,
            "tail_s": dres.tail_seconds,
            "workers": {name: {**_worker_record(gpus.get(name, ""), n, dres.worker_seconds.get(name, {}), wall),
                               "host": hosts.get(name, {})} for name, n in sorted(dres.workers.items())},  # fmt: skip
            "gpu_util_mean_pct": load.mean,
        }
        if ref is not None:
            run["overhead_vs_inprocess"] = wall / rec["inprocess"]["seconds"] - 1
            run["bit_identical"] = _same_chunks(dst, ref)
        else:
            run["speedup_vs_first"] = runs[0]["seconds"] / wall if runs else 1.0
            run["bit_identical"] = True if k == 0 else _same_chunks(dst, work / "dask0.zarr")
        if args.digest:
            run["digest"] = _store_digest(dst)
        runs.append(run)
        _save(args, rec)
        if k > 0:
            shutil.rmtree(dst, ignore_errors=True)  # the first cluster's store stays: the others compare with it
    return runs


def _spot_check(args: argparse.Namespace, graphs: list, store: Path, count: int) -> dict:
    from ..gram.load import load_gram

    K = load_gram(store, lazy=True).matrix
    rng = np.random.default_rng(args.seed)
    n = len(graphs)
    i = rng.integers(0, n, count)
    j = rng.integers(0, n, count)
    got = K.vindex[i, j].compute()
    cpu = _kernel(args, backend="cpu")
    want = np.array([cpu([graphs[a]], [graphs[b]])[0, 0] for a, b in zip(i.tolist(), j.tolist())])
    rel = np.abs(got - want) / np.abs(want)
    return {"entries": count, "max_rel_err": float(rel.max()), "median_rel_err": float(np.median(rel))}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m mgkflow.bench gram", description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--dataset",
        choices=["molecules", "drugs"],
        default="molecules",
        help="synthetic molecule-like graphs (default) or the shipped drugs with a bond",
    )
    p.add_argument("--n-graphs", type=int, default=None, help="graphs (molecules: default 2000; drugs: all)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--min-atoms", type=int, default=8)
    p.add_argument("--max-atoms", type=int, default=50)
    p.add_argument("--mean-atoms", type=float, default=24.0)
    p.add_argument("--q", type=float, default=0.05)
    p.add_argument("--backend", choices=["auto", "cpu", "gpu"], default="auto")
    p.add_argument("--block-size", type=int, default=None)
    p.add_argument("--dtype", choices=["float64", "float32"], default="float32")
    p.add_argument("--ordering", default="auto", help="node ordering (default auto: by graph size)")
    p.add_argument("--gpu-options", default=None, help="GPUBackend options as JSON, e.g. '{\"rtol\": 1e-8}'")
    p.add_argument("--reorder-workers", type=int, default=os.cpu_count())
    p.add_argument("--perm-cache", default=None, help="directory of the permutation cache")
    p.add_argument(
        "--dask",
        action="append",
        default=None,
        help="also run on this cluster (local:N, cuda[:N], tcp://...); repeat it for several clusters in turn",
    )
    p.add_argument(
        "--dask-threads",
        type=int,
        default=None,
        help="task threads per worker of the local:N / cuda clusters (default: 1 on local, 2 on cuda)",
    )
    p.add_argument(
        "--worker-env",
        type=_env_pair,
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="an environment variable for the clusters' worker processes (repeatable; e.g. MALLOC_TRIM_THRESHOLD_)",
    )
    p.add_argument(
        "--no-inprocess",
        action="store_true",
        help="with --dask: no in-process run (the clusters' runs are checked against the first one's)",
    )
    p.add_argument("--kill-at", type=float, default=None, help="SIGKILL a run at this fraction of blocks, resume")
    p.add_argument(
        "--kill-only",
        action="store_true",
        help="with --kill-at: no uninterrupted run (compare the printed digest with another run's)",
    )
    p.add_argument("--digest", action="store_true", help="SHA-256 of the uninterrupted run's chunks")
    p.add_argument("--spot-check", type=int, default=0, help="entries to check against the CPU backend")
    p.add_argument("--workdir", default=None, help="where the stores go (default: a temporary directory)")
    p.add_argument("--keep", action="store_true", help="keep the stores")
    p.add_argument("--json", type=Path, default=None)
    p.add_argument(
        "--overlap",
        choices=sorted(_OVERLAP),
        default="auto",
        help="two solver threads (host/device overlap); auto: on for the GPU backend",
    )
    p.add_argument("--progress", action="store_true")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--store", default=None, help=argparse.SUPPRESS)
    return p


def main(argv: list[str] | None = None) -> int:
    p = _parser()
    argv = sys.argv[1:] if argv is None else [str(a) for a in argv]
    args = p.parse_args(argv)
    args.argv = argv
    args.worker_env = dict(args.worker_env)
    if args.n_graphs is None and args.dataset == "molecules":
        args.n_graphs = 2000
    if args.child:
        return _child(args)
    if args.kill_only and (args.kill_at is None or args.dask):
        p.error("--kill-only needs --kill-at and takes no --dask")
    if args.no_inprocess and not args.dask:
        p.error("--no-inprocess needs --dask")

    from ..gram.blocks import plan_blocks

    work = Path(args.workdir or tempfile.mkdtemp(prefix="mgkflow-gram-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    rec: dict[str, Any] = {"dataset": args.dataset, "n_graphs": args.n_graphs, "backend": args.backend,
                           "dtype": args.dtype, "q": args.q, "gpu_options": args.gpu_options,
                           "ordering": args.ordering, "overlap": args.overlap}  # fmt: skip
    t0 = time.perf_counter()
    graphs = _graphs(args)
    rec["generate_s"] = time.perf_counter() - t0
    rec["n_graphs"] = len(graphs)
    rec["atoms_mean"] = float(np.mean([g.n_nodes for g in graphs]))
    ordered = _ordered(args, graphs)
    rec["reorder_s"] = ordered.seconds
    graphs = ordered.graphs
    ref = work / "inprocess.zarr"
    if ref.exists():
        shutil.rmtree(ref)
    n_blocks = None
    if not (args.kill_only or args.no_inprocess):
        t0 = time.perf_counter()
        with _DeviceMemory() as devmem:
            res = _run(args, graphs, ref, progress=args.progress)
        rec["inprocess"] = {
            "seconds": time.perf_counter() - t0,
            "solve_s": res.seconds,
            "device_s": res.device_seconds,
            "block_s": res.block_seconds,
            "startup_s": res.startup_seconds,
            "tail_s": res.tail_seconds,
            "host_s_not_overlapped": res.seconds - res.device_seconds,
            "pairs": res.pairs,
            "pairs_per_s": res.pairs_per_second,
            "pairs_per_s_end_to_end": res.pairs / (time.perf_counter() - t0 + rec["reorder_s"]),
            "peak_device_mib": devmem.peak_mib,
            "blocks": res.blocks,
            "block_size": int(json.loads((ref / "zarr.json").read_text())["attributes"]["mgkflow"]["block_size"]),
            "peak_rss_bytes": _peak_rss_bytes(),
            "estimate": res.estimate.summary(),
        }
        if args.digest:
            rec["inprocess"]["digest"] = _store_digest(ref)
        n_blocks = len(plan_blocks(len(graphs), None, rec["inprocess"]["block_size"]))
        _save(args, rec)
    if args.dask:
        rec["dask"] = _dask_runs(args, graphs, work, None if args.no_inprocess else ref, rec)
    if args.kill_at is not None:
        rec["kill_resume"] = _kill_resume(args, graphs, work, None if args.kill_only or args.no_inprocess else ref,
                                           n_blocks)  # fmt: skip
    if args.spot_check:
        checked = work / "killed.zarr" if args.kill_only else work / "dask0.zarr" if args.no_inprocess else ref
        rec["spot_check"] = _spot_check(args, graphs, checked, args.spot_check)
    if not args.keep and args.workdir is None:
        shutil.rmtree(work, ignore_errors=True)
    print(_save(args, rec))
    return 0


def _save(args: argparse.Namespace, rec: dict) -> str:
    """The record as JSON text, also written to ``--json`` (after every phase: a run cut short keeps
    the figures of the phases it finished)."""
    text = json.dumps(rec, indent=1)
    if args.json is not None:
        args.json.write_text(text)
    return text


if __name__ == "__main__":
    sys.exit(main())
