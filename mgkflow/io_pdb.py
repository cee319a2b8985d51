"""Deprecated: moved to :mod:`mgkflow.io.pdb` (the parser itself is in :mod:`mgkflow.io.pdb_parser`)."""
import sys

from ._compat import moved

sys.modules[__name__] = moved(__name__, "mgkflow.io.pdb")
