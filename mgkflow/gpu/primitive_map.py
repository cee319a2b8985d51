"""Selection maps of the octile-pair primitives (which primitive to run for an octile pair).

A map is a (65, 65) uint8 array: ``map[k1, k2]`` is the primitive (index into
:data:`PRIMITIVES`) for a pair of octiles with ``k1`` and ``k2`` nonzeros. Maps are
measured on the present GPU by ``mgkflow bench primitives`` (unlabeled and labeled edge
kernels apart) and cached per GPU model under ``~/.cache/mgkflow/primitives/`` (or
``$MGKFLOW_PRIMITIVE_MAPS``); nothing here is a guess: without a measured map the solver
uses sparse x sparse everywhere.

No PyCUDA needed (the CPU side of the benchmark and the tests use this module); a
:class:`DeviceMaps` uploads the map of a backend's calls (:mod:`mgkflow.gpu.device`).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import numpy as np

from . import device

__all__ = [
    "PRIMITIVES",
    "constant_map",
    "map_from_timings",
    "map_dir",
    "map_path",
    "save_map",
    "load_map",
    "DeviceMaps",
]

#: Primitive names, in the order of their ids in ``octile_primitives.cuh`` (PRIM_SS = 0, ...).
PRIMITIVES = ("ss", "dd", "ds", "sd")


def constant_map(primitive: str) -> np.ndarray:
    """A map that runs one primitive everywhere.

    Examples
    --------
    >>> int(constant_map("dd")[10, 20])
    1
    """
    if primitive not in PRIMITIVES:
        raise ValueError(f"unknown primitive {primitive!r}; choose from {PRIMITIVES}")
    return np.full((65, 65), PRIMITIVES.index(primitive), dtype=np.uint8)


def map_from_timings(k1: np.ndarray, k2: np.ndarray, seconds: np.ndarray) -> np.ndarray:
    """Build a map from measured times.

    Parameters
    ----------
    k1, k2 : int arrays of shape (m,)
        Nonzero counts (1..64) of the two octiles of each measured cell.
    seconds : array of shape (m, len(PRIMITIVES))
        Time of each primitive on that cell (NaN where not measured).

    Returns
    -------
    (65, 65) uint8 array; cells not measured (and k = 0) get sparse x sparse.

    Examples
    --------
    >>> m = map_from_timings(np.array([64]), np.array([64]), np.array([[2.0, 1.0, 1.5, 1.5]]))
    >>> PRIMITIVES[m[64, 64]], PRIMITIVES[m[1, 1]]
    ('dd', 'ss')
    """
    k1 = np.asarray(k1, dtype=np.int64)
    k2 = np.asarray(k2, dtype=np.int64)
    t = np.asarray(seconds, dtype=np.float64)
    if t.shape != (k1.size, len(PRIMITIVES)) or k2.shape != k1.shape:
        raise ValueError(f"seconds must have shape ({k1.size}, {len(PRIMITIVES)}), got {t.shape}")
    if np.any((k1 < 1) | (k1 > 64) | (k2 < 1) | (k2 > 64)):
        raise ValueError("nonzero counts must lie in 1..64")
    out = np.zeros((65, 65), dtype=np.uint8)
    best = np.nanargmin(np.where(np.isnan(t), np.inf, t), axis=1)
    out[k1, k2] = best.astype(np.uint8)
    return out


def map_dir() -> Path:
    """Folder of the cached maps (``$MGKFLOW_PRIMITIVE_MAPS`` or ``~/.cache/mgkflow/primitives``)."""
    env = os.environ.get("MGKFLOW_PRIMITIVE_MAPS")
    return Path(env) if env else Path.home() / ".cache" / "mgkflow" / "primitives"


def _slug(device_name: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", device_name).strip("_") or "gpu"


def map_path(device_name: str, labeled: bool, folder: Path | None = None) -> Path:
    """File of the map of one GPU model and kernel kind."""
    kind = "labeled" if labeled else "unlabeled"
    return Path(folder or map_dir()) / f"{_slug(device_name)}_{kind}.npy"


def save_map(selection: np.ndarray, device_name: str, labeled: bool, folder: Path | None = None) -> Path:
    """Store a map for ``device_name`` (atomically: a crash leaves no half-written file)."""
    selection = np.asarray(selection)
    if selection.shape != (65, 65) or selection.max(initial=0) >= len(PRIMITIVES):
        raise ValueError("a selection map is a (65, 65) array of primitive ids")
    path = map_path(device_name, labeled, folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.npy")
    np.save(tmp, selection.astype(np.uint8))
    os.replace(tmp, path)
    return path


def load_map(device_name: str, labeled: bool, folder: Path | None = None) -> np.ndarray | None:
    """The cached map of ``device_name``, or None when it was never measured."""
    path = map_path(device_name, labeled, folder)
    if not path.exists():
        return None
    sel = np.load(path)
    if sel.shape != (65, 65) or sel.dtype != np.uint8 or sel.max(initial=0) >= len(PRIMITIVES):
        raise ValueError(f"{path} is not a primitive selection map; delete it and rerun `mgkflow bench primitives`")
    return sel


class DeviceMaps:
    """The device copy of the selection map a backend's octile-mode calls use (uploaded again only when
    the map changes), for ``GPUBackend(primitives=...)``: "auto" (the map measured on ``device_name``,
    read once per labeled / unlabeled; sparse x sparse where none was measured), a primitive's name, or
    a (65, 65) array of primitive ids.

    Attributes
    ----------
    label : str
        What the last call used: "measured", "ss(no map)", "map" or the primitive's name.
    """

    def __init__(self, device_name: str) -> None:
        self.device_name = device_name
        self.label = ""
        self._measured: dict = {}
        self._uploaded: tuple | None = None

    def device_map(self, primitives: str | np.ndarray, labeled: bool) -> Any:
        """Device copy of the selection map ``primitives`` for a call with a labeled (or unlabeled) edge kernel."""
        if isinstance(primitives, np.ndarray):
            sel, label = primitives, "map"
        elif primitives == "auto":
            if labeled not in self._measured:  # read the measured map once per backend
                self._measured[labeled] = load_map(self.device_name, labeled)
            sel = self._measured[labeled]
            label = "measured" if sel is not None else "ss(no map)"
            if sel is None:
                sel = constant_map("ss")
        else:
            sel, label = constant_map(primitives), primitives
        self.label = label
        key = sel.tobytes()
        if self._uploaded is None or self._uploaded[0] != key:
            self._uploaded = (key, device.upload(np.ascontiguousarray(sel, dtype=np.uint8)))
        return self._uploaded[1]
