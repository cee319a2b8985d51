"""The ``proteins`` set: protein contact graphs of the PDB files listed in ``proteins.csv``.

The structures (``proteins/*.pdb.gz``), their index and the script that collects them
(``build_proteins.py``) are in the repository's ``datasets/`` folder (``mgkflow/data`` in a wheel);
this module only reads them.
"""

from __future__ import annotations

import csv

from ..graph import Graph
from ._common import _select, data_dir

__all__ = ["proteins"]


def _protein_index() -> list[dict[str, str]]:
    path = data_dir() / "proteins.csv"
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def proteins(n_graphs: int | None = None, cutoff: float = 6.0) -> list[Graph]:
    """Single-chain protein structures as heavy-atom contact graphs.

    Parsed from ``datasets/proteins/*.pdb.gz`` in the order of
    ``datasets/proteins.csv`` (sorted by title) with
    :func:`mgkflow.io.pdb_parser.graph_arrays_from_pdb`: nodes are heavy atoms
    (labels ``element``, ``residue``), edges join atoms closer than ``cutoff`` Å
    (weight ``(1 - (r/cutoff)**2)**2``, label ``distance``); coordinates kept.
    Titles are the file stems: PDB id + chain (e.g. ``"1ahsA"``), ``"adk_open"``
    (4AKE) and ``"cobrotoxin"``.

    Parameters
    ----------
    n_graphs : int, optional
        Return the first ``n_graphs`` structures (all 40 when None).
    cutoff : float
        Contact distance in Å.

    Returns
    -------
    list of Graph

    Examples
    --------
    >>> gs = proteins(n_graphs=1, cutoff=5.0)
    >>> gs[0].title, gs[0].n_nodes
    ('1ahsA', 947)
    """
    from ..io.pdb_parser import graph_arrays_from_pdb

    index = _protein_index()
    count = _select(len(index), n_graphs, "proteins")
    root = data_dir()
    return [
        Graph.from_csr(**graph_arrays_from_pdb(root / row["file"], cutoff=cutoff), title=row["title"])
        for row in index[:count]
    ]
