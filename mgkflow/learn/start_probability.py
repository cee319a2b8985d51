"""Start probabilities per node-label value as fitted hyperparameters: :class:`StartProbabilities`.

The solution x of the product system M x = D× q× of a marginalized graph kernel does not depend
on the start probabilities p (docs/design.md §1): K(G, G') = Σ_ii' p_i p'_i' x_ii'. With one start
probability p_a per *class* a of a node label (an element, say),

    K_p(G, G') = Σ_ab p_a p_b S_ab(G, G'),   S_ab(G, G') = Σ_{i ∈ a, i' ∈ b} x_ii',

where S is the node-pair similarity matrix of the graph kernel (``kern(X, Y, nodal=True)``)
summed over the nodes of each class. S is solved once; every later call with other p only
contracts it, with exact analytic gradients.
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.gaussian_process.kernels import Hyperparameter, Kernel

from ..errors import ParameterError, ParameterTypeError
from ..evaluation.checks import is_scalar, same_graphs
from ..evaluation.gradient import normalized_gradient
from ..graph import Graph
from ..mgk import MarginalizedGraphKernel
from ._wrap import check_bounds, check_flag, input_key, kept_inputs

__all__ = ["StartProbabilities", "class_counts"]

#: Bytes of the node-pair similarities that one nodal solve of the graph kernel may return; a
#: larger S is built from row blocks of graphs (each block one or two solves).
NODAL_BLOCK_BYTES = 256 * 2**20


def _node_values(g: Any, field: str, i: int) -> np.ndarray:
    """The values of label ``field`` of the nodes of graph ``g`` (the i-th of its set), 1-D."""
    if not isinstance(g, Graph):
        raise ParameterTypeError(f"StartProbabilities: item {i} is a {type(g).__name__}, not a mgkflow.Graph")
    labels = g.node_labels
    if field not in labels:
        raise ParameterError(
            f"StartProbabilities: graph {i} ({g.title or 'untitled'}) has no node label field {field!r}; "
            f"it has {sorted(labels)}"
        )
    v = np.asarray(labels[field])
    if v.ndim != 1:
        raise ParameterError(
            f"StartProbabilities: node label field {field!r} must hold one number per node, got shape {v.shape}"
        )
    return v


#: The most label classes with a start probability of their own: S holds (L + 1)² numbers per pair of graphs.
MAX_CLASSES = 64


def class_counts(X: Sequence[Graph], field: str) -> list[tuple[Any, int]]:
    """(value, number of nodes) of every value of node label ``field`` over the graphs of X, the
    most frequent first, ties broken by the smaller value: the order :class:`StartProbabilities`
    takes its classes in.

    Examples
    --------
    >>> g = Graph(np.zeros((3, 3)), node_labels={"element": np.array([8, 6, 6])})
    >>> class_counts([g, g], "element")
    [(6, 4), (8, 2)]
    """
    counts: Counter = Counter()
    for i, g in enumerate(X):
        counts.update(_node_values(g, field, i).tolist())
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))


class StartProbabilities(Kernel):
    """A marginalized graph kernel whose start probabilities, one per node-label class, are fitted.

    K_p(G, G') = Σ_ii' p(v_i) p(v'_i') x_ii' with x the solution of the inner kernel's product
    system (docs/design.md §1) and v the node label ``field`` (the element of an atom, say):
    the graph kernel with the start probability of every node set by its class. Normalized (the
    default), K_p(G, G') / sqrt(K_p(G, G) K_p(G', G')).

    Classes: the ``max_classes`` most frequent values of ``field`` among the nodes of the first X
    the kernel is called on (ties broken by the smaller value, :func:`class_counts`), in that
    order, and a last class "other" that pools every other value (values unseen then included).
    The list is stored in the parameter ``classes`` at that first call and fixed from then on:
    ``get_params``, :func:`sklearn.base.clone`, ``clone_with_theta`` and pickling carry it, so
    predictions use the classes of the fit. Give ``classes`` to fix them yourself;
    ``set_params(classes=None)`` makes the next call choose again.

    Hyperparameter: ``p``, a vector of ``max_classes`` entries, the start probabilities of the
    classes after the first (``classes[1:]``, then the unused slots when fewer values were seen,
    then "other"). The first, most frequent class has p = 1, fixed: normalized, a common factor
    of all p cancels, so one of them is free of meaning; unnormalized, the overall scale is a
    ``ConstantKernel``'s to fit (and the inner kernel's scalar ``p`` multiplies every p). An unused
    slot has no node: its p has no effect and a zero gradient.

    Cost: S, (N · L) × (M · L) numbers for an N × M matrix with L = max_classes + 1 classes
    (N = M = 1,000 and L = 7: 392 MB), is solved once per X (and per (X, Y)) by nodal solves of
    the inner kernel (``kern(X, nodal=True)``, the upper block triangle, in row blocks of at most
    :data:`NODAL_BLOCK_BYTES` of node pairs) and kept; a call on the same graphs (by identity, as
    :class:`~mgkflow.learn.Cached`) with other p costs O(N M L²). An S above ``max_memory_gb`` is
    refused. A cross matrix K(X, Y), normalized, needs the self-similarities S(G', G') of each Y
    graph: taken from the kept Gram matrix where the graph was in it, else solved one graph at a
    time (one self pair each; a nodal Gram of Y would solve M² / 2 pairs).

    Parameters
    ----------
    kernel : MarginalizedGraphKernel
        The graph kernel; its own hyperparameters must all be fixed (bounds ``"fixed"``) and its
        ``p`` a scalar. It is called with ``normalize=False`` whatever its own ``normalize``.
    field : str
        The node label field whose values make the classes. Default ``"element"``.
    max_classes : int
        Classes with their own p beside "other" (≥ 1). Default 6.
    p : float or sequence of float
        Initial values of the hyperparameter ``p``: one number for every class, or
        ``max_classes`` numbers in the order above. Default 1 (the plain graph kernel).
    p_bounds : (float, float) or "fixed"
        Bounds of every p. Default (0.05, 20).
    normalize : bool
        Return K_p(G, G') / sqrt(K_p(G, G) K_p(G', G')) (``diag`` gives ones). Default True.
    classes : sequence or None
        The label values of the classes with their own p, the reference class first (at most
        ``max_classes``); None: chosen at the first call, as above.
    max_memory_gb : float
        Largest S (in GB of float64) the kernel builds. Default 4.

    Examples
    --------
    >>> import networkx as nx
    >>> from mgkflow.kernels import KroneckerDelta
    >>> gs = [Graph(nx.to_numpy_array(nx.path_graph(n)), node_labels={"element": np.arange(n) % 2 + 6})
    ...       for n in (3, 4, 5)]
    >>> mgk = MarginalizedGraphKernel(KroneckerDelta(0.5, "element", h_bounds="fixed"), q=0.2,
    ...                               q_bounds="fixed", backend="cpu")
    >>> k = StartProbabilities(mgk, max_classes=2, p=[0.5, 1.0])
    >>> K, dK = k(gs, eval_gradient=True)
    >>> k.classes, K.shape, dK.shape  # carbon (6) most frequent; oxygen's p = 0.5; "other" unused
    ((6, 7), (3, 3), (3, 3, 2))
    >>> p_of = lambda g: np.where(g.node_labels["element"] == 7, 0.5, 1.0)
    >>> direct = MarginalizedGraphKernel(KroneckerDelta(0.5, "element"), q=0.2, p=p_of, backend="cpu", normalize=True)
    >>> bool(np.allclose(K, direct(gs), rtol=1e-10))
    True
    """

    def __init__(
        self,
        kernel: MarginalizedGraphKernel,
        field: str = "element",
        max_classes: int = 6,
        p: Any = 1.0,
        p_bounds: Any = (0.05, 20.0),
        normalize: bool = True,
        classes: Sequence[Any] | None = None,
        max_memory_gb: float = 4.0,
    ) -> None:
        # stored as given (scikit-learn's clone checks identities); checked at use
        self.kernel = kernel
        self.field = field
        self.max_classes = max_classes
        self.p = p
        self.p_bounds = p_bounds
        self.normalize = normalize
        self.classes = classes
        self.max_memory_gb = max_memory_gb
        self._check_static()

    # ------------------------------------------------------------------ checks
    def _check_static(self) -> None:
        k = self.kernel
        if not isinstance(k, MarginalizedGraphKernel):
            raise ParameterTypeError(f"StartProbabilities needs a MarginalizedGraphKernel, got {type(k).__name__}")
        if k.n_dims:
            free = [h.name for h in k.hyperparameters if not h.fixed]
            raise ParameterError(
                f"StartProbabilities: the graph kernel's hyperparameters must be fixed (bounds 'fixed'); free: {free}"
            )
        if not is_scalar(k.p):
            raise ParameterError(
                "StartProbabilities: the graph kernel's p must be a scalar (the classes' p replace it), "
                f"got {type(k.p).__name__}"
            )
        if not isinstance(self.field, str):
            raise ParameterTypeError(f"StartProbabilities: field must be a string, got {self.field!r:.60}")
        m = self.max_classes
        if isinstance(m, bool) or not isinstance(m, int | np.integer) or not 1 <= m <= MAX_CLASSES:
            raise ParameterError(
                f"StartProbabilities: max_classes must be an integer in [1, {MAX_CLASSES}] (S holds (max_classes + 1)² "
                f"numbers per pair), got {m!r:.60}"
            )
        check_flag(self.normalize, "normalize", "StartProbabilities")
        mem = self.max_memory_gb
        if isinstance(mem, bool) or not isinstance(mem, int | float | np.integer | np.floating) or not mem > 0:
            raise ParameterError(f"StartProbabilities: max_memory_gb must be a number > 0, got {mem!r:.60}")
        if self.classes is not None:
            c = self.classes
            if isinstance(c, str) or not isinstance(c, Sequence | np.ndarray) or not 1 <= len(c) <= m:
                raise ParameterError(
                    f"StartProbabilities: classes must be None or 1 to max_classes={m} label values, got {c!r:.60}"
                )
            if len(set(c)) != len(c):
                raise ParameterError(f"StartProbabilities: classes repeat a value: {c!r:.60}")
        self._p_free()
        self._checked_bounds()

    def _p_free(self) -> np.ndarray:
        """The ``max_classes`` values of the hyperparameter p (a scalar p broadcast)."""
        m = int(self.max_classes)
        try:
            p = np.asarray(self.p, dtype=np.float64)
        except (TypeError, ValueError):
            raise ParameterTypeError(f"StartProbabilities: p must be numbers, got {self.p!r:.60}") from None
        if p.ndim == 0:
            p = np.full(m, float(p))
        if p.shape != (m,):
            raise ParameterError(f"StartProbabilities: p must be one number or max_classes={m} numbers, got {p.shape}")
        if not np.all((p > 0) & np.isfinite(p)):
            raise ParameterError(f"StartProbabilities: every p must be a finite number > 0, got {p.tolist()}")
        return p

    def _checked_bounds(self) -> Any:
        return check_bounds(self.p_bounds, "StartProbabilities", "p_bounds")

    # ------------------------------------------------------------------ scikit-learn parameters
    def get_params(self, deep: bool = True) -> dict:
        params = dict(
            kernel=self.kernel,
            field=self.field,
            max_classes=self.max_classes,
            p=self.p,
            p_bounds=self.p_bounds,
            normalize=self.normalize,
            classes=self.classes,
            max_memory_gb=self.max_memory_gb,
        )
        if deep:
            params.update(("kernel__" + k, v) for k, v in self.kernel.get_params().items())
        return params

    def set_params(self, **params: Any) -> StartProbabilities:
        """Set constructor parameters (``kernel__NAME`` goes to the graph kernel), checked."""
        if not params:
            return self
        before = self.get_params(deep=False)
        inner = {k[len("kernel__") :]: v for k, v in params.items() if k.startswith("kernel__")}
        try:
            for key, value in params.items():
                if key.startswith("kernel__"):
                    continue
                if key not in before:
                    raise ParameterError(f"invalid parameter {key!r} for StartProbabilities; valid: {sorted(before)}")
                setattr(self, key, value)
            if inner:
                self.kernel.set_params(**inner)
            self._check_static()
        except (ParameterError, ParameterTypeError):
            for k, v in before.items():
                setattr(self, k, v)
            raise
        return self

    @property
    def hyperparameters(self) -> list:
        return [Hyperparameter("p", "numeric", self._checked_bounds(), int(self.max_classes))]

    @property
    def _fixed(self) -> bool:
        return isinstance(self.p_bounds, str) and self.p_bounds == "fixed"

    @property
    def theta(self) -> np.ndarray:
        return np.zeros(0) if self._fixed else np.log(self._p_free())

    @theta.setter
    def theta(self, theta: Any) -> None:
        theta = np.asarray(theta, dtype=np.float64).ravel()
        if theta.size != self.n_dims:
            raise ParameterError(f"StartProbabilities: theta has {theta.size} entries, the kernel {self.n_dims}")
        if theta.size:
            self.p = np.exp(theta)

    @property
    def bounds(self) -> np.ndarray:
        if self._fixed:
            return np.zeros((0, 2))
        return np.log(np.tile(np.asarray(self._checked_bounds(), dtype=np.float64), (int(self.max_classes), 1)))

    @property
    def n_dims(self) -> int:
        return 0 if self._fixed else int(self.max_classes)

    def clone_with_theta(self, theta: Any) -> StartProbabilities:
        params = self.get_params(deep=False)
        cloned = type(self)(**{k: copy.deepcopy(v) for k, v in params.items()})
        cloned.theta = theta
        return cloned

    @property
    def requires_vector_input(self) -> bool:
        return False

    def is_stationary(self) -> bool:
        return False

    def __eq__(self, other: object) -> bool:
        if type(self) is not type(other):
            return False
        a, b = self.get_params(deep=False), other.get_params(deep=False)  # type: ignore[attr-defined]
        return a.pop("kernel") == b.pop("kernel") and all(
            np.array_equal(np.asarray(a[k], dtype=object), np.asarray(b[k], dtype=object)) for k in a
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        p = ", ".join(f"{v:.3g}" for v in self._p_free())
        return f"StartProbabilities({self.field!r}, classes={self.classes}, p=[{p}])"

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        for key in ("_gram", "_cross", "_selfs"):
            state.pop(key, None)
        return state

    # ------------------------------------------------------------------ classes
    def _fix_classes(self, X: Sequence[Graph]) -> tuple:
        """The classes, chosen from X (first call) or as set."""
        if self.classes is None:
            counts = class_counts(X, self.field)
            if not counts:
                raise ParameterError("StartProbabilities: X has no node")
            self.classes = tuple(v for v, _ in counts[: int(self.max_classes)])
        return tuple(self.classes)

    def _class_index(self, X: Sequence[Graph]) -> np.ndarray:
        """The class of every node of X (concatenated): 0 .. len(classes) - 1, or max_classes for "other"."""
        classes = self._fix_classes(X)
        keys = np.asarray(classes)
        order = np.argsort(keys, kind="stable")
        sorted_keys = keys[order]
        out = []
        for i, g in enumerate(X):
            v = _node_values(g, self.field, i)
            pos = np.clip(np.searchsorted(sorted_keys, v), 0, len(keys) - 1)
            hit = sorted_keys[pos] == v
            out.append(np.where(hit, order[pos], int(self.max_classes)))
        return np.concatenate(out).astype(np.int64) if out else np.zeros(0, dtype=np.int64)

    def _pooling(self, X: Sequence[Graph]) -> sp.csr_array:
        """P of shape (len(X) · L, Σ nodes): P[g L + class(i), i] = 1 for node i of graph g."""
        L = int(self.max_classes) + 1
        cls = self._class_index(X)
        sizes = np.array([g.n_nodes for g in X], dtype=np.int64)
        graph_of = np.repeat(np.arange(len(X)), sizes)
        rows = graph_of * L + cls
        n = int(sizes.sum())
        return sp.csr_array((np.ones(n), (rows, np.arange(n))), shape=(len(X) * L, n))

    # ------------------------------------------------------------------ S
    def _inner_key(self) -> tuple:
        return (repr(self.kernel), self.field, int(self.max_classes), tuple(self.classes or ()))

    def _check_memory(self, n: int, m: int) -> None:
        L = int(self.max_classes) + 1
        need = n * m * L * L * 8
        if need > float(self.max_memory_gb) * 1e9:
            raise ParameterError(
                f"StartProbabilities: the class similarities of a {n} x {m} matrix with {L} classes take "
                f"{need / 1e9:.3g} GB, above max_memory_gb={self.max_memory_gb}; raise it, lower max_classes "
                "or use fewer graphs (a low-rank GP on landmarks)"
            )

    def _nodal(self, X: Sequence[Graph], Y: Sequence[Graph] | None) -> np.ndarray:
        return self.kernel(X, Y, normalize=False, nodal=True)

    def _solve_gram(self, X: list) -> np.ndarray:
        """S(X, X), shape (N, N, L, L): nodal solves of the upper block triangle in row blocks."""
        n = len(X)
        self._check_memory(n, n)
        L = int(self.max_classes) + 1
        P = self._pooling(X)
        sizes = np.array([g.n_nodes for g in X], dtype=np.int64)
        offsets = np.concatenate([[0], np.cumsum(sizes)])
        S = np.empty((n * L, n * L))
        a = 0
        while a < n:
            # rows a..b: their node rows times the nodes of graphs a..n within the block budget
            b = a + 1
            while b < n and (offsets[b + 1] - offsets[a]) * (offsets[n] - offsets[a]) * 8 <= NODAL_BLOCK_BYTES:
                b += 1
            Pa = P[a * L : b * L, offsets[a] : offsets[b]]
            S[a * L : b * L, a * L : b * L] = _pool(Pa, self._nodal(X[a:b], None), Pa)
            if b < n:
                Pb = P[b * L :, offsets[b] :]
                block = _pool(Pa, self._nodal(X[a:b], X[b:]), Pb)
                S[a * L : b * L, b * L :] = block
                S[b * L :, a * L : b * L] = block.T
            a = b
        return _pair_major(S, n, n, L)

    def _solve_cross(self, X: list, Y: list) -> np.ndarray:
        """S(X, Y), shape (N, M, L, L), in row blocks of X."""
        n, m = len(X), len(Y)
        self._check_memory(n, m)
        L = int(self.max_classes) + 1
        Px, Py = self._pooling(X), self._pooling(Y)
        ox = np.concatenate([[0], np.cumsum([g.n_nodes for g in X])])
        cols = int(sum(g.n_nodes for g in Y))
        S = np.empty((n * L, m * L))
        a = 0
        while a < n:
            b = a + 1
            while b < n and (ox[b + 1] - ox[a]) * cols * 8 <= NODAL_BLOCK_BYTES:
                b += 1
            S[a * L : b * L] = _pool(Px[a * L : b * L, ox[a] : ox[b]], self._nodal(X[a:b], Y), Py)
            a = b
        return _pair_major(S, n, m, L)

    def _self_similarities(self, X: list, keep_others: bool = False) -> np.ndarray:
        """S(G, G) of every graph of X, shape (N, L, L): kept ones (from a Gram matrix or an
        earlier call), else one self solve per graph. Kept afterwards: those of X and of the kept
        Gram matrix's graphs (with ``keep_others``, every earlier one too)."""
        old = getattr(self, "_selfs", None) or {}
        key = self._inner_key()
        gram = getattr(self, "_gram", None)
        gram_ids = set() if gram is None else set(map(id, gram[2]))
        out = []
        new = dict(old) if keep_others else {i: v for i, v in old.items() if i in gram_ids}
        for g in X:
            hit = old.get(id(g))
            if hit is None or hit[0] is not g or hit[1] != key:
                hit = (g, key, self._solve_gram([g])[0, 0])
            new[id(g)] = hit
            out.append(hit[2])
        self._selfs = new
        return np.stack(out) if out else np.zeros((0, int(self.max_classes) + 1, int(self.max_classes) + 1))

    def _gram_S(self, X: list) -> np.ndarray:
        self._fix_classes(X)
        kx = input_key(X)
        key = (kx, self._inner_key())
        last = getattr(self, "_gram", None)
        if kx is not None and last is not None and last[0] == key:
            return last[1]
        if len(X) == 1:  # one graph (a diagonal entry's gradient, say): the kept Gram matrix stays
            return self._self_similarities(X, keep_others=True)[:, None]
        S = self._solve_gram(X)
        if kx is not None:
            self._gram = (key, S, kept_inputs(X))
            self._selfs = {id(g): (g, key[1], S[i, i].copy()) for i, g in enumerate(X)}
        return S

    def _cross_S(self, X: list, Y: list) -> np.ndarray:
        self._fix_classes(X)
        kx, ky = input_key(X), input_key(Y)
        key = (kx, ky, self._inner_key())
        last = getattr(self, "_cross", None)
        if kx is not None and ky is not None and last is not None and last[0] == key:
            return last[1]
        S = self._solve_cross(X, Y)
        if kx is not None and ky is not None:
            self._cross = (key, S, kept_inputs(X), kept_inputs(Y))
        return S

    def _full_p(self) -> np.ndarray:
        return np.concatenate([[1.0], self._p_free()])

    # ------------------------------------------------------------------ call
    def __call__(self, X: Sequence[Graph], Y: Sequence[Graph] | None = None, eval_gradient: bool = False):
        """K_p(X, X) (Y None) or K_p(X, Y); with ``eval_gradient`` also dK, shape (N, M, n_dims),
        the derivatives by log p (scikit-learn's convention), for a cross matrix too."""
        eval_gradient = check_flag(eval_gradient, "eval_gradient", "StartProbabilities")
        self._check_static()
        X = _graphs(X, "X")
        sym = Y is None or same_graphs(X, Y)
        Y = X if sym else _graphs(Y, "Y")
        p = self._full_p()
        if sym:
            S = self._gram_S(X)
            K, dK = _contract(S, p, eval_gradient)
            K = 0.5 * (K + K.T)  # exactly symmetric (S is, up to the order of the pooling's sums)
            if dK is not None:
                dK = 0.5 * (dK + dK.transpose(1, 0, 2))
            if self.normalize:
                kx = np.ascontiguousarray(np.diagonal(K))
                dkx = None if dK is None else np.ascontiguousarray(np.diagonal(dK, axis1=0, axis2=1).T)
                _check_positive(kx, X)
                K, dK = normalized_gradient(K, dK, kx, dkx, kx, dkx)
        else:
            S = self._cross_S(X, Y)
            K, dK = _contract(S, p, eval_gradient)
            if self.normalize:
                kx, dkx = _self_values(self._self_similarities(list(X) + list(Y)), p, eval_gradient)
                ky, dky = kx[len(X) :], (None if dkx is None else dkx[len(X) :])
                kx, dkx = kx[: len(X)], (None if dkx is None else dkx[: len(X)])
                _check_positive(kx, X)
                _check_positive(ky, Y)
                K, dK = normalized_gradient(K, dK, kx, dkx, ky, dky)
        if not eval_gradient:
            return K
        if self._fixed:
            return K, np.empty(K.shape + (0,))
        return K, dK[:, :, 1:] * p[1:]  # d/d log p of the free classes

    def diag(self, X: Sequence[Graph]) -> np.ndarray:
        """K_p(G, G) of every graph of X (ones when normalized, after checking they are > 0)."""
        X = _graphs(X, "X")
        self._fix_classes(X)
        kx, _ = _self_values(self._self_similarities(X), self._full_p(), False)
        _check_positive(kx, X)
        return np.ones(len(X)) if self.normalize else kx


def _graphs(X: Any, what: str) -> list:
    if isinstance(X, Graph) or isinstance(X, str | bytes) or not isinstance(X, Sequence | np.ndarray):
        raise ParameterTypeError(f"StartProbabilities: {what} must be a sequence of mgkflow.Graph objects")
    X = list(X)
    if not X:
        raise ParameterError(f"StartProbabilities: {what} is empty")
    return X


def _pool(Pa: sp.csr_array, R: np.ndarray, Pb: sp.csr_array) -> np.ndarray:
    """Pa R Pbᵀ: the node-pair similarities R summed by (graph, class) on both sides."""
    left = np.asarray(Pa @ R)  # (rows · L, column nodes)
    return np.asarray((Pb @ left.T).T)


def _pair_major(S: np.ndarray, n: int, m: int, L: int) -> np.ndarray:
    """The pooled (n·L, m·L) matrix as S[i, j, a, b] (n, m, L, L): each pair's L × L block contiguous,
    so that a step's contraction is one matrix product over the pairs."""
    return np.ascontiguousarray(S.reshape(n, L, m, L).transpose(0, 2, 1, 3))


def _contract(S: np.ndarray, p: np.ndarray, grad: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """K_ij = Σ_ab p_a p_b S[i, j, a, b] and, with ``grad``, dK[i, j, c] = ∂K_ij/∂p_c
    = Σ_b S[i, j, c, b] p_b + Σ_a p_a S[i, j, a, c]: two matrix products over the pairs (BLAS),
    ``S`` viewed as (N·M, L²)."""
    n, m, L = S.shape[0], S.shape[1], p.size
    F = S.reshape(n * m, L * L)
    K = (F @ np.outer(p, p).reshape(-1)).reshape(n, m)
    if not grad:
        return K, None
    G = np.zeros((L, L, L))  # G[a, b, c] = δ_ac p_b + p_a δ_bc
    for c in range(L):
        G[c, :, c] += p
        G[:, c, c] += p
    return K, (F @ G.reshape(L * L, L)).reshape(n, m, L)


def _self_values(Sd: np.ndarray, p: np.ndarray, grad: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """K(G, G) = pᵀ S(G, G) p of every graph and, with ``grad``, its derivatives by p."""
    v = np.einsum("a,iab,b->i", p, Sd, p)
    if not grad:
        return v, None
    return v, np.einsum("iab,b->ia", Sd + Sd.transpose(0, 2, 1), p)


def _check_positive(d: np.ndarray, X: list) -> None:
    if not np.all(d > 0):
        i = int(np.flatnonzero(~(d > 0))[0])
        raise ParameterError(
            f"StartProbabilities: K(G, G) of graph {i} ({X[i].title or 'untitled'}) is {d[i]}, not > 0: "
            "it cannot be normalized"
        )
