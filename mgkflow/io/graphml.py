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

from collections.abc import Sequence
from typing import Any

from ._common import CategoryEncoder, GraphSet
from ._nxfiles import read_networkx_files

__all__ = ["read", "NAME", "EXTENSIONS"]

NAME = "graphml"
EXTENSIONS = (".graphml", ".graphml.gz", ".xml")


def _load(path: str) -> Any:
    import networkx as nx

    return nx.read_graphml(path)


def read(
    paths: Any,
    node_labels: str | Sequence[str] | None = None,
    edge_labels: str | Sequence[str] | None = None,
    weight: str | None = "weight",
    directed: str = "error",
    encoder: CategoryEncoder | None = None,
    n_graphs: int | None = None,
) -> GraphSet:
    """Read GraphML file(s); see :func:`mgkflow.io.read_graphml`."""
    return read_networkx_files(paths, NAME, _load, node_labels, edge_labels, weight, directed, encoder, n_graphs)
