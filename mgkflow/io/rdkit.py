"""Molecular graphs from RDKit molecules and SMILES strings (RDKit, imported lazily).

A converter: it returns plain arrays and never imports :mod:`mgkflow.graph` (the file readers
:mod:`mgkflow.io.smiles` and :mod:`mgkflow.io.sdf` build the graphs). Formerly ``mgkflow.io_chem``.

The entry points are :func:`graph_arrays_from_mol` and
:func:`graph_arrays_from_smiles`, which return the keyword arguments of
:meth:`mgkflow.Graph.from_csr` (all but ``title``); :meth:`mgkflow.Graph.from_rdkit`
and :meth:`mgkflow.Graph.from_smiles` wrap them.

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

With ``extended=True`` (the default of :meth:`mgkflow.Graph.from_rdkit` and of the
file readers in :mod:`mgkflow.io`; not of :meth:`mgkflow.Graph.from_smiles`, which
builds exactly the drugs set's fields) there are also

``hydrogens``      (node) number of hydrogens on the atom, implicit and explicit
``aromatic``       (edge) 1 if the bond is aromatic else 0

and, when a conformer is used, the edge field ``distance`` (bond length, Å)
and ``coords`` (heavy-atom positions).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import GraphError
from ._args import check_flag, check_optional_flag
from .csr import csr_from_edges

__all__ = [
    "graph_arrays_from_smiles",
    "graph_arrays_from_mol",
    "NODE_FIELDS",
    "EDGE_FIELDS",
    "EXTENDED_NODE_FIELDS",
    "EXTENDED_EDGE_FIELDS",
    "require_rdkit",
]

NODE_FIELDS = ("element", "charge", "aromatic", "hybridization")
EDGE_FIELDS = ("bond_order", "conjugated", "in_ring")
#: Fields added by ``extended=True`` (``Graph.from_rdkit`` and the file readers).
EXTENDED_NODE_FIELDS = ("hydrogens",)
EXTENDED_EDGE_FIELDS = ("aromatic",)


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


def graph_arrays_from_mol(mol: Any, extended: bool = True, conformer: bool | None = None) -> dict[str, Any]:
    """Turn an RDKit molecule into the keyword arguments of :meth:`mgkflow.Graph.from_csr`.

    Parameters
    ----------
    mol : rdkit.Chem.Mol
        The molecule. Hydrogen atoms (explicit or not) are not nodes; they are
        counted in the ``hydrogens`` node field.
    extended : bool
        Add the fields beyond the drugs set's: node ``hydrogens``
        (``atom.GetTotalNumHs(includeNeighbors=True)``) and edge ``aromatic`` (0/1).
    conformer : bool or None
        Use the molecule's conformer: heavy-atom positions become ``coords`` and
        the edge field ``distance`` holds bond lengths (Å). None (default): only
        when the molecule has a 3-D conformer; True: use its conformer (2-D or
        3-D; an error if it has none); False: never.

    Returns
    -------
    dict
        Keys ``indptr``, ``indices``, ``data`` (unit weights), ``n_nodes``,
        ``node_labels``, ``edge_labels`` and ``coords`` (None without conformer).

    Raises
    ------
    mgkflow.errors.GraphError
        If ``mol`` is not an RDKit molecule, has no heavy atom, or
        ``conformer=True`` and it has no conformer.

    Examples
    --------
    >>> from rdkit import Chem  # doctest: +SKIP
    >>> a = graph_arrays_from_mol(Chem.MolFromSmiles("CC=O"))  # doctest: +SKIP
    >>> a["node_labels"]["hydrogens"].tolist()  # doctest: +SKIP
    [3, 1, 0]
    """
    if mol is None or not hasattr(mol, "GetAtoms") or not hasattr(mol, "GetBonds"):
        raise GraphError(f"expected an RDKit molecule, got {type(mol).__name__} {mol!r:.60}")
    extended = check_flag("extended", extended)
    conformer = check_optional_flag("conformer", conformer)
    atoms = list(mol.GetAtoms())
    atomic = np.fromiter((a.GetAtomicNum() for a in atoms), dtype=np.int64, count=len(atoms))
    heavy = atomic != 1
    n = int(heavy.sum())
    if n == 0:
        raise GraphError("molecule has no heavy atom")
    new_index = np.full(len(atoms), -1, dtype=np.int64)
    new_index[heavy] = np.arange(n)
    kept = [a for a, h in zip(atoms, heavy) if h]
    node_labels = {
        "element": atomic[heavy],
        "charge": np.fromiter((a.GetFormalCharge() for a in kept), dtype=np.int64, count=n),
        "aromatic": np.fromiter((a.GetIsAromatic() for a in kept), dtype=np.int64, count=n),
        "hybridization": np.fromiter((int(a.GetHybridization()) for a in kept), dtype=np.int64, count=n),
    }
    if extended:
        node_labels["hydrogens"] = np.fromiter(
            (a.GetTotalNumHs(includeNeighbors=True) for a in kept), dtype=np.int64, count=n
        )
    bonds = list(mol.GetBonds())
    m = len(bonds)
    bu = new_index[np.fromiter((b.GetBeginAtomIdx() for b in bonds), dtype=np.int64, count=m)]
    bv = new_index[np.fromiter((b.GetEndAtomIdx() for b in bonds), dtype=np.int64, count=m)]
    values = {
        "bond_order": np.fromiter((b.GetBondTypeAsDouble() for b in bonds), dtype=np.float64, count=m),
        "conjugated": np.fromiter((b.GetIsConjugated() for b in bonds), dtype=np.int64, count=m),
        "in_ring": np.fromiter((b.IsInRing() for b in bonds), dtype=np.int64, count=m),
    }
    if extended:
        values["aromatic"] = np.fromiter((b.GetIsAromatic() for b in bonds), dtype=np.int64, count=m)
    coords = None
    use = conformer
    if use is None:
        use = mol.GetNumConformers() > 0 and mol.GetConformer().Is3D()
    if use:
        if mol.GetNumConformers() == 0:
            raise GraphError("molecule has no conformer (coordinates); use conformer=None or False")
        xyz = np.asarray(mol.GetConformer().GetPositions(), dtype=np.float64)
        if not np.all(np.isfinite(xyz)):
            raise GraphError("molecule conformer holds NaN or infinite coordinates")
        ids_u = np.fromiter((b.GetBeginAtomIdx() for b in bonds), dtype=np.int64, count=m)
        ids_v = np.fromiter((b.GetEndAtomIdx() for b in bonds), dtype=np.int64, count=m)
        values["distance"] = np.sqrt(np.sum((xyz[ids_u] - xyz[ids_v]) ** 2, axis=1)) if m else np.zeros(0)
        coords = xyz[heavy]
    keep = (bu >= 0) & (bv >= 0)
    indptr, indices, data, edge_labels = csr_from_edges(
        n, bu[keep], bv[keep], {k: v[keep] for k, v in values.items()}
    )
    return {
        "indptr": indptr,
        "indices": indices,
        "data": data,
        "n_nodes": n,
        "node_labels": node_labels,
        "edge_labels": edge_labels,
        "coords": coords,
    }


def graph_arrays_from_smiles(smiles: str, extended: bool = False) -> dict[str, Any]:
    """Parse a SMILES string into the keyword arguments of :meth:`mgkflow.Graph.from_csr`.

    Parameters
    ----------
    smiles : str
        A SMILES string. Disconnected components (salts) are kept as one graph.
    extended : bool
        Also the fields ``hydrogens`` (node) and ``aromatic`` (edge) of
        :func:`graph_arrays_from_mol`. Default False: the drugs set's fields.

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
    extended = check_flag("extended", extended)
    if not isinstance(smiles, str) or not smiles.strip():
        raise GraphError(f"invalid SMILES {smiles!r}: empty or not a string")
    mol = Chem.MolFromSmiles(smiles)
    if mol is None:
        raise GraphError(f"invalid SMILES {smiles!r}: RDKit could not parse it")
    try:
        return graph_arrays_from_mol(mol, extended=extended, conformer=False)
    except GraphError as exc:
        raise GraphError(f"SMILES {smiles!r}: {exc}") from None
