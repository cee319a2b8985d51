"""Deprecated module paths: the old name of a moved module stays importable, with a warning.

A moved module leaves a two-line file at its old path::

    import sys
    from ._compat import moved
    sys.modules[__name__] = moved(__name__, "mgkflow.backends.exact")

so ``import mgkflow.cpu_solver`` (and every name in it, private ones included) keeps working
for one release and says where the module lives now.

Examples
--------
>>> import warnings
>>> with warnings.catch_warnings(record=True) as w:
...     warnings.simplefilter("always")
...     mod = moved("mgkflow.old_name", "mgkflow.errors")
>>> mod.__name__, issubclass(w[0].category, DeprecationWarning)
('mgkflow.errors', True)
"""

from __future__ import annotations

import importlib
import warnings
from types import ModuleType

__all__ = ["moved"]


def moved(old: str, new: str) -> ModuleType:
    """Warn that module ``old`` is now ``new`` and return ``new`` (to put in ``sys.modules[old]``)."""
    warnings.warn(f"{old} has moved to {new}; the old name will be removed", DeprecationWarning, stacklevel=3)
    return importlib.import_module(new)
