"""Base kernels on node and edge labels.

Each kernel has one definition that gives both a vectorized numpy evaluation
(``kernel(x, y)`` on mappings of label arrays, with numpy broadcasting) and a C
expression for the GPU stage (``kernel.c_expr(lhs, rhs)``). Ranges are checked
when a kernel is built and again when it is used as a node kernel (values must
lie in (0, 1]) or an edge kernel (values in [0, 1]).

Examples
--------
>>> import numpy as np
>>> k = KroneckerDelta(0.5, "label") * SquareExponential(2.0, "x")
>>> k({"label": np.array([1, 2]), "x": np.array([0.0, 0.0])}, {"label": np.array([1]), "x": np.array([2.0])})
array([0.60653066, 0.30326533])
>>> k.c_expr(lambda f: "a_" + f, lambda f: "b_" + f).split(" * exp2f")[0]
'((a_label == b_label) ? 1.0f : 0.5f)'
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from .errors import KernelRangeError

__all__ = [
    "BaseKernel",
    "Constant",
    "KroneckerDelta",
    "SquareExponential",
    "Product",
    "Sum",
    "tensor_product",
    "check_node_kernel",
    "check_edge_kernel",
]

FieldExpr = Callable[[str], str]


def _c_float(v: float) -> str:
    s = repr(float(v))
    if "e" not in s and "." not in s:
        s += ".0"
    return s + "f"


@dataclass(frozen=True)
class Range:
    """Bounds of a kernel's values: ``lo`` (open if ``lo_open``) to ``hi`` (closed)."""

    lo: float
    hi: float
    lo_open: bool = False

    def __mul__(self, other: Range) -> Range:
        lo = self.lo * other.lo
        # 0 is reached when either factor can be exactly 0 (the other is finite).
        reached = (self.lo == 0 and not self.lo_open) or (other.lo == 0 and not other.lo_open)
        return Range(lo, self.hi * other.hi, lo_open=lo == 0 and not reached)

    def __add__(self, other: Range) -> Range:
        lo = self.lo + other.lo
        # a sum of non-negative terms is 0 only when every term can be 0
        return Range(lo, self.hi + other.hi, lo_open=(self.lo_open or other.lo_open) and lo == 0)

    def __str__(self) -> str:
        return f"{'(' if self.lo_open else '['}{self.lo:g}, {self.hi:g}]"


class BaseKernel:
    """A positive semi-definite kernel on one or more label fields."""

    #: Label fields the kernel reads.
    fields: tuple[str, ...] = ()

    def __call__(self, x: Mapping[str, np.ndarray], y: Mapping[str, np.ndarray]) -> np.ndarray:
        """Evaluate on label arrays (numpy broadcasting between ``x`` and ``y``)."""
        raise NotImplementedError

    def c_expr(self, lhs: FieldExpr, rhs: FieldExpr) -> str:
        """C (float) expression; ``lhs(f)``/``rhs(f)`` give the C expression of field ``f``."""
        raise NotImplementedError

    @property
    def range(self) -> Range:
        """Bounds of the kernel's values."""
        raise NotImplementedError

    def __mul__(self, other: BaseKernel | float) -> BaseKernel:
        if isinstance(other, int | float):
            other = Constant(float(other))
        if not isinstance(other, BaseKernel):
            return NotImplemented
        return Product(self, other)

    __rmul__ = __mul__

    def __add__(self, other: BaseKernel) -> BaseKernel:
        if not isinstance(other, BaseKernel):
            return NotImplemented
        return Sum(self, other)


class Constant(BaseKernel):
    """k(a, b) = c, reading no label field (the unlabeled case uses ``Constant(1.0)``).

    Parameters
    ----------
    c : float
        The constant, in [0, 1] (0 is only valid as an edge kernel).

    Examples
    --------
    >>> Constant(1.0)({}, {})
    array(1.)
    """

    def __init__(self, c: float = 1.0) -> None:
        c = float(c)
        if not (0.0 <= c <= 1.0):
            raise KernelRangeError(f"Constant(c) needs 0 <= c <= 1, got c={c}")
        self.c = c
        self.fields = ()

    def __call__(self, x, y):
        return np.asarray(self.c, dtype=np.float64)

    def c_expr(self, lhs, rhs):
        return _c_float(self.c)

    @property
    def range(self):
        return Range(self.c, self.c)

    def __repr__(self):
        return f"Constant({self.c!r})"


class KroneckerDelta(BaseKernel):
    """k(a, b) = 1 if a == b else h, on label field ``field``.

    Examples
    --------
    >>> import numpy as np
    >>> KroneckerDelta(0.5, "label")({"label": np.array([1, 2])}, {"label": np.array([1, 1])})
    array([1. , 0.5])
    """

    def __init__(self, h: float, field: str) -> None:
        h = float(h)
        if not (0.0 <= h <= 1.0):
            raise KernelRangeError(f"KroneckerDelta(h, '{field}') needs 0 <= h <= 1, got h={h}")
        if not isinstance(field, str) or not field:
            raise TypeError("KroneckerDelta: field must be a non-empty label field name")
        self.h = h
        self.field = field
        self.fields = (field,)

    def __call__(self, x, y):
        return np.where(np.asarray(x[self.field]) == np.asarray(y[self.field]), 1.0, self.h)

    def c_expr(self, lhs, rhs):
        return f"(({lhs(self.field)} == {rhs(self.field)}) ? 1.0f : {_c_float(self.h)})"

    @property
    def range(self):
        return Range(self.h, 1.0)

    def __repr__(self):
        return f"KroneckerDelta({self.h!r}, {self.field!r})"


class SquareExponential(BaseKernel):
    """k(a, b) = exp(-(a - b)^2 / (2 l^2)) on the numeric label field ``field``.

    Examples
    --------
    >>> import numpy as np
    >>> SquareExponential(1.0, "length")({"length": np.array([1.0])}, {"length": np.array([2.0])})
    array([0.60653066])
    """

    def __init__(self, length_scale: float, field: str) -> None:
        ls = float(length_scale)
        if not (ls > 0 and math.isfinite(ls)):
            raise KernelRangeError(
                f"SquareExponential(length_scale, '{field}') needs a finite length_scale > 0, got {ls}"
            )
        if not isinstance(field, str) or not field:
            raise TypeError("SquareExponential: field must be a non-empty label field name")
        self.length_scale = ls
        self.field = field
        self.fields = (field,)

    def __call__(self, x, y):
        d = np.asarray(x[self.field], dtype=np.float64) - np.asarray(y[self.field], dtype=np.float64)
        return np.exp(-0.5 * d * d / (self.length_scale**2))

    def c_expr(self, lhs, rhs):
        # exp(-d^2 / (2 l^2)) = exp2(g d^2) with g = -log2(e) / (2 l^2): one MUFU.EX2 instead of
        # expf's range reduction; the float32 rounding of the argument is the same either way.
        a, b = f"(float)({lhs(self.field)})", f"(float)({rhs(self.field)})"
        g = _c_float(-0.5 * math.log2(math.e) / self.length_scale**2)
        return f"exp2f({g} * ({a} - {b}) * ({a} - {b}))"

    @property
    def range(self):
        return Range(0.0, 1.0, lo_open=True)

    def __repr__(self):
        return f"SquareExponential({self.length_scale!r}, {self.field!r})"


class Product(BaseKernel):
    """Tensor product of kernels: k(a, b) = k1(a, b) * k2(a, b) * ...

    Usually built with ``*``: ``KroneckerDelta(0.5, "element") * KroneckerDelta(0.5, "charge")``.
    """

    def __init__(self, *kernels: BaseKernel) -> None:
        flat: list[BaseKernel] = []
        for k in kernels:
            if not isinstance(k, BaseKernel):
                raise TypeError(f"Product: {k!r} is not a kernel")
            flat.extend(k.kernels if isinstance(k, Product) else [k])
        if not flat:
            raise ValueError("Product needs at least one kernel")
        self.kernels = tuple(flat)
        self.fields = tuple(dict.fromkeys(f for k in flat for f in k.fields))

    def __call__(self, x, y):
        out = self.kernels[0](x, y)
        for k in self.kernels[1:]:
            out = out * k(x, y)
        return out

    def c_expr(self, lhs, rhs):
        return " * ".join(k.c_expr(lhs, rhs) for k in self.kernels)

    @property
    def range(self):
        r = self.kernels[0].range
        for k in self.kernels[1:]:
            r = r * k.range
        return r

    def __repr__(self):
        return " * ".join(repr(k) for k in self.kernels)


class Sum(BaseKernel):
    """Sum of kernels. Valid for the graph kernel only where the total stays in range,
    e.g. ``0.5 * k1 + 0.5 * k2``."""

    def __init__(self, *kernels: BaseKernel) -> None:
        flat: list[BaseKernel] = []
        for k in kernels:
            if not isinstance(k, BaseKernel):
                raise TypeError(f"Sum: {k!r} is not a kernel")
            flat.extend(k.kernels if isinstance(k, Sum) else [k])
        if not flat:
            raise ValueError("Sum needs at least one kernel")
        self.kernels = tuple(flat)
        self.fields = tuple(dict.fromkeys(f for k in flat for f in k.fields))

    def __call__(self, x, y):
        out = self.kernels[0](x, y)
        for k in self.kernels[1:]:
            out = out + k(x, y)
        return out

    def c_expr(self, lhs, rhs):
        return "(" + " + ".join(k.c_expr(lhs, rhs) for k in self.kernels) + ")"

    @property
    def range(self):
        r = self.kernels[0].range
        for k in self.kernels[1:]:
            r = r + k.range
        return r

    def __repr__(self):
        return "(" + " + ".join(repr(k) for k in self.kernels) + ")"


def tensor_product(*kernels: BaseKernel) -> Product:
    """Product kernel over several label fields (same as chaining ``*``).

    Examples
    --------
    >>> tensor_product(KroneckerDelta(0.5, "element"), KroneckerDelta(0.8, "charge")).fields
    ('element', 'charge')
    """
    return Product(*kernels)


def check_node_kernel(kernel: BaseKernel) -> BaseKernel:
    """Raise :class:`KernelRangeError` unless the kernel's values lie in (0, 1]."""
    if not isinstance(kernel, BaseKernel):
        raise TypeError(f"node_kernel must be a kernel from mgkflow.kernels, got {kernel!r}")
    r = kernel.range
    if r.hi > 1.0 or r.lo < 0.0 or (r.lo == 0.0 and not r.lo_open):
        raise KernelRangeError(
            f"node kernel {kernel!r} takes values in {r}; the marginalized graph kernel "
            "needs node kernel values in (0, 1]"
        )
    return kernel


def check_edge_kernel(kernel: BaseKernel) -> BaseKernel:
    """Raise :class:`KernelRangeError` unless the kernel's values lie in [0, 1]."""
    if not isinstance(kernel, BaseKernel):
        raise TypeError(f"edge_kernel must be a kernel from mgkflow.kernels, got {kernel!r}")
    r = kernel.range
    if r.hi > 1.0 or r.lo < 0.0:
        raise KernelRangeError(
            f"edge kernel {kernel!r} takes values in {r}; the marginalized graph kernel "
            "needs edge kernel values in [0, 1]"
        )
    return kernel
