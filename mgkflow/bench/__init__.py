"""Benchmarks (apart from the tests): ``python -m mgkflow.bench SUITE [options]``.

Suites: ``gpu`` (paper workloads, GPU solver, optional GraphDot ratios), ``cpu``
(CPU backend vs GraKeL), ``reorder`` (orderings: octiles and time), ``primitives``
and ``ablation`` (GPU primitive map and ablation). Each writes CSV under ``reports/``.
"""

SUITES = {
    "gpu": "mgkflow.bench.gpu",
    "cpu": "mgkflow.bench.cpu",
    "reorder": "mgkflow.bench.reorder",
    "primitives": "mgkflow.bench.primitives",
    "ablation": "mgkflow.bench.ablation",
}
