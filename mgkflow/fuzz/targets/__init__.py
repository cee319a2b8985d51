"""The fuzz targets: one module each, registered in :data:`TARGETS`.

A target module holds what is fuzzed and how its cases are drawn:

- ``run_<name>_case(case) -> Outcome``: run one case through
  :func:`~mgkflow.fuzz.checks.guarded` and check its result;
- ``strategies(st) -> dict``: its hypothesis strategies by name (built from the shared ones
  of :mod:`mgkflow.fuzz.inputs`; ``st`` is ``hypothesis.strategies``);
- ``PROPERTIES``: its :class:`~mgkflow.fuzz.checks.Property` entries (suite name, strategy
  name, runner, reproducer), which the long run (``python -m mgkflow.bench fuzz``) fuzzes.

Adding a target is adding its module here and to :data:`TARGETS`.

Examples
--------
>>> [p.name for p in properties()]
['api', 'api-valid', 'scale', 'file', 'readers', 'sklearn', 'cli']
"""

from __future__ import annotations

from typing import Any

from . import api, cli, files, readers, sklearn

__all__ = ["TARGETS", "properties", "strategies"]

#: The target modules, in the order the long run fuzzes them.
TARGETS = (api, files, readers, sklearn, cli)


def properties() -> list:
    """Every target's properties, in :data:`TARGETS` order."""
    return [p for t in TARGETS for p in t.PROPERTIES]


def strategies() -> dict[str, Any]:
    """Hypothesis strategies of every target by name: ``api``, ``valid_api``, ``valid_wide``, ``file``,
    ``readers``, ``sklearn``, ``cli``."""
    from hypothesis import strategies as st

    out: dict[str, Any] = {}
    for t in TARGETS:
        out.update(t.strategies(st))
    return out
