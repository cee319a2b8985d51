"""mgkflow: the marginalized graph kernel on GPUs, with a pluggable node-reordering stage.

The data flow is load -> reorder -> pack -> solve -> report:
:mod:`mgkflow.datasets` (load), :mod:`mgkflow.reorder`, :mod:`mgkflow.format` (pack),
:mod:`mgkflow.backends` (solve: ``exact`` and ``cpu`` in :mod:`mgkflow.backends.exact` and
:mod:`mgkflow.backends.cpu`, ``gpu`` in :mod:`mgkflow.gpu`), :mod:`mgkflow.pipeline` and
:mod:`mgkflow.report`. :class:`MarginalizedGraphKernel` (:mod:`mgkflow.mgk`) is a scikit-learn
kernel on graphs (Gaussian processes, kernel ridge, SVMs), with analytic gradients
(docs/gradients.md); :mod:`mgkflow.evaluation` computes its calls with a backend.
"""

from ._version import __version__ as __version__
from .errors import (
    BackendUnavailableError,
    ConvergenceError,
    ConvergenceWarning,
    FileFormatError,
    GraphError,
    KernelRangeError,
    MgkflowError,
    OutputPathError,
    ParameterError,
    ParameterTypeError,
    ProblemTooLargeError,
)
from .gram import load_gram
from .graph import Graph
from .mgk import DegenerateKernelWarning, MarginalizedGraphKernel, SolveStats, gpu_available

__all__ = [
    "Graph",
    "MarginalizedGraphKernel",
    "SolveStats",
    "MgkflowError",
    "GraphError",
    "FileFormatError",
    "KernelRangeError",
    "ParameterError",
    "ParameterTypeError",
    "OutputPathError",
    "ConvergenceError",
    "BackendUnavailableError",
    "ProblemTooLargeError",
    "ConvergenceWarning",
    "DegenerateKernelWarning",
    "gpu_available",
    "load_gram",
]
