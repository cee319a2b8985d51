"""Argument checks of the io package that need no :class:`~mgkflow.graph.Graph`, so that the converters
behind ``Graph.from_*`` (:mod:`mgkflow.io.networkx`, :mod:`mgkflow.io.rdkit`, :mod:`mgkflow.io.pdb_parser`)
can use them too (they may not import :mod:`mgkflow.graph`). :mod:`mgkflow.io._common` re-exports them.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ParameterError, ParameterTypeError

__all__ = ["as_path", "check_flag", "check_optional_flag", "check_attribute_name", "check_attribute_names", "is_frame"]


def as_path(value: Any, name: str = "path") -> Path:
    """``value`` (text, bytes or an ``os.PathLike``) as a Path; anything else is a
    :class:`~mgkflow.errors.ParameterTypeError` naming ``name``, a NUL character a
    :class:`~mgkflow.errors.ParameterError`.

    Examples
    --------
    >>> as_path("K.npz").name
    'K.npz'
    >>> as_path(7, "out")
    Traceback (most recent call last):
    ...
    mgkflow.errors.ParameterTypeError: out must be a path (str or os.PathLike), got int 7
    """
    if not isinstance(value, (str, bytes, os.PathLike)):
        raise ParameterTypeError(
            f"{name} must be a path (str or os.PathLike), got {type(value).__name__} {value!r:.60}"
        )
    try:
        text = os.fspath(value)
    except TypeError as exc:  # an os.PathLike whose __fspath__ returns something else
        raise ParameterTypeError(f"{name} must be a path (str or os.PathLike), got {type(value).__name__}") from exc
    if isinstance(text, bytes):
        text = os.fsdecode(text)
    if "\x00" in text:
        raise ParameterError(f"{name}: a path cannot contain a NUL character, got {text!r:.60}")
    return Path(text)


def check_flag(name: str, value: Any) -> bool:
    """``value`` as a bool if it is True or False (numpy's too), else a
    :class:`~mgkflow.errors.ParameterTypeError` naming ``name``.

    Examples
    --------
    >>> check_flag("lazy", True)
    True
    >>> check_flag("lazy", "yes")
    Traceback (most recent call last):
    ...
    mgkflow.errors.ParameterTypeError: lazy must be True or False, got str 'yes'
    """
    if not isinstance(value, (bool, np.bool_)):
        raise ParameterTypeError(f"{name} must be True or False, got {type(value).__name__} {value!r:.60}")
    return bool(value)


def check_optional_flag(name: str, value: Any) -> bool | None:
    """``value`` if it is None, True or False, else a :class:`~mgkflow.errors.ParameterTypeError` naming ``name``.

    Examples
    --------
    >>> check_optional_flag("header", None) is None
    True
    >>> check_optional_flag("header", 7)
    Traceback (most recent call last):
    ...
    mgkflow.errors.ParameterTypeError: header must be True, False or None, got int 7
    """
    if value is None:
        return None
    if not isinstance(value, (bool, np.bool_)):
        raise ParameterTypeError(f"{name} must be True, False or None, got {type(value).__name__} {value!r:.60}")
    return bool(value)


def check_attribute_name(name: str, value: Any, optional: bool = True) -> Any:
    """``value`` if it can name a node or edge attribute (a str, or any other hashable key a networkx
    graph takes), else a :class:`~mgkflow.errors.ParameterTypeError` naming ``name``. None passes
    when ``optional``.

    Examples
    --------
    >>> check_attribute_name("weight", "w"), check_attribute_name("weight", None)
    ('w', None)
    >>> check_attribute_name("weight", [])
    Traceback (most recent call last):
    ...
    mgkflow.errors.ParameterTypeError: weight must be an attribute name (str) or None, got list []
    """
    if value is None and optional:
        return None
    try:
        hash(value)
    except TypeError:
        expected = "an attribute name (str)" + (" or None" if optional else "")
        raise ParameterTypeError(f"{name} must be {expected}, got {type(value).__name__} {value!r:.60}") from None
    return value


def check_attribute_names(name: str, value: Any) -> list[Any]:
    """``value`` (attribute names: one str, or a sequence of them; None: none) as a list, else a
    :class:`~mgkflow.errors.ParameterTypeError` naming ``name``.

    Examples
    --------
    >>> check_attribute_names("node_labels", ["a", "b"]), check_attribute_names("node_labels", "a")
    (['a', 'b'], ['a'])
    >>> check_attribute_names("node_labels", 7)
    Traceback (most recent call last):
    ...
    mgkflow.errors.ParameterTypeError: node_labels must be a sequence of attribute names (str), got int 7
    """
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if not isinstance(value, Iterable) or isinstance(value, (bytes, Mapping)) or is_frame(value):
        raise ParameterTypeError(
            f"{name} must be a sequence of attribute names (str), got {type(value).__name__} {value!r:.60}"
        )
    names = list(value)
    for v in names:
        check_attribute_name(f"{name} item", v, optional=False)
    return names


def is_frame(obj: Any) -> bool:
    """A pandas DataFrame or Series (iterable, but not a list of names)."""
    return (type(obj).__module__ or "").startswith("pandas") and type(obj).__name__ in ("DataFrame", "Series")
