"""Reading graphs from files and writing Gram matrices: ``mgkflow.io``.

Readers (one module per format, a registry like :mod:`mgkflow.reorder`):

=========== ========================================= =====================================
format      files                                     reader
=========== ========================================= =====================================
``smiles``  ``.smi .smiles .ism .can .csv .tsv``      :func:`read_smiles` (RDKit)
``sdf``     ``.sdf .sd .mol`` (``.gz`` too)           :func:`read_sdf` (RDKit)
``graphml`` ``.graphml .xml``                         :func:`read_graphml` (networkx)
``gml``     ``.gml``                                  :func:`read_gml` (networkx)
``tu``      a directory with ``DS_A.txt``, ...        :func:`read_tu`
``pdb``     ``.pdb .ent`` (``.gz`` too)               :func:`read_pdb` (contact graphs)
=========== ========================================= =====================================

:func:`read_graphs` picks the reader from the extension (or directory) and
returns a :class:`GraphSet`: the graphs, one id per graph and a DataFrame of
per-graph properties. Text labels (TU/GraphML/GML categorical values) are
encoded to integers by one :class:`CategoryEncoder` per call, fitted on all
graphs of the call before any graph is built, so equal values get equal codes
across files; pass ``encoder=`` to carry the codes to another call.

:func:`save_gram` / :func:`load_gram_npz` write and read a Gram matrix with its
graph ids and kernel parameters (``.npz``), or the bare matrix (``.npy``).

Converters and readers: the *converters* turn an object into the plain arrays of
:meth:`mgkflow.Graph.from_csr` and never import :mod:`mgkflow.graph`, so that the
``Graph.from_*`` constructors can call them: :mod:`~mgkflow.io.networkx`,
:mod:`~mgkflow.io.rdkit` (RDKit molecules, SMILES; formerly ``mgkflow.io_chem``),
:mod:`~mgkflow.io.pdb_parser` (PDB files; re-exported by :mod:`mgkflow.io.pdb`, where the
deprecated ``mgkflow.io_pdb`` points) and
:mod:`~mgkflow.io.csr` (CSR arrays from edge lists). The *readers* above build
:class:`~mgkflow.graph.Graph` objects (they import :mod:`mgkflow.graph`):
readers -> graph -> converters.

Examples
--------
>>> import tempfile, pathlib
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> _ = (d / "DS_A.txt").write_text("1, 2\\n2, 1\\n3, 4\\n4, 3\\n4, 5\\n5, 4\\n")
>>> _ = (d / "DS_graph_indicator.txt").write_text("1\\n1\\n2\\n2\\n2\\n")
>>> _ = (d / "DS_graph_labels.txt").write_text("1\\n-1\\n")
>>> gs = read_graphs(d)
>>> gs.ids, [g.n_nodes for g in gs.graphs], gs.properties["label"].tolist()
(['DS-1', 'DS-2'], [2, 3], [1, -1])
"""

from __future__ import annotations

import importlib
import inspect
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ..errors import FileFormatError, ParameterError, ParameterTypeError
from ..kernels import BaseKernel
from ._common import CategoryEncoder, DroppedLabelWarning, GraphSet, PathNotFoundError, as_path
from ._files import atomic_write, check_writable, default_file_mode
from .gram import GramFile, kernel_params, load_gram_npz, save_gram

__all__ = [
    "GraphSet",
    "CategoryEncoder",
    "DroppedLabelWarning",
    "PathNotFoundError",
    "FORMATS",
    "MOLECULE_FORMATS",
    "available_formats",
    "detect_format",
    "read_graphs",
    "read_smiles",
    "read_sdf",
    "read_graphml",
    "read_gml",
    "read_tu",
    "read_pdb",
    "default_kernels",
    "save_gram",
    "load_gram_npz",
    "GramFile",
    "kernel_params",
    "atomic_write",
    "check_writable",
    "default_file_mode",
]

#: Format name -> module with ``read(path, **options)``, ``NAME`` and ``EXTENSIONS``.
FORMATS: dict[str, str] = {
    "smiles": "mgkflow.io.smiles",
    "sdf": "mgkflow.io.sdf",
    "graphml": "mgkflow.io.graphml",
    "gml": "mgkflow.io.gml",
    "tu": "mgkflow.io.tu",
    "pdb": "mgkflow.io.pdb",
}
#: Formats read one graph per file, so that a directory of such files is a dataset.
PER_FILE_FORMATS = ("graphml", "gml", "pdb")
#: Formats whose graphs are molecules (the drugs set's label fields and default kernels).
MOLECULE_FORMATS = ("smiles", "sdf")


def available_formats() -> list[str]:
    """Names of the file formats :func:`read_graphs` reads.

    Examples
    --------
    >>> available_formats()
    ['smiles', 'sdf', 'graphml', 'gml', 'tu', 'pdb']
    """
    return list(FORMATS)


def _module(fmt: str) -> Any:
    if not isinstance(fmt, str) or fmt not in FORMATS:
        raise ParameterError(f"format must be one of {', '.join(map(repr, FORMATS))} (or None: from the name); "
                             f"got {fmt!r}")
    return importlib.import_module(FORMATS[fmt])


def _by_extension(name: str) -> str | None:
    low = name.lower()
    best = None
    for fmt in FORMATS:
        for ext in _module(fmt).EXTENSIONS:
            if low.endswith(ext) and (best is None or len(ext) > best[1]):
                best = (fmt, len(ext))
    if best is None and low.endswith(".gz"):
        return _by_extension(name[:-3])
    return best[0] if best else None


def detect_format(path: Any) -> str:
    """The format :func:`read_graphs` would use for ``path`` (a file or a directory).

    A directory holding ``*_A.txt`` is a TU dataset; a directory of GraphML, GML
    or PDB files is read file by file. Files go by extension.

    Examples
    --------
    >>> detect_format("mols.sdf.gz"), detect_format("x.smi"), detect_format("g.graphml")
    ('sdf', 'smiles', 'graphml')
    """
    p = as_path(path, "path")
    if p.is_dir():
        if any(p.glob("*_A.txt")):
            return "tu"
        kinds = {f for f in (_by_extension(c.name) for c in p.iterdir() if c.is_file()) if f in PER_FILE_FORMATS}
        if len(kinds) == 1:
            return kinds.pop()
        if kinds:
            raise FileFormatError(f"directory mixes graph file formats {sorted(kinds)}; pass format=...", path=p)
        raise FileFormatError("directory holds no TU dataset (*_A.txt) and no GraphML/GML/PDB files", path=p)
    fmt = _by_extension(p.name)
    if fmt is None:
        exts = sorted({e for f in FORMATS for e in _module(f).EXTENSIONS})
        raise FileFormatError(
            f"cannot tell the format from the name; known extensions {exts} or a TU directory; "
            "pass format=... (CLI: --format)", path=p
        )
    return fmt


def _check_path_argument(path: Any) -> Path:
    """``path`` as a Path, or a ParameterTypeError saying what ``read_graphs`` accepts."""
    if isinstance(path, (str, os.PathLike)) and not isinstance(path, bytes):
        p = os.fspath(path)
        if isinstance(p, str):
            if not p.strip():
                raise ParameterError("path is empty; give a file or directory to read")
            return Path(p)
    what = type(path).__name__
    hint = ""
    if isinstance(path, (bytes, bytearray)) or (isinstance(path, os.PathLike) and not isinstance(path, str)):
        hint = " (a bytes path: pass os.fsdecode(path); file content: write it to a file first)"
    raise ParameterTypeError(
        f"path must be a str or os.PathLike naming a file or directory, or a pandas DataFrame with a SMILES "
        f"column; got {what}{hint}"
    )


def _check_options(fmt: str, mod: Any, options: dict[str, Any]) -> None:
    """Refuse options the reader of ``fmt`` does not take (ParameterTypeError listing those it takes)."""
    params = inspect.signature(mod.read).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return
    names = list(params)[1:]
    unknown = sorted(set(options) - set(names))
    if unknown:
        raise ParameterTypeError(
            f"the {fmt} reader takes no option {', '.join(map(repr, unknown))}; its options: {', '.join(names)}"
        )


def read_graphs(path: Any, format: str | None = None, **options: Any) -> GraphSet:
    """Read graphs from a file or directory, choosing the reader by extension or ``format``.

    Parameters
    ----------
    path : str, os.PathLike or pandas.DataFrame
        A SMILES/SDF/GraphML/GML/PDB file, a TU dataset directory or a directory of GraphML/GML/PDB files.
        A DataFrame is read like a SMILES CSV file: its SMILES column (``smiles_column=``, else the
        one named like ``smiles``), ids from ``id_column`` (else a ``name``/``id`` column, else the
        index when it is not a plain range, else the SMILES) and the other columns as properties.
    format : str, optional
        One of :func:`available_formats`; default: :func:`detect_format`.
    **options
        Passed to the reader (see each ``read_*``); all accept ``n_graphs`` (a whole number >= 1)
        and ``encoder``.

    Returns
    -------
    GraphSet

    Raises
    ------
    mgkflow.errors.FileFormatError
        Missing or unreadable file, unknown extension, malformed content (naming file and line).
    mgkflow.errors.ParameterError, mgkflow.errors.ParameterTypeError
        An argument mgkflow cannot use (``path`` of another type, unknown ``format``, an option the
        reader does not take or a value it does not accept, ``n_graphs`` not a whole number >= 1);
        the message names the argument and what is accepted.

    Examples
    --------
    >>> read_graphs(7)
    Traceback (most recent call last):
    ...
    mgkflow.errors.ParameterTypeError: path must be a str or os.PathLike naming a file or directory, ...
    """
    if format is not None:
        _module(format)
    if _is_dataframe(path):
        if format not in (None, "smiles"):
            raise ParameterError(f"a DataFrame is read as SMILES (format='smiles'), not format={format!r}")
        from .smiles import read_frame

        return read_frame(path, **options)
    p = _check_path_argument(path)
    fmt = format or detect_format(p)
    mod = _module(fmt)
    _check_options(fmt, mod, options)
    if fmt in PER_FILE_FORMATS and p.is_dir():
        files = sorted(c for c in p.iterdir() if c.is_file() and _by_extension(c.name) == fmt)
        if not files:
            raise FileFormatError(f"no {fmt} files in the directory", path=p)
        return mod.read(files, **options)
    return mod.read(p, **options)


def _is_dataframe(obj: Any) -> bool:
    mod = type(obj).__module__ or ""
    return mod.startswith("pandas") and type(obj).__name__ == "DataFrame"


def read_smiles(path: Any, **options: Any) -> GraphSet:
    """Read a SMILES file (one molecule per line; see :mod:`mgkflow.io.smiles`).

    Options: ``delimiter``, ``header``, ``smiles_column``, ``id_column``,
    ``on_error`` ("raise"/"skip"), ``n_graphs``, ``encoder``, ``max_length``
    (longest SMILES, default 5,000 characters).
    """
    return _module("smiles").read(path, **options)


def read_sdf(path: Any, **options: Any) -> GraphSet:
    """Read an SDF file with its data fields (see :mod:`mgkflow.io.sdf`).

    Options: ``conformer`` (None/True/False), ``on_error``, ``n_graphs``, ``encoder``.
    """
    return _module("sdf").read(path, **options)


def read_graphml(paths: Any, **options: Any) -> GraphSet:
    """Read one or several GraphML files, one graph each (see :mod:`mgkflow.io.graphml`).

    Options: ``node_labels``, ``edge_labels`` (names or comma-separated text;
    default: attributes present everywhere; one present on only some nodes/edges is
    left out with a :class:`DroppedLabelWarning`), ``weight`` (edge attribute, default
    "weight"), ``directed`` ("error"/"undirected"), ``n_graphs``, ``encoder``.
    :func:`default_kernels` builds kernels from every field read.
    """
    return _module("graphml").read(paths, **options)


def read_gml(paths: Any, **options: Any) -> GraphSet:
    """Read one or several GML files, one graph each (options as :func:`read_graphml`)."""
    return _module("gml").read(paths, **options)


def read_tu(directory: Any, **options: Any) -> GraphSet:
    """Read a TU dataset directory (see :mod:`mgkflow.io.tu`).

    Options: ``name`` (prefix), ``node_labels``, ``edge_labels`` ("label",
    "attributes"), ``self_loops`` ("error"/"drop"), ``n_graphs``, ``encoder``.
    """
    return _module("tu").read(directory, **options)


def read_pdb(paths: Any, **options: Any) -> GraphSet:
    """Read PDB file(s) as protein contact graphs (see :mod:`mgkflow.io.pdb`).

    Options: ``cutoff`` (Å, default 6), ``chain``, ``n_graphs``.
    """
    return _module("pdb").read(paths, **options)


def _field_kernel(graphs: Sequence[Any], kind: str, field: str) -> BaseKernel | None:
    """The default base kernel of one label field carried by every graph, or None (left out)."""
    from ..kernels import KroneckerDelta, SquareExponential, VectorSquareExponential

    arrays = [getattr(g, f"{kind}_labels")[field] for g in graphs]
    kinds = {a.dtype.kind for a in arrays}
    dims = {a.shape[1:] for a in arrays}
    if len(dims) != 1:
        return None
    dim = dims.pop()
    if dim == () and kinds <= {"i", "u", "b"}:
        return KroneckerDelta(0.5, field)
    if kinds <= {"i", "u", "b", "f"}:
        if dim == ():
            return SquareExponential(1.0, field)
        if len(dim) == 1 and dim[0] >= 1:
            return VectorSquareExponential(1.0, field, dim[0])
    return None


def _tu_kernel(graphs: Sequence[Any], kind: str) -> BaseKernel:
    """``KroneckerDelta(0.5, "label")`` where every graph has a scalar integer ``label`` field, else Constant."""
    from ..kernels import Constant, KroneckerDelta

    fields = [getattr(g, f"{kind}_labels").get("label") for g in graphs]
    ok = bool(fields) and all(v is not None and v.ndim == 1 and v.dtype.kind == "i" for v in fields)
    return KroneckerDelta(0.5, "label") if ok else Constant(1.0)


def _fields_kernel(graphs: Sequence[Any], kind: str) -> BaseKernel:
    """The product of the default kernels of every ``kind`` label field common to all graphs (else Constant)."""
    from ..kernels import Constant

    if not graphs:
        return Constant(1.0)
    labels = [getattr(g, f"{kind}_labels") for g in graphs]
    fields = [f for f in labels[0] if all(f in lab for lab in labels[1:])]
    kernel = None
    for f in fields:
        k = _field_kernel(graphs, kind, f)
        if k is not None:
            kernel = k if kernel is None else kernel * k
    return Constant(1.0) if kernel is None else kernel


def default_kernels(graphs: GraphSet | Sequence[Any]) -> tuple[BaseKernel, BaseKernel]:
    """Sensible (node_kernel, edge_kernel) for graphs read from a file: every label field they carry counts.

    ================== ============================================ =============================================
    graphs             node kernel                                  edge kernel
    ================== ============================================ =============================================
    molecules          ``KroneckerDelta(0.5, "element")``           ``KroneckerDelta(0.5, "bond_order")``
    (SMILES, SDF)      (the drugs set's kernels)
    proteins (PDB)     ``KroneckerDelta(0.5, "element")``           ``SquareExponential(1.0, "distance")``
    TU datasets        ``KroneckerDelta(0.5, "label")`` if every     likewise; the real ``attributes`` fields
                       graph has an integer field ``label``, else   are left to an explicit kernel
                       ``Constant(1.0)``
    others (GraphML,   the product, over the node label fields      the same over the edge label fields
    GML, graphs)       every graph has, of                          (the weight attribute is not a label);
                       ``KroneckerDelta(0.5, f)`` for an integer    ``Constant(1.0)`` where there is none
                       field (text labels are integer codes),
                       ``SquareExponential(1.0, f)`` for a real
                       one, ``VectorSquareExponential(1.0, f, d)``
                       for a vector one; ``Constant(1.0)`` if none
    ================== ============================================ =============================================

    So the attributes a GraphML/GML file or TU directory carries are used when none are named
    (``read_graphs`` reads every attribute present on all nodes, resp. edges); name the ones to
    use with ``node_labels=`` / ``edge_labels=`` (CLI ``--node-labels``, ``--edge-labels``), or pass
    kernels. The length scale 1.0 suits values of order one (bond lengths in Å); scale other real
    fields or pass a kernel.

    Examples
    --------
    >>> import numpy as np
    >>> from mgkflow import Graph
    >>> g = Graph(np.array([[0, 1], [1, 0]]), node_labels={"label": [1, 2]})
    >>> default_kernels([g])
    (KroneckerDelta(0.5, 'label'), Constant(1.0))
    >>> A = np.array([[0, 1], [1, 0]])
    >>> g = Graph(A, node_labels={"atom": [6, 8]}, edge_labels={"length": 1.2 * A})
    >>> default_kernels([g])
    (KroneckerDelta(0.5, 'atom'), SquareExponential(1.0, 'length'))
    """
    from ..kernels import KroneckerDelta, SquareExponential

    graphs = _check_graphs(graphs)
    if isinstance(graphs, GraphSet):
        if graphs.format in MOLECULE_FORMATS:
            return KroneckerDelta(0.5, "element"), KroneckerDelta(0.5, "bond_order")
        if graphs.format == "pdb":
            return KroneckerDelta(0.5, "element"), SquareExponential(1.0, "distance")
        if graphs.format == "tu":
            return tuple(_tu_kernel(graphs.graphs, kind) for kind in ("node", "edge"))  # type: ignore[return-value]
        graphs = graphs.graphs
    graphs = list(graphs)
    return _fields_kernel(graphs, "node"), _fields_kernel(graphs, "edge")


def _check_graphs(graphs: Any) -> GraphSet | list[Any]:
    """``graphs`` of :func:`default_kernels`: a GraphSet, or a sequence of Graph (as a list)."""
    from ..graph import Graph

    if isinstance(graphs, GraphSet):
        return graphs
    if isinstance(graphs, (str, bytes, os.PathLike)) or _is_dataframe(graphs) or not isinstance(graphs, Iterable):
        raise ParameterTypeError(
            f"graphs must be a GraphSet or a sequence of mgkflow.Graph, got {type(graphs).__name__} {graphs!r:.60}"
        )
    graphs = list(graphs)
    for i, g in enumerate(graphs):
        if not isinstance(g, Graph):
            raise ParameterTypeError(
                f"graphs must be a GraphSet or a sequence of mgkflow.Graph; item {i} is {type(g).__name__} {g!r:.60}"
            )
    return graphs
