"""Exact CPU backend: float64 scipy solve of the product-graph system (DESIGN §5.1).

The oracle for every other backend. For a pair (G, G') it solves

    (D_x V_x^-1 - A_x ∘ E_x) x = D_x q_x,    K = p_x^T x

directly (sparse LU) for small systems and with Jacobi-preconditioned CG
otherwise, to a relative residual of ``rtol``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from .errors import GraphError
from .kernels import BaseKernel, Constant
from .system import GraphSystem

__all__ = ["PairSolution", "solve_pair", "CPUBackend"]

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
    if s1.graph.nnz * s2.graph.nnz > MAX_EDGE_PAIRS:
        raise MemoryError(
            f"pair ({s1.name}, {s2.name}) has {s1.graph.nnz} x {s2.graph.nnz} edge pairs, "
            f"beyond the CPU backend's limit of {MAX_EDGE_PAIRS}; use backend='gpu'"
        )
    r1, c1 = s1.graph.coo()
    r2, c2 = s2.graph.coo()
    e1 = {k: v[:, None] for k, v in s1.graph.edge_labels.items()}
    e2 = {k: v[None, :] for k, v in s2.graph.edge_labels.items()}
    ke = np.broadcast_to(edge_kernel(e1, e2), (len(r1), len(r2)))
    data = (A1.data[:, None] * A2.data[None, :]) * ke
    rows = (r1[:, None] * m + r2[None, :]).ravel()
    cols = (c1[:, None] * m + c2[None, :]).ravel()
    W = sp.csr_array((data.ravel(), (rows, cols)), shape=(n * m, n * m))

    def matvec(X):
        return (W @ X.ravel()).reshape(n, m)

    return matvec, W


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
        "auto" solves systems of up to 2,500 unknowns directly.

    Examples
    --------
    >>> import numpy as np
    >>> from mgkflow import Graph
    >>> from mgkflow.system import prepare_graph
    >>> g = prepare_graph(Graph(np.array([[0, 1], [1, 0]])), 0, Constant(1.0), Constant(1.0), q=0.5)
    >>> round(solve_pair(g, g, Constant(1.0), Constant(1.0)).value, 6)  # 4 q^2 / (1 - (1-q)^2)
    1.333333
    """
    n, m = s1.n, s2.n
    V = np.broadcast_to(
        node_kernel(
            {k: v[:, None] for k, v in s1.graph.node_labels.items()},
            {k: v[None, :] for k, v in s2.graph.node_labels.items()},
        ),
        (n, m),
    )
    if not np.all(V > 0):
        i, j = np.argwhere(~(V > 0))[0]
        raise GraphError(
            f"node kernel is {V[i, j]} (not > 0) between node {i} of {s1.name} and node {j} of "
            f"{s2.name}; node kernel values must lie in (0, 1]"
        )
    Dx = np.outer(s1.d, s2.d)
    diag = Dx / V
    b = Dx * np.outer(s1.q, s2.q)
    px = np.outer(s1.p, s2.p)
    use_direct = method == "direct" or (method == "auto" and n * m <= DIRECT_MAX_UNKNOWNS)
    matvec, W = _offdiag_operator(s1, s2, edge_kernel, need_matrix=use_direct)
    bnorm = np.linalg.norm(b)
    if use_direct:
        M = sp.diags_array(diag.ravel()) - W
        x = spla.spsolve(M.tocsc(), b.ravel()).reshape(n, m)
        res = np.linalg.norm(b - (diag * x - matvec(x))) / bnorm
        return PairSolution(float(np.sum(px * x)), 0, float(res), bool(res <= max(rtol, 1e-10)), x)
    # Jacobi-preconditioned CG on (n, m) arrays
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
    return PairSolution(float(np.sum(px * x)), it, float(res), bool(res <= rtol), x)


class CPUBackend:
    """Backend solving every pair with :func:`solve_pair` (float64, scipy).

    ``solve`` takes prepared graphs and a list of (i, j) pairs and returns values,
    iterations, residuals and converged flags aligned with the pairs.
    """

    name = "cpu"

    def __init__(self, rtol: float = 1e-12, max_iter: int = 10_000) -> None:
        self.rtol = rtol
        self.max_iter = max_iter

    def solve(self, xs, ys, pairs, node_kernel, edge_kernel, progress=None):
        """Solve ``pairs`` ((n, 2) int array or [(i, j), ...]) between ``xs[i]`` and ``ys[j]``."""
        k = len(pairs)
        values = np.empty(k)
        iters = np.empty(k, dtype=np.int64)
        res = np.empty(k)
        conv = np.empty(k, dtype=bool)
        for t, (i, j) in enumerate(np.asarray(pairs, dtype=np.int64).reshape(-1, 2).tolist()):
            sol = solve_pair(xs[i], ys[j], node_kernel, edge_kernel, self.rtol, self.max_iter)
            values[t], iters[t], res[t], conv[t] = sol.value, sol.iterations, sol.residual, sol.converged
            if progress is not None:
                progress(1)
        return values, iters, res, conv
