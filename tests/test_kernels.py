"""Base kernels: numpy values, composition, range checks and the C expressions."""

from __future__ import annotations

import math
import shutil
import subprocess

import numpy as np
import pytest

from mgkflow import KernelRangeError, MarginalizedGraphKernel
from mgkflow.kernels import (
    Constant,
    KroneckerDelta,
    Product,
    SquareExponential,
    Sum,
    check_edge_kernel,
    check_node_kernel,
    tensor_product,
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
    lines = ["#include <math.h>", "#include <stdio.h>", "int main(void) {"]
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
    assert expr == "exp2f(-0.18033688011112042f * ((float)(a) - (float)(b)) * ((float)(a) - (float)(b)))"
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
    lines = ["#include <math.h>", "#include <stdio.h>", "int main(void) {"]
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
