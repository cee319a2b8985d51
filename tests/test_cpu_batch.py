"""Batches of small pairs in the numba CPU backend (:class:`mgkflow.backends.cpu._Batch`).

A task of small pairs is solved in one compiled call (:func:`~mgkflow.backends.cpu._solve_batch`)
with no Python per pair; its values, nodal blocks and iteration counts are those of the per-pair
path (:meth:`~mgkflow.backends.cpu._Context.solve_pair`, reached here by a batch that declines
every pair) and of the exact oracle. Pairs the batch cannot finish (a node-kernel value not > 0,
extreme weights) go back to the per-pair path.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mgkflow import Graph, datasets
from mgkflow.backends.exact import ExactBackend, solve_pair
from mgkflow.errors import GraphError
from mgkflow.kernels import BaseKernel, Constant, KroneckerDelta, RationalQuadratic, SquareExponential
from mgkflow.system import prepare_graph

pytest.importorskip("numba", reason="the numba CPU engine needs numba")
from mgkflow.backends import cpu as ce  # noqa: E402


def gram_pairs(n: int) -> np.ndarray:
    iu, ju = np.triu_indices(n)
    return np.stack([iu, ju], axis=1)


def labeled_graph(n: int, seed: int, density: float = 0.4, scale: float = 1.0) -> Graph:
    """A random weighted graph (weights in [0.5, 2] times ``scale``) with integer node labels ``l``,
    real node labels ``x`` and ``pp``, and edge labels ``e`` (real) and ``b`` (integer)."""
    rng = np.random.default_rng(seed)
    upper = np.triu(rng.random((n, n)) < density, 1)
    W = np.where(upper, rng.uniform(0.5, 2.0, (n, n)), 0.0)
    E = np.triu(rng.uniform(0.0, 3.0, (n, n)), 1)
    B = np.triu(rng.integers(0, 3, (n, n)), 1)
    return Graph(
        scale * (W + W.T),
        node_labels={"l": rng.integers(0, 3, n), "x": rng.uniform(0.0, 2.0, n), "pp": rng.uniform(0.5, 2.0, n)},
        edge_labels={"e": E + E.T, "b": B + B.T},
        title=f"g{seed}",
    )


def systems(graphs, nk, ek, **kw):
    return [prepare_graph(g, i, nk, ek, **kw) for i, g in enumerate(graphs)]


class Calls:
    """Counts the per-pair solves and the compiled batch calls of a backend call."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        ce.warm_up()  # first: the warm-up's own solves are not the call's
        self.pairs = self.batches = 0
        solve_one, batch = ce._Context.solve_pair, ce._solve_batch

        def counted_pair(ctx, *args, **kwargs):
            self.pairs += 1
            return solve_one(ctx, *args, **kwargs)

        def counted_batch(*args):
            self.batches += 1
            return batch(*args)

        monkeypatch.setattr(ce._Context, "solve_pair", counted_pair)
        monkeypatch.setattr(ce, "_solve_batch", counted_batch)


def decline_every_pair(ts, *args) -> None:
    """A stand-in for ``_solve_batch`` that leaves every pair to the per-pair path."""
    modes = args[-1]
    modes[ts] = -1


def per_pair(monkeypatch: pytest.MonkeyPatch, run, *args):
    """``run(*args)`` with the batch declining every pair: the per-pair path."""
    with monkeypatch.context() as m:
        m.setattr(ce, "_solve_batch", decline_every_pair)
        return run(*args)


NK = KroneckerDelta(0.5, "l")
EK = KroneckerDelta(0.4, "b") * SquareExponential(1.5, "e")
KERNELS = [
    pytest.param(NK, EK, {}, id="cached"),
    pytest.param(NK, EK, {"cache_bytes": 0}, id="matrix-free"),
    pytest.param(NK * SquareExponential(0.7, "x"), Constant(0.8), {}, id="constant-edge-sqexp-node"),
    pytest.param(Constant(1.0), 0.5 * KroneckerDelta(0.3, "b") + 0.5 * SquareExponential(2.0, "e"), {}, id="sum"),
    pytest.param(Constant(1.0), Constant(1.0), {}, id="unlabeled"),
]


@pytest.mark.parametrize("threads", [1, 2])
def test_small_pairs_are_solved_in_compiled_batches_not_pair_by_pair(threads, monkeypatch):
    gs = datasets.molecules(n_graphs=24)
    nk, ek = datasets.default_kernels("molecules")
    xs = systems(gs, nk, ek)
    pairs = gram_pairs(len(xs))
    calls = Calls(monkeypatch)
    be = ce.NumbaCPUBackend(threads=threads)
    vals, its, res, ok = be.solve(xs, xs, pairs, nk, ek)
    assert calls.pairs == 0  # no Python-level solve of any pair
    assert 1 <= calls.batches <= len(pairs) // 8  # many pairs per compiled call
    assert ok.all() and be.last_extra["pairs_cached"] == len(pairs)
    blocks = be.solve_nodal(xs, xs, pairs, nk, ek)[0]
    assert calls.pairs == 0
    np.testing.assert_allclose([b.sum() for b in blocks], vals, rtol=1e-12, atol=0)


@pytest.mark.parametrize("nk, ek, kw", KERNELS)
def test_batch_equals_per_pair_path_and_exact_backend(nk, ek, kw, monkeypatch):
    gs = [labeled_graph(n, seed) for seed, n in enumerate([1, 2, 5, 7, 9, 12, 3])]
    xs = systems(gs, nk, ek, p="pp", q=0.1)
    ys = xs[2:5]
    be = ce.NumbaCPUBackend(threads=2, **kw)
    for pairs, right in ((gram_pairs(len(xs)), xs), (np.array([(i, j) for i in range(7) for j in range(3)]), ys)):
        calls = Calls(monkeypatch)
        vals, its, res, ok = be.solve(xs, right, pairs, nk, ek)
        assert calls.pairs == 0 and calls.batches >= 1
        ref_vals, ref_its, ref_res, ref_ok = per_pair(monkeypatch, be.solve, xs, right, pairs, nk, ek)
        np.testing.assert_allclose(vals, ref_vals, rtol=1e-12, atol=0)
        np.testing.assert_array_equal(its, ref_its)
        assert ok.all() and ref_ok.all()
        exact = ExactBackend().solve(xs, right, pairs, nk, ek).values
        np.testing.assert_allclose(vals, exact, rtol=1e-10, atol=0)


@pytest.mark.parametrize("nk, ek, kw", KERNELS[:3])
def test_batch_nodal_blocks_equal_per_pair_path_and_oracle(nk, ek, kw, monkeypatch):
    gs = [labeled_graph(n, 10 + seed) for seed, n in enumerate([4, 8, 1, 6])]
    xs = systems(gs, nk, ek, p="pp", q=0.2)
    pairs = gram_pairs(len(xs))
    be = ce.NumbaCPUBackend(threads=2, **kw)
    blocks = be.solve_nodal(xs, xs, pairs, nk, ek)[0]
    ref = per_pair(monkeypatch, be.solve_nodal, xs, xs, pairs, nk, ek)[0]
    for t, (i, j) in enumerate(pairs):
        assert blocks[t].shape == ref[t].shape == (xs[i].n, xs[j].n)
        np.testing.assert_allclose(blocks[t], ref[t], rtol=1e-12, atol=1e-300)
        x = np.outer(xs[i].p, xs[j].p) * solve_pair(xs[i], xs[j], nk, ek).x
        np.testing.assert_allclose(blocks[t], x, rtol=1e-9, atol=1e-12 * np.abs(x).max())


def test_pairs_the_batch_cannot_finish_go_to_the_per_pair_path(monkeypatch):
    # a node kernel of 1e-60 between unequal labels: the diagonal D_x / V_x is far above 2^100, and the
    # per-pair path scales the whole system by a power of two (K does not change)
    nk = KroneckerDelta(1e-30, "l") * KroneckerDelta(1e-30, "l")
    gs = [labeled_graph(1, 3), labeled_graph(6, 1), labeled_graph(5, 2)]
    xs = systems(gs, nk, EK)
    pairs = gram_pairs(3)
    calls = Calls(monkeypatch)
    vals = ce.NumbaCPUBackend(threads=2).solve(xs, xs, pairs, nk, EK).values
    assert calls.batches >= 1 and calls.pairs == 5  # all but the one-node graph with itself
    np.testing.assert_allclose(vals, ExactBackend().solve(xs, xs, pairs, nk, EK).values, rtol=1e-10)
    # a node-kernel value of 0: the per-pair path's error, naming the nodes
    nk = KroneckerDelta(0.0, "l")
    zs = systems(gs, nk, Constant(1.0))
    with pytest.raises(GraphError, match="node kernel is 0.0"):
        ce.NumbaCPUBackend(threads=2).solve(zs, zs, [(0, 1)], nk, Constant(1.0))


@pytest.mark.parametrize(
    "nk, kw",
    [
        pytest.param(NK, {"compiled_kernels": False}, id="numpy-kernels"),
        pytest.param(RationalQuadratic(1.0, 2.0, "x"), {}, id="node-kernel-not-compiled"),
    ],
)
def test_what_the_batch_does_not_compile_stays_per_pair(nk: BaseKernel, kw, monkeypatch):
    xs = systems([labeled_graph(n, seed) for seed, n in enumerate([4, 6, 5])], nk, EK)
    pairs = gram_pairs(3)
    calls = Calls(monkeypatch)
    vals = ce.NumbaCPUBackend(threads=2, **kw).solve(xs, xs, pairs, nk, EK).values
    assert calls.batches == 0 and calls.pairs == len(pairs)
    np.testing.assert_allclose(vals, ExactBackend().solve(xs, xs, pairs, nk, EK).values, rtol=1e-10)


def test_gradients_keep_the_per_pair_path(monkeypatch):
    xs = systems([labeled_graph(n, seed) for seed, n in enumerate([3, 5, 4])], NK, EK)
    pairs = gram_pairs(3)
    calls = Calls(monkeypatch)
    be = ce.NumbaCPUBackend(threads=2)
    vals, grads, *_ = be.solve_gradient(xs, xs, pairs, NK, EK, wrt_q=True)
    assert calls.batches == 0 and calls.pairs == len(pairs)
    np.testing.assert_allclose(vals, be.solve(xs, xs, pairs, NK, EK).values, rtol=1e-12)
    assert grads.shape == (len(pairs), 4) and np.isfinite(grads).all()


@st.composite
def small_graphs(draw) -> Graph:
    n = draw(st.integers(1, 7))
    seed = draw(st.integers(0, 2**32 - 1))
    return labeled_graph(n, seed, density=draw(st.sampled_from([0.0, 0.3, 0.7, 1.0])))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(small_graphs(), min_size=1, max_size=4), st.sampled_from(range(len(KERNELS))),
       st.sampled_from([0.05, 0.3, 0.9]))  # fmt: skip
def test_batch_equals_per_pair_and_exact_on_random_graphs(graphs, kernel, q):
    nk, ek, kw = KERNELS[kernel].values
    xs = systems(graphs, nk, ek, q=q)
    pairs = gram_pairs(len(xs))
    be = ce.NumbaCPUBackend(threads=2, **kw)
    vals, its, _, ok = be.solve(xs, xs, pairs, nk, ek)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(ce, "_solve_batch", decline_every_pair)
        ref_vals, ref_its, _, ref_ok = be.solve(xs, xs, pairs, nk, ek)
    np.testing.assert_allclose(vals, ref_vals, rtol=1e-12, atol=0)
    np.testing.assert_array_equal(its, ref_its)
    assert ok.all() == ref_ok.all()
    np.testing.assert_allclose(vals, ExactBackend().solve(xs, xs, pairs, nk, ek).values, rtol=1e-10, atol=0)
