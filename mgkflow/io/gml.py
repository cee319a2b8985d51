"""GML files (parsed by networkx), one graph per file.

The same conventions as :mod:`mgkflow.io.graphml` (label fields, categorical
text, weights, ids, properties). GML lists of numbers of one length give vector
label fields. Nodes are identified by their ``id``; a node ``label`` attribute
is kept as an ordinary attribute (so, by default, a label field named ``label``),
except where it only repeats the node's id (``label "3"`` on node ``id 3``, as networkx
writes every node's name): such a label names nodes, it does not describe them, and a
kernel comparing it would compare node numbers.
"""

from __future__ import annotations

from typing import Any

from ._nxfiles import networkx_reader

__all__ = ["read", "NAME", "EXTENSIONS"]

NAME = "gml"
EXTENSIONS = (".gml", ".gml.gz")


def _load(path: str) -> Any:
    import networkx as nx

    graph = nx.read_gml(path, label="id")
    labels = nx.get_node_attributes(graph, "label")
    if labels and len(labels) == graph.number_of_nodes() and all(str(v) == str(n) for n, v in labels.items()):
        for n in graph.nodes:
            del graph.nodes[n]["label"]
    return graph


#: Read GML file(s); see :func:`mgkflow.io.read_gml`.
read = networkx_reader(NAME, "GML", _load)
