"""CPU side of ``mgkflow bench primitives``: sources, octile generator, maps, measurement logic."""

from __future__ import annotations

import csv
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from mgkflow.bench import primitives as pb
from mgkflow.gpu.primitive_map import PRIMITIVES, load_map, map_from_timings, save_map
from mgkflow.kernels import Constant, SquareExponential

NVCC = shutil.which("nvcc")


def _sources() -> dict[str, str]:
    return {
        "bench-unlabeled": pb.bench_source(pb.bench_config(False)),
        "bench-labeled": pb.bench_source(pb.bench_config(True)),
        "roofline": pb.roofline_source(),
    }


def test_sources_have_no_placeholders() -> None:
    for name, src in _sources().items():
        assert "${" not in src, name
    src = _sources()
    for p in PRIMITIVES:
        assert f"BENCH_KERNEL(bench_{p}, PRIM_{p.upper()})" in src["bench-unlabeled"]
    assert "e1_0" in src["bench-labeled"] and "e1_0" not in src["bench-unlabeled"].split("octile_pair")[0]
    for k in ("peak_fp32", "peak_fp64", "copy_f4", "read_f4", "fill_f4"):
        assert k in src["roofline"]


@pytest.mark.skipif(NVCC is None, reason="nvcc not on PATH")
def test_nvcc_compiles_bench_and_roofline(tmp_path: Path) -> None:
    paths = []
    for name, src in _sources().items():
        path = tmp_path / f"{name}.cu"
        path.write_text(src)
        paths.append(path)

    def compile_one(path: Path) -> tuple[Path, subprocess.CompletedProcess]:
        out = path.with_suffix(".cubin")
        cmd = [NVCC, "-arch=sm_90", "-cubin", "-O3", "-std=c++17", "-Xptxas", "-v", "-o", str(out), str(path)]
        return path, subprocess.run(cmd, capture_output=True, text=True, timeout=120)

    with ThreadPoolExecutor(max_workers=3) as ex:
        for path, proc in ex.map(compile_one, paths):
            assert proc.returncode == 0, f"{path.name}:\n{proc.stderr}"
            assert path.with_suffix(".cubin").stat().st_size > 0
            # no local-memory traffic in any kernel (register arrays stay in registers)
            assert " 0 bytes spill stores" in proc.stderr and "bytes spill stores" in proc.stderr
            for line in proc.stderr.splitlines():
                if "spill" in line:
                    assert " 0 bytes spill stores, 0 bytes spill loads" in line, f"{path.name}: {line}"


@pytest.mark.parametrize("k", [0, 1, 7, 32, 63, 64])
def test_random_octiles_exact_counts(k: int) -> None:
    n = 40
    bm, w, e = pb.random_octiles(k, n, np.random.default_rng(k))
    assert bm.dtype == np.uint64 and bm.shape == (n,)
    assert [bin(int(x)).count("1") for x in bm] == [k] * n
    assert w.dtype == np.float32 and w.shape == (n * k,)
    assert e.dtype == np.float32 and e.shape == (n * k,)
    if k:
        assert 0.5 <= w.min() and w.max() < 1.5
        assert 1.0 <= e.min() and e.max() < 2.0
    # compact order = bitmap order: the dense expansion puts weight t of octile o at its t-th set bit
    toff = np.arange(n) * k
    W = pb.dense_octiles(bm, toff, w)
    assert W.shape == (n, 8, 8)
    for o in range(0, n, 7):
        bits = [b for b in range(64) if (int(bm[o]) >> b) & 1]
        assert np.array_equal(W[o].ravel()[bits], w[o * k : (o + 1) * k].astype(np.float64))
        assert np.count_nonzero(W[o]) == k


def test_random_octiles_rejects_bad_k() -> None:
    with pytest.raises(ValueError):
        pb.random_octiles(65, 3, np.random.default_rng(0))


def test_pools_layout() -> None:
    pools = pb.make_pools(5, seed=3)
    S = pools.n_samples
    assert pools.bitmap.size == 128 * S and pools.toff.dtype == np.int32
    counts = np.array([bin(int(x)).count("1") for x in pools.bitmap])
    assert np.array_equal(np.diff(pools.toff), counts[:-1])
    nnz = int(counts.sum())
    assert pools.weight.size == pools.labels.size == nnz + pb.PAD == pools.elab_stride
    for side in (0, 1):
        for k in (1, 33, 64):
            s = pools.start(side, k)
            assert np.all(counts[s : s + S] == k)
    W, E = pools.dense(1, 9)
    assert W.shape == E.shape == (S, 8, 8)
    assert np.all(np.count_nonzero(W.reshape(S, -1), axis=1) == 9)


def _reference_loop(pools, k1, k2, n_warps, reps, ptile, ek) -> np.ndarray:
    """The sparse x sparse loop of octile_primitives.cuh, lane by lane, in plain Python."""
    P = np.asarray(ptile, dtype=np.float64)
    out = np.zeros(n_warps * 32)
    S = pools.n_samples
    for w in range(n_warps):
        for r in range(reps):
            o1 = pools.start(0, k1) + (w + r) % S
            o2 = pools.start(1, k2) + (3 * w + 1 + r) % S
            bm1, bm2 = int(pools.bitmap[o1]), int(pools.bitmap[o2])
            for lane in range(32):
                i, i2a = lane // 4, lane % 4
                acc = 0.0
                for i2 in (i2a, i2a + 4):
                    t1 = int(pools.toff[o1]) + bin(bm1 & ((1 << (8 * i)) - 1)).count("1")
                    for j in range(8):
                        if not (bm1 >> (8 * i + j)) & 1:
                            continue
                        t2 = int(pools.toff[o2]) + bin(bm2 & ((1 << (8 * i2)) - 1)).count("1")
                        for j2 in range(8):
                            if not (bm2 >> (8 * i2 + j2)) & 1:
                                continue
                            ke = float(ek({"length": pools.labels[t1]}, {"length": pools.labels[t2]}))
                            acc += float(pools.weight[t1]) * float(pools.weight[t2]) * ke * P[8 * j + j2]
                            t2 += 1
                        t1 += 1
                out[32 * w + lane] += acc
    return out


@pytest.mark.parametrize("ek", [Constant(1.0), SquareExponential(1.0, "length")])
def test_reference_sums_match_lane_loop(ek) -> None:
    pools = pb.make_pools(6, seed=1)
    ptile = np.random.default_rng(2).uniform(0.5, 1.5, 64)
    for k1, k2 in ((3, 20), (64, 5)):
        ref = pb.reference_sums(pools, k1, k2, 2, 3, ptile, ek)
        loop = _reference_loop(pools, k1, k2, 2, 3, ptile, ek)
        np.testing.assert_allclose(ref, loop, rtol=1e-12, atol=0)


def test_map_round_trip(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    k1, k2 = np.meshgrid(np.arange(1, 65), np.arange(1, 65), indexing="ij")
    t = rng.random((k1.size, 4))
    sel = map_from_timings(k1.ravel(), k2.ravel(), t)
    assert sel.shape == (65, 65) and sel.dtype == np.uint8
    assert np.array_equal(sel[1:, 1:].ravel(), np.argmin(t, axis=1))
    path = save_map(sel, "NVIDIA H100 80GB HBM3", True, folder=tmp_path)
    assert path.exists() and path.parent == tmp_path
    assert np.array_equal(load_map("NVIDIA H100 80GB HBM3", True, folder=tmp_path), sel)
    assert load_map("NVIDIA H100 80GB HBM3", False, folder=tmp_path) is None


def test_fill_nearest_and_selection() -> None:
    ks = pb.measured_ks(2)
    assert ks[0] == 1 and ks[-1] == 64 and 63 in ks
    vals = np.zeros((ks.size, ks.size, 4))
    vals[..., 0] = 1.0  # ss slowest everywhere ...
    vals[: ks.size // 2, :, 1] = 2.0  # ... dd slow for small k1
    vals[:, :, 2] = 0.5
    vals[:, :, 3] = 5.0
    vals[ks.size // 2 :, :, 2] = 3.0
    sel = pb.selection_from_grid(ks, vals)
    assert PRIMITIVES[sel[2, 10]] == "ds" and PRIMITIVES[sel[64, 10]] == "dd"
    full = pb.fill_nearest(ks, np.arange(ks.size)[:, None] * np.ones((1, ks.size)))
    assert full.shape == (64, 64) and full[1, 0] == 0 and full[63, 5] == ks.size - 1


class FakeRunner:
    """Device stand-in: per-pair time from a model, sums from the numpy reference."""

    def __init__(self, pools=None, ptile=None, ek=None, fault: float = 0.0) -> None:
        self.pools, self.ptile, self.ek, self.fault = pools, ptile, ek, fault
        self.launches = 0

    @staticmethod
    def per_pair(p: int, k1: int, k2: int) -> float:
        trips = pb.cost_trips(PRIMITIVES[p], k1, k2, overhead=0.0) * (1.5 if p == 0 else 1.0)
        return 1e-12 * (trips + 12.0) * (1.3 if p == 1 else 1.0)

    def warps(self, prim: int) -> int:
        return 4224

    def time_batch(self, jobs):
        self.launches += len(jobs)
        return np.array([self.warps(p) * r * self.per_pair(p, k1, k2) for p, k1, k2, r in jobs])

    def check(self, prim, k1, k2, n_blocks, reps):
        ref = pb.reference_sums(self.pools, k1, k2, n_blocks * pb.BENCH_BLOCK // 32, reps, self.ptile, self.ek)
        return ref * (1.0 + self.fault * (prim == 2))


def test_check_flavour_flags_wrong_sums() -> None:
    pools = pb.make_pools(32, seed=0)
    ptile = np.random.default_rng(1).uniform(0.5, 1.5, 64)
    ek = SquareExponential(1.0, "length")
    assert pb.check_flavour(FakeRunner(pools, ptile, ek), pools, ptile, ek) < 1e-14
    assert pb.check_flavour(FakeRunner(pools, ptile, ek, fault=1e-3), pools, ptile, ek) > pb.CHECK_RTOL
    assert pb.check_flavour(FakeRunner(pools, ptile, ek, fault=np.nan), pools, ptile, ek) == np.inf


def test_measure_grid_and_outputs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MGKFLOW_PRIMITIVE_MAPS", str(tmp_path / "cache"))
    ks = pb.measured_ks(16)
    runner = FakeRunner()
    logs: list[str] = []
    results = {}
    for labeled in (False, True):
        res = pb.measure_grid(runner, ks, target_s=2e-4, repeat=2, log=logs.append)
        model = np.array([[[runner.per_pair(p, a, b) for p in range(4)] for b in ks] for a in ks])
        np.testing.assert_allclose(res["seconds"], model, rtol=1e-12)
        assert np.all(res["reps"] >= 1) and np.all(res["launch"] > 0)
        res["check"] = 0.0
        results[labeled] = res
    fixed = pb.measure_grid(runner, ks, repeat=1, fixed_reps=7, log=logs.append, quiet=True)
    assert np.all(fixed["reps"] == 7)
    ceilings = {
        "fp32_fma_peak": (60000.0, "GFLOP/s", "x"),
        "fp64_fma_peak": (30000.0, "GFLOP/s", "x"),
        "dram_copy_bandwidth": (3000.0, "GB/s", "x"),
    }
    out = tmp_path / "out"
    maps = pb.write_outputs(out, results, ceilings, "Fake GPU 1", ks, step=16, log=logs.append)
    for f in (
        "primitives.csv",
        "roofline.csv",
        "primitives_map.png",
        "Fake_GPU_1_unlabeled.npy",
        "Fake_GPU_1_labeled.npy",
    ):
        assert (out / f).is_file(), f
    for labeled in (False, True):
        cached = load_map("Fake GPU 1", labeled)
        assert cached is not None and np.array_equal(cached, maps[labeled])
        assert PRIMITIVES[maps[labeled][1, 1]] == "ss" and PRIMITIVES[maps[labeled][64, 64]] == "ds"
        assert PRIMITIVES[maps[labeled][64, 2]] == "ds" and PRIMITIVES[maps[labeled][2, 64]] == "sd"
    with open(out / "primitives.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 2 * ks.size**2
    assert list(rows[0]) == ["labeled", "k1", "k2", "ns_ss", "ns_dd", "ns_ds", "ns_sd", "best",
                             "gflops_ss", "gflops_dd", "gflops_ds", "gflops_sd"]  # fmt: skip
    r = next(r for r in rows if r["k1"] == "64" and r["k2"] == "64" and r["labeled"] == "1")
    assert float(r["gflops_dd"]) == pytest.approx(2 * 64 * 64 / float(r["ns_dd"]), rel=1e-4)
    with open(out / "roofline.csv") as fh:
        roof = {row["name"]: row for row in csv.DictReader(fh)}
    assert float(roof["fp32_fma_peak"]["value"]) == 60000.0
    frac = float(roof["dd_k64_unlabeled_frac_fp32_peak"]["value"])
    assert frac == pytest.approx(float(roof["dd_k64_unlabeled"]["value"]) / 60000.0, rel=1e-4)
    assert "check_max_rel_err_labeled" in roof
    assert any("wins" in line for line in logs)


def test_main_without_gpu_or_with_bad_args(tmp_path: Path) -> None:
    from mgkflow.gpu import device_available

    with pytest.raises(SystemExit):
        pb.main(["--step", "0", "--out", str(tmp_path)])
    with pytest.raises(SystemExit):
        pb.main(["--kinds", "weird", "--out", str(tmp_path)])
    if not device_available():
        assert pb.main(["--out", str(tmp_path)]) == 1
