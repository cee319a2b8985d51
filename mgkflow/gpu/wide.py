"""Deprecated: moved to :mod:`mgkflow.gpu.solvers.wide`."""

import sys

from .._compat import moved

sys.modules[__name__] = moved(__name__, "mgkflow.gpu.solvers.wide")
