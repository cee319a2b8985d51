"""Nodal similarities ``kern(X, Y, nodal=True)`` and ``diag(X, nodal=True)`` against a plain
reference built block by block from the product-graph solution (lmin 0/1, raw and normalized,
Gram and cross matrices, start-probability scaling, the threaded fill, the per-block fallback of
the length-0 term, overflow errors)."""

from __future__ import annotations

import numpy as np
import pytest

import mgkflow.evaluation.nodal as nodal_module
from mgkflow import Graph, GraphError, MarginalizedGraphKernel
from mgkflow.backends.exact import solve_pair
from mgkflow.kernels import KroneckerDelta, SquareExponential
from mgkflow.mgk import LMIN_RESOLUTION
from mgkflow.system import prepare_graph

NK = KroneckerDelta(0.4, "l") * SquareExponential(1.3, "x")
EK = SquareExponential(0.8, "e")
Q = 0.1


def graphs(count: int, seed: int, float_labels: bool = False, edgeless: bool = False) -> list[Graph]:
    """Small random connected graphs (1 to 7 nodes, weighted), labels "l" (int; float in every
    other graph with ``float_labels``) and "x" (float) on nodes, "e" on edges."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(count):
        n = int(rng.integers(1, 8))
        upper = np.triu(rng.random((n, n)) < 0.4, 1)
        upper[np.arange(n - 1), np.arange(1, n)] = True
        if edgeless and i == count - 1:
            upper[:] = False
        A = np.where(upper, rng.uniform(0.5, 2.0, (n, n)), 0.0)
        E = np.triu(rng.uniform(0, 2, (n, n)), 1)
        lab = rng.integers(0, 3, n)
        if float_labels and i % 2:
            lab = lab.astype(np.float64)
        out.append(
            Graph(A + A.T, node_labels={"l": lab, "x": rng.normal(size=n)}, edge_labels={"e": E + E.T}, title=f"g{i}")
        )
    return out


def reference(X, Y, *, p=1.0, lmin=0, normalize=False) -> np.ndarray:
    """The nodal matrix by definition: block (G, G') = p_a p'_b x_ab (lmin=1: minus p_a p'_b v_ab q_a q'_b,
    0 where that is below LMIN_RESOLUTION p_a p'_b x_ab), normalized by the square roots
    of the nodes' self-similarities."""
    Y = X if Y is None else Y
    sx = [prepare_graph(g, i, NK, EK, p=p, q=Q) for i, g in enumerate(X)]
    sy = [prepare_graph(g, i, NK, EK, p=p, q=Q) for i, g in enumerate(Y)]

    def block(s1, s2):
        b = np.outer(s1.p, s2.p) * solve_pair(s1, s2, NK, EK).x
        if lmin:
            x = {k: v[:, None] for k, v in s1.graph.node_labels.items()}
            y = {k: v[None, :] for k, v in s2.graph.node_labels.items()}
            full, b = b, b - np.outer(s1.p * s1.q, s2.p * s2.q) * NK(x, y)
            b[b <= LMIN_RESOLUTION * np.abs(full)] = 0.0  # rounding noise, as the kernel's values
        return b

    R = np.block([[block(a, b) for b in sy] for a in sx])
    if normalize:
        rx = np.concatenate([np.diag(block(a, a)) for a in sx])
        ry = np.concatenate([np.diag(block(b, b)) for b in sy])
        R = R / np.sqrt(np.outer(rx, ry))
    return R


def kernel(backend: str = "exact", **kw) -> MarginalizedGraphKernel:
    return MarginalizedGraphKernel(NK, EK, q=Q, backend=backend, **kw)


@pytest.mark.parametrize("lmin", [0, 1])
@pytest.mark.parametrize("normalize", [False, True])
@pytest.mark.parametrize("backend", ["exact", "cpu"])
def test_nodal_matches_the_reference(lmin, normalize, backend):
    X, Y = graphs(5, seed=1), graphs(3, seed=2)
    kern = kernel(backend, lmin=lmin, p=0.7)
    for YY in (None, Y):
        R = kern(X, YY, nodal=True, normalize=normalize)
        np.testing.assert_allclose(R, reference(X, YY, p=0.7, lmin=lmin, normalize=normalize), rtol=1e-9, atol=0)
        if YY is None:
            assert np.array_equal(R, R.T)  # exactly symmetric, normalized too
    d = kernel(backend, lmin=lmin, p=0.7, normalize=normalize).diag(X, nodal=True)
    np.testing.assert_allclose(d, np.diag(kern(X, nodal=True, normalize=normalize)), rtol=1e-13)


def test_nodal_same_graphs_as_y_is_the_gram_matrix():
    X = graphs(4, seed=3)
    kern = kernel()
    np.testing.assert_array_equal(kern(X, X, nodal=True), kern(X, nodal=True))
    assert kern.last_stats.pairs == 10


def test_nodal_threaded_fill_equals_the_serial_fill(monkeypatch):
    """Bands filled by several threads give the same bits as one thread (and the overflow report
    names the first pair, as serially)."""
    X, Y = graphs(6, seed=4), graphs(4, seed=5)
    for lmin in (0, 1):
        for normalize in (False, True):
            kern = kernel(lmin=lmin, p=3.0)
            monkeypatch.setattr(nodal_module, "_NODAL_PARALLEL_ENTRIES", 1 << 40)
            serial = [kern(X, YY, nodal=True, normalize=normalize) for YY in (None, Y)]
            monkeypatch.setattr(nodal_module, "_NODAL_PARALLEL_ENTRIES", 0)
            monkeypatch.setattr(nodal_module, "_NODAL_THREADS", 3)
            threaded = [kern(X, YY, nodal=True, normalize=normalize) for YY in (None, Y)]
            for a, b in zip(serial, threaded, strict=True):
                np.testing.assert_array_equal(a, b)
    with pytest.raises(GraphError, match=r"nodal similarities of \(graph 0 \('g0'\), graph 0 \('g0'\)\) overflow"):
        kernel(p=1e200)(X, nodal=True)


def test_nodal_length0_term_with_label_dtypes_that_differ_between_graphs():
    """int labels in some graphs, float in others: the length-0 term is evaluated block by block."""
    X, Y = graphs(5, seed=6, float_labels=True), graphs(4, seed=7, float_labels=True)
    kern = kernel(lmin=1)
    for YY in (None, Y):
        np.testing.assert_allclose(kern(X, YY, nodal=True), reference(X, YY, lmin=1), rtol=1e-9)


@pytest.mark.parametrize("lmin", [0, 1])
def test_nodal_start_probability_scaling(lmin):
    """A huge or tiny scalar p scales every node pair by p² (the systems are solved with p = 1);
    per-node p whose products leave the float range in the solver are scaled back exactly."""
    X, Y = graphs(4, seed=8), graphs(3, seed=9)
    base = kernel(lmin=lmin)
    for p in (1e150, 1e-150):
        for YY in (None, Y):
            np.testing.assert_allclose(
                kernel(lmin=lmin, p=p)(X, YY, nodal=True), base(X, YY, nodal=True) * p * p, rtol=1e-13
            )
            np.testing.assert_allclose(
                kernel(lmin=lmin, p=p)(X, YY, nodal=True, normalize=True),
                base(X, YY, nodal=True, normalize=True),
                rtol=1e-13,
            )

    def vec(scale):
        return lambda g: scale * (1.0 + np.arange(g.n_nodes))

    ref = kernel(lmin=lmin, p=vec(1.0))
    for scale in (1e140, 1e-140):
        big = kernel(lmin=lmin, p=vec(scale))
        for YY in (None, Y):
            np.testing.assert_allclose(big(X, YY, nodal=True), ref(X, YY, nodal=True) * scale**2, rtol=1e-13)
        np.testing.assert_allclose(
            kernel(lmin=lmin, p=vec(scale), normalize=True).diag(X, nodal=True), np.ones(sum(g.n_nodes for g in X))
        )


def test_nodal_normalizing_an_edgeless_graph_with_lmin_1_is_an_error():
    X = graphs(3, seed=10, edgeless=True)
    kern = kernel(lmin=1)
    R = kern(X, nodal=True)
    n_last = X[-1].n_nodes
    assert np.all(R[-n_last:, -n_last:] == 0)  # no walk of length >= 1 in a graph without edges
    for call in (
        lambda: kern(X, nodal=True, normalize=True),
        lambda: kern(graphs(2, seed=11), X, nodal=True, normalize=True),
        lambda: kernel(lmin=1, normalize=True).diag(X, nodal=True),
    ):
        with pytest.raises(GraphError, match="self-similarity"):
            call()
