"""Shared steps of the molecule file readers (:mod:`mgkflow.io.smiles`, :mod:`mgkflow.io.sdf`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import FileFormatError, GraphError
from ..graph import Graph
from ._common import (
    CategoryEncoder,
    GraphSet,
    check_choice,
    check_encoder,
    check_n_graphs,
    check_path,
    properties_frame,
)

__all__ = ["open_molecule_file", "MoleculeGraphs"]


def open_molecule_file(path: Any, what: str, on_error: str, check: bool = True) -> tuple[Any, Path | None]:
    """``(rdkit.Chem, path)`` for a molecule reader: ``on_error`` checked, RDKit imported, the file checked.

    ``check=False`` (no file: a DataFrame) skips the path and returns None for it.
    """
    from .rdkit import require_rdkit

    check_choice("on_error", on_error, ("raise", "skip"))
    Chem = require_rdkit()
    return Chem, (check_path(path, what) if check else None)


@dataclass
class MoleculeGraphs:
    """The graphs, ids, properties and skipped records of one molecule file, gathered as it is read.

    ``what`` names the file in messages ("SMILES file"); ``on_error`` and ``n_graphs`` are the
    reader's options.
    """

    path: Path
    what: str
    on_error: str
    n_graphs: int | None
    graphs: list[Graph] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)
    props: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[tuple[int, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.n_graphs = check_n_graphs(self.n_graphs)

    def full(self) -> bool:
        """True once ``n_graphs`` molecules are read."""
        return self.n_graphs is not None and len(self.graphs) >= self.n_graphs

    def arrays(self, mol: Any, lineno: int, unreadable: str, conformer: bool | None, prefix: str = "") -> dict | None:
        """The graph arrays of ``mol`` (``extended`` fields), or None for a record skipped with ``on_error="skip"``.

        ``mol`` None (RDKit could not read it) is the error ``unreadable``; error messages get
        ``prefix`` unless they start with it. Raises FileFormatError naming the file and ``lineno``.
        """
        from .rdkit import graph_arrays_from_mol

        try:
            if mol is None:
                raise GraphError(unreadable)
            return graph_arrays_from_mol(mol, extended=True, conformer=conformer)
        except GraphError as exc:
            msg = str(exc) if str(exc).startswith(prefix) else f"{prefix}{exc}"
            if self.on_error == "skip":
                self.skipped.append((lineno, msg))
                return None
            raise FileFormatError(msg, path=self.path, line=lineno) from None

    def append(self, arrays: dict, ident: str, props: dict[str, Any]) -> None:
        """Add the graph of ``arrays`` titled ``ident``, with its property row."""
        self.graphs.append(Graph.from_csr(**arrays, title=ident))
        self.ids.append(ident)
        self.props.append(props)

    def result(self, fmt: str, encoder: CategoryEncoder | None) -> GraphSet:
        """The :class:`GraphSet` read; FileFormatError if no molecule could be read."""
        if not self.graphs:
            raise FileFormatError(f"{self.what} has no readable molecule", path=self.path)
        return GraphSet(
            self.graphs, self.ids, properties_frame(self.props, self.ids), fmt, str(self.path),
            check_encoder(encoder), self.skipped,
        )
