"""Smoke test of the CPU benchmark (``python -m mgkflow.bench cpu``)."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from mgkflow.bench import cpu


def test_bench_cpu_writes_csv(tmp_path, capsys):
    assert cpu.main(["--n-graphs", "2", "--repeats", "1", "--no-grakel", "--out", str(tmp_path)]) == 0
    rows = list(csv.DictReader((tmp_path / "cpu_bench.csv").read_text().splitlines()))
    assert [r["method"] for r in rows] == ["mgkflow-cpu", "scipy-cg-naive"]
    for r in rows:
        assert r["pairs"] == "3" and float(r["ms_per_pair"]) > 0
    # the naive solver computes the same kernel
    assert float(rows[1]["max_rel_diff_vs_mgkflow"]) < 1e-9
    assert "ms/pair" in capsys.readouterr().out


def test_bench_graphs_follow_the_nws_convention():
    gs = cpu.nws_graphs(2)
    assert [g.n_nodes for g in gs] == [96, 96]
    assert sorted(gs[0].node_labels) == ["label"] and sorted(gs[0].edge_labels) == ["length"]
    np.testing.assert_array_equal(gs[1].node_labels["label"], gs[1].degree_sum().astype(int) % 3)


def test_bench_rejects_bad_arguments():
    with pytest.raises(SystemExit):
        cpu.main(["--n-graphs", "0"])
