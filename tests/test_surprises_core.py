"""First use without surprises: the numerical core's wrong answers and foreign exceptions
(docs/design.md §1.3)."""

from __future__ import annotations

import warnings

import networkx as nx
import numpy as np
import pytest

import mgkflow
from mgkflow import Graph, GraphError, MarginalizedGraphKernel, MgkflowError
from mgkflow.kernels import Constant, KroneckerDelta, SquareExponential

A2 = np.array([[0.0, 1.0], [1.0, 0.0]])
BIG = 2**53 + 1  # float64(BIG) == 2.0**53


# ---------------------------------------------------------------------- 1. label types across graphs
def _int_graph(value: int, title: str) -> Graph:
    E = np.array([[0, value], [value, 0]], dtype=np.int64)
    return Graph(A2, node_labels={"l": np.array([value, 0], dtype=np.int64)}, edge_labels={"e": E}, title=title)


def _float_graph(value: float, title: str) -> Graph:
    E = np.array([[0.0, value], [value, 0.0]])
    return Graph(A2, node_labels={"l": np.array([value, 0.0])}, edge_labels={"e": E}, title=title)


@pytest.mark.parametrize("backend", ["exact", "cpu"])
@pytest.mark.parametrize(
    "what, kernels",
    [("node", (KroneckerDelta(0.5, "l"), Constant(1.0))), ("edge", (Constant(1.0), KroneckerDelta(0.5, "e")))],
)
def test_int_beyond_2_53_and_float_labels_across_graphs_are_refused(backend, what, kernels):
    ints, floats = _int_graph(BIG, "ints"), _float_graph(2.0**53, "floats")
    kern = MarginalizedGraphKernel(*kernels, q=0.1, backend=backend)
    field = "l" if what == "node" else "e"
    msg = rf"{what} label field '{field}' holds floats in graph 1 \('floats'\) of X but integer {BIG} in graph 0"
    with pytest.raises(GraphError, match=msg):
        kern([ints, floats])
    with pytest.raises(GraphError, match=r"floats in graph 0 \('floats'\) of Y but integer .* graph 0 \('ints'\) of X"):
        kern([ints], [floats])
    with pytest.raises(GraphError, match=r"of X but integer .* of Y"):
        kern([floats], [ints], nodal=True)


@pytest.mark.parametrize("backend", ["exact", "cpu"])
def test_small_ints_beside_floats_across_graphs_stay_valid_and_exact(backend):
    kern = MarginalizedGraphKernel(KroneckerDelta(0.5, "l"), KroneckerDelta(0.5, "e"), q=0.1, backend=backend)
    K = kern([_int_graph(7, "i"), _float_graph(7.0, "f"), _float_graph(7.5, "g")], normalize=True)
    assert K[0, 1] == pytest.approx(1.0, abs=1e-12)  # 7 == 7.0 exactly
    assert K[0, 2] < 0.99
    big = [_int_graph(BIG, "a"), _int_graph(BIG - 1, "b")]  # integers alone compare exactly
    assert kern(big, normalize=True)[0, 1] < 0.99


# ---------------------------------------------------------------------- 2. extreme weight spreads
def _spread_path(top: float) -> Graph:
    G = nx.path_graph(3)
    G.edges[0, 1]["weight"] = 1.2
    G.edges[1, 2]["weight"] = top
    return Graph.from_networkx(G, title="spread")


@pytest.mark.parametrize("backend", ["exact", "cpu"])
def test_weights_spanning_1e160_are_refused_not_a_wrong_psd_matrix(backend):
    kern = MarginalizedGraphKernel(q=0.05, backend=backend, normalize=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", mgkflow.DegenerateKernelWarning)
        with pytest.raises(GraphError, match=r"graph 0 \('spread'\): edge weights span more than float64.*node 0"):
            kern([_spread_path(1e160), Graph.from_networkx(nx.path_graph(4))])


@pytest.mark.parametrize("top", [1e3, 1e100, 1e150])
def test_weights_spanning_up_to_1e150_are_computed_exactly(top):
    """Constant kernels, no isolated nodes: the normalized kernel is exactly 1 (docs/design.md §1.4)."""
    X = [_spread_path(top), Graph.from_networkx(nx.path_graph(4))]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", mgkflow.DegenerateKernelWarning)
        for backend in ("exact", "cpu"):
            K = MarginalizedGraphKernel(q=0.05, backend=backend, normalize=True)(X)
            np.testing.assert_allclose(K, 1.0, rtol=1e-14)


# ---------------------------------------------------------------------- 3. the exact backend's cap
def test_exact_backend_over_its_cap_raises_an_mgkflow_error(monkeypatch):
    from mgkflow.backends import exact
    from mgkflow.errors import ProblemTooLargeError

    monkeypatch.setattr(exact, "MAX_EDGE_PAIRS", 10)
    kern = MarginalizedGraphKernel(Constant(1.0), SquareExponential(1.0, "e"), backend="exact")
    g = Graph(nx.to_numpy_array(nx.path_graph(4)), edge_labels={"e": nx.to_numpy_array(nx.path_graph(4))}, title="p4")
    with pytest.raises(ProblemTooLargeError, match=r"pair \(graph 0 \('p4'\), graph 0 \('p4'\)\).*'cpu'") as exc:
        kern([g])
    assert isinstance(exc.value, MgkflowError) and isinstance(exc.value, MemoryError)


# ---------------------------------------------------------------------- 4. ints mixed with tuples
@pytest.mark.parametrize("what", ["node", "edge"])
def test_label_field_mixing_ints_and_tuples_is_a_graph_error(what):
    G = nx.path_graph(4)
    G.graph["name"] = "mixed"
    values = [1, (1, 2), (1, 2), 3]
    if what == "node":
        nx.set_node_attributes(G, dict(enumerate(values)), "m")
    else:
        nx.set_edge_attributes(G, dict(zip(G.edges, values)), "m")
    kw = {"node_labels": ["m"]} if what == "node" else {"edge_labels": ["m"]}
    with pytest.raises(GraphError, match=rf"graph 'mixed': {what} label field 'm' mixes numbers and sequences"):
        Graph.from_networkx(G, **kw)


@pytest.mark.parametrize("what", ["node", "edge"])
def test_label_field_mixing_ints_and_tuples_in_arrays_is_a_graph_error(what):
    M = np.zeros((3, 3), dtype=object)
    M[0, 1] = M[1, 0] = 1
    M[1, 2] = M[2, 1] = (1, 2)
    A = (M != 0).astype(float)
    kw = {"node_labels": {"m": [1, (1, 2), 3]}} if what == "node" else {"edge_labels": {"m": M.tolist()}}
    with pytest.raises(GraphError, match=rf"graph 'mixed': {what} label field 'm'"):
        Graph(A, title="mixed", **kw)


# ---------------------------------------------------------------------- 5. the GPU backend without a GPU
def test_gpu_backend_without_a_gpu_is_an_mgkflow_error():
    if mgkflow.gpu_available():
        pytest.skip("a CUDA device is present")
    from mgkflow.errors import BackendUnavailableError

    with pytest.raises(BackendUnavailableError, match="backend='cpu'") as exc:
        MarginalizedGraphKernel(backend="gpu")([Graph(A2)])
    assert isinstance(exc.value, MgkflowError)


# ---------------------------------------------------------------------- 6. the numba compile
def test_cpu_compile_message_only_when_numba_compiles(monkeypatch, capsys):
    from mgkflow.backends import cpu

    monkeypatch.setattr(cpu, "_warm_done", False)
    monkeypatch.setattr(cpu, "_cache_misses", lambda: 1)  # numba's on-disk cache missed
    assert cpu.warm_up() is True
    assert capsys.readouterr().err.count("mgkflow: compiling the CPU kernels (once per installation") == 1
    assert cpu.warm_up() is False and capsys.readouterr().err == ""  # once per process
    monkeypatch.setattr(cpu, "_warm_done", False)
    monkeypatch.setattr(cpu, "_cache_misses", lambda: 0)  # loaded from the cache: silent
    assert cpu.warm_up() is False and capsys.readouterr().err == ""


def test_cpu_compile_time_stays_out_of_last_stats(monkeypatch):
    import time

    from mgkflow.backends.cpu import NumbaCPUBackend

    calls = []
    monkeypatch.setattr(NumbaCPUBackend, "warm_up", lambda self: calls.append(time.sleep(1.0)) or True)
    kern = MarginalizedGraphKernel(q=0.1, backend="cpu")
    kern([Graph(A2), Graph(A2)])
    assert calls and kern.last_stats.seconds < 0.5
    kern.diag([Graph(A2)])
    assert len(calls) == 1 and kern.last_stats.seconds < 0.5
