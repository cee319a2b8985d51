"""The staged pipeline: stages, statistics, invariance of K under reordering."""

import numpy as np
import pytest

from mgkflow import Graph, MarginalizedGraphKernel
from mgkflow.format.count import count_octiles
from mgkflow.kernels import KroneckerDelta, SquareExponential
from mgkflow.pipeline import Load, Pack, Pipeline, PipelineState, Reorder, Solve
from mgkflow.reorder import available_methods


def _labeled(n, seed):
    rng = np.random.default_rng(seed)
    A = np.triu(rng.random((n, n)) < 0.3, 1)
    A = (A | A.T).astype(float)
    L = np.triu(rng.uniform(1, 2, (n, n)), 1)
    return Graph(A, node_labels={"label": rng.integers(0, 3, n)}, edge_labels={"length": (L + L.T) * (A > 0)})


def test_pipeline_runs_all_stages_and_collects_stats():
    res = Pipeline([Load("nws", n_graphs=5), Reorder("rcm"), Pack(build=False), Solve(backend="cpu")]).run()
    assert res.gram.shape == (5, 5)
    assert list(res.stats["stage"]) == ["load", "reorder", "pack", "solve"]
    st = res.stats.set_index("stage")
    assert st.loc["load", "graphs"] == 5
    assert st.loc["reorder", "octiles_after"] == st.loc["pack", "octiles"]
    assert st.loc["solve", "pairs"] == 15
    assert (res.stats["seconds"] >= 0).all()
    # pack figures agree with the counter on the reordered graphs
    assert st.loc["pack", "octiles"] == sum(count_octiles(g) for g in res.state.graphs)
    hist = np.array(st.loc["pack", "density_histogram"].split(), dtype=int)
    assert hist.sum() == st.loc["pack", "octiles"]
    assert (hist * np.arange(65)).sum() == st.loc["pack", "nnz"]


def test_reorder_stage_records_per_graph_and_permutes_everything():
    gs = [_labeled(13, s) for s in range(3)]
    state, st = Reorder("random", seed=3).run(Load(gs).run(PipelineState())[0])
    assert len(st.per_graph) == 3
    for g, h, perm in zip(gs, state.graphs, state.perms):
        assert np.array_equal(h.node_labels["label"], g.node_labels["label"][perm])
        dense_g = g.adjacency.toarray()
        assert np.array_equal(h.adjacency.toarray(), dense_g[np.ix_(perm, perm)])


@pytest.mark.parametrize("method", available_methods())
def test_gram_unchanged_under_every_ordering(method):
    gs = [_labeled(n, s) for s, n in enumerate((7, 12, 17))]
    kw = dict(node_kernel=KroneckerDelta(0.5, "label"), edge_kernel=SquareExponential(1.0, "length"), q=0.05)
    K0 = Pipeline([Load(gs), Solve(backend="cpu", **kw)]).run().gram
    K1 = Pipeline([Load(gs), Reorder(method, seed=1), Solve(backend="cpu", **kw)]).run().gram
    np.testing.assert_allclose(K1, K0, rtol=1e-10)


def test_solve_uses_dataset_default_kernels():
    res = Pipeline([Load("nws", n_graphs=3, labeled=True), Solve(backend="cpu")]).run()
    st = res.stats.set_index("stage")
    assert "label" in st.loc["solve", "node_kernel"]
    gs = res.state.graphs
    from mgkflow.datasets import default_kernels

    nk, ek = default_kernels("nws", labeled=True)
    K = MarginalizedGraphKernel(node_kernel=nk, edge_kernel=ek, backend="cpu")(list(gs))
    np.testing.assert_allclose(res.gram, K, rtol=1e-12)


def test_pipeline_rejects_bad_stages_and_empty_input():
    with pytest.raises(ValueError):
        Pipeline([])
    with pytest.raises(TypeError):
        Pipeline([object()])
    with pytest.raises(ValueError, match="no graphs"):
        Pipeline([Solve(backend="cpu")]).run()
    with pytest.raises(ValueError, match="unknown dataset|valid|choose"):
        Pipeline([Load("no-such-dataset")]).run()


def test_compare_solves_labeled_data_with_the_datasets_kernels() -> None:
    """The solver stage of the comparison uses the dataset's labeled kernels (not Constant)."""
    import numpy as np

    import mgkflow
    from mgkflow.datasets import default_kernels, nws
    from mgkflow.report import compare_orderings

    r = compare_orderings(["nws"], ["natural", "rcm"], n_graphs=3, labeled=True, solve=True, progress=False)
    nk, ek = default_kernels("nws", labeled=True)
    K = mgkflow.MarginalizedGraphKernel(nk, ek, q=0.05, backend="cpu")(nws(n_graphs=3, labeled=True))
    assert (r.summary["cg_iter_median"] > 1).all()
    np.testing.assert_allclose(r.summary["gram_trace"], np.trace(K), rtol=1e-9)


def test_reorder_stage_names_come_from_the_registry():
    with pytest.raises(ValueError, match="available"):
        Reorder("no-such-ordering")


def test_pack_for_a_cpu_solve_is_the_plain_octile_batch():
    res = Pipeline([Load("nws", n_graphs=3), Pack(), Solve(backend="cpu")]).run()
    st = res.stats.set_index("stage")
    assert st.loc["pack", "for"] == "stats" and st.loc["pack", "bytes"] > 0
