"""Protein contact graphs from PDB files (a small parser of our own; numpy + scipy only).

A converter: it returns plain arrays and never imports :mod:`mgkflow.graph`; the file
reader :mod:`mgkflow.io.pdb` builds the graphs and re-exports the public names below
(the deprecated ``mgkflow.io_pdb`` points there).

The public entry point is :func:`graph_arrays_from_pdb`, which returns the
keyword arguments of :meth:`mgkflow.Graph.from_csr` (all but ``title``);
:meth:`mgkflow.Graph.from_pdb` wraps it.

Parsing rules
-------------
- ``ATOM`` and ``HETATM`` records of the first model only (reading stops at the
  first ``ENDMDL``); plain text or gzip (detected from the file's magic bytes).
- Hydrogens (element H or D) and waters (HOH, WAT, SOL, H2O, DOD, TIP3, ...) are skipped.
- Alternate locations: the first one seen for an atom is kept.
- The element comes from columns 77-78; where they are blank it is inferred from
  the atom name (columns 13-16).

Graph
-----
Nodes are the remaining heavy atoms, in file order, with label fields
``element`` (atomic number, 0 if unknown) and ``residue`` (:data:`RESIDUE_CODES`,
0 for anything but the 20 standard amino acids). Two atoms at distance
r < ``cutoff`` Å are joined by an edge of weight ``(1 - (r/cutoff)**2)**2``,
which falls smoothly to zero at the cutoff, with edge label ``distance`` = r.
Coordinates (Å) are kept as ``coords``.
"""

from __future__ import annotations

import gzip
import math
import os
from typing import Any

import numpy as np

from ..errors import GraphError, ParameterTypeError
from ._args import as_path
from .csr import csr_from_edges

__all__ = ["graph_arrays_from_pdb", "parse_pdb_atoms", "ELEMENTS", "RESIDUE_CODES"]

#: Atomic numbers of the elements met in protein structures (symbol -> Z).
ELEMENTS: dict[str, int] = {
    s: z
    for z, s in enumerate(
        "H He Li Be B C N O F Ne Na Mg Al Si P S Cl Ar K Ca Sc Ti V Cr Mn Fe Co Ni Cu Zn "
        "Ga Ge As Se Br Kr Rb Sr Y Zr Nb Mo Tc Ru Rh Pd Ag Cd In Sn Sb Te I Xe Cs Ba".split(),
        start=1,
    )
}
ELEMENTS.update({"D": 1, "W": 74, "Pt": 78, "Au": 79, "Hg": 80, "Pb": 82, "U": 92})
_ELEMENTS_UPPER = {k.upper(): v for k, v in ELEMENTS.items()}

#: Residue-name codes: the 20 standard amino acids in alphabetical order of their
#: three-letter names, 1..20 (anything else is 0). Common force-field aliases
#: (HSD/HSE/HSP/HID/HIE/HIP, CYX/CYM, ASH, GLH, LYN) map to their parent residue.
RESIDUE_CODES: dict[str, int] = {
    r: i
    for i, r in enumerate(
        "ALA ARG ASN ASP CYS GLN GLU GLY HIS ILE LEU LYS MET PHE PRO SER THR TRP TYR VAL".split(), start=1
    )
}
_ALIASES = {
    "HSD": "HIS", "HSE": "HIS", "HSP": "HIS", "HID": "HIS", "HIE": "HIS", "HIP": "HIS",
    "CYX": "CYS", "CYM": "CYS", "ASH": "ASP", "GLH": "GLU", "LYN": "LYS",
}
_RESIDUE_LOOKUP = dict(RESIDUE_CODES)
_RESIDUE_LOOKUP.update({a: RESIDUE_CODES[r] for a, r in _ALIASES.items()})
#: Largest coordinate magnitude (Å) accepted: squared distances stay finite in float64.
MAX_COORD = 1e150

_WATERS = {"HOH", "WAT", "SOL", "H2O", "DOD", "TIP", "TIP3", "TIP4", "TIP5", "SPC", "T3P", "T4P"}


def check_chain(chain: Any) -> str | None:
    """``chain`` (a chain identifier, text, or None for all) checked: else a
    :class:`~mgkflow.errors.ParameterTypeError`.

    Examples
    --------
    >>> check_chain("A"), check_chain(None)
    ('A', None)
    >>> check_chain(["A"])
    Traceback (most recent call last):
    ...
    mgkflow.errors.ParameterTypeError: chain must be a chain identifier (str) or None, got list ['A']
    """
    if chain is not None and not isinstance(chain, str):
        raise ParameterTypeError(
            f"chain must be a chain identifier (str) or None, got {type(chain).__name__} {chain!r:.60}"
        )
    return chain


def _read_text(path: Any) -> str:
    if not isinstance(path, (str, bytes, os.PathLike)):
        raise GraphError(f"PDB input must be a path, got {type(path).__name__}")
    fspath = as_path(path, "path")  # a NUL character: ParameterError
    try:
        with open(fspath, "rb") as fh:
            raw = fh.read()
    except OSError as exc:
        raise GraphError(f"cannot read PDB file {path!s}: {exc}") from exc
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as exc:
            raise GraphError(f"PDB file {path!s} looks gzipped but cannot be decompressed: {exc}") from exc
    if not raw.strip():
        raise GraphError(f"PDB file {path!s} is empty")
    if b"\x00" in raw[:4096]:
        raise GraphError(f"PDB file {path!s} is not a text file")
    return raw.decode("latin-1")


def _element(line: str, resname: str) -> str:
    sym = line[76:78].strip() if len(line) >= 77 else ""
    if sym and sym.isalpha():
        return sym.upper()
    name = line[12:16]
    stripped = name.strip().lstrip("0123456789")
    if not stripped:
        return ""
    if resname not in _RESIDUE_LOOKUP and name[0].isalpha() and name[:2].upper() in _ELEMENTS_UPPER:
        return name[:2].upper()  # e.g. "ZN  ", "CL  " in a HETATM residue
    return stripped[0].upper()


def parse_pdb_atoms(path: Any, chain: str | None = None) -> dict[str, Any]:
    """Read the heavy atoms of the first model of a PDB file.

    Parameters
    ----------
    path : str or os.PathLike
        PDB file, plain text or gzip-compressed.
    chain : str, optional
        Keep only atoms of this chain identifier (column 22).

    Returns
    -------
    dict
        ``coords`` (n, 3) float64, ``element`` (n,) int64 atomic numbers,
        ``residue`` (n,) int64 residue codes, ``resname``, ``name`` and ``chain``
        (lists of str).

    Examples
    --------
    >>> atoms = parse_pdb_atoms("datasets/proteins/2xdgA.pdb.gz")  # doctest: +SKIP
    >>> atoms["coords"].shape  # doctest: +SKIP
    (659, 3)
    """
    chain = check_chain(chain)
    text = _read_text(path)
    xyz: list[tuple[float, float, float]] = []
    elements: list[int] = []
    residues: list[int] = []
    resnames: list[str] = []
    names: list[str] = []
    chains: list[str] = []
    seen_alt: set[tuple[str, str, str, str]] = set()
    chains_seen: set[str] = set()
    n_records = 0
    for lineno, line in enumerate(text.splitlines(), start=1):
        rec = line[:6]
        if rec.startswith("ENDMDL"):
            break
        if rec not in ("ATOM  ", "HETATM"):
            continue
        n_records += 1
        ch = line[21:22] if len(line) > 21 else " "
        chains_seen.add(ch)
        if chain is not None and ch != chain:
            continue
        resname = line[17:20].strip()
        if resname in _WATERS or line[17:21].strip() in _WATERS:
            continue
        elem = _element(line, resname)
        if elem in ("H", "D"):
            continue
        altloc = line[16:17]
        if altloc not in (" ", ""):
            key = (ch, line[22:27], line[17:20], line[12:16])
            if key in seen_alt:
                continue
            seen_alt.add(key)
        try:
            xyz.append((float(line[30:38]), float(line[38:46]), float(line[46:54])))
        except ValueError as exc:
            raise GraphError(f"PDB file {path!s}, line {lineno}: cannot read coordinates: {line!r}") from exc
        elements.append(_ELEMENTS_UPPER.get(elem, 0))
        residues.append(_RESIDUE_LOOKUP.get(resname, 0))
        resnames.append(resname)
        names.append(line[12:16].strip())
        chains.append(ch)
    if not xyz:
        if n_records == 0:
            raise GraphError(f"PDB file {path!s} has no ATOM/HETATM records (empty or not a PDB file)")
        if chain is not None and chain not in chains_seen:
            raise GraphError(
                f"PDB file {path!s} has no chain {chain!r}; chains present: {sorted(chains_seen)}"
            )
        raise GraphError(f"PDB file {path!s} has no heavy atoms (only hydrogens or waters)")
    coords = np.asarray(xyz, dtype=np.float64)
    if not np.all(np.isfinite(coords)):
        raise GraphError(f"PDB file {path!s} holds NaN or infinite coordinates")
    if np.abs(coords).max() > MAX_COORD:
        k = int(np.argmax(np.abs(coords).max(axis=1)))
        raise GraphError(
            f"PDB file {path!s}: atom {k + 1} ({names[k]!r}) has coordinates {coords[k].tolist()} beyond "
            f"±{MAX_COORD:g} Å (squared distances would overflow)"
        )
    return {
        "coords": coords,
        "element": np.asarray(elements, dtype=np.int64),
        "residue": np.asarray(residues, dtype=np.int64),
        "resname": resnames,
        "name": names,
        "chain": chains,
    }


def contact_edges(coords: np.ndarray, cutoff: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pairs ``i < j`` of points closer than ``cutoff`` and their distances (sorted by (i, j))."""
    from scipy.spatial import cKDTree

    coords = np.asarray(coords, dtype=np.float64)
    if coords.size and not (np.all(np.isfinite(coords)) and np.abs(coords).max() <= MAX_COORD):
        raise GraphError(f"contact graph: coordinates must be finite and within ±{MAX_COORD:g}")
    pairs = cKDTree(coords).query_pairs(cutoff, output_type="ndarray")
    if len(pairs) == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, np.zeros(0, dtype=np.float64)
    i, j = pairs[:, 0].astype(np.int64), pairs[:, 1].astype(np.int64)
    r = np.sqrt(np.sum((coords[i] - coords[j]) ** 2, axis=1))
    keep = r < cutoff
    i, j, r = i[keep], j[keep], r[keep]
    order = np.lexsort((j, i))
    return i[order], j[order], r[order]


def graph_arrays_from_pdb(path: Any, cutoff: float = 6.0, chain: str | None = None) -> dict[str, Any]:
    """Parse a PDB file into the keyword arguments of :meth:`mgkflow.Graph.from_csr`.

    Parameters
    ----------
    path : str or os.PathLike
        PDB file, plain text or gzip-compressed (see the module docstring for the rules).
    cutoff : float
        Contact distance in Å (> 0). Atoms at r < cutoff are joined with weight
        ``(1 - (r/cutoff)**2)**2`` and edge label ``distance`` = r.
    chain : str, optional
        Keep only this chain identifier.

    Returns
    -------
    dict
        Keys ``indptr``, ``indices``, ``data``, ``n_nodes``, ``node_labels``
        (``element``, ``residue``), ``edge_labels`` (``distance``) and ``coords``.

    Raises
    ------
    mgkflow.errors.GraphError
        Unreadable or empty file, no heavy atom, unknown chain, bad cutoff.

    Examples
    --------
    >>> arrays = graph_arrays_from_pdb("datasets/proteins/2xdgA.pdb.gz", cutoff=5.0)  # doctest: +SKIP
    >>> g = Graph.from_csr(**arrays, title="2xdgA")  # doctest: +SKIP
    """
    try:
        cutoff = float(cutoff)
    except (TypeError, ValueError) as exc:
        raise GraphError(f"PDB contact cutoff must be a number, got {cutoff!r}") from exc
    if not (math.isfinite(cutoff) and cutoff > 0):
        raise GraphError(f"PDB contact cutoff must be a finite distance > 0 (Å), got {cutoff}")
    atoms = parse_pdb_atoms(path, chain=chain)
    coords = atoms["coords"]
    n = len(coords)
    i, j, r = contact_edges(coords, cutoff)
    w = (1.0 - (r / cutoff) ** 2) ** 2
    indptr, indices, data, edge_labels = csr_from_edges(n, i, j, {"distance": r}, weights=w)
    return {
        "indptr": indptr,
        "indices": indices,
        "data": data,
        "n_nodes": n,
        "node_labels": {"element": atoms["element"], "residue": atoms["residue"]},
        "edge_labels": edge_labels,
        "coords": coords,
    }
