"""Graph.features: an optional graph-level feature vector that travels with the graph."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

from mgkflow import Graph, MarginalizedGraphKernel
from mgkflow.errors import GraphError, MgkflowError, ParameterTypeError
from mgkflow.kernels import KroneckerDelta

PATH = np.array([[0, 1, 0], [1, 0, 2.0], [0, 2.0, 0]])
FEATS = np.array([0.25, -1.5, 3.0, 0.0])


def _graph(features=FEATS, title="path") -> Graph:
    return Graph(
        PATH,
        node_labels={"el": [6, 8, 6], "v": np.arange(6.0).reshape(3, 2)},
        edge_labels={"e": np.array([[0, 1, 0], [1, 0, 2], [0, 2, 0]])},
        coords=np.arange(9.0).reshape(3, 3),
        title=title,
        features=features,
    )


def _same_graph(a: Graph, b: Graph) -> None:
    pairs = [(a.adjacency.indptr, b.adjacency.indptr), (a.adjacency.indices, b.adjacency.indices)]
    for x, y in [*pairs, (a.adjacency.data, b.adjacency.data), (a.coords, b.coords)]:
        np.testing.assert_array_equal(x, y)
    assert a.title == b.title
    for fa, fb in ((a.node_labels, b.node_labels), (a.edge_labels, b.edge_labels)):
        assert list(fa) == list(fb)
        for k in fa:
            np.testing.assert_array_equal(fa[k], fb[k])
            assert fa[k].dtype == fb[k].dtype


def test_features_are_a_read_only_float64_copy():
    src = np.array([1, 2, 3])  # integers: stored as float64
    g = Graph(PATH, features=src)
    assert g.features.dtype == np.float64 and g.features.shape == (3,)
    np.testing.assert_array_equal(g.features, [1.0, 2.0, 3.0])
    assert not g.features.flags.writeable
    with pytest.raises(ValueError):
        g.features[0] = 5.0
    src[0] = 99  # the caller's array may change: the graph's copy does not
    assert g.features[0] == 1.0
    f64 = np.array([0.5, 1.5])
    h = Graph(PATH, features=f64)
    assert not np.shares_memory(h.features, f64) and f64.flags.writeable
    assert Graph(PATH).features is None
    assert Graph(PATH, features=None).features is None
    assert Graph(PATH, features=[True, False]).features.tolist() == [1.0, 0.0]
    assert Graph(PATH, features=(2**70, 1)).features[0] == 2.0**70


def test_every_builder_takes_features():
    csr = Graph(PATH).adjacency
    g1 = Graph.from_csr(csr.indptr, csr.indices, csr.data, 3, features=FEATS)
    g2 = Graph.from_adjacency(PATH, features=FEATS)
    g3 = Graph(PATH, features=list(FEATS))
    for g in (g1, g2, g3):
        np.testing.assert_array_equal(g.features, FEATS)
    assert Graph.from_csr(csr.indptr, csr.indices, csr.data, 3).features is None
    assert Graph.from_adjacency(PATH).features is None


def test_repr_shows_features_only_when_present():
    assert "features" not in repr(_graph(None))
    assert repr(_graph()).endswith(", 4 features>")
    assert repr(_graph()).startswith("<Graph 'path': 3 nodes, 2 edges")


def test_with_features_shares_everything_else():
    g = _graph(None)
    h = g.with_features(FEATS)
    assert h is not g and g.features is None
    np.testing.assert_array_equal(h.features, FEATS)
    assert h.adjacency is g.adjacency and h.node_labels is g.node_labels and h.edge_labels is g.edge_labels
    assert h.coords is g.coords and h.title == g.title
    assert h.with_features(None).features is None
    np.testing.assert_array_equal(h.with_features([7.0]).features, [7.0])
    with pytest.raises(GraphError, match="'path'.*1-D"):
        g.with_features(np.ones((2, 2)))


@pytest.mark.parametrize("protocol", [2, pickle.HIGHEST_PROTOCOL])
@pytest.mark.parametrize("features", [FEATS, None])
def test_pickle_round_trip(protocol, features):
    g = _graph(features)
    back = pickle.loads(pickle.dumps(g, protocol=protocol))
    _same_graph(back, g)
    if features is None:
        assert back.features is None
    else:
        np.testing.assert_array_equal(back.features, FEATS)
        assert back.features.dtype == np.float64 and not back.features.flags.writeable


def test_pickles_from_before_features_still_load(monkeypatch):
    g = _graph(None)
    old_getstate = Graph.__getstate__

    def getstate_without_features(self):
        state = old_getstate(self)
        del state["features"]  # as graphs were pickled before they had features
        return state

    monkeypatch.setattr(Graph, "__getstate__", getstate_without_features)
    data = pickle.dumps(g)
    monkeypatch.undo()
    back = pickle.loads(data)
    assert back.features is None
    _same_graph(back, g)
    assert "features" not in repr(back)


def test_copy_and_deepcopy_keep_features():
    g = _graph()
    for c in (copy.copy(g), copy.deepcopy(g), copy.deepcopy([g])[0]):
        np.testing.assert_array_equal(c.features, FEATS)


def test_permute_keeps_features():
    g = _graph()
    p = g.permute([2, 0, 1])
    np.testing.assert_array_equal(p.features, FEATS)
    assert p.node_labels["el"].tolist() == [6, 6, 8]
    assert _graph(None).permute([1, 0, 2]).features is None


def test_pack_round_trip_with_features():
    gs = [_graph(), _graph(FEATS[:2] + 1.0, title="b"), _graph(np.array([9.0]), title=None)]
    packed = Graph.pack_many(gs)
    assert packed is not None and "features" in packed["arrays"]
    back = Graph.unpack_many(packed)
    for a, b in zip(back, gs, strict=True):
        _same_graph(a, b)
        np.testing.assert_array_equal(a.features, b.features)
        assert a.features.dtype == np.float64 and not a.features.flags.writeable
    # the packed state pickles as a whole (what tiled_gram sends to its workers)
    again = Graph.unpack_many(pickle.loads(pickle.dumps(packed)))
    np.testing.assert_array_equal(again[1].features, FEATS[:2] + 1.0)


def test_pack_without_features_and_mixed():
    gs = [_graph(None), _graph(None, title="b")]
    packed = Graph.pack_many(gs)
    assert "features" not in packed["arrays"]  # as packs made before graphs had features
    assert all(g.features is None for g in Graph.unpack_many(packed))
    # some graphs with features and some without: no common layout (pickle them one by one)
    assert Graph.pack_many([_graph(), _graph(None)]) is None
    assert Graph.pack_many([_graph(None), _graph()]) is None


def test_the_kernel_ignores_features():
    gs = [Graph(PATH, node_labels={"el": [6, 8, 6]}), Graph(PATH[:2, :2], node_labels={"el": [8, 8]})]
    kern = MarginalizedGraphKernel(KroneckerDelta(0.5, "el"), q=0.1, backend="cpu")
    K = kern(gs)
    # a power-of-two weight rescaling goes through the graph's state: the features stay
    heavy = [Graph(PATH * 1e30, node_labels={"el": [6, 8, 6]}, features=[1.0]), gs[1].with_features([2.0, 3.0])]
    np.testing.assert_allclose(kern(heavy), K, rtol=1e-12)


@pytest.mark.parametrize(
    "bad, error, match",
    [
        (7, GraphError, r"1-D.*shape \(\)"),
        (np.float64(1.0), GraphError, "1-D"),
        (np.ones((2, 2)), GraphError, r"1-D.*\(2, 2\)"),
        ([[1.0, 2.0]], GraphError, "1-D"),
        ([], GraphError, "at least one value"),
        (np.zeros(0), GraphError, "at least one value"),
        ([1.0, np.nan], GraphError, "feature 1 is nan"),
        ([np.inf, 1.0], GraphError, "feature 0 is inf"),
        ([1e308, 1e309], GraphError, "finite"),
        ([1, "a"], GraphError, "real numbers"),
        (np.array(["a", "b"]), GraphError, "dtype"),
        ([1j, 2.0], GraphError, "complex"),
        ([1, None], GraphError, "NoneType"),
        ([10**400], GraphError, "too large"),
        ([[1.0], [1.0, 2.0]], GraphError, "ragged|1-D|real numbers"),
        ("abc", ParameterTypeError, "str"),
        (b"ab", ParameterTypeError, "bytes"),
        ({"a": 1.0}, ParameterTypeError, "dict"),
    ],
    ids=repr,
)
def test_bad_features_raise_mgkflow_errors(bad, error, match):
    csr = Graph(PATH).adjacency
    builders = [
        lambda: Graph(PATH, features=bad, title="t"),
        lambda: Graph.from_adjacency(PATH, features=bad, title="t"),
        lambda: Graph.from_csr(csr.indptr, csr.indices, csr.data, 3, features=bad, title="t"),
        lambda: Graph(PATH, title="t").with_features(bad),
    ]
    for build in builders:
        with pytest.raises(error, match=match) as info:
            build()
        assert isinstance(info.value, MgkflowError)
        assert "'t'" in str(info.value)  # names the graph


def test_bad_features_from_pandas():
    pd = pytest.importorskip("pandas")
    with pytest.raises(GraphError, match="1-D"):
        Graph(PATH, features=pd.DataFrame({"a": [1.0, 2.0]}))
    g = Graph(PATH, features=pd.Series([1.0, 2.0]))  # a Series is a 1-D array
    np.testing.assert_array_equal(g.features, [1.0, 2.0])
