"""SMILES files: one molecule per line, optional name and property columns (needs RDKit).

Format
------
- One record per line; blank lines and lines starting with ``#`` are skipped.
  The file may be gzip-compressed.
- Columns are separated by commas, tabs or whitespace: by default the first
  data line decides (a comma makes it CSV, with quoting; else a tab; else runs of
  whitespace). Names containing spaces need comma or tab separation.
- Header: by default the first line is a header when one of its fields is
  ``smiles`` (any case, also ``smi``, ``canonical_smiles``, ``isomeric_smiles``)
  or when its first field is not valid SMILES but the next line's is.
- The SMILES column is the header's SMILES column, else the first one. The id
  column is the header's ``name``/``id``/``title``/``chembl_id`` column, else
  (no header) the second column. Every other column is a property
  (``column_N`` without a header, N 1-based). A line with a different number of
  fields than the header is an error.
- Graphs are :meth:`mgkflow.Graph.from_rdkit` graphs with ``extended`` fields
  (see :mod:`mgkflow.io.rdkit`); ids are the names, else the SMILES strings.

Examples
--------
>>> import tempfile, pathlib
>>> path = pathlib.Path(tempfile.mkdtemp()) / "mols.smi"
>>> _ = path.write_text("smiles,name,logp\\nCCO,ethanol,-0.31\\nc1ccccc1,benzene,2.13\\n")
>>> gs = read(path)  # doctest: +SKIP
>>> gs.ids, gs.properties["logp"].tolist()  # doctest: +SKIP
(['ethanol', 'benzene'], [-0.31, 2.13])
"""

from __future__ import annotations

import csv
import io
from typing import Any

from ..errors import FileFormatError
from ._common import CategoryEncoder, GraphSet, read_text
from ._molfiles import MoleculeGraphs, open_molecule_file

__all__ = ["read", "NAME", "EXTENSIONS"]

NAME = "smiles"
EXTENSIONS = (".smi", ".smiles", ".ism", ".can", ".csv", ".tsv")
_SMILES_NAMES = {"smiles", "smi", "canonical_smiles", "isomeric_smiles"}
_ID_NAMES = {"name", "id", "title", "chembl_id", "mol_id", "molecule", "compound"}


def _split(line: str, delimiter: str | None) -> list[str]:
    if delimiter is None:
        return line.split()
    if delimiter == ",":
        return next(csv.reader(io.StringIO(line)), [])
    return [f.strip() for f in line.split(delimiter)]


def _parses(Chem: Any, text: str) -> bool:
    return bool(text) and Chem.MolFromSmiles(text) is not None


def read(
    path: Any,
    delimiter: str | None = "auto",
    header: bool | None = None,
    smiles_column: str | int | None = None,
    id_column: str | int | None = None,
    on_error: str = "raise",
    encoder: CategoryEncoder | None = None,
    n_graphs: int | None = None,
) -> GraphSet:
    """Read a SMILES file (see the module docstring for the format).

    Parameters
    ----------
    path : str or os.PathLike
        The file (plain or gzip).
    delimiter : {"auto", ",", "\\\\t", None}
        Column separator; None means runs of whitespace; "auto" decides from the first line.
    header : bool or None
        Whether the first data line is a header (None: detect).
    smiles_column, id_column : str or int, optional
        Column (header name or 0-based index) of the SMILES and of the ids.
    on_error : {"raise", "skip"}
        A line RDKit cannot parse raises :class:`~mgkflow.errors.FileFormatError`
        (naming file and line), or is skipped and listed in ``GraphSet.skipped``.
    encoder : CategoryEncoder, optional
        Carried into the result (molecule labels are numeric already).
    n_graphs : int, optional
        Stop after this many molecules.

    Returns
    -------
    GraphSet
    """
    Chem, p = open_molecule_file(path, "SMILES file", on_error)
    lines = [
        (k, ln.rstrip("\r\n")) for k, ln in enumerate(read_text(p, "SMILES file").splitlines(), start=1)
        if ln.strip() and not ln.lstrip().startswith("#")
    ]
    if not lines:
        raise FileFormatError("SMILES file has no molecules (empty)", path=p)
    first = lines[0][1]
    if delimiter == "auto":
        delimiter = "," if "," in first else ("\t" if "\t" in first else None)
    rows = [(k, _split(ln, delimiter)) for k, ln in lines]
    names: list[str] | None = None
    head = [f.strip() for f in rows[0][1]]
    if header is None:
        header = any(f.lower() in _SMILES_NAMES for f in head) or (
            len(rows) > 1 and not _parses(Chem, head[0] if head else "") and _parses(Chem, rows[1][1][0])
        )
    if header:
        names = head
        rows = rows[1:]
    width = len(names) if names else max(len(r) for _, r in rows) if rows else 0

    def column(spec: Any, candidates: set[str], default: int | None) -> int | None:
        if spec is None:
            if names:
                hit = [i for i, c in enumerate(names) if c.lower() in candidates]
                return hit[0] if hit else default
            return default
        if isinstance(spec, int):
            if not 0 <= spec < max(width, 1):
                raise FileFormatError(f"column {spec} does not exist ({width} columns)", path=p)
            return spec
        if not names or spec not in names:
            raise FileFormatError(f"no column named {spec!r} (header: {names})", path=p)
        return names.index(spec)

    s_col = column(smiles_column, _SMILES_NAMES, 0)
    i_col = column(id_column, _ID_NAMES, None if names else (1 if width > 1 else None))
    col_names = names or [f"column_{i + 1}" for i in range(width)]
    out = MoleculeGraphs(p, "SMILES file", on_error, n_graphs)
    for lineno, fields in rows:
        if out.full():
            break
        if names is not None and len(fields) != len(names):
            raise FileFormatError(
                f"{len(fields)} fields but the header has {len(names)} ({names})", path=p, line=lineno
            )
        if s_col >= len(fields):
            raise FileFormatError(f"no SMILES (column {s_col + 1} missing)", path=p, line=lineno)
        smi = fields[s_col].strip()
        mol = Chem.MolFromSmiles(smi) if smi else None
        arrays = out.arrays(mol, lineno, f"invalid SMILES {smi!r}: RDKit could not parse it", conformer=False)
        if arrays is None:
            continue
        ident = fields[i_col].strip() if i_col is not None and i_col < len(fields) else smi
        out.append(
            arrays, ident,
            {col_names[i]: v.strip() for i, v in enumerate(fields) if i not in (s_col, i_col) and i < len(col_names)},
        )
    return out.result(NAME, encoder)
