"""SMILES files: one molecule per line, optional name and property columns (needs RDKit).

Format
------
- One record per line; blank lines and lines starting with ``#`` are skipped.
  The file may be gzip-compressed.
- Columns are separated by commas, tabs or whitespace: by default the first
  data line decides (a comma makes it CSV, with quoting; else a tab; else runs of
  whitespace). Names containing spaces need comma or tab separation.
- Header: by default the first line is a header when one of its fields is
  named like a SMILES column (any case: ``smiles``, ``smi``, ``canonical_smiles``,
  ``isomeric_smiles``, ``structure``, or any name containing ``smiles``), or
  when none of its fields is valid SMILES but a field of the next line is.
  Naming ``smiles_column`` or ``id_column`` by text implies a header.
- The SMILES column is ``smiles_column``, else the header's SMILES-named column,
  else (a header without one) the first column whose values on the first data
  lines all parse; a header with no such column is an error listing the columns
  and naming ``smiles_column=`` (CLI ``--smiles-column``). Without a header it is
  the first column. The id column is the header's
  ``name``/``id``/``title``/``chembl_id`` column, else (no header) the second
  column. Every other column is a property (``column_N`` without a header, N
  1-based). A line with a different number of fields than the header is an error.
- A SMILES longer than ``max_length`` characters (default
  :data:`MAX_SMILES_LENGTH`, 5,000; the largest ChEMBL molecules take about
  1,000) is an error naming file and line (or skipped with ``on_error="skip"``):
  RDKit would take minutes or hang on it.
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
from pathlib import Path
from typing import Any

from ..errors import FileFormatError, ParameterError, ParameterTypeError
from ._common import CategoryEncoder, GraphSet, check_encoder, check_n_graphs, check_optional_flag, read_text
from ._molfiles import MoleculeGraphs, open_molecule_file

__all__ = ["read", "read_frame", "NAME", "EXTENSIONS", "MAX_SMILES_LENGTH"]

NAME = "smiles"
EXTENSIONS = (".smi", ".smiles", ".ism", ".can", ".csv", ".tsv")
#: Longest SMILES read (characters); longer ones are a FileFormatError (RDKit may hang on them).
MAX_SMILES_LENGTH = 5000
_SMILES_NAMES = {"smiles", "smi", "canonical_smiles", "isomeric_smiles", "structure"}
_ID_NAMES = {"name", "id", "title", "chembl_id", "mol_id", "molecule", "compound"}
#: Longest field of a header line (a longer first field is data).
_MAX_HEADER_FIELD = 200
#: Data lines whose values decide which column holds SMILES when the header names none.
_PROBE_ROWS = 5


def _split(line: str, delimiter: str | None) -> list[str]:
    if delimiter is None:
        return line.split()
    if delimiter == ",":
        return next(csv.reader(io.StringIO(line)), [])
    return [f.strip() for f in line.split(delimiter)]


def _parses(Chem: Any, text: str, max_length: int = MAX_SMILES_LENGTH) -> bool:
    text = text.strip()
    return bool(text) and len(text) <= max_length and Chem.MolFromSmiles(text) is not None


def _quiet_parses(Chem: Any, text: str, max_length: int = MAX_SMILES_LENGTH) -> bool:
    """:func:`_parses` without RDKit's error lines (header and column detection try non-SMILES text).
    RDKit's log stays off, as :func:`~mgkflow.io.rdkit.require_rdkit` leaves it: a bad line is
    reported once, by an mgkflow error or warning naming the file and line."""
    from rdkit import RDLogger

    RDLogger.DisableLog("rdApp.*")
    return _parses(Chem, text, max_length)


def _smiles_named(name: str) -> bool:
    low = name.strip().lower()
    return low in _SMILES_NAMES or "smiles" in low


def _check_column_spec(name: str, spec: Any) -> None:
    if spec is not None and (isinstance(spec, bool) or not isinstance(spec, (str, int))):
        raise ParameterTypeError(f"{name} must be a column name (str) or a 0-based index (int), got {spec!r}")


def _check_max_length(max_length: Any) -> int:
    if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 1:
        raise ParameterError(f"max_length must be a whole number >= 1 (characters), got {max_length!r}")
    return max_length


def _detect_header(Chem: Any, rows: list[tuple[int, list[str]]], max_length: int) -> bool:
    """Whether the first row is a header.

    It is when a field is named like a SMILES column, or when none of its fields is SMILES while
    the next row has one. A first row of several columns is taken for a header too when no field
    of the first rows is SMILES at all, so that the error names the columns.
    """
    head = rows[0][1]
    if any(_smiles_named(f) for f in head):
        return True
    if any(len(f) > min(max_length, _MAX_HEADER_FIELD) for f in head):
        return False  # no column name is that long: a (too long) molecule
    if len(rows) < 2 or any(_quiet_parses(Chem, f, max_length) for f in head):
        return False
    if any(_quiet_parses(Chem, f, max_length) for f in rows[1][1]):
        return True
    return len(head) > 1 and not any(
        _quiet_parses(Chem, f, max_length) for _, r in rows[2:_PROBE_ROWS + 1] for f in r
    )


def _smiles_column_of(
    Chem: Any, names: list[str], rows: list[tuple[int, list[str]]], where: Path | str, max_length: int
) -> int:
    """The column of a header that names no SMILES column: the first whose values all parse, else an error."""
    named = [i for i, c in enumerate(names) if _smiles_named(c)]
    if named:
        return named[0]
    probe = [r for _, r in rows[:_PROBE_ROWS]]
    values = [[r[i] for r in probe if i < len(r) and r[i].strip()] for i in range(len(names))]
    if values and any(_quiet_parses(Chem, v, max_length) for v in values[0]):
        return 0  # the first column, as without a header
    for i, vals in enumerate(values):
        if vals and all(_quiet_parses(Chem, v, max_length) for v in vals):
            return i
    raise FileFormatError(
        f"no SMILES column: the header's columns are {names} and none is named like 'smiles' or holds SMILES "
        "on its first lines; pass smiles_column='COLUMN' (CLI: --smiles-column COLUMN)", path=where,
    )


def _columns(
    Chem: Any, names: list[str] | None, width: int, rows: list[tuple[int, list[str]]], where: Path | str,
    smiles_column: str | int | None, id_column: str | int | None, max_length: int,
) -> tuple[int, int | None]:
    """(SMILES column, id column or None) as 0-based indices."""

    def column(spec: Any, what: str) -> int:
        if isinstance(spec, int):
            if not 0 <= spec < max(width, 1):
                raise FileFormatError(f"{what}={spec}: column {spec} does not exist ({width} columns)", path=where)
            return spec
        if not names or spec not in names:
            raise FileFormatError(f"{what}: no column named {spec!r} (columns: {names})", path=where)
        return names.index(spec)

    if smiles_column is not None:
        s_col = column(smiles_column, "smiles_column")
    elif names:
        s_col = _smiles_column_of(Chem, names, rows, where, max_length)
    else:
        s_col = 0
    if id_column is not None:
        i_col = column(id_column, "id_column")
    elif names:
        hit = [i for i, c in enumerate(names) if c.strip().lower() in _ID_NAMES and i != s_col]
        i_col = hit[0] if hit else None
    else:
        i_col = 1 if width > 1 else None
    return s_col, i_col


def _read_rows(
    Chem: Any, out: MoleculeGraphs, rows: list[tuple[int, list[str]]], names: list[str] | None, col_names: list[str],
    s_col: int, i_col: int | None, max_length: int,
) -> None:
    """Parse every row into ``out`` (stops once ``out`` is full)."""
    for lineno, fields in rows:
        if out.full():
            break
        if names is not None and len(fields) != len(names):
            raise FileFormatError(
                f"{len(fields)} fields but the header has {len(names)} ({names})", path=out.path, line=lineno
            )
        if s_col >= len(fields):
            raise FileFormatError(f"no SMILES (column {s_col + 1} missing)", path=out.path, line=lineno)
        smi = fields[s_col].strip()
        if len(smi) > max_length:
            msg = (f"SMILES of {len(smi)} characters is longer than the maximum {max_length} "
                   f"(max_length=...; starts {smi[:20]!r})")
            if out.on_error == "skip":
                out.skipped.append((lineno, msg))
                continue
            raise FileFormatError(msg, path=out.path, line=lineno)
        mol = Chem.MolFromSmiles(smi) if smi else None
        arrays = out.arrays(mol, lineno, f"invalid SMILES {smi!r}: RDKit could not parse it", conformer=False)
        if arrays is None:
            continue
        ident = fields[i_col].strip() if i_col is not None and i_col < len(fields) else smi
        out.append(
            arrays, ident,
            {col_names[i]: v.strip() for i, v in enumerate(fields) if i not in (s_col, i_col) and i < len(col_names)},
        )


def read(
    path: Any,
    delimiter: str | None = "auto",
    header: bool | None = None,
    smiles_column: str | int | None = None,
    id_column: str | int | None = None,
    on_error: str = "raise",
    encoder: CategoryEncoder | None = None,
    n_graphs: int | None = None,
    max_length: int = MAX_SMILES_LENGTH,
) -> GraphSet:
    """Read a SMILES file (see the module docstring for the format).

    Parameters
    ----------
    path : str or os.PathLike
        The file (plain or gzip).
    delimiter : {"auto", ",", "\\t", None}
        Column separator; None means runs of whitespace; "auto" decides from the first line.
    header : bool or None
        Whether the first data line is a header (None: detect; a ``smiles_column`` or
        ``id_column`` given by name implies one).
    smiles_column, id_column : str or int, optional
        Column (header name or 0-based index) of the SMILES and of the ids.
    on_error : {"raise", "skip"}
        A line RDKit cannot parse (or a SMILES over ``max_length``) raises
        :class:`~mgkflow.errors.FileFormatError` (naming file and line), or is skipped
        and listed in ``GraphSet.skipped``.
    encoder : CategoryEncoder, optional
        Carried into the result (molecule labels are numeric already).
    n_graphs : int, optional
        Stop after this many molecules.
    max_length : int
        Longest SMILES read, in characters (default :data:`MAX_SMILES_LENGTH`).

    Returns
    -------
    GraphSet

    Examples
    --------
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "m.csv"
    >>> _ = path.write_text("name,smi_string\\nethanol,CCO\\n")
    >>> read(path, smiles_column="smi_string").ids  # doctest: +SKIP
    ['ethanol']
    """
    for name, spec in (("smiles_column", smiles_column), ("id_column", id_column)):
        _check_column_spec(name, spec)
    max_length = _check_max_length(max_length)
    check_n_graphs(n_graphs)
    header = check_optional_flag("header", header)
    encoder = check_encoder(encoder)
    if delimiter is not None and not isinstance(delimiter, str):
        raise ParameterTypeError(
            f"delimiter must be 'auto', a separator string or None (whitespace), got {delimiter!r}"
        )
    if delimiter == "":
        raise ParameterError("delimiter must not be empty: give a separator such as ',' or '\\t', 'auto' or None")
    named = isinstance(smiles_column, str) or isinstance(id_column, str)
    if header is False and named:
        raise ParameterError(
            "smiles_column/id_column given by name need a header line; pass header=True (or None), "
            "or give the column's 0-based index"
        )
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
    if header is None:
        header = named or _detect_header(Chem, rows, max_length)
    if header:
        names = [f.strip() for f in rows[0][1]]
        rows = rows[1:]
    width = len(names) if names else max(len(r) for _, r in rows) if rows else 0
    s_col, i_col = _columns(Chem, names, width, rows, p, smiles_column, id_column, max_length)
    col_names = names or [f"column_{i + 1}" for i in range(width)]
    out = MoleculeGraphs(p, "SMILES file", on_error, n_graphs)
    _read_rows(Chem, out, rows, names, col_names, s_col, i_col, max_length)
    return out.result(NAME, encoder)


def read_frame(
    frame: Any,
    smiles_column: str | int | None = None,
    id_column: str | int | None = None,
    on_error: str = "raise",
    encoder: CategoryEncoder | None = None,
    n_graphs: int | None = None,
    max_length: int = MAX_SMILES_LENGTH,
) -> GraphSet:
    """Read the molecules of a pandas DataFrame like a SMILES CSV file with a header.

    The SMILES column is ``smiles_column`` (a column name or 0-based position), else the
    column named like ``smiles``, else the first whose first values parse; ids come from
    ``id_column``, else a ``name``/``id``/... column, else the index when it is not the
    default range, else the SMILES. The other columns are properties; errors name
    the row as ``line`` (1-based, as if the frame were a file with a header line).

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"smiles": ["CCO", "CCN"], "y": [1.0, 2.0]}, index=["a", "b"])
    >>> read_frame(df).ids  # doctest: +SKIP
    ['a', 'b']
    """
    import pandas as pd

    for name, spec in (("smiles_column", smiles_column), ("id_column", id_column)):
        _check_column_spec(name, spec)
    max_length = _check_max_length(max_length)
    check_n_graphs(n_graphs)
    encoder = check_encoder(encoder)
    Chem, _ = open_molecule_file(None, "DataFrame", on_error, check=False)
    names = [str(c) for c in frame.columns]
    where = "<DataFrame>"
    text = frame.astype(object).where(frame.notna(), "")
    rows = [(k + 2, [str(v) for v in r]) for k, r in enumerate(text.itertuples(index=False, name=None))]
    if not rows:
        raise FileFormatError("the DataFrame has no rows", path=where)
    spec = smiles_column if not isinstance(smiles_column, str) or smiles_column in names else None
    if isinstance(smiles_column, str) and spec is None:
        raise ParameterError(f"smiles_column: no column named {smiles_column!r} (columns: {names})")
    try:
        s_col, i_col = _columns(Chem, names, len(names), rows, where, spec, id_column, max_length)
    except FileFormatError as exc:
        raise ParameterError(str(exc).replace(f"{where}: ", "")) from None
    use_index = i_col is None and not isinstance(frame.index, pd.RangeIndex)
    index = [str(v) for v in frame.index]
    if use_index:
        rows = [(k, [*r, index[k - 2]]) for k, r in rows]
        i_col = len(names)
        names = [*names, str(frame.index.name or "index")]
    out = MoleculeGraphs(Path(where), "DataFrame", on_error, n_graphs)
    _read_rows(Chem, out, rows, names, names, s_col, i_col, max_length)
    gs = out.result(NAME, encoder)
    gs.source = where
    return gs

