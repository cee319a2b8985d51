"""Deprecated: moved to :mod:`mgkflow.bench.gram` (run it as ``python -m mgkflow.bench gram``).

``python -m mgkflow.gram.bench [options]`` still runs the same benchmark, with a warning.
"""

import sys

from .._compat import moved

if __name__ == "__main__":
    import warnings

    from ..bench.gram import main

    warnings.warn(
        "python -m mgkflow.gram.bench has moved to python -m mgkflow.bench gram; the old name will be removed",
        DeprecationWarning,
        stacklevel=1,
    )
    sys.exit(main())
else:
    sys.modules[__name__] = moved(__name__, "mgkflow.bench.gram")
