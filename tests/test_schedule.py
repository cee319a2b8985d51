"""The per-block solver's XMV schedule mirrored on the host (mgkflow.gpu.schedule) and its balance bench."""

from __future__ import annotations

import csv
import re
import shutil
import subprocess

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mgkflow.bench import balance
from mgkflow.gpu.schedule import (
    UNIT_OVERHEAD,
    optimal_ranges,
    round_robin_loads,
    schedule_ranges,
    unit_costs,
    warp_loads,
)
from mgkflow.gpu.source import template_text


@settings(max_examples=200, deadline=None)
@given(
    costs=st.lists(st.integers(1, 5000), min_size=1, max_size=700),
    nwarp=st.sampled_from([1, 2, 3, 16, 32]),
)
def test_ranges_cover_every_unit_once_within_the_bound(costs: list[int], nwarp: int) -> None:
    c = np.array(costs, dtype=np.int64)
    starts = schedule_ranges(c, nwarp)
    assert starts.shape == (nwarp + 1,)
    assert starts[0] == 0 and starts[-1] == c.size
    assert np.all(np.diff(starts) >= 0)  # contiguous ranges in unit order: each unit in exactly one
    loads = warp_loads(c, starts)
    assert loads.sum() == c.sum()
    # a warp's units have their midpoints in one total / nwarp interval
    assert np.all(nwarp * loads <= c.sum() + nwarp * c.max())


@settings(max_examples=100, deadline=None)
@given(costs=st.lists(st.integers(1, 50), min_size=1, max_size=200), nwarp=st.sampled_from([2, 16, 32]))
def test_ranges_follow_the_midpoint_rule(costs: list[int], nwarp: int) -> None:
    """Unit u is in the range of warp floor(nwarp m_u / total), m_u its cost's midpoint (the kernel's rule)."""
    c = np.array(costs, dtype=np.int64)
    starts = schedule_ranges(c, nwarp)
    total, before = int(c.sum()), 0
    for u, cu in enumerate(c.tolist()):
        w = min(nwarp - 1, (2 * before + cu) * nwarp // (2 * total))
        assert starts[w] <= u < starts[w + 1]
        before += cu


def test_equal_costs_split_evenly() -> None:
    assert warp_loads(np.ones(64, np.int64), schedule_ranges(np.ones(64, np.int64), 32)).tolist() == [2] * 32


def test_schedule_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="nwarp"):
        schedule_ranges(np.ones(4, np.int64), 0)
    with pytest.raises(ValueError, match="at least 1"):
        schedule_ranges(np.array([1, 0, 2]), 4)
    assert schedule_ranges(np.zeros(0, np.int64), 4).tolist() == [0] * 5


@settings(max_examples=60, deadline=None)
@given(
    d1=st.lists(st.integers(0, 40), min_size=8, max_size=24).map(lambda v: v[: 8 * (len(v) // 8)]),
    d2=st.lists(st.integers(0, 40), min_size=8, max_size=24).map(lambda v: v[: 8 * (len(v) // 8)]),
)
def test_unit_costs_are_the_busiest_lanes_products(d1: list[int], d2: list[int]) -> None:
    """Lane (x, u) of tile pair (I, I2) walks rows x and 7 - x of G1's tile against u and 7 - u of G2's."""
    a, b = np.array(d1), np.array(d2)
    nt1, nt2 = a.size // 8, b.size // 8
    tiles, halves = unit_costs(a, b), unit_costs(a, b, halves=True)
    assert tiles.shape == (nt1 * nt2,) and halves.shape == (2 * nt1 * nt2,)
    for I in range(nt1):
        for I2 in range(nt2):
            tp = I * nt2 + I2
            lane_a = [a[8 * I + x] * b[8 * I2 + u] for x in range(4) for u in range(8)]
            lane_b = [a[8 * I + 7 - x] * b[8 * I2 + 7 - u] for x in range(4) for u in range(8)]
            assert tiles[tp] == max(p + q for p, q in zip(lane_a, lane_b)) + 2 * UNIT_OVERHEAD
            assert halves[2 * tp] == max(lane_a) + UNIT_OVERHEAD
            assert halves[2 * tp + 1] == max(lane_b) + UNIT_OVERHEAD


def test_unit_overhead_is_the_kernels() -> None:
    src = template_text("mgk_solver.cu")
    assert int(re.search(r"#define UNIT_OVERHEAD (\d+)", src).group(1)) == UNIT_OVERHEAD


def test_round_robin_loads() -> None:
    assert round_robin_loads(np.arange(1, 7), 4).tolist() == [1 + 5, 2 + 6, 3, 4]


def test_balance_bench_writes_its_table(tmp_path) -> None:
    assert balance.main(["--workloads", "ba", "--graphs", "6", "--pairs", "4", "--warps", "32,16",
                         "--out", str(tmp_path)]) == 0  # fmt: skip
    with open(tmp_path / "balance.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert {(r["warps"], r["schedule"]) for r in rows} == {
        (w, s) for w in ("32", "16") for s in balance.SCHEDULES
    }
    eff = {(r["warps"], r["schedule"]): float(r["efficiency"]) for r in rows}
    assert all(0 < v <= 1 for v in eff.values())
    # on BA's hubs the ranges beat the round robin
    assert eff[("32", "ranges-tiles")] > eff[("32", "round-robin")]


def test_balance_bench_rejects_bad_warps(capsys) -> None:
    with pytest.raises(SystemExit):
        balance.main(["--warps", "x"])
    assert "--warps" in capsys.readouterr().err


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not available")
def test_tile_pair_cursor_walks_the_divisions_tiles(tmp_path) -> None:
    """The passes over half tile pairs track (I, I2) of tile pair tp = I nt2 + I2 with mgk_solver.cu's TP_CURSOR and
    TP_NEXT instead of dividing every tile pair: compiled with gcc from the kernel's own text, the walk of every
    range [k0, e) of units (both branches of XMV_PASS_HALVES: whole tile pairs and single halves) gives tp / nt2
    and tp % nt2 at every unit."""
    text = template_text("mgk_solver.cu")
    macros = re.search(r"#define TP_CURSOR\(k0\).*?\n(#define TP_NEXT.*?\n(?:.*\\\n)*.*\n)", text)
    assert macros is not None
    cursor = macros.group(0)
    src = tmp_path / "cursor.c"
    src.write_text(
        "#include <stdio.h>\n"
        + cursor
        + """
int main(void) {
    int bad = 0, walked = 0;
    for (int nt2 = 1; nt2 <= 9; ++nt2)
        for (int n_tp = 1; n_tp <= 30; ++n_tp)
            for (int k0 = 0; k0 < 2 * n_tp; ++k0)
                for (int e = k0 + 1; e <= 2 * n_tp; ++e) {
                    TP_CURSOR(k0)
                    for (int k_ = k0; k_ < e;) {
                        const int tp = k_ >> 1;
                        bad += cI_ != tp / nt2 || cI2_ != tp % nt2;
                        ++walked;
                        if (!(k_ & 1) && k_ + 1 < e) {
                            k_ += 2;
                            TP_NEXT
                        } else {
                            k_ += 1;
                            if (!(k_ & 1)) TP_NEXT
                        }
                    }
                }
    printf("%d %d\\n", bad, walked);
    return 0;
}
"""
    )
    exe = tmp_path / "cursor"
    subprocess.run(["gcc", "-std=c99", "-Wall", "-Werror", "-o", str(exe), str(src)], check=True)
    bad, walked = map(int, subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.split())
    assert walked > 10_000 and bad == 0


@settings(max_examples=200, deadline=None)
@given(costs=st.lists(st.integers(1, 60), min_size=1, max_size=12), nwarp=st.integers(1, 5))
def test_optimal_ranges_are_the_least_busiest_warp(costs: list[int], nwarp: int) -> None:
    """optimal_ranges covers every unit once in order, and its busiest warp carries the least of all ways to cut
    the units into nwarp contiguous ranges (a dynamic program over the cuts), never more than the kernel's
    midpoint ranges."""
    c = np.array(costs)
    starts = optimal_ranges(c, nwarp)
    assert starts[0] == 0 and starts[-1] == len(c) and np.all(np.diff(starts) >= 0)
    got = warp_loads(c, starts).max()
    prefix = np.concatenate([[0], np.cumsum(c)])
    best = np.full((nwarp + 1, len(c) + 1), np.inf)  # best[w, i]: the least busiest load of units 0..i-1 on w warps
    best[0, 0] = 0
    for w in range(1, nwarp + 1):
        for i in range(len(c) + 1):
            best[w, i] = min(max(best[w - 1, j], prefix[i] - prefix[j]) for j in range(i + 1))
    assert got == best[nwarp, len(c)]
    assert got <= warp_loads(c, schedule_ranges(c, nwarp)).max()
