"""Shared pieces of the file readers: the GraphSet record and the categorical-label encoder."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import FileFormatError, MgkflowError, ParameterError, ParameterTypeError
from ..graph import Graph
from ._args import (
    as_path,
    check_attribute_name,
    check_attribute_names,
    check_flag,
    check_optional_flag,
    is_frame,
)

__all__ = [
    "GraphSet", "CategoryEncoder", "DroppedLabelWarning", "PathNotFoundError", "is_text_value", "parse_fields",
    "properties_frame", "check_path", "read_text", "check_n_graphs", "check_choice", "as_path", "check_flag",
    "check_optional_flag", "check_encoder", "check_attribute_name", "check_attribute_names",
    "UnknownCategoryError",
]


class PathNotFoundError(MgkflowError, FileNotFoundError):
    """A file or store to read does not exist (an mgkflow error that ``except FileNotFoundError`` also catches).

    Examples
    --------
    >>> err = PathNotFoundError("K.zarr: no such Gram store")
    >>> isinstance(err, FileNotFoundError), isinstance(err, MgkflowError)
    (True, True)
    """


class DroppedLabelWarning(MgkflowError, UserWarning):
    """A node or edge attribute of a file is not read as a label field, because some nodes (edges) lack it.

    A ``UserWarning`` (and an :class:`~mgkflow.errors.MgkflowError`, so that run as an error
    with ``-W error`` it is one of mgkflow's).

    Label fields need a value on every node (edge) of every graph; an attribute present on only
    some is left out of the graphs when no ``node_labels`` / ``edge_labels`` are named. The
    message names the attribute, how many nodes (edges) lack it, and the file of the first one.
    Name it explicitly to get an error pointing at the node that lacks it instead.
    """


def check_n_graphs(n_graphs: Any) -> int | None:
    """``n_graphs`` checked: None or an integer >= 1 (a bool, float or text is refused).

    Examples
    --------
    >>> check_n_graphs(3), check_n_graphs(None)
    (3, None)
    >>> check_n_graphs(1.5)
    Traceback (most recent call last):
    ...
    mgkflow.errors.ParameterTypeError: n_graphs must be a whole number >= 1 (or None for all), got float 1.5
    """
    if n_graphs is None:
        return None
    if isinstance(n_graphs, bool) or not isinstance(n_graphs, (int, np.integer)):
        raise ParameterTypeError(
            f"n_graphs must be a whole number >= 1 (or None for all), got {type(n_graphs).__name__} {n_graphs!r}"
        )
    if n_graphs < 1:
        raise ParameterError(f"n_graphs must be >= 1 (or None for all), got {int(n_graphs)}")
    return int(n_graphs)


def check_choice(name: str, value: Any, choices: Sequence[str]) -> str:
    """``value`` if it is one of ``choices``, else a :class:`~mgkflow.errors.ParameterError` naming ``name``.

    Examples
    --------
    >>> check_choice("on_error", "skip", ("raise", "skip"))
    'skip'
    >>> check_choice("on_error", "ignore", ("raise", "skip"))
    Traceback (most recent call last):
    ...
    mgkflow.errors.ParameterError: on_error must be one of 'raise', 'skip'; got 'ignore'
    """
    if not isinstance(value, str) or value not in choices:
        raise ParameterError(f"{name} must be one of {', '.join(map(repr, choices))}; got {value!r}")
    return value


def check_encoder(encoder: Any) -> CategoryEncoder:
    """``encoder`` if it is a :class:`CategoryEncoder`, a new one for None, else a
    :class:`~mgkflow.errors.ParameterTypeError`.

    Examples
    --------
    >>> check_encoder(None)
    CategoryEncoder(tables={})
    >>> check_encoder({})
    Traceback (most recent call last):
    ...
    mgkflow.errors.ParameterTypeError: encoder must be a CategoryEncoder (a GraphSet's .encoder) or None, got dict {}
    """
    if encoder is None:
        return CategoryEncoder()
    if not isinstance(encoder, CategoryEncoder):
        raise ParameterTypeError(
            "encoder must be a CategoryEncoder (a GraphSet's .encoder) or None, "
            f"got {type(encoder).__name__} {encoder!r:.60}"
        )
    return encoder


def is_text_value(v: Any) -> bool:
    """True for str and bytes values (categorical labels to encode)."""
    return isinstance(v, (str, bytes, np.str_, np.bytes_))


@dataclass
class CategoryEncoder:
    """Integer codes for categorical (text) label values, one table per label field.

    A reader fits the encoder on *all* graphs of one call before building any
    graph, so one value gets one code across the whole call. Within a field,
    new values get the next free codes in sorted order (codes start at 0), so
    the codes do not depend on the order of graphs. Pass the same encoder to a
    later call (``encoder=gs.encoder``) to keep the codes of a training set for a
    test set: known values keep their codes, unseen ones are appended.

    Tables are keyed ``"node:FIELD"`` and ``"edge:FIELD"``.

    Examples
    --------
    >>> enc = CategoryEncoder()
    >>> enc.fit("node:element", ["O", "C", "N", "C"])
    >>> enc.encode("node:element", ["C", "N", "O"]).tolist()
    [0, 1, 2]
    >>> enc.fit("node:element", ["Cl"])
    >>> enc.encode("node:element", ["Cl"]).tolist(), enc.decode("node:element", [3])
    ([3], ['Cl'])
    """

    tables: dict[str, dict[str, int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.tables = _check_tables(self.tables)

    def fit(self, key: str, values: Iterable[Any]) -> None:
        """Give every value not yet known a code (sorted order, after the existing codes)."""
        _check_key(key)
        if not isinstance(values, Iterable):
            raise ParameterTypeError(f"values must be an iterable of label values, got {type(values).__name__}")
        table = self.tables.setdefault(key, {})
        new = sorted({_text(v) for v in values} - set(table))
        for v in new:
            table[v] = len(table)

    def encode(self, key: str, values: Sequence[Any]) -> np.ndarray:
        """Codes of ``values`` (int64); every value must have been fitted
        (else :class:`UnknownCategoryError`, a ``KeyError`` too)."""
        _check_key(key)
        if not isinstance(values, Iterable):
            raise ParameterTypeError(f"values must be a sequence of label values, got {type(values).__name__}")
        table = self.tables.get(key, {})
        values = list(values)
        try:
            return np.fromiter((table[_text(v)] for v in values), dtype=np.int64, count=len(values))
        except KeyError as exc:
            raise UnknownCategoryError(f"{key}: value {exc.args[0]!r} was not fitted") from None

    def decode(self, key: str, codes: Iterable[int]) -> list[str]:
        """The values of ``codes`` (an unknown code is an :class:`UnknownCategoryError`, a ``KeyError`` too)."""
        _check_key(key)
        if not isinstance(codes, Iterable):
            raise ParameterTypeError(f"codes must be an iterable of integer codes, got {type(codes).__name__}")
        inverse = {c: v for v, c in self.tables.get(key, {}).items()}
        out = []
        for c in codes:
            if isinstance(c, bool) or not isinstance(c, (int, np.integer)):
                raise ParameterTypeError(f"{key}: codes must be integers, got {type(c).__name__} {c!r:.60}")
            if int(c) not in inverse:
                raise UnknownCategoryError(f"{key}: no value has code {int(c)}")
            out.append(inverse[int(c)])
        return out


class UnknownCategoryError(ParameterError, KeyError):
    """A value (or code) a :class:`CategoryEncoder` table does not know (a ``ParameterError``, and a
    ``KeyError`` as before)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


def _check_key(key: Any) -> None:
    if not isinstance(key, str):
        raise ParameterTypeError(
            f"key must be a table name like 'node:FIELD' (str), got {type(key).__name__} {key!r:.60}"
        )


def _check_tables(tables: Any) -> dict[str, dict[str, int]]:
    """``tables`` of :class:`CategoryEncoder` checked (None: none); a dict is kept as it is (shared)."""
    if tables is None:
        return {}
    if not isinstance(tables, Mapping):
        raise ParameterTypeError(
            "tables must be a dict {'node:FIELD': {value: code}} (or None), "
            f"got {type(tables).__name__} {tables!r:.60}"
        )
    for key, table in tables.items():
        _check_key(key)
        if not isinstance(table, Mapping):
            raise ParameterTypeError(
                f"tables[{key!r}] must be a dict {{value: code}}, got {type(table).__name__} {table!r:.60}"
            )
        for value, code in table.items():
            if not isinstance(value, str):
                raise ParameterTypeError(
                    f"tables[{key!r}]: values must be text, got {type(value).__name__} {value!r:.60}"
                )
            if isinstance(code, bool) or not isinstance(code, (int, np.integer)) or code < 0:
                raise ParameterError(f"tables[{key!r}][{value!r}]: codes must be integers >= 0, got {code!r:.60}")
    if isinstance(tables, dict) and all(isinstance(t, dict) for t in tables.values()):
        return tables
    return {k: dict(t) for k, t in tables.items()}


def _text(v: Any) -> str:
    if isinstance(v, (bytes, np.bytes_)):
        return bytes(v).decode("utf-8", "replace")
    return str(v)


@dataclass
class GraphSet:
    """Graphs read from a file or directory, with their identifiers and properties.

    Attributes
    ----------
    graphs : list of Graph
        The graphs, in file order.
    ids : list of str
        One identifier per graph (names/titles from the file, else positions);
        also each graph's ``title``.
    properties : pandas.DataFrame
        One row per graph (index: ``ids``): SMILES-file columns, SDF data fields,
        TU graph labels/attributes, GraphML graph attributes. Numeric columns are numeric.
    format : str
        The reader that produced the set ("smiles", "sdf", "graphml", "gml", "tu").
    source : str
        The path read.
    encoder : CategoryEncoder
        Codes given to text labels (see :class:`CategoryEncoder`).
    skipped : list of (int, str)
        Lines or records skipped with ``on_error="skip"``: (line or record number, reason).
    """

    graphs: list[Graph]
    ids: list[str]
    properties: Any
    format: str
    source: str
    encoder: CategoryEncoder = field(default_factory=CategoryEncoder)
    skipped: list[tuple[int, str]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.graphs)

    def head(self, n: int) -> GraphSet:
        """The first ``n`` graphs (with their ids and property rows)."""
        return GraphSet(
            self.graphs[:n], self.ids[:n], self.properties.iloc[:n], self.format, self.source,
            self.encoder, self.skipped,
        )

    def __repr__(self) -> str:
        cols = list(self.properties.columns)
        return f"<GraphSet {self.format} '{self.source}': {len(self.graphs)} graphs, properties {cols}>"


def properties_frame(rows: list[dict[str, Any]], ids: list[str]) -> Any:
    """A DataFrame of per-graph properties; columns whose values all parse as numbers become numeric."""
    import pandas as pd

    df = pd.DataFrame(rows, index=pd.Index(ids, name="id"))
    for col in df.columns:
        if not (pd.api.types.is_numeric_dtype(df[col]) or pd.api.types.is_bool_dtype(df[col])):
            try:
                df[col] = pd.to_numeric(df[col])
            except (ValueError, TypeError):
                pass
    return df


def parse_fields(spec: str | Sequence[str] | None, name: str = "fields") -> list[str] | None:
    """``"a,b"`` or ``["a", "b"]`` -> ``["a", "b"]``; None stays None (meaning: all fields).

    Anything else (a number, bytes, a DataFrame, a sequence holding non-text) is a
    :class:`~mgkflow.errors.ParameterTypeError` naming ``name``.

    Examples
    --------
    >>> parse_fields("a, b"), parse_fields(["a"]), parse_fields(None)
    (['a', 'b'], ['a'], None)
    >>> parse_fields(7, "node_labels")
    Traceback (most recent call last):
    ...
    mgkflow.errors.ParameterTypeError: node_labels must be field names (text 'a,b' or a list of str), got int 7
    """
    if spec is None:
        return None
    if isinstance(spec, str):
        return [s.strip() for s in spec.split(",") if s.strip()]
    if not isinstance(spec, Iterable) or isinstance(spec, (bytes, Mapping)) or is_frame(spec):
        raise ParameterTypeError(
            f"{name} must be field names (text 'a,b' or a list of str), got {type(spec).__name__} {spec!r:.60}"
        )
    out = []
    for s in spec:
        if not isinstance(s, (str, np.str_)):
            raise ParameterTypeError(f"{name}: a field name must be text, got {type(s).__name__} {s!r:.60}")
        out.append(str(s))
    return out


def check_path(path: Any, what: str, directory: bool = False) -> Path:
    """``path`` as a Path that exists (a directory if ``directory``), else FileFormatError
    (a ``path`` that is no path at all: :class:`~mgkflow.errors.ParameterTypeError`, see :func:`as_path`)."""
    p = as_path(path, what)
    if not p.exists():
        raise FileFormatError(f"{what}: no such file or directory", path=p)
    if directory and not p.is_dir():
        raise FileFormatError(f"{what}: expected a directory", path=p)
    if not directory and p.is_dir():
        raise FileFormatError(f"{what}: expected a file, got a directory", path=p)
    return p


def read_text(path: Path, what: str) -> str:
    """The text of a (possibly gzip-compressed) file; FileFormatError if unreadable or binary."""
    import gzip

    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise FileFormatError(f"{what}: cannot read: {exc.strerror or exc}", path=path) from exc
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as exc:
            raise FileFormatError(f"{what}: looks gzipped but cannot be decompressed: {exc}", path=path) from exc
    if b"\x00" in raw[:65536]:
        raise FileFormatError(f"{what}: not a text file (NUL bytes)", path=path)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise FileFormatError(f"{what}: not UTF-8 text ({exc.reason})", path=path, line=line) from exc
