"""Built-in datasets: synthetic families, committed drug and protein sets, registry."""

from __future__ import annotations

import csv
import time

import networkx as nx
import numpy as np
import pytest

from mgkflow import Graph, datasets
from mgkflow.kernels import Constant, KroneckerDelta, SquareExponential


def _edge_set(g: Graph) -> set[tuple[int, int]]:
    rows, cols = g.coo()
    return {(int(r), int(c)) for r, c in zip(rows, cols) if r < c}


def _edge_values(g: Graph, field: str) -> dict[tuple[int, int], float]:
    rows, cols = g.coo()
    return {(int(r), int(c)): float(v) for r, c, v in zip(rows, cols, g.edge_labels[field]) if r < c}


# ---------------------------------------------------------------------- synthetic
@pytest.mark.parametrize(
    "loader, make",
    [
        (datasets.nws, lambda s: nx.newman_watts_strogatz_graph(96, 3, 0.1, seed=s)),
        (datasets.ba, lambda s: nx.barabasi_albert_graph(96, 6, seed=s)),
    ],
)
def test_synthetic_graphs_reproduce_networkx(loader, make):
    gs = loader(n_graphs=5, seed=7)
    assert len(gs) == 5
    for i, g in enumerate(gs):
        G = make(7 + i)
        assert g.n_nodes == 96
        assert _edge_set(g) == {(min(u, v), max(u, v)) for u, v in G.edges()}
        np.testing.assert_array_equal(g.adjacency.data, 1.0)
        assert not g.node_labels and not g.edge_labels
        assert g.title == f"{loader.__name__}-{i}"


def test_synthetic_parameters_and_defaults():
    g = datasets.nws(n_graphs=1, n=20, k=4, p=0.3, seed=3)[0]
    G = nx.newman_watts_strogatz_graph(20, 4, 0.3, seed=3)
    assert _edge_set(g) == {tuple(sorted(e)) for e in G.edges()}
    g = datasets.ba(n_graphs=1, n=30, m=2, seed=5)[0]
    assert _edge_set(g) == {tuple(sorted(e)) for e in nx.barabasi_albert_graph(30, 2, seed=5).edges()}
    assert len(datasets.nws()) == 160
    assert datasets.ba(n_graphs=0) == []
    with pytest.raises(ValueError):
        datasets.nws(n_graphs=-1)


@pytest.mark.parametrize("name", ["nws", "ba"])
def test_labeled_convention(name):
    seed = 11
    gs = datasets.load(name, n_graphs=3, seed=seed, labeled=True)
    for i, g in enumerate(gs):
        G = nx.newman_watts_strogatz_graph(96, 3, 0.1, seed=seed + i) if name == "nws" else \
            nx.barabasi_albert_graph(96, 6, seed=seed + i)
        deg = np.array([G.degree(v) for v in range(96)])
        np.testing.assert_array_equal(g.node_labels["label"], deg % 3)
        assert g.node_labels["label"].dtype.kind == "i"
        edges = sorted((min(u, v), max(u, v)) for u, v in G.edges())
        draws = np.random.default_rng(seed + i).uniform(1, 2, size=len(edges))
        lengths = _edge_values(g, "length")
        assert len(lengths) == len(edges)
        # edge at sorted position k carries the k-th draw
        for k in (0, 1, len(edges) // 2, len(edges) - 1):
            assert lengths[edges[k]] == draws[k]
        assert [lengths[e] for e in edges] == draws.tolist()


def test_labeled_graphs_are_deterministic():
    a = datasets.ba(n_graphs=2, labeled=True)
    b = datasets.ba(n_graphs=2, labeled=True)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x.edge_labels["length"], y.edge_labels["length"])
        np.testing.assert_array_equal(x.adjacency.indices, y.adjacency.indices)


# ---------------------------------------------------------------------- drugs
def test_drugs_load_fast_with_fields():
    t0 = time.perf_counter()
    gs = datasets.drugs()
    elapsed = time.perf_counter() - t0
    assert elapsed < 20  # about 1 s on one core
    assert len(gs) == 2622
    titles = [g.title for g in gs]
    assert titles[0] == "PRAZOSIN (CHEMBL2)" and len(set(titles)) == len(titles)
    sizes = np.array([g.n_nodes for g in gs])
    assert sizes.min() >= 2 and sizes.max() == 200
    for g in gs[:50]:
        assert set(g.node_labels) == {"element", "charge", "aromatic", "hybridization"}
        assert set(g.edge_labels) == {"bond_order", "conjugated", "in_ring"}
        assert set(np.unique(g.edge_labels["bond_order"])) <= {1.0, 1.5, 2.0, 3.0}
        np.testing.assert_array_equal(g.adjacency.data, 1.0)
        assert g.coords is not None and g.coords.shape == (g.n_nodes, 2)
    assert datasets.drugs(n_graphs=3, coords=False)[2].coords is None


def test_drugs_match_from_smiles():
    pytest.importorskip("rdkit")
    with open(datasets.data_dir() / "drugs.csv", newline="", encoding="utf-8") as fh:
        smiles = {r["chembl_id"]: r["smiles"] for r in csv.DictReader(fh)}
    gs = datasets.drugs()
    rng = np.random.default_rng(0)
    for k in rng.choice(len(gs), size=25, replace=False):
        g = gs[k]
        chembl_id = g.title.rsplit("(", 1)[1].rstrip(")")
        ref = Graph.from_smiles(smiles[chembl_id])
        assert ref.n_nodes == g.n_nodes
        np.testing.assert_array_equal(ref.adjacency.indptr, g.adjacency.indptr)
        np.testing.assert_array_equal(ref.adjacency.indices, g.adjacency.indices)
        for f in ref.node_labels:
            np.testing.assert_array_equal(ref.node_labels[f], g.node_labels[f])
        for f in ref.edge_labels:
            np.testing.assert_array_equal(ref.edge_labels[f], g.edge_labels[f])


# ---------------------------------------------------------------------- proteins
def test_proteins_load_with_fields():
    t0 = time.perf_counter()
    gs = datasets.proteins()
    assert time.perf_counter() - t0 < 30  # about 1 s on one core
    assert len(gs) == 40
    titles = [g.title for g in gs]
    assert titles == sorted(titles) and titles[0] == "1ahsA"
    sizes = np.array([g.n_nodes for g in gs])
    assert sizes.min() < 500 and sizes.max() >= 2000
    for g in gs:
        assert set(g.node_labels) == {"element", "residue"}
        assert set(g.edge_labels) == {"distance"}
        assert g.coords.shape == (g.n_nodes, 3)
        assert 0 < g.edge_labels["distance"].max() < 6.0
        assert np.all((g.adjacency.data > 0) & (g.adjacency.data <= 1))
        assert set(np.unique(g.node_labels["element"])) <= {6, 7, 8, 11, 16, 17, 30}
    with open(datasets.data_dir() / "proteins.csv", newline="", encoding="utf-8") as fh:
        index = {r["title"]: int(r["heavy_atoms"]) for r in csv.DictReader(fh)}
    assert {g.title: g.n_nodes for g in gs} == index


def test_proteins_cutoff_and_subset():
    small = datasets.proteins(n_graphs=2, cutoff=4.0)
    large = datasets.proteins(n_graphs=2, cutoff=6.0)
    assert [g.title for g in small] == ["1ahsA", "1bvyF"]
    for a, b in zip(small, large):
        assert a.n_nodes == b.n_nodes and a.n_edges < b.n_edges
        assert a.edge_labels["distance"].max() < 4.0
    g = large[0]
    r = g.edge_labels["distance"]
    np.testing.assert_allclose(g.adjacency.data, (1 - (r / 6.0) ** 2) ** 2)
    rows, cols = g.coo()
    np.testing.assert_allclose(np.linalg.norm(g.coords[rows] - g.coords[cols], axis=1), r)


# ---------------------------------------------------------------------- registry
def test_list_datasets_records():
    recs = datasets.list_datasets()
    assert [d.name for d in recs] == [
        "nws", "ba", "drugs", "proteins", "molecules", "freesolv", "solubility", "lombardo", "lipophilicity",
        "photoswitch", "moses",
    ]
    info = {d.name: d for d in recs}
    for name in ("molecules", "freesolv", "solubility"):  # every record loads, with the fields it names
        g = datasets.load(name, n_graphs=2)[0]
        assert set(info[name].node_labels) <= set(g.node_labels) and set(info[name].edge_labels) <= set(g.edge_labels)
        nk, ek = datasets.default_kernels(name)
        assert set(nk.fields) <= set(g.node_labels) and set(ek.fields) <= set(g.edge_labels)
    assert len(datasets.load("freesolv")) == info["freesolv"].n_graphs
    assert len(datasets.load("solubility")) == info["solubility"].n_graphs
    assert info["nws"].n_graphs == 160 and info["ba"].n_graphs == 160
    assert info["drugs"].n_graphs == 2622 and info["proteins"].n_graphs == 40
    assert "bond_order" in info["drugs"].edge_labels and "element" in info["proteins"].node_labels
    assert all(d.description for d in recs)
    assert vars(recs[0])["name"] == "nws"  # the CLI reads records through vars()


def test_load_dispatch_and_unknown_name():
    assert [g.title for g in datasets.load("nws", n_graphs=2)] == ["nws-0", "nws-1"]
    assert len(datasets.load("drugs", n_graphs=4, labeled=True)) == 4
    assert len(datasets.load("proteins", n_graphs=1)) == 1
    with pytest.raises(ValueError, match="nws, ba, drugs, proteins"):
        datasets.load("mutag")
    with pytest.raises(ValueError, match="valid names"):
        datasets.default_kernels("nope")
    with pytest.raises(ValueError):
        datasets.load("ba", bogus=1)


def test_default_kernels():
    nk, ek = datasets.default_kernels("nws", labeled=True)
    assert isinstance(nk, KroneckerDelta) and nk.field == "label" and nk.h == 0.5
    assert isinstance(ek, SquareExponential) and ek.field == "length"
    nk, ek = datasets.default_kernels("ba", labeled=False)
    assert isinstance(nk, Constant) and isinstance(ek, Constant)
    nk, ek = datasets.default_kernels("drugs")
    assert (nk.field, ek.field) == ("element", "bond_order")
    nk, ek = datasets.default_kernels("proteins")
    assert (nk.field, ek.field) == ("element", "distance")
    # every field the kernels read exists on the dataset's graphs
    for name, kw in (("nws", {"labeled": True}), ("ba", {"labeled": True}), ("drugs", {}), ("proteins", {})):
        g = datasets.load(name, n_graphs=1, **kw)[0]
        nk, ek = datasets.default_kernels(name)
        assert set(nk.fields) <= set(g.node_labels) and set(ek.fields) <= set(g.edge_labels)
