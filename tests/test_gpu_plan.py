"""Launch groups of the GPU backend (mgkflow.gpu.plan), on CPU."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mgkflow.gpu.plan import plan_launches, scratch_doubles

SMEM = 200_000


def _groups(plan):
    return [plan.wide, plan.tiny, *plan.resident, *plan.shared, plan.global_]


@settings(max_examples=60, deadline=None)
@given(
    tiles=st.lists(st.integers(1, 4000), min_size=1, max_size=60),
    nnz=st.lists(st.integers(1, 200_000), min_size=1, max_size=60),
    wide=st.sampled_from(["auto", True, False]),
    small_block=st.sampled_from([0, 128]),
    budget=st.sampled_from([1024, 10**7, 10**11]),
    n_sm=st.sampled_from([1, 132]),
    resident=st.sampled_from([0, 20]),
)
def test_every_pair_lands_in_exactly_one_nonempty_group(tiles, nnz, wide, small_block, budget, n_sm, resident) -> None:
    n = min(len(tiles), len(nnz))
    N = np.array(tiles[:n]) * 64
    products = np.array(nnz[:n], dtype=float) ** 2
    plan = plan_launches(N, products, per_entry=12, smem_cap=SMEM, budget=budget, n_sm=n_sm, wide=wide,
                         small_block=small_block, resident_per_entry=resident)  # fmt: skip
    groups = _groups(plan)
    everything = np.concatenate(groups)
    assert np.array_equal(np.sort(everything), np.arange(n))
    assert all(g.size for g in plan.shared)
    per_block = np.concatenate([np.zeros(0, dtype=np.int64), *plan.groups()])
    assert sorted(per_block.tolist()) == sorted(set(range(n)) - set(plan.wide.tolist()))
    if resident:  # two bins: up to half the capacity, then up to all of it; nothing that fits goes to a shared bin
        half, full = plan.resident
        assert (N[half] * resident <= SMEM // 2).all() and (N[full] * resident > SMEM // 2).all()
        assert (N[full] * resident <= SMEM).all()
        for g in plan.shared:
            assert (N[g] * resident > SMEM).all()
    else:
        assert plan.resident == []
    fits = N * 12 <= SMEM
    assert fits[plan.tiny].all() and (N[plan.tiny] <= 1024).all()
    if small_block == 0:
        assert plan.tiny.size == 0
    for g in plan.shared:
        assert fits[g].all()
        if small_block:
            assert (N[g] > 1024).all()
    assert (~fits[plan.global_]).all()
    if wide is True:
        assert plan.wide.size == n
    elif wide is False:
        assert plan.wide.size == 0
    else:
        # a pair whose one-block scratch cannot fit always goes wide
        too_big = 8 * scratch_doubles(N, fits, True, 4) > budget
        assert set(np.flatnonzero(too_big)) <= set(plan.wide.tolist())


def test_auto_wide_only_for_few_big_pairs() -> None:
    N = np.full(10, 9216)
    products = np.full(10, 1e9)
    kw = dict(per_entry=12, smem_cap=SMEM, budget=10**10, wide="auto")
    assert plan_launches(N, products, n_sm=132, **kw).wide.size == 10  # 10 big pairs < 132 SMs
    assert plan_launches(N, products, n_sm=4, **kw).wide.size == 0  # enough big pairs to fill the device
    assert plan_launches(N, np.full(10, 1e5), n_sm=132, **kw).wide.size == 0  # small pairs


def test_bad_wide_option() -> None:
    with pytest.raises(ValueError, match="wide"):
        plan_launches(np.array([64]), np.array([1.0]), per_entry=12, smem_cap=SMEM, budget=10**9, n_sm=1, wide="x")


def test_host_cost_bench_runs_on_the_fake_driver() -> None:
    """``python -m mgkflow.bench.gpu_host`` (its own process: the fake PyCUDA stays there) times calls."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [os.getcwd(), os.environ.get("PYTHONPATH")]))}
    for extra in (["--solve-only"], []):
        out = subprocess.run([sys.executable, "-m", "mgkflow.bench.gpu_host", "--n", "12", "--reps", "2", *extra],
                             capture_output=True, text=True, timeout=120, env=env)  # fmt: skip
        assert out.returncode == 0, out.stderr[-2000:]
        assert "per call (host only, fake driver)" in out.stdout
