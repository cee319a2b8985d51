"""Deprecated: moved to :mod:`mgkflow.bench.gram` (run it as ``python -m mgkflow.bench gram``).

``python -m mgkflow.gram.bench [options]`` still runs the same benchmark, with a warning.
"""

import sys

from .._compat import moved

if __name__ == "__main__":
    from ..bench import _run_moved
    from ..bench.gram import main

    _run_moved("mgkflow.gram.bench", "mgkflow.bench gram", main)
else:
    sys.modules[__name__] = moved(__name__, "mgkflow.bench.gram")
