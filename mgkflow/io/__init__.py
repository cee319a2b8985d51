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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import FileFormatError
from ..kernels import BaseKernel
from ._common import CategoryEncoder, GraphSet
from ._files import atomic_write, check_writable, default_file_mode
from .gram import GramFile, kernel_params, load_gram_npz, save_gram

__all__ = [
    "GraphSet",
    "CategoryEncoder",
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
    if fmt not in FORMATS:
        raise ValueError(f"unknown file format {fmt!r}; choose from {', '.join(FORMATS)}")
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
    p = Path(path)
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


def read_graphs(path: Any, format: str | None = None, **options: Any) -> GraphSet:
    """Read graphs from a file or directory, choosing the reader by extension or ``format``.

    Parameters
    ----------
    path : str or os.PathLike
        A SMILES/SDF/GraphML/GML/PDB file, a TU dataset directory or a directory of GraphML/GML/PDB files.
    format : str, optional
        One of :func:`available_formats`; default: :func:`detect_format`.
    **options
        Passed to the reader (see each ``read_*``); all accept ``n_graphs`` and ``encoder``.

    Returns
    -------
    GraphSet

    Raises
    ------
    mgkflow.errors.FileFormatError
        Missing or unreadable file, unknown extension, malformed content (naming file and line).
    """
    fmt = format or detect_format(path)
    mod = _module(fmt)
    p = Path(path)
    if fmt in PER_FILE_FORMATS and p.is_dir():
        files = sorted(c for c in p.iterdir() if c.is_file() and _by_extension(c.name) == fmt)
        if not files:
            raise FileFormatError(f"no {fmt} files in the directory", path=p)
        return mod.read(files, **options)
    return mod.read(path, **options)


def read_smiles(path: Any, **options: Any) -> GraphSet:
    """Read a SMILES file (one molecule per line; see :mod:`mgkflow.io.smiles`).

    Options: ``delimiter``, ``header``, ``smiles_column``, ``id_column``,
    ``on_error`` ("raise"/"skip"), ``n_graphs``, ``encoder``.
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
    default: attributes present everywhere), ``weight`` (edge attribute, default
    "weight"), ``directed`` ("error"/"undirected"), ``n_graphs``, ``encoder``.
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


def default_kernels(graphs: GraphSet | Sequence[Any]) -> tuple[BaseKernel, BaseKernel]:
    """Sensible (node_kernel, edge_kernel) for graphs read from a file.

    ================== ============================================ =============================================
    graphs             node kernel                                  edge kernel
    ================== ============================================ =============================================
    molecules          ``KroneckerDelta(0.5, "element")``           ``KroneckerDelta(0.5, "bond_order")``
    (SMILES, SDF)      (the drugs set's kernels)
    proteins (PDB)     ``KroneckerDelta(0.5, "element")``           ``SquareExponential(1.0, "distance")``
    others             ``KroneckerDelta(0.5, "label")`` if every     ``KroneckerDelta(0.5, "label")`` likewise,
                       graph has an integer field ``label``, else   else ``Constant(1.0)``
                       ``Constant(1.0)``
    ================== ============================================ =============================================

    Examples
    --------
    >>> import numpy as np
    >>> from mgkflow import Graph
    >>> g = Graph(np.array([[0, 1], [1, 0]]), node_labels={"label": [1, 2]})
    >>> default_kernels([g])
    (KroneckerDelta(0.5, 'label'), Constant(1.0))
    """
    from ..kernels import Constant, KroneckerDelta, SquareExponential

    if isinstance(graphs, GraphSet):
        if graphs.format in MOLECULE_FORMATS:
            return KroneckerDelta(0.5, "element"), KroneckerDelta(0.5, "bond_order")
        if graphs.format == "pdb":
            return KroneckerDelta(0.5, "element"), SquareExponential(1.0, "distance")
        graphs = graphs.graphs

    def has_int(kind: str) -> bool:
        fields = [getattr(g, f"{kind}_labels").get("label") for g in graphs]
        return bool(fields) and all(v is not None and v.ndim == 1 and v.dtype.kind == "i" for v in fields)

    nk = KroneckerDelta(0.5, "label") if has_int("node") else Constant(1.0)
    ek = KroneckerDelta(0.5, "label") if has_int("edge") else Constant(1.0)
    return nk, ek
