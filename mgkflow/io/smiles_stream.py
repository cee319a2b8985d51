"""SMILES tables read line by line, never whole: :func:`open_smiles_table` (needs RDKit).

The layout rules are those of :mod:`mgkflow.io.smiles` (plain or gzip file; blank lines and
``#`` lines skipped; comma, tab or whitespace columns decided by the first line; a header
detected, or implied by a column given by name; the SMILES column ``smiles_column``, else the
header's SMILES-named column, else the first whose first values parse; the id column a
``name``/``id``/... column, else without a header the second one). Only the first few lines
are read to decide them; the records then come one at a time (:meth:`SmilesTable.records`) or in
chunks (:meth:`SmilesTable.chunks`), so a file of millions of molecules takes constant memory.

Unlike :func:`mgkflow.io.smiles.read`, a record is not parsed by RDKit here, and a malformed
line (a field count other than the header's, no SMILES field, a SMILES over ``max_length``
characters) does not stop the reading: its :attr:`SmilesRecord.error` says what is wrong, and
the caller decides (``mgkflow predict`` writes it as that row's error; ``mgkflow fit`` stops or
skips).

Examples
--------
>>> import tempfile, pathlib
>>> path = pathlib.Path(tempfile.mkdtemp()) / "m.csv"
>>> _ = path.write_text("name,smiles,y\\nethanol,CCO,1.5\\nbenzene,c1ccccc1,2.0\\nbad,C1CC,3\\n")
>>> table = open_smiles_table(path)  # doctest: +SKIP
>>> table.columns, table.smiles_name, table.id_name  # doctest: +SKIP
(['name', 'smiles', 'y'], 'smiles', 'name')
>>> [(r.line, r.smiles, r.id) for r in table.records()]  # doctest: +SKIP
[(2, 'CCO', 'ethanol'), (3, 'c1ccccc1', 'benzene'), (4, 'C1CC', 'bad')]
>>> [len(c) for c in table.chunks(2)]  # doctest: +SKIP
[2, 1]
"""

from __future__ import annotations

import gzip
import io
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from ..errors import FileFormatError, ParameterError, ParameterTypeError
from ._common import check_optional_flag, check_path
from .smiles import (
    _PROBE_ROWS,
    MAX_SMILES_LENGTH,
    _check_column_spec,
    _check_max_length,
    _columns,
    _detect_header,
    _split,
)

__all__ = ["SmilesRecord", "SmilesTable", "open_smiles_table"]

_WHAT = "SMILES file"


@dataclass(frozen=True)
class SmilesRecord:
    """One data line of a SMILES table.

    Attributes
    ----------
    line : int
        1-based line number in the (decompressed) file.
    smiles : str
        The SMILES field, stripped ("" where the line has none).
    id : str or None
        The id field, or None when the table has no id column.
    fields : tuple of str
        Every field of the line.
    error : str or None
        What is wrong with the line itself (field count, missing or too long SMILES), else None.
    """

    line: int
    smiles: str
    id: str | None
    fields: tuple[str, ...]
    error: str | None = None


def _open_text(path: Path) -> TextIO:
    """The file as text (gzip by its magic bytes), UTF-8; FileFormatError for a binary or unreadable file."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(65536)
        raw: Any = gzip.open(path, "rb") if head[:2] == b"\x1f\x8b" else open(path, "rb")  # noqa: SIM115
    except OSError as exc:
        raise FileFormatError(f"{_WHAT}: cannot read: {exc.strerror or exc}", path=path) from None
    if head[:2] == b"\x1f\x8b":
        try:
            head = raw.peek(65536)[:65536]
        except (OSError, EOFError) as exc:
            raw.close()
            raise FileFormatError(f"{_WHAT}: looks gzipped but cannot be decompressed: {exc}", path=path) from None
    if b"\x00" in head:
        raw.close()
        raise FileFormatError(f"{_WHAT}: not a text file (NUL bytes)", path=path)
    return io.TextIOWrapper(raw, encoding="utf-8", newline=None)


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, text) of the non-blank, non-comment lines, read lazily."""
    with _open_text(path) as fh:
        k = 0
        try:
            for k, text in enumerate(fh, start=1):  # noqa: B007 - k names the line of a decoding error
                text = text.rstrip("\r\n")
                if text.strip() and not text.lstrip().startswith("#"):
                    yield k, text
        except UnicodeDecodeError as exc:
            raise FileFormatError(f"{_WHAT}: not UTF-8 text ({exc.reason})", path=path, line=k + 1) from None
        except (OSError, EOFError) as exc:  # a truncated gzip stream
            raise FileFormatError(f"{_WHAT}: cannot read past line {k}: {exc}", path=path) from None


class SmilesTable:
    """A SMILES file whose layout is known, read record by record (see :func:`open_smiles_table`).

    Attributes
    ----------
    path : Path
    delimiter : str or None
        ``","``, ``"\\t"`` or None (runs of whitespace).
    columns : list of str or None
        The header's column names, or None without a header.
    smiles_index, id_index : int, int or None
        0-based columns of the SMILES and of the ids.
    max_length : int
        Longest SMILES accepted (a longer one is that record's error).
    """

    def __init__(
        self, path: Path, delimiter: str | None, columns: list[str] | None, smiles_index: int,
        id_index: int | None, max_length: int,
    ) -> None:  # fmt: skip
        self.path = path
        self.delimiter = delimiter
        self.columns = columns
        self.smiles_index = smiles_index
        self.id_index = id_index
        self.max_length = max_length

    def __repr__(self) -> str:
        return (f"SmilesTable({str(self.path)!r}, columns={self.columns}, smiles={self.smiles_name!r}, "
                f"id={self.id_name!r})")  # fmt: skip

    @property
    def smiles_name(self) -> str:
        """The SMILES column's name (``column_N``, 1-based, without a header)."""
        return self.columns[self.smiles_index] if self.columns else f"column_{self.smiles_index + 1}"

    @property
    def id_name(self) -> str | None:
        """The id column's name, or None when there is no id column."""
        if self.id_index is None:
            return None
        return self.columns[self.id_index] if self.columns else f"column_{self.id_index + 1}"

    def column(self, name: str, option: str = "column") -> int:
        """0-based index of the header's column ``name``; FileFormatError listing the columns if there is none.

        ``option`` names the argument in the message (``"--target"``).
        """
        if not self.columns:
            raise FileFormatError(f"{option} {name!r}: the file has no header line naming its columns", path=self.path)
        if name not in self.columns:
            raise FileFormatError(f"{option}: no column named {name!r} (columns: {self.columns})", path=self.path)
        return self.columns.index(name)

    def records(self) -> Iterator[SmilesRecord]:
        """Every data record, in file order (the header line left out)."""
        lines = _lines(self.path)
        if self.columns is not None:
            next(lines, None)
        width = len(self.columns) if self.columns is not None else None
        for lineno, text in lines:
            fields = tuple(_split(text, self.delimiter))
            error = None
            smiles = fields[self.smiles_index].strip() if self.smiles_index < len(fields) else ""
            if width is not None and len(fields) != width:
                error = f"{len(fields)} fields but the header has {width} ({self.columns})"
            elif self.smiles_index >= len(fields) or not smiles:
                error = f"no SMILES (column {self.smiles_index + 1} is empty or missing)"
            elif len(smiles) > self.max_length:
                error = (f"SMILES of {len(smiles)} characters is longer than the maximum {self.max_length} "
                         f"(starts {smiles[:20]!r})")  # fmt: skip
            ident = None
            if self.id_index is not None:
                ident = fields[self.id_index].strip() if self.id_index < len(fields) else ""
            yield SmilesRecord(lineno, smiles, ident, fields, error)

    def chunks(self, size: int) -> Iterator[list[SmilesRecord]]:
        """The records in lists of ``size`` (the last may be shorter)."""
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ParameterError(f"chunk size must be a whole number >= 1, got {size!r}")
        chunk: list[SmilesRecord] = []
        for rec in self.records():
            chunk.append(rec)
            if len(chunk) == size:
                yield chunk
                chunk = []
        if chunk:
            yield chunk

    def count(self) -> int:
        """How many data records the file has (reads it once, without splitting the lines)."""
        n = sum(1 for _ in _lines(self.path))
        return n - (1 if self.columns is not None else 0)


def open_smiles_table(
    path: str | os.PathLike,
    smiles_column: str | int | None = None,
    id_column: str | int | None = None,
    header: bool | None = None,
    delimiter: str | None = "auto",
    max_length: int = MAX_SMILES_LENGTH,
) -> SmilesTable:
    """Decide the layout of a SMILES file from its first lines; the records are read later, lazily.

    Parameters
    ----------
    path : str or os.PathLike
        A SMILES or CSV file, plain or gzip.
    smiles_column, id_column : str or int, optional
        Column (header name, or 0-based index) of the SMILES and of the ids; a name implies a header.
    header : bool or None
        Whether the first data line is a header (None: detect, as :func:`mgkflow.io.smiles.read`).
    delimiter : {"auto", ",", "\\t", None}
        Column separator; None means runs of whitespace; "auto" decides from the first line.
    max_length : int
        Longest SMILES accepted, in characters.

    Returns
    -------
    SmilesTable

    Raises
    ------
    mgkflow.errors.FileFormatError
        No such file, an empty or binary one, a named column that does not exist, a header
        with no SMILES column (the message lists the columns and names ``smiles_column``).
    mgkflow.errors.ParameterError, mgkflow.errors.ParameterTypeError
        Bad arguments.
    """
    from .rdkit import require_rdkit

    for name, spec in (("smiles_column", smiles_column), ("id_column", id_column)):
        _check_column_spec(name, spec)
    max_length = _check_max_length(max_length)
    header = check_optional_flag("header", header)
    if delimiter is not None and not isinstance(delimiter, str):
        raise ParameterTypeError(f"delimiter must be 'auto', a separator string or None, got {delimiter!r}")
    if delimiter == "":
        raise ParameterError("delimiter must not be empty: give a separator such as ',' or '\\t', 'auto' or None")
    named = isinstance(smiles_column, str) or isinstance(id_column, str)
    if header is False and named:
        raise ParameterError("smiles_column/id_column given by name need a header line; pass header=True (or None)")
    p = check_path(path, _WHAT)
    Chem = require_rdkit()
    first: list[tuple[int, str]] = []
    for item in _lines(p):
        first.append(item)
        if len(first) > _PROBE_ROWS + 1:
            break
    if not first:
        raise FileFormatError(f"{_WHAT} has no molecules (empty)", path=p)
    if delimiter == "auto":
        text = first[0][1]
        delimiter = "," if "," in text else ("\t" if "\t" in text else None)
    rows = [(k, _split(t, delimiter)) for k, t in first]
    if header is None:
        header = named or _detect_header(Chem, rows, max_length)
    names = [f.strip() for f in rows[0][1]] if header else None
    data = rows[1:] if header else rows
    width = len(names) if names else max(len(r) for _, r in data) if data else 0
    s_col, i_col = _columns(Chem, names, width, data, p, smiles_column, id_column, max_length)
    return SmilesTable(p, delimiter, names, s_col, i_col, max_length)
