"""FreeSolv and solubility loaders: sizes, targets, splits, and graphs equal to Graph.from_smiles(extended=True)."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from mgkflow import Graph, datasets


def _same_graph(ref: Graph, g: Graph) -> None:
    assert ref.n_nodes == g.n_nodes
    np.testing.assert_array_equal(ref.adjacency.indptr, g.adjacency.indptr)
    np.testing.assert_array_equal(ref.adjacency.indices, g.adjacency.indices)
    np.testing.assert_array_equal(ref.adjacency.data, g.adjacency.data)
    assert set(ref.node_labels) == set(g.node_labels) and set(ref.edge_labels) == set(g.edge_labels)
    for f in ref.node_labels:
        np.testing.assert_array_equal(ref.node_labels[f], g.node_labels[f])
    for f in ref.edge_labels:
        np.testing.assert_array_equal(ref.edge_labels[f], g.edge_labels[f])


def test_freesolv_contents():
    d = datasets.freesolv()
    assert len(d) == len(d.y) == len(d.smiles) == len(d.names) == 642
    assert d.y.dtype == np.float64 and np.all(np.isfinite(d.y))
    # the file's range: -25.47 (mannitol) to 3.43 kcal/mol
    assert d.y.min() == pytest.approx(-25.47) and d.y.max() == pytest.approx(3.43)
    assert set(d.split) == {"all"}
    assert [g.title for g in d.graphs[:2]] == list(d.names[:2])
    sizes = np.array([g.n_nodes for g in d.graphs])
    assert sizes.min() == 1 and sizes.max() == 24
    assert sorted(n for n, g in zip(d.names, d.graphs) if g.n_nodes == 1) == ["ammonia", "hydrogen sulfide", "methane"]
    # hydrogens are not nodes: each heavy atom counts its own (the extended field), bonds say if aromatic
    single = {n: g for n, g in zip(d.names, d.graphs) if g.n_nodes == 1}
    assert [int(single[n].node_labels["hydrogens"][0]) for n in ("methane", "ammonia", "hydrogen sulfide")] == [4, 3, 2]
    assert set(d.graphs[0].edge_labels) == {"bond_order", "conjugated", "in_ring", "aromatic"}
    calc = datasets.freesolv(target="calc")
    assert not np.array_equal(calc.y, d.y) and calc.smiles == d.smiles
    X, y = datasets.freesolv(n_graphs=5, return_X_y=True)
    assert len(X) == 5 and np.array_equal(y, d.y[:5])
    with pytest.raises(ValueError, match="target"):
        datasets.freesolv(target="logS")


def test_solubility_contents_and_split():
    all_ = datasets.solubility()
    train, test = datasets.solubility("train"), datasets.solubility("test")
    assert (len(all_), len(train), len(test)) == (1282, 1025, 257)
    assert set(train.split) == {"train"} and set(test.split) == {"test"}
    assert all_.smiles == train.smiles + test.smiles
    np.testing.assert_array_equal(all_.y, np.concatenate([train.y, test.y]))
    assert train.names[0] == "n-pentane" and train.y[0] == -3.18
    assert min(g.n_nodes for g in all_.graphs) >= 2
    X, y = datasets.solubility("test", n_graphs=4, return_X_y=True)
    assert len(X) == 4 and np.array_equal(y, test.y[:4])
    with pytest.raises(ValueError, match="split"):
        datasets.solubility("valid")
    with pytest.raises(ValueError):
        datasets.solubility(n_graphs=-1)


@pytest.mark.parametrize("name", ["freesolv", "solubility"])
def test_graphs_match_from_smiles(name):
    pytest.importorskip("rdkit")
    d = getattr(datasets, name)()
    with open(datasets.data_dir() / f"{name}.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["smiles"] for r in rows] == list(d.smiles)
    for smi, g in zip(d.smiles, d.graphs):
        _same_graph(Graph.from_smiles(smi, extended=True), g)
