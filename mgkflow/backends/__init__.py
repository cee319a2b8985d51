"""Backends: who solves the product-graph systems (docs/design.md §9).

A registry by name, one module per entry, in the shape of :mod:`mgkflow.reorder`:

========  ===================================  =========================================
name      module                               what
========  ===================================  =========================================
exact     :mod:`mgkflow.backends.exact`        scipy, direct solves of small systems: the oracle
cpu       :mod:`mgkflow.backends.cpu`          float64 PCG compiled with numba, multi-core
gpu       :mod:`mgkflow.backends.gpu`          the PyCUDA backend of :mod:`mgkflow.gpu`
auto      (resolved)                           ``gpu`` where a CUDA device is present, else ``cpu``
========  ===================================  =========================================

Every backend implements :class:`~mgkflow.backends.base.Backend` and returns the records of
:mod:`mgkflow.backends.base`. A registry entry is a *factory* ``make(rtol, max_iter, options)``
returning a backend. The entries are the modules of this package (all but ``base`` and private ones): their
names are found without importing them, and a module is imported only when its backend is first
made, so ``import mgkflow`` never imports numba or PyCUDA. :func:`register` adds a backend
defined elsewhere.

Adding a backend: write ``mgkflow/backends/NAME.py`` with a ``make`` factory and a class
implementing the protocol, and a test; nothing else changes (the kernel's ``backend=`` and the
command line's ``--backend`` take the names from :func:`available_backends`).

Examples
--------
>>> from mgkflow.backends import available_backends, make_backend
>>> available_backends()
['auto', 'cpu', 'exact', 'gpu']
>>> make_backend("exact").name
'exact'
"""

from __future__ import annotations

import importlib
import math
import numbers
import pkgutil
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import ParameterError, ParameterTypeError
from .base import Backend, GradientSolution, NodalSolution, Solution

__all__ = [
    "Backend",
    "Solution",
    "GradientSolution",
    "NodalSolution",
    "available_backends",
    "make_backend",
    "register",
    "unregister",
    "resolve_backend",
]

#: ``make(rtol, max_iter, options) -> Backend``; ``rtol=None`` means the backend's default.
Factory = Callable[[float | None, int, Mapping[str, Any]], Backend]

#: Built-in entries: name -> module that defines ``make`` (imported on first use).
_ENTRIES: dict[str, str] = {
    info.name: f".{info.name}"
    for info in pkgutil.iter_modules(__path__)
    if info.name != "base" and not info.name.startswith("_")
}
_REGISTRY: dict[str, Factory] = {}


def register(name: str, factory: Factory, *, overwrite: bool = False) -> Factory:
    """Register a backend factory under ``name`` (lower case)."""
    key = name.lower()
    if not overwrite and (key in _REGISTRY or key in _ENTRIES or key == "auto"):
        raise ParameterError(f"backend {name!r} is already registered (pass overwrite=True to replace it)")
    _REGISTRY[key] = factory
    return factory


def unregister(name: str) -> None:
    """Remove a backend added with :func:`register` (the package's own entries stay)."""
    key = str(name).lower()
    if key in _ENTRIES or key not in _REGISTRY:
        raise ParameterError(f"backend {name!r} was not added with register()")
    del _REGISTRY[key]


def available_backends() -> list[str]:
    """Names accepted by :func:`make_backend` (and by ``MarginalizedGraphKernel(backend=...)``)."""
    return sorted({"auto", *_ENTRIES, *_REGISTRY})


def resolve_backend(name: str) -> str:
    """The registered name ``name`` stands for (``auto``: ``gpu`` where a device is present, else ``cpu``)."""
    key = str(name).lower()
    if key == "auto":
        from .gpu import available

        return "gpu" if available() else "cpu"
    if key not in _REGISTRY and key not in _ENTRIES:
        raise ParameterError(f"unknown backend {name!r}; available: {', '.join(available_backends())}")
    return key


def _factory(key: str) -> Factory:
    if key not in _REGISTRY:
        module = importlib.import_module(_ENTRIES[key], __name__)
        _REGISTRY[key] = module.make
    return _REGISTRY[key]


def make_backend(
    name: str = "auto", *, rtol: float | None = None, max_iter: int = 10_000, options: Mapping[str, Any] | None = None
) -> Backend:
    """A new backend ``name`` with a relative residual tolerance and an iteration cap.

    ``options`` go to the backend's own constructor (e.g. ``gpu_options``).

    Raises
    ------
    mgkflow.errors.ParameterError, mgkflow.errors.ParameterTypeError
        An unknown ``name``; ``rtol`` not None or a number in (0, 1); ``max_iter`` not a whole
        number in [1, 2**62]; ``options`` not a mapping of option names (str) to values.

    Examples
    --------
    >>> make_backend("exact", rtol="tight")
    Traceback (most recent call last):
    ...
    mgkflow.errors.ParameterTypeError: rtol must be a number in (0, 1) or None, got str 'tight'
    """
    key = resolve_backend(name)
    _check_rtol(rtol)
    max_iter = _check_max_iter(max_iter)
    return _factory(key)(rtol, max_iter, _check_options(options))


def _check_rtol(rtol: Any) -> None:
    """None or a real number in (0, 1) (the kernel's rule, :mod:`mgkflow.evaluation.checks`)."""
    if rtol is None:
        return
    if isinstance(rtol, bool) or not isinstance(rtol, numbers.Real):
        raise ParameterTypeError(f"rtol must be a number in (0, 1) or None, got {type(rtol).__name__} {rtol!r:.60}")
    if not 0 < float(rtol) < 1:
        raise ParameterError(f"rtol must lie in (0, 1), got {rtol!r}")


def _check_max_iter(max_iter: Any) -> int:
    """A whole number in [1, 2**62] (a float with a whole value too), as an int."""
    if isinstance(max_iter, bool) or not isinstance(max_iter, numbers.Real):
        raise ParameterTypeError(f"max_iter must be an integer >= 1, got {type(max_iter).__name__} {max_iter!r:.60}")
    if not isinstance(max_iter, numbers.Integral) and not (
        math.isfinite(float(max_iter)) and float(max_iter).is_integer()
    ):
        raise ParameterError(f"max_iter must be a whole number >= 1, got {max_iter!r}")
    if not 1 <= int(max_iter) <= 2**62:
        raise ParameterError(f"max_iter must lie in [1, 2**62], got {max_iter!r}")
    return int(max_iter)


def _check_options(options: Any) -> dict[str, Any]:
    """``options`` (None: none) as a dict with text keys."""
    if options is None:
        return {}
    if not isinstance(options, Mapping):
        raise ParameterTypeError(
            f"options must be a mapping of option name to value (or None), got {type(options).__name__} {options!r:.60}"
        )
    bad = [k for k in options if not isinstance(k, str)]
    if bad:
        raise ParameterTypeError(f"options: option names must be text, got {type(bad[0]).__name__} {bad[0]!r:.60}")
    return dict(options)
