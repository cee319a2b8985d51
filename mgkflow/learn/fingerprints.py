"""Molecular fingerprints (RDKit, where it is installed) for fingerprint baselines."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["morgan_fingerprints"]


def morgan_fingerprints(smiles: Sequence[str], radius: int = 2, n_bits: int = 2048) -> np.ndarray | None:
    """Morgan bit vectors (uint8, one row per SMILES), or None when RDKit is not installed.

    Parameters
    ----------
    smiles : sequence of str
        The molecules; one that RDKit cannot parse raises ``ValueError``.
    radius : int
        Morgan radius (2: ECFP4-like).
    n_bits : int
        Length of each bit vector.

    Examples
    --------
    >>> fp = morgan_fingerprints(["CCO", "c1ccccc1"])
    >>> fp is None or fp.shape == (2, 2048)
    True
    """
    try:
        from rdkit import Chem, RDLogger
        from rdkit.Chem import rdFingerprintGenerator
    except ImportError:
        return None
    from ..errors import GraphError, ParameterTypeError
    from ..gram import _args

    radius = _args.count(radius, "radius", hi=64)
    n_bits = _args.count(n_bits, "n_bits", lo=1, hi=2**24)
    if isinstance(smiles, (str, bytes)) or not hasattr(smiles, "__len__") or hasattr(smiles, "columns"):
        raise ParameterTypeError(f"smiles must be a sequence of SMILES strings, got {type(smiles).__name__}")
    for i, smi in enumerate(smiles):
        if not isinstance(smi, str):
            raise ParameterTypeError(f"smiles[{i}] must be a string, got {type(smi).__name__}")
    RDLogger.DisableLog("rdApp.*")
    gen = rdFingerprintGenerator.GetMorganGenerator(radius=radius, fpSize=n_bits)
    out = np.zeros((len(smiles), n_bits), dtype=np.uint8)
    for i, smi in enumerate(smiles):
        mol = Chem.MolFromSmiles(smi)
        if mol is None:
            raise GraphError(f"RDKit cannot parse SMILES {smi!r} (molecule {i})")
        out[i] = gen.GetFingerprintAsNumPy(mol)
    return out
