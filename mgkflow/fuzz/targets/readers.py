"""Fuzz target: every file reader (:func:`mgkflow.io.read_graphs`) on generated, structured files.

Where :mod:`~mgkflow.fuzz.targets.files` damages a few fixed files, this target *generates*
files of every format of :func:`mgkflow.io.available_formats` from their parts, so that the
odd-but-plausible variants are reached: SMILES/CSV with odd headers, column counts, quoting,
encodings (UTF-8 with BOM, UTF-16, Latin-1, CRLF, gzip) and long lines; SDF with data fields,
missing ``M  END`` or ``$$$$``, bad counts lines; GraphML with and without ``attr.type``, with
attributes on some nodes only, directed graphs, several graphs per file; GML with string,
missing and list attributes; TU directories with inconsistent files; PDB with HETATM, chains,
alternate locations and models. Each file may also be damaged afterwards
(:func:`~mgkflow.fuzz.inputs._mutate`), and reader options are drawn too (``on_error``,
``n_graphs``, ``delimiter``, ``cutoff``, ``self_loops``, ...). Half the cases are drawn *tame* (no damage, no
options, plain UTF-8, only the valid choice of each odd alternative), so that the success paths are reached
as often as the error paths.

Property ``readers``: every case ends in a consistent :class:`~mgkflow.io.GraphSet` (graphs,
ids and properties of one length; ids text; every graph a :class:`~mgkflow.Graph` with at least
one node and finite weights) or an mgkflow error; never a foreign exception, a leaked warning
(a reader's warnings are recorded, not raised, so that a library's warning is seen as a user sees
it), a hang, or a file left in the input directory (a reader writes nothing: a stray file is
``half-written``).

Examples
--------
>>> run_reader_case("smiles", {"m.smi": b"smiles,name\\nCCO,ethanol\\n"}).kind
'result'
>>> run_reader_case("smiles", {"m.smi": b"C(\\n"}).kind
'error'
"""

from __future__ import annotations

import gzip
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import MgkflowError
from ..checks import Outcome, Property, _py, guarded
from ..inputs import _mutate

__all__ = ["run_reader_case", "strategies", "PROPERTIES"]


def _check_graphset(gs: Any, fmt: str) -> Outcome:
    from mgkflow import Graph

    where = f"@io/{fmt}.py"
    n = len(gs.ids)
    if len(gs.graphs) != n or len(gs.properties) != n:
        return Outcome("bad", "inconsistent-graphset" + where,
                       f"{len(gs.graphs)} graphs, {n} ids, {len(gs.properties)} property rows")
    if not all(isinstance(i, str) for i in gs.ids):
        return Outcome("bad", "non-text-id" + where, repr(gs.ids)[:200])
    for g in gs.graphs:
        if not isinstance(g, Graph):
            return Outcome("bad", "not-a-graph" + where, repr(g)[:200])
        if g.n_nodes < 1 or not np.all(np.isfinite(g.adjacency.data)) or np.any(g.adjacency.data <= 0):
            return Outcome("bad", "invalid-graph" + where, repr(g)[:200])
        for field, values in {**g.node_labels, **g.edge_labels}.items():
            if values.dtype.kind == "f" and not np.all(np.isfinite(values)):
                return Outcome("bad", "non-finite-label" + where, f"{field}: {values!r:.150}")
    return Outcome("result", "graphset" if n else "graphset-empty")


def run_reader_case(fmt: str | None, files: dict[str, bytes], options: dict[str, Any] | None = None,
                    target: str | None = None) -> Outcome:
    """Write ``files`` (relative name -> content) into a fresh directory and read them.

    Parameters
    ----------
    fmt : str or None
        The ``format`` argument of :func:`mgkflow.io.read_graphs` (None: detected).
    files : dict of str to bytes
        The files; a name may hold one directory level (``"T/T_A.txt"``).
    options : dict, optional
        Reader options passed on.
    target : str, optional
        What is read, relative to the directory (default: the directory itself for ``tu``, else
        the first file); ``"."`` is the directory.
    """

    def go() -> Outcome:
        from mgkflow.io import read_graphs

        with tempfile.TemporaryDirectory() as d:
            root = Path(d) / "data"
            root.mkdir()
            for name, content in files.items():
                (root / name).parent.mkdir(parents=True, exist_ok=True)
                (root / name).write_bytes(content)
            before = sorted(p.relative_to(root) for p in root.rglob("*"))
            where = target if target is not None else ("." if fmt == "tu" else next(iter(files)))
            with warnings.catch_warnings(record=True) as caught:
                # as a user sees it: a warning a library (networkx, RDKit) issues while reading is not
                # an error that the reader may turn into a FileFormatError, it is a warning that leaks
                warnings.simplefilter("always")
                gs = read_graphs(root / where, format=fmt, **(options or {}))
            foreign = [w for w in caught if not issubclass(w.category, MgkflowError)]  # mgkflow's own say what to do
            if foreign:
                w = foreign[0]
                return Outcome("bad", f"warning:{w.category.__name__}@io/{fmt or gs.format}.py",
                               f"{w.message!s:.150} ({Path(w.filename).name}:{w.lineno})")
            after = sorted(p.relative_to(root) for p in root.rglob("*"))
            if after != before:
                return Outcome("bad", f"half-written@io/{fmt}.py", f"files changed: {set(after) ^ set(before)}")
            return _check_graphset(gs, fmt or gs.format)

    return guarded(go)


# ---------------------------------------------------------------------------- generated files
_SMILES = ["CCO", "CCO", "c1ccccc1", "CC(=O)O", "CCN", "C1CC", "[Na+].[Cl-]", "[H][H]", "C(", "xyz", "CC(=O)O",
           "N#N", "[2H]O", "[Fe]",
           "C" * 300, "c1ccc2ccccc2c1", "[C@@H](F)(Cl)Br", "*C", "C.C", "[U+7]", "smiles", "O=C=O", "[Xe]"]


#: Set while a *tame* case is drawn (half the cases): no damage, no options, only the first (valid)
#: choice of every odd alternative, so that the readers' success paths are fuzzed too.
_TAME = [False]


def _pick(draw: Any, st: Any, values: list) -> Any:
    """One of ``values`` (the first, which is valid, in a tame case)."""
    return values[0] if _TAME[0] else draw(st.sampled_from(values))


def _odd(draw: Any, st: Any, k: int) -> bool:
    """True one time in ``k + 1`` (never in a tame case): whether to add an odd feature."""
    return not _TAME[0] and draw(st.integers(0, k)) == 0


def _tamed(st: Any, inner: Any) -> Any:
    """Strategy: ``inner`` drawn tame or rough (half and half)."""

    @st.composite
    def tamed(draw):
        _TAME[0] = draw(st.booleans())
        try:
            return draw(inner)
        finally:
            _TAME[0] = False

    return tamed()


def _options(st: Any, optional: dict[str, Any]) -> Any:
    """Strategy: reader options (none in a tame case)."""
    rough = st.fixed_dictionaries({}, optional=optional)

    @st.composite
    def options(draw):
        return {} if _TAME[0] else draw(rough)

    return options()


def _encode(st: Any, text: str, gz: bool = True) -> Any:
    """Strategy: ``text`` in one of several encodings (or, with ``gz``, gzipped UTF-8)."""

    @st.composite
    def enc(draw):
        if _TAME[0]:
            return text.encode()
        how = draw(st.sampled_from(["utf-8"] * 6 + ["utf-8-sig", "utf-16", "latin-1", "crlf", "cr"]
                                   + ["gzip"] * gz))
        if how == "crlf":
            return text.replace("\n", "\r\n").encode()
        if how == "cr":
            return text.replace("\n", "\r").encode()
        if how == "gzip":
            return gzip.compress(text.encode(), mtime=0)
        return text.encode(how, errors="replace")

    return enc()


def _maybe_damage(st: Any, data: Any) -> Any:
    """Strategy: the bytes of ``data`` (a strategy), one time in four damaged by :func:`_mutate`."""

    @st.composite
    def damaged(draw):
        raw = draw(data)
        if _odd(draw, st, 5) and raw[:2] != b"\x1f\x8b":
            return draw(_mutate(st, raw.decode("utf-8", errors="replace")))
        return raw

    return damaged()


def _smiles_cases(st: Any) -> Any:
    name = st.sampled_from(["ethanol", "a b", '"q,uoted"', "", "é", "x" * 20000, "1.5", "#x", "name"])
    prop = st.sampled_from(["1.5", "-0.3", "nan", "inf", "", "abc", "1e999", "7", "1,5", '"2"'])

    @st.composite
    def text(draw):
        sep = _pick(draw, st, [",", "\t", " ", ";", "  "])
        ncol = draw(st.integers(1, 4))
        header = _pick(draw, st, [None, "smiles", "SMILES", "smi", "canonical_smiles", "structure", "name",
                                       "", "#comment"])
        lines = []
        if header is not None:
            cols = [header] + draw(st.lists(st.sampled_from(["name", "id", "logp", "y", "smiles", "", "a b"]),
                                            min_size=ncol - 1, max_size=ncol - 1))
            if draw(st.booleans()):
                cols = cols[::-1]
            lines.append(sep.join(cols))
        for _ in range(draw(st.integers(0, 5))):
            k = ncol + _pick(draw, st, [0, 0, 0, 0, -1, 1])
            if _TAME[0]:
                row = [draw(st.sampled_from(_SMILES[:5]))] + [f"m{len(lines)}"] * min(1, k - 1)
                row += ["1.5"] * max(0, k - 2)
            else:
                row = [draw(st.sampled_from(_SMILES))] + [draw(st.one_of(name, prop)) for _ in range(max(0, k - 1))]
            lines.append(sep.join(row))
            if _odd(draw, st, 5):
                lines.append(_pick(draw, st, ["", "# comment", "   ", "\t"]))
        return "\n".join(lines) + _pick(draw, st, ["", "\n", "\n\n"])

    options = _options(st, {
        "delimiter": st.sampled_from(["auto", "auto", ",", "\t", None, ";", "", 5]),
        "header": st.sampled_from([None, True, False, "yes"]),
        "smiles_column": st.sampled_from([None, 0, 1, 7, -1, "smiles", "nope"]),
        "id_column": st.sampled_from([None, 0, 1, 7, "name", "nope"]),
        "on_error": st.sampled_from(["raise", "skip", "skip", "ignore"]),
        "n_graphs": st.sampled_from([None, None, 1, 2, 0, -1, 2.5]),
    })
    fname = st.sampled_from(["m.smi", "m.csv", "m.tsv", "m.smiles", "m.smi.gz", "m.txt"])
    return st.tuples(st.sampled_from(["smiles", "smiles", None]), st.tuples(fname, _maybe_damage(st, text().flatmap(
        lambda t: _encode(st, t)))).map(lambda p: {p[0]: p[1]}), options)


_ATOM_LINE = "{x:10.4f}{y:10.4f}{z:10.4f} {el:<3} 0{ch:>3}  0  0  0  0  0  0  0  0  0  0"


def _sdf_cases(st: Any) -> Any:
    rough_elements = st.sampled_from(["C"] * 6 + ["O", "N", "Cl", "Xx", "H", "*", "Na"])
    tame_elements = st.sampled_from(["C", "C", "O", "N"])

    @st.composite
    def record(draw):
        n = draw(st.integers(0, 4))
        elements = tame_elements if _TAME[0] else rough_elements
        atoms = [_ATOM_LINE.format(x=1.5 * i, y=draw(st.floats(-3, 3)), z=0.0, el=draw(elements),
                                   ch=_pick(draw, st, [0] * 8 + [3, 4])) for i in range(n)]
        bonds = [f"{i + 1:>3}{i + 2:>3}{_pick(draw, st, [1] * 8 + [2, 3, 4, 8]):>3}  0"
                 for i in range(max(0, n - 1)) if draw(st.integers(0, 5))]
        counts_atoms = n + _pick(draw, st, [0] * 10 + [1, -1])
        lines = [_pick(draw, st, ["mol", "mol", "mol", "", "x" * 300, "$$$$", "é"]), "  fuzz", "",
                 f"{counts_atoms:>3}{len(bonds):>3}  0  0  0  0  0  0  0  0999 "
                 + _pick(draw, st, ["V2000"] * 9 + ["V3000"])]
        lines += atoms + bonds
        if draw(st.integers(0, 6)):
            lines.append("M  END")
        for _ in range(draw(st.integers(0, 2))):
            lines += [f">  <{_pick(draw, st, ['act', 'act', 'name', '', 'a b'])}>",
                      _pick(draw, st, ["1.5", "x", "", "nan", "1e999"]), ""]
        if draw(st.integers(0, 6)):
            lines.append("$$$$")
        return "\n".join(lines) + "\n"

    text = st.lists(record(), min_size=0, max_size=3).map("".join)
    options = _options(st, {
        "conformer": st.sampled_from([None, True, False]),
        "on_error": st.sampled_from(["raise", "skip", "skip", "bogus"]),
        "n_graphs": st.sampled_from([None, None, 1, 0, -1]),
    })
    fname = st.sampled_from(["m.sdf", "m.sdf.gz", "m.mol", "m.sd"])
    return st.tuples(st.sampled_from(["sdf", "sdf", None]), st.tuples(fname, _maybe_damage(st, text.flatmap(
        lambda t: _encode(st, t)))).map(lambda p: {p[0]: p[1]}), options)


def _graphml_text(draw: Any, st: Any) -> str:
    typed = _pick(draw, st, ["all", "none", "some"])
    keys = [("d0", "node", "element", "string"), ("d1", "node", "charge", "int"), ("d2", "edge", "weight", "double"),
            ("d3", "edge", "order", "double"), ("d4", "graph", "y", "double"), ("d5", "node", "flag", "boolean")]
    head = ['<?xml version="1.0" encoding="UTF-8"?>',
            '<graphml xmlns="http://graphml.graphdrawing.org/xmlns">']
    for i, (k, dom, name, typ) in enumerate(keys):
        t = f' attr.type="{typ}"' if typed == "all" or (typed == "some" and i % 2) else ""
        head.append(f'<key id="{k}" for="{dom}" attr.name="{name}"{t}/>')
    body = []
    for gi in range(_pick(draw, st, [1, 1, 1, 2, 0])):
        directed = _pick(draw, st, ["undirected", "undirected", "directed"])
        body.append(f'<graph id="G{gi}" edgedefault="{directed}">')
        if draw(st.booleans()):
            body.append(f'<data key="d4">{_pick(draw, st, ["1.5", "x", ""])}</data>')
        n = draw(st.integers(0, 4))
        for i in range(n):
            data = ""
            if draw(st.integers(0, 4)):  # partial attributes: some nodes lack a field
                data += f'<data key="d0">{_pick(draw, st, ["C", "O", "N", "", "1", "é"])}</data>'
            if draw(st.integers(0, 2)):
                v = _pick(draw, st, ["0", "1", "-1", "x", "1.5", "99999999999999999999"])
                data += f'<data key="d1">{v}</data>'
            if _odd(draw, st, 3):
                data += f'<data key="d5">{_pick(draw, st, ["true", "false", "1", "yes"])}</data>'
            body.append(f'<node id="n{i}">{data}</node>')
        for i in range(max(0, n - 1)):
            j = _pick(draw, st, [i + 1, i + 1, i + 1, i, n + 3])
            data = ""
            if draw(st.integers(0, 3)):
                v = _pick(draw, st, ["1.0", "2.5", "0", "-1", "nan", "inf", "x", ""])
                data += f'<data key="d2">{v}</data>'
            if draw(st.booleans()):
                data += f'<data key="d3">{_pick(draw, st, ["1", "1.5", "a"])}</data>'
            body.append(f'<edge source="n{i}" target="n{j}">{data}</edge>')
        body.append("</graph>")
    return "\n".join(head + body + ["</graphml>"]) + "\n"


def _gml_text(draw: Any, st: Any) -> str:
    odd = ['"é"', "nan"] * (not _TAME[0])
    value = st.sampled_from(['"C"', '"O"', "1", "2", "1.5", '""', "-3", "[ x 1 ]"] * 4 + odd)
    lines = ["graph [", f"  directed {_pick(draw, st, [0, 0, 0, 1])}"]
    if _odd(draw, st, 5):
        lines.append("  multigraph 1")
    if draw(st.booleans()):
        lines.append(f"  y {draw(value)}")
    n = draw(st.integers(0, 4))
    for i in range(n):
        attrs = "".join(f" {k} {draw(value)}" for k in ("element", "charge") if draw(st.integers(0, 3)))
        lines.append(f'  node [ id {i} label "{_pick(draw, st, ["n" + str(i), "n0", "a b"])}"{attrs} ]')
    for i in range(max(0, n - 1)):
        j = _pick(draw, st, [i + 1, i + 1, i, n + 2])
        attrs = "".join(f" {k} {draw(value)}" for k in ("weight", "order") if draw(st.integers(0, 2)))
        lines.append(f"  edge [ source {i} target {j}{attrs} ]")
    return "\n".join(lines + ["]"]) + "\n"


def _nx_cases(st: Any, fmt: str) -> Any:
    make = _graphml_text if fmt == "graphml" else _gml_text

    @st.composite
    def files(draw):
        k = _pick(draw, st, [1, 1, 2])
        out = {}
        for i in range(k):
            raw = draw(_maybe_damage(st, _encode(st, make(draw, st), gz=False)))  # networkx reads no gzip
            out[f"g{i}.{fmt}"] = raw
        return out

    options = _options(st, {
        "node_labels": st.sampled_from([None, "element", ["element", "charge"], "missing", [], "flag"]),
        "edge_labels": st.sampled_from([None, "order", "weight", "missing"]),
        "weight": st.sampled_from(["weight", None, "order", "missing"]),
        "directed": st.sampled_from(["error", "undirected", "undirected", "bogus"]),
        "n_graphs": st.sampled_from([None, None, 1, 0]),
    })
    return st.tuples(st.sampled_from([fmt, fmt, None]), files(), options,
                     st.sampled_from([None, None, "."]))


def _tu_cases(st: Any) -> Any:
    @st.composite
    def files(draw):
        sizes = draw(st.lists(st.integers(1, 4), min_size=1, max_size=3))
        ind, edges, node = [], [], 0
        for g, s in enumerate(sizes):
            ind += [g + 1] * s
            edges += [(node + i + 1, node + i + 2) for i in range(s - 1)]
            if _odd(draw, st, 4):
                edges.append((node + 1, node + 1))  # a self loop
            node += s
        both = draw(st.booleans())
        rows = [e for a, b in edges for e in ([(a, b), (b, a)] if both else [(a, b)])]
        if _odd(draw, st, 5):
            rows.append((node + 2, 1))  # a node out of range
        sep = _pick(draw, st, [", ", ",", " , ", "\t"])
        out = {"T_A.txt": "\n".join(f"{a}{sep}{b}" for a, b in rows) + "\n",
               "T_graph_indicator.txt": "\n".join(map(str, ind)) + "\n"}
        nodeval = st.sampled_from(["0", "1", "2", "C"] + ["-1", "1.5", "", "1, 2"] * (not _TAME[0]))
        if draw(st.booleans()):
            out["T_node_labels.txt"] = "\n".join(draw(nodeval) for _ in range(node + draw(
                st.sampled_from([0, 0, 0, 1, -1])))) + "\n"
        if draw(st.booleans()):
            d = draw(st.integers(1, 3))
            attr = st.sampled_from(["0.5", "1", "-2.25"] + ["nan", "x", "1e999"] * (not _TAME[0]))
            widths = [d + (i == 0 and _odd(draw, st, 4)) for i in range(node)]  # a ragged first row
            out["T_node_attributes.txt"] = "\n".join(", ".join(draw(attr) for _ in range(w)) for w in widths) + "\n"
        if draw(st.booleans()):
            out["T_edge_labels.txt"] = "\n".join(_pick(draw, st, ["1", "2", "a", ""]) for _ in range(
                len(rows) + _pick(draw, st, [0, 0, 1]))) + "\n"
        if draw(st.booleans()):
            out["T_edge_attributes.txt"] = "\n".join(_pick(draw, st, ["0.5", "1.5, 2", "nan"])
                                                     for _ in rows) + "\n"
        if draw(st.booleans()):
            out["T_graph_labels.txt"] = "\n".join(_pick(draw, st, ["1", "-1", "0", "a", "2.5"])
                                                  for _ in sizes) + "\n"
        if _odd(draw, st, 3):
            out["T_graph_attributes.txt"] = "\n".join("0.5, 1" for _ in sizes) + "\n"
        raw = {k: v.encode() for k, v in out.items()}
        if _odd(draw, st, 3):
            k = draw(st.sampled_from(sorted(raw)))
            raw[k] = draw(_mutate(st, out[k]))
        if _odd(draw, st, 8):
            raw["U_A.txt"] = b"1, 2\n"  # a second dataset prefix
        sub = _pick(draw, st, ["", "", "T/"])
        target = draw(st.sampled_from(["T", "T", "T/T_A.txt", "."] if sub else [".", ".", ".", "T_A.txt"]))
        return {sub + k: v for k, v in raw.items()}, target

    options = _options(st, {
        "name": st.sampled_from([None, "T", "U", "nope"]),
        "node_labels": st.sampled_from([None, "label", "attributes", ["label", "attributes"], "nope"]),
        "edge_labels": st.sampled_from([None, "label", "attributes", "nope"]),
        "self_loops": st.sampled_from(["error", "drop", "drop", "keep"]),
        "n_graphs": st.sampled_from([None, None, 1, 0]),
    })
    return st.tuples(st.sampled_from(["tu", "tu", None]), files(), options).map(
        lambda c: (c[0], c[1][0], c[2], c[1][1]))


def _pdb_cases(st: Any) -> Any:
    @st.composite
    def text(draw):
        lines = []
        n = draw(st.integers(0, 6))
        for i in range(n):
            rec = _pick(draw, st, ["ATOM  ", "ATOM  ", "HETATM"])
            name = _pick(draw, st, [" CA ", " N  ", " C  ", " O  ", " FE ", " H  ", "XX  "])
            alt = _pick(draw, st, [" ", " ", "A", "B"])
            res = _pick(draw, st, ["GLY", "ALA", "HOH", "XYZ", "FE "])
            chain = _pick(draw, st, ["A", "A", "B", " "])
            xyz = [draw(st.one_of(st.floats(-20, 20), st.sampled_from([0.0, 9999.0, -999.0]))) for _ in range(3)]
            el = _pick(draw, st, [" C", " N", " O", "FE", "  ", " H", "XX"])
            line = (f"{rec}{i + 1:>5} {name}{alt}{res} {chain}{i + 1:>4}    "
                    + "".join(f"{v:8.3f}"[:8] for v in xyz) + "  1.00  0.00          " + el)
            if _odd(draw, st, 8):
                line = line[: draw(st.integers(0, len(line)))]
            lines.append(line)
            if _odd(draw, st, 9):
                lines.append(_pick(draw, st, ["TER", "ENDMDL", "MODEL        2", "END", "REMARK x"]))
        return "\n".join(lines) + "\n"

    options = _options(st, {
        "cutoff": st.sampled_from([6.0, 6.0, 4.0, 1.0, 0.0, -1.0, float("nan"), float("inf"), 1e6, "6"]),
        "chain": st.sampled_from([None, None, "A", "B", "Z", ""]),
        "n_graphs": st.sampled_from([None, None, 1, 0]),
    })
    fname = st.sampled_from(["p.pdb", "p.ent", "p.pdb.gz"])

    @st.composite
    def files(draw):
        raw = draw(_maybe_damage(st, text().flatmap(lambda t: _encode(st, t))))
        return {draw(fname): raw}

    return st.tuples(st.sampled_from(["pdb", "pdb", None]), files(), options)


def strategies(st: Any) -> dict[str, Any]:
    """``readers`` cases: (format or None, {file name: content}, options[, target])."""
    gens = (_smiles_cases(st), _sdf_cases(st), _nx_cases(st, "graphml"), _nx_cases(st, "gml"), _tu_cases(st),
            _pdb_cases(st))
    return {"readers": st.one_of(*(_tamed(st, g) for g in gens))}


def _run(case: tuple) -> Outcome:
    return run_reader_case(*case)


def _repro(case: tuple) -> str:
    return f"run_reader_case({', '.join(_py(c) for c in case)})"


PROPERTIES = (Property("readers", "readers", _run, _repro),)
