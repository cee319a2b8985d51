"""Issue 22 (io, gram, backends, set_params): bad arguments are mgkflow errors naming the parameter,
and the valid calls around them behave as before."""

from __future__ import annotations

from pathlib import Path

import networkx as nx
import numpy as np
import pytest

from mgkflow import Graph, MarginalizedGraphKernel
from mgkflow.errors import MgkflowError, OutputPathError, ParameterError, ParameterTypeError


def _nx_graph() -> nx.Graph:
    G = nx.path_graph(3)
    nx.set_node_attributes(G, {0: 1, 1: 2, 2: 1}, "label")
    nx.set_node_attributes(G, {0: (0.0, 0.0), 1: (1.0, 0.0), 2: (2.0, 0.0)}, "pos")
    nx.set_edge_attributes(G, 1.5, "weight")
    return G


@pytest.mark.parametrize(
    ("kw", "name"),
    [
        ({"weight": []}, "weight"),
        ({"coords": []}, "coords"),
        ({"node_labels": 7}, "node_labels"),
        ({"edge_labels": 7.5}, "edge_labels"),
        ({"node_labels": [["x"]]}, "node_labels"),
        ({"title": 3}, "title"),
    ],
)
def test_from_networkx_names_the_bad_argument(kw: dict, name: str) -> None:
    with pytest.raises(ParameterTypeError, match=name):
        Graph.from_networkx(_nx_graph(), **kw)


def test_from_networkx_valid_calls_unchanged() -> None:
    G = _nx_graph()
    g = Graph.from_networkx(G, node_labels=["label"], coords="pos")
    assert g.node_labels["label"].tolist() == [1, 2, 1] and g.coords.shape == (3, 2)
    assert Graph.from_networkx(G, node_labels="label").node_labels["label"].tolist() == [1, 2, 1]  # one name
    assert Graph.from_networkx(G, node_labels=None).node_labels == {}
    G.graph["name"] = 5
    assert Graph.from_networkx(G).title == "5"
    nx.set_node_attributes(G, {0: "x"}, "pos")
    with pytest.raises(MgkflowError, match="pos"):
        Graph.from_networkx(G, coords="pos")


@pytest.mark.parametrize("reader", ["read_graphml", "read_gml"])
def test_networkx_readers_check_options(tmp_path: Path, reader: str) -> None:
    import mgkflow.io as mio

    G = _nx_graph()
    for v in G.nodes:
        G.nodes[v]["kind"] = G.nodes[v].pop("label")
        del G.nodes[v]["pos"]
    path = tmp_path / f"g.{reader[5:]}"
    (nx.write_graphml if reader == "read_graphml" else nx.write_gml)(G, path)
    read = getattr(mio, reader)
    for kw, name in (
        ({"node_labels": 7}, "node_labels"),
        ({"edge_labels": b"x"}, "edge_labels"),
        ({"weight": []}, "weight"),
        ({"encoder": {}}, "encoder"),
    ):
        with pytest.raises(ParameterTypeError, match=name):
            read(path, **kw)
    gs = read(path, node_labels="kind", weight="weight")
    assert gs.graphs[0].node_labels["kind"].tolist() == [1, 2, 1]


def test_category_encoder_checks_tables_and_keeps_keyerror() -> None:
    from mgkflow.io import CategoryEncoder

    for bad in (7, "abc", [], {"f": "abc"}, {"f": {"a": "0"}}):
        with pytest.raises(MgkflowError, match="tables"):
            CategoryEncoder(bad)
    shared = {"f": {"a": 0}}
    enc = CategoryEncoder(shared)
    enc.fit("f", ["b"])
    assert shared["f"] == {"a": 0, "b": 1}  # the dict given is the table (shared, as before)
    assert CategoryEncoder(None).tables == {}
    with pytest.raises(KeyError, match="not fitted"):  # a KeyError, as before, and an mgkflow error
        enc.encode("f", ["zz"])
    with pytest.raises(ParameterError):
        enc.decode("f", [9])


def test_make_backend_checks_its_arguments() -> None:
    from mgkflow.backends import make_backend

    with pytest.raises(ParameterTypeError, match="rtol"):
        make_backend("exact", rtol="abc")
    with pytest.raises(ParameterError, match="rtol"):
        make_backend("exact", rtol=2.0)
    with pytest.raises(ParameterError, match="max_iter"):
        make_backend("exact", max_iter=float("nan"))
    with pytest.raises(ParameterTypeError, match="options"):
        make_backend("exact", options="abc")
    assert make_backend("exact", rtol=1e-9, max_iter=7.0).max_iter == 7


def test_set_params_refuses_non_numbers_and_leaves_the_kernel_as_it_was() -> None:
    from mgkflow.kernels import KroneckerDelta

    k = MarginalizedGraphKernel(KroneckerDelta(0.5, "a"), backend="cpu", q=0.05)
    with pytest.raises(ParameterTypeError, match="node_kernel__h"):
        k.set_params(q=0.2, node_kernel__h="abc")
    with pytest.raises(MgkflowError, match="max_iter"):
        k.set_params(q=0.2, max_iter="10")
    assert k.q == 0.05 and k.node_kernel.h == 0.5 and k.max_iter == 10_000
    assert k.set_params(node_kernel__h=np.float32(0.25), q=0.1).node_kernel.h == 0.25


def test_gram_and_detect_format_arguments(tmp_path: Path) -> None:
    from mgkflow.gram import load_gram, tiled_gram
    from mgkflow.io import default_kernels, detect_format

    with pytest.raises(ParameterTypeError, match="path"):
        load_gram(7)
    with pytest.raises(ParameterTypeError, match="lazy"):
        load_gram(tmp_path / "K.zarr", lazy="yes")
    with pytest.raises(ParameterTypeError, match="path"):
        detect_format(None)
    with pytest.raises(ParameterTypeError, match="graphs"):
        default_kernels("abc")
    (tmp_path / "afile").write_text("x")
    g = Graph(np.array([[0, 1.0], [1.0, 0]]))
    with pytest.raises(OutputPathError, match="afile"):
        tiled_gram([g], kernel=MarginalizedGraphKernel(backend="cpu"), out=tmp_path / "afile" / "K.zarr")


def test_pdb_and_molecule_options(tmp_path: Path) -> None:
    pytest.importorskip("rdkit")
    from mgkflow.io import read_sdf, read_smiles

    smi = tmp_path / "m.smi"
    smi.write_text("CCO ethanol\n")
    with pytest.raises(ParameterTypeError, match="header"):
        read_smiles(smi, header="yes")
    with pytest.raises(ParameterTypeError, match="encoder"):
        read_smiles(smi, encoder=[])
    with pytest.raises(ParameterTypeError, match="extended"):
        Graph.from_smiles("CCO", extended="yes")
    sdf = tmp_path / "m.sdf"
    sdf.write_text("x\n")
    with pytest.raises(ParameterTypeError, match="conformer"):
        read_sdf(sdf, conformer=[])
    with pytest.raises(ParameterTypeError, match="chain"):
        Graph.from_pdb(tmp_path / "p.pdb", chain=[])
    with pytest.raises(ParameterError, match="NUL"):
        Graph.from_pdb(b"\x00x")


def test_an_empty_delimiter_is_a_parameter_error(tmp_path):
    """Found by ``python -m mgkflow.bench fuzz --examples 1500 --seed 23``: ``delimiter=""`` raised
    str.split's ValueError."""
    pytest.importorskip("rdkit")
    from mgkflow.errors import ParameterError
    from mgkflow.io import read_smiles

    f = tmp_path / "m.smi"
    f.write_text("CCO\n")
    with pytest.raises(ParameterError, match="delimiter must not be empty"):
        read_smiles(f, delimiter="")
