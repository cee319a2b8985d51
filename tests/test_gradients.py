"""Analytic dK/dθ (CPU, float64) against central finite differences of K (docs/gradients.md).

θ is scikit-learn's: the logarithms of the free hyperparameters. For every hyperparameter k the
error is measured normwise, max_ij |dK_ij − FD_ij| / max_ij |dK_ij|, and must be <= 1e-6.
"""

from __future__ import annotations

import numpy as np
import pytest

from mgkflow import Graph, MarginalizedGraphKernel, datasets
from mgkflow.backends.exact import DIRECT_MAX_UNKNOWNS, solve_pair_gradient
from mgkflow.evaluation.gradient import length0_term
from mgkflow.kernels import Constant, KroneckerDelta, SquareExponential
from mgkflow.system import prepare_graph

STEP = 1e-5  # in log space


def finite_difference(kern: MarginalizedGraphKernel, X) -> np.ndarray:
    theta = kern.theta
    out = []
    for k in range(theta.size):
        e = np.zeros_like(theta)
        e[k] = STEP
        hi = kern.clone_with_theta(theta + e)(X)
        lo = kern.clone_with_theta(theta - e)(X)
        out.append((hi - lo) / (2 * STEP))
    return np.stack(out, axis=-1)


def assert_gradient(kern: MarginalizedGraphKernel, X, tol: float = 1e-6) -> np.ndarray:
    K, dK = kern(X, eval_gradient=True)
    np.testing.assert_allclose(K, kern(X), rtol=1e-13, atol=0)
    assert dK.shape == (len(X), len(X), kern.n_dims)
    np.testing.assert_array_equal(dK, dK.transpose(1, 0, 2))
    fd = finite_difference(kern, X)
    names = [h.name for h in kern.hyperparameters if not h.fixed]
    for k, name in enumerate(names):
        scale = np.abs(dK[:, :, k]).max()
        assert scale > 0, f"{name}: dK is zero"
        err = np.abs(dK[:, :, k] - fd[:, :, k]).max() / scale
        assert err <= tol, f"{name}: normwise error {err:.2e}"
    return dK


def _weighted_with_isolated() -> list[Graph]:
    rng = np.random.default_rng(5)
    out = []
    for n in (5, 6):
        A = np.triu(rng.uniform(0.3, 3.0, (n, n)) * (rng.random((n, n)) < 0.6), 1)
        A[:, 0] = A[0, :] = 0.0  # node 0 is isolated
        A[1, 2] = max(A[1, 2], 0.7)  # at least one edge
        A = A + A.T
        E = np.triu(rng.uniform(0.0, 2.0, (n, n)), 1)
        out.append(Graph(A, node_labels={"l": rng.integers(0, 2, n)}, edge_labels={"e": E + E.T}, title=f"w{n}"))
    return out


def test_nws_labeled_default_kernels():
    X = datasets.nws(n_graphs=3, n=14, labeled=True)
    nk, ek = datasets.default_kernels("nws")
    kern = MarginalizedGraphKernel(nk, ek, q=0.05, backend="cpu")
    assert [h.name for h in kern.hyperparameters if not h.fixed] == [
        "node_kernel__h",
        "edge_kernel__length_scale",
        "q",
    ]
    assert_gradient(kern, X)


def test_ba_labeled_products_and_sums():
    X = datasets.ba(n_graphs=3, n=12, m=2, labeled=True)
    nk = KroneckerDelta(0.4, "label") * Constant(0.9, c_bounds=(0.1, 1.0))
    ek = Constant(0.4, c_bounds=(0.01, 1.0)) * SquareExponential(1.3, "length") + Constant(
        0.5, c_bounds=(0.01, 1.0)
    ) * SquareExponential(0.4, "length")
    kern = MarginalizedGraphKernel(nk, ek, q=0.2, backend="cpu")
    assert kern.n_dims == 2 + 4 + 1
    assert_gradient(kern, X)


def test_drugs():
    X = datasets.drugs(4)
    nk = KroneckerDelta(0.5, "element") * KroneckerDelta(0.7, "aromatic")
    ek = KroneckerDelta(0.5, "bond_order") * KroneckerDelta(0.8, "in_ring")
    assert_gradient(MarginalizedGraphKernel(nk, ek, q=0.1, backend="cpu"), X)


@pytest.mark.parametrize("normalize", [False, True])
@pytest.mark.parametrize("lmin", [0, 1])
def test_weighted_graph_with_isolated_node(normalize, lmin):
    X = _weighted_with_isolated()
    kern = MarginalizedGraphKernel(
        KroneckerDelta(0.3, "l"), SquareExponential(0.8, "e"), q=0.15, backend="cpu", normalize=normalize, lmin=lmin
    )
    dK = assert_gradient(kern, X)
    if normalize:
        np.testing.assert_allclose(np.diagonal(dK, axis1=0, axis2=1), 0.0, atol=1e-14)


def test_gradient_through_cg():
    """A product graph beyond the direct solver's size: x and y come from CG."""
    X = datasets.nws(n_graphs=2, n=55, labeled=True)
    assert X[0].n_nodes * X[1].n_nodes > DIRECT_MAX_UNKNOWNS
    nk, ek = datasets.default_kernels("nws")
    kern = MarginalizedGraphKernel(nk, ek, q=0.1, backend="cpu")
    assert_gradient(kern, X)
    assert kern.last_stats is not None


def test_q_from_a_field_is_not_a_hyperparameter():
    X = _weighted_with_isolated()
    kern = MarginalizedGraphKernel(KroneckerDelta(0.3, "l"), q=lambda g: np.full(g.n_nodes, 0.2), backend="cpu")
    assert [h.name for h in kern.hyperparameters if not h.fixed] == ["node_kernel__h"]
    assert_gradient(kern, X)
    kern = MarginalizedGraphKernel(KroneckerDelta(0.3, "l"), q=0.2, q_bounds="fixed", backend="cpu")
    assert kern.n_dims == 1
    assert_gradient(kern, X)


def test_pair_gradient_matches_length0_series_term():
    """lmin = 1 removes exactly the length-0 walks p_xᵀ V_x q_x (checked against the series)."""
    X = _weighted_with_isolated()
    nk, ek = KroneckerDelta(0.3, "l"), SquareExponential(0.8, "e")
    k0 = MarginalizedGraphKernel(nk, ek, q=0.15, backend="cpu")(X)
    k1 = MarginalizedGraphKernel(nk, ek, q=0.15, backend="cpu", lmin=1)(X)
    s = [prepare_graph(g, i, nk, ek, q=0.15) for i, g in enumerate(X)]
    for i in range(2):
        for j in range(2):
            v0, _ = length0_term(s[i], s[j], nk)
            # the first term of the walk series Σ_k p_xᵀ V (T V)^k q_x is p_xᵀ V q_x
            ref = float(
                np.sum(
                    np.outer(s[i].p * s[i].q, s[j].p * s[j].q)
                    * nk({"l": X[i].node_labels["l"][:, None]}, {"l": X[j].node_labels["l"][None, :]})
                )
            )
            assert v0 == pytest.approx(ref, rel=1e-15)
            assert k1[i, j] == pytest.approx(k0[i, j] - ref, rel=1e-12)
    # the isolated node contributes only walks of length 0: removing all edges leaves K = 0
    bare = [Graph(np.zeros((3, 3)), node_labels={"l": [0, 1, 0]})]
    assert MarginalizedGraphKernel(nk, q=0.15, backend="cpu", lmin=1)(bare)[0, 0] == pytest.approx(0, abs=1e-17)


def test_backend_without_solve_gradient_falls_back_to_the_oracle():
    X = _weighted_with_isolated()
    kern = MarginalizedGraphKernel(KroneckerDelta(0.3, "l"), SquareExponential(0.8, "e"), q=0.15, backend="exact")
    K, dK = kern(X, eval_gradient=True)

    class ValuesOnly:
        name = "values-only"

        def __init__(self, inner):
            self.inner = inner
            self.calls = 0

        def solve(self, *args):
            self.calls += 1
            return self.inner.solve(*args)

    from mgkflow.backends.exact import ExactBackend

    vo = ValuesOnly(ExactBackend())
    kern2 = MarginalizedGraphKernel(KroneckerDelta(0.3, "l"), SquareExponential(0.8, "e"), q=0.15, backend="cpu")
    kern2._backend_obj = vo
    K2 = kern2(X)
    assert vo.calls == 1
    np.testing.assert_array_equal(K, K2)
    K3, dK3 = kern2(X, eval_gradient=True)
    np.testing.assert_array_equal(dK, dK3)


def test_solve_pair_gradient_layout_includes_fixed_hyperparameters():
    g = _weighted_with_isolated()[1]
    nk = KroneckerDelta(0.3, "l") * Constant(1.0)  # Constant's c is fixed by default
    ek = SquareExponential(0.8, "e")
    s = prepare_graph(g, 0, nk, ek, q=0.15)
    r = solve_pair_gradient(s, s, nk, ek, wrt_q=True)
    assert r.gradient.shape == (len(nk.hyperparameters) + len(ek.hyperparameters) + 1,)
    # K is linear in the node kernel's constant factor c only through V: dK/dc = dK/dh * h / c ... checked
    # against a finite difference in linear space
    eps = 1e-6
    up = nk.with_values([0.3, 1.0 - eps])
    lo = nk.with_values([0.3, 1.0 - 2 * eps])
    from mgkflow.backends.exact import solve_pair

    fd = (solve_pair(s, s, up, ek).value - solve_pair(s, s, lo, ek).value) / eps
    assert r.gradient[1] == pytest.approx(fd, rel=1e-5)
