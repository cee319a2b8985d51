"""The hyperparameter sweep benchmark's procedure (mgkflow.bench.gpu_sweep), on the CPU backend."""

from __future__ import annotations

from mgkflow.bench.gpu_sweep import LENGTH_SCALES, STOP_PROBABILITIES, sweep


def test_sweep_evaluates_twenty_values_and_summarizes() -> None:
    rows, summary = sweep(n_graphs=3, warm=1, order="natural", backend="cpu")
    assert [r["what"] for r in rows] == ["first", "warm"] + ["ls"] * 10 + ["q"] * 10
    assert [r["length_scale"] for r in rows if r["what"] == "ls"] == list(LENGTH_SCALES)
    assert [r["q"] for r in rows if r["what"] == "q"] == list(STOP_PROBABILITIES)
    assert summary["evaluations"] == 20 and summary["compiles_during_sweep"] == 0
    assert summary["ratio_to_warm_max"] >= summary["ratio_to_warm_median"] > 0
    # other values, other kernels: the traces differ
    assert len({round(r["trace"], 12) for r in rows if r["what"] in ("ls", "q")}) == 20
