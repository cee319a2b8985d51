"""The row-pair XMV's shared-memory loads of P modelled on the host (mgkflow.gpu.banks) and its bench."""

from __future__ import annotations

import csv

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mgkflow.bench import banks as bench_banks
from mgkflow.gpu.banks import load_wavefronts, wavefronts


@given(st.lists(st.integers(0, 4095), min_size=1, max_size=32))
def test_wavefronts_lie_between_the_bank_bound_and_the_distinct_addresses(addresses: list[int]) -> None:
    distinct = len(set(addresses))
    w = wavefronts(np.array(addresses))
    assert -(-distinct // 16) <= w <= distinct  # 16 doubles a wavefront at best, one at worst
    assert w == wavefronts(np.array(addresses + addresses))  # repeated addresses are broadcasts


def test_a_request_of_one_bank_takes_a_wavefront_per_address() -> None:
    assert wavefronts(16 * np.arange(8)) == 8
    assert wavefronts(np.array([], np.int64)) == 0


def test_rows_of_a_tile_on_distinct_residues_take_two_wavefronts_a_request() -> None:
    # a G2 tile whose rows' k-th columns are distinct mod 8, a G1 tile whose half tiles split their parities
    g = [np.array([(i + 1) % 8, (i + 3) % 8, (i + 6) % 8]) for i in range(8)]
    req, waves = load_wavefronts(g, g)
    assert req == 2 * 3 * 3 and waves == 2 * req
    # one column a row: G2's rows at distinct residues of its second tile, or pairwise at one residue of two tiles
    g1 = [np.array([0])] * 8
    spread = [np.array([8 + u]) for u in range(8)] + [np.zeros(0, np.int64)] * 8
    paired = [np.array([u if u % 2 == 0 else 8 + u - 1]) for u in range(8)] + [np.zeros(0, np.int64)] * 8
    assert load_wavefronts(g1, spread) == (2, 2)  # 8 addresses on 8 banks (the lanes of one u: a broadcast)
    assert load_wavefronts(g1, paired) == (2, 4)  # two addresses on each of 4 banks


def test_layout_rows_are_the_graphs_rows_and_spread_beats_column_order() -> None:
    layouts = bench_banks.workload_rows("ba", 6)
    for cols, spread in zip(layouts["columns"], layouts["spread"], strict=True):
        assert len(cols) == len(spread) and len(cols) % 8 == 0
        assert all(sorted(a.tolist()) == sorted(b.tolist()) for a, b in zip(cols, spread, strict=True))
    tot = {k: np.sum([load_wavefronts(g[0], g[1], 12) for g in (v[:2], v[2:4])], axis=0) for k, v in layouts.items()}
    assert tot["columns"][0] == tot["spread"][0]  # the same requests: the lanes' trips do not depend on the order
    assert tot["spread"][1] < tot["columns"][1]


def test_banks_bench_writes_its_table(tmp_path) -> None:
    argv = ["--workloads", "nws", "--graphs", "4", "--pairs", "2", "--tile-pairs", "3", "--out", str(tmp_path)]
    assert bench_banks.main(argv) == 0
    with open(tmp_path / "banks.csv") as fh:
        table = list(csv.DictReader(fh))
    assert [r["layout"] for r in table] == list(bench_banks.LAYOUTS)
    assert all(float(r["wavefronts_per_request"]) >= 1 for r in table)


def test_banks_bench_rejects_bad_sizes() -> None:
    with pytest.raises(SystemExit):
        bench_banks.main(["--graphs", "0"])
