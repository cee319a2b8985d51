"""What learning on graphs needs beside the kernel: scikit-learn kernels, scores, splits, fingerprints.

:class:`~mgkflow.MarginalizedGraphKernel` is itself a scikit-learn kernel; this package holds
the pieces a model built on it (Gaussian-process or kernel ridge regression) uses around it.

=============================== ========================================================
name                            what it is
=============================== ========================================================
:class:`Normalized`             k(x, y) / sqrt(k(x, x) k(y, y)) for any scikit-learn
                                kernel, with its θ-gradient
:class:`Tanimoto`               Tanimoto (Jaccard) kernel of count or bit vectors
:func:`regression_metrics`      RMSE, MAE and R² of predictions
:func:`kfold_splits`            shuffled K-fold train/test indices over several seeds
:func:`labelled_split`          train/test indices from a per-sample split label
:func:`morgan_fingerprints`     RDKit Morgan bit vectors of SMILES (None without RDKit)
:class:`GraphGPR`               Gaussian-process regression fitted by the evidence or by
                                leave-one-out (:mod:`.objectives`), with restarts and
                                a progress line per optimizer step
:class:`MolecularGPR`           the one-line model on SMILES: featurization, graph kernel
                                and descriptors, fitted hyperparameters
:func:`molecular_kernel`        its default covariance, a scikit-learn kernel over graphs
:class:`MolecularFeaturizer`    SMILES or RDKit molecules to graphs with atom, bond and
                                descriptor features
:func:`molecular_descriptors`   RDKit's 2-D descriptors as an array
:class:`FeatureKernel`          a vector kernel on the graphs' graph-level ``features``
:class:`ExpSimilarity`          exp(γ (k − 1)) of a normalized kernel, γ fitted
:class:`Cached`                 a kernel that remembers its last Gram matrix
:class:`StartProbabilities`     a graph kernel with a fitted start probability per
                                node-label class (element), from nodal similarities
                                solved once
:class:`SizeKernel`             RBF on the graphs' node counts
:class:`SizeRatioKernel`        (min(n, n′) / max(n, n′))^α of the node counts
:class:`LowRankGPR`             Gaussian-process regression on m landmarks (Nyström; VFE,
                                DTC or FITC), O(n·m²) time and O(n·m) memory
:func:`pivoted_cholesky`        landmarks by greedy pivoted Cholesky of the kernel
:func:`kmeans_plus_plus`        landmarks by k-means++ seeding in the kernel's feature space
:func:`random_landmarks`        landmarks drawn uniformly
:func:`cross_kernel`            K(X, Y) and its θ-gradient for any kernel (no white noise)
:func:`kernel_diag`             k(x, x) with and without white noise, with gradients
:func:`contracted_gradient`     Σᵢⱼ Wᵢⱼ ∂Kᵢⱼ/∂θ evaluated in row blocks
:func:`save_model`              a fitted model to a versioned model file (``mgkflow fit``)
:func:`load_model`              a model file back, refused from an incompatible version
:func:`screen`                  mean and std over a large SMILES file, streamed and
                                resumable (``mgkflow predict``)
=============================== ========================================================

Examples
--------
>>> import numpy as np
>>> from mgkflow.learn import Tanimoto, regression_metrics
>>> round(float(Tanimoto()(np.array([[1, 1, 0], [0, 1, 1]]))[0, 1]), 4)
0.3333
>>> round(regression_metrics(np.array([1.0, 2.0, 3.0]), np.array([1.0, 2.0, 4.0]))["mae"], 4)
0.3333
"""

from .cached import Cached
from .contract import contracted_gradient, cross_kernel, kernel_diag
from .exp_similarity import ExpSimilarity
from .feature_kernel import FeatureKernel
from .featurize import MolecularFeaturizer, molecular_descriptors
from .fingerprints import morgan_fingerprints
from .gpr import GraphGPR
from .landmarks import kmeans_plus_plus, pivoted_cholesky, random_landmarks
from .lowrank import LowRankGPR
from .metrics import regression_metrics
from .model_file import load_model, save_model
from .molecular import MolecularGPR, molecular_kernel
from .normalized import Normalized
from .screening import screen
from .size_kernel import SizeKernel, SizeRatioKernel
from .splits import kfold_splits, labelled_split
from .start_probability import StartProbabilities
from .tanimoto import Tanimoto

__all__ = [
    "Normalized",
    "Tanimoto",
    "regression_metrics",
    "kfold_splits",
    "labelled_split",
    "morgan_fingerprints",
    "GraphGPR",
    "MolecularGPR",
    "molecular_kernel",
    "MolecularFeaturizer",
    "molecular_descriptors",
    "FeatureKernel",
    "ExpSimilarity",
    "Cached",
    "StartProbabilities",
    "SizeKernel",
    "SizeRatioKernel",
    "LowRankGPR",
    "save_model",
    "load_model",
    "screen",
    "pivoted_cholesky",
    "kmeans_plus_plus",
    "random_landmarks",
    "cross_kernel",
    "kernel_diag",
    "contracted_gradient",
]
