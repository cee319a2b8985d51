"""Package discovery for setuptools (the rest of the configuration is in pyproject.toml).

Every package and data folder under ``mgkflow/`` is found; the repository's ``datasets/`` folder ships as
``mgkflow.data`` (``[tool.setuptools.package-dir]``), which discovery cannot rename, so it is
added by name.
"""

from setuptools import find_namespace_packages, setup

DATA_PACKAGES = ["mgkflow.data", "mgkflow.data.proteins"]

setup(packages=sorted([*find_namespace_packages(include=["mgkflow", "mgkflow.*"], exclude=["*__pycache__*"]), *DATA_PACKAGES]))
