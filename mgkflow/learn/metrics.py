"""Scores of regression predictions."""

from __future__ import annotations

import numpy as np
from sklearn.metrics import mean_absolute_error, mean_squared_error, r2_score

__all__ = ["regression_metrics"]


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
    return {
        "rmse": float(np.sqrt(mean_squared_error(y, p))),
        "mae": float(mean_absolute_error(y, p)),
        "r2": float(r2_score(y, p)) if len(y) > 1 else float("nan"),
    }
