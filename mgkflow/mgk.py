"""The public kernel API: :class:`MarginalizedGraphKernel`, a scikit-learn kernel on graphs."""

from __future__ import annotations

import copy
import inspect
import math
import numbers
import os
import time
import warnings
from collections import namedtuple
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

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

from .errors import ConvergenceError, ConvergenceWarning, GraphError, ParameterError, ParameterTypeError
from .gradient import length0_term, log_space, normalized_gradient
from .graph import Graph
from .kernels import BaseKernel, Constant, check_edge_kernel, check_node_kernel
from .system import GraphSystem, NodeProbability, prepare_graph, scale_start

__all__ = ["MarginalizedGraphKernel", "SolveStats", "gpu_available", "DegenerateKernelWarning"]


#: With lmin=1, values below this fraction of the all-walks kernel are rounding noise (returned as 0).
LMIN_RESOLUTION = 1e-13
#: Smallest stop probability: the system's condition number grows as 1/q, and below this float64
#: no longer resolves K to about 1e-6.
Q_MIN = 1e-10
#: Threads that assemble a nodal similarity matrix (``nodal=True``) of at least
#: ``_NODAL_PARALLEL_ENTRIES`` entries: filling it is bound by memory traffic, which a few cores saturate.
_NODAL_THREADS = min(8, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
_NODAL_PARALLEL_ENTRIES = 1 << 20


class DegenerateKernelWarning(UserWarning):
    """The requested kernel is constant for mathematical reasons (e.g. a normalized kernel
    without any label field): the values are right but carry no information."""


@dataclass
class SolveStats:
    """Statistics of the last kernel call.

    Attributes
    ----------
    backend : str
        "cpu" or "gpu".
    shape : tuple
        Shape of the returned matrix.
    pairs : int
        Number of distinct pairs solved (upper triangle for symmetric calls,
        plus diagonal solves needed for normalization).
    iterations, residual, converged : ndarray
        Per entry of the returned matrix: CG iterations, final relative residual
        ||b - M x|| / ||b|| and convergence flag (mirrored for symmetric calls).
        Iterations 0 means the CPU backend solved the pair directly (sparse LU, used for
        product graphs of up to 2,500 nodes): no CG ran, and the entry counts as converged
        when the LU solution's backward error is at float64 rounding level, so its relative
        residual may exceed ``rtol`` on ill-conditioned systems (tiny q) while the value is
        exact to the conditioning. For gradient calls the figures are the worse of the two
        solves (M x = b and M y = p_x).
    seconds : float
        Wall time of the solve.
    """

    backend: str
    shape: tuple[int, int]
    pairs: int
    iterations: np.ndarray
    residual: np.ndarray
    converged: np.ndarray
    seconds: float
    extra: dict = field(default_factory=dict)

    @property
    def pairs_per_second(self) -> float:
        return self.pairs / self.seconds if self.seconds > 0 else float("inf")

    def summary(self) -> dict:
        """A flat dict of the figures (for DataFrames and reports)."""
        it = self.iterations
        return {
            "backend": self.backend,
            "pairs": self.pairs,
            "seconds": self.seconds,
            "pairs_per_s": self.pairs_per_second,
            "cg_iter_min": int(it.min()) if it.size else 0,
            "cg_iter_median": float(np.median(it)) if it.size else 0.0,
            "cg_iter_max": int(it.max()) if it.size else 0,
            "direct_solves": int((it == 0).sum()),  # cg_iter 0 = solved directly by sparse LU
            "residual_max": float(self.residual.max()) if self.residual.size else 0.0,
            "not_converged": int((~self.converged).sum()),
            **self.extra,
        }


def gpu_available() -> bool:
    """True when the GPU backend can be imported and a CUDA device is present."""
    try:
        from .gpu import device_available
    except ImportError:
        return False
    try:
        return bool(device_available())
    except Exception:  # noqa: BLE001 - any driver failure means "no GPU"
        return False


def _same_graphs(X, Y) -> bool:
    """True when Y is X, or holds the very same Graph objects in the same order."""
    if Y is X:
        return True
    try:
        if len(X) != len(Y):
            return False
        return all(a is b for a, b in zip(X, Y, strict=True))
    except TypeError:
        return False


def _check_probability_param(value, what: str, name: str, lo_open: bool) -> None:
    """Validate a start/stop probability parameter at construction (naming it)."""
    if isinstance(value, bool):
        raise ParameterTypeError(
            f"{what} {name} must be a number, a vector, a node label field name or a callable, got {value!r}"
        )
    if isinstance(value, numbers.Real):
        try:
            v = float(value)
        except OverflowError:
            v = math.inf if value > 0 else -math.inf
        if name == "q":
            if not (0.0 < v < 1.0):
                raise ParameterError(f"{what} {name} must lie in (0, 1), got {value!r:.40}")
            if v < Q_MIN:
                raise ParameterError(
                    f"{what} {name} = {v:g} is below {Q_MIN:g}: the product-graph system's condition number "
                    "grows as 1/q and float64 can no longer resolve K; use q >= 1e-10"
                )
        elif not (v >= 0.0) or not math.isfinite(v):
            raise ParameterError(f"{what} {name} must be non-negative and finite, got {value!r:.40}")
        return
    if isinstance(value, str) or callable(value):
        return
    if isinstance(value, np.ndarray | list | tuple):
        try:
            arr = np.asarray(value)
        except ValueError as exc:
            raise ParameterTypeError(f"{what} {name} must be a numeric vector, got a ragged sequence") from exc
        if arr.dtype.kind not in "biuf" or arr.ndim != 1:
            raise ParameterTypeError(
                f"{what} {name} must be a 1-D numeric vector (or a number, a field name or a callable), "
                f"got {value!r:.60}"
            )
        return
    raise ParameterTypeError(
        f"{what} {name} must be a number, a vector, a node label field name or a callable, got {value!r:.60}"
    )


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
        multi-core float64 engine (:class:`mgkflow.cpu_engine.NumbaCPUBackend`, no size cap).
        "exact" is the scipy reference backend (:class:`mgkflow.cpu_solver.CPUBackend`: direct
        solves of small systems, at most 6e7 edge pairs per pair), the test oracle.
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
        self._validate()

    # ------------------------------------------------------------------ validation
    def _validate(self) -> None:
        check_node_kernel(self.node_kernel)
        check_edge_kernel(self.edge_kernel)
        _check_probability_param(self.q, "stop probability", "q", lo_open=True)
        _check_probability_param(self.p, "start probability", "p", lo_open=False)
        if not isinstance(self.backend, str) or self.backend not in ("auto", "cpu", "gpu", "exact"):
            raise ParameterError(f"backend must be 'auto', 'cpu', 'gpu' or 'exact', got {self.backend!r}")
        if not isinstance(self.on_nonconvergence, str) or self.on_nonconvergence not in ("raise", "warn"):
            raise ParameterError(f"on_nonconvergence must be 'raise' or 'warn', got {self.on_nonconvergence!r}")
        if self.rtol is not None:
            if isinstance(self.rtol, bool) or not isinstance(self.rtol, numbers.Real):
                raise ParameterTypeError(f"rtol must be a number in (0, 1) or None, got {self.rtol!r}")
            if not (0 < float(self.rtol) < 1):
                raise ParameterError(f"rtol must lie in (0, 1), got {self.rtol}")
        mi = self.max_iter
        if isinstance(mi, bool) or not isinstance(mi, numbers.Real):
            raise ParameterTypeError(f"max_iter must be an integer >= 1, got {mi!r}")
        if isinstance(mi, numbers.Integral):
            if mi < 1:
                raise ParameterError(f"max_iter must be >= 1, got {mi}")
        elif not (math.isfinite(float(mi)) and float(mi).is_integer() and mi >= 1):
            raise ParameterError(f"max_iter must be a finite integer >= 1, got {mi!r}")
        if int(mi) > 2**62:
            raise ParameterError(f"max_iter must be at most 2**62, got {mi}")
        go = self.gpu_options
        if go is not None and not isinstance(go, dict):
            raise ParameterTypeError(f"gpu_options must be a dict of GPUBackend options or None, got {go!r:.60}")
        if go and self.backend in ("cpu", "exact"):
            raise ParameterError(f"gpu_options apply to the GPU backend; backend={self.backend!r} was asked for")
        if go and not all(isinstance(k, str) for k in go):
            raise ParameterTypeError(f"gpu_options keys must be option names (str), got {list(go)!r:.60}")
        qb = self.q_bounds
        if isinstance(qb, str):
            if qb != "fixed":
                raise ParameterError(f"q_bounds must be a (low, high) pair in (0, 1) or 'fixed', got {qb!r}")
        else:
            try:
                lo, hi = (float(v) for v in qb)
            except (TypeError, ValueError, OverflowError) as exc:
                raise ParameterError(
                    f"q_bounds must be a (low, high) pair in (0, 1) or 'fixed', got {qb!r:.60}"
                ) from exc
            if not (0 < lo <= hi < 1):
                raise ParameterError(f"q_bounds must satisfy 0 < low <= high < 1, got ({lo}, {hi})")
        if isinstance(self.lmin, bool) or self.lmin not in (0, 1):
            raise ParameterError(f"lmin must be 0 or 1, got {self.lmin!r}")
        if not isinstance(self.normalize, bool | np.bool_):
            raise ParameterTypeError(f"normalize must be True or False, got {self.normalize!r}")

    @property
    def _max_iter(self) -> int:
        return int(self.max_iter)

    @property
    def _scalar_q(self) -> bool:
        return isinstance(self.q, numbers.Real) and not isinstance(self.q, bool)

    @property
    def _scalar_p(self) -> bool:
        return isinstance(self.p, numbers.Real) and not isinstance(self.p, bool)

    def _p_scale(self, normalize: bool) -> float:
        """The factor p of a scalar start probability p (K = p² K with p = 1).

        Graphs are prepared with p = 1 and K, dK are multiplied by p twice at the end, so a
        tiny or huge p never enters the solver; normalized, p cancels (unless it is 0).
        """
        if not self._scalar_p:
            return 1.0
        p = float(self.p)
        if normalize:
            return 1.0 if p > 0 else 0.0
        return p

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
                f"hyperparameter {name} is 0, which has no logarithm: give it a positive value or "
                "bounds='fixed'"
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
        # exp(log(b)) can land one rounding step outside a bound b (e.g. h = 1 + 2e-16 > 1):
        # snap values within 1e-12 (relative) of a bound onto it
        lohi = np.array([b for (_, b, _), f in zip(entries, free, strict=True) if f], dtype=np.float64).reshape(-1, 2)
        for k in range(2):
            near = np.abs(new - lohi[:, k]) <= 1e-12 * lohi[:, k]
            new[near] = lohi[near, k]
        values[free] = new
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
        self._validate()

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
        """Set constructor parameters and/or base-kernel hyperparameters by name."""
        if not params:
            return self
        plain = super().get_params(deep=False)
        entries = self._hyper_entries()
        names = [n for n, _, _ in entries]
        updates = {}
        for key, value in params.items():
            if key in plain:
                setattr(self, key, value)
            elif key in names:
                updates[key] = value
            else:
                raise ParameterError(
                    f"invalid parameter {key!r} for MarginalizedGraphKernel; valid: {sorted(plain) + names[:-1]}"
                )
        if updates:
            entries = self._hyper_entries()  # after plain updates (new kernels or q)
            values = [updates.get(n, v) for n, _, v in entries]
            if len(values) != len(entries) or any(k not in [n for n, _, _ in entries] for k in updates):
                raise ParameterError("set_params: hyperparameter names changed along with the kernels; set them apart")
            self._set_values(values)
        else:
            self._validate()
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
        for key in a:
            x, y = a[key], b[key]
            if isinstance(x, BaseKernel) or isinstance(y, BaseKernel):
                if not (
                    isinstance(x, BaseKernel)
                    and isinstance(y, BaseKernel)
                    and x.structure == y.structure
                    and x.hyperparameters == y.hyperparameters
                ):
                    return False
            elif x is not y:
                try:
                    if not bool(np.all(x == y)):
                        return False
                except (TypeError, ValueError):
                    return False
        return True

    __hash__ = None  # mutable (set_params), like every scikit-learn kernel

    # ------------------------------------------------------------------ pickling
    def __getstate__(self) -> dict:
        # no device state and no caches travel: each process builds its own backend
        state = self.__dict__.copy()
        state["_backend_obj"] = None
        state["_backend_key"] = None
        state["_oracle_obj"] = None
        state["_systems"] = {}
        state["last_stats"] = None
        return state

    # ------------------------------------------------------------------ backend
    def _get_backend(self):
        key = (self.backend, self.rtol, self._max_iter, repr(self.gpu_options))
        if self._backend_obj is not None and self._backend_key in (None, key):
            return self._backend_obj  # (None: set from outside, e.g. by the benchmarks)
        name = self.backend
        if name == "auto":
            name = "gpu" if gpu_available() else "cpu"
        if name == "gpu":
            try:
                from .gpu import GPUBackend
            except ImportError as exc:
                raise RuntimeError(
                    "backend='gpu' needs PyCUDA and a CUDA device (pip install mgkflow[gpu])"
                ) from exc
            kw = {"max_iter": self._max_iter, **dict(self.gpu_options or {})}
            if self.rtol is not None:
                kw["rtol"] = self.rtol
            self._backend_obj = GPUBackend(**kw)
        elif name == "exact":
            self._backend_obj = self._oracle()
        else:
            from .cpu_engine import NumbaCPUBackend

            self._backend_obj = NumbaCPUBackend(rtol=self.rtol or 1e-12, max_iter=self._max_iter)
        self._backend_key = key
        return self._backend_obj

    def _oracle(self):
        """The exact CPU backend, for what the chosen backend does not implement."""
        from .cpu_solver import CPUBackend

        if self._oracle_obj is None or self._oracle_obj.max_iter != self._max_iter:
            self._oracle_obj = CPUBackend(rtol=self.rtol or 1e-12, max_iter=self._max_iter)
        return self._oracle_obj

    def _prepare(self, graphs: Sequence[Graph], what: str) -> list[GraphSystem]:
        if isinstance(graphs, Graph):
            raise ParameterTypeError(f"{what} must be a sequence of Graph objects, not a single Graph")
        if graphs is None or isinstance(graphs, str | bytes) or not hasattr(graphs, "__iter__"):
            raise ParameterTypeError(f"{what} must be a sequence of mgkflow.Graph objects, got {graphs!r:.60}")
        graphs = list(graphs)
        if not graphs:
            raise ParameterError(f"{what} is empty")
        # Graphs are immutable, so a graph's system depends only on the label fields the
        # kernels read, p and q: reuse the previous call's systems (repeated calls on the
        # same graphs, hyperparameter searches, benchmarks) unless p or q is a callable or a vector.
        p = 1.0 if self._scalar_p else self.p  # a scalar p is applied to the results (_p_scale)
        cacheable = all(isinstance(v, int | float | str) for v in (p, self.q))
        key = (self.node_kernel.fields, self.edge_kernel.fields, repr(p), repr(self.q))
        old = self._systems.get(what, {}) if cacheable else {}
        new: dict = {}
        out = []
        for i, g in enumerate(graphs):
            hit = old.get((id(g), i))
            if hit is not None and hit[0] is g and hit[1] == key:
                sys_ = hit[2]
            else:
                try:
                    sys_ = scale_start(prepare_graph(g, i, self.node_kernel, self.edge_kernel, p=p, q=self.q))
                except (GraphError, TypeError) as exc:
                    # name the argument too: "graph 3" alone is ambiguous in kern(X, Y)
                    raise type(exc)(f"in {what}: {exc}") from exc
            new[(id(g), i)] = (g, key, sys_)
            out.append(sys_)
        if cacheable:
            self._systems[what] = new
        return out

    def _check_diagonal(self, diag: np.ndarray, systems: Sequence[GraphSystem], what: str) -> None:
        bad = np.flatnonzero(~(diag > 0))
        if bad.size:
            s = systems[int(bad[0])]
            why = "(are all start probabilities p zero?)"
            if self.lmin == 1:
                why = "(with lmin=1 a graph without edges, or whose start nodes have none, has K(G, G) = 0)"
            raise GraphError(f"in {what}: {s.name}: K(G, G) = {diag[bad[0]]}, so the kernel cannot be normalized {why}")

    def _warn_degenerate(self) -> None:
        if self.node_kernel.fields or self.edge_kernel.fields:
            return
        if not (isinstance(self.p, numbers.Real) and self._scalar_q):
            return
        warnings.warn(
            "normalized marginalized graph kernel with label-free node and edge kernels and uniform p "
            "and q: it is exactly 1 between any two graphs without isolated nodes (the solution x is "
            "constant over the product graph, so K(G, G') = n n' c and normalizing cancels n n'). "
            "Give the kernels label fields, use non-uniform p or q, or use the raw kernel.",
            DegenerateKernelWarning,
            stacklevel=3,
        )

    # ------------------------------------------------------------------ solves
    def _p_factor(self, xs, ys, pairs, raw: bool) -> tuple[float, np.ndarray | None]:
        """(p, exponents): K = p² · 2**-exponent · (K of the prepared systems), per pair.

        A scalar p is left out of the systems (p = 1) and each graph's vector p is stored times
        a power of two (:class:`~mgkflow.system.GraphSystem`); a raw result is scaled back, a
        normalized one needs no scaling (every factor cancels).
        """
        scale = self._p_scale(not raw)
        if not raw:
            return scale, None
        ex_x = np.fromiter((s.p_exponent for s in xs), dtype=np.int64, count=len(xs))
        ex_y = ex_x if ys is xs else np.fromiter((s.p_exponent for s in ys), dtype=np.int64, count=len(ys))
        if not (ex_x.any() or ex_y.any()):  # the usual case: no copy of the pairs
            return scale, None
        pr = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
        ex = ex_x[pr[:, 0]] + ex_y[pr[:, 1]]
        return scale, (ex if np.any(ex) else None)

    def _solve(self, xs, ys, pairs, gradient: bool = False, raw: bool = True):
        """Values (and dK/dh in the backend layout) of ``pairs``, lmin applied, start probabilities
        scaled back (``raw``) or left as prepared (normalized results, where they cancel).

        Returns values, gradient or None, iterations, residuals, converged.
        """
        backend = self._get_backend()
        wrt_q = self._scalar_q
        bar = None
        if self.progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=len(pairs), desc=f"MGK {backend.name}", unit="pair")
        update = None if bar is None else bar.update
        try:
            if gradient:
                solver = getattr(backend, "solve_gradient", None) or self._oracle().solve_gradient
                vals, grads, its, res, conv = solver(
                    xs, ys, pairs, self.node_kernel, self.edge_kernel, wrt_q=wrt_q, progress=update
                )
            else:
                vals, its, res, conv = backend.solve(xs, ys, pairs, self.node_kernel, self.edge_kernel, update)
                grads = None
        finally:
            if bar is not None:
                bar.close()
        vals = np.asarray(vals, dtype=np.float64)
        if grads is not None:
            grads = np.array(grads, dtype=np.float64)
        if self.lmin == 1:
            # K - p_xᵀ V_x q_x: the difference is known to about 1e-16 K, so values below
            # LMIN_RESOLUTION K (e.g. graphs without edges, exactly 0) are returned as 0
            ne = len(self.edge_kernel.hyperparameters)
            full = vals.copy()
            vals = vals.copy()
            with np.errstate(all="ignore"):  # non-finite results are reported by _check_finite
                for t, (i, j) in enumerate(np.asarray(pairs, dtype=np.int64).reshape(-1, 2).tolist()):
                    v0, g0 = length0_term(xs[i], ys[j], self.node_kernel, ne, wrt_q and grads is not None)
                    vals[t] -= v0
                    if grads is not None:
                        grads[t] -= g0
                tiny = vals <= LMIN_RESOLUTION * np.abs(full)
            vals[tiny] = 0.0
            if grads is not None:
                grads[tiny] = 0.0
        pscale, ex = self._p_factor(xs, ys, pairs, raw)
        with np.errstate(over="ignore", under="ignore", invalid="ignore"):  # reported by _check_finite
            if ex is not None:
                vals = np.ldexp(vals, -ex)
                if grads is not None:
                    grads = np.ldexp(grads, -ex[:, None])
            if pscale != 1.0:
                vals = vals * pscale * pscale
                if grads is not None:
                    grads = grads * pscale * pscale
        return vals, grads, its, res, conv

    def _check_finite(self, K: np.ndarray, xs, ys) -> None:
        bad = ~np.isfinite(K)
        if bad.any():
            i, j = (int(v) for v in np.argwhere(bad)[0])
            raise GraphError(
                f"K({xs[i].name}, {ys[j].name}) = {K[i, j]}: the kernel value overflows float64 "
                "(start probabilities p too large? K grows as p squared)"
            )

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
        normalize = self.normalize if normalize is None else normalize
        if not isinstance(normalize, bool | np.bool_):
            raise ParameterTypeError(f"normalize must be True or False, got {normalize!r}")
        if not isinstance(nodal, bool | np.bool_):
            raise ParameterTypeError(f"nodal must be True or False, got {nodal!r}")
        if Y is not None and _same_graphs(X, Y):
            Y = None
        if eval_gradient and Y is not None:
            raise ParameterError("eval_gradient=True needs Y=None (the gradient of a Gram matrix)")
        if eval_gradient and nodal:
            raise ParameterError("eval_gradient is not available with nodal=True")
        xs = self._prepare(X, "X")
        ys = None if Y is None else self._prepare(Y, "Y")
        if normalize:
            self._warn_degenerate()
        if nodal:
            return self._nodal(xs, ys, normalize)
        raw = not normalize
        t0 = time.perf_counter()
        N = len(xs)
        dK = None
        if ys is None:
            iu, ju = np.triu_indices(N)
            pairs = np.stack([iu, ju], axis=1)
            vals, grads, its, res, conv = self._solve(xs, xs, pairs, gradient=eval_gradient, raw=raw)
            K = np.empty((N, N))
            K[iu, ju] = vals
            K[ju, iu] = vals
            I, R, C = (np.empty((N, N), dtype=a.dtype) for a in (its, res, conv))
            for M, a in ((I, its), (R, res), (C, conv)):
                M[iu, ju] = a
                M[ju, iu] = a
            npairs = len(pairs)
            self._record(K.shape, npairs, I, R, C, t0)
            self._check_finite(K, xs, xs)
            if grads is not None:
                dK = np.empty((N, N, grads.shape[1]))
                dK[iu, ju] = grads
                dK[ju, iu] = grads
                free = self._free()
                if not np.all(np.isfinite(dK[:, :, free])):
                    i, j = (int(v) for v in np.argwhere(~np.isfinite(dK[:, :, free]).all(axis=2))[0])
                    raise GraphError(
                        f"the derivatives of K({xs[i].name}, {xs[j].name}) overflow float64 "
                        "(start probabilities p too large?)"
                    )
            if normalize:
                kd = np.diag(K).copy()
                self._check_diagonal(kd, xs, "X")
                dkd = None if dK is None else dK[np.arange(N), np.arange(N)].copy()
                K, dK = normalized_gradient(K, dK, kd, dkd, kd, dkd)
        else:
            Mn = len(ys)
            ii, jj = np.meshgrid(np.arange(N), np.arange(Mn), indexing="ij")
            pairs = np.stack([ii.ravel(), jj.ravel()], axis=1)
            vals, _, its, res, conv = self._solve(xs, ys, pairs, raw=raw)
            K = vals.reshape(N, Mn)
            I, R, C = its.reshape(N, Mn), res.reshape(N, Mn), conv.reshape(N, Mn)
            npairs = len(pairs)
            if normalize:
                dxv, _, _, rx, cx = self._solve(xs, xs, np.repeat(np.arange(N)[:, None], 2, axis=1), raw=raw)
                dyv, _, _, ry, cy = self._solve(ys, ys, np.repeat(np.arange(Mn)[:, None], 2, axis=1), raw=raw)
                npairs += N + Mn
                self._record(K.shape, npairs, I, R, C, t0)
                self._check_convergence(np.concatenate([cx, cy]), np.concatenate([rx, ry]))
                self._check_finite(K, xs, ys)
                self._check_finite(dxv[:, None], xs, xs)
                self._check_finite(dyv[:, None], ys, ys)
                self._check_diagonal(dxv, xs, "X")
                self._check_diagonal(dyv, ys, "Y")
                K, _ = normalized_gradient(K, None, dxv, None, dyv, None)
            else:
                self._record(K.shape, npairs, I, R, C, t0)
                self._check_finite(K, xs, ys)
        self._check_convergence(C, R)
        if eval_gradient:
            free = self._free()
            values = np.array([v for _, _, v in self._hyper_entries()], dtype=np.float64)
            return K, log_space(dK[:, :, free], values[free])
        return K

    def _record(self, shape, npairs, I, R, C, t0) -> None:
        backend = self._get_backend()
        self.last_stats = SolveStats(
            backend=backend.name,
            shape=shape,
            pairs=npairs,
            iterations=I,
            residual=R,
            converged=C,
            seconds=time.perf_counter() - t0,
            extra=dict(getattr(backend, "last_extra", {}) or {}),
        )

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
        xs = self._prepare(X, "X")
        N = len(xs)
        if nodal:
            r = self._nodal_self(xs, raw=not self.normalize)
            if self.normalize:
                if not np.all(r > 0):
                    k = int(np.flatnonzero(~(r > 0))[0])
                    raise GraphError(
                        f"in X: node {k} (counted over all graphs) has self-similarity {r[k]}: cannot normalize"
                    )
                return np.ones_like(r)
            return r
        if self.normalize:
            for s in xs:
                if self._p_scale(True) == 0 or not np.any(s.p > 0) or (self.lmin == 1 and s.graph.nnz == 0):
                    self._check_diagonal(np.zeros(1), [s], "X")
            return np.ones(N)
        t0 = time.perf_counter()
        vals, _, its, res, conv = self._solve(xs, xs, np.repeat(np.arange(N)[:, None], 2, axis=1))
        self._record((N,), N, its, res, conv, t0)
        self._check_finite(vals[:, None], xs, xs)
        self._check_convergence(conv, res)
        return vals

    # ------------------------------------------------------------------ nodal
    def _nodal_solve(self, xs, ys, pairs) -> list:
        """The backend's (n_i, m_j) blocks p_a p'_b x_ab of ``pairs``, in the prepared systems' units."""
        backend = self._get_backend()
        solver = getattr(backend, "solve_nodal", None) or self._oracle().solve_nodal
        blocks, _its, res, conv = solver(xs, ys, pairs, self.node_kernel, self.edge_kernel, None)
        self._check_convergence(np.asarray(conv), np.asarray(res))
        return blocks

    @staticmethod
    def _nodal_exponents(systems, raw: bool) -> np.ndarray | None:
        """Each system's ``p_exponent`` (its blocks carry 2**e per side), None where none is set
        or the result is normalized (the factors cancel)."""
        if not raw:
            return None
        ex = np.fromiter((s.p_exponent for s in systems), dtype=np.int64, count=len(systems))
        return ex if ex.any() else None

    @staticmethod
    def _nodal_overflow(s1, s2) -> GraphError:
        return GraphError(
            f"nodal similarities of ({s1.name}, {s2.name}) overflow float64 (start probabilities p too large?)"
        )

    def _nodal_diagonals(self, xs, blocks, raw: bool) -> np.ndarray:
        """The self-similarities p_a² x_aa (lmin=1: minus p_a² q_a² v_aa) of every node of ``xs``
        (length Σ n) from the blocks of the self-pairs (xs[k], xs[k]), scaled as :meth:`_nodal`'s."""
        pscale = self._p_scale(not raw)
        ex = self._nodal_exponents(xs, raw)
        out = []
        with np.errstate(over="ignore", under="ignore", invalid="ignore"):  # reported below
            for k, (s, b) in enumerate(zip(xs, blocks, strict=True)):
                d = np.diagonal(np.asarray(b, dtype=np.float64))
                if self.lmin == 1:
                    labels = dict(s.graph.node_labels)
                    V = np.broadcast_to(self.node_kernel(labels, labels), d.shape)
                    pq = s.p * s.q
                    d = d.copy()
                    self._minus_length0(d, (pq * pq) * V)
                if ex is not None:
                    d = np.ldexp(d, -2 * int(ex[k]))
                if pscale != 1.0:
                    d = d * pscale * pscale
                if not np.all(np.isfinite(d)):
                    raise self._nodal_overflow(s, s)
                out.append(d)
        return np.concatenate(out)

    def _nodal_self(self, xs, raw: bool) -> np.ndarray:
        """:meth:`_nodal_diagonals` of ``xs``, solving its N self-pairs."""
        pairs = np.repeat(np.arange(len(xs))[:, None], 2, axis=1)
        return self._nodal_diagonals(xs, self._nodal_solve(xs, xs, pairs), raw)

    def _nodal_columns(self, ys) -> tuple[np.ndarray, dict | None]:
        """For lmin=1: p q of every node of ``ys`` (concatenated) and the node kernel's label fields
        concatenated over ``ys`` (None where a field's dtype or shape differs between graphs: then
        the length-0 term is evaluated block by block)."""
        pq = np.concatenate([s.p * s.q for s in ys])
        labels: dict | None = {}
        for f in self.node_kernel.fields:
            arrs = [np.asarray(s.graph.node_labels[f]) for s in ys]
            if any(a.dtype != arrs[0].dtype or a.shape[1:] != arrs[0].shape[1:] for a in arrs):
                labels = None
                break
            labels[f] = np.concatenate(arrs)
        return pq, labels

    def _nodal_fill(self, R, xs, ys, pairs, blocks, ox, oy, raw: bool, sym: bool, sx=None, sy=None) -> None:
        """Write the blocks of ``pairs`` (grouped by row graph, columns increasing and contiguous)
        into ``R`` one row band (the rows of one graph of xs) at a time, while the band is in cache:
        lmin=1's length-0 term, the start probabilities' scale, the overflow check and, with
        ``sx``/``sy`` (square roots of the self-similarities), the normalization are applied to
        the whole band at once. ``sym``: only the upper block triangle was solved; each band is
        mirrored into the lower one (a graph's block with itself is symmetrized). Bands write
        disjoint parts of ``R``, so a large matrix is filled by several threads (numpy releases
        the GIL while it copies and computes)."""
        pscale = self._p_scale(not raw)
        ex_x = self._nodal_exponents(xs, raw)
        ex_y = ex_x if sym else self._nodal_exponents(ys, raw)
        col_ex = None
        if ex_x is not None or ex_y is not None:
            ny = np.diff(oy)
            col_ex = np.repeat(np.zeros(len(ys), dtype=np.int64) if ex_y is None else ex_y, ny)
            ex_x = np.zeros(len(xs), dtype=np.int64) if ex_x is None else ex_x
        pq_y = labels_y = None
        if self.lmin == 1:
            pq_y, labels_y = self._nodal_columns(ys)
        pr = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
        rows = np.searchsorted(pr[:, 0], np.arange(len(xs) + 1)).tolist()
        jcol = pr[:, 1].tolist()
        oxl, oyl = ox.tolist(), oy.tolist()

        def band_of(i: int) -> None:
            t_lo, t_hi = rows[i], rows[i + 1]
            if t_lo == t_hi:
                return
            r0, r1 = oxl[i], oxl[i + 1]
            c0, c1 = oyl[jcol[t_lo]], oyl[jcol[t_hi - 1] + 1]
            band = R[r0:r1, c0:c1]
            for t in range(t_lo, t_hi):
                j = jcol[t]
                R[r0:r1, oyl[j] : oyl[j + 1]] = blocks[t]
            with np.errstate(over="ignore", under="ignore", invalid="ignore"):  # overflow is reported below
                if self.lmin == 1:
                    self._nodal_length0(band, xs[i], ys, jcol[t_lo:t_hi], oyl, c0, pq_y, labels_y)
                if col_ex is not None:
                    np.ldexp(band, (-(ex_x[i] + col_ex[c0:c1])).astype(np.intc), out=band)
                if pscale != 1.0:
                    band *= pscale
                    band *= pscale
                # a sum is finite when every entry is (the exact test only where it is not: a sum of
                # large finite entries may overflow)
                if not np.isfinite(band.sum()):
                    bad = ~np.isfinite(band)
                    if bad.any():
                        c = int(np.flatnonzero(bad.any(axis=0))[0]) + c0
                        raise self._nodal_overflow(xs[i], ys[int(np.searchsorted(oy, c, side="right")) - 1])
                if sym:
                    d = R[r0:r1, r0:r1]  # this graph with itself: x is symmetric up to rounding
                    d[...] = 0.5 * (d + d.T)
                if sx is not None:
                    band /= sx[r0:r1, None]
                    band /= sy[None, c0:c1]
                    if sym:  # exactly symmetric again: the lower triangle from the upper one
                        d[...] = np.triu(d) + np.triu(d, 1).T
            if sym and r1 < R.shape[1]:
                R[r1:, r0:r1] = R[r0:r1, r1:].T

        threads = min(_NODAL_THREADS, len(xs)) if R.size >= _NODAL_PARALLEL_ENTRIES else 1
        if threads <= 1:
            for i in range(len(xs)):
                band_of(i)
            return
        with ThreadPoolExecutor(max_workers=threads) as pool:
            # in band order, so that an overflow is reported for the first pair, as serially
            for fut in [pool.submit(band_of, i) for i in range(len(xs))]:
                fut.result()

    @staticmethod
    def _minus_length0(b, l0) -> None:
        """b -= l0 in place (lmin=1), entries that end at or below LMIN_RESOLUTION |b| set to 0 as in the
        kernel's values: the difference is known to about 1e-16 |b| (a graph without edges, or an
        isolated node, then gets exactly 0)."""
        thr = np.abs(b)
        thr *= LMIN_RESOLUTION
        np.subtract(b, l0, out=b)
        np.copyto(b, 0.0, where=b <= thr)

    def _nodal_length0(self, band, s1, ys, js, oyl, c0, pq_y, labels_y) -> None:
        """Subtract lmin=1's length-0 term p_a p'_b v_ab q_a q'_b from the row band of ``s1``."""
        pq_x = s1.p * s1.q
        c1 = c0 + band.shape[1]
        if labels_y is not None:
            x = {f: np.asarray(s1.graph.node_labels[f])[:, None] for f in self.node_kernel.fields}
            y = {f: v[None, c0:c1] for f, v in labels_y.items()}
            l0 = np.outer(pq_x, pq_y[c0:c1])
            l0 *= self.node_kernel(x, y)
            self._minus_length0(band, l0)
            return
        x = {k: v[:, None] for k, v in s1.graph.node_labels.items()}
        for j in js:
            s2 = ys[j]
            blk = band[:, oyl[j] - c0 : oyl[j + 1] - c0]
            y = {k: v[None, :] for k, v in s2.graph.node_labels.items()}
            l0 = np.outer(pq_x, s2.p * s2.q)
            l0 *= self.node_kernel(x, y)
            self._minus_length0(blk, l0)

    def _nodal(self, xs, ys, normalize: bool) -> np.ndarray:
        t0 = time.perf_counter()
        sym = ys is None
        ys_ = xs if sym else ys
        N, Mn = len(xs), len(ys_)
        ox = np.concatenate([[0], np.cumsum([s.n for s in xs])]).astype(np.int64)
        oy = ox if sym else np.concatenate([[0], np.cumsum([s.n for s in ys_])]).astype(np.int64)
        if sym:
            iu, ju = np.triu_indices(N)
            pairs = np.stack([iu, ju], axis=1)
        else:
            ii, jj = np.meshgrid(np.arange(N), np.arange(Mn), indexing="ij")
            pairs = np.stack([ii.ravel(), jj.ravel()], axis=1)
        raw = not normalize
        npairs = len(pairs)
        sx = sy = None
        if normalize and not sym:
            # the self-pairs first: the blocks of the main solve are consumed before any other solve
            rx, ry = self._nodal_self(xs, raw), self._nodal_self(ys_, raw)
            npairs += N + Mn
        blocks = self._nodal_solve(xs, ys_, pairs)
        if normalize:
            if sym:
                selfs = np.flatnonzero(pairs[:, 0] == pairs[:, 1])
                rx = ry = self._nodal_diagonals(xs, [blocks[t] for t in selfs.tolist()], raw)
            for r, what in ((rx, "X"), (ry, "Y")):
                if not np.all(r > 0):
                    k = int(np.flatnonzero(~(r > 0))[0])
                    raise GraphError(
                        f"in {what}: node {k} (counted over all graphs) has self-similarity {r[k]}, so the "
                        "nodal similarities cannot be normalized"
                    )
            sx = np.sqrt(rx)
            sy = sx if sym else np.sqrt(ry)
        R = np.empty((int(ox[-1]), int(oy[-1])))
        self._nodal_fill(R, xs, ys_, pairs, blocks, ox, oy, raw, sym, sx, sy)
        self.last_stats = SolveStats(
            backend="cpu" if not hasattr(self._get_backend(), "solve_nodal") else self._get_backend().name,
            shape=R.shape,
            pairs=npairs,
            iterations=np.zeros(0, dtype=np.int64),
            residual=np.zeros(0),
            converged=np.ones(0, dtype=bool),
            seconds=time.perf_counter() - t0,
        )
        return R

    # ------------------------------------------------------------------ convergence
    def _check_convergence(self, conv: np.ndarray, res: np.ndarray) -> None:
        bad = int((~conv).sum())
        if not bad:
            return
        msg = (
            f"{bad} of {conv.size} kernel entries did not converge within max_iter={self._max_iter} "
            f"(worst relative residual {res[~conv].max():.3g}). The solver's difficulty grows as 1/q "
            "and with the spread of edge weights within a graph (the scale of all weights of a graph "
            "does not matter): raise max_iter or q, or pass on_nonconvergence='warn' to get the values "
            "with flags in last_stats"
        )
        if self.on_nonconvergence == "raise":
            raise ConvergenceError(msg)
        warnings.warn(msg, ConvergenceWarning, stacklevel=3)

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
