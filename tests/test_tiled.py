"""Tiled kernel matrices (mgkflow.gram): blocks, the Zarr store, load_gram, memory estimates,
parallel reordering with a permutation cache, and the molecule-like generator."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.sparse.csgraph as csgraph

import mgkflow
from mgkflow import MarginalizedGraphKernel, load_gram
from mgkflow.datasets import default_kernels, molecules
from mgkflow.gram import (
    GramStore,
    IncompleteStoreError,
    PermutationCache,
    ResourceError,
    StoreExistsError,
    StoreMismatchError,
    estimate_resources,
    plan_blocks,
    reorder_graphs,
    tiled_gram,
)
from mgkflow.gram import resources as resources_mod


@pytest.fixture(scope="module")
def graphs():
    return molecules(23, seed=5, max_atoms=12, mean_atoms=10)


@pytest.fixture(scope="module")
def kern():
    return MarginalizedGraphKernel(*default_kernels("drugs"), q=0.2, backend="cpu")


@pytest.fixture(scope="module")
def K_ref(graphs, kern):
    return kern(graphs)


# ---------------------------------------------------------------------- molecules
def test_molecules_are_deterministic_connected_and_chemical():
    a = molecules(300, seed=11)
    b = molecules(300, seed=11)
    assert all(np.array_equal(g.adjacency.toarray(), h.adjacency.toarray()) for g, h in zip(a, b))
    assert all(np.array_equal(g.edge_labels["length"], h.edge_labels["length"]) for g, h in zip(a, b))
    assert [g.n_nodes for g in molecules(5, seed=11)] == [g.n_nodes for g in a[:5]]  # prefix-stable
    assert [g.n_nodes for g in molecules(5, seed=12)] != [g.n_nodes for g in a[:5]]
    sizes = np.array([g.n_nodes for g in a])
    assert sizes.min() >= 8 and sizes.max() <= 50 and 18 < sizes.mean() < 30
    max_degree = {6: 4, 7: 3, 8: 2, 16: 2, 9: 1, 17: 1}
    rings = 0
    for g in a:
        assert csgraph.connected_components(g.adjacency)[0] == 1, g.title
        deg = np.diff(g.adjacency.indptr)
        z = g.node_labels["element"]
        assert all(deg[k] <= max_degree[int(z[k])] for k in range(g.n_nodes)), g.title
        order = g.edge_labels["bond_order"]
        assert set(np.unique(order)) <= {1.0, 1.5, 2.0, 3.0}
        # aromatic bonds are ring bonds between aromatic atoms; lengths shrink with the order
        rows, cols = g.coo()
        arom = order == 1.5
        assert np.all(g.edge_labels["in_ring"][arom] == 1)
        assert np.all(g.node_labels["aromatic"][rows[arom]] == 1)
        length = g.edge_labels["length"]
        assert np.all((length > 0.9) & (length < 2.3))
        rings += g.n_edges - g.n_nodes + 1
    assert rings / len(a) > 1  # ring systems, not bare trees
    assert set(np.concatenate([g.node_labels["element"] for g in a]).tolist()) >= {6, 7, 8}
    with pytest.raises(ValueError, match="min_atoms"):
        molecules(1, min_atoms=10, max_atoms=9)


def test_molecules_work_with_the_drug_kernels():
    gs = molecules(4, seed=0, max_atoms=12)
    K = MarginalizedGraphKernel(*default_kernels("drugs"), q=0.2, backend="cpu")(gs, normalize=True)
    assert np.allclose(np.diag(K), 1.0) and np.all(K > 0) and np.all(K <= 1 + 1e-12)


# ---------------------------------------------------------------------- blocks
@pytest.mark.parametrize("n, m, b", [(1, None, 3), (7, None, 3), (9, None, 3), (10, None, 4), (5, 8, 3), (4, 1, 2)])
def test_blocks_cover_each_pair_once(n, m, b):
    count = np.zeros((n, n if m is None else m), dtype=int)
    for blk in plan_blocks(n, m, b):
        sub = count[blk.r0 : blk.r1, blk.c0 : blk.c1]
        if blk.diagonal:
            sub[np.triu_indices(blk.shape[0])] += 1
        else:
            sub += 1
        assert blk.shape[0] <= b and blk.shape[1] <= b
    if m is None:
        assert np.array_equal(count, np.triu(np.ones((n, n), dtype=int)))
    else:
        assert np.all(count == 1)
    with pytest.raises(ValueError, match="block_size"):
        plan_blocks(n, m, 0)


# ---------------------------------------------------------------------- in memory
@pytest.mark.parametrize("block_size", [1, 5, 23, 100])
def test_in_memory_tiles_equal_the_kernel_bit_for_bit(graphs, kern, K_ref, block_size):
    res = tiled_gram(graphs, kernel=kern, block_size=block_size)
    assert np.array_equal(res.matrix, K_ref)
    assert res.pairs == 23 * 24 // 2 and len(res.computed) == res.blocks and res.skipped == 0
    assert res.ids[:2] == ["mol-0", "mol-1"] and res.ids_y is None


def test_cross_matrix(graphs, kern):
    X, Y = graphs[:9], graphs[9:]
    res = tiled_gram(X, Y, kernel=kern, block_size=4)
    assert res.matrix.shape == (9, 14) and res.blocks == 3 * 4
    assert np.array_equal(res.matrix, kern(X, Y))


def test_bad_arguments(graphs, kern, tmp_path):
    with pytest.raises(ValueError, match="dtype"):
        tiled_gram(graphs, kernel=kern, dtype="float16")
    with pytest.raises(ValueError, match="block_size"):
        tiled_gram(graphs, kernel=kern, block_size=0)
    with pytest.raises(ValueError, match="X is empty"):
        tiled_gram([], kernel=kern)
    with pytest.raises(TypeError, match=r"X\[1\]"):
        tiled_gram([graphs[0], "x"], kernel=kern)
    with pytest.raises(TypeError, match="MarginalizedGraphKernel"):
        tiled_gram(graphs, kernel="k")


# ---------------------------------------------------------------------- store
def test_zarr_store_layout_metadata_and_load(graphs, kern, K_ref, tmp_path):
    import zarr

    path = tmp_path / "K.zarr"
    res = tiled_gram(graphs, kernel=kern, out=path, block_size=5)
    assert res.matrix is None and res.path == path and res.blocks == 15
    arr = zarr.open_array(str(path), mode="r")
    assert arr.chunks == (5, 5) and arr.dtype == np.float64 and arr.shape == (23, 23)
    meta = arr.attrs["mgkflow"]
    assert meta["ids"] == [g.title for g in graphs] and meta["symmetric"] is True
    assert meta["kernel"] == repr(kern) and meta["params"]["q"] == "0.2"
    assert meta["params"]["edge_kernel"] == "KroneckerDelta(0.5, 'bond_order')"
    assert len(meta["fingerprint"]) == 32
    assert meta["mgkflow_version"] == mgkflow.__version__
    # only the blocks on and above the diagonal are on disk; the rest reads as NaN
    chunks = {p.relative_to(path / "c").as_posix() for p in (path / "c").rglob("*") if p.is_file()}
    assert chunks == {f"{b.bi}/{b.bj}" for b in plan_blocks(23, None, 5)}
    raw = arr[...]
    assert np.isnan(raw[5:10, 0:5]).all() and not np.isnan(raw[0:5, 5:10]).any()
    markers = sorted(p.name for p in (path / "done").iterdir())
    assert markers == sorted(f"{b.key}.json" for b in plan_blocks(23, None, 5))
    rec = json.loads((path / "done" / "0.1.json").read_text())
    assert rec["block"] == "0.1" and rec["run"] and rec["pairs"] == 25 and rec["backend"] == "cpu"

    K, ids = load_gram(path)
    assert np.array_equal(K, K_ref) and ids == meta["ids"]
    lazy = load_gram(path, lazy=True)
    assert lazy.matrix.chunksize == (5, 5)
    assert np.array_equal(lazy.matrix.compute(), K_ref)
    Kn = kern(graphs, normalize=True)
    assert np.allclose(load_gram(path, normalize=True).matrix, Kn, rtol=1e-14, atol=0)
    assert np.allclose(load_gram(path, lazy=True, normalize=True).matrix.compute(), Kn, rtol=1e-14, atol=0)


def test_float32_store_and_cross_store(graphs, kern, K_ref, tmp_path):
    res = tiled_gram(graphs, kernel=kern, out=tmp_path / "K32.zarr", block_size=6, dtype="float32")
    g = load_gram(res.path)
    assert g.matrix.dtype == np.float32 and np.array_equal(g.matrix, K_ref.astype(np.float32))
    X, Y = graphs[:10], graphs[10:]
    tiled_gram(X, Y, kernel=kern, out=tmp_path / "KXY.zarr", block_size=4)
    g = load_gram(tmp_path / "KXY.zarr")
    assert np.array_equal(g.matrix, K_ref[:10, 10:]) and g.ids_y == [h.title for h in Y]
    assert np.array_equal(load_gram(tmp_path / "KXY.zarr", lazy=True).matrix.compute(), K_ref[:10, 10:])
    with pytest.raises(ValueError, match="cross matrix"):
        load_gram(tmp_path / "KXY.zarr", normalize=True)


def test_store_refuses_other_work_and_foreign_paths(graphs, kern, tmp_path):
    path = tmp_path / "K.zarr"
    tiled_gram(graphs[:8], kernel=kern, out=path, block_size=4)
    other_q = MarginalizedGraphKernel(*default_kernels("drugs"), q=0.1, backend="cpu")
    with pytest.raises(StoreMismatchError, match=r"kernel parameters \(q: 0.2 -> 0.1\)"):
        tiled_gram(graphs[:8], kernel=other_q, out=path, block_size=4)
    with pytest.raises(StoreMismatchError, match=r"graphs \(X\)"):
        tiled_gram(graphs[1:9], kernel=kern, out=path, block_size=4)
    with pytest.raises(StoreMismatchError, match="block_size 4 -> 3"):
        tiled_gram(graphs[:8], kernel=kern, out=path, block_size=3)
    with pytest.raises(StoreMismatchError, match="dtype"):
        tiled_gram(graphs[:8], kernel=kern, out=path, block_size=4, dtype="float32")
    with pytest.raises(StoreExistsError, match="overwrite"):
        tiled_gram(graphs[:8], kernel=kern, out=path, block_size=4, resume=False)
    res = tiled_gram(graphs[:8], kernel=other_q, out=path, block_size=4, overwrite=True)
    assert len(res.computed) == 3 and np.array_equal(load_gram(path).matrix, other_q(graphs[:8]))
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "data.txt").write_text("keep me")
    with pytest.raises(StoreExistsError, match="not an mgkflow Gram store"):
        tiled_gram(graphs[:4], kernel=kern, out=foreign, overwrite=True)
    assert (foreign / "data.txt").read_text() == "keep me"
    with pytest.raises(FileNotFoundError):
        load_gram(tmp_path / "nothing.zarr")


def test_incomplete_store_is_refused_unless_asked(graphs, kern, K_ref, tmp_path):
    path = tmp_path / "K.zarr"
    tiled_gram(graphs, kernel=kern, out=path, block_size=6)
    (path / "done" / "1.2.json").unlink()
    with pytest.raises(IncompleteStoreError, match="1 of 10 blocks"):
        load_gram(path)
    g = load_gram(path, allow_incomplete=True)
    assert g.missing == ["1.2"]
    assert np.array_equal(g.matrix, K_ref)  # the chunk was written; only its marker is gone
    st = GramStore.read(path)
    assert [b.key for b in st.missing_blocks()] == ["1.2"]


# ---------------------------------------------------------------------- memory
def test_estimate_and_refusal_name_the_out_that_works(graphs, kern, monkeypatch, tmp_path):
    est = estimate_resources(graphs, block_size=5, dtype="float32")
    assert est.pairs == 276 and est.result_bytes == 23 * 23 * 4
    assert est.store_bytes == sum(b.shape[0] * b.shape[1] for b in plan_blocks(23, None, 5)) * 4
    assert est.block_host_bytes > 0 and est.graphs_bytes > 0 and est.block_device_bytes > 0
    monkeypatch.setattr(resources_mod, "host_available_bytes", lambda: 1000)
    with pytest.raises(ResourceError, match="out='K.zarr'") as exc:
        tiled_gram(graphs, kernel=kern, block_size=5)
    assert isinstance(exc.value, MemoryError)
    with pytest.raises(ResourceError, match="smaller block_size"):
        tiled_gram(graphs, kernel=kern, out=tmp_path / "K.zarr", block_size=5)
    monkeypatch.setattr(resources_mod, "host_available_bytes", lambda: 10**9)
    monkeypatch.setattr(resources_mod.shutil, "disk_usage", lambda p: type("U", (), {"free": 100})())
    with pytest.raises(ResourceError, match="disk"):
        tiled_gram(graphs, kernel=kern, out=tmp_path / "K.zarr", block_size=5)
    assert not (tmp_path / "K.zarr").exists()


# ---------------------------------------------------------------------- reordering
def test_reorder_graphs_cache_and_pool(tmp_path):
    from mgkflow.reorder import reorder

    gs = molecules(12, seed=3)
    gs = gs + gs[:3]  # repeated graphs are computed once
    serial = reorder_graphs(gs, "pbr", seed=1, cache=tmp_path / "perm")
    assert serial.computed == 12 and serial.cached == 0
    for g, p, h in zip(gs, serial.perms, serial.graphs):
        assert np.array_equal(p, reorder(g, method="pbr", seed=1))
        assert np.array_equal(h.adjacency.toarray(), g.permute(p).adjacency.toarray())
    again = reorder_graphs(gs, "pbr", seed=1, cache=PermutationCache(tmp_path / "perm"))  # from disk
    assert again.computed == 0 and again.cached == 15
    assert all(np.array_equal(a, b) for a, b in zip(again.perms, serial.perms))
    other = reorder_graphs(gs, "pbr", seed=2, cache=tmp_path / "perm")
    assert other.computed == 12  # another seed is another key
    pooled = reorder_graphs(gs, "rcm", workers=2, chunk=4)
    assert pooled.computed == 12
    assert all(np.array_equal(p, reorder(g, method="rcm")) for g, p in zip(gs, pooled.perms))
    by_size = reorder_graphs(gs, lambda g: "rcm" if g.n_nodes < 24 else "natural")
    assert by_size.methods == ["rcm" if g.n_nodes < 24 else "natural" for g in gs]


def test_auto_backend_is_recorded_as_resolved(graphs, tmp_path, monkeypatch):
    from mgkflow import gpu_available

    if gpu_available():
        pytest.skip("'auto' resolves to the GPU here")
    monkeypatch.chdir(tmp_path)
    auto = MarginalizedGraphKernel(*default_kernels("drugs"), q=0.2)  # no GPU here: the CPU backend
    tiled_gram(graphs[:6], kernel=auto, out="K.zarr", block_size=3)
    meta = load_gram(tmp_path / "K.zarr").meta
    assert meta["params"]["backend"] == "'cpu'"
    res = tiled_gram(graphs[:6], kernel=MarginalizedGraphKernel(*default_kernels("drugs"), q=0.2, backend="cpu"),
                     out="K.zarr", block_size=3)
    assert res.skipped == 3 and not res.computed


def test_scale_bench_smoke(tmp_path, capsys):
    from mgkflow.bench.gram import main as bench_main

    out = tmp_path / "rec.json"
    args = ["--n-graphs", "12", "--max-atoms", "10", "--mean-atoms", "9", "--backend", "cpu", "--q", "0.2",
            "--block-size", "5", "--dtype", "float64", "--reorder-workers", "1", "--spot-check", "5", "--json", out]
    assert bench_main(args) == 0
    rec = json.loads(out.read_text())
    assert rec["inprocess"]["pairs"] == 78 and rec["inprocess"]["blocks"] == 6
    assert rec["spot_check"]["entries"] == 5 and rec["spot_check"]["max_rel_err"] < 1e-12


def test_scale_bench_is_a_bench_suite():
    from mgkflow.bench import SUITES
    from mgkflow.bench.__main__ import main as suite_main

    assert SUITES["gram"] == "mgkflow.bench.gram"
    with pytest.raises(SystemExit) as exc:
        suite_main(["gram", "--help"])
    assert exc.value.code == 0


def test_scale_bench_old_module_name_still_works(tmp_path):
    import importlib
    import subprocess
    import sys
    import warnings

    import mgkflow.bench.gram as new

    sys.modules.pop("mgkflow.gram.bench", None)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        old = importlib.import_module("mgkflow.gram.bench")
    assert old is new and old._DeviceMemory is new._DeviceMemory
    assert any(issubclass(x.category, DeprecationWarning) and "mgkflow.bench.gram" in str(x.message) for x in w)
    # python -m mgkflow.gram.bench runs the same main, with a warning
    proc = subprocess.run([sys.executable, "-m", "mgkflow.gram.bench", "--help"], capture_output=True, text=True,
                          cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(Path(mgkflow.__file__).parents[1])})
    assert proc.returncode == 0, proc.stderr
    assert "--kill-at" in proc.stdout and "DeprecationWarning" in proc.stderr and "mgkflow.bench gram" in proc.stderr


@pytest.mark.parametrize(
    "module",
    ["blocks", "digest", "store", "resources", "tiled", "load", "reorder", "cluster"],
)
def test_docstring_examples(module):
    import doctest
    import importlib

    mod = importlib.import_module(f"mgkflow.gram.{module}")
    result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0


def _fake_nvidia_smi(tmp_path: Path, monkeypatch: Any, text: str) -> Path:
    """An ``nvidia-smi`` first on PATH that prints the file it returns (written with ``text``)."""
    state = tmp_path / "smi-output"
    state.write_text(text)
    smi = tmp_path / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\ncat {state}\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    return state


def test_device_memory_sampler_samples_at_the_end(tmp_path, monkeypatch):
    """A run shorter than the sampling period is sampled before and after: the peak includes what the run left
    allocated (bench gpu measures one untimed call with it)."""
    from mgkflow.bench.gram import _DeviceMemory

    state = _fake_nvidia_smi(tmp_path, monkeypatch, "100")
    import time

    with _DeviceMemory(period=60.0) as mem:
        t0 = time.monotonic()
        while mem.peak_mib is None and time.monotonic() - t0 < 10:  # the first sample, taken as the run starts
            time.sleep(0.01)
        assert mem.peak_mib == 100
        state.write_text("250")  # allocated during the run, before the next periodic sample
    assert mem.peak_mib == 250


def test_gpu_tiled_run_reports_host_seconds_on_the_fake_driver():
    """A GPU tiled run (two solver threads, each with its own stream) on the fake driver of ``bench.gpu_host``, in
    a process of its own: the workers' figures carry the GPU solves' host time before the first kernel."""
    import subprocess
    import sys

    script = (
        "from mgkflow.bench.gpu_host import install_fake_driver\n"
        "install_fake_driver()\n"
        "from mgkflow.datasets import molecules, default_kernels\n"
        "from mgkflow.mgk import MarginalizedGraphKernel\n"
        "from mgkflow.gram.tiled import tiled_gram\n"
        "kern = MarginalizedGraphKernel(*default_kernels('drugs'), q=0.05, backend='gpu')\n"
        "r = tiled_gram(molecules(40, seed=1, max_atoms=12, mean_atoms=10), kernel=kern, block_size=10, overlap=True)\n"
        "[w] = r.worker_seconds.values()\n"
        "assert r.blocks == 10 and w['host_before_s'] > 0 and w['block_s'] >= w['host_before_s'], w\n"
        "assert abs(w['block_s'] - r.block_seconds) < 1e-9 and float(r.matrix.min()) == 1.0, w\n"  # fake K = 1
        "print('ok')\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(mgkflow.__file__).parents[1]),
                                                                     os.environ.get("PYTHONPATH")]))}  # fmt: skip
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-2000:]


def test_gpu_load_sampler_means_by_gpu(tmp_path, monkeypatch):
    """bench gram's per-GPU utilization: nvidia-smi's lines (index, percent) averaged by GPU over the run."""
    from mgkflow.bench.gram import _GPULoad

    state = _fake_nvidia_smi(tmp_path, monkeypatch, "0, 50\n1, 70\n")
    import time

    with _GPULoad(period=0.01) as load:
        t0 = time.monotonic()
        while len(load.samples.get("1", [])) < 2 and time.monotonic() - t0 < 10:
            time.sleep(0.01)
        (tmp_path / "next").write_text("0, 100\n1, 70\n")
        os.replace(tmp_path / "next", state)  # whole: the sampler never reads half a file
        n0 = len(load.samples["0"])
        while len(load.samples["0"]) < 2 * n0 and time.monotonic() - t0 < 20:
            time.sleep(0.01)
    mean = load.mean
    assert set(mean) == {"0", "1"} and mean["1"] == 70.0 and 50.0 < mean["0"] < 100.0
