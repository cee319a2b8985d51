"""Input strategies (hypothesis) shared by the fuzz targets, and how their specs become mgkflow objects.

A graph is drawn as a *spec* (a dict of plain values, so that a reproducer is a literal):
``{"n": 3, "edges": [(0, 1, 1.5), ...], "node_labels": {...}, "edge_labels": {...}, ...}``;
:func:`_graph` builds the :class:`~mgkflow.Graph` (``scale`` multiplies every weight).
A kernel is a spec too: ``("delta", field, h)``, ``("sqexp", field, h)``, ``("const", c)``,
``("prod", spec, spec)`` or None, built by :func:`_kernel`. :func:`graph_specs` and
:func:`kernel_specs` draw them, from rough values (NaN, 1e300, strings, ...) or, with
``valid=True``, legal ones; :func:`_mutate` damages the text of an input file.

The strategies take hypothesis's ``strategies`` module as ``st`` (hypothesis is imported
by the caller, only where fuzzing runs).

Examples
--------
>>> g = _graph({"n": 3, "edges": [(0, 1, 2.0), (1, 2, 0.5)], "node_labels": {"a": [0, 1, 0]}})
>>> g.n_nodes, g.adjacency.nnz
(3, 4)
>>> _kernel(("prod", ("delta", "a", 0.5), ("const", 1.0))) is not None
True
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["graph_specs", "kernel_specs"]


def graph_specs(st: Any) -> Callable[..., Any]:
    """The strategy of graph specs: ``graph_specs(st)()`` (rough) or ``graph_specs(st)(valid=True)``.

    Rough: 1 to 7 nodes, edge weights mostly in [0.1, 10] but also 0, negative, NaN, inf,
    strings, None, complex, huge ints; sometimes an object or sparse adjacency, an asymmetric
    edge, node labels of any kind (ints, floats, vectors, ragged, text, mixed). Valid: weights
    in [0.1, 10], integer node labels ``a`` and float edge labels ``e``.
    """
    nan, inf = float("nan"), float("inf")
    good_w = st.floats(0.1, 10.0)
    weird_w = st.sampled_from([0.0, 1.0, 2, True, 1e-300, 5e-324, 1e300, 1e150, 1e-150, -1.0, nan, inf,
                               "1.5", b"1", None, 1j, 2**64])
    weight = st.one_of(good_w, good_w, good_w, weird_w)
    int_label = st.one_of(st.integers(-3, 3), st.sampled_from([2**63, 2**53 + 1, -(2**63), 2**70]))
    scalar_label = st.one_of(int_label, st.floats(-5, 5), st.sampled_from([0.5, nan, inf, "C", b"O", None, True]))

    @st.composite
    def node_field(draw, n):
        kind = draw(st.sampled_from(["int", "int", "float", "mixed", "vector", "ragged", "text"]))
        if kind == "int":
            return draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
        if kind == "float":
            return draw(st.lists(st.floats(-2, 2), min_size=n, max_size=n))
        if kind == "vector":
            d = draw(st.integers(1, 3))
            return draw(st.lists(st.lists(st.floats(-2, 2), min_size=d, max_size=d), min_size=n, max_size=n))
        if kind == "ragged":
            return draw(st.lists(st.lists(st.floats(-2, 2), min_size=0, max_size=3), min_size=n, max_size=n))
        if kind == "text":
            return draw(st.lists(st.sampled_from(["C", "N", "O"]), min_size=n, max_size=n))
        return draw(st.lists(scalar_label, min_size=n, max_size=n))

    @st.composite
    def graph(draw, valid=False):
        n = draw(st.integers(1, 7))
        pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
        chosen = draw(st.lists(st.sampled_from(pairs), unique=True, max_size=len(pairs))) if pairs else []
        w = good_w if valid else weight
        edges = [(i, j, draw(w)) for i, j in chosen]
        spec: dict[str, Any] = {"n": n, "edges": edges}
        if valid:
            spec["node_labels"] = {"a": draw(st.lists(st.integers(0, 2), min_size=n, max_size=n))}
            spec["edge_labels"] = {"e": draw(st.lists(st.floats(0.5, 2.0), min_size=1, max_size=3))}
            return spec
        if any(isinstance(e[2], (str, bytes, complex)) or e[2] is None for e in edges) or draw(st.booleans()):
            spec["object"] = any(not isinstance(e[2], (int, float)) for e in edges)
        if draw(st.integers(0, 9)) == 0:
            spec["asym"] = True
        if draw(st.integers(0, 4)) == 0:
            spec["sparse"] = True
        if draw(st.booleans()):
            spec["node_labels"] = {"a": draw(node_field(n))}
        if draw(st.booleans()):
            spec["edge_labels"] = {"e": draw(st.lists(st.one_of(st.floats(0, 3), scalar_label), min_size=0,
                                                      max_size=3))}
        return spec

    return graph


def kernel_specs(st: Any) -> Any:
    """The strategy of rough kernel specs: None, a base kernel or a product of two, on fields
    ``a``, ``e`` or a missing one, with parameters that may be 0, negative, NaN, huge or strings."""
    nan, inf = float("nan"), float("inf")
    kparam = st.one_of(st.floats(0.05, 5.0), st.sampled_from([0.0, 1.0, -1.0, 1e160, 5e-324, 1e-300, nan, inf,
                                                                 2**1100, "0.5", None]))
    field_name = st.sampled_from(["a", "e", "missing"])
    base = st.one_of(
        st.tuples(st.just("const"), kparam),
        st.tuples(st.just("delta"), field_name, kparam),
        st.tuples(st.just("sqexp"), field_name, kparam),
    )
    return st.one_of(st.none(), base, st.tuples(st.just("prod"), base, base))


def _mutate(st: Any, text: str) -> Any:
    """Strategy: ``text`` as bytes, sometimes truncated, with a line replaced or random bytes inserted."""

    @st.composite
    def mutated(draw):
        data = text.encode()
        how = draw(st.sampled_from(["keep", "truncate", "line", "bytes", "empty"]))
        if how == "truncate":
            data = data[: draw(st.integers(0, len(data)))]
        elif how == "line":
            lines = data.split(b"\n")
            k = draw(st.integers(0, max(0, len(lines) - 1)))
            lines[k] = draw(st.sampled_from([b"", b"x, y", b"1e999", b"-1", b"99999999999999999999", b"\x00\xff",
                                             b"1, 1", b"0", b"3.5", b"a b c"]))
            data = b"\n".join(lines)
        elif how == "bytes":
            k = draw(st.integers(0, len(data)))
            data = data[:k] + draw(st.binary(max_size=8)) + data[k:]
        elif how == "empty":
            data = b""
        return data

    return mutated()


def _kernel(spec: Any) -> Any:
    from mgkflow.kernels import Constant, KroneckerDelta, SquareExponential

    if spec is None:
        return None
    kind = spec[0]
    if kind == "const":
        return Constant(spec[1])
    if kind == "delta":
        return KroneckerDelta(spec[2], spec[1])
    if kind == "sqexp":
        return SquareExponential(spec[2], spec[1])
    if kind == "prod":
        return _kernel(spec[1]) * _kernel(spec[2])
    raise AssertionError(f"unknown kernel spec {spec!r}")


def _graph(spec: dict[str, Any], scale: float = 1.0) -> Any:
    from mgkflow import Graph

    n = spec["n"]
    A = np.zeros((n, n), dtype=object) if spec.get("object") else np.zeros((n, n))
    E = {f: [[0] * n for _ in range(n)] for f in spec.get("edge_labels", {})}
    for k, (i, j, w) in enumerate(spec["edges"]):
        A[i, j] = w if scale == 1.0 else w * scale
        if not spec.get("asym") or k:
            A[j, i] = A[i, j]
        for f, vals in spec.get("edge_labels", {}).items():
            E[f][i][j] = E[f][j][i] = vals[k % len(vals)] if vals else 0
    if not spec.get("object"):
        A = np.asarray(A, dtype=np.float64)
    if spec.get("sparse") and A.dtype != object:  # scipy has no object sparse arrays
        import scipy.sparse as sp

        A = sp.csr_array(A)
    labels = {}
    for f, m in E.items():
        text = any(isinstance(x, (str, bytes, list)) for r in m for x in r)
        labels[f] = np.asarray(m, dtype=object) if text else np.asarray(m)
    return Graph(A, node_labels=spec.get("node_labels") or None, edge_labels=labels or None, title=spec.get("title"))

