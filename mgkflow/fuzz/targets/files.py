"""Fuzz target: the file readers (:func:`mgkflow.io.read_graphs`) on damaged files.

Property ``file``: SMILES, SDF, GraphML, GML, TU and PDB inputs, valid or mutated
(truncated, a line replaced, bytes inserted, emptied): a GraphSet or an mgkflow error.
"""

from __future__ import annotations

import io
import tempfile
from pathlib import Path
from typing import Any

from ..checks import Outcome, Property, _py, guarded
from ..inputs import _mutate

__all__ = ["run_file_case", "strategies", "PROPERTIES"]

def run_file_case(fmt: str, files: dict[str, bytes], options: dict[str, Any] | None = None) -> Outcome:
    """Write ``files`` (name -> content) into a fresh directory and read them with :func:`mgkflow.io.read_graphs`."""

    def go() -> Outcome:
        from mgkflow.io import read_graphs

        with tempfile.TemporaryDirectory() as d:
            root = Path(d) / "data"
            root.mkdir()
            for name, content in files.items():
                (root / name).write_bytes(content)
            target = root if fmt == "tu" else root / next(iter(files))
            gs = read_graphs(target, format=fmt, **(options or {}))
            if len(gs.graphs) != len(gs.ids) or len(gs.properties) != len(gs.ids) or not gs.graphs:
                return Outcome("bad", f"inconsistent-graphset@io/{fmt}.py", repr(gs))
            return Outcome("result", "graphset")

    return guarded(go)


_SMILES = ["CCO", "c1ccccc1", "C1CC", "[Na+].[Cl-]", "[H][H]", "C(", "xyz", "CC(=O)O", "", "N#N", "[2H]O"]


def strategies(st: Any) -> dict[str, Any]:
    """``file`` cases: (format, {file name: content})."""
    import networkx as nx

    G = nx.path_graph(3)
    nx.set_node_attributes(G, {0: "C", 1: "O", 2: "C"}, "element")
    nx.set_edge_attributes(G, 1.5, "weight")
    buf = io.BytesIO()
    nx.write_graphml(G, buf)
    graphml = buf.getvalue().decode()
    gml = "\n".join(nx.generate_gml(G))
    sdf = ("ethanol\n  test\n\n  3  2  0  0  0  0  0  0  0  0999 V2000\n"
           "    0.0000    0.0000    0.0000 C   0  0  0  0  0  0  0  0  0  0  0  0\n"
           "    1.5000    0.0000    0.0000 C   0  0  0  0  0  0  0  0  0  0  0  0\n"
           "    2.0000    1.4000    0.0000 O   0  0  0  0  0  0  0  0  0  0  0  0\n"
           "  1  2  1  0\n  2  3  1  0\nM  END\n>  <act>\n1.5\n\n$$$$\n")
    pdb = "\n".join(
        f"ATOM  {i + 1:>5}  CA  GLY A{i + 1:>4}    {x:8.3f}{0.0:8.3f}{0.0:8.3f}  1.00  0.00           C"
        for i, x in enumerate([0.0, 1.5, 3.0])
    )
    tu = {
        "T_A.txt": "1, 2\n2, 1\n3, 4\n", "T_graph_indicator.txt": "1\n1\n2\n2\n",
        "T_graph_labels.txt": "1\n-1\n", "T_node_labels.txt": "0\n1\nC\n0\n", "T_edge_labels.txt": "1\n1\n2\n",
    }

    @st.composite
    def smiles_text(draw):
        lines = draw(st.lists(st.tuples(st.sampled_from(_SMILES), st.sampled_from(["", " a", ",b", "\t1.5", " x y"])),
                              max_size=5))
        head = draw(st.sampled_from(["", "smiles,name\n", "# c\n"]))
        return head + "\n".join(s + rest for s, rest in lines)

    @st.composite
    def tu_files(draw):
        files = {k: v.encode() for k, v in tu.items()}
        name = draw(st.sampled_from(sorted(files)))
        if draw(st.integers(0, 5)) == 0:
            del files[name]
        else:
            files[name] = draw(_mutate(st, tu[name]))
        return files

    @st.composite
    def pdb_text(draw):
        coord = st.one_of(st.floats(-50, 50), st.sampled_from([1e308, -1e200, 1e151, 0.0]))
        def fmt(v: float) -> str:
            return (f"{v:8.3f}" if abs(v) < 1e4 else f"{v:8.0e}")[:8].rjust(8)

        lines = [
            f"ATOM  {i + 1:>5}  CA  GLY A{i + 1:>4}    " + "".join(fmt(v) for v in draw(st.tuples(coord, coord, coord)))
            + "  1.00  0.00           C"
            for i in range(draw(st.integers(1, 4)))
        ]
        return "\n".join(lines).encode()

    cases = st.one_of(
        st.tuples(st.just("smiles"), smiles_text().map(lambda t: {"m.smi": t.encode()})),
        st.tuples(st.just("smiles"), _mutate(st, "CCO a\nc1ccccc1 b\n").map(lambda b: {"m.smi": b})),
        st.tuples(st.just("sdf"), _mutate(st, sdf + sdf).map(lambda b: {"m.sdf": b})),
        st.tuples(st.just("graphml"), _mutate(st, graphml).map(lambda b: {"g.graphml": b})),
        st.tuples(st.just("gml"), _mutate(st, gml).map(lambda b: {"g.gml": b})),
        st.tuples(st.just("tu"), tu_files()),
        st.tuples(st.just("pdb"), st.one_of(pdb_text(), _mutate(st, pdb)).map(lambda b: {"p.pdb": b})),
    )
    return {"file": cases}


PROPERTIES = (
    Property("file", "file", lambda c: run_file_case(*c), lambda c: f"run_file_case({_py(c[0])}, {_py(c[1])})"),
)
