"""Benchmarks (apart from the tests): ``python -m mgkflow.bench SUITE [options]``.

Suites: ``gpu`` (paper workloads, GPU solver, optional GraphDot ratios), ``cpu``
(CPU backend vs GraKeL), ``reorder`` (orderings: octiles and time), ``primitives``
and ``ablation`` (GPU primitive map and ablation), ``gpu_sweep`` (a hyperparameter sweep:
compiles and time per evaluation), ``gpu_calibrate`` (cost models of the GPU strategies),
``gram`` (tiled Gram matrices: in-process vs Dask, kill and resume), ``theta`` (one warm
K + dK step of a GP fit: wall, device and host time), ``scale`` (a low-rank GP fitted on up to
10⁵–10⁶ molecules and a screen with it: time, scores, peak memory, a resume check), ``dense`` (an
exact GP step's n × n algebra: host LAPACK against the GPU's cuSOLVER), ``balance`` (the warp
balance of the per-block solver's XMV schedules, modelled on the host), ``banks`` (the shared-memory
wavefronts of its loads of P under two row layouts, modelled on the host) and ``fuzz``
(property-based fuzzing of the API and CLI). Each writes CSV or JSON under ``reports/``.

The benchmarks live here, apart from the runtime code they measure; ``fuzz`` is not a
benchmark but runs the same way: its package is :mod:`mgkflow.fuzz`. The old module names
``mgkflow.gram.bench`` and ``mgkflow.bench.fuzz`` are deprecated aliases.
"""

import sys
import warnings
from collections.abc import Callable
from typing import NoReturn

SUITES = {
    "gpu": "mgkflow.bench.gpu",
    "cpu": "mgkflow.bench.cpu",
    "reorder": "mgkflow.bench.reorder",
    "primitives": "mgkflow.bench.primitives",
    "ablation": "mgkflow.bench.ablation",
    "gpu_sweep": "mgkflow.bench.gpu_sweep",
    "gpu_calibrate": "mgkflow.bench.gpu_calibrate",
    "gram": "mgkflow.bench.gram",
    "theta": "mgkflow.bench.theta_loop",
    "scale": "mgkflow.bench.learn_scale",
    "dense": "mgkflow.bench.dense",
    "balance": "mgkflow.bench.balance",
    "banks": "mgkflow.bench.banks",
    "fuzz": "mgkflow.fuzz",
}


def _run_moved(old: str, new: str, main: Callable[[], int | None]) -> NoReturn:
    """``python -m OLD`` of a moved benchmark module: warn that it is now ``python -m NEW``, run ``main``, exit."""
    warnings.warn(
        f"python -m {old} has moved to python -m {new}; the old name will be removed", DeprecationWarning, stacklevel=2
    )
    sys.exit(main())
