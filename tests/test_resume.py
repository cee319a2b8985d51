"""Resuming a tiled Gram run: SIGKILL mid-way, resume computes only the missing blocks, same bits."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import mgkflow
from mgkflow import MarginalizedGraphKernel, load_gram
from mgkflow.datasets import default_kernels, molecules
from mgkflow.gram import plan_blocks, tiled_gram

N_GRAPHS, BLOCK = 64, 4
CHILD = """
import sys
from mgkflow import MarginalizedGraphKernel
from mgkflow.datasets import default_kernels, molecules
from mgkflow.gram import tiled_gram

gs = molecules({n}, seed=8, max_atoms=12, mean_atoms=10)
kern = MarginalizedGraphKernel(*default_kernels("drugs"), q=0.2, backend="cpu")
tiled_gram(gs, kernel=kern, out=sys.argv[1], block_size={b})
"""


def _setup(n=N_GRAPHS):
    gs = molecules(n, seed=8, max_atoms=12, mean_atoms=10)
    return gs, MarginalizedGraphKernel(*default_kernels("drugs"), q=0.2, backend="cpu")


def _chunk_files(path: Path) -> dict[str, bytes]:
    return {p.relative_to(path).as_posix(): p.read_bytes() for p in (path / "c").rglob("*") if p.is_file()}


def _markers(path: Path) -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in (path / "done").glob("[!.]*.json")}


def test_sigkill_mid_run_then_resume_gives_the_same_bits(tmp_path):
    script = tmp_path / "child.py"
    script.write_text(CHILD.format(n=N_GRAPHS, b=BLOCK))
    store = tmp_path / "K.zarr"
    root = str(Path(mgkflow.__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
    blocks = plan_blocks(N_GRAPHS, None, BLOCK)
    proc = subprocess.Popen([sys.executable, str(script), str(store)], env=env, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline:
            done = store / "done"
            if done.is_dir() and len(list(done.glob("*.json"))) >= 12:
                break
            time.sleep(0.002)
        assert proc.poll() is None, f"the run ended before it was killed: {proc.stderr.read().decode()[-2000:]}"
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait()
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL
    before = _markers(store)
    assert 12 <= len(before) < len(blocks), "kill must land mid-way"
    (first_run,) = {m["run"] for m in before.values()}
    enc = {b.key: f"c/{b.bi}/{b.bj}" for b in blocks}
    kept = {k: (store / enc[k]).stat().st_mtime_ns for k in before}

    gs, kern = _setup()
    res = tiled_gram(gs, kernel=kern, out=store, block_size=BLOCK)
    # only the missing blocks were computed; the finished ones were neither redone nor rewritten
    assert sorted(res.computed) == sorted(set(b.key for b in blocks) - set(before))
    assert res.skipped == len(before)
    after = _markers(store)
    assert {k: after[k] for k in before} == before
    assert {k: (store / enc[k]).stat().st_mtime_ns for k in before} == kept
    assert {m["run"] for k, m in after.items() if k not in before} - {first_run}
    assert not list(store.rglob("*.partial")) and not list((store / "done").glob(".tmp-*"))

    # bit-identical to an uninterrupted run: same chunk files, same matrix, equal to the kernel
    ref = tmp_path / "ref.zarr"
    tiled_gram(gs, kernel=kern, out=ref, block_size=BLOCK)
    assert _chunk_files(store) == _chunk_files(ref)
    K = load_gram(store).matrix
    assert np.array_equal(K, load_gram(ref).matrix)
    assert np.array_equal(K, kern(gs))


def test_chunk_without_marker_torn_files_and_bad_markers_are_recomputed(tmp_path):
    gs, kern = _setup(20)
    store = tmp_path / "K.zarr"
    tiled_gram(gs, kernel=kern, out=store, block_size=BLOCK)
    ref = _chunk_files(store)
    # a kill between the chunk's rename and its marker: chunk of other data, no marker
    (store / "done" / "2.3.json").unlink()
    (store / "c" / "2" / "3").write_bytes(b"\x00" * 17)
    # a kill inside writes: Zarr's and the marker's temporary files; an unreadable marker
    (store / "c" / "1" / "1.abc.partial").write_bytes(b"torn")
    (store / "done" / ".tmp-0123-0.1.json").write_text('{"blo')
    (store / "done" / "0.4.json").write_text('{"block": "0.4", "chec')
    (store / "done" / "0.2.json").write_text('{"block": "1.1"}')  # names another block
    res = tiled_gram(gs, kernel=kern, out=store, block_size=BLOCK)
    assert sorted(res.computed) == ["0.2", "0.4", "2.3"]
    assert _chunk_files(store) == ref
    assert not list(store.rglob("*.partial")) and not list((store / "done").glob(".tmp-*"))
    assert np.array_equal(load_gram(store).matrix, kern(gs))


def test_resume_refuses_a_changed_graph_set_and_keeps_the_store(tmp_path):
    gs, kern = _setup(12)
    store = tmp_path / "K.zarr"
    tiled_gram(gs, kernel=kern, out=store, block_size=BLOCK)
    before = _chunk_files(store)
    changed = list(gs)
    changed[5] = changed[5].permute(np.arange(changed[5].n_nodes)[::-1])  # same kernel values, other graph
    with pytest.raises(mgkflow.gram.StoreMismatchError, match=r"graphs \(X\)"):
        tiled_gram(changed, kernel=kern, out=store, block_size=BLOCK)
    assert _chunk_files(store) == before and len(_markers(store)) == 6
