"""Deprecated: moved to :mod:`mgkflow.backends.cpu`."""

import sys

from ._compat import moved

sys.modules[__name__] = moved(__name__, "mgkflow.backends.cpu")
