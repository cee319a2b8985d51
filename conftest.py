"""Doctest collection over the package (``pytest --doctest-modules mgkflow``).

Modules that import PyCUDA at import time are skipped where PyCUDA is absent (CI has
no GPU); their doctests run on the GPU machine.
"""

import importlib.util

collect_ignore = []
if importlib.util.find_spec("pycuda") is None:
    collect_ignore += ["mgkflow/gpu/backend.py"]
