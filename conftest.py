"""Doctest collection over the package (``pytest --doctest-modules mgkflow``).

Modules that import PyCUDA at import time are skipped where PyCUDA is absent (CI has
no GPU); their doctests run on the GPU machine. Today that is :mod:`mgkflow.gpu.backend`
alone: every other module of :mod:`mgkflow.gpu` reaches the driver through
:func:`mgkflow.gpu.device.driver` when it runs.

The deprecated aliases left at the old path of a moved module (``sys.modules[__name__] =
moved(__name__, ...)``, :mod:`mgkflow._compat`) are skipped too: importing one yields the new
module, whose file is not the alias's (pytest refuses such a module), and its doctests are
collected at the new path.
"""

import importlib.util
import re
from pathlib import Path

#: Modules that import PyCUDA at import time.
PYCUDA_AT_IMPORT = ["mgkflow/gpu/backend.py"]

collect_ignore = sorted(
    str(p.relative_to(Path(__file__).parent))
    for p in (Path(__file__).parent / "mgkflow").rglob("*.py")
    if re.search(r"^\s*sys\.modules\[__name__\] = moved\(", p.read_text(encoding="utf-8"), re.M)
)
if importlib.util.find_spec("pycuda") is None:
    collect_ignore += PYCUDA_AT_IMPORT
