"""The package version, in a leaf module that any module may import (``mgkflow.__version__``)."""

__version__ = "0.1.0"
