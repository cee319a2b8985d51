"""Model files: a fitted estimator saved with what it is, :func:`save_model` and :func:`load_model`.

A model file is a zip archive of two members:

``manifest.json``
    what the file holds, readable without unpickling anything (:func:`read_model_info`):
    ``format`` (``"mgkflow-model"``), ``format_version``, the ``mgkflow_version`` that wrote it,
    ``created`` (UTC, ISO 8601), the ``estimator`` class, its fitted ``kernel`` (repr) and
    ``hyperparameters``, the versions of Python, numpy, scikit-learn and RDKit, the SHA-256 of
    the pickle, and the caller's ``metadata`` (``mgkflow fit`` records the training file, its
    SHA-256, the columns, the number of molecules and a hash of the (SMILES, target) pairs).
``model.pkl``
    the estimator, pickled.

:func:`load_model` reads the manifest first and refuses, before unpickling, a file that is not a
model file, a damaged one (the pickle's SHA-256 differs) and one written by another major.minor
version of mgkflow or of the format (:class:`~mgkflow.errors.ModelVersionError`): a pickle holds
the estimator's internals, which change between versions. Refit the model with this version.

.. warning::
   The estimator is a **pickle**: loading a model file runs code the file names. Load only model
   files you made or trust, as with any pickle; :func:`read_model_info` reads the manifest alone
   and unpickles nothing.

Examples
--------
>>> import tempfile, pathlib
>>> import numpy as np
>>> from sklearn.gaussian_process import GaussianProcessRegressor
>>> from sklearn.gaussian_process.kernels import RBF
>>> gp = GaussianProcessRegressor(RBF(1.0)).fit(np.array([[0.0], [1.0]]), np.array([0.0, 1.0]))
>>> path = pathlib.Path(tempfile.mkdtemp()) / "model.mgk"
>>> _ = save_model(gp, path, {"target": "y"})
>>> info = read_model_info(path)
>>> info["format"], info["estimator"], info["metadata"]
('mgkflow-model', 'sklearn.gaussian_process._gpr.GaussianProcessRegressor', {'target': 'y'})
>>> float(load_model(path).predict(np.array([[1.0]]))[0])  # doctest: +ELLIPSIS
0.99...
"""

from __future__ import annotations

import datetime
import hashlib
import io
import json
import math
import os
import pickle
import platform
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from .._version import __version__
from ..errors import ModelFileError, ModelVersionError, ParameterTypeError

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "save_model",
    "load_model",
    "read_model_info",
    "file_sha256",
]

#: The ``format`` of a model file's manifest.
FORMAT = "mgkflow-model"
#: The version of the model-file layout (major.minor); files of another major.minor are refused.
FORMAT_VERSION = "1.0"
_MANIFEST = "manifest.json"
_PICKLE = "model.pkl"
#: A manifest larger than this is not one of ours (read before anything else).
_MAX_MANIFEST = 1 << 20


def _major_minor(version: str) -> tuple[str, ...]:
    return tuple(str(version).split("+")[0].split(".")[:2])


def file_sha256(path: str | os.PathLike, block: int = 1 << 20) -> str:
    """SHA-256 (hex) of a file's bytes, read in blocks (constant memory).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "x"
    >>> _ = p.write_bytes(b"abc")
    >>> file_sha256(p)[:16]
    'ba7816bf8f01cfea'
    """
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(block):
            h.update(chunk)
    return h.hexdigest()


def _jsonable(value: Any) -> Any:
    """``value`` as JSON data: numbers, text, lists and dicts; anything else as its repr."""
    if isinstance(value, bool | str) or value is None:
        return value
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, float | np.floating):
        v = float(value)
        return v if math.isfinite(v) else repr(v)
    if isinstance(value, np.ndarray):
        return [_jsonable(v) for v in value.tolist()]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return repr(value)


def _kernel_record(model: Any) -> tuple[str | None, dict[str, Any]]:
    """(repr of the fitted kernel, {hyperparameter name: value}) of an estimator with a ``kernel_``."""
    kernel = getattr(model, "kernel_", None)
    if kernel is None or not hasattr(kernel, "hyperparameters"):
        return (None if kernel is None else repr(kernel)), {}
    params = kernel.get_params()
    hyper = {h.name: _jsonable(params.get(h.name)) for h in kernel.hyperparameters}
    return repr(kernel), hyper


def _versions() -> dict[str, str]:
    import sklearn

    out = {"python": platform.python_version(), "numpy": np.__version__, "scikit-learn": sklearn.__version__}
    try:
        import rdkit

        out["rdkit"] = rdkit.__version__
    except ImportError:  # pragma: no cover - depends on the environment
        pass
    return out


def save_model(model: Any, path: str | os.PathLike, metadata: dict[str, Any] | None = None) -> Path:
    """Write a fitted estimator and its description to a model file (written atomically).

    Parameters
    ----------
    model : estimator
        A fitted estimator (anything that pickles; e.g. :class:`~mgkflow.learn.MolecularGPR`).
        Its ``kernel_`` (when it has one) is recorded as text and hyperparameter values.
    path : str or os.PathLike
        The file to write (any name; an existing file is replaced, never left half-written).
    metadata : dict, optional
        JSON-able facts to keep with it (training file, target, sizes); other values are kept
        as their repr.

    Returns
    -------
    Path
        The file written.

    Raises
    ------
    mgkflow.errors.ParameterTypeError
        ``metadata`` is not a dict, or ``model`` cannot be pickled.
    mgkflow.errors.OutputPathError
        ``path`` cannot be written.
    """
    from ..io import atomic_write

    if metadata is not None and not isinstance(metadata, dict):
        raise ParameterTypeError(f"metadata must be a dict or None, got {type(metadata).__name__}")
    try:
        payload = pickle.dumps(model, protocol=pickle.HIGHEST_PROTOCOL)
    except (pickle.PicklingError, TypeError, AttributeError) as exc:
        raise ParameterTypeError(f"the model cannot be pickled: {exc}") from None
    kernel, hyper = _kernel_record(model)
    manifest = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "mgkflow_version": __version__,
        "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "estimator": f"{type(model).__module__}.{type(model).__qualname__}",
        "kernel": kernel,
        "hyperparameters": hyper,
        "versions": _versions(),
        "pickle_sha256": hashlib.sha256(payload).hexdigest(),
        "metadata": _jsonable(metadata or {}),
    }

    def write(tmp: str) -> None:
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as z:
            z.writestr(_MANIFEST, json.dumps(manifest, indent=2, sort_keys=True))
            z.writestr(_PICKLE, payload)

    return atomic_write(path, write)


def _open(path: str | os.PathLike) -> tuple[Path, zipfile.ZipFile]:
    from ..io import PathNotFoundError, as_path

    p = as_path(path, "model file")
    if not p.exists():
        raise PathNotFoundError(f"{p}: no such model file")
    if p.is_dir():
        raise ModelFileError(f"{p}: a directory, not a model file")
    try:
        return p, zipfile.ZipFile(p)
    except zipfile.BadZipFile:
        raise ModelFileError(
            f"{p} is not an mgkflow model file (not a zip archive); model files are written by `mgkflow fit` "
            "or mgkflow.learn.model_file.save_model"
        ) from None
    except OSError as exc:
        raise ModelFileError(f"{p}: cannot read: {exc.strerror or exc}") from None


def _manifest(p: Path, z: zipfile.ZipFile) -> dict[str, Any]:
    names = set(z.namelist())
    if _MANIFEST not in names or _PICKLE not in names:
        raise ModelFileError(f"{p} is a zip archive but not an mgkflow model file (no {_MANIFEST} and {_PICKLE})")
    if z.getinfo(_MANIFEST).file_size > _MAX_MANIFEST:
        raise ModelFileError(f"{p} is not an mgkflow model file (its {_MANIFEST} is too large)")
    try:
        info = json.loads(z.read(_MANIFEST).decode("utf-8"))
    except (ValueError, UnicodeDecodeError, zipfile.BadZipFile, OSError) as exc:
        raise ModelFileError(f"{p}: unreadable {_MANIFEST} ({exc})") from None
    if not isinstance(info, dict) or info.get("format") != FORMAT:
        raise ModelFileError(f"{p} is not an mgkflow model file (its manifest names no format {FORMAT!r})")
    return info


def read_model_info(path: str | os.PathLike) -> dict[str, Any]:
    """The manifest of a model file (what it holds, who wrote it), without unpickling anything.

    Raises
    ------
    mgkflow.io.PathNotFoundError
        No such file.
    mgkflow.errors.ModelFileError
        Not a model file.
    """
    p, z = _open(path)
    with z:
        return _manifest(p, z)


def _check_versions(p: Path, info: dict[str, Any]) -> None:
    fmt = str(info.get("format_version", "?"))
    if _major_minor(fmt) != _major_minor(FORMAT_VERSION):
        raise ModelVersionError(
            f"{p}: model-file format {fmt}, but this mgkflow reads format {FORMAT_VERSION}; refit the model "
            f"with mgkflow {__version__}"
        )
    written = str(info.get("mgkflow_version", "?"))
    if _major_minor(written) != _major_minor(__version__):
        raise ModelVersionError(
            f"{p}: written by mgkflow {written}, this is mgkflow {__version__}: a model file only loads under "
            f"the major.minor version that wrote it; refit the model with mgkflow {__version__} (or load it "
            f"with mgkflow {'.'.join(_major_minor(written))}.x)"
        )


def load_model(path: str | os.PathLike) -> Any:
    """The estimator of a model file written by :func:`save_model` (or ``mgkflow fit``).

    Checks, before unpickling: that the file is a model file, that its format and the mgkflow
    version that wrote it have this version's major.minor, and that the pickle's SHA-256 is the
    one recorded. **Load only files you trust**: the estimator is a pickle.

    Raises
    ------
    mgkflow.io.PathNotFoundError
        No such file.
    mgkflow.errors.ModelVersionError
        Written by another major.minor version of mgkflow or of the format.
    mgkflow.errors.ModelFileError
        Not a model file, or a damaged one.
    """
    p, z = _open(path)
    with z:
        info = _manifest(p, z)
        _check_versions(p, info)
        try:
            payload = z.read(_PICKLE)
        except (zipfile.BadZipFile, OSError, EOFError) as exc:
            raise ModelFileError(f"{p}: damaged model file ({exc})") from None
    if hashlib.sha256(payload).hexdigest() != info.get("pickle_sha256"):
        raise ModelFileError(f"{p}: damaged model file (the estimator's SHA-256 is not the one recorded)")
    try:
        return pickle.load(io.BytesIO(payload))
    except Exception as exc:  # noqa: BLE001 - whatever unpickling raises, the file is what is wrong
        raise ModelFileError(
            f"{p}: the estimator cannot be unpickled ({type(exc).__name__}: {exc}); a package it needs may be "
            "missing or of another version"
        ) from None
