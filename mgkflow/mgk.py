"""The public kernel API: :class:`MarginalizedGraphKernel`."""

from __future__ import annotations

import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from .errors import ConvergenceError, ConvergenceWarning, GraphError
from .graph import Graph
from .kernels import BaseKernel, Constant, check_edge_kernel, check_node_kernel
from .system import GraphSystem, NodeProbability, prepare_graph

__all__ = ["MarginalizedGraphKernel", "SolveStats", "gpu_available"]


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
        Per entry of the returned matrix: CG iterations (0 = direct solve),
        final relative residual and convergence flag (mirrored for symmetric calls).
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


class MarginalizedGraphKernel:
    """The marginalized graph kernel between labeled graphs (DESIGN §1).

    K(G, G') = p_x^T (D_x V_x^-1 - A_x ∘ E_x)^-1 D_x q_x.

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
        Start probability (default 1 for every node).
    backend : {"auto", "cpu", "gpu"}
        "auto" uses the GPU when the GPU stage and a CUDA device are present.
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

    Examples
    --------
    >>> import networkx as nx
    >>> from mgkflow import Graph
    >>> gs = [Graph.from_networkx(nx.cycle_graph(n)) for n in (4, 5, 6)]
    >>> kern = MarginalizedGraphKernel(q=0.05, backend="cpu")
    >>> K = kern(gs)
    >>> K.shape, bool(np.allclose(K, K.T))
    ((3, 3), True)
    >>> bool(np.allclose(kern(gs, normalize=True).diagonal(), 1.0))
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
    ) -> None:
        self.node_kernel = check_node_kernel(node_kernel if node_kernel is not None else Constant(1.0))
        self.edge_kernel = check_edge_kernel(edge_kernel if edge_kernel is not None else Constant(1.0))
        if isinstance(q, int | float) and not (0.0 < float(q) < 1.0):
            raise ValueError(f"stop probability q must lie in (0, 1), got {q}")
        if isinstance(p, int | float) and float(p) < 0:
            raise ValueError(f"start probability p must be non-negative, got {p}")
        if backend not in ("auto", "cpu", "gpu"):
            raise ValueError(f"backend must be 'auto', 'cpu' or 'gpu', got {backend!r}")
        if on_nonconvergence not in ("raise", "warn"):
            raise ValueError(f"on_nonconvergence must be 'raise' or 'warn', got {on_nonconvergence!r}")
        if rtol is not None and not (0 < rtol < 1):
            raise ValueError(f"rtol must lie in (0, 1), got {rtol}")
        if max_iter < 1:
            raise ValueError(f"max_iter must be >= 1, got {max_iter}")
        if gpu_options and backend == "cpu":
            raise ValueError("gpu_options apply to the GPU backend; backend='cpu' was asked for")
        self.gpu_options = dict(gpu_options or {})
        self.q = q
        self.p = p
        self.backend = backend
        self.rtol = rtol
        self.max_iter = int(max_iter)
        self.on_nonconvergence = on_nonconvergence
        self.progress = progress
        self.last_stats: SolveStats | None = None
        self._backend_obj = None
        self._systems: dict = {}  # prepared systems of the last call, by argument

    # ------------------------------------------------------------------ pickling
    def __getstate__(self) -> dict:
        # no device state and no caches travel: each process builds its own backend
        state = self.__dict__.copy()
        state["_backend_obj"] = None
        state["_systems"] = {}
        state["last_stats"] = None
        return state

    # ------------------------------------------------------------------ backend
    def _get_backend(self):
        if self._backend_obj is not None:
            return self._backend_obj
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
            kw = {"max_iter": self.max_iter, **self.gpu_options}
            if self.rtol is not None:
                kw["rtol"] = self.rtol
            self._backend_obj = GPUBackend(**kw)
        else:
            from .cpu_solver import CPUBackend

            self._backend_obj = CPUBackend(rtol=self.rtol or 1e-12, max_iter=self.max_iter)
        return self._backend_obj

    def _prepare(self, graphs: Sequence[Graph], what: str) -> list[GraphSystem]:
        if isinstance(graphs, Graph):
            raise TypeError(f"{what} must be a sequence of Graph objects, not a single Graph")
        graphs = list(graphs)
        if not graphs:
            raise ValueError(f"{what} is empty")
        # Graphs are immutable, so a graph's system depends only on the kernels, p and q:
        # reuse the previous call's systems (repeated calls on the same graphs, e.g. in
        # hyperparameter searches or benchmarks) unless p or q is a callable or a vector.
        cacheable = all(isinstance(v, int | float | str) for v in (self.p, self.q))
        key = (repr(self.node_kernel), repr(self.edge_kernel), repr(self.p), repr(self.q))
        old = self._systems.get(what, {}) if cacheable else {}
        new: dict = {}
        out = []
        for i, g in enumerate(graphs):
            hit = old.get((id(g), i))
            if hit is not None and hit[0] is g and hit[1] == key:
                sys_ = hit[2]
            else:
                try:
                    sys_ = prepare_graph(g, i, self.node_kernel, self.edge_kernel, p=self.p, q=self.q)
                except (GraphError, TypeError) as exc:
                    # name the argument too: "graph 3" alone is ambiguous in kern(X, Y)
                    raise type(exc)(f"in {what}: {exc}") from exc
            new[(id(g), i)] = (g, key, sys_)
            out.append(sys_)
        if cacheable:
            self._systems[what] = new
        return out

    @staticmethod
    def _check_diagonal(diag: np.ndarray, systems: Sequence[GraphSystem], what: str) -> None:
        bad = np.flatnonzero(~(diag > 0))
        if bad.size:
            s = systems[int(bad[0])]
            raise GraphError(
                f"in {what}: {s.name}: K(G, G) = {diag[bad[0]]}, so the kernel cannot be normalized "
                "(are all start probabilities p zero?)"
            )

    # ------------------------------------------------------------------ call
    def __call__(
        self,
        X: Sequence[Graph],
        Y: Sequence[Graph] | None = None,
        normalize: bool = False,
    ) -> np.ndarray:
        """Compute the kernel matrix.

        Parameters
        ----------
        X : sequence of Graph
        Y : sequence of Graph, optional
            If given, return the (len(X), len(Y)) cross matrix; else the
            symmetric Gram matrix of X (upper triangle solved, mirrored).
        normalize : bool
            Return K(G,G') / sqrt(K(G,G) K(G',G')).

        Returns
        -------
        ndarray of float64
        """
        xs = self._prepare(X, "X")
        ys = None if Y is None else self._prepare(Y, "Y")
        backend = self._get_backend()
        t0 = time.perf_counter()
        if ys is None:
            N = len(xs)
            iu, ju = np.triu_indices(N)
            pairs = np.stack([iu, ju], axis=1)  # (n_pairs, 2) int array
            vals, its, res, conv = self._run(backend, xs, xs, pairs)
            K = np.empty((N, N))
            K[iu, ju] = vals
            K[ju, iu] = vals
            I, R, C = (np.empty((N, N), dtype=a.dtype) for a in (its, res, conv))
            for M, a in ((I, its), (R, res), (C, conv)):
                M[iu, ju] = a
                M[ju, iu] = a
            npairs = len(pairs)
            if normalize:
                self._check_diagonal(np.diag(K), xs, "X")
                dx = np.sqrt(np.diag(K))
                K = K / np.outer(dx, dx)
        else:
            N, Mn = len(xs), len(ys)
            ii, jj = np.meshgrid(np.arange(N), np.arange(Mn), indexing="ij")
            pairs = np.stack([ii.ravel(), jj.ravel()], axis=1)
            vals, its, res, conv = self._run(backend, xs, ys, pairs)
            K = vals.reshape(N, Mn)
            I, R, C = its.reshape(N, Mn), res.reshape(N, Mn), conv.reshape(N, Mn)
            npairs = len(pairs)
            if normalize:
                dpairs = np.repeat(np.arange(N)[:, None], 2, axis=1)
                dxv, itx, rx, cx = self._run(backend, xs, xs, dpairs)
                dpairs = np.repeat(np.arange(Mn)[:, None], 2, axis=1)
                dyv, ity, ry, cy = self._run(backend, ys, ys, dpairs)
                npairs += N + Mn
                self._check_convergence(np.concatenate([cx, cy]), np.concatenate([rx, ry]))
                self._check_diagonal(dxv, xs, "X")
                self._check_diagonal(dyv, ys, "Y")
                K = K / np.sqrt(np.outer(dxv, dyv))
        seconds = time.perf_counter() - t0
        self.last_stats = SolveStats(
            backend=backend.name,
            shape=K.shape,
            pairs=npairs,
            iterations=I,
            residual=R,
            converged=C,
            seconds=seconds,
            extra=dict(getattr(backend, "last_extra", {}) or {}),
        )
        self._check_convergence(C, R)
        return K

    def _run(self, backend, xs, ys, pairs):
        if self.progress:
            from tqdm.auto import tqdm

            with tqdm(total=len(pairs), desc=f"MGK {backend.name}", unit="pair") as bar:
                return backend.solve(xs, ys, pairs, self.node_kernel, self.edge_kernel, bar.update)
        return backend.solve(xs, ys, pairs, self.node_kernel, self.edge_kernel, None)

    def _check_convergence(self, conv: np.ndarray, res: np.ndarray) -> None:
        bad = int((~conv).sum())
        if not bad:
            return
        msg = (
            f"{bad} of {conv.size} kernel entries did not converge within max_iter={self.max_iter} "
            f"(worst relative residual {res[~conv].max():.3g}); raise max_iter or q, "
            "or pass on_nonconvergence='warn' to get the values with flags in last_stats"
        )
        if self.on_nonconvergence == "raise":
            raise ConvergenceError(msg)
        warnings.warn(msg, ConvergenceWarning, stacklevel=3)

    def __repr__(self) -> str:
        return (
            f"MarginalizedGraphKernel(node_kernel={self.node_kernel!r}, edge_kernel={self.edge_kernel!r}, "
            f"q={self.q!r}, p={self.p!r}, backend={self.backend!r})"
        )
