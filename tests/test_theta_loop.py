"""The θ loop of a hyperparameter search (issue 23 item 6): the same graphs at a new θ every step.

What a step re-uses must give what a fresh kernel gives: the systems refreshed for another q
(``with_stop``, ``with_stop_many``), the label-kind check skipped for the same graphs, the one-pass
assembly of K and dK (``gram_with_gradient``), and the GPU gradient's rows moved from job order to pair order.
"""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from mgkflow import Graph, MarginalizedGraphKernel
from mgkflow.errors import GraphError
from mgkflow.evaluation.assemble import gram_with_gradient
from mgkflow.evaluation.gradient import log_space, normalized_gradient
from mgkflow.evaluation.systems import gram_pairs, p_exponents
from mgkflow.kernels import Constant, KroneckerDelta
from mgkflow.system import Restopped, prepare_graph, stop_vectors, system_graphs, with_stop, with_stop_many


def _graphs(n: int = 7, seed: int = 0) -> list[Graph]:
    rng = np.random.default_rng(seed)
    out = []
    for k in range(n):
        g = nx.gnm_random_graph(int(rng.integers(3, 9)), int(rng.integers(3, 12)), seed=int(rng.integers(1 << 30)))
        for i in g.nodes:
            g.nodes[i]["a"] = int(rng.integers(0, 3))
        for i, j in g.edges:
            g.edges[i, j]["b"] = int(rng.integers(0, 2))
            g.edges[i, j]["weight"] = float(rng.uniform(0.5, 2.0))
        out.append(Graph.from_networkx(g, node_labels=["a"], edge_labels=["b"], title=f"g{k}"))
    return out


def _kernel(q: float = 0.2) -> MarginalizedGraphKernel:
    return MarginalizedGraphKernel(
        KroneckerDelta(0.5, "a", h_bounds=(0.05, 0.95)),
        KroneckerDelta(0.4, "b", h_bounds=(0.05, 0.95)),
        q=q,
        q_bounds=(0.01, 0.9),
        normalize=True,
        backend="cpu",
    )


@pytest.mark.parametrize("normalize", [True, False])
def test_steps_match_a_fresh_kernel(normalize: bool) -> None:
    graphs = _graphs()
    kern = _kernel()
    kern.normalize = normalize
    rng = np.random.default_rng(1)
    theta = kern.theta.copy()
    for _ in range(4):  # every hyperparameter moves, q included, as in an optimizer's step
        step = np.clip(theta + rng.normal(0, 0.2, theta.size), kern.bounds[:, 0], kern.bounds[:, 1])
        kern.theta = step
        K, dK = kern(graphs, eval_gradient=True)
        fresh = _kernel()
        fresh.normalize = normalize
        fresh.theta = step
        K0, dK0 = fresh(graphs, eval_gradient=True)
        assert dK.shape == (len(graphs), len(graphs), step.size)
        np.testing.assert_allclose(K, K0, rtol=1e-12, atol=0)
        np.testing.assert_allclose(dK, dK0, rtol=1e-11, atol=1e-14)
        np.testing.assert_array_equal(K, K.T)


def test_with_stop_equals_a_fresh_preparation() -> None:
    graphs = _graphs(5, seed=3) + [Graph(np.zeros((2, 2)))]  # isolated nodes: raw degree 1
    nk, ek = Constant(1.0), Constant(1.0)
    systems = [prepare_graph(g, i, nk, ek, q=0.3) for i, g in enumerate(graphs)]
    many = with_stop_many(systems, 0.07)
    for s, m, g in zip(systems, many, graphs, strict=True):
        ref = prepare_graph(g, s.index, nk, ek, q=0.07)
        one = with_stop(s, 0.07)
        for got in (one, m):
            np.testing.assert_array_equal(got.d, ref.d)
            np.testing.assert_array_equal(got.q, ref.q)
            np.testing.assert_array_equal(got.p, ref.p)
            assert got.graph is s.graph and got.label_kinds == ref.label_kinds


def test_restopped_systems_are_made_on_demand_and_chain_to_their_base() -> None:
    graphs = _graphs(6, seed=4)
    nk, ek = Constant(1.0), Constant(1.0)
    systems = [prepare_graph(g, i, nk, ek, q=0.3) for i, g in enumerate(graphs)]
    first = with_stop_many(systems, 0.1)
    again = with_stop_many(first, 0.45)  # a step after a step: the same base, not a chain
    assert isinstance(again, Restopped) and again.base is first.base and again.graphs is first.graphs
    assert all(m is None for m in again._made)  # nothing made yet
    q, d = stop_vectors(again)
    np.testing.assert_array_equal(q, np.concatenate([with_stop(s, 0.45).q for s in systems]))
    np.testing.assert_array_equal(d, np.concatenate([with_stop(s, 0.45).d for s in systems]))
    assert system_graphs(again) == tuple(graphs) == system_graphs(systems)
    assert all(m is None for m in again._made)
    got = again[-1]
    ref = with_stop(systems[-1], 0.45)
    np.testing.assert_array_equal(got.d, ref.d)
    assert got is again[5] and again[1:3] == [again[1], again[2]] and list(again)[4] is again[4]
    assert got.graph is systems[-1].graph and got.index == 5 and got.rowsum is systems[-1].rowsum
    with pytest.raises(IndexError):
        again[6]
    np.testing.assert_array_equal(p_exponents(again), p_exponents(systems))
    np.testing.assert_array_equal(stop_vectors(systems)[1], np.concatenate([s.d for s in systems]))
    assert with_stop_many([], 0.2) == []
    with pytest.raises(GraphError, match="graph 0"):
        with_stop_many(again, 1.5)


@pytest.mark.parametrize("q", [1.5, 0.0, 1e-12, float("nan")])
def test_a_bad_q_after_a_step_names_the_graph(q: float) -> None:
    graphs = _graphs(3)
    kern = _kernel()
    kern(graphs, eval_gradient=True)
    kern.q = q
    with pytest.raises(GraphError, match=r"in X: graph 0"):
        kern(graphs, eval_gradient=True)


def test_label_kinds_are_checked_when_the_graphs_change() -> None:
    big = Graph(np.array([[0, 1], [1, 0]]), node_labels={"a": np.array([2**53 + 1, 0], dtype=np.int64)})
    half = Graph(np.array([[0, 1], [1, 0]]), node_labels={"a": np.array([0.5, 1.0])})
    kern = MarginalizedGraphKernel(KroneckerDelta(0.5, "a"), Constant(1.0), q=0.2, backend="cpu")
    kern([big])
    kern([big])  # the same graph again: the check is skipped, rightly
    with pytest.raises(GraphError, match="2\\*\\*53|float64"):
        kern([big, half])


@pytest.mark.parametrize("normalize", [True, False])
def test_one_pass_assembly_matches_numpy(normalize: bool) -> None:
    rng = np.random.default_rng(5)
    n, h = 9, 4
    pairs = gram_pairs(n)[rng.permutation(n * (n + 1) // 2)]  # any order of the pairs
    vals = rng.uniform(0.5, 2.0, len(pairs))
    grads = rng.normal(size=(len(pairs), h))
    its = rng.integers(1, 50, len(pairs))
    res = rng.uniform(0, 1e-9, len(pairs))
    conv = rng.uniform(size=len(pairs)) > 0.1
    cols = np.array([0, 2, 3])
    scale = np.array([0.3, 2.0, 0.7])
    K, dK, I, R, C, bad = gram_with_gradient(n, pairs, vals, grads, its, res, conv, cols, scale, normalize)
    Kr, dKr = np.empty((n, n)), np.empty((n, n, h))
    for (i, j), v, g in zip(pairs, vals, grads, strict=True):
        Kr[i, j] = Kr[j, i] = v
        dKr[i, j] = dKr[j, i] = g
    if normalize:
        kd, dkd = np.diag(Kr).copy(), dKr[np.arange(n), np.arange(n)].copy()
        Kr, dKr = normalized_gradient(Kr, dKr, kd, dkd, kd, dkd)
    dKr = log_space(dKr[:, :, cols], scale)
    np.testing.assert_allclose(K, Kr, rtol=1e-15)
    np.testing.assert_allclose(dK, dKr, rtol=1e-13, atol=1e-15)
    assert bad == 0
    assert I[pairs[0, 0], pairs[0, 1]] == its[0] and C[pairs[3, 1], pairs[3, 0]] == conv[3]
    assert R[pairs[-1, 1], pairs[-1, 0]] == res[-1]
    grads[2, 2] = np.inf
    assert gram_with_gradient(n, pairs, vals, grads, its, res, conv, cols, scale, normalize)[-1] == 1  # one pair
    grads[2, 1] = np.nan  # a column nobody asked for
    assert gram_with_gradient(n, pairs, vals, grads, its, res, conv, cols, scale, normalize)[-1] == 1


class _FakeCuda:
    """memcpy_dtoh from a numpy array standing for device memory."""

    def memcpy_dtoh(self, host: np.ndarray, dev: np.ndarray) -> None:
        host[...] = dev.reshape(-1)[: host.size].reshape(host.shape)


def test_gradient_rows_moved_to_pair_order() -> None:
    from mgkflow.gpu.gradient import _GradientOut

    rng = np.random.default_rng(7)
    npairs, h = 11, 3
    truth = rng.normal(size=(npairs, h))
    launches = [np.array([4, 0, 9]), np.array([10, 2, 5, 1]), np.array([3, 8])]  # pair 6 and 7: the CPU's
    out = _GradientOut(_FakeCuda(), npairs, h, buf=np.zeros(npairs * h))
    out.unsolved(np.array([6, 7]))
    for order in launches:
        out.buf[: order.size * h] = truth[order].reshape(-1)  # the launch wrote its jobs' rows
        out.collect(order)
    got = out.grad
    solved = np.concatenate(launches)
    np.testing.assert_array_equal(got[solved], truth[solved])
    np.testing.assert_array_equal(got[[6, 7]], 0.0)


def test_compiled_moves_equal_numpy_indexing() -> None:
    from mgkflow.gpu.moves import PARALLEL_MIN, scatter_results, scatter_rows

    rng = np.random.default_rng(3)
    n = 2 * PARALLEL_MIN + 17  # above the size where the compiled passes take over
    order = rng.permutation(n)
    ints = rng.integers(0, 99, n).astype(np.int32)
    src = (rng.normal(size=n), ints, rng.random(n), (ints % 2).astype(np.int32))
    got = (np.zeros(n), np.zeros(n, dtype=np.int64), np.zeros(n), np.zeros(n, dtype=bool))
    want = tuple(np.zeros_like(a) for a in got)
    scatter_results(order, got, src)
    for w, s in zip(want, src, strict=True):
        w[order] = s
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)
    rows, out = rng.normal(size=(n, 5)), np.zeros((n, 5))
    scatter_rows(order, rows, out)
    np.testing.assert_array_equal(out[order], rows)


@pytest.mark.parametrize(("normalize", "lmin"), [(True, 0), (False, 0), (True, 1)])
def test_contraction_over_pairs_equals_the_dense_gradient(normalize: bool, lmin: int) -> None:
    graphs = _graphs(6, seed=11)
    kern = _kernel()
    kern.normalize, kern.lmin = normalize, lmin
    K0, dK0 = kern(graphs, eval_gradient=True)
    K, contract = kern.gram_contraction(graphs)
    np.testing.assert_allclose(K, K0, rtol=1e-13)
    W = np.random.default_rng(2).normal(size=K.shape)  # not symmetric: both halves count
    ref = np.einsum("ij,ijh->h", W, dK0)
    np.testing.assert_allclose(contract(W), ref, rtol=1e-11, atol=1e-13 * np.abs(ref).max())


def test_gp_covariance_contracts_through_exp_similarity() -> None:
    from sklearn.gaussian_process.kernels import ConstantKernel, WhiteKernel

    from mgkflow.learn import Cached, ExpSimilarity
    from mgkflow.learn.contract import gram_contraction

    graphs = _graphs(6, seed=13)
    fixed = _kernel()
    fixed.set_params(q_bounds="fixed")
    for inner in (_kernel(), fixed):  # graph hyperparameters free (the θ loop), and q fixed
        cov = ConstantKernel(1.3) * ExpSimilarity(Cached(inner), gamma=2.5) + WhiteKernel(0.1)
        K0, dK0 = cov(graphs, eval_gradient=True)
        K, contract = gram_contraction(cov, graphs)
        W = np.random.default_rng(3).normal(size=K.shape)
        np.testing.assert_allclose(K, K0, rtol=1e-13)
        np.testing.assert_allclose(contract(W), np.einsum("ij,ijh->h", W, dK0), rtol=1e-10, atol=1e-12)


def test_contraction_refuses_bad_weights() -> None:
    from mgkflow.errors import ParameterError, ParameterTypeError

    graphs = _graphs(3)
    _, contract = _kernel().gram_contraction(graphs)
    with pytest.raises(ParameterError, match=r"shape \(3, 3\)"):
        contract(np.ones((2, 3)))
    with pytest.raises(ParameterTypeError, match="array of numbers"):
        contract([["a", "b", "c"]] * 3)
    with pytest.raises(ParameterTypeError):
        _kernel().gram_contraction(graphs[0])


def test_a_cross_call_reuses_the_systems_of_the_previous_gram(monkeypatch) -> None:
    """K(test, train) after K(train): the training graphs are not prepared again (their systems come from
    the kernel's earlier X, at their new positions), and K is what a fresh kernel gives."""
    import mgkflow.evaluation.systems as S

    graphs = _graphs(9, seed=11)
    train, test = graphs[:6], graphs[6:]
    kern = _kernel()
    kern(train)
    calls = []
    real = S.prepare_graph
    monkeypatch.setattr(S, "prepare_graph", lambda g, i, *a, **k: calls.append(g) or real(g, i, *a, **k))
    K = kern(test, train[::-1])  # the training graphs at other positions
    assert len(calls) == len(test) and all(any(g is t for t in test) for g in calls)
    ys = S.prepare(kern, train[::-1], "Y")
    assert [s.index for s in ys] == list(range(len(train)))
    np.testing.assert_allclose(K, _kernel()(test, train[::-1]), rtol=1e-13)
