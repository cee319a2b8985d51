"""Molecules as labeled graphs with a graph-level descriptor vector: :class:`MolecularFeaturizer`.

A scikit-learn transformer: ``fit`` learns how to standardize RDKit's 2-D descriptors on the
training molecules, ``transform`` turns SMILES strings or RDKit molecules into
:class:`~mgkflow.Graph` objects whose node and edge label fields describe atoms and bonds and
whose ``features`` hold the standardized descriptors.

Atom fields (heavy atoms are nodes; hydrogens are counted, not nodes)
---------------------------------------------------------------------
============== ======================================================================
field          value
============== ======================================================================
``element``    atomic number
``charge``     formal charge
``aromatic``   1 if aromatic else 0
``hybridization`` ``int(atom.GetHybridization())`` (RDKit enum)
``hydrogens``  number of hydrogens, implicit and explicit
``degree``     number of heavy-atom neighbours
``ring_size``  size of the smallest ring holding the atom, 0 outside rings
``chirality``  CIP label: 0 none, 1 R, 2 S
``morgan1``    RDKit Morgan atom-environment identifier of radius 1 (unhashed; its 32 bits
               read as a signed int32, which every backend stores)
``morgan2``    the same of radius 2
``neighbours`` (vector) counts of heavy neighbours by element, :data:`NEIGHBOUR_ELEMENTS`
               and a last column for any other element
============== ======================================================================

Bond fields: ``bond_order`` (1, 1.5, 2, 3), ``aromatic``, ``conjugated``, ``in_ring`` (0/1) and
``stereo`` (``int(bond.GetStereo())``).

Descriptors: the values of :func:`rdkit.Chem.Descriptors.CalcMolDescriptors` (about 200
2-D descriptors), passed through ``sign(x) log(1 + |x|)`` (the counts and the
topological indices spread over orders of magnitude), then standardized with the training
set's mean and deviation; columns that are constant or not finite on the training set are
dropped, and values are clipped to ±:data:`CLIP` deviations.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin

from ..errors import GraphError, MgkflowError, ParameterError, ParameterTypeError
from ..graph import Graph
from ..io.csr import csr_from_edges
from ..io.rdkit import require_rdkit

__all__ = [
    "MolecularFeaturizer",
    "ATOM_FIELDS",
    "BOND_FIELDS",
    "NEIGHBOUR_ELEMENTS",
    "DEFAULT_ATOM_FIELDS",
    "DEFAULT_BOND_FIELDS",
    "molecular_descriptors",
    "CLIP",
]

#: Every atom field the featurizer can write (``atom_fields`` picks among them).
ATOM_FIELDS = (
    "element",
    "charge",
    "aromatic",
    "hybridization",
    "hydrogens",
    "degree",
    "ring_size",
    "chirality",
    "morgan1",
    "morgan2",
    "neighbours",
)
#: Every bond field the featurizer can write.
BOND_FIELDS = ("bond_order", "aromatic", "conjugated", "in_ring", "stereo")
#: Atomic numbers counted by the ``neighbours`` field, in column order (a last column counts the rest).
NEIGHBOUR_ELEMENTS = (6, 7, 8, 9, 15, 16, 17, 35, 53)
#: Standardized descriptors are clipped to this many deviations.
CLIP = 6.0

#: Atom fields written by default (those :class:`~mgkflow.learn.MolecularGPR` compares).
DEFAULT_ATOM_FIELDS = ("element", "charge", "aromatic", "hybridization", "hydrogens", "degree", "ring_size", "morgan1")
#: Bond fields written by default.
DEFAULT_BOND_FIELDS = ("bond_order", "aromatic", "in_ring")


def _mol(x: Any, Chem: Any) -> Any:
    if isinstance(x, str):
        if not x.strip():
            raise GraphError(f"invalid SMILES {x!r}: empty")
        mol = Chem.MolFromSmiles(x)
        if mol is None:
            raise GraphError(f"invalid SMILES {x!r}: RDKit could not parse it")
        return mol
    if hasattr(x, "GetAtoms") and hasattr(x, "GetBonds"):
        return x
    raise ParameterTypeError(f"expected a SMILES string or an RDKit molecule, got {type(x).__name__} {x!r:.60}")


def _morgan_ids(mol: Any, radius: int) -> np.ndarray:
    """(n_atoms, radius + 1) Morgan environment identifiers per atom (RDKit, unhashed)."""
    from rdkit.Chem import rdFingerprintGenerator as gen

    g = gen.GetMorganGenerator(radius=radius, includeRedundantEnvironments=True)
    out = gen.AdditionalOutput()
    out.AllocateAtomToBits()
    g.GetSparseCountFingerprint(mol, additionalOutput=out)
    ids = np.zeros((mol.GetNumAtoms(), radius + 1), dtype=np.int64)
    for i, bits in enumerate(out.GetAtomToBits()):
        ids[i, : len(bits)] = bits
    # RDKit's identifiers are unsigned 32-bit; the same bits as a signed int32 keep them distinct
    # and fit the int32 label storage of the GPU backend
    return ids.astype(np.uint32).view(np.int32).astype(np.int64)


def _atom_fields(mol: Any, kept: list, fields: Sequence[str], Chem: Any) -> dict[str, np.ndarray]:
    n = len(kept)
    ring = mol.GetRingInfo()
    out: dict[str, np.ndarray] = {}
    ints = {
        "element": lambda a: a.GetAtomicNum(),
        "charge": lambda a: a.GetFormalCharge(),
        "aromatic": lambda a: int(a.GetIsAromatic()),
        "hybridization": lambda a: int(a.GetHybridization()),
        "hydrogens": lambda a: a.GetTotalNumHs(includeNeighbors=True),
        "degree": (lambda a: a.GetDegree()) if n == mol.GetNumAtoms()  # no hydrogen atoms: every neighbour counts
        else (lambda a: sum(1 for b in a.GetNeighbors() if b.GetAtomicNum() != 1)),
        "ring_size": lambda a: ring.MinAtomRingSize(a.GetIdx()),
        "chirality": lambda a: {"R": 1, "S": 2}.get(a.GetPropsAsDict().get("_CIPCode", ""), 0),
    }
    if "chirality" in fields:
        Chem.AssignStereochemistry(mol, cleanIt=True, force=True)
    for f in fields:
        if f in ints:
            out[f] = np.fromiter((ints[f](a) for a in kept), dtype=np.int64, count=n)
    morgan = [f for f in fields if f.startswith("morgan")]
    if morgan:
        rows = [a.GetIdx() for a in kept]
        if len(kept) < mol.GetNumAtoms():  # explicit hydrogens: the environments of the heavy atoms alone
            mol = Chem.RemoveAllHs(mol, sanitize=False)
            mol.UpdatePropertyCache(strict=False)
            Chem.FastFindRings(mol)
            rows = list(range(len(kept)))  # RemoveAllHs keeps the heavy atoms' order
        ids = _morgan_ids(mol, max(int(f[-1]) for f in morgan))
        for f in morgan:
            out[f] = ids[rows, int(f[-1])]
    if "neighbours" in fields:
        col = {z: k for k, z in enumerate(NEIGHBOUR_ELEMENTS)}
        counts = np.zeros((n, len(NEIGHBOUR_ELEMENTS) + 1), dtype=np.int64)
        for i, a in enumerate(kept):
            for b in a.GetNeighbors():
                z = b.GetAtomicNum()
                if z != 1:
                    counts[i, col.get(z, len(NEIGHBOUR_ELEMENTS))] += 1
        out["neighbours"] = counts
    return {f: out[f] for f in fields}


def _bond_values(bonds: list, fields: Sequence[str]) -> dict[str, np.ndarray]:
    m = len(bonds)
    get = {
        "bond_order": (np.float64, lambda b: b.GetBondTypeAsDouble()),
        "aromatic": (np.int64, lambda b: int(b.GetIsAromatic())),
        "conjugated": (np.int64, lambda b: int(b.GetIsConjugated())),
        "in_ring": (np.int64, lambda b: int(b.IsInRing())),
        "stereo": (np.int64, lambda b: int(b.GetStereo())),
    }
    return {f: np.fromiter((get[f][1](b) for b in bonds), dtype=get[f][0], count=m) for f in fields}


def _graph(mol: Any, atom_fields: Sequence[str], bond_fields: Sequence[str], title: str | None, Chem: Any) -> Graph:
    atoms = list(mol.GetAtoms())
    heavy = np.array([a.GetAtomicNum() != 1 for a in atoms], dtype=bool)
    n = int(heavy.sum())
    if n == 0:
        raise GraphError(f"molecule {title or ''} has no heavy atom".replace("  ", " "))
    new_index = np.full(len(atoms), -1, dtype=np.int64)
    new_index[heavy] = np.arange(n)
    kept = [a for a, h in zip(atoms, heavy) if h]
    bonds = list(mol.GetBonds())
    bu = new_index[np.fromiter((b.GetBeginAtomIdx() for b in bonds), dtype=np.int64, count=len(bonds))]
    bv = new_index[np.fromiter((b.GetEndAtomIdx() for b in bonds), dtype=np.int64, count=len(bonds))]
    keep = (bu >= 0) & (bv >= 0)
    values = {k: v[keep] for k, v in _bond_values(bonds, bond_fields).items()}
    indptr, indices, data, edge_labels = csr_from_edges(n, bu[keep], bv[keep], values)
    node_labels = _atom_fields(mol, kept, atom_fields, Chem)
    return Graph.from_csr(indptr, indices, data, n, node_labels=node_labels, edge_labels=edge_labels, title=title)


#: RDKit descriptors that recompute the molecule's E-state indices unless called with ``force=0``, which
#: reads the indices the first of them (or ``EState_VSA``) left on the molecule: the same values, computed once.
_ESTATE_READERS = ("MaxEStateIndex", "MinEStateIndex", "MaxAbsEStateIndex", "MinAbsEStateIndex")
#: RDKit descriptors that are one item of ``rdMolDescriptors.CalcCrippenDescriptors`` (both computed per call).
_CRIPPEN_ITEMS = {"MolLogP": 0, "MolMR": 1}


def _crippen_item(index: int) -> Callable[[Any, dict], Any]:
    def call(mol: Any, shared: dict) -> Any:
        if "crippen" not in shared:
            from rdkit.Chem import rdMolDescriptors

            shared["crippen"] = rdMolDescriptors.CalcCrippenDescriptors(mol)
        return shared["crippen"][index]

    return call


@functools.lru_cache(maxsize=1)
def _descriptor_calls() -> tuple[tuple[str, ...], tuple[Callable[[Any, dict], Any], ...]]:
    """(names, one call per name) of RDKit's descriptor list, in the order ``CalcMolDescriptors`` runs it.
    A call takes the molecule and a dictionary shared by one molecule's calls. What RDKit computes twice or
    more per molecule is computed once: the E-state indices (in Python, O(atoms²), six calls were 12% of the
    descriptors' time on MOSES molecules) and Crippen's logP and MR (one C++ call gives both)."""
    import inspect

    from rdkit.Chem import Descriptors

    def plain(fn: Callable[[Any], Any]) -> Callable[[Any, dict], Any]:
        return lambda mol, shared: fn(mol)

    names, calls = [], []
    for name, fn in Descriptors._descList:
        try:
            estate = name in _ESTATE_READERS and "force" in inspect.signature(fn).parameters
        except (TypeError, ValueError):  # a Boost.Python function without a signature
            estate = False
        names.append(name)
        if estate:
            calls.append(plain(functools.partial(fn, force=0)))
        elif name in _CRIPPEN_ITEMS:
            calls.append(_crippen_item(_CRIPPEN_ITEMS[name]))
        else:
            calls.append(plain(fn))
    return tuple(names), tuple(calls)


def molecular_descriptors(molecules: Iterable[Any]) -> tuple[np.ndarray, tuple[str, ...]]:
    """RDKit's 2-D descriptors of each molecule, as an (n, d) float64 array and the names.

    The values of ``rdkit.Chem.Descriptors.CalcMolDescriptors``, in its order, with the
    E-state indices and Crippen's contributions computed once per molecule. Values RDKit cannot
    compute are NaN.

    Examples
    --------
    >>> X, names = molecular_descriptors(["CCO", "c1ccccc1"])  # doctest: +SKIP
    >>> X.shape[0], "MolWt" in names  # doctest: +SKIP
    (2, True)
    """
    if isinstance(molecules, str | bytes) or not isinstance(molecules, Iterable):
        raise ParameterTypeError(
            f"molecules must be a sequence of SMILES strings or RDKit molecules, got {molecules!r:.60}"
        )
    Chem = require_rdkit()
    names, calls = _descriptor_calls()
    rows = []
    for x in molecules:
        mol = _mol(x, Chem)
        row, shared = [], {}
        for call in calls:
            try:
                row.append(float(call(mol, shared)))
            except Exception:  # noqa: BLE001 - as CalcMolDescriptors: a descriptor RDKit cannot compute is missing
                row.append(np.nan)
        rows.append(row)
    with np.errstate(invalid="ignore", over="ignore"):
        X = np.asarray(rows, dtype=np.float64).reshape(len(rows), len(names))
    X[~np.isfinite(X)] = np.nan
    return X, names


def _check_fields(value: Any, allowed: tuple[str, ...], what: str) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise ParameterTypeError(f"{what} must be a sequence of field names, got {value!r:.60}")
    fields = tuple(value)
    bad = [f for f in fields if not isinstance(f, str) or f not in allowed]
    if bad:
        raise ParameterError(f"{what}: unknown field(s) {bad!r:.80}; known: {', '.join(allowed)}")
    if len(set(fields)) != len(fields):
        raise ParameterError(f"{what} names a field twice: {fields!r}")
    return fields


#: Fewest molecules per part when a featurizer runs in several processes (``n_jobs``): below, one process.
PART_MIN = 250


#: The error text of a SMILES that RDKit cannot parse (:meth:`MolecularFeaturizer.transform_checked`, a screen's rows).
INVALID_SMILES = "invalid SMILES: RDKit could not parse it"
#: The error text of a SMILES without a heavy atom.
NO_HEAVY_ATOM = "no heavy atom"


def molecule_problem(mol: Any) -> str:
    """Why RDKit's parse ``mol`` of a SMILES makes no graph (:data:`INVALID_SMILES` for None,
    :data:`NO_HEAVY_ATOM`), or '' when it does: a screen's row error."""
    return INVALID_SMILES if mol is None else NO_HEAVY_ATOM if mol.GetNumHeavyAtoms() == 0 else ""


def _featurize_part(
    items: Sequence[Any], titles: Sequence[str] | None, atom_fields: tuple, bond_fields: tuple, graphs: bool,
    descriptors: bool, checked: bool = False,
) -> tuple[list[Graph] | None, np.ndarray | None, tuple[str, ...] | None, list[str] | None]:  # fmt: skip
    """(graphs, raw descriptors, their names, errors) of some molecules: what one process computes. With
    ``checked`` (SMILES strings), a molecule RDKit cannot parse, without a heavy atom or refused by the
    graph's checks is left out, its error text in ``errors`` ('' for the others); else ``errors`` is None."""
    Chem = require_rdkit()
    errors = None
    if checked:
        errors, mols, kept = [], [], []
        for x in items:
            mol = Chem.MolFromSmiles(x)
            errors.append(molecule_problem(mol))
            if not errors[-1]:
                try:
                    kept.append(_graph(mol, atom_fields, bond_fields, None, Chem))
                    mols.append(mol)
                except MgkflowError as exc:
                    errors[-1] = " ".join(str(exc).split())
        out = kept
    else:
        mols = [_mol(x, Chem) for x in items]
        out = None
        if graphs:
            out = [_graph(m, atom_fields, bond_fields, None if titles is None else str(titles[i]), Chem)
                   for i, m in enumerate(mols)]  # fmt: skip
    if not descriptors:
        return out, None, None, errors
    D, names = molecular_descriptors(mols)
    return out, D, names, errors


def _parts(n: int, jobs: int) -> list[tuple[int, int]]:
    """(start, stop) of the parts of n molecules for ``jobs`` processes: up to 4 a process, each of at least
    :data:`PART_MIN` molecules."""
    cuts = np.linspace(0, n, min(4 * jobs, n // PART_MIN) + 1).astype(int)
    return list(zip(cuts[:-1].tolist(), cuts[1:].tolist()))


class MolecularFeaturizer(TransformerMixin, BaseEstimator):
    """Turn SMILES strings or RDKit molecules into labeled graphs with standardized descriptors.

    Parameters
    ----------
    atom_fields : sequence of str
        Node label fields, among :data:`ATOM_FIELDS`. Default :data:`DEFAULT_ATOM_FIELDS`: element,
        charge, aromatic, hybridization, hydrogens, degree, ring_size.
    bond_fields : sequence of str
        Edge label fields, among :data:`BOND_FIELDS`. Default :data:`DEFAULT_BOND_FIELDS`:
        bond_order, aromatic, in_ring.
    descriptors : bool
        Compute RDKit's 2-D descriptors, standardized on the molecules given to ``fit``, as the
        graphs' ``features``. False: graphs without features (``fit`` then learns nothing).
    n_jobs : int or None
        Processes that featurize (joblib; None: 1, -1: every core). RDKit's descriptors take about
        13 ms per molecule on one core; sets of more than :data:`PART_MIN` molecules per process are
        split in parts, each parsed, drawn as graphs and described in its own process. The results
        do not depend on it.

    Attributes
    ----------
    descriptor_names_ : tuple of str
        The descriptors kept by ``fit`` (the columns of ``features``).
    center_, scale_ : ndarray
        The standardization learnt by ``fit`` (after the signed-log transform).

    Examples
    --------
    >>> f = MolecularFeaturizer(descriptors=False)  # doctest: +SKIP
    >>> g, = f.fit_transform(["CC(=O)O"])  # doctest: +SKIP
    >>> g.n_nodes, sorted(g.node_labels)[:3]  # doctest: +SKIP
    (4, ['aromatic', 'charge', 'chirality'])
    """

    def __init__(
        self,
        atom_fields: Sequence[str] = DEFAULT_ATOM_FIELDS,
        bond_fields: Sequence[str] = DEFAULT_BOND_FIELDS,
        descriptors: bool = True,
        n_jobs: int | None = None,
    ) -> None:
        self.atom_fields = atom_fields
        self.bond_fields = bond_fields
        self.descriptors = descriptors
        self.n_jobs = n_jobs

    def __setstate__(self, state: dict) -> None:
        state.setdefault("n_jobs", None)  # a featurizer pickled before n_jobs existed
        super().__setstate__(state)

    def _checked(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        if not isinstance(self.descriptors, bool | np.bool_):
            raise ParameterTypeError(f"descriptors must be True or False, got {self.descriptors!r:.60}")
        return (
            _check_fields(self.atom_fields, ATOM_FIELDS, "atom_fields"),
            _check_fields(self.bond_fields, BOND_FIELDS, "bond_fields"),
        )

    @staticmethod
    def _molecules(X: Any) -> list:
        if isinstance(X, str | bytes) or not isinstance(X, Iterable):
            raise ParameterTypeError(f"X must be a sequence of SMILES strings or RDKit molecules, got {X!r:.60}")
        Chem = require_rdkit()
        mols = [_mol(x, Chem) for x in X]
        if not mols:
            raise ParameterError("X holds no molecule")
        return mols

    def _raw(
        self, X: Any, titles: Sequence[str] | None, graphs: bool, descriptors: bool, checked: bool = False
    ) -> tuple[list[Graph] | None, np.ndarray | None, tuple[str, ...] | None, list[str] | None]:
        """(graphs, raw descriptors, names, errors) of the molecules X, in parts on ``n_jobs`` processes
        (``checked``: see :func:`_featurize_part`)."""
        atom_fields, bond_fields = self._checked()
        if isinstance(X, str | bytes) or not isinstance(X, Iterable):
            raise ParameterTypeError(f"X must be a sequence of SMILES strings or RDKit molecules, got {X!r:.60}")
        items = list(X)
        if not items:
            raise ParameterError("X holds no molecule")
        if checked and not all(isinstance(x, str) for x in items):
            raise ParameterTypeError("smiles must be a sequence of SMILES strings")
        if titles is not None and (isinstance(titles, str | bytes) or not isinstance(titles, Sequence | np.ndarray)):
            raise ParameterTypeError(f"titles must be a sequence of names, got {titles!r:.60}")
        if titles is not None and len(titles) != len(items):
            raise ParameterError(f"titles holds {len(titles)} names for {len(items)} molecules")
        jobs = self._jobs(len(items))
        if jobs <= 1:
            return _featurize_part(items, titles, atom_fields, bond_fields, graphs, descriptors, checked)
        from joblib import Parallel, delayed

        parts = Parallel(n_jobs=jobs)(
            delayed(_featurize_part)(items[a:b], None if titles is None else list(titles[a:b]), atom_fields,
                                     bond_fields, graphs, descriptors, checked)  # fmt: skip
            for a, b in _parts(len(items), jobs)
        )
        out = [g for p in parts for g in p[0]] if graphs else None
        errors = [e for p in parts for e in p[3]] if checked else None
        if not descriptors:
            return out, None, None, errors
        return out, np.vstack([p[1] for p in parts]), parts[0][2], errors

    def _jobs(self, n: int) -> int:
        """Processes for n molecules: ``n_jobs`` (joblib's meaning), at most one per PART_MIN molecules; one
        in a daemonic process (a Dask worker's: it cannot start processes, and the workers are the parallelism)."""
        jobs = getattr(self, "n_jobs", None)
        if jobs is None:
            return 1
        if isinstance(jobs, bool) or not isinstance(jobs, int | np.integer) or jobs == 0:
            raise ParameterError(f"n_jobs must be None or a nonzero integer, got {jobs!r:.60}")
        import multiprocessing

        if multiprocessing.current_process().daemon:  # (joblib would fall to one job with a warning per call)
            return 1
        from joblib import effective_n_jobs

        return max(1, min(effective_n_jobs(int(jobs)), n // PART_MIN))

    @staticmethod
    def _transform_descriptors(D: np.ndarray) -> np.ndarray:
        return np.sign(D) * np.log1p(np.abs(D))

    def fit(self, X: Sequence[Any], y: Any = None) -> MolecularFeaturizer:
        """Learn the descriptors' standardization from the molecules X (SMILES or RDKit molecules)."""
        self._checked()
        _, D, names, _ = self._raw(X, None, False, bool(self.descriptors))
        return self._fit_raw(D, names)

    def _fit_raw(self, D: np.ndarray | None, names: tuple[str, ...] | None) -> MolecularFeaturizer:
        """Learn the standardization from raw descriptors (none without ``descriptors``)."""
        if self.descriptors:
            return self.fit_descriptors(D, names)
        self.descriptor_names_ = ()
        self.n_features_ = 0
        return self

    def transform(self, X: Sequence[Any], titles: Sequence[str] | None = None) -> list[Graph]:
        """Graphs of the molecules X, with standardized descriptors as ``features`` when fitted so.

        Molecules whose descriptors RDKit cannot compute get 0 (the training mean) in those columns.
        """
        self._checked()
        if not hasattr(self, "n_features_"):
            raise ParameterError("this MolecularFeaturizer is not fitted yet: call fit(X) first")
        graphs, D, _, _ = self._raw(X, titles, True, bool(self.n_features_))
        return self._with_features(graphs, D)

    def transform_checked(self, smiles: Sequence[str]) -> tuple[list[Graph], list[str]]:
        """The graphs of the SMILES that make one, and an error text per SMILES ('' where a graph was made),
        each SMILES parsed once: a screen's chunk, where a bad molecule is a row with its reason, not an error.

        RDKit cannot parse it: :data:`INVALID_SMILES`; no heavy atom: :data:`NO_HEAVY_ATOM`; a graph the
        checks refuse: their message. The graphs are :meth:`transform`'s of the others, in order.

        Examples
        --------
        >>> import pytest; _ = pytest.importorskip("rdkit")
        >>> f = MolecularFeaturizer(descriptors=False).fit(["CCO"])
        >>> graphs, errors = f.transform_checked(["CCO", "not a smiles", "[H][H]", "c1ccccc1"])
        >>> [g.n_nodes for g in graphs], errors
        ([3, 6], ['', 'invalid SMILES: RDKit could not parse it', 'no heavy atom', ''])
        """
        self._checked()
        if not hasattr(self, "n_features_"):
            raise ParameterError("this MolecularFeaturizer is not fitted yet: call fit(X) first")
        if isinstance(smiles, str | bytes):
            raise ParameterTypeError(f"smiles must be a sequence of SMILES strings, got {smiles!r:.60}")
        graphs, D, _, errors = self._raw(smiles, None, True, bool(self.n_features_), checked=True)
        return self._with_features(graphs, D), errors

    def fit_transform(self, X: Sequence[Any], y: Any = None, titles: Sequence[str] | None = None) -> list[Graph]:
        """``fit(X).transform(X)`` with each molecule parsed and its descriptors computed once."""
        self._checked()
        graphs, D, names, _ = self._raw(X, titles, True, bool(self.descriptors))
        return self._fit_raw(D, names)._with_features(graphs, D)

    def _with_features(self, graphs: list[Graph], D: np.ndarray | None) -> list[Graph]:
        """The graphs with the rows of D, standardized, as their features (as they are without any)."""
        if not self.n_features_ or D is None:
            return graphs
        return [g.with_features(f) for g, f in zip(graphs, self.scale_descriptors(D))]

    def features(self, X: Sequence[Any]) -> np.ndarray:
        """The standardized descriptor matrix (n, ``n_features_``) of the molecules X."""
        if not hasattr(self, "n_features_"):
            raise ParameterError("this MolecularFeaturizer is not fitted yet: call fit(X) first")
        if not self.n_features_:
            return np.zeros((len(self._molecules(X)), 0))
        return self.scale_descriptors(self._raw(X, None, False, True)[1])

    def fit_descriptors(self, D: np.ndarray, names: Sequence[str]) -> MolecularFeaturizer:
        """Learn the standardization from a raw descriptor matrix (as :func:`molecular_descriptors` gives).

        ``fit(X)`` is ``fit_descriptors(*molecular_descriptors(X))``; this entry lets descriptors
        computed once (where RDKit is) be standardized per training set elsewhere.
        """
        D = np.asarray(D, dtype=np.float64)
        if D.ndim != 2 or D.shape[1] != len(names) or len(D) == 0:
            raise ParameterError(f"descriptors must be an (n, {len(names)}) matrix with n >= 1, got shape {D.shape}")
        T = self._transform_descriptors(D)
        finite = np.all(np.isfinite(T), axis=0)
        center = np.where(finite, np.mean(np.where(np.isfinite(T), T, 0.0), axis=0), 0.0)
        scale = np.where(finite, np.std(np.where(np.isfinite(T), T, 0.0), axis=0), 0.0)
        keep = finite & (scale > 1e-12 * np.maximum(1.0, np.abs(center)))
        self.descriptor_names_ = tuple(n for n, k in zip(names, keep) if k)
        self._columns = np.flatnonzero(keep)
        self.center_, self.scale_ = center[keep], scale[keep]
        self.n_features_ = len(self.descriptor_names_)
        return self

    def scale_descriptors(self, D: np.ndarray) -> np.ndarray:
        """Standardize a raw descriptor matrix with what ``fit`` learnt (non-finite values become 0)."""
        if not hasattr(self, "n_features_"):
            raise ParameterError("this MolecularFeaturizer is not fitted yet: call fit(X) first")
        D = np.asarray(D, dtype=np.float64)
        if not self.n_features_:
            return np.zeros((len(D), 0))
        with np.errstate(invalid="ignore", over="ignore"):
            T = self._transform_descriptors(D[:, self._columns])
            Z = (T - self.center_) / self.scale_
        Z[~np.isfinite(Z)] = 0.0
        return np.clip(Z, -CLIP, CLIP)
