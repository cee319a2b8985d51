"""MOSES drug-like molecules with RDKit stand-in labels: :func:`moses`, :func:`moses_file`, :func:`stand_in_labels`.

MOSES (Polykovskiy et al., *Front. Pharmacol.* 11, 565644, 2020; MIT licence) is a benchmark set of
1.9M drug-like molecules from ZINC Clean Leads; its ``molsets`` package ships the training split
(1,584,663 SMILES) and the test split (176,074) as ``moses/dataset/data/{train,test}.csv.gz``.

Three sources, never a download:

- ``split="subset"`` (default): the 10,000 molecules drawn at random (seed 0) from the training
  split and shipped in ``datasets/moses.csv`` with their graphs (``moses_graphs.npz``); read with
  numpy, no RDKit.
- ``split="train"`` or ``"test"``: the full split from an installed ``molsets`` (found by path,
  never imported: it imports torch), e.g. after ``pip install --no-deps molsets``; graphs and
  labels are computed with RDKit for the first ``n_graphs`` molecules.
- ``path=``: a copy of such a file (or any SMILES/CSV file with a ``SMILES`` column), the same way.

The labels are **stand-ins for expensive labels**, computed by RDKit in a millisecond: Crippen's
logP, the topological polar surface area (Å²) and QED, each rounded to 4 decimals. They let a
screening pipeline (``mgkflow fit``, ``mgkflow predict``) be exercised at scale where the real
labels (measured or simulated properties) would cost hours per molecule.
"""

from __future__ import annotations

import csv
import gzip
import importlib.util
import io
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from ..graph import Graph
from . import _args
from ._common import _molecule_graphs, _select, data_dir
from .property_sets import MoleculeSet

__all__ = ["MOSES_TARGETS", "moses", "moses_file", "stand_in_labels"]

#: The stand-in labels: CSV column -> description.
MOSES_TARGETS = {
    "logp": "Crippen logP (RDKit; a stand-in label)",
    "tpsa": "topological polar surface area, A^2 (RDKit; a stand-in label)",
    "qed": "QED drug-likeness (RDKit; a stand-in label)",
}
_SPLITS = ("subset", "train", "test")
_INSTALL = (
    "install molsets without its dependencies (pip install --no-deps molsets; MIT licence, a 52 MB wheel) or "
    "pass path= a copy of the file; mgkflow never downloads data"
)


def stand_in_labels(smiles: str) -> dict[str, float]:
    """The MOSES subset's stand-in labels of one molecule, computed by RDKit, rounded to 4 decimals.

    Examples
    --------
    >>> stand_in_labels("c1ccccc1O")  # doctest: +SKIP
    {'logp': 1.3922, 'tpsa': 20.23, 'qed': 0.5147}
    """
    from rdkit.Chem import QED, Crippen, rdMolDescriptors

    from ..errors import GraphError
    from ..io.rdkit import require_rdkit

    mol = require_rdkit().MolFromSmiles(smiles)
    if mol is None:
        raise GraphError(f"invalid SMILES {smiles!r:.80}: RDKit could not parse it")
    return {
        "logp": round(float(Crippen.MolLogP(mol)), 4),
        "tpsa": round(float(rdMolDescriptors.CalcTPSA(mol)), 4),
        "qed": round(float(QED.qed(mol)), 4),
    }


def moses_file(split: str = "train", path: Any = None) -> Path:
    """Where the full MOSES ``split`` is: ``path`` if given, else in an installed ``molsets`` package.

    The file (``train.csv.gz``, ``test.csv.gz``: a header ``SMILES``, one molecule a line) can be
    screened as it is: ``mgkflow predict model.mgk $(python -c "...moses_file()")  --out p.csv``.

    Raises
    ------
    mgkflow.io.PathNotFoundError
        The file is not there (``molsets`` not installed, or no such ``path``); the message says
        how to get it. Nothing is downloaded.

    Examples
    --------
    >>> moses_file("valid")
    Traceback (most recent call last):
    ...
    mgkflow.errors.ParameterError: moses_file: split must be one of 'train', 'test'; got 'valid'
    """
    from ..io import PathNotFoundError, as_path

    split = _args.choice("moses_file", "split", split, ("train", "test"))
    if path is not None:
        p = as_path(path, "path")
        if not p.is_file():
            raise PathNotFoundError(f"{p}: no such MOSES file")
        return p
    spec = importlib.util.find_spec("moses")  # finds the package without importing it (it imports torch)
    roots = list(spec.submodule_search_locations or []) if spec is not None else []
    for root in roots:
        p = Path(root) / "dataset" / "data" / f"{split}.csv.gz"
        if p.is_file():
            return p
    raise PathNotFoundError(f"the full MOSES {split} split is not available: {_INSTALL}")


@lru_cache(maxsize=1)
def _subset_files() -> tuple[list[dict[str, str]], dict[str, np.ndarray]]:
    root = data_dir()
    csv_path, npz_path = root / "moses.csv", root / "moses_graphs.npz"
    for p in (csv_path, npz_path):
        if not p.exists():
            raise FileNotFoundError(f"moses dataset file {p} is missing; rebuild with datasets/build_moses.py")
    with open(csv_path, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    with np.load(npz_path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    for a in arrays.values():
        a.setflags(write=False)
    return rows, arrays


def _read_smiles(p: Path, n: int | None) -> list[str]:
    """The first ``n`` (all: None) SMILES of a MOSES-layout file (column ``SMILES``, else the first), gzip or not."""
    from ..errors import FileFormatError

    with open(p, "rb") as fh:
        gz = fh.read(2) == b"\x1f\x8b"
    raw = gzip.open(p, "rb") if gz else open(p, "rb")  # noqa: SIM115 - closed by the wrapper below
    out: list[str] = []
    with io.TextIOWrapper(raw, encoding="utf-8", newline="") as fh:
        reader = csv.reader(fh)
        head = next(reader, None)
        if head is None:
            raise FileFormatError("MOSES file is empty", path=p)
        col = head.index("SMILES") if "SMILES" in head else 0
        for row in reader:
            if n is not None and len(out) >= n:
                break
            if row and row[col].strip():
                out.append(row[col].strip())
    return out


def moses(
    n_graphs: int | None = None,
    target: str = "logp",
    split: str = "subset",
    path: Any = None,
    return_X_y: bool = False,
) -> MoleculeSet | tuple[list[Graph], np.ndarray]:
    """MOSES drug-like molecules with an RDKit stand-in label (logP, TPSA or QED).

    Parameters
    ----------
    n_graphs : int, optional
        The first ``n_graphs`` molecules (file order). The full splits hold 1.6M and 176k
        molecules, each featurized with RDKit here: give ``n_graphs`` with them.
    target : {"logp", "tpsa", "qed"}
        The stand-in label in ``y`` (see :func:`stand_in_labels`).
    split : {"subset", "train", "test"}
        The shipped 10,000-molecule subset of the training split (no RDKit needed), or a full split
        of an installed ``molsets`` (:func:`moses_file`; RDKit computes graphs and labels).
    path : path, optional
        A MOSES-layout file to read instead of an installed one (``split`` then only names it).
    return_X_y : bool
        Return ``(graphs, y)`` instead of a :class:`~mgkflow.datasets.MoleculeSet`.

    Returns
    -------
    MoleculeSet
        Graphs as ``Graph.from_smiles(smiles, extended=True)`` builds them, titled
        ``moses-<split>-<row>`` (the 0-based row in the split's file); ``split`` is ``"train"`` or
        ``"test"`` per molecule.

    Raises
    ------
    mgkflow.io.PathNotFoundError
        A full split asked for that is not installed, or no such ``path``.

    Examples
    --------
    >>> data = moses(n_graphs=3)
    >>> len(data), data.target
    (3, 'logp: Crippen logP (RDKit; a stand-in label)')
    >>> data.names[0], data.smiles[0], float(data.y[0])
    ('moses-train-31', 'CNC(=O)Oc1ccccc1C(=O)Nc1ccccc1', 2.6571)
    """
    target = _args.choice("moses", "target", target, sorted(MOSES_TARGETS))
    split = _args.choice("moses", "split", split, _SPLITS)
    return_X_y = _args.flag("moses", "return_X_y", return_X_y)
    description = f"{target}: {MOSES_TARGETS[target]}"
    if split == "subset" and path is None:
        rows, z = _subset_files()
        keep = np.arange(_select(len(rows), n_graphs, "moses"))
        sel = [rows[i] for i in keep]
        names = [f"moses-train-{r['moses_index']}" for r in sel]
        data = MoleculeSet(
            graphs=_molecule_graphs(z, keep, names),
            y=np.array([float(r[target]) for r in sel], dtype=np.float64),
            smiles=tuple(r["smiles"] for r in sel),
            names=tuple(names),
            split=("train",) * len(sel),
            target=description,
        )
        return (data.graphs, data.y) if return_X_y else data
    if n_graphs is not None:
        n_graphs = _args.count("moses", "n_graphs", n_graphs, minimum=0)
    which = "train" if split == "subset" else split
    smiles = _read_smiles(moses_file(which, path), n_graphs)
    graphs = [Graph.from_smiles(s, extended=True, title=f"moses-{which}-{i}") for i, s in enumerate(smiles)]
    y = np.array([stand_in_labels(s)[target] for s in smiles], dtype=np.float64)
    data = MoleculeSet(graphs, y, tuple(smiles), tuple(g.title for g in graphs), (which,) * len(smiles), description)
    return (data.graphs, data.y) if return_X_y else data
