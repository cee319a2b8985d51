"""Molecular graphs from SMILES strings (RDKit, imported lazily).

The public entry point is :func:`graph_arrays_from_smiles`, which returns the
keyword arguments of :meth:`mgkflow.Graph.from_csr` (all but ``title``);
:meth:`mgkflow.Graph.from_smiles` wraps it.

Conventions
-----------
Nodes are the heavy atoms (every atom except hydrogen; isotopic hydrogens such as
``[2H]`` are dropped too), numbered in RDKit atom order. Node label fields:

``element``        atomic number (int)
``charge``         formal charge (int)
``aromatic``       1 if the atom is aromatic else 0
``hybridization``  ``int(atom.GetHybridization())`` (RDKit enum: SP=2, SP2=3, SP3=4, ...)

Edges are the bonds between heavy atoms, all of weight 1. Edge label fields:

``bond_order``     1.0, 1.5 (aromatic), 2.0, 3.0 (``Bond.GetBondTypeAsDouble``)
``conjugated``     1 if the bond is conjugated else 0
``in_ring``        1 if the bond is in a ring else 0
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .errors import GraphError

__all__ = ["graph_arrays_from_smiles", "NODE_FIELDS", "EDGE_FIELDS", "require_rdkit"]

NODE_FIELDS = ("element", "charge", "aromatic", "hybridization")
EDGE_FIELDS = ("bond_order", "conjugated", "in_ring")


def require_rdkit() -> Any:
    """Import and return ``rdkit.Chem``; raise a helpful ImportError if RDKit is missing."""
    try:
        from rdkit import Chem, RDLogger
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "reading SMILES needs RDKit, which is not installed: pip install mgkflow[chem] "
            "(or pip install rdkit)"
        ) from exc
    RDLogger.DisableLog("rdApp.*")
    return Chem


def csr_from_edges(
    n: int,
    u: np.ndarray,
    v: np.ndarray,
    edge_values: dict[str, np.ndarray],
    weights: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """Symmetric CSR arrays from an undirected edge list (each edge once).

    Returns ``indptr, indices, data, edge_labels`` with column indices sorted
    within each row and every edge label duplicated onto both directions.

    Examples
    --------
    >>> indptr, indices, data, labels = csr_from_edges(3, np.array([0, 1]), np.array([1, 2]), {"x": [5, 6]})
    >>> indptr.tolist(), indices.tolist(), labels["x"].tolist()
    ([0, 1, 3, 4], [1, 0, 2, 1], [5, 5, 6, 6])
    """
    u = np.asarray(u, dtype=np.int64)
    v = np.asarray(v, dtype=np.int64)
    rows = np.concatenate([u, v])
    cols = np.concatenate([v, u])
    order = np.lexsort((cols, rows))
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n), out=indptr[1:])
    w = np.ones(len(u), dtype=np.float64) if weights is None else np.asarray(weights, dtype=np.float64)
    data = np.concatenate([w, w])[order]
    labels = {}
    for name, vals in edge_values.items():
        vals = np.asarray(vals)
        labels[name] = np.concatenate([vals, vals])[order]
    return indptr, cols[order], data, labels


def graph_arrays_from_smiles(smiles: str) -> dict[str, Any]:
    """Parse a SMILES string into the keyword arguments of :meth:`mgkflow.Graph.from_csr`.

    Parameters
    ----------
    smiles : str
        A SMILES string. Disconnected components (salts) are kept as one graph.

    Returns
    -------
    dict
        Keys ``indptr``, ``indices``, ``data`` (unit weights), ``n_nodes``,
        ``node_labels`` (``element``, ``charge``, ``aromatic``, ``hybridization``),
        ``edge_labels`` (``bond_order``, ``conjugated``, ``in_ring``) and
        ``coords`` (None).

    Raises
    ------
    ImportError
        If RDKit is not installed (``pip install mgkflow[chem]``).
    mgkflow.errors.GraphError
        If RDKit cannot parse the SMILES or the molecule has no heavy atom.

    Examples
    --------
    >>> arrays = graph_arrays_from_smiles("CCO")  # doctest: +SKIP
    >>> arrays["n_nodes"], arrays["node_labels"]["element"].tolist()  # doctest: +SKIP
    (3, [6, 6, 8])
    >>> Graph.from_csr(**arrays, title="ethanol")  # doctest: +SKIP
    """
    Chem = require_rdkit()
    if not isinstance(smiles, str) or not smiles.strip():
        raise GraphError(f"invalid SMILES {smiles!r}: empty or not a string")
    mol = Chem.MolFromSmiles(smiles)
    if mol is None:
        raise GraphError(f"invalid SMILES {smiles!r}: RDKit could not parse it")
    atoms = list(mol.GetAtoms())
    atomic = np.fromiter((a.GetAtomicNum() for a in atoms), dtype=np.int64, count=len(atoms))
    heavy = atomic != 1
    n = int(heavy.sum())
    if n == 0:
        raise GraphError(f"SMILES {smiles!r} has no heavy atom")
    new_index = np.full(len(atoms), -1, dtype=np.int64)
    new_index[heavy] = np.arange(n)
    kept = [a for a, h in zip(atoms, heavy) if h]
    node_labels = {
        "element": atomic[heavy],
        "charge": np.fromiter((a.GetFormalCharge() for a in kept), dtype=np.int64, count=n),
        "aromatic": np.fromiter((a.GetIsAromatic() for a in kept), dtype=np.int64, count=n),
        "hybridization": np.fromiter((int(a.GetHybridization()) for a in kept), dtype=np.int64, count=n),
    }
    bonds = list(mol.GetBonds())
    m = len(bonds)
    bu = new_index[np.fromiter((b.GetBeginAtomIdx() for b in bonds), dtype=np.int64, count=m)]
    bv = new_index[np.fromiter((b.GetEndAtomIdx() for b in bonds), dtype=np.int64, count=m)]
    order = np.fromiter((b.GetBondTypeAsDouble() for b in bonds), dtype=np.float64, count=m)
    conj = np.fromiter((b.GetIsConjugated() for b in bonds), dtype=np.int64, count=m)
    ring = np.fromiter((b.IsInRing() for b in bonds), dtype=np.int64, count=m)
    keep = (bu >= 0) & (bv >= 0)
    indptr, indices, data, edge_labels = csr_from_edges(
        n,
        bu[keep],
        bv[keep],
        {"bond_order": order[keep], "conjugated": conj[keep], "in_ring": ring[keep]},
    )
    return {
        "indptr": indptr,
        "indices": indices,
        "data": data,
        "n_nodes": n,
        "node_labels": node_labels,
        "edge_labels": edge_labels,
        "coords": None,
    }
