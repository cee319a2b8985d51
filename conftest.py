"""Doctest collection over the package (``pytest --doctest-modules mgkflow``).

Modules that import PyCUDA at import time are skipped where PyCUDA is absent (CI has
no GPU); their doctests run on the GPU machine.
"""

import importlib.util

collect_ignore = []
if importlib.util.find_spec("pycuda") is None:
    collect_ignore += ["mgkflow/gpu/backend.py"]


def pytest_ignore_collect(collection_path, config):
    """Deprecated alias modules (:func:`mgkflow._compat.moved`) are another module under an old
    name: collecting their doctests would import the same file twice."""
    if collection_path.suffix == ".py" and collection_path.is_file():
        if "sys.modules[__name__] = moved(" in collection_path.read_text(encoding="utf-8"):
            return True
    return None
