"""Deprecated: moved to :mod:`mgkflow.fuzz` (run it as ``python -m mgkflow.bench fuzz``)."""

import sys

from .._compat import moved

if __name__ == "__main__":
    import warnings

    from ..fuzz import main

    warnings.warn(
        "python -m mgkflow.bench.fuzz has moved to python -m mgkflow.bench fuzz; the old name will be removed",
        DeprecationWarning,
        stacklevel=1,
    )
    sys.exit(main())
else:
    sys.modules[__name__] = moved(__name__, "mgkflow.fuzz")
