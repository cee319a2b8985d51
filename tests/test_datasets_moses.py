"""The MOSES subset (mgkflow.datasets.moses_set, datasets/moses.csv): shipped file, registry entry, the full
splits of an installed molsets or a path, and never a download."""

from __future__ import annotations

import csv
import gzip
import importlib.util
from pathlib import Path

import numpy as np
import pytest

from mgkflow import datasets
from mgkflow.datasets import moses_set
from mgkflow.datasets.moses_set import MOSES_TARGETS, moses, moses_file
from mgkflow.errors import MgkflowError


def test_subset_is_shipped_small_and_reads_without_rdkit() -> None:
    path = datasets.data_dir() / "moses.csv"
    assert path.stat().st_size < 1_000_000
    data = moses()
    assert len(data) == 10_000 and len(set(data.smiles)) == 10_000
    assert data.target.startswith("logp:") and "stand-in" in data.target
    assert all(s == "train" for s in data.split[:5])
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    idx = [int(r["moses_index"]) for r in rows]
    assert idx == sorted(idx) and idx[-1] < 1_584_663  # file order within the training split
    for target in MOSES_TARGETS:
        y = moses(n_graphs=50, target=target).y
        assert y.shape == (50,) and np.all(np.isfinite(y))
    qed = np.array([float(r["qed"]) for r in rows])
    assert 0 < qed.min() and qed.max() < 1
    assert np.array_equal(data.y, [float(r["logp"]) for r in rows])
    g = data.graphs[0]
    assert set(g.node_labels) == {"element", "charge", "aromatic", "hybridization", "hydrogens"}
    assert data.names[0] == f"moses-train-{idx[0]}"


def test_registry_entry() -> None:
    info = {d.name: d for d in datasets.list_datasets()}["moses"]
    assert info.n_graphs == 10_000 and "MIT" in info.source
    assert len(datasets.load("moses", n_graphs=4, labeled=True)) == 4
    assert repr(datasets.default_kernels("moses")) == repr(datasets.default_kernels("drugs"))


def test_bad_arguments_are_mgkflow_errors() -> None:
    for kwargs in ({"target": "mw"}, {"split": "valid"}, {"n_graphs": -1}, {"n_graphs": 1.5}, {"return_X_y": "y"},
                   {"target": 3}):
        with pytest.raises(MgkflowError):
            moses(**kwargs)
    with pytest.raises(MgkflowError):
        moses_file("valid")


def test_full_split_missing_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(moses_set.importlib.util, "find_spec", lambda name: None)
    for split in ("train", "test"):
        with pytest.raises(FileNotFoundError, match=f"full MOSES {split} split is not available.*never downloads"):
            moses(split=split, n_graphs=2)
    with pytest.raises(MgkflowError, match="no such MOSES file"):
        moses(path=tmp_path / "train.csv.gz", n_graphs=2)


def test_installed_molsets_is_found_without_importing_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    root = tmp_path / "moses"
    (root / "dataset" / "data").mkdir(parents=True)
    (root / "__init__.py").write_text("raise ImportError('importing moses would import torch')\n")
    with gzip.open(root / "dataset" / "data" / "test.csv.gz", "wt") as fh:
        fh.write("SMILES\nCCO\nc1ccccc1\n")
    spec = importlib.util.spec_from_file_location("moses", root / "__init__.py", submodule_search_locations=[str(root)])
    monkeypatch.setattr(moses_set.importlib.util, "find_spec", lambda name: spec if name == "moses" else None)
    assert moses_file("test") == root / "dataset" / "data" / "test.csv.gz"
    pytest.importorskip("rdkit")
    data = moses(split="test", target="tpsa")
    assert data.smiles == ("CCO", "c1ccccc1") and data.names == ("moses-test-0", "moses-test-1")
    assert data.y.tolist() == [20.23, 0.0]


def test_path_reads_like_the_subset(tmp_path: Path) -> None:
    """A MOSES-layout file given by path gives the same graphs and labels as the shipped subset."""
    pytest.importorskip("rdkit")
    sub = moses(n_graphs=20, target="qed")
    path = tmp_path / "train.csv.gz"
    with gzip.open(path, "wt") as fh:
        fh.write("SMILES\n" + "\n".join(sub.smiles) + "\n")
    full = moses(n_graphs=20, target="qed", split="train", path=path)
    assert full.smiles == sub.smiles and np.array_equal(full.y, sub.y)
    for a, b in zip(full.graphs, sub.graphs):
        assert a.n_nodes == b.n_nodes and set(a.node_labels) == set(b.node_labels)
        for f in a.node_labels:
            assert np.array_equal(a.node_labels[f], b.node_labels[f]), f
        for f in a.edge_labels:
            assert np.array_equal(a.edge_labels[f], b.edge_labels[f]), f
        assert np.array_equal(a.adjacency.toarray(), b.adjacency.toarray())
