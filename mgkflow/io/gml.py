"""GML files (parsed by networkx), one graph per file.

The same conventions as :mod:`mgkflow.io.graphml` (label fields, categorical
text, weights, ids, properties). GML lists of numbers of one length give vector
label fields. Nodes are identified by their ``id``; a node ``label`` attribute
is kept as an ordinary attribute (so, by default, a label field named ``label``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._common import CategoryEncoder, GraphSet
from ._nxfiles import read_networkx_files

__all__ = ["read", "NAME", "EXTENSIONS"]

NAME = "gml"
EXTENSIONS = (".gml", ".gml.gz")


def _load(path: str) -> Any:
    import networkx as nx

    return nx.read_gml(path, label="id")


def read(
    paths: Any,
    node_labels: str | Sequence[str] | None = None,
    edge_labels: str | Sequence[str] | None = None,
    weight: str | None = "weight",
    directed: str = "error",
    encoder: CategoryEncoder | None = None,
    n_graphs: int | None = None,
) -> GraphSet:
    """Read GML file(s); see :func:`mgkflow.io.read_gml`."""
    return read_networkx_files(paths, NAME, _load, node_labels, edge_labels, weight, directed, encoder, n_graphs)
