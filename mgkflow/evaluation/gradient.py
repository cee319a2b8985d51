"""Backend-independent parts of the kernel's derivatives (derivation: docs/gradients.md).

A backend returns, per pair, the plain kernel K = p_xᵀ x and dK/dh for every base-kernel
hyperparameter h (and q); see :class:`mgkflow.backends.base.GradientSolution` for the layout.
What every backend shares lives here (formerly ``mgkflow.gradient``):

* :func:`length0_term`: the walks of length 0, p_xᵀ V_x q_x, and their derivatives, which
  ``lmin=1`` subtracts from K (so backends never need to know about ``lmin``);
* :func:`normalized_gradient`: derivatives of K(G, G') / sqrt(K(G, G) K(G', G')) from those of
  K and of the diagonal;
* :func:`log_space`: dK/d log h = h dK/dh (scikit-learn's θ is log h).
"""

from __future__ import annotations

import numpy as np

from ..kernels import BaseKernel
from ..system import GraphSystem

__all__ = ["length0_term", "normalized_gradient", "log_space"]


def length0_term(
    s1: GraphSystem, s2: GraphSystem, node_kernel: BaseKernel, n_edge: int = 0, wrt_q: bool = False
) -> tuple[float, np.ndarray]:
    """Σ_ii' p_i p'_i' v_ii' q_i q'_i' (the walks of length 0) and its derivatives.

    The derivatives come in the backend layout: node-kernel hyperparameters, ``n_edge`` zeros
    (the edge kernel plays no part in a walk without edges), then q when ``wrt_q`` (a scalar q
    shared by every node: d(q_i q'_i')/dq = 2q).

    Examples
    --------
    >>> import numpy as np
    >>> from mgkflow import Graph
    >>> from mgkflow.kernels import Constant, KroneckerDelta
    >>> from mgkflow.system import prepare_graph
    >>> nk = KroneckerDelta(0.5, "l")
    >>> g = prepare_graph(Graph(np.array([[0, 1], [1, 0]]), node_labels={"l": [0, 1]}), 0, nk, Constant(1.0), q=0.1)
    >>> v, grad = length0_term(g, g, nk, wrt_q=True)  # (2 + 2 * 0.5) q^2; d/dh = 2 q^2; d/dq = 6 q
    >>> round(v, 12), [round(float(x), 12) for x in grad]
    (0.03, [0.02, 0.6])
    """
    n, m = s1.n, s2.n
    x = {k: v[:, None] for k, v in s1.graph.node_labels.items()}
    y = {k: v[None, :] for k, v in s2.graph.node_labels.items()}
    with np.errstate(all="ignore"):
        V = np.broadcast_to(node_kernel(x, y), (n, m))
        grads = node_kernel.gradient(x, y) if node_kernel.hyperparameters else []
    pq = np.outer(s1.p * s1.q, s2.p * s2.q)
    out = [float(np.sum(pq * np.broadcast_to(g, (n, m)))) for g in grads]
    out.extend([0.0] * n_edge)
    if wrt_q:
        q = float(s1.q[0])
        out.append(float(np.sum(np.outer(s1.p, s2.p) * V)) * 2.0 * q)
    return float(np.sum(pq * V)), np.asarray(out, dtype=np.float64)


def normalized_gradient(
    K: np.ndarray, dK: np.ndarray, kx: np.ndarray, dkx: np.ndarray, ky: np.ndarray, dky: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """K̃ = K / sqrt(kx ⊗ ky) and dK̃ = dK / sqrt(kx ⊗ ky) − ½ K̃ (dkx / kx ⊕ dky / ky).

    ``K`` (N, M), ``dK`` (N, M, H); ``kx`` (N,), ``dkx`` (N, H) the diagonal K(G, G) of the rows
    and its derivatives, ``ky``, ``dky`` those of the columns. Each side is divided by its own
    square root before they are multiplied (no product K(G, G) K(G', G') that could overflow).

    Examples
    --------
    >>> import numpy as np
    >>> K = np.array([[4.0, 2.0], [2.0, 1.0]]); dK = K[:, :, None] * 2  # K scales as h^2
    >>> Kn, dKn = normalized_gradient(K, dK, np.diag(K), np.diag(K)[:, None] * 2, np.diag(K), np.diag(K)[:, None] * 2)
    >>> Kn.tolist(), float(abs(dKn).max())
    ([[1.0, 1.0], [1.0, 1.0]], 0.0)
    """
    # sqrt(kx_i) sqrt(ky_j) <= sqrt(max float) squared: never overflows, unlike kx_i ky_j; one
    # product (not two divisions) keeps a symmetric input exactly symmetric
    s = np.sqrt(kx)[:, None] * np.sqrt(ky)[None, :]
    Kn = K / s
    if dK is None:
        return Kn, None
    dKn = dK / s[:, :, None]
    dKn -= 0.5 * Kn[:, :, None] * ((dkx / kx[:, None])[:, None, :] + (dky / ky[:, None])[None, :, :])
    return Kn, dKn


def log_space(dK: np.ndarray, values: np.ndarray) -> np.ndarray:
    """dK/d log h = h dK/dh along the last axis.

    Examples
    --------
    >>> log_space(np.ones((1, 1, 2)), np.array([0.5, 2.0])).tolist()
    [[[0.5, 2.0]]]
    """
    return dK * np.asarray(values, dtype=np.float64)
