"""The scikit-learn side shared by the kernels that wrap one kernel (:class:`Normalized`, ...)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from sklearn.gaussian_process.kernels import Hyperparameter, Kernel

from ..errors import ParameterError, ParameterTypeError


def check_flag(value: Any, name: str, who: str) -> bool:
    """``value`` as a bool; a :class:`ParameterTypeError` unless it is True or False."""
    if not isinstance(value, bool | np.bool_):
        raise ParameterTypeError(f"{who}: {name} must be True or False, got {value!r:.60}")
    return bool(value)


def check_bounds(b: Any, who: str, name: str) -> Any:
    """A hyperparameter's bounds: "fixed", or a pair 0 < low <= high < inf as floats; a clear
    :class:`ParameterTypeError` / :class:`ParameterError` naming ``who`` and ``name`` otherwise.

    Examples
    --------
    >>> check_bounds((1, 10), "ExpSimilarity", "gamma_bounds"), check_bounds("fixed", "k", "b")
    ((1.0, 10.0), 'fixed')
    """
    if isinstance(b, str) and b == "fixed":
        return b
    try:
        lo, hi = (float(v) for v in np.asarray(b, dtype=np.float64).reshape(2))
    except (TypeError, ValueError):
        raise ParameterTypeError(f'{who}: {name} must be "fixed" or a pair (low, high), got {b!r:.60}') from None
    if not 0 < lo <= hi < np.inf:
        raise ParameterError(f"{who}: {name} must satisfy 0 < low <= high < inf, got {b!r:.60}")
    return (lo, hi)


class KernelWrapper(Kernel):
    """A kernel whose hyperparameters are those of the one it wraps, named ``kernel__NAME``."""

    def __init__(self, kernel: Any) -> None:
        if not callable(kernel) or not hasattr(kernel, "diag") or not hasattr(kernel, "theta"):
            raise ParameterTypeError(
                f"{type(self).__name__} needs a scikit-learn kernel (callable, with diag and theta), "
                f"got {type(kernel).__name__}"
            )
        self.kernel = kernel

    def get_params(self, deep: bool = True) -> dict:
        params = {"kernel": self.kernel}
        if deep:
            params.update(("kernel__" + k, v) for k, v in self.kernel.get_params().items())
        return params

    @property
    def hyperparameters(self) -> list:
        return [
            Hyperparameter("kernel__" + h.name, h.value_type, h.bounds, h.n_elements, h.fixed)
            for h in self.kernel.hyperparameters
        ]

    @property
    def theta(self) -> np.ndarray:
        return self.kernel.theta

    @theta.setter
    def theta(self, theta: np.ndarray) -> None:
        self.kernel.theta = theta

    @property
    def bounds(self) -> np.ndarray:
        return self.kernel.bounds

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self.kernel == other.kernel  # type: ignore[attr-defined]

    def is_stationary(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.kernel!r})"


def input_key(X: Any) -> tuple | None:
    """What identifies X: an array's shape, dtype and bytes (it may change in place), the
    identities of a sequence's items; None (not cached) for anything else, left to the kernel."""
    if isinstance(X, np.ndarray) and X.dtype != object:
        return (X.shape, X.dtype.str, X.tobytes())
    if isinstance(X, Sequence | np.ndarray) and not isinstance(X, str | bytes):
        return tuple(map(id, X))
    return None


def kept_inputs(X: Any) -> list | None:
    """A copy of a sequence's items, kept with the cache so that their identities stay theirs."""
    return None if X is None or (isinstance(X, np.ndarray) and X.dtype != object) else list(X)
