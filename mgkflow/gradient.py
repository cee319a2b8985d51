"""Deprecated: moved to :mod:`mgkflow.evaluation.gradient`."""

import sys

from ._compat import moved

sys.modules[__name__] = moved(__name__, "mgkflow.evaluation.gradient")
