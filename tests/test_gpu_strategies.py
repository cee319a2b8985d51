"""The GPU strategy registry and the cost models (mgkflow.gpu.strategies), on CPU."""

from __future__ import annotations

import types

import numpy as np
import pytest

from mgkflow.gpu import strategies
from mgkflow.gpu.strategies.cost import CostModel, fit, load_models, save_models


def test_registry_lists_each_wide_strategy_once() -> None:
    assert {"staged", "wide_rows"} <= set(strategies.available("wide"))
    assert {"rows", "octile"} <= set(strategies.available("block"))
    for name in strategies.available():
        s = strategies.get(name)
        assert s.name == name and s.path in ("block", "wide") and s.kernel and s.feature_names
    with pytest.raises(ValueError, match="unknown GPU strategy"):
        strategies.get("nope")
    with pytest.raises(ValueError, match="already registered"):
        strategies.register(strategies.get("staged"))


def test_fit_recovers_a_linear_cost_and_round_trips(tmp_path) -> None:
    rng = np.random.default_rng(0)
    true = {"intercept": 2e-4, "a": 3e-10, "b": 1e-8}
    rows = []
    for _ in range(30):
        a, b = rng.uniform(1e5, 1e9), rng.uniform(1e3, 1e6)
        t = true["intercept"] + true["a"] * a + true["b"] * b
        rows.append({"a": a, "b": b, "seconds": t * rng.uniform(0.99, 1.01)})
    m = fit("x", ("a", "b"), rows)
    assert m.median_rel_err < 0.02 and m.n_fit == 30
    assert abs(m.coef[0] / true["a"] - 1) < 0.05 and abs(m.coef[1] / true["b"] - 1) < 0.2
    assert all(c >= 0 for c in m.coef) and m.intercept >= 0
    path = save_models({"x": m}, "NVIDIA Test GPU", folder=tmp_path)
    assert path.is_file() and load_models("NVIDIA Test GPU", folder=tmp_path) == {"x": m}
    assert load_models("other", folder=tmp_path) is None
    with pytest.raises(ValueError, match="cannot fit"):
        fit("x", ("a", "b"), rows[:2])
    with pytest.raises(KeyError, match="needs features"):
        m.predict({"a": 1.0})


class _Fake(strategies.Strategy):
    path = "wide"
    kernel = "k"
    feature_names = ("f",)

    def __init__(self, name: str, rank: int, cost: float, why: str = "") -> None:
        self.name, self.fallback_rank, self.cost, self.why = name, rank, cost, why

    def applies(self, ctx):
        return self.why

    def features(self, ctx):
        return {"f": self.cost}


def test_choose_uses_models_then_ranks() -> None:
    fakes = [_Fake("fa", 0, 5.0), _Fake("fb", 1, 1.0), _Fake("fc", 2, 0.1, why="does not fit")]
    for f in fakes:
        strategies.register(f)
    try:
        ctx = types.SimpleNamespace(g1=0, g2=1)
        names = ["fa", "fb", "fc"]
        models = {n: CostModel(n, ("f",), (1.0,), 0.0) for n in names}
        assert strategies.choose(ctx, names, models)[0] == "fb"  # fc cheaper but does not apply
        name, pred, why = strategies.choose(ctx, names, None)
        assert name == "fa" and pred == {} and why == {"fc": "does not fit"}
        assert strategies.choose(ctx, names, {"fa": models["fa"]})[0] == "fa"  # partial models: ranks
        with pytest.raises(ValueError, match="no GPU strategy applies"):
            strategies.choose(ctx, ["fc"], models)
    finally:
        for f in fakes:
            strategies.unregister(f.name)


def test_solver_registry_order_sources_and_rules() -> None:
    """The pair solvers of mgkflow.gpu.solvers: routing order, CUDA sources that exist, claim rules and
    job cost models as the run paths use them, and the registry's checks."""
    from importlib import resources

    from mgkflow.gpu import solvers
    from mgkflow.gpu.plan import LaunchPlan
    from mgkflow.gpu.solvers import compact, per_block, wide

    assert solvers.available() == ["compact", "wide", "per_block"]
    for s in solvers.ranked():
        assert resources.files("mgkflow.gpu").joinpath(s.source).is_file(), s.source
        assert s.kernels and s.claim
    plan = LaunchPlan(wide=np.array([3]), tiny=np.array([0, 2]), shared=[np.array([1])], global_=np.zeros(0, int))
    assert solvers.get("wide").claims(plan).tolist() == [3]
    assert [g.tolist() for g in solvers.get("per_block").claims(plan)] == [[0, 2], [1]]
    db = types.SimpleNamespace(batch=types.SimpleNamespace(n_nodes=np.array([3, 5])), nnz_per_graph=np.array([4, 8]))
    g1, g2 = np.array([0, 1]), np.array([1, 1])
    assert solvers.get("compact").job_cost(db, g1, g2).tolist() == [3 * 5 * 4 + 32, 25 * 4 + 64]
    assert solvers.get("wide").job_cost(db, g1, g2).tolist() == [32.0, 64.0]
    assert per_block.job_order(np.arange(3), np.array([1.0, 3.0, 2.0])).tolist() == [1, 2, 0]
    assert per_block.job_order(np.arange(3), np.array([1.0, 3.0, 2.0]), sort_jobs=False).tolist() == [0, 1, 2]
    assert compact.CompactSolver.source == "mgk_compact.cu" and wide.WideSolver.kernels == wide.WIDE_KERNELS
    with pytest.raises(ValueError, match="already registered"):
        solvers.register(compact.CompactSolver())
    with pytest.raises(ValueError, match="unknown GPU solver"):
        solvers.get("nope")

    class Probe(solvers.Solver):
        name, rank, source = "probe", 1, "mgk_solver.cu"

    solvers.register(Probe())
    try:
        assert solvers.available() == ["compact", "probe", "wide", "per_block"]
    finally:
        solvers.unregister("probe")
    assert "probe" not in solvers.available()
