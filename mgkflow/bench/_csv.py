"""The benchmarks' CSV tables."""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["write_csv"]


def write_csv(path: Path, rows: Sequence[Mapping[str, Any]], fieldnames: Sequence[str] | None = None) -> Path:
    """Write ``rows`` to ``path`` (its folder made if missing) as CSV with a header; the columns are
    ``fieldnames`` (other keys left out) or the first row's keys. Returns ``path``.

    Examples
    --------
    >>> import tempfile
    >>> p = write_csv(Path(tempfile.mkdtemp()) / "t" / "x.csv", [{"a": 1, "_b": 2}], ["a"])
    >>> p.read_text().split()
    ['a', '1']
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    cols = list(rows[0]) if fieldnames is None else list(fieldnames)
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=cols, extrasaction="raise" if fieldnames is None else "ignore")
        w.writeheader()
        w.writerows(rows)
    return path
