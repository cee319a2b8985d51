"""Tiled Gram matrices on a Dask cluster: same bits as in-process, into the same Zarr store."""

from __future__ import annotations

import importlib.util
import json
import time

import numpy as np
import pytest

from mgkflow import MarginalizedGraphKernel, load_gram
from mgkflow.cli import main
from mgkflow.datasets import default_kernels, molecules
from mgkflow.gram import GramStore, client_from_spec, tiled_gram
from mgkflow.gram.cluster import backend_for_spec, parse_spec

pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def client():
    # two worker processes of one thread each: graphs and kernel are pickled to them
    with client_from_spec("local:2", processes=True) as c:
        yield c


@pytest.fixture(scope="module")
def kern():
    return MarginalizedGraphKernel(*default_kernels("drugs"), q=0.2, backend="cpu")


def test_local_cluster_gram_of_200_labeled_graphs_equals_in_process(client, kern, tmp_path):
    gs = molecules(200, seed=21, min_atoms=8, max_atoms=10, mean_atoms=9)
    assert len(client.scheduler_info()["workers"]) == 2
    path = tmp_path / "K.zarr"
    res = tiled_gram(gs, kernel=kern, out=path, block_size=50, client=client)
    assert res.blocks == 10 and sorted(res.computed) == sorted(b for b in res.computed) and len(res.computed) == 10
    assert res.pairs == 200 * 201 // 2
    local = tiled_gram(gs, kernel=kern, block_size=50)  # in-process, same blocks
    K, ids = load_gram(path)
    assert np.array_equal(K, local.matrix)
    assert ids == [g.title for g in gs]
    # the workers wrote their blocks themselves (markers name the worker processes, not this one)
    workers = {json.loads(p.read_text())["worker"] for p in (path / "done").glob("*.json")}
    assert workers == set(res.workers) and all(not w.endswith(f":{__import__('os').getpid()}") for w in workers)


def test_cluster_in_memory_cross_matrix_and_resume(client, kern, tmp_path):
    gs = molecules(30, seed=4, max_atoms=12, mean_atoms=10)
    X, Y = gs[:13], gs[13:]
    res = tiled_gram(X, Y, kernel=kern, block_size=5, client=client)
    assert np.array_equal(res.matrix, kern(X, Y))
    # a store half done in this process, finished on the cluster
    path = tmp_path / "K.zarr"
    first = tiled_gram(gs, kernel=kern, out=path, block_size=6)
    dropped = sorted(first.computed)[::2]
    for key in dropped:
        (path / "done" / f"{key}.json").unlink()
    res = tiled_gram(gs, kernel=kern, out=path, block_size=6, client=client)
    assert sorted(res.computed) == dropped and res.skipped == first.blocks - len(dropped)
    assert np.array_equal(load_gram(path).matrix, kern(gs))


def test_cli_dask_local_equals_in_process(tmp_path):
    common = ["gram", "drugs", "--n-graphs", "16", "--block-size", "5", "--quiet"]
    assert main([*common, "--backend", "cpu", "--out", str(tmp_path / "A.zarr")]) == 0
    assert main([*common, "--dask", "local:2", "--out", str(tmp_path / "B.zarr")]) == 0
    a, b = load_gram(tmp_path / "A.zarr"), load_gram(tmp_path / "B.zarr")
    assert np.array_equal(a.matrix, b.matrix) and a.ids == b.ids
    assert a.meta["params"] == b.meta["params"]  # local:N implies the CPU backend
    # the same command again resumes: nothing left to compute
    assert (
        main([*common, "--dask", "local:2", "--out", str(tmp_path / "B.zarr"), "--stats", str(tmp_path / "s.csv")]) == 0
    )
    import pandas as pd

    row = pd.read_csv(tmp_path / "s.csv").iloc[0]
    assert row["blocks_computed"] == 0 and row["blocks_skipped"] == row["blocks"] == 10


def test_cluster_specs():
    assert parse_spec("local:3") == ("local", 3) and parse_spec(" LOCAL ") == ("local", None)
    assert parse_spec("tcp://127.0.0.1:8786") == ("address", None)
    assert backend_for_spec("cuda:2") == "gpu" and backend_for_spec("local") == "cpu"
    for bad in ("locl:2", "local:0", "local:x", "gpu"):
        with pytest.raises(ValueError, match="--dask"):
            parse_spec(bad)
    if importlib.util.find_spec("dask_cuda") is None:
        with pytest.raises(RuntimeError, match="dask-cuda"):
            with client_from_spec("cuda"):
                pass


def _block_dependencies(dask_scheduler):
    out = {}
    for key, ts in dask_scheduler.tasks.items():
        if str(key).startswith("mgkflow-block"):
            out[str(key)] = [(str(d.key), len(d.who_has or ()), d.nbytes) for d in ts.dependencies]
    return out


def test_graphs_and_kernel_reach_each_worker_once(client, kern):
    from mgkflow.gram import plan_blocks
    from mgkflow.gram.tiled import GramJob, _run_dask

    gs = molecules(40, seed=9, max_atoms=10, mean_atoms=9)
    job = GramJob(X=tuple(gs), Y=None, kernel=kern, store=None)
    seen, got = [], {}

    def on_report(rep):
        got[rep.key] = rep.values
        if not seen:  # while blocks are still pending: what do their tasks depend on?
            seen.append(client.run_on_scheduler(_block_dependencies))

    _run_dask(client, job, plan_blocks(40, None, 4), on_report)
    deps = seen[0]
    assert deps, "some blocks were pending at the first report"
    keys = {d[0][0] for d in deps.values()}
    assert all(len(d) == 1 for d in deps.values()) and len(keys) == 1  # one shared job, no per-task copies
    (dep,) = {d[0] for d in deps.values()}
    assert 1 <= dep[1] <= 2  # scattered once; a worker fetches it from a peer with its first task
    assert dep[0].startswith("Pickled-")  # the job holding the graphs and the kernel, pickled once
    assert len(got) == 55


def test_scatter_to_all_lets_every_worker_fetch_before_any_task():
    import dask
    from distributed import wait

    from mgkflow.gram.cluster import scatter_to_all

    # without the active memory manager, which drops replicas no task waits for (2 s period)
    with dask.config.set({"distributed.scheduler.active-memory-manager.start": False}):
        with client_from_spec("local:3", processes=False) as c:
            payload = {"graphs": np.arange(1000.0)}
            fut = scatter_to_all(c, payload)
            holders = c.who_has([fut])[fut.key]
            assert len(holders) == 3  # every worker, fetched through one task each (none left over)
            for _ in range(50):  # the fetch tasks are released (asynchronously)
                if not [k for k in c.run_on_scheduler(_task_keys) if k.startswith("mgkflow-fetch-")]:
                    break
                time.sleep(0.1)
            else:
                raise AssertionError("fetch tasks left on the scheduler")
            job = c.submit(lambda p: float(p.get()["graphs"].sum()), fut, pure=False)
            wait([job])
            assert job.result() == 499500.0


def test_scatter_to_all_goes_on_without_a_busy_worker():
    from distributed import Event

    from mgkflow.gram.cluster import scatter_to_all

    with client_from_spec("local:1", processes=False) as c:
        gate = Event("mgkflow-test-gate", client=c)
        busy = c.submit(lambda: gate.wait(30), pure=False)  # the only worker thread, held
        while busy.status == "pending" and not c.processing()[next(iter(c.processing()))]:
            time.sleep(0.05)
        t = time.perf_counter()
        fut = scatter_to_all(c, {"x": 1}, timeout=0.5)
        assert time.perf_counter() - t < 10  # gave up waiting for the fetch instead of hanging
        gate.set()
        assert busy.result() is True
        assert c.submit(lambda p: p.get()["x"] + 1, fut, pure=False).result() == 2  # the work goes on


class _CountsPickles:
    """Counts how often it is pickled."""

    pickled = 0

    def __reduce__(self):
        type(self).pickled += 1
        return _CountsPickles, ()


def test_pickled_pickles_its_object_once_and_unpickles_it_once_per_copy():
    import pickle
    from concurrent.futures import ThreadPoolExecutor

    from mgkflow.gram.cluster import Pickled

    _CountsPickles.pickled = 0
    shared = Pickled(_CountsPickles())
    copies = [pickle.loads(pickle.dumps(shared)) for _ in range(3)]  # workers fetching it
    relayed = pickle.loads(pickle.dumps(copies[0]))  # a worker fetching it from a peer
    assert _CountsPickles.pickled == 1  # the bytes travel; the object is not pickled again
    with ThreadPoolExecutor(8) as pool:  # a worker's task threads asking at once
        got = list(pool.map(lambda _: relayed.get(), range(32)))
    assert all(g is got[0] for g in got) and isinstance(got[0], _CountsPickles)
    assert copies[1].get() is not got[0]  # each copy unpickles its own
    assert relayed._blob is None  # and lets its bytes go: a later relay pickles the object again
    assert isinstance(pickle.loads(pickle.dumps(relayed)).get(), _CountsPickles) and _CountsPickles.pickled == 2


def test_a_released_pickled_refuses_to_be_used_or_sent():
    import pickle

    from mgkflow.gram.cluster import Pickled

    shared = pickle.loads(pickle.dumps(Pickled({"a": 1})))
    assert shared.get() == {"a": 1}
    shared.release()
    assert shared._blob is None
    with pytest.raises(RuntimeError, match="released"):
        shared.get()
    with pytest.raises(RuntimeError, match="released"):
        pickle.dumps(shared)


def test_scattered_copies_stay_on_every_worker(client):
    """The clusters made here run no active memory manager: its ReduceReplicas policy would drop the
    copies scatter_to_all makes within its 2 s cycle."""
    import time

    from mgkflow.gram.cluster import release_from_all, scatter_to_all

    shared = scatter_to_all(client, {"a": 1})
    time.sleep(4.5)
    assert [len(w) for w in client.who_has(shared).values()] == [2]
    assert release_from_all(client, shared) == 2
    client.cancel([shared])


def _task_keys(dask_scheduler=None) -> list[str]:
    return [str(k) for k in dask_scheduler.tasks]


class _LosesOneMarker(GramStore):
    """A store whose first write of block 0.1 loses its marker (a worker lost with a write pending)."""

    def write_block(self, block, values, info):
        flag = self.path.parent / "lost-once"
        if block.key == "0.1" and not flag.exists():
            flag.write_text("x")
            self.array[block.r0 : block.r1, block.c0 : block.c1] = values
            return {}
        return super().write_block(block, values, info)


def test_blocks_whose_marker_went_missing_are_recomputed(client, kern, tmp_path):
    from mgkflow.gram.tiled import GramJob, _run_dask

    gs = molecules(12, seed=2, max_atoms=10, mean_atoms=9)
    path = tmp_path / "K.zarr"
    tiled_gram(gs, kernel=kern, out=path, block_size=4)  # the store, its layout and metadata
    for p in (path / "done").glob("*.json"):
        p.unlink()
    store = GramStore.read(path, mode="r+")
    store.__class__ = _LosesOneMarker
    reports = []
    _run_dask(client, GramJob(X=tuple(gs), Y=None, kernel=kern, store=store), store.blocks(), reports.append)
    keys = [r.key for r in reports]
    assert sorted(keys) == sorted(["0.0", "0.1", "0.1", "0.2", "1.1", "1.2", "2.2"])  # 0.1 twice
    assert (tmp_path / "lost-once").exists() and not store.missing_blocks()
    assert np.array_equal(load_gram(path).matrix, kern(gs))


def test_cpu_backend_threads_follow_the_dask_worker():
    """In a Dask worker a CPU backend uses the worker's task threads (local:N: one each), not every core."""
    import os

    from mgkflow.backends.cpu import NumbaCPUBackend, default_threads

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert default_threads() == cores  # outside a worker
    with client_from_spec("local:2", processes=False) as c:
        assert c.submit(lambda: NumbaCPUBackend().threads, pure=False).result() == 1
    with client_from_spec("local:1", processes=False, threads_per_worker=3) as c:
        assert c.submit(default_threads, pure=False).result() == 3


def test_scale_bench_runs_several_clusters_without_the_in_process_run(tmp_path, monkeypatch):
    """``bench gram --no-inprocess --dask A --dask B``: each cluster's run is checked against the first's,
    with its workers' blocks and the speedup over the first (the multi-GPU scaling run's form)."""
    from mgkflow.bench.gram import main as bench_main

    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi: no GPU load samples
    out = tmp_path / "rec.json"
    args = ["--n-graphs", "24", "--max-atoms", "10", "--mean-atoms", "9", "--backend", "cpu", "--q", "0.2",
            "--block-size", "6", "--dtype", "float64", "--reorder-workers", "1", "--no-inprocess", "--digest",
            "--dask", "local:1", "--dask", "local:2", "--dask-threads", "1", "--spot-check", "3",
            "--worker-env", "MGKFLOW_BENCH_PROBE=7", "--json", out]  # fmt: skip
    assert bench_main(args) == 0
    rec = json.loads(out.read_text())
    assert "inprocess" not in rec
    one, two = rec["dask"]
    assert [one["spec"], two["spec"]] == ["local:1", "local:2"] and one["threads_per_worker"] == 1
    assert one["bit_identical"] and two["bit_identical"] and one["digest"] == two["digest"]
    assert one["speedup_vs_first"] == 1.0 and two["speedup_vs_first"] == pytest.approx(one["seconds"] / two["seconds"])
    assert len(one["workers"]) == 1 and len(two["workers"]) == 2
    assert sum(w["blocks"] for w in two["workers"].values()) == 10  # 4 x 4 tiles, upper triangle
    assert all(w["device_s"] == 0.0 and w["gpu"] == "" and w["block_s"] > 0 for w in two["workers"].values())
    assert all(w["host"]["cpus"] >= 1 and w["host"]["numba_threads"] >= 1 for w in two["workers"].values())
    assert all(0 <= w["write_wait_s"] < one["seconds"] for w in one["workers"].values())  # a store's Dask tasks
    assert one["worker_env"] == {"MGKFLOW_BENCH_PROBE": "7"}  # set in the workers before they start
    assert all(w["host"]["env"] == {"MGKFLOW_BENCH_PROBE": "7"} for w in two["workers"].values())
    assert one["pairs"] == two["pairs"] == 24 * 25 // 2 and one["gpu_util_mean_pct"] == {}
    assert rec["spot_check"]["max_rel_err"] < 1e-12


def test_scale_bench_no_inprocess_needs_a_cluster(capsys):
    from mgkflow.bench.gram import main as bench_main

    with pytest.raises(SystemExit) as exc:
        bench_main(["--n-graphs", "4", "--no-inprocess"])
    assert exc.value.code == 2 and "--no-inprocess needs --dask" in capsys.readouterr().err


def test_worker_seconds_add_up_by_worker(client, kern):
    gs = molecules(12, seed=5, max_atoms=9, mean_atoms=8)
    res = tiled_gram(gs, kernel=kern, block_size=4, client=client)
    assert set(res.worker_seconds) == set(res.workers)
    sums = list(res.worker_seconds.values())
    assert sum(w["block_s"] for w in sums) == pytest.approx(res.block_seconds) and res.block_seconds > 0
    # the CPU backend has no device and no GPU host phases
    assert all(w["device_s"] == w["host_before_s"] == w["host_after_s"] == 0.0 for w in sums) and not res.device_seconds


def test_scale_bench_worker_env_needs_name_and_value(capsys):
    from mgkflow.bench.gram import main as bench_main

    with pytest.raises(SystemExit) as exc:
        bench_main(["--n-graphs", "4", "--dask", "local:1", "--worker-env", "NOVALUE"])
    assert exc.value.code == 2 and "--worker-env takes NAME=VALUE" in capsys.readouterr().err
