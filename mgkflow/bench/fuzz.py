"""Deprecated: moved to :mod:`mgkflow.fuzz` (run it as ``python -m mgkflow.bench fuzz``).

``python -m mgkflow.bench.fuzz [options]`` still runs the same fuzz run, with a warning.
"""

import sys

from .._compat import moved

if __name__ == "__main__":
    from ..fuzz import main
    from . import _run_moved

    _run_moved("mgkflow.bench.fuzz", "mgkflow.bench fuzz", main)
else:
    sys.modules[__name__] = moved(__name__, "mgkflow.fuzz")
