"""The lombardo, lipophilicity and photoswitch loaders: sizes, finite targets, SMILES, registry, no RDKit."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from functools import cache

import numpy as np
import pytest

from mgkflow import Graph, datasets
from mgkflow.datasets import property_sets
from mgkflow.errors import ParameterError, ParameterTypeError

#: (loader, target) -> molecules with a value for that target
SIZES = {
    ("lombardo", "vdss"): 194,
    ("lombardo", "cl"): 199,
    ("lombardo", "fu"): 134,
    ("lombardo", "mrt"): 193,
    ("lombardo", "t_half"): 196,
    ("lipophilicity", None): 4200,
    ("photoswitch", "e_pi_pi"): 392,
    ("photoswitch", "e_n_pi"): 141,
    ("photoswitch", "z_pi_pi"): 93,
    ("photoswitch", "z_n_pi"): 123,
}
NEW = ("lombardo", "lipophilicity", "photoswitch")


def _load(name: str, target: str | None, **kw):
    loader = getattr(datasets, name)
    return loader(**kw) if target is None else loader(target=target, **kw)


@cache
def _full(name: str, target: str | None = None):
    """The whole set (cached: lipophilicity takes seconds to build its 4,200 graphs)."""
    return _load(name, target)


def _rows(name: str) -> list[dict[str, str]]:
    with open(datasets.data_dir() / f"{name}.csv", newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


@pytest.mark.parametrize(("name", "target"), sorted(SIZES, key=str))
def test_shape_targets_smiles(name, target):
    d = _full(name, target)
    n = SIZES[(name, target)]
    assert len(d) == len(d.graphs) == len(d.y) == len(d.smiles) == len(d.names) == len(d.split) == n
    assert d.y.dtype == np.float64 and d.y.shape == (n,) and np.all(np.isfinite(d.y))
    assert all(isinstance(s, str) and s for s in d.smiles) and set(d.split) == {"all"}
    assert [g.title for g in d.graphs] == list(d.names) and len(set(d.names)) == n
    assert all(g.n_nodes >= 7 for g in d.graphs)  # no fragments: every molecule has its heavy atoms
    g = d.graphs[0]
    assert set(g.node_labels) == {"element", "charge", "aromatic", "hybridization", "hydrogens"}
    assert set(g.edge_labels) == {"bond_order", "conjugated", "in_ring", "aromatic"}
    assert d.target
    X, y = _load(name, target, n_graphs=3, return_X_y=True)
    assert len(X) == 3 and np.array_equal(y, d.y[:3])


def test_lombardo_values_are_log10_of_the_file():
    rows = {r["name"]: r for r in _rows("lombardo")}
    assert len(rows) == 199 and "Carboplatin" not in rows  # its SMILES writes Pt as [X]
    for target, col in (("vdss", "vdss"), ("cl", "cl"), ("fu", "fu"), ("mrt", "mrt"), ("t_half", "t_half")):
        d = datasets.lombardo(target)
        np.testing.assert_allclose(10**d.y, [float(rows[n][col]) for n in d.names])
        # left out: exactly the rows without a value (every value in the file is positive)
        assert len(d) == sum(1 for r in rows.values() if r[col].strip())
    d = datasets.lombardo("cl")
    assert d.names[0] == "Dopamine" and d.y[0] == pytest.approx(np.log10(65.9))
    assert datasets.lombardo("fu").y.max() == 0.0  # fu = 1 for some drugs
    assert "VDss" in datasets.lombardo().target and "L/kg" in datasets.lombardo().target


def test_lipophilicity_and_photoswitch_values():
    d = _full("lipophilicity", None)
    assert d.y.min() == -1.5 and d.y.max() == 4.5
    assert d.names[:2] == ("CHEMBL596271", "CHEMBL1951080") and all(n.startswith("CHEMBL") for n in d.names)
    p = datasets.photoswitch()
    assert p.names[0] == "photoswitch-0" and p.y[0] == 310.0
    assert 250 < p.y.min() and p.y.max() < 650
    z = datasets.photoswitch("z_pi_pi")
    assert set(z.names) <= set(p.names) | {f"photoswitch-{r['id']}" for r in _rows("photoswitch")}


def test_registry():
    info = {d.name: d for d in datasets.list_datasets()}
    for name in NEW:
        target = {"lombardo": "vdss", "photoswitch": "e_pi_pi"}.get(name)  # the defaults
        assert info[name].n_graphs == SIZES[(name, target)]
        if name != "lipophilicity":  # (its full load is test_shape_targets_smiles's)
            assert len(datasets.load(name)) == info[name].n_graphs
        g = datasets.load(name, n_graphs=1)[0]
        assert set(info[name].node_labels) <= set(g.node_labels) and set(info[name].edge_labels) <= set(g.edge_labels)
        nk, ek = datasets.default_kernels(name)
        assert set(nk.fields) <= set(g.node_labels) and set(ek.fields) <= set(g.edge_labels)
        assert len(datasets.load(name, n_graphs=2, labeled=False)) == 2
        assert info[name].source and info[name].description
    assert len(datasets.load("lombardo", target="cl")) == 199
    assert len(datasets.load("photoswitch", target="z_n_pi")) == 123
    with pytest.raises(ParameterError):
        datasets.load("lipophilicity", target="logD")  # one target: no target argument


@pytest.mark.parametrize("name", NEW)
def test_bad_arguments_raise_mgkflow_errors(name):
    loader = getattr(datasets, name)
    with pytest.raises(ParameterError):
        loader(n_graphs=-1)
    with pytest.raises(ParameterTypeError):
        loader(n_graphs=2.5)
    with pytest.raises(ParameterTypeError):
        loader(return_X_y="yes")
    if name != "lipophilicity":
        with pytest.raises(ParameterError, match="target"):
            loader(target="logS")
        with pytest.raises(ParameterTypeError):
            loader(target=3)
    assert len(loader(n_graphs=0)) == 0
    if name != "lipophilicity":
        assert len(loader(n_graphs=10**9)) == len(loader())


def test_loaders_need_no_rdkit():
    code = (
        "import sys, json\n"
        "sys.modules['rdkit'] = None  # any import of rdkit fails\n"
        "from mgkflow import datasets\n"
        "out = {n: len(getattr(datasets, n)(n_graphs=50)) for n in "
        "('lombardo', 'lipophilicity', 'photoswitch', 'freesolv', 'solubility')}\n"
        "print(json.dumps(out))\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out == dict.fromkeys(("lombardo", "lipophilicity", "photoswitch", "freesolv", "solubility"), 50)


def test_file_sizes_and_source_columns():
    root = datasets.data_dir()
    for name in NEW:
        for f in (root / f"{name}.csv", root / f"{name}_graphs.npz"):
            assert f.stat().st_size < 1_000_000, f
    assert list(_rows("lombardo")[0]) == ["name", "cas", "smiles", "vdss", "cl", "fu", "mrt", "t_half", "year"]
    assert list(_rows("lipophilicity")[0]) == ["chembl_id", "smiles", "logD"]
    assert list(_rows("photoswitch")[0]) == ["id", "smiles", "e_pi_pi", "e_n_pi", "z_pi_pi", "z_n_pi"]
    assert sorted(property_sets.LOMBARDO_TARGETS) == ["cl", "fu", "mrt", "t_half", "vdss"]


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


@pytest.mark.parametrize(
    ("name", "target", "step"), [("lombardo", "cl", 1), ("photoswitch", "e_pi_pi", 1), ("lipophilicity", None, 7)]
)
def test_graphs_match_from_smiles(name, target, step):
    pytest.importorskip("rdkit")
    d = _full(name, target)
    assert set(d.smiles) <= {r["smiles"] for r in _rows(name)}
    for smi, g in list(zip(d.smiles, d.graphs))[::step]:
        _same_graph(Graph.from_smiles(smi, extended=True), g)
