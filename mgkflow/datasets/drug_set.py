"""The ``drugs`` set: ChEMBL approved drugs, read from ``drugs_graphs.npz`` in :func:`~mgkflow.datasets.data_dir`.

The data file and the script that builds it (``build_drugs.py``) are in the repository's ``datasets/``
folder (``mgkflow/data`` in a wheel); this module only reads the file.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ..graph import Graph
from . import _args
from ._common import _molecule_graphs, _select, data_dir

__all__ = ["drugs"]


@lru_cache(maxsize=1)
def _drug_arrays() -> dict[str, np.ndarray]:
    path = data_dir() / "drugs_graphs.npz"
    if not path.exists():
        raise FileNotFoundError(f"drugs dataset file {path} is missing; rebuild with datasets/build_drugs.py")
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    for a in arrays.values():
        a.setflags(write=False)
    return arrays


def drugs(n_graphs: int | None = None, coords: bool = True) -> list[Graph]:
    """ChEMBL approved small-molecule drugs as molecular graphs (heavy atoms, RDKit conventions).

    Read from the precomputed ``datasets/drugs_graphs.npz`` (numpy only, no
    RDKit). Molecules come in ChEMBL-id order; the graphs equal
    ``Graph.from_smiles(smiles)`` for the SMILES in ``datasets/drugs.csv``
    (see :mod:`mgkflow.io.rdkit` for the label fields), plus 2-D depiction
    coordinates. Titles are ``"NAME (CHEMBLxxx)"``.

    Parameters
    ----------
    n_graphs : int, optional
        Return the first ``n_graphs`` molecules (all when None).
    coords : bool
        Attach RDKit 2-D depiction coordinates (Å-like units) as ``Graph.coords``.

    Returns
    -------
    list of Graph
        Node labels ``element``, ``charge``, ``aromatic``, ``hybridization``;
        edge labels ``bond_order`` (1, 1.5, 2, 3), ``conjugated``, ``in_ring``;
        unit edge weights.

    Examples
    --------
    >>> gs = drugs(n_graphs=2)
    >>> gs[0].title
    'PRAZOSIN (CHEMBL2)'
    >>> sorted(gs[0].edge_labels)
    ['bond_order', 'conjugated', 'in_ring']
    """
    coords = _args.flag("drugs", "coords", coords)
    z = _drug_arrays()
    count = _select(len(z["n_nodes"]), n_graphs, "drugs")
    titles = [f"{z['name'][k]} ({z['chembl_id'][k]})" for k in range(count)]
    return _molecule_graphs(z, np.arange(count), titles, coords=z["coords"] if coords else None)
