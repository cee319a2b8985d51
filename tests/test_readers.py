"""File readers (mgkflow.io): SMILES, SDF, GraphML, GML, TU; Gram files; fixtures made here."""

from __future__ import annotations

import os
import stat

import networkx as nx
import numpy as np
import pytest

from mgkflow import Graph
from mgkflow.errors import FileFormatError, GraphError, MgkflowError, OutputPathError
from mgkflow.io import (
    default_kernels,
    detect_format,
    load_gram_npz,
    read_gml,
    read_graphml,
    read_graphs,
    read_sdf,
    read_smiles,
    read_tu,
    save_gram,
)
from mgkflow.kernels import Constant, KroneckerDelta


# ---------------------------------------------------------------------- SMILES
def test_smiles_whitespace_with_names(tmp_path):
    pytest.importorskip("rdkit")
    p = tmp_path / "mols.smi"
    p.write_text("# comment\nCCO ethanol\n\nc1ccccc1O phenol 1.5\n")
    gs = read_smiles(p)
    assert gs.format == "smiles" and gs.ids == ["ethanol", "phenol"]
    assert [g.title for g in gs.graphs] == gs.ids
    assert gs.graphs[1].node_labels["hydrogens"].tolist() == [1, 1, 1, 1, 1, 0, 1]
    assert "aromatic" in gs.graphs[1].edge_labels
    # existing fields equal from_smiles (the drugs set's conventions)
    ref = Graph.from_smiles("c1ccccc1O")
    for f in ref.node_labels:
        np.testing.assert_array_equal(ref.node_labels[f], gs.graphs[1].node_labels[f])
    for f in ref.edge_labels:
        np.testing.assert_array_equal(ref.edge_labels[f], gs.graphs[1].edge_labels[f])
    assert gs.properties.loc["phenol", "column_3"] == 1.5


def test_smiles_csv_with_header_and_properties(tmp_path):
    pytest.importorskip("rdkit")
    p = tmp_path / "mols.csv"
    p.write_text('name,SMILES,logp,note\n"ethanol, abs",CCO,-0.31,x\nbenzene,c1ccccc1,2.13,y\n')
    gs = read_graphs(p)
    assert gs.ids == ["ethanol, abs", "benzene"]
    assert list(gs.properties.columns) == ["logp", "note"]
    assert gs.properties["logp"].dtype.kind == "f" and gs.properties["logp"].tolist() == [-0.31, 2.13]
    assert [g.n_nodes for g in gs.graphs] == [3, 6]


def test_smiles_without_names_and_tab_separated(tmp_path):
    pytest.importorskip("rdkit")
    p = tmp_path / "plain.smi"
    p.write_text("CCO\nCC(=O)O\n")
    assert read_smiles(p).ids == ["CCO", "CC(=O)O"]
    t = tmp_path / "tab.tsv"
    t.write_text("smiles\tname\tlabel\nCCO\tethanol absolute\t1\nCCN\tethylamine\t0\n")
    gs = read_smiles(t)
    assert gs.ids == ["ethanol absolute", "ethylamine"] and gs.properties["label"].tolist() == [1, 0]


def test_smiles_bad_line_names_file_and_line(tmp_path):
    pytest.importorskip("rdkit")
    p = tmp_path / "bad.smi"
    p.write_text("CCO a\nC1CC b\nCCN c\n")
    with pytest.raises(FileFormatError, match=r"bad.smi, line 2: invalid SMILES 'C1CC'") as info:
        read_smiles(p)
    assert info.value.line == 2 and isinstance(info.value, GraphError)
    gs = read_smiles(p, on_error="skip")
    assert gs.ids == ["a", "c"] and gs.skipped[0][0] == 2
    h = tmp_path / "hdr.csv"
    h.write_text("smiles,name\nCCO,a,extra\n")
    with pytest.raises(FileFormatError, match=r"line 2: 3 fields but the header has 2"):
        read_smiles(h)
    e = tmp_path / "empty.smi"
    e.write_text("\n# only a comment\n")
    with pytest.raises(FileFormatError, match="empty"):
        read_smiles(e)
    with pytest.raises(FileFormatError, match="no such file"):
        read_smiles(tmp_path / "missing.smi")
    b = tmp_path / "bin.smi"
    b.write_bytes(b"CC\x00O\n")
    with pytest.raises(FileFormatError, match="not a text file"):
        read_smiles(b)


# ---------------------------------------------------------------------- SDF
def _write_sdf(path, with_3d=True, bad_record=False):
    from rdkit import Chem
    from rdkit.Chem import AllChem

    w = Chem.SDWriter(str(path))
    for name, smi, act in (("ethanol", "CCO", 1.25), ("acetic acid", "CC(=O)O", -2.0)):
        m = Chem.AddHs(Chem.MolFromSmiles(smi))
        if with_3d:
            AllChem.EmbedMolecule(m, randomSeed=7)
        m = Chem.RemoveHs(m)
        m.SetProp("_Name", name)
        m.SetProp("activity", str(act))
        m.SetProp("source", "test")
        w.write(m)
    w.close()
    if bad_record:
        text = path.read_text()
        path.write_text(text + "broken\n  nothing here\n\n  2  1  0  0  0  0  0  0  0  0999 V2000\n$$$$\n")


def test_sdf_properties_ids_and_3d_distances(tmp_path):
    pytest.importorskip("rdkit")
    p = tmp_path / "mols.sdf"
    _write_sdf(p)
    gs = read_graphs(p)
    assert gs.format == "sdf" and gs.ids == ["ethanol", "acetic acid"]
    assert gs.properties["activity"].tolist() == [1.25, -2.0]
    assert gs.properties["source"].tolist() == ["test", "test"]
    g = gs.graphs[0]
    assert g.coords.shape == (3, 3)
    rows, cols = g.coo()
    d = np.linalg.norm(g.coords[rows] - g.coords[cols], axis=1)
    np.testing.assert_allclose(g.edge_labels["distance"], d)
    assert np.all((d > 1.2) & (d < 1.6))  # C-C and C-O bond lengths
    no3d = read_sdf(p, conformer=False)
    assert no3d.graphs[0].coords is None and "distance" not in no3d.graphs[0].edge_labels


def test_sdf_2d_has_no_distances_by_default_and_bad_record(tmp_path):
    pytest.importorskip("rdkit")
    p = tmp_path / "flat.sdf"
    _write_sdf(p, with_3d=False, bad_record=True)
    with pytest.raises(FileFormatError, match=r"flat.sdf, line \d+: record 3: RDKit could not read"):
        read_sdf(p)
    gs = read_sdf(p, on_error="skip")
    assert len(gs) == 2 and "distance" not in gs.graphs[0].edge_labels and len(gs.skipped) == 1


# ---------------------------------------------------------------------- GraphML / GML
def _nx_graph(elements, bonds, name):
    G = nx.Graph(name=name, activity=float(len(elements)))
    for i, e in enumerate(elements):
        G.add_node(f"n{i}", element=e, mass=float(i) + 0.5)
    for i, j, kind in bonds:
        G.add_edge(f"n{i}", f"n{j}", kind=kind, weight=2.0)
    return G


def test_graphml_directory_shares_one_encoder(tmp_path):
    nx.write_graphml(_nx_graph(["O", "C"], [(0, 1, "single")], "a"), tmp_path / "a.graphml")
    nx.write_graphml(_nx_graph(["N", "C", "O"], [(0, 1, "double"), (1, 2, "single")], "b"), tmp_path / "b.graphml")
    assert detect_format(tmp_path) == "graphml"
    gs = read_graphs(tmp_path)
    assert gs.ids == ["a", "b"]
    # codes in sorted order over all graphs of the call: C=0, N=1, O=2
    assert gs.encoder.tables["node:element"] == {"C": 0, "N": 1, "O": 2}
    assert gs.graphs[0].node_labels["element"].tolist() == [2, 0]
    assert gs.graphs[1].node_labels["element"].tolist() == [1, 0, 2]
    assert gs.graphs[1].node_labels["mass"].dtype == np.float64
    assert gs.encoder.decode("edge:kind", gs.graphs[1].edge_labels["kind"][:1]) == ["double"]
    np.testing.assert_array_equal(gs.graphs[0].adjacency.data, [2.0, 2.0])  # weights, not a label
    assert "weight" not in gs.graphs[0].edge_labels
    assert gs.properties.loc["b", "activity"] == 3.0
    # a later call with the same encoder keeps the codes and appends new values
    nx.write_graphml(_nx_graph(["S", "O"], [(0, 1, "single")], "c"), tmp_path / "c.graphml")
    more = read_graphml(tmp_path / "c.graphml", encoder=gs.encoder)
    assert more.graphs[0].node_labels["element"].tolist() == [3, 2]
    only = read_graphml(tmp_path / "a.graphml", node_labels="mass", edge_labels=[])
    assert list(only.graphs[0].node_labels) == ["mass"] and not only.graphs[0].edge_labels


def test_graphml_errors(tmp_path):
    bad = tmp_path / "bad.graphml"
    bad.write_text("<graphml><graph><node id='a'></graph>")
    with pytest.raises(FileFormatError, match="bad.graphml.*cannot parse graphml"):
        read_graphml(bad)
    D = nx.DiGraph([(0, 1)])
    nx.write_graphml(D, tmp_path / "d.graphml")
    with pytest.raises(FileFormatError, match="directed graph"):
        read_graphml(tmp_path / "d.graphml")
    assert read_graphml(tmp_path / "d.graphml", directed="undirected").graphs[0].n_edges == 1
    G = nx.path_graph(3)
    nx.set_node_attributes(G, {0: "a", 1: 2, 2: "b"}, "x")
    nx.write_gml(G, tmp_path / "mixed.gml")
    with pytest.raises(FileFormatError, match="'x' mixes text and numbers"):
        read_gml(tmp_path / "mixed.gml")
    with pytest.raises(FileFormatError, match="cannot tell the format"):
        read_graphs(tmp_path / "mixed.dat")


def test_gml_vector_labels(tmp_path):
    G = nx.path_graph(3)
    nx.set_node_attributes(G, {0: [0.0, 1.0], 1: [1.0, 1.0], 2: [2.0, 0.5]}, "pos")
    nx.set_node_attributes(G, {0: "x", 1: "y", 2: "x"}, "kind")
    nx.write_gml(G, tmp_path / "v.gml")
    g = read_graphs(tmp_path / "v.gml").graphs[0]
    assert g.node_labels["pos"].shape == (3, 2)
    assert g.node_labels["kind"].tolist() == [0, 1, 0]


# ---------------------------------------------------------------------- TU
def _write_tu(d, name="MUT", edge_labels=True, extra=None):
    d.mkdir(exist_ok=True)
    files = {
        "A": "1, 2\n2, 1\n2, 3\n3, 2\n4, 5\n5, 4\n",
        "graph_indicator": "1\n1\n1\n2\n2\n",
        "graph_labels": "1\n-1\n",
        "node_labels": "0\n1\n0\n2\n2\n",
        "node_attributes": "0.5, 1.0\n1.5, 2.0\n2.5, 3.0\n0.0, 0.0\n1.0, 1.0\n",
    }
    if edge_labels:
        files["edge_labels"] = "1\n1\n2\n2\n1\n1\n"
        files["edge_attributes"] = "0.5\n0.5\n1.5\n1.5\n2.5\n2.5\n"
    files.update(extra or {})
    for suffix, text in files.items():
        (d / f"{name}_{suffix}.txt").write_text(text)
    return d


def test_tu_dataset_fields_and_properties(tmp_path):
    d = _write_tu(tmp_path / "MUT")
    gs = read_graphs(d)
    assert gs.format == "tu" and gs.ids == ["MUT-1", "MUT-2"]
    g1, g2 = gs.graphs
    assert (g1.n_nodes, g1.n_edges, g2.n_nodes, g2.n_edges) == (3, 2, 2, 1)
    assert g1.node_labels["label"].tolist() == [0, 1, 0] and g1.node_labels["label"].dtype == np.int64
    np.testing.assert_array_equal(g1.node_labels["attributes"], [[0.5, 1.0], [1.5, 2.0], [2.5, 3.0]])
    assert g1.edge_labels["label"].tolist() == [1, 1, 2, 2]
    assert g1.edge_labels["attributes"].tolist() == [0.5, 0.5, 1.5, 1.5]  # one value per line: a scalar field
    assert gs.properties["label"].tolist() == [1, -1]
    nk, ek = default_kernels(gs)
    assert (nk, ek) == (KroneckerDelta(0.5, "label"), KroneckerDelta(0.5, "label")) or (
        repr(nk), repr(ek)) == (repr(KroneckerDelta(0.5, "label")), repr(KroneckerDelta(0.5, "label")))
    first = read_tu(d, n_graphs=1, node_labels="label", edge_labels=[])
    assert len(first) == 1 and list(first.graphs[0].node_labels) == ["label"] and not first.graphs[0].edge_labels


def test_tu_edges_listed_once_and_text_labels(tmp_path):
    d = _write_tu(tmp_path / "T", name="T", edge_labels=False,
                  extra={"A": "1, 2\n3, 2\n5, 4\n", "node_labels": "C\nO\nC\nN\nC\n"})
    gs = read_tu(d)
    assert [g.n_edges for g in gs.graphs] == [2, 1]
    assert gs.encoder.tables["node:label"] == {"C": 0, "N": 1, "O": 2}
    assert gs.graphs[1].node_labels["label"].tolist() == [1, 0]


@pytest.mark.parametrize(
    "extra, match",
    [
        ({"A": "1, 2\n2, x\n"}, r"MUT_A.txt, line 2: node number: 'x' is not an integer"),
        ({"A": "1, 2\n2, 9\n"}, r"MUT_A.txt, line 2: node number \[2, 9\] outside 1..5"),
        ({"A": "1, 2\n3, 4\n"}, r"MUT_A.txt, line 2: edge \[3, 4\] joins graphs 1 and 2"),
        ({"A": "1, 1\n"}, r"MUT_A.txt, line 1: self loop at node 1"),
        ({"A": "1, 2, 3\n"}, r"MUT_A.txt, line 1: expected 2 values, got 3"),
        ({"graph_indicator": "1\n1\n3\n3\n3\n"}, r"graph 2 has no nodes"),
        ({"graph_labels": "1\n"}, r"MUT_graph_labels.txt: 1 lines, expected 2"),
        ({"node_labels": "0\n1\n"}, r"MUT_node_labels.txt: 2 lines, expected 5"),
        ({"node_attributes": "1\n2\n3\n4\nnan\n"}, r"line 5: node attribute: \['nan'\] is not finite"),
        ({"node_attributes": "1\n2\nx\n4\n5\n"}, r"line 3: node attribute: 'x' is not a number"),
        ({"edge_labels": "1\n2\n2\n2\n1\n1\n"}, r"MUT_edge_labels.txt, line 2: edge 1-2 is listed twice"),
        ({"node_labels": "0\n1\n\n2\n2\n"}, r"MUT_node_labels.txt, line 3: blank line"),
        ({"node_labels": "0\n1\n99999999999999999999\n2\n2\n"}, r"line 3: .*outside the int64 range"),
    ],
)
def test_tu_malformed_files_name_file_and_line(tmp_path, extra, match):
    d = _write_tu(tmp_path / "MUT", extra=extra)
    with pytest.raises(FileFormatError, match=match):
        read_tu(d)


def test_tu_self_loops_drop_and_directory_errors(tmp_path):
    d = _write_tu(tmp_path / "L", name="L", edge_labels=False, extra={"A": "1, 1\n1, 2\n4, 5\n"})
    assert [g.n_edges for g in read_tu(d, self_loops="drop").graphs] == [1, 1]
    with pytest.raises(FileFormatError, match="no TU dataset"):
        read_graphs(tmp_path / "L" / ".." / "nothing_here" if False else _empty_dir(tmp_path))
    _write_tu(tmp_path / "L", name="M", edge_labels=False)
    with pytest.raises(FileFormatError, match=r"several TU datasets \['L', 'M'\]"):
        read_tu(tmp_path / "L")
    assert read_tu(tmp_path / "L", name="M").ids[0] == "M-1"


def _empty_dir(tmp_path):
    e = tmp_path / "empty"
    e.mkdir()
    return e


# ---------------------------------------------------------------------- kernels, Gram files
def test_default_kernels_per_format(tmp_path):
    pytest.importorskip("rdkit")
    p = tmp_path / "m.smi"
    p.write_text("CCO\n")
    nk, ek = default_kernels(read_smiles(p))
    assert (repr(nk), repr(ek)) == ("KroneckerDelta(0.5, 'element')", "KroneckerDelta(0.5, 'bond_order')")
    g = Graph(np.array([[0, 1], [1, 0]]))
    nk, ek = default_kernels([g])
    assert (repr(nk), repr(ek)) == (repr(Constant(1.0)), repr(Constant(1.0)))


def test_save_and_load_gram_npz_with_ids_and_params(tmp_path):
    from mgkflow import MarginalizedGraphKernel

    kern = MarginalizedGraphKernel(node_kernel=KroneckerDelta(0.5, "label"), q=0.1, backend="cpu")
    K = np.array([[1.0, 0.25], [0.25, 2.0]])
    p = save_gram(tmp_path / "out" / "K.npz", K, ids=["g1", "g2"], kernel=kern, params={"ordering": "pbr"})
    z = load_gram_npz(p)
    np.testing.assert_array_equal(z.gram, K)
    assert z.ids == z.col_ids == ["g1", "g2"]
    assert z.params["q"] == 0.1 and z.params["ordering"] == "pbr"
    assert z.params["node_kernel"] == "KroneckerDelta(0.5, 'label')"
    assert z.params["node_kernel_hyperparameters"]["h"] == 0.5
    assert z.kernel.startswith("MarginalizedGraphKernel(")
    with np.load(p, allow_pickle=False) as raw:  # readable without pickle
        assert set(raw.files) == {"gram", "ids", "col_ids", "kernel", "params"}
    bare = save_gram(tmp_path / "K.npy", K)
    np.testing.assert_array_equal(np.load(bare), K)
    with pytest.raises(MgkflowError, match="must end in .npz or .npy"):
        save_gram(tmp_path / "K.txt", K)
    with pytest.raises(ValueError, match="3 row ids"):
        save_gram(tmp_path / "K2.npz", K, ids=["a", "b", "c"])
    assert not (tmp_path / "K2.npz").exists()


def test_output_files_get_plain_open_permissions(tmp_path):
    old = os.umask(0o022)
    try:
        p = save_gram(tmp_path / "K.npz", np.eye(2))
        ref = tmp_path / "ref.txt"
        with open(ref, "w") as fh:
            fh.write("x")
        assert stat.S_IMODE(p.stat().st_mode) == stat.S_IMODE(ref.stat().st_mode) == 0o644
        os.umask(0o027)
        q = save_gram(tmp_path / "K.npy", np.eye(2))
        assert stat.S_IMODE(q.stat().st_mode) == 0o640
    finally:
        os.umask(old)


def test_unwritable_outputs_are_clean_errors(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    (tmp_path / "dir.npz").mkdir()
    for bad, match in (
        (f / "K.npz", "is a file, not a directory"),
        (tmp_path / "dir.npz", "is a directory"),
        (tmp_path / ("x" * 300 + ".npz"), "longer than the file system allows"),
    ):
        with pytest.raises(OutputPathError, match=match):
            save_gram(bad, np.eye(2))
    long_ok = tmp_path / ("y" * 250 + ".npz")  # near the limit: the temporary name must not overflow
    save_gram(long_ok, np.eye(2))
    assert long_ok.exists() and [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    assert not (f / "K.npz").exists() and f.read_text() == "x"


def test_tu_without_any_edge(tmp_path):
    d = _write_tu(tmp_path / "E", name="E", edge_labels=False, extra={"A": ""})
    gs = read_tu(d)  # found by the fuzz suite: an empty DS_A.txt gave a numpy reshape error
    assert [g.n_edges for g in gs.graphs] == [0, 0] and [g.n_nodes for g in gs.graphs] == [3, 2]


# ---------------------------------------------------------------------- PDB
def _pdb_line(serial, x, element="C", name=" CA "):
    return (f"ATOM  {serial:>5} {name} GLY A{serial:>4}    {x:8.3f}{0.0:8.3f}{0.0:8.3f}  1.00  0.00"
            f"          {element:>2}")


def test_pdb_directory_reads_file_by_file(tmp_path):
    d = tmp_path / "prot"
    d.mkdir()
    (d / "a.pdb").write_text("\n".join(_pdb_line(i + 1, 1.5 * i) for i in range(3)) + "\n")
    (d / "b.pdb").write_text("\n".join(_pdb_line(i + 1, 2.0 * i, "N", " N  ") for i in range(4)) + "\n")
    assert detect_format(d) == "pdb"
    gs = read_graphs(d, cutoff=2.5)
    assert gs.format == "pdb" and gs.ids == ["a", "b"]
    assert [g.n_edges for g in gs.graphs] == [2, 3]
    assert gs.graphs[1].node_labels["element"].tolist() == [7] * 4
    nk, ek = default_kernels(gs)
    assert (repr(nk), repr(ek)) == ("KroneckerDelta(0.5, 'element')", "SquareExponential(1.0, 'distance')")
    (d / "c.pdb").write_text("HEADER nothing\n")
    with pytest.raises(FileFormatError, match=r"^PDB file .*c.pdb has no ATOM/HETATM") as info:
        read_graphs(d)
    assert info.value.path.endswith("c.pdb")
