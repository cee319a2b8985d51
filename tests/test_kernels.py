"""Base kernels: numpy values, composition, range checks and the C expressions."""

from __future__ import annotations

import math
import shutil
import subprocess

import numpy as np
import pytest

from mgkflow import KernelRangeError, MarginalizedGraphKernel
from mgkflow.errors import GraphError
from mgkflow.kernels import (
    Constant,
    CosineSimilarity,
    KroneckerDelta,
    MinMax,
    Product,
    RationalQuadratic,
    SquareExponential,
    Sum,
    VectorSquareExponential,
    c_fields,
    check_edge_kernel,
    check_node_kernel,
    tensor_product,
    vector_component,
    vector_dims,
)

INT_A = np.array([0, 1, 2, 2, 5])
INT_B = np.array([0, 2, 2, 1, 5])
FLT_A = np.array([0.0, 1.0, -0.5, 2.25, 3.0])
FLT_B = np.array([0.0, 2.0, 0.5, 2.0, -1.0])
XA = {"label": INT_A, "charge": INT_A % 2, "length": FLT_A}
XB = {"label": INT_B, "charge": INT_B % 2, "length": FLT_B}


def _se(a, b, ls):
    return np.exp(-((a - b) ** 2) / (2 * ls**2))


# ---------------------------------------------------------------------- values
def test_constant():
    np.testing.assert_array_equal(Constant(0.3)(XA, XB), 0.3)
    assert Constant().c == 1.0
    assert Constant(0.0).range.lo == 0.0
    assert Constant(1.0).fields == ()


def test_kronecker_delta_values():
    k = KroneckerDelta(0.25, "label")
    np.testing.assert_array_equal(k(XA, XB), [1.0, 0.25, 1.0, 0.25, 1.0])
    assert k.fields == ("label",)
    # broadcasting gives the full node-pair matrix
    M = k({"label": INT_A[:, None]}, {"label": INT_B[None, :]})
    np.testing.assert_array_equal(M, np.where(INT_A[:, None] == INT_B[None, :], 1.0, 0.25))
    # float labels compare exactly
    np.testing.assert_array_equal(KroneckerDelta(0.0, "length")(XA, XB), [1, 0, 0, 0, 0])


@pytest.mark.parametrize("ls", [0.5, 1.0, 3.0])
def test_square_exponential_values(ls):
    k = SquareExponential(ls, "length")
    np.testing.assert_allclose(k(XA, XB), _se(FLT_A, FLT_B, ls), rtol=1e-15)
    # on integer labels too
    np.testing.assert_allclose(SquareExponential(ls, "label")(XA, XB), _se(INT_A, INT_B, ls), rtol=1e-15)
    assert math.isclose(
        float(k({"length": np.array(1.0)}, {"length": np.array(2.0)})[()]), math.exp(-0.5 / ls**2)
    )


def test_product_sum_and_scalar_multiples():
    kd = KroneckerDelta(0.5, "label")
    se = SquareExponential(2.0, "length")
    kc = KroneckerDelta(0.8, "charge")
    p = kd * se * kc
    assert isinstance(p, Product) and len(p.kernels) == 3  # flattened
    assert p.fields == ("label", "length", "charge")
    expect = (
        np.where(INT_A == INT_B, 1, 0.5) * _se(FLT_A, FLT_B, 2.0) * np.where(INT_A % 2 == INT_B % 2, 1, 0.8)
    )
    np.testing.assert_allclose(p(XA, XB), expect, rtol=1e-15)
    np.testing.assert_allclose(tensor_product(kd, se, kc)(XA, XB), expect, rtol=1e-15)

    half = 0.5 * kd
    np.testing.assert_allclose(half(XA, XB), 0.5 * kd(XA, XB))
    np.testing.assert_allclose((kd * 0.25)(XA, XB), 0.25 * kd(XA, XB))

    s = 0.5 * kd + 0.5 * se
    assert isinstance(s, Sum)
    assert s.fields == ("label", "length")
    np.testing.assert_allclose(s(XA, XB), 0.5 * kd(XA, XB) + 0.5 * se(XA, XB), rtol=1e-15)
    s3 = Sum(0.25 * kd, 0.25 * se) + 0.5 * kc
    assert len(s3.kernels) == 3


def test_ranges():
    assert (KroneckerDelta(0.3, "a").range.lo, KroneckerDelta(0.3, "a").range.hi) == (0.3, 1.0)
    r = SquareExponential(1.0, "a").range
    assert (r.lo, r.hi, r.lo_open) == (0.0, 1.0, True)
    r = (KroneckerDelta(0.5, "a") * KroneckerDelta(0.4, "b")).range
    assert (r.lo, r.hi) == (0.2, 1.0)
    r = (0.5 * KroneckerDelta(0.5, "a") + 0.5 * SquareExponential(1.0, "b")).range
    assert (r.lo, r.hi) == (0.25, 1.0)
    assert str(SquareExponential(1.0, "a").range) == "(0, 1]"


# ---------------------------------------------------------------------- range checks
@pytest.mark.parametrize(
    "build, match",
    [
        (lambda: KroneckerDelta(1.5, "x"), r"KroneckerDelta.*'x'.*1\.5"),
        (lambda: KroneckerDelta(-0.1, "x"), r"KroneckerDelta.*-0\.1"),
        (lambda: KroneckerDelta(float("nan"), "x"), r"KroneckerDelta.*nan"),
        (lambda: Constant(1.01), r"Constant.*1\.01"),
        (lambda: Constant(-1.0), r"Constant"),
        (lambda: Constant(float("nan")), r"Constant"),
        (lambda: SquareExponential(0.0, "len"), r"SquareExponential.*'len'.*length_scale"),
        (lambda: SquareExponential(-1.0, "len"), r"SquareExponential"),
        (lambda: SquareExponential(float("inf"), "len"), r"SquareExponential"),
        (lambda: SquareExponential(float("nan"), "len"), r"SquareExponential"),
        (lambda: 2.0 * KroneckerDelta(0.5, "x"), r"Constant.*2\.0"),
    ],
)
def test_range_checked_at_construction(build, match):
    with pytest.raises(KernelRangeError, match=match):
        build()


def test_field_name_checked():
    with pytest.raises(TypeError, match="field"):
        KroneckerDelta(0.5, "")
    with pytest.raises(TypeError, match="field"):
        SquareExponential(1.0, 3)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kernel",
    [
        KroneckerDelta(0.0, "x"),  # reaches 0
        Constant(0.0),
        SquareExponential(1.0, "x") * KroneckerDelta(0.0, "y"),  # 0 is reached through the delta
        KroneckerDelta(0.5, "x") + KroneckerDelta(0.5, "y"),  # up to 2
        0.5 * KroneckerDelta(0.0, "x") + 0.5 * KroneckerDelta(0.0, "y"),  # reaches 0
    ],
)
def test_node_kernel_range_rejected(kernel):
    with pytest.raises(KernelRangeError, match=r"node kernel.*\(0, 1\]"):
        check_node_kernel(kernel)
    with pytest.raises(KernelRangeError, match="node kernel"):
        MarginalizedGraphKernel(node_kernel=kernel, backend="cpu")


@pytest.mark.parametrize(
    "kernel",
    [
        KroneckerDelta(0.5, "x"),
        SquareExponential(1.0, "x"),  # (0, 1]: never 0
        SquareExponential(1.0, "x") * KroneckerDelta(0.3, "y"),
        0.5 * SquareExponential(1.0, "x") + 0.5 * KroneckerDelta(0.0, "y"),  # > 0 through the SE term
        Constant(1.0),
    ],
)
def test_node_kernel_range_accepted(kernel):
    assert check_node_kernel(kernel) is kernel


def test_edge_kernel_range():
    for ok in (
        Constant(0.0),
        KroneckerDelta(0.0, "e"),
        SquareExponential(1.0, "e") * KroneckerDelta(0.0, "f"),
    ):
        assert check_edge_kernel(ok) is ok
    bad = KroneckerDelta(0.5, "e") + Constant(0.6)
    with pytest.raises(KernelRangeError, match=r"edge kernel.*\[0, 1\]"):
        check_edge_kernel(bad)
    with pytest.raises(KernelRangeError, match="edge kernel"):
        MarginalizedGraphKernel(edge_kernel=bad, backend="cpu")


def test_non_kernels_rejected():
    with pytest.raises(TypeError, match="node_kernel"):
        check_node_kernel(lambda a, b: 1.0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="edge_kernel"):
        MarginalizedGraphKernel(edge_kernel="delta", backend="cpu")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="not a kernel"):
        Product(KroneckerDelta(0.5, "x"), 3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at least one"):
        Sum()


# ---------------------------------------------------------------------- C expressions
C_KERNELS = [
    Constant(0.3),
    Constant(1.0),
    KroneckerDelta(0.5, "label"),
    KroneckerDelta(0.0, "length"),
    SquareExponential(1.0, "length"),
    SquareExponential(0.3, "label"),
    SquareExponential(1e3, "length"),
    KroneckerDelta(0.5, "label") * SquareExponential(2.0, "length"),
    tensor_product(
        KroneckerDelta(0.25, "label"), KroneckerDelta(0.8, "charge"), SquareExponential(0.7, "length")
    ),
    0.5 * KroneckerDelta(0.2, "label") + 0.5 * SquareExponential(1.5, "length"),
    0.25 * Constant(1.0) + 0.75 * (KroneckerDelta(0.5, "charge") * SquareExponential(1.0, "length")),
]


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not available")
def test_c_expr_compiles_and_matches_numpy(tmp_path):
    n = len(INT_A)
    lines = ["#include <math.h>", "#include <stdio.h>", "#define mgk_ex2 exp2f", "int main(void) {"]
    for name, arr in (("label", INT_A), ("charge", INT_A % 2)):
        lines.append(f"  int a_{name}[{n}] = {{{', '.join(map(str, arr))}}};")
    for name, arr in (("label", INT_B), ("charge", INT_B % 2)):
        lines.append(f"  int b_{name}[{n}] = {{{', '.join(map(str, arr))}}};")
    lines.append(f"  float a_length[{n}] = {{{', '.join(f'{float(v)!r}f' for v in FLT_A)}}};")
    lines.append(f"  float b_length[{n}] = {{{', '.join(f'{float(v)!r}f' for v in FLT_B)}}};")
    lines.append(f"  for (int i = 0; i < {n}; ++i) {{")
    for k in C_KERNELS:
        expr = k.c_expr(lambda f: f"a_{f}[i]", lambda f: f"b_{f}[i]")
        lines.append(f'    printf("%.9g\\n", (double)({expr}));')
    lines += ["  }", "  return 0;", "}"]
    src = tmp_path / "k.c"
    src.write_text("\n".join(lines) + "\n")
    exe = tmp_path / "k"
    subprocess.run(
        ["gcc", "-std=c99", "-Wall", "-Werror", "-o", str(exe), str(src), "-lm"],
        check=True,
        capture_output=True,
        text=True,
    )
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.split()
    got = np.asarray(out, dtype=np.float64).reshape(n, len(C_KERNELS)).T
    for k, row in zip(C_KERNELS, got):
        expect = np.broadcast_to(k(XA, XB), (n,))
        np.testing.assert_allclose(row, expect, rtol=1e-6, atol=1e-6, err_msg=repr(k))


def test_c_expr_literals_are_float():
    expr = SquareExponential(2.0, "x").c_expr(lambda f: "a", lambda f: "b")
    assert expr == "mgk_ex2(-0.18033688011112042f * ((float)(a) - (float)(b)) * ((float)(a) - (float)(b)))"
    assert Constant(1.0).c_expr(str, str) == "1.0f"
    assert Constant(1e-20).c_expr(str, str) == "1e-20f"


@pytest.mark.parametrize("k", C_KERNELS, ids=repr)
def test_gradient_matches_finite_differences(k):
    hp = k.hyperparameters
    grads = k.gradient(XA, XB)
    assert len(grads) == len(hp) == len(k.c_grad(str, str))
    for i, h in enumerate(hp):
        eps = 1e-6 * max(abs(h.value), 1e-3)
        up = [x.value for x in hp]
        dn = list(up)
        up[i] += eps
        dn[i] -= eps
        if dn[i] < 0:  # one-sided at the domain's lower edge
            fd = (k.with_values(up)(XA, XB) - np.broadcast_to(k(XA, XB), (len(INT_A),))) / eps
        elif up[i] > 1 and "length_scale" not in h.name:  # one-sided at the upper edge
            fd = (np.broadcast_to(k(XA, XB), (len(INT_A),)) - k.with_values(dn)(XA, XB)) / eps
        else:
            fd = (k.with_values(up)(XA, XB) - k.with_values(dn)(XA, XB)) / (2 * eps)
        np.testing.assert_allclose(np.broadcast_to(grads[i], fd.shape), fd, rtol=1e-5, atol=1e-7, err_msg=h.name)


@pytest.mark.parametrize("k", C_KERNELS, ids=repr)
def test_structure_is_independent_of_values(k):
    new = [0.5 * h.value if "length_scale" in h.name else 0.1 + 0.25 * h.value for h in k.hyperparameters]
    other = k.with_values(new)
    assert other.structure == k.structure
    assert other.device_values() != k.device_values() or not k.hyperparameters
    assert repr(type(other)) == repr(type(k))


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not available")
def test_c_expr_with_run_time_values_and_c_grad_match_numpy(tmp_path):
    n = len(INT_A)
    lines = ["#include <math.h>", "#include <stdio.h>", "#define mgk_ex2 exp2f", "int main(void) {"]
    for name, arr in (("label", INT_A), ("charge", INT_A % 2)):
        lines.append(f"  int a_{name}[{n}] = {{{', '.join(map(str, arr))}}};")
    for name, arr in (("label", INT_B), ("charge", INT_B % 2)):
        lines.append(f"  int b_{name}[{n}] = {{{', '.join(map(str, arr))}}};")
    lines.append(f"  float a_length[{n}] = {{{', '.join(f'{float(v)!r}f' for v in FLT_A)}}};")
    lines.append(f"  float b_length[{n}] = {{{', '.join(f'{float(v)!r}f' for v in FLT_B)}}};")
    for t, k in enumerate(C_KERNELS):
        vals = ", ".join(f"{v!r}f" for v in k.device_values())
        lines.append(f"  float P{t}[] = {{{vals}}};")
    lines.append(f"  for (int i = 0; i < {n}; ++i) {{")
    for t, k in enumerate(C_KERNELS):
        par = lambda j, t=t: f"P{t}[{j}]"
        for expr in [k.c_expr(lambda f: f"a_{f}[i]", lambda f: f"b_{f}[i]", par)] + k.c_grad(
            lambda f: f"a_{f}[i]", lambda f: f"b_{f}[i]", par
        ):
            lines.append(f'    printf("%.9g\\n", (double)({expr}));')
    lines += ["  }", "  return 0;", "}"]
    src = tmp_path / "k.c"
    src.write_text("\n".join(lines) + "\n")
    exe = tmp_path / "k"
    subprocess.run(["gcc", "-std=c99", "-Wall", "-Werror", "-o", str(exe), str(src), "-lm"], check=True)
    out = np.asarray(subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.split(), float)
    per = sum(1 + len(k.hyperparameters) for k in C_KERNELS)
    got = out.reshape(n, per).T
    row = 0
    for k in C_KERNELS:
        expect = [np.broadcast_to(k(XA, XB), (n,))] + [np.broadcast_to(g, (n,)) for g in k.gradient(XA, XB)]
        for e in expect:
            np.testing.assert_allclose(got[row], e, rtol=2e-5, atol=1e-6, err_msg=repr(k))
            row += 1


# ---------------------------------------------------------------------- RationalQuadratic, vector kernels
_RNG = np.random.default_rng(7)
VEC_A = np.abs(_RNG.normal(size=(5, 3)))
VEC_B = np.abs(_RNG.normal(size=(5, 3)))
VEC_A[2] = 0.0  # a zero vector (cosine similarity 0)
VEC_B[3] = 2.5 * VEC_A[3]  # parallel vectors (cosine similarity 1)
VA = {**XA, "v": VEC_A}
VB = {**XB, "v": VEC_B}

NEW_KERNELS = [
    RationalQuadratic(1.0, 1.0, "length"),
    RationalQuadratic(0.4, 3.0, "length"),
    RationalQuadratic(2.0, 0.2, "label"),
    VectorSquareExponential(1.0, "v", dim=3),
    VectorSquareExponential(0.3, "v", dim=3),
    CosineSimilarity("v", dim=3),
    KroneckerDelta(0.5, "label") * RationalQuadratic(1.5, 0.7, "length") * VectorSquareExponential(2.0, "v", dim=3),
    0.5 * Constant(1.0) + 0.5 * CosineSimilarity("v", dim=3),
    0.5 * CosineSimilarity("v", dim=3) * KroneckerDelta(0.3, "charge") + 0.5 * RationalQuadratic(1.0, 2.0, "length"),
    MinMax(0.6, "v", dim=3),
    0.5 * Constant(1.0) + 0.5 * MinMax(0.3, "v", dim=3) * KroneckerDelta(0.3, "charge"),
]


def _rq(a, b, ls, alpha):
    return (1 + (a - b) ** 2 / (2 * alpha * ls**2)) ** (-alpha)


def test_rational_quadratic_values():
    for ls, alpha in ((1.0, 1.0), (0.4, 3.0), (2.0, 0.2)):
        k = RationalQuadratic(ls, alpha, "length")
        np.testing.assert_allclose(k(XA, XB), _rq(FLT_A, FLT_B, ls, alpha), rtol=1e-14)
    # alpha -> infinity gives the square exponential
    np.testing.assert_allclose(RationalQuadratic(0.8, 1e6, "length")(XA, XB), _se(FLT_A, FLT_B, 0.8), rtol=1e-4)
    assert str(RationalQuadratic(1.0, 1.0, "x").range) == "(0, 1]"
    assert check_node_kernel(RationalQuadratic(1.0, 1.0, "x")) is not None
    assert [h.name for h in RationalQuadratic(1.0, 2.0, "x").hyperparameters] == ["length_scale", "alpha"]
    assert repr(RationalQuadratic(1.0, 2.0, "x")) == "RationalQuadratic(1.0, 2.0, 'x')"


def test_vector_square_exponential_values_and_broadcasting():
    k = VectorSquareExponential(0.7, "v", dim=3)
    d2 = ((VEC_A - VEC_B) ** 2).sum(axis=1)
    np.testing.assert_allclose(k(VA, VB), np.exp(-d2 / (2 * 0.7**2)), rtol=1e-14)
    # the node-pair matrix as the CPU backend asks for it: (n, 1, d) against (1, m, d)
    M = k({"v": VEC_A[:, None]}, {"v": VEC_B[None, :]})
    assert M.shape == (5, 5)
    full = ((VEC_A[:, None, :] - VEC_B[None, :, :]) ** 2).sum(axis=-1)
    np.testing.assert_allclose(M, np.exp(-full / (2 * 0.7**2)), rtol=1e-14)
    # dim 1 equals the scalar SquareExponential
    one = VectorSquareExponential(0.7, "length", dim=1)
    np.testing.assert_allclose(one({"length": FLT_A[:, None]}, {"length": FLT_B[:, None]}), _se(FLT_A, FLT_B, 0.7))
    assert str(k.range) == "(0, 1]"
    assert repr(k) == "VectorSquareExponential(0.7, 'v', dim=3)"


def test_cosine_similarity_values():
    k = CosineSimilarity("v", dim=3)
    got = k(VA, VB)
    dot = (VEC_A * VEC_B).sum(axis=1)
    nrm = np.linalg.norm(VEC_A, axis=1) * np.linalg.norm(VEC_B, axis=1)
    expect = np.where(nrm > 0, dot / np.where(nrm > 0, nrm, 1), 0.0)
    np.testing.assert_allclose(got, expect, rtol=1e-14)
    assert got[2] == 0.0  # zero vector
    assert math.isclose(got[3], 1.0, rel_tol=1e-14)
    assert np.all((got >= 0) & (got <= 1))
    # positive semi-definite on a set of non-negative vectors, zero vectors included
    X = np.vstack([VEC_A, VEC_B])
    G = k({"v": X[:, None]}, {"v": X[None, :]})
    assert np.linalg.eigvalsh(G).min() > -1e-12
    assert (k.range.lo, k.range.hi) == (0.0, 1.0)
    assert k.hyperparameters == () and k.gradient(VA, VB) == [] and k.device_values() == []
    with pytest.raises(KernelRangeError, match="node kernel"):
        check_node_kernel(k)  # can be 0
    assert check_edge_kernel(k) is k
    assert check_node_kernel(0.5 * Constant(1.0) + 0.5 * k).range.lo == 0.5


@pytest.mark.parametrize("k", NEW_KERNELS, ids=repr)
def test_new_kernels_gradient_matches_finite_differences(k):
    hp = k.hyperparameters
    grads = k.gradient(VA, VB)
    assert len(grads) == len(hp) == len(k.c_grad(str, str))
    for i, h in enumerate(hp):
        eps = 1e-6 * abs(h.value)
        up = [x.value for x in hp]
        dn = list(up)
        up[i] += eps
        dn[i] -= eps
        if "length_scale" in h.name or "alpha" in h.name or h.value + eps <= 1:
            fd = (k.with_values(up)(VA, VB) - k.with_values(dn)(VA, VB)) / (2 * eps)
        else:  # a constant or delta at its upper edge 1: one-sided
            fd = (np.broadcast_to(k(VA, VB), (5,)) - k.with_values(dn)(VA, VB)) / eps
        np.testing.assert_allclose(np.broadcast_to(grads[i], fd.shape), fd, rtol=1e-5, atol=1e-8, err_msg=h.name)


@pytest.mark.parametrize("k", NEW_KERNELS, ids=repr)
def test_new_kernels_structure_and_with_values(k):
    hp = k.hyperparameters
    same = k.with_values([h.value for h in hp])
    np.testing.assert_array_equal(same(VA, VB), k(VA, VB))
    new = [0.5 * h.value if ("length_scale" in h.name or "alpha" in h.name) else 0.1 + 0.25 * h.value for h in hp]
    other = k.with_values(new)
    assert other.structure == k.structure
    assert repr(type(other)) == repr(type(k))
    assert len(k.device_values()) == k.n_device_values


def _vec_field(prefix):
    # scalar field f -> a_f[i]; vector component "v[k]" -> a_v[i][k]
    def expr(f):
        name, _, rest = f.partition("[")
        return f"{prefix}_{name}[i]" + (f"[{rest}" if rest else "")

    return expr


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not available")
def test_new_kernels_c_expr_and_c_grad_match_numpy(tmp_path):
    n = len(INT_A)
    lines = ["#include <math.h>", "#include <stdio.h>", "#define mgk_ex2 exp2f", "int main(void) {"]
    for side, src in (("a", VA), ("b", VB)):
        for name in ("label", "charge"):
            lines.append(f"  int {side}_{name}[{n}] = {{{', '.join(map(str, src[name]))}}};")
        lines.append(f"  float {side}_length[{n}] = {{{', '.join(f'{float(v)!r}f' for v in src['length'])}}};")
        rows = ", ".join("{" + ", ".join(f"{float(v)!r}f" for v in r) + "}" for r in src["v"])
        lines.append(f"  float {side}_v[{n}][3] = {{{rows}}};")
    for t, k in enumerate(NEW_KERNELS):
        vals = ", ".join(f"{v!r}f" for v in k.device_values()) or "0.0f"
        lines.append(f"  float P{t}[] = {{{vals}}};")
        lines.append(f"  (void)P{t};")
    lines.append(f"  for (int i = 0; i < {n}; ++i) {{")
    lhs, rhs = _vec_field("a"), _vec_field("b")
    for t, k in enumerate(NEW_KERNELS):
        par = lambda j, t=t: f"P{t}[{j}]"
        for expr in [k.c_expr(lhs, rhs, par), k.c_expr(lhs, rhs)] + k.c_grad(lhs, rhs, par):
            lines.append(f'    printf("%.9g\\n", (double)({expr}));')
    lines += ["  }", "  return 0;", "}"]
    src = tmp_path / "k.c"
    src.write_text("\n".join(lines) + "\n")
    exe = tmp_path / "k"
    subprocess.run(["gcc", "-std=c99", "-Wall", "-Werror", "-o", str(exe), str(src), "-lm"], check=True)
    out = np.asarray(subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.split(), float)
    per = sum(2 + len(k.hyperparameters) for k in NEW_KERNELS)
    got = out.reshape(n, per).T
    row = 0
    for k in NEW_KERNELS:
        value = np.broadcast_to(k(VA, VB), (n,))
        expect = [value, value] + [np.broadcast_to(g, (n,)) for g in k.gradient(VA, VB)]
        for e in expect:
            np.testing.assert_allclose(got[row], e, rtol=2e-5, atol=1e-6, err_msg=repr(k))
            row += 1


def test_c_fields_and_vector_dims():
    k = KroneckerDelta(0.5, "element") * VectorSquareExponential(1.0, "xyz", dim=3) * CosineSimilarity("fp", dim=2)
    assert vector_dims(k) == {"xyz": 3, "fp": 2}
    assert c_fields(k) == ("element", "xyz[0]", "xyz[1]", "xyz[2]", "fp[0]", "fp[1]")
    assert vector_component("xyz", 1) == "xyz[1]"
    # every name the C expressions ask for is listed
    asked = set()
    k.c_expr(lambda f: asked.add(f) or "a", lambda f: asked.add(f) or "b")
    for g in k.c_grad(lambda f: asked.add(f) or "a", lambda f: asked.add(f) or "b"):
        assert g
    assert asked == set(c_fields(k))
    assert c_fields(KroneckerDelta(0.5, "x")) == ("x",) and vector_dims(KroneckerDelta(0.5, "x")) == {}
    with pytest.raises(ValueError, match="dimensions 3 and 2"):
        vector_dims(VectorSquareExponential(1.0, "v", dim=3) * CosineSimilarity("v", dim=2))
    with pytest.raises(ValueError, match="both as a vector"):
        c_fields(VectorSquareExponential(1.0, "v", dim=3) * SquareExponential(1.0, "v"))


@pytest.mark.parametrize(
    "build, match",
    [
        (lambda: RationalQuadratic(0.0, 1.0, "x"), r"RationalQuadratic.*'x'.*length_scale"),
        (lambda: RationalQuadratic(1.0, 0.0, "x"), r"RationalQuadratic.*alpha"),
        (lambda: RationalQuadratic(1.0, -2.0, "x"), r"RationalQuadratic.*alpha"),
        (lambda: RationalQuadratic(1.0, float("nan"), "x"), r"RationalQuadratic"),
        (lambda: RationalQuadratic(float("inf"), 1.0, "x"), r"RationalQuadratic"),
        (lambda: RationalQuadratic(1.0, 1e7, "x"), r"RationalQuadratic.*alpha"),
        (lambda: VectorSquareExponential(0.0, "v", dim=3), r"VectorSquareExponential.*'v'.*length_scale"),
        (lambda: VectorSquareExponential(float("nan"), "v", dim=3), r"VectorSquareExponential"),
        (lambda: VectorSquareExponential(-1.0, "v", dim=3), r"VectorSquareExponential"),
    ],
)
def test_new_kernels_bad_hyperparameters(build, match):
    with pytest.raises(KernelRangeError, match=match):
        build()


def test_new_kernels_bad_arguments():
    with pytest.raises(TypeError, match="field"):
        RationalQuadratic(1.0, 1.0, "")
    with pytest.raises(TypeError, match="dim"):
        VectorSquareExponential(1.0, "v", dim=0)
    with pytest.raises(TypeError, match="dim"):
        CosineSimilarity("v", dim=2.0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="real number"):
        RationalQuadratic(1.0, "2", "x")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="bounds"):
        RationalQuadratic(1.0, 1.0, "x", alpha_bounds=(2.0, 1.0))
    assert RationalQuadratic(1.0, 1.0, "x", alpha_bounds="fixed").hyperparameters[1].fixed
    with pytest.raises(ValueError, match="no hyperparameters"):
        CosineSimilarity("v", dim=2).with_values([0.5])


@pytest.mark.parametrize(
    "kernel", [VectorSquareExponential(1.0, "v", dim=2), CosineSimilarity("v", dim=2), MinMax(1.0, "v", dim=2)],
    ids=repr,
)
def test_vector_fields_validated_when_evaluated(kernel):
    good = {"v": np.array([[1.0, 2.0], [0.5, 0.0]])}
    assert kernel(good, good).shape == (2,)
    with pytest.raises(GraphError, match=r"'v'.*ragged"):
        kernel({"v": [[1.0, 2.0], [3.0]]}, good)
    with pytest.raises(GraphError, match=r"'v'.*numeric"):
        kernel({"v": [["a", "b"], ["c", "d"]]}, good)
    with pytest.raises(GraphError, match=r"'v'.*2 components.*\(2, 3\)"):
        kernel({"v": np.ones((2, 3))}, good)
    with pytest.raises(GraphError, match=r"'v'.*2 components"):
        kernel({"v": np.float64(1.0)}, good)
    with pytest.raises(GraphError, match=r"'v'.*NaN"):
        kernel({"v": np.array([[np.nan, 1.0], [0.0, 0.0]])}, good)


def test_cosine_similarity_rejects_negative_entries():
    with pytest.raises(GraphError, match=r"'v'.*negative"):
        CosineSimilarity("v", dim=2)({"v": np.array([[1.0, -0.5]])}, {"v": np.array([[1.0, 0.5]])})


def test_rational_quadratic_in_the_graph_kernel():
    """The CPU backend evaluates the new scalar kernel through numpy broadcasting."""
    import networkx as nx

    from mgkflow import Graph

    gs = []
    for n in (4, 5, 6):
        G = nx.cycle_graph(n)
        for u, v in G.edges:
            G.edges[u, v]["length"] = 1.0 + 0.25 * ((u + v) % 3)
        gs.append(Graph.from_networkx(G, edge_labels=["length"]))
    rq = RationalQuadratic(0.8, 1.5, "length")
    K = MarginalizedGraphKernel(edge_kernel=rq, q=0.1, backend="cpu")(gs)
    assert np.all(np.isfinite(K)) and np.allclose(K, K.T)
    # a huge alpha is the square exponential, to the same accuracy as the base kernels
    K_rq = MarginalizedGraphKernel(edge_kernel=RationalQuadratic(0.8, 1e6, "length"), q=0.1, backend="cpu")(gs)
    K_se = MarginalizedGraphKernel(edge_kernel=SquareExponential(0.8, "length"), q=0.1, backend="cpu")(gs)
    np.testing.assert_allclose(K_rq, K_se, rtol=1e-5)


def test_vector_kernels_in_the_graph_kernel():
    """With Graph accepting (n, d) label fields, the CPU backend evaluates the vector kernels."""
    import networkx as nx

    from mgkflow import Graph

    rng = np.random.default_rng(3)
    try:
        gs = [
            Graph(nx.to_numpy_array(nx.cycle_graph(n)), node_labels={"xyz": rng.random((n, 3)), "el": np.arange(n) % 2})
            for n in (4, 5, 6)
        ]
    except GraphError:
        pytest.skip("this Graph does not accept vector label fields yet")
    vse = VectorSquareExponential(0.8, "xyz", dim=3)
    K = MarginalizedGraphKernel(node_kernel=KroneckerDelta(0.5, "el") * vse, q=0.1, backend="cpu")(gs, normalize=True)
    assert np.allclose(np.diag(K), 1.0) and np.all((K > 0) & (K <= 1 + 1e-12))
    # one graph against itself with the component fields as separate scalar kernels: the same value
    g = gs[0]
    xyz = g.node_labels["xyz"]
    labels = {f"c{k}": xyz[:, k] for k in range(3)} | {"el": np.arange(4) % 2}
    split = Graph(nx.to_numpy_array(nx.cycle_graph(4)), node_labels=labels)
    prod = KroneckerDelta(0.5, "el")
    for k in range(3):
        prod = prod * SquareExponential(0.8, f"c{k}")
    a = MarginalizedGraphKernel(node_kernel=KroneckerDelta(0.5, "el") * vse, q=0.1, backend="cpu")([g])
    b = MarginalizedGraphKernel(node_kernel=prod, q=0.1, backend="cpu")([split])
    np.testing.assert_allclose(a, b, rtol=1e-12)
    cos = 0.5 * Constant(1.0) + 0.5 * CosineSimilarity("xyz", dim=3)
    K = MarginalizedGraphKernel(node_kernel=cos, q=0.1, backend="cpu")(gs)
    assert np.all(np.isfinite(K)) and np.allclose(K, K.T)
