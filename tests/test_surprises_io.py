"""First use without surprises: the file readers, Gram files and dataset registry (issue items 1-7)."""

from __future__ import annotations

import time
import warnings

import numpy as np
import pytest

from mgkflow.errors import FileFormatError, MgkflowError, ParameterError, ParameterTypeError
from mgkflow.io import default_kernels, load_gram_npz, read_graphs, read_smiles, save_gram

GRAPHML = """<?xml version="1.0" encoding="UTF-8"?>
<graphml xmlns="http://graphml.graphdrawing.org/xmlns">
  <key id="d0" for="node" attr.name="atom"{atype}/>
  <key id="d1" for="edge" attr.name="length" attr.type="double"/>
  <key id="d2" for="node" attr.name="mass" attr.type="int"/>
  <graph edgedefault="undirected">
    <node id="a"><data key="d0">C</data><data key="d2">12</data></node>
    <node id="b"><data key="d0">O</data></node>
    <node id="c"><data key="d0">N</data><data key="d2">14</data></node>
    <edge source="a" target="b"><data key="d1">1.2</data></edge>
    <edge source="b" target="c"><data key="d1">1.4</data></edge>
  </graph>
</graphml>
"""


def _graphml(tmp_path, atype=' attr.type="string"', name="g.graphml"):
    p = tmp_path / name
    p.write_text(GRAPHML.format(atype=atype))
    return p


# ---------------------------------------------------------------------- 1. labels
def test_file_labels_are_used_by_default_kernels(tmp_path):
    from mgkflow.io import DroppedLabelWarning

    with pytest.warns(DroppedLabelWarning, match="mass"):
        gs = read_graphs(_graphml(tmp_path))
    g = gs.graphs[0]
    assert set(g.node_labels) == {"atom"} and set(g.edge_labels) == {"length"}
    nk, ek = default_kernels(gs)
    assert repr(nk) == "KroneckerDelta(0.5, 'atom')"
    assert repr(ek) == "SquareExponential(1.0, 'length')"


def test_gml_directory_labels_are_used(tmp_path):
    d = tmp_path / "gml"
    d.mkdir()
    (d / "a.gml").write_text('graph [ node [ id 0 atom "C" ] node [ id 1 atom "O" ] '
                             "edge [ source 0 target 1 length 1.2 ] ]")
    (d / "b.gml").write_text('graph [ node [ id 0 atom "C" ] node [ id 1 atom "C" ] '
                             "edge [ source 0 target 1 length 1.5 ] ]")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gs = read_graphs(d)
    nk, ek = default_kernels(gs)
    assert "atom" in repr(nk) and "length" in repr(ek)
    from mgkflow import MarginalizedGraphKernel

    K = MarginalizedGraphKernel(nk, ek, q=0.2, backend="cpu")(gs.graphs)
    K0 = MarginalizedGraphKernel(q=0.2, backend="cpu")(gs.graphs)
    assert not np.allclose(K, K0)  # the labels count


def test_default_kernels_label_only_unchanged():
    from mgkflow import Graph

    g = Graph(np.array([[0, 1], [1, 0]]), node_labels={"label": [1, 2]},
              edge_labels={"label": np.array([[0, 3], [3, 0]])})
    assert tuple(map(repr, default_kernels([g]))) == ("KroneckerDelta(0.5, 'label')", "KroneckerDelta(0.5, 'label')")
    g2 = Graph(np.array([[0, 1], [1, 0]]), node_labels={"a": [1, 2], "x": [0.5, 1.5]})
    nk, ek = default_kernels([g2])
    assert repr(nk) == "KroneckerDelta(0.5, 'a') * SquareExponential(1.0, 'x')" and repr(ek) == "Constant(1.0)"


# ---------------------------------------------------------------------- 2. arguments
@pytest.mark.parametrize(
    "call",
    [
        lambda p: read_graphs(7),
        lambda p: read_graphs(b"x.smi"),
        lambda p: read_graphs(p, format="nope"),
        lambda p: read_graphs(p, n_graphs="2"),
        lambda p: read_graphs(p, n_graphs=1.5),
        lambda p: read_graphs(p, n_graphs=-1),
        lambda p: read_graphs(p, on_error="ignore"),
        lambda p: read_graphs(p.parent / "g.graphml", directed="yes"),
        lambda p: read_graphs(p.parent / "TU", self_loops="keep"),
        lambda p: read_graphs(p.parent / "TU", n_graphs=-1),
        lambda p: read_graphs(p.parent / "TU", n_graphs=True),
    ],
)
def test_read_graphs_argument_errors_are_mgkflow_errors(tmp_path, call):
    pytest.importorskip("rdkit")
    p = tmp_path / "m.smi"
    p.write_text("CCO\nCCC\nCCN\n")
    _graphml(tmp_path)
    d = tmp_path / "TU"
    d.mkdir()
    (d / "DS_A.txt").write_text("1, 2\n2, 1\n")
    (d / "DS_graph_indicator.txt").write_text("1\n1\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises((ParameterError, ParameterTypeError)) as info:
            call(p)
    msg = str(info.value)
    assert any(w in msg for w in ("path", "format", "n_graphs", "on_error", "directed", "self_loops")), msg


def test_read_graphs_dataframe_with_smiles_column():
    pytest.importorskip("rdkit")
    import pandas as pd

    df = pd.DataFrame({"name": ["ethanol", "benzene"], "SMILES": ["CCO", "c1ccccc1"], "y": [1.0, 2.0]})
    gs = read_graphs(df)
    assert gs.ids == ["ethanol", "benzene"] and gs.properties["y"].tolist() == [1.0, 2.0]
    assert gs.format == "smiles" and gs.graphs[1].n_nodes == 6
    with pytest.raises(ParameterError, match="smiles_column"):
        read_graphs(pd.DataFrame({"a": [1, 2]}))


# ---------------------------------------------------------------------- 3. long SMILES
def test_very_long_smiles_line_is_refused_quickly(tmp_path):
    pytest.importorskip("rdkit")
    p = tmp_path / "long.smi"
    p.write_text("CCO a\n" + "C" * 100_000 + " b\nCCN c\n")
    t0 = time.perf_counter()
    with pytest.raises(FileFormatError, match=r"line 2.*5000"):
        read_smiles(p)
    gs = read_smiles(p, on_error="skip")
    assert time.perf_counter() - t0 < 5
    assert gs.ids == ["a", "c"] and gs.skipped[0][0] == 2


# ---------------------------------------------------------------------- 4. GraphML key without attr.type
def test_graphml_key_without_type_reads_as_text_without_foreign_warning(tmp_path):
    p = _graphml(tmp_path, atype="")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gs = read_graphs(p, node_labels="atom")
    assert not [w for w in caught if "networkx" in w.filename or "No key type" in str(w.message)]
    assert gs.graphs[0].node_labels["atom"].tolist() == [0, 2, 1]  # C, N, O in sorted code order


# ---------------------------------------------------------------------- 5. SMILES CSV columns
def test_smiles_column_without_header_flag(tmp_path):
    pytest.importorskip("rdkit")
    p = tmp_path / "m.csv"
    p.write_text("name,smi_string,y\nethanol,CCO,1\npropane,CCC,2\n")
    gs = read_smiles(p, smiles_column="smi_string")
    assert gs.ids == ["ethanol", "propane"] and gs.properties["y"].tolist() == [1, 2]


def test_smiles_header_detected_by_name_and_by_content(tmp_path):
    pytest.importorskip("rdkit")
    p = tmp_path / "m.csv"
    p.write_text("compound,structure\nethanol,CCO\npropane,CCC\n")
    gs = read_smiles(p)
    assert gs.ids == ["ethanol", "propane"]
    p.write_text("label,mol\n1,CCO\n0,CCC\n")
    gs = read_smiles(p)
    assert [g.n_nodes for g in gs.graphs] == [3, 3] and gs.properties["label"].tolist() == [1, 0]


def test_smiles_csv_without_smiles_column_says_so(tmp_path):
    pytest.importorskip("rdkit")
    p = tmp_path / "m.csv"
    p.write_text("name,weight\nethanol,46\npropane,44\n")
    with pytest.raises(FileFormatError, match=r"no SMILES column.*\['name', 'weight'\].*smiles_column"):
        read_smiles(p)


# ---------------------------------------------------------------------- 6. Gram files
def test_save_gram_wrong_ids_is_parameter_error(tmp_path):
    with pytest.raises(ParameterError, match="ids"):
        save_gram(tmp_path / "K.npz", np.eye(2), ids=["a"])


def test_load_gram_missing_store_is_mgkflow_file_not_found(tmp_path):
    from mgkflow.gram import load_gram

    with pytest.raises(FileNotFoundError) as info:
        load_gram(tmp_path / "nope.zarr")
    assert isinstance(info.value, MgkflowError) and "nope.zarr" in str(info.value)


def test_load_gram_npz_of_npy_has_no_invented_ids(tmp_path):
    save_gram(tmp_path / "K.npy", np.eye(3))
    g = load_gram_npz(tmp_path / "K.npy")
    assert g.ids is None and g.col_ids is None and g.gram.shape == (3, 3)


def test_gram_file_kernel_names_normalize(tmp_path):
    from mgkflow import MarginalizedGraphKernel

    save_gram(tmp_path / "K.npz", np.eye(2), kernel=MarginalizedGraphKernel(q=0.1), params={"normalize": True})
    assert "normalize=True" in load_gram_npz(tmp_path / "K.npz").kernel


# ---------------------------------------------------------------------- 7. datasets
def test_molecules_registry_has_no_cap():
    from mgkflow import datasets

    info = {d.name: d for d in datasets.list_datasets()}["molecules"]
    assert info.n_graphs >= 50_000
    assert len(datasets.load("molecules", n_graphs=1500, max_atoms=10)) == 1500


# ---------------------------------------------------------------------- more of the same, and no change for valid input
def test_unknown_reader_option_names_the_options(tmp_path):
    p = _graphml(tmp_path)
    with pytest.raises(ParameterTypeError, match=r"graphml reader takes no option 'on_error'.*node_labels"):
        read_graphs(p, on_error="skip")


def test_named_graphml_fields_and_partial_attribute_error(tmp_path):
    p = _graphml(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gs = read_graphs(p, node_labels="atom")
        assert set(gs.graphs[0].node_labels) == {"atom"}
    with pytest.raises(FileFormatError, match="mass"):
        read_graphs(p, node_labels=["atom", "mass"])


def test_graphml_typeless_numeric_key_reads_numbers(tmp_path):
    p = tmp_path / "n.graphml"
    p.write_text(GRAPHML.format(atype="").replace(">C<", ">6<").replace(">O<", ">8<").replace(">N<", ">7<"))
    with pytest.warns(Warning, match="mass"):
        gs = read_graphs(p)
    assert gs.graphs[0].node_labels["atom"].tolist() == [6, 8, 7]


def test_long_smiles_header_detection_is_bounded(tmp_path):
    pytest.importorskip("rdkit")
    p = tmp_path / "long.smi"
    p.write_text("C" * 100_000 + "\nCCO\n")
    with pytest.raises(FileFormatError, match="line 1"):
        read_smiles(p)
    p.write_text("C" * 30 + "\nCCO\n")
    with pytest.raises(FileFormatError, match="line 1.*maximum 20"):
        read_smiles(p, max_length=20)
    assert read_smiles(p).graphs[0].n_nodes == 30


def test_smiles_plain_files_unchanged(tmp_path):
    pytest.importorskip("rdkit")
    p = tmp_path / "m.smi"
    p.write_text("CCO ethanol\nCCC propane\n")
    assert read_smiles(p).ids == ["ethanol", "propane"]
    p.write_text("smiles,name,logp\nCCO,ethanol,-0.31\n")
    assert read_smiles(p).properties["logp"].tolist() == [-0.31]
    p.write_text("CCO\nCCN\n")
    assert read_smiles(p).ids == ["CCO", "CCN"]
    with pytest.raises(ParameterError, match="header=True"):
        read_smiles(p, header=False, smiles_column="smiles")


def test_dataframe_index_ids_and_errors():
    pytest.importorskip("rdkit")
    import pandas as pd

    df = pd.DataFrame({"smiles": ["CCO", "C1CC", "CCN"]}, index=["a", "b", "c"])
    with pytest.raises(FileFormatError, match="line 3"):
        read_graphs(df)
    gs = read_graphs(df, on_error="skip")
    assert gs.ids == ["a", "c"] and len(gs.skipped) == 1
    with pytest.raises(ParameterError, match="format='smiles'"):
        read_graphs(df, format="sdf")


def test_load_gram_npz_missing_file(tmp_path):
    from mgkflow.io import PathNotFoundError

    with pytest.raises(PathNotFoundError):
        load_gram_npz(tmp_path / "K.npz")
    with pytest.raises(FileNotFoundError):
        load_gram_npz(tmp_path / "K.npz")


def test_gml_label_that_only_repeats_the_node_id_is_not_a_label_field(tmp_path):
    """networkx writes every node's name as its GML ``label``: a kernel on it compares node numbers."""
    import networkx as nx

    from mgkflow.io import default_kernels, read_graphs

    g = nx.path_graph(4)
    nx.set_node_attributes(g, {n: n % 2 for n in g}, "atom")
    nx.write_gml(g, tmp_path / "names.gml")
    read = read_graphs(tmp_path / "names.gml")
    assert list(read.graphs[0].node_labels) == ["atom"]
    assert "label" not in repr(default_kernels(read))
    (tmp_path / "real.gml").write_text(
        'graph [\n node [ id 0 label "C" ]\n node [ id 1 label "O" ]\n edge [ source 0 target 1 ]\n]\n'
    )
    assert list(read_graphs(tmp_path / "real.gml").graphs[0].node_labels) == ["label"]


def test_bad_smiles_line_prints_no_rdkit_log_line(tmp_path, capfd):
    """RDKit's own "SMILES Parse Error" line used to print before mgkflow's error (header detection
    switched RDKit's log back on)."""
    pytest.importorskip("rdkit")
    from mgkflow.errors import FileFormatError
    from mgkflow.io import read_graphs

    path = tmp_path / "bad.smi"
    path.write_text("CCO\nC1CC\nc1ccccc1\n")
    with pytest.raises(FileFormatError, match="line 2"):
        read_graphs(path)
    assert "SMILES Parse Error" not in capfd.readouterr().err
