"""GraphML files (parsed by networkx), one graph per file.

Nodes are numbered in file order. Node and edge attributes become label
fields: by default every attribute present on all nodes (edges) of all graphs
of the call, except the edge ``weight`` attribute, which gives the edge weights
(1.0 where missing). Text attributes are categorical: they are encoded to
integers by one :class:`~mgkflow.io.CategoryEncoder` shared by all graphs of
the call; a field mixing text and numbers is an error. Graph-level attributes
become properties; ids are the file names without extension. Directed files
are an error unless ``directed="undirected"``.
"""

from __future__ import annotations

from typing import Any

from ._nxfiles import networkx_reader

__all__ = ["read", "NAME", "EXTENSIONS"]

NAME = "graphml"
EXTENSIONS = (".graphml", ".graphml.gz", ".xml")


def _load(path: str) -> Any:
    import networkx as nx

    return nx.read_graphml(path)


#: Read GraphML file(s); see :func:`mgkflow.io.read_graphml`.
read = networkx_reader(NAME, "GraphML", _load)
