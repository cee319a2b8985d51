"""PDB files (own parser, :mod:`mgkflow.io.pdb_parser`): one protein contact graph per file.

Each file (plain or gzip) becomes :meth:`mgkflow.Graph.from_pdb` with the given
``cutoff`` (Å) and ``chain``: heavy atoms with ``element`` and ``residue``
labels, edges between atoms closer than the cutoff with weight
``(1 - (r/cutoff)**2)**2`` and label ``distance``. Ids are the file names
without extension; a directory of PDB files is read file by file (sorted).

The PDB parsing (formerly ``mgkflow.io_pdb``, which now points here) is importable from here:
:func:`parse_pdb_atoms`, :func:`graph_arrays_from_pdb`, :func:`contact_edges`, :data:`ELEMENTS`,
:data:`RESIDUE_CODES`, :data:`MAX_COORD`. It lives in :mod:`mgkflow.io.pdb_parser`, which returns
plain arrays and never imports :mod:`mgkflow.graph`, so that :meth:`mgkflow.Graph.from_pdb` can call
it; this module builds graphs (it imports :mod:`mgkflow.graph`), so the parser cannot live here.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import FileFormatError, GraphError
from ..graph import Graph
from ._common import CategoryEncoder, GraphSet, check_encoder, check_n_graphs, check_path, properties_frame
from .pdb_parser import (
    ELEMENTS,
    MAX_COORD,
    RESIDUE_CODES,
    check_chain,
    contact_edges,
    graph_arrays_from_pdb,
    parse_pdb_atoms,
)

__all__ = [
    "read", "NAME", "EXTENSIONS",
    "parse_pdb_atoms", "graph_arrays_from_pdb", "contact_edges", "ELEMENTS", "RESIDUE_CODES", "MAX_COORD",
]

NAME = "pdb"
EXTENSIONS = (".pdb", ".ent", ".pdb.gz", ".ent.gz")


def _stem(p: Path) -> str:
    name = p.name
    for suffix in (".gz", ".pdb", ".ent"):
        if name.lower().endswith(suffix):
            name = name[: -len(suffix)]
    return name or p.name


def read(
    paths: Any,
    cutoff: float = 6.0,
    chain: str | None = None,
    encoder: CategoryEncoder | None = None,
    n_graphs: int | None = None,
) -> GraphSet:
    """Read one or several PDB files (see the module docstring)."""
    n_graphs = check_n_graphs(n_graphs)
    chain = check_chain(chain)
    encoder = check_encoder(encoder)
    if isinstance(paths, (str, Path)) or not isinstance(paths, Sequence):
        paths = [paths]
    files = [check_path(p, "PDB file") for p in paths][: n_graphs if n_graphs is not None else None]
    if not files:
        raise FileFormatError("no PDB files given")
    graphs, ids = [], []
    for p in files:
        try:
            g = Graph.from_pdb(p, cutoff=cutoff, chain=chain, title=_stem(p))
        except GraphError as exc:
            if isinstance(exc, FileFormatError):
                raise
            err = FileFormatError(str(exc))  # the message names the file already
            err.path = str(p)
            raise err from None
        graphs.append(g)
        ids.append(_stem(p))
    source = str(files[0]) if len(files) == 1 else str(files[0].parent)
    return GraphSet(graphs, ids, properties_frame([{} for _ in ids], ids), NAME, source, encoder)
