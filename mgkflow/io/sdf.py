"""SDF (MDL SD) files: molecules with data fields, through RDKit.

Records end at a ``$$$$`` line (a single MOL file without one is one record);
the file may be gzip-compressed. Each record is parsed by RDKit (sanitized,
hydrogens removed into counts) into a :meth:`mgkflow.Graph.from_rdkit` graph
with ``extended`` fields; with a 3-D conformer (by default) the graph also
gets ``coords`` and the edge field ``distance`` (bond length, Å). Ids are the
record title lines, else ``"STEM-K"`` (K the 1-based record number). Data
fields (``> <NAME>``) become property columns (numeric where every value is).
A record RDKit cannot read raises :class:`~mgkflow.errors.FileFormatError`
naming the file, the record number and its first line.
"""

from __future__ import annotations

from typing import Any

from ..errors import FileFormatError
from ._common import CategoryEncoder, GraphSet, check_encoder, check_optional_flag, read_text
from ._molfiles import MoleculeGraphs, open_molecule_file

__all__ = ["read", "NAME", "EXTENSIONS"]

NAME = "sdf"
EXTENSIONS = (".sdf", ".sd", ".mol", ".sdf.gz", ".sd.gz")


def _records(text: str) -> list[tuple[int, str]]:
    """(first line number, record text) for each record."""
    out, start, buf = [], 1, []
    for k, line in enumerate(text.splitlines(), start=1):
        if line.rstrip() == "$$$$":
            out.append((start, "\n".join(buf) + "\n$$$$\n"))
            start, buf = k + 1, []
        else:
            buf.append(line)
    if any(b.strip() for b in buf):
        out.append((start, "\n".join(buf) + "\n$$$$\n"))
    return out


def read(
    path: Any,
    conformer: bool | None = None,
    on_error: str = "raise",
    encoder: CategoryEncoder | None = None,
    n_graphs: int | None = None,
) -> GraphSet:
    """Read an SDF file (see the module docstring).

    Parameters
    ----------
    path : str or os.PathLike
        The file (plain or gzip).
    conformer : bool or None
        Passed to :meth:`mgkflow.Graph.from_rdkit` (None: use 3-D coordinates only).
    on_error : {"raise", "skip"}
        Unreadable record: raise FileFormatError, or skip it (listed in ``GraphSet.skipped``).
    encoder : CategoryEncoder, optional
        Carried into the result (molecule labels are numeric already).
    n_graphs : int, optional
        Stop after this many molecules.

    Returns
    -------
    GraphSet
    """
    conformer = check_optional_flag("conformer", conformer)
    encoder = check_encoder(encoder)
    Chem, p = open_molecule_file(path, "SDF file", on_error)
    records = _records(read_text(p, "SDF file"))
    if not records:
        raise FileFormatError("SDF file has no molecules (empty)", path=p)
    out = MoleculeGraphs(p, "SDF file", on_error, n_graphs)
    for number, (lineno, block) in enumerate(records, start=1):
        if out.full():
            break
        supplier = Chem.SDMolSupplier()
        supplier.SetData(block)
        mol = supplier[0] if len(supplier) else None
        unreadable = f"record {number}: RDKit could not read the molecule"
        arrays = out.arrays(mol, lineno, unreadable, conformer, prefix=f"record {number}: ")
        if arrays is None:
            continue
        title = mol.GetProp("_Name").strip() if mol.HasProp("_Name") else ""
        ident = title or f"{p.name.split('.')[0]}-{number}"
        out.append(arrays, ident, {k: mol.GetProp(k) for k in mol.GetPropNames()})
    return out.result(NAME, encoder)
