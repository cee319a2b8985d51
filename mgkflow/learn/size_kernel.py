"""Kernels on the size (node count) of graphs: :class:`SizeKernel` and :class:`SizeRatioKernel`.

A normalized graph kernel finds a molecule and a much larger one that contains it alike. Multiplied
by a kernel on their sizes ("molecular-size normalization", as in mgktools), the product compares
both the structure and the size, with the size's weight fitted. Both kernels have ones on the
diagonal, analytic gradients (also for a cross matrix) and compose with every other kernel of
:mod:`mgkflow.learn`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from sklearn.gaussian_process.kernels import Hyperparameter, Kernel, NormalizedKernelMixin

from ..errors import ParameterError, ParameterTypeError
from ..graph import Graph
from ._wrap import check_bounds, check_flag

__all__ = ["SizeKernel", "SizeRatioKernel", "graph_sizes"]


def graph_sizes(X: Any) -> np.ndarray:
    """The node counts of a sequence of graphs as floats (a 1-D or (n, 1) array of sizes passes through).

    Examples
    --------
    >>> graph_sizes([Graph(np.zeros((3, 3))), Graph(np.zeros((1, 1)))]).tolist()
    [3.0, 1.0]
    """
    if isinstance(X, np.ndarray) and X.dtype != object:
        n = np.asarray(X, dtype=np.float64)
        if n.ndim == 2 and n.shape[1] == 1:
            n = n[:, 0]
        if n.ndim != 1:
            raise ParameterError(f"size kernel: an array of sizes must be 1-D or (n, 1), got shape {n.shape}")
    else:
        if isinstance(X, Graph | str | bytes) or not isinstance(X, Sequence | np.ndarray):
            raise ParameterTypeError(f"size kernel: X must be a sequence of graphs, got {type(X).__name__}")
        bad = [i for i, g in enumerate(X) if not isinstance(g, Graph)]
        if bad:
            raise ParameterTypeError(f"size kernel: item {bad[0]} of X is a {type(X[bad[0]]).__name__}, not a Graph")
        n = np.array([g.n_nodes for g in X], dtype=np.float64)
    if not np.all(np.isfinite(n) & (n > 0)):
        raise ParameterError("size kernel: sizes must be finite and > 0")
    return n


def _positive(v: Any, who: str, name: str) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float | np.integer | np.floating) or not 0 < v < np.inf:
        raise ParameterError(f"{who}: {name} must be a number > 0, got {v!r:.60}")
    return float(v)


class _SizeBase(NormalizedKernelMixin, Kernel):
    """What both size kernels share: one positive hyperparameter, the sizes, the gradient's shape."""

    _name = ""

    @property
    def requires_vector_input(self) -> bool:
        return False

    def is_stationary(self) -> bool:
        return False

    def diag(self, X: Any) -> np.ndarray:
        return np.ones(len(graph_sizes(X)))

    def _value(self) -> float:
        return _positive(getattr(self, self._name), type(self).__name__, self._name)

    def _fixed(self) -> bool:
        b = getattr(self, self._name + "_bounds")
        return isinstance(b, str) and b == "fixed"

    @property
    def theta(self) -> np.ndarray:
        v = self._value()  # a clear error for a hyperparameter that is no positive number (not numpy's)
        check_bounds(getattr(self, self._name + "_bounds"), type(self).__name__, self._name + "_bounds")
        return np.empty(0) if self._fixed() else np.log([v])

    @theta.setter
    def theta(self, theta: np.ndarray) -> None:
        Kernel.theta.fset(self, theta)

    @property
    def bounds(self) -> np.ndarray:
        check_bounds(getattr(self, self._name + "_bounds"), type(self).__name__, self._name + "_bounds")
        return Kernel.bounds.fget(self)

    def _evaluate(self, a: np.ndarray, b: np.ndarray, v: float) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def __call__(self, X: Any, Y: Any = None, eval_gradient: bool = False):
        """K(X, X) or K(X, Y); with ``eval_gradient`` also dK (N, M, 1 or 0) by the log of the
        hyperparameter, for a cross matrix too."""
        eval_gradient = check_flag(eval_gradient, "eval_gradient", type(self).__name__)
        v = self._value()
        check_bounds(getattr(self, self._name + "_bounds"), type(self).__name__, self._name + "_bounds")
        a = graph_sizes(X)
        b = a if Y is None else graph_sizes(Y)
        K, dK = self._evaluate(a, b, v)
        if not eval_gradient:
            return K
        return K, (np.empty(K.shape + (0,)) if self._fixed() else dK[:, :, None])

    def __repr__(self) -> str:
        v = getattr(self, self._name)
        return (
            f"{type(self).__name__}({self._name}={v:.4g})"
            if isinstance(v, int | float)
            else (f"{type(self).__name__}({self._name}={v!r:.60})")
        )


class SizeKernel(_SizeBase):
    """exp(−(n − n′)² / (2ℓ²)) of the node counts n, n′ of two graphs: an RBF on size.

    Positive semi-definite for every ℓ > 0 (an RBF kernel of one number). Hyperparameter
    ``length_scale`` ℓ, in nodes.

    Parameters
    ----------
    length_scale : float
        ℓ > 0. Default 10.
    length_scale_bounds : (float, float) or "fixed"
        Default (0.5, 1000).

    Examples
    --------
    >>> gs = [Graph(np.zeros((n, n))) for n in (2, 4)]
    >>> SizeKernel(2.0)(gs).round(4)
    array([[1.    , 0.6065],
           [0.6065, 1.    ]])
    >>> K, dK = SizeKernel(2.0)(gs, eval_gradient=True)  # d/d log ℓ = K (n − n′)² / ℓ²
    >>> float(dK[0, 1, 0].round(4))
    0.6065
    """

    _name = "length_scale"

    def __init__(self, length_scale: float = 10.0, length_scale_bounds: Any = (0.5, 1000.0)) -> None:
        self.length_scale = length_scale
        self.length_scale_bounds = length_scale_bounds

    @property
    def hyperparameter_length_scale(self) -> Hyperparameter:
        return Hyperparameter(
            "length_scale", "numeric", check_bounds(self.length_scale_bounds, "SizeKernel", "length_scale_bounds")
        )

    def _evaluate(self, a: np.ndarray, b: np.ndarray, v: float) -> tuple[np.ndarray, np.ndarray]:
        D = (a[:, None] - b[None, :]) ** 2 / (v * v)
        K = np.exp(-0.5 * D)
        return K, K * D


class SizeRatioKernel(_SizeBase):
    """(min(n, n′) / max(n, n′))^α of the node counts n, n′ of two graphs.

    It equals exp(−α |log n − log n′|), the exponential (Laplace) kernel of log n, so it is
    positive semi-definite for every α > 0. Unlike :class:`SizeKernel` it compares sizes by their
    ratio: 5 and 10 nodes are as far apart as 50 and 100. Hyperparameter ``alpha`` α.

    Parameters
    ----------
    alpha : float
        α > 0. Default 1.
    alpha_bounds : (float, float) or "fixed"
        Default (0.01, 100).

    Examples
    --------
    >>> gs = [Graph(np.zeros((n, n))) for n in (2, 4)]
    >>> SizeRatioKernel(2.0)(gs)
    array([[1.  , 0.25],
           [0.25, 1.  ]])
    >>> K, dK = SizeRatioKernel(2.0)(gs, eval_gradient=True)  # d/d log α = α log(ratio) K
    >>> float(dK[0, 1, 0].round(4))
    -0.3466
    """

    _name = "alpha"

    def __init__(self, alpha: float = 1.0, alpha_bounds: Any = (0.01, 100.0)) -> None:
        self.alpha = alpha
        self.alpha_bounds = alpha_bounds

    @property
    def hyperparameter_alpha(self) -> Hyperparameter:
        return Hyperparameter("alpha", "numeric", check_bounds(self.alpha_bounds, "SizeRatioKernel", "alpha_bounds"))

    def _evaluate(self, a: np.ndarray, b: np.ndarray, v: float) -> tuple[np.ndarray, np.ndarray]:
        d = np.abs(np.log(a)[:, None] - np.log(b)[None, :])
        K = np.exp(-v * d)
        return K, -v * d * K
