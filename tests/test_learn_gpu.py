"""The learning kernels on the GPU against the CPU (marker ``gpu``, skipped without a device).

The default molecular covariance with every graph-kernel hyperparameter free: K and dK from the
GPU backend agree with the float64 CPU engine to 1e-5 normwise, and a fitted MolecularGPR predicts
the same on both backends.
"""

from __future__ import annotations

import numpy as np
import pytest

from mgkflow import datasets
from mgkflow.learn import MolecularGPR, molecular_kernel

pytestmark = pytest.mark.gpu


def _graphs(n: int = 40):
    return datasets.freesolv(n_graphs=n).graphs


def _normwise(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def test_molecular_kernel_gradient_gpu_matches_cpu():
    X = _graphs()
    fields = ("element", "aromatic", "charge", "hybridization", "hydrogens")
    views = ((fields, ("bond_order", "in_ring")),)
    kg = molecular_kernel(views, descriptors=False, fit_graph_kernel=True, backend="gpu")
    kc = molecular_kernel(views, descriptors=False, fit_graph_kernel=True, backend="cpu")
    Kg, dKg = kg(X, eval_gradient=True)
    Kc, dKc = kc(X, eval_gradient=True)
    assert dKg.shape == dKc.shape and dKg.shape[2] == len(kc.theta)
    assert _normwise(Kg, Kc) <= 1e-5
    assert _normwise(dKg, dKc) <= 1e-5
    for j in range(dKc.shape[2]):  # each hyperparameter's slice, relative to the whole gradient
        assert np.linalg.norm(dKg[:, :, j] - dKc[:, :, j]) <= 1e-5 * np.linalg.norm(dKc)


def test_molecular_gpr_gpu_predicts_as_cpu():
    data = datasets.freesolv(n_graphs=60)
    fields = dict(
        views=((("element", "aromatic", "charge", "hybridization", "hydrogens"), ("bond_order", "in_ring")),),
        descriptors=False,
        verbose=0,
        n_restarts=0,
    )
    Xtr, ytr, Xte = data.graphs[:45], data.y[:45], data.graphs[45:]
    pg = MolecularGPR(backend="gpu", **fields).fit(Xtr, ytr).predict(Xte)
    pc = MolecularGPR(backend="cpu", **fields).fit(Xtr, ytr).predict(Xte)
    assert np.max(np.abs(pg - pc)) <= 1e-3 * max(1.0, float(np.max(np.abs(pc))))
