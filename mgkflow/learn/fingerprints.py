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
    RDLogger.DisableLog("rdApp.*")
    gen = rdFingerprintGenerator.GetMorganGenerator(radius=radius, fpSize=n_bits)
    out = np.zeros((len(smiles), n_bits), dtype=np.uint8)
    for i, smi in enumerate(smiles):
        mol = Chem.MolFromSmiles(smi)
        if mol is None:
            raise ValueError(f"RDKit cannot parse SMILES {smi!r} (molecule {i})")
        out[i] = gen.GetFingerprintAsNumPy(mol)
    return out
