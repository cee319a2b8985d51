"""Readers: SMILES (RDKit) and PDB (own parser)."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

from mgkflow import Graph, GraphError
from mgkflow.io.pdb_parser import graph_arrays_from_pdb, parse_pdb_atoms

FROM_CSR_KEYS = {"indptr", "indices", "data", "n_nodes", "node_labels", "edge_labels", "coords"}


def _edge_dict(g: Graph, field: str) -> dict[tuple[int, int], float]:
    rows, cols = g.coo()
    vals = g.edge_labels[field]
    return {(int(r), int(c)): float(v) for r, c, v in zip(rows, cols, vals) if r < c}


# ---------------------------------------------------------------------- SMILES
def test_benzene_aromatic_bonds():
    pytest.importorskip("rdkit")
    from mgkflow.io.rdkit import graph_arrays_from_smiles

    arrays = graph_arrays_from_smiles("c1ccccc1")
    assert set(arrays) == FROM_CSR_KEYS and arrays["coords"] is None
    g = Graph.from_csr(**arrays, title="benzene")
    assert (g.n_nodes, g.n_edges) == (6, 6)
    np.testing.assert_array_equal(g.node_labels["element"], [6] * 6)
    np.testing.assert_array_equal(g.node_labels["aromatic"], [1] * 6)
    np.testing.assert_array_equal(g.node_labels["charge"], [0] * 6)
    np.testing.assert_array_equal(g.node_labels["hybridization"], [3] * 6)  # SP2
    np.testing.assert_array_equal(g.edge_labels["bond_order"], [1.5] * 12)
    np.testing.assert_array_equal(g.edge_labels["in_ring"], [1] * 12)
    np.testing.assert_array_equal(g.edge_labels["conjugated"], [1] * 12)
    np.testing.assert_array_equal(g.adjacency.data, np.ones(12))
    np.testing.assert_array_equal(g.degree_sum(), [2] * 6)


def test_ethanol_heavy_atoms_only():
    pytest.importorskip("rdkit")
    g = Graph.from_smiles("CCO")
    assert g.title == "CCO"
    assert (g.n_nodes, g.n_edges) == (3, 2)
    np.testing.assert_array_equal(g.node_labels["element"], [6, 6, 8])
    np.testing.assert_array_equal(g.node_labels["hybridization"], [4, 4, 4])  # SP3
    assert _edge_dict(g, "bond_order") == {(0, 1): 1.0, (1, 2): 1.0}
    np.testing.assert_array_equal(g.edge_labels["in_ring"], 0)
    # explicit and isotopic hydrogens are dropped too
    assert Graph.from_smiles("[2H]OC([H])([H])C").n_nodes == 3


def test_charged_molecules_and_bond_orders():
    pytest.importorskip("rdkit")
    g = Graph.from_smiles("C[N+](C)(C)C.[Cl-]", title="tetramethylammonium chloride")
    assert g.title == "tetramethylammonium chloride"
    np.testing.assert_array_equal(g.node_labels["element"], [6, 7, 6, 6, 6, 17])
    np.testing.assert_array_equal(g.node_labels["charge"], [0, 1, 0, 0, 0, -1])
    assert g.degree_sum()[5] == 0  # the chloride is an isolated node
    acid = Graph.from_smiles("CC(=O)[O-]")
    np.testing.assert_array_equal(acid.node_labels["charge"], [0, 0, 0, -1])
    assert _edge_dict(acid, "bond_order") == {(0, 1): 1.0, (1, 2): 2.0, (1, 3): 1.0}
    nitrile = Graph.from_smiles("CC#N")
    assert _edge_dict(nitrile, "bond_order")[(1, 2)] == 3.0
    assert nitrile.node_labels["hybridization"][2] == 2  # SP
    styrene = Graph.from_smiles("C=Cc1ccccc1")
    bo = _edge_dict(styrene, "bond_order")
    assert bo[(0, 1)] == 2.0 and bo[(1, 2)] == 1.0 and bo[(2, 3)] == 1.5
    assert _edge_dict(styrene, "conjugated")[(0, 1)] == 1
    assert _edge_dict(styrene, "in_ring")[(1, 2)] == 0


def test_csr_arrays_sorted_and_symmetric():
    pytest.importorskip("rdkit")
    from mgkflow.io.rdkit import graph_arrays_from_smiles

    a = graph_arrays_from_smiles("OC(=O)c1ccccc1OC(C)=O")  # aspirin
    indptr, indices = a["indptr"], a["indices"]
    for r in range(a["n_nodes"]):
        assert np.all(np.diff(indices[indptr[r] : indptr[r + 1]]) > 0)
    g = Graph.from_csr(**a)
    assert (g.n_nodes, g.n_edges) == (13, 13)


@pytest.mark.parametrize("smiles", ["not a smiles", "C1CC", "", "[Xx]"])
def test_bad_smiles_raises_graph_error_naming_it(smiles):
    pytest.importorskip("rdkit")
    with pytest.raises(GraphError) as info:
        Graph.from_smiles(smiles)
    assert repr(smiles) in str(info.value)


def test_smiles_without_heavy_atoms():
    pytest.importorskip("rdkit")
    with pytest.raises(GraphError, match="heavy atom"):
        Graph.from_smiles("[H][H]")


# ---------------------------------------------------------------------- PDB
def _atom(serial, name, resname, chain, resseq, xyz, element, record="ATOM", altloc=" "):
    x, y, z = xyz
    return (
        f"{record:<6}{serial:>5} {name:<4}{altloc}{resname:>3} {chain}{resseq:>4}    "
        f"{x:8.3f}{y:8.3f}{z:8.3f}  1.00  0.00          {element:>2}"
    )


TINY_PDB = "\n".join(
    [
        "HEADER    TEST",
        _atom(1, " N", "GLY", "A", 1, (0.0, 0.0, 0.0), "N"),
        _atom(2, " CA", "GLY", "A", 1, (1.5, 0.0, 0.0), "C"),
        _atom(3, " H", "GLY", "A", 1, (0.0, 1.0, 0.0), "H"),
        _atom(4, " C", "GLY", "A", 1, (1.5, 2.0, 0.0), "C", altloc="A"),
        _atom(5, " C", "GLY", "A", 1, (9.0, 9.0, 9.0), "C", altloc="B"),
        _atom(6, " O", "HOH", "A", 101, (0.5, 0.5, 0.5), "O", record="HETATM"),
        _atom(7, " SD", "MET", "A", 2, (10.0, 0.0, 0.0), "S"),
        _atom(8, "ZN", "ZN", "A", 201, (1.5, 2.0, 3.0), "ZN", record="HETATM"),
        "TER",
        "ENDMDL",
        _atom(9, " CA", "ALA", "A", 3, (0.0, 0.0, 1.0), "C"),
        "END",
    ]
)


def test_tiny_pdb_nodes_labels_and_coords(tmp_path):
    path = tmp_path / "tiny.pdb"
    path.write_text(TINY_PDB)
    g = Graph.from_pdb(path, cutoff=4.0)
    assert g.title == "tiny.pdb"
    # N, CA, C (altloc A only), SD, ZN; hydrogen, water, altloc B and the second model are skipped
    assert g.n_nodes == 5
    np.testing.assert_array_equal(g.node_labels["element"], [7, 6, 6, 16, 30])
    np.testing.assert_array_equal(g.node_labels["residue"], [8, 8, 8, 13, 0])  # GLY=8, MET=13, other=0
    np.testing.assert_allclose(
        g.coords, [[0, 0, 0], [1.5, 0, 0], [1.5, 2, 0], [10, 0, 0], [1.5, 2, 3]]
    )


def test_tiny_pdb_distances_and_smooth_weights(tmp_path):
    path = tmp_path / "tiny.pdb.gz"
    path.write_bytes(gzip.compress(TINY_PDB.encode()))  # gzip detected from content
    cutoff = 4.0
    g = Graph.from_pdb(path, cutoff=cutoff)
    dist = _edge_dict(g, "distance")
    xyz = g.coords
    expected = {}
    for i in range(g.n_nodes):
        for j in range(i + 1, g.n_nodes):
            r = float(np.linalg.norm(xyz[i] - xyz[j]))
            if r < cutoff:
                expected[(i, j)] = r
    assert set(dist) == set(expected)  # SD (10 Å away) has no edge
    for key, r in expected.items():
        assert dist[key] == pytest.approx(r)
    w = g.adjacency.toarray()
    for (i, j), r in expected.items():
        assert w[i, j] == pytest.approx((1 - (r / cutoff) ** 2) ** 2)
    assert g.degree_sum()[3] == 0
    # weights decrease smoothly to zero at the cutoff: an atom pair just inside has a tiny weight
    near = graph_arrays_from_pdb(path, cutoff=2.5 + 1e-6)  # N..C is exactly 2.5 Å
    assert 0 < near["data"].min() < 1e-9


def test_pdb_cutoff_excludes_pair_at_distance(tmp_path):
    path = tmp_path / "tiny.pdb"
    path.write_text(TINY_PDB)
    arrays = graph_arrays_from_pdb(path, cutoff=1.5)  # N..CA is exactly 1.5 Å: no edge (weight 0)
    assert arrays["data"].size == 0
    g = Graph.from_csr(**arrays)
    assert g.n_edges == 0 and g.n_nodes == 5


def test_pdb_chain_selection_and_element_inference(tmp_path):
    lines = [
        _atom(1, " N", "ALA", "A", 1, (0, 0, 0), "N"),
        _atom(2, " CA", "ALA", "B", 1, (1, 0, 0), "C"),
        # no element columns: inferred from the atom name (CHARMM-style hydrogen names)
        "ATOM      3  CB  ALA B   1       2.000   0.000   0.000  1.00  0.00",
        "ATOM      4 HT1  ALA B   1       3.000   0.000   0.000  1.00  0.00",
        "ATOM      5 1HB  ALA B   1       3.000   1.000   0.000  1.00  0.00",
        "HETATM    6 CL    CL B   2       5.000   0.000   0.000  1.00  0.00",
        "HETATM    7  OH2 TIP3W   3       5.000   5.000   0.000  1.00  0.00",
    ]
    path = tmp_path / "two.pdb"
    path.write_text("\n".join(lines) + "\n")
    atoms = parse_pdb_atoms(path, chain="B")
    assert atoms["name"] == ["CA", "CB", "CL"]
    np.testing.assert_array_equal(atoms["element"], [6, 6, 17])
    assert Graph.from_pdb(path).n_nodes == 4
    with pytest.raises(GraphError, match="no chain 'C'"):
        graph_arrays_from_pdb(path, chain="C")


def test_pdb_errors(tmp_path):
    empty = tmp_path / "empty.pdb"
    empty.write_text("")
    with pytest.raises(GraphError, match="empty"):
        Graph.from_pdb(empty)
    junk = tmp_path / "junk.pdb"
    junk.write_text("HEADER    nothing here\nREMARK   1\nEND\n")
    with pytest.raises(GraphError, match="no ATOM/HETATM"):
        Graph.from_pdb(junk)
    only_h = tmp_path / "h.pdb"
    only_h.write_text(_atom(1, " H", "GLY", "A", 1, (0, 0, 0), "H") + "\n")
    with pytest.raises(GraphError, match="no heavy atoms"):
        Graph.from_pdb(only_h)
    with pytest.raises(GraphError, match="cannot read"):
        Graph.from_pdb(tmp_path / "missing.pdb")
    bad_xyz = tmp_path / "bad.pdb"
    bad_xyz.write_text("ATOM      1  N   GLY A   1       x.xxx   0.000   0.000  1.00  0.00           N\n")
    with pytest.raises(GraphError, match="line 1"):
        Graph.from_pdb(bad_xyz)
    bad_gz = tmp_path / "bad.pdb.gz"
    bad_gz.write_bytes(b"\x1f\x8b" + b"garbage")
    with pytest.raises(GraphError, match="gzip"):
        Graph.from_pdb(bad_gz)
    good = tmp_path / "good.pdb"
    good.write_text(TINY_PDB)
    for cutoff in (0, -1.0, float("nan"), float("inf"), "abc"):
        with pytest.raises(GraphError, match="cutoff"):
            Graph.from_pdb(good, cutoff=cutoff)


@pytest.mark.parametrize("value", ["   1e308", "  -1e200", "   1e151"])
def test_pdb_huge_coordinates_give_graph_error(tmp_path, value):
    line = f"ATOM      1  N   GLY A   1    {value}   0.000   0.000  1.00  0.00           N"
    path = tmp_path / "huge.pdb"
    path.write_text(line + "\n" + _atom(2, " CA", "GLY", "A", 1, (0.0, 0.0, 0.0), "C") + "\n")
    with pytest.raises(GraphError, match=r"huge.pdb: atom 1 \('N'\) has coordinates .* beyond"):
        Graph.from_pdb(path)


# ---------------------------------------------------------------------- moved modules
@pytest.mark.parametrize(
    ("old", "new", "names"),
    [
        ("mgkflow.io_chem", "mgkflow.io.rdkit", ["graph_arrays_from_mol", "csr_from_edges", "require_rdkit"]),
        ("mgkflow.io_pdb", "mgkflow.io.pdb", ["graph_arrays_from_pdb", "parse_pdb_atoms", "contact_edges", "ELEMENTS"]),
    ],
)
def test_old_module_paths_still_import_with_a_warning(old, new, names):
    """mgkflow.io_chem / io_pdb moved into mgkflow.io: the old names still import (a DeprecationWarning)."""
    import subprocess
    import sys

    code = (
        "import importlib, warnings\n"
        "with warnings.catch_warnings(record=True) as w:\n"
        "    warnings.simplefilter('always')\n"
        f"    old = importlib.import_module({old!r})\n"
        f"assert old is importlib.import_module({new!r}), old\n"
        "assert any(issubclass(x.category, DeprecationWarning) for x in w), w\n"
        f"assert all(hasattr(old, n) for n in {names!r})\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
