"""The TU graph-dataset text format (the format of the TUDataset collection).

A dataset ``DS`` is a directory of text files, one value or comma-separated
row per line, nodes numbered 1..N over the whole dataset:

=============================== ============================================================
``DS_A.txt``                    one edge per line: ``i, j`` (node numbers); required
``DS_graph_indicator.txt``      line i: the graph (1..G) node i belongs to; required
``DS_graph_labels.txt``         line g: label of graph g -> property ``label``
``DS_graph_attributes.txt``     line g: attributes of graph g -> properties ``attribute_K``
``DS_node_labels.txt``          line i: integer label(s) of node i -> node field ``label``
``DS_node_attributes.txt``      line i: real attributes of node i -> node field ``attributes``
``DS_edge_labels.txt``          line k: integer label(s) of the edge on line k of A -> edge field ``label``
``DS_edge_attributes.txt``      line k: real attributes of edge k -> edge field ``attributes``
=============================== ============================================================

Conventions: an edge may be listed once or in both directions (each undirected
edge appears once in the graph; both directions must carry the same labels);
edge weights are 1. One value per line gives a scalar field (usable with
``SquareExponential`` / ``KroneckerDelta`` as is), several (one count for every
line) a vector field of shape (n, d). Node and edge labels are
integers; label files holding other text are encoded with the shared
:class:`~mgkflow.io.CategoryEncoder`. Self loops are an error unless
``self_loops="drop"``. Ids are ``"DS-g"`` (g the 1-based graph number).
Every malformed line raises :class:`~mgkflow.errors.FileFormatError` naming
the file and line.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import FileFormatError, ParameterTypeError
from ..graph import Graph
from ._common import (
    CategoryEncoder,
    GraphSet,
    check_choice,
    check_encoder,
    check_n_graphs,
    check_path,
    parse_fields,
    properties_frame,
    read_text,
)
from .csr import csr_from_edges

__all__ = ["read", "find_prefix", "NAME", "EXTENSIONS"]

NAME = "tu"
EXTENSIONS = ()  # a directory


def find_prefix(directory: Path, name: str | None = None) -> str:
    """The dataset prefix DS of ``directory/DS_A.txt`` (the only one, or ``name``)."""
    prefixes = sorted(p.name[: -len("_A.txt")] for p in directory.glob("*_A.txt"))
    if name is not None:
        if name not in prefixes:
            raise FileFormatError(f"TU dataset {name!r} not found (no {name}_A.txt; found {prefixes})", path=directory)
        return name
    if not prefixes:
        raise FileFormatError("not a TU dataset directory: no *_A.txt file", path=directory)
    if len(prefixes) > 1:
        raise FileFormatError(f"several TU datasets {prefixes}; pass name=...", path=directory)
    return prefixes[0]


def _rows(path: Path, kind: str, width: int | None = None) -> list[list[str]]:
    """Comma/whitespace separated fields of every line (blank lines are errors)."""
    out = []
    for k, line in enumerate(read_text(path, f"TU {kind} file").splitlines(), start=1):
        fields = line.replace(",", " ").split()
        if not fields:
            raise FileFormatError(f"blank line in the {kind} file", path=path, line=k)
        if width is not None and len(fields) != width:
            raise FileFormatError(f"expected {width} values, got {len(fields)}: {line!r}", path=path, line=k)
        out.append(fields)
    return out


def _ints(path: Path, rows: list[list[str]], kind: str) -> np.ndarray:
    if not rows:
        return np.zeros((0, 1), dtype=np.int64)
    try:  # rows of one width (the callers check): numpy parses the text
        return np.array(rows, dtype=np.int64).reshape(len(rows), -1)
    except (ValueError, OverflowError):
        for k, r in enumerate(rows, start=1):
            for f in r:
                try:
                    v = int(f)
                except ValueError:
                    raise FileFormatError(f"{kind}: {f!r} is not an integer", path=path, line=k) from None
                if not -(2**63) <= v < 2**63:
                    raise FileFormatError(f"{kind}: {f} is outside the int64 range", path=path, line=k) from None
        raise


def _floats(path: Path, rows: list[list[str]], kind: str) -> np.ndarray:
    width = len(rows[0]) if rows else 1
    if rows and all(len(r) == width for r in rows):
        try:  # fast path; the loop below finds the line at fault
            out = np.array(rows, dtype=np.float64)
        except (ValueError, OverflowError):
            pass
        else:
            finite = np.isfinite(out).all(axis=1)
            if finite.all():
                return out
            k = int(np.argmin(finite))
            raise FileFormatError(f"{kind}: {rows[k]} is not finite", path=path, line=k + 1)
    out = np.empty((len(rows), width), dtype=np.float64)
    for k, r in enumerate(rows, start=1):
        if len(r) != out.shape[1]:
            raise FileFormatError(f"{kind}: expected {out.shape[1]} values, got {len(r)}", path=path, line=k)
        for c, f in enumerate(r):
            try:
                v = float(f)
            except ValueError:
                raise FileFormatError(f"{kind}: {f!r} is not a number", path=path, line=k) from None
            if not np.isfinite(v):
                raise FileFormatError(f"{kind}: {f!r} is not finite", path=path, line=k)
            out[k - 1, c] = v
    return out


def _labels(path: Path, count: int, what: str, key: str, encoder: CategoryEncoder) -> np.ndarray:
    rows = _rows(path, what)
    if len(rows) != count:
        raise FileFormatError(f"{len(rows)} lines, expected {count} (one per {what.split()[0]})", path=path)
    widths = {len(r) for r in rows}
    if len(widths) > 1:
        k = next(i for i, r in enumerate(rows, start=1) if len(r) != len(rows[0]))
        raise FileFormatError(f"{what}: expected {len(rows[0])} values, got {len(rows[k - 1])}", path=path, line=k)
    try:
        vals = _ints(path, rows, what)
    except FileFormatError as exc:
        if "outside the int64 range" in str(exc):
            raise
        flat = [f for r in rows for f in r]  # categorical text labels
        encoder.fit(key, flat)
        vals = encoder.encode(key, flat).reshape(len(rows), -1)
    return vals[:, 0] if vals.shape[1] == 1 else vals.astype(np.float64)


def _graph_indicator(f: Callable[[str], Path], directory: Path, ds: str) -> tuple[np.ndarray, np.ndarray]:
    """The graph id (1..G) of every node and the node count of every graph, checked."""
    if not f("graph_indicator").is_file():
        raise FileFormatError(f"TU dataset {ds!r}: {ds}_graph_indicator.txt is missing", path=directory)
    indicator = _ints(f("graph_indicator"), _rows(f("graph_indicator"), "graph indicator", 1), "graph id")[:, 0]
    if len(indicator) == 0:
        raise FileFormatError("no nodes (empty file)", path=f("graph_indicator"))
    if indicator.min() < 1:
        k = int(np.argmax(indicator < 1)) + 1
        raise FileFormatError(f"graph id {indicator[k - 1]} < 1", path=f("graph_indicator"), line=k)
    present = np.bincount(indicator, minlength=int(indicator.max()) + 1)[1:]
    if np.any(present == 0):
        g = int(np.argmax(present == 0)) + 1
        raise FileFormatError(
            f"graph {g} has no nodes (graph ids must be 1..G without gaps)", path=f("graph_indicator")
        )
    return indicator, present


def _edge_list(
    f: Callable[[str], Path], indicator: np.ndarray, self_loops: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The lines of ``DS_A.txt`` as (edges (m, 2) 1-based, u, v 0-based, self-loop mask), checked."""
    n_total = len(indicator)
    edges = _ints(f("A"), _rows(f("A"), "adjacency", 2), "node number").reshape(-1, 2)
    if len(edges) and (edges.min() < 1 or edges.max() > n_total):
        k = int(np.argmax((edges < 1).any(axis=1) | (edges > n_total).any(axis=1))) + 1
        raise FileFormatError(f"node number {edges[k - 1].tolist()} outside 1..{n_total}", path=f("A"), line=k)
    u, v = edges[:, 0] - 1, edges[:, 1] - 1
    if np.any(indicator[u] != indicator[v]):
        k = int(np.argmax(indicator[u] != indicator[v])) + 1
        raise FileFormatError(
            f"edge {edges[k - 1].tolist()} joins graphs {indicator[u[k - 1]]} and {indicator[v[k - 1]]}",
            path=f("A"), line=k,
        )
    loops = u == v
    if np.any(loops) and self_loops == "error":
        k = int(np.argmax(loops)) + 1
        raise FileFormatError(
            f"self loop at node {u[k - 1] + 1} (mgkflow graphs have none; read with self_loops='drop')",
            path=f("A"), line=k,
        )
    return edges, u, v, loops


def _field_values(
    f: Callable[[str], Path], what: str, count: int, wanted: list[str] | None, encoder: CategoryEncoder
) -> dict[str, np.ndarray]:
    """The ``label`` and ``attributes`` fields of ``what`` ("node" or "edge") present and wanted (None: all)."""
    values: dict[str, np.ndarray] = {}
    for field, suffix, kind in (("label", f"{what}_labels", "label"), ("attributes", f"{what}_attributes", "attr")):
        if f(suffix).is_file() and (wanted is None or field in wanted):
            if kind == "label":
                values[field] = _labels(f(suffix), count, f"{what} labels", f"{what}:{field}", encoder)
            else:
                values[field] = _floats(f(suffix), _rows(f(suffix), f"{what} attributes"), f"{what} attribute")
                if len(values[field]) != count:
                    raise FileFormatError(f"{len(values[field])} lines, expected {count}", path=f(suffix))
                if values[field].shape[1] == 1:
                    values[field] = values[field][:, 0]  # one attribute: a scalar field
    return values


def _undirected(
    f: Callable[[str], Path], u: np.ndarray, v: np.ndarray, loops: np.ndarray, n_total: int,
    edge_values: dict[str, np.ndarray],
) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """One entry per undirected edge: (smaller node, larger node, field values); both directions must agree."""
    keep = ~loops
    lines = np.flatnonzero(keep)
    a, b = np.minimum(u[keep], v[keep]), np.maximum(u[keep], v[keep])
    key = a * n_total + b
    uniq, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    for field, vals in edge_values.items():
        vk = vals[keep]
        if not np.array_equal(vk, vk[first][inverse]):
            bad = int(np.flatnonzero(np.any((vk != vk[first][inverse]).reshape(len(vk), -1), axis=1))[0])
            raise FileFormatError(
                f"edge {a[bad] + 1}-{b[bad] + 1} is listed twice with different values of edge field {field!r}",
                path=f("edge_labels" if field == "label" else "edge_attributes"), line=int(lines[bad]) + 1,
            )
    return a[first], b[first], {k: vals[keep][first] for k, vals in edge_values.items()}


def _graph_properties(f: Callable[[str], Path], n_graph_ids: int) -> list[dict[str, Any]]:
    """One property row per graph: ``label`` (DS_graph_labels.txt) and ``attribute_K`` (DS_graph_attributes.txt)."""
    rows_prop: list[dict[str, Any]] = [{} for _ in range(n_graph_ids)]
    if f("graph_labels").is_file():
        gl = _rows(f("graph_labels"), "graph labels")
        if len(gl) != n_graph_ids:
            raise FileFormatError(f"{len(gl)} lines, expected {n_graph_ids} (one per graph)", path=f("graph_labels"))
        for g, r in enumerate(gl):
            rows_prop[g]["label"] = r[0] if len(r) == 1 else " ".join(r)
    if f("graph_attributes").is_file():
        ga = _floats(f("graph_attributes"), _rows(f("graph_attributes"), "graph attributes"), "graph attribute")
        if len(ga) != n_graph_ids:
            raise FileFormatError(f"{len(ga)} lines, expected {n_graph_ids}", path=f("graph_attributes"))
        for g in range(n_graph_ids):
            for c in range(ga.shape[1]):
                rows_prop[g][f"attribute_{c + 1}"] = ga[g, c]
    return rows_prop


def read(
    directory: Any,
    name: str | None = None,
    node_labels: str | list[str] | None = None,
    edge_labels: str | list[str] | None = None,
    self_loops: str = "error",
    encoder: CategoryEncoder | None = None,
    n_graphs: int | None = None,
) -> GraphSet:
    """Read a TU dataset directory (see the module docstring for the files).

    Parameters
    ----------
    directory : str or os.PathLike
        The directory holding ``DS_A.txt`` etc.
    name : str, optional
        The prefix DS when the directory holds several datasets.
    node_labels, edge_labels : str or list of str, optional
        Which of the fields ``label``, ``attributes`` to keep (default: all present).
    self_loops : {"error", "drop"}
        A line ``i, i`` in ``DS_A.txt``: an error, or dropped.
    encoder : CategoryEncoder, optional
        Codes for text labels (one shared by all graphs of the call).
    n_graphs : int, optional
        Keep the first ``n_graphs`` graphs.

    Returns
    -------
    GraphSet
    """
    check_choice("self_loops", self_loops, ("error", "drop"))
    n_graphs = check_n_graphs(n_graphs)
    if name is not None and not isinstance(name, str):
        raise ParameterTypeError(f"name must be a dataset prefix (str) or None, got {type(name).__name__} {name!r:.60}")
    nfields = parse_fields(node_labels, "node_labels")
    efields = parse_fields(edge_labels, "edge_labels")
    encoder = check_encoder(encoder)
    d = check_path(directory, "TU dataset directory", directory=True)
    ds = find_prefix(d, name)

    def f(suffix: str) -> Path:
        return d / f"{ds}_{suffix}.txt"

    indicator, present = _graph_indicator(f, d, ds)
    n_total, n_graph_ids = len(indicator), len(present)
    edges, u, v, loops = _edge_list(f, indicator, self_loops)
    node_values = _field_values(f, "node", n_total, nfields, encoder)
    edge_values = _field_values(f, "edge", len(edges), efields, encoder)
    for want, have, kind in ((nfields, node_values, "node"), (efields, edge_values, "edge")):
        for field in want or []:
            if field not in have:
                raise FileFormatError(f"no {kind} field {field!r} (TU {kind} fields: label, attributes)", path=d)
    eu, ev, edge_unique = _undirected(f, u, v, loops, n_total, edge_values)  # one value per undirected edge
    eg = indicator[eu]
    rows_prop = _graph_properties(f, n_graph_ids)
    count = n_graph_ids if n_graphs is None else min(n_graphs, n_graph_ids)
    order_nodes = np.argsort(indicator, kind="stable")
    node_start = np.concatenate([[0], np.cumsum(present)])
    local = np.empty(n_total, dtype=np.int64)
    local[order_nodes] = np.arange(n_total) - node_start[indicator[order_nodes] - 1]
    order_edges = np.argsort(eg, kind="stable")
    edge_start = np.concatenate([[0], np.cumsum(np.bincount(eg, minlength=n_graph_ids + 1)[1:])])
    graphs, ids = [], []
    for g in range(count):
        nodes = order_nodes[node_start[g] : node_start[g + 1]]
        sel = order_edges[edge_start[g] : edge_start[g + 1]]
        ident = f"{ds}-{g + 1}"
        indptr, indices, data, elabels = csr_from_edges(
            len(nodes), local[eu[sel]], local[ev[sel]],
            {k: vals[sel] for k, vals in edge_unique.items()},
        )
        graphs.append(
            Graph.from_csr(
                indptr, indices, data, len(nodes),
                node_labels={k: vals[nodes] for k, vals in node_values.items()},
                edge_labels=elabels, title=ident,
            )
        )
        ids.append(ident)
    return GraphSet(graphs, ids, properties_frame(rows_prop[:count], ids), NAME, str(d), encoder)
