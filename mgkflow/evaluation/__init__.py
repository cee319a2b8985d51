"""Evaluation of the marginalized graph kernel: what happens between ``kern(X, Y)`` and the backends.

:class:`~mgkflow.MarginalizedGraphKernel` holds the parameters (the scikit-learn side:
hyperparameters, θ, bounds, cloning, pickling); every function here takes that kernel object
(:class:`~mgkflow.evaluation.spec.KernelSpec`) and computes with a backend of
:mod:`mgkflow.backends`. Imports run one way: kernel object -> evaluation -> backends ->
system / kernels / graph.

======================================  ==============================================================
module                                  what
======================================  ==============================================================
:mod:`~mgkflow.evaluation.matrix`       a call: :func:`kernel_matrix` (Gram, cross, gradient,
                                        normalization, nodal) and :func:`diagonal`
:mod:`~mgkflow.evaluation.solve`        a list of pairs solved: lmin, the start probabilities' scale,
                                        :func:`~mgkflow.evaluation.solve.record` (``last_stats``)
:mod:`~mgkflow.evaluation.nodal`        node-pair similarities (``nodal=True``)
:mod:`~mgkflow.evaluation.systems`      graphs to prepared systems (cached per kernel), pair lists
:mod:`~mgkflow.evaluation.backend`      backend choice (``make_backend``, kept per kernel), the oracle
:mod:`~mgkflow.evaluation.gradient`     length-0 term, normalized gradient, log space
:mod:`~mgkflow.evaluation.checks`       parameter validation, overflow, normalization and convergence
:mod:`~mgkflow.evaluation.stats`        :class:`SolveStats`, :class:`DegenerateKernelWarning`
:mod:`~mgkflow.evaluation.spec`         :class:`~mgkflow.evaluation.spec.KernelSpec`: what is read
                                        from the kernel object
======================================  ==============================================================

Examples
--------
>>> import networkx as nx
>>> import numpy as np
>>> from mgkflow import Graph, MarginalizedGraphKernel
>>> from mgkflow.evaluation import diagonal, kernel_matrix
>>> gs = [Graph.from_networkx(nx.cycle_graph(n)) for n in (3, 4)]
>>> kern = MarginalizedGraphKernel(q=0.1, backend="cpu")
>>> bool(np.allclose(np.diag(kernel_matrix(kern, gs)), diagonal(kern, gs)))
True
"""

from .backend import get_backend, gpu_available, oracle
from .checks import Q_MIN, validate
from .gradient import length0_term, log_space, normalized_gradient
from .matrix import diagonal, kernel_matrix
from .solve import LMIN_RESOLUTION
from .spec import KernelSpec
from .stats import DegenerateKernelWarning, SolveStats

__all__ = [
    "kernel_matrix",
    "diagonal",
    "validate",
    "get_backend",
    "oracle",
    "gpu_available",
    "length0_term",
    "normalized_gradient",
    "log_space",
    "KernelSpec",
    "SolveStats",
    "DegenerateKernelWarning",
    "LMIN_RESOLUTION",
    "Q_MIN",
]
