"""Registry entry ``exact``: float64 scipy solve of the product-graph system (docs/design.md §5.1).

The oracle for every other backend (formerly ``mgkflow.cpu_solver``). For a pair (G, G') it solves

    (D_x V_x^-1 - A_x ∘ E_x) x = D_x q_x,    K = p_x^T x

directly (sparse LU) for small systems and with Jacobi-preconditioned CG
otherwise, to a relative residual of ``rtol``. :class:`ExactBackend` solves lists of pairs
with :func:`solve_pair` / :func:`solve_pair_gradient`; ``CPUBackend`` is its deprecated old name.

Examples
--------
>>> import networkx as nx
>>> from mgkflow import Graph, MarginalizedGraphKernel
>>> kern = MarginalizedGraphKernel(q=0.5, backend="exact")
>>> round(float(kern([Graph.from_networkx(nx.path_graph(2))])[0, 0]), 6), kern.last_stats.summary()["direct_solves"]
(1.333333, 1)
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from ..errors import ConvergenceError, GraphError, ProblemTooLargeError
from ..kernels import BaseKernel, Constant
from ..system import GraphSystem
from .base import GradientSolution, NodalSolution, Pairs, Progress, Solution

__all__ = ["PairSolution", "PairGradient", "solve_pair", "solve_pair_gradient", "ExactBackend", "make"]

#: Systems up to this many unknowns are solved directly.
DIRECT_MAX_UNKNOWNS = 2500
#: Largest number of edge-pair products the CPU backend will assemble.
MAX_EDGE_PAIRS = 60_000_000


@dataclass(frozen=True)
class PairSolution:
    """Result of one pair: the kernel value, CG iterations (0 for a direct solve),
    final relative residual ||b - Ax|| / ||b|| and whether it reached the tolerance.
    ``x`` is the solution reshaped to (n, m)."""

    value: float
    iterations: int
    residual: float
    converged: bool
    x: np.ndarray


def _labels(arrays, index):
    return {k: v[index] for k, v in arrays.items()}


def _edge_pairs(s1: GraphSystem, s2: GraphSystem) -> tuple:
    """(rows, cols of G's edges, rows, cols of G''s edges, G's edge labels as a column, G''s as a row)
    for the edge-pair products; :class:`~mgkflow.errors.ProblemTooLargeError` beyond :data:`MAX_EDGE_PAIRS`."""
    if s1.graph.nnz * s2.graph.nnz > MAX_EDGE_PAIRS:
        raise ProblemTooLargeError(
            f"pair ({s1.name}, {s2.name}) has {s1.graph.nnz} x {s2.graph.nnz} edge pairs, "
            f"beyond the exact backend's limit of {MAX_EDGE_PAIRS:.0e}; use backend='cpu' (no size cap: "
            "it recomputes the edge-pair products when they do not fit in memory) or backend='gpu'"
        )
    r1, c1 = s1.graph.coo()
    r2, c2 = s2.graph.coo()
    e1 = {k: v[:, None] for k, v in s1.graph.edge_labels.items()}
    e2 = {k: v[None, :] for k, v in s2.graph.edge_labels.items()}
    return r1, c1, r2, c2, e1, e2


def _offdiag_operator(s1: GraphSystem, s2: GraphSystem, edge_kernel: BaseKernel, need_matrix: bool):
    """Return (matvec on (n, m) arrays, sparse matrix or None) for A_x ∘ E_x."""
    A1, A2 = s1.graph.adjacency, s2.graph.adjacency
    n, m = s1.n, s2.n
    if isinstance(edge_kernel, Constant):
        c = edge_kernel.c
        A2T = A2.T.tocsr()

        def matvec(X):
            return c * (A1 @ (A2T @ X.T).T)

        mat = c * sp.kron(A1, A2, format="csr") if need_matrix else None
        return matvec, mat
    r1, c1, r2, c2, e1, e2 = _edge_pairs(s1, s2)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        ke = np.broadcast_to(edge_kernel(e1, e2), (len(r1), len(r2)))
    data = (A1.data[:, None] * A2.data[None, :]) * ke
    rows = (r1[:, None] * m + r2[None, :]).ravel()
    cols = (c1[:, None] * m + c2[None, :]).ravel()
    W = sp.csr_array((data.ravel(), (rows, cols)), shape=(n * m, n * m))

    def matvec(X):
        return (W @ X.ravel()).reshape(n, m)

    return matvec, W


@dataclass(frozen=True)
class _PairSystem:
    """The product-graph system of one pair: M = diag(diag) - W, M x = b, K = p_x·x."""

    V: np.ndarray  # node kernel (n, m)
    Dx: np.ndarray  # d ⊗ d' (n, m)
    diag: np.ndarray  # Dx / V
    b: np.ndarray  # Dx ∘ q_x
    px: np.ndarray  # p ⊗ p'
    matvec: object  # (n, m) -> (n, m): (A_x ∘ E_x) X
    W: object  # sparse A_x ∘ E_x or None
    direct: bool


def _node_kernel_matrix(s1: GraphSystem, s2: GraphSystem, node_kernel: BaseKernel) -> np.ndarray:
    n, m = s1.n, s2.n
    with np.errstate(all="ignore"):
        V = np.broadcast_to(
            node_kernel(
                {k: v[:, None] for k, v in s1.graph.node_labels.items()},
                {k: v[None, :] for k, v in s2.graph.node_labels.items()},
            ),
            (n, m),
        )
    if not np.all(V > 0):
        i, j = np.argwhere(~(V > 0))[0]
        hint = ""
        if V[i, j] == 0 and node_kernel.range.lo_open:
            hint = " (the kernel underflows float64 here: a length scale too small for these labels?)"
        raise GraphError(
            f"node kernel is {V[i, j]} (not > 0) between node {i} of {s1.name} and node {j} of "
            f"{s2.name}; node kernel values must lie in (0, 1]{hint}"
        )
    return V


def _pair_system(s1, s2, node_kernel, edge_kernel, method) -> _PairSystem:
    n, m = s1.n, s2.n
    V = _node_kernel_matrix(s1, s2, node_kernel)
    with np.errstate(over="raise", under="ignore"):
        try:
            Dx = np.outer(s1.d, s2.d)
            diag = Dx / V
            b = Dx * np.outer(s1.q, s2.q)
            px = np.outer(s1.p, s2.p)
        except FloatingPointError as exc:
            raise GraphError(
                f"pair ({s1.name}, {s2.name}): the degree or start-probability products overflow float64 "
                "(start probabilities p too large?)"
            ) from exc
    direct = method == "direct" or (method == "auto" and n * m <= DIRECT_MAX_UNKNOWNS)
    matvec, W = _offdiag_operator(s1, s2, edge_kernel, need_matrix=direct)
    return _PairSystem(V, Dx, diag, b, px, matvec, W, direct)


def _solve(ps: _PairSystem, rhs: list[np.ndarray], rtol: float, max_iter: int):
    """Solve M x = r for each r in ``rhs``; return (solutions, iterations, residual, converged).

    Each right-hand side is scaled by a power of two that puts its largest entry in [1, 2)
    and the solution scaled back (exact), so tiny or huge start probabilities neither under-
    nor overflow inside the solver. The direct path factors M once (sparse LU) for all
    right-hand sides. It counts as converged when the normwise backward error
    ||r - M x|| / (||M|| ||x|| + ||r||) is at the level of float64 rounding (1e-13): LU is
    backward stable, and the relative residual ||r - M x|| / ||r|| alone can exceed a fixed
    threshold on ill-conditioned but well-solved systems (q = 1e-8). CG counts as converged at
    relative residual ``rtol``. The reported residual is the relative residual
    ||r - M x|| / ||r|| (the worst over the right-hand sides).
    """
    diag, matvec = ps.diag, ps.matvec
    shape = diag.shape
    xs, worst, ok, its = [], 0.0, True, 0
    shifts = []
    scaled = []
    for r in rhs:
        top = float(np.max(np.abs(r))) if r.size else 0.0
        shift = 0 if top == 0 else 1 - int(np.frexp(top)[1])
        shifts.append(shift)
        scaled.append(np.ldexp(r, shift) if shift else r)
    if ps.direct:
        M = (sp.diags_array(diag.ravel()) - ps.W).tocsc()
        with warnings.catch_warnings():
            warnings.simplefilter("error", spla.MatrixRankWarning)
            try:
                lu = spla.splu(M)
            except (RuntimeError, spla.MatrixRankWarning) as exc:
                raise ConvergenceError(f"the product-graph system is singular to float64 precision ({exc})") from exc
        mnorm = spla.norm(M, np.inf)
        for r, shift in zip(scaled, shifts, strict=True):
            rnorm = np.linalg.norm(r, np.inf)
            if rnorm == 0:
                xs.append(np.zeros(shape))
                continue
            x = lu.solve(r.ravel()).reshape(shape)
            resid = r - (diag * x - matvec(x))
            backward = np.linalg.norm(resid, np.inf) / (mnorm * np.linalg.norm(x, np.inf) + rnorm)
            rel = float(np.linalg.norm(resid) / np.linalg.norm(r))
            worst = max(worst, rel)
            ok = ok and bool(backward <= 1e-13 or rel <= max(rtol, 1e-10))
            xs.append(np.ldexp(x, -shift) if shift else x)
        return xs, 0, worst, ok
    for r, shift in zip(scaled, shifts, strict=True):
        x, it, res, conv = _cg(diag, matvec, r, rtol, max_iter)
        xs.append(np.ldexp(x, -shift) if shift else x)
        its = max(its, it)
        worst = max(worst, res)
        ok = ok and conv
    return xs, its, worst, ok


def _cg(diag, matvec, b, rtol, max_iter):
    """Jacobi-preconditioned CG on (n, m) arrays."""
    bnorm = np.linalg.norm(b)
    if bnorm == 0:
        return np.zeros_like(b), 0, 0.0, True
    x = b / diag
    r = b - (diag * x - matvec(x))
    z = r / diag
    pdir = z.copy()
    rz = np.vdot(r, z)
    res = np.linalg.norm(r) / bnorm
    it = 0
    while res > rtol and it < max_iter:
        Ap = diag * pdir - matvec(pdir)
        alpha = rz / np.vdot(pdir, Ap)
        x += alpha * pdir
        r -= alpha * Ap
        it += 1
        res = np.linalg.norm(r) / bnorm
        if res <= rtol:
            break
        z = r / diag
        rz_new = np.vdot(r, z)
        pdir = z + (rz_new / rz) * pdir
        rz = rz_new
    return x, it, float(res), bool(res <= rtol)


def solve_pair(
    s1: GraphSystem,
    s2: GraphSystem,
    node_kernel: BaseKernel,
    edge_kernel: BaseKernel,
    rtol: float = 1e-12,
    max_iter: int = 10_000,
    method: str = "auto",
) -> PairSolution:
    """Solve the marginalized graph kernel system of one pair in float64.

    Parameters
    ----------
    s1, s2 : GraphSystem
        Prepared graphs (see :func:`mgkflow.system.prepare_graph`).
    node_kernel, edge_kernel : BaseKernel
        Base kernels (ranges already checked).
    rtol : float
        CG stops when ||b - A x|| <= rtol * ||b||.
    max_iter : int
        CG iteration limit.
    method : {"auto", "direct", "cg"}
        "auto" solves systems of up to 2,500 unknowns directly (sparse LU; reported as 0
        iterations, converged when the backward error is at float64 rounding level).

    Examples
    --------
    >>> import numpy as np
    >>> from mgkflow import Graph
    >>> from mgkflow.system import prepare_graph
    >>> g = prepare_graph(Graph(np.array([[0, 1], [1, 0]])), 0, Constant(1.0), Constant(1.0), q=0.5)
    >>> round(solve_pair(g, g, Constant(1.0), Constant(1.0)).value, 6)  # 4 q^2 / (1 - (1-q)^2)
    1.333333
    """
    ps = _pair_system(s1, s2, node_kernel, edge_kernel, method)
    (x,), it, res, conv = _solve(ps, [ps.b], rtol, max_iter)
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow is reported by the caller
        value = float(np.sum(ps.px * x))
    return PairSolution(value, it, float(res), conv, x)


@dataclass(frozen=True)
class PairGradient:
    """Value and derivatives of one pair (see :func:`solve_pair_gradient`)."""

    value: float
    gradient: np.ndarray
    iterations: int
    residual: float
    converged: bool
    x: np.ndarray
    y: np.ndarray


def _edge_bilinear(s1, s2, ps, edge_kernel, x, y) -> list[float]:
    """yᵀ (A_x ∘ ∂E_x/∂h) x for every edge-kernel hyperparameter h."""
    nh = len(edge_kernel.hyperparameters)
    if nh == 0:
        return []
    A1, A2 = s1.graph.adjacency, s2.graph.adjacency
    if isinstance(edge_kernel, Constant):  # dk/dc = 1: yᵀ (A ⊗ A') x = Σ y ∘ (A X A'ᵀ)
        return [float(np.sum(y * (A1 @ (A2 @ x.T).T)))]
    r1, c1, r2, c2, e1, e2 = _edge_pairs(s1, s2)
    with np.errstate(all="ignore"):
        grads = edge_kernel.gradient(e1, e2)
    # the product of weights and solution entries along every edge pair (i→j, i'→j')
    base = (A1.data[:, None] * A2.data[None, :]) * y[r1[:, None], r2[None, :]] * x[c1[:, None], c2[None, :]]
    return [float(np.sum(base * np.broadcast_to(g, base.shape))) for g in grads]


def solve_pair_gradient(
    s1: GraphSystem,
    s2: GraphSystem,
    node_kernel: BaseKernel,
    edge_kernel: BaseKernel,
    wrt_q: bool = False,
    rtol: float = 1e-12,
    max_iter: int = 10_000,
    method: str = "auto",
) -> PairGradient:
    """K of one pair and dK/dh for every base-kernel hyperparameter h (and q), in float64.

    Adjoint form (see docs/gradients.md): with M x = b and M y = p_x (M is symmetric),
    dK/dh = yᵀ (db/dh − (dM/dh) x). Columns of ``gradient``: the node kernel's
    hyperparameters (order of ``node_kernel.hyperparameters``), the edge kernel's, then q
    when ``wrt_q`` (a scalar q shared by every node of both graphs). Derivatives are in
    linear space (with respect to the values, not their logarithms).

    Examples
    --------
    >>> import numpy as np
    >>> from mgkflow import Graph
    >>> from mgkflow.system import prepare_graph
    >>> g = prepare_graph(Graph(np.array([[0, 1], [1, 0]])), 0, Constant(1.0), Constant(1.0), q=0.5)
    >>> r = solve_pair_gradient(g, g, Constant(1.0), Constant(1.0), wrt_q=True)
    >>> # K = 4 q^2 / (1 - (1 - q)^2) = 4 q / (2 - q): dK/dq = 8 / (2 - q)^2
    >>> round(r.value, 6), round(float(r.gradient[-1]), 6)
    (1.333333, 3.555556)
    """
    ps = _pair_system(s1, s2, node_kernel, edge_kernel, method)
    (x, y), it, res, conv = _solve(ps, [ps.b, ps.px], rtol, max_iter)
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow is reported by the caller
        return _pair_gradient_sums(s1, s2, ps, node_kernel, edge_kernel, wrt_q, x, y, it, res, conv)


def _pair_gradient_sums(s1, s2, ps, node_kernel, edge_kernel, wrt_q, x, y, it, res, conv) -> PairGradient:
    out: list[float] = []
    # node kernel: dM/dh = -D_x V^-2 dV/dh (diagonal), db/dh = 0
    if node_kernel.hyperparameters:
        with np.errstate(all="ignore"):
            dvs = node_kernel.gradient(
                {k: v[:, None] for k, v in s1.graph.node_labels.items()},
                {k: v[None, :] for k, v in s2.graph.node_labels.items()},
            )
        w = y * x * ps.Dx / (ps.V * ps.V)
        out.extend(float(np.sum(w * np.broadcast_to(dv, w.shape))) for dv in dvs)
    # edge kernel: dM/dh = -(A_x ∘ dE_x/dh), db/dh = 0
    out.extend(_edge_bilinear(s1, s2, ps, edge_kernel, x, y))
    if wrt_q:
        q = float(s1.q[0])
        if not (np.all(s1.q == q) and np.all(s2.q == q)):
            raise ValueError("dK/dq needs one scalar q for every node of both graphs")
        # d = deg / (1 - q) on both sides: dD_x/dq = 2 D_x / (1 - q); b = D_x q^2
        dDx = 2.0 * ps.Dx / (1.0 - q)
        db = dDx * q * q + 2.0 * q * ps.Dx
        out.append(float(np.sum(y * (db - dDx / ps.V * x))))
    return PairGradient(float(np.sum(ps.px * x)), np.asarray(out, dtype=np.float64), it, float(res), conv, x, y)


class ExactBackend:
    """Backend solving every pair with :func:`solve_pair` (float64, scipy): the oracle.

    It implements the whole :class:`~mgkflow.backends.base.Backend` protocol (``solve``,
    ``solve_gradient``, ``solve_nodal``) and returns the records of :mod:`mgkflow.backends.base`;
    the evaluation layer asks it for what another backend does not implement.

    Parameters
    ----------
    rtol : float
        CG stops when ||b - A x|| <= rtol ||b|| (systems of more than 2,500 unknowns).
    max_iter : int
        CG iteration limit per pair.

    Examples
    --------
    >>> import numpy as np
    >>> from mgkflow import Graph
    >>> from mgkflow.system import prepare_graph
    >>> g = prepare_graph(Graph(np.array([[0, 1], [1, 0]])), 0, Constant(1.0), Constant(1.0), q=0.5)
    >>> sol = ExactBackend().solve_gradient([g], [g], [(0, 0)], Constant(1.0), Constant(1.0), wrt_q=True)
    >>> sol.gradient.shape, round(float(sol.gradient[0, -1]), 6)  # dK/dq = 8 / (2 - q)^2
    ((1, 3), 3.555556)
    """

    name = "exact"

    def __init__(self, rtol: float = 1e-12, max_iter: int = 10_000) -> None:
        self.rtol = rtol
        self.max_iter = max_iter

    def _each(self, pairs: Pairs, solve_one, progress: Progress | None):
        """``solve_one(t, i, j)`` for every pair t = (i, j); returns iterations, residuals and
        converged flags from the per-pair solutions it returns."""
        k = len(pairs)
        iters = np.empty(k, dtype=np.int64)
        res = np.empty(k)
        conv = np.empty(k, dtype=bool)
        for t, (i, j) in enumerate(np.asarray(pairs, dtype=np.int64).reshape(-1, 2).tolist()):
            sol = solve_one(t, i, j)
            iters[t], res[t], conv[t] = sol.iterations, sol.residual, sol.converged
            if progress is not None:
                progress(1)
        return iters, res, conv

    def solve(
        self,
        xs: Sequence[GraphSystem],
        ys: Sequence[GraphSystem],
        pairs: Pairs,
        node_kernel: BaseKernel,
        edge_kernel: BaseKernel,
        progress: Progress | None = None,
    ) -> Solution:
        """Values of ``pairs`` ((k, 2) int array or [(i, j), ...]) between ``xs[i]`` and ``ys[j]``."""
        values = np.empty(len(pairs))

        def one(t, i, j):
            sol = solve_pair(xs[i], ys[j], node_kernel, edge_kernel, self.rtol, self.max_iter)
            values[t] = sol.value
            return sol

        return Solution(values, *self._each(pairs, one, progress))

    def solve_gradient(
        self,
        xs: Sequence[GraphSystem],
        ys: Sequence[GraphSystem],
        pairs: Pairs,
        node_kernel: BaseKernel,
        edge_kernel: BaseKernel,
        wrt_q: bool = False,
        progress: Progress | None = None,
    ) -> GradientSolution:
        """Values and dK/dh of ``pairs`` (layout: :class:`~mgkflow.backends.base.GradientSolution`)."""
        nh = len(node_kernel.hyperparameters) + len(edge_kernel.hyperparameters) + int(bool(wrt_q))
        values = np.empty(len(pairs))
        grads = np.empty((len(pairs), nh))

        def one(t, i, j):
            sol = solve_pair_gradient(xs[i], ys[j], node_kernel, edge_kernel, wrt_q, self.rtol, self.max_iter)
            values[t], grads[t] = sol.value, sol.gradient
            return sol

        return GradientSolution(values, grads, *self._each(pairs, one, progress))

    def solve_nodal(
        self,
        xs: Sequence[GraphSystem],
        ys: Sequence[GraphSystem],
        pairs: Pairs,
        node_kernel: BaseKernel,
        edge_kernel: BaseKernel,
        progress: Progress | None = None,
    ) -> NodalSolution:
        """Node-pair similarity blocks p_i p'_i' x_ii' of ``pairs`` (:class:`~mgkflow.backends.base.NodalSolution`)."""
        blocks = []

        def one(t, i, j):
            sol = solve_pair(xs[i], ys[j], node_kernel, edge_kernel, self.rtol, self.max_iter)
            blocks.append(np.outer(xs[i].p, ys[j].p) * sol.x)
            return sol

        return NodalSolution(blocks, *self._each(pairs, one, progress))


def make(rtol: float | None, max_iter: int, options: Mapping[str, Any]) -> ExactBackend:
    """Registry factory: an :class:`ExactBackend` (``rtol=None``: 1e-12; ``options``: its keyword arguments).

    Examples
    --------
    >>> make(None, 50, {}).rtol
    1e-12
    """
    return ExactBackend(rtol=1e-12 if rtol is None else rtol, max_iter=max_iter, **dict(options))


def __getattr__(name: str) -> Any:
    """``CPUBackend``: the old name of :class:`ExactBackend`, with a DeprecationWarning."""
    if name == "CPUBackend":
        warnings.warn(
            f"{__name__}.CPUBackend is deprecated: use mgkflow.backends.exact.ExactBackend",
            DeprecationWarning,
            stacklevel=2,
        )
        return ExactBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
