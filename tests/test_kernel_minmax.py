"""The MinMax base kernel: values, dk/dh, the C expressions, and the graph kernel built on it."""

from __future__ import annotations

import pickle
import shutil
import subprocess

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from mgkflow import Graph, MarginalizedGraphKernel
from mgkflow.errors import GraphError, KernelRangeError, ParameterError, ParameterTypeError
from mgkflow.kernels import (
    Constant,
    CosineSimilarity,
    KroneckerDelta,
    MinMax,
    SquareExponential,
    VectorSquareExponential,
    c_fields,
    check_edge_kernel,
    check_node_kernel,
    vector_dims,
)

_RNG = np.random.default_rng(11)
A = _RNG.integers(0, 4, size=(7, 4)).astype(np.float64)
B = _RNG.integers(0, 4, size=(7, 4)).astype(np.float64)
A[0] = B[0] = 0.0  # two zero vectors: similarity 1
A[1] = B[1]  # equal vectors: similarity 1
A[2], B[2] = 0.0, [1.0, 0.0, 2.0, 0.0]  # a zero vector against a non-zero one: h / (h + 3)
A[6] = [0.5, 1.25, 0.0, 3.0]  # non-integer entries are fine
XA, XB = {"nb": A}, {"nb": B}


def minmax(a: np.ndarray, b: np.ndarray, h: float) -> np.ndarray:
    return (h + np.minimum(a, b).sum(axis=-1)) / (h + np.maximum(a, b).sum(axis=-1))


@pytest.mark.parametrize("h", [1e-2, 0.3, 1.0, 7.5, 100.0])
def test_values_match_the_formula(h):
    k = MinMax(h, "nb", dim=4)
    got = k(XA, XB)
    np.testing.assert_allclose(got, minmax(A, B, h), rtol=1e-15)
    assert got[0] == 1.0 and got[1] == 1.0
    assert got[2] == pytest.approx(h / (h + 3.0), rel=1e-15)
    assert np.all((got > 0) & (got <= 1))
    # the node-pair matrix as the CPU backend asks for it: (n, 1, d) against (1, m, d)
    M = k({"nb": A[:, None]}, {"nb": B[None, :]})
    np.testing.assert_allclose(M, minmax(A[:, None, :], B[None, :, :], h), rtol=1e-15)
    # integer count arrays give the same values
    np.testing.assert_allclose(k({"nb": A[:5].astype(np.int64)}, {"nb": B[:5].astype(np.int64)}), got[:5])


def test_range_hyperparameters_and_repr():
    k = MinMax(0.5, "nb", dim=4)
    assert str(k.range) == "(0, 1]"
    assert check_node_kernel(k) is k and check_edge_kernel(k) is k
    (hp,) = k.hyperparameters
    assert (hp.name, hp.value, hp.bounds, hp.fixed) == ("h", 0.5, (1e-2, 1e2), False)
    assert MinMax(0.5, "nb", dim=4, h_bounds="fixed").hyperparameters[0].fixed
    assert k.device_values() == [0.5] and k.n_device_values == 1
    assert repr(k) == "MinMax(0.5, 'nb', dim=4)"
    other = k.with_values([2.0])
    assert isinstance(other, MinMax) and other.h == 2.0 and other.h_bounds == k.h_bounds and other.dim == 4
    assert other.structure == k.structure
    assert vector_dims(KroneckerDelta(0.5, "el") * k) == {"nb": 4}
    assert c_fields(KroneckerDelta(0.5, "el") * k) == ("el", "nb[0]", "nb[1]", "nb[2]", "nb[3]")
    with pytest.raises(ParameterError, match="dimensions 4 and 3"):
        vector_dims(k * CosineSimilarity("nb", dim=3))
    with pytest.raises(ParameterError, match="both as a vector"):
        vector_dims(k * SquareExponential(1.0, "nb"))
    back = pickle.loads(pickle.dumps(k))
    np.testing.assert_array_equal(back(XA, XB), k(XA, XB))


@pytest.mark.parametrize("h", [1e-2, 0.3, 1.0, 7.5, 100.0])
def test_gradient_matches_central_differences(h):
    k = MinMax(h, "nb", dim=4)
    (g,) = k.gradient(XA, XB)
    s_max, s_min = np.maximum(A, B).sum(axis=1), np.minimum(A, B).sum(axis=1)
    np.testing.assert_allclose(g, (s_max - s_min) / (h + s_max) ** 2, rtol=1e-14)
    eps = 1e-5 * h
    fd = (k.with_values([h + eps])(XA, XB) - k.with_values([h - eps])(XA, XB)) / (2 * eps)
    assert np.abs(g - fd).max() / np.abs(g).max() <= 1e-6
    assert g[0] == 0.0 and g[1] == 0.0  # k = 1 whatever h
    # inside products and sums
    prod = 0.5 * Constant(1.0) + 0.5 * KroneckerDelta(0.3, "el") * k
    x, y = {**XA, "el": np.arange(7) % 2}, {**XB, "el": np.arange(7) % 3}
    grads = prod.gradient(x, y)
    values = [hp.value for hp in prod.hyperparameters]
    i = [hp.name for hp in prod.hyperparameters].index("1.2.h")
    up, dn = list(values), list(values)
    up[i] += eps
    dn[i] -= eps
    fd = (prod.with_values(up)(x, y) - prod.with_values(dn)(x, y)) / (2 * eps)
    assert np.abs(grads[i] - fd).max() / np.abs(grads[i]).max() <= 1e-6


@pytest.mark.parametrize(
    "build, error, match",
    [
        (lambda: MinMax(0.0, "nb", dim=2), KernelRangeError, r"MinMax\(h, 'nb'\).*h=0"),
        (lambda: MinMax(-1.0, "nb", dim=2), KernelRangeError, r"h=-1"),
        (lambda: MinMax(1e7, "nb", dim=2), KernelRangeError, r"h <= 1e\+06"),
        (lambda: MinMax(float("nan"), "nb", dim=2), KernelRangeError, "finite"),
        (lambda: MinMax("1", "nb", dim=2), ParameterTypeError, "real number"),
        (lambda: MinMax(1.0, "", dim=2), ParameterTypeError, "field"),
        (lambda: MinMax(1.0, "nb", dim=0), ParameterTypeError, "dim"),
        (lambda: MinMax(1.0, "nb", dim=2.0), ParameterTypeError, "dim"),
        (lambda: MinMax(1.0, "nb", dim=2, h_bounds=(2.0, 1.0)), ParameterError, "bounds"),
        (lambda: MinMax(1.0, "nb", dim=2, h_bounds="free"), ParameterError, "bounds"),
    ],
)
def test_bad_arguments(build, error, match):
    with pytest.raises(error, match=match):
        build()


def test_bad_label_fields_are_graph_errors():
    k = MinMax(1.0, "v", dim=2)
    good = {"v": np.array([[1.0, 2.0], [0.5, 0.0]])}
    with pytest.raises(GraphError, match=r"'v'.*negative"):
        k({"v": np.array([[1.0, -0.5], [0.0, 0.0]])}, good)
    with pytest.raises(GraphError, match=r"'v'.*negative"):
        k.gradient(good, {"v": np.array([[-1.0, 0.5], [0.0, 0.0]])})
    with pytest.raises(GraphError, match=r"'v'.*2 components"):
        k({"v": np.ones((2, 3))}, good)
    with pytest.raises(GraphError, match=r"'v'.*NaN"):
        k({"v": np.array([[np.nan, 1.0], [0.0, 0.0]])}, good)
    with pytest.raises(GraphError, match=r"'v'.*numeric"):
        k({"v": [["a", "b"], ["c", "d"]]}, good)


# ---------------------------------------------------------------------- properties
_counts = hnp.arrays(np.float64, (5,), elements=st.integers(0, 50).map(float))
_reals = hnp.arrays(np.float64, (5,), elements=st.floats(0.0, 1e6, allow_nan=False, allow_infinity=False))


@settings(max_examples=200, deadline=None)
@given(a=st.one_of(_counts, _reals), b=st.one_of(_counts, _reals), h=st.floats(1e-6, 1e6))
def test_properties(a, b, h):
    k = MinMax(h, "v", dim=5)
    x, y = {"v": a}, {"v": b}
    kab = float(k(x, y))
    assert 0.0 < kab <= 1.0
    assert kab == float(k(y, x))
    assert float(k(x, x)) == 1.0
    assert float(k.gradient(x, x)[0]) == 0.0 and float(k.gradient(x, y)[0]) >= 0.0


def test_positive_semi_definite_gram():
    X = np.vstack([A, B, _RNG.poisson(2.0, size=(20, 4))]).astype(np.float64)
    for h in (1e-2, 1.0, 50.0):
        G = MinMax(h, "v", dim=4)({"v": X[:, None]}, {"v": X[None, :]})
        assert np.allclose(G, G.T) and np.allclose(np.diag(G), 1.0)
        assert np.linalg.eigvalsh(G).min() > -1e-12


# ---------------------------------------------------------------------- the C expressions
@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not available")
def test_c_expr_and_c_grad_match_numpy(tmp_path):
    """The generated C (float32) agrees with numpy, with run-time and with literal values."""
    kernels = [
        MinMax(1.0, "nb", dim=4),
        MinMax(0.05, "nb", dim=4),
        MinMax(30.0, "nb", dim=4),
        KroneckerDelta(0.4, "el") * MinMax(0.7, "nb", dim=4),
        0.5 * Constant(1.0) + 0.5 * MinMax(2.0, "nb", dim=4) * VectorSquareExponential(3.0, "nb", dim=4),
    ]
    el_a, el_b = np.arange(7) % 2, np.arange(7) % 3
    x, y = {"nb": A, "el": el_a}, {"nb": B, "el": el_b}
    n = len(A)

    def field(prefix):
        def expr(f):
            name, _, rest = f.partition("[")
            return f"{prefix}_{name}[i]" + (f"[{rest}" if rest else "")

        return expr

    lines = ["#include <math.h>", "#include <stdio.h>", "#define mgk_ex2 exp2f", "int main(void) {"]
    for side, nb, el in (("a", A, el_a), ("b", B, el_b)):
        rows = ", ".join("{" + ", ".join(f"{float(v)!r}f" for v in r) + "}" for r in nb)
        lines.append(f"  float {side}_nb[{n}][4] = {{{rows}}};")
        lines.append(f"  int {side}_el[{n}] = {{{', '.join(map(str, el))}}};")
    for t, k in enumerate(kernels):
        lines.append(f"  float P{t}[] = {{{', '.join(f'{v!r}f' for v in k.device_values())}}};")
    lines.append(f"  for (int i = 0; i < {n}; ++i) {{")
    for t, k in enumerate(kernels):
        par = lambda j, t=t: f"P{t}[{j}]"  # noqa: E731
        for expr in [k.c_expr(field("a"), field("b"), par), k.c_expr(field("a"), field("b"))] + k.c_grad(
            field("a"), field("b"), par
        ):
            lines.append(f'    printf("%.9g\\n", (double)({expr}));')
    lines += ["  }", "  return 0;", "}"]
    src = tmp_path / "k.c"
    src.write_text("\n".join(lines) + "\n")
    exe = tmp_path / "k"
    subprocess.run(["gcc", "-std=c99", "-Wall", "-Werror", "-o", str(exe), str(src), "-lm"], check=True)
    out = np.asarray(subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.split(), float)
    got = out.reshape(n, -1).T
    row = 0
    for k in kernels:
        value = np.broadcast_to(k(x, y), (n,))
        for e in [value, value] + [np.broadcast_to(g, (n,)) for g in k.gradient(x, y)]:
            np.testing.assert_allclose(got[row], e, rtol=2e-6, atol=1e-7, err_msg=repr(k))
            row += 1
    assert row == got.shape[0]


def test_c_expressions_ask_for_every_component():
    k = MinMax(1.0, "nb", dim=3)
    asked: set[str] = set()
    k.c_expr(lambda f: asked.add(f) or "a", lambda f: asked.add(f) or "b")
    assert asked == set(c_fields(k)) == {"nb[0]", "nb[1]", "nb[2]"}
    assert k.structure == MinMax(5.0, "nb", dim=3).structure != MinMax(5.0, "nb", dim=2).structure
    assert "$0" in k.structure and len(k.c_grad(str, str)) == 1


# ---------------------------------------------------------------------- the graph kernel
def _graphs() -> list[Graph]:
    """Small molecules-like graphs with a neighbour-count node field (numbers of C, N, O neighbours)."""
    rng = np.random.default_rng(4)
    out = []
    for t, n in enumerate((4, 5, 7)):
        A = np.zeros((n, n))
        for i in range(1, n):  # a random tree plus one ring bond
            A[i, rng.integers(0, i)] = 1.0
        A[n - 1, 0] = 1.0 if A[n - 1, 0] == 0 and n > 3 else A[n - 1, 0]
        A = np.maximum(A, A.T)
        el = rng.integers(0, 3, n)
        nb = np.stack([A[:, el == e].sum(axis=1) for e in range(3)], axis=1).astype(np.int64)
        E = np.triu(rng.uniform(1.0, 2.0, (n, n)), 1) * (A > 0)
        out.append(Graph(A, node_labels={"el": el, "nb": nb}, edge_labels={"len": E + E.T}, title=f"g{t}"))
    return out


def _kernel(backend: str, **kw) -> MarginalizedGraphKernel:
    nk = KroneckerDelta(0.4, "el") * MinMax(0.8, "nb", dim=3)
    return MarginalizedGraphKernel(nk, SquareExponential(1.2, "len"), q=0.15, backend=backend, **kw)


def test_cpu_backends_agree():
    X = _graphs()
    ref = _kernel("exact")(X)
    K = _kernel("cpu")(X)
    assert np.all(np.isfinite(ref)) and np.all(ref > 0)
    np.testing.assert_allclose(K, ref, rtol=1e-9)
    Kn = _kernel("cpu")(X, normalize=True)
    np.testing.assert_allclose(np.diag(Kn), 1.0, rtol=1e-12)


def test_minmax_as_an_edge_kernel_on_both_cpu_backends():
    X = _graphs()
    ek = MinMax(0.5, "nbe", dim=2)
    Y = []
    for g in X:
        n = g.n_nodes
        A = g.adjacency.toarray()
        v = np.zeros((n, n, 2))
        v[..., 0] = (A > 0) * (np.add.outer(np.arange(n), np.arange(n)) % 3)
        v[..., 1] = (A > 0) * 1.0
        Y.append(Graph(A, node_labels={"el": g.node_labels["el"]}, edge_labels={"nbe": v}, title=g.title))
    ref = MarginalizedGraphKernel(KroneckerDelta(0.4, "el"), ek, q=0.15, backend="exact")(Y)
    K = MarginalizedGraphKernel(KroneckerDelta(0.4, "el"), ek, q=0.15, backend="cpu")(Y)
    np.testing.assert_allclose(K, ref, rtol=1e-9)


def _finite_difference(kern: MarginalizedGraphKernel, X, step: float = 1e-5) -> np.ndarray:
    theta = kern.theta
    out = []
    for k in range(theta.size):
        e = np.zeros_like(theta)
        e[k] = step
        out.append((kern.clone_with_theta(theta + e)(X) - kern.clone_with_theta(theta - e)(X)) / (2 * step))
    return np.stack(out, axis=-1)


@pytest.mark.parametrize("backend", ["cpu", "exact"])
def test_theta_gradient_matches_central_differences(backend):
    X = _graphs()
    kern = _kernel(backend)
    names = [h.name for h in kern.hyperparameters if not h.fixed]
    assert "node_kernel__1.h" in names
    K, dK = kern(X, eval_gradient=True)
    np.testing.assert_allclose(K, kern(X), rtol=1e-13)
    fd = _finite_difference(kern, X)
    for k, name in enumerate(names):
        scale = np.abs(dK[:, :, k]).max()
        assert scale > 0, name
        err = np.abs(dK[:, :, k] - fd[:, :, k]).max() / scale
        assert err <= 1e-6, f"{name}: normwise error {err:.2e}"
