"""Argument checks of the user-facing rooms (``gram/``, ``learn/``, ``pipeline.py``).

Each returns the value in a normal form or raises :class:`~mgkflow.errors.ParameterTypeError`
(a wrong type) or :class:`~mgkflow.errors.ParameterError` (a wrong value), naming the argument,
so that what a caller passes never surfaces as a ``TypeError`` of numpy or pathlib.

Examples
--------
>>> count(3, "n_rows")
3
>>> count("3", "n_rows")
Traceback (most recent call last):
...
mgkflow.errors.ParameterTypeError: n_rows must be an integer, got str '3'
>>> flag(None, "resume")
Traceback (most recent call last):
...
mgkflow.errors.ParameterTypeError: resume must be True or False, got NoneType None
"""

from __future__ import annotations

import numbers
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ParameterError, ParameterTypeError
from ..graph import Graph

__all__ = ["count", "flag", "graph_list", "path", "callable_or_none", "text", "MAX_COUNT"]

#: The largest count accepted (graphs, nodes, block sides, workers): beyond it a loop or an
#: allocation would run for hours rather than fail.
MAX_COUNT = 2**40


def _show(value: Any) -> str:
    return f"{type(value).__name__} {value!r:.40}"


def count(value: Any, what: str, lo: int = 0, hi: int = MAX_COUNT, none: bool = False) -> Any:
    """An integer in ``[lo, hi]`` (None too where ``none``); bools are refused."""
    if value is None and none:
        return None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise ParameterTypeError(f"{what} must be an integer, got {_show(value)}")
    if not lo <= int(value) <= hi:
        raise ParameterError(f"{what} must lie in [{lo}, {hi}], got {int(value)}")
    return int(value)


def flag(value: Any, what: str, none: bool = False) -> Any:
    """True or False (None too where ``none``)."""
    if value is None and none:
        return None
    if not isinstance(value, (bool, np.bool_)):
        raise ParameterTypeError(f"{what} must be True or False, got {_show(value)}")
    return bool(value)


def text(value: Any, what: str, choices: tuple[str, ...] | None = None, none: bool = False) -> Any:
    """A string (one of ``choices`` where given; None too where ``none``)."""
    if value is None and none:
        return None
    if not isinstance(value, str):
        raise ParameterTypeError(f"{what} must be a string, got {_show(value)}")
    if choices is not None and value not in choices:
        raise ParameterError(f"{what} must be one of {', '.join(choices)}, got {value!r}")
    return value


def path(value: Any, what: str, none: bool = False) -> Any:
    """A :class:`~pathlib.Path` from a str or os.PathLike (None too where ``none``)."""
    if value is None and none:
        return None
    if isinstance(value, bytes) or not isinstance(value, (str, os.PathLike)):
        raise ParameterTypeError(f"{what} must be a path (str or os.PathLike), got {_show(value)}")
    if not str(value) or "\x00" in str(value):
        raise ParameterError(f"{what} must be a non-empty path without NUL characters, got {value!r}")
    return Path(value)


def callable_or_none(value: Any, what: str) -> Callable[..., Any] | None:
    """A callable or None."""
    if value is not None and not callable(value):
        raise ParameterTypeError(f"{what} must be callable or None, got {_show(value)}")
    return value


def graph_list(value: Any, what: str, empty: bool = False) -> list[Graph]:
    """A list of :class:`~mgkflow.Graph` from a sequence of them (empty only where ``empty``)."""
    if isinstance(value, Graph):
        raise ParameterTypeError(f"{what} must be a sequence of Graph objects, not a single Graph")
    if value is None or isinstance(value, (str, bytes, os.PathLike)) or not hasattr(value, "__iter__") or hasattr(
            value, "columns"):
        raise ParameterTypeError(f"{what} must be a sequence of mgkflow.Graph objects, got {_show(value)}")
    graphs = list(value)
    for i, g in enumerate(graphs):
        if not isinstance(g, Graph):
            raise ParameterTypeError(f"{what}[{i}] must be an mgkflow.Graph, got {_show(g)}")
    if not graphs and not empty:
        raise ParameterError(f"{what} is empty")
    return graphs
