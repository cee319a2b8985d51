"""Argument checks of the dataset loaders: whole numbers in bounds, seeds, probabilities, flags, choices.

Each check returns the value in its plain Python type (``int``, ``float``, ``bool``, ``str``) or raises
:class:`~mgkflow.errors.ParameterTypeError` (wrong type) / :class:`~mgkflow.errors.ParameterError`
(bad value) naming the loader and the parameter. The upper bounds turn absurd sizes (``n_graphs=2**70``)
into an error at once instead of a call that never ends.

Examples
--------
>>> count("nws", "n_graphs", 3, minimum=0)
3
>>> count("nws", "n_graphs", -1, minimum=0)
Traceback (most recent call last):
...
mgkflow.errors.ParameterError: nws: n_graphs must be >= 0, got -1
>>> probability("nws", "p", 0.1)
0.1
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import ParameterError, ParameterTypeError

__all__ = ["MAX_GRAPHS", "MAX_NODES", "count", "seed", "probability", "real", "flag", "choice"]

#: Most graphs a generated set (``nws``, ``ba``, ``molecules``) may be asked for.
MAX_GRAPHS = 10**7
#: Most nodes a generated graph may be asked to have.
MAX_NODES = 10**6


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def count(loader: str, name: str, value: Any, minimum: int = 1, maximum: int | None = None) -> int:
    """``value`` as an int in ``[minimum, maximum]``; a bool, float or text is refused."""
    if not _is_int(value):
        raise ParameterTypeError(f"{loader}: {name} must be a whole number, got {type(value).__name__} {value!r:.60}")
    v = int(value)
    if v < minimum:
        raise ParameterError(f"{loader}: {name} must be >= {minimum}, got {v}")
    if maximum is not None and v > maximum:
        raise ParameterError(f"{loader}: {name} must be <= {maximum}, got {v}")
    return v


def seed(loader: str, value: Any, name: str = "seed") -> int:
    """A random seed: a whole number >= 0 (what ``numpy.random.default_rng`` takes)."""
    return count(loader, name, value, minimum=0)


def real(loader: str, name: str, value: Any, minimum: float | None = None, maximum: float | None = None) -> float:
    """``value`` as a finite float in ``[minimum, maximum]``; a bool or text is refused."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ParameterTypeError(f"{loader}: {name} must be a number, got {type(value).__name__} {value!r:.60}")
    try:
        v = float(value)
    except OverflowError:
        v = math.inf
    if not math.isfinite(v):
        raise ParameterError(f"{loader}: {name} must be a finite number, got {value!r:.60}")
    if (minimum is not None and v < minimum) or (maximum is not None and v > maximum):
        lo = "-inf" if minimum is None else minimum
        hi = "inf" if maximum is None else maximum
        raise ParameterError(f"{loader}: {name} must be in [{lo}, {hi}], got {value!r:.60}")
    return v


def probability(loader: str, name: str, value: Any) -> float:
    """A probability: a finite number in [0, 1]."""
    return real(loader, name, value, 0.0, 1.0)


def flag(loader: str, name: str, value: Any) -> bool:
    """``value`` as a bool (anything with a plain truth value; an array or DataFrame is refused)."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)) or value is None:
        return bool(value)
    raise ParameterTypeError(f"{loader}: {name} must be True or False, got {type(value).__name__} {value!r:.60}")


def choice(loader: str, name: str, value: Any, choices: Sequence[str]) -> str:
    """``value`` if it is one of ``choices`` (text), else an error listing them."""
    listed = ", ".join(map(repr, choices))
    if not isinstance(value, str):
        raise ParameterTypeError(
            f"{loader}: {name} must be one of {listed}; got {type(value).__name__} {value!r:.60}"
        )
    if value not in choices:
        raise ParameterError(f"{loader}: {name} must be one of {listed}; got {value!r:.60}")
    return value
