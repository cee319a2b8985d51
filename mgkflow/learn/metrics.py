"""Scores of regression predictions."""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.metrics import mean_absolute_error, mean_squared_error, r2_score

from ..errors import ParameterError, ParameterTypeError

__all__ = ["regression_metrics"]


def _vector(values: Any, what: str) -> np.ndarray:
    """A finite float vector; ParameterTypeError/ParameterError otherwise."""
    if values is None or isinstance(values, (str, bytes)) or np.ndim(values) == 0:
        raise ParameterTypeError(f"{what} must be a 1-D array of numbers, got {type(values).__name__}")
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ParameterTypeError(f"{what} must be a 1-D array of numbers: {exc}") from None
    if arr.ndim != 1 or not np.all(np.isfinite(arr)):
        raise ParameterError(f"{what} must be a 1-D array of finite numbers, got shape {arr.shape}")
    return arr


def regression_metrics(y: np.ndarray, p: np.ndarray) -> dict[str, float]:
    """RMSE, MAE and R² of predictions ``p`` of targets ``y``, as ``{"rmse", "mae", "r2"}`` floats.

    R² is NaN for a single target (it is not defined there).

    Examples
    --------
    >>> import numpy as np
    >>> m = regression_metrics(np.array([1.0, 2.0, 3.0]), np.array([1.0, 2.0, 5.0]))
    >>> {k: round(v, 4) for k, v in m.items()}
    {'rmse': 1.1547, 'mae': 0.6667, 'r2': -1.0}
    >>> regression_metrics(np.array([1.0]), np.array([2.0]))["r2"]
    nan
    """
    y, p = _vector(y, "y"), _vector(p, "p")
    if y.shape != p.shape or not y.size:
        raise ParameterError(f"y and p must be non-empty and of one length, got {y.shape} and {p.shape}")
    return {
        "rmse": float(np.sqrt(mean_squared_error(y, p))),
        "mae": float(mean_absolute_error(y, p)),
        "r2": float(r2_score(y, p)) if len(y) > 1 else float("nan"),
    }
