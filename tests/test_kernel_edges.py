"""Rough edges of the kernel API found by hand and by fuzzing: each case is a clear mgkflow
error, an exact answer, or a warning where the behaviour is mathematics."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mgkflow import ConvergenceError, Graph, GraphError, MarginalizedGraphKernel
from mgkflow.kernels import Constant, KroneckerDelta, SquareExponential
from mgkflow.mgk import DegenerateKernelWarning

NK = KroneckerDelta(0.4, "l")
EK = SquareExponential(0.8, "e")


def labeled(n: int, seed: int, scale: float = 1.0, title: str | None = None) -> Graph:
    rng = np.random.default_rng(seed)
    upper = np.triu(rng.random((n, n)) < 0.5, 1)
    upper[np.arange(n - 1), np.arange(1, n)] = True
    A = np.where(upper, rng.uniform(0.5, 2.0, (n, n)), 0.0) * scale
    E = np.triu(rng.uniform(0, 2, (n, n)), 1)
    return Graph(A + A.T, node_labels={"l": rng.integers(0, 3, n)}, edge_labels={"e": E + E.T}, title=title)


def kern(**kw) -> MarginalizedGraphKernel:
    return MarginalizedGraphKernel(NK, EK, **{"q": 0.1, "backend": "cpu", **kw})


# ---------------------------------------------------------------------- scale invariance
@pytest.mark.parametrize("c", [1e-150, 1e-80, 1e-20, 3.0, 1e20, 1e100, 1e150])
def test_scaling_all_weights_of_a_graph_leaves_k_unchanged(c):
    X = [labeled(5, 1), labeled(7, 2), labeled(60, 3)]  # the last pair goes through CG
    ref = kern()(X)
    scaled = [labeled(5, 1, c), labeled(7, 2), labeled(60, 3, c)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_allclose(kern()(scaled), ref, rtol=1e-11)


def test_huge_uniform_weights_converge():
    g = labeled(60, 4, 1e300)
    K = kern()([g])
    assert K[0, 0] == pytest.approx(kern()([labeled(60, 4)])[0, 0], rel=1e-11)


# ---------------------------------------------------------------------- tiny q, direct solve
def test_tiny_q_direct_solve_is_accepted_and_right():
    X = [labeled(6, 5), labeled(7, 6)]
    k = kern(q=1e-8, backend="exact")
    K = k(X)
    np.testing.assert_allclose(kern(q=1e-8)(X), K, rtol=1e-8)  # the default CPU engine agrees
    assert k.last_stats.converged.all() and (k.last_stats.iterations == 0).all()
    assert k.last_stats.summary()["direct_solves"] == 4
    # unlabeled graphs without isolated nodes: the closed form n m q^2 / (1 - (1 - q)^2)
    u = [Graph(labeled(6, 5).adjacency), Graph(labeled(7, 6).adjacency)]
    Ku = MarginalizedGraphKernel(q=1e-8, backend="cpu")(u)
    q = 1e-8
    assert Ku[0, 1] == pytest.approx(42 * q * q / (1 - (1 - q) ** 2), rel=1e-7)
    assert np.all(np.isfinite(K)) and np.all(K > 0)


# ---------------------------------------------------------------------- p and q values
def test_huge_p_overflow_is_a_clear_error():
    with pytest.raises(GraphError, match=r"overflow.*start probabilit"):
        kern(p=1e200)([labeled(4, 7)])
    with pytest.raises(GraphError, match=r"overflow.*start probabilit"):
        kern(p=1e200)([labeled(4, 7)], [labeled(5, 8)])


@pytest.mark.parametrize("which", ["p", "q"])
def test_complex_values_from_a_callable_are_an_error(which):
    f = lambda g: np.full(g.n_nodes, 0.1 + 0.01j)  # noqa: E731
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(GraphError, match="complex"):
            kern(**{which: f})([labeled(4, 9)])


def test_non_numeric_values_from_a_callable_are_an_error():
    with pytest.raises(GraphError, match=r"stop probability q returned by the callable must be numeric"):
        kern(q=lambda g: ["a"] * g.n_nodes)([labeled(4, 9)])


# ---------------------------------------------------------------------- parameter validation
@pytest.mark.parametrize(
    "kw, exc, match",
    [
        ({"max_iter": "10"}, TypeError, "max_iter must be an integer"),
        ({"max_iter": math.inf}, ValueError, "max_iter must be a finite integer"),
        ({"max_iter": 2.5}, ValueError, "max_iter must be a finite integer"),
        ({"max_iter": True}, TypeError, "max_iter"),
        ({"q": ["a"]}, TypeError, "stop probability q must be a 1-D numeric vector"),
        ({"q": [[0.1, 0.2], [0.3]]}, TypeError, "stop probability q must be a numeric vector"),
        ({"q": 2**1100}, ValueError, r"stop probability q must lie in \(0, 1\)"),
        ({"q": {"a": 1}}, TypeError, "stop probability q must be a number"),
        ({"p": 2**1100}, ValueError, "start probability p must be non-negative and finite"),
        ({"p": math.inf}, ValueError, "start probability p must be non-negative and finite"),
        ({"gpu_options": "x"}, TypeError, "gpu_options must be a dict"),
        ({"rtol": "1e-9"}, TypeError, "rtol must be a number"),
        ({"q_bounds": (0.5, 0.1)}, ValueError, "q_bounds"),
        ({"q_bounds": "free"}, ValueError, "q_bounds"),
        ({"lmin": 2}, ValueError, "lmin must be 0 or 1"),
        ({"normalize": "yes"}, TypeError, "normalize must be True or False"),
    ],
)
def test_parameter_validation_names_the_parameter(kw, exc, match):
    with pytest.raises(exc, match=match):
        MarginalizedGraphKernel(**{"backend": "auto", **kw})


@pytest.mark.parametrize("bad", [None, 3, 2.5])
def test_non_sequence_inputs_name_the_argument(bad):
    with pytest.raises(TypeError, match="X must be a sequence of mgkflow.Graph"):
        kern()(bad)
    with pytest.raises(TypeError, match="Y must be a sequence of mgkflow.Graph"):
        kern()([labeled(3, 1)], bad if bad is not None else 7)


def test_set_params_validates_too():
    k = kern()
    with pytest.raises(TypeError, match="max_iter"):
        k.set_params(max_iter="10")


# ---------------------------------------------------------------------- warnings
def test_normalized_label_free_kernel_warns_that_it_is_constant():
    X = [Graph(labeled(n, n).adjacency) for n in (3, 5, 8)]
    k = MarginalizedGraphKernel(q=0.1, backend="cpu")
    with pytest.warns(DegenerateKernelWarning, match="exactly 1 between any two graphs"):
        Kn = k(X, normalize=True)
    np.testing.assert_allclose(Kn, 1.0, rtol=1e-12)  # the warning tells the truth
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kern()([labeled(3, 1), labeled(4, 2)], normalize=True)  # labeled: no warning
        k(X)  # raw K depends on the sizes: no warning


def test_no_numpy_or_scipy_warnings_leak():
    cases = [
        (kern(q=1e-8), [labeled(8, 1), labeled(9, 2)]),
        (kern(p=1e-200), [labeled(5, 3)]),  # K underflows to 0: raw values are fine
        (
            MarginalizedGraphKernel(NK, SquareExponential(1e-6, "e"), q=0.1, backend="cpu"),
            [labeled(5, 4, 1e250), labeled(6, 5, 1e-250)],
        ),
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for k, X in cases:
            K = k(X)
            assert np.all(np.isfinite(K))
            K, dK = k(X, eval_gradient=True)
            assert np.all(np.isfinite(dK))


def test_convergence_error_advice_mentions_weight_spread_not_scale():
    g = labeled(60, 6)
    k = kern(max_iter=2)
    with pytest.raises(ConvergenceError, match="scale of all weights of a graph does not matter"):
        k([g])


# ---------------------------------------------------------------------- property-based fuzzing
def _fuzz_graph(rng: np.random.Generator) -> Graph:
    n = int(rng.integers(1, 7))
    upper = np.triu(rng.random((n, n)) < rng.uniform(0, 1), 1)
    scale = 10.0 ** rng.uniform(-300, 300) if rng.random() < 0.3 else 1.0
    spread = 10.0 ** rng.uniform(-3, 3, (n, n)) if rng.random() < 0.3 else rng.uniform(0.5, 2, (n, n))
    A = np.where(upper, spread * scale, 0.0)
    E = np.triu(rng.uniform(0, 3, (n, n)), 1)
    return Graph(A + A.T, node_labels={"l": rng.integers(0, 3, n), "x": rng.normal(size=n)}, edge_labels={"e": E + E.T})


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1))
def test_fuzz_kernel_api(seed):
    """Random graphs (weights from 1e-300 to 1e300), kernels, q, p, lmin, normalize, gradients:
    a finite, symmetric, positive semi-definite result or an mgkflow error, never a warning."""
    rng = np.random.default_rng(seed)
    X = [_fuzz_graph(rng) for _ in range(int(rng.integers(1, 4)))]
    nk = [Constant(1.0), KroneckerDelta(float(rng.uniform(0.01, 1)), "l"), SquareExponential(1.0, "x") * NK][
        int(rng.integers(0, 3))
    ]
    ek = [Constant(float(rng.choice([0.0, 0.5, 1.0]))), SquareExponential(float(10 ** rng.uniform(-1, 2)), "e")][
        int(rng.integers(0, 2))
    ]
    q = float(10 ** rng.uniform(-6, -0.01))
    p = 1.0 if rng.random() < 0.6 else float(10 ** rng.uniform(-200, 200))
    normalize, lmin, grad = bool(rng.random() < 0.5), int(rng.random() < 0.3), bool(rng.random() < 0.4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.simplefilter("ignore", DegenerateKernelWarning)
        k = MarginalizedGraphKernel(nk, ek, q=q, p=p, normalize=normalize, lmin=lmin, backend="cpu")
        try:
            out = k(X, eval_gradient=grad)
        except GraphError as exc:  # K(G, G) = 0 with lmin=1 or p overflow: named, clear
            assert "cannot be normalized" in str(exc) or "overflow" in str(exc)
            return
    K = out[0] if grad else out
    assert np.all(np.isfinite(K)) and np.array_equal(K, K.T)
    if grad:
        assert np.all(np.isfinite(out[1]))
    ev = np.linalg.eigvalsh(K)
    assert ev.min() >= -1e-8 * max(abs(ev).max(), 1e-300)
    if normalize:
        np.testing.assert_allclose(np.diag(K), 1.0, rtol=1e-12)


def test_scalar_p_scales_k_exactly_and_cancels_when_normalized():
    X = [labeled(4, 11), labeled(6, 12)]
    ref = kern()(X)
    for p in (1e-200, 1e-100, 3.0, 1e100):
        np.testing.assert_allclose(kern(p=p)(X, normalize=True), kern()(X, normalize=True), rtol=1e-14)
    np.testing.assert_allclose(kern(p=1e-100)(X), ref * 1e-200, rtol=1e-13)
    np.testing.assert_allclose(kern(p=1e100)(X), ref * 1e200, rtol=1e-13)
    K, dK = kern(p=1e-100)(X, eval_gradient=True)
    np.testing.assert_allclose(dK, kern()(X, eval_gradient=True)[1] * 1e-200, rtol=1e-13)
    # a vector p of tiny values: scaled inside the solver, no underflow
    tiny = kern(p=lambda g: np.full(g.n_nodes, 1e-160))
    np.testing.assert_allclose(tiny(X, normalize=True), kern()(X, normalize=True), rtol=1e-12)
    with pytest.raises(GraphError, match="cannot be normalized"):
        kern(p=0.0)(X, normalize=True)


def test_lmin1_noise_is_zero_for_graphs_without_walks():
    bare = Graph(np.zeros((3, 3)), node_labels={"l": [0, 1, 0]}, edge_labels={"e": np.zeros((3, 3))})
    k = kern(lmin=1, q=0.9)
    K, dK = k([bare, labeled(4, 13)], eval_gradient=True)
    assert K[0, 0] == 0.0 and K[0, 1] == 0.0 and K[1, 1] > 0
    assert np.all(dK[0] == 0.0)
    zero_edges = MarginalizedGraphKernel(NK, Constant(0.0), q=0.3, lmin=1, backend="cpu")
    assert np.all(zero_edges([labeled(4, 14), labeled(5, 15)]) == 0.0)


def test_q_below_the_float64_floor_is_an_error():
    with pytest.raises(ValueError, match=r"q = 1e-12 is below 1e-10"):
        kern(q=1e-12)
    with pytest.raises(GraphError, match=r"graph 0: stop probability q = 1e-12 is below 1e-10"):
        kern(q=lambda g: np.full(g.n_nodes, 1e-12))([labeled(3, 1)])


def test_node_kernel_underflow_is_named():
    g = Graph(np.array([[0, 1.0], [1.0, 0]]), node_labels={"x": [0.0, 100.0]})
    k = MarginalizedGraphKernel(SquareExponential(1e-3, "x"), q=0.1, backend="cpu")
    with pytest.raises(GraphError, match="underflows float64"):
        k([g])
