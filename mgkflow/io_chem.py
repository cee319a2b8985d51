"""Deprecated: moved to :mod:`mgkflow.io.rdkit`."""
import sys

from ._compat import moved

sys.modules[__name__] = moved(__name__, "mgkflow.io.rdkit")
