"""Fuzz target: the Python API (graphs, base kernels, ``MarginalizedGraphKernel`` on the CPU).

Properties: ``api`` (rough graphs and parameters: a Gram matrix or an mgkflow error),
``api-valid`` (legal inputs over wide ranges) and ``scale`` (K unchanged when every edge
weight is multiplied by one constant).
"""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np

from ..checks import FuzzTimeout, Outcome, Property, _py, _responsible, check_gram, guarded
from ..inputs import _graph, _kernel, graph_specs, kernel_specs

__all__ = ["run_api_case", "run_scale_case", "SCALES", "strategies", "PROPERTIES"]


def strategies(st: Any) -> dict[str, Any]:
    """``api`` (rough), ``valid_api`` (legal, scale property) and ``valid_wide`` (legal, wide ranges) cases."""
    nan, inf = float("nan"), float("inf")
    graph = graph_specs(st)
    kernel = kernel_specs(st)
    q = st.one_of(st.floats(0.01, 0.9), st.sampled_from([0.05, 0.0, 1.0, -0.1, nan, inf, 1e-8, 2**1100, "0.1",
                                                          None, [0.1]]))
    p = st.one_of(st.just(1.0), st.floats(0.1, 10.0), st.sampled_from([0.0, -1.0, 1e150, 1e200, nan, "x"]))
    api = st.fixed_dictionaries(
        {"graphs": st.lists(graph(), min_size=1, max_size=3), "node_kernel": kernel, "edge_kernel": kernel,
         "q": q, "p": p, "normalize": st.booleans(), "cross": st.booleans()}
    )
    valid_kernel = st.sampled_from([("delta", "a", 0.5), ("const", 1.0)])
    valid_ekernel = st.sampled_from([("sqexp", "e", 1.0), ("const", 1.0)])
    valid_api = st.fixed_dictionaries(
        {"graphs": st.lists(graph(valid=True), min_size=1, max_size=3), "node_kernel": valid_kernel,
         "edge_kernel": valid_ekernel, "q": st.sampled_from([0.05, 0.3])}
    )
    # valid graphs and parameters over wide (but legal) ranges: a Gram matrix is expected
    wide_w = st.one_of(st.floats(1e-6, 1e6), st.sampled_from([1e-12, 1e12]))

    @st.composite
    def wide_graph(draw):
        spec = draw(graph(valid=True))
        spec["edges"] = [(i, j, draw(wide_w)) for i, j, _ in spec["edges"]]
        return spec

    wide_kernel = st.one_of(
        st.tuples(st.just("delta"), st.just("a"), st.floats(0.001, 1.0)),
        st.tuples(st.just("const"), st.floats(1e-3, 1.0)),
    )
    wide_ekernel = st.one_of(
        st.tuples(st.just("sqexp"), st.just("e"), st.floats(0.01, 100.0)),
        st.tuples(st.just("const"), st.floats(1e-3, 1.0)),
    )
    valid_wide = st.fixed_dictionaries(
        {"graphs": st.lists(wide_graph(), min_size=1, max_size=3), "node_kernel": wide_kernel,
         "edge_kernel": wide_ekernel, "q": st.floats(1e-3, 0.99), "p": st.floats(0.01, 100.0),
         "normalize": st.booleans(), "cross": st.booleans()}
    )
    return {"api": api, "valid_api": valid_api, "valid_wide": valid_wide}


def _same_graph(a: Any, b: Any) -> bool:
    eq = np.array_equal
    return (
        eq(a.adjacency.indptr, b.adjacency.indptr) and eq(a.adjacency.indices, b.adjacency.indices)
        and eq(a.adjacency.data, b.adjacency.data) and a.title == b.title
        and all(eq(v, b.node_labels[k]) and v.dtype == b.node_labels[k].dtype for k, v in a.node_labels.items())
        and all(eq(v, b.edge_labels[k]) and v.dtype == b.edge_labels[k].dtype for k, v in a.edge_labels.items())
        and set(a.node_labels) == set(b.node_labels) and set(a.edge_labels) == set(b.edge_labels)
    )


def run_api_case(spec: dict[str, Any]) -> Outcome:
    """Build the graphs and kernel of ``spec`` and compute K (symmetric, or cross when ``spec["cross"]``)."""

    def go() -> Outcome:
        from mgkflow import MarginalizedGraphKernel

        graphs = [_graph(g) for g in spec["graphs"]]
        for g in graphs:
            if not _same_graph(g, pickle.loads(pickle.dumps(g))):
                return Outcome("bad", "pickle@graph.py", repr(g))
        kern = MarginalizedGraphKernel(
            node_kernel=_kernel(spec.get("node_kernel")), edge_kernel=_kernel(spec.get("edge_kernel")),
            q=spec.get("q", 0.05), p=spec.get("p", 1.0), backend="cpu", **spec.get("options", {}),
        )
        if spec.get("cross"):
            half = max(1, len(graphs) // 2)
            K = kern(graphs[:half], graphs[half:] or graphs[:1], normalize=spec.get("normalize", False))
            return check_gram(K, symmetric=False)
        return check_gram(kern(graphs, normalize=spec.get("normalize", False)))

    return guarded(go)


SCALES = (1e-150, 1e-80, 1e-8, 1e8, 1e80, 1e150)


def run_scale_case(spec: dict[str, Any], scales: tuple[float, ...] = SCALES) -> Outcome:
    """K must not change when every edge weight is multiplied by one constant c."""

    def go() -> Outcome:
        from mgkflow import MarginalizedGraphKernel

        kern = MarginalizedGraphKernel(
            node_kernel=_kernel(spec.get("node_kernel")), edge_kernel=_kernel(spec.get("edge_kernel")),
            q=spec.get("q", 0.05), backend="cpu",
        )
        K0 = kern([_graph(g) for g in spec["graphs"]])
        for c in scales:
            try:
                Kc = kern([_graph(g, scale=c) for g in spec["graphs"]])
            except FuzzTimeout:
                raise
            except Exception as exc:  # noqa: BLE001
                ours, _ = _responsible(exc.__traceback__)
                return Outcome("bad", f"scale-variance@{ours}", f"c={c:g}: {type(exc).__name__}: {exc!s:.150}")
            if not np.allclose(Kc, K0, rtol=1e-6, atol=0):
                return Outcome("bad", "scale-variance@mgk.py", f"c={c:g}: max rel diff "
                               f"{np.nanmax(np.abs(Kc - K0) / np.abs(K0)):.3g}")
        return check_gram(K0)

    return guarded(go)



PROPERTIES = (
    Property("api", "api", run_api_case, lambda c: f"run_api_case({_py(c)})"),
    Property("api-valid", "valid_wide", run_api_case, lambda c: f"run_api_case({_py(c)})"),
    Property("scale", "valid_api", run_scale_case, lambda c: f"run_scale_case({_py(c)})"),
)
