"""Base kernels on node and edge labels.

Each kernel has one definition that gives both a vectorized numpy evaluation
(``kernel(x, y)`` on mappings of label arrays, with numpy broadcasting) and a C
expression for the GPU stage (``kernel.c_expr(lhs, rhs)``). Ranges are checked
when a kernel is built and again when it is used as a node kernel (values must
lie in (0, 1]) or an edge kernel (values in [0, 1]).

Hyperparameters are run-time values, never part of the generated code. Each kernel
declares them as :class:`Hyperparameter` records (name, value, bounds, fixed or not);
``kernel.hyperparameters`` lists them flattened in a fixed order (children of products and
sums in turn), ``kernel.with_values(values)`` returns the same structure with new values,
``kernel.gradient(x, y)`` gives dk/dh for every hyperparameter h in that order, and
``kernel.device_values()`` the float values that the C expressions read through ``par``:
``kernel.c_expr(lhs, rhs, par)`` and ``kernel.c_grad(lhs, rhs, par)`` (one expression per
hyperparameter) write ``par(i)`` for the i-th device value. ``kernel.structure`` is a
value-free key of the kernel's structure (what code generation depends on). Without
``par``, ``c_expr`` inlines the values as float literals.

Examples
--------
>>> import numpy as np
>>> k = KroneckerDelta(0.5, "label") * SquareExponential(2.0, "x")
>>> k({"label": np.array([1, 2]), "x": np.array([0.0, 0.0])}, {"label": np.array([1]), "x": np.array([2.0])})
array([0.60653066, 0.30326533])
>>> k.c_expr(lambda f: "a_" + f, lambda f: "b_" + f).split(" * exp2f")[0]
'((a_label == b_label) ? 1.0f : 0.5f)'
>>> [h.name for h in k.hyperparameters], k.device_values()[0]
(['0.h', '1.length_scale'], 0.5)
>>> k.c_expr(lambda f: "a_" + f, lambda f: "b_" + f, lambda i: f"P[{i}]").split(" * exp2f")[0]
'((a_label == b_label) ? 1.0f : P[0])'
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Union

import numpy as np

from .errors import KernelRangeError

__all__ = [
    "Hyperparameter",
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
#: ``par(i)`` -> C expression of the i-th device value of a kernel.
ParExpr = Callable[[int], str]

Bounds = Union[tuple[float, float], str]


@dataclass(frozen=True)
class Hyperparameter:
    """One hyperparameter of a base kernel.

    Attributes
    ----------
    name : str
        Its name, e.g. ``"h"`` or ``"length_scale"`` (prefixed with the child's position in
        products and sums: ``"0.h"``).
    value : float
        Its current value.
    bounds : (float, float) or "fixed"
        Search bounds (positive, for log-space optimizers); ``"fixed"`` keeps it out of θ.
    """

    name: str
    value: float
    bounds: Bounds

    @property
    def fixed(self) -> bool:
        return isinstance(self.bounds, str) and self.bounds == "fixed"

    def renamed(self, prefix: str) -> Hyperparameter:
        return Hyperparameter(f"{prefix}.{self.name}", self.value, self.bounds)


def _check_bounds(bounds: Any, what: str, lo: float, hi: float) -> Bounds:
    """Validate ``bounds``: "fixed" or (a, b) with lo <= a <= b <= hi, a > 0."""
    if isinstance(bounds, str):
        if bounds != "fixed":
            raise ValueError(f"{what}: bounds must be a (low, high) pair or 'fixed', got {bounds!r}")
        return "fixed"
    try:
        a, b = (float(v) for v in bounds)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{what}: bounds must be a (low, high) pair or 'fixed', got {bounds!r}") from exc
    if not (0 < a <= b and math.isfinite(b) and lo <= a and b <= hi):
        raise ValueError(f"{what}: bounds must satisfy 0 < low <= high within [{lo:g}, {hi:g}], got ({a}, {b})")
    return (a, b)


def _as_float(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise TypeError(f"{what} must be a real number, got {value!r}")
    try:
        v = float(value)
    except OverflowError as exc:
        raise KernelRangeError(f"{what} is too large for a float: {value!r}") from exc
    if not math.isfinite(v):
        raise KernelRangeError(f"{what} must be finite, got {v}")
    return v


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

    def gradient(self, x: Mapping[str, np.ndarray], y: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        """dk/dh for every hyperparameter h (order of :attr:`hyperparameters`), broadcast like the value."""
        raise NotImplementedError

    def c_expr(self, lhs: FieldExpr, rhs: FieldExpr, par: ParExpr | None = None) -> str:
        """C (float) expression; ``lhs(f)``/``rhs(f)`` give the C expression of field ``f``,
        ``par(i)`` that of device value ``i`` (literal values when ``par`` is None)."""
        raise NotImplementedError

    def c_grad(self, lhs: FieldExpr, rhs: FieldExpr, par: ParExpr | None = None) -> list[str]:
        """C (float) expressions of dk/dh, one per hyperparameter (see :meth:`c_expr`)."""
        raise NotImplementedError

    @property
    def hyperparameters(self) -> tuple[Hyperparameter, ...]:
        """The kernel's hyperparameters, flattened in a fixed order."""
        raise NotImplementedError

    def with_values(self, values: Any) -> BaseKernel:
        """The same kernel (fields, bounds) with new hyperparameter values, in the order of
        :attr:`hyperparameters`."""
        raise NotImplementedError

    def device_values(self) -> list[float]:
        """The values the C expressions read as ``par(0)``, ``par(1)``, ..."""
        raise NotImplementedError

    @property
    def n_device_values(self) -> int:
        return len(self.device_values())

    @property
    def structure(self) -> str:
        """A key of the kernel's structure (kernels, fields), independent of the values."""
        return self.c_expr(lambda f: f"<{f}>", lambda f: f"<{f}>'", lambda i: "$" + str(i))

    @property
    def range(self) -> Range:
        """Bounds of the kernel's values."""
        raise NotImplementedError

    def _par(self, par: ParExpr | None) -> ParExpr:
        if par is not None:
            return par
        vals = self.device_values()
        return lambda i: _c_float(vals[i])

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

    def __init__(self, c: float = 1.0, c_bounds: Bounds = "fixed") -> None:
        c = _as_float(c, "Constant(c)")
        if not (0.0 <= c <= 1.0):
            raise KernelRangeError(f"Constant(c) needs 0 <= c <= 1, got c={c}")
        if 0.0 < c < 1e-30:
            raise KernelRangeError(f"Constant(c) must be 0 or at least 1e-30, got c={c}")
        self.c = c
        self.c_bounds = _check_bounds(c_bounds, "Constant(c)", 0.0, 1.0)
        self.fields = ()

    def __call__(self, x, y):
        return np.asarray(self.c, dtype=np.float64)

    def gradient(self, x, y):
        return [np.asarray(1.0)]

    def c_expr(self, lhs, rhs, par=None):
        return self._par(par)(0)

    def c_grad(self, lhs, rhs, par=None):
        return ["1.0f"]

    @property
    def hyperparameters(self):
        return (Hyperparameter("c", self.c, self.c_bounds),)

    def with_values(self, values):
        (c,) = values
        return Constant(float(c), self.c_bounds)

    def device_values(self):
        return [self.c]

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

    def __init__(self, h: float, field: str, h_bounds: Bounds = (1e-3, 1.0)) -> None:
        h = _as_float(h, f"KroneckerDelta(h, {field!r})")
        if not (0.0 <= h <= 1.0):
            raise KernelRangeError(f"KroneckerDelta(h, '{field}') needs 0 <= h <= 1, got h={h}")
        if 0.0 < h < 1e-30:
            raise KernelRangeError(f"KroneckerDelta(h, '{field}') needs h = 0 or h >= 1e-30, got h={h}")
        if not isinstance(field, str) or not field:
            raise TypeError("KroneckerDelta: field must be a non-empty label field name")
        self.h = h
        self.field = field
        self.h_bounds = _check_bounds(h_bounds, f"KroneckerDelta(h, {field!r})", 0.0, 1.0)
        self.fields = (field,)

    def __call__(self, x, y):
        return np.where(np.asarray(x[self.field]) == np.asarray(y[self.field]), 1.0, self.h)

    def gradient(self, x, y):
        return [np.where(np.asarray(x[self.field]) == np.asarray(y[self.field]), 0.0, 1.0)]

    def c_expr(self, lhs, rhs, par=None):
        return f"(({lhs(self.field)} == {rhs(self.field)}) ? 1.0f : {self._par(par)(0)})"

    def c_grad(self, lhs, rhs, par=None):
        return [f"(({lhs(self.field)} == {rhs(self.field)}) ? 0.0f : 1.0f)"]

    @property
    def hyperparameters(self):
        return (Hyperparameter("h", self.h, self.h_bounds),)

    def with_values(self, values):
        (h,) = values
        return KroneckerDelta(float(h), self.field, self.h_bounds)

    def device_values(self):
        return [self.h]

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

    #: Length scales are kept where float32 on the device can represent 1/l^3 and l^2.
    LENGTH_SCALE_RANGE = (1e-6, 1e6)

    def __init__(self, length_scale: float, field: str, length_scale_bounds: Bounds = (1e-2, 1e2)) -> None:
        ls = _as_float(length_scale, f"SquareExponential(length_scale, {field!r})")
        lo, hi = self.LENGTH_SCALE_RANGE
        if not (lo <= ls <= hi):
            raise KernelRangeError(
                f"SquareExponential(length_scale, '{field}') needs {lo:g} <= length_scale <= {hi:g}, got {ls}"
            )
        if not isinstance(field, str) or not field:
            raise TypeError("SquareExponential: field must be a non-empty label field name")
        self.length_scale = ls
        self.field = field
        self.length_scale_bounds = _check_bounds(
            length_scale_bounds, f"SquareExponential(length_scale, {field!r})", lo, hi
        )
        self.fields = (field,)

    def _d2(self, x, y):
        d = np.asarray(x[self.field], dtype=np.float64) - np.asarray(y[self.field], dtype=np.float64)
        return d * d

    def __call__(self, x, y):
        return np.exp(-0.5 * self._d2(x, y) / (self.length_scale**2))

    def gradient(self, x, y):
        d2 = self._d2(x, y)
        return [np.exp(-0.5 * d2 / self.length_scale**2) * d2 / self.length_scale**3]

    def _diff(self, lhs, rhs):
        a, b = f"(float)({lhs(self.field)})", f"(float)({rhs(self.field)})"
        return f"({a} - {b}) * ({a} - {b})"

    def c_expr(self, lhs, rhs, par=None):
        # exp(-d^2 / (2 l^2)) = exp2(g d^2) with g = -log2(e) / (2 l^2) (device value 0): one
        # MUFU.EX2 instead of expf's range reduction; the float32 rounding of the argument is
        # the same either way.
        return f"exp2f({self._par(par)(0)} * {self._diff(lhs, rhs)})"

    def c_grad(self, lhs, rhs, par=None):
        # dk/dl = k d^2 / l^3 (device value 1 = 1 / l^3)
        return [f"({self.c_expr(lhs, rhs, par)} * {self._diff(lhs, rhs)} * {self._par(par)(1)})"]

    @property
    def hyperparameters(self):
        return (Hyperparameter("length_scale", self.length_scale, self.length_scale_bounds),)

    def with_values(self, values):
        (ls,) = values
        return SquareExponential(float(ls), self.field, self.length_scale_bounds)

    def device_values(self):
        return [-0.5 * math.log2(math.e) / self.length_scale**2, 1.0 / self.length_scale**3]

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

    def gradient(self, x, y):
        vals = [k(x, y) for k in self.kernels]
        out = []
        for i, k in enumerate(self.kernels):
            rest = np.asarray(1.0)
            for j, v in enumerate(vals):
                if j != i:
                    rest = rest * v
            out.extend(g * rest for g in k.gradient(x, y))
        return out

    def c_expr(self, lhs, rhs, par=None):
        return " * ".join(k.c_expr(lhs, rhs, self._child_par(par, i)) for i, k in enumerate(self.kernels))

    def c_grad(self, lhs, rhs, par=None):
        vals = [k.c_expr(lhs, rhs, self._child_par(par, i)) for i, k in enumerate(self.kernels)]
        out = []
        for i, k in enumerate(self.kernels):
            rest = [v for j, v in enumerate(vals) if j != i]
            out.extend(" * ".join([f"({g})", *rest]) for g in k.c_grad(lhs, rhs, self._child_par(par, i)))
        return out

    def _offsets(self) -> list[int]:
        out, o = [], 0
        for k in self.kernels:
            out.append(o)
            o += k.n_device_values
        return out

    def _child_par(self, par, i):
        base = self._par(par)
        off = self._offsets()[i]
        return lambda j: base(off + j)

    @property
    def hyperparameters(self):
        return tuple(h.renamed(str(i)) for i, k in enumerate(self.kernels) for h in k.hyperparameters)

    def with_values(self, values):
        values = list(values)
        if len(values) != len(self.hyperparameters):
            raise ValueError(f"{self!r} has {len(self.hyperparameters)} hyperparameters, got {len(values)} values")
        out, o = [], 0
        for k in self.kernels:
            n = len(k.hyperparameters)
            out.append(k.with_values(values[o : o + n]))
            o += n
        return type(self)(*out)

    def device_values(self):
        return [v for k in self.kernels for v in k.device_values()]

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

    def gradient(self, x, y):
        return [g for k in self.kernels for g in k.gradient(x, y)]

    def c_expr(self, lhs, rhs, par=None):
        return "(" + " + ".join(k.c_expr(lhs, rhs, self._child_par(par, i)) for i, k in enumerate(self.kernels)) + ")"

    def c_grad(self, lhs, rhs, par=None):
        return [g for i, k in enumerate(self.kernels) for g in k.c_grad(lhs, rhs, self._child_par(par, i))]

    def _offsets(self) -> list[int]:
        out, o = [], 0
        for k in self.kernels:
            out.append(o)
            o += k.n_device_values
        return out

    def _child_par(self, par, i):
        base = self._par(par)
        off = self._offsets()[i]
        return lambda j: base(off + j)

    @property
    def hyperparameters(self):
        return tuple(h.renamed(str(i)) for i, k in enumerate(self.kernels) for h in k.hyperparameters)

    def with_values(self, values):
        values = list(values)
        if len(values) != len(self.hyperparameters):
            raise ValueError(f"{self!r} has {len(self.hyperparameters)} hyperparameters, got {len(values)} values")
        out, o = [], 0
        for k in self.kernels:
            n = len(k.hyperparameters)
            out.append(k.with_values(values[o : o + n]))
            o += n
        return type(self)(*out)

    def device_values(self):
        return [v for k in self.kernels for v in k.device_values()]

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
