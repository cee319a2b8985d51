"""Dispatch ``python -m mgkflow.bench SUITE ...`` to ``mgkflow.bench.SUITE.main(argv)``."""

from __future__ import annotations

import importlib
import sys

from . import SUITES


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: python -m mgkflow.bench SUITE [options]   (also: mgkflow bench SUITE [options])")
        print("       python -m mgkflow.bench SUITE --help")
        print("SUITE is one of: " + ", ".join(SUITES))
        return 0 if argv else 2
    suite, rest = argv[0], argv[1:]
    if suite not in SUITES:
        print(f"unknown suite {suite!r}; choose from {', '.join(SUITES)}", file=sys.stderr)
        return 2
    try:
        module = importlib.import_module(SUITES[suite])
    except ImportError as exc:
        print(f"suite {suite!r} is not available: {exc}", file=sys.stderr)
        return 2
    return int(module.main(rest) or 0)


if __name__ == "__main__":
    sys.exit(main())
