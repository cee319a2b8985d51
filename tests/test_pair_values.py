"""MarginalizedGraphKernel.pair_values (mgkflow.evaluation.matrix.pair_values): scattered entries of the kernel
matrix against the full matrix, raw and normalized, on the CPU backends and (skipped without one) the GPU."""

import networkx as nx
import numpy as np
import pytest

from mgkflow import Graph, MarginalizedGraphKernel
from mgkflow.errors import GraphError, ParameterError, ParameterTypeError
from mgkflow.kernels import KroneckerDelta


def _graphs(n=9, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        size = int(rng.integers(3, 9))
        G = nx.gnp_random_graph(size, 0.5, seed=int(rng.integers(1 << 30)))
        G.add_edges_from((j, j + 1) for j in range(size - 1))
        A = nx.to_numpy_array(G) * rng.uniform(0.5, 2.0)
        E = np.where(A > 0, rng.integers(0, 3, size=A.shape), 0)
        E = np.triu(E, 1) + np.triu(E, 1).T
        out.append(Graph(A, node_labels={"a": rng.integers(0, 3, size)}, edge_labels={"b": E}, title=f"g{i}"))
    return out


def _kern(backend, **kw):
    return MarginalizedGraphKernel(KroneckerDelta(0.4, "a"), KroneckerDelta(0.6, "b"), q=0.1, backend=backend, **kw)


@pytest.mark.parametrize("backend", ["cpu", "exact"])
@pytest.mark.parametrize("normalize", [False, True])
def test_pair_values_are_the_matrix_entries(backend, normalize):
    gs = _graphs()
    kern = _kern(backend, normalize=normalize, p=2.0)
    K = kern(gs)
    rng = np.random.default_rng(1)
    pairs = rng.integers(0, len(gs), size=(40, 2))
    pairs[:3] = [[4, 4], [2, 7], [7, 2]]  # a self-pair and a pair both ways
    v = kern.pair_values(gs, pairs)
    assert v.shape == (40,) and v.dtype == np.float64
    assert np.allclose(v, K[pairs[:, 0], pairs[:, 1]], rtol=1e-12, atol=0)
    assert v[1] == pytest.approx(v[2], rel=1e-13)  # (both ways: the same system, nodes in another order)
    assert kern.last_stats.shape == (40,)
    assert kern.last_stats.pairs == 40 + (len(gs) if normalize else 0)


def test_pair_values_normalize_argument_and_empty_list():
    gs = _graphs(5)
    kern = _kern("cpu")
    raw = kern.pair_values(gs, [[0, 1], [3, 3]])
    norm = kern.pair_values(gs, [[0, 1], [3, 3]], normalize=True)
    K = kern(gs)
    assert np.allclose(norm, [K[0, 1] / np.sqrt(K[0, 0] * K[1, 1]), 1.0], rtol=1e-12)
    assert np.allclose(raw, [K[0, 1], K[3, 3]], rtol=1e-12)
    assert kern.pair_values(gs, np.zeros((0, 2), dtype=int)).shape == (0,)
    assert np.allclose(kern.pair_values(gs, np.array([[1.0, 2.0]])), K[1, 2], rtol=1e-12)  # integral floats


@pytest.mark.parametrize(
    "pairs, error, match",
    [
        ([[0, 1, 2]], ParameterError, "shape"),
        ([0, 1], ParameterError, "shape"),
        ([[0, 5]], ParameterError, "outside the 5 graphs"),
        ([[-1, 0]], ParameterError, "outside"),
        ([[0.5, 1]], ParameterTypeError, "integer"),
        ([["a", "b"]], ParameterTypeError, "integer"),
    ],
)
def test_pair_values_refuses_bad_pairs(pairs, error, match):
    with pytest.raises(error, match=match):
        _kern("cpu").pair_values(_graphs(5), pairs)


def test_pair_values_refuses_an_unnormalizable_graph():
    gs = _graphs(3)
    kern = MarginalizedGraphKernel(q=0.1, p=0.0, backend="cpu", normalize=True)
    with pytest.raises(GraphError, match="cannot be normalized"):
        kern.pair_values(gs, [[0, 1]])


@pytest.mark.gpu
def test_pair_values_on_the_gpu_match_the_cpu_oracle():
    gs = _graphs(40, seed=3)
    rng = np.random.default_rng(2)
    pairs = rng.integers(0, len(gs), size=(500, 2))
    for normalize in (False, True):
        ref = _kern("cpu", normalize=normalize).pair_values(gs, pairs)
        kg = _kern("gpu", normalize=normalize)
        v = kg.pair_values(gs, pairs)
        again = kg.pair_values(gs, pairs[::-1])  # the same graphs: the packed batch is reused
        assert kg.last_stats.backend == "gpu"
        assert np.max(np.abs(v - ref) / np.abs(ref)) < 1e-5
        assert np.allclose(again, v[::-1], rtol=1e-12)
