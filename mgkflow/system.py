"""Per-graph quantities of the marginalized graph kernel's linear system (docs/design.md §1).

:func:`prepare_graph` validates a graph against the kernels and the start/stop
probabilities and returns a :class:`GraphSystem` with p, q and d; every backend
(CPU, GPU) builds its system from these, so validation lives in one place.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Union

import numpy as np

from .errors import GraphError, ParameterTypeError, describe_graph
from .graph import Graph
from .kernels import BaseKernel, vector_dims

#: A start/stop probability: a scalar, the name of a node label field, a
#: callable ``f(graph) -> array of length n``, or one vector (graphs of its length only).
NodeProbability = Union[float, str, Callable[[Graph], Any]]

__all__ = [
    "GraphSystem",
    "KernelReads",
    "kernel_reads",
    "prepare_graph",
    "scale_weights",
    "scale_start",
    "with_stop",
    "with_stop_many",
    "Restopped",
    "stop_vectors",
    "system_graphs",
    "check_label_kinds",
    "NodeProbability",
]

_EXACT_FLOAT_INT = 2**53  # integers beyond ±2**53 are not all representable as float64


@dataclass(frozen=True)
class GraphSystem:
    """A validated graph with its start probabilities ``p``, stop probabilities ``q``
    and degrees ``d = rowsum(A) / (1 - q)`` (isolated nodes count rowsum 1).

    ``graph`` is the input graph with its edge weights multiplied by ``2**weight_exponent``,
    an exact power of two chosen so that the largest weight lies in [1, 2). K does not change
    when every weight of a graph is multiplied by one constant (D_x, A_x and b scale alike,
    x does not), and a power of two changes no digit of any weight, so every backend that
    reads ``graph.adjacency`` gets the same values as without scaling while weights of
    1e-150 or 1e150 no longer under- or overflow in the degree products. Graphs whose
    largest weight already lies in [1, 2) (unweighted graphs) are kept as they are.

    ``p_exponent`` is 0 from :func:`prepare_graph`. :func:`scale_start` returns the system with
    ``p`` times ``2**p_exponent`` (largest entry in [1, 2)); the kernel computed from such
    systems is K(G, G') · 2**(p_exponent + p_exponent'), which the caller scales back (raw K) or
    not at all (normalized K, where the factors cancel exactly), so start probabilities of 1e-160
    lose no digits to subnormal products.
    """

    graph: Graph
    index: int | None
    p: np.ndarray
    q: np.ndarray
    d: np.ndarray
    weight_exponent: int = 0
    p_exponent: int = 0
    #: ``(("node" or "edge", field), kind, value)`` for each scalar label field the kernels read: kind
    #: ``"f"`` (float64), ``"i"`` (int64, all within ±2**53) or ``"I"`` (int64 holding ``value``, an
    #: integer beyond ±2**53 that float64 cannot hold); see :func:`check_label_kinds`.
    label_kinds: tuple[tuple[tuple[str, str], str, int], ...] = ()
    #: the weighted degrees Σ_j A_ij of the scaled graph, 1 for isolated nodes (d = rowsum / (1 − q));
    #: kept so that another scalar q costs one division (:func:`with_stop`); None: computed on demand
    rowsum: np.ndarray | None = None

    @property
    def n(self) -> int:
        return self.graph.n_nodes

    @property
    def name(self) -> str:
        return describe_graph(self.index, self.graph.title)


def _real_array(value: Any, what: str, who: str, origin: str) -> np.ndarray:
    """``value`` as a float64 array; a clear error for complex, non-numeric or ragged input."""
    src = f" {origin}" if origin else ""
    try:
        raw = np.asarray(value)
    except ValueError as exc:  # ragged nested sequences
        raise GraphError(f"{who}: {what}{src} is not a numeric vector ({exc})") from exc
    if raw.dtype.kind == "c":
        raise GraphError(f"{who}: {what}{src} holds complex values; probabilities must be real")
    if raw.dtype.kind not in "biuf":
        raise GraphError(f"{who}: {what}{src} must be numeric, got dtype {raw.dtype} ({value!r:.60})")
    with np.errstate(over="ignore"):
        return raw.astype(np.float64)


def _number(value: Any) -> float | None:
    """``value`` as a float if it is a real number (Python or numpy scalar), else None."""
    if isinstance(value, float | int | np.floating | np.integer) and not isinstance(value, bool):
        return float(value)
    return None


def _node_vector(value: NodeProbability, graph: Graph, what: str, who: str) -> np.ndarray:
    n = graph.n_nodes
    v = _number(value)
    if v is not None:  # the common case: one number for every node
        if not np.isfinite(v):
            raise GraphError(f"{who}: {what} holds NaN or infinite values")
        return np.full(n, v)
    if isinstance(value, str):
        if value not in graph.node_labels:
            raise GraphError(f"{who}: {what} reads node label field '{value}', which the graph lacks")
        arr = np.asarray(graph.node_labels[value], dtype=np.float64)
    elif callable(value):
        arr = _real_array(value(graph), what, who, "returned by the callable")
        if arr.ndim == 0:
            arr = np.full(n, float(arr))
    elif isinstance(value, np.ndarray | list | tuple):
        arr = _real_array(value, what, who, "")  # one vector for graphs of its length
    else:
        try:
            arr = np.full(n, float(value))
        except (TypeError, ValueError) as exc:
            raise ParameterTypeError(
                f"{what} must be a number, a vector, a node label field name or a callable, got {value!r}"
            ) from exc
    if arr.shape != (n,):
        raise GraphError(f"{who}: {what} has shape {arr.shape}, expected ({n},)")
    if not np.all(np.isfinite(arr)):
        raise GraphError(f"{who}: {what} holds NaN or infinite values")
    return arr


@dataclass(frozen=True)
class KernelReads:
    """What a node and an edge kernel read of a graph: their label fields and the vector fields'
    dimensions (:func:`~mgkflow.kernels.vector_dims`). Made once per call by :func:`kernel_reads` and
    passed to :func:`prepare_graph` for each of the call's graphs."""

    node_fields: tuple[str, ...]
    edge_fields: tuple[str, ...]
    node_dims: dict[str, int]
    edge_dims: dict[str, int]


def kernel_reads(node_kernel: BaseKernel, edge_kernel: BaseKernel) -> KernelReads:
    """The :class:`KernelReads` of a node and an edge kernel (their structure, not their values)."""
    return KernelReads(
        tuple(node_kernel.fields), tuple(edge_kernel.fields), vector_dims(node_kernel), vector_dims(edge_kernel)
    )


def prepare_graph(
    graph: Graph,
    index: int | None,
    node_kernel: BaseKernel,
    edge_kernel: BaseKernel,
    p: NodeProbability = 1.0,
    q: NodeProbability = 0.05,
    reads: KernelReads | None = None,
) -> GraphSystem:
    """Validate ``graph`` for the kernel and compute its p, q and d.

    Raises :class:`~mgkflow.errors.GraphError` naming the graph (``index`` and
    title) and the field for missing label fields, and q outside (0, 1) or
    negative p. ``reads``: :func:`kernel_reads` of the two kernels, made once by a caller that
    prepares many graphs (made here otherwise).

    Examples
    --------
    >>> import numpy as np
    >>> from mgkflow.kernels import Constant
    >>> g = Graph(np.array([[0, 1.5], [1.5, 0]]))
    >>> prepare_graph(g, 0, Constant(1.0), Constant(1.0), q=0.5).d
    array([3., 3.])
    >>> s = prepare_graph(Graph(np.array([[0, 6.0], [6.0, 0]])), 0, Constant(1.0), Constant(1.0), q=0.5)
    >>> s.weight_exponent, s.d  # weights 6 stored as 1.5 = 6 * 2**-2
    (-2, array([3., 3.]))
    """
    if not isinstance(graph, Graph):
        raise ParameterTypeError(
            f"{describe_graph(index, None)}: expected mgkflow.Graph, got {type(graph).__name__} "
            "(convert with Graph.from_networkx)"
        )
    who = describe_graph(index, graph.title)
    if reads is None:
        reads = kernel_reads(node_kernel, edge_kernel)
    for field in reads.node_fields:
        if field not in graph.node_labels:
            raise GraphError(
                f"{who}: node kernel reads node label field '{field}', which the graph lacks "
                f"(it has {sorted(graph.node_labels) or 'none'})"
            )
    for field in reads.edge_fields:
        if field not in graph.edge_labels:
            raise GraphError(
                f"{who}: edge kernel reads edge label field '{field}', which the graph lacks "
                f"(it has {sorted(graph.edge_labels) or 'none'})"
            )
    sides = (
        ("node", node_kernel, graph.node_labels, reads.node_fields, reads.node_dims),
        ("edge", edge_kernel, graph.edge_labels, reads.edge_fields, reads.edge_dims),
    )
    for what, kernel, labels, fields, dims in sides:
        for field in fields:
            arr = labels[field]
            if field in dims and (arr.ndim != 2 or arr.shape[1] != dims[field]):
                raise GraphError(
                    f"{who}: {what} kernel reads '{field}' as a vector of dimension {dims[field]}, but the "
                    f"{what} label field has shape {arr.shape}"
                )
            if field not in dims and arr.ndim != 1:
                raise GraphError(
                    f"{who}: {what} label field '{field}' holds vectors (shape {arr.shape}), but {kernel!r} reads "
                    "it as a scalar; use a vector kernel (VectorSquareExponential, CosineSimilarity, MinMax)"
                )
    qv = _node_vector(q, graph, "stop probability q", who)
    _check_stop(qv, who)
    pv = _node_vector(p, graph, "start probability p", who)
    if pv.min(initial=0.0) < 0:
        raise GraphError(f"{who}: start probability p must be non-negative")
    graph, shift = scale_weights(graph)
    rowsum = graph.degree_sum()
    if not np.all(np.isfinite(rowsum)):
        raise GraphError(f"{who}: the weights of a node's edges sum beyond the float64 range")
    rowsum = np.where(rowsum > 0, rowsum, 1.0)
    d = rowsum / (1.0 - qv)
    _check_weight_span(d * qv, graph, who)
    kinds = _label_kinds(graph, reads)
    return GraphSystem(
        graph=graph, index=index, p=pv, q=qv, d=d, weight_exponent=shift, label_kinds=kinds, rowsum=rowsum
    )


def _check_stop(qv: np.ndarray, who: str) -> None:
    q_lo, q_hi = qv.min(initial=0.5), qv.max(initial=0.5)  # (an empty graph has no q to check)
    if q_lo <= 0 or q_hi >= 1:
        raise GraphError(f"{who}: stop probability q must lie in (0, 1), got values in [{q_lo}, {q_hi}]")
    if q_lo < 1e-10:
        raise GraphError(
            f"{who}: stop probability q = {q_lo:g} is below 1e-10: the system's condition number grows "
            "as 1/q and float64 can no longer resolve K"
        )


def with_stop(system: GraphSystem, q: float) -> GraphSystem:
    """``system`` with another scalar stop probability ``q`` (its q and d), checked as
    :func:`prepare_graph` checks it: a hyperparameter search moving q re-uses the validated graph.

    Examples
    --------
    >>> from mgkflow.kernels import Constant
    >>> g = Graph(np.array([[0, 1.5], [1.5, 0]]))
    >>> s = prepare_graph(g, 0, Constant(1.0), Constant(1.0), q=0.5)
    >>> t = with_stop(s, 0.25)
    >>> bool(np.array_equal(t.d, prepare_graph(g, 0, Constant(1.0), Constant(1.0), q=0.25).d)), t.q.tolist()
    (True, [0.25, 0.25])
    """
    who = describe_graph(system.index, system.graph.title)
    qv = _node_vector(q, system.graph, "stop probability q", who)
    _check_stop(qv, who)
    rowsum = system.rowsum
    if rowsum is None:
        rowsum = system.graph.degree_sum()
        rowsum = np.where(rowsum > 0, rowsum, 1.0)
    d = rowsum / (1.0 - qv)
    _check_weight_span(d * qv, system.graph, who)
    return replace(system, q=qv, d=d, rowsum=rowsum)


def with_stop_many(systems: Sequence[GraphSystem], q: float) -> Sequence[GraphSystem]:
    """:func:`with_stop` of many systems and one scalar ``q``, vectorized over their nodes (a
    hyperparameter search over a few thousand molecules moves q at every step): a
    :class:`Restopped` sequence, whose systems are made when first asked for.

    Examples
    --------
    >>> from mgkflow.kernels import Constant
    >>> gs = [Graph(np.array([[0, 1.0], [1.0, 0]])), Graph(np.array([[0, 2.0, 0], [2.0, 0, 1], [0, 1, 0]]))]
    >>> ss = [prepare_graph(g, i, Constant(1.0), Constant(1.0), q=0.5) for i, g in enumerate(gs)]
    >>> all(np.array_equal(a.d, with_stop(s, 0.2).d) for a, s in zip(with_stop_many(ss, 0.2), ss))
    True
    """
    q = float(q)
    if isinstance(systems, Restopped):
        if not (np.isfinite(q) and 1e-10 <= q < 1):
            return [with_stop(s, q) for s in systems.base]  # the errors name the graph
        out = Restopped(systems.base, q, systems.rows, systems.bounds, systems.graphs)
    else:
        systems = list(systems)
        if not systems:
            return []
        if not (np.isfinite(q) and 1e-10 <= q < 1) or any(s.rowsum is None for s in systems):
            return [with_stop(s, q) for s in systems]  # the errors name the graph
        rowsums = [s.rowsum for s in systems]
        bounds = np.zeros(len(systems) + 1, dtype=np.int64)
        np.cumsum(np.fromiter(map(len, rowsums), dtype=np.int64, count=len(rowsums)), out=bounds[1:])
        out = Restopped(tuple(systems), q, np.concatenate(rowsums), bounds)
    rows, bounds = out.rows, out.bounds
    if rows.size and rows.min() / (1.0 - q) * q < DQ_MIN:  # min(d q), as d q rounds (monotone): which graph
        nonempty = np.flatnonzero(np.diff(bounds) > 0)
        low = np.minimum.reduceat(out.d * out.q, bounds[nonempty])
        bad = nonempty[low < DQ_MIN]
        if bad.size:
            with_stop(out.base[int(bad[0])], q)  # raises, naming the graph
    return out


class Restopped(Sequence):
    """The systems of ``base`` with one scalar stop probability ``q``: :func:`with_stop_many`'s result.

    A system (``base[i]`` with its q and d replaced, as :func:`with_stop` makes it) is made when
    first asked for. A hyperparameter step that moves q therefore costs one division over all the
    nodes (``d``, ``q``: every node's, concatenated in order, ``bounds`` delimiting the graphs), and
    a caller that needs only those vectors and the graphs (the GPU backend refreshing its node
    vectors) never makes the systems.

    Examples
    --------
    >>> from mgkflow.kernels import Constant
    >>> ss = [prepare_graph(Graph(np.ones((2, 2)) - np.eye(2)), 0, Constant(1.0), Constant(1.0), q=0.5)]
    >>> r = with_stop_many(ss, 0.2)
    >>> len(r), r.d.tolist(), r[0].q.tolist(), r[0] is r[0]
    (1, [1.25, 1.25], [0.2, 0.2], True)
    """

    __slots__ = ("base", "q", "rows", "bounds", "d", "graphs", "_made")

    def __init__(
        self, base: tuple, q: float, rows: np.ndarray, bounds: np.ndarray, graphs: tuple | None = None
    ) -> None:
        self.base = base  # the systems whose graph, p and rowsum every q shares
        self.rows = rows
        self.bounds = bounds
        self.d = rows / (1.0 - q)
        self.q = np.full(rows.size, q)
        self.graphs = tuple(s.graph for s in base) if graphs is None else graphs
        self._made: list = [None] * len(base)

    def __len__(self) -> int:
        return len(self.base)

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        s = self._made[i]
        if s is None:
            i = range(len(self))[i]  # a negative index, or an IndexError
            a, b = int(self.bounds[i]), int(self.bounds[i + 1])
            fields = self.base[i].__dict__.copy()  # a frozen dataclass: its fields copied, two of them new
            fields["q"], fields["d"] = self.q[a:b], self.d[a:b]
            s = object.__new__(GraphSystem)
            object.__setattr__(s, "__dict__", fields)
            self._made[i] = s
        return s

    def __iter__(self):
        return (self[i] for i in range(len(self)))


def stop_vectors(systems: Sequence[GraphSystem]) -> tuple[np.ndarray, np.ndarray]:
    """(q, d) of every node of ``systems``, concatenated in order (without making a
    :class:`Restopped` sequence's systems)."""
    if isinstance(systems, Restopped):
        return systems.q, systems.d
    if not len(systems):
        return np.zeros(0), np.zeros(0)
    return np.concatenate([s.q for s in systems]), np.concatenate([s.d for s in systems])


def system_graphs(systems: Sequence[GraphSystem]) -> tuple:
    """The graphs of ``systems``, in order (a :class:`Restopped` sequence's without making its systems)."""
    return systems.graphs if isinstance(systems, Restopped) else tuple(s.graph for s in systems)


def _label_kinds(graph: Graph, reads: KernelReads) -> tuple:
    """The :attr:`GraphSystem.label_kinds` of ``graph``'s scalar label fields read by the kernels."""
    out, ints = [], []
    for what, labels, fields in (("node", graph.node_labels, reads.node_fields),
                                 ("edge", graph.edge_labels, reads.edge_fields)):  # fmt: skip
        for field in fields:
            arr = labels[field]
            if arr.ndim != 1 or arr.size == 0:
                continue  # vector labels are always float64; an empty array holds no label of any kind
            out.append(((what, field), "f" if arr.dtype.kind == "f" else "i", 0))
            if arr.dtype.kind != "f" and arr.dtype.itemsize > 4:
                ints.append((len(out) - 1, arr))
    # the integer fields in one pass where they share a dtype (Graph holds integers as int64; most are small),
    # else (or when some value lies beyond ±2**53) field by field
    if ints and not _within_exact(ints):
        for k, arr in ints:
            big = np.flatnonzero((arr > _EXACT_FLOAT_INT) | (arr < -_EXACT_FLOAT_INT))
            if big.size:
                out[k] = (out[k][0], "I", int(arr[big[0]]))
    return tuple(out)


def _within_exact(ints: list[tuple[int, np.ndarray]]) -> bool:
    """Whether every value of these integer arrays of one dtype lies within ±2**53 (False: look closer)."""
    if len({arr.dtype for _, arr in ints}) != 1:
        return False  # (mixed signed and unsigned arrays would concatenate as floats)
    every = np.concatenate([arr for _, arr in ints]) if len(ints) > 1 else ints[0][1]
    return bool(-_EXACT_FLOAT_INT <= every.min() and every.max() <= _EXACT_FLOAT_INT)


def check_label_kinds(groups: Sequence[tuple[str, Sequence[GraphSystem]]]) -> None:
    """Refuse label fields that a call's graphs hold as floats in one graph and as integers beyond ±2**53
    in another (docs/design.md §1.3).

    Kernels compare labels of two graphs in float64 when one graph holds a field as floats: an
    integer beyond ±2**53 would be rounded (2**53 + 1 would equal 2.0**53), so distinct labels would
    merge. One graph alone already refuses that mix (:class:`~mgkflow.graph.Graph`); this applies the
    same rule to all the graphs of a call. ``groups`` is ``[("X", xs), ("Y", ys)]`` (or X alone).

    Raises
    ------
    GraphError
        Naming the field and the two graphs.

    Examples
    --------
    >>> from mgkflow.kernels import Constant, KroneckerDelta
    >>> A = np.array([[0, 1.0], [1.0, 0]])
    >>> nk = KroneckerDelta(0.5, "l")
    >>> a = prepare_graph(Graph(A, node_labels={"l": np.array([2**53 + 1, 0])}), 0, nk, Constant(1.0))
    >>> b = prepare_graph(Graph(A, node_labels={"l": [2.0**53, 0.0]}), 1, nk, Constant(1.0))
    >>> try:
    ...     check_label_kinds([("X", [a, b])])
    ... except GraphError as exc:
    ...     print(str(exc)[:94])
    node label field 'l' holds floats in graph 1 of X but integer 9007199254740993 in graph 0 of X
    """
    first_float: dict[tuple[str, str], str] = {}
    first_big: dict[tuple[str, str], tuple[str, int]] = {}
    for arg, systems in groups:
        for s in systems:
            for key, kind, value in s.label_kinds:
                if kind == "f":
                    first_float.setdefault(key, f"{s.name} of {arg}")
                elif kind == "I":
                    first_big.setdefault(key, (f"{s.name} of {arg}", value))
    for key, (who_i, value) in first_big.items():
        if key not in first_float:
            continue
        raise GraphError(
            f"{key[0]} label field '{key[1]}' holds floats in {first_float[key]} but integer {value} in "
            f"{who_i}, beyond ±2**53 where float64 cannot hold every integer: comparing them would merge "
            "distinct labels; use integers in every graph (or floats in every graph)"
        )


#: Smallest d_i q_i of a node once the largest weight lies in [1, 2): a product of two is >= 2**-1022,
#: a normal float64 (docs/design.md §1.3).
DQ_MIN = 2.0**-511


def _check_weight_span(dq: np.ndarray, graph: Graph, who: str) -> None:
    """:class:`~mgkflow.errors.GraphError` when a node's d_i q_i (``graph``: the weights scaled so that the
    largest lies in [1, 2)) is below :data:`DQ_MIN`: the product system of this graph with any graph
    (itself included) would hold subnormal diagonal or right-hand-side entries, numerically singular to
    float64 (docs/design.md §1.3)."""
    if dq.size == 0 or dq.min() >= DQ_MIN:
        return
    i = int(np.argmin(dq))
    ratio = float(dq[i] / graph.adjacency.data.max())
    raise GraphError(
        f"{who}: edge weights span more than float64 can resolve: node {i}'s weighted degree times q is "
        f"{ratio:.3g} of the graph's largest edge weight (at least ~1e-154 is needed: the kernel multiplies "
        "such quantities of two graphs, and their product would fall below the float64 range, making the "
        "system singular). Bring the graph's weights within about 1e150 of each other (e.g. drop or clip "
        "negligible weights, or use log-scaled weights)"
    )


def scale_weights(graph: Graph) -> tuple[Graph, int]:
    """Return ``graph`` with its weights times ``2**shift`` (largest weight in [1, 2)) and ``shift``.

    The kernel is invariant under scaling all weights of one graph (see
    :class:`GraphSystem`); scaling by a power of two changes no significant digit.

    Examples
    --------
    >>> g = Graph(np.array([[0, 3e100], [3e100, 0]]))
    >>> h, shift = scale_weights(g)
    >>> shift, float(h.adjacency.data[0]) == float(np.ldexp(3e100, shift))
    (-333, True)
    >>> scale_weights(Graph(np.array([[0, 1], [1, 0]])))[1]
    0
    """
    data = graph.adjacency.data
    if data.size == 0:
        return graph, 0
    _, exp = np.frexp(data.max())  # max = m * 2**exp with m in [0.5, 1)
    shift = 1 - int(exp)  # max * 2**shift in [1, 2)
    if shift == 0:
        return graph, 0
    state = graph.__getstate__()
    state["data"] = np.ldexp(state["data"], shift)  # exact (2**shift itself may not be a float)
    out = Graph.__new__(Graph)  # the graph was validated when built: restore without re-checking
    out.__setstate__(state)
    return out, shift


def scale_start(system: GraphSystem) -> GraphSystem:
    """``system`` with its start probabilities times a power of two that puts the largest in [1, 2).

    Examples
    --------
    >>> from mgkflow.kernels import Constant
    >>> s = prepare_graph(Graph(np.array([[0, 1], [1, 0]])), 0, Constant(1.0), Constant(1.0), p=1e-160)
    >>> t = scale_start(s)
    >>> t.p_exponent, bool(np.all(t.p == np.ldexp(s.p, t.p_exponent)))
    (532, True)
    """
    top = float(system.p.max()) if system.p.size else 0.0
    if top <= 0:
        return system
    shift = 1 - int(np.frexp(top)[1])
    if shift == 0:
        return system
    return replace(system, p=np.ldexp(system.p, shift), p_exponent=system.p_exponent + shift)
