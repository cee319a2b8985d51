"""Shared pieces of the dataset loaders: where the data files are, argument checks, the molecule npz layout."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..graph import Graph
from ..io.csr import csr_from_edges
from ._args import count

__all__ = ["data_dir"]


def data_dir() -> Path:
    """Directory holding the committed data files.

    ``mgkflow/data`` in an installed wheel (the repository's ``datasets/`` folder is
    packaged there), else ``datasets/`` next to the ``mgkflow`` package in a source tree
    or an editable install. Found by path, not imported, so that an unrelated package
    called ``datasets`` (e.g. Hugging Face's) never matters.

    Examples
    --------
    >>> (data_dir() / "drugs.csv").exists()
    True
    """
    here = Path(__file__).resolve().parent.parent  # the mgkflow package
    for d in (here / "data", here.parent / "datasets"):
        if (d / "proteins.csv").is_file():
            return d
    raise FileNotFoundError(
        f"mgkflow data files not found in {here / 'data'} or {here.parent / 'datasets'}; reinstall mgkflow"
    )


def _select(total: int, n_graphs: Any, name: str) -> int:
    """How many graphs of a committed set of ``total`` to load: all for None, else ``n_graphs`` (>= 0) at most."""
    if n_graphs is None:
        return total
    return min(count(name, "n_graphs", n_graphs, minimum=0), total)


def _molecule_graphs(
    z: Any, keep: np.ndarray, titles: list[str], coords: np.ndarray | None = None
) -> list[Graph]:
    """Graphs ``keep`` (indices) of a molecule npz file (layout in build_drugs.py and
    build_property_sets.py), with node coordinates taken from ``coords`` when given."""
    n_nodes = z["n_nodes"].astype(np.int64)
    n_edges = z["n_edges"].astype(np.int64)
    node_off = np.concatenate([[0], np.cumsum(n_nodes)])
    edge_off = np.concatenate([[0], np.cumsum(n_edges)])
    node_fields = {f: z[f].astype(np.int64) for f in ("element", "charge", "aromatic", "hybridization")}
    edge_fields = {
        "bond_order": z["bond_order2"].astype(np.float64) / 2.0,
        "conjugated": z["conjugated"].astype(np.int64),
        "in_ring": z["in_ring"].astype(np.int64),
    }
    # the extended fields of Graph.from_smiles(..., extended=True), in the files that have them
    if "hydrogens" in z:
        node_fields["hydrogens"] = z["hydrogens"].astype(np.int64)
    if "edge_aromatic" in z:
        edge_fields["aromatic"] = z["edge_aromatic"].astype(np.int64)
    eu, ev = z["edge_u"].astype(np.int64), z["edge_v"].astype(np.int64)
    graphs = []
    for k, title in zip(keep, titles):
        a, b = node_off[k], node_off[k + 1]
        s, e = edge_off[k], edge_off[k + 1]
        n = int(b - a)
        indptr, indices, data, edge_labels = csr_from_edges(
            n, eu[s:e], ev[s:e], {f: v[s:e] for f, v in edge_fields.items()}
        )
        graphs.append(
            Graph.from_csr(
                indptr,
                indices,
                data,
                n,
                node_labels={f: v[a:b] for f, v in node_fields.items()},
                edge_labels=edge_labels,
                coords=None if coords is None else np.asarray(coords[a:b], dtype=np.float64),
                title=title,
            )
        )
    return graphs
