"""Gram matrices on disk: ``.npz`` with graph ids and kernel parameters, or a bare ``.npy``.

An ``.npz`` written by :func:`save_gram` holds the arrays

========== ==============================================================
``gram``   the (n, m) float64 matrix
``ids``    n graph ids (unicode); ``col_ids`` m ids when K is not square-symmetric
``kernel`` the kernel's ``repr`` (one string)
``params`` the kernel parameters and run settings as a JSON object (one string)
========== ==============================================================

and is read back (without pickle) by :func:`load_gram_npz`. Files are written
atomically with the permissions of a plain ``open()``. A bare ``.npy`` holds the
matrix only: :func:`load_gram_npz` reads it with ``ids`` and ``col_ids`` None
(it invents no ids). When ``params`` record ``normalize=True`` (the CLI's
``--normalize``), the stored kernel text says so as well.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import FileFormatError, MgkflowError, ParameterError, ParameterTypeError
from ._common import as_path
from ._files import atomic_write, check_writable

__all__ = ["GramFile", "save_gram", "load_gram_npz", "kernel_params", "GRAM_SUFFIXES"]

#: Output suffixes :func:`save_gram` writes.
GRAM_SUFFIXES = (".npz", ".npy")


class GramFormatError(MgkflowError, ValueError):
    """An output path with a suffix :func:`save_gram` does not write."""


@dataclass
class GramFile:
    """A Gram matrix with what identifies it.

    Attributes
    ----------
    gram : ndarray
        The matrix.
    ids : list of str or None
        Row ids (graph ids); None for a bare ``.npy`` matrix (which stores none).
    col_ids : list of str or None
        Column ids (equal to ``ids`` for a Gram matrix of one set); None for ``.npy``.
    kernel : str
        The kernel's repr (with ``normalize=True`` when the matrix was normalized).
    params : dict
        Kernel parameters and run settings.
    """

    gram: np.ndarray
    ids: list[str] | None
    col_ids: list[str] | None
    kernel: str = ""
    params: dict[str, Any] = field(default_factory=dict)


def _jsonable(v: Any) -> Any:
    if isinstance(v, (str, bool)) or v is None:
        return v
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return float(v) if math.isfinite(float(v)) else repr(float(v))
    if isinstance(v, Mapping):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    return repr(v)


def kernel_params(kernel: Any) -> dict[str, Any]:
    """Parameters of a :class:`~mgkflow.MarginalizedGraphKernel` as a JSON-ready dict.

    Examples
    --------
    >>> from mgkflow import MarginalizedGraphKernel
    >>> from mgkflow.kernels import KroneckerDelta
    >>> kernel_params(MarginalizedGraphKernel(node_kernel=KroneckerDelta(0.5, "element"), q=0.1))["q"]
    0.1
    """
    out: dict[str, Any] = {}
    for name in ("node_kernel", "edge_kernel"):
        k = getattr(kernel, name, None)
        if k is None:
            continue
        out[name] = repr(k)
        hyper = getattr(k, "hyperparameters", None)
        try:
            hps = hyper() if callable(hyper) else hyper
            out[f"{name}_hyperparameters"] = {h.name: float(h.value) for h in hps or ()}
        except (TypeError, AttributeError):
            pass
    for name in ("q", "p", "backend", "rtol", "max_iter"):
        if hasattr(kernel, name):
            v = getattr(kernel, name)
            out[name] = v if isinstance(v, (int, float, str)) or v is None else repr(v)
    return _jsonable(out)


def _id_list(ids: Any, name: str) -> list[str]:
    """``ids`` (an iterable of ids) as text; ParameterTypeError naming ``name`` for a non-iterable."""
    try:
        return [str(i) for i in ids]
    except TypeError as exc:
        raise ParameterTypeError(f"{name} must be a sequence of ids, got {type(ids).__name__} {ids!r:.60}") from exc


def save_gram(
    path: Any,
    gram: Any,
    ids: Sequence[str] | None = None,
    kernel: Any = None,
    params: Mapping[str, Any] | None = None,
    col_ids: Sequence[str] | None = None,
) -> Path:
    """Save a Gram matrix: ``.npz`` with ids and kernel parameters, or ``.npy`` (bare matrix).

    Parameters
    ----------
    path : str or os.PathLike
        Ends in ``.npz`` or ``.npy``.
    gram : array_like, shape (n, m)
        The matrix.
    ids, col_ids : sequence of str, optional
        Row and column ids (default: ``"0".."n-1"``; ``col_ids`` defaults to ``ids`` when square).
    kernel : MarginalizedGraphKernel or str, optional
        Stored as its repr, with :func:`kernel_params` merged into ``params``.
    params : mapping, optional
        Further settings to record (dataset, ordering, normalize, ...).

    Returns
    -------
    Path

    Examples
    --------
    >>> import tempfile, numpy as np
    >>> p = Path(tempfile.mkdtemp()) / "K.npz"
    >>> _ = save_gram(p, np.eye(2), ids=["a", "b"], params={"q": 0.05})
    >>> g = load_gram_npz(p)
    >>> g.ids, g.params["q"], g.gram.shape
    (['a', 'b'], 0.05, (2, 2))
    """
    p = as_path(path, "path")
    if p.suffix not in GRAM_SUFFIXES:
        raise GramFormatError(f"Gram output {p} must end in {' or '.join(GRAM_SUFFIXES)}")
    check_writable(p, "Gram output")
    try:
        K = np.asarray(gram, dtype=np.float64)
    except TypeError as exc:
        raise ParameterTypeError(f"gram must be a 2-D matrix of numbers, got {type(gram).__name__}: {exc}") from exc
    except ValueError as exc:
        raise ParameterError(f"gram must be a 2-D matrix of numbers: {exc}") from exc
    if K.ndim != 2:
        raise ParameterError(f"gram must be a 2-D matrix, got shape {K.shape}")
    if p.suffix == ".npy":
        return atomic_write(p, lambda t: np.save(t, K))
    n, m = K.shape
    rows = _id_list(ids, "ids") if ids is not None else [str(i) for i in range(n)]
    cols = _id_list(col_ids, "col_ids") if col_ids is not None else (rows if n == m else [str(i) for i in range(m)])
    if len(rows) != n or len(cols) != m:
        raise ParameterError(
            f"ids: {len(rows)} row ids and {len(cols)} column ids (col_ids) for a {n}x{m} matrix; "
            "give one id per row (and per column)"
        )
    allp = dict(kernel_params(kernel)) if kernel is not None and not isinstance(kernel, str) else {}
    if params is not None and not isinstance(params, Mapping):
        raise ParameterTypeError(f"params must be a mapping (a dict of settings), got {type(params).__name__}")
    allp.update(_jsonable(dict(params or {})))
    text = repr(kernel) if kernel is not None and not isinstance(kernel, str) else (kernel or "")
    if allp.get("normalize") is True and text.endswith(")") and "normalize=" not in text:
        text = text[:-1] + ", normalize=True)"
    arrays = {
        "gram": K,
        "ids": np.asarray(rows, dtype=str),
        "col_ids": np.asarray(cols, dtype=str),
        "kernel": np.asarray(text),
        "params": np.asarray(json.dumps(allp, sort_keys=True)),
    }

    def write(t: str) -> None:
        with open(t, "wb") as fh:
            np.savez(fh, **arrays)

    return atomic_write(p, write)


def load_gram_npz(path: Any) -> GramFile:
    """Read a file written by :func:`save_gram`.

    An ``.npz`` gives the matrix with its ids, kernel text and parameters; a bare ``.npy``
    gives the matrix with ``ids`` and ``col_ids`` None (the file holds none; no ids are invented).

    Raises
    ------
    PathNotFoundError
        No such file (a ``FileNotFoundError`` too).
    mgkflow.errors.FileFormatError
        Not a Gram file of mgkflow, or unreadable.

    Examples
    --------
    >>> import tempfile, numpy as np
    >>> p = Path(tempfile.mkdtemp()) / "K.npy"
    >>> _ = save_gram(p, np.eye(2))
    >>> g = load_gram_npz(p)
    >>> g.gram.shape, g.ids
    ((2, 2), None)
    """
    from ._common import PathNotFoundError

    p = as_path(path, "path")
    if not p.exists():
        raise PathNotFoundError(f"{p}: no such Gram file")
    try:
        if p.suffix == ".npy":
            K = np.load(p, allow_pickle=False)
            if K.ndim != 2:
                raise FileFormatError(f"not a Gram matrix: shape {K.shape}", path=p)
            return GramFile(K, None, None)
        with np.load(p, allow_pickle=False) as z:
            missing = {"gram", "ids"} - set(z.files)
            if missing:
                raise FileFormatError(f"not a Gram file of mgkflow (no {sorted(missing)})", path=p)
            K = z["gram"]
            ids = [str(s) for s in z["ids"]]
            cols = [str(s) for s in z["col_ids"]] if "col_ids" in z.files else list(ids)
            kernel = str(z["kernel"]) if "kernel" in z.files else ""
            params = json.loads(str(z["params"])) if "params" in z.files else {}
    except (OSError, ValueError, EOFError) as exc:
        if isinstance(exc, FileFormatError):
            raise
        raise FileFormatError(f"cannot read Gram file: {exc}", path=p) from exc
    return GramFile(K, ids, cols, kernel, params)
