"""Cost models of the XMV strategies: seconds per XMV, linear in a strategy's features.

A model is ``t = intercept + sum_k coef_k * feature_k`` with non-negative coefficients,
fitted (:func:`fit`) to per-XMV times measured on one GPU model by ``python -m
mgkflow.bench.gpu_calibrate`` and stored per GPU model under
``~/.cache/mgkflow/cost/`` (or ``$MGKFLOW_COST_MODELS``) by :func:`save_models`;
:func:`load_models` reads that folder, then the models shipped with the package
(``mgkflow/gpu/strategies/calibrated/``, measured calibrations committed to the repository),
and returns None where nothing was measured (the chooser then falls back to the strategies'
fixed ranks). Nothing here needs a GPU.

Examples
--------
>>> rows = [{"a": float(a), "b": float(b), "seconds": 1e-3 + 2e-9 * a + 5e-9 * b} for a in (1e5, 1e6, 4e6)
...         for b in (1e4, 3e5)]
>>> m = fit("demo", ("a", "b"), rows)
>>> round(m.predict({"a": 2e6, "b": 1e5}) * 1e3, 3)
5.5
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

__all__ = ["CostModel", "fit", "cost_dir", "save_models", "load_models"]


@dataclass(frozen=True)
class CostModel:
    """Seconds per XMV of one strategy: ``intercept + coef . features`` (see the module docstring)."""

    strategy: str
    features: tuple[str, ...]
    coef: tuple[float, ...]
    intercept: float
    #: calibration figures: pairs fitted, median relative error of the fit
    n_fit: int = 0
    median_rel_err: float = float("nan")

    def predict(self, feats: Mapping[str, float]) -> float:
        missing = [f for f in self.features if f not in feats]
        if missing:
            raise KeyError(f"cost model of {self.strategy!r} needs features {missing}")
        return float(self.intercept + sum(c * float(feats[f]) for c, f in zip(self.coef, self.features, strict=True)))


def fit(
    strategy: str, features: Sequence[str], rows: Sequence[Mapping[str, float]], target: str = "seconds"
) -> CostModel:
    """Non-negative least squares of ``target`` on ``[1, features]``, relative errors weighted
    equally (each row scaled by 1 / its target), so small and large pairs both count."""
    from scipy.optimize import nnls

    feats = tuple(features)
    if len(rows) < len(feats) + 1:
        raise ValueError(f"{strategy}: {len(rows)} measurements cannot fit {len(feats) + 1} parameters")
    X = np.array([[1.0, *(float(r[f]) for f in feats)] for r in rows])
    y = np.array([float(r[target]) for r in rows])
    if not (np.all(np.isfinite(X)) and np.all(np.isfinite(y)) and np.all(y > 0)):
        raise ValueError(f"{strategy}: features and times must be finite, times positive")
    scale = X.max(axis=0)
    scale[scale == 0] = 1.0
    w = 1.0 / y
    sol, _ = nnls((X / scale) * w[:, None], y * w)
    theta = sol / scale
    pred = X @ theta
    err = float(np.median(np.abs(pred - y) / y))
    return CostModel(strategy, feats, tuple(float(v) for v in theta[1:]), float(theta[0]), len(rows), err)


def cost_dir() -> Path:
    """Folder of the stored cost models (``$MGKFLOW_COST_MODELS`` or ``~/.cache/mgkflow/cost``)."""
    env = os.environ.get("MGKFLOW_COST_MODELS")
    return Path(env) if env else Path.home() / ".cache" / "mgkflow" / "cost"


def _path(device_name: str, folder: Path | None) -> Path:
    slug = re.sub(r"[^A-Za-z0-9]+", "_", device_name).strip("_").lower() or "device"
    return (folder or cost_dir()) / f"cost_{slug}.json"


def save_models(models: Mapping[str, CostModel], device_name: str, folder: Path | None = None) -> Path:
    """Write the models of one GPU model (JSON); returns the path."""
    path = _path(device_name, folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"device": device_name, "models": {k: asdict(m) for k, m in models.items()}}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2))
    tmp.replace(path)
    return path


#: Calibrations shipped with the package (one JSON per GPU model, as :func:`save_models` writes).
SHIPPED = Path(__file__).with_name("calibrated")


def load_models(device_name: str, folder: Path | None = None) -> dict[str, CostModel] | None:
    """The models stored for a GPU model (``folder``, default the user cache, then the shipped
    calibrations), or None."""
    path = _path(device_name, folder)
    if not path.is_file() and folder is None:
        path = _path(device_name, SHIPPED)
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
        out = {}
        for k, m in data["models"].items():
            m["features"], m["coef"] = tuple(m["features"]), tuple(m["coef"])
            out[k] = CostModel(**m)
        return out
    except (OSError, ValueError, KeyError, TypeError):
        return None
