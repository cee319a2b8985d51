"""GraphML files (parsed by networkx), one graph per file.

Nodes are numbered in file order. Node and edge attributes become label
fields: by default every attribute present on all nodes (edges) of all graphs
of the call, except the edge ``weight`` attribute, which gives the edge weights
(1.0 where missing); an attribute missing on some is left out with a
:class:`~mgkflow.io.DroppedLabelWarning`. :func:`mgkflow.io.default_kernels` (and
``mgkflow gram``) then use every field read. Text attributes are categorical: they are encoded to
integers by one :class:`~mgkflow.io.CategoryEncoder` shared by all graphs of
the call; a field mixing text and numbers is an error. Graph-level attributes
become properties; ids are the file names without extension. Directed files
are an error unless ``directed="undirected"``.

A ``<key>`` without ``attr.type`` (which GraphML allows; the default type is
string) is read from its text: as integers when every value of the file is a
whole number, as reals when every value is a number, else as text (encoded
like other text labels). networkx's warning about it is not passed on.
"""

from __future__ import annotations

from typing import Any

from ._nxfiles import networkx_reader

__all__ = ["read", "NAME", "EXTENSIONS"]

NAME = "graphml"
EXTENSIONS = (".graphml", ".graphml.gz", ".xml")


def _typeless_keys(path: str, ids: set[str]) -> list[tuple[str, str]]:
    """``(for, attr.name)`` of the ``<key>`` elements with ``id`` in ``ids`` (keys that have no ``attr.type``)."""
    import xml.etree.ElementTree as ET
    from pathlib import Path

    from ._common import read_text

    root = ET.fromstring(read_text(Path(path), "GraphML file"))
    out = []
    for el in root.iter():
        if el.tag.rsplit("}", 1)[-1] == "key" and el.get("id") in ids:
            out.append((el.get("for", "node"), el.get("attr.name") or el.get("id")))
    return out


def _as_numbers(values: list[Any]) -> list[Any] | None:
    """``values`` (text) as ints, else floats, else None (leave them text)."""
    for kind in (int, float):
        try:
            return [kind(v) for v in values]
        except (TypeError, ValueError):
            continue
    return None


def _load(path: str) -> Any:
    import re
    import warnings

    import networkx as nx

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        G = nx.read_graphml(path)
    ids = {m.group(1) for w in caught for m in [re.search(r"No key type for id (\S+?)\.? Using", str(w.message))] if m}
    for w in caught:  # pass on warnings other than the one handled here
        if "No key type for id" not in str(w.message):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    for kind, name in _typeless_keys(path, ids) if ids else ():
        if kind == "graph":
            continue
        attrs = [d for _, d in G.nodes(data=True)] if kind == "node" else [d for *_, d in G.edges(data=True)]
        attrs = [d for d in attrs if name in d]
        numbers = _as_numbers([d[name] for d in attrs])
        if numbers is not None:
            for d, v in zip(attrs, numbers):
                d[name] = v
    return G


#: Read GraphML file(s); see :func:`mgkflow.io.read_graphml`.
read = networkx_reader(NAME, "GraphML", _load)
