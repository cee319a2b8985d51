"""The public kernel API: :class:`MarginalizedGraphKernel`, a scikit-learn kernel on graphs.

The class holds the parameters and the scikit-learn side (hyperparameters, θ and bounds,
``get_params``/``set_params``, ``clone_with_theta``, equality, pickling); a call is evaluated by
:mod:`mgkflow.evaluation` (validation, prepared systems, backend choice, normalization, nodal
similarities, statistics), which solves with a backend of :mod:`mgkflow.backends`.
"""

from __future__ import annotations

import copy
import inspect
import numbers
from collections import namedtuple
from collections.abc import Sequence

import numpy as np

try:
    from sklearn.gaussian_process.kernels import GenericKernelMixin, Kernel
    from sklearn.gaussian_process.kernels import Hyperparameter as SkHyperparameter
except ImportError:  # scikit-learn is needed only to combine the kernel with its estimators

    class GenericKernelMixin:  # type: ignore[no-redef]
        @property
        def requires_vector_input(self) -> bool:
            return False

    class Kernel:  # type: ignore[no-redef]
        def get_params(self, deep: bool = True) -> dict:
            names = [n for n in inspect.signature(type(self).__init__).parameters if n != "self"]
            return {n: getattr(self, n) for n in names}

    class SkHyperparameter(namedtuple("Hyperparameter", "name value_type bounds n_elements fixed")):  # type: ignore[no-redef]
        __slots__ = ()

        def __new__(cls, name, value_type, bounds, n_elements=1, fixed=None):
            if fixed is None:
                fixed = isinstance(bounds, str) and bounds == "fixed"
            return super().__new__(cls, name, value_type, bounds, n_elements, fixed)


from .errors import MgkflowError, ParameterError, ParameterTypeError
from .evaluation import LMIN_RESOLUTION, Q_MIN, DegenerateKernelWarning, SolveStats, gpu_available
from .evaluation.backend import get_backend, oracle
from .evaluation.checks import check_convergence, check_finite, is_scalar, same_graphs, validate
from .evaluation.matrix import diagonal, gram_contraction, kernel_matrix, pair_values
from .evaluation.solve import record, solve
from .evaluation.systems import prepare
from .graph import Graph
from .kernels import BaseKernel, Constant
from .system import NodeProbability

__all__ = ["MarginalizedGraphKernel", "SolveStats", "gpu_available", "DegenerateKernelWarning"]
__all__ += ["LMIN_RESOLUTION", "Q_MIN"]  # (kept importable from here)


class MarginalizedGraphKernel(GenericKernelMixin, Kernel):
    """The marginalized graph kernel between labeled graphs, as a scikit-learn kernel.

    K(G, G') = p_xᵀ (D_x V_x⁻¹ − A_x ∘ E_x)⁻¹ D_x q_x (conventions: docs/gradients.md).

    It is a :class:`sklearn.gaussian_process.kernels.Kernel` on graph inputs
    (``requires_vector_input`` is False): ``kern(X)``, ``kern(X, Y)``,
    ``kern(X, eval_gradient=True)``, ``kern.diag(X)``, ``theta``/``bounds`` (log space),
    ``hyperparameters``, ``get_params``/``set_params``, ``clone_with_theta``,
    :func:`sklearn.base.clone`, and composition with sklearn kernels (``C(1.0) * kern +
    WhiteKernel()``) all work with ``X`` a list (or object array) of :class:`~mgkflow.Graph`.

    Hyperparameters (θ holds the non-fixed ones, as logarithms): every hyperparameter of the
    node kernel (named ``node_kernel__<name>``, e.g. ``node_kernel__0.h``) and of the edge
    kernel (``edge_kernel__<name>``) in the order of their ``hyperparameters``, then ``q`` when
    q is a scalar (bounds ``q_bounds``). Set them with ``set_params(**{"node_kernel__0.h": 0.3})``.

    Parameters
    ----------
    node_kernel : BaseKernel
        Kernel on node labels, values in (0, 1]. Default ``Constant(1.0)``.
    edge_kernel : BaseKernel
        Kernel on edge labels, values in [0, 1]. Default ``Constant(1.0)``.
    q : float, str or callable
        Stop probability: a scalar in (0, 1), a node label field name, or
        ``f(graph) -> array``. Default 0.05.
    p : float, str or callable
        Start probability (default 1 for every node). Not a hyperparameter: a uniform p only
        scales K.
    backend : {"auto", "cpu", "gpu", "exact"}
        "auto" uses the GPU when the GPU stage and a CUDA device are present, else "cpu": the
        multi-core float64 engine (:class:`mgkflow.backends.cpu.NumbaCPUBackend`, no size cap).
        "exact" is the scipy reference backend (:class:`mgkflow.backends.exact.ExactBackend`: direct
        solves of small systems, at most 6e7 edge pairs per pair), the test oracle. Any name
        registered in :mod:`mgkflow.backends` is accepted.
    rtol : float, optional
        Relative residual at which CG stops. Default 1e-12 on the CPU; the GPU
        backend picks its own default (see :mod:`mgkflow.gpu`).
    max_iter : int
        CG iteration limit per pair.
    on_nonconvergence : {"raise", "warn"}
        What to do when some pair reaches ``max_iter`` before ``rtol``: raise
        :class:`~mgkflow.errors.ConvergenceError` (default) or warn with
        :class:`~mgkflow.errors.ConvergenceWarning`; flags are in ``last_stats``.
    progress : bool
        Show a tqdm progress bar over pairs.
    gpu_options : dict, optional
        Keyword options of :class:`mgkflow.gpu.GPUBackend` (e.g. ``{"xmv": "octile"}``,
        ``{"wide": False}``), used when the GPU backend runs; an error with ``backend="cpu"``.
    q_bounds : (float, float) or "fixed"
        Bounds of q as a hyperparameter (scalar q only), within (0, 1). Default (1e-4, 0.5).
    lmin : {0, 1}
        Shortest walk counted: 1 leaves out the walks of length 0 (single node pairs), i.e.
        subtracts p_xᵀ V_x q_x. A graph without edges then has K(G, G) = 0.
    normalize : bool
        Return K(G, G') / sqrt(K(G, G) K(G', G')) from every call (and ones from ``diag``);
        the call argument ``normalize`` overrides it for one call.

    Attributes
    ----------
    last_stats : SolveStats or None
        Statistics of the last call.

    Examples
    --------
    >>> import networkx as nx
    >>> from mgkflow import Graph
    >>> from mgkflow.kernels import KroneckerDelta
    >>> gs = [Graph(nx.to_numpy_array(nx.cycle_graph(n)), node_labels={"l": np.arange(n) % 3}) for n in (4, 5, 6)]
    >>> kern = MarginalizedGraphKernel(KroneckerDelta(0.5, "l"), q=0.05, backend="cpu")
    >>> K = kern(gs)
    >>> K.shape, bool(np.allclose(K, K.T))
    ((3, 3), True)
    >>> bool(np.allclose(kern(gs, normalize=True).diagonal(), 1.0))
    True
    >>> K, dK = kern(gs, eval_gradient=True)  # θ = [log h, log q]; the edge kernel's c is fixed
    >>> [(h.name, h.fixed) for h in kern.hyperparameters], dK.shape
    ([('node_kernel__h', False), ('edge_kernel__c', True), ('q', False)], (3, 3, 2))
    >>> bool(np.allclose(kern.diag(gs), np.diag(K)))
    True
    """

    def __init__(
        self,
        node_kernel: BaseKernel | None = None,
        edge_kernel: BaseKernel | None = None,
        q: NodeProbability = 0.05,
        p: NodeProbability = 1.0,
        backend: str = "auto",
        rtol: float | None = None,
        max_iter: int = 10_000,
        on_nonconvergence: str = "raise",
        progress: bool = False,
        gpu_options: dict | None = None,
        q_bounds: tuple[float, float] | str = (1e-4, 0.5),
        lmin: int = 0,
        normalize: bool = False,
    ) -> None:
        # scikit-learn's clone needs every parameter stored as given (the same object)
        self.node_kernel = node_kernel if node_kernel is not None else Constant(1.0)
        self.edge_kernel = edge_kernel if edge_kernel is not None else Constant(1.0)
        self.q = q
        self.p = p
        self.backend = backend
        self.rtol = rtol
        self.max_iter = max_iter
        self.on_nonconvergence = on_nonconvergence
        self.progress = progress
        self.gpu_options = gpu_options
        self.q_bounds = q_bounds
        self.lmin = lmin
        self.normalize = normalize
        self.last_stats: SolveStats | None = None
        self._backend_obj = None
        self._backend_key = None
        self._oracle_obj = None
        self._systems: dict = {}  # prepared systems of the last call, by argument
        validate(self)

    @property
    def _scalar_q(self) -> bool:
        return is_scalar(self.q)

    # ------------------------------------------------------------------ scikit-learn parameters
    def _hyper_entries(self) -> list[tuple[str, object, float]]:
        """(name, bounds, value) of every hyperparameter, fixed ones included, in backend order."""
        out = []
        for prefix, k in (("node_kernel", self.node_kernel), ("edge_kernel", self.edge_kernel)):
            out.extend((f"{prefix}__{h.name}", h.bounds, h.value) for h in k.hyperparameters)
        if self._scalar_q:
            out.append(("q", self.q_bounds, float(self.q)))
        return out

    @property
    def hyperparameters(self) -> list:
        """scikit-learn Hyperparameter records (fixed ones included)."""
        return [SkHyperparameter(name, "numeric", bounds) for name, bounds, _ in self._hyper_entries()]

    def _free(self) -> np.ndarray:
        return np.array([not (isinstance(b, str) and b == "fixed") for _, b, _ in self._hyper_entries()], dtype=bool)

    @property
    def theta(self) -> np.ndarray:
        """Logarithms of the non-fixed hyperparameter values."""
        entries = [e for e, free in zip(self._hyper_entries(), self._free(), strict=True) if free]
        vals = np.array([v for _, _, v in entries], dtype=np.float64)
        if np.any(vals <= 0):
            name = entries[int(np.flatnonzero(vals <= 0)[0])][0]
            raise ParameterError(
                f"hyperparameter {name} is 0, which has no logarithm: give it a positive value or bounds='fixed'"
            )
        return np.log(vals)

    @theta.setter
    def theta(self, theta) -> None:
        theta = np.asarray(theta, dtype=np.float64).ravel()
        free = self._free()
        if theta.size != int(free.sum()):
            raise ParameterError(
                f"theta has {theta.size} entries; this kernel has {int(free.sum())} free hyperparameters"
            )
        entries = self._hyper_entries()
        values = np.array([v for _, _, v in entries], dtype=np.float64)
        new = np.exp(theta)
        lohi = np.array([b for (_, b, _), f in zip(entries, free, strict=True) if f], dtype=np.float64).reshape(-1, 2)
        values[free] = _snap_to_bounds(new, lohi)
        self._set_values(values)

    @property
    def bounds(self) -> np.ndarray:
        """Logarithms of the bounds of the non-fixed hyperparameters, shape (n_dims, 2)."""
        b = [bounds for (_, bounds, _), free in zip(self._hyper_entries(), self._free(), strict=True) if free]
        return np.log(np.array(b, dtype=np.float64).reshape(-1, 2))

    @property
    def n_dims(self) -> int:
        return int(self._free().sum())

    def _set_values(self, values) -> None:
        nn = len(self.node_kernel.hyperparameters)
        ne = len(self.edge_kernel.hyperparameters)
        values = [float(v) for v in values]
        if nn:
            self.node_kernel = self.node_kernel.with_values(values[:nn])
        if ne:
            self.edge_kernel = self.edge_kernel.with_values(values[nn : nn + ne])
        if self._scalar_q:
            self.q = values[nn + ne]
        validate(self)

    def get_params(self, deep: bool = True) -> dict:
        """Constructor parameters; with ``deep``, also every base-kernel hyperparameter value
        (``node_kernel__<name>``, ``edge_kernel__<name>``)."""
        params = super().get_params(deep=False)
        if deep:
            for name, _, value in self._hyper_entries():
                if name != "q":
                    params[name] = value
        return params

    def set_params(self, **params) -> MarginalizedGraphKernel:
        """Set constructor parameters and/or base-kernel hyperparameters by name.

        The values are checked as the constructor checks them; a bad one raises a
        :class:`~mgkflow.errors.ParameterError` or :class:`~mgkflow.errors.ParameterTypeError`
        naming it, and leaves the kernel as it was. A hyperparameter value must be a real number.

        Examples
        --------
        >>> from mgkflow.kernels import KroneckerDelta
        >>> k = MarginalizedGraphKernel(KroneckerDelta(0.5, "a"), backend="cpu")
        >>> k.set_params(**{"node_kernel__h": 0.3}).node_kernel
        KroneckerDelta(0.3, 'a')
        >>> k.set_params(**{"node_kernel__h": "abc"})
        Traceback (most recent call last):
        ...
        mgkflow.errors.ParameterTypeError: node_kernel__h must be a real number, got str 'abc'
        """
        if not params:
            return self
        plain = super().get_params(deep=False)
        entries = self._hyper_entries()
        names = [n for n, _, _ in entries]
        updates = {}
        for key, value in params.items():
            if key in plain:
                continue
            if key not in names:
                raise ParameterError(
                    f"invalid parameter {key!r} for MarginalizedGraphKernel; valid: {sorted(plain) + names[:-1]}"
                )
            updates[key] = _hyper_value(key, value)
        before = {k: getattr(self, k) for k in plain}
        try:
            for key, value in params.items():
                if key in plain:
                    setattr(self, key, value)
            if updates:
                entries = self._hyper_entries()  # after plain updates (new kernels or q)
                values = [updates.get(n, v) for n, _, v in entries]
                if len(values) != len(entries) or any(k not in [n for n, _, _ in entries] for k in updates):
                    raise ParameterError(
                        "set_params: hyperparameter names changed along with the kernels; set them apart"
                    )
                self._set_values(values)
            else:
                validate(self)
        except MgkflowError:
            for k, v in before.items():  # leave the kernel as it was
                setattr(self, k, v)
            raise
        self._backend_obj = None  # backend options may have changed
        return self

    def clone_with_theta(self, theta) -> MarginalizedGraphKernel:
        """A copy of the kernel (no backend, no caches) with hyperparameters ``exp(theta)``.

        The copy is what :func:`sklearn.base.clone` makes: the class called with deep copies of
        the constructor parameters.
        """
        params = self.get_params(deep=False)
        cloned = type(self)(**{k: copy.deepcopy(v) for k, v in params.items()})
        cloned.theta = theta
        return cloned

    def is_stationary(self) -> bool:
        return False

    def __eq__(self, other) -> bool:
        if type(self) is not type(other):
            return False
        a, b = self.get_params(deep=False), other.get_params(deep=False)
        return all(_same_param(a[key], b[key]) for key in a)

    __hash__ = None  # mutable (set_params), like every scikit-learn kernel

    # ------------------------------------------------------------------ pickling
    def __getstate__(self) -> dict:
        # no device state and no caches travel: each process builds its own backend
        state = self.__dict__.copy()
        state.update(_backend_obj=None, _backend_key=None, _oracle_obj=None, _systems={}, last_stats=None)
        return state

    # ------------------------------------------------------------------ call
    def __call__(
        self,
        X: Sequence[Graph],
        Y: Sequence[Graph] | None = None,
        eval_gradient: bool = False,
        normalize: bool | None = None,
        nodal: bool = False,
    ):
        """Compute the kernel matrix (and its gradient).

        Parameters
        ----------
        X : sequence of Graph
        Y : sequence of Graph, optional
            If given, return the (len(X), len(Y)) cross matrix; else the symmetric Gram
            matrix of X (upper triangle solved, mirrored). ``Y`` holding the same graphs as
            ``X`` (``kern(X, X)``) is noticed and solved as a Gram matrix.
        eval_gradient : bool
            Also return dK of shape (N, N, n_dims): dK[i, j, k] = ∂K_ij/∂θ_k with θ the
            logarithms of the free hyperparameters (scikit-learn's convention). Needs Y None
            (or the same graphs as X).
        normalize : bool, optional
            Return K(G,G') / sqrt(K(G,G) K(G',G')); default: the ``normalize`` parameter.
        nodal : bool
            Return the node-pair similarities: a (Σ nodes of X) × (Σ nodes of Y) matrix whose
            block of the pair (G, G') holds p_i p'_i' x_ii' (lmin=1: minus p_i p'_i' v_ii' q_i q'_i',
            0 where that difference is rounding noise), so each block sums to K(G, G'). Normalized:
            divided by the square roots of the nodes' self-similarities. A Gram matrix (Y None)
            solves the pairs of the upper block triangle and is exactly symmetric.

        Returns
        -------
        K : ndarray of float64
        dK : ndarray of float64 (only with ``eval_gradient``)
        """
        if not eval_gradient:
            return kernel_matrix(self, X, Y, normalize=normalize, nodal=nodal)
        free = self._free()
        if not np.any(free) and not nodal and (Y is None or same_graphs(X, Y)):
            K = kernel_matrix(self, X, normalize=normalize)  # every hyperparameter fixed: no gradient solves
            return K, np.empty(K.shape + (0,))
        values = np.array([v for _, _, v in self._hyper_entries()], dtype=np.float64)
        return kernel_matrix(
            self, X, Y, eval_gradient=True, normalize=normalize, nodal=nodal, free=free, log_values=values
        )

    def gram_contraction(self, X: Sequence[Graph]):
        """K(X, X) and a function ``W -> g``, g_k = Σᵢⱼ Wᵢⱼ ∂Kᵢⱼ/∂θ_k (θ the logarithms of the free
        hyperparameters): what a Gaussian process's fit needs of the gradient, without the
        (N, N, n_dims) array of ``kern(X, eval_gradient=True)``
        (:func:`mgkflow.evaluation.matrix.gram_contraction`).

        Examples
        --------
        >>> import networkx as nx
        >>> from mgkflow import Graph
        >>> from mgkflow.kernels import KroneckerDelta
        >>> gs = [Graph.from_networkx(nx.path_graph(n)) for n in (2, 3, 4)]
        >>> kern = MarginalizedGraphKernel(q=0.1, q_bounds=(0.01, 0.5), backend="cpu", normalize=True)
        >>> K, g = kern.gram_contraction(gs)
        >>> K0, dK0 = kern(gs, eval_gradient=True)
        >>> W = np.arange(9.0).reshape(3, 3)
        >>> bool(np.allclose(K, K0)), bool(np.allclose(g(W), np.einsum("ij,ijk->k", W, dK0)))
        (True, True)
        """
        free = self._free()
        values = np.array([v for _, _, v in self._hyper_entries()], dtype=np.float64)
        if not np.any(free):
            K = kernel_matrix(self, X)
            return K, lambda W: np.zeros(0)
        return gram_contraction(self, X, free, values)

    def diag(self, X: Sequence[Graph], nodal: bool = False) -> np.ndarray:
        """K(G, G) for every graph of X, solving only those N pairs (ones when normalized).

        With ``nodal=True``: the self-similarity p_i² x_ii of every node of every graph of X
        (length Σ nodes), the diagonal of ``kern(X, nodal=True)``.

        Examples
        --------
        >>> import networkx as nx
        >>> from mgkflow import Graph
        >>> gs = [Graph.from_networkx(nx.path_graph(n)) for n in (2, 3)]
        >>> kern = MarginalizedGraphKernel(q=0.1, backend="cpu")
        >>> bool(np.allclose(kern.diag(gs), np.diag(kern(gs))))
        True
        >>> kern.diag(gs, nodal=True).shape
        (5,)
        """
        return diagonal(self, X, nodal)

    def pair_values(self, X: Sequence[Graph], pairs: object, normalize: bool | None = None) -> np.ndarray:
        """K(X[i], X[j]) for each row (i, j) of ``pairs``: scattered entries of ``kern(X)``, solving only those
        pairs (and, normalized, the graphs' self-pairs) in one backend call.

        Parameters
        ----------
        X : sequence of Graph
        pairs : array-like of int, shape (p, 2)
            Indices into X, in any order; a pair may repeat.
        normalize : bool, optional
            Default: the ``normalize`` parameter.

        Returns
        -------
        ndarray of float64, shape (p,)

        Examples
        --------
        >>> import networkx as nx
        >>> from mgkflow import Graph
        >>> gs = [Graph.from_networkx(nx.path_graph(n)) for n in (2, 3, 4)]
        >>> kern = MarginalizedGraphKernel(q=0.1, backend="cpu")
        >>> v = kern.pair_values(gs, [[0, 2], [2, 1]])
        >>> K = kern(gs)
        >>> bool(np.allclose(v, [K[0, 2], K[2, 1]]))
        True
        """
        return pair_values(self, X, pairs, normalize)

    # ------------------------------------------------------------------ evaluation steps (gram, pipeline, benchmarks)
    _get_backend = get_backend
    _oracle = oracle
    _prepare = prepare
    _solve = solve
    _record = record
    _check_finite = staticmethod(check_finite)
    _check_convergence = check_convergence

    def __repr__(self) -> str:
        extra = ""
        if self.lmin:
            extra += f", lmin={self.lmin}"
        if self.normalize:
            extra += ", normalize=True"
        return (
            f"MarginalizedGraphKernel(node_kernel={self.node_kernel!r}, edge_kernel={self.edge_kernel!r}, "
            f"q={self.q!r}, p={self.p!r}, backend={self.backend!r}{extra})"
        )


def _same_param(x: object, y: object) -> bool:
    """Equality of two constructor parameters (base kernels: same structure and hyperparameters)."""
    if isinstance(x, BaseKernel) or isinstance(y, BaseKernel):
        return (
            isinstance(x, BaseKernel)
            and isinstance(y, BaseKernel)
            and x.structure == y.structure
            and x.hyperparameters == y.hyperparameters
        )
    if x is y:
        return True
    try:
        return bool(np.all(x == y))
    except (TypeError, ValueError):
        return False


def _snap_to_bounds(values: np.ndarray, lohi: np.ndarray) -> np.ndarray:
    """``values`` within 1e-12 (relative) of a bound set onto it: exp(log(b)) can land one rounding
    step outside a bound b (e.g. h = 1 + 2e-16 > 1)."""
    for k in range(2):
        near = np.abs(values - lohi[:, k]) <= 1e-12 * lohi[:, k]
        values[near] = lohi[near, k]
    return values


def _hyper_value(name: str, value: object) -> float:
    """A hyperparameter value given to ``set_params``: a real number (not a bool), as a float."""
    if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "iuf":
        value = value.item()
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise ParameterTypeError(f"{name} must be a real number, got {type(value).__name__} {value!r:.60}")
    return float(value)
