"""Smoke test of the CPU benchmark (``python -m mgkflow.bench cpu``)."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from mgkflow.bench import cpu


def test_bench_cpu_writes_csv(tmp_path, capsys):
    pytest.importorskip("numba")
    assert cpu.main(["--n-graphs", "2", "--repeats", "1", "--no-grakel", "--out", str(tmp_path)]) == 0
    rows = list(csv.DictReader((tmp_path / "cpu_bench.csv").read_text().splitlines()))
    methods = [r["method"] for r in rows]
    assert methods[0] == "scipy-exact" and methods[1] == "numba-cpu-1t" and methods[-1] == "scipy-cg-naive"
    for r in rows:
        assert r["pairs"] == "3" and float(r["ms_per_pair"]) > 0
        assert float(r["seconds_min"]) <= float(r["seconds_median"])
    # the numba backend and the naive solver compute the exact backend's kernel
    for r in rows[1:]:
        assert float(r["max_rel_diff_vs_exact"]) < 1e-9
    assert "ms/pair" in capsys.readouterr().out


def test_large_pair_reports_time_memory_and_mode():
    pytest.importorskip("numba")
    r = cpu.run_large_pair("unlabeled", large_n=300)
    assert r["mode"] == "constant" and r["converged"] and r["cg_iter"] >= 1
    assert r["peak_rss_mb"] > 0 and r["seconds"] > 0 and r["edge_pairs"] > 0
    with pytest.raises(ValueError, match="unknown case"):
        cpu.run_large_pair("nope")


def test_bench_graphs_follow_the_nws_convention():
    gs = cpu.nws_graphs(2)
    assert [g.n_nodes for g in gs] == [96, 96]
    assert sorted(gs[0].node_labels) == ["label"] and sorted(gs[0].edge_labels) == ["length"]
    np.testing.assert_array_equal(gs[1].node_labels["label"], gs[1].degree_sum().astype(int) % 3)


def test_bench_rejects_bad_arguments():
    with pytest.raises(SystemExit):
        cpu.main(["--n-graphs", "0"])
