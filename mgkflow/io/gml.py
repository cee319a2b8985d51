"""GML files (parsed by networkx), one graph per file.

The same conventions as :mod:`mgkflow.io.graphml` (label fields, categorical
text, weights, ids, properties). GML lists of numbers of one length give vector
label fields. Nodes are identified by their ``id``; a node ``label`` attribute
is kept as an ordinary attribute (so, by default, a label field named ``label``).
"""

from __future__ import annotations

from typing import Any

from ._nxfiles import networkx_reader

__all__ = ["read", "NAME", "EXTENSIONS"]

NAME = "gml"
EXTENSIONS = (".gml", ".gml.gz")


def _load(path: str) -> Any:
    import networkx as nx

    return nx.read_gml(path, label="id")


#: Read GML file(s); see :func:`mgkflow.io.read_gml`.
read = networkx_reader(NAME, "GML", _load)
