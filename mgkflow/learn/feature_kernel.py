"""A scikit-learn vector kernel applied to the graphs' graph-level ``features``: :class:`FeatureKernel`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from sklearn.gaussian_process.kernels import RBF

from ..errors import ParameterError, ParameterTypeError
from ._wrap import KernelWrapper, check_flag, input_key, kept_inputs

__all__ = ["FeatureKernel"]


def _features(X: Any) -> np.ndarray:
    if isinstance(X, np.ndarray) and X.dtype != object:
        if X.ndim != 2:
            raise ParameterError(f"FeatureKernel: a feature array must be 2-D, got shape {X.shape}")
        return np.asarray(X, dtype=np.float64)
    if isinstance(X, str) or not isinstance(X, Sequence | np.ndarray):
        raise ParameterTypeError(f"FeatureKernel: X must be a sequence of graphs, got {type(X).__name__}")
    rows = []
    for i, g in enumerate(X):
        f = getattr(g, "features", None)
        if f is None:
            raise ParameterError(
                f"FeatureKernel: graph {i} ({getattr(g, 'title', None) or type(g).__name__}) has no features; "
                "build the graphs with a MolecularFeaturizer(descriptors=True) or Graph.with_features"
            )
        rows.append(f)
    if not rows:
        return np.zeros((0, 0))
    dims = {len(r) for r in rows}
    if len(dims) != 1:
        raise ParameterError(f"FeatureKernel: the graphs' feature vectors differ in length: {sorted(dims)[:5]}")
    return np.vstack(rows)


class FeatureKernel(KernelWrapper):
    """A vector kernel (RBF by default) on the graph-level feature vectors of graphs.

    ``FeatureKernel(k)(X)`` is ``k(F)`` with ``F`` the stacked ``features`` of the graphs in X, so
    it composes with :class:`~mgkflow.MarginalizedGraphKernel` by ``*`` and ``+`` into one
    scikit-learn kernel over graphs, with analytic gradients throughout. Its hyperparameters are
    those of ``k`` (named ``kernel__NAME``). An ARD variant is ``FeatureKernel(RBF(np.ones(d)))``.

    Parameters
    ----------
    kernel : sklearn.gaussian_process.kernels.Kernel, optional
        The kernel on feature vectors. Default ``RBF(10.0, length_scale_bounds=(0.1, 1e3))``, a
        length scale suited to standardized descriptors (about 200 of them).

    Examples
    --------
    >>> import numpy as np
    >>> from mgkflow import Graph
    >>> g = Graph(np.zeros((1, 1)), features=[0.0, 1.0])
    >>> h = Graph(np.zeros((1, 1)), features=[0.0, 3.0])
    >>> FeatureKernel(RBF(2.0))([g, h]).round(4)
    array([[1.    , 0.6065],
           [0.6065, 1.    ]])
    """

    def __init__(self, kernel: Any = None) -> None:
        super().__init__(RBF(10.0, length_scale_bounds=(0.1, 1e3)) if kernel is None else kernel)

    @property
    def requires_vector_input(self) -> bool:
        return False

    def _checked(self, F: np.ndarray) -> np.ndarray:
        """F, if the wrapped kernel's length scales (ARD) fit its columns."""
        scale = getattr(self.kernel, "length_scale", None)
        if len(F) and np.ndim(scale) == 1 and len(scale) != F.shape[1]:
            raise ParameterError(f"FeatureKernel: the kernel has {len(scale)} length scales for {F.shape[1]} features")
        return F

    def __call__(self, X, Y=None, eval_gradient=False):
        eval_gradient = check_flag(eval_gradient, "eval_gradient", "FeatureKernel")
        if Y is not None and eval_gradient:
            raise ParameterError("FeatureKernel: the gradient is only available when Y is None")
        if Y is None and self.isotropic_rbf():
            return self._rbf(X, eval_gradient)
        A = self._checked(_features(X))
        if Y is None:
            return self.kernel(A, eval_gradient=eval_gradient)
        B = self._checked(_features(Y))
        if not (len(A) and len(B)):
            return np.zeros((len(A), len(B)))
        if A.shape[1] != B.shape[1]:
            raise ParameterError(f"FeatureKernel: X has {A.shape[1]} features per graph, Y has {B.shape[1]}")
        return self.kernel(A, B)

    def _rbf(self, X, eval_gradient):
        """The isotropic RBF of X with X from squared distances kept between calls on the same X
        (a GP fit evaluates it at every optimizer step; only the length scale changes)."""
        scaled = self.squared_distances(X) / float(self.kernel.length_scale) ** 2
        K = np.exp(-0.5 * scaled)
        if not eval_gradient:
            return K
        if self.kernel.hyperparameter_length_scale.fixed:
            return K, np.empty((len(K), len(K), 0))
        return K, (K * scaled)[:, :, None]

    def squared_distances(self, X: Any) -> np.ndarray:
        """‖fᵢ − fⱼ‖² of X's feature vectors (n × n, read-only), kept while X is the same."""
        key = input_key(X)
        last = getattr(self, "_distances", None)
        if last is None or key is None or last[0] != key:
            F = _features(X)
            sq = np.sum(F * F, axis=1)
            D = np.maximum(sq[:, None] + sq[None, :] - 2.0 * (F @ F.T), 0.0)
            np.fill_diagonal(D, 0.0)
            D.flags.writeable = False
            self._distances = last = (key, D, kept_inputs(X))
        return last[1]

    def isotropic_rbf(self) -> bool:
        """Whether the wrapped kernel is an RBF with one length scale (the case with kept distances)."""
        return type(self.kernel) is RBF and np.ndim(self.kernel.length_scale) == 0

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state.pop("_distances", None)
        return state

    def diag(self, X):
        return self.kernel.diag(self._checked(_features(X)))
