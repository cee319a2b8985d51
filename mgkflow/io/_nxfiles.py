"""Shared reader for the networkx-parsed formats (GraphML, GML)."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..errors import FileFormatError, GraphError
from ..graph import Graph
from ._common import (
    CategoryEncoder,
    DroppedLabelWarning,
    GraphSet,
    _text,
    check_attribute_name,
    check_choice,
    check_encoder,
    check_n_graphs,
    check_path,
    is_text_value,
    parse_fields,
    properties_frame,
)

__all__ = ["networkx_reader"]


def _stem(p: Path) -> str:
    name = p.name
    for suffix in (".gz", ".bz2", ".graphml", ".gml", ".xml"):
        if name.lower().endswith(suffix):
            name = name[: -len(suffix)]
    return name or p.name


def _common_keys(
    items: list[list[dict[str, Any]]], exclude: set[str], kind: str = "node", files: Sequence[Path] = ()
) -> list[str]:
    """The attributes present on every node (edge) of every graph, in first-seen order.

    Attributes present on only some are left out with a :class:`DroppedLabelWarning` naming
    them, how many nodes (edges) lack them and the first file where one does.
    """
    seen: dict[str, int] = {}
    total = 0
    for attrs_list in items:
        total += len(attrs_list)
        for attrs in attrs_list:
            for k in attrs:
                if k not in exclude:
                    seen[k] = seen.get(k, 0) + 1
    keys = [k for k, c in seen.items() if c == total]
    for k, c in seen.items():
        if c < total:
            first = next(
                (files[i] for i, attrs_list in enumerate(items) if any(k not in a for a in attrs_list)), None
            ) if files else None
            where = f" (first in {first})" if first is not None else ""
            warnings.warn(
                f"{kind} attribute '{k}' is missing on {total - c} of {total} {kind}s{where}, so it is not read "
                f"as a label field; name it ({kind}_labels=[{k!r}], CLI --{kind}-labels {k}) to see which lack it",
                DroppedLabelWarning, stacklevel=4,
            )
    return keys


def _load_files(
    paths: Any, fmt: str, loader: Callable[[str], Any], directed: str, n_graphs: int | None
) -> tuple[list[Path], list[tuple[Path, Any]]]:
    """The checked files and their (path, undirected networkx graph) pairs."""
    import networkx as nx

    if isinstance(paths, (str, Path)) or not isinstance(paths, Sequence):
        paths = [paths]
    files = [check_path(p, f"{fmt} file") for p in paths]
    if n_graphs is not None:
        files = files[:n_graphs]
    if not files:
        raise FileFormatError(f"no {fmt} files given")
    loaded = []
    for p in files:
        try:
            G = loader(str(p))
        except MemoryError:
            raise
        except Exception as exc:  # noqa: BLE001 - any parser failure is a bad file
            line = getattr(exc, "position", (None,))[0] if hasattr(exc, "position") else getattr(exc, "lineno", None)
            raise FileFormatError(f"cannot parse {fmt}: {exc}", path=p, line=line) from None
        if not isinstance(G, nx.Graph):
            raise FileFormatError(f"{fmt} parser returned {type(G).__name__}, not a graph", path=p)
        if G.is_multigraph():
            raise FileFormatError("multigraph (parallel edges) is not supported; merge the parallel edges", path=p)
        if G.is_directed():
            if directed == "error":
                raise FileFormatError(
                    "directed graph: mgkflow graphs are undirected (read with directed='undirected' "
                    "to merge each pair of opposite edges)", path=p
                )
            G = G.to_undirected()
        if G.number_of_nodes() == 0:
            raise FileFormatError(f"{fmt} graph has no nodes", path=p)
        loaded.append((p, G))
    return files, loaded


def _fit_text_fields(
    node_attrs: list, edge_attrs: list, nfields: list[str], efields: list[str], encoder: CategoryEncoder, path: Path
) -> dict[tuple[str, str], bool]:
    """Fit one encoder table per text field on every graph of the call; the (kind, field) pairs that are text."""
    text_fields: dict[tuple[str, str], bool] = {}
    for kind, fields, attrs_per_graph in (("node", nfields, node_attrs), ("edge", efields, edge_attrs)):
        for f in fields:
            values = [a[f] for attrs in attrs_per_graph for a in attrs if f in a]
            text = [is_text_value(v) for v in values]
            if any(text) and not all(text):
                k = text.index(False) if text[0] else text.index(True)
                raise FileFormatError(
                    f"{kind} label field '{f}' mixes text and numbers (e.g. {values[0]!r} and {values[k]!r}); "
                    "a field must be all text (categorical) or all numbers", path=path
                )
            if any(text):
                encoder.fit(f"{kind}:{f}", values)
                text_fields[(kind, f)] = True
    return text_fields


def _encoded(G: Any, text_fields: dict[tuple[str, str], bool], encoder: CategoryEncoder) -> Any:
    """``G`` with its text label values replaced by their codes (a copy; ``G`` itself if none)."""
    if not text_fields:
        return G
    G = G.copy()
    for (kind, f) in text_fields:
        table = encoder.tables[f"{kind}:{f}"]
        attrs = (d for _, d in G.nodes(data=True)) if kind == "node" else (d for *_, d in G.edges(data=True))
        for d in attrs:
            if f in d:
                d[f] = table[_text(d[f])]
    return G


def networkx_reader(fmt: str, label: str, loader: Callable[[str], Any]) -> Callable[..., GraphSet]:
    """The ``read`` function of a networkx-parsed format: ``fmt`` ("gml"), ``label`` ("GML") and its ``loader``.

    The reader takes one or several files, one graph each; see :func:`mgkflow.io.read_graphml`
    for its options.
    """

    def read(
        paths: Any,
        node_labels: str | Sequence[str] | None = None,
        edge_labels: str | Sequence[str] | None = None,
        weight: str | None = "weight",
        directed: str = "error",
        encoder: CategoryEncoder | None = None,
        n_graphs: int | None = None,
    ) -> GraphSet:
        check_choice("directed", directed, ("error", "undirected"))
        n_graphs = check_n_graphs(n_graphs)
        nfields = parse_fields(node_labels, "node_labels")
        efields = parse_fields(edge_labels, "edge_labels")
        check_attribute_name("weight", weight)
        encoder = check_encoder(encoder)
        files, loaded = _load_files(paths, fmt, loader, directed, n_graphs)
        node_attrs = [[d for _, d in G.nodes(data=True)] for _, G in loaded]
        edge_attrs = [[d for _, _, d in G.edges(data=True)] for _, G in loaded]
        if nfields is None:
            nfields = _common_keys(node_attrs, set(), "node", files)
        if efields is None:
            efields = _common_keys(edge_attrs, set() if weight is None else {weight}, "edge", files)
        text_fields = _fit_text_fields(node_attrs, edge_attrs, nfields, efields, encoder, files[0])
        graphs, ids, props = [], [], []
        for p, G in loaded:
            G = _encoded(G, text_fields, encoder)
            ident = _stem(p)
            try:
                g = Graph.from_networkx(G, weight=weight, node_labels=nfields, edge_labels=efields, title=ident)
            except GraphError as exc:
                raise FileFormatError(str(exc), path=p) from None
            graphs.append(g)
            ids.append(ident)
            props.append({k: v for k, v in G.graph.items() if not isinstance(v, (dict, list, tuple, set))})
        source = str(files[0]) if len(files) == 1 else str(files[0].parent)
        return GraphSet(graphs, ids, properties_frame(props, ids), fmt, source, encoder)

    read.__doc__ = f"Read {label} file(s); see :func:`mgkflow.io.read_{fmt}`."
    return read
